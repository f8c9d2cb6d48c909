"""The staging folder of one import, and the clean-up of those a killed import left behind.

An import copies attachment files into ``<data>/.import-XXXX/`` (next to the attachments,
so moving a file into place is a rename), writes its rows, moves the files into place
and only then commits, so a committed attachment row always has its file. A process
killed between the moves and the commit leaves files whose rows never were: before the
first move, the import writes the final paths to ``moves.json`` in the staging folder,
and whoever cleans that folder up later deletes the files of the list that have no row.

A staging folder is in use while its owner holds an ``flock`` on ``.import-XXXX.lock``
beside it; the operating system drops the lock when the owner dies, however it dies.
The lock file is created (and locked) before the folder and removed after it, so a
folder without a lock file, or with a lock nobody holds, is stale. ``clean_stale`` runs
when an import starts and when the app opens a workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import IO

import sqlalchemy as sa

from noteloom import db
from noteloom.workspace import Workspace

try:
    import fcntl
except ImportError:  # Windows: an open file cannot be deleted there, which guards it as well
    fcntl = None  # type: ignore[assignment]

PREFIX = ".import-"
JOURNAL = "moves.json"
#: Test-only: the name of a point where the import kills itself with SIGKILL, so a test
#: can stop a real import at an exact step without guessing at timings. Read from the
#: environment (not the settings) because a test sets it for one subprocess only.
CRASH_ENV = "NOTELOOM_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    """Die here, as ``kill -9`` would, when the test hook names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


class Staging:
    """One import's staging folder, locked while it lives; ``close`` removes both."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        while True:
            fd, lock_name = tempfile.mkstemp(prefix=PREFIX, suffix=".lock", dir=data_dir)
            self._lock: IO[bytes] | None = os.fdopen(fd, "r+b")
            if fcntl is not None:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A clean-up may have removed the file between its creation and the lock (it
            # was a lock nobody held): then the lock guards nothing, so start again.
            try:
                if os.stat(lock_name).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            self._lock.close()
        self.lock_path = Path(lock_name)
        self.path = self.lock_path.with_name(self.lock_path.name.removesuffix(".lock"))
        self.path.mkdir()

    def journal(self, ids_and_paths: list[tuple[str, Path]]) -> None:
        """Record, durably, the files about to be moved into place (before the first move)."""
        tmp = self.path / (JOURNAL + ".part")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump([[aid, str(p)] for aid, p in ids_and_paths], f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / JOURNAL)

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.lock_path.unlink()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def clean_stale(ws: Workspace) -> int:
    """Remove staging folders no live import holds (after deleting the files their
    journal moved for rows that never committed); returns how many were removed."""
    root = ws.data_dir
    if not root.is_dir():
        return 0
    removed = 0
    for path in sorted(root.glob(PREFIX + "*")):
        if path.name.endswith(".lock") or not path.is_dir() or path.is_symlink():
            continue
        lock_path = path.with_name(path.name + ".lock")
        with contextlib.ExitStack() as stack:
            try:
                lock = stack.enter_context(open(lock_path, "r+b"))
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except FileNotFoundError:
                pass  # the owner makes the lock first and removes it last: stale
            except (BlockingIOError, PermissionError):
                continue  # a running import owns it
            _undo_uncommitted_moves(ws, path / JOURNAL)
            shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                lock_path.unlink()
            removed += 1
    # Lock files whose folder is gone (the owner died between the two removals).
    for lock_path in root.glob(PREFIX + "*.lock"):
        if not lock_path.with_name(lock_path.name.removesuffix(".lock")).exists():
            with open(lock_path, "r+b") as lock:
                try:
                    if fcntl is not None:
                        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # an import between creating its lock and its folder
                with contextlib.suppress(OSError):
                    lock_path.unlink()
    return removed


def _undo_uncommitted_moves(ws: Workspace, journal: Path) -> None:
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no journal: the import died before it moved anything
    moved = {str(aid): Path(p) for aid, p in entries}
    committed: set[str] = set()
    ids = list(moved)
    with ws.read() as c:
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            committed.update(c.execute(sa.select(db.attachments.c.id).where(db.attachments.c.id.in_(chunk))).scalars())
    attachments_dir = ws.attachments_dir.resolve()
    for aid, path in moved.items():
        if aid not in committed and path.parent.resolve() == attachments_dir:
            path.unlink(missing_ok=True)
