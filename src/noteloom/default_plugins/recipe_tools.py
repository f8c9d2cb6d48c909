"""``create_recipe`` and ``run_recipe``: the chat (or any MCP client) makes a recipe from
what the user asked, and starts one (an ``interactive`` recipe runs only this way).

"Every weekday at 7 make me a digest of yesterday's notes" becomes a recipe through the
user's sign-off: the tool writes, so it is off until the user enables it and each call
asks for confirmation by default, and its card shows the schedule in words, its next five
fire times and the budget. The model writes the cron expression and the time zone; the
cron library checks them (there is no natural-language schedule parser of ours), and a
wrong one comes back to the model as an error it can correct.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from anyio import to_thread

from noteloom import db
from noteloom.default_plugins.workspace_tools.schemas import output_schema_of
from noteloom.errors import InvalidInput, NotFound, Unavailable
from noteloom.hooks import hookimpl
from noteloom.recipes.model import RecipeBudgets
from noteloom.recipes.schedule import iso, parse_schedule
from noteloom.recipes.service import RecipeService
from noteloom.tools import NoteNamer, ToolContext, ToolDef, ToolError

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 100,
                 "description": "A short name for the recipe, e.g. 'Morning digest'."},
        "prompt": {"type": "string", "minLength": 1, "maxLength": 20000,
                   "description": "What the recipe does each run, written as instructions to an assistant that "
                                  "works alone with the tools listed and writes a report."},
        "schedule": {"type": "string", "maxLength": 200,
                     "description": "A five-field cron expression (minute hour day-of-month month day-of-week), "
                                    "e.g. '0 7 * * 1-5' for 07:00 on weekdays; or 'manual' to run only on demand."},
        "timezone": {"type": "string", "maxLength": 64,
                     "description": "The IANA time zone the schedule is read in, e.g. 'Europe/Paris'."},
        "tools": {"type": "array", "maxItems": 50, "items": {"type": "string", "maxLength": 200},
                  "description": "The tools the recipe may use, by name (e.g. search_notes, read_note)."},
        "model": {"type": "string", "maxLength": 200,
                  "description": "provider:model to run it with; leave out for the workspace's default."},
        "max_cost": {"type": "number", "minimum": 0, "description": "USD ceiling per run (optional)."},
        "max_output_tokens": {"type": "integer", "minimum": 1, "maximum": 10000000,
                              "description": "Output-token ceiling per run (optional)."},
    },
    "required": ["name", "prompt", "schedule", "timezone"],
    "additionalProperties": False,
}


_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_CREATE_OUT = output_schema_of(
    {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "schedule": {"type": "string"},
        "timezone": {"type": "string"},
        "explain": {"type": "string", "description": "The schedule in words."},
        "next": {**_STRINGS, "description": "The next fire times."},
        "tools": _STRINGS,
        "warnings": _STRINGS,
        "message": {"type": "string"},
    },
    ["id", "name", "schedule", "timezone", "explain", "next", "tools", "warnings", "message"],
)
_RUN_OUT = output_schema_of(
    {
        "run_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "status": {"type": "string"},
        "error": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "message": {"type": "string"},
    },
    ["run_id", "status", "error", "message"],
)


def _spec(args: Mapping[str, Any]) -> dict[str, Any]:
    budgets: dict[str, Any] = {}
    for key in ("max_cost", "max_output_tokens"):
        if args.get(key) is not None:
            budgets[key] = args[key]
    spec: dict[str, Any] = {
        "name": args["name"], "mode": "agent", "prompt": args["prompt"], "schedule": args["schedule"],
        "timezone": args["timezone"], "tools": list(args.get("tools", [])),
    }
    if args.get("model"):
        spec["model"] = args["model"]
    if budgets:
        spec["budgets"] = budgets
    return spec


def _describe(args: Mapping[str, Any], name_note: NoteNamer) -> str:
    """The card: the recipe, its schedule in words and next five fire times, its budget."""
    name = str(args.get("name", ""))
    try:
        schedule = parse_schedule(str(args.get("schedule", "")), str(args.get("timezone", "UTC")))
    except InvalidInput as exc:
        return f"Create recipe {name!r} — but its schedule is not valid: {exc}"
    when = schedule.explain()
    upcoming = schedule.upcoming(db.now_ms(), 5)
    nxt = ", ".join(iso(ms, schedule.timezone) for ms in upcoming) or "never"
    b = RecipeBudgets()
    cost = args.get("max_cost")
    budget = (f"at most {args.get('max_output_tokens') or b.max_output_tokens} output tokens, "
              f"{b.max_tool_calls} tool calls and {b.time_limit:g} s per run"
              + (f", ${cost} per run" if cost is not None else ""))
    tools = ", ".join(args.get("tools", [])) or "none"
    return (f"Create recipe {name!r}: {when}. Next runs: {nxt}. Budget: {budget}. Tools: {tools}. "
            f"It does: {str(args.get('prompt', ''))[:300]}")


async def _create(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    service = ctx.services.get("recipes")
    if not isinstance(service, RecipeService):
        raise ToolError("recipes are not available in this app")
    if ctx.user is None:
        raise ToolError("a recipe belongs to a user; this call has none (sign in, or use a token)")
    user = ctx.user
    try:
        view: dict[str, Any] = await to_thread.run_sync(service.add, user, _spec(args))
    except InvalidInput as exc:
        raise ToolError(f"the recipe was not saved: {exc}") from None
    return {
        "id": view["id"], "name": view["name"], "schedule": view["schedule"], "timezone": view["timezone"],
        "explain": view["explain"], "next": view.get("upcoming", []), "tools": view["tools"],
        "warnings": view.get("warnings", []),
        "message": "Saved. The user can see, edit, run or pause it on the recipes page or with `noteloom recipes`.",
    }


CREATE_RECIPE = ToolDef(
    name="create_recipe",
    title="Create a recipe",
    description=(
        "Save a recipe: work an assistant does on a schedule (or on demand) with the tools you list, "
        "writing a report each run. Use it when the user asks for something to happen regularly "
        "('every weekday at 7, summarise yesterday's notes'). Write the schedule as a cron expression "
        "and give the user's time zone. The user confirms before it is saved."
    ),
    input_schema=_SCHEMA,
    output_schema=_CREATE_OUT,
    handler=_create,
    effect="write",
    requires=("recipes",),
    describe=_describe,
)


async def _run(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    service = ctx.services.get("recipes")
    if not isinstance(service, RecipeService):
        raise ToolError("recipes are not available in this app")
    if ctx.user is None:
        raise ToolError("a recipe belongs to a user; this call has none (sign in, or use a token)")
    try:
        view = await service.start(ctx.user, args["name"], trigger="chat")
    except (InvalidInput, NotFound) as exc:
        raise ToolError(str(exc)) from None
    except Unavailable:
        raise ToolError("recipes run in `noteloom serve`; this process runs none") from None
    return {
        "run_id": view["run_id"], "status": view["status"], "error": view["error"],
        "message": "Started: its report appears on the recipes page when it ends." if view["status"] == "running"
        else "Not started.",
    }


RUN_RECIPE = ToolDef(
    name="run_recipe",
    title="Run a recipe",
    description=(
        "Start one of the user's saved recipes now, by name (it runs in the background with its own tools "
        "and budget and writes a report). Use it when the user asks to run a recipe, or for recipes whose "
        "schedule is 'interactive'."
    ),
    input_schema={"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100}},
                  "required": ["name"], "additionalProperties": False},
    output_schema=_RUN_OUT,
    handler=_run,
    # A recipe's run may write with its own tools: the user signs each start off.
    effect="write",
    requires=("recipes",),
    describe=lambda args, name_note: f"Run the recipe {str(args.get('name', ''))!r} now",
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``create_recipe`` and ``run_recipe``."""
    register(CREATE_RECIPE)
    register(RUN_RECIPE)
