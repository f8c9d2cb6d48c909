"""The scheduler: claims the recipes whose fire time has come and starts their runs.

One tick, in one write transaction:

- read the enabled recipes that are due (on PostgreSQL locked ``FOR UPDATE SKIP LOCKED``,
  on SQLite under the write lock ``BEGIN IMMEDIATE`` takes), and for each move its next
  fire time on with a compare-and-set: a fire that another process claimed first is left
  to it, so several ``serve`` processes on one database never double-fire;
- a fire on time starts a ``schedule`` run; a fire missed while nothing ran (the
  machine was off) follows the recipe's ``missed`` policy: ``skip`` (the default: go on
  from the next fire time), ``run_once`` (one ``catch_up`` run now), or ``catch_up`` (one
  ``catch_up`` run per missed fire time, at most ``CATCH_UP_MAX`` of the latest, one
  after another: a missed fire waits while the previous catch-up runs);
- the runs start after the commit. A recipe never overlaps itself: a fire that finds its
  recipe still running is recorded ``skipped_overlap``.

The clock is injected (``clock``), and :meth:`Scheduler.tick` takes the time: tests move
time by hand and never sleep.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.recipes import store
from noteloom.recipes import tables as t
from noteloom.recipes.model import CATCH_UP_MAX, Recipe
from noteloom.recipes.runner import RecipeRunner

log = logging.getLogger("noteloom.recipes")

#: A fire claimed more than this after its time was missed (the scheduler was not running).
GRACE_MS = 120_000


@dataclass(frozen=True)
class Fired:
    recipe_id: str
    run_id: str | None
    trigger: str
    scheduled_time: int
    #: False: recorded ``skipped_overlap`` (or nothing ran: ``run_id`` is None for a skipped miss).
    launched: bool


class Scheduler:
    """Fires due recipes; ``running()`` ticks in the background for a process's life."""

    def __init__(
        self, runner: RecipeRunner, *, clock: Callable[[], int] = db.now_ms, interval: float = 20.0,
        grace_ms: int = GRACE_MS,
    ) -> None:
        self.runner = runner
        self.db = runner.db
        self.clock = clock
        self.interval = interval
        self.grace_ms = grace_ms
        self._wake = anyio.Event()

    def tick(self, now: int | None = None) -> list[Fired]:
        """Claim what is due at ``now`` and begin its runs (blocking; the caller launches them)."""
        now = self.clock() if now is None else now
        fired: list[Fired] = []
        with db.write_tx(self.db) as c:
            for recipe in store.due(c, now, lock=True):
                try:
                    fired.extend(self._fire(c, recipe, now))
                except Exception:  # one recipe's bad row must not stop the others
                    log.exception("could not fire recipe %s", recipe.id)
        return fired

    def _fire(self, c: Connection, recipe: Recipe, now: int) -> list[Fired]:
        fire = recipe.next_fire_time
        assert fire is not None
        schedule = recipe.spec.parsed_schedule
        late = now - fire > self.grace_ms
        policy = recipe.spec.missed
        if not late:
            nxt = schedule.next_after(now)
            if not store.claim_fire(c, recipe.id, fire, nxt):
                return []
            run_id, launch = self.runner.begin(c, recipe, trigger="schedule", scheduled_time=fire)
            return [Fired(recipe.id, run_id, "schedule", fire, launch)]
        if policy == "skip":
            if store.claim_fire(c, recipe.id, fire, schedule.next_after(now)):
                log.info("recipe %r missed its fire at %d; skipped (its missed-run policy)", recipe.name, fire)
                return [Fired(recipe.id, None, "schedule", fire, False)]
            return []
        if policy == "run_once":
            nxt = schedule.next_after(now)
            if not store.claim_fire(c, recipe.id, fire, nxt):
                return []
            latest = schedule.between(fire - 1, now, 1)
            when = latest[-1] if latest else fire
            run_id, launch = self.runner.begin(c, recipe, trigger="catch_up", scheduled_time=when)
            return [Fired(recipe.id, run_id, "catch_up", when, launch)]
        # catch_up: the latest CATCH_UP_MAX missed fires, one per tick, never two at once.
        if store.in_progress(c, recipe.id) is not None:
            return []
        missed = schedule.between(fire - 1, now, CATCH_UP_MAX)
        fire_used = missed[0] if missed and fire < missed[0] else fire
        nxt = schedule.next_after(fire_used)
        if not store.claim_fire(c, recipe.id, fire, nxt):
            return []
        run_id, launch = self.runner.begin(c, recipe, trigger="catch_up", scheduled_time=fire_used)
        return [Fired(recipe.id, run_id, "catch_up", fire_used, launch)]

    def next_due(self) -> int | None:
        """The earliest next fire time of an enabled recipe."""
        with db.read_tx(self.db) as c:
            value = c.execute(
                sa.select(sa.func.min(t.recipes.c.next_fire_time)).where(t.recipes.c.enabled.is_(True))
            ).scalar()
        return int(value) if value is not None else None

    def wake(self) -> None:
        """Look again now (a recipe was saved with an earlier fire time)."""
        self._wake.set()

    async def tick_and_launch(self) -> list[Fired]:
        fired = await to_thread.run_sync(self.tick)
        for f in fired:
            if f.launched and f.run_id is not None:
                self.runner.launch(f.run_id)
        return fired

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Scheduler]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._loop)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick_and_launch()
                due = await to_thread.run_sync(self.next_due)
            except Exception:  # a failed tick is tried again at the next
                log.exception("the recipe scheduler's tick failed")
                due = None
            wait = self.interval
            if due is not None:
                wait = min(wait, max((due - self.clock()) / 1000 + 0.05, 0.5))
            self._wake = anyio.Event()
            with anyio.move_on_after(wait):
                await self._wake.wait()
