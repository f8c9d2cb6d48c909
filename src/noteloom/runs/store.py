"""Runs, their events and their call records as rows: blocking functions that take a
connection, so a caller writes a run's change in the transaction of its own."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.db import now_ms
from noteloom.runs import tables as t

RunStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled"]
#: A run in one of these states has ended: nothing changes it any more.
ENDED: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
CallOutcome = Literal["ok", "error", "denied", "held", "interrupted"]

#: A call's arguments are kept up to this many characters of JSON (a preview beyond).
ARGUMENTS_MAX = 8000
#: A call's error text is kept up to this many characters.
ERROR_MAX = 2000
#: A call's output is kept up to this many characters (the trace shows what the model read).
OUTPUT_MAX = 32_000


@dataclass(frozen=True)
class RunEvent:
    """One event of a run; ``seq`` counts from 1 per run."""

    seq: int
    kind: str
    data: dict[str, Any]
    time: int


@dataclass(frozen=True)
class Run:
    id: str
    kind: str
    user_id: str | None
    subject_id: str | None
    status: str
    error_code: str | None
    error_message: str | None
    runner_id: str | None
    heartbeat_time: int | None
    cancel_requested: bool
    created_time: int
    started_time: int | None
    finished_time: int | None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    #: ``None``: nobody knows the price.
    cost_usd: Decimal | None = None

    @property
    def ended(self) -> bool:
        return self.status in ENDED


@dataclass(frozen=True)
class RunCall:
    """The audit record of one tool call of a run."""

    run_id: str
    seq: int
    call_id: str
    tool: str
    arguments: Any
    started_time: int
    finished_time: int | None
    outcome: str | None
    error: str | None
    output: str | None = None


# -- runs ---------------------------------------------------------------------------------


def create(
    conn: Connection, run_id: str, *, kind: str, user_id: str | None, subject_id: str | None,
    runner_id: str | None, status: RunStatus = "running",
) -> None:
    """A new run, ``running`` (by ``runner_id``) unless told otherwise."""
    tm = now_ms()
    running = status == "running"
    conn.execute(t.runs.insert(), {
        "id": run_id, "kind": kind, "user_id": user_id, "subject_id": subject_id, "status": status,
        "runner_id": runner_id if running else None, "heartbeat_time": tm if running else None,
        "cancel_requested": False, "input_tokens": 0, "output_tokens": 0, "cost_usd": None,
        "created_time": tm, "started_time": tm if running else None,
        "updated_time": tm,
    })


def get(conn: Connection, run_id: str) -> Run | None:
    r = conn.execute(sa.select(t.runs).where(t.runs.c.id == run_id)).first()
    if r is None:
        return None
    return Run(
        r.id, r.kind, r.user_id, r.subject_id, r.status, r.error_code, r.error_message, r.runner_id,
        r.heartbeat_time, bool(r.cancel_requested), r.created_time, r.started_time, r.finished_time,
        r.model, int(r.input_tokens), int(r.output_tokens), Decimal(r.cost_usd) if r.cost_usd is not None else None,
    )


def resume(conn: Connection, run_id: str, *, runner_id: str | None) -> None:
    """A waiting (or queued) run runs again, by ``runner_id``."""
    tm = now_ms()
    conn.execute(
        t.runs.update().where(t.runs.c.id == run_id).values(
            status="running", cancel_requested=False, runner_id=runner_id, heartbeat_time=tm,
            started_time=sa.func.coalesce(t.runs.c.started_time, tm), updated_time=tm,
        )
    )


@dataclass(frozen=True)
class Spent:
    """What one part of a run spent on its model: added to the run's totals when it settles."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: ``None``: the price is unknown (the run's total is then unknown too).
    cost: Decimal | None = Decimal(0)
    model: str | None = None


