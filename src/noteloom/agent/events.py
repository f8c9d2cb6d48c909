"""What a run reports and returns: options, events, results, the cancel token.

The chat stores every ``RunEvent`` (``event_to_dict`` gives its JSON form) and the
``RunResult``; recipes and the CLI read the same values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, assert_never, get_args

import anyio

from noteloom.errors import ConfigError, InvalidInput
from noteloom.messages import Message, TextDelta, ThinkingDelta, Usage, usage_to_dict

# Re-exported: the policy vocabulary lives in noteloom.policy (the tools layer).
from noteloom.policy import POLICIES as POLICIES
from noteloom.policy import Policy as Policy
from noteloom.providers.base import ThinkingLevel
from noteloom.providers.errors import ProviderError
from noteloom.tools import Effect, ToolDef

Decision = Literal["approve", "decline"]
StopReason = Literal["end_turn", "max_steps", "awaiting_confirmation", "cancelled", "budget_exceeded", "error"]
STOP_REASONS: tuple[StopReason, ...] = get_args(StopReason)


@dataclass(frozen=True)
class RunOptions:
    """How one run behaves. ``None`` means: the run-time setting, else the default."""

    max_steps: int | None = None
    #: Budget of output tokens (reasoning included) for the run.
    max_output_tokens: int | None = None
    #: Budget in USD for the run; only priced calls count against it. Before each call the
    #: loop prices its worst case (estimated input plus its output limit) against what is left.
    max_cost: Decimal | None = None
    #: Wall-clock limit of the run in seconds: a model stream still running then is cut,
    #: and the run stops as ``budget_exceeded`` before its next model call.
    time_limit: float | None = None
    result_cap: int | None = None
    thinking: ThinkingLevel | None = None
    #: Output tokens per model call.
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    #: Per-tool policy overrides for this run or conversation, the strongest layer of
    #: ``noteloom.policy.resolve`` (``deny`` anywhere still wins): ``{"delete_note": "deny"}``.
    policies: Mapping[str, Policy] = field(default_factory=dict)
    #: Decisions for held calls, by call id, when resuming: ``{"call_1": "approve"}``.
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    #: False for runs signed off in advance (recipes): ``confirm`` tools then run.
    confirm: bool = True
    #: Force the untrusted-input contract into the system prompt (True) or leave it
    #: to the loop (None: added once fenced content is in the transcript).
    untrusted: bool | None = None
    #: The run's fence nonce; give it when the system prompt fences text itself (a clipped
    #: note), so the contract names the very marker the prompt uses. New per run if unset.
    nonce: str | None = None
    #: A plain-language description of a held call, for the confirmation card.
    describe: Callable[[ToolDef, dict[str, Any]], str] | None = None
    #: Ceiling of input tokens over the run: a call whose estimated input would pass it is
    #: not made (recipes' cost protection).
    max_input_tokens: int | None = None
    #: Ceiling of tool calls over the run: a batch that would pass it is answered "not run".
    max_tool_calls: int | None = None
    #: Asked before each model call; a text (why) ends the run as ``budget_exceeded`` with
    #: ``limit == "workspace_cap"`` (the workspace's monthly cap, counted across surfaces).
    admit: Callable[[], Awaitable[str | None]] | None = None


#: Which budget ended a run (``DoneEvent.limit``, ``RunResult.limit``).
Limit = Literal["max_steps", "max_output_tokens", "max_cost", "time_limit", "max_input_tokens", "max_tool_calls",
                "workspace_cap"]


@dataclass(frozen=True)
class Budgets:
    """The budgets of a run as one layer of settings: ``None`` leaves a budget to the next
    layer (command line or conversation → ``[agent]`` in noteloom.toml → run-time settings
    → defaults)."""

    max_steps: int | None = None
    max_output_tokens: int | None = None
    max_cost: Decimal | None = None
    time_limit: float | None = None

    @classmethod
    def from_file(cls, file: Mapping[str, Any]) -> Budgets:
        """The ``[agent]`` table of noteloom.toml (``ConfigError`` naming a bad value)::

            [agent]
            max_steps = 8            # model calls per turn
            max_output_tokens = 20000
            max_cost = 0.25          # USD per turn (priced calls only)
            time_limit = 300         # seconds per turn
        """
        table = file.get("agent", {})
        if not isinstance(table, Mapping):
            raise ConfigError("[agent] in noteloom.toml must be a table")
        table = {k: v for k, v in table.items() if k != "tool_policies"}  # noteloom.policy reads that one
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"[agent] has no setting {unknown[0]!r}; known settings: {', '.join(sorted(known))}")
        try:
            return cls.checked(**table)
        except InvalidInput as exc:
            raise ConfigError(f"[agent] {exc}") from None

    @classmethod
    def checked(
        cls,
        max_steps: Any = None,
        max_output_tokens: Any = None,
        max_cost: Any = None,
        time_limit: Any = None,
    ) -> Budgets:
        """Budgets from loose values (a file, a form, the command line); ``InvalidInput`` names the bad one."""
        for name, value in (("max_steps", max_steps), ("max_output_tokens", max_output_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidInput(f"{name} must be a whole number above 0, not {value!r}", field=name)
        cost: Decimal | None = None
        if max_cost is not None:
            try:
                cost = Decimal(str(max_cost)) if not isinstance(max_cost, bool) else Decimal("NaN")
            except ArithmeticError:
                cost = Decimal("NaN")
            if not cost.is_finite() or cost < 0:
                raise InvalidInput(f"max_cost must be an amount in USD of 0 or more, not {max_cost!r}", field="max_cost")
        if time_limit is not None and (
            isinstance(time_limit, bool) or not isinstance(time_limit, int | float)
            or not math.isfinite(time_limit) or time_limit <= 0
        ):
            raise InvalidInput(f"time_limit must be a number of seconds above 0, not {time_limit!r}", field="time_limit")
        return cls(max_steps, max_output_tokens, cost, None if time_limit is None else float(time_limit))

    def over(self, below: Budgets) -> Budgets:
        """These budgets, with ``below``'s where these leave one unset."""
        return Budgets(*(
            mine if mine is not None else theirs
            for mine, theirs in zip(dataclasses.astuple(self), dataclasses.astuple(below), strict=True)
        ))

    def left_after(self, steps: int, output_tokens: int, cost: Decimal | None) -> Budgets:
        """What these budgets leave after earlier runs of the same turn (a held call splits a
        turn into runs; the user's answer does not reset its budgets). An unknown ``cost``
        leaves the cost budget whole; the time limit is per run (waiting for the user is not
        the model's time)."""
        return Budgets(
            None if self.max_steps is None else max(self.max_steps - steps, 1),
            None if self.max_output_tokens is None else max(self.max_output_tokens - output_tokens, 1),
            None if self.max_cost is None else max(self.max_cost - (cost or Decimal(0)), Decimal(0)),
            self.time_limit,
        )

    def options(self, options: RunOptions) -> RunOptions:
        """``options`` with these budgets filled in where it leaves them unset."""
        mine = Budgets(options.max_steps, options.max_output_tokens, options.max_cost, options.time_limit)
        merged = mine.over(self)
        return dataclasses.replace(options, max_steps=merged.max_steps, max_output_tokens=merged.max_output_tokens,
                                   max_cost=merged.max_cost, time_limit=merged.time_limit)


