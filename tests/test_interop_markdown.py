"""Markdown folders in and out: front matter, notebooks from folders, attachments from
relative links, and an export that imports back identically."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interop_support import PNG, build_awkward_workspace, files, state
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import ImportExportError
from noteloom.interop import export_workspace, import_path
from noteloom.interop.frontmatter import _Loader, dump, parse, split
from noteloom.interop.markdown import MANIFEST, inline_tags
from noteloom.workspace import Workspace


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Workspace]:
    """A second, empty SQLite workspace to import into."""
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "fresh")}), load_entry_points=False)
    try:
        yield a.workspace
    finally:
        a.close()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A hand-written Markdown folder, the way people keep notes outside any app."""
    root = tmp_path / "My notes"
    write(root / "Inbox.md", "Some intro\n\n# Inbox heading\n\nText with #idea and #2024 and `#code`.\n")
    write(
        root / "Work" / "plan.md",
        "---\n"
        "id: 0123456789abcdef0123456789abcdef\n"
        "title: The plan\n"
        "tags: [work, Planning]\n"
        "created: 2024-01-15T09:30:00.250Z\n"
        "updated: 1706781600000\n"
        "is_todo: true\n"
        "due: 2024-03-01\n"
        "completed: '2024-02-20T10:00:00+01:00'\n"
        "source_url: https://example.com/plan\n"
        "---\n"
        "\n"
        "![diagram](_resources/diagram.png) and [spec](../files/spec%20v2.pdf \"Spec\")\n"
        "[gone](_resources/missing.png) [site](https://example.com/x.png) <img src=\"_resources/diagram.png\">\n",
    )
    (root / "Work" / "_resources").mkdir(parents=True)
    (root / "Work" / "_resources" / "diagram.png").write_bytes(PNG)
    (root / "files").mkdir()
    (root / "files" / "spec v2.pdf").write_bytes(b"%PDF-1.4 spec")
    write(root / "Work" / "Sub" / "Deep note.md", "no heading here, #later\n")
    write(root / "_assets" / "not a note.md", "# hidden by the underscore\n")
    write(root / ".obsidian" / "workspace.md", "# app settings\n")
    os.utime(root / "Work" / "Sub" / "Deep note.md", ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    return root


def by_title(ws: Workspace) -> dict[str, dict[str, object]]:
    return {n["title"]: {"id": i, **n} for i, n in state(ws)["notes"].items()}  # type: ignore[dict-item]


def test_a_markdown_folder_becomes_notebooks_notes_tags_and_attachments(ws: Workspace, folder: Path) -> None:
    summary = import_path(ws, folder)
    assert (summary.format, summary.notes, summary.attachments, summary.skipped) == ("markdown", 3, 2, 0)
    books = {b.id: b for b in ws.list_notebooks()}
    paths = {"/".join(x.title for x in ws.notebook_path(b)): b for b in books}
    assert sorted(paths) == ["My notes", "Work", "Work/Sub"]  # no files/, _assets/, .obsidian/
    notes = by_title(ws)
    assert set(notes) == {"Inbox heading", "The plan", "Deep note"}

    inbox = notes["Inbox heading"]
    assert inbox["notebook_id"] == paths["My notes"] and inbox["tags"] == []
    deep = notes["Deep note"]
    assert deep["notebook_id"] == paths["Work/Sub"]
    assert deep["created_time"] == deep["updated_time"] == 1_600_000_000_000

    plan = notes["The plan"]
    assert plan["id"] == "0123456789abcdef0123456789abcdef"
    assert plan["notebook_id"] == paths["Work"]
    assert plan["tags"] == ["Planning", "work"]
    assert plan["created_time"] == 1_705_311_000_250 and plan["updated_time"] == 1_706_781_600_000
    assert plan["is_todo"] is True
    assert plan["todo_due"] == 1_709_251_200_000  # a bare date is midnight UTC
    assert plan["todo_completed"] == 1_708_419_600_000
    assert plan["source_url"] == "https://example.com/plan"

    atts = {a.filename: a for a in ws.list_attachments()}
    assert set(atts) == {"diagram.png", "spec v2.pdf"}
    diagram, spec = atts["diagram.png"], atts["spec v2.pdf"]
    assert (diagram.note_id, diagram.mime, diagram.size) == (plan["id"], "image/png", len(PNG))
    assert (spec.title, spec.mime) == ("spec v2.pdf", "application/pdf")
    assert ws.attachment_path(spec.id, spec.filename).read_bytes() == b"%PDF-1.4 spec"
    assert plan["body"] == (
        f"![diagram](:/{diagram.id}) and [spec](:/{spec.id} \"Spec\")\n"
        f"[gone](_resources/missing.png) [site](https://example.com/x.png) <img src=\":/{diagram.id}\">\n"
    )


def test_inline_tags_are_read_only_when_asked(ws: Workspace, folder: Path, fresh: Workspace) -> None:
    import_path(ws, folder)
    assert by_title(ws)["Inbox heading"]["tags"] == []
    import_path(fresh, folder, inline_tags=True)
    notes = by_title(fresh)
    assert notes["Inbox heading"]["tags"] == ["idea"]  # not #2024, not inside code
    assert notes["Deep note"]["tags"] == ["later"]
    assert notes["The plan"]["tags"] == ["Planning", "work"]


def test_inline_tags_skip_code_headings_numbers_and_anchors() -> None:
    body = "# Heading\n#tag1 text #tag-two, (#three)\n```\n#not\n```\nurl http://x.org/#frag #42 `#nope`\n"
    assert inline_tags(body) == ["tag1", "tag-two"]


def test_the_import_goes_under_the_notebook_named_with_notebook(ws: Workspace, folder: Path) -> None:
    target = ws.create_notebook("Archive")
    import_path(ws, folder, notebook="Archive")
    paths = sorted("/".join(x.title for x in ws.notebook_path(b.id)) for b in ws.list_notebooks())
    assert paths == ["Archive", "Archive/Work", "Archive/Work/Sub"]
    assert by_title(ws)["Inbox heading"]["notebook_id"] == target.id


def test_an_unknown_target_notebook_is_refused_before_anything_is_read(ws: Workspace, folder: Path) -> None:
    with pytest.raises(Exception, match="no notebook named 'Nowhere'"):
        import_path(ws, folder, notebook="Nowhere")
    assert state(ws)["notes"] == {}


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("created: last tuesday\n", "Work/bad.md: created is 'last tuesday', which is not a time"),
        ("due: 2024-13-45\n", "Work/bad.md: due is '2024-13-45', which is not a time"),
        ("title: [unclosed\n", "Work/bad.md: the front matter is not valid YAML at line"),
    ],
)
def test_bad_front_matter_fails_the_whole_import_with_one_line(
    ws: Workspace, folder: Path, front: str, message: str
) -> None:
    write(folder / "Work" / "bad.md", f"---\n{front}---\nbody\n")
    before, before_files = state(ws), files(ws)
    with pytest.raises(ImportExportError) as err:
        import_path(ws, folder)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert state(ws) == before and files(ws) == before_files