def settle(
    conn: Connection, run_id: str, status: RunStatus, *, error_code: str | None = None,
    error_message: str | None = None, spent: Spent | None = None,
) -> None:
    """A run's end (or its pause, ``waiting``); its calls still open end ``interrupted``.
    ``spent`` is added to the run's tokens and cost (a run that waited and went on adds
    each part once)."""
    tm = now_ms()
    values: dict[str, Any] = {
        "status": status, "error_code": error_code, "error_message": error_message, "cancel_requested": False,
        "finished_time": tm, "updated_time": tm,
    }
    if spent is not None:
        run = get(conn, run_id)
        if run is not None:
            first = run.finished_time is None  # nothing was counted before this part
            prior = Decimal(0) if first else run.cost_usd
            total = prior + spent.cost if (prior is not None and spent.cost is not None) else None
            values.update(
                input_tokens=run.input_tokens + spent.input_tokens,
                output_tokens=run.output_tokens + spent.output_tokens,
                cost_usd=format_usd(total) if total is not None else None,
                model=spent.model or run.model,
            )
    conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(**values))
    conn.execute(
        t.calls.update().where(t.calls.c.run_id == run_id, t.calls.c.finished_time.is_(None))
        .values(finished_time=tm, outcome="interrupted")
    )


def format_usd(amount: Decimal) -> str:
    """A dollar amount as text without exponent notation."""
    text = format(amount.normalize(), "f")
    return text if text not in ("-0", "") else "0"


def request_cancel(conn: Connection, run_id: str) -> bool:
    """Ask a running run to stop; ``True`` when it was running (the flag was set)."""
    res = conn.execute(
        t.runs.update().where(t.runs.c.id == run_id, t.runs.c.status == "running").values(cancel_requested=True)
    )
    return bool(res.rowcount)


def cancel_requested(conn: Connection, run_id: str) -> bool:
    return bool(conn.execute(sa.select(t.runs.c.cancel_requested).where(t.runs.c.id == run_id)).scalar())


def beat(conn: Connection, run_id: str) -> None:
    """Refresh a running run's heartbeat."""
    conn.execute(
        t.runs.update().where(t.runs.c.id == run_id, t.runs.c.status == "running").values(heartbeat_time=now_ms())
    )


def running(conn: Connection) -> list[tuple[str, str, str | None, int | None]]:
    """``(run id, kind, runner id, heartbeat time)`` of every running run."""
    r = t.runs
    rows = conn.execute(sa.select(r.c.id, r.c.kind, r.c.runner_id, r.c.heartbeat_time).where(r.c.status == "running"))
    return [(x.id, x.kind, x.runner_id, x.heartbeat_time) for x in rows]


def purge(conn: Connection, run_ids: Sequence[str]) -> None:
    """Delete runs and what hangs off them, children first (not relying on SQLite's
    foreign-key pragma)."""
    for i in range(0, len(run_ids), 500):
        chunk = list(run_ids[i : i + 500])
        for child in (t.events, t.calls):
            conn.execute(child.delete().where(child.c.run_id.in_(chunk)))
        conn.execute(t.runs.delete().where(t.runs.c.id.in_(chunk)))


# -- events -------------------------------------------------------------------------------


def append_events(conn: Connection, run_id: str, events: Sequence[RunEvent]) -> None:
    if events:
        conn.execute(
            t.events.insert(),
            [{"run_id": run_id, "seq": e.seq, "kind": e.kind, "data": e.data, "time": e.time} for e in events],
        )


def read_events(conn: Connection, run_id: str, after_seq: int, limit: int = 1000) -> list[RunEvent]:
    """The stored events of ``run_id`` numbered above ``after_seq``, in order."""
    rows = conn.execute(
        sa.select(t.events)
        .where(t.events.c.run_id == run_id, t.events.c.seq > after_seq)
        .order_by(t.events.c.seq)
        .limit(limit)
    ).all()
    return [RunEvent(r.seq, r.kind, _obj(r.data), r.time) for r in rows]


def last_seq(conn: Connection, run_id: str) -> int:
    return int(conn.execute(sa.select(sa.func.max(t.events.c.seq)).where(t.events.c.run_id == run_id)).scalar() or 0)


