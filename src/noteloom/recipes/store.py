"""Recipes, their runs, processing log and notes as rows: blocking functions that take a
connection, so a caller writes a change in a transaction of its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, NotFound
from noteloom.recipes import tables as t
from noteloom.recipes.model import FINAL, Recipe, RecipeSpec, spec_from_row
from noteloom.runs import tables as rt

#: Recipe statuses of a run still in progress: another start of the recipe would overlap it.
IN_PROGRESS = ("queued", "running", "awaiting_approval")
OUTPUT_MAX = 200_000


# -- recipes ------------------------------------------------------------------------------


def _row_values(spec: RecipeSpec) -> dict[str, Any]:
    j = spec.as_json()
    return {k: j[k] for k in (
        "name", "mode", "prompt", "tools", "model", "controls", "schedule", "timezone", "missed", "budgets", "job",
        "job_config", "batch_size", "notify", "signed_off", "data_sources", "allow_tainted_writes", "enabled",
        "pause_after",
    )}


def _recipe(row: Any) -> Recipe:
    return Recipe(
        row.id, row.user_id, spec_from_row(row), row.paused_reason, row.failures, row.next_fire_time,
        row.tainted_ack_user_id, row.tainted_ack_time, row.scratch, row.created_time, row.updated_time,
    )


def insert(conn: Connection, user_id: str, spec: RecipeSpec, *, next_fire_time: int | None,
           acknowledged_by: str | None) -> Recipe:
    if by_name(conn, user_id, spec.name) is not None:
        raise Conflict(f"a recipe called {spec.name!r} exists already; choose another name or edit that one")
    tm = now_ms()
    rid = new_id()
    conn.execute(t.recipes.insert(), {
        "id": rid, "user_id": user_id, **_row_values(spec), "paused_reason": None, "failures": 0,
        "next_fire_time": next_fire_time, "scratch": "",
        "tainted_ack_user_id": acknowledged_by if spec.allow_tainted_writes else None,
        "tainted_ack_time": tm if spec.allow_tainted_writes and acknowledged_by else None,
        "created_time": tm, "updated_time": tm,
    })
    found = get(conn, rid)
    assert found is not None
    return found


def update(conn: Connection, recipe: Recipe, spec: RecipeSpec, *, next_fire_time: int | None,
           acknowledged_by: str | None) -> Recipe:
    if spec.name != recipe.name:
        other = by_name(conn, recipe.user_id, spec.name)
        if other is not None and other.id != recipe.id:
            raise Conflict(f"a recipe called {spec.name!r} exists already; choose another name")
    tm = now_ms()
    values: dict[str, Any] = {**_row_values(spec), "next_fire_time": next_fire_time, "updated_time": tm}
    if spec.allow_tainted_writes and not recipe.spec.allow_tainted_writes:
        values.update(tainted_ack_user_id=acknowledged_by, tainted_ack_time=tm)
    elif not spec.allow_tainted_writes:
        values.update(tainted_ack_user_id=None, tainted_ack_time=None)
    if spec.enabled and not recipe.spec.enabled:
        values.update(paused_reason=None, failures=0)
    conn.execute(t.recipes.update().where(t.recipes.c.id == recipe.id).values(**values))
    found = get(conn, recipe.id)
    assert found is not None
    return found


def get(conn: Connection, recipe_id: str) -> Recipe | None:
    row = conn.execute(sa.select(t.recipes).where(t.recipes.c.id == recipe_id)).first()
    return _recipe(row) if row is not None else None


def by_name(conn: Connection, user_id: str, name: str) -> Recipe | None:
    row = conn.execute(
        sa.select(t.recipes).where(t.recipes.c.user_id == user_id, t.recipes.c.name == name)
    ).first()
    return _recipe(row) if row is not None else None


def find(conn: Connection, user_id: str, ref: str) -> Recipe:
    """A recipe of ``user_id`` by id or name (``NotFound`` naming it otherwise)."""
    found = get(conn, ref)
    if found is None or found.user_id != user_id:
        found = by_name(conn, user_id, ref)
    if found is None:
        raise NotFound(f"no recipe {ref!r}; `noteloom recipes list` shows them")
    return found


def all_of(conn: Connection, user_id: str) -> list[Recipe]:
    rows = conn.execute(sa.select(t.recipes).where(t.recipes.c.user_id == user_id).order_by(t.recipes.c.name)).all()
    return [_recipe(r) for r in rows]


def delete(conn: Connection, recipe_id: str) -> None:
    # The runs' engine rows go with them (their events and call records cascade from runs).
    run_ids = [r[0] for r in conn.execute(sa.select(t.recipe_runs.c.run_id).where(t.recipe_runs.c.recipe_id == recipe_id))]
    conn.execute(t.recipes.delete().where(t.recipes.c.id == recipe_id))
    if run_ids:
        conn.execute(rt.runs.delete().where(rt.runs.c.id.in_(run_ids)))


def set_state(conn: Connection, recipe_id: str, **values: Any) -> None:
    """Change what the app keeps about a recipe (enabled, paused_reason, failures, next_fire_time, scratch)."""
    allowed = {"enabled", "paused_reason", "failures", "next_fire_time", "scratch"}
    bad = set(values) - allowed
    if bad:
        raise ValueError(f"not a recipe state: {sorted(bad)}")
    conn.execute(t.recipes.update().where(t.recipes.c.id == recipe_id).values(updated_time=now_ms(), **values))


def due(conn: Connection, now: int, *, lock: bool, limit: int = 100) -> list[Recipe]:
    """Enabled recipes whose next fire time has come, oldest first. On PostgreSQL with
    ``lock`` the rows are locked for this transaction, and rows another process holds are
    passed over (``FOR UPDATE SKIP LOCKED``): two schedulers never claim one fire."""
    q = (
        sa.select(t.recipes)
        .where(t.recipes.c.enabled.is_(True), t.recipes.c.next_fire_time.is_not(None),
               t.recipes.c.next_fire_time <= now)
        .order_by(t.recipes.c.next_fire_time)
        .limit(limit)
    )
    if lock and conn.dialect.name == "postgresql":
        q = q.with_for_update(skip_locked=True)
    return [_recipe(r) for r in conn.execute(q).all()]


def claim_fire(conn: Connection, recipe_id: str, expected: int, new: int | None) -> bool:
    """Move a recipe's next fire time from ``expected`` to ``new``; ``False`` when another
    scheduler moved it first (the compare-and-set every claim goes through)."""
    res = conn.execute(
        t.recipes.update()
        .where(t.recipes.c.id == recipe_id, t.recipes.c.next_fire_time == expected)
        .values(next_fire_time=new)
    )
    return res.rowcount == 1


# -- runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecipeRun:
    run_id: str
    recipe_id: str
    trigger: str
    status: str
    scheduled_time: int | None
    mode: str
    model: str | None
    controls: dict[str, Any]
    budgets: dict[str, Any]
    output: str | None
    error_code: str | None
    error_message: str | None
    items_done: int
    items_failed: int
    tool_calls: int
    dry_run: bool
    created_time: int
    finished_time: int | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal | None = None
    #: Agent mode: the transcript so far and the held call (a parked run).
    transcript: dict[str, Any] | None = None

    @property
    def error(self) -> str | None:
        """The classified error as ``[code] message``."""
        if self.error_code is None:
            return None
        return f"[{self.error_code}] {self.error_message or ''}".rstrip()

    @property
    def ended(self) -> bool:
        return self.status in FINAL


_RUN_COLS = (t.recipe_runs, rt.runs.c.input_tokens, rt.runs.c.output_tokens, rt.runs.c.cost_usd)


def _run(row: Any) -> RecipeRun:
    return RecipeRun(
        row.run_id, row.recipe_id, row.trigger, row.status, row.scheduled_time, row.mode, row.model,
        dict(row.controls or {}), dict(row.budgets or {}), row.output, row.error_code, row.error_message,
        row.items_done, row.items_failed, row.tool_calls, bool(row.dry_run), row.created_time, row.finished_time,
        int(row.input_tokens or 0), int(row.output_tokens or 0),
        Decimal(row.cost_usd) if row.cost_usd is not None else None, row.transcript,
    )


def _runs_query() -> sa.Select[Any]:
    return sa.select(*_RUN_COLS).select_from(t.recipe_runs.join(rt.runs, rt.runs.c.id == t.recipe_runs.c.run_id))


def add_run(
    conn: Connection, run_id: str, recipe: Recipe, *, trigger: str, status: str, scheduled_time: int | None,
    dry_run: bool = False, error_code: str | None = None, error_message: str | None = None,
) -> None:
    s = recipe.spec
    tm = now_ms()
    final = status in FINAL
    conn.execute(t.recipe_runs.insert(), {
        "run_id": run_id, "recipe_id": recipe.id, "trigger": trigger, "status": status,
        "scheduled_time": scheduled_time, "mode": s.mode, "model": s.model,
        "controls": dataclasses.asdict(s.controls), "budgets": s.budgets.as_json(), "output": None,
        "error_code": error_code, "error_message": error_message, "transcript": None,
        "items_done": 0, "items_failed": 0, "tool_calls": 0, "dry_run": dry_run,
        "created_time": tm, "finished_time": tm if final else None,
    })


def set_run(conn: Connection, run_id: str, **values: Any) -> None:
    if "output" in values and isinstance(values["output"], str):
        values["output"] = values["output"][:OUTPUT_MAX]
    if values.get("status") in FINAL:
        values.setdefault("finished_time", now_ms())
    conn.execute(t.recipe_runs.update().where(t.recipe_runs.c.run_id == run_id).values(**values))


def get_run(conn: Connection, run_id: str) -> RecipeRun | None:
    row = conn.execute(_runs_query().where(t.recipe_runs.c.run_id == run_id)).first()
    return _run(row) if row is not None else None


def runs_of(conn: Connection, recipe_id: str, *, limit: int = 50, status: str | None = None) -> list[RecipeRun]:
    q = _runs_query().where(t.recipe_runs.c.recipe_id == recipe_id)
    if status is not None:
        q = q.where(t.recipe_runs.c.status == status)
    rows = conn.execute(q.order_by(t.recipe_runs.c.created_time.desc(), t.recipe_runs.c.run_id).limit(limit)).all()
    return [_run(r) for r in rows]


def in_progress(conn: Connection, recipe_id: str) -> RecipeRun | None:
    """The recipe's run still in progress (running, queued or parked for approval), if any."""
    row = conn.execute(
        _runs_query().where(t.recipe_runs.c.recipe_id == recipe_id, t.recipe_runs.c.status.in_(IN_PROGRESS))
        .order_by(t.recipe_runs.c.created_time.desc()).limit(1)
    ).first()
    return _run(row) if row is not None else None


