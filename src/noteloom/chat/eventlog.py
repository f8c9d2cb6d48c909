"""The stored events of turns, numbered per assistant message, and their live twin in memory.

A running turn's events go to ``LiveTurn`` first — listeners in this process wake at
once — and a writer task stores them in batches (a batch is whatever piled up while
the previous one was written, so a busy database means bigger batches, not a
backlog). Listeners in other processes read the table. Either way a client that
reconnects with the last ``seq`` it saw misses nothing and sees nothing twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import anyio
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.chat import tables as t
from noteloom.chat.records import EventKind, TurnEvent
from noteloom.db import now_ms


def append_events(conn: Connection, message_id: str, events: Sequence[TurnEvent]) -> None:
    if events:
        conn.execute(
            t.events.insert(),
            [
                {"message_id": message_id, "seq": e.seq, "kind": e.kind, "data": json.dumps(e.data), "time": e.time}
                for e in events
            ],
        )


def events_after(conn: Connection, message_id: str, after_seq: int, limit: int = 1000) -> list[TurnEvent]:
    rows = conn.execute(
        sa.select(t.events)
        .where(t.events.c.message_id == message_id, t.events.c.seq > after_seq)
        .order_by(t.events.c.seq)
        .limit(limit)
    ).all()
    return [TurnEvent(r.seq, r.kind, json.loads(r.data), r.time) for r in rows]


def last_seq(conn: Connection, message_id: str) -> int:
    return int(
        conn.execute(sa.select(sa.func.max(t.events.c.seq)).where(t.events.c.message_id == message_id)).scalar() or 0
    )


class LiveTurn:
    """One run of a turn in this process: its events so far, its partial answer, its
    cancel flag. Events are numbered from ``first_seq``; earlier ones are in the table."""

    def __init__(self, message_id: str, first_seq: int) -> None:
        self.message_id = message_id
        self.first_seq = first_seq
        self.events: list[TurnEvent] = []
        self.unsaved: list[TurnEvent] = []
        self.text = ""
        self.activity: str | None = None
        self.started = time.monotonic()
        self.cancelled = anyio.Event()
        #: The writer stops once this is set and nothing is left to store.
        self.stopping = False
        #: Set when the run has settled and every event is stored.
        self.closed = False
        self._changed = anyio.Event()

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.events) - 1

    def emit(self, kind: EventKind, data: dict[str, Any]) -> TurnEvent:
        """Record an event and wake the listeners; the writer stores it soon after."""
        event = self.reserve(kind, data)
        self.unsaved.append(event)
        self.publish(event)
        return event

    def reserve(self, kind: EventKind, data: dict[str, Any]) -> TurnEvent:
        """The next event, numbered but not yet shown: the last event of a run is shown
        only once it is stored with the turn's final status, so a listener that sees it
        and then reads the message finds the turn settled."""
        return TurnEvent(self.first_seq + len(self.events), kind, data, now_ms())

    def publish(self, event: TurnEvent) -> None:
        if event.seq != self.first_seq + len(self.events):
            raise ValueError(f"event {event.seq} is out of order; {self.first_seq + len(self.events)} is next")
        self.events.append(event)
        if event.kind == "text":
            self.text += str(event.data.get("text", ""))
        elif event.kind == "activity":
            self.activity = event.data.get("label")
        self._wake()

    def take_unsaved(self) -> list[TurnEvent]:
        batch, self.unsaved = self.unsaved, []
        return batch

    def after(self, seq: int) -> list[TurnEvent]:
        """Events with a number above ``seq`` (those this object holds)."""
        start = max(seq + 1 - self.first_seq, 0)
        return self.events[start:]

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


class LiveTurns:
    """The turns running in this process, by assistant message id."""

    def __init__(self) -> None:
        self._turns: dict[str, LiveTurn] = {}
        self._arrived = anyio.Event()

    def get(self, message_id: str) -> LiveTurn | None:
        return self._turns.get(message_id)

    def add(self, turn: LiveTurn) -> None:
        self._turns[turn.message_id] = turn
        arrived, self._arrived = self._arrived, anyio.Event()
        arrived.set()

    def remove(self, turn: LiveTurn) -> None:
        if self._turns.get(turn.message_id) is turn:
            del self._turns[turn.message_id]

    def __len__(self) -> int:
        return len(self._turns)

    async def wait_for_any(self, timeout: float) -> None:
        """Until some turn starts in this process, at most ``timeout`` seconds."""
        arrived = self._arrived
        with anyio.move_on_after(timeout):
            await arrived.wait()
