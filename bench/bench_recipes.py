"""Recipes: the scheduler's cost per tick, and pipeline items per second with the scripted model.

Run from the repository root::

    .venv/bin/python -m bench.bench_recipes [--recipes 1000] [--items 200] [--db sqlite|URL]

- **Scheduler tick**: ``--recipes`` cron recipes in one workspace, their fire times spread
  over a day. A tick when nothing is due is what a server pays every 20 s; a tick where
  10 fire claims, records and begins those runs (not their model work). CPU time of the
  process, median of the repeats, with the load average beside it.
- **Pipeline throughput**: one pipeline recipe over ``--items`` items whose job does no
  I/O of its own, judged by the scripted model (instant answers): what the runner itself
  costs per item — the exchange through the agent loop, the verdict checked, the record
  and the processing-log row written, the trace stored.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from noteloom import db
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineRun
from noteloom.providers.scripted import ScriptedProvider
from noteloom.recipes import store
from noteloom.recipes.runner import RecipeRunner
from noteloom.recipes.scheduler import Scheduler
from noteloom.runs import RunEngine

TICK_TARGET_MS = 50.0


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _app(home: Path, url: str | None) -> App:
    env = {"NOTELOOM_HOME": str(home)}
    if url:
        env["NOTELOOM_DATABASE_URL"] = url
    return open_app(load_settings(env), load_entry_points=False)


def bench_ticks(app: App, count: int, repeats: int) -> None:
    owner = app.workspace.ensure_owner()
    assert app.services.recipes is not None
    app.services.providers.add(ScriptedProvider("play", [{"text": "ok"}], loop=True))
    # A fixed day, so runs are comparable; each recipe fires yearly, so one fired in the bench
    # does not come due again within it (only the fire times set below do).
    base = 1_900_000_000_000
    for i in range(count):
        app.services.recipes.add(owner, {"name": f"r{i}", "prompt": "Report.", "model": "play",
                                         "schedule": f"{i % 60} {(i // 60) % 24} 1 1 *"})
    with db.write_tx(app.engine) as c:
        for i, r in enumerate(store.all_of(c, owner.id)):
            store.set_state(c, r.id, next_fire_time=base + (i + 1) * 86_400_000 // count)
    sched = Scheduler(RecipeRunner(app, RunEngine(app.engine)))
    idle: list[float] = []
    for _ in range(repeats):
        t0 = time.process_time()
        assert sched.tick(base) == []
        idle.append((time.process_time() - t0) * 1000)
    busy: list[float] = []
    step = 86_400_000 // count
    now = base
    for _ in range(repeats):
        now += 10 * step
        t0 = time.process_time()
        fired = sched.tick(now)
        busy.append((time.process_time() - t0) * 1000)
        assert len(fired) == 10, len(fired)
    print(f"scheduler tick, {count} recipes, none due: median {statistics.median(idle):.2f} ms CPU "
          f"(target ≤ {TICK_TARGET_MS:g}) [{_load()}]")
    print(f"scheduler tick, {count} recipes, 10 due (claimed, recorded, begun): median "
          f"{statistics.median(busy):.2f} ms CPU, {statistics.median(busy) / 10:.2f} ms a fire [{_load()}]")


class _Items(BasePipelineJob):
    name = "bench_items"
    untrusted_digest = False
    default_prompt = "Judge the item."
    verdict_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"label": {"type": "string", "enum": ["keep", "drop"]},
                       "score": {"type": "integer", "minimum": 0, "maximum": 10},
                       "why": {"type": "string", "maxLength": 200}},
        "required": ["label", "score", "why"], "additionalProperties": False,
    }

    def __init__(self, count: int) -> None:
        self.keys = [f"item-{i:05d}" for i in range(count)]
        self.position = 0
        self.recorded = 0

    def next_item(self, run: PipelineRun) -> PipelineItem | None:
        while self.position < len(self.keys):
            page = self.keys[self.position:self.position + 50]
            done = run.handled(page)
            for key in page:
                self.position += 1
                if key not in done:
                    return PipelineItem(key, key)
        return None

    def digest(self, run: PipelineRun, item: PipelineItem) -> str:
        return f"Item {item.key}: a note of about two hundred words. " * 4

    def record_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any], model: str) -> None:
        self.recorded += 1


def bench_pipeline(app: App, items: int) -> None:
    owner = app.workspace.ensure_owner()
    assert app.services.recipes is not None
    job = _Items(items)
    app.pipeline_jobs[job.name] = job
    answer = "Here it is: " + json.dumps({"label": "keep", "score": 7, "why": "relevant to the notes"})
    app.services.providers.add(ScriptedProvider("judge", [{"text": answer, "usage": {"input_tokens": 300,
                                                                                      "output_tokens": 20}}], loop=True))
    app.services.recipes.add(owner, {"name": "bench pipeline", "mode": "pipeline", "job": job.name, "model": "judge",
                                     "batch_size": items, "budgets": {"max_output_tokens": None,
                                                                      "max_input_tokens": None}})
    recipes = app.services.recipes

    async def go() -> tuple[dict[str, Any], float, float]:
        async with recipes.running():
            wall, cpu = time.perf_counter(), time.process_time()
            run = await recipes.run_now(owner, "bench pipeline")
            return run, time.perf_counter() - wall, time.process_time() - cpu

    run, wall, cpu = anyio.run(go)
    assert run["status"] == "succeeded" and run["items_done"] == items == job.recorded, run["status"]
    print(f"pipeline, {items} items, scripted model: {items / wall:.0f} items/s wall, "
          f"{cpu / items * 1000:.2f} ms CPU an item [{_load()}]")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipes", type=int, default=1000)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--db", default="sqlite", help="sqlite, or a PostgreSQL URL")
    args, _ = parser.parse_known_args()
    url = None if args.db == "sqlite" else args.db
    with tempfile.TemporaryDirectory() as tmp:
        app = _app(Path(tmp) / "ticks", url)
        try:
            bench_ticks(app, args.recipes, args.repeats)
        finally:
            app.close()
        app = _app(Path(tmp) / "pipeline", url)
        try:
            bench_pipeline(app, args.items)
        finally:
            app.close()


if __name__ == "__main__":
    main()