def parked(conn: Connection, user_id: str) -> list[tuple[Recipe, RecipeRun]]:
    """Runs of ``user_id``'s recipes waiting for approval, oldest first."""
    rows = conn.execute(
        _runs_query().join(t.recipes, t.recipes.c.id == t.recipe_runs.c.recipe_id)
        .where(t.recipes.c.user_id == user_id, t.recipe_runs.c.status == "awaiting_approval")
        .order_by(t.recipe_runs.c.created_time)
    ).all()
    out = []
    for r in rows:
        recipe = get(conn, r.recipe_id)
        if recipe is not None:
            out.append((recipe, _run(r)))
    return out


def recent_outputs(conn: Connection, recipe_id: str, count: int, *, before: str | None = None) -> list[RecipeRun]:
    """The last ``count`` runs of the recipe that wrote an output (not dry runs), newest first."""
    q = _runs_query().where(
        t.recipe_runs.c.recipe_id == recipe_id, t.recipe_runs.c.output.is_not(None), t.recipe_runs.c.dry_run.is_(False),
    )
    if before is not None:
        q = q.where(t.recipe_runs.c.run_id != before)
    return [_run(r) for r in conn.execute(q.order_by(t.recipe_runs.c.created_time.desc()).limit(count)).all()]


# -- the processing log ---------------------------------------------------------------------


