"""Imports take only what they should: regular files inside the folder or archive, within
the byte caps, checked while streaming; a killed import leaves a consistent workspace;
bad Joplin times and bad export destinations are one-line errors or reported skips."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

import pytest
import sqlalchemy as sa

from interop_support import PNG, files, state
from noteloom import db
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.errors import ConfigError, ImportExportError
from noteloom.interop import ImportLimits, import_path
from noteloom.interop.bundle import AttachmentItem, BookItem, NoteItem
from noteloom.interop.joplin import folder_text, note_text, resource_text, serialize_item
from noteloom.interop.limits import CHUNK, Budget
from noteloom.interop.staging import CRASH_ENV, Staging, clean_stale
from noteloom.workspace import Workspace

FIXTURES = Path(__file__).parent / "fixtures" / "joplin"
JEX = FIXTURES / "sample.jex"
RAW = FIXTURES / "raw"
LINK = "skipped symbolic links; an import reads only the files inside its folder"
SPECIAL = "skipped special files (FIFOs, devices, sockets); an import reads only regular files"
BOOK, NOTE, RES = "a" * 32, "b" * 32, "c" * 32
SAFETY = 120  # seconds: only a net for a regression that would hang, never a wait


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cli(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A real ``noteloom`` process, as a user runs it."""
    home.mkdir(parents=True, exist_ok=True)
    full = {**os.environ, "NOTELOOM_HOME": str(home), **(env or {})}
    full.pop("NOTELOOM_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "noteloom", *args], env=full, capture_output=True, text=True, timeout=SAFETY,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


# -- links, devices and FIFOs are never followed ---------------------------------------------


@pytest.fixture
def hostile_folder(tmp_path: Path) -> Path:
    """A Markdown folder with a real note beside a link to a private file, a FIFO, a link
    to /dev/zero, a linked folder and links to all of them from the note."""
    secret = write(tmp_path / "private" / "passwd", "root:x:0:0:SECRET")
    write(tmp_path / "private" / "inner.md", "SECRET note outside")
    root = tmp_path / "notes"
    write(root / "real.md", "![pic](pic.png) [p](passwd.txt) [f](pipe.bin) [z](zero.bin)\n")
    (root / "pic.png").write_bytes(PNG)
    (root / "passwd.md").symlink_to(secret)
    (root / "passwd.txt").symlink_to(secret)
    os.mkfifo(root / "x.md")
    os.mkfifo(root / "pipe.bin")
    (root / "zero.md").symlink_to("/dev/zero")
    (root / "zero.bin").symlink_to("/dev/zero")
    (root / "Linked").symlink_to(tmp_path / "private", target_is_directory=True)
    return root


def test_a_markdown_import_reads_no_link_fifo_or_device_and_reports_each(tmp_path: Path, hostile_folder: Path) -> None:
    # A subprocess: a regression that opened the FIFO would hang it, not the test run.
    done = cli("import", str(hostile_folder), "--json", "--no-progress", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["notes"], summary["attachments"], summary["skipped"]) == (1, 1, 7)
    assert summary["messages"] == [f"{LINK}: 5 (Linked, passwd.md, zero.md, …)", f"{SPECIAL}: 2 (x.md, pipe.bin)"]
    assert [(s["item"], s["reason"]) for s in summary["skipped_items"]] == [
        ("Linked", LINK), ("passwd.md", LINK), ("x.md", SPECIAL), ("zero.md", LINK),
        ("passwd.txt", LINK), ("pipe.bin", SPECIAL), ("zero.bin", LINK),
    ]
    listed = json.loads(cli("notes", "list", "--json", home=tmp_path / "home").stdout)
    assert [n["title"] for n in listed] == ["real"]
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "home")}), load_entry_points=False)
    try:
        st = state(app.workspace)
    finally:
        app.close()
    assert "SECRET" not in json.dumps(st)
    (note,) = st["notes"].values()
    (att,) = st["attachments"].values()
    assert att["bytes"] == len(PNG)
    # Links to what was skipped stay as the user wrote them.
    assert note["body"].endswith("[p](passwd.txt) [f](pipe.bin) [z](zero.bin)\n")


