"""Recipes as every surface uses them: one object, owner-scoped, returning JSON-ready views.

The command line, the JSON API, the web page and the chat's ``create_recipe`` tool all
call :class:`RecipeService`; none holds recipe logic of its own. Saving a recipe checks
it in two steps: its fields (``noteloom.recipes.model.check_spec``), then against this
app — the model's provider exists, the pipeline job is installed and its settings pass
its schema and rules, and the taint gate: a recipe whose tools can read text others
wrote and can write (or whose job judges such text) needs ``allow_tainted_writes``, and
the acknowledgment is recorded with who gave it.

Running needs the run engine of this process (``running()``, a background service of
``serve``; the command line runs one for ``recipes run``). Stopping, approving and
everything else works from any process: they go through the database.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import anyio
import sqlalchemy as sa
from anyio import to_thread

from noteloom import db
from noteloom.data import DataCatalog
from noteloom.errors import InvalidInput, NotFound, Unavailable
from noteloom.recipes import store
from noteloom.recipes import tables as recipe_tables
from noteloom.recipes.model import DATA_TOOLS, Recipe, RecipeSpec, check_spec
from noteloom.recipes.schedule import iso
from noteloom.runs import store as run_store
from noteloom.runs.spend import COST_KEY, TIMEZONE_KEY, TOKENS_KEY, MonthlyCap, month_state

if TYPE_CHECKING:
    from noteloom.agent import Decision
    from noteloom.recipes.runner import Host, RecipeRunner
    from noteloom.recipes.scheduler import Scheduler
    from noteloom.workspace import User

EXPORT_VERSION = 1
#: Seconds between looks for notifications the reaper wrote (runs of processes that died).
REAPED_DELIVERY_POLL = 2.0
#: Recipes one import may hold (a file of YAML aliases could otherwise ask for millions).
IMPORT_MAX = 500


class RecipeService:
    """See the module docstring."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.db = host.workspace.engine
        self.runner: RecipeRunner | None = None
        self.scheduler: Scheduler | None = None

    # -- saving -----------------------------------------------------------------------------

    def check(self, spec: RecipeSpec, *, previous: Recipe | None = None, user: User | None = None) -> list[str]:
        """Check ``spec`` against this app (``InvalidInput`` naming the field); the warnings a
        person should still read (tools this app does not have, skipped when the recipe runs).
        ``user`` is the recipe's owner, as whom it runs: a job's notebooks and the data
        sources are checked against what they may see and change (``None``: the owner)."""
        warnings: list[str] = []
        if spec.model is not None:
            name = spec.model.split(":", 1)[0]
            providers = self.host.services.providers
            kind = providers.types.get(name)
            if name not in providers.names() and kind is not None:
                # A known type whose key is not set here yet: the server that runs it may have it.
                warnings.append(f"model {spec.model!r}: provider {name!r} is not set up in this process"
                                + (f" (it needs {kind.key_env})" if kind.key_env else "")
                                + "; runs fail until it is")
            elif name not in providers.names():
                raise InvalidInput(f"model {spec.model!r}: no provider {name!r}; this app has "
                                   f"{', '.join(providers.names()) or 'none'} (`noteloom models`)", field="model")
        tools = {t.name: t for t in self.host.registry.all()}
        if spec.mode == "agent":
            unknown = [n for n in spec.tools if n not in tools]
            if unknown:
                warnings.append(f"this app has no tool {', '.join(map(repr, unknown))}: it is skipped when the "
                                "recipe runs, and the run's trace says so")
            warnings += self._data_warnings(spec, user)
            chosen = [tools[n] for n in spec.tools if n in tools]
            readers = [t.name for t in chosen if t.untrusted_output]
            writers = [t.name for t in chosen if t.writes_out]
            if readers and writers and not spec.allow_tainted_writes:
                raise InvalidInput(
                    f"this recipe's tools read text others wrote ({', '.join(readers)}) and can write "
                    f"({', '.join(writers)}): a page or clip could steer what it writes. Set allow_tainted_writes "
                    "to acknowledge that, or drop the writing tools", field="allow_tainted_writes")
        else:
            job = self.host.pipeline_jobs.get(spec.job or "")
            if job is None:
                raise InvalidInput(f"no pipeline job {spec.job!r}; this app has "
                                   f"{', '.join(sorted(self.host.pipeline_jobs)) or 'none'}", field="job")
            from noteloom.recipes.runner import _check_config

            _check_config(job, dict(spec.job_config), self.host.tool_context(user))
            if job.untrusted_digest and not spec.allow_tainted_writes:
                raise InvalidInput(
                    f"job {job.name!r} judges text others wrote, and its verdicts change your workspace: set "
                    "allow_tainted_writes to acknowledge that", field="allow_tainted_writes")
        return warnings

    def _data_warnings(self, spec: RecipeSpec, user: User | None) -> list[str]:
        """What a person should know of the recipe's data sources: names the workspace has not
        opted in (they read nothing; the opt-in may come later), data tools it cannot use."""
        catalog = self.host.services.get("data")
        if not isinstance(catalog, DataCatalog):
            return []
        out: list[str] = []
        opted = set(catalog.names()) | set(catalog.databases)
        stray = [n for n in spec.data_sources or () if n not in opted]
        if stray:
            out.append(f"data_sources: {', '.join(map(repr, stray))} not opted in under [data] in noteloom.toml; "
                       "it reads nothing from them until they are")
        used = [n for n in spec.tools if n in DATA_TOOLS]
        context = self.host.tool_context(user, data_sources=None if spec.data_sources is None
                                         else frozenset(spec.data_sources))
        if used and not catalog.allowed(context):
            out.append(f"{' and '.join(used)}: no data source is readable for this recipe, so "
                       f"{'it is' if len(used) == 1 else 'they are'} not offered when it runs")
        return out

    def _next_fire(self, spec: RecipeSpec, now: int) -> int | None:
        return spec.parsed_schedule.next_after(now) if spec.enabled else None

    def add(self, user: User, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Save a new recipe; its view with ``warnings``."""
        spec = check_spec(raw)
        warnings = self.check(spec, user=user)
        with db.write_tx(self.db) as c:
            recipe = store.insert(c, user.id, spec, next_fire_time=self._next_fire(spec, db.now_ms()),
                                  acknowledged_by=user.id)
        self._woke()
        return {**self.view(recipe), "warnings": warnings}

    def edit(self, user: User, ref: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change the fields ``changes`` names; the others stay."""
        with db.read_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
        spec = check_spec(changes, base=recipe.spec)
        warnings = self.check(spec, previous=recipe, user=user)
        with db.write_tx(self.db) as c:
            current = store.find(c, user.id, recipe.id)
            nxt = current.next_fire_time
            if spec.schedule != current.spec.schedule or spec.timezone != current.spec.timezone \
                    or spec.enabled != current.spec.enabled or nxt is None:
                nxt = self._next_fire(spec, db.now_ms())
            if not spec.enabled:
                nxt = None
            recipe = store.update(c, current, spec, next_fire_time=nxt, acknowledged_by=user.id)
        self._woke()
        return {**self.view(recipe), "warnings": warnings}

    def remove(self, user: User, ref: str) -> None:
        with db.write_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            store.delete(c, recipe.id)

    def patch(self, user: User, ref: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """As :meth:`edit`, but ``controls``, ``budgets`` and ``notify`` given in part change only
        the keys they name (a merge patch), as the command line's options and the API's PATCH mean."""
        if not isinstance(changes, Mapping):
            raise InvalidInput("changes must be an object of a recipe's fields", field="body")
        parts = [k for k in _NESTED if isinstance(changes.get(k), Mapping)]
        if not parts:
            return self.edit(user, ref, changes)
        with db.read_tx(self.db) as c:
            current = store.find(c, user.id, ref).spec.as_json()
        merged = dict(changes)
        for k in parts:
            merged[k] = {**current[k], **changes[k]}
        return self.edit(user, ref, merged)

    def pause(self, user: User, ref: str) -> dict[str, Any]:
        return self.edit(user, ref, {"enabled": False})

    def resume(self, user: User, ref: str) -> dict[str, Any]:
        """Enable a paused recipe: its failure count starts again, missed fires are not made up."""
        return self.edit(user, ref, {"enabled": True})

    def _woke(self) -> None:
        if self.scheduler is not None:
            self.scheduler.wake()

    # -- reading ----------------------------------------------------------------------------

    def listing(self, user: User) -> list[dict[str, Any]]:
        with db.read_tx(self.db) as c:
            recipes = store.all_of(c, user.id)
            lasts = {r.id: next(iter(store.runs_of(c, r.id, limit=1)), None) for r in recipes}
            month = self._month_bounds(user)
            spends = {r.id: store.spend(c, since=month[1], until=month[2], recipe_id=r.id) for r in recipes}
        out = []
        for r in recipes:
            last = lasts[r.id]
            out.append({
                **self.view(r, brief=True),
                "last_run": None if last is None else {"run_id": last.run_id, "status": last.status,
                                                       "created_time": last.created_time},
                "spend_this_month": spends[r.id].as_json(),
            })
        return out

    def get(self, user: User, ref: str) -> dict[str, Any]:
        with db.read_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            notes = store.notes_of(c, recipe.id)
        return {**self.view(recipe), "notes": notes}

    def view(self, recipe: Recipe, *, brief: bool = False) -> dict[str, Any]:
        s = recipe.spec
        out: dict[str, Any] = {
            "id": recipe.id,
            **s.as_json(),
            "paused_reason": recipe.paused_reason,
            "failures": recipe.failures,
            "next_fire_time": recipe.next_fire_time,
            "next_fire": None if recipe.next_fire_time is None else iso(recipe.next_fire_time, s.timezone),
            "explain": s.parsed_schedule.explain(),
            "tainted_ack": None if recipe.tainted_ack_time is None else {
                "user_id": recipe.tainted_ack_user_id, "time": recipe.tainted_ack_time},
            "created_time": recipe.created_time,
            "updated_time": recipe.updated_time,
        }
        if not brief:
            out["upcoming"] = s.parsed_schedule.as_json(db.now_ms())["next"] if s.enabled else []
            out["scratch"] = recipe.scratch
        return out

    def preview_schedule(self, schedule: str, timezone: str) -> dict[str, Any]:
        """The schedule in words and its next five fire times (``InvalidInput`` if it is wrong)."""
        from noteloom.recipes.schedule import parse_schedule

        return parse_schedule(schedule, timezone).as_json(db.now_ms())

    def options(self) -> dict[str, Any]:
        """What a recipe form offers: every tool of this app (whether it writes, whether the
        workspace has it enabled — a disabled one is skipped when a recipe runs — and whether
        it reads text others wrote, for the taint gate), the tools every agent recipe has, the
        data sources the workspace opted in (a recipe's ``data_sources`` picks among them), and
        the defaults of a new recipe."""
        from noteloom.recipes.model import RecipeSpec
        from noteloom.recipes.tools import RECIPE_TOOL_NAMES

        ws = self.host.workspace
        registry = self.host.registry
        settings = registry.read_settings(ws)
        enabled = {t.name for t in registry.enabled(ws, settings)}
        tools = [{"name": t.name, "title": t.title, "description": t.description, "effect": t.effect,
                  "enabled": t.name in enabled, "untrusted_output": t.untrusted_output}
                 for t in registry.all()]
        catalog = self.host.services.get("data")
        sources = [{"name": n, "description": catalog.description(n)} for n in catalog.names()] \
            if isinstance(catalog, DataCatalog) else []
        return {"tools": tools, "recipe_tools": list(RECIPE_TOOL_NAMES), "data_sources": sources,
                "defaults": {k: v for k, v in RecipeSpec(name="").as_json().items() if k != "name"}}

    def jobs(self) -> list[dict[str, Any]]:
        return [{"name": j.name, "label": j.label, "untrusted_digest": j.untrusted_digest,
                 "config_schema": dict(j.config_schema), "verdict_schema": dict(j.verdict_schema),
                 "default_prompt": j.default_prompt} for _, j in sorted(self.host.pipeline_jobs.items())]

    # -- runs -------------------------------------------------------------------------------

    def runs(self, user: User, ref: str, *, limit: int = 50) -> list[dict[str, Any]]:
        with db.read_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            return [run_view(r) for r in store.runs_of(c, recipe.id, limit=limit)]

    def run(self, user: User, run_id: str) -> dict[str, Any]:
        """One run with its full trace (tool calls, or for a pipeline run its items) and events."""
        with db.read_tx(self.db) as c:
            rec = self._own_run(c, user, run_id)
            calls = run_store.calls_of(c, run_id)
            events = run_store.read_events(c, run_id, 0, limit=5000)
            recipe = store.get(c, rec.recipe_id)
            memories = c.execute(sa.select(recipe_tables.recipe_runs.c.memories)
                                 .where(recipe_tables.recipe_runs.c.run_id == run_id)).scalar()
        out = run_view(rec)
        out["recipe"] = {"id": rec.recipe_id, "name": recipe.name if recipe else None}
        # What the run's prompt was given from memory (id, title, layer); null: no memory tool.
        out["memories"] = memories if isinstance(memories, list) else None
        # A call held for approval and run once approved is audited twice (held, then its
        # outcome): the trace shows it once, as it ended.
        ran = {k.call_id for k in calls if k.outcome != "held"}
        trace = [{
            "seq": k.seq, "call_id": k.call_id, "tool": k.tool, "input": k.arguments, "output": k.output,
            "started_time": k.started_time, "finished_time": k.finished_time, "outcome": k.outcome,
            "is_error": k.outcome not in (None, "ok", "held"), "error": k.error,
        } for k in calls if not (k.outcome == "held" and k.call_id in ran)]
        if rec.mode == "pipeline":
            out["items"] = [{"key": t["input"].get("key") if isinstance(t["input"], dict) else None,
                             "label": t["input"].get("label") if isinstance(t["input"], dict) else None,
                             "status": "done" if t["outcome"] == "ok" else "error" if t["finished_time"] else "judging",
                             "verdict": _json_or_none(t["output"]), "error": t["error"]} for t in trace]
        else:
            out["trace"] = trace
            out["notes"] = [e.data.get("text") for e in events if e.kind == "note"]
        held = (rec.transcript or {}).get("held") if rec.status == "awaiting_approval" else None
        out["held"] = held
        out["events"] = [{"seq": e.seq, "kind": e.kind, "data": e.data, "time": e.time} for e in events]
        return out

    def _own_run(self, c: sa.Connection, user: User, run_id: str) -> store.RecipeRun:
        rec = store.get_run(c, run_id)
        if rec is not None:
            recipe = store.get(c, rec.recipe_id)
            if recipe is not None and recipe.user_id == user.id:
                return rec
        raise NotFound(f"no recipe run {run_id!r}; `noteloom recipes runs NAME` lists a recipe's runs")

    def _runner(self) -> RecipeRunner:
        if self.runner is None:
            raise Unavailable("recipes run in `noteloom serve` (or `noteloom recipes run`); this process runs none")
        return self.runner

    async def start(self, user: User, ref: str, *, trigger: str = "manual", sample: int | None = None,
                    ) -> dict[str, Any]:
        """Start a run now in this process's engine; the run's view (it may be ``skipped_overlap``).
        The database work runs in a worker thread; the launch on the event loop."""
        from anyio import to_thread

        runner = self._runner()

        def begin() -> tuple[str, bool]:
            with db.write_tx(self.db) as c:
                recipe = store.find(c, user.id, ref)
                return runner.begin(c, recipe, trigger=trigger, dry_run=sample is not None)

        run_id, launch = await to_thread.run_sync(begin)
        if launch:
            runner.launch(run_id, sample=sample)
        return await to_thread.run_sync(self._run_view, run_id)

    def _run_view(self, run_id: str) -> dict[str, Any]:
        with db.read_tx(self.db) as c:
            rec = store.get_run(c, run_id)
        assert rec is not None
        return run_view(rec)

    async def run_now(self, user: User, ref: str, *, trigger: str = "manual", sample: int | None = None,
                      ) -> dict[str, Any]:
        """Run now and wait for the end (the command line); the run with its trace."""
        from anyio import to_thread

        runner = self._runner()

        def begin() -> tuple[str, bool]:
            with db.write_tx(self.db) as c:
                recipe = store.find(c, user.id, ref)
                return runner.begin(c, recipe, trigger=trigger, dry_run=sample is not None)

        run_id, launch = await to_thread.run_sync(begin)
        if launch:
            await runner.execute(run_id, sample=sample)
        return await to_thread.run_sync(self.run, user, run_id)

    async def stop(self, user: User, run_id: str) -> dict[str, Any]:
        """Ask a run to stop, wherever it runs (its cancel flag); a run of this process is
        signalled at once, a parked one is cancelled at once."""
        from anyio import to_thread

        from noteloom.recipes.runner import stop_run  # stopping needs no engine of ours running

        def ask() -> bool:
            with db.read_tx(self.db) as c:
                self._own_run(c, user, run_id)
            return stop_run(self.db, run_id)

        asked = await to_thread.run_sync(ask)
        if asked and self.runner is not None:
            self.runner.engine.cancel_live(run_id)
        return {**await to_thread.run_sync(self._run_view, run_id), "stop_requested": asked}

    def pending(self, user: User) -> list[dict[str, Any]]:
        with db.read_tx(self.db) as c:
            parked = store.parked(c, user.id)
        return [{**run_view(r), "recipe": {"id": rc.id, "name": rc.name}, "held": (r.transcript or {}).get("held")}
                for rc, r in parked]

    async def decide(self, user: User, run_id: str, decision: Decision) -> dict[str, Any]:
        """Approve or decline a parked run's held call; the run goes on in this process."""
        from anyio import to_thread

        runner = self._runner()

        def record() -> int:
            with db.write_tx(self.db) as c:
                self._own_run(c, user, run_id)
                runner.decide(c, run_id, decision)
                return run_store.last_seq(c, run_id) + 1

        first = await to_thread.run_sync(record)
        runner.launch(run_id, first_seq=first)
        return await to_thread.run_sync(self._run_view, run_id)

    # -- following a run (the command line waits on one; the API streams its events) ----------

    def events(self, user: User, run_id: str, after_seq: int = 0, *, limit: int = 1000) -> list[dict[str, Any]]:
        """The run's stored events after ``after_seq`` (at most ``limit``)."""
        with db.read_tx(self.db) as c:
            self._own_run(c, user, run_id)
            return [_event_view(e) for e in run_store.read_events(c, run_id, after_seq, limit=limit)]

    def _owned(self, user: User, run_id: str) -> None:
        with db.read_tx(self.db) as c:
            self._own_run(c, user, run_id)

    def _status(self, run_id: str) -> str:
        with db.read_tx(self.db) as c:
            rec = store.get_run(c, run_id)
        return "cancelled" if rec is None else rec.status

    async def follow(self, user: User, run_id: str, after_seq: int = 0, *, poll: float = 0.5,
                     ) -> AsyncIterator[dict[str, Any]]:
        """The run's events after ``after_seq`` as they come, live when it runs in this
        process; ends once the run stops running (settled, or parked for approval)."""
        from anyio import sleep, to_thread

        last = after_seq
        await to_thread.run_sync(self._owned, user, run_id)  # NotFound before the first event
        while True:
            live = self.runner.engine.live.get(run_id) if self.runner is not None else None
            if live is not None and last >= live.first_seq - 1:
                batch = live.after(last)
                for e in batch:
                    yield _event_view(e)
                    last = e.seq
                if not batch and not live.closed:
                    await live.wait(15.0)
                if batch or not live.closed:
                    continue
            rows = await to_thread.run_sync(self.events, user, run_id, last)
            for row in rows:
                yield row
                last = row["seq"]
            if rows:
                continue
            if await to_thread.run_sync(self._status, run_id) not in _MOVING:
                rows = await to_thread.run_sync(self.events, user, run_id, last)  # committed between the reads
                if not rows:
                    return
                for row in rows:
                    yield row
                    last = row["seq"]
                continue
            await sleep(poll)  # a run of another process: its events reach us through the database

    async def settled(self, user: User, run_id: str, *, poll: float = 0.5) -> dict[str, Any]:
        """Wait until the run stops running (settled, or parked for approval); the run with its trace."""
        from anyio import sleep, to_thread

        while True:
            live = self.runner.engine.live.get(run_id) if self.runner is not None else None
            if live is not None and not live.closed:
                await live.wait(15.0)
                continue
            if await to_thread.run_sync(self._status, run_id) not in _MOVING:
                return await to_thread.run_sync(self.run, user, run_id)
            await sleep(poll)

    # -- notes, the processing log, spend -------------------------------------------------------

    def add_note(self, user: User, ref: str, body: str) -> dict[str, Any]:
        if not isinstance(body, str) or not body.strip() or len(body) > 4000:
            raise InvalidInput("a note for a recipe is text of 1 to 4000 characters", field="body")
        with db.write_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            nid = store.add_note(c, recipe.id, body.strip(), author="user")
            notes = store.notes_of(c, recipe.id)
        return {"id": nid, "notes": notes}

    def items(self, user: User, ref: str, *, limit: int = 200) -> list[dict[str, Any]]:
        with db.read_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            return store.items_of(c, recipe.id, limit=limit)

    def forget_items(self, user: User, ref: str, keys: Sequence[str] | None = None) -> int:
        """Delete processing-log rows so those items are judged again (all when ``keys`` is None)."""
        with db.write_tx(self.db) as c:
            recipe = store.find(c, user.id, ref)
            return store.forget_items(c, recipe.id, keys)

    def _month_bounds(self, user: User) -> tuple[str, int, int]:
        from noteloom.runs.spend import month_bounds

        return month_bounds(db.now_ms(), self._cap().timezone)

    def _cap(self) -> MonthlyCap:
        return MonthlyCap.from_settings(self.host.workspace.settings_with_prefix("limits.", "workspace."))

    def spend(self, user: User, ref: str | None = None, *, days: int = 14) -> dict[str, Any]:
        """Spend per day (the last ``days``) and this month: one recipe's, or the workspace's."""
        cap = self._cap()
        tz = ZoneInfo(cap.timezone)
        today = datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0)
        bounds = []
        for back in range(days - 1, -1, -1):
            start = today - timedelta(days=back)
            bounds.append((start.date().isoformat(), int(start.timestamp() * 1000),
                           int((start + timedelta(days=1)).timestamp() * 1000)))
        label, m0, m1 = self._month_bounds(user)
        with db.read_tx(self.db) as c:
            if ref is not None:
                recipe = store.find(c, user.id, ref)
                per_day = store.spend_by_day(c, recipe.id, bounds)
                month = store.spend(c, since=m0, until=m1, recipe_id=recipe.id).as_json()
                return {"recipe": {"id": recipe.id, "name": recipe.name}, "days": per_day,
                        "month": {"month": label, **month}}
            state = month_state(c, cap, db.now_ms())
            by_kind = {k: store.spend(c, since=m0, until=m1, kinds=[k]).as_json() for k in ("chat_turn", "recipe")}
            per_day = [{"day": d, **store.spend(c, since=a, until=b).as_json()} for d, a, b in bounds]
        return {"days": per_day, "month": {**state.as_json(), "by_kind": by_kind}}

    def cap(self) -> dict[str, Any]:
        with db.read_tx(self.db) as c:
            return month_state(c, self._cap(), db.now_ms()).as_json()

    def set_cap(self, *, tokens: int | str | None = "keep", cost: str | None = "keep",
                timezone: str | None = "keep") -> dict[str, Any]:
        """Set the workspace's monthly cap (``None`` takes a ceiling off; ``"keep"`` leaves it)."""
        from decimal import Decimal, InvalidOperation

        from noteloom.recipes.schedule import check_timezone

        ws = self.host.workspace
        if tokens != "keep":
            if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
                raise InvalidInput(f"the monthly token cap must be a whole number above 0, not {tokens!r}",
                                   field="tokens")
            ws.set_setting(TOKENS_KEY, tokens)
        if cost != "keep":
            if cost is not None:
                try:
                    money = Decimal(str(cost))
                except InvalidOperation:
                    money = Decimal("NaN")
                if not money.is_finite() or money < 0:
                    raise InvalidInput(f"the monthly cost cap must be an amount in USD of 0 or more, not {cost!r}",
                                       field="cost")
                cost = str(money)
            ws.set_setting(COST_KEY, cost)
        if timezone != "keep":
            ws.set_setting(TIMEZONE_KEY, None if timezone is None else check_timezone(timezone))
        return self.cap()

    # -- export and import ------------------------------------------------------------------

    def export(self, user: User, refs: Sequence[str] | None = None) -> str:
        """Recipes as YAML (all of the user's when ``refs`` is empty)."""
        import yaml

        with db.read_tx(self.db) as c:
            recipes = [store.find(c, user.id, r) for r in refs] if refs else store.all_of(c, user.id)
        doc = {"noteloom_recipes": EXPORT_VERSION, "recipes": [r.spec.as_json() for r in recipes]}
        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))

    def import_(self, user: User, text: str) -> list[dict[str, Any]]:
        """Recipes from YAML; each starts paused (``enabled: false``), whatever the file says.
        All or nothing: one bad recipe names itself and nothing is saved."""
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInput(f"the file is not YAML: {exc}", field="file") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("recipes"), list):
            raise InvalidInput("the file must hold `recipes:` (a list), as `noteloom recipes export` writes it",
                               field="file")
        if len(doc["recipes"]) > IMPORT_MAX:
            raise InvalidInput(f"the file holds {len(doc['recipes'])} recipes; import at most {IMPORT_MAX} at a time",
                               field="file")
        specs: list[RecipeSpec] = []
        warnings: list[list[str]] = []
        for i, raw in enumerate(doc["recipes"]):
            if not isinstance(raw, dict):
                raise InvalidInput(f"recipe {i + 1} in the file is not an object", field=f"recipes[{i}]")
            try:
                spec = dataclasses.replace(check_spec({**raw, "enabled": False}), enabled=False)
                warnings.append(self.check(spec, user=user))
            except InvalidInput as exc:
                name = raw.get("name", f"#{i + 1}")
                raise InvalidInput(f"recipe {name!r}: {exc}", field=f"recipes[{i}].{exc.field or ''}".rstrip(".")) \
                    from None
            specs.append(spec)
        out = []
        with db.write_tx(self.db) as c:
            for spec, warn in zip(specs, warnings, strict=True):
                recipe = store.insert(c, user.id, spec, next_fire_time=None, acknowledged_by=user.id)
                out.append({**self.view(recipe, brief=True), "warnings": warn})
        return out

    # -- running in this process -------------------------------------------------------------

    @asynccontextmanager
    async def running(self, *, engine: Any = None, **options: Any) -> AsyncIterator[RecipeRunner]:
        """Run recipe runs in this process (the run engine, its reaper) for the block;
        ``options`` go to the runner (``retry_delay`` …)."""
        from noteloom.notifications import Deliverer, Notifications
        from noteloom.outbound import OutboundPolicy
        from noteloom.plugins import notification_channels
        from noteloom.recipes.runner import RecipeRunner
        from noteloom.runs import RunEngine

        notes = Notifications(self.db, OutboundPolicy.from_settings(self.host.settings.file))
        deliverer = Deliverer(notes, channels=notification_channels(self.host.plugins))

        async def deliver(ids: list[str]) -> None:
            for nid in ids:
                await deliverer.deliver(nid)

        run_engine = engine or RunEngine(self.db)
        options.setdefault("notify", notes.notify)
        runner = RecipeRunner(self.host, run_engine, after_commit=deliver, **options)

        def stored(ids: list[str]) -> list[str]:
            return [i for i in ids if notes.get(i) is not None]

        async def deliver_reaped() -> None:
            """What the engine's reaper told owners (runs of processes that died), once committed."""
            while True:
                ids = runner.take_unsent()
                if ids:
                    committed = await to_thread.run_sync(stored, ids)
                    runner.put_back([i for i in ids if i not in committed])
                    await deliver(committed)
                await anyio.sleep(REAPED_DELIVERY_POLL)

        async with contextlib.AsyncExitStack() as stack:
            if engine is None:
                await stack.enter_async_context(run_engine.running())
            tg = await stack.enter_async_context(anyio.create_task_group())
            tg.start_soon(deliver_reaped)
            self.runner = runner
            try:
                yield runner
            finally:
                self.runner = None
                tg.cancel_scope.cancel()

    @asynccontextmanager
    async def scheduling(self) -> AsyncIterator[Scheduler]:
        """Fire due recipes for the block (in the one process of a server that claims scheduled work)."""
        from noteloom.recipes.scheduler import Scheduler

        scheduler = Scheduler(self._runner())
        async with scheduler.running():
            self.scheduler = scheduler
            self.host.services.scheduler = scheduler
            try:
                yield scheduler
            finally:
                self.scheduler = None
                self.host.services.scheduler = None


#: The parts of a spec that are objects of their own (a patch merges them).
_NESTED = ("controls", "budgets", "notify")
#: Run statuses that still move on their own (a parked run waits for a person).
_MOVING = frozenset({"running", "queued"})


def _event_view(e: run_store.RunEvent) -> dict[str, Any]:
    return {"seq": e.seq, "kind": e.kind, "data": e.data, "time": e.time}


def run_view(r: store.RecipeRun) -> dict[str, Any]:
    return {
        "run_id": r.run_id, "recipe_id": r.recipe_id, "trigger": r.trigger, "status": r.status,
        "scheduled_time": r.scheduled_time, "mode": r.mode, "model": r.model, "controls": r.controls,
        "budgets": r.budgets, "output": r.output, "error": r.error,
        "error_code": r.error_code, "error_message": r.error_message,
        "items_done": r.items_done, "items_failed": r.items_failed, "tool_calls": r.tool_calls,
        "dry_run": r.dry_run, "created_time": r.created_time, "finished_time": r.finished_time,
        "usage": {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens},
        "cost_usd": None if r.cost_usd is None else str(r.cost_usd),
    }


def _json_or_none(text: str | None) -> Any:
    import json

    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
