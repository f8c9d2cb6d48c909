"""The semantic index stays current as notes change, on SQLite and on PostgreSQL (pgvector)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import sqlalchemy as sa

from noteloom.app import App
from noteloom.chunks import ChunkSpec
from noteloom.embedders import Embedder
from noteloom.errors import InvalidInput
from noteloom.semantic import SemanticIndex
from noteloom.vectors import chunks
from semantic_support import local_model, wait_for

BASIL = (
    "# Basil\n\n## Watering\n\nBasil wilts when the soil dries out. Water it every morning in summer "
    "and keep the pot out of the midday sun.\n\n## Pests\n\nAphids gather under the leaves; "
    "spray them off with soapy water."
)
PESTO = "Blend basil leaves with pine nuts, garlic, parmesan and olive oil. Basil, basil, basil."
LISBON = "We took the train from Porto to Lisbon and stayed in a hotel by the river."


class CountingEmbedder:
    """The real local model, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder, name: str | None = None) -> None:
        self.inner = inner
        self.documents: list[str] = []
        self._name = name

    @property
    def name(self) -> str:
        return self._name or self.inner.name

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_documents(self, texts: Any) -> list[list[float]]:
        self.documents.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.fixture
def emb() -> CountingEmbedder:
    return CountingEmbedder(local_model())


@pytest.fixture
def index(any_app: App, emb: CountingEmbedder) -> Iterator[SemanticIndex]:
    yield SemanticIndex(any_app.engine, emb, poll_interval=0.05)


def titles(index: SemanticIndex, query: str, **kw: Any) -> list[str]:
    return [h.title for h in index.search(query, **kw).hits]


def test_an_index_is_built_from_every_note_and_finds_by_meaning(any_app: App, index: SemanticIndex) -> None:
    ws = any_app.workspace
    ws.create_note("Basil care", BASIL)
    ws.create_note("Pesto", PESTO)
    ws.create_note("Lisbon trip", LISBON)
    before = index.status()
    assert before.state == "not built" and before.pending_notes == 3
    assert index.sync() >= 3
    status = index.status()
    assert (status.state, status.pending_notes, status.indexed_notes) == ("idle", 0, 3)
    assert status.dimensions == 384 and status.model == "local:all-MiniLM-L6-v2"
    hits = index.search("how do I stop my herbs from drooping", limit=3).hits
    assert hits[0].title == "Basil care"
    assert hits[0].section_heading in {"Basil", "Watering"}
    assert "wilts" in hits[0].snippet
    assert titles(index, "a rail journey in Portugal", limit=1) == ["Lisbon trip"]


def test_an_edit_re_embeds_only_the_chunks_whose_text_changed(
    any_app: App, index: SemanticIndex, emb: CountingEmbedder
) -> None:
    ws = any_app.workspace
    long_body = "\n\n".join(f"# Part {i}\n\n" + f"Paragraph {i} is about subject {i}. " * 30 for i in range(6))
    note = ws.create_note("Handbook", long_body)
    index.sync()
    first = len(emb.documents)
    assert first >= 6
    ws.update_note(note.id, body=long_body.replace("Paragraph 3 is", "Paragraph three is"))
    emb.documents.clear()
    index.sync()
    # Part 3 spans two windows; both changed, nothing else did.
    assert 1 <= len(emb.documents) <= 2 < first
    assert all(d.startswith("Handbook > Part 3\n") for d in emb.documents)
    with any_app.engine.connect() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(chunks)).scalar_one() == first


def test_trashed_and_purged_notes_leave_the_index_and_restored_ones_return(any_app: App, index: SemanticIndex) -> None:
    ws = any_app.workspace
    basil = ws.create_note("Basil care", BASIL)
    ws.create_note("Lisbon trip", LISBON)
    index.sync()
    ws.delete_note(basil.id)
    # Even before the indexer runs, a trashed note is never returned.
    assert "Basil care" not in titles(index, "watering herbs", relevance="loose")
    index.sync()
    assert index.status().indexed_notes == 1
    ws.restore(basil.id)
    index.sync()
    assert titles(index, "watering herbs", limit=1) == ["Basil care"]
    ws.delete_note(basil.id)
    ws.purge(basil.id)
    index.sync()
    with any_app.engine.connect() as c:
        left = c.execute(sa.select(sa.func.count()).select_from(chunks).where(chunks.c.note_id == basil.id))
        assert left.scalar_one() == 0