def test_an_in_process_import_reports_the_same_skips(ws: Workspace, hostile_folder: Path) -> None:
    (hostile_folder / "x.md").unlink()  # in-process: no FIFO named like a note
    summary = import_path(ws, hostile_folder)
    assert summary.skipped == 6
    assert summary.messages == [f"{LINK}: 5 (Linked, passwd.md, zero.md, …)", f"{SPECIAL}: 1 (pipe.bin)"]
    assert "SECRET" not in json.dumps(state(ws))


def test_a_raw_folder_skips_linked_and_special_items_and_resources(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    outside = tmp_path / "outside.md"
    shutil.copyfile(RAW / "02b02c50e6494af5837cffa6c7f526ac.md", outside)
    (raw / f"{'1' * 32}.md").symlink_to(outside)
    os.mkfifo(raw / f"{'2' * 32}.md")
    (raw / f"{'3' * 32}.md").symlink_to("/dev/zero")
    (raw / "resources" / f"{'4' * 32}.png").symlink_to("/etc/passwd")
    done = cli("import", str(raw), "--json", "--no-progress", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["notes"], summary["attachments"]) == (6, 2)
    kinds = {m.split(": ")[0]: m for m in summary["messages"]}
    assert kinds[LINK] == f"{LINK}: 3 ({'1' * 32}.md, {'3' * 32}.md, resources/{'4' * 32}.png)"
    assert kinds[SPECIAL] == f"{SPECIAL}: 1 ({'2' * 32}.md)"


def _jex(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> Path:
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info, None


def _items() -> list[tuple[tarfile.TarInfo, bytes]]:
    book = BookItem(BOOK, "Box", None, 1_700_000_000_000, 1_700_000_000_000)
    note = NoteItem(NOTE, BOOK, "Inside", f"![x](:/{RES})", 1_700_000_000_000, 1_700_000_000_000)
    res = AttachmentItem(RES, NOTE, "x.png", "x.png", "image/png", len(PNG), 1_700_000_000_000,
                         1_700_000_000_000, Path("unused"))
    return [
        _file(f"{BOOK}.md", folder_text(book).encode()),
        _file(f"{NOTE}.md", note_text(note).encode()),
        _file(f"{RES}.md", resource_text(res, "png").encode()),
        _file(f"resources/{RES}.png", PNG),
    ]


def test_archive_links_devices_fifos_and_escaping_paths_are_skipped_and_reported(ws: Workspace, tmp_path: Path) -> None:
    jex = _jex(tmp_path / "hostile.jex", [
        *_items(),
        _special(f"{'1' * 32}.md", tarfile.SYMTYPE, "/etc/passwd"),
        _special(f"{'2' * 32}.md", tarfile.LNKTYPE, f"{NOTE}.md"),
        _special(f"resources/{'3' * 32}.png", tarfile.CHRTYPE),
        _special(f"resources/{'4' * 32}.png", tarfile.FIFOTYPE),
        _file(f"/abs/{'5' * 32}.md", b"x"),
        _file(f"../{'6' * 32}.md", b"x"),
    ])
    summary = import_path(ws, jex)
    assert (summary.notes, summary.notebooks, summary.attachments, summary.skipped) == (1, 1, 1, 6)
    assert summary.messages == [
        "skipped archive members that are links or special files; an import reads only regular files: "
        f"4 ({'1' * 32}.md, {'2' * 32}.md, resources/{'3' * 32}.png, …)",
        "skipped archive members whose path is absolute or leads outside the archive: "
        f"2 (/abs/{'5' * 32}.md, ../{'6' * 32}.md)",
    ]
    (note,) = state(ws)["notes"].values()
    assert note["title"] == "Inside"


@pytest.mark.parametrize("fmt", ["gnu", "posix"])  # GNU sparse headers, and PAX's GNU.sparse.* records
def test_a_sparse_archive_member_is_skipped_without_writing_its_holes(ws: Workspace, tmp_path: Path, fmt: str) -> None:
    src = tmp_path / "src"
    (src / "resources").mkdir(parents=True)
    for info, data in _items():
        (src / info.name).write_bytes(data)
    hole = src / "resources" / f"{'7' * 32}.bin"
    with open(hole, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB of holes, a few KB in the archive
        f.write(b"end")
    jex = tmp_path / "sparse.jex"
    subprocess.run(["tar", "--sparse", f"--format={fmt}", "-cf", str(jex), "-C", str(src), "."], check=True,
                   timeout=SAFETY)
    assert jex.stat().st_size < 1 << 20
    summary = import_path(ws, jex)
    assert summary.messages == [f"skipped sparse archive members (Joplin never writes them): 1 (./resources/{'7' * 32}.bin)"]
    assert (summary.notes, summary.attachments) == (1, 1)
    assert sum(files(ws).values()) < 1 << 20


# -- caps, checked while streaming ------------------------------------------------------------


class Endless(io.RawIOBase):
    """``/dev/zero`` as a file object that counts what was read from it."""

    def __init__(self) -> None:
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = len(b)
        b[:n] = bytes(n)
        self.read_bytes += n
        return n


def test_the_caps_stop_an_endless_stream_after_one_chunk_at_most() -> None:
    budget = Budget(ImportLimits(max_note_bytes=3 * CHUNK + 5, max_attachment_bytes=2 * CHUNK, max_total_bytes=1 << 40))
    note = Endless()
    with pytest.raises(ImportExportError) as err:
        budget.read_note(io.BufferedReader(note), "zero.md")
    assert "'zero.md' is larger than 3 MiB, the cap on one note" in str(err.value)
    assert "max_note_bytes in the [import] table of noteloom.toml" in str(err.value)
    assert note.read_bytes <= 4 * CHUNK + 8192
    att = Endless()
    with pytest.raises(ImportExportError) as err:
        budget.copy_attachment(io.BufferedReader(att), io.BytesIO(), "big.bin")
    assert "attachment 'big.bin' is larger than 2 MiB" in str(err.value) and "max_attachment_bytes" in str(err.value)
    assert att.read_bytes <= 3 * CHUNK + 8192


def _gz_bomb(path: Path, member: str, size: int) -> Path:
    """A gzip'd archive whose ``member`` inflates to ``size`` zero bytes (about size/1000 on disk)."""

    class Zeros(io.RawIOBase):
        left = size

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n

    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for info, data in _items():
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(member)
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros()))
    return path


@pytest.mark.parametrize(
    ("member", "limits", "message"),
    [
        (f"{'8' * 32}.md", ImportLimits(max_note_bytes=1 << 20),
         f"'{'8' * 32}.md' is larger than 1 MiB, the cap on one note; raise max_note_bytes"),
        (f"resources/{'9' * 32}.bin", ImportLimits(max_attachment_bytes=1 << 20),
         f"attachment 'resources/{'9' * 32}.bin' is larger than 1 MiB, the cap on one attachment; raise max_attachment_bytes"),
        ("unrelated.bin", ImportLimits(max_total_bytes=4 << 20),
         "the import stopped at 'unrelated.bin': the archive holds more than 4 MiB uncompressed; raise max_total_bytes"),
    ],
    ids=["note", "attachment", "total"],
)
def test_an_archive_bomb_stops_with_the_cap_it_broke_and_changes_nothing(
    any_ws: Workspace, tmp_path: Path, member: str, limits: ImportLimits, message: str
) -> None:
    ws = any_ws
    ws.create_note("Mine", "keep me")
    before, before_files = state(ws), files(ws)
    bomb = _gz_bomb(tmp_path / "bomb.jex", member, 64 << 20)
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(ImportExportError) as err:
        import_path(ws, bomb, limits=limits)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert state(ws) == before and files(ws) == before_files


def test_the_total_cap_counts_every_file_of_a_folder(ws: Workspace, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    links = []
    for i in range(4):
        (root / f"f{i}.bin").parent.mkdir(parents=True, exist_ok=True)
        (root / f"f{i}.bin").write_bytes(bytes(400_000))
        links.append(f"[f](f{i}.bin)")
    write(root / "a.md", " ".join(links))
    before_files = files(ws)
    with pytest.raises(ImportExportError) as err:
        import_path(ws, root, limits=ImportLimits(max_total_bytes=1_000_000))
    assert "reads more than 1,000,000 bytes in all; raise max_total_bytes" in str(err.value)
    assert state(ws)["notes"] == {} and files(ws) == before_files


def test_caps_come_from_the_import_table_of_the_settings_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text("[import]\nmax_note_bytes = 1000\n", encoding="utf-8")
    folder = tmp_path / "notes"
    write(folder / "big.md", "x" * 2000)
    line = one_line_error(cli("import", str(folder), "--no-progress", home=home))
    assert line == (
        "error: 'big.md' is larger than 1,000 bytes, the cap on one note; "
        "raise max_note_bytes in the [import] table of noteloom.toml to import it"
    )
    (home / "noteloom.toml").write_text("[import]\nmax_note_bytes = 5000\n", encoding="utf-8")
    assert cli("import", str(folder), "--no-progress", home=home).returncode == 0


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"max_note_bytes": 0}, "[import] max_note_bytes must be a whole number of bytes > 0, not 0"),
        ({"max_total_bytes": "1G"}, "[import] max_total_bytes must be a whole number of bytes > 0, not '1G'"),
        ({"max_notes": 5}, "[import] 'max_notes' is not a setting"),
    ],
)
def test_bad_caps_are_config_errors(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        ImportLimits.from_section(section)
    assert message in str(err.value)


# -- Joplin values out of range -------------------------------------------------------------------


def test_joplin_times_out_of_range_are_dropped_with_a_warning_naming_the_item(ws: Workspace, tmp_path: Path) -> None:
    book = BookItem(BOOK, "Box", None, 1_700_000_000_000, 1_700_000_000_000)
    note = NoteItem(NOTE, BOOK, "Due", "", 1_700_000_000_000, 1_700_000_000_001, is_todo=True,
                    todo_due=10**15, todo_completed=1_700_000_000_002)
    other = NoteItem("d" * 32, BOOK, "Early", "", 1_700_000_000_000, 1_700_000_000_000)
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / f"{BOOK}.md").write_text(folder_text(book), encoding="utf-8")
    (raw / f"{NOTE}.md").write_text(note_text(note), encoding="utf-8")
    bad_created = note_text(other).replace("user_created_time: 2023-11-14T22:13:20.000Z",
                                           "user_created_time: -5")
    (raw / f"{'d' * 32}.md").write_text(bad_created, encoding="utf-8")
    summary = import_path(ws, raw)
    assert summary.notes == 2 and summary.skipped == 0
    assert summary.messages == [
        "ignored times outside 1970 … 9999 (the item was imported without them): 2 "
        f"({NOTE}.md todo_due: 1000000000000000, {'d' * 32}.md user_created_time: -5)"
    ]
    notes = {n["title"]: n for n in state(ws)["notes"].values()}
    assert notes["Due"]["todo_due"] is None and notes["Due"]["todo_completed"] == 1_700_000_000_002
    assert notes["Early"]["created_time"] == 1_700_000_000_000  # from created_time, the next field


