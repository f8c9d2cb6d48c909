"""Folders the user shares with the AI: confined, read-only, capped reading and listing.

The user names folders in ``noteloom.toml``::

    [files]
    roots = ["~/Documents/projects", "~/code/site"]      # named after their folders
    # or, to choose the names:
    [files.roots]
    projects = "~/Documents/projects"

Each root has a short name (its folder's name, or the key it is given). With one root a
path is relative to it (``src/main.py``); with several a path starts with the root's name
(``projects/src/main.py``) and the empty path stands for the list of roots. A relative root
is relative to the data folder (where ``noteloom.toml`` lives).

Every path goes through one chokepoint, :meth:`Folders.resolve`: it refuses NUL bytes,
backslashes (Windows and UNC forms), drive letters, absolute paths and any ``..`` segment,
joins what is left to the root, resolves every symbolic link on the way
(``os.path.realpath``) and refuses a result outside the root — a link to a file or a folder
elsewhere, at any depth. Opening then goes by the resolved path with ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO swapped in after the check neither hangs the open nor gets read), and
the opened descriptor is checked again: the same file the check saw (device and inode), a
regular file or a folder as asked, and — where the system tells a descriptor's path
(``/proc/self/fd`` on Linux, ``F_GETPATH`` on macOS) — still inside the root. A path
swapped for a link between the check and the open is refused, not followed.

:meth:`Folders.read_file` returns a text file's text; images, PDFs, archives and other
binary files (told from their bytes: magic signatures, then a NUL byte or invalid UTF-8 in
the first block) are refused naming their kind, FIFOs, devices and sockets without being
opened. :meth:`Folders.list_dir` returns ``d name`` / ``f name`` lines, folders first, then
files, then ``l name`` for links not followed (leading out of the root, or nowhere), each
group sorted by name, hidden files shown, special files left out; an empty folder is
``(empty)``. Both outputs are at most :data:`MAX_RESULT_BYTES` of UTF-8, marker included
(``[truncated N bytes]``, N counted from the file's size): a tool result rides in the
transcript, and the agent loop's own cap is the same size, so it never cuts ours again.

Everything here blocks (file system calls): call it from a worker thread.
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noteloom.errors import ConfigError, Conflict, InvalidInput, NotFound

#: The most a result holds, in UTF-8 bytes, the truncation marker included.
MAX_RESULT_BYTES = 12 * 1024
#: A path the model sends is a path, not a document.
MAX_PATH_CHARS = 4096

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DRIVE = re.compile(r"^[A-Za-z]:")
#: Control characters, and the stand-ins of bytes that are not UTF-8 (``os.fsdecode``).
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f\udc80-\udcff]")

#: Magic signatures of the binary kinds worth naming: (offset, bytes, kind).
_SIGNATURES: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image file (PNG)"),
    (0, b"\xff\xd8\xff", "image file (JPEG)"),
    (0, b"GIF87a", "image file (GIF)"),
    (0, b"GIF89a", "image file (GIF)"),
    (0, b"II*\x00", "image file (TIFF)"),
    (0, b"MM\x00*", "image file (TIFF)"),
    (0, b"\x00\x00\x01\x00", "image file (ICO)"),
    (0, b"PK\x03\x04", "archive (ZIP, or a document packed as one: docx, xlsx, odt, epub, jar)"),
    (0, b"PK\x05\x06", "archive (ZIP, empty)"),
    (0, b"\x1f\x8b", "archive (gzip)"),
    (0, b"7z\xbc\xaf\x27\x1c", "archive (7z)"),
    (0, b"Rar!\x1a\x07", "archive (RAR)"),
    (0, b"\xfd7zXZ\x00", "archive (xz)"),
    (0, b"\x28\xb5\x2f\xfd", "archive (zstd)"),
    (257, b"ustar", "archive (tar)"),
    (0, b"\x7fELF", "executable file (ELF)"),
    (0, b"SQLite format 3\x00", "database file (SQLite)"),
)


@dataclass(frozen=True)
class Root:
    """A shared folder: its short name and its real path (links resolved)."""

    name: str
    path: str


@dataclass(frozen=True)
class Place:
    """What the chokepoint made of a path: the root it lies in and its real path (``None``
    for both: the list of several roots), the path as the caller wrote it, its ``lstat``."""

    root: Root | None
    real: str | None
    shown: str
    st: os.stat_result | None = None


def _said(path: str) -> str:
    """A path as an error message quotes it (a long one shortened)."""
    return repr(path if len(path) <= 200 else path[:200] + "…")


def _inside(real: str, root: str) -> bool:
    return real == root or os.path.commonpath([real, root]) == root


class Folders:
    """The roots the user shared, and the only way tools reach the files under them."""

    def __init__(self, roots: list[Root]) -> None:
        if not roots:
            raise ValueError("Folders needs at least one root")
        self.roots: tuple[Root, ...] = tuple(roots)
        self._by_name = {r.name: r for r in roots}

    @classmethod
    def from_settings(cls, section: Mapping[str, Any], *, base: Path, home: str | None = None) -> Folders | None:
        """The roots of ``[files]`` (``None`` when it names none); ``ConfigError`` naming a bad
        setting or a root that is not an existing folder. ``base`` anchors relative roots,
        ``home`` is what ``~`` stands for (the process's home when not given)."""
        if not isinstance(section, Mapping):
            raise ConfigError("[files] in noteloom.toml must be a table")
        unknown = sorted(set(section) - {"roots"})
        if unknown:
            raise ConfigError(f"[files] has no setting {unknown[0]!r}; it takes roots (the folders to share)")
        raw = section.get("roots", [])
        named: list[tuple[str | None, Any]]
        if isinstance(raw, Mapping):
            named = list(raw.items())
        elif isinstance(raw, list):
            named = [(None, p) for p in raw]
        else:
            raise ConfigError('[files] roots must be a list of folders, like ["~/Documents/projects"], '
                              'or a table of names and folders ([files.roots] projects = "~/Documents/projects")')
        roots: list[Root] = []
        for name, value in named:
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                raise ConfigError(f"[files] roots: {value!r} is not a folder; write its path as a string")
            path = _expand(value, home)
            folder = path if path.is_absolute() else base / path
            if not folder.is_dir():  # follows a link: a root may be one
                what = "does not exist" if not os.path.lexists(folder) else "is not a folder"
                raise ConfigError(f"[files] roots: {value!r} {what} ({folder}); create it or take it out of the list")
            real = os.path.realpath(folder)
            root_name = name if name is not None else Path(real).name
            _check_name(root_name, value, named=name is not None)
            if any(r.name == root_name for r in roots):
                raise ConfigError(f"[files] roots: two folders are called {root_name!r}; name them yourself, "
                                  'e.g. [files.roots] work = "…" and home = "…"')
            roots.append(Root(root_name, real))
        return cls(roots) if roots else None

    # -- the chokepoint ---------------------------------------------------------------------

    def resolve(self, path: str | None) -> Place:
        """Where ``path`` leads, checked: inside a root after every link is resolved, and
        existing. Raises ``InvalidInput`` (field ``path``) for a path that is malformed or
        leaves the root, ``NotFound`` for one that leads nowhere."""
        path = "" if path is None else path
        if not isinstance(path, str):
            raise InvalidInput("path must be a string", field="path")
        if len(path) > MAX_PATH_CHARS:
            raise InvalidInput(f"path is {len(path)} characters long; paths are at most {MAX_PATH_CHARS}",
                               field="path")
        if "\x00" in path:
            raise InvalidInput("path contains a NUL byte; write the file's path as list_dir shows it", field="path")
        if "\\" in path:
            raise InvalidInput(f"path {_said(path)} has a backslash; separate folders with / (paths are relative "
                               "to the shared folder)", field="path")
        if path.startswith("/") or _DRIVE.match(path):
            raise InvalidInput(f"path {_said(path)} is absolute; give a path relative to the shared folder, as "
                               "list_dir shows it", field="path")
        segments = path.split("/")
        if ".." in segments:
            raise InvalidInput(f"path {_said(path)} has a '..' segment; paths stay inside the shared folder",
                               field="path")
        parts = [s for s in segments if s not in ("", ".")]
        if len(self.roots) == 1:
            root = self.roots[0]
        elif not parts:
            return Place(None, None, "")
        else:
            found = self._by_name.get(parts[0])
            if found is None:
                raise NotFound(f"path {_said(path)}: no shared folder is called {parts[0]!r}; a path starts with "
                               f"one of {', '.join(repr(n) for n in self._by_name)}")
            root, parts = found, parts[1:]
        real = os.path.realpath(os.path.join(root.path, *parts))
        if not _inside(real, root.path):
            raise InvalidInput(f"path {_said(path)} leads outside the shared folder {root.name!r} through a "
                               "symbolic link; only what lies inside it can be read", field="path")
        try:
            st = os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"path {_said(path)} does not exist; list_dir shows what there is") from None
        except OSError as exc:
            raise InvalidInput(f"path {_said(path)} cannot be reached: {exc.strerror}", field="path") from None
        return Place(root, real, path, st)

    # -- reading ----------------------------------------------------------------------------

    def read_file(self, path: str) -> str:
        """The text of the file at ``path``, capped; refuses folders, special and binary files."""
        place = self.resolve(path)
        if place.st is None or not stat.S_ISREG(place.st.st_mode):
            raise _not_a_file(place)
        fd = _open(place, directory=False)
        try:
            size = os.fstat(fd).st_size
            head = _read_up_to(fd, MAX_RESULT_BYTES + 1)
        finally:
            os.close(fd)
        kind = binary_kind(head, complete=len(head) <= MAX_RESULT_BYTES)
        if kind is not None:
            raise InvalidInput(f"path {_said(path)}: {kind} — no text content; read_file reads text files only",
                               field="path")
        if not head:
            return "(empty file)"
        if len(head) <= MAX_RESULT_BYTES:
            return head.decode("utf-8").removeprefix("\ufeff")
        total = max(size, len(head))
        budget = MAX_RESULT_BYTES - len(_marker(total).encode())
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(head[:budget], final=False)
        shown = budget - len(decoder.getstate()[0])  # a character cut at the cap is left out whole
        return text.removeprefix("\ufeff") + _marker(total - shown)

    def list_dir(self, path: str | None = None) -> str:
        """The entries of the folder at ``path`` (the root, or the list of roots, when empty)."""
        place = self.resolve(path)
        if place.root is None:
            lines = [f"d {_entry_name(r.name)}" for r in sorted(self.roots, key=_order)]
            return cap_lines(lines)
        if place.st is None or not stat.S_ISDIR(place.st.st_mode):
            raise _not_a_folder(place)
        assert place.real is not None
        fd = _open(place, directory=True)
        try:
            dirs, files, links = _entries(fd, place.real, place.root.path)
        finally:
            os.close(fd)
        lines = [f"{mark} {_entry_name(n)}" for mark, names in (("d", dirs), ("f", files), ("l", links))
                 for n in sorted(names, key=_by_name)]
        return cap_lines(lines) if lines else "(empty)"


