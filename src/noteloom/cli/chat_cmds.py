"""``noteloom ask``, ``noteloom chat`` and ``noteloom models``: the agent in a terminal.

The answer streams to stdout; tool calls, confirmations and the closing tokens/cost
line go to stderr, so ``noteloom ask … > answer.md`` keeps just the answer.
"""

from __future__ import annotations

import functools
import json
import secrets
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import anyio
import typer

from noteloom.agent import (
    ActivityEvent,
    Budgets,
    Decision,
    DoneEvent,
    PendingEvent,
    RunEvent,
    RunOptions,
    RunResult,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    run,
)
from noteloom.agent.framing import fence
from noteloom.agent.steps import StepJoiner, visible_text
from noteloom.app import App
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, fail_with, opened, print_json
from noteloom.errors import InvalidInput
from noteloom.messages import Message, TextDelta, ThinkingDelta, Usage, usage_to_dict
from noteloom.policy import POLICIES, Policy
from noteloom.providers import THINKING_LEVELS, Provider, ThinkingLevel, capabilities_of
from noteloom.runs.spend import admission, cap_of, record_usage
from noteloom.tools import ToolContext, ToolDef

SYSTEM_PROMPT = (
    "You are the assistant inside noteloom, the user's notes workspace. Today is {today}. "
    "When a question may concern the user's notes, use the tools to look before answering, and say "
    "plainly when nothing matches. Answer in Markdown, briefly."
)
MODEL_OPTION = typer.Option(None, "--model", "-m", help="provider:model (default: $NOTELOOM_MODEL, else providers.default in noteloom.toml; `noteloom models` lists them).")
YES_OPTION = typer.Option(False, "--yes", "-y", help="Approve every tool call that asks for confirmation.")
THINKING_OPTION = typer.Option(None, "--thinking", help="How hard the model thinks: off, low, medium or high.")
# Budgets per turn; unset, [agent] in noteloom.toml decides (then the defaults).
MAX_COST_OPTION = typer.Option(None, "--max-cost", metavar="USD",
                               help="Cost budget per turn in USD: no model call is made whose worst case would pass it.")
MAX_STEPS_OPTION = typer.Option(None, "--max-steps", metavar="N", help="Model calls per turn (default 8).")
MAX_TOKENS_OPTION = typer.Option(None, "--max-tokens", metavar="N", help="Output tokens per turn, reasoning included.")
TIMEOUT_OPTION = typer.Option(None, "--timeout", metavar="SECONDS",
                              help="Wall-clock limit per turn; a model still streaming then is cut off.")
POLICY_OPTION = typer.Option(None, "--policy", metavar="TOOL=POLICY",
                             help="This run's policy for a tool (auto, confirm or deny; repeat for more). "
                                  "A deny from `noteloom tools policy` or noteloom.toml still wins.")


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
    app.command("chat")(chat)
    app.command("models")(models)


def stdin_is_tty() -> bool:
    """Whether a person can answer y/N prompts (a seam for tests)."""
    return sys.stdin.isatty()


def ask(
    question: str | None = typer.Argument(None, help="What to ask (default: the text piped to stdin)."),
    model: str | None = MODEL_OPTION,
    note: str | None = typer.Option(None, "--note", help="Give the model this note (by id) as context."),
    yes: bool = YES_OPTION,
    thinking: str | None = THINKING_OPTION,
    home: Path | None = HOME_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the answer, usage, cost and tool calls as one JSON object."),
    max_cost: str | None = MAX_COST_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    max_tokens: int | None = MAX_TOKENS_OPTION,
    timeout: float | None = TIMEOUT_OPTION,
    policy: list[str] | None = POLICY_OPTION,
) -> None:
    """Ask the model one question; it may use the workspace tools. Streams the answer.

    Text piped to stdin goes with the question as an attached, fenced context
    (`cat notes.md | noteloom ask "summarise"`); with no question, it is the question.
    """
    level = _thinking(thinking)
    budgets = _budgets(max_cost, max_steps, max_tokens, timeout)
    policies = _policies(policy)
    piped = None if stdin_is_tty() else _read_stdin()
    if question is None or not question.strip():
        if not piped or not piped.strip():
            fail('give a question (`noteloom ask "…"`) or pipe one to stdin')
        question, piped = piped, None
    with opened(home) as app:
        session = _session(app, model, yes, level)
        session.as_json = as_json
        session.policies = policies
        session.budgets = budgets.over(Budgets.from_file(app.settings.file))
        text = _with_note(app, question, note, session.nonce) if note else question
        if piped:
            text = _with_stdin(text, piped, session.nonce)
            session.untrusted = True
        result = anyio.run(session.ask, [Message.user(text)])
        if as_json:
            session.print_json(result)
        else:
            session.print_totals()
        _exit_for(result)


