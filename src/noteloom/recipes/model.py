"""A recipe as the code holds it, and the checks that make one from what a person wrote.

``check_spec`` turns loose values (a form, JSON from the API, YAML, the command line, a
tool call the model made) into a :class:`RecipeSpec`, or raises ``InvalidInput`` naming
the field and saying what to write instead. What depends on the app (the tools and jobs
it has, the models it can reach, the taint gate) is checked by the service on save.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, get_args

from noteloom.errors import InvalidInput
from noteloom.providers.base import THINKING_LEVELS, ThinkingLevel
from noteloom.recipes.schedule import (
    MANUAL,
    SCHEDULE_WORDS,
    Schedule,
    check_timezone,
    parse_schedule,
)

Mode = Literal["agent", "pipeline"]
MODES: tuple[Mode, ...] = get_args(Mode)
Trigger = Literal["schedule", "manual", "catch_up", "chat"]
TRIGGERS: tuple[Trigger, ...] = get_args(Trigger)
Missed = Literal["skip", "run_once", "catch_up"]
MISSED: tuple[Missed, ...] = get_args(Missed)
#: A recipe's run as the recipe shows it (the run engine's own status is coarser).
RecipeStatus = Literal[
    "queued", "running", "succeeded", "failed", "cancelled", "skipped_overlap", "awaiting_approval",
    "budget_exceeded", "timeout",
]
RECIPE_STATUSES: tuple[RecipeStatus, ...] = get_args(RecipeStatus)
#: Statuses a run no longer leaves.
FINAL: frozenset[str] = frozenset(
    {"succeeded", "failed", "cancelled", "skipped_overlap", "budget_exceeded", "timeout"}
)
#: Statuses that count as a failure towards pausing the recipe.
FAILING: frozenset[str] = frozenset({"failed", "timeout", "budget_exceeded"})

NAME_MAX = 100
PROMPT_MAX = 20_000
TOOLS_MAX = 100
#: The generic reads: a recipe listing one reads the data sources its ``data_sources`` allows
#: (offered, with the catalog line in the prompt, only when at least one is readable).
DATA_TOOLS = frozenset({"describe_data", "query_data"})
SOURCES_MAX = 200
#: Missed fire times run again at most this many times under ``catch_up``.
CATCH_UP_MAX = 10
BATCH_MAX = 1000


@dataclass(frozen=True)
class Controls:
    """The model controls a recipe runs with (``None``: the provider's default)."""

    temperature: float | None = None
    top_p: float | None = None
    thinking_level: ThinkingLevel | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class RecipeBudgets:
    """Ceilings per run; checked before each model call against its worst case."""

    max_input_tokens: int | None = 200_000
    max_output_tokens: int | None = 20_000
    #: USD; only priced calls count (a local model's cost is unknown, not zero).
    max_cost: Decimal | None = None
    max_tool_calls: int | None = 50
    #: Seconds of wall-clock time per run.
    time_limit: float | None = 900.0

    def as_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["max_cost"] = None if self.max_cost is None else str(self.max_cost)
        return out


@dataclass(frozen=True)
class NotifyRules:
    """What a recipe tells its owner beyond failures, approvals and budget alerts (always told)."""

    on_success: bool = False
    #: Pipeline mode: a verdict the job flags (a dangerous clip …).
    on_flagged: bool = True


@dataclass(frozen=True)
class RecipeSpec:
    """What a person writes: every field of a recipe they choose."""

    name: str
    mode: Mode = "agent"
    prompt: str = ""
    tools: tuple[str, ...] = ()
    model: str | None = None
    controls: Controls = field(default_factory=Controls)
    schedule: str = MANUAL
    timezone: str = "UTC"
    missed: Missed = "skip"
    budgets: RecipeBudgets = field(default_factory=RecipeBudgets)
    job: str | None = None
    job_config: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 25
    notify: NotifyRules = field(default_factory=NotifyRules)
    #: Tools whose ``confirm`` calls this recipe may make unattended (signed off on save).
    signed_off: tuple[str, ...] = ()
    #: The data sources its generic reads may use: ``None`` every source the workspace opted
    #: in (under ``[data]`` in noteloom.toml), ``()`` none; it narrows, never widens, the opt-in
    #: (as a chat's ``data_sources`` does).
    data_sources: tuple[str, ...] | None = None
    allow_tainted_writes: bool = False
    enabled: bool = True
    #: After this many failed runs in a row the recipe pauses itself.
    pause_after: int = 5

    @property
    def parsed_schedule(self) -> Schedule:
        return parse_schedule(self.schedule, self.timezone)

    def as_json(self) -> dict[str, Any]:
        """The spec as plain JSON values (what export writes and the API shows)."""
        return {
            "name": self.name,
            "mode": self.mode,
            "prompt": self.prompt,
            "tools": list(self.tools),
            "model": self.model,
            "controls": dataclasses.asdict(self.controls),
            "schedule": self.schedule,
            "timezone": self.timezone,
            "missed": self.missed,
            "budgets": self.budgets.as_json(),
            "job": self.job,
            "job_config": dict(self.job_config),
            "batch_size": self.batch_size,
            "notify": dataclasses.asdict(self.notify),
            "signed_off": list(self.signed_off),
            "data_sources": None if self.data_sources is None else list(self.data_sources),
            "allow_tainted_writes": self.allow_tainted_writes,
            "enabled": self.enabled,
            "pause_after": self.pause_after,
        }


@dataclass(frozen=True)
class Recipe:
    """A saved recipe: its spec and what the app keeps about it."""

    id: str
    user_id: str
    spec: RecipeSpec
    paused_reason: str | None
    failures: int
    next_fire_time: int | None
    tainted_ack_user_id: str | None
    tainted_ack_time: int | None
    scratch: str
    created_time: int
    updated_time: int

    @property
    def name(self) -> str:
        return self.spec.name


# -- checks -------------------------------------------------------------------------------

SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(RecipeSpec))


