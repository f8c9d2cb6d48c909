"""``noteloom recipes …``: scheduled and on-demand LLM jobs from the terminal.

Every command calls :class:`noteloom.recipes.service.RecipeService` as the workspace's
owner; none holds recipe logic. ``run``, ``approve`` and ``decline`` run the recipe in
this process (the recipes' run engine starts for the command); ``stop`` works from any
process, including while ``noteloom serve`` runs the run. With ``--json`` each command
prints what the service returned.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, NoReturn

import anyio
import typer

from noteloom.app import RECIPES, App
from noteloom.cli.common import (
    FAILED,
    HOME_OPTION,
    JSON_OPTION,
    TRY_AGAIN,
    USAGE,
    fail,
    fail_with,
    opened,
    print_json,
)
from noteloom.cli.dates import show_date
from noteloom.errors import InvalidInput, NoteloomError, NotFound
from noteloom.recipes.service import RecipeService
from noteloom.workspace import User

recipes_app = typer.Typer(
    help="Recipes: scheduled and on-demand LLM jobs (agent or pipeline mode), their runs, approvals and spend.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(recipes_app, name="recipes")


#: How the command line spells each field of a recipe (an error naming the field names the option).
OPTIONS: dict[str, str] = {
    "name": "NAME", "mode": "--mode", "prompt": "--prompt", "tools": "--tool", "model": "--model",
    "schedule": "--schedule", "timezone": "--timezone", "missed": "--missed", "job": "--job",
    "job_config": "--config", "batch_size": "--batch", "signed_off": "--sign-off", "data_sources": "--data-source",
    "allow_tainted_writes": "--allow-tainted-writes", "enabled": "--paused",
    "controls.temperature": "--temperature", "controls.top_p": "--top-p", "controls.thinking_level": "--thinking",
    "controls.max_tokens": "--max-tokens", "budgets.max_input_tokens": "--max-input-tokens",
    "budgets.max_output_tokens": "--max-output-tokens", "budgets.max_cost": "--max-cost",
    "budgets.max_tool_calls": "--max-tool-calls", "budgets.time_limit": "--time-limit",
    "notify.on_success": "--notify-success",
}
#: Run statuses a script should treat as a failed command.
FAILED_STATUSES = frozenset({"failed", "budget_exceeded", "timeout"})


# -- shared plumbing ------------------------------------------------------------------------


@contextmanager
def _service(home: Path | None) -> Iterator[tuple[App, RecipeService, User]]:
    with opened(home) as app:
        service = app.services.recipes
        assert service is not None  # the composition root always builds it
        yield app, service, app.workspace.ensure_owner()


def _fail_input(exc: InvalidInput, where: str | None, given: set[str]) -> NoReturn:
    """Bad input: named as the option the user typed (exit 2), or as the field of the file it
    came from (exit 1, as a value read from a file is everywhere in the command line)."""
    field = exc.field or ""
    if where is not None and field not in given and field.split(".")[0] not in given:
        fail(f"{where}: {exc.led_by_field()}")
    option = OPTIONS.get(field) or ("--config" if field.startswith("job_config.") else None)
    if option is None:
        fail(exc.led_by_field(), USAGE if field else FAILED)
    fail_with(exc, {field: option})


def _none_or(text: str | None, field: str, kind: Callable[[str], Any]) -> Any:
    """A ceiling typed on the command line: ``none`` takes it off; ``"keep"`` when not given."""
    if text is None:
        return "keep"
    if text.strip().lower() == "none":
        return None
    try:
        return kind(text.strip())
    except ValueError:
        raise InvalidInput(f"{field} {text!r} is not a number (or none, to take the ceiling off)",
                           field=field) from None


def _read_file(path: Path) -> Any:
    """The fields of a recipe from a YAML or JSON file (``-`` reads stdin)."""
    import yaml

    text = sys.stdin.read() if str(path) == "-" else _text_of(path)
    try:
        data = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        fail(f"{path}: not YAML or JSON: {exc}")
    if not isinstance(data, dict):
        fail(f"{path}: a recipe file holds one object of fields (name, mode, prompt, schedule …)")
    return data


def _text_of(path: Path) -> str:
    if not path.is_file():
        fail(f"no file {str(path)!r} to read")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {str(path)!r}: {exc}")


def _fields(
    *, name: str | None, mode: str | None, prompt: str | None, prompt_file: Path | None, tool: list[str] | None,
    model: str | None, schedule: str | None, timezone: str | None, missed: str | None, job: str | None,
    config: str | None, batch: int | None, max_input_tokens: str | None, max_output_tokens: str | None,
    max_cost: str | None, max_tool_calls: str | None, time_limit: str | None, temperature: float | None,
    top_p: float | None, thinking: str | None, max_tokens: int | None, sign_off: list[str] | None,
    allow_tainted_writes: bool | None, notify_success: bool | None, paused: bool | None,
    data_source: list[str] | None = None, no_data_sources: bool = False, all_data_sources: bool = False,
) -> tuple[dict[str, Any], set[str]]:
    """The recipe fields the options give, and the names of those fields (``budgets.max_cost`` …)."""
    out: dict[str, Any] = {}
    if prompt is not None and prompt_file is not None:
        fail("give the prompt either with --prompt or with --prompt-file, not both", USAGE)
    if prompt_file is not None:
        prompt = sys.stdin.read() if str(prompt_file) == "-" else _text_of(prompt_file)
    for key, value in (("name", name), ("mode", mode), ("prompt", prompt), ("model", model),
                       ("schedule", schedule), ("timezone", timezone), ("missed", missed), ("job", job),
                       ("batch_size", batch), ("allow_tainted_writes", allow_tainted_writes)):
        if value is not None:
            out[key] = value
    if tool:
        out["tools"] = list(tool)
    if sign_off:
        out["signed_off"] = list(sign_off)
    if sum((bool(data_source), no_data_sources, all_data_sources)) > 1:
        fail("give --data-source, --no-data-sources or --all-data-sources, not more than one of them", USAGE)
    if data_source:
        out["data_sources"] = list(data_source)
    elif no_data_sources or all_data_sources:
        out["data_sources"] = [] if no_data_sources else None
    if paused is not None:
        out["enabled"] = not paused
    if config is not None:
        try:
            out["job_config"] = json.loads(config)
        except ValueError as exc:
            raise InvalidInput(f"job_config is not JSON: {exc}", field="job_config") from None
    controls = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("thinking_level", thinking),
                                  ("max_tokens", max_tokens)) if v is not None}
    if controls:
        out["controls"] = controls
    budgets = {k: v for k, v in (
        ("max_input_tokens", _none_or(max_input_tokens, "budgets.max_input_tokens", int)),
        ("max_output_tokens", _none_or(max_output_tokens, "budgets.max_output_tokens", int)),
        ("max_cost", _none_or(max_cost, "budgets.max_cost", str)),
        ("max_tool_calls", _none_or(max_tool_calls, "budgets.max_tool_calls", int)),
        ("time_limit", _none_or(time_limit, "budgets.time_limit", float)),
    ) if v != "keep"}
    if budgets:
        out["budgets"] = budgets
    if notify_success is not None:
        out["notify"] = {"on_success": notify_success}
    given = {k for k in out if k not in ("controls", "budgets", "notify")}
    given |= {f"controls.{k}" for k in controls} | {f"budgets.{k}" for k in budgets}
    given |= {"notify.on_success"} if notify_success is not None else set()
    return out, given


def _warn(view: Mapping[str, Any]) -> None:
    for w in view.get("warnings") or ():
        typer.echo(f"warning: {w}", err=True)


def _money(cost: Any) -> str:
    return "unknown" if cost is None else f"${cost}"


def _spend_text(spend: Mapping[str, Any] | None) -> str:
    if not spend:
        return ""
    tokens = int(spend["tokens"]) if "tokens" in spend else \
        int(spend.get("input_tokens", 0) or 0) + int(spend.get("output_tokens", 0) or 0)
    cost = spend.get("cost_usd", spend.get("cost"))
    return f"{tokens} tok, {_money(cost)}"


def _print_recipe(view: Mapping[str, Any]) -> None:
    typer.echo(f"{view['name']}  ({view['mode']}, id {view['id']})")
    typer.echo(f"  schedule: {view['schedule']} — {view['explain']}")
    if view.get("upcoming"):
        typer.echo(f"  next:     {', '.join(view['upcoming'])}")
    state = "paused" + (f": {view['paused_reason']}" if view.get("paused_reason") else "") \
        if not view["enabled"] else "enabled"
    typer.echo(f"  state:    {state}" + (f" ({view['failures']} failed in a row)" if view.get("failures") else ""))
    typer.echo(f"  model:    {view.get('model') or '(the default model)'}")
    if view["mode"] == "agent":
        typer.echo(f"  tools:    {', '.join(view['tools']) or '(none)'}")
        if view.get("signed_off"):
            typer.echo(f"  signed off: {', '.join(view['signed_off'])}")
        if view.get("data_sources") is not None:
            typer.echo(f"  data sources: {', '.join(view['data_sources']) or '(none)'}")
    else:
        typer.echo(f"  job:      {view.get('job')} {json.dumps(view.get('job_config') or {})}, "
                   f"batch {view['batch_size']}")
    b = view["budgets"]
    typer.echo("  budgets:  " + ", ".join(f"{k}={'none' if v is None else v}" for k, v in b.items()))
    if view.get("prompt"):
        typer.echo("  prompt:")
        for line in str(view["prompt"]).splitlines():
            typer.echo(f"    {line}")
    for note in view.get("notes") or ():
        typer.echo(f"  note ({note.get('author')}, {show_date(note.get('created_time'))}): {note.get('body')}")


def _print_run(view: Mapping[str, Any]) -> None:
    recipe = view.get("recipe") or {}
    usage = view.get("usage") or {}
    typer.echo(f"run {view['run_id']}  recipe {recipe.get('name') or view.get('recipe_id')}  "
               f"[{view['trigger']}{', dry run' if view.get('dry_run') else ''}]")
    typer.echo(f"  status:  {view['status']}" + (f" — {view['error']}" if view.get("error") else ""))
    typer.echo(f"  started: {show_date(view.get('created_time'))}  ended: {show_date(view.get('finished_time'))}")
    typer.echo(f"  model:   {view.get('model') or '?'} · tokens: {usage.get('input_tokens', 0)} in, "
               f"{usage.get('output_tokens', 0)} out · cost: {_money(view.get('cost_usd'))}")
    for call in view.get("trace") or ():
        mark = "✗" if call["is_error"] else "…" if call["finished_time"] is None else "✓"
        typer.echo(f"  {mark} {call['tool']} {json.dumps(call['input'], ensure_ascii=False)}  "
                   f"[{call.get('outcome') or 'running'}, {show_date(call['started_time'])}"
                   f" → {show_date(call['finished_time'])}]")
        if call.get("output") is not None:
            typer.echo(f"      {str(call['output'])[:300]}")
    for item in view.get("items") or ():
        typer.echo(f"  [{item['status']}] {item.get('label') or item.get('key')}: "
                   f"{json.dumps(item.get('verdict'), ensure_ascii=False) if item.get('verdict') is not None else item.get('error') or ''}")
    for note in view.get("notes") or ():
        typer.echo(f"  note: {note}")
    held = view.get("held")
    if held:
        typer.echo(f"  waiting for approval: {held.get('description') or held.get('tool')}")
        typer.echo(f"  `noteloom recipes approve {view['run_id']}` (or decline)")
    if view.get("output"):
        typer.echo("")
        typer.echo(str(view["output"]))


def _run_exit(view: Mapping[str, Any]) -> None:
    status = view["status"]
    if status in FAILED_STATUSES:
        raise SystemExit(FAILED)
    if status == "skipped_overlap":
        raise SystemExit(TRY_AGAIN)
    if status == "cancelled":
        raise SystemExit(130)


def _is_id(text: str) -> bool:
    return len(text) == 32 and all(ch in "0123456789abcdef" for ch in text)


# -- saving ------------------------------------------------------------------------------------

NAME_ARG = typer.Argument(None, help="The recipe's name (unique among yours).", show_default=False)
MODE_OPT = typer.Option(None, "--mode", help="agent (the model drives tools and writes a report) or pipeline "
                                            "(a job feeds the model one item at a time).")
PROMPT_OPT = typer.Option(None, "--prompt", help="What the recipe should do each run.")
PROMPT_FILE_OPT = typer.Option(None, "--prompt-file", help="Read the prompt from a file (- for stdin).")
TOOL_OPT = typer.Option(None, "--tool", help="A tool the agent may use (repeat for more; `noteloom tools list`).")
MODEL_OPT = typer.Option(None, "--model", "-m", help="provider:model (default: the workspace's default model).")
SCHEDULE_OPT = typer.Option(None, "--schedule", help="A cron expression (\"0 7 * * 1-5\"), manual, or interactive.")
TZ_OPT = typer.Option(None, "--timezone", help="IANA time zone the schedule is read in (default UTC).")
MISSED_OPT = typer.Option(None, "--missed", help="Fire times missed while nothing ran: skip, run_once or catch_up.")
JOB_OPT = typer.Option(None, "--job", help="Pipeline mode: the job to run (`noteloom recipes jobs`).")
CONFIG_OPT = typer.Option(None, "--config", metavar="JSON", help="Pipeline mode: the job's settings as JSON.")
BATCH_OPT = typer.Option(None, "--batch", metavar="N", help="Pipeline mode: items judged per run (default 25).")
MAX_IN_OPT = typer.Option(None, "--max-input-tokens", metavar="N|none", help="Input tokens per run.")
MAX_OUT_OPT = typer.Option(None, "--max-output-tokens", metavar="N|none", help="Output tokens per run.")
MAX_COST_OPT = typer.Option(None, "--max-cost", metavar="USD|none", help="Cost per run (priced models only).")
MAX_CALLS_OPT = typer.Option(None, "--max-tool-calls", metavar="N|none", help="Tool calls per run.")
TIME_OPT = typer.Option(None, "--time-limit", metavar="SECONDS|none", help="Wall-clock time per run.")
TEMP_OPT = typer.Option(None, "--temperature", help="Sampling temperature, 0 to 2.")
TOP_P_OPT = typer.Option(None, "--top-p", help="Nucleus sampling, 0 to 1.")
THINKING_OPT = typer.Option(None, "--thinking", help="How hard the model thinks: off, low, medium or high.")
MAX_TOKENS_OPT = typer.Option(None, "--max-tokens", metavar="N", help="Output tokens per model call.")
SIGN_OFF_OPT = typer.Option(None, "--sign-off", metavar="TOOL",
                            help="Let the recipe make this tool's calls that need approval unattended (repeat).")
DATA_SOURCE_OPT = typer.Option(None, "--data-source", metavar="NAME",
                               help="A data source describe_data/query_data may read (repeat; a database's name "
                                    "covers its tables). Without any, every source the workspace opted in.")
NO_DATA_OPT = typer.Option(False, "--no-data-sources", help="Let the recipe read no data source.")
ALL_DATA_OPT = typer.Option(False, "--all-data-sources",
                            help="Let the recipe read every data source the workspace opted in (the default).")
TAINT_OPT = typer.Option(None, "--allow-tainted-writes/--no-allow-tainted-writes",
                         help="Acknowledge that text others wrote (web clips …) reaches a recipe that can write.",
                         show_default=False)
NOTIFY_OPT = typer.Option(None, "--notify-success/--no-notify-success",
                          help="Tell me when a run succeeds (failures and approvals are always told).",
                          show_default=False)
PAUSED_OPT = typer.Option(None, "--paused/--enabled", help="Save it paused (it fires only once resumed).",
                          show_default=False)
FILE_OPT = typer.Option(None, "--file", "-f", help="Read the recipe's fields from a YAML or JSON file "
                                                  "(- for stdin); options given as well win.")


@recipes_app.command("add")
def add(
    name: str | None = NAME_ARG, mode: str | None = MODE_OPT, prompt: str | None = PROMPT_OPT,
    prompt_file: Path | None = PROMPT_FILE_OPT, tool: list[str] | None = TOOL_OPT, model: str | None = MODEL_OPT,
    schedule: str | None = SCHEDULE_OPT, timezone: str | None = TZ_OPT, missed: str | None = MISSED_OPT,
    job: str | None = JOB_OPT, config: str | None = CONFIG_OPT, batch: int | None = BATCH_OPT,
    max_input_tokens: str | None = MAX_IN_OPT, max_output_tokens: str | None = MAX_OUT_OPT,
    max_cost: str | None = MAX_COST_OPT, max_tool_calls: str | None = MAX_CALLS_OPT,
    time_limit: str | None = TIME_OPT, temperature: float | None = TEMP_OPT, top_p: float | None = TOP_P_OPT,
    thinking: str | None = THINKING_OPT, max_tokens: int | None = MAX_TOKENS_OPT,
    sign_off: list[str] | None = SIGN_OFF_OPT, allow_tainted_writes: bool | None = TAINT_OPT,
    notify_success: bool | None = NOTIFY_OPT, paused: bool | None = PAUSED_OPT, file: Path | None = FILE_OPT,
    data_source: list[str] | None = DATA_SOURCE_OPT, no_data_sources: bool = NO_DATA_OPT,
    all_data_sources: bool = ALL_DATA_OPT,
    as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION,
) -> None:
    """Save a new recipe. A bad field is named with what to write instead (a bad cron
    expression shows a valid one and its next five fire times)."""
    base = _read_file(file) if file is not None else {}
    try:
        fields, given = _fields(
            name=name, mode=mode, prompt=prompt, prompt_file=prompt_file, tool=tool, model=model, schedule=schedule,
            timezone=timezone, missed=missed, job=job, config=config, batch=batch, max_input_tokens=max_input_tokens,
            max_output_tokens=max_output_tokens, max_cost=max_cost, max_tool_calls=max_tool_calls,
            time_limit=time_limit, temperature=temperature, top_p=top_p, thinking=thinking, max_tokens=max_tokens,
            sign_off=sign_off, allow_tainted_writes=allow_tainted_writes, notify_success=notify_success,
            paused=paused, data_source=data_source, no_data_sources=no_data_sources,
            all_data_sources=all_data_sources)
    except InvalidInput as exc:
        _fail_input(exc, None, set())
    raw = {**base, **fields}
    for part in ("controls", "budgets", "notify"):
        if isinstance(base.get(part), dict) and part in fields:
            raw[part] = {**base[part], **fields[part]}
    if "name" not in raw:
        fail("give the recipe a NAME (or name: in --file)", USAGE)
    with _service(home) as (_, service, owner):
        try:
            view = service.add(owner, raw)
        except InvalidInput as exc:
            _fail_input(exc, str(file) if file is not None else None, given)
        _warn(view)
        if as_json:
            print_json(view)
        else:
            typer.echo(f"saved {view['name']} ({view['id']}): {view['explain']}"
                       + (f"; next {view['next_fire']}" if view.get("next_fire") else ""))


@recipes_app.command("edit")
def edit(
    ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
    name: str | None = typer.Option(None, "--name", help="Rename the recipe."), mode: str | None = MODE_OPT,
    prompt: str | None = PROMPT_OPT, prompt_file: Path | None = PROMPT_FILE_OPT, tool: list[str] | None = TOOL_OPT,
    model: str | None = MODEL_OPT, schedule: str | None = SCHEDULE_OPT, timezone: str | None = TZ_OPT,
    missed: str | None = MISSED_OPT, job: str | None = JOB_OPT, config: str | None = CONFIG_OPT,
    batch: int | None = BATCH_OPT, max_input_tokens: str | None = MAX_IN_OPT,
    max_output_tokens: str | None = MAX_OUT_OPT, max_cost: str | None = MAX_COST_OPT,
    max_tool_calls: str | None = MAX_CALLS_OPT, time_limit: str | None = TIME_OPT,
    temperature: float | None = TEMP_OPT, top_p: float | None = TOP_P_OPT, thinking: str | None = THINKING_OPT,
    max_tokens: int | None = MAX_TOKENS_OPT, sign_off: list[str] | None = SIGN_OFF_OPT,
    allow_tainted_writes: bool | None = TAINT_OPT, notify_success: bool | None = NOTIFY_OPT,
    paused: bool | None = PAUSED_OPT, file: Path | None = FILE_OPT,
    data_source: list[str] | None = DATA_SOURCE_OPT, no_data_sources: bool = NO_DATA_OPT,
    all_data_sources: bool = ALL_DATA_OPT,
    as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION,
) -> None:
    """Change a recipe: only the fields given change (--tool, --sign-off and --data-source replace the lists)."""
    base = _read_file(file) if file is not None else {}
    try:
        fields, given = _fields(
            name=name, mode=mode, prompt=prompt, prompt_file=prompt_file, tool=tool, model=model, schedule=schedule,
            timezone=timezone, missed=missed, job=job, config=config, batch=batch, max_input_tokens=max_input_tokens,
            max_output_tokens=max_output_tokens, max_cost=max_cost, max_tool_calls=max_tool_calls,
            time_limit=time_limit, temperature=temperature, top_p=top_p, thinking=thinking, max_tokens=max_tokens,
            sign_off=sign_off, allow_tainted_writes=allow_tainted_writes, notify_success=notify_success,
            paused=paused, data_source=data_source, no_data_sources=no_data_sources,
            all_data_sources=all_data_sources)
    except InvalidInput as exc:
        _fail_input(exc, None, set())
    raw = {**base, **fields}
    for part in ("controls", "budgets", "notify"):
        if isinstance(base.get(part), dict) and part in fields:
            raw[part] = {**base[part], **fields[part]}
    if not raw:
        fail("nothing to change: give an option (see --help) or --file", USAGE)
    if name is not None:
        given.add("name")
    with _service(home) as (_, service, owner):
        try:
            view = service.patch(owner, ref, raw)
        except InvalidInput as exc:
            if exc.field == "name" and name is not None:
                fail_with(exc, {"name": "--name"})
            _fail_input(exc, str(file) if file is not None else None, given)
        _warn(view)
        if as_json:
            print_json(view)
        else:
            typer.echo(f"saved {view['name']} ({view['id']}): {view['explain']}")


@recipes_app.command("rm")
def rm(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
       as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Delete a recipe with its runs, notes and processing log."""
    with _service(home) as (_, service, owner):
        view = service.get(owner, ref)
        service.remove(owner, view["id"])
        if as_json:
            print_json({"deleted": view["id"], "name": view["name"]})
        else:
            typer.echo(f"deleted {view['name']} ({view['id']})")


