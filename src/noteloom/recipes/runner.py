"""Running recipes: each run is a run of the run engine (kind ``recipe``), in agent mode or
pipeline mode, recorded in full.

What every run shares, whatever its mode:

- it starts only if the recipe has no run in progress (else it is recorded
  ``skipped_overlap``), and only if the taint gate and the workspace's monthly cap let it;
- it runs as the recipe's owner, with the recipe's model and controls; each model call is
  checked first against the run's ceilings (input and output tokens, cost, tool calls,
  wall clock) with its worst case, so a run never overshoots by a whole call;
- a Stop (button, command, API) sets the run's cancel flag: the run ends ``cancelled``
  mid-generation or between steps, keeping its partial trace and output;
- a transient provider failure (rate limit, 5xx, network, overload) is retried once,
  after a delay that doubles on a rate limit;
- its end is written in one transaction: the run's status and classified error
  (``[code] message``), output, tally, tokens and cost, the recipe's failure count (after
  ``pause_after`` failures in a row it pauses itself and says so) and the notifications.

Agent mode (:meth:`RecipeRunner._agent`) runs the agent loop with the recipe's tools
(unknown or disabled ones skipped and said in the trace), the recipe-only tools, a
report-writer preamble and the untrusted-input contract when needed. A call whose policy
is ``confirm`` parks the run ``awaiting_approval`` (the recipe may be signed off for named
tools instead); :meth:`RecipeRunner.decide` resumes it. Pipeline mode
(:meth:`RecipeRunner._pipeline`) judges one item per exchange, as ``noteloom.pipeline``
describes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import anyio
import pluggy
import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.agent import (
    CONTRACT,
    ActivityEvent,
    CancelToken,
    Decision,
    PendingEvent,
    RunEvent,
    RunOptions,
    RunResult,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    fence,
    run,
)
from noteloom.config import Settings
from noteloom.data import catalog_line
from noteloom.errors import InvalidInput, NoteloomError, NotFound
from noteloom.memory.context import ContextBuilder, MemoryContext
from noteloom.messages import (
    Message,
    TextDelta,
    ThinkingDelta,
    Usage,
    messages_from_list,
    messages_to_list,
    usage_to_dict,
)
from noteloom.notifications import Notifications
from noteloom.pipeline import PipelineItem, PipelineJob, PipelineRun
from noteloom.providers.base import Provider, capabilities_of
from noteloom.providers.errors import ProviderError
from noteloom.recipes import store
from noteloom.recipes.model import DATA_TOOLS, FAILING, Recipe, RecipeStatus
from noteloom.recipes.store import RecipeRun
from noteloom.recipes.tools import recipe_tools
from noteloom.runs import Run, RunCall, RunEnd, RunEngine, RunError, RunHandle, RunStatus
from noteloom.runs import store as run_store
from noteloom.runs.spend import ALERT_AT, ALERTED_KEY, MonthlyCap, admission, month_state
from noteloom.runs.store import Spent
from noteloom.services import Services
from noteloom.tools import CallOrigin, ToolContext, ToolDef, ToolRegistry
from noteloom.workspace import User, Workspace

log = logging.getLogger("noteloom.recipes")

RUN_KIND = "recipe"
#: Model calls per agent run; the run's budgets (tokens, cost, tool calls, time) stop it first.
RECIPE_MAX_STEPS = 200
#: Provider failures worth one more try: they say nothing about the request itself.
TRANSIENT = frozenset({"api_rate_limited", "api_server_error", "api_overloaded", "api_network_error",
                       "api_no_response", "api_stream_error"})
#: What the run engine records for each recipe status.
ENGINE_STATUS: dict[str, RunStatus] = {
    "succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled", "budget_exceeded": "failed",
    "timeout": "failed", "awaiting_approval": "waiting", "skipped_overlap": "cancelled",
}

PREAMBLE = """You are running a recipe: scheduled work for {owner} in their notes workspace, with nobody \
watching while you work. Do the task below with the tools you have, then write your report as your final \
answer: what you did, what you found, and anything that needs the owner's attention. Be concise and concrete; \
name notes by their titles. Never invent results you did not get from a tool.