def test_the_queue_survives_a_restart(any_app: App, emb: CountingEmbedder) -> None:
    ws = any_app.workspace
    first = SemanticIndex(any_app.engine, emb)
    ws.create_note("Basil care", BASIL)
    first.sync()
    ws.create_note("Lisbon trip", LISBON)
    ws.create_note("Pesto", PESTO)
    # A new process: it knows from the database what is still to do.
    emb.documents.clear()
    second = SemanticIndex(any_app.engine, emb)
    assert second.status().pending_notes == 2
    second.sync()
    assert second.status().indexed_notes == 3
    assert not any("Basil wilts" in d for d in emb.documents), "done work is not redone"


def test_changing_the_model_rebuilds_the_index_cleanly(any_app: App, emb: CountingEmbedder) -> None:
    ws = any_app.workspace
    ws.create_note("Basil care", BASIL)
    ws.create_note("Lisbon trip", LISBON)
    SemanticIndex(any_app.engine, emb).sync()
    other = CountingEmbedder(local_model(), name="local:some-other-model")
    moved = SemanticIndex(any_app.engine, other)
    status = moved.status()
    assert status.state == "not built" and status.pending_notes == 2 and status.chunks == 0
    assert moved.search("herbs").hits == []
    moved.sync()
    assert moved.status().model == "local:some-other-model"
    assert moved.status().indexed_notes == 2
    assert len(other.documents) >= 2


def test_changing_the_chunk_size_re_cuts_notes_but_keeps_unchanged_vectors(
    any_app: App, emb: CountingEmbedder
) -> None:
    ws = any_app.workspace
    ws.create_note("Lisbon trip", LISBON)
    SemanticIndex(any_app.engine, emb).sync()
    emb.documents.clear()
    SemanticIndex(any_app.engine, emb, spec=ChunkSpec(max_chars=1200, overlap=100)).sync()
    assert emb.documents == [], "a short note cuts the same way, so its vector stays"


def test_search_filters_by_notebook_and_tag_and_by_relevance(any_app: App, index: SemanticIndex) -> None:
    ws = any_app.workspace
    home = ws.create_notebook("Home")
    garden = ws.create_notebook("Garden", parent_id=home.id)
    travel = ws.create_notebook("Travel")
    ws.create_note("Basil care", BASIL, garden.id, tags=["plants"])
    ws.create_note("Pesto", PESTO, home.id)
    ws.create_note("Lisbon trip", LISBON, travel.id, tags=["trips"])
    index.sync()
    q = "a holiday in Portugal by train"
    assert titles(index, q, limit=1) == ["Lisbon trip"]
    assert titles(index, q, notebook_ids=[travel.id]) == ["Lisbon trip"]
    assert "Lisbon trip" not in titles(index, q, notebook_ids=[home.id, garden.id], relevance="loose")
    assert titles(index, q, tag="TRIPS") == ["Lisbon trip"]
    assert "Lisbon trip" not in titles(index, q, tag="plants", relevance="loose")
    strict = index.search("quantum chromodynamics lecture", relevance="strict").hits
    loose = index.search("quantum chromodynamics lecture", relevance="loose").hits
    assert strict == [] and len(loose) >= len(strict)
    with pytest.raises(InvalidInput):
        index.search("x", relevance="fuzzy")  # type: ignore[arg-type]


def test_one_result_per_note_keeps_the_best_section(any_app: App, index: SemanticIndex) -> None:
    ws = any_app.workspace
    body = BASIL + "\n\n## Harvest\n\n" + "Pick the top leaves before it flowers. " * 30
    ws.create_note("Basil care", body)
    index.sync()
    per_chunk = index.search("aphids on the leaves", relevance="loose").hits
    per_note = index.search("aphids on the leaves", relevance="loose", one_per_note=True).hits
    assert len(per_chunk) > len(per_note) == 1
    assert per_note[0].section_heading in {"Pests", "Basil"}


