"""File and folder names made from titles: safe on Linux, macOS and Windows, unique
within their folder (compared without case, as two of those systems do)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

_FORBIDDEN = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]')
_RESERVED = {
    "con", "prn", "aux", "nul",
    *(f"com{i}" for i in range(1, 10)),
    *(f"lpt{i}" for i in range(1, 10)),
}
# Names are capped in bytes (file systems count bytes; CJK takes three per character).
MAX_NAME_BYTES = 120


def safe_name(title: str, fallback: str = "Untitled") -> str:
    """A file name for ``title``: separators and reserved characters become ``_``, no leading
    dot or underscore (those mark folders that are not notebooks), no Windows device names."""
    name = _FORBIDDEN.sub("_", " ".join(title.split()))
    name = name.strip(" .")
    name = name.lstrip("_.").strip() or fallback
    name = _truncate(name, MAX_NAME_BYTES).rstrip(" .") or fallback
    if name.split(".")[0].lower() in _RESERVED:
        name = f"{name}_"
    return name


def _truncate(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


class FolderNames:
    """Hands out names unique within one folder: ``Plan.md``, ``Plan (2).md`` …"""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def claim(self, stem: str, suffix: str = "") -> str:
        n = 1
        name = f"{stem}{suffix}"
        while name.lower() in self._taken:
            n += 1
            name = f"{stem} ({n}){suffix}"
        self._taken.add(name.lower())
        return name


def split_name(filename: str) -> tuple[str, str]:
    """``("photo", ".png")`` for ``photo.png``; suffixes longer than 10 characters are not suffixes."""
    p = PurePosixPath(filename)
    suffix = p.suffix if 1 < len(p.suffix) <= 11 else ""
    return (filename[: len(filename) - len(suffix)] if suffix else filename), suffix