def check_spec(raw: Mapping[str, Any], *, base: RecipeSpec | None = None) -> RecipeSpec:
    """A spec from loose values; with ``base``, only the fields ``raw`` names change (an edit).

    ``InvalidInput(field=…)`` names the first field that is wrong and what to write.
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput("a recipe must be an object of its fields (name, mode, prompt, schedule …)")
    unknown = sorted(set(raw) - SPEC_FIELDS)
    if unknown:
        raise InvalidInput(
            f"a recipe has no field {unknown[0]!r}; its fields are: {', '.join(sorted(SPEC_FIELDS))}", field=unknown[0]
        )
    values: dict[str, Any] = dict(base.__dict__) if base is not None else {}
    values.update(raw)
    if "name" not in values:
        raise InvalidInput("a recipe needs a name", field="name")
    mode = _choice(values.get("mode", "agent"), MODES, "mode")
    spec = RecipeSpec(
        name=_name(values["name"]),
        mode=mode,
        prompt=_text(values.get("prompt", ""), "prompt", PROMPT_MAX),
        tools=_names(values.get("tools", ()), "tools"),
        model=_model(values.get("model")),
        controls=_controls(values.get("controls", Controls())),
        schedule=_schedule_text(values.get("schedule", MANUAL)),
        timezone=check_timezone(values.get("timezone", "UTC")),
        missed=_choice(values.get("missed", "skip"), MISSED, "missed"),
        budgets=_budgets(values.get("budgets", RecipeBudgets())),
        job=_job(values.get("job")),
        job_config=_object(values.get("job_config", {}), "job_config"),
        batch_size=_whole(values.get("batch_size", 25), "batch_size", 1, BATCH_MAX),
        notify=_notify(values.get("notify", NotifyRules())),
        signed_off=_names(values.get("signed_off", ()), "signed_off"),
        data_sources=_sources(values.get("data_sources")),
        allow_tainted_writes=_flag(values.get("allow_tainted_writes", False), "allow_tainted_writes"),
        enabled=_flag(values.get("enabled", True), "enabled"),
        pause_after=_whole(values.get("pause_after", 5), "pause_after", 1, 1000),
    )
    spec.parsed_schedule  # noqa: B018 — raises InvalidInput naming the schedule when it is wrong
    if spec.mode == "agent":
        if not spec.prompt.strip():
            raise InvalidInput("an agent recipe needs a prompt: what should it do each run?", field="prompt")
        if spec.job is not None:
            raise InvalidInput("job is for pipeline recipes; leave it out of an agent recipe or set mode to pipeline",
                               field="job")
    else:
        if spec.job is None:
            raise InvalidInput("a pipeline recipe needs a job (`noteloom recipes jobs` lists them)", field="job")
        if spec.tools:
            raise InvalidInput("a pipeline recipe calls no tools (the model judges one item at a time); "
                               "leave tools empty or set mode to agent", field="tools")
    stray = [n for n in spec.signed_off if n not in spec.tools]
    if stray:
        raise InvalidInput(f"signed_off names {stray[0]!r}, which is not among the recipe's tools; "
                           "sign off only tools the recipe uses", field="signed_off")
    return spec


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("a recipe's name must be non-empty text", field="name")
    name = value.strip()
    if len(name) > NAME_MAX or any(ord(ch) < 32 or ch == "\x7f" for ch in name):
        raise InvalidInput(f"a recipe's name must be one line of at most {NAME_MAX} characters", field="name")
    return name


def _text(value: Any, name: str, most: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text", field=name)
    if len(value) > most:
        raise InvalidInput(f"{name} is {len(value)} characters long; keep it under {most}", field=name)
    if "\x00" in value:
        raise InvalidInput(f"{name} contains a NUL character", field=name)
    return value


def _names(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise InvalidInput(f"{name} must be a list of tool names", field=name)
    if len(value) > TOOLS_MAX:
        raise InvalidInput(f"{name} lists {len(value)} tools; at most {TOOLS_MAX}", field=name)
    out: list[str] = []
    for v in value:
        if not isinstance(v, str) or not 0 < len(v) <= 200 or any(ch.isspace() for ch in v):
            raise InvalidInput(f"{name}: {v!r} is not a tool name", field=name)
        if v not in out:
            out.append(v)
    return tuple(out)


def _sources(value: Any) -> tuple[str, ...] | None:
    """A data-source allowlist: ``None`` (every source opted in) or names (``notes``, ``crm``, ``crm.customers``)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, Sequence) or isinstance(value, bytes) or len(value) > SOURCES_MAX:
        raise InvalidInput(f"data_sources must be a list of at most {SOURCES_MAX} data source names, or null for "
                           "every source the workspace opted in", field="data_sources")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str) or not 0 < len(v) <= 200 or any(ch.isspace() or ord(ch) < 32 for ch in v):
            raise InvalidInput(f"data_sources: {v!r} is not a data source's name (notes, crm, crm.customers …); "
                               "describe_data lists them", field="data_sources")
        if v not in out:
            out.append(v)
    return tuple(out)


