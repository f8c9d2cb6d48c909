"""The events of turns: the run engine's event log (``noteloom.runs``), read by message.

A turn's run has its assistant message's id, so a turn's events are its run's events,
numbered from 1 per message. While a turn runs in this process its ``LiveTurn`` (the
run's handle) holds them — listeners wake at once — and also follows the partial answer
and the stage label the chat shows; the engine's writer stores them in batches. Other
processes read the table. Either way a client that reconnects with the last ``seq`` it
saw misses nothing and sees nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

from noteloom.chat.records import TurnEvent
from noteloom.runs import store
from noteloom.runs.live import LiveRuns, RunHandle


def append_events(conn: Connection, message_id: str, events: Sequence[TurnEvent]) -> None:
    store.append_events(conn, message_id, events)


def events_after(conn: Connection, message_id: str, after_seq: int, limit: int = 1000) -> list[TurnEvent]:
    return store.read_events(conn, message_id, after_seq, limit)


def last_seq(conn: Connection, message_id: str) -> int:
    return store.last_seq(conn, message_id)


class LiveTurn(RunHandle):
    """One run of a turn in this process: its events so far, its partial answer, its
    stage label, its cancel flag. Events are numbered from ``first_seq``; earlier ones
    are in the table."""

    def __init__(self, message_id: str, first_seq: int) -> None:
        super().__init__(message_id, first_seq)
        self.text = ""
        self.activity: str | None = None

    @property
    def message_id(self) -> str:
        return self.run_id

    def published(self, event: TurnEvent) -> None:
        if event.kind == "text":
            self.text += str(event.data.get("text", ""))
        elif event.kind == "activity":
            self.activity = event.data.get("label")


class LiveTurns:
    """The turns running in this process, by assistant message id (the engine's runs that
    are turns)."""

    def __init__(self, runs: LiveRuns[RunHandle]) -> None:
        self._runs = runs

    def get(self, message_id: str) -> LiveTurn | None:
        run = self._runs.get(message_id)
        return run if isinstance(run, LiveTurn) else None

    def __len__(self) -> int:
        return sum(1 for r in self._runs.all() if isinstance(r, LiveTurn))

    async def wait_for_any(self, timeout: float) -> None:
        """Until some run starts in this process, at most ``timeout`` seconds."""
        await self._runs.wait_for_any(timeout)