def _obj(data: Any) -> dict[str, Any]:
    value = json.loads(data) if isinstance(data, str) else data
    return value if isinstance(value, dict) else {"value": value}


# -- calls --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallStart:
    call_id: str
    tool: str
    arguments: Any
    time: int


@dataclass(frozen=True)
class CallEnd:
    call_id: str
    outcome: CallOutcome
    error: str | None
    time: int
    output: str | None = None


def bounded(arguments: Any) -> Any:
    """``arguments`` as stored: itself when its JSON is short enough, else a preview."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(arguments)
    else:
        if len(text) <= ARGUMENTS_MAX:
            return json.loads(text)
    return {"truncated": True, "chars": len(text), "preview": text[:ARGUMENTS_MAX]}


def record_calls(conn: Connection, run_id: str, ops: Iterable[CallStart | CallEnd]) -> None:
    """Apply starts and ends of calls in order (a start is numbered after the run's last call)."""
    for op in ops:
        if isinstance(op, CallStart):
            top = conn.execute(sa.select(sa.func.max(t.calls.c.seq)).where(t.calls.c.run_id == run_id)).scalar()
            conn.execute(t.calls.insert(), {
                "run_id": run_id, "seq": int(top or 0) + 1, "call_id": op.call_id[:200], "tool": op.tool[:200],
                "arguments": bounded(op.arguments), "started_time": op.time,
            })
        else:
            conn.execute(
                t.calls.update().where(
                    t.calls.c.run_id == run_id, t.calls.c.call_id == op.call_id[:200], t.calls.c.finished_time.is_(None)
                ).values(
                    finished_time=op.time, outcome=op.outcome,
                    error=op.error[:ERROR_MAX] if op.error is not None else None,
                    output=op.output[:OUTPUT_MAX] if op.output is not None else None,
                )
            )


def calls_of(conn: Connection, run_id: str) -> list[RunCall]:
    rows = conn.execute(sa.select(t.calls).where(t.calls.c.run_id == run_id).order_by(t.calls.c.seq)).all()
    return [
        RunCall(r.run_id, r.seq, r.call_id, r.tool, r.arguments, r.started_time, r.finished_time, r.outcome, r.error,
                r.output)
        for r in rows
    ]


def open_calls(conn: Connection, run_id: str) -> list[RunCall]:
    """The calls of ``run_id`` that started and have not finished."""
    return [c for c in calls_of(conn, run_id) if c.finished_time is None]


def interrupted_message(open_calls: Sequence[RunCall]) -> str:
    """The reaped run's error: which call it was in, when one was open."""
    if not open_calls:
        return "the run's process stopped while it was running"
    names = ", ".join(repr(c.tool) for c in open_calls)
    return f"interrupted during tool {names}: the run's process stopped while the call ran"


def view(conn: Connection, run_id: str) -> dict[str, Any] | None:
    """A run as a surface shows it: status, error, times, its calls, and the call it is in
    (the last one started and not finished), if any."""
    run = get(conn, run_id)
    if run is None:
        return None
    calls = calls_of(conn, run_id)
    current = next((c for c in reversed(calls) if c.finished_time is None), None)
    return {
        "id": run.id,
        "kind": run.kind,
        "subject_id": run.subject_id,
        "status": run.status,
        "error": {"code": run.error_code, "message": run.error_message} if run.error_code else None,
        "cancel_requested": run.cancel_requested,
        "created_time": run.created_time,
        "started_time": run.started_time,
        "finished_time": run.finished_time,
        "heartbeat_time": run.heartbeat_time,
        "model": run.model,
        "usage": {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens},
        "cost_usd": format_usd(run.cost_usd) if run.cost_usd is not None else None,
        "in_call": {"tool": current.tool, "call_id": current.call_id, "started_time": current.started_time}
        if current is not None else None,
        "calls": [
            {"seq": c.seq, "call_id": c.call_id, "tool": c.tool, "arguments": c.arguments,
             "started_time": c.started_time, "finished_time": c.finished_time, "outcome": c.outcome,
             "error": c.error}
            for c in calls
        ],
    }