# -- exports: one line, never a traceback ------------------------------------------------------


@pytest.fixture
def home_with_a_note(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    assert cli("import", str(JEX), "--no-progress", home=home).returncode == 0
    return home


def test_export_into_a_symlinked_folder_is_refused_in_one_line(tmp_path: Path, home_with_a_note: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    line = one_line_error(cli("export", str(tmp_path / "link"), "--format", "md", home=home_with_a_note))
    assert line == (
        f"error: '{tmp_path / 'link'}' is a symbolic link; noteloom does not export through links, give the real path"
    )
    (tmp_path / "link.jex").symlink_to(tmp_path / "elsewhere.jex")
    assert "is a symbolic link" in one_line_error(cli("export", str(tmp_path / "link.jex"), home=home_with_a_note))
    assert list(real.iterdir()) == [] and not (tmp_path / "elsewhere.jex").exists()


def test_export_under_a_file_or_into_a_folder_it_cannot_write_is_one_line(tmp_path: Path, home_with_a_note: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    line = one_line_error(cli("export", str(tmp_path / "file.txt" / "out"), "--format", "md", home=home_with_a_note))
    assert line == f"error: '{tmp_path / 'file.txt'}' is a file, not a folder; export to a path inside a folder"
    line = one_line_error(cli("export", str(tmp_path / "file.txt"), "--format", "md", home=home_with_a_note))
    assert "exists already" in line
    # /sys refuses new files even to root, which the tests may run as.
    for dest, fmt in (("/sys/noteloom-export.jex", "jex"), ("/sys/noteloom-export", "md")):
        line = one_line_error(cli("export", dest, "--format", fmt, home=home_with_a_note))
        assert line.startswith(f"error: cannot write the export to '{dest}' (") and line.endswith(
            "); choose a folder you can write to"
        )


# -- the commit window: killed at any point, consistent after -------------------------------------


def _consistency(home: Path) -> tuple[int, int]:
    """(notes, attachments) after the app opened the workspace; asserts rows and files agree
    and that no staging folder is left."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        with ws.read() as c:
            rows = {r.id: r.filename for r in c.execute(sa.select(db.attachments))}
            notes = c.execute(sa.select(sa.func.count()).select_from(db.notes)).scalar_one()
        on_disk = {p.name for p in ws.attachments_dir.iterdir()} if ws.attachments_dir.is_dir() else set()
        assert on_disk == {ws.attachment_path(aid, name).name for aid, name in rows.items()}
        assert list(home.glob(".import-*")) == []
        return notes, len(rows)
    finally:
        app.close()


@pytest.mark.parametrize(
    ("point", "expected"),
    [("staged", (0, 0)), ("rows", (0, 0)), ("moved", (0, 0)), ("committed", (6, 2))],
)
def test_an_import_killed_at_any_point_leaves_rows_and_files_in_agreement(
    tmp_path: Path, point: str, expected: tuple[int, int]
) -> None:
    home = tmp_path / "home"
    done = cli("import", str(JEX), "--no-progress", home=home, env={CRASH_ENV: point})
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert list(home.glob(".import-*")), "the killed import left its staging folder"
    if point == "moved":
        # The files are in place, their rows never committed: the journal tells the clean-up.
        assert len(list((home / "attachments").iterdir())) == 2
    assert _consistency(home) == expected
    # And the workspace still imports normally afterwards.
    again = cli("import", str(JEX), "--no-progress", home=home)
    assert again.returncode == 0, again.stderr
    assert _consistency(home) == (6, 2)


def test_a_staging_folder_in_use_is_kept_and_a_stale_one_removed(ws: Workspace) -> None:
    stale = ws.data_dir / ".import-stale1"
    stale.mkdir()
    (stale / "attachment-0").write_bytes(b"left over")
    with Staging(ws.data_dir) as live:
        (live.path / "attachment-0").write_bytes(b"in use")
        assert clean_stale(ws) == 1
        assert live.path.is_dir() and not stale.exists()
    assert list(ws.data_dir.glob(".import-*")) == []


def test_the_readme_shows_the_default_caps() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n[import]\n", 1)[1].split("```", 1)[0]
    shown = tomllib.loads("[import]\n" + block)["import"]
    assert ImportLimits.from_section(shown) == ImportLimits()
    assert set(shown) == {"max_note_bytes", "max_attachment_bytes", "max_total_bytes"}



def test_joplin_notebooks_whose_parents_form_a_loop_become_top_level(ws: Workspace, tmp_path: Path) -> None:
    a, b, c, own = "1" * 32, "2" * 32, "3" * 32, "4" * 32
    raw = tmp_path / "raw"
    raw.mkdir()
    t = 1_700_000_000_000
    for book in (BookItem(a, "A", c, t, t), BookItem(b, "B", a, t, t), BookItem(c, "C", b, t, t),
                 BookItem(own, "Own", own, t, t), BookItem(BOOK, "Fine", None, t, t)):
        (raw / f"{book.id}.md").write_text(folder_text(book), encoding="utf-8")
    (raw / f"{NOTE}.md").write_text(note_text(NoteItem(NOTE, b, "In B", "x", t, t)), encoding="utf-8")
    summary = import_path(ws, raw)
    assert summary.messages == [f"made notebooks whose parents form a loop top-level: 2 ({a[:8]}, {own[:8]})"]
    parents = {book_id: parent for book_id, (parent, *_rest) in state(ws)["notebooks"].items()}
    assert parents == {a: None, b: a, c: b, own: None, BOOK: None}


def test_a_lock_file_removed_before_it_was_locked_is_made_again(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tempfile.mkstemp
    calls: list[str] = []

    def mkstemp_then_cleaned(**kwargs: str) -> tuple[int, str]:
        fd, name = real(**kwargs)
        calls.append(name)
        if len(calls) == 1:
            assert clean_stale(ws) == 0  # an unheld lock without a folder: the clean-up removes it
            assert not Path(name).exists()
        return fd, name

    monkeypatch.setattr("noteloom.interop.staging.tempfile.mkstemp", mkstemp_then_cleaned)
    with Staging(ws.data_dir) as staging:
        assert len(calls) == 2 and staging.lock_path == Path(calls[1]) and staging.lock_path.exists()
        assert clean_stale(ws) == 0 and staging.path.is_dir()


def test_nul_characters_and_overlong_titles_are_fixed_and_reported(any_ws: Workspace, tmp_path: Path) -> None:
    t = 1_700_000_000_000
    tag = "e" * 32
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / f"{BOOK}.md").write_text(folder_text(BookItem(BOOK, "B" * 1500, None, t, t)), encoding="utf-8")
    note = NoteItem(NOTE, BOOK, "nul\x00title", "body", t, t, source_url="https://x.test/\x00")
    (raw / f"{NOTE}.md").write_text(note_text(note), encoding="utf-8")
    (raw / f"{tag}.md").write_text(
        serialize_item("t\x00ag", "", [("id", tag), ("created_time", t), ("updated_time", t), ("type_", 5)]),
        encoding="utf-8",
    )
    link = serialize_item(None, "", [("id", "f" * 32), ("note_id", NOTE), ("tag_id", tag), ("type_", 6)])
    (raw / f"{'f' * 32}.md").write_text(link, encoding="utf-8")
    summary = import_path(any_ws, raw)
    assert summary.messages == [
        f"shortened notebook and tag titles to 1,000 characters: 1 ({BOOK[:8]})",
        f"removed NUL characters from titles and other fields: 4 ({tag[:8]}, {NOTE[:8]}, {NOTE[:8]}, …)",
    ]
    st = state(any_ws)
    assert st["notebooks"][BOOK][1] == "B" * 1000
    (n,) = st["notes"].values()
    assert (n["title"], n["source_url"], n["tags"]) == ("nultitle", "https://x.test/", ["tag"])


def test_an_archive_with_a_huge_extended_header_stops_before_reading_it(ws: Workspace, tmp_path: Path) -> None:
    bomb = tmp_path / "header.jex"
    with tarfile.open(bomb, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in _items():
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"{'9' * 32}.md")
        info.pax_headers = {"comment": "x" * (64 << 20)}  # 64 MiB read whole by tarfile itself
        tar.addfile(info, io.BytesIO(b""))
    assert bomb.stat().st_size < 1 << 20
    before_files = files(ws)
    with pytest.raises(ImportExportError) as err:
        import_path(ws, bomb)
    assert "-byte tar header at byte" in str(err.value) and "not a Joplin export" in str(err.value)
    assert state(ws)["notes"] == {} and files(ws) == before_files


def test_an_xz_archive_is_refused_before_any_decompression(ws: Workspace, tmp_path: Path) -> None:
    archive = tmp_path / "notes.jex"
    with tarfile.open(archive, "w:xz") as tar:
        for info, data in _items():
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ImportExportError) as err:
        import_path(ws, archive)
    assert str(err.value) == "'notes.jex' is xz-compressed; decompress it (xz -d) or export it again from Joplin"
    gz = tmp_path / "notes.jex.gz"
    with tarfile.open(gz, "w:gz") as tar:
        for info, data in _items():
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert import_path(ws, gz).notes == 1  # gzip (and bzip2) stay welcome