def test_a_folder_without_notes_is_refused(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(PNG)
    with pytest.raises(ImportExportError, match="holds neither Markdown notes"):
        import_path(ws, tmp_path / "pics")


def test_a_missing_path_is_refused(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(ImportExportError, match="does not exist"):
        import_path(ws, tmp_path / "nope")


def test_front_matter_is_split_off_without_touching_the_body() -> None:
    assert split("---\na: 1\n---\n\nbody\n") == ("a: 1\n", "body\n")
    assert split("---\na: 1\n---\nbody") == ("a: 1\n", "body")
    assert split("---\na: 1\n---\n\n\nbody") == ("a: 1\n", "\nbody")
    assert split("---\r\na: 1\r\n---\r\n\r\nbody") == ("a: 1\r\n", "body")
    assert split("--- not\n") == (None, "--- not\n")
    assert split("---\nno end") == (None, "---\nno end")


def test_a_markdown_export_imports_back_identically(any_app: App, fresh: Workspace, tmp_path: Path) -> None:
    ws = any_app.workspace
    build_awkward_workspace(ws)
    out = tmp_path / "export"
    summary = export_workspace(ws, out, "md")
    assert (summary.notes, summary.attachments, summary.warnings) == (15, 5, 0)
    result = import_path(fresh, out)
    assert (result.notes, result.attachments, result.skipped, result.warnings) == (15, 5, 0, 0)
    assert state(fresh) == state(ws)


def test_export_file_names_are_safe_and_unique(ws: Workspace, tmp_path: Path) -> None:
    ids = build_awkward_workspace(ws)
    out = tmp_path / "export"
    export_workspace(ws, out, "md")
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert "Same/Same.md" in names and "Same/Same (2).md" in names and "Same/SAME (3).md" in names
    assert "same (2)/con_.md" in names  # a device name on Windows
    assert "a_b_ c_ _d_/a_b_c_______.md" in names
    assert "drafts/Untitled.md" in names and "drafts/---.md" in names
    assert "CON_" in names and "Work/Empty" in names
    assert {"_resources/whiteboard.png", "_resources/whiteboard (2).png", "_resources/README"} <= set(names)
    assert "_resources/議事録 (draft).txt" in names and "_resources/orphan.pdf" in names
    assert MANIFEST in names
    assert not [n for n in names if "trash" in n.lower()]
    photo = (out / "Work" / "Projects" / "Whiteboard photo.md").read_text(encoding="utf-8")
    assert "![board](../../_resources/whiteboard.png)" in photo
    assert "[Minutes](../../_resources/議事録%20%28draft%29.txt \"the minutes\")" in photo
    assert "<img src=\"../../_resources/whiteboard%20%282%29.png\"" in photo
    assert f"[the plan](:/{ids['plan']})" in photo  # links between notes stay as ids
    assert photo.startswith(f"---\nid: {ids['photo']}\ntitle: Whiteboard photo\n")


def test_an_export_never_writes_over_existing_files(ws: Workspace, tmp_path: Path) -> None:
    ws.create_note("n", "b")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    with pytest.raises(ImportExportError, match="exists already"):
        export_workspace(ws, tmp_path / "taken", "md")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["mine.txt"]
    (tmp_path / "empty").mkdir()
    export_workspace(ws, tmp_path / "empty", "md")
    assert (tmp_path / "empty" / "Notes" / "n.md").is_file()


_texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_values = st.one_of(
    _texts, st.booleans(), st.none(), st.integers(), st.lists(_texts, max_size=3),
    st.sampled_from(["yes", "No", "null", "on", "0123456789abcdef0123456789abcdef", "12345678901234567890123456789012",
                     "1e5", "0x1F", "2024-01-02", "a: b", "- x", "'q'", "it's", " lead", "trail ", "#tag"]),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["id", "title", "tags", "created", "is_todo", "completed?", "x"]), _values))
