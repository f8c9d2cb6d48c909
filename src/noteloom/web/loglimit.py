"""Rate limits for log lines that repeat, so a flood of one failure cannot fill the disk.

With 1,100 idle connections against ``ulimit -n 1024`` the server once wrote 843,278
tracebacks (341 MB) in 13 s: every accept, and every request that needed a file, failed
the same way. A line is now keyed by its logger, its message template (not the
formatted text, which differs per client) and its exception type. The first ``burst``
records of a key in each ``interval`` pass in full; the next one passes as a single
line that says the rest are being counted; the first record after the interval carries
the count of those dropped.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

#: The loggers whose handlers get the filter: ours and asyncio's propagate to the root.
SERVER_LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access")
_DECIDED = "_noteloom_rate_limited"


@dataclass
class _Window:
    started: float
    passed: int = 0
    dropped: int = 0


class RepeatFilter(logging.Filter):
    """Lets through the first ``burst`` records of each kind per ``interval`` seconds."""

    def __init__(
        self, burst: int = 5, interval: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.burst, self.interval, self.clock = burst, interval, clock
        self._windows: dict[tuple[str, str, str], _Window] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # A record reaches one filter once per handler; decide once so it is counted once.
        decided = getattr(record, _DECIDED, None)
        if decided is None:
            decided = self._decide(record)
            setattr(record, _DECIDED, decided)
        return bool(decided)

    def _decide(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, str(record.msg), exc)
        now = self.clock()
        window = self._windows.get(key)
        if window is None or now - window.started >= self.interval:
            if len(self._windows) > 10_000:  # templates are few; a key per client would be a bug
                self._windows.clear()
            dropped = window.dropped if window is not None else 0
            window = self._windows[key] = _Window(now)
            if dropped:
                record.msg = f"{record.msg} [{dropped} more like this in the last {self.interval:g} s were not logged]"
        window.passed += 1
        if window.passed <= self.burst:
            return True
        if window.passed > self.burst + 1:
            window.dropped += 1
            return False
        record.msg = f"{record.msg} [repeating: further ones in the next {self.interval:g} s are counted, not logged]"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def limit_repeats(repeat_filter: RepeatFilter | None = None) -> RepeatFilter:
    """Put one :class:`RepeatFilter` on the handlers of the server's loggers.

    Records with no handler of their own (asyncio's, ours) go to the root; a server
    that has none gets a stderr handler at WARNING, the level Python's last-resort
    handler would have used, so those records pass the filter too.
    """
    shared = repeat_filter or RepeatFilter()
    root = logging.getLogger()
    if not root.handlers:
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setLevel(logging.WARNING)
        stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(stderr)
    for name in SERVER_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, RepeatFilter) for f in handler.filters):
                handler.addFilter(shared)
    return shared
