"""Joplin exports in and out: the committed fixtures (made by the real Joplin CLI, see
fixtures/joplin/make_fixtures.py) import with every field, unmodelled items are skipped
with counted warnings, bad archives fail in one line and leave the workspace as it was."""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from interop_support import PNG, build_awkward_workspace, files, state
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import ImportExportError
from noteloom.interop import export_workspace, import_path
from noteloom.interop.joplin import parse_item, serialize_item
from noteloom.workspace import Workspace

FIXTURES = Path(__file__).parent / "fixtures" / "joplin"
JEX = FIXTURES / "sample.jex"
RAW = FIXTURES / "raw"

# What Joplin 3.5.1 wrote (ids, notebook and tag times are its own; note times were set).
WORK, PROJECTS, ALPHA = "4d7d5128253d47aeb93a0b02f9154dec", "e801556f639b447e8f00d0c46d32dd40", "97b30cfc11ce4a84b9c9254343639d68"
PERSONAL, DIARY = "42c0166d2611498d8cc4884dc3dfa6c2", "e92ca009158b4e1b96aebae99ee7c572"
PLAN, MILK, TAXES = "df5cc0eea6fd405a9e16c2f83dbdb4ef", "b89d39402a2a4e97a5d260390ed811a6", "72a2824b86b043abb9babbf82efa1555"
ARTICLE, PHOTO, TRAVEL = "3130731917cc44079b6ec44db835eff7", "83bfc1b21b17440d93f2ae4e2edf951b", "dec5b7e079ee484c8305d33e25415de7"
WHITEBOARD, MINUTES = "02b02c50e6494af5837cffa6c7f526ac", "f2bb51038ec84beeae9f5e6b911df5e2"
MINUTES_TXT = "議事録\n- 予算を確認する\n- 下一步：联系供应商\n".encode()

EXPECTED_BOOKS = {
    WORK: (None, "Work", 1796001425718, 1796001425718),
    PROJECTS: (WORK, "Projects", 1796001425725, 1796001425725),
    ALPHA: (PROJECTS, "Alpha", 1796001425731, 1796001425731),
    PERSONAL: (None, "Personal", 1796001425736, 1796001425736),
    DIARY: (None, "日記", 1796001425742, 1796001425742),
}
PLAN_BODY = (
    "# Project plan\n\nGoals for **Alpha**:\n\n1. Ship the *importer*\n2. Write `tests`\n\n"
    "```python\nprint(\"hello\")\n```\n\n| step | owner |\n|------|-------|\n| one  | ana   |\n"
)


def note(book: str, title: str, body: str, created: int, updated: int, *, tags: list[str] | None = None,
         is_todo: bool = False, due: int | None = None, completed: int | None = None,
         url: str = "") -> dict[str, object]:
    return {"notebook_id": book, "title": title, "body": body, "is_todo": is_todo, "todo_due": due,
            "todo_completed": completed, "source_url": url, "created_time": created,
            "updated_time": updated, "tags": sorted(tags or [])}


EXPECTED_NOTES = {
    PLAN: note(ALPHA, "Project plan", PLAN_BODY, 1705311000000, 1706781600000, tags=["planning", "work"]),
    MILK: note(PERSONAL, "Buy milk", "", 1735804800000, 1735804800000, tags=["errands"], is_todo=True,
               due=1736532000000),
    TAXES: note(PERSONAL, "File taxes", "", 1709251200000, 1712752496789, tags=["errands"], is_todo=True,
                due=1713139200000, completed=1712752496789),
    ARTICLE: note(PERSONAL, "Interesting article", "Worth reading again.", 1717243200000, 1717243200000,
                  url="https://example.com/articles/42?ref=rss"),
    PHOTO: note(PROJECTS, "Whiteboard photo",
                f"[議事録.txt](:/{MINUTES})![whiteboard.png](:/{WHITEBOARD})From the Monday meeting.",
                1718000000000, 1718000123456, tags=["work"]),
    TRAVEL: note(DIARY, "東京の旅行メモ", "## 東京\n\n浅草寺に行く。ラーメンを食べる。\n\n## 北京\n\n参观故宫，吃烤鸭。\n",
                 1720000000000, 1720000000001, tags=["旅行"]),
}
EXPECTED_TAGS = {
    "18d6e056285a4a07afefe0abd2c634d4": ("errands", "errands", 1796001425840, 1796001425840),
    "5f6eb9a96ee44b79994df9417ad39657": ("planning", "planning", 1796001425782, 1796001425782),
    "b2f77f49f98d42c8a556611b3200346d": ("work", "work", 1796001425790, 1796001425790),
    "edf0107ed5f74bb0b6f03dbb7316689e": ("旅行", "旅行", 1796001426006, 1796001426006),
}


