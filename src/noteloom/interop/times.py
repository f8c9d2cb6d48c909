"""Times as files carry them (ISO 8601 text or epoch milliseconds) and as noteloom stores
them (integer milliseconds). Integer arithmetic throughout, so no millisecond is lost
to floating point on the way out and back."""

from __future__ import annotations

import datetime as dt
import re

from noteloom.errors import ImportExportError

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS = dt.timedelta(milliseconds=1)
_DIGITS = re.compile(r"^-?\d+$")
# Dates before 1970 or after 9999 are typos, not notes.
_MAX_MS = 253402300799999


def iso_from_ms(ms: int) -> str:
    """``2024-01-15T09:30:00.000Z`` for a time in milliseconds (UTC, millisecond precision)."""
    t = EPOCH + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def ms_from_datetime(value: dt.datetime) -> int:
    """Milliseconds since 1970; a time without a zone is read as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - EPOCH) // _MS


def parse_time(value: object, what: str) -> int | None:
    """A time from front matter or an item: ISO 8601 text, a date, a YAML timestamp or
    epoch milliseconds. Empty values and 0 mean "not set". Raises ``ImportExportError``
    naming ``what`` when the value is none of these."""
    if value is None or value == "" or value == 0:
        return None
    ms: int | None = None
    if isinstance(value, bool):
        ms = None
    elif isinstance(value, int):
        ms = value
    elif isinstance(value, dt.datetime):
        ms = ms_from_datetime(value)
    elif isinstance(value, dt.date):
        ms = ms_from_datetime(dt.datetime(value.year, value.month, value.day))
    elif isinstance(value, str):
        text = value.strip()
        if _DIGITS.match(text):
            ms = int(text)
        else:
            try:
                ms = ms_from_datetime(dt.datetime.fromisoformat(text.replace(" ", "T", 1)))
            except ValueError:
                ms = None
    if ms is None or not 0 <= ms <= _MAX_MS:
        raise ImportExportError(
            f"{what} is {value!r}, which is not a time; "
            "write ISO 8601 (2024-05-01T12:00:00Z) or milliseconds since 1970"
        )
    return ms or None
