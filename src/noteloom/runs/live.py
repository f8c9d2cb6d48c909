"""A running run's live twin in memory: its events so far, the call records not yet
stored, its cancel flag. Listeners in this process wake at once; a writer stores the
events in batches (a batch is whatever piled up while the previous one was written, so
a busy database means bigger batches, not a backlog); other processes read the table.
Either way a reader that resumes after the last ``seq`` it saw misses nothing and sees
nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio

from noteloom.db import new_id, now_ms
from noteloom.runs.store import CallEnd, CallOutcome, CallStart, RunEvent


class RunHandle:
    """What a run's code holds: emit events, record its tool calls, see a cancel.

    Events are numbered from ``first_seq``; earlier ones (an earlier part of the run,
    before it waited) are in the table."""

    def __init__(self, run_id: str, first_seq: int = 1) -> None:
        self.run_id = run_id
        self.first_seq = first_seq
        self.events: list[RunEvent] = []
        self.unsaved: list[RunEvent] = []
        self.unsaved_calls: list[CallStart | CallEnd] = []
        self.started = time.monotonic()
        #: Set once a cancel was asked, here or (seen by the watcher) in another process.
        self.cancelled = anyio.Event()
        #: The writer stops once this is set and nothing is left to store.
        self.stopping = False
        #: Set when the run has settled and every event is stored.
        self.closed = False
        self._on_cancel: list[Callable[[], None]] = []
        self._changed = anyio.Event()

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.events) - 1

    # -- events ---------------------------------------------------------------------------

    def emit(self, kind: str, data: dict[str, Any]) -> RunEvent:
        """Record an event and wake the listeners; the writer stores it soon after."""
        event = self.reserve(kind, data)
        self.unsaved.append(event)
        self.publish(event)
        return event

    def reserve(self, kind: str, data: dict[str, Any]) -> RunEvent:
        """The next event, numbered but not yet shown: the last event of a run is shown
        only once it is stored with the run's end, so a listener that sees it and then
        reads the run finds it settled."""
        return RunEvent(self.first_seq + len(self.events), kind, data, now_ms())

    def publish(self, event: RunEvent) -> None:
        if event.seq != self.first_seq + len(self.events):
            raise ValueError(f"event {event.seq} is out of order; {self.first_seq + len(self.events)} is next")
        self.events.append(event)
        self.published(event)
        self._wake()

    def published(self, event: RunEvent) -> None:
        """Called for each event shown (a subclass keeps what it derives from them)."""

    def take_unsaved(self) -> list[RunEvent]:
        batch, self.unsaved = self.unsaved, []
        return batch

    def take_calls(self) -> list[CallStart | CallEnd]:
        ops, self.unsaved_calls = self.unsaved_calls, []
        return ops

    def after(self, seq: int) -> list[RunEvent]:
        """Events with a number above ``seq`` (those this object holds)."""
        start = max(seq + 1 - self.first_seq, 0)
        return self.events[start:]

    # -- calls ----------------------------------------------------------------------------

    def call_started(self, tool: str, arguments: Any, call_id: str | None = None) -> str:
        """Audit a tool call as started (stored with the next batch of events); its id."""
        cid = call_id or new_id()
        self.unsaved_calls.append(CallStart(cid, tool, arguments, now_ms()))
        self._wake()
        return cid

    def call_finished(
        self, call_id: str, outcome: CallOutcome, error: str | None = None, output: str | None = None,
    ) -> None:
        self.unsaved_calls.append(CallEnd(call_id, outcome, error, now_ms(), output))
        self._wake()

    # -- cancel ---------------------------------------------------------------------------

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when the run is asked to stop (it runs on the event loop)."""
        self._on_cancel.append(callback)

    def cancel(self) -> None:
        """Signal the run at once (from this process; the database flag covers the rest)."""
        self.cancelled.set()

    def fire_cancel(self) -> None:
        callbacks, self._on_cancel = self._on_cancel, []
        for cb in callbacks:
            cb()

    # -- the writer and listeners ---------------------------------------------------------

    def stop_writing(self) -> None:
        self.stopping = True
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def wait(self, timeout: float) -> None:
        """Until the next event (or close), at most ``timeout`` seconds."""
        changed = self._changed
        with anyio.move_on_after(timeout):
            await changed.wait()


H = TypeVar("H", bound=RunHandle)


class LiveRuns(Generic[H]):
    """The runs running in this process, by run id."""

    def __init__(self) -> None:
        self._runs: dict[str, H] = {}
        self._arrived = anyio.Event()

    def get(self, run_id: str) -> H | None:
        return self._runs.get(run_id)

    def add(self, run: H) -> None:
        self._runs[run.run_id] = run
        arrived, self._arrived = self._arrived, anyio.Event()
        arrived.set()

    def remove(self, run: H) -> None:
        if self._runs.get(run.run_id) is run:
            del self._runs[run.run_id]

    def __len__(self) -> int:
        return len(self._runs)

    def all(self) -> list[H]:
        return list(self._runs.values())

    async def wait_for_any(self, timeout: float) -> None:
        """Until some run starts in this process, at most ``timeout`` seconds."""
        arrived = self._arrived
        with anyio.move_on_after(timeout):
            await arrived.wait()
