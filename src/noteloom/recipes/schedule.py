"""When a recipe runs: a cron expression read in an IANA time zone, or never on its own.

Cron parsing and time-zone arithmetic come from ``cronsim`` and ``zoneinfo``, not from
code of ours: a daily 02:30 on a spring-forward night, a 01:30 that happens twice in
autumn, "the last Friday" — a maintained library has met them all. Times the rest of the
app handles are UTC milliseconds.

    s = parse_schedule("0 7 * * 1-5", "Europe/Paris")
    s.next_after(now_ms)          # the next fire time, UTC ms
    s.upcoming(now_ms, 5)         # the next five, for a confirmation card
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from noteloom.errors import InvalidInput

MANUAL, INTERACTIVE = "manual", "interactive"
#: Schedules that never fire on their own: ``manual`` (run on demand), ``interactive``
#: (run from the chat or the command line only, never by the scheduler).
SCHEDULE_WORDS = (MANUAL, INTERACTIVE)
#: A valid expression to show beside an invalid one.
EXAMPLE = "0 7 * * 1-5"
#: The next fire time is looked for within this many years (``0 0 30 2 *`` never fires).
_HORIZON_YEARS = 5


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; ``cron`` is ``None`` for ``manual`` and ``interactive``."""

    text: str
    timezone: str
    cron: str | None

    @property
    def fires(self) -> bool:
        return self.cron is not None

    def _iter(self, after_ms: int) -> Iterator[datetime]:
        assert self.cron is not None
        tz = ZoneInfo(self.timezone)
        # cronsim yields times strictly after the start, at whole minutes.
        start = datetime.fromtimestamp(after_ms / 1000, tz).replace(microsecond=0)
        return CronSim(self.cron, start)

    def next_after(self, after_ms: int) -> int | None:
        """The first fire time strictly after ``after_ms`` (UTC ms), or ``None`` if it never fires."""
        if self.cron is None:
            return None
        limit = datetime.fromtimestamp(after_ms / 1000, UTC).year + _HORIZON_YEARS
        for when in self._iter(after_ms):
            if when.year > limit:
                return None
            ms = int(when.timestamp() * 1000)
            if ms > after_ms:
                return ms
        return None

    def upcoming(self, after_ms: int, count: int = 5) -> list[int]:
        """The next ``count`` fire times after ``after_ms``."""
        out: list[int] = []
        at = after_ms
        while len(out) < count:
            nxt = self.next_after(at)
            if nxt is None:
                break
            out.append(nxt)
            at = nxt
        return out

    def between(self, after_ms: int, until_ms: int, most: int) -> list[int]:
        """Fire times in ``(after_ms, until_ms]``, at most ``most`` of them (the latest ones)."""
        out: list[int] = []
        at = after_ms
        while True:
            nxt = self.next_after(at)
            if nxt is None or nxt > until_ms:
                return out[-most:] if most else []
            out.append(nxt)
            if len(out) > most * 4:  # bounded however long the downtime was
                out = out[-most:]
            at = nxt

    def explain(self) -> str:
        """The schedule in words ("At 07:00 on Monday through Friday (Europe/Paris)")."""
        if self.cron is None:
            return "Runs only when started" if self.text == MANUAL else "Runs only from the chat or the command line"
        try:
            words = str(CronSim(self.cron, datetime.now(UTC)).explain())
        except Exception:  # explain() covers less than the parser; the expression is still valid
            words = self.cron
        return f"{words} ({self.timezone})"

    def as_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "schedule": self.text,
            "timezone": self.timezone,
            "explain": self.explain(),
            "next": [iso(ms, self.timezone) for ms in self.upcoming(now_ms, 5)],
        }


def check_timezone(value: Any) -> str:
    """``value`` if it names an IANA time zone ("Europe/Paris", "UTC")."""
    if not isinstance(value, str) or not value or len(value) > 64 or value.startswith(("/", ".")) or ".." in value:
        raise InvalidInput(f"timezone {value!r} is not an IANA time zone name, e.g. Europe/Paris or UTC",
                           field="timezone")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(f"timezone {value!r} is not an IANA time zone name, e.g. Europe/Paris or UTC",
                           field="timezone") from None
    return value


def parse_schedule(text: str, timezone: str) -> Schedule:
    """A schedule from its text; ``InvalidInput(field="schedule")`` says why a cron
    expression is wrong and shows a valid one with its next five fire times."""
    tz = check_timezone(timezone)
    words = " ".join(text.split())
    if words.lower() in SCHEDULE_WORDS:
        return Schedule(words.lower(), tz, None)
    fields = words.split(" ")
    why: str | None = None
    if len(fields) != 5:
        why = (f"it has {len(fields)} field{'s' if len(fields) != 1 else ''}; a cron expression has five "
               "(minute hour day-of-month month day-of-week)")
    else:
        try:
            CronSim(words, datetime.now(UTC))
        except CronSimError as exc:
            why = str(exc).rstrip(".").lower() or "it does not parse"
        except Exception as exc:  # the parser's own slips (IndexError …) are still bad input
            why = f"it does not parse ({type(exc).__name__})"
    if why is not None:
        example = Schedule(EXAMPLE, tz, EXAMPLE)
        now = int(datetime.now(UTC).timestamp() * 1000)
        nxt = ", ".join(iso(ms, tz) for ms in example.upcoming(now, 5))
        raise InvalidInput(
            f"schedule {words!r} is not a valid cron expression: {why}. Write five fields, or "
            f"{' or '.join(SCHEDULE_WORDS)}; for example {EXAMPLE!r} ({example.explain()}) fires next at {nxt}",
            field="schedule",
        )
    return Schedule(words, tz, words)


def iso(ms: int, timezone: str) -> str:
    """``ms`` as local ISO 8601 in ``timezone``, with its offset."""
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(timezone)).isoformat(timespec="minutes")
