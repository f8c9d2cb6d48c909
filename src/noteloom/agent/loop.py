"""The loop itself: model calls, tool dispatch under policies, limits, cancel, resume."""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, assert_never

import anyio

from noteloom.agent.events import (
    ActivityEvent,
    CancelToken,
    DoneEvent,
    EventSink,
    Limit,
    PendingAction,
    PendingEvent,
    Policy,
    RunEvent,
    RunOptions,
    RunResult,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from noteloom.agent.framing import (
    CONTRACT,
    DECLINED,
    UNTRUSTED_FILES,
    cap_text,
    fence,
    mentions_fence,
    render_payload,
)
from noteloom.messages import (
    Message,
    Part,
    StreamEnd,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingDone,
    ToolCallDone,
    ToolCallPart,
    ToolResultPart,
    Usage,
    UsageUpdate,
)
from noteloom.policy import POLICY_KEY as POLICY_KEY  # re-exported by noteloom.agent
from noteloom.policy import PolicySources, denied, describe_call, resolve
from noteloom.providers.base import (
    ModelRequest,
    Provider,
    SystemBlock,
    ToolSpec,
    call_max_output,
    estimate_input_tokens,
)
from noteloom.providers.errors import ProviderError, provider_error
from noteloom.providers.pricing import output_rate
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolFailure, call_tool, validate_args
from noteloom.workspace import Workspace

log = logging.getLogger("noteloom.agent")

#: Run-time settings (``Workspace.set_setting``) read when ``RunOptions`` leaves a value unset.
MAX_STEPS_KEY = "agent.max_steps"
MAX_OUTPUT_TOKENS_KEY = "agent.max_output_tokens"
MAX_COST_KEY = "agent.max_cost"
RESULT_CAP_KEY = "agent.result_cap"
DEFAULT_MAX_STEPS = 8
DEFAULT_RESULT_CAP = 12 * 1024
#: The activity line while a model call runs: it names the model (a local one may take a
#: minute to load, and the user should know which one they wait for).
WAITING_FOR_MODEL = "Waiting for {model}…"
#: The fewest output tokens a call is sent with when the loop lowers its limit to what
#: is left of the cost budget; a call that cannot afford even these is not made.
MIN_CALL_TOKENS = 256
#: The output limit a priced call under a cost budget is sent with when nothing else bounds
#: it (no ``max_tokens``, no ``max_output_tokens`` for the provider): every current model
#: of the big vendors can write this much, and a turn may make several calls.
UNKNOWN_MAX_TOKENS = 8192


@dataclass
class _Entry:
    """A tool of the turn; session tools only propose edits, so they always run."""

    tool: ToolDef
    session: bool = False


def _read_settings(workspace: Workspace) -> dict[str, Any]:
    """The run-time settings the loop needs, in one go (called in a worker thread)."""
    with workspace.read() as conn:
        values = workspace.settings_with_prefix("tool.", conn=conn)
        values.update(workspace.settings_with_prefix("agent.", conn=conn))
    return values


def _positive(value: Any, key: str) -> int | None:
    """A stored whole number above 0, or ``None`` (logged when malformed)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        log.warning("setting %s is %r; expected a whole number above 0 (using the default)", key, value)
        return None
    return value


def _money(value: Any) -> Decimal | None:
    """A stored USD amount, or ``None`` (logged when malformed)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        log.warning("setting %s is %r; expected an amount in USD (ignoring it)", MAX_COST_KEY, value)
        return None


class _Draft:
    """The assistant message being streamed."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self._text: list[str] = []

    def text(self, piece: str) -> None:
        self._text.append(piece)

    def add(self, part: Part) -> None:
        self._flush()
        self.parts.append(part)

    def absorb_text(self) -> None:
        """The text so far was reasoning after all: the thinking part that follows holds it."""
        self._text = []
        self.parts = [p for p in self.parts if not isinstance(p, TextPart)]

    def message(self, *, keep_calls: bool) -> Message | None:
        self._flush()
        parts = [p for p in self.parts if keep_calls or not isinstance(p, ToolCallPart)]
        return Message("assistant", tuple(parts)) if parts else None

    def _flush(self) -> None:
        if self._text:
            self.parts.append(TextPart("".join(self._text)))
            self._text = []


@dataclass
class _Step:
    """What one model call left: its message, usage, why it ended."""

    message: Message | None
    usage: Usage
    finish: str | None
    cancelled: bool = False
    error: ProviderError | None = None
    #: The run's time limit cut the stream.
    timed_out: bool = False


class _Run:
    """The state of one ``run`` call."""

    def __init__(
        self,
        provider: Provider,
        model: str,
        system: tuple[SystemBlock, ...],
        history: list[Message],
        entries: dict[str, _Entry],
        context: ToolContext,
        options: RunOptions,
        settings: Mapping[str, Any],
        on_event: EventSink | None,
        cancel: CancelToken,
    ) -> None:
        self.provider, self.model, self.system = provider, model, system
        self.history = history
        self.new: list[Message] = []
        self.entries = entries
        self.nonce = options.nonce or secrets.token_hex(8)
        self.ctx = dataclasses.replace(context, nonce=self.nonce)
        # Every layer but the tool's own default, read once per run (noteloom.policy).
        self.policies = PolicySources.read(settings, context.settings, options.policies)
        self.options = options
        self.on_event = on_event
        self.cancel = cancel
        self.max_steps = options.max_steps or _positive(settings.get(MAX_STEPS_KEY), MAX_STEPS_KEY) or DEFAULT_MAX_STEPS
        self.max_output = options.max_output_tokens or _positive(settings.get(MAX_OUTPUT_TOKENS_KEY), MAX_OUTPUT_TOKENS_KEY)
        self.max_cost = options.max_cost if options.max_cost is not None else _money(settings.get(MAX_COST_KEY))
        self.deadline = None if options.time_limit is None else anyio.current_time() + options.time_limit
        self.limit: Limit | None = None
        self.cap = options.result_cap or _positive(settings.get(RESULT_CAP_KEY), RESULT_CAP_KEY) or DEFAULT_RESULT_CAP
        self.untrusted = bool(options.untrusted) or (options.untrusted is None and mentions_fence(history))
        self.specs = tuple(ToolSpec(e.tool.name, e.tool.description, e.tool.input_schema) for e in entries.values())
        self.usage = Usage()
        self.cost: Decimal | None = Decimal(0)
        self.priced = Decimal(0)
        self.steps = 0
        self.calls = 0
        self.refused: str | None = None
        self.pending: PendingAction | None = None

    async def emit(self, event: RunEvent) -> None:
        if self.on_event is None:
            return
        try:
            await self.on_event(event)
        except Exception:  # a broken consumer must not break the turn
            log.exception("event consumer failed on %s", event.kind)

    def append(self, message: Message) -> None:
        self.history.append(message)
        self.new.append(message)

    def over_budget(self) -> bool:
        """True (with ``limit`` set) once a budget is spent."""
        if self.max_output is not None and self.usage.output_tokens >= self.max_output:
            self.limit = "max_output_tokens"
        elif self.max_cost is not None and self.priced >= self.max_cost:
            self.limit = "max_cost"
        elif self.deadline is not None and anyio.current_time() >= self.deadline:
            self.limit = "time_limit"
        else:
            return False
        return True

    def affordable(self, request: ModelRequest) -> ModelRequest | None:
        """``request`` with its output limit lowered so that its worst case (estimated input
        plus that limit) fits what is left of the cost budget; ``None`` when even
        ``MIN_CALL_TOKENS`` of output do not fit. Unpriced and free calls pass unchanged."""
        if self.max_cost is None:
            return request
        left = self.max_cost - self.priced
        input_tokens = estimate_input_tokens(request)
        base = self.provider.cost(self.model, Usage(input_tokens=input_tokens))
        rate = output_rate(lambda usage: self.provider.cost(self.model, usage))
        if base is None or rate is None or (base == 0 and rate == 0):
            return request  # only priced calls count against the budget
        most = call_max_output(self.provider, request)
        if most is not None and base + most * rate <= left:
            return request
        # No known output limit, or one the rest of the budget cannot pay for: send the most it
        # can. With no known limit, never more than UNKNOWN_MAX_TOKENS: a limit above the model's
        # own maximum is refused by some vendors (OpenAI answers 400).
        fits = int((left - base) / rate) if rate > 0 else (MIN_CALL_TOKENS if base <= left else 0)
        if fits < MIN_CALL_TOKENS:
            return None
        return dataclasses.replace(request, max_tokens=min(fits, UNKNOWN_MAX_TOKENS if most is None else most))

    async def finish(self, reason: StopReason, error: ProviderError | None = None) -> RunResult:
        limit = self.limit if reason in ("budget_exceeded", "max_steps") else None
        if reason == "max_steps":
            limit = "max_steps"
        await self.emit(DoneEvent(reason, error.code if error else None, str(error) if error else None, limit))
        return RunResult(self.new, reason, self.usage, self.cost, self.steps, self.nonce, self.pending, error, limit,
                         self.calls, self.refused)

    async def go(self) -> RunResult:
        held = _unanswered(self.history)
        if held and await self.dispatch(held):
            return await self.finish("awaiting_confirmation")
        while True:
            if self.cancel.cancelled:
                return await self.finish("cancelled")
            if self.steps >= self.max_steps:
                return await self.finish("max_steps")
            if self.over_budget():
                return await self.finish("budget_exceeded")
            request = self.affordable(self.request())
            if request is None:
                self.limit = "max_cost"
                return await self.finish("budget_exceeded")
            if self.options.max_input_tokens is not None and \
                    self.usage.input_tokens + estimate_input_tokens(request) > self.options.max_input_tokens:
                self.limit = "max_input_tokens"
                return await self.finish("budget_exceeded")
            if self.options.admit is not None:
                self.refused = await self.options.admit()
                if self.refused is not None:
                    self.limit = "workspace_cap"
                    return await self.finish("budget_exceeded")
            await self.emit(ActivityEvent(WAITING_FOR_MODEL.format(model=self.model)))
            step = await self.call_model(request)
            self.steps += 1
            await self.account(step.usage)
            if step.message is not None:
                self.append(step.message)
            if step.error is not None:
                return await self.finish("error", step.error)
            if step.timed_out:
                self.limit = "time_limit"
                return await self.finish("budget_exceeded")
            if step.cancelled:
                return await self.finish("cancelled")
            calls = step.message.tool_calls if step.message else []
            if not calls:
                return await self.finish("end_turn")
            stop: StopReason | None = None
            if self.over_budget():
                stop = "budget_exceeded"
            elif self.options.max_tool_calls is not None and self.calls + len(calls) > self.options.max_tool_calls:
                self.limit = "max_tool_calls"
                stop = "budget_exceeded"
            elif self.steps >= self.max_steps:
                stop = "max_steps"
            if stop is not None:
                await self.answer_unrun(calls, f"not run: this turn reached its {_LIMIT_WORDS[stop]}; "
                                               "tell the user and let them decide whether to continue")
                return await self.finish(stop)
            if await self.dispatch(calls):
                return await self.finish("awaiting_confirmation")

    def request(self) -> ModelRequest:
        """The next model call, its output limit within the token budget."""
        system = self.system
        if self.untrusted:
            system = (*system, SystemBlock(CONTRACT.format(nonce=self.nonce), cache=False))
        max_tokens = self.options.max_tokens
        if self.max_output is not None:
            left = max(self.max_output - self.usage.output_tokens, 1)
            max_tokens = min(max_tokens or left, left)
        return ModelRequest(
            self.model, tuple(_repaired(self.history)), system, self.specs,
            self.options.thinking, max_tokens, self.options.temperature, self.options.top_p,
        )

    async def call_model(self, request: ModelRequest) -> _Step:
        draft = _Draft()
        usage = Usage()
        finish: str | None = None
        cancelled = False
        timed_out = False
        error: ProviderError | None = None
        stream = self.provider.stream(request)
        try:
            while True:
                # The time limit cuts a stream that runs past it, like a cancel does.
                with self.cancel.scope() as scope, anyio.CancelScope(deadline=self.deadline or math.inf) as clock:
                    try:
                        event = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                if clock.cancelled_caught:
                    timed_out = True
                    break
                if scope.cancelled_caught:
                    cancelled = True
                    break
                if isinstance(event, TextDelta):
                    draft.text(event.text)
                    await self.emit(event)
                elif isinstance(event, ThinkingDelta):
                    await self.emit(event)
                elif isinstance(event, ThinkingDone):
                    if event.absorbs_text:
                        draft.absorb_text()
                    draft.add(event.part)
                elif isinstance(event, ToolCallDone):
                    draft.add(event.call)
                elif isinstance(event, UsageUpdate):
                    usage = event.usage
                elif isinstance(event, StreamEnd):
                    finish = event.reason
                else:
                    assert_never(event)
        except ProviderError as exc:
            error = exc
        except Exception as exc:
            log.exception("provider %r failed", self.provider.name)
            error = provider_error("api_stream_error", f"Provider {self.provider.name!r}", "an unexpected error")
            error.__cause__ = exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        if error is None and not cancelled and not timed_out and finish is None:
            error = provider_error("api_stream_error", f"Provider {self.provider.name!r}", "the stream ended early")
        # Calls from a stream that did not finish were never complete: keep the text only.
        complete = error is None and not cancelled and not timed_out
        return _Step(draft.message(keep_calls=complete), usage, finish, cancelled, error, timed_out)

    async def account(self, usage: Usage) -> None:
        cost = self.provider.cost(self.model, usage)
        self.usage = self.usage + usage
        if cost is None:
            self.cost = None
        else:
            self.priced += cost
            if self.cost is not None:
                self.cost += cost
        await self.emit(UsageEvent(usage, cost, self.usage, self.cost))

    async def answer_unrun(self, calls: Sequence[ToolCallPart], why: str) -> None:
        for call in calls:
            entry = self.entries.get(call.name)
            await self.emit(ToolCallEvent(call.id, call.name, call.arguments, self.policy_of(entry, call)))
            await self.emit(ToolResultEvent(call.id, call.name, why, True))
        self.append(Message("tool", tuple(ToolResultPart(c.id, why, is_error=True) for c in calls)))

    def policy_of(self, entry: _Entry | None, call: ToolCallPart) -> Policy | None:
        """The effective policy of this call (``noteloom.policy.resolve``)."""
        if entry is None:
            return None
        if entry.session:
            return "auto"
        return resolve(entry.tool, call.arguments, self.policies)

    async def dispatch(self, calls: Sequence[ToolCallPart]) -> bool:
        """Run ``calls`` in order; True when one is held for confirmation (the rest wait)."""
        results: list[ToolResultPart] = []
        held = False
        for i, call in enumerate(calls):
            if self.cancel.cancelled:
                rest = calls[i:]
                results.extend(ToolResultPart(c.id, "not run: the user stopped the turn", True) for c in rest)
                for c in rest:
                    await self.emit(ToolResultEvent(c.id, c.name, "not run: the user stopped the turn", True))
                break
            entry = self.entries.get(call.name)
            await self.emit(ToolCallEvent(call.id, call.name, call.arguments, self.policy_of(entry, call)))
            result = await self.one_call(call, entry)
            if result is not None:
                self.calls += 1
            if result is None:
                held = True
                break
            results.append(result)
            await self.emit(ToolResultEvent(call.id, call.name, result.content, result.is_error, result.render))
        if results:
            self.append(Message("tool", tuple(results)))
        if held and self.pending is not None:
            await self.emit(PendingEvent(self.pending))
        return held

    async def one_call(self, call: ToolCallPart, entry: _Entry | None) -> ToolResultPart | None:
        """The result of one call, or ``None`` when it is held for confirmation."""

        def error(text: str) -> ToolResultPart:
            return ToolResultPart(call.id, text, is_error=True)

        if entry is None:
            names = ", ".join(self.entries) or "none"
            return error(f"unknown tool {call.name!r}; the tools available in this turn are: {names}")
        if call.error is not None:
            return error(f"{call.name}: {call.error}")
        tool = entry.tool
        policy = self.policy_of(entry, call)
        if policy == "deny":
            return error(denied(call.name))
        try:
            validate_args(tool, call.arguments)  # before a card: the user never signs off a bad call
        except ToolError as exc:
            return error(str(exc))
        if policy == "confirm" and self.options.confirm:
            decision = self.options.decisions.get(call.id)
            if decision is None:
                args = dict(call.arguments)
                if self.options.describe is not None:
                    text = self.options.describe(tool, args)
                else:
                    text = await anyio.to_thread.run_sync(describe_call, tool, args, self.ctx.workspace, self.ctx.user)
                self.pending = PendingAction(call.id, call.name, args, text, tool.effect)
                return None
            if decision == "decline":
                return error(DECLINED)
        await self.emit(ActivityEvent(f"Running tool: {call.name}…"))
        try:
            result = await call_tool(self.ctx, tool, call.arguments)
        except (ToolError, ToolFailure) as exc:  # worded for the reader; a bug's stack is in the log
            return error(str(exc))
        text = cap_text(render_payload(result.payload), self.cap)
        if result.untrusted:
            text = fence(text, self.nonce)
        if result.blocks:
            text += f"\n\n{UNTRUSTED_FILES}"
        if result.untrusted or f"<<UNTRUSTED_{self.nonce}>>" in text:
            self.untrusted = True
        return ToolResultPart(call.id, text, render=result.render, blocks=result.blocks)


_LIMIT_WORDS: dict[StopReason, str] = {
    "budget_exceeded": "budget of tokens, cost, time or tool calls",
    "max_steps": "limit of model calls",
}


def _unanswered(history: Sequence[Message]) -> list[ToolCallPart]:
    """Calls of the last assistant message still waiting for a result, when only tool
    messages follow it (a run that was held for confirmation)."""
    answered: set[str] = set()
    for m in reversed(history):
        if m.role == "tool":
            answered.update(r.call_id for r in m.tool_results)
            continue
        if m.role == "assistant":
            return [c for c in m.tool_calls if c.id not in answered]
        return []
    return []


def _repaired(history: Sequence[Message]) -> list[Message]:
    """``history`` with a "not run" result for every call that never got one, so that
    an abandoned confirmation does not make the next request invalid."""
    out: list[Message] = []
    waiting: list[ToolCallPart] = []

    def close() -> None:
        if waiting:
            out.append(Message("tool", tuple(
                ToolResultPart(c.id, "not run: the user did not confirm it", True) for c in waiting
            )))
            waiting.clear()

    for m in history:
        if m.role == "tool":
            answered = {r.call_id for r in m.tool_results}
            waiting[:] = [c for c in waiting if c.id not in answered]
            out.append(m)
            continue
        close()
        out.append(m)
        if m.role == "assistant":
            waiting.extend(m.tool_calls)
    return out


async def run(
    provider: Provider,
    model: str,
    system: str | Sequence[SystemBlock],
    messages: Sequence[Message],
    tools: Sequence[ToolDef],
    context: ToolContext,
    options: RunOptions | None = None,
    *,
    session_tools: Sequence[ToolDef] = (),
    on_event: EventSink | None = None,
    cancel: CancelToken | None = None,
) -> RunResult:
    """Run one turn; see the module docstring. ``messages`` is the transcript so far
    (ending with the user's message, or with a held tool batch to resume).

    ``tools`` is the fixed tool list of the turn; ``session_tools`` adds tools that
    exist only for this conversation (editor-coupled, handlers that do not write).
    Events go to ``on_event`` in order; the last one is always ``DoneEvent``.
    Provider failures end the run with ``stop_reason == "error"`` (``result.error``);
    they are not raised.
    """
    options = options or RunOptions()
    entries: dict[str, _Entry] = {}
    settings = await anyio.to_thread.run_sync(_read_settings, context.workspace)
    for tool in (*tools, *session_tools):
        if tool.name in entries:
            raise ValueError(f"two tools named {tool.name!r} in one turn; tool names must be unique")
        entries[tool.name] = _Entry(tool)
    for tool in session_tools:
        entries[tool.name].session = True
    blocks = (SystemBlock(system),) if isinstance(system, str) else tuple(system)
    state = _Run(provider, model, tuple(b for b in blocks if b.text), list(messages), entries, context, options,
                 settings, on_event, cancel or CancelToken())
    return await state.go()
