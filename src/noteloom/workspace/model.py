"""The workspace's values: data classes, row converters and the checks on ids, titles and times."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, Literal

from noteloom.errors import InvalidInput
from noteloom.jsonvalues import surrogate_in

_ID_RE = re.compile(r"^[0-9a-f]{32}$")
DEFAULT_NOTEBOOK_TITLE = "Notes"
_UNSET: Any = object()

#: Times the workspace holds, in ms since 1970 (UTC): what ISO 8601, JavaScript's Date and
#: Python's datetime all show with a four-digit year, 1970-01-01 … 9999-12-31T23:59:59.999Z.
MIN_TIME_MS = 0
MAX_TIME_MS = 253_402_300_799_999
TIME_RANGE = "1970-01-01 … 9999-12-31T23:59:59.999Z"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: 400 Gregorian years are exactly 146,097 days: the calendar repeats, so a time outside
#: datetime's years 1 … 9999 is shown by shifting it by whole cycles into range.
_CYCLE_MS = 146_097 * 86_400_000


@dataclass(frozen=True)
class Notebook:
    id: str
    parent_id: str | None
    title: str
    created_time: int
    updated_time: int
    deleted_time: int | None = None
    note_count: int = 0
    #: Whose it is (``None``: the workspace owner's); a sub-notebook's is its top notebook's.
    owner_id: str | None = None


@dataclass(frozen=True)
class Note:
    id: str
    notebook_id: str
    title: str
    body: str
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    source_url: str
    created_time: int
    updated_time: int
    deleted_time: int | None = None
    tags: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class NoteSummary:
    id: str
    notebook_id: str
    title: str
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    updated_time: int
    created_time: int


@dataclass(frozen=True)
class Tag:
    id: str
    title: str
    note_count: int = 0


@dataclass(frozen=True)
class Revision:
    """An earlier version of a note. Listings read no text: ``body`` is rebuilt from the
    stored history on first use (``chars`` is its length, known without that)."""

    id: str
    note_id: str
    title: str
    chars: int
    version_time: int
    created_time: int
    # Not a field: equality, repr and asdict() are the listing's metadata alone.
    load: InitVar[Callable[[], str] | None] = None

    def __post_init__(self, load: Callable[[], str] | None) -> None:
        object.__setattr__(self, "_load", load)

    @cached_property
    def body(self) -> str:
        load: Callable[[], str] | None = self.__dict__["_load"]
        if load is None:
            raise LookupError(f"revision {self.id!r} was made without a way to read its text")
        return load()


@dataclass(frozen=True)
class Attachment:
    id: str
    note_id: str | None
    title: str
    filename: str
    mime: str
    size: int
    created_time: int
    updated_time: int


@dataclass(frozen=True)
class TrashItem:
    kind: Literal["note", "notebook"]
    id: str
    title: str
    parent_id: str | None
    deleted_time: int


def check_id(value: str, what: str = "id", field: str | None = None) -> str:
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise InvalidInput(f"{what} {value!r} is not a noteloom id (32 lowercase hex characters)", field=field)
    return value


def _note_from_row(row: Any, tags: Sequence[str] = ()) -> Note:
    return Note(
        id=row.id,
        notebook_id=row.notebook_id,
        title=row.title,
        body=row.body,
        is_todo=bool(row.is_todo),
        todo_due=row.todo_due,
        todo_completed=row.todo_completed,
        source_url=row.source_url,
        created_time=row.created_time,
        updated_time=row.updated_time,
        deleted_time=row.deleted_time,
        tags=tuple(tags),
    )


def _clean_title(title: str, what: str, field: str = "title") -> str:
    if not isinstance(title, str):
        raise InvalidInput(f"{what} must be text", field=field)
    if "\x00" in title:
        raise InvalidInput(f"{what} contains a NUL character", field=field)
    cleaned = " ".join(title.split())
    if not cleaned:
        raise InvalidInput(f"{what} must not be empty", field=field)
    if len(cleaned) > 1000:
        raise InvalidInput(f"{what} is {len(cleaned)} characters long; keep it under 1000", field=field)
    return cleaned


def _check_text(value: str, what: str) -> None:
    """``what``: the field's name (``title``, ``body``)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text", field=what)
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character", field=what)
    bad = surrogate_in(value)
    if bad is not None:
        # Neither SQLite nor PostgreSQL can store it (no UTF-8 encoding exists).
        raise InvalidInput(f"{what} contains a lone UTF-16 surrogate ({bad}); send valid Unicode text", field=what)


def _check_time(value: int | None, what: str) -> int | None:
    """``what``: the field's name (``todo_due``)."""
    if value is None or value == 0:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_TIME_MS < value <= MAX_TIME_MS:
        raise InvalidInput(
            f"{what} must be a time in milliseconds from {TIME_RANGE} "
            f"({MIN_TIME_MS} … {MAX_TIME_MS}), not {value!r}",
            field=what,
        )
    return value


def time_in_range(ms: int) -> bool:
    return MIN_TIME_MS <= ms <= MAX_TIME_MS


def ms_of(when: datetime) -> int:
    """An aware datetime as epoch ms, exactly (``timestamp() * 1000`` rounds through a float)."""
    return (when - EPOCH) // timedelta(milliseconds=1)


def iso_time(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC (``2026-12-01T09:30:00Z``, ms shown when not zero).

    Defined for every integer, so a stored value outside :data:`TIME_RANGE` (written by an
    older version or another program) still reads: years past 9999 or before 0 take the
    expanded form JavaScript's Date also writes and reads, ``+010000-01-01T11:59:59Z``.
    """
    cycles, rest = divmod(ms, _CYCLE_MS)  # rest lies in 1970 … 2369
    when = EPOCH + timedelta(milliseconds=rest)
    year = when.year + 400 * cycles
    stamp = f"{when:%m-%dT%H:%M:%S}" + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")
    if 0 <= year <= 9999:
        return f"{year:04d}-{stamp}"
    return f"{'+' if year > 0 else '-'}{abs(year):06d}-{stamp}"