def chat(
    model: str | None = MODEL_OPTION,
    yes: bool = YES_OPTION,
    thinking: str | None = THINKING_OPTION,
    home: Path | None = HOME_OPTION,
    pending: bool = typer.Option(False, "--pending", help="List the tool calls web conversations wait on."),
    approve: str | None = typer.Option(None, "--approve", metavar="MESSAGE_ID", help="Approve one and finish its turn here."),
    decline: str | None = typer.Option(None, "--decline", metavar="MESSAGE_ID", help="Decline one and finish its turn here."),
    latest: bool = typer.Option(False, "--continue", "-c", help="Continue the conversation active most recently."),
    conversation: str | None = typer.Option(None, "--conversation", metavar="ID",
                                            help="Continue this conversation (its id, or a unique prefix)."),
    max_cost: str | None = MAX_COST_OPTION,
    max_steps: int | None = MAX_STEPS_OPTION,
    max_tokens: int | None = MAX_TOKENS_OPTION,
    timeout: float | None = TIMEOUT_OPTION,
    policy: list[str] | None = POLICY_OPTION,
    attach: list[Path] | None = typer.Option(
        None, "--attach", metavar="FILE",
        help="Send this file with the first message (repeat for more): images, PDF, text, Markdown, CSV, JSON, HTML."),
) -> None:
    """A conversation in the terminal: one message per line, until end of input (Ctrl-D).

    It is stored like a web chat (it shows in the web chat's list); /clear, /model ID,
    /system TEXT and /cost act on it instead of reaching the model. Files given with
    --attach go with the first message (checked as the web chat checks them).
    With --pending, --approve or --decline: decide on a web conversation's held tool call instead.
    """
    if pending or approve or decline:
        from noteloom.cli.chat_confirm import confirm_from_terminal

        confirm_from_terminal(home, pending=pending, approve=approve, decline=decline)
        return
    from noteloom.cli.conversation import read_stdin_line, run_conversation

    level = _thinking(thinking)
    controls: dict[str, object] = {}
    if model:
        controls["model"] = model
    if level:
        controls["thinking_level"] = level
    # Budgets given here become the conversation's own, as the web chat's controls do.
    budgets = _budgets(max_cost, max_steps, max_tokens, timeout)
    for key, value in (("max_steps", budgets.max_steps), ("max_tokens", budgets.max_output_tokens),
                       ("max_cost", None if budgets.max_cost is None else str(budgets.max_cost)),
                       ("time_limit", budgets.time_limit)):
        if value is not None:
            controls[key] = value
    if policy:  # the conversation's own policies, replacing any it had (as the web chat's controls do)
        controls["tool_policies"] = _policies(policy)
    for path in attach or ():
        if not path.is_file():
            raise typer.BadParameter(f"{str(path)!r} is not a file", param_hint="--attach")
    with opened(home) as app:
        run_conversation(app, controls=controls, conversation_ref=conversation, latest=latest,
                         decide=lambda description: decide_call(description, yes), interactive=stdin_is_tty(),
                         read_line=read_stdin_line, attach=list(attach or ()))


def models(home: Path | None = HOME_OPTION, as_json: bool = JSON_OPTION) -> None:
    """List the configured providers, their models and whether they are ready."""
    with opened(home) as app:
        registry = app.services.providers
        infos = registry.describe()
        try:
            default = registry.default_address()
        except Exception:  # a broken default must not hide the list that helps fix it
            default = None
        # What each listed model reads besides text (images, whole PDFs): declared by its
        # provider or in its table, text-only otherwise.
        reads: dict[str, dict[str, bool]] = {}
        for info in infos:
            if info.ready:
                provider = registry.get(info.name)
                for m in dict.fromkeys([m for m in [info.default_model, *info.models] if m]):
                    caps = capabilities_of(provider, m)
                    reads[f"{info.name}:{m}"] = {"vision": caps.vision, "document": caps.document}
        if as_json:
            print_json({"default": default, "providers": infos, "capabilities": reads})
            return
        typer.echo(f"default model: {default}" if default else f"default model: none ({registry.no_model_help()})")
        for info in infos:
            # Where the text goes: a private server (local, or marked private) or a remote one.
            where = "private" if info.private else "remote" if info.private is not None else "?"
            head = f"{info.name:<12} {info.type:<10} {where:<7}"
            if not info.ready:
                typer.echo(f"{head} not ready: {info.problem}")
                continue
            names = list(dict.fromkeys([m for m in [info.default_model, *info.models] if m]))
            listed = ", ".join(f"{info.name}:{m}{_reads(reads.get(f'{info.name}:{m}'))}" for m in names) or (
                f"{info.name}:MODEL (any model name)")
            extra = f"  [{info.base_url}]" if info.base_url else ""
            typer.echo(f"{head} {listed}{extra}")


