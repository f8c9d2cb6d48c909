"""Reading the files of an import folder: regular files inside it, and nothing else.

A folder to import may hold symbolic links (``passwd.md -> /etc/passwd`` would make a
private file a note every MCP client can read), FIFOs (an open that waits forever) and
devices (``/dev/zero`` reads without end). None of them is followed or read: every
component below the folder is opened with ``O_NOFOLLOW`` relative to its parent's
descriptor, and the file is accepted only when ``fstat`` on the *opened* descriptor says
it is a regular file, so swapping a file for a link between a check and the open
changes nothing. ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting
for a writer. The folder given by the user is itself followed: they chose it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from noteloom.interop.bundle import Notices


def _flag(name: str) -> int:
    # POSIX flags; Windows has none of them (nor FIFOs), and the module must still import there.
    return int(getattr(os, name, 0))


_FILE_FLAGS = os.O_RDONLY | _flag("O_NOFOLLOW") | _flag("O_NONBLOCK") | _flag("O_NOCTTY") | _flag("O_CLOEXEC")
_DIR_FLAGS = os.O_RDONLY | _flag("O_NOFOLLOW") | _flag("O_DIRECTORY") | _flag("O_CLOEXEC")

LINK_SKIP = "skipped symbolic links; an import reads only the files inside its folder"
SPECIAL_SKIP = "skipped special files (FIFOs, devices, sockets); an import reads only regular files"


class NotRegular(Exception):
    """The path is a symbolic link or a special file; ``kind`` is the notice it gets."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Opened:
    """A regular file opened for reading, with its size and modification time (ms)."""

    file: BinaryIO
    size: int
    mtime_ms: int


def _kind(mode: int) -> str:
    return LINK_SKIP if stat.S_ISLNK(mode) else SPECIAL_SKIP


def open_inside(root: Path, rel: str) -> Opened:
    """Open ``root/rel`` (``rel`` in POSIX form, no ``..``) without following any link
    below ``root``. ``NotRegular`` for a link or a special file; ``OSError`` otherwise
    (``FileNotFoundError`` when it is missing, ``IsADirectoryError`` for a folder)."""
    parts = [p for p in PurePosixPath(rel).parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise FileNotFoundError(errno.ENOENT, "not a path inside the folder", rel)
    fd = _open_folder(root, parts[:-1])
    try:
        return _open_file(parts[-1], fd)
    finally:
        os.close(fd)


def _open_folder(root: Path, parts: list[str]) -> int:
    """A descriptor of the folder ``root/parts…``, opened without following any link below ``root``."""
    fd = os.open(root, os.O_RDONLY | _flag("O_DIRECTORY") | _flag("O_CLOEXEC"))
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    mode = os.lstat(part, dir_fd=fd).st_mode
                    if stat.S_ISLNK(mode):
                        raise NotRegular(LINK_SKIP) from exc
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


class FolderFiles:
    """``open_inside`` for files read folder after folder (an import's walk): the folder's
    descriptor, opened as ``open_inside`` opens it, serves every file of the folder, so a
    note costs one ``open`` rather than one per folder above it. ``close`` when done."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._folder: str | None = None
        self._fd: int | None = None

    def open(self, folder: str, name: str) -> Opened:
        """The file ``name`` of ``folder`` (POSIX form relative to the root, ``""`` for the root)."""
        if folder != self._folder or self._fd is None:
            self.close()
            parts = [p for p in PurePosixPath(folder).parts if p not in ("", ".")]
            if ".." in parts:
                raise FileNotFoundError(errno.ENOENT, "not a path inside the folder", folder)
            self._fd = _open_folder(self.root, parts)
            self._folder = folder
        return _open_file(name, self._fd)

    def close(self) -> None:
        fd, self._fd, self._folder = self._fd, None, None
        if fd is not None:
            os.close(fd)


def _open_file(name: str, dir_fd: int) -> Opened:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(LINK_SKIP) from exc
        if exc.errno == errno.ENXIO:  # a socket
            raise NotRegular(SPECIAL_SKIP) from exc
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", name)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(SPECIAL_SKIP)
        # Regular files ignore O_NONBLOCK, so the descriptor reads as usual.
        return Opened(os.fdopen(fd, "rb"), st.st_size, st.st_mtime_ns // 1_000_000)
    except BaseException:
        os.close(fd)
        raise


def regular_entries(
    folder: Path, notices: Notices, wanted: Callable[[os.DirEntry[str]], bool], *, where: str = ""
) -> Iterator[os.DirEntry[str]]:
    """The regular files and real sub-folders of ``folder``, by name. Links and special
    files are left out, and reported in ``notices`` (as ``where`` + name) when ``wanted``
    says the import would have read them: a stray link nobody asked for is no news."""
    with os.scandir(folder) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
            yield entry
        elif wanted(entry):
            notices.skip(LINK_SKIP if entry.is_symlink() else SPECIAL_SKIP, f"{where}{entry.name}")


def mtime_ms(path: Path) -> int:
    """The modification time of ``path`` itself (a link is not followed)."""
    return os.lstat(path).st_mtime_ns // 1_000_000