It is {now} ({timezone}). This recipe is called "{name}".{notes}"""

PIPELINE_RETRY = ("Your answer was not a valid verdict: {error}\n"
                  "Answer again with ONLY the JSON object, nothing before or after it.")


class Host(Protocol):
    """The parts of the app recipes use (``noteloom.app.App`` is one)."""

    settings: Settings
    plugins: pluggy.PluginManager
    workspace: Workspace
    registry: ToolRegistry
    services: Services
    pipeline_jobs: dict[str, PipelineJob]

    def tool_context(self, user: User | None = None, **extra: Any) -> ToolContext: ...


#: Writes a notification in the caller's transaction (``Notifications.notify``); its id.
Notify = Callable[[Connection, str, str, str, str, str | None, str | None], str]
#: Seconds to wait before retrying a transient failure (attempt number, rate limited?).
RetryDelay = Callable[[int, bool], float]


def default_retry_delay(attempt: int, rate_limited: bool) -> float:
    return float((4.0 if rate_limited else 2.0) * 2 ** (attempt - 1))


@dataclass
class _Prep:
    recipe: Recipe
    record: RecipeRun
    user: User
    context: ToolContext
    tools: list[ToolDef] = field(default_factory=list)
    #: The recipe's tools not offered, each with why (said in the trace).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: The one-line catalog of the data sources the run may read ("" when it reads none).
    data_line: str = ""
    notes: list[dict[str, Any]] = field(default_factory=list)
    cap: MonthlyCap = field(default_factory=MonthlyCap)
    held: dict[str, Any] | None = None
    decision: Decision | None = None
    transcript: list[Message] = field(default_factory=list)
    #: The memories chosen for the recipe's prompt (``None``: the recipe has no memory tool).
    memory: MemoryContext | None = None


#: A recipe chooses memory through its allowed tools: with one of these it gets the memory
#: context too (and the tools it lists).
MEMORY_TOOLS = frozenset({"recall", "remember"})
NO_DATA = ("no data source is readable for this recipe (opt sources in under [data] in noteloom.toml; "
           "the recipe's data_sources may narrow them)")


@dataclass
class _Outcome:
    status: RecipeStatus
    output: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = Decimal(0)
    model: str | None = None
    transcript: dict[str, Any] | None = None
    tool_calls: int = 0
    items_done: int = 0
    items_failed: int = 0
    flagged: list[str] = field(default_factory=list)


class RecipeRunner:
    """Starts, runs, resumes and settles recipe runs; see the module docstring."""

    def __init__(
        self, host: Host, engine: RunEngine, *, notify: Notify | None = None,
        retry_delay: RetryDelay = default_retry_delay, after_commit: Callable[[list[str]], Awaitable[None]] | None = None,
    ) -> None:
        self.host = host
        self.engine = engine
        self.db = engine.db
        self.notify = notify or Notifications(engine.db).notify
        self.retry_delay = retry_delay
        #: Each owner's memories, indexed once per process (``noteloom.memory.context``).
        self.memories = ContextBuilder()
        #: Called with the ids of the notifications a run's end wrote, once committed (delivery).
        self.after_commit = after_commit
        #: The notifications each settling run wrote, delivered once its end is committed.
        self._told: dict[str, list[str]] = {}
        #: What the reaper's runs told (written in the reaper's thread and transaction): the
        #: owner of the runner delivers them once they are committed (``take_unsent``).
        self._unsent: list[str] = []
        self._unsent_lock = threading.Lock()
        engine.on_reap(RUN_KIND, self._reaped)

    # -- starting ---------------------------------------------------------------------------

    def begin(
        self, conn: Connection, recipe: Recipe, *, trigger: str, scheduled_time: int | None = None,
        dry_run: bool = False,
    ) -> tuple[str, bool]:
        """Create the run of ``recipe`` in the caller's transaction: ``(run_id, True)`` to
        launch, or ``(run_id, False)`` when it would overlap a run in progress (recorded
        ``skipped_overlap``)."""
        busy = store.in_progress(conn, recipe.id)
        if busy is not None and not dry_run:
            rid = self.engine.create(conn, kind=RUN_KIND, user_id=recipe.user_id, subject_id=recipe.id,
                                     status="cancelled")
            why = f"run {busy.run_id} of this recipe was still {busy.status.replace('_', ' ')}"
            store.add_run(conn, rid, recipe, trigger=trigger, status="skipped_overlap", scheduled_time=scheduled_time,
                          error_code="skipped_overlap", error_message=why)
            self.engine.write_end(conn, rid, [], [], "cancelled", RunError("skipped_overlap", why))
            return rid, False
        rid = self.engine.create(conn, kind=RUN_KIND, user_id=recipe.user_id, subject_id=recipe.id)
        store.add_run(conn, rid, recipe, trigger=trigger, status="running", scheduled_time=scheduled_time,
                      dry_run=dry_run)
        return rid, True

    def launch(self, run_id: str, *, sample: int | None = None, first_seq: int = 1) -> RunHandle:
        """Run ``run_id`` (begun, or resumed) in the engine's task group."""
        handle = RunHandle(run_id, first_seq)
        self.engine.register(handle)
        self.engine.spawn(self._guarded, handle, sample)
        return handle

    async def _guarded(self, handle: RunHandle, sample: int | None) -> None:
        """One run's failure to settle must not stop the others (the reaper settles it)."""
        try:
            await self._execute(handle, sample)
        except Exception:
            log.exception("recipe run %s could not be settled; the reaper will mark it interrupted", handle.run_id)

    async def execute(self, run_id: str, *, sample: int | None = None, first_seq: int = 1) -> None:
        """Run ``run_id`` to its end here (the command line awaits this)."""
        handle = RunHandle(run_id, first_seq)
        self.engine.register(handle)
        await self._execute(handle, sample)

    async def _execute(self, handle: RunHandle, sample: int | None) -> None:
        try:
            await self.engine.execute(handle, lambda h: self._body(h, sample))
        finally:
            self.engine.unregister(handle)
        ids = self._told.pop(handle.run_id, [])
        if ids and self.after_commit is not None:
            try:
                await self.after_commit(ids)
            except Exception:
                log.exception("could not deliver the notifications of run %s", handle.run_id)

    # -- stopping and deciding -----------------------------------------------------------------

    def stop(self, run_id: str) -> bool:
        """Ask a run to stop (see :func:`stop_run`); a run of this process stops at once."""
        asked = stop_run(self.db, run_id)
        if asked:
            self.engine.cancel_live(run_id)
        return asked

    def decide(self, conn: Connection, run_id: str, decision: Decision) -> RecipeRun:
        """Record the owner's answer to a parked run's held call (in the caller's transaction)
        and make the run runnable again; the caller launches it."""
        rec = store.get_run(conn, run_id)
        if rec is None:
            raise NotFound(f"no recipe run {run_id!r}")
        if rec.status != "awaiting_approval" or not rec.transcript or not rec.transcript.get("held"):
            raise InvalidInput(f"run {run_id!r} is {rec.status.replace('_', ' ')}, not waiting for approval",
                               field="run_id")
        state = dict(rec.transcript)
        state["decision"] = decision
        self.engine.resume(conn, run_id)
        store.set_run(conn, run_id, status="running", transcript=state)
        found = store.get_run(conn, run_id)
        assert found is not None
        return found

    # -- one run ------------------------------------------------------------------------------

    async def _body(self, handle: RunHandle, sample: int | None) -> RunEnd:
        token = CancelToken()
        handle.on_cancel(token.cancel)
        if handle.cancelled.is_set():
            token.cancel()
        prep: _Prep | None = None
        try:
            prep = await to_thread.run_sync(self._prepare, handle.run_id)
            handle.emit("status", {"status": "running", "mode": prep.recipe.spec.mode,
                                   "resumed": prep.decision is not None})
            for name, why in prep.skipped:
                handle.emit("note", {"text": f"tool {name!r} is not offered: {why}"})
            problem = await to_thread.run_sync(self._gate, prep)
            if problem is not None:
                out = _Outcome(problem[0], error_code=problem[1], error_message=problem[2])
            elif prep.recipe.spec.mode == "agent":
                out = await self._agent(prep, handle, token)
            else:
                out = await self._pipeline(prep, handle, token, sample)
        except NoteloomError as exc:
            code = "config" if isinstance(exc, InvalidInput) else "run_error"
            out = _Outcome("failed", error_code=code, error_message=str(exc))
        except Exception:
            log.exception("recipe run %s failed", handle.run_id)
            out = _Outcome("failed", error_code="internal_error",
                           error_message="Something went wrong on our side (it was logged).")
        return self._end(handle, prep, out)

    def _prepare(self, run_id: str) -> _Prep:
        ws = self.host.workspace
        with db.read_tx(self.db) as c:
            rec = store.get_run(c, run_id)
            if rec is None:
                raise NotFound(f"no recipe run {run_id!r}")
            recipe = store.get(c, rec.recipe_id)
            if recipe is None:
                raise NotFound(f"the recipe of run {run_id!r} was deleted")
            u = c.execute(sa.select(db.users).where(db.users.c.id == recipe.user_id)).first()
            user = User.of(u) if u else User(recipe.user_id, "", False)
            notes = store.notes_of(c, recipe.id, limit=10)
            cap = MonthlyCap.from_settings(ws.settings_with_prefix("limits.", "workspace.", conn=c))
            memory = None
            if recipe.spec.mode == "agent" and MEMORY_TOOLS & set(recipe.spec.tools):
                memory = self.memories.build(c, recipe.user_id, recipe.spec.prompt,
                                             vectors=self.host.services.memory_vectors)
        sources = recipe.spec.data_sources
        context = self.host.tool_context(user, origin=CallOrigin(run_id=run_id),
                                         data_sources=None if sources is None else frozenset(sources))
        prep = _Prep(recipe, rec, user, context, notes=notes, cap=cap, memory=memory)
        if recipe.spec.mode == "agent":
            enabled = {t.name: t for t in self.host.registry.enabled(ws)}
            if DATA_TOOLS & set(recipe.spec.tools):
                prep.data_line = catalog_line(context)
            for name in recipe.spec.tools:
                if name not in enabled:
                    prep.skipped.append((name, _skip_reason(self.host, name)))
                elif name in DATA_TOOLS and not prep.data_line:
                    # A tool that fails on every call is not offered at all.
                    prep.skipped.append((name, NO_DATA))
                else:
                    prep.tools.append(enabled[name])
            state = rec.transcript or {}
            prep.transcript = messages_from_list(state.get("messages", []))
            prep.held = state.get("held")
            decision = state.get("decision")
            prep.decision = decision if decision in ("approve", "decline") else None
        return prep

    def _gate(self, prep: _Prep) -> tuple[RecipeStatus, str, str] | None:
        """Why the run may not start (the taint gate, the monthly cap), or ``None``."""
        spec = prep.recipe.spec
        if spec.mode == "agent":
            readers = [t.name for t in prep.tools if t.untrusted_output]
            writers = [t.name for t in prep.tools if t.writes_out]
            tainted = bool(readers and writers)
        else:
            job = self.host.pipeline_jobs.get(spec.job or "")
            if job is None:
                return "failed", "unknown_job", (f"pipeline job {spec.job!r} is not installed; `noteloom recipes jobs` lists "
                                       "the jobs this app has")
            tainted = job.untrusted_digest
            readers, writers = [f"job {job.name}"], ["its record_verdict"]
        if tainted and not spec.allow_tainted_writes:
            return "failed", "taint_gate", (f"this recipe reads text others wrote ({', '.join(readers)}) and can write "
                                  f"({', '.join(writers)}); its owner must acknowledge that with "
                                  "allow_tainted_writes before it runs")
        with db.read_tx(self.db) as c:
            reached = month_state(c, prep.cap, db.now_ms()).reached if prep.cap.on else None
        if reached is not None:
            return "budget_exceeded", "workspace_cap", reached
        return None

    def _resolve(self, prep: _Prep) -> tuple[Provider, str, str]:
        """The run's model; its tools learn what it reads (a note's image goes to it only with vision)."""
        provider, model = self.host.services.providers.resolve(prep.recipe.spec.model)
        prep.context = dataclasses.replace(prep.context, model_capabilities=capabilities_of(provider, model))
        return provider, model, f"{provider.name}:{model}"

    def _options(self, prep: _Prep, **extra: Any) -> RunOptions:
        s = prep.recipe.spec
        b = s.budgets
        options = RunOptions(
            # The recipe's budgets bound a run; the chat's per-turn step limit does not apply.
            max_steps=RECIPE_MAX_STEPS,
            max_output_tokens=b.max_output_tokens, max_cost=b.max_cost, time_limit=b.time_limit,
            max_input_tokens=b.max_input_tokens, max_tool_calls=b.max_tool_calls,
            thinking=s.controls.thinking_level, temperature=s.controls.temperature, top_p=s.controls.top_p,
            max_tokens=s.controls.max_tokens, admit=admission(self.db, prep.cap),
            policies={name: "auto" for name in s.signed_off},
        )
        return dataclasses.replace(options, **extra)

    async def _model_run(
        self, provider: Provider, model: str, system: str, history: list[Message], tools: list[ToolDef],
        session: list[ToolDef], ctx: ToolContext, options: RunOptions, sink: _Sink | None, token: CancelToken,
    ) -> RunResult:
        """The agent loop, with one retry of a transient provider failure."""
        attempt = 0
        spent_usage, spent_cost, calls = Usage(), Decimal(0), 0
        cost: Decimal | None = Decimal(0)
        while True:
            attempt += 1
            result = await run(provider, model, system, history, tools, ctx, options, session_tools=session,
                               on_event=sink, cancel=token)
            spent_usage = spent_usage + result.usage
            calls += result.tool_calls
            cost = None if cost is None or result.cost is None else cost + result.cost
            if spent_cost is not None and result.cost is not None:
                spent_cost += result.cost
            err = result.error
            if result.stop_reason != "error" or err is None or err.code not in TRANSIENT or attempt > 1:
                result.usage, result.cost, result.tool_calls = spent_usage, cost, calls
                return result
            delay = self.retry_delay(attempt, err.code == "api_rate_limited")
            if sink is not None:
                sink.handle.emit("activity", {"label": f"{err} Retrying in {delay:g} s…"})
            with token.scope():
                await anyio.sleep(delay)
            if token.cancelled:
                result.stop_reason = "cancelled"
                result.usage, result.cost, result.tool_calls = spent_usage, cost, calls
                return result
            # Go on from what the failed attempt completed (its tool calls ran; a cut-off text is dropped).
            kept = [m for m in result.messages if not (m.role == "assistant" and not m.tool_calls)]
            history = [*history, *kept]
            options = dataclasses.replace(
                options,
                max_output_tokens=None if options.max_output_tokens is None
                else max(options.max_output_tokens - spent_usage.output_tokens, 1),
                max_input_tokens=None if options.max_input_tokens is None
                else max(options.max_input_tokens - spent_usage.input_tokens, 1),
                max_tool_calls=None if options.max_tool_calls is None else max(options.max_tool_calls - calls, 0),
                max_cost=None if options.max_cost is None else max(options.max_cost - spent_cost, Decimal(0)),
            )

    # -- agent mode ---------------------------------------------------------------------------

    async def _agent(self, prep: _Prep, handle: RunHandle, token: CancelToken) -> _Outcome:
        s = prep.recipe.spec
        provider, model, address = self._resolve(prep)
        tz = s.timezone
        now = datetime.now(ZoneInfo(tz))
        notes = "".join(
            f"\n- ({'owner' if n['author'] == 'user' else 'you'}, "
            f"{datetime.fromtimestamp(n['created_time'] / 1000, ZoneInfo(tz)):%Y-%m-%d %H:%M}) {n['body']}"
            for n in prep.notes
        )
        system = PREAMBLE.format(
            owner=prep.user.name or "the owner", now=now.strftime("%A %Y-%m-%d %H:%M"), timezone=tz, name=s.name,
            notes=("\n\nNotes between the owner and this recipe (oldest first; answer the owner's in your report "
                   "when they ask something):" + notes) if notes else "",
        )
        session = recipe_tools(self.db, prep.recipe.id, prep.record.run_id,
                               lambda ms: datetime.fromtimestamp(ms / 1000, ZoneInfo(tz)).isoformat(timespec="minutes"))
        taken = {t.name for t in session}
        tools = [t for t in prep.tools if t.name not in taken]
        history = prep.transcript or [Message.user(s.prompt)]
        decisions: dict[str, Decision] = {}
        if prep.held is not None and prep.decision is not None:
            decisions[prep.held["call_id"]] = prep.decision
        nonce = secrets.token_hex(8)
        if prep.data_line:
            system += "\n\n" + prep.data_line
        if prep.memory is not None and not prep.memory.empty:
            system += "\n\n" + prep.memory.text(lambda text: fence(text, nonce))
        # Memories in the prompt need the untrusted contract from the first call on.
        options = self._options(prep, decisions=decisions, nonce=nonce,
                                untrusted=True if prep.memory is not None and not prep.memory.empty else None)
        if prep.transcript:  # resumed after approval: what the run spent so far counts
            r = prep.record
            options = dataclasses.replace(
                options,
                max_output_tokens=None if options.max_output_tokens is None
                else max(options.max_output_tokens - r.output_tokens, 1),
                max_input_tokens=None if options.max_input_tokens is None
                else max(options.max_input_tokens - r.input_tokens, 1),
                max_tool_calls=None if options.max_tool_calls is None
                else max(options.max_tool_calls - r.tool_calls, 0),
                max_cost=None if options.max_cost is None or r.cost_usd is None
                else max(options.max_cost - r.cost_usd, Decimal(0)),
            )
        sink = _Sink(handle, announced={prep.held["call_id"]} if prep.held else set())
        result = await self._model_run(provider, model, system, history, tools, session, prep.context, options,
                                       sink, token)
        transcript = [*history, *result.messages]
        out = _Outcome(
            "succeeded", output=result.text or None, usage=result.usage, cost=result.cost, model=address,
            tool_calls=prep.record.tool_calls + result.tool_calls,
            transcript={"messages": messages_to_list(transcript)},
        )
        reason = result.stop_reason
        if reason == "awaiting_confirmation" and result.pending is not None:
            p = result.pending
            out.status = "awaiting_approval"
            out.transcript = {"messages": messages_to_list(transcript), "held": {
                "call_id": p.call_id, "tool": p.tool, "arguments": p.arguments, "description": p.description,
                "effect": p.effect,
            }}
        elif reason == "cancelled":
            out.status = "cancelled"
            out.error_code, out.error_message = "cancelled", "stopped by its owner"
        elif reason == "error":
            err = result.error
            out.status = "failed"
            out.error_code = err.code if err else "error"
            out.error_message = str(err) if err else "the model call failed"
        elif reason in ("budget_exceeded", "max_steps"):
            limit = result.limit or "max_steps"
            out.status = "timeout" if limit == "time_limit" else "budget_exceeded"
            out.error_code = limit
            out.error_message = result.refused or _LIMIT_TEXT.get(limit, f"the run reached its {limit}")
        return out

    # -- pipeline mode --------------------------------------------------------------------------

    async def _pipeline(self, prep: _Prep, handle: RunHandle, token: CancelToken, sample: int | None) -> _Outcome:
        from noteloom.verdicts import (
            InvalidVerdict,
            check_verdict,
            extract_verdict,
            output_instruction,
        )

        s = prep.recipe.spec
        job = self.host.pipeline_jobs[s.job or ""]
        config = dict(s.job_config)
        await to_thread.run_sync(_check_config, job, config, prep.context)
        provider, model, address = self._resolve(prep)
        nonce = secrets.token_hex(8)
        dry = sample is not None
        seen: set[str] = set()
        recipe_id, run_id = prep.recipe.id, prep.record.run_id

        def handled(keys: Any) -> set[str]:
            if dry:
                with db.read_tx(self.db) as c:
                    return store.handled(c, recipe_id, list(keys)) | (seen & set(keys))
            with db.read_tx(self.db) as c:
                return store.handled(c, recipe_id, list(keys))

        # The run acts as the recipe's owner: the context is theirs (prep.context), and so is
        # the verdict's schema where it depends on what they may see (triage's tags).
        prun = PipelineRun(prep.context, recipe_id, run_id, config, handled)
        schema = await to_thread.run_sync(_verdict_schema, job, prun)
        system = "\n\n".join(part for part in (
            s.prompt.strip() or job.default_prompt,
            output_instruction(schema),
            CONTRACT.format(nonce=nonce) if job.untrusted_digest else "",
        ) if part)
        out = _Outcome("succeeded", model=address)
        b = s.budgets
        limit = sample if sample is not None else s.batch_size
        # The wall-clock limit is the run's, over every item's exchange.
        deadline = None if b.time_limit is None else anyio.current_time() + b.time_limit
        judged = 0
        while judged < limit:
            if token.cancelled or handle.cancelled.is_set():
                out.status, out.error_code, out.error_message = "cancelled", "cancelled", "stopped by its owner"
                break
            left = None if deadline is None else deadline - anyio.current_time()
            if left is not None and left <= 0:
                out.status, out.error_code, out.error_message = "timeout", "time_limit", _LIMIT_TEXT["time_limit"]
                break
            worst = s.controls.max_tokens or 1024
            if b.max_output_tokens is not None and out.usage.output_tokens + worst > b.max_output_tokens:
                out.status, out.error_code = "budget_exceeded", "max_output_tokens"
                out.error_message = _LIMIT_TEXT["max_output_tokens"]
                break
            item = await to_thread.run_sync(job.next_item, prun)
            if item is None:
                break
            if item.key in seen:  # a job that offers a key twice would loop: stop it here
                raise InvalidInput(f"pipeline job {job.name!r} offered item {item.key!r} twice in one run")
            seen.add(item.key)
            judged += 1
            verdict, error, stop = await self._judge(prep, handle, token, job, prun, item, system, nonce,
                                                      provider, model, out, extract_verdict, check_verdict,
                                                      InvalidVerdict, deadline)
            if stop is not None:
                out.status, out.error_code, out.error_message = stop
                break
            if verdict is not None and not dry:
                await to_thread.run_sync(job.record_verdict, prun, item, verdict, address)
            if not dry:
                def log_it(item: PipelineItem = item, verdict: dict[str, Any] | None = verdict,
                           error: str | None = error) -> None:
                    with db.write_tx(self.db) as c:
                        store.log_item(c, recipe_id, item.key, label=item.label, run_id=run_id,
                                       status="done" if verdict is not None else "error", verdict=verdict, error=error)
                await to_thread.run_sync(log_it)
            if verdict is not None:
                out.items_done += 1
                flag = getattr(job, "flagged", None)
                if callable(flag) and flag(verdict):
                    out.flagged.append(item.label)
            else:
                out.items_failed += 1
        tally = f"{out.items_done} item(s) judged" + (f", {out.items_failed} failed" if out.items_failed else "")
        if dry:
            tally += " (dry run: nothing recorded)"
        elif out.status == "succeeded" and judged >= limit:
            tally += f"; the batch of {limit} is done, more may be waiting for the next run"
        elif out.status == "succeeded":
            tally += "; caught up"
        out.output = tally
        return out

    async def _judge(
        self, prep: _Prep, handle: RunHandle, token: CancelToken, job: PipelineJob, prun: PipelineRun,
        item: PipelineItem, system: str, nonce: str, provider: Provider, model: str, out: _Outcome,
        extract: Callable[[str], dict[str, Any]], check: Callable[[Mapping[str, Any], Any], dict[str, Any]],
        invalid: type[Exception], deadline: float | None,
    ) -> tuple[dict[str, Any] | None, str | None, tuple[RecipeStatus, str, str] | None]:
        """One item: its exchange and at most one retry. ``(verdict, error, stop)``."""
        digest = await to_thread.run_sync(job.digest, prun, item)
        text = fence(digest, nonce) if job.untrusted_digest else digest
        call_id = handle.call_started("item", {"key": item.key, "label": item.label})
        handle.emit("item", {"key": item.key, "label": item.label, "status": "judging"})
        history = [Message.user(text)]
        options = self._options(prep, max_tool_calls=None, untrusted=True if job.untrusted_digest else None,
                                nonce=nonce)
        b = prep.recipe.spec.budgets
        error: str | None = None
        for attempt in (1, 2):
            options = dataclasses.replace(
                options,
                max_output_tokens=None if b.max_output_tokens is None
                else max(b.max_output_tokens - out.usage.output_tokens, 1),
                max_input_tokens=None if b.max_input_tokens is None
                else max(b.max_input_tokens - out.usage.input_tokens, 1),
                max_cost=None if b.max_cost is None or out.cost is None else max(b.max_cost - out.cost, Decimal(0)),
                time_limit=None if deadline is None else max(deadline - anyio.current_time(), 0.001),
            )
            result = await self._model_run(provider, model, system, history, [], [], prep.context, options, None,
                                           token)
            out.usage = out.usage + result.usage
            out.cost = None if out.cost is None or result.cost is None else out.cost + result.cost
            handle.emit("usage", {"usage": usage_to_dict(result.usage), "run_usage": usage_to_dict(out.usage)})
            stop = _pipeline_stop(result)
            if stop is not None:
                handle.call_finished(call_id, "interrupted" if stop[0] == "cancelled" else "error", stop[2])
                handle.emit("item", {"key": item.key, "label": item.label, "status": "stopped", "error": stop[2]})
                return None, None, stop
            answer = result.text
            try:
                schema = await to_thread.run_sync(_verdict_schema, job, prun)
                verdict = check(schema, extract(answer))
                await to_thread.run_sync(job.validate_verdict, prun, item, verdict)
            except (invalid, InvalidInput) as exc:
                error = str(exc)
                if attempt == 1:
                    handle.emit("item", {"key": item.key, "label": item.label, "status": "retrying", "error": error})
                    history = [*history, Message.assistant(answer or "(no answer)"),
                               Message.user(PIPELINE_RETRY.format(error=error))]
                    continue
                break
            handle.call_finished(call_id, "ok", None, json.dumps(verdict, ensure_ascii=False))
            handle.emit("item", {"key": item.key, "label": item.label, "status": "done", "verdict": verdict})
            return verdict, None, None
        msg = f"no valid verdict after one retry: {error}"
        handle.call_finished(call_id, "error", msg)
        handle.emit("item", {"key": item.key, "label": item.label, "status": "error", "error": msg})
        return None, msg, None

    # -- the end --------------------------------------------------------------------------------

    def _end(self, handle: RunHandle, prep: _Prep | None, out: _Outcome) -> RunEnd:
        run_id = handle.run_id
        error = RunError(out.error_code or "error", out.error_message or "") if out.error_code else None

        def write(c: Connection) -> None:
            rec = store.get_run(c, run_id)
            recipe = store.get(c, rec.recipe_id) if rec is not None else None
            values: dict[str, Any] = {
                "status": out.status, "output": out.output, "error_code": out.error_code,
                "error_message": out.error_message, "items_done": out.items_done, "items_failed": out.items_failed,
                "tool_calls": out.tool_calls, "model": out.model,
            }
            if out.transcript is not None:
                values["transcript"] = out.transcript
            if prep is not None and prep.memory is not None:
                values["memories"] = prep.memory.given()
            store.set_run(c, run_id, **values)
            if recipe is not None and rec is not None and not rec.dry_run:
                self._told[run_id] = self._after(c, recipe, run_id, out, prep)

        spent = Spent(out.usage.input_tokens, out.usage.output_tokens, out.cost, out.model)
        done = {"status": out.status, "error": error.as_dict() if error else None, "output": out.output,
                "items_done": out.items_done, "items_failed": out.items_failed}
        return RunEnd(ENGINE_STATUS.get(out.status, "failed"), error, done, write, spent)

    def _after(self, c: Connection, recipe: Recipe, run_id: str, out: _Outcome, prep: _Prep | None) -> list[str]:
        """The recipe's failure count, its pause, and the notifications of this end."""
        ids: list[str] = []
        name = recipe.name

        def tell(kind: str, title: str, body: str) -> None:
            ids.append(self.notify(c, recipe.user_id, kind, title, body, recipe.id, run_id))

        if out.status in FAILING:
            failures = recipe.failures + 1
            store.set_state(c, recipe.id, failures=failures)
            detail = f"[{out.error_code}] {out.error_message}" if out.error_code else out.status
            kind = "budget" if out.status == "budget_exceeded" else "failure"
            tell(kind, f"Recipe {name!r} {out.status.replace('_', ' ')}", detail)
            if failures >= recipe.spec.pause_after and recipe.spec.enabled:
                reason = f"paused after {failures} failed runs in a row; the last: {detail}"
                store.set_state(c, recipe.id, enabled=False, paused_reason=reason, next_fire_time=None)
                tell("paused", f"Recipe {name!r} paused itself", reason + ". Fix it, then resume it.")
        elif out.status == "succeeded":
            if recipe.failures:
                store.set_state(c, recipe.id, failures=0)
            if recipe.spec.notify.on_success:
                tell("success", f"Recipe {name!r} succeeded", (out.output or "")[:2000])
            if out.flagged and recipe.spec.notify.on_flagged:
                tell("flagged", f"Recipe {name!r} flagged {len(out.flagged)} item(s)", "\n".join(out.flagged[:50]))
        elif out.status == "awaiting_approval" and out.transcript and out.transcript.get("held"):
            held = out.transcript["held"]
            tell("approval", f"Recipe {name!r} waits for your approval", held.get("description") or held["tool"])
        if prep is not None and prep.cap.on:
            state = month_state(c, prep.cap, db.now_ms())
            spent_now = out.usage.input_tokens + out.usage.output_tokens
            if state.fraction >= ALERT_AT and self.host.workspace.get_setting(ALERTED_KEY, conn=c) != state.month \
                    and spent_now:
                self.host.workspace.set_setting(ALERTED_KEY, state.month, conn=c)
                tell("budget", f"{int(state.fraction * 100)} % of this month's cap is spent",
                     f"{state.tokens} tokens and ${state.cost} in {state.month} across chats and recipes.")
        return ids

    def take_unsent(self) -> list[str]:
        """The notifications reaped runs wrote that nobody has delivered yet (taken once)."""
        with self._unsent_lock:
            out, self._unsent = self._unsent, []
        return out

    def put_back(self, ids: list[str]) -> None:
        """Notifications taken too early (their transaction had not committed): later."""
        with self._unsent_lock:
            self._unsent[:0] = ids

    def _reaped(self, c: Connection, run: Run, error: RunError, open_calls: list[RunCall] | Any,
                ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A run whose process died: failed, interrupted, counted, told."""
        message = error.message
        store.set_run(c, run.id, status="failed", error_code=error.code, error_message=message)
        rec = store.get_run(c, run.id)
        recipe = store.get(c, rec.recipe_id) if rec is not None else None
        if recipe is not None and rec is not None and not rec.dry_run:
            told = self._after(c, recipe, run.id, _Outcome("failed", error_code=error.code, error_message=message), None)
            with self._unsent_lock:
                self._unsent.extend(told)
        shown = error.as_dict()
        return shown, {"status": "failed", "error": shown}


class _Sink:
    """The agent's events as the run's events and call records."""

    def __init__(self, handle: RunHandle, *, announced: set[str]) -> None:
        self.handle = handle
        self.announced = announced
        self.policies: dict[str, str | None] = {}

    async def __call__(self, event: RunEvent) -> None:
        h = self.handle
        if isinstance(event, TextDelta):
            h.emit("text", {"text": event.text})
        elif isinstance(event, ThinkingDelta):
            h.emit("thinking", {"text": event.text})
        elif isinstance(event, ActivityEvent):
            h.emit("activity", {"label": event.label})
        elif isinstance(event, ToolCallEvent):
            h.call_started(event.name, event.arguments, event.call_id)
            self.policies[event.call_id] = event.policy
            if event.call_id not in self.announced:
                h.emit("tool_call", {"call_id": event.call_id, "name": event.name, "arguments": event.arguments,
                                     "policy": event.policy})
        elif isinstance(event, ToolResultEvent):
            denied = self.policies.get(event.call_id) == "deny"
            h.call_finished(event.call_id, "denied" if denied else "error" if event.is_error else "ok",
                            event.content if event.is_error else None, event.content)
            h.emit("tool_result", {"call_id": event.call_id, "name": event.name, "content": event.content,
                                   "is_error": event.is_error})
        elif isinstance(event, UsageEvent):
            h.emit("usage", {"usage": usage_to_dict(event.usage), "run_usage": usage_to_dict(event.total_usage),
                             "run_cost_usd": None if event.total_cost is None else str(event.total_cost)})
        elif isinstance(event, PendingEvent):
            a = event.action
            h.call_finished(a.call_id, "held")
            h.emit("pending_action", {"call_id": a.call_id, "tool": a.tool, "arguments": a.arguments,
                                      "description": a.description})


_LIMIT_TEXT = {
    "max_steps": "the run reached its limit of model calls",
    "max_output_tokens": "the run reached its ceiling of output tokens",
    "max_input_tokens": "the next model call would pass the run's ceiling of input tokens",
    "max_cost": "the next model call could pass the run's cost ceiling",
    "max_tool_calls": "the run reached its ceiling of tool calls",
    "time_limit": "the run reached its wall-clock limit",
}


def _pipeline_stop(result: RunResult) -> tuple[RecipeStatus, str, str] | None:
    reason = result.stop_reason
    if reason == "cancelled":
        return "cancelled", "cancelled", "stopped by its owner"
    if reason == "error":
        err: ProviderError | None = result.error
        return "failed", err.code if err else "error", str(err) if err else "the model call failed"
    if reason in ("budget_exceeded", "max_steps"):
        limit = result.limit or "max_steps"
        return ("timeout" if limit == "time_limit" else "budget_exceeded", limit,
                result.refused or _LIMIT_TEXT.get(limit, f"the run reached its {limit}"))
    return None


def stop_run(engine: Engine, run_id: str) -> bool:
    """Ask a recipe run to stop, from any process: a running run sees its cancel flag (its
    engine's watcher re-reads it) and ends ``cancelled``; a parked run is cancelled at once.
    ``False`` when it had ended already."""
    why = "stopped while it waited for approval"
    with db.write_tx(engine) as c:
        rec = store.get_run(c, run_id)
        if rec is None:
            raise NotFound(f"no recipe run {run_id!r}; `noteloom recipes runs NAME` lists them")
        if rec.status == "awaiting_approval":
            run_store.settle(c, run_id, "cancelled", error_code="cancelled", error_message=why)
            store.set_run(c, run_id, status="cancelled", error_code="cancelled", error_message=why)
            return True
        if rec.ended:
            return False
        return run_store.request_cancel(c, run_id)


def _verdict_schema(job: PipelineJob, run: PipelineRun) -> Mapping[str, Any]:
    """What ``job`` takes as a verdict in ``run``: its ``verdict_schema_for(run)`` where it has
    one (a schema that depends on the run's person, read afresh: blocking), else its
    ``verdict_schema``."""
    per_run = getattr(job, "verdict_schema_for", None)
    return per_run(run) if callable(per_run) else job.verdict_schema


def _check_config(job: PipelineJob, config: dict[str, Any], context: ToolContext) -> None:
    """The recipe's job settings against the job's schema and rules (at save and at every run)."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(dict(job.config_schema)).iter_errors(config), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.path)
        raise InvalidInput(f"job_config{'.' + where if where else ''}: {e.message}",
                           field=f"job_config.{where}" if where else "job_config")
    job.validate_config(config, context)


def _skip_reason(host: Host, name: str) -> str:
    if name not in {t.name for t in host.registry.all()}:
        return "this app has no such tool"
    return f"it is not enabled in this workspace (`noteloom tools enable {name}`)"