def _reads(caps: dict[str, bool] | None) -> str:
    """`` (reads images, PDFs)`` for a model that reads more than text; nothing otherwise."""
    kinds = [word for key, word in (("vision", "images"), ("document", "PDFs")) if caps and caps.get(key)]
    return f" (reads {', '.join(kinds)})" if kinds else ""


# -- the session -------------------------------------------------------------------------


@dataclass
class _Session:
    """One provider/model, the tools, and the running totals of a terminal session."""

    provider: Provider
    model: str
    tools: list[ToolDef]
    context: ToolContext
    approve_all: bool
    thinking: ThinkingLevel | None
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = Decimal(0)
    #: ``ask --json``: nothing streams; one JSON object is printed at the end.
    as_json: bool = False
    #: One fence nonce for the session: the text it fences and the contract name the same marker.
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))
    #: The first message carries fenced text (piped stdin, a clipped note).
    untrusted: bool = False
    tool_calls: list[dict[str, object]] = field(default_factory=list)
    #: The turn's budgets: the command line's over [agent] in noteloom.toml.
    budgets: Budgets = field(default_factory=Budgets)
    #: This run's tool policies (--policy), the last layer of noteloom.policy.
    policies: dict[str, Policy] = field(default_factory=dict)
    _line_open: bool = False
    _ended_early: bool = False
    _steps: StepJoiner = field(default_factory=StepJoiner)

    @property
    def address(self) -> str:
        return f"{self.provider.name}:{self.model}"

    async def ask(self, history: list[Message]) -> RunResult:
        """One turn, then the provider's connections are closed."""
        try:
            return await self.turn(history)
        finally:
            await self.provider.aclose()

    async def converse(self, interactive: bool) -> None:
        """Turns from stdin, one line each, until end of input."""
        history: list[Message] = []
        if interactive:
            self._err(f"Chatting with {self.address}. End with Ctrl-D.")
        try:
            while True:
                if interactive:
                    typer.echo("you> ", nl=False, err=True)
                line = await anyio.to_thread.run_sync(sys.stdin.readline)
                if not line:
                    return
                text = line.strip()
                if not text:
                    continue
                history.append(Message.user(text))
                result = await self.turn(history)
                history.extend(result.messages)
                typer.echo("", err=True)
                if result.stop_reason == "error":
                    # A failed turn stays out of the history the next turn sends.
                    del history[-1 - len(result.messages) :]
        finally:
            await self.provider.aclose()

    async def turn(self, history: list[Message]) -> RunResult:
        """Run until the turn settles, asking y/N for each held call in between."""
        system = SYSTEM_PROMPT.format(today=datetime.now(UTC).strftime("%A %d %B %Y"))
        transcript = list(history)
        appended: list[Message] = []
        decisions: dict[str, Decision] = {}
        spent = Usage()
        spent_cost: Decimal | None = Decimal(0)
        steps = 0
        while True:
            ws = self.context.workspace
            cap = cap_of(await anyio.to_thread.run_sync(ws.settings_with_prefix, "limits.", "workspace."))
            options = RunOptions(thinking=self.thinking, decisions=decisions, nonce=self.nonce, policies=self.policies,
                                 untrusted=True if self.untrusted else None, admit=admission(ws.engine, cap))
            # A turn resumed after a y/N answer is one turn: what it spent counts against its budgets.
            options = self.budgets.left_after(steps, spent.output_tokens, spent_cost).options(options)
            result = await run(self.provider, self.model, system, transcript, self.tools, self.context, options,
                               on_event=self.show)
            # Counted with the chat's and the recipes' runs against the workspace's monthly cap.
            await anyio.to_thread.run_sync(functools.partial(
                record_usage, ws.engine, kind="cli_turn", user_id=self.context.user.id if self.context.user else None,
                model=self.address, input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens,
                cost=result.cost))
            self._add(result)
            steps += result.steps
            spent = spent + result.usage
            spent_cost = None if spent_cost is None or result.cost is None else spent_cost + result.cost
            transcript.extend(result.messages)
            appended.extend(result.messages)
            if result.stop_reason != "awaiting_confirmation" or result.pending is None:
                result.messages = appended
                return result
            decision = await anyio.to_thread.run_sync(self._decide, result.pending.description)
            decisions = {result.pending.call_id: decision}

    def _decide(self, description: str) -> Decision:
        return decide_call(description, self.approve_all)

    def _add(self, result: RunResult) -> None:
        self.usage = self.usage + result.usage
        if result.cost is None or self.cost is None:
            self.cost = None
        else:
            self.cost += result.cost

    async def show(self, event: RunEvent) -> None:
        if isinstance(event, ActivityEvent):
            self._steps.boundary()
            if not self.as_json and event.label.startswith("Waiting for") and status_is_tty():
                self._end_line()
                self._err(event.label)
        if isinstance(event, ToolCallEvent):
            self.tool_calls.append({"call_id": event.call_id, "name": event.name, "arguments": event.arguments,
                                    "result": None, "is_error": None})
        elif isinstance(event, ToolResultEvent):
            for call in self.tool_calls:
                if call["call_id"] == event.call_id:
                    call.update(result=event.content, is_error=event.is_error)
        if self.as_json:
            return
        if isinstance(event, TextDelta):
            # Steps joined as the final text joins them (a blank line between model calls).
            text = self._steps.text(event.text)
            if self._ended_early and text.startswith("\n"):
                text = text[1:]  # the line was ended already, when a tool call was shown
            if text:
                self._ended_early = False
            sys.stdout.write(text)
            sys.stdout.flush()
            if text:
                self._line_open = not text.endswith("\n")
        elif isinstance(event, ThinkingDelta | ActivityEvent | UsageEvent | PendingEvent):
            return
        elif isinstance(event, ToolCallEvent):
            self._end_line()
            args = json.dumps(event.arguments, ensure_ascii=False)
            self._err(f"→ {event.name} {args if len(args) <= 200 else args[:199] + '…'}")
        elif isinstance(event, ToolResultEvent):
            first = event.content.strip().splitlines()[0] if event.content.strip() else ""
            if event.is_error:
                self._err(f"  ✗ {first[:200]}")
            else:
                self._err(f"  ✓ {len(event.content)} characters")
        elif isinstance(event, DoneEvent):
            self._end_line()
            if event.reason == "max_steps":
                self._err("stopped: the turn reached its limit of model calls")
            elif event.reason == "budget_exceeded":
                self._err(f"stopped: the turn reached its {LIMIT_WORDS.get(event.limit or '', 'budget')}")
            elif event.reason == "cancelled":
                self._err("stopped")

    def print_json(self, result: RunResult) -> None:
        error = {"code": result.error.code, "message": str(result.error)} if result.error is not None else None
        print_json({
            "answer": visible_text(result.messages),
            "model": self.address,
            "stop_reason": result.stop_reason,
            "limit": result.limit,  # the budget that stopped the turn, if one did
            "usage": usage_to_dict(self.usage),
            "cost_usd": None if self.cost is None else str(self.cost),
            "tool_calls": [{k: v for k, v in c.items() if k != "call_id"} for c in self.tool_calls],
            "error": error,
        })

    def print_totals(self) -> None:
        u = self.usage
        cached = f" ({u.cache_read_tokens} cached)" if u.cache_read_tokens else ""
        cost = "unknown" if self.cost is None else f"${self.cost:.4f}"
        self._err(f"[{self.address}] tokens: {u.input_tokens} in{cached}, {u.output_tokens} out · cost: {cost}")

    def _end_line(self) -> None:
        if self._line_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._line_open = False
            self._ended_early = True

    @staticmethod
    def _err(text: str) -> None:
        typer.echo(text, err=True)