def _model(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 200 or not value.strip():
        raise InvalidInput(f"model {value!r} is not a model name; write it as provider:model, e.g. echo:echo",
                           field="model")
    return value.strip()


def _schedule_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"schedule must be a cron expression or one of {', '.join(SCHEDULE_WORDS)}",
                           field="schedule")
    return " ".join(value.split())


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> Any:
    if value not in allowed:
        raise InvalidInput(f"{name} {value!r} is unknown; use one of {', '.join(allowed)}", field=name)
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false, not {value!r}", field=name)
    return value


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} {value!r} is out of range; use a whole number from {low} to {high}", field=name)
    return value


def _number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not low <= value <= high:
        raise InvalidInput(f"{name} {value!r} is out of range; use a number from {low:g} to {high:g}", field=name)
    return float(value)


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{name} must be an object", field=name)
    return dict(value)


def _job(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise InvalidInput(f"job {value!r} is not a job's name", field="job")
    return value


def _parts(value: Any, cls: type[Any], name: str) -> dict[str, Any]:
    if isinstance(value, cls):
        return dict(value.__dict__)
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{name} must be an object", field=name)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidInput(f"{name} has no field {unknown[0]!r}; its fields are: {', '.join(sorted(known))}",
                           field=f"{name}.{unknown[0]}")
    return dict(value)


