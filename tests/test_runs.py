"""The run engine: numbered events resumable from any seq, a cancel from another process
seen mid-stream and between steps, the reaper for runs whose runner died or went silent,
call records that name the call a hung run was in, and an end written in one transaction;
on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from decimal import Decimal

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.runs import (
    RunEnd,
    RunEngine,
    RunError,
    RunEvent,
    RunHandle,
    RunSettings,
    Spent,
    read_events,
    store,
)
from noteloom.runs import tables as t
from noteloom.runs.liveness import RunnerLease
from noteloom.runs.store import CallStart

pytestmark = pytest.mark.anyio
#: No background beat or poll fires during a test unless the test asks for it.
QUIET = RunSettings(cancel_poll=60.0, heartbeat=60.0, stale_after=600.0)
QUICK = RunSettings(cancel_poll=0.02, heartbeat=60.0, stale_after=600.0)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    e = db.create_db_engine(database_url)
    db.migrate(e)
    try:
        yield e
    finally:
        e.dispose()


@asynccontextmanager
async def running(engine: Engine, settings: RunSettings = QUIET) -> AsyncIterator[RunEngine]:
    runs = RunEngine(engine, settings)
    async with runs.running():
        yield runs


def new_run(runs: RunEngine, kind: str = "test") -> str:
    with db.write_tx(runs.db) as c:
        return runs.create(c, kind=kind)


def row(engine: Engine, run_id: str) -> store.Run:
    with db.read_tx(engine) as c:
        run = store.get(c, run_id)
    assert run is not None
    return run


def stored(engine: Engine, run_id: str, after: int = 0) -> list[RunEvent]:
    with db.read_tx(engine) as c:
        return read_events(c, run_id, after)


async def until_stored(engine: Engine, what: str, check: object) -> None:
    """Until ``check()`` holds for what the table shows (the writer stores in the background)."""
    assert callable(check)
    with anyio.fail_after(30):
        while not await anyio.to_thread.run_sync(check):
            await anyio.sleep(0.01)


async def ended(handle: RunHandle) -> None:
    """Until the run has settled (leaving ``running`` earlier would interrupt it)."""
    with anyio.fail_after(30):
        while not handle.closed:
            await handle.wait(1.0)


async def read_live(handle: RunHandle, after: int) -> list[RunEvent]:
    """Every event after ``after`` as a listener in this process sees it, until the run closes."""
    out: list[RunEvent] = []
    with anyio.fail_after(30):
        while True:
            batch = handle.after(after)
            out.extend(batch)
            if batch:
                after = batch[-1].seq
            elif handle.closed:
                return out
            else:
                await handle.wait(5.0)


# -- events ---------------------------------------------------------------------------------


async def test_events_are_numbered_and_resumable_from_any_seq_live_and_from_the_table(engine: Engine) -> None:
    halfway, go_on = anyio.Event(), anyio.Event()

    async def body(h: RunHandle) -> RunEnd:
        for i in range(10):
            h.emit("tick", {"i": i})
        halfway.set()
        await go_on.wait()
        for i in range(10, 20):
            h.emit("tick", {"i": i})
        return RunEnd("succeeded")

    async with running(engine) as runs:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await halfway.wait()
        readers = {}
        async with anyio.create_task_group() as tg:
            for after in (0, 3, 10):
                async def read(after: int = after) -> None:
                    readers[after] = await read_live(handle, after)
                tg.start_soon(read)
            go_on.set()
    # Live: each listener got exactly the events after its seq, the run's end last.
    for after, events in readers.items():
        assert [e.seq for e in events] == list(range(after + 1, 22))
        assert events[-1].kind == "done" and events[-1].data["status"] == "succeeded"
    # Stored: the same numbers from any seq, as another process reads them.
    whole = stored(engine, rid)
    assert [(e.seq, e.kind) for e in whole] == [(e.seq, e.kind) for e in readers[0]]
    assert [e.data.get("i") for e in whole[:-1]] == list(range(20))
    for after in range(0, 22):
        assert [e.seq for e in stored(engine, rid, after)] == list(range(after + 1, 22))
    assert row(engine, rid).status == "succeeded"


async def test_a_run_that_waits_and_resumes_numbers_its_events_on(engine: Engine) -> None:
    async def first(h: RunHandle) -> RunEnd:
        h.emit("tick", {})
        return RunEnd("waiting", done={"status": "waiting"}, spent=Spent(100, 10, Decimal("0.001"), "m:one"))

    async def second(h: RunHandle) -> RunEnd:
        h.emit("tick", {})
        return RunEnd("succeeded", spent=Spent(50, 5, Decimal("0.0005")))

    async with running(engine) as runs:
        rid = new_run(runs)
        await runs.execute(RunHandle(rid), first)
        assert row(engine, rid).status == "waiting"
        with db.write_tx(engine) as c:
            runs.resume(c, rid)
            seq = store.last_seq(c, rid)
        await runs.execute(RunHandle(rid, seq + 1), second)
    assert [e.seq for e in stored(engine, rid)] == [1, 2, 3, 4]
    assert [e.kind for e in stored(engine, rid)] == ["tick", "done", "tick", "done"]
    run = row(engine, rid)
    assert run.status == "succeeded" and run.runner_id == runs.id
    # What each part spent is counted once, the model kept from the part that named it.
    assert (run.input_tokens, run.output_tokens, run.cost_usd, run.model) == (150, 15, Decimal("0.0015"), "m:one")


async def test_a_part_of_unknown_price_leaves_the_runs_cost_unknown(engine: Engine) -> None:
    async def unpriced(h: RunHandle) -> RunEnd:
        return RunEnd("succeeded", spent=Spent(7, 3, None, "local:model"))

    async with running(engine) as runs:
        rid = new_run(runs)
        await runs.execute(RunHandle(rid), unpriced)
    run = row(engine, rid)
    assert (run.input_tokens, run.output_tokens, run.cost_usd) == (7, 3, None)
    with db.read_tx(engine) as c:
        shown = store.view(c, rid)
    assert shown is not None and shown["cost_usd"] is None and shown["usage"] == {"input_tokens": 7, "output_tokens": 3}


# -- cancel ---------------------------------------------------------------------------------


async def test_a_cancel_from_another_engine_is_seen_mid_stream(engine: Engine) -> None:
    streaming = anyio.Event()

    async def body(h: RunHandle) -> RunEnd:
        stop = anyio.Event()
        h.on_cancel(stop.set)
        h.emit("text", {"text": "partial"})
        streaming.set()
        with anyio.fail_after(30):
            await stop.wait()
        return RunEnd("cancelled")

    async with running(engine, QUICK) as runs, running(engine) as other:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await streaming.wait()
        assert other.request_cancel(rid) is True  # only the row changes: no live handle there
        events = await read_live(handle, 0)
    assert [e.kind for e in events] == ["text", "done"]
    run = row(engine, rid)
    assert run.status == "cancelled" and not run.cancel_requested and run.finished_time is not None
    assert other.request_cancel(rid) is False  # ended: nothing to cancel


async def test_a_cancel_from_another_engine_is_seen_between_steps(engine: Engine) -> None:
    step_one, asked = anyio.Event(), anyio.Event()
    seen: list[bool] = []

    async def body(h: RunHandle) -> RunEnd:
        h.emit("step", {"n": 1})
        step_one.set()
        await asked.wait()
        # Between steps the run reads the flag itself (the watcher polls only once a minute here).
        seen.append(await anyio.to_thread.run_sync(runs.cancel_requested, h.run_id))
        if seen[-1]:
            return RunEnd("cancelled")
        h.emit("step", {"n": 2})
        return RunEnd("succeeded")

    async with running(engine) as runs, running(engine) as other:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await step_one.wait()
        other.request_cancel(rid)
        asked.set()
        await ended(handle)
    assert seen == [True]
    assert row(engine, rid).status == "cancelled"
    assert [e.kind for e in stored(engine, rid)] == ["step", "done"]


# -- the reaper -------------------------------------------------------------------------------


def _orphan(engine: Engine, runner_id: str, heartbeat: int) -> str:
    rid = db.new_id()
    with db.write_tx(engine) as c:
        store.create(c, rid, kind="test", user_id=None, subject_id=None, runner_id=runner_id)
        c.execute(t.runs.update().where(t.runs.c.id == rid).values(heartbeat_time=heartbeat))
        store.append_events(c, rid, [RunEvent(1, "text", {"text": "half"}, db.now_ms())])
    return rid


async def test_a_run_whose_runner_died_is_reaped_when_an_engine_starts(engine: Engine) -> None:
    dead = RunnerLease(engine)
    dead.acquire()
    dead.release()  # its process is gone: nobody holds its lease
    alive = RunnerLease(engine)
    alive.acquire()
    try:
        orphan = _orphan(engine, dead.id, db.now_ms())  # a fresh heartbeat: only the lease tells
        living = _orphan(engine, alive.id, db.now_ms())
        async with running(engine):
            pass
        run = row(engine, orphan)
        assert run.status == "failed" and run.error_code == "interrupted"
        assert [(e.seq, e.kind) for e in stored(engine, orphan)] == [(1, "text"), (2, "error"), (3, "done")]
        assert stored(engine, orphan)[-1].data["status"] == "failed"
        assert row(engine, living).status == "running"  # its runner holds its lease
    finally:
        alive.release()


async def test_a_run_whose_heartbeat_went_stale_is_reaped_by_the_threshold_given(engine: Engine) -> None:
    alive = RunnerLease(engine)  # the lease proves nothing against a silent heartbeat
    alive.acquire()
    try:
        old = _orphan(engine, alive.id, db.now_ms())
        fresh = _orphan(engine, alive.id, db.now_ms())
        async with running(engine) as runs:
            now = db.now_ms()
            with db.write_tx(engine) as c:  # one silent for five seconds, one that just beat
                for rid, beat in ((old, now - 5_000), (fresh, now)):
                    c.execute(t.runs.update().where(t.runs.c.id == rid).values(heartbeat_time=beat))
            assert runs.reap(now - 60_000) == []  # a minute's window: neither is stale
            assert runs.reap(now - 1_000) == [old]
            assert runs.reap(now - 1_000) == []  # settled once
        assert row(engine, old).status == "failed" and row(engine, fresh).status == "running"
    finally:
        alive.release()


async def test_a_run_running_in_this_process_is_never_reaped_here(engine: Engine) -> None:
    started, finish = anyio.Event(), anyio.Event()

    async def body(h: RunHandle) -> RunEnd:
        started.set()
        await finish.wait()
        return RunEnd("succeeded")

    async with running(engine) as runs:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await started.wait()
        assert runs.reap(db.now_ms() + 60_000) == []
        finish.set()
        await ended(handle)
    assert row(engine, rid).status == "succeeded"


async def test_an_owner_shows_its_reaped_runs_in_its_own_words(engine: Engine) -> None:
    dead = RunnerLease(engine)
    dead.acquire()
    dead.release()
    orphan = _orphan(engine, dead.id, 1)
    with db.write_tx(engine) as c:
        c.execute(t.runs.update().where(t.runs.c.id == orphan).values(kind="note_job"))
    seen: list[tuple[str, str]] = []

    def reaped(c: Connection, run: store.Run, error: RunError, open_calls: object) -> tuple[dict[str, str], dict[str, str]]:
        seen.append((run.id, error.code))
        return {"code": "gone", "message": "the job stopped"}, {"status": "failed", "why": "gone"}

    runs = RunEngine(engine, QUIET)
    runs.on_reap("note_job", reaped)
    async with runs.running():
        pass
    assert seen == [(orphan, "interrupted")]
    events = stored(engine, orphan)
    assert events[-2].data == {"code": "gone", "message": "the job stopped"}
    assert events[-1].data == {"status": "failed", "why": "gone"}


# -- calls ----------------------------------------------------------------------------------


async def test_calls_are_recorded_as_they_start_and_end(engine: Engine) -> None:
    in_call, done_call = anyio.Event(), anyio.Event()

    async def body(h: RunHandle) -> RunEnd:
        cid = h.call_started("search_notes", {"query": "tent", "big": "x" * 20_000})
        in_call.set()
        await done_call.wait()
        h.call_finished(cid, "ok")
        denied = h.call_started("delete_note", {"id": "n1"})
        h.call_finished(denied, "denied", "delete_note is denied by policy")
        h.call_started("never_ends", {})
        return RunEnd("succeeded")

    async with running(engine) as runs:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await in_call.wait()

        def started() -> bool:
            with db.read_tx(engine) as c:
                return [(x.tool, x.finished_time) for x in store.calls_of(c, rid)] == [("search_notes", None)]

        await until_stored(engine, "the call's start", started)  # stored while the call runs
        with db.read_tx(engine) as c:
            shown = store.view(c, rid)
        assert shown is not None and shown["status"] == "running"
        assert shown["in_call"]["tool"] == "search_notes"  # what a hung run is in, while it hangs
        done_call.set()
        await ended(handle)
    with db.read_tx(engine) as c:
        calls = store.calls_of(c, rid)
    assert [(x.seq, x.tool, x.outcome) for x in calls] == [
        (1, "search_notes", "ok"), (2, "delete_note", "denied"), (3, "never_ends", "interrupted"),
    ]
    assert calls[0].arguments["truncated"] is True and len(calls[0].arguments["preview"]) == store.ARGUMENTS_MAX
    assert calls[1].error == "delete_note is denied by policy"
    assert all(x.finished_time is not None for x in calls)
    with db.read_tx(engine) as c:
        shown = store.view(c, rid)
    assert shown is not None and shown["in_call"] is None
    assert [x["outcome"] for x in shown["calls"]] == ["ok", "denied", "interrupted"]


async def test_an_engine_that_owns_some_kinds_leaves_the_runs_of_other_kinds_to_their_owners(engine: Engine) -> None:
    # A process runs an engine per owner (the chat's, the recipes'): the recipes' engine must
    # never settle a chat turn, whose message only the chat's reaper marks interrupted.
    dead = RunnerLease(engine)
    dead.acquire()
    dead.release()
    theirs, mine = _orphan(engine, dead.id, 1), _orphan(engine, dead.id, 1)
    with db.write_tx(engine) as c:
        c.execute(t.runs.update().where(t.runs.c.id == theirs).values(kind="chat_turn"))
        c.execute(t.runs.update().where(t.runs.c.id == mine).values(kind="recipe"))
    recipes = RunEngine(engine, QUIET)
    recipes.on_reap("recipe", lambda c, run, error, calls: (error.as_dict(), {"status": "failed"}))
    async with recipes.running():
        assert recipes.reap(db.now_ms()) == []  # its own went at start-up; the other is not its
    assert row(engine, mine).status == "failed"
    assert row(engine, theirs).status == "running"
    async with running(engine):  # an engine that registered no kind reaps every kind
        pass
    assert row(engine, theirs).status == "failed"


async def test_a_call_started_and_never_finished_is_named_in_the_reaped_runs_error(engine: Engine) -> None:
    dead = RunnerLease(engine)
    dead.acquire()
    dead.release()
    rid = _orphan(engine, dead.id, db.now_ms())
    with db.write_tx(engine) as c:
        store.record_calls(c, rid, [CallStart("c1", "read_note", {"id": "n1"}, db.now_ms())])
    async with running(engine):
        pass
    run = row(engine, rid)
    assert run.status == "failed" and run.error_code == "interrupted"
    assert run.error_message is not None and "interrupted during tool 'read_note'" in run.error_message
    assert "read_note" in stored(engine, rid)[-2].data["message"]
    with db.read_tx(engine) as c:
        [call] = store.calls_of(c, rid)
    assert call.outcome == "interrupted" and call.finished_time is not None


# -- the end --------------------------------------------------------------------------------


async def test_the_end_is_written_in_one_transaction(engine: Engine) -> None:
    stepped = anyio.Event()

    def crash(c: Connection) -> None:
        c.execute(sa.text("SELECT 1"))
        raise RuntimeError("the process died while writing the end")

    async def body(h: RunHandle) -> RunEnd:
        h.emit("step", {"n": 1})
        h.call_started("update_note", {"id": "n1"})
        stepped.set()
        return RunEnd("succeeded", write=crash)

    async with running(engine) as runs:
        rid = new_run(runs)
        handle = runs.start(RunHandle(rid), body)
        await stepped.wait()
        await ended(handle)
        # Nothing of the end was written: the run is as its last batch left it, consistent.
        run = row(engine, rid)
        assert run.status == "running" and run.finished_time is None
        assert [e.kind for e in stored(engine, rid)] == ["step"]
        # The reaper settles it like any run whose process died between steps.
        assert runs.reap(db.now_ms() + 60_000) == [rid]
    run = row(engine, rid)
    assert run.status == "failed" and "update_note" in (run.error_message or "")
    assert [e.kind for e in stored(engine, rid)] == ["step", "error", "done"]


async def test_an_error_in_a_run_fails_it_and_a_stopping_engine_interrupts_what_runs(engine: Engine) -> None:
    started = anyio.Event()

    async def broken(h: RunHandle) -> RunEnd:
        raise ValueError("a bug")

    async def forever(h: RunHandle) -> RunEnd:
        h.emit("text", {"text": "still going"})
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with running(engine) as runs:
        bad = new_run(runs)
        await runs.execute(RunHandle(bad), broken)
        long = new_run(runs)
        runs.start(RunHandle(long), forever)
        await started.wait()
    assert (row(engine, bad).status, row(engine, bad).error_code) == ("failed", "internal_error")
    assert (row(engine, long).status, row(engine, long).error_code) == ("failed", "interrupted")
    assert [e.kind for e in stored(engine, long)] == ["text", "error", "done"]
    assert not runs.accepting


async def test_a_run_is_refused_when_the_engine_is_not_running_or_runs_it_already(engine: Engine) -> None:
    from noteloom.errors import Busy, Unavailable

    async def body(h: RunHandle) -> RunEnd:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    runs = RunEngine(engine, QUIET)
    with pytest.raises(Unavailable):
        runs.start(RunHandle("x"), body)
    async with runs.running():
        rid = new_run(runs)
        runs.start(RunHandle(rid), body)
        with pytest.raises(Busy):
            runs.start(RunHandle(rid), body)