#: How the terminal names the budget that stopped a turn.
LIMIT_WORDS = {
    "max_cost": "cost budget (--max-cost, or max_cost in [agent])",
    "max_output_tokens": "budget of output tokens (--max-tokens, or max_output_tokens in [agent])",
    "time_limit": "time limit (--timeout, or time_limit in [agent])",
    "workspace_cap": "workspace's monthly cap, counted over chats and recipes (`noteloom recipes cap`)",
}


def status_is_tty() -> bool:
    """Whether stderr is a terminal, where the activity line helps (a seam for tests)."""
    return sys.stderr.isatty()


def _budgets(max_cost: str | None, max_steps: int | None, max_tokens: int | None, timeout: float | None) -> Budgets:
    """The command line's budgets, checked (one line naming the option when one is wrong)."""
    try:
        return Budgets.checked(max_steps=max_steps, max_output_tokens=max_tokens, max_cost=max_cost,
                               time_limit=timeout)
    except InvalidInput as exc:
        options = {"max_steps": "--max-steps", "max_output_tokens": "--max-tokens", "max_cost": "--max-cost",
                   "time_limit": "--timeout"}
        fail_with(exc, options)


def decide_call(description: str, approve_all: bool) -> Decision:
    """The terminal's answer to a held call: --yes approves, a person answers y/N, and
    without a terminal to ask the call is declined."""
    if approve_all:
        typer.echo(f"  approved (--yes): {description}", err=True)
        return "approve"
    if not stdin_is_tty():
        typer.echo(f"  declined: {description} (no terminal to ask; pass --yes to approve such calls)", err=True)
        return "decline"
    answer = typer.prompt(f"  {description} Allow? [y/N]", default="", show_default=False, err=True)
    return "approve" if answer.strip().lower() in ("y", "yes") else "decline"


