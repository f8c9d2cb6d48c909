"""Durable background runs: one engine for chat turns and recipe runs.

A run is a row with a status, a heartbeat, a runner and a cancel flag (``runs``), a
numbered event log a reader resumes from any ``seq`` (``run_events``), and an audit
record per tool call (``run_calls``). :class:`RunEngine` starts runs in its task group,
stores their events and calls in batches, watches for a cancel from any process, writes
each end in one transaction and reaps the runs of processes that died. It knows nothing
of what a run does: the chat (``noteloom.chat.turns``) and the recipes build on it.

    engine = RunEngine(db_engine, RunSettings(stale_after=10))
    async with engine.running():
        with db.write_tx(db_engine) as c:
            run_id = engine.create(c, kind="recipe", user_id=owner.id)
        engine.start(RunHandle(run_id), body)   # async def body(handle) -> RunEnd
"""

from noteloom.runs.engine import Body, Progress, Reaper, RunEnd, RunEngine, RunError, RunSettings
from noteloom.runs.live import LiveRuns, RunHandle
from noteloom.runs.store import (
    ENDED,
    CallOutcome,
    Run,
    RunCall,
    RunEvent,
    RunStatus,
    Spent,
    read_events,
)

__all__ = [
    "ENDED",
    "Body",
    "CallOutcome",
    "LiveRuns",
    "Progress",
    "Reaper",
    "Run",
    "RunCall",
    "RunEnd",
    "RunEngine",
    "RunError",
    "RunEvent",
    "RunHandle",
    "RunSettings",
    "RunStatus",
    "Spent",
    "read_events",
]