def handled(conn: Connection, recipe_id: str, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` the recipe has handled (done or failed)."""
    out: set[str] = set()
    keys = list(dict.fromkeys(keys))
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        out.update(r[0] for r in conn.execute(
            sa.select(t.recipe_items.c.item_key).where(
                t.recipe_items.c.recipe_id == recipe_id, t.recipe_items.c.item_key.in_(part))
        ))
    return out


def log_item(conn: Connection, recipe_id: str, key: str, *, label: str, status: str, run_id: str,
             verdict: dict[str, Any] | None = None, error: str | None = None) -> None:
    """One processing-log row per (recipe, item), whatever the outcome; a later outcome replaces it."""
    conn.execute(t.recipe_items.delete().where(t.recipe_items.c.recipe_id == recipe_id,
                                               t.recipe_items.c.item_key == key))
    conn.execute(t.recipe_items.insert(), {
        "recipe_id": recipe_id, "item_key": key, "label": label[:300], "status": status, "run_id": run_id,
        "verdict": verdict, "error": error[:2000] if error else None, "time": now_ms(),
    })


def items_of(conn: Connection, recipe_id: str, *, run_id: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    q = sa.select(t.recipe_items).where(t.recipe_items.c.recipe_id == recipe_id)
    if run_id is not None:
        q = q.where(t.recipe_items.c.run_id == run_id)
    rows = conn.execute(q.order_by(t.recipe_items.c.time.desc()).limit(limit)).all()
    return [{"key": r.item_key, "label": r.label, "status": r.status, "run_id": r.run_id, "verdict": r.verdict,
             "error": r.error, "time": r.time} for r in rows]


def forget_items(conn: Connection, recipe_id: str, keys: Iterable[str] | None = None) -> int:
    """Delete processing-log rows (all of the recipe's when ``keys`` is None): those items are offered again."""
    q = t.recipe_items.delete().where(t.recipe_items.c.recipe_id == recipe_id)
    if keys is not None:
        q = q.where(t.recipe_items.c.item_key.in_(list(keys)))
    return int(conn.execute(q).rowcount or 0)


# -- notes between a recipe and its owner -----------------------------------------------------


def add_note(conn: Connection, recipe_id: str, body: str, *, author: str, run_id: str | None = None) -> str:
    nid = new_id()
    conn.execute(t.recipe_notes.insert(), {
        "id": nid, "recipe_id": recipe_id, "author": author, "body": body, "run_id": run_id, "created_time": now_ms(),
    })
    return nid


def notes_of(conn: Connection, recipe_id: str, *, limit: int = 50) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(t.recipe_notes).where(t.recipe_notes.c.recipe_id == recipe_id)
        .order_by(t.recipe_notes.c.created_time.desc(), t.recipe_notes.c.id).limit(limit)
    ).all()
    return [{"id": r.id, "author": r.author, "body": r.body, "run_id": r.run_id, "created_time": r.created_time}
            for r in reversed(rows)]


# -- spend ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spend:
    runs: int
    input_tokens: int
    output_tokens: int
    #: ``None`` when some run's price is unknown (a local model): never a made-up zero.
    cost_usd: Decimal | None
    #: Of ``runs``, how many had an unknown price.
    unpriced: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": None if self.cost_usd is None else str(self.cost_usd), "unpriced_runs": self.unpriced}


def spend(conn: Connection, *, since: int, until: int | None = None, recipe_id: str | None = None,
          kinds: Sequence[str] | None = None) -> Spend:
    """What runs created in ``[since, until)`` spent: one recipe's, or every run of ``kinds``
    (chat turns and recipe runs alike: the monthly cap counts them together)."""
    r = rt.runs
    q = sa.select(r.c.input_tokens, r.c.output_tokens, r.c.cost_usd).where(r.c.created_time >= since)
    if until is not None:
        q = q.where(r.c.created_time < until)
    if recipe_id is not None:
        q = q.join(t.recipe_runs, t.recipe_runs.c.run_id == r.c.id).where(t.recipe_runs.c.recipe_id == recipe_id)
    if kinds is not None:
        q = q.where(r.c.kind.in_(list(kinds)))
    n = i = o = unpriced = 0
    cost = Decimal(0)
    for row in conn.execute(q):
        n += 1
        i += int(row.input_tokens or 0)
        o += int(row.output_tokens or 0)
        if row.cost_usd is None:
            if row.input_tokens or row.output_tokens:
                unpriced += 1
        else:
            cost += Decimal(row.cost_usd)
    return Spend(n, i, o, cost if not unpriced else (cost if cost else None), unpriced)


def spend_by_day(conn: Connection, recipe_id: str, days: Sequence[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """Per labelled day ``(label, start, end)``, what the recipe's runs spent."""
    return [{"day": label, **spend(conn, since=a, until=b, recipe_id=recipe_id).as_json()} for label, a, b in days]


def missing(recipe_id: str) -> NotFound:
    return NotFound(f"no recipe {recipe_id!r}; `noteloom recipes list` shows them")