def _order(root: Root) -> tuple[str, str]:
    return _by_name(root.name)


def _by_name(name: str) -> tuple[str, str]:
    return name.casefold(), name


def _expand(value: str, home: str | None) -> Path:
    if home and (value == "~" or value.startswith("~/")):
        return Path(home + value[1:])
    return Path(value).expanduser()


def _check_name(name: str, value: str, *, named: bool) -> None:
    bad = (not name or name in (".", "..") or any(c in name for c in "/\\\x00")
           or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name))
    if bad:
        how = "pick another" if named else 'name it: [files.roots] NAME = "…"'
        raise ConfigError(f"[files] roots: {value!r} cannot be called {name!r}; {how}")


def _marker(n: int) -> str:
    return f"\n[truncated {n} bytes]"


def cap_lines(lines: list[str]) -> str:
    """``lines`` joined, cut at a line's end so that the whole, marker included, fits the cap."""
    text = "\n".join(lines)
    data = text.encode("utf-8")
    if len(data) <= MAX_RESULT_BYTES:
        return text
    budget = MAX_RESULT_BYTES - len(_marker(len(data)).encode())
    cut = data.rfind(b"\n", 0, budget + 1)
    kept = data[: max(cut, 0)]
    return kept.decode("utf-8") + _marker(len(data) - len(kept))