def _toggle(ref: str, home: Path | None, as_json: bool, pause: bool) -> None:
    with _service(home) as (_, service, owner):
        view = service.pause(owner, ref) if pause else service.resume(owner, ref)
        if as_json:
            print_json(view)
        elif pause:
            typer.echo(f"paused {view['name']}")
        else:
            typer.echo(f"resumed {view['name']}" + (f"; next {view['next_fire']}" if view.get("next_fire") else ""))


@recipes_app.command("pause")
def pause(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
          as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Stop a recipe from firing on its schedule (it can still be run by hand)."""
    _toggle(ref, home, as_json, True)


@recipes_app.command("resume")
def resume(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
           as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Let a paused recipe fire again (its failure count starts over; missed fires are not made up)."""
    _toggle(ref, home, as_json, False)


# -- reading -----------------------------------------------------------------------------------


@recipes_app.command("list")
def list_(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Your recipes: schedule in words, next fire, last run, this month's spend."""
    with _service(home) as (_, service, owner):
        rows = service.listing(owner)
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo("No recipes yet; `noteloom recipes add NAME --prompt …` saves one.")
            return
        for r in rows:
            last = r.get("last_run") or {}
            state = "" if r["enabled"] else "  PAUSED" + (f" ({r['paused_reason']})" if r.get("paused_reason") else "")
            typer.echo(f"{r['name']}  [{r['mode']}]  {r['explain']}  next: {r.get('next_fire') or '-'}  "
                       f"last: {last.get('status') or '-'}  month: {_spend_text(r.get('spend_this_month'))}{state}")


@recipes_app.command("show")
def show(ref: str = typer.Argument(..., metavar="REF|RUN_ID", help="A recipe's name or id, or a run's id."),
         as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Show a recipe, or one run with its trace (each tool call, or each pipeline item and its verdict)."""
    with _service(home) as (_, service, owner):
        try:
            view, is_run = service.get(owner, ref), False
        except NotFound:
            if not _is_id(ref):
                raise
            try:
                view, is_run = service.run(owner, ref), True
            except NotFound:
                fail(f"no recipe and no run {ref!r}; `noteloom recipes list` shows your recipes, "
                     "`noteloom recipes runs NAME` a recipe's runs")
        if as_json:
            print_json(view)
        elif is_run:
            _print_run(view)
        else:
            _print_recipe(view)


@recipes_app.command("runs")
def runs(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
         limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many, newest first."),
         as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """A recipe's runs, newest first (`noteloom recipes show RUN_ID` for one with its trace)."""
    with _service(home) as (_, service, owner):
        rows = service.runs(owner, ref, limit=limit)
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo("No runs yet; `noteloom recipes run NAME` runs it now.")
        for r in rows:
            usage = r["usage"]
            typer.echo(f"{r['run_id']}  {show_date(r['created_time'])}  {r['trigger']:<8} {r['status']:<17} "
                       f"{usage['input_tokens'] + usage['output_tokens']} tok  {_money(r['cost_usd'])}"
                       + (f"  {r['error']}" if r.get("error") else "") + ("  (dry run)" if r.get("dry_run") else ""))


@recipes_app.command("jobs")
def jobs(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """The pipeline jobs this app has, with the settings each takes (--config)."""
    with _service(home) as (_, service, _owner):
        rows = service.jobs()
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo("No pipeline jobs are installed; plugins add them (register_pipeline_jobs).")
        for j in rows:
            props = (j["config_schema"].get("properties") or {})
            settings = ", ".join(props) or "no settings"
            typer.echo(f"{j['name']}  {j['label']}  ({settings})"
                       + ("  [judges text others wrote]" if j["untrusted_digest"] else ""))


@recipes_app.command("items")
def items(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
          limit: int = typer.Option(200, "--limit", min=1, max=10000),
          as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """A pipeline recipe's processing log: each item it handled, its verdict or error."""
    with _service(home) as (_, service, owner):
        rows = service.items(owner, ref, limit=limit)
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo("No items handled yet.")
        for i in rows:
            what = json.dumps(i["verdict"], ensure_ascii=False) if i.get("verdict") is not None else i.get("error")
            typer.echo(f"{show_date(i['time'])}  {i['status']:<5}  {i['key']}  {i['label']}  {what or ''}")


@recipes_app.command("forget")
def forget(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
           keys: list[str] | None = typer.Argument(None, metavar="[KEY]...", help="Items to judge again."),
           all_: bool = typer.Option(False, "--all", help="Forget every item: the whole queue is judged again."),
           as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Take items out of the processing log so the next run judges them again."""
    if bool(keys) == all_:
        fail("give the items' keys, or --all (not both)", USAGE)
    with _service(home) as (_, service, owner):
        count = service.forget_items(owner, ref, None if all_ else list(keys or ()))
        if as_json:
            print_json({"forgotten": count})
        else:
            typer.echo(f"forgot {count} item(s)")


@recipes_app.command("note")
def note(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
         text: str = typer.Argument(..., help="What to tell it; the next run reads it."),
         as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Leave the recipe a note: its next runs read it (and may answer in their report)."""
    with _service(home) as (_, service, owner):
        try:
            out = service.add_note(owner, ref, text)
        except InvalidInput as exc:
            fail_with(exc, {"body": "TEXT"})
        if as_json:
            print_json(out)
        else:
            typer.echo(f"noted ({out['id']})")


# -- running -----------------------------------------------------------------------------------


async def _with_runner(app: App, work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """``work`` with the recipes' run engine running in this process. A domain error is raised
    once the engine has stopped, as itself (inside, its task group would wrap it in a group)."""
    failure: NoteloomError | None = None
    async with app.background(RECIPES):
        try:
            return await work()
        except NoteloomError as exc:
            failure = exc
    assert failure is not None
    raise failure


async def _run_here(app: App, service: RecipeService, owner: User, ref: str, sample: int | None) -> dict[str, Any]:
    return await _with_runner(app, lambda: service.run_now(owner, ref, sample=sample))


@recipes_app.command("run")
def run(ref: str = typer.Argument(..., metavar="REF", help="The recipe's name or id."),
        sample: int | None = typer.Option(None, "--sample", min=1, max=1000, metavar="N",
                                          help="Dry run: a pipeline recipe judges N items and records nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the run record with its trace as JSON."),
        home: Path | None = HOME_OPTION) -> None:
    """Run a recipe now, in this process, and wait for it to end. Exits 1 if the run failed
    (or hit a budget or its time limit), 75 if another run of it was in progress."""
    with _service(home) as (app, service, owner):
        view = anyio.run(_run_here, app, service, owner, ref, sample)
        if as_json:
            print_json(view)
        else:
            _print_run(view)
        _run_exit(view)


@recipes_app.command("stop")
def stop(run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run to stop."),
         as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Stop a run, wherever it runs (`noteloom serve` sees the request within a second); a run
    waiting for approval is cancelled at once."""
    with _service(home) as (_, service, owner):
        view = anyio.run(service.stop, owner, run_id)
        if as_json:
            print_json(view)
        elif view["stop_requested"]:
            typer.echo(f"stop requested for run {run_id} (now {view['status']})")
        else:
            typer.echo(f"run {run_id} had ended already ({view['status']})")


@recipes_app.command("pending")
def pending(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Runs waiting for your approval, with the call each one holds."""
    with _service(home) as (_, service, owner):
        rows = service.pending(owner)
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo("No run is waiting for approval.")
            return
        for r in rows:
            held = r.get("held") or {}
            typer.echo(f"{r['run_id']}  [{r['recipe']['name']}]  {held.get('description') or held.get('tool')}")
        typer.echo("Decide with `noteloom recipes approve RUN_ID` or `noteloom recipes decline RUN_ID`.")


async def _decide_here(app: App, service: RecipeService, owner: User, run_id: str,
                       decision: Literal["approve", "decline"]) -> dict[str, Any]:
    async def work() -> dict[str, Any]:
        await service.decide(owner, run_id, decision)
        with anyio.fail_after(_DECIDE_LIMIT):
            return await service.settled(owner, run_id)

    return await _with_runner(app, work)


#: How long ``approve``/``decline`` waits for the rest of the run: its own time limit bounds
#: it; this only guards against a run that never settles.
_DECIDE_LIMIT = 86_400 + 60


def _decide(run_id: str, decision: Literal["approve", "decline"], home: Path | None, as_json: bool) -> None:
    with _service(home) as (app, service, owner):
        view = anyio.run(_decide_here, app, service, owner, run_id, decision)
        if as_json:
            print_json(view)
        else:
            typer.echo(f"{decision}d; the run went on here", err=True)
            _print_run(view)
        _run_exit(view)


@recipes_app.command("approve")
def approve(run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run waiting for approval."),
            as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Approve the call a run waits on; the rest of the run runs here and its record is printed."""
    _decide(run_id, "approve", home, as_json)


@recipes_app.command("decline")
def decline(run_id: str = typer.Argument(..., metavar="RUN_ID", help="The run waiting for approval."),
            as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Decline the call a run waits on (the model is told); the rest of the run runs here."""
    _decide(run_id, "decline", home, as_json)


# -- export and import -------------------------------------------------------------------------


@recipes_app.command("export")
def export(refs: list[str] | None = typer.Argument(None, metavar="[NAME]...", help="Recipes to export (default: all)."),
           as_json: bool = typer.Option(False, "--json", help="Print the document as JSON instead of YAML."),
           home: Path | None = HOME_OPTION) -> None:
    """Write recipes as YAML to stdout (`noteloom recipes export > recipes.yaml`)."""
    with _service(home) as (_, service, owner):
        text = service.export(owner, list(refs or ()))
        if as_json:
            import yaml

            print_json(yaml.safe_load(text))
        else:
            sys.stdout.write(text)


@recipes_app.command("import")
def import_(file: Path = typer.Argument(..., help="A file `noteloom recipes export` wrote (- for stdin)."),
            as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Save the recipes of an export file; each starts paused (resume it once you have read it).
    All or nothing: one bad recipe is named and none is saved."""
    text = sys.stdin.read() if str(file) == "-" else _text_of(file)
    with _service(home) as (_, service, owner):
        try:
            rows = service.import_(owner, text)
        except InvalidInput as exc:
            fail(f"{file}: {exc.led_by_field()}")
        for r in rows:
            _warn(r)
        if as_json:
            print_json(rows)
        else:
            for r in rows:
                typer.echo(f"imported {r['name']} ({r['id']}), paused")


# -- spend -------------------------------------------------------------------------------------


@recipes_app.command("spend")
def spend(ref: str | None = typer.Argument(None, metavar="[REF]", help="One recipe (default: the workspace)."),
          days: int = typer.Option(14, "--days", min=1, max=366, help="Days to show, up to today."),
          as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Tokens and cost per day and this month: one recipe's, or the workspace's (chats and recipes)."""
    with _service(home) as (_, service, owner):
        out = service.spend(owner, ref, days=days)
        if as_json:
            print_json(out)
            return
        month = out["month"]
        typer.echo(f"{month.get('month')}: {_spend_text(month)}")
        for d in out["days"]:
            typer.echo(f"  {d['day']}  {_spend_text(d)}")


@recipes_app.command("cap")
def cap(tokens: str | None = typer.Option(None, "--tokens", metavar="N|none", help="Monthly token cap."),
        cost: str | None = typer.Option(None, "--cost", metavar="USD|none", help="Monthly cost cap."),
        timezone: str | None = typer.Option(None, "--timezone", help="The zone whose months the cap counts."),
        as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Show the workspace's monthly cap on chats and recipes together, or set it (none takes a ceiling off).
    Once it is reached, runs and turns are refused until the month ends."""
    try:
        tok = _none_or(tokens, "tokens", int)
        usd = _none_or(cost, "cost", str)
    except InvalidInput as exc:
        fail_with(exc, {"tokens": "--tokens", "cost": "--cost"})
    with _service(home) as (_, service, _owner):
        try:
            out = service.set_cap(tokens=tok, cost=usd, timezone=timezone if timezone is not None else "keep") \
                if tok != "keep" or usd != "keep" or timezone is not None else service.cap()
        except InvalidInput as exc:
            fail_with(exc, {"tokens": "--tokens", "cost": "--cost", "timezone": "--timezone"})
        if as_json:
            print_json(out)
            return
        for key, value in out.items():
            typer.echo(f"{key}: {'none' if value is None else value}")
