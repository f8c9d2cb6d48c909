"""The events of turns: the run engine's event log (``noteloom.runs``), read by message.

A turn's run has its assistant message's id, so a turn's events are its run's events,
numbered from 1 per message. While a turn runs in this process its ``LiveTurn`` (the
run's handle) holds them — listeners wake at once — and also follows the partial answer
and the stage label the chat shows; the engine's writer stores them in batches. Other
processes read the table. Either way a client that reconnects with the last ``seq`` it
saw misses nothing and sees nothing twice.

A turn of a protected chat (``noteloom.chat.sealing``) is given its owner's ``Sealer``: what
it stores of its events (their data) and of its tool calls (arguments, output, error) is
sealed on the way to the table, while this process's listeners get them as they are, from
memory. Readers elsewhere open them with the owner's keys (``open_event_data``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.engine import Connection

from noteloom.chat.records import TurnEvent
from noteloom.chat.sealing import SEALED_KEY, seal_event_data
from noteloom.db import new_id
from noteloom.jsonvalues import dumps
from noteloom.runs import store
from noteloom.runs.live import LiveRuns, RunHandle
from noteloom.runs.store import CallOutcome
from noteloom.vault import Sealer

#: UTF-8 bytes of a call's output or error kept before sealing, so the sealed value fits the
#: column's cap (``runs.store.OUTPUT_MAX`` / ``ERROR_MAX`` characters; sealing adds a third).
SEALED_OUTPUT_BYTES = (store.OUTPUT_MAX - 400) * 3 // 4 - 64
SEALED_ERROR_BYTES = (store.ERROR_MAX - 400) * 3 // 4 - 64


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


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

    def __init__(self, message_id: str, first_seq: int, sealer: Sealer | None = None) -> None:
        super().__init__(message_id, first_seq)
        self.text = ""
        self.activity: str | None = None
        #: The owner's sealer when the turn is protected: nothing of it is stored in clear.
        self.sealer = sealer

    @property
    def message_id(self) -> str:
        return self.run_id

    @property
    def protected(self) -> bool:
        return self.sealer is not None

    def stored(self, event: TurnEvent) -> TurnEvent:
        """``event`` as it is written to the table (its data sealed in a protected turn)."""
        if self.sealer is None:
            return event
        return replace(event, data=seal_event_data(self.sealer, self.run_id, event.seq, event.data))

    def sealed_text(self, field: str, text: str) -> str:
        """``text`` as a protected turn stores it outside its events (``text`` otherwise)."""
        return text if self.sealer is None else self.sealer.seal(self.run_id, field, text)

    def take_unsaved(self) -> list[TurnEvent]:
        return [self.stored(e) for e in super().take_unsaved()]

    def call_started(self, tool: str, arguments: Any, call_id: str | None = None) -> str:
        cid = call_id or new_id()
        if self.sealer is not None:
            arguments = {SEALED_KEY: self.sealer.seal(self.run_id, f"call:{cid}:arguments", dumps(arguments))}
        return super().call_started(tool, arguments, cid)

    def call_finished(
        self, call_id: str, outcome: CallOutcome, error: str | None = None, output: str | None = None,
    ) -> None:
        if self.sealer is not None:
            if error is not None:
                error = self.sealer.seal(self.run_id, f"call:{call_id}:error", _cut(error, SEALED_ERROR_BYTES))
            if output is not None:
                output = self.sealer.seal(self.run_id, f"call:{call_id}:output", _cut(output, SEALED_OUTPUT_BYTES))
        super().call_finished(call_id, outcome, error, output)

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
