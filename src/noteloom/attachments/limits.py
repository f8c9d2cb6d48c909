"""The caps on attachments, as settings: ``[attachments]`` in ``noteloom.toml``.

::

    [attachments]
    image_bytes = 5_000_000        # an image may be 5 MB
    pdf_bytes = 10_000_000         # a PDF 10 MB
    text_bytes = 2_000_000         # a text file (.txt .md .csv .json .html) 2 MB
    per_message = 5                # files on one chat message
    text_chars = 100_000           # extracted text a model is given per file, then a marker
    extract_seconds = 30.0         # wall-clock time of one extraction's child process
    extract_memory_mb = 512        # its address space
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from noteloom.errors import ConfigError, InvalidInput

from .sniff import FIELD, Kind, Sniffed


@dataclass(frozen=True)
class AttachmentLimits:
    """What one attachment may be, and what its extraction may spend."""

    image_bytes: int = 5_000_000
    pdf_bytes: int = 10_000_000
    text_bytes: int = 2_000_000
    per_message: int = 5
    text_chars: int = 100_000
    extract_seconds: float = 30.0
    #: The child's address space, which is more than its resident memory: the interpreter
    #: with PDFium and trafilatura loaded maps about 220 MB before reading a byte.
    extract_memory_mb: int = 512

    @classmethod
    def from_settings(cls, section: Mapping[str, Any]) -> AttachmentLimits:
        """The limits of an ``[attachments]`` table; ``ConfigError`` naming a bad or unknown key."""
        if not isinstance(section, Mapping):
            raise ConfigError(f"[attachments] in noteloom.toml must be a table, not {type(section).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(section) - set(known) - OTHER_SETTINGS)
        if unknown:
            raise ConfigError(
                f"[attachments] has no setting {unknown[0]!r}; the settings are {', '.join([*known, *OTHER_SETTINGS])}"
            )
        values: dict[str, Any] = {}
        for name, value in section.items():
            if name in OTHER_SETTINGS:
                continue
            whole = known[name].type in ("int", int)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            floor = _FLOORS[name]
            if not number or (whole and not isinstance(value, int)) or value < floor:
                kind = "a whole number" if whole else "a number"
                raise ConfigError(f"[attachments] {name} must be {kind} >= {floor}, not {value!r}")
            values[name] = int(value) if whole else float(value)
        return cls(**values)

    def max_bytes(self, kind: Kind) -> int:
        """The size cap of a kind (HTML is text)."""
        if kind == "image":
            return self.image_bytes
        if kind == "pdf":
            return self.pdf_bytes
        return self.text_bytes


#: Settings of ``[attachments]`` read elsewhere: ``max_mb``, the largest file a note takes
#: (web/notes_api.py).
OTHER_SETTINGS = frozenset({"max_mb"})

#: The least each setting may be: below these nothing useful gets through (the child
#: cannot even start its interpreter in less than 128 MB of address space).
_FLOORS: dict[str, float] = {
    "image_bytes": 1,
    "pdf_bytes": 1,
    "text_bytes": 1,
    "per_message": 1,
    "text_chars": 100,
    "extract_seconds": 0.1,
    "extract_memory_mb": 128,
}
_NAMES = {"image": "an image", "pdf": "a PDF", "text": "a text file", "html": "an HTML file"}


def check_size(sniffed: Sniffed, size: int, limits: AttachmentLimits, *, name: str | None = None) -> None:
    """``InvalidInput(field="attachments")`` naming the cap when ``size`` bytes is over it."""
    cap = limits.max_bytes(sniffed.kind)
    if size > cap:
        what = f"{name!r} " if name else ""
        raise InvalidInput(
            f"{what}is {_megabytes(size)}; {_NAMES[sniffed.kind]} may be at most {_megabytes(cap)}"
            " (the [attachments] settings of noteloom.toml set the caps)",
            field=FIELD,
        )


def _megabytes(size: int) -> str:
    if size < 1_000_000:
        return f"{size:,} bytes"
    return f"{size / 1_000_000:.1f} MB".replace(".0 MB", " MB")
