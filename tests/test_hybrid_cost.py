"""What a hybrid or semantic search costs: the model runs once per distinct query, never for
a query of filters alone or one whose words no note holds, and the semantic arm stays within
the notes the filters allow, on both of its paths (the nearest chunks of all checked against
the filter, or the allowed set read whole)."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from noteloom.app import App
from noteloom.query import parse_query
from noteloom.search import notes_allowed
from noteloom.semantic import SemanticIndex, hybrid_search
from noteloom.semantic import index as index_module

DIMS = 64
WORD = re.compile(r"\w+")


class WordsEmbedder:
    """A stand-in model: a text's vector is its words hashed into 64 buckets, so texts
    sharing words are close. Counts the queries it embeds."""

    def __init__(self, name: str = "fake:words") -> None:
        self.name = name
        self.dimensions = DIMS
        self.queries: list[str] = []

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * DIMS
        for w in WORD.findall(text.lower()):
            v[int.from_bytes(hashlib.blake2b(w.encode(), digest_size=2).digest(), "big") % DIMS] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self._vector(text)


TOPICS = {
    "Garden": ["tomato seedlings need water every morning", "basil wilts in the sun", "compost the leaves"],
    "Kitchen": ["bake bread with sourdough", "tomato soup with basil", "sharpen the knives"],
    "Travel": ["train from Porto to Lisbon", "hotel by the river", "pack the tent"],
}


@pytest.fixture
def emb() -> WordsEmbedder:
    return WordsEmbedder()


@pytest.fixture
def corpus(app: App, emb: WordsEmbedder) -> Iterator[tuple[App, SemanticIndex]]:
    ws = app.workspace
    books = {name: ws.create_notebook(name).id for name in TOPICS}
    for book, lines in TOPICS.items():
        for i, line in enumerate(lines):
            note = ws.create_note(f"{book} {i}", line, books[book], tags=["kept"] if i == 0 else [])
            assert note.id
    index = SemanticIndex(app.engine, emb)
    index.sync()
    yield app, index


def search(app: App, index: SemanticIndex, query: str, mode: str = "hybrid") -> list[str]:
    return [h.title for h in hybrid_search(app.workspace, index, query, mode=mode).hits]  # type: ignore[arg-type]


def test_a_repeated_query_runs_the_model_once(corpus: tuple[App, SemanticIndex], emb: WordsEmbedder) -> None:
    app, index = corpus
    first = search(app, index, "tomato with basil in the soup")
    assert search(app, index, "tomato with basil in the soup") == first
    assert index.search("tomato with basil in the soup", limit=3).hits
    assert emb.queries == ["tomato with basil in the soup"]
    search(app, index, "bread and knives for the kitchen")
    assert len(emb.queries) == 2


def test_the_query_cache_is_kept_per_model(corpus: tuple[App, SemanticIndex], emb: WordsEmbedder) -> None:
    _, index = corpus
    a = index.query_vector("river hotel")
    other = WordsEmbedder("fake:other")
    index.embedder = other
    assert index.query_vector("river hotel") == a
    assert other.queries == ["river hotel"]  # another model's vector is not reused
    assert emb.queries == ["river hotel"]


@pytest.mark.parametrize(
    "query", ["tag:kept notebook:Garden", "-tag:*", "type:todo", "notebook:Travel", "-tomato", "tag:kept -basil"]
)
@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_a_query_of_filters_alone_never_runs_the_model(
    corpus: tuple[App, SemanticIndex], emb: WordsEmbedder, query: str, mode: str
) -> None:
    app, index = corpus
    hybrid_search(app.workspace, index, query, mode=mode)  # type: ignore[arg-type]
    assert emb.queries == []


@pytest.mark.parametrize("query", ["zqxvorp", "zqxvorp blorfle", '"zqxvorp blorfle"', "zqxv*"])
def test_words_in_no_note_find_nothing_in_hybrid_mode_and_run_no_model(
    corpus: tuple[App, SemanticIndex], emb: WordsEmbedder, query: str
) -> None:
    app, index = corpus
    result = hybrid_search(app.workspace, index, query, mode="hybrid")
    assert result.hits == [] and result.mode == "hybrid"
    assert emb.queries == []


def test_a_word_in_no_note_beside_one_in_some_still_asks_the_model(
    corpus: tuple[App, SemanticIndex], emb: WordsEmbedder
) -> None:
    app, index = corpus
    # No note holds both, so keyword search finds nothing; "tomato" alone is in notes, so
    # the semantic arm is asked (its strict floor for two words decides what it keeps).
    search(app, index, "zqxvorp tomato")
    assert emb.queries == ["zqxvorp tomato"]


def test_filters_that_allow_nothing_run_no_model(corpus: tuple[App, SemanticIndex], emb: WordsEmbedder) -> None:
    app, index = corpus
    app.workspace.create_notebook("Empty")
    for mode in ("hybrid", "semantic"):
        assert search(app, index, "notebook:Empty tomato soup with basil", mode) == []
    assert emb.queries == []


def test_semantic_mode_still_embeds_a_word_in_no_note(corpus: tuple[App, SemanticIndex], emb: WordsEmbedder) -> None:
    app, index = corpus
    search(app, index, "zqxvorp", "semantic")
    assert emb.queries == ["zqxvorp"]


@pytest.fixture
def many(app: App) -> Iterator[tuple[App, SemanticIndex, dict[str, str]]]:
    """120 notes in three notebooks, each note a few shared words and one of its own."""
    ws = app.workspace
    books = {name: ws.create_notebook(name).id for name in ("Big", "Mid", "Small")}
    book_of: dict[str, str] = {}
    for i in range(120):
        book = "Small" if i % 40 == 0 else "Mid" if i % 4 == 1 else "Big"
        title = f"n{i:03d}"
        words = " ".join(f"w{(i * 7 + j) % 23}" for j in range(4 + i % 5))
        ws.create_note(title, f"{words} own{i}", books[book])
        book_of[title] = book
    index = SemanticIndex(app.engine, WordsEmbedder())
    index.sync()
    yield app, index, book_of


@pytest.mark.parametrize("book", ["Big", "Mid", "Small"])
@pytest.mark.parametrize("path", ["best of all", "allowed set"])
def test_the_semantic_arm_returns_the_best_allowed_notes_on_either_path(
    many: tuple[App, SemanticIndex, dict[str, str]], book: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered search finds what the unfiltered ranking, cut to the allowed notes, holds
    first: whether it came from the nearest chunks of all checked against the filter, or
    from the allowed set searched whole."""
    app, index, book_of = many
    if path == "allowed set":
        monkeypatch.setattr(index_module, "_best_allowed", lambda *a, **kw: None)
    query = "w3 w5 w8 w13"
    everything = [h.note_id for h in index.search(query, limit=120, one_per_note=True).hits]
    titles = {n.id: n.title for n in app.workspace.list_notes(limit=500)}
    ranked = [titles[nid] for nid in everything]
    found = search(app, index, f"notebook:{book} {query}", "semantic")
    assert found == [t for t in ranked if book_of[t] == book][:20]
    assert found and {book_of[t] for t in found} == {book}
    excluded = search(app, index, f"-notebook:{book} {query}", "semantic")
    assert excluded == [t for t in ranked if book_of[t] != book][:20]