def expected_attachments() -> dict[str, dict[str, object]]:
    import hashlib

    png = (RAW / "resources" / f"{WHITEBOARD}.png").read_bytes()
    return {
        WHITEBOARD: {"note_id": PHOTO, "title": "whiteboard.png", "filename": "whiteboard.png", "mime": "image/png",
                     "size": 70, "created_time": 1796001425955, "updated_time": 1796001425955,
                     "sha256": hashlib.sha256(png).hexdigest(), "bytes": 70},
        MINUTES: {"note_id": PHOTO, "title": "議事録.txt", "filename": "議事録.txt", "mime": "text/plain",
                  "size": 64, "created_time": 1796001425961, "updated_time": 1796001425961,
                  "sha256": hashlib.sha256(MINUTES_TXT).hexdigest(), "bytes": 64},
    }


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Workspace]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "fresh")}), load_entry_points=False)
    try:
        yield a.workspace
    finally:
        a.close()


@pytest.mark.parametrize("source", [JEX, RAW], ids=["jex", "raw"])
def test_a_joplin_export_imports_with_every_field(any_ws: Workspace, source: Path) -> None:
    summary = import_path(any_ws, source)
    assert summary.format == ("jex" if source == JEX else "raw")
    assert (summary.notebooks, summary.notes, summary.tags, summary.attachments) == (5, 6, 4, 2)
    assert (summary.skipped, summary.warnings, summary.messages) == (0, 0, [])
    got = state(any_ws)
    assert got["notebooks"] == EXPECTED_BOOKS
    assert got["notes"] == EXPECTED_NOTES
    assert got["tags"] == EXPECTED_TAGS
    assert got["attachments"] == expected_attachments()
    assert (RAW / "resources" / f"{MINUTES}.txt").read_bytes() == MINUTES_TXT


def test_imported_notes_are_in_the_change_feed(ws: Workspace) -> None:
    import sqlalchemy as sa

    from noteloom import db

    import_path(ws, JEX)
    with ws.read() as c:
        rows = c.execute(sa.select(db.note_changes.c.note_id, db.note_changes.c.kind)).all()
    assert sorted(rows) == sorted((nid, "create") for nid in EXPECTED_NOTES)


def add_item(folder: Path, item_id: str, text: str) -> None:
    (folder / f"{item_id}.md").write_text(text, encoding="utf-8")