def test_while_notes_wait_the_answer_says_how_many(any_app: App, index: SemanticIndex) -> None:
    ws = any_app.workspace
    ws.create_note("Basil care", BASIL)
    index.sync()
    ws.create_note("Lisbon trip", LISBON)
    assert index.search("train").pending_notes == 1


def test_the_background_worker_makes_an_edit_findable_and_stops_cleanly(any_app: App, emb: CountingEmbedder) -> None:
    ws = any_app.workspace
    index = SemanticIndex(any_app.engine, emb, poll_interval=0.05)
    note = ws.create_note("Trip", "Notes about nothing yet.")

    async def main() -> None:
        async with index.running():
            await wait_async(lambda: index.status().state == "idle")
            ws.update_note(note.id, body=LISBON)
            await wait_async(lambda: titles(index, "rail journey in Portugal", limit=1) == ["Trip"])

    anyio.run(main)
    # After the context closes, nothing runs any more: a change stays pending.
    ws.create_note("Pesto", PESTO)
    assert index.status().pending_notes == 1


async def wait_async(check: Any, timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.05)


def test_an_empty_query_is_refused(index: SemanticIndex) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        index.search("   ")


def test_the_worker_reports_an_embedder_failure_in_the_status_and_recovers(app: App) -> None:
    class Flaky(CountingEmbedder):
        broken = True

        def embed_documents(self, texts: Any) -> list[list[float]]:
            if self.broken:
                from noteloom.errors import EmbeddingError

                raise EmbeddingError("endpoint down")
            return super().embed_documents(texts)

    flaky = Flaky(local_model())
    index = SemanticIndex(app.engine, flaky, poll_interval=0.05)
    app.workspace.create_note("Trip", LISBON)

    async def main() -> None:
        async with index.running():
            await wait_async(lambda: index.status().state == "error")
            assert "endpoint down" in (index.status().error or "")
            flaky.broken = False
            await wait_async(lambda: index.status().state == "idle", timeout=10)

    anyio.run(main)
    wait_for(lambda: index.status().indexed_notes == 1, timeout=60)


def test_of_two_indexers_on_one_workspace_one_works_and_the_other_takes_over_when_it_stops(
    any_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with ``serve --workers 2``: each process runs the background indexer, one embeds."""
    import noteloom.semantic.index as index_module
    from noteloom.db import create_db_engine

    monkeypatch.setattr(index_module, "LOCK_RETRY_SECONDS", 0.1)
    ws = any_app.workspace
    other_engine = create_db_engine(any_app.engine.url.render_as_string(hide_password=False))
    first_emb, second_emb = CountingEmbedder(local_model()), CountingEmbedder(local_model())
    first = SemanticIndex(any_app.engine, first_emb, poll_interval=0.05)
    second = SemanticIndex(other_engine, second_emb, poll_interval=0.05)
    ws.create_note("Basil care", BASIL)

    async def hold(index: SemanticIndex, stop: anyio.Event) -> None:
        async with index.running():
            await stop.wait()

    async def main() -> None:
        stop_first, stop_second = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold, first, stop_first)
            await wait_async(lambda: first.status().indexed_notes == 1)
            tg.start_soon(hold, second, stop_second)
            ws.create_note("Lisbon trip", LISBON)
            await wait_async(lambda: titles(second, "rail journey in Portugal", limit=1) == ["Lisbon trip"])
            await anyio.sleep(0.3)  # several of the second one's retries
            # The second searched what the first wrote, and embedded nothing itself.
            assert second_emb.documents == []
            assert any("Lisbon" in d for d in first_emb.documents)
            # The first one stops (as when its process ends): the second takes over.
            stop_first.set()
            ws.create_note("Pesto", PESTO)
            await wait_async(lambda: second.status().pending_notes == 0)
            assert any("pine nuts" in d for d in second_emb.documents)
            assert not any("pine nuts" in d for d in first_emb.documents)
            stop_second.set()

    try:
        anyio.run(main)
    finally:
        other_engine.dispose()