def _controls(value: Any) -> Controls:
    v = _parts(value, Controls, "controls")
    t, p, level, most = v.get("temperature"), v.get("top_p"), v.get("thinking_level"), v.get("max_tokens")
    if level is not None and level not in THINKING_LEVELS:
        raise InvalidInput(f"thinking_level {level!r} is unknown; use one of {', '.join(THINKING_LEVELS)}",
                           field="controls.thinking_level")
    return Controls(
        None if t is None else _number(t, "controls.temperature", 0, 2),
        None if p is None else _number(p, "controls.top_p", 0, 1),
        level,
        None if most is None else _whole(most, "controls.max_tokens", 1, 1_000_000),
    )


def _budgets(value: Any) -> RecipeBudgets:
    v = _parts(value, RecipeBudgets, "budgets")
    cost = v.get("max_cost")
    money: Decimal | None = None
    if cost is not None:
        try:
            money = Decimal(str(cost)) if not isinstance(cost, bool) else Decimal("NaN")
        except InvalidOperation:
            money = Decimal("NaN")
        if not money.is_finite() or money < 0:
            raise InvalidInput(f"budgets.max_cost must be an amount in USD of 0 or more, not {cost!r}",
                               field="budgets.max_cost")
    default = RecipeBudgets()

    def whole(key: str, high: int) -> int | None:
        x = v.get(key, getattr(default, key))
        return None if x is None else _whole(x, f"budgets.{key}", 1, high)

    limit = v.get("time_limit", default.time_limit)
    return RecipeBudgets(
        whole("max_input_tokens", 100_000_000),
        whole("max_output_tokens", 10_000_000),
        money,
        whole("max_tool_calls", 10_000),
        None if limit is None else _number(limit, "budgets.time_limit", 1, 86_400),
    )


def _notify(value: Any) -> NotifyRules:
    v = _parts(value, NotifyRules, "notify")
    return NotifyRules(
        _flag(v.get("on_success", False), "notify.on_success"),
        _flag(v.get("on_flagged", True), "notify.on_flagged"),
    )


def spec_from_row(row: Any) -> RecipeSpec:
    """The spec of a stored recipe row (trusted: it was checked when saved)."""
    b = row.budgets or {}
    c = row.controls or {}
    n = row.notify or {}
    return RecipeSpec(
        name=row.name, mode=row.mode, prompt=row.prompt, tools=tuple(row.tools or ()), model=row.model,
        controls=Controls(c.get("temperature"), c.get("top_p"), c.get("thinking_level"), c.get("max_tokens")),
        schedule=row.schedule, timezone=row.timezone, missed=row.missed,
        budgets=RecipeBudgets(
            b.get("max_input_tokens"), b.get("max_output_tokens"),
            None if b.get("max_cost") is None else Decimal(b["max_cost"]), b.get("max_tool_calls"), b.get("time_limit"),
        ),
        job=row.job, job_config=dict(row.job_config or {}), batch_size=row.batch_size,
        notify=NotifyRules(bool(n.get("on_success", False)), bool(n.get("on_flagged", True))),
        signed_off=tuple(row.signed_off or ()),
        data_sources=None if row.data_sources is None else tuple(row.data_sources),
        allow_tainted_writes=bool(row.allow_tainted_writes),
        enabled=bool(row.enabled), pause_after=row.pause_after,
    )
