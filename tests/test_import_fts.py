"""The import fills the keyword index in bulk: the very index the trigger would have made,
the trigger and FTS5's settings as they were afterwards, and nothing of it after a failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import ImportExportError
from noteloom.interop import import_path, writer
from noteloom.workspace import Workspace

_BODIES = [
    "plain words about a kubernetes deploy and its function",
    "accents: café, naïve, crème brûlée — and “quotes”",
    "中文的笔记，关于部署和函数",
    "日本語のノートです。カタカナもある",
    "한국어 텍스트 노트",
    "emoji 😀 and a rare ideograph \U00020001\U00020002 beside words",
    "mixed 中文 and English in one line\n\n```\ncode 漢字\n```",
    "",
]


def _vault(root: Path, n: int = 48) -> Path:
    for i in range(n):
        folder = root / f"f{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        title = f"中文标题 {i}" if i % 5 == 0 else f"Note {i} é" if i % 5 == 1 else f"Note {i}"
        (folder / f"n{i:03}.md").write_text(
            f'---\nid: "{i:032x}"\ntitle: "{title}"\ntags: [t{i % 4}]\n---\n\n{_BODIES[i % len(_BODIES)]} {i}\n',
            encoding="utf-8",
        )
    return root


@pytest.fixture
def other_ws(tmp_path: Path) -> Iterator[Workspace]:
    a: App = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "other")}), load_entry_points=False)
    try:
        yield a.workspace
    finally:
        a.close()


def _index(ws: Workspace) -> list[tuple[str, str, str, int]]:
    """Every (note id, term, column, offset) of the keyword index."""
    with ws.write() as c:
        c.exec_driver_sql("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, notes_fts, instance)")
        rows = c.exec_driver_sql(
            "SELECT n.id, v.term, v.col, v.offset FROM temp.fts_terms AS v JOIN notes AS n ON n.seq = v.doc"
        ).all()
        c.exec_driver_sql("DROP TABLE temp.fts_terms")
    return sorted((r[0], r[1], r[2], r[3]) for r in rows)


def _schema_and_settings(ws: Workspace) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    with ws.read() as c:
        triggers = c.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name").all()
        config = c.exec_driver_sql("SELECT k, v FROM notes_fts_config ORDER BY k").all()
    return [(t[0], t[1]) for t in triggers], [(k[0], str(k[1])) for k in config]


def _matches(ws: Workspace, query: str) -> set[str]:
    with ws.read() as c:
        rows = c.exec_driver_sql(
            "SELECT n.id FROM notes_fts JOIN notes AS n ON n.seq = notes_fts.rowid WHERE notes_fts MATCH ?",
            (query,),
        ).all()
    return {r[0] for r in rows}


def test_the_bulk_index_is_the_one_the_trigger_makes(
    ws: Workspace, other_ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = _vault(tmp_path / "vault")
    monkeypatch.setattr(writer, "CHUNK", 7)
    monkeypatch.setattr(writer, "FTS_BYTES", 300)  # many statements of FTS5, across batches
    before = _schema_and_settings(ws)
    statements = []
    real = writer._NoteInserter._index_written

    def index_written(self: writer._NoteInserter) -> None:
        statements.append(self)
        real(self)

    monkeypatch.setattr(writer._NoteInserter, "_index_written", index_written)
    assert import_path(ws, vault).notes == 48
    assert len(statements) > 3
    # The reference: the same import through the keyword index trigger.
    monkeypatch.setattr(writer, "_FTS_TRIGGER_SQL", "a trigger of some later schema")
    assert import_path(other_ws, vault).notes == 48
    bulk, reference = _index(ws), _index(other_ws)
    assert bulk == reference
    assert {r[0] for r in bulk} == {f"{i:032x}" for i in range(48)}
    assert _schema_and_settings(ws) == before
    assert _matches(ws, '"部署"') == _matches(other_ws, '"部署"') == {f"{i:032x}" for i in range(48) if i % 8 == 2}


def test_after_the_import_the_trigger_indexes_new_notes_again(ws: Workspace, tmp_path: Path) -> None:
    import_path(ws, _vault(tmp_path / "vault", 10))
    note = ws.create_note("Later 中文", "written after the import: zebrafish")
    assert _matches(ws, "zebrafish") == {note.id}
    assert _matches(ws, '"中文"') >= {note.id}


def test_a_second_import_indexes_its_notes_beside_the_first(ws: Workspace, tmp_path: Path) -> None:
    first = _vault(tmp_path / "one", 10)
    ws.create_note("Between", "a note written between two imports: quokka")
    import_path(ws, first)
    again = import_path(ws, first, duplicates="new-ids")
    assert again.notes == 10
    assert len(_matches(ws, "kubernetes")) == 4  # notes 0 and 8 of each import
    assert len(_matches(ws, "quokka")) == 1


def test_a_failed_import_leaves_the_index_trigger_and_settings_as_they_were(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws.create_note("Before", "indexed before the import: axolotl")
    monkeypatch.setattr(writer, "CHUNK", 5)
    monkeypatch.setattr(writer, "FTS_BYTES", 200)
    vault = _vault(tmp_path / "vault", 40)
    (vault / "f2" / "n999.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    before = (_schema_and_settings(ws), _index(ws))
    with pytest.raises(ImportExportError, match="not valid YAML"):
        import_path(ws, vault)
    assert (_schema_and_settings(ws), _index(ws)) == before
    with ws.read() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(db.notes)).scalar_one() == 1
    later = ws.create_note("After", "indexed after the failed import: axolotl")
    assert len(_matches(ws, "axolotl")) == 2 and later.id in _matches(ws, "axolotl")
