"""How much one import may read: caps on a note, on an attachment and on the whole import.

The caps are checked while bytes stream in (read, decompressed, copied), never after a
member was read whole, so an import bomb (a tiny archive that inflates to gigabytes, a
sparse member, ``/dev/zero`` behind a name) stops after at most one chunk past its cap.
They come from the ``[import]`` table of ``noteloom.toml``::

    [import]
    max_note_bytes = 16_777_216          # 16 MiB: one note's text
    max_attachment_bytes = 268_435_456   # 256 MiB: one attachment
    max_total_bytes = 4_294_967_296      # 4 GiB: everything one import reads
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from noteloom.errors import ConfigError, ImportExportError

MiB = 1 << 20
CHUNK = 1 << 20
#: Room for an item's properties (ids, times …) beside a Joplin note's body.
ITEM_OVERHEAD = 64 * 1024


@dataclass(frozen=True)
class ImportLimits:
    """Byte caps of one import; the defaults fit every real notebook we have seen
    (Joplin itself warns at 10 MB for a note) and stop bombs long before RAM or disk do."""

    max_note_bytes: int = 16 * MiB
    max_attachment_bytes: int = 256 * MiB
    max_total_bytes: int = 4096 * MiB

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> ImportLimits:
        """The caps an ``[import]`` table sets; ``ConfigError`` for unknown keys or bad values."""
        known = {"max_note_bytes", "max_attachment_bytes", "max_total_bytes"}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ConfigError(
                f"[import] {unknown[0]!r} is not a setting; the settings are {', '.join(sorted(known))}"
            )
        values: dict[str, int] = {}
        for key in known & set(section):
            value = section[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"[import] {key} must be a whole number of bytes > 0, not {value!r}")
            values[key] = value
        return cls(**values)


def _size(n: int) -> str:
    return f"{n / MiB:,.0f} MiB" if n >= MiB else f"{n:,} bytes"


class Budget:
    """The bytes one import has read so far, against its caps."""

    def __init__(self, limits: ImportLimits) -> None:
        self.limits = limits
        self.total = 0

    def spend(self, n: int, what: str) -> None:
        """Count ``n`` more bytes read for ``what``; ``ImportExportError`` past the total cap."""
        self.total += n
        if self.total > self.limits.max_total_bytes:
            raise ImportExportError(
                f"the import stopped at {what!r}: it reads more than {_size(self.limits.max_total_bytes)} "
                "in all; raise max_total_bytes in the [import] table of noteloom.toml to import it"
            )

    def check_total(self, position: int, what: str) -> None:
        """``position`` bytes have gone by (an archive's decompressed offset): not past the total cap."""
        if position > self.limits.max_total_bytes:
            raise ImportExportError(
                f"the import stopped at {what!r}: the archive holds more than "
                f"{_size(self.limits.max_total_bytes)} uncompressed; raise max_total_bytes "
                "in the [import] table of noteloom.toml to import it"
            )

    def read_note(self, src: IO[bytes], what: str, *, overhead: int = 0, size: int | None = None) -> bytes:
        """All of ``src`` (a note or item file), or ``ImportExportError`` as soon as it passes the note cap.

        ``size`` is what the file's ``stat`` says: the first read asks for one byte more
        (a short read is the end), not for a whole chunk's buffer."""
        cap = self.limits.max_note_bytes + overhead
        parts: list[bytes] = []
        got = 0
        want = CHUNK if size is None else size + 1
        while chunk := src.read(min(want, cap + 1 - got)):
            if size is not None and len(chunk) < want and not parts and len(chunk) <= cap:
                self.spend(len(chunk), what)
                return chunk
            want = CHUNK
            got += len(chunk)
            self.spend(len(chunk), what)
            if got > cap:
                raise ImportExportError(
                    f"{what!r} is larger than {_size(self.limits.max_note_bytes)}, the cap on one note; "
                    "raise max_note_bytes in the [import] table of noteloom.toml to import it"
                )
            parts.append(chunk)
        return b"".join(parts)

    def copy_attachment(self, src: IO[bytes], dest: IO[bytes], what: str) -> int:
        """Copy ``src`` to ``dest``; ``ImportExportError`` as soon as it passes the attachment cap."""
        cap = self.limits.max_attachment_bytes
        got = 0
        while chunk := src.read(CHUNK):
            got += len(chunk)
            self.spend(len(chunk), what)
            if got > cap:
                raise ImportExportError(
                    f"attachment {what!r} is larger than {_size(cap)}, the cap on one attachment; "
                    "raise max_attachment_bytes in the [import] table of noteloom.toml to import it"
                )
            dest.write(chunk)
        return got