def test_the_fast_front_matter_reader_agrees_with_yaml(data: dict[str, object]) -> None:
    import yaml

    text = dump(data)
    assert parse(text, "note.md") == yaml.load(text, Loader=_Loader)
    lines = [line for d in (data, {"k": "v"}) for line in dump(d).splitlines()]
    for line in lines:  # hand-written variants: one line at a time, and unquoted
        for variant in (line, line.replace("'", "")):
            try:
                expected = yaml.load(variant, Loader=_Loader)
            except yaml.YAMLError:
                continue
            if isinstance(expected, dict):
                assert parse(variant, "note.md") == expected


def test_exported_front_matter_takes_the_fast_reader() -> None:
    from noteloom.interop.bundle import NoteItem
    from noteloom.interop.frontmatter import _parse_simple
    from noteloom.interop.markdown import note_front_matter

    n = NoteItem("0123456789abcdef0123456789abcdef", None, "Project plan", "", 1, 2, is_todo=True,
                 todo_due=3, tags=["work", "日本"])
    assert _parse_simple(dump(note_front_matter(n))) == {
        "id": n.id, "title": "Project plan", "tags": ["work", "日本"], "created": "1970-01-01T00:00:00.001Z",
        "updated": "1970-01-01T00:00:00.002Z", "is_todo": True, "due": "1970-01-01T00:00:00.003Z",
    }


def test_links_leading_out_of_the_folder_are_not_imported(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    root = tmp_path / "notes"
    write(root / "a.md", "[up](../secret.txt) [via link](files/link.txt)\n")
    (root / "files").mkdir()
    (root / "files" / "link.txt").symlink_to(secret)
    summary = import_path(ws, root)
    assert summary.attachments == 0
    assert summary.messages == [
        "left links to files outside the folder as they were: 1 (../secret.txt)",
        "skipped symbolic links; an import reads only the files inside its folder: 1 (files/link.txt)",
    ]
    assert by_title(ws)["a"]["body"] == "[up](../secret.txt) [via link](files/link.txt)\n"


def test_a_dangling_link_named_like_a_note_is_skipped_and_reported(ws: Workspace, folder: Path) -> None:
    (folder / "Work" / "dangling.md").symlink_to(folder / "nowhere.md")
    summary = import_path(ws, folder)
    assert "skipped symbolic links; an import reads only the files inside its folder: 1 (Work/dangling.md)" in (
        summary.messages
    )
    assert "dangling" not in {n["title"] for n in state(ws)["notes"].values()}
