"""Attachment bytes on disk: one file per key, under one folder.

Keys are random ids the store makes (never a name a user gave), so a key is safe as a file
name, and a key that is not of that form names nothing: it cannot reach outside the folder.
A file is written to a temporary name, flushed to disk and renamed, so a crash leaves the
old state or the new one, never half a file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from noteloom.errors import NotFound

_KEY = re.compile(r"[0-9a-f]{32}")
_TMP_PREFIX = ".tmp-"


class BlobStore:
    """``put`` bytes, get a key; ``read``, ``exists``, ``delete`` by that key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def put(self, data: bytes) -> str:
        """Store ``data`` under a new key and return the key (durable once this returns)."""
        self.root.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(16)
        tmp = self.root / f"{_TMP_PREFIX}{key}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._path(key))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.root)
        return key

    def read(self, key: str) -> bytes:
        """The bytes stored under ``key``; ``NotFound`` when there are none."""
        path = self.path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no stored file {key!r}") from None

    def exists(self, key: str) -> bool:
        return _KEY.fullmatch(key) is not None and self._path(key).is_file()

    def delete(self, key: str) -> bool:
        """Remove the bytes of ``key``; whether there were any."""
        if _KEY.fullmatch(key) is None:
            return False
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        _fsync_dir(self.root)
        return True

    def sweep(self, keep: Callable[[Iterable[str]], set[str]], *, older_than_s: float = 3600.0) -> int:
        """Remove what a crash left behind, older than ``older_than_s``: temporary files of a
        write that never finished, and stored files whose key ``keep`` (given a batch of
        keys, it answers the ones still referenced) no longer knows: bytes written just
        before a process died, the row that would have named them never committed. Recent
        files are left alone: their rows may be in a transaction still open. Returns how
        many files were removed."""
        if not self.root.is_dir():
            return 0
        cutoff = time.time() - older_than_s
        stale_tmp: list[Path] = []
        keys: list[str] = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                try:
                    if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime > cutoff:
                        continue
                except OSError:
                    continue
                if entry.name.startswith(_TMP_PREFIX):
                    stale_tmp.append(Path(entry.path))
                elif _KEY.fullmatch(entry.name):
                    keys.append(entry.name)
        removed = 0
        for tmp in stale_tmp:
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed += 1
        for start in range(0, len(keys), 500):
            batch = keys[start:start + 500]
            known = keep(batch)
            for key in batch:
                if key not in known and self.delete(key):
                    removed += 1
        return removed

    def path(self, key: str) -> Path:
        """The file of ``key`` (to stream it); ``NotFound`` for a key the store never makes."""
        if _KEY.fullmatch(key) is None:
            raise NotFound(f"no stored file {key!r}")
        return self._path(key)

    def _path(self, key: str) -> Path:
        path = self.root / key
        # The pattern already keeps a key inside the root; this says so where it matters.
        if path.parent != self.root or not path.name == key:
            raise NotFound(f"no stored file {key!r}")
        return path


def _fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable (not possible on every platform)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
