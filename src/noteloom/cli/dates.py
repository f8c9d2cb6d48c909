"""Dates typed on the command line, as milliseconds since 1970 (UTC unless an offset is given)."""

from __future__ import annotations

from datetime import UTC, datetime

from noteloom.errors import InvalidInput
from noteloom.workspace.model import (
    MAX_TIME_MS,
    MIN_TIME_MS,
    TIME_RANGE,
    iso_time,
    ms_of,
    time_in_range,
)


def parse_date(value: str, what: str = "date") -> int:
    """``2026-12-01``, ``2026-12-01 09:30``, ``2026-12-01T09:30:00+02:00`` → epoch ms."""
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if " " in text else text)
    except ValueError:
        raise InvalidInput(
            f"{what} {value!r} is not a date; write it as YYYY-MM-DD or YYYY-MM-DDTHH:MM", field=what
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    ms = ms_of(parsed)  # exact, and defined where an offset carries the time past year 9999
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        raise InvalidInput(f"{what} {value!r} is outside {TIME_RANGE} in UTC; give a date within it", field=what)
    return ms


def show_date(ms: int | None) -> str:
    if not ms:
        return ""
    if not time_in_range(ms):  # a stored value from before the range was enforced
        return iso_time(ms)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
