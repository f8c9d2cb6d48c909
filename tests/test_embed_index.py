"""Indexing embeds less: each distinct text once, chunks cut to the model's window, and
`noteloom index` says when it is loading the model."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from noteloom.app import App, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.semantic import SemanticIndex
from semantic_support import local_model

BOILERPLATE = "Meeting notes template. Attendees, agenda, decisions, action items, next steps."


class FakeEmbedder:
    """Vectors from word hashes; records every text it embeds and can count tokens (one per word)."""

    name = "fake:words"
    dimensions = 16
    max_tokens = 64

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents.extend(texts)
        self.batches.append(list(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + 2 for t in texts]

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in text.lower().split():
            v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]


def test_a_text_repeated_across_notes_is_embedded_once_and_every_note_finds_it(app: App) -> None:
    ws = app.workspace
    ids = [ws.create_note("Weekly", BOILERPLATE).id for _ in range(5)]
    ws.create_note("Garden", "Water the basil every morning so it does not wilt.")
    emb = FakeEmbedder()
    index = SemanticIndex(app.engine, emb)
    index.sync()
    assert emb.documents.count(f"Weekly\n\n{BOILERPLATE}") == 1
    assert index.status().chunks == 6
    hits = index.search("agenda decisions action items", limit=10, relevance="loose").hits
    assert {h.note_id for h in hits} >= set(ids)


def test_chunks_are_cut_to_the_embedders_window_and_batched_shortest_first(app: App) -> None:
    long_body = " ".join(f"word{i}" for i in range(500))
    app.workspace.create_note("Long", long_body)
    app.workspace.create_note("Short", "tiny note")
    emb = FakeEmbedder()
    index = SemanticIndex(app.engine, emb, chunks_per_batch=4)
    assert index.spec.max_tokens == 64
    index.sync()
    assert all(len(t.split()) + 2 <= 64 for t in emb.documents)
    assert all(f"word{i}" in " ".join(emb.documents) for i in range(500)), "no text is lost to truncation"
    lengths = [len(t) for batch in emb.batches for t in batch]
    assert lengths == sorted(lengths)


def test_noteloom_index_says_it_is_loading_the_model_before_the_first_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text('[embeddings]\nmodel = "local:all-MiniLM-L6-v2"\nquantize = false\n')
    model = local_model()._load()
    loads: list[str] = []

    def build(self: object) -> object:
        loads.append("loaded")
        return model

    monkeypatch.setattr("noteloom.embedders.LocalEmbedder._build", build)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    app.workspace.create_note("Lisbon", "We took the train from Porto to Lisbon.")
    app.close()
    result = CliRunner().invoke(cli, ["index", "--home", str(home)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "loading model…"
    assert "indexed 1 notes" in lines[-1]
    assert loads == ["loaded"]