def test_items_noteloom_does_not_model_are_skipped_and_counted(ws: Workspace, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    add_item(raw, "a" * 32, serialize_item(None, "", [("id", "a" * 32), ("content", "{}"), ("type_", 9)]))
    add_item(raw, "b" * 32, serialize_item(None, "", [("id", "b" * 32), ("item_id", PLAN), ("type_", 13)]))
    add_item(raw, "c" * 32, serialize_item(None, "", [("id", "c" * 32), ("note_id", "f" * 32),
                                                        ("tag_id", "5f6eb9a96ee44b79994df9417ad39657"), ("type_", 6)]))
    add_item(raw, "d" * 32, serialize_item("", "", [("id", "d" * 32), ("parent_id", PERSONAL),
                                                      ("encryption_cipher_text", "JED01…"), ("encryption_applied", 1),
                                                      ("type_", 1)]))
    add_item(raw, "e" * 32, serialize_item("Old", "bin", [("id", "e" * 32), ("parent_id", PERSONAL),
                                                            ("deleted_time", 1700000000000), ("type_", 1)]))
    add_item(raw, "0" * 32, serialize_item(None, "", [("id", "0" * 32), ("key", "locale"), ("type_", 3)]))
    resource = (raw / f"{WHITEBOARD}.md").read_text(encoding="utf-8")
    add_item(raw, WHITEBOARD, resource.replace("encryption_blob_encrypted: 0", "encryption_blob_encrypted: 1"))
    summary = import_path(ws, raw)
    assert (summary.notes, summary.attachments, summary.skipped, summary.warnings) == (6, 1, 7, 7)
    assert sorted(summary.messages) == [
        "skipped encrypted items; decrypt them in Joplin, then export again: 2 (dddddddd, 02b02c50)",
        "skipped items in Joplin's trash: 1 (eeeeeeee)",
        "skipped master keys; noteloom keeps no encryption keys: 1 (aaaaaaaa)",
        "skipped revisions; noteloom starts a fresh history: 1 (bbbbbbbb)",
        "skipped settings: 1 (00000000)",
        "skipped tag links to notes or tags missing from the export: 1 (cccccccc)",
    ]
    assert state(ws)["notes"] == EXPECTED_NOTES


def test_the_item_format_reads_back_what_it_writes() -> None:
    for body in ["", "one line", "ends with newline\n", "\n\nblank lines first", "a\n\nb: c\n\n", "x\r\ny"]:
        text = serialize_item("T", body, [("id", "1" * 32), ("source_url", "a\\nb\nc"), ("type_", 1)])
        item = parse_item(text)
        assert (item.title, item.body, item.get("source_url")) == ("T", body, "a\\nb\nc")


def test_a_jex_export_imports_back_identically(any_app: App, fresh: Workspace, tmp_path: Path) -> None:
    build_awkward_workspace(any_app.workspace)
    out = tmp_path / "all.jex"
    summary = export_workspace(any_app.workspace, out, "jex")
    assert (summary.notes, summary.attachments, summary.warnings) == (15, 5, 0)
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert all((n.endswith(".md") and "/" not in n) or n.startswith("resources/") for n in names)
    result = import_path(fresh, out)
    assert (result.skipped, result.warnings) == (0, 0)
    assert state(fresh) == state(any_app.workspace)


def test_importing_again_skips_what_exists_and_new_ids_makes_copies(ws: Workspace) -> None:
    import_path(ws, JEX)
    before = state(ws)
    again = import_path(ws, RAW)
    assert (again.notes, again.attachments, again.notebooks, again.skipped) == (0, 0, 0, 8)
    assert state(ws) == before
    copies = import_path(ws, JEX, duplicates="new-ids")
    assert (copies.notes, copies.attachments, copies.notebooks, copies.tags) == (6, 2, 5, 0)
    after = state(ws)
    new_photo = next(i for i, n in after["notes"].items() if n["title"] == "Whiteboard photo" and i != PHOTO)
    new_atts = {a["filename"]: i for i, a in after["attachments"].items() if a["note_id"] == new_photo}
    assert set(new_atts) == {"whiteboard.png", "議事録.txt"} and not set(new_atts.values()) & {WHITEBOARD, MINUTES}
    assert after["notes"][new_photo]["body"] == (
        f"[議事録.txt](:/{new_atts['議事録.txt']})![whiteboard.png](:/{new_atts['whiteboard.png']})"
        "From the Monday meeting."
    )
    assert {k: v for k, v in after["notes"].items() if k in EXPECTED_NOTES} == EXPECTED_NOTES


def jex_with(tmp_path: Path, extra: list[tuple[str, bytes]]) -> Path:
    """The fixture archive with more entries appended at its end."""
    out = tmp_path / "edited.jex"
    with tarfile.open(JEX) as src, tarfile.open(out, "w") as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, data in extra:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out


def test_a_corrupt_entry_late_in_the_archive_leaves_the_workspace_as_it_was(ws: Workspace, tmp_path: Path) -> None:
    mine = ws.create_note("Mine", "keep me")
    ws.add_attachment(mine.id, PNG, "mine.png")
    before, before_files = state(ws), files(ws)
    bad = jex_with(tmp_path, [("resources/" + "9" * 32 + ".bin", b"x" * 5000), ("9" * 32 + ".md", b"no properties here")])
    with pytest.raises(ImportExportError) as err:
        import_path(ws, bad)
    assert f"entry '{'9' * 32}.md' is not a Joplin item" in str(err.value) and "\n" not in str(err.value)
    assert state(ws) == before and files(ws) == before_files


@pytest.mark.parametrize("phase", ["writing", "files"])
def test_an_import_interrupted_while_writing_rolls_back_and_leaves_no_files(ws: Workspace, phase: str) -> None:
    ws.create_note("Mine", "keep me")
    before, before_files = state(ws), files(ws)
    seen: list[str] = []

    def progress(current: str, done: int, total: int) -> None:
        seen.append(current)
        if current == phase:
            # The user pressed Ctrl-C with rows written ("writing") or with the first
            # attachment file already moved into place ("files"), before the commit.
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_path(ws, JEX, progress=progress)
    assert phase in seen
    assert state(ws) == before and files(ws) == before_files


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(JEX.read_bytes()[:15000]), "is corrupt or truncated"),
        (lambda p: p.write_bytes(JEX.read_bytes()[:600]), "is corrupt or truncated"),
        (lambda p: p.write_bytes(b"PK\x03\x04 a zip, not a tar"), "is not a .jex archive (not a tar file)"),
        (lambda p: p.write_bytes(b""), "is not a .jex archive (not a tar file)"),
    ],
    ids=["truncated", "truncated-header", "not-a-tar", "empty"],
)
def test_a_bad_archive_is_one_line_and_changes_nothing(ws: Workspace, tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.jex"
    make(path)
    before_files = files(ws)
    with pytest.raises(ImportExportError) as err:
        import_path(ws, path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert state(ws)["notes"] == {} and files(ws) == before_files


def test_an_empty_workspace_is_not_exported_as_an_empty_archive(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(ImportExportError, match="nothing to export"):
        export_workspace(ws, tmp_path / "empty.jex", "jex")
    assert not (tmp_path / "empty.jex").exists() and not list(tmp_path.glob(".empty.jex*"))


def test_a_tar_without_joplin_items_is_refused(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "other.tar"
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("readme.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ImportExportError, match="holds no Joplin items"):
        import_path(ws, path)


def test_joplins_markdown_with_front_matter_export_imports_too(ws: Workspace) -> None:
    summary = import_path(ws, FIXTURES / "md_frontmatter")
    assert (summary.format, summary.notebooks, summary.notes, summary.tags, summary.attachments) == (
        "markdown", 5, 6, 4, 2)
    assert (summary.skipped, summary.warnings) == (0, 0)
    got = state(ws)
    paths = _paths(got["notebooks"])
    assert sorted(paths.values()) == ["Personal", "Work", "Work/Projects", "Work/Projects/Alpha", "日記"]
    atts = {a["filename"]: (i, a) for i, a in got["attachments"].items()}
    assert set(atts) == {"whiteboard.png", "議事録.txt"}
    png_id, png = atts["whiteboard.png"]
    txt_id, txt = atts["議事録.txt"]
    assert (png["mime"], png["bytes"], txt["mime"], txt["sha256"]) == (
        "image/png", 70, "text/plain", expected_attachments()[MINUTES]["sha256"])
    # Joplin's Markdown export keeps times to the second and "completed?" without a time.
    by_place = {(paths[n["notebook_id"]], n["title"]): (i, n) for i, n in got["notes"].items()}

    def second(ms: int | None) -> int | None:
        return None if ms is None else ms // 1000 * 1000

    for old in EXPECTED_NOTES.values():
        book = {ALPHA: "Work/Projects/Alpha", PROJECTS: "Work/Projects", PERSONAL: "Personal", DIARY: "日記"}[
            str(old["notebook_id"])]
        new = by_place[(book, old["title"])][1]
        body = str(old["body"]).replace(f":/{MINUTES}", f":/{txt_id}").replace(f":/{WHITEBOARD}", f":/{png_id}")
        assert new["body"].rstrip("\n") == body.rstrip("\n")
        assert (new["tags"], new["is_todo"], new["todo_due"], new["source_url"]) == (
            old["tags"], old["is_todo"], old["todo_due"], old["source_url"])
        assert (new["created_time"], new["updated_time"]) == (
            second(old["created_time"]), second(old["updated_time"]))  # type: ignore[arg-type]
        completed = second(old["updated_time"]) if old["todo_completed"] else None  # type: ignore[arg-type]
        assert new["todo_completed"] == completed
    assert png["note_id"] == txt["note_id"] == by_place[("Work/Projects", "Whiteboard photo")][0]


def _paths(books: dict[str, tuple[str | None, str, int, int]]) -> dict[str, str]:
    def path(i: str) -> str:
        parent, title = books[i][0], books[i][1]
        return f"{path(parent)}/{title}" if parent else title
    return {i: path(i) for i in books}
