"""Recipes over JSON under ``/api/v1/recipes``: save, read, run, stop, approve, export and
import recipes, follow a run's events, and read spend and the workspace's monthly cap.

Every route acts for the user whose token came with the request and calls
:class:`noteloom.recipes.service.RecipeService`, which holds all recipe logic; another
user's recipe or run reads as missing (404). A recipe is addressed by its id or its name
(a name that is also a fixed path here, such as ``jobs``, or that holds ``/``, by its id).
Errors are ``{"error": code, "message": text}`` (``api_base.HTTP_ERRORS``): 404 missing,
409 a clash, 422 bad input naming the field, 503 when this server runs no recipes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Annotated, Any, Literal

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from noteloom.app import App
from noteloom.jsonvalues import dumps, encodable
from noteloom.recipes.model import BATCH_MAX, NAME_MAX, PROMPT_MAX, SOURCES_MAX, TOOLS_MAX
from noteloom.recipes.service import RecipeService
from noteloom.web.api_base import (
    ERRORS,
    MAX_COUNT,
    NO_NUL,
    ApiError,
    ApiJSONResponse,
    IdPath,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)

RefPath = Annotated[str, Path(min_length=1, max_length=200, pattern=NO_NUL,
                              description="A recipe's id, or its name.")]
#: Longest export file taken by ``POST /import`` (the server's body limit still applies first).
IMPORT_MAX_CHARS = 2_000_000

# -- request bodies -----------------------------------------------------------------------------

ToolName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^\S+$")]
SourceName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\s\x00-\x1f]+$")]


class ControlsIn(StrictModel):
    """The model's controls; a field left out keeps its value (``null``: the provider's default)."""

    temperature: float | None = Field(None, ge=0, le=2, allow_inf_nan=False)
    top_p: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    thinking_level: Literal["off", "low", "medium", "high"] | None = None
    max_tokens: int | None = Field(None, ge=1, le=1_000_000, description="Output tokens per model call.")


class BudgetsIn(StrictModel):
    """Ceilings per run; a field left out keeps its value, ``null`` takes the ceiling off."""

    max_input_tokens: int | None = Field(None, ge=1, le=100_000_000)
    max_output_tokens: int | None = Field(None, ge=1, le=10_000_000)
    max_cost: Decimal | None = Field(None, ge=0, le=1_000_000, max_digits=20, decimal_places=10, allow_inf_nan=False,
                                     description="USD per run (priced models only), a number or a decimal string.")
    max_tool_calls: int | None = Field(None, ge=1, le=10_000)
    time_limit: float | None = Field(None, ge=1, le=86_400, allow_inf_nan=False, description="Seconds per run.")


class NotifyIn(StrictModel):
    on_success: bool | None = Field(None, description="Tell the owner when a run succeeds.")
    on_flagged: bool | None = Field(None, description="Pipeline mode: tell the owner about flagged items.")


class RecipePatch(StrictModel):
    """A recipe's fields; in a PATCH only those sent change (``controls``, ``budgets`` and
    ``notify`` merge key by key)."""

    name: str | None = Field(None, min_length=1, max_length=NAME_MAX)
    mode: Literal["agent", "pipeline"] | None = None
    prompt: str | None = Field(None, max_length=PROMPT_MAX, description="What the recipe does each run.")
    tools: list[ToolName] | None = Field(None, max_length=TOOLS_MAX, description="Agent mode: the tools it may use.")
    model: str | None = Field(None, max_length=200, description="provider:model; null = the default model.")
    controls: ControlsIn | None = None
    schedule: str | None = Field(None, min_length=1, max_length=200,
                                 description="A cron expression (five fields), `manual` or `interactive`.")
    timezone: str | None = Field(None, min_length=1, max_length=64, description="IANA zone, e.g. Europe/Paris.")
    missed: Literal["skip", "run_once", "catch_up"] | None = None
    budgets: BudgetsIn | None = None
    job: str | None = Field(None, max_length=64, description="Pipeline mode: the job (GET /jobs).")
    job_config: dict[str, Any] | None = Field(None, description="Pipeline mode: the job's settings (its config_schema).")
    batch_size: int | None = Field(None, ge=1, le=BATCH_MAX)
    notify: NotifyIn | None = None
    signed_off: list[ToolName] | None = Field(
        None, max_length=TOOLS_MAX, description="Tools whose calls that need approval the recipe may make unattended.")
    data_sources: list[SourceName] | None = Field(
        None, max_length=SOURCES_MAX, description="The data sources describe_data/query_data may read: null = every "
        "source the workspace opted in, [] = none (GET /options lists the opted-in ones).")
    allow_tainted_writes: bool | None = Field(
        None, description="Acknowledge that text others wrote reaches a recipe that can write.")
    enabled: bool | None = Field(None, description="false pauses the recipe.")
    pause_after: int | None = Field(None, ge=1, le=1000, description="Failed runs in a row before it pauses itself.")

    def fields(self) -> dict[str, Any]:
        out = self.model_dump(exclude_unset=True)
        budgets = out.get("budgets")
        if isinstance(budgets, dict) and isinstance(budgets.get("max_cost"), Decimal):
            budgets["max_cost"] = str(budgets["max_cost"])
        for part in ("controls", "notify"):
            if isinstance(out.get(part), dict):
                out[part] = {k: v for k, v in out[part].items() if not (part == "notify" and v is None)}
        return out


class RecipeIn(RecipePatch):
    name: str = Field(min_length=1, max_length=NAME_MAX)


class RunIn(StrictModel):
    sample: int | None = Field(None, ge=1, le=1000, description="Dry run: judge this many items, record nothing.")


class DecisionIn(StrictModel):
    decision: Literal["approve", "decline"]


class NoteIn(StrictModel):
    body: str = Field(min_length=1, max_length=4000, description="What to tell the recipe; its next runs read it.")


class ForgetIn(StrictModel):
    keys: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, max_length=10_000, description="Items to judge again; omit (or null) for every item.")


class CapIn(StrictModel):
    """A field left out keeps its value; ``null`` takes that ceiling off."""

    tokens: int | None = Field(None, ge=1, le=MAX_COUNT)
    cost: Decimal | None = Field(None, ge=0, le=1_000_000_000, max_digits=22, decimal_places=10, allow_inf_nan=False)
    timezone: str | None = Field(None, min_length=1, max_length=64)


# -- answers ------------------------------------------------------------------------------------


class ControlsOut(BaseModel):
    temperature: float | None
    top_p: float | None
    thinking_level: str | None
    max_tokens: int | None


class BudgetsOut(BaseModel):
    max_input_tokens: int | None
    max_output_tokens: int | None
    max_cost: str | None = Field(description="USD, exact.")
    max_tool_calls: int | None
    time_limit: float | None


class NotifyOut(BaseModel):
    on_success: bool
    on_flagged: bool


class LastRunOut(BaseModel):
    run_id: str
    status: str
    created_time: int


class SpendOut(BaseModel):
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: str | None = None
    unpriced_runs: int = 0


class NoteOut(BaseModel):
    id: str
    author: str
    body: str
    run_id: str | None
    created_time: int


class RecipeOut(BaseModel):
    id: str
    name: str
    mode: Literal["agent", "pipeline"]
    prompt: str
    tools: list[str]
    model: str | None
    controls: ControlsOut
    schedule: str
    timezone: str
    missed: str
    budgets: BudgetsOut
    job: str | None
    job_config: dict[str, Any]
    batch_size: int
    notify: NotifyOut
    signed_off: list[str]
    data_sources: list[str] | None = Field(description="null = every source the workspace opted in.")
    allow_tainted_writes: bool
    enabled: bool
    pause_after: int
    paused_reason: str | None
    failures: int
    next_fire_time: int | None = Field(description="UTC milliseconds; null when it does not fire on its own.")
    next_fire: str | None = Field(description="The next fire time, ISO 8601 in the recipe's zone.")
    explain: str = Field(description="The schedule in words.")
    tainted_ack: dict[str, Any] | None
    created_time: int
    updated_time: int
    upcoming: list[str] | None = Field(None, description="The next five fire times (one recipe's view).")
    scratch: str | None = Field(None, description="What the recipe keeps for its next runs.")
    notes: list[NoteOut] | None = None
    warnings: list[str] | None = Field(None, description="What saving it left for a person to read.")
    last_run: LastRunOut | None = None
    spend_this_month: SpendOut | None = None


class RecipeRef(BaseModel):
    id: str
    name: str | None


class UsageOut(BaseModel):
    input_tokens: int
    output_tokens: int


class HeldOut(BaseModel):
    call_id: str
    tool: str
    arguments: Any = None
    description: str | None = None
    effect: str | None = None


class RunOut(BaseModel):
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
    error: str | None = Field(description="`[code] message`.")
    error_code: str | None
    error_message: str | None
    items_done: int
    items_failed: int
    tool_calls: int
    dry_run: bool
    created_time: int
    finished_time: int | None
    usage: UsageOut
    cost_usd: str | None
    recipe: RecipeRef | None = None
    held: HeldOut | None = Field(None, description="The call a run waiting for approval holds.")
    stop_requested: bool | None = None


class TraceCallOut(BaseModel):
    seq: int
    call_id: str
    tool: str
    input: Any
    output: str | None
    started_time: int | None
    finished_time: int | None
    outcome: str | None
    is_error: bool
    error: str | None


class ItemVerdictOut(BaseModel):
    key: str | None
    label: str | None
    status: str
    verdict: Any = None
    error: str | None


class EventOut(BaseModel):
    seq: int
    kind: str
    data: dict[str, Any]
    time: int


class RunDetail(RunOut):
    trace: list[TraceCallOut] | None = Field(None, description="Agent mode: each tool call.")
    items: list[ItemVerdictOut] | None = Field(None, description="Pipeline mode: each item and its verdict.")
    notes: list[str | None] | None = None
    events: list[EventOut]


class ToolOut(BaseModel):
    name: str
    title: str | None
    description: str
    effect: Literal["read", "write", "destructive"]
    enabled: bool
    untrusted_output: bool


class DataSourceOut(BaseModel):
    name: str
    description: str


class OptionsOut(BaseModel):
    tools: list[ToolOut]
    recipe_tools: list[str]
    data_sources: list[DataSourceOut] = Field(description="The data sources the workspace opted in.")
    defaults: dict[str, Any]


class JobOut(BaseModel):
    name: str
    label: str
    untrusted_digest: bool
    config_schema: dict[str, Any]
    verdict_schema: dict[str, Any]
    default_prompt: str


class ScheduleOut(BaseModel):
    schedule: str
    timezone: str
    explain: str
    next: list[str] = Field(description="The next five fire times, ISO 8601 in the zone.")


class ProcessedItemOut(BaseModel):
    key: str
    label: str
    status: str
    run_id: str | None
    verdict: Any = None
    error: str | None
    time: int


class ForgotOut(BaseModel):
    forgotten: int


class NotesOut(BaseModel):
    id: str
    notes: list[NoteOut]


class CapOut(BaseModel):
    month: str
    tokens: int
    cost_usd: str
    cap_tokens: int | None
    cap_cost_usd: str | None
    timezone: str
    fraction: float
    reached: str | None


YAML = {"application/yaml": {"schema": {"type": "string"}}}


# -- routes ---------------------------------------------------------------------------------------


def service_of(app: App) -> RecipeService:
    service = app.services.recipes
    assert service is not None  # the composition root always builds it
    return service


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/recipes/...`` to the web app."""
    install_error_handlers(api)
    r = APIRouter(prefix="/api/v1/recipes", tags=["recipes"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)
    recipes = service_of(app)

    async def call(fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await to_thread.run_sync(lambda: fn(*args, **kwargs))

    # Fixed paths first: /{ref} would take them otherwise.

    @r.get("", response_model=list[RecipeOut])
    async def listing(request: Request) -> list[dict[str, Any]]:
        """Your recipes, by name: each with its last run and this month's spend."""
        rows: list[dict[str, Any]] = await call(recipes.listing, user_of(request))
        return rows

    @r.post("", response_model=RecipeOut, status_code=201)
    async def add(request: Request, body: RecipeIn) -> dict[str, Any]:
        """Save a new recipe (422 naming the field that is wrong; a bad schedule's message shows a
        valid one with its next five fire times). ``warnings`` says what to read still."""
        view: dict[str, Any] = await call(recipes.add, user_of(request), body.fields())
        return view

    @r.get("/options", response_model=OptionsOut)
    async def options() -> dict[str, Any]:
        """What a recipe form offers: every tool (whether it writes, is enabled in the workspace,
        reads text others wrote), the tools every agent recipe has, the data sources the workspace
        opted in (a recipe's data_sources picks among them), and a new recipe's defaults."""
        out: dict[str, Any] = await call(recipes.options)
        return out

    @r.get("/jobs", response_model=list[JobOut])
    async def jobs() -> list[dict[str, Any]]:
        """The pipeline jobs this app has, each with the schema of its settings and verdicts."""
        return recipes.jobs()

    @r.get("/schedule", response_model=ScheduleOut)
    async def schedule(
        schedule: Annotated[str, Query(min_length=1, max_length=200, pattern=NO_NUL,
                                       description="A cron expression, `manual` or `interactive`.")],
        timezone: Annotated[str, Query(min_length=1, max_length=64, pattern=NO_NUL)] = "UTC",
    ) -> dict[str, Any]:
        """A schedule in words with its next five fire times; 422 with the reason (and a valid
        example) when it is wrong."""
        out: dict[str, Any] = await call(recipes.preview_schedule, schedule, timezone)
        return out

    @r.get("/pending", response_model=list[RunOut])
    async def pending(request: Request) -> list[dict[str, Any]]:
        """Runs waiting for your approval, oldest first, each with the call it holds."""
        rows: list[dict[str, Any]] = await call(recipes.pending, user_of(request))
        return rows

    @r.get("/spend")
    async def spend(request: Request,
                    days: Annotated[int, Query(ge=1, le=366, description="Days up to today.")] = 14) -> dict[str, Any]:
        """The workspace's tokens and cost per day and this month (chats and recipes), against its cap."""
        out: dict[str, Any] = await call(recipes.spend, user_of(request), None, days=days)
        return out

    @r.get("/cap", response_model=CapOut)
    async def get_cap() -> dict[str, Any]:
        """The workspace's monthly cap on chats and recipes together, and what this month spent."""
        out: dict[str, Any] = await call(recipes.cap)
        return out

    @r.put("/cap", response_model=CapOut)
    async def put_cap(request: Request, body: CapIn) -> dict[str, Any]:
        """Set the monthly cap (the workspace's owner or an admin): a field left out keeps its
        value, ``null`` takes that ceiling off. Once reached, runs and turns are refused until the month ends."""
        if not user_of(request).is_admin:
            raise ApiError(403, "forbidden", "only the workspace's owner or an admin sets its monthly cap")
        sent = body.model_fields_set
        out: dict[str, Any] = await call(
            recipes.set_cap,
            tokens=body.tokens if "tokens" in sent else "keep",
            cost=(None if body.cost is None else str(body.cost)) if "cost" in sent else "keep",
            timezone=body.timezone if "timezone" in sent else "keep",
        )
        return out

    @r.get("/export", response_class=Response, responses={200: {"content": YAML, "description": "The YAML file."}})
    async def export(
        request: Request,
        name: Annotated[list[str] | None, Query(max_length=1000, description="Recipes to export (repeat); all if none.")
                        ] = None,
    ) -> Response:
        """Your recipes as YAML, as `noteloom recipes import` and `POST /import` read it."""
        for n in name or ():
            if not n or len(n) > 200 or "\x00" in n:
                raise ApiError(422, "invalid_input", "name: a recipe's name or id, 1 to 200 characters", "name")
        text: str = await call(recipes.export, user_of(request), list(name or ()))
        return Response(text, media_type="application/yaml; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="recipes.yaml"'})

    @r.post("/import", response_model=list[RecipeOut], status_code=201,
            openapi_extra={"requestBody": {"required": True, "content": YAML}})
    async def import_(request: Request) -> list[dict[str, Any]]:
        """Save the recipes of an export file (YAML, or JSON); each starts paused. All or
        nothing: one bad recipe is named (``recipes[i].field``) and none is saved."""
        raw = await request.body()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(422, "invalid_input", "body: the file is not UTF-8 text", "body") from None
        if not text.strip():
            raise ApiError(422, "invalid_input", "body: send the YAML file `GET /export` writes", "body")
        if len(text) > IMPORT_MAX_CHARS or "\x00" in text:
            raise ApiError(422, "invalid_input", f"body: an export file is text of at most {IMPORT_MAX_CHARS} "
                                                 "characters, without NUL", "body")
        rows: list[dict[str, Any]] = await call(recipes.import_, user_of(request), text)
        return rows

    @r.get("/runs/{run_id}", response_model=RunDetail)
    async def run_detail(request: Request, run_id: IdPath) -> dict[str, Any]:
        """One run: status, timings, model, tokens, cost, output, and its trace (each tool call
        with input, output, start, end and whether it failed; in pipeline mode each item and its verdict)."""
        out: dict[str, Any] = await call(recipes.run, user_of(request), run_id)
        return out

    @r.post("/runs/{run_id}/stop", response_model=RunOut)
    async def stop(request: Request, run_id: IdPath) -> dict[str, Any]:
        """Ask a run to stop, wherever it runs (a run waiting for approval is cancelled at once).
        ``stop_requested`` is false when it had ended already."""
        out: dict[str, Any] = await recipes.stop(user_of(request), run_id)
        return out

    @r.post("/runs/{run_id}/decision", response_model=RunOut, status_code=202)
    async def decision(request: Request, run_id: IdPath, body: DecisionIn) -> dict[str, Any]:
        """Approve or decline the call a parked run holds; the run goes on in this server
        (follow it with `GET /runs/{run_id}/events`). 422 when it is not waiting."""
        out: dict[str, Any] = await recipes.decide(user_of(request), run_id, body.decision)
        return out

    @r.get(
        "/runs/{run_id}/events",
        response_model=list[EventOut],
        responses={200: {"content": {"text/event-stream": {}},
                         "description": "JSON: the stored events after `after_seq`. With `Accept: "
                                        "text/event-stream`: server-sent events until the run stops running."}},
    )
    async def events(
        request: Request,
        run_id: IdPath,
        after_seq: Annotated[int | None, Query(ge=0, le=MAX_COUNT, description="Events after this number.")] = None,
        limit: Annotated[int, Query(ge=1, le=5000, description="JSON: at most this many.")] = 1000,
        accept: Annotated[str | None, Header(max_length=1000)] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> Any:
        """The run's events (`seq`, `kind`, `data`, `time`) after `after_seq`. Ask for
        `text/event-stream` to follow a running run as server-sent events (`id` = seq,
        `event` = kind, `data` = JSON); reconnect with `after_seq` or `Last-Event-ID`. The
        stream ends once the run settles or parks for approval."""
        user = user_of(request)
        start = after_seq
        if start is None and last_event_id:
            text = last_event_id.strip()
            if not (text.isascii() and text.isdigit() and len(text) <= 16 and int(text) <= MAX_COUNT):
                raise ApiError(422, "invalid_input", "Last-Event-ID: must be an event number", "Last-Event-ID")
            start = int(text)
        if "text/event-stream" not in (accept or ""):
            return await call(recipes.events, user, run_id, start or 0, limit=limit)
        await call(recipes.events, user, run_id, 0, limit=1)  # a missing run is a 404, not an empty stream

        async def stream() -> AsyncIterator[ServerSentEvent]:
            async for event in recipes.follow(user, run_id, start or 0):
                yield ServerSentEvent(data=encodable(dumps(event["data"])), event=event["kind"], id=str(event["seq"]))

        return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    # One recipe.

    @r.get("/{ref}", response_model=RecipeOut)
    async def get(request: Request, ref: RefPath) -> dict[str, Any]:
        """One recipe with its next five fire times and its notes."""
        out: dict[str, Any] = await call(recipes.get, user_of(request), ref)
        return out

    @r.patch("/{ref}", response_model=RecipeOut)
    async def patch(request: Request, ref: RefPath, body: RecipePatch) -> dict[str, Any]:
        """Change the fields sent; ``controls``, ``budgets`` and ``notify`` merge key by key."""
        out: dict[str, Any] = await call(recipes.patch, user_of(request), ref, body.fields())
        return out

    @r.delete("/{ref}", status_code=204, response_class=Response)
    async def delete(request: Request, ref: RefPath) -> Response:
        """Delete a recipe with its runs, notes and processing log."""
        await call(recipes.remove, user_of(request), ref)
        return Response(status_code=204)

    @r.post("/{ref}/pause", response_model=RecipeOut)
    async def pause(request: Request, ref: RefPath) -> dict[str, Any]:
        """Stop it firing on its schedule (it can still be run by hand)."""
        out: dict[str, Any] = await call(recipes.pause, user_of(request), ref)
        return out

    @r.post("/{ref}/resume", response_model=RecipeOut)
    async def resume(request: Request, ref: RefPath) -> dict[str, Any]:
        """Let it fire again; its failure count starts over and missed fires are not made up."""
        out: dict[str, Any] = await call(recipes.resume, user_of(request), ref)
        return out

    @r.post("/{ref}/runs", response_model=RunOut, status_code=202)
    async def start(request: Request, ref: RefPath, body: RunIn | None = None) -> dict[str, Any]:
        """Run it now in this server; poll `GET /runs/{run_id}` or follow its events. The status
        is `skipped_overlap` when a run of it is still in progress. 503 when this server runs no recipes."""
        sample = body.sample if body is not None else None
        # On the loop, not in a worker thread: starting spawns the run in the engine's task group.
        out: dict[str, Any] = await recipes.start(user_of(request), ref, sample=sample)
        return out

    @r.get("/{ref}/runs", response_model=list[RunOut])
    async def runs(request: Request, ref: RefPath,
                   limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[dict[str, Any]]:
        """Its runs, newest first."""
        rows: list[dict[str, Any]] = await call(recipes.runs, user_of(request), ref, limit=limit)
        return rows

    @r.post("/{ref}/notes", response_model=NotesOut, status_code=201)
    async def add_note(request: Request, ref: RefPath, body: NoteIn) -> dict[str, Any]:
        """Leave it a note: its next runs read it (and may answer in their report)."""
        out: dict[str, Any] = await call(recipes.add_note, user_of(request), ref, body.body)
        return out

    @r.get("/{ref}/items", response_model=list[ProcessedItemOut])
    async def items(request: Request, ref: RefPath,
                    limit: Annotated[int, Query(ge=1, le=10_000)] = 200) -> list[dict[str, Any]]:
        """A pipeline recipe's processing log, newest first: each item handled, its verdict or error."""
        rows: list[dict[str, Any]] = await call(recipes.items, user_of(request), ref, limit=limit)
        return rows

    @r.delete("/{ref}/items", response_model=ForgotOut)
    async def forget(request: Request, ref: RefPath, body: ForgetIn | None = None) -> dict[str, Any]:
        """Take items out of the processing log (``keys``, or all of them) so they are judged again."""
        keys = body.keys if body is not None else None
        return {"forgotten": await call(recipes.forget_items, user_of(request), ref, keys)}

    @r.get("/{ref}/spend")
    async def recipe_spend(request: Request, ref: RefPath,
                           days: Annotated[int, Query(ge=1, le=366)] = 14) -> dict[str, Any]:
        """This recipe's tokens and cost per day and this month."""
        out: dict[str, Any] = await call(recipes.spend, user_of(request), ref, days=days)
        return out

    api.include_router(r)
