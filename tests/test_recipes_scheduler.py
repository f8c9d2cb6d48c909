"""The recipes' scheduler: cron in time zones, atomic claims, overlap, missed-run policies
across a restart, and no double fire from two processes on one PostgreSQL. The clock is
injected: no test waits for a time to pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import InvalidInput
from noteloom.recipes import store
from noteloom.recipes.model import CATCH_UP_MAX
from noteloom.recipes.runner import RecipeRunner
from noteloom.recipes.schedule import parse_schedule
from noteloom.recipes.scheduler import Scheduler
from noteloom.runs import RunEngine
from recipe_support import running, scripted, service, settled

HOUR = 3_600_000
DAY = 24 * HOUR


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _recipe(app: App, schedule: str = "0 7 * * *", name: str = "digest", **fields: Any) -> str:
    owner = app.workspace.ensure_owner()
    if "play" not in app.services.providers.names():
        scripted(app, [{"text": "report"}], loop=True)
    saved = service(app).add(owner, {"name": name, "prompt": "Report.", "model": "play", "schedule": schedule,
                                     "timezone": "UTC", **fields})
    return str(saved["id"])


def _set_next(app: App, recipe_id: str, when: int) -> None:
    with db.write_tx(app.engine) as c:
        store.set_state(c, recipe_id, next_fire_time=when)


def _scheduler(app: App, runner: RecipeRunner | None = None) -> Scheduler:
    return Scheduler(runner or RecipeRunner(app, RunEngine(app.engine)), clock=lambda: 0)


def _runs(app: App, recipe_id: str) -> list[store.RecipeRun]:
    with db.read_tx(app.engine) as c:
        return sorted(store.runs_of(c, recipe_id, limit=1000), key=lambda r: (r.scheduled_time or 0, r.created_time))


# -- schedules --------------------------------------------------------------------------------


def test_a_cron_schedule_fires_in_its_time_zone_across_daylight_saving() -> None:
    s = parse_schedule("0 7 * * *", "Europe/Paris")
    before = s.next_after(ms("2026-03-27T12:00:00+00:00"))
    after = s.next_after(ms("2026-03-29T12:00:00+00:00"))
    assert before == ms("2026-03-28T06:00:00+00:00")  # 07:00 CET
    assert after == ms("2026-03-30T05:00:00+00:00")  # 07:00 CEST
    assert "07:00" in s.explain() and "Europe/Paris" in s.explain()


def test_a_weekday_schedule_skips_the_weekend() -> None:
    s = parse_schedule("0 7 * * 1-5", "UTC")
    fires = s.upcoming(ms("2026-12-04T08:00:00+00:00"), 3)  # a Friday, after 07:00
    assert [datetime.fromtimestamp(f / 1000, UTC).strftime("%a %H:%M") for f in fires] == [
        "Mon 07:00", "Tue 07:00", "Wed 07:00"]


@pytest.mark.parametrize(("text", "why"), [
    ("61 * * * *", "bad minute"),
    ("0 7 * *", "has 4 fields"),
    ("every morning", "has 2 fields"),
    ("0 25 * * *", "bad hour"),
])
def test_an_invalid_cron_says_why_and_shows_a_valid_one_with_its_next_five_fire_times(text: str, why: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_schedule(text, "Europe/Paris")
    message = str(refused.value)
    assert refused.value.field == "schedule"
    assert why in message and "'0 7 * * 1-5'" in message
    assert message.count("+01:00") + message.count("+02:00") == 5  # five local fire times


def test_an_unknown_time_zone_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_schedule("0 7 * * *", "Mars/Olympus")
    assert refused.value.field == "timezone"


def test_manual_and_interactive_recipes_never_fire(app: App) -> None:
    for i, word in enumerate(("manual", "interactive")):
        rid = _recipe(app, word, name=f"r{i}")
        assert service(app).get(app.workspace.ensure_owner(), rid)["next_fire_time"] is None
    assert _scheduler(app).tick(ms("2030-01-01T00:00:00+00:00")) == []


# -- claims -----------------------------------------------------------------------------------


def test_a_due_recipe_is_claimed_once_and_its_next_fire_time_moves_on(any_app: App) -> None:
    app = any_app
    rid = _recipe(app)
    fire = ms("2026-12-05T07:00:00+00:00")
    _set_next(app, rid, fire)
    sched = _scheduler(app)
    assert sched.tick(fire - 1) == []  # not yet
    [fired] = sched.tick(fire + 5_000)
    assert (fired.recipe_id, fired.trigger, fired.scheduled_time, fired.launched) == (rid, "schedule", fire, True)
    assert sched.tick(fire + 6_000) == []  # claimed: never twice
    with db.read_tx(app.engine) as c:
        recipe = store.get(c, rid)
    assert recipe is not None and recipe.next_fire_time == fire + DAY
    [run] = _runs(app, rid)
    assert (run.trigger, run.status, run.scheduled_time) == ("schedule", "running", fire)


def test_a_paused_recipe_is_not_fired(app: App) -> None:
    rid = _recipe(app)
    fire = ms("2026-12-05T07:00:00+00:00")
    _set_next(app, rid, fire)
    with db.write_tx(app.engine) as c:
        store.set_state(c, rid, enabled=False)
    assert _scheduler(app).tick(fire + 1000) == []


@pytest.mark.anyio
async def test_a_fire_runs_the_recipe_and_a_fire_during_a_run_is_skipped_overlap(app: App) -> None:
    scripted(app, [{"chunks": ["working"], "hang": True}])
    rid = _recipe(app, "*/5 * * * *")
    owner = app.workspace.ensure_owner()
    fire = ms("2026-12-05T07:00:00+00:00")
    _set_next(app, rid, fire)
    async with running(app) as runner:
        sched = _scheduler(app, runner)
        sched.clock = lambda: fire + 1000
        [first] = await sched.tick_and_launch()
        sched.clock = lambda: fire + 5 * 60_000 + 1000
        [second] = await sched.tick_and_launch()
        assert second.launched is False
        await service(app).stop(owner, first.run_id or "")
        await settled(app, owner, first.run_id or "")
    first_run, second_run = _runs(app, rid)
    assert (first_run.trigger, first_run.status) == ("schedule", "cancelled")
    assert (second_run.status, second_run.scheduled_time) == ("skipped_overlap", fire + 5 * 60_000)
    assert first_run.run_id in (second_run.error_message or "")


# -- missed runs ------------------------------------------------------------------------------


def _restarted(home: Path) -> App:
    return open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)


@pytest.mark.parametrize("policy", ["skip", "run_once", "catch_up"])
def test_missed_fires_follow_the_recipes_policy_after_a_restart(tmp_path: Path, policy: str) -> None:
    home = tmp_path / "home"
    first = _restarted(home)
    try:
        rid = _recipe(first, "0 * * * *", missed=policy)
        fire = ms("2026-12-05T00:00:00+00:00")
        _set_next(first, rid, fire)
    finally:
        first.close()
    # The machine was off for 15 hours; a new process starts.
    app = _restarted(home)
    try:
        scripted(app, [{"text": "report"}], loop=True)
        now = fire + 15 * HOUR - 60_000  # 14:59: fires at 00:00 … 14:00 were missed
        sched = _scheduler(app)
        fired = sched.tick(now)
        if policy == "skip":
            assert [f.run_id for f in fired] == [None]
            assert _runs(app, rid) == []
        elif policy == "run_once":
            [f] = fired
            assert (f.trigger, f.scheduled_time) == ("catch_up", fire + 14 * HOUR)
            assert sched.tick(now) == []
        else:
            # One catch-up run per missed fire, the latest CATCH_UP_MAX, one at a time.
            assert [f.scheduled_time for f in fired] == [fire + (15 - CATCH_UP_MAX) * HOUR]
            assert sched.tick(now) == []  # the first catch-up is still running
            done = [fired[0]]
            for _ in range(CATCH_UP_MAX - 1):
                _finish(app, done[-1].run_id or "")
                [nxt] = sched.tick(now)
                done.append(nxt)
            _finish(app, done[-1].run_id or "")
            assert sched.tick(now) == []
            assert [f.scheduled_time for f in done] == [fire + h * HOUR for h in range(15 - CATCH_UP_MAX, 15)]
            assert {f.trigger for f in done} == {"catch_up"}
        with db.read_tx(app.engine) as c:
            recipe = store.get(c, rid)
        assert recipe is not None and recipe.next_fire_time == fire + 15 * HOUR
    finally:
        app.close()


def _finish(app: App, run_id: str) -> None:
    with db.write_tx(app.engine) as c:
        store.set_run(c, run_id, status="succeeded")


# -- two processes on one PostgreSQL ------------------------------------------------------------

_TICKER = textwrap.dedent("""
    import json, sys
    from noteloom.app import open_app
    from noteloom.config import load_settings
    from noteloom.recipes.runner import RecipeRunner
    from noteloom.recipes.scheduler import Scheduler
    from noteloom.runs import RunEngine

    home, url, now, ticks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    app = open_app(load_settings({"NOTELOOM_HOME": home, "NOTELOOM_DATABASE_URL": url}), load_entry_points=False)
    sched = Scheduler(RecipeRunner(app, RunEngine(app.engine)))
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start ticking together
    fired = []
    for i in range(ticks):
        fired += [[f.recipe_id, f.scheduled_time] for f in sched.tick(now)]
    print(json.dumps(fired), flush=True)
    app.close()
