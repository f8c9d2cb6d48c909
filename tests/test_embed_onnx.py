"""The onnx runtime: the packaged model exported once to int8 ONNX, close to the PyTorch model."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from noteloom.embedders import Embedder, OnnxEmbedder, default_cache_dir, local_embedder
from noteloom.errors import ConfigError
from semantic_support import SENTENCES, local_model

pytest.importorskip("onnxruntime")

QUERIES = {
    "my herbs are drooping": 0,
    "when does the Porto train depart": 1,
    "how often do we save a copy of the data": 2,
    "bread making steps": 3,
}


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(scope="module")
def onnx(tmp_path_factory: pytest.TempPathFactory) -> OnnxEmbedder:
    embedder = OnnxEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    assert not embedder.prepared
    embedder.load()
    return embedder


@pytest.mark.slow
def test_the_onnx_vectors_are_close_to_the_pytorch_models_and_rank_alike(onnx: OnnxEmbedder) -> None:
    assert isinstance(onnx, Embedder)
    assert onnx.dimensions == 384 and onnx.prepared
    reference = local_model().embed_documents(SENTENCES)
    vectors = onnx.embed_documents(SENTENCES)
    for ours, theirs in zip(vectors, reference, strict=True):
        assert abs(sum(x * x for x in ours) - 1.0) < 1e-3, "vectors are normalised"
        assert cosine(ours, theirs) > 0.98
    for query, answer in QUERIES.items():
        q = onnx.embed_query(query)
        best = max(range(len(vectors)), key=lambda i: cosine(q, vectors[i]))
        assert best == answer, query


@pytest.mark.slow
def test_texts_of_any_length_mix_in_one_call_and_come_back_in_order(onnx: OnnxEmbedder) -> None:
    texts = ["short", SENTENCES[0] * 40, "", SENTENCES[1]]
    together = onnx.embed_documents(texts)
    alone = [onnx.embed_documents([t])[0] for t in texts]
    # Activations are quantised per batch, so neighbours move a vector a little (most here,
    # where a 3-token text shares a batch with a 256-token one; sorted batches mix less).
    for i, a in enumerate(together):
        assert cosine(a, alone[i]) > 0.97
        assert max(range(len(alone)), key=lambda j: cosine(a, alone[j])) == i
    assert onnx.count_tokens([SENTENCES[0] * 40])[0] > onnx.max_tokens == 256


@pytest.mark.slow
def test_the_exported_model_is_reused_and_the_process_never_imports_torch(onnx: OnnxEmbedder) -> None:
    code = (
        "import sys; from pathlib import Path; from noteloom.embedders import OnnxEmbedder; "
        f"e = OnnxEmbedder(cache_dir=Path({str(onnx.cache_dir)!r})); assert e.prepared; "
        "v = e.embed_query('hello'); assert len(v) == 384; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch was imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread priorities are per thread on Linux only")
def test_documents_are_embedded_on_a_thread_of_lower_priority_than_queries(onnx: OnnxEmbedder) -> None:
    onnx.embed_documents(["warm up"])
    assert onnx._doc_pool is not None

    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert onnx._doc_pool.submit(nice).result() > nice()


def test_the_default_local_embedder_is_onnx_int8_and_names_its_vectors_so(tmp_path: Path) -> None:
    default = local_embedder({}, {"NOTELOOM_CACHE_DIR": str(tmp_path)})
    assert isinstance(default, OnnxEmbedder)
    assert default.name == "local:all-MiniLM-L6-v2:onnx-int8"
    assert not default.loaded and not default.prepared
    assert default.model_file.is_relative_to(tmp_path)
    full = local_embedder({"runtime": "onnx", "quantize": False, "cache_dir": str(tmp_path)}, {})
    assert full.name == "local:all-MiniLM-L6-v2:onnx"
    assert full.model_file != default.model_file
    torch_int8 = local_embedder({"runtime": "torch"}, {})
    assert torch_int8.name == "local:all-MiniLM-L6-v2+int8"


def test_an_unknown_runtime_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="runtime"):
        local_embedder({"runtime": "tensorflow"}, {})


def test_the_cache_folder_follows_the_environment(tmp_path: Path) -> None:
    assert default_cache_dir({"NOTELOOM_CACHE_DIR": str(tmp_path)}) == tmp_path
    if sys.platform.startswith("linux"):
        assert default_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "noteloom"