def binary_kind(head: bytes, *, complete: bool) -> str | None:
    """What a file that starts with ``head`` is, when it is not text: an image, a PDF, an
    archive … named by its signature, or a plain binary file (a NUL byte, or bytes that are
    not UTF-8; ``complete``: ``head`` is the whole file, so a cut character at its end is
    invalid too). ``None`` for text."""
    for offset, magic, kind in _SIGNATURES:
        if head[offset:offset + len(magic)] == magic:
            return kind
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image file (WebP)"
    if head[4:8] == b"ftyp" and head[8:12] in (b"heic", b"heix", b"avif", b"mif1"):
        return "image file (HEIF/AVIF)"
    if b"%PDF-" in head[:1024]:
        return "PDF file"
    if b"\x00" in head:
        return "binary file"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return "binary file (not UTF-8 text)"
    return None


def _special(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _not_a_file(place: Place) -> InvalidInput:
    mode = place.st.st_mode if place.st is not None else stat.S_IFDIR
    if stat.S_ISDIR(mode):
        return InvalidInput(f"path {_said(place.shown)} is a folder; list_dir lists it", field="path")
    return InvalidInput(f"path {_said(place.shown)} is {_special(mode)}, not a file; only regular files are read",
                        field="path")


def _not_a_folder(place: Place) -> InvalidInput:
    mode = place.st.st_mode if place.st is not None else 0
    if stat.S_ISREG(mode):
        return InvalidInput(f"path {_said(place.shown)} is a file, not a folder; read_file reads it", field="path")
    return InvalidInput(f"path {_said(place.shown)} is {_special(mode)}, not a folder", field="path")


def _open(place: Place, *, directory: bool) -> int:
    """A descriptor of what the chokepoint checked, or a refusal when it changed since."""
    assert place.real is not None and place.root is not None and place.st is not None
    flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | (_O_DIRECTORY if directory else 0)
    changed = Conflict(f"path {_said(place.shown)} changed while it was being opened; try again")
    try:
        fd = os.open(place.real, flags)
    except FileNotFoundError:
        raise NotFound(f"path {_said(place.shown)} does not exist; list_dir shows what there is") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a link, or a file took a folder's place
            raise changed from exc
        raise InvalidInput(f"path {_said(place.shown)} cannot be opened: {exc.strerror}", field="path") from None
    try:
        st = os.fstat(fd)
        same = (st.st_dev, st.st_ino) == (place.st.st_dev, place.st.st_ino)
        right = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
        where = _fd_path(fd)
        if not same or not right or (where is not None and not _inside(where, place.root.path)):
            raise changed
    except BaseException:
        os.close(fd)
        raise
    return fd


def _fd_path(fd: int) -> str | None:
    """The path the system says ``fd`` is open at, where it tells (``None`` elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
    if sys.platform == "darwin":
        import fcntl

        raw = fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024))
        return os.fsdecode(raw.split(b"\x00", 1)[0])
    return None


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, limit - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _entries(fd: int, real: str, root: str) -> tuple[list[str], list[str], list[str]]:
    """The folder open at ``fd`` (at ``real``) as folders, files and links not followed;
    a link inside the root counts as what it leads to, special files are left out."""
    dirs: list[str] = []
    files: list[str] = []
    links: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            name = entry.name
            try:
                if entry.is_symlink():
                    target = os.path.realpath(os.path.join(real, name))
                    try:
                        mode = os.stat(target).st_mode if _inside(target, root) else None
                    except OSError:
                        mode = None  # leads nowhere, or round in a loop
                    if mode is None:
                        links.append(name)
                        continue
                    if stat.S_ISDIR(mode):
                        dirs.append(name)
                    elif stat.S_ISREG(mode):
                        files.append(name)
                # The entry's type as the folder gives it (d_type): no stat per name.
                elif entry.is_dir(follow_symlinks=False):
                    dirs.append(name)
                elif entry.is_file(follow_symlinks=False):
                    files.append(name)
            except OSError:
                continue  # gone since the folder was read
    return dirs, files, links


def _entry_name(name: str) -> str:
    """A name as a listing line shows it: as it is, or (holding a line break or another
    control character, or bytes that are not UTF-8) as a quoted JSON string, so no name can
    pass for a line of its own."""
    if _UNSHOWABLE.search(name):
        return json.dumps(name)
    return name