@dataclass(frozen=True)
class PendingAction:
    """A tool call held for the user's approval."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    description: str
    effect: Effect


@dataclass(frozen=True)
class ActivityEvent:
    """What the loop is doing now, in words for a status line."""

    label: str
    kind: Literal["activity"] = "activity"


@dataclass(frozen=True)
class ToolCallEvent:
    """The loop takes up a tool call the model made."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    policy: Policy | None
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ToolResultEvent:
    call_id: str
    name: str
    content: str
    is_error: bool
    #: The checked JSON form of the tool's render spec (``noteloom.renderspec``), if it has one.
    render: dict[str, Any] | None = None
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True)
class UsageEvent:
    """One model call finished: its usage and cost, and the run's totals so far."""

    usage: Usage
    cost: Decimal | None
    total_usage: Usage
    total_cost: Decimal | None
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True)
class PendingEvent:
    action: PendingAction
    kind: Literal["pending_action"] = "pending_action"


@dataclass(frozen=True)
class DoneEvent:
    """The run ended; always the last event."""

    reason: StopReason
    error_code: str | None = None
    error_message: str | None = None
    #: The budget that ended the run (``max_steps`` and ``budget_exceeded`` only).
    limit: Limit | None = None
    kind: Literal["done"] = "done"


RunEvent = TextDelta | ThinkingDelta | ActivityEvent | ToolCallEvent | ToolResultEvent | UsageEvent | PendingEvent | DoneEvent
EventSink = Callable[[RunEvent], Awaitable[None]]


@dataclass
class RunResult:
    #: The messages this run appended (assistant and tool messages), to store after the input.
    messages: list[Message]
    stop_reason: StopReason
    usage: Usage
    #: ``None`` when some call's price is unknown.
    cost: Decimal | None
    #: Model calls made.
    steps: int
    nonce: str
    pending: PendingAction | None = None
    error: ProviderError | None = None
    limit: Limit | None = None
    #: Tool calls dispatched (run, refused or failed; not those answered "not run").
    tool_calls: int = 0
    #: Why ``admit`` stopped the run, when it did.
    refused: str | None = None

    @property
    def text(self) -> str:
        """The visible text of the assistant's answer in this run."""
        return "\n\n".join(m.text for m in self.messages if m.role == "assistant" and m.text)


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """A JSON-ready form of ``event`` (``kind`` plus its fields; money as strings)."""
    if isinstance(event, UsageEvent):
        return {
            "kind": event.kind,
            "usage": usage_to_dict(event.usage),
            "cost": None if event.cost is None else str(event.cost),
            "total_usage": usage_to_dict(event.total_usage),
            "total_cost": None if event.total_cost is None else str(event.total_cost),
        }
    if isinstance(event, PendingEvent):
        return {"kind": event.kind, **dataclasses.asdict(event.action)}
    if isinstance(event, TextDelta | ThinkingDelta | ActivityEvent | ToolCallEvent | ToolResultEvent | DoneEvent):
        return dataclasses.asdict(event)
    assert_never(event)



class CancelToken:
    """A cooperative stop signal for one run.

    Call ``cancel()`` from the run's event loop (another task, a poller watching a
    database flag …); from another thread use ``anyio.from_thread.run_sync(token.cancel)``.
    A model stream in progress is cut at once; a running tool call finishes first.
    """

    def __init__(self) -> None:
        self._cancelled = False
        self._scopes: set[anyio.CancelScope] = set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def scope(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope that ``cancel()`` cancels (at once if it already was)."""
        with anyio.CancelScope() as scope:
            if self._cancelled:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)
