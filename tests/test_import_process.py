"""A large Markdown folder is read in a child process: the same workspace, notices and
errors as when a thread reads it, and no reading process outlives its import."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interop_support import PNG, build_awkward_workspace, files, state
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.errors import ImportExportError
from noteloom.interop import ImportLimits, export_workspace, import_path, writer
from noteloom.interop.readahead import ProcessReadAhead
from noteloom.workspace import Workspace

SAFETY = 120  # seconds: only a net for a regression that would hang, never a wait


@contextmanager
def _workspace(home: Path) -> Iterator[Workspace]:
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        yield app.workspace
    finally:
        app.close()


@pytest.fixture
def awkward_vault(tmp_path: Path) -> Path:
    """An exported awkward workspace, with hostile and odd files added: links, a FIFO,
    Latin-1 text, NUL characters, notes without ids or with one used twice,
    links outside the folder and to files no manifest lists."""
    with _workspace(tmp_path / "source") as ws:
        build_awkward_workspace(ws)
        root = tmp_path / "vault"
        export_workspace(ws, root, "md")
    secret = tmp_path / "private.txt"
    secret.write_text("SECRET", encoding="utf-8")
    extra = root / "Extra"
    extra.mkdir()
    (extra / "latin.md").write_bytes(b"---\nid: " + b"1" * 32 + b"\n---\ncaf\xe9 cr\xe8me\n")
    (extra / "nul.md").write_text(f"---\nid: {'2' * 32}\n---\nbefore\x00after #tag\n", encoding="utf-8")
    (extra / "twice.md").write_text(f"---\nid: {'1' * 32}\n---\n# Twice\n", encoding="utf-8")
    (extra / "plain.md").write_text("# No id\n\n![p](pic.png) [out](../../outside.txt) [s](secret.txt)\n", encoding="utf-8")
    (extra / "pic.png").write_bytes(PNG)
    (extra / "secret.txt").symlink_to(secret)
    (extra / "link.md").symlink_to(secret)
    os.mkfifo(extra / "fifo.md")
    for i in range(40):
        (extra / f"n{i:02d}.md").write_text(f"# Note {i}\n\n![p](pic.png) 中文 text {i}\n", encoding="utf-8")
    return root


_ID = re.compile(r"[0-9a-f]{32}")


def _normal(summary: Any, workspace: dict[str, dict[str, Any]]) -> str:
    """The summary and the workspace as JSON, the rows of each table sorted by what they
    hold and every id renamed by its first appearance: fresh ids differ from import to
    import (and so does the order of rows keyed by them), what they point at does not; the
    times of the rows the import makes itself (its notebook, new tags) are left out."""
    workspace = {**workspace, "tags": {key: row[:2] for key, row in workspace["tags"].items()}}  # made now
    workspace["notebooks"] = {
        key: row[:2] if row[1] == "vault" else row for key, row in workspace["notebooks"].items()  # the import's own
    }
    tables = {
        name: sorted(([_ID.sub("#", json.dumps(row, default=str)), key, row] for key, row in rows.items()))
        for name, rows in workspace.items()
    }
    text = json.dumps([summary.__dict__, [[key, row] for name in sorted(tables) for _, key, row in tables[name]]])
    names: dict[str, str] = {}
    return _ID.sub(lambda m: names.setdefault(m.group(0), f"id{len(names)}"), text)


def _import(home: Path, vault: Path, *, process: bool, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> Any:
    started: list[ProcessReadAhead[Any]] = []
    real = ProcessReadAhead.start

    def start(self: ProcessReadAhead[Any]) -> None:
        started.append(self)
        real(self)

    with monkeypatch.context() as m:
        m.setattr(writer, "PROCESS_AT", 0 if process else 10**9)
        m.setattr(ProcessReadAhead, "start", start)
        with _workspace(home) as ws:
            try:
                summary = import_path(ws, vault, inline_tags=True, **kwargs)
            finally:
                for child in started:  # waited for on leaving: none is left running
                    assert child.process is not None and child.process.returncode is not None
            assert len(started) == (1 if process else 0)
            return summary, state(ws), files(ws)


def test_a_child_reads_the_same_workspace_and_notices_as_the_thread(
    tmp_path: Path, awkward_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_thread = _import(tmp_path / "t", awkward_vault, process=False, monkeypatch=monkeypatch)
    by_child = _import(tmp_path / "c", awkward_vault, process=True, monkeypatch=monkeypatch)
    summary = by_child[0]
    assert summary.notes > 50 and summary.attachments > 2 and summary.skipped >= 3
    assert any("Latin-1" in m for m in summary.messages) and any("NUL" in m for m in summary.messages)
    assert _normal(*by_thread[:2]) == _normal(*by_child[:2])
    assert len(by_thread[2]) == len(by_child[2])
    assert "SECRET" not in json.dumps(by_child[1])


def test_an_error_in_the_child_is_raised_here_with_its_message_and_changes_nothing(
    tmp_path: Path, awkward_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (awkward_vault / "Extra" / "zz-big.md").write_text("x" * 5000, encoding="utf-8")
    limits = ImportLimits(max_note_bytes=4000)
    errors = []
    for process in (False, True):
        home = tmp_path / f"home-{process}"
        with _workspace(home) as ws:
            before = state(ws)
        with pytest.raises(ImportExportError, match=r"zz-big\.md") as got:
            _import(home, awkward_vault, process=process, monkeypatch=monkeypatch, limits=limits)
        errors.append(str(got.value))
        with _workspace(home) as ws:
            assert state(ws) == before
    assert errors[0] == errors[1] and "max_note_bytes" in errors[1]


def test_a_writer_that_fails_stops_the_child(tmp_path: Path, awkward_vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_args: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(writer, "_write_notes", fail)
    with pytest.raises(RuntimeError, match="the disk is full"):
        _import(tmp_path / "home", awkward_vault, process=True, monkeypatch=monkeypatch)


@dataclass
class Item:
    body: str


@dataclass
class Endless:
    """A child source that never ends (module level: the child imports it by name)."""

    start: int

    def __iter__(self) -> Iterator[Item]:
        i = self.start
        while True:
            yield Item(f"item {i}")
            i += 1

    def drain(self) -> object:
        return None


@dataclass
class Failing:
    after: int

    def __iter__(self) -> Iterator[Item]:
        for i in range(self.after):
            yield Item(f"item {i}")
        raise ImportExportError(f"'bad.md' failed after {self.after} items")

    def drain(self) -> object:
        return self.after


def test_leaving_early_waits_for_the_child_and_leaves_none() -> None:
    reader = ProcessReadAhead(Endless, 5, take_back=lambda _side: None, depth=2, group=10)
    with reader as items:
        assert [next(items).body for _ in range(3)] == ["item 5", "item 6", "item 7"]
        assert reader.process is not None and reader.process.poll() is None
        pid = reader.process.pid
    assert reader.process.returncode is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no child of this process is left


def test_the_childs_items_then_its_error_and_what_it_handed_back() -> None:
    sides: list[object] = []
    got: list[str] = []
    with (
        pytest.raises(ImportExportError, match=r"'bad\.md' failed after 25 items"),
        ProcessReadAhead(Failing, 25, take_back=sides.append, group=10) as items,
    ):
        got.extend(item.body for item in items)
    assert got == [f"item {i}" for i in range(25)]
    assert sides == [25, 25, 25]


_ORPHAN = """
import os, sys
sys.path.insert(0, sys.argv[1])
from test_import_process import Endless
from noteloom.interop.readahead import ProcessReadAhead
if __name__ == "__main__":
    reader = ProcessReadAhead(Endless, 0, take_back=lambda _side: None, depth=2, group=10)
    with reader as items:
        next(items)
        print(reader.process.pid, flush=True)
        os.kill(os.getpid(), 9)
"""


def test_a_child_whose_parent_died_exits(tmp_path: Path) -> None:
    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).parent)], capture_output=True, text=True, timeout=SAFETY,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    pid = int(done.stdout.strip())
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    try:
        ready, _, _ = select.select([fd], [], [], SAFETY)  # readable when the process has exited
        assert ready, f"the reading process {pid} outlived its parent"
    finally:
        os.close(fd)


_UNGUARDED = """
import sys
sys.path.insert(0, sys.argv[1])
with open(sys.argv[2], "a") as f:
    f.write("ran\\n")
from test_import_process import Failing
from noteloom.interop.readahead import ProcessReadAhead
try:
    with ProcessReadAhead(Failing, 3, take_back=lambda _side: None) as items:
        print(len(list(items)))
except Exception as exc:
    print(exc)
"""


def test_a_main_script_without_a_guard_is_not_run_again_in_the_child(tmp_path: Path) -> None:
    script, log = tmp_path / "script.py", tmp_path / "runs.txt"
    script.write_text(_UNGUARDED, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).parent), str(log)], capture_output=True, text=True,
        timeout=SAFETY, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "'bad.md' failed after 3 items"
    assert log.read_text(encoding="utf-8") == "ran\n"
