"""Import at the scale of real vaults: the fast readers agree with the slow ones, and the
import streams (it never holds every note)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from interop_support import PNG, state
from noteloom import db
from noteloom.errors import ImportExportError
from noteloom.interop import import_path, links, markdown, writer
from noteloom.interop.frontmatter import _Loader, _parse_simple, parse
from noteloom.interop.readahead import ReadAhead
from noteloom.interop.staging import CRASH_ENV
from noteloom.workspace import Workspace

# -- link targets: the scan from the '=' signs finds what the pattern finds everywhere ------------

_HTML_PIECES = st.sampled_from(
    ["src", "SRC", "href", "HRef", "\u017frc", "=", " ", "\n", "\t", '"', "'", "a", "b.png", "<img ", "x", "\u00a0", "é"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_HTML_PIECES, max_size=40).map("".join))
def test_html_link_targets_are_the_matches_of_the_pattern(body: str) -> None:
    assert links._html_spans(body) == [m.span("value") for m in links._HTML.finditer(body)]


def test_html_link_targets_of_a_note() -> None:
    body = 'x = 1\n<img src="a.png"> <a HREF = \'b c.pdf\'>\nsrc="c"=href="d" xsrc="no"'
    assert [body[s:e] for s, e in links.link_spans(body)] == ["a.png", "b c.pdf", "c", "d"]


# -- front matter: the fast reader gives the library's answer, or leaves it to the library --------

_VALUES = st.sampled_from(
    ['"When a"', '"a \\"q\\" b"', '"back\\\\slash"', '"bad \\n escape"', "'it''s'", "plain text",
     "2025-05-15T19:57:33Z", "2024-01-02", "2024-01-02 10:00:00", "2024-1-2", "2024-01-02T10:00:00.5+01:00",
     "[]", "[a, b]", "[ a ,b ]", "[a,,b]", "[yes, no]", "[true]", "[1, 2]", "['x, y']", "x: y", "#c", "null",
     "true", "0123", '"tab\there"', '"\u2028"', "'\x07'", '"é ü 日本"', "[日本, x]", "[a]b", ""]
)
_ITEMS = st.sampled_from(["  - read", "- x", "    - deep", "  - 'q'", '  - "dq"', "  - 2024-01-01", "  -  two", "  - yes"])
_ENTRY = st.tuples(st.sampled_from(["title", "tags", "created", "x"]), _VALUES, st.lists(_ITEMS, max_size=3))


@settings(max_examples=500, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=4))
def test_the_fast_reader_agrees_with_yaml_on_what_other_tools_write(entries: list[tuple[str, str, list[str]]]) -> None:
    text = "".join(f"{k}: {v}\n" if v else f"{k}:\n" + "".join(f"{i}\n" for i in items) for k, v, items in entries)
    fast = _parse_simple(text)
    if fast is None:
        return
    expected = yaml.load(text, Loader=_Loader)  # an error here would mean the fast reader accepted bad YAML
    assert fast == expected and [type(v) for v in fast.values()] == [type(v) for v in expected.values()]


def test_front_matter_of_real_vaults_takes_the_fast_reader() -> None:
    text = 'title: "When \\"a\\""\ntags:\n  - read\n  - access\ncreated: 2025-05-15T19:57:33Z\nupdated: 2025-07-31\n'
    expected = {"title": 'When "a"', "tags": ["read", "access"], "created": "2025-05-15T19:57:33Z",
                "updated": "2025-07-31"}
    assert _parse_simple(text) == expected == parse(text, "note.md")
    assert _parse_simple("title: x\ntags: []\n") == {"title": "x", "tags": []}


# -- the import streams: it holds a few batches of notes, never every note --------------------------


def _vault(root: Path, n: int) -> Path:
    for i in range(n):
        folder = root / f"f{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i:05}.md").write_text(
            f'---\ntitle: "Note {i}"\ntags:\n  - t{i % 5}\ncreated: 2025-05-15T19:57:33Z\n---\n\nbody {i} ' + "x" * 200,
            encoding="utf-8",
        )
    return root


def test_a_markdown_import_holds_a_bounded_number_of_notes(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = {"read": 0, "written": 0, "most_held": 0}
    real_read, real_insert = markdown._read_note, writer._NoteInserter.insert

    def read(*args: Any, **kwargs: Any) -> Any:
        counts["read"] += 1
        counts["most_held"] = max(counts["most_held"], counts["read"] - counts["written"])
        return real_read(*args, **kwargs)

    def insert(self: Any, rows: list[dict[str, Any]]) -> None:
        real_insert(self, rows)
        counts["written"] += len(rows)

    monkeypatch.setattr(markdown, "_read_note", read)
    monkeypatch.setattr(writer._NoteInserter, "insert", insert)
    # Smaller groups than an import's own, so the bound is well below the vault's size.
    monkeypatch.setattr(writer, "READ_AHEAD", 4)
    monkeypatch.setattr(writer, "GROUP_NOTES", 64)
    summary = import_path(ws, _vault(tmp_path / "vault", 3000))
    assert summary.notes == counts["read"] == counts["written"] == 3000
    # The batch being written, the queue of groups, the group being filled and the one being taken.
    bound = writer.CHUNK + (writer.READ_AHEAD + 2) * writer.GROUP_NOTES
    assert counts["most_held"] <= bound < 3000
    with ws.read() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(db.note_tags)).scalar_one() == 3000


def test_links_to_notes_read_later_get_their_new_ids(ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "CHUNK", 2)
    monkeypatch.setattr(writer, "GROUP_NOTES", 1)
    root = tmp_path / "vault"
    ids = [c * 32 for c in "abcde"]
    for i, nid in enumerate(ids):
        # Each note links the one after it, which the walk reads (and writes) later.
        link = f"[next](:/{ids[i + 1]})" if i + 1 < len(ids) else "[first](:/" + ids[0] + ")"
        (root / f"n{i}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"n{i}.md").write_text(f"---\nid: {nid}\ntitle: n{i}\n---\n\n{link}\n", encoding="utf-8")
    import_path(ws, root)
    again = import_path(ws, root, duplicates="new-ids")
    assert again.notes == 5
    notes = state(ws)["notes"]
    copies = {n["title"]: (nid, n["body"]) for nid, n in notes.items() if nid not in ids}
    for i in range(5):
        target = copies[f"n{(i + 1) % 5}"][0]
        assert copies[f"n{i}"][1] == f"[{'next' if i < 4 else 'first'}](:/{target})\n"


def test_a_reader_error_after_some_batches_leaves_nothing(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "CHUNK", 10)
    root = _vault(tmp_path / "vault", 200)
    (root / "f6" / "n99999.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    before = state(ws)
    with pytest.raises(ImportExportError, match=r"n99999\.md: the front matter is not valid YAML"):
        import_path(ws, root)
    assert state(ws) == before
    assert list(ws.data_dir.glob(".import-*")) == []


# -- reading ahead ----------------------------------------------------------------------------------


@dataclass
class _Item:
    body: str


def test_read_ahead_gives_every_item_in_order_then_the_readers_error() -> None:
    def items() -> Iterator[_Item]:
        for i in range(1000):
            yield _Item(str(i))
        raise ValueError("bad file")

    seen: list[str] = []
    with pytest.raises(ValueError, match="bad file"), ReadAhead(items(), depth=2, group=7) as it:
        seen.extend(x.body for x in it)
    assert seen == [str(i) for i in range(1000)]


def test_leaving_early_stops_the_reader_and_closes_its_source() -> None:
    produced: list[int] = []
    closed = threading.Event()

    def items() -> Iterator[_Item]:
        try:
            for i in range(100_000):
                produced.append(i)
                yield _Item("x")
        finally:
            closed.set()

    with ReadAhead(items(), depth=2, group=10) as it:
        next(it)
    # The thread is joined on leaving: it stopped within the queue's bound, and its generator closed.
    assert closed.is_set() and len(produced) <= 10 * (2 + 3)


# -- a streamed import killed at any point leaves rows and files in agreement -----------------------


@pytest.mark.parametrize(("point", "expected"), [("rows", (0, 0)), ("moved", (0, 0)), ("committed", (30, 2))])
def test_a_streamed_import_killed_at_any_point_is_consistent(tmp_path: Path, point: str, expected: tuple[int, int]) -> None:
    from test_import_hardening import _consistency, cli

    root = _vault(tmp_path / "vault", 28)
    (root / "img").mkdir()
    (root / "img" / "p.png").write_bytes(PNG)
    (root / "img" / "q.bin").write_bytes(b"\x00" * 10)
    (root / "first.md").write_text("![p](img/p.png)\n", encoding="utf-8")
    (root / "f6" / "zlast.md").write_text("[q](../img/q.bin) ![p](../img/p.png)\n", encoding="utf-8")
    home = tmp_path / "home"
    done = cli("import", str(root), "--no-progress", home=home, env={CRASH_ENV: point})
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _consistency(home) == expected
    again = cli("import", str(root), "--no-progress", home=home)
    assert again.returncode == 0, again.stderr
    # Notes without an id in their front matter are new notes each time, and so are their files.
    assert _consistency(home) == ((30, 2) if expected == (0, 0) else (60, 4))


def _fts_hits(ws: Workspace, phrase: str) -> set[str]:
    sql = sa.text("SELECT n.title FROM notes_fts JOIN notes n ON n.seq = notes_fts.rowid WHERE notes_fts MATCH :q")
    with ws.read() as c:
        return {r.title for r in c.execute(sql, {"q": f'"{phrase}"'})}


def test_cjk_bodies_worked_out_ahead_are_indexed_as_any_note_is(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "CHUNK", 3)
    root = _vault(tmp_path / "vault", 10)
    (root / "cjk.md").write_text("---\ntitle: cjk\n---\n\n中文字の索引 and “quotes”\n", encoding="utf-8")
    bad = _vault(tmp_path / "bad", 10)
    (bad / "zz.md").write_text("---\ntitle: [unclosed\n---\n中文字\n", encoding="utf-8")
    import_path(ws, root)
    with pytest.raises(ImportExportError):
        import_path(ws, bad)  # fails while its notes were being indexed ahead
    ws.create_note("made after", "文字の本")
    assert _fts_hits(ws, "文字") == {"cjk", "made after"}
    assert _fts_hits(ws, "quotes") == {"cjk"}