""")


@pytest.mark.postgres
def test_two_processes_ticking_on_one_postgresql_never_fire_twice(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    app = open_app(load_settings({"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": pg_url}),
                   load_entry_points=False)
    try:
        start = ms("2026-12-05T07:00:00+00:00")
        # More than one tick claims (100): the processes' ticks overlap for many of them.
        ids = [_recipe(app, "* * * * *", name=f"r{i}") for i in range(150)]
        for rid in ids:
            _set_next(app, rid, start)
    finally:
        app.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # Both servers' clocks read the same minute; each ticks again and again as they race.
    procs = [subprocess.Popen([sys.executable, "-c", _TICKER, str(home), pg_url, str(start + 1000), "15"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=300)
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    fires = [tuple(f) for r in results for f in r]
    assert sorted(fires) == sorted((rid, start) for rid in ids), "each recipe's fire is claimed exactly once"
    app = open_app(load_settings({"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": pg_url}),
                   load_entry_points=False)
    try:
        for rid in ids:
            assert [(r.scheduled_time, r.status) for r in _runs(app, rid)] == [(start, "running")]
    finally:
        app.close()


@pytest.mark.postgres
def test_a_fire_another_scheduler_holds_is_passed_over_and_a_stale_claim_fails(pg_url: str, tmp_path: Path) -> None:
    """The two guards of a claim, step by step: rows another transaction holds are skipped
    (FOR UPDATE SKIP LOCKED), and a claim of a fire time that moved on changes nothing."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h"), "NOTELOOM_DATABASE_URL": pg_url}),
                   load_entry_points=False)
    try:
        rid = _recipe(app)
        fire = ms("2026-12-05T07:00:00+00:00")
        _set_next(app, rid, fire)
        with db.write_tx(app.engine) as first:
            assert [r.id for r in store.due(first, fire, lock=True)] == [rid]
            with db.write_tx(app.engine) as second:
                assert store.due(second, fire, lock=True) == []  # held by the first: passed over
            assert store.claim_fire(first, rid, fire, fire + DAY)
        with db.write_tx(app.engine) as late:
            assert not store.claim_fire(late, rid, fire, fire + DAY)  # it moved on: no second claim
    finally:
        app.close()