def test_the_nearest_chunks_of_all_answer_only_when_they_can_tell(
    many: tuple[App, SemanticIndex, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter allowing most notes is answered from the nearest chunks of all; one allowing
    notes far from the query, none of which is among them, reads the allowed chunks."""
    app, index, _ = many
    ws = app.workspace
    far = ws.create_notebook("Far").id
    ws.create_note("far away", "nothing shared here at all", far)
    index.sync()
    calls: list[bool] = []
    nearest = index.store.nearest

    def spy(conn: Any, query: Any, k: int, candidates: Any = None) -> Any:
        calls.append(candidates is not None)
        return nearest(conn, query, k, candidates)

    monkeypatch.setattr(index.store, "nearest", spy)
    query = "w3 w5 w8"
    assert search(app, index, f"-notebook:Small {query}", "semantic")
    assert calls == [False]
    calls.clear()
    with ws.read() as c:
        allowed = notes_allowed(c, parse_query(f"notebook:Far {query}"))
    found = index.search(query, limit=1, relevance="loose", notes=allowed).hits
    assert calls == [False, True]
    assert found == []  # the note shares no word with the query


def test_a_repeated_or_paged_query_searches_the_vectors_once_until_the_index_changes(
    corpus: tuple[App, SemanticIndex], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, index = corpus
    calls: list[int] = []
    nearest = index.store.nearest

    def spy(conn: Any, query: Any, k: int, candidates: Any = None) -> Any:
        calls.append(k)
        return nearest(conn, query, k, candidates)

    monkeypatch.setattr(index.store, "nearest", spy)
    query = "tomato soup with basil and bread"
    first = hybrid_search(app.workspace, index, query, mode="semantic", limit=2).hits
    again = hybrid_search(app.workspace, index, query, mode="semantic", limit=2).hits
    assert again == first and len(calls) == 1
    hybrid_search(app.workspace, index, query, mode="semantic", limit=2, offset=2)  # another page asks for more
    assert len(calls) == 2
    hybrid_search(app.workspace, index, query, mode="semantic", limit=2, offset=2)
    assert len(calls) == 2
    note = app.workspace.create_note("Soup night", "tomato soup with basil and bread", None)
    index.sync()
    found = [h.id for h in hybrid_search(app.workspace, index, query, mode="semantic", limit=2).hits]
    assert len(calls) == 3 and found[0] == note.id
