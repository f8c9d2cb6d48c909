"""The run engine: durable background runs with a heartbeat, a cross-process cancel, a
numbered event log, per-call audit records, and a reaper for runs whose process died.

A ``RunEngine`` owns one task group for the life of its process (``async with
engine.running()``). Each run is a row in ``runs`` and, while it runs here, a
:class:`~noteloom.runs.live.RunHandle`:

- its events go to the handle first (listeners in this process wake at once) and a
  writer stores them, with the call records and the run's heartbeat, in batches;
- a watcher re-reads the run's cancel flag (a cancel may come from another process)
  and refreshes the heartbeat; a cancel fires the handle's ``on_cancel`` callbacks;
- the end is written in one transaction: the last events, the calls still open
  (``interrupted``), the run's final status and error, and whatever the run's owner
  writes beside them (``RunEnd.write``). Only then is the last event shown.

A run left ``running`` by a process that died is marked failed, ``interrupted``: at
once when its runner provably has no process any more (:mod:`noteloom.runs.liveness`),
and otherwise once its heartbeat is older than ``stale_after``, by a reaper that runs
while the engine does. A call that had started and not finished is named in the error
("interrupted during tool 'x'"). A run's owner may register, per kind, how a reaped
run is shown (``on_reap``): the chat marks its message failed there.

Runs of one process never block each other: one run's failure to settle is logged and
left to the reaper.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio import to_thread
from anyio.abc import TaskGroup
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.db import new_id, now_ms
from noteloom.errors import Busy, NoteloomError, Unavailable
from noteloom.runs import store
from noteloom.runs.live import LiveRuns, RunHandle
from noteloom.runs.liveness import RunnerLease, runner_gone, sweep_leases
from noteloom.runs.store import CallEnd, CallStart, Run, RunCall, RunEvent, RunStatus, Spent

log = logging.getLogger("noteloom.runs")

#: What a run's owner writes when the reaper settles one of its runs, in the reaper's
#: transaction: it returns the data of the ``error`` and ``done`` events to store.
Reaper = Callable[[Connection, Run, "RunError", Sequence[RunCall]], tuple[dict[str, Any], dict[str, Any]]]
#: A snapshot of what a run's owner stores with each batch of events (taken on the event
#: loop, written in the writer's transaction).
Progress = Callable[[], Callable[[Connection], None]]


@dataclass(frozen=True)
class RunSettings:
    #: How often a running run looks for a cancel made in another process, in seconds.
    cancel_poll: float = 0.5
    #: How often a running run proves it is alive.
    heartbeat: float = 2.0
    #: Seconds without a heartbeat before a run counts as interrupted.
    stale_after: float = 10.0


@dataclass(frozen=True)
class RunError:
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass
class RunEnd:
    """How a run ended (``waiting``: it paused, and ``resume`` runs it again)."""

    status: RunStatus
    error: RunError | None = None
    #: The data of the ``done`` event (by default the status and the error).
    done: dict[str, Any] | None = None
    #: The run owner's own writes, in the transaction that writes the end.
    write: Callable[[Connection], None] | None = None
    #: What this part of the run spent on its model (added to the run's totals).
    spent: Spent | None = None

    def done_data(self) -> dict[str, Any]:
        if self.done is not None:
            return self.done
        return {"status": self.status, "error": self.error.as_dict() if self.error else None}


#: A run's code: it gets its handle and says how the run ended.
Body = Callable[[RunHandle], Awaitable[RunEnd]]


class RunEngine:
    """Starts, watches, settles and reaps runs; see the module docstring."""

    def __init__(self, engine: Engine, settings: RunSettings | None = None) -> None:
        self.db = engine
        self.settings = settings or RunSettings()
        self.live: LiveRuns[RunHandle] = LiveRuns()
        self.lease = RunnerLease(engine)
        self._reapers: dict[str, Reaper] = {}
        self._tg: TaskGroup | None = None

    @property
    def id(self) -> str:
        """This runner's id, written with every run it starts."""
        return self.lease.id

    def on_reap(self, kind: str, reaper: Reaper) -> None:
        """How a reaped run of ``kind`` is shown by its owner (see ``Reaper``).

        An engine that registered a reaper for some kind reaps the runs of the kinds it
        registered only: a process runs an engine per owner (the chat's, the recipes'), and a
        run settled by an engine that does not know its kind would skip its owner's part (the
        chat's message would stay "running"). An engine with none registered reaps every kind."""
        self._reapers[kind] = reaper

    def _reaps(self, kind: str) -> bool:
        return not self._reapers or kind in self._reapers

    # -- lifetime -------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RunEngine]:
        """Own the background tasks: hold this runner's lease, settle the runs of runners
        that are gone, run the reaper, and on exit let the runs still running settle as
        interrupted (then give the lease up)."""
        await to_thread.run_sync(self.lease.acquire)
        try:
            await to_thread.run_sync(self._start_up)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._reaper)
                try:
                    yield self
                finally:
                    self._tg = None
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(self.lease.release)

    def _start_up(self) -> None:
        # Before this engine accepts a run, so the first read a client makes already shows
        # its predecessor's runs settled; every other runner's lease is probed.
        sweep_leases(self.db)
        self.reap(now_ms() - int(self.settings.stale_after * 1000), probe_before_ms=now_ms())

    @property
    def accepting(self) -> bool:
        return self._tg is not None

    async def _reaper(self) -> None:
        # A runner that died shows by a missed beat; how soon is not tied to the stale window.
        period = min(self.settings.stale_after / 2, self.settings.heartbeat * 2)
        while True:
            await anyio.sleep(period)
            try:
                stamp = now_ms()
                # Probing a lease costs a connection on PostgreSQL: only for runners whose
                # runs missed a beat (a live one beats every ``heartbeat`` seconds).
                await to_thread.run_sync(functools.partial(
                    self.reap, stamp - int(self.settings.stale_after * 1000),
                    probe_before_ms=stamp - int(self.settings.heartbeat * 2000),
                ))
            except Exception:  # a failed sweep is retried at the next one
                log.exception("could not mark interrupted runs")

    def reap(self, older_than_ms: int, *, probe_before_ms: int | None = None) -> list[str]:
        """Mark failed (``interrupted``) the running runs this process does not run whose
        heartbeat is older than ``older_than_ms``, or whose runner is gone: of the runners
        of runs with a heartbeat before ``probe_before_ms``, those whose lease is free."""
        with db.read_tx(self.db) as c:  # the common case, nothing to do, takes no write lock
            rows = [r for r in store.running(c) if self.live.get(r[0]) is None and self._reaps(r[1])]
        stale = {rid for rid, _, _, beat in rows if beat is None or beat < older_than_ms}
        suspects = {
            runner for rid, _, runner, beat in rows
            if rid not in stale and runner and runner != self.id
            and probe_before_ms is not None and beat is not None and beat < probe_before_ms
        }
        gone = {runner for runner in suspects if runner_gone(self.db, runner)}
        if not stale and not gone:
            return []
        done: list[str] = []
        with db.write_tx(self.db) as c:
            for rid, kind, runner, beat in store.running(c):  # again: a run may have moved on meanwhile
                if self.live.get(rid) is not None or not self._reaps(kind):
                    continue
                if not (beat is None or beat < older_than_ms or (runner is not None and runner in gone)):
                    continue
                self._reap_one(c, rid)
                done.append(rid)
        if done:
            log.warning("marked %d run(s) interrupted: %s", len(done), ", ".join(done))
        return done

    def _reap_one(self, c: Connection, run_id: str) -> None:
        run = store.get(c, run_id)
        if run is None:
            return
        open_calls = store.open_calls(c, run_id)
        error = RunError("interrupted", store.interrupted_message(open_calls))
        reaper = self._reapers.get(run.kind)
        if reaper is not None:
            shown, done = reaper(c, run, error, open_calls)
        else:
            shown, done = error.as_dict(), {"status": "failed", "error": error.as_dict()}
        seq = store.last_seq(c, run_id)
        stamp = now_ms()
        store.append_events(c, run_id, [
            RunEvent(seq + 1, "error", shown, stamp), RunEvent(seq + 2, "done", done, stamp),
        ])
        store.settle(c, run_id, "failed", error_code=error.code, error_message=error.message)

    # -- creating and signalling ------------------------------------------------------------

    def create(
        self, conn: Connection, *, kind: str, user_id: str | None = None, subject_id: str | None = None,
        run_id: str | None = None, status: RunStatus = "running",
    ) -> str:
        """A new run row, run by this engine (in the caller's transaction); its id."""
        rid = run_id or new_id()
        store.create(conn, rid, kind=kind, user_id=user_id, subject_id=subject_id, runner_id=self.id, status=status)
        return rid

    def resume(self, conn: Connection, run_id: str) -> None:
        """A waiting run runs again, by this engine (in the caller's transaction)."""
        store.resume(conn, run_id, runner_id=self.id)

    def request_cancel(self, run_id: str) -> bool:
        """Ask a run to stop, wherever it runs; ``True`` when it was running."""
        with db.write_tx(self.db) as c:
            asked = store.request_cancel(c, run_id)
        if asked:
            self.cancel_live(run_id)
        return asked

    def cancel_live(self, run_id: str) -> None:
        """Signal a run running in this process at once (the database flag covers the rest)."""
        handle = self.live.get(run_id)
        if handle is not None:
            handle.cancel()

    def register(self, handle: RunHandle) -> None:
        """``handle`` runs in this process from now (``Busy`` if its run does already)."""
        if self.live.get(handle.run_id) is not None:
            raise Busy(f"run {handle.run_id!r} is running in this process already; wait for it to settle")
        self.live.add(handle)

    def unregister(self, handle: RunHandle) -> None:
        self.live.remove(handle)
        handle.close()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in the engine's task group."""
        if self._tg is None:
            raise Unavailable("the run engine is not running; start noteloom with `noteloom serve`")
        self._tg.start_soon(fn, *args)

    # -- one run: its writer and watcher ----------------------------------------------------

    @asynccontextmanager
    async def attend(self, handle: RunHandle, progress: Progress | None = None) -> AsyncIterator[RunHandle]:
        """While inside: store ``handle``'s events and calls as they come (with
        ``progress``), keep its heartbeat, watch for a cancel. On the way out the watcher
        stops and the writer stores what is left."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._writer, handle, progress)
            watch = anyio.CancelScope()
            tg.start_soon(self._watch, handle, watch)
            try:
                yield handle
            finally:
                watch.cancel()
                handle.stop_writing()

    async def _writer(self, handle: RunHandle, progress: Progress | None) -> None:
        """Store events as they come, in batches; stops once asked to and nothing is left."""
        while True:
            if not handle.unsaved and not handle.unsaved_calls:
                if handle.stopping:
                    return
                await handle.wait(self.settings.heartbeat)
            batch, calls = handle.take_unsaved(), handle.take_calls()
            if batch or calls:
                extra = progress() if progress is not None else None
                with anyio.CancelScope(shield=True):
                    await to_thread.run_sync(self._save_batch, handle.run_id, batch, calls, extra)

    def _save_batch(
        self, run_id: str, batch: list[RunEvent], calls: list[CallStart | CallEnd],
        extra: Callable[[Connection], None] | None,
    ) -> None:
        with db.write_tx(self.db) as c:
            store.append_events(c, run_id, batch)
            store.record_calls(c, run_id, calls)
            store.beat(c, run_id)
            if extra is not None:
                extra(c)

    async def _watch(self, handle: RunHandle, scope: anyio.CancelScope) -> None:
        """Fire the run's cancel when one arrives, here or in the database; keep the heartbeat."""
        beat = time.monotonic()
        with scope:
            while True:
                with anyio.move_on_after(self.settings.cancel_poll):
                    await handle.cancelled.wait()
                requested = handle.cancelled.is_set()
                if not requested:
                    if time.monotonic() - beat >= self.settings.heartbeat:
                        requested = await to_thread.run_sync(self._beat, handle.run_id)
                        beat = time.monotonic()
                    else:
                        requested = await to_thread.run_sync(self.cancel_requested, handle.run_id)
                if requested:
                    handle.cancelled.set()
                    handle.fire_cancel()
                    return

    def _beat(self, run_id: str) -> bool:
        with db.write_tx(self.db) as c:
            store.beat(c, run_id)
            return store.cancel_requested(c, run_id)

    def cancel_requested(self, run_id: str) -> bool:
        """Whether a cancel was asked for ``run_id`` (read now: between a run's steps)."""
        with db.read_tx(self.db) as c:
            return store.cancel_requested(c, run_id)

    # -- the end ---------------------------------------------------------------------------

    def write_end(
        self, conn: Connection, run_id: str, batch: Sequence[RunEvent], calls: Sequence[CallStart | CallEnd],
        status: RunStatus, error: RunError | None = None, spent: Spent | None = None,
    ) -> None:
        """A run's end in the caller's transaction: its last events and calls, its status
        and what it spent."""
        store.append_events(conn, run_id, batch)
        store.record_calls(conn, run_id, calls)
        if status == "running":
            raise ValueError("a run's end cannot be 'running'")
        store.settle(conn, run_id, status, error_code=error.code if error else None,
                     error_message=error.message if error else None, spent=spent)

    async def finish(self, handle: RunHandle, end: RunEnd) -> None:
        """Write the end of a run in one transaction, then show its last event."""
        if end.error is not None and end.status == "failed":
            handle.emit("error", end.error.as_dict())
        done = handle.reserve("done", end.done_data())
        batch, calls = [*handle.take_unsaved(), done], handle.take_calls()

        def write() -> None:
            with db.write_tx(self.db) as c:
                self.write_end(c, handle.run_id, batch, calls, end.status, end.error, end.spent)
                if end.write is not None:
                    end.write(c)

        await to_thread.run_sync(write)
        handle.publish(done)

    # -- the whole of a run ----------------------------------------------------------------

    def start(self, handle: RunHandle, body: Body, *, progress: Progress | None = None) -> RunHandle:
        """Run ``body`` for ``handle``'s run (a row already ``running``) in the background."""
        if self._tg is None:
            raise Unavailable("the run engine is not running; start noteloom with `noteloom serve`")
        self.register(handle)
        self._tg.start_soon(self._guarded, handle, body, progress)
        return handle

    async def _guarded(self, handle: RunHandle, body: Body, progress: Progress | None) -> None:
        """One run's failure (a database error while storing it …) must not stop the others."""
        try:
            await self.execute(handle, body, progress=progress)
        except Exception:
            log.exception("run %s could not be settled; the reaper will mark it interrupted", handle.run_id)
        finally:
            self.unregister(handle)

    async def execute(self, handle: RunHandle, body: Body, *, progress: Progress | None = None) -> None:
        """Run ``body`` to its end and settle the run: an error it raises fails the run, a
        cancel of the engine (shutting down) settles it ``interrupted``."""
        end: RunEnd | None = None
        try:
            async with self.attend(handle, progress):
                try:
                    end = await body(handle)
                except NoteloomError as exc:
                    end = RunEnd("failed", RunError("run_error", str(exc)))
                except Exception:
                    log.exception("run %s failed", handle.run_id)
                    end = RunEnd("failed", RunError("internal_error", "Something went wrong on our side (it was logged)."))
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.finish(handle, RunEnd("failed", RunError("interrupted", "the run was stopped with its process")))
            raise
        with anyio.CancelScope(shield=True):
            await self.finish(handle, end or RunEnd("failed", RunError("internal_error", "The run ended without a result.")))