def _session(app: App, model: str | None, yes: bool, thinking: ThinkingLevel | None) -> _Session:
    registry = app.services.providers
    provider, name = registry.resolve(model)
    tools = app.registry.enabled(app.workspace)
    # Tools learn what the model reads (a note's image goes to it only with vision).
    context = app.tool_context(app.workspace.ensure_owner(), model_capabilities=capabilities_of(provider, name))
    return _Session(provider, name, tools, context, yes, thinking)


def _policies(values: list[str] | None) -> dict[str, Policy]:
    """``--policy TOOL=POLICY`` options as a table."""
    out: dict[str, Policy] = {}
    for value in values or []:
        name, _, policy = value.partition("=")
        if not name.strip() or policy not in POLICIES:
            fail(f"--policy {value!r}: write TOOL=POLICY with a policy of {', '.join(POLICIES)}, e.g. delete_note=deny")
        out[name.strip()] = policy
    return out


def _thinking(value: str | None) -> ThinkingLevel | None:
    if value is None:
        return None
    if value not in THINKING_LEVELS:
        fail(f"--thinking {value!r} is not a level; use one of {', '.join(THINKING_LEVELS)}")
    return value


def _with_note(app: App, question: str, note_id: str, nonce: str) -> str:
    note = app.workspace.get_note(note_id)
    body = note.body
    if note.source_url:
        # Clipped from the web: fenced like any other text the user did not write.
        body = fence(body, nonce)
    return f"{question}\n\n---\nThe note I have open, {note.title!r} (id {note.id}):\n\n{body}"


#: Piped stdin larger than this is refused (the model would not read it whole anyway).
STDIN_MAX = 1_000_000


def _read_stdin() -> str:
    """All of stdin, as text (invalid UTF-8 replaced, not fatal)."""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(STDIN_MAX * 4 + 1) if stream is not None else sys.stdin.read().encode("utf-8", "replace")
    text = data.decode("utf-8", errors="replace")
    if len(text) > STDIN_MAX:
        fail(f"the text piped to stdin is over {STDIN_MAX} characters; pipe a smaller part of it")
    return text


def _with_stdin(question: str, piped: str, nonce: str) -> str:
    """The question with the piped text attached after it, fenced as material (it may be a web
    page or a log as easily as the user's own notes): instructions inside it are not orders."""
    return f"{question}\n\n---\nThe text piped to me on standard input:\n\n{fence(piped.rstrip(), nonce)}"


def _exit_for(result: RunResult) -> None:
    if result.stop_reason == "error" and result.error is not None:
        fail(f"{result.error} [{result.error.code}]")
    if result.stop_reason == "cancelled":
        raise SystemExit(130)
