"""``noteloom ask``, ``noteloom chat`` and ``noteloom models``: the agent in a terminal.

The answer streams to stdout; tool calls, confirmations and the closing tokens/cost
line go to stderr, so ``noteloom ask … > answer.md`` keeps just the answer.
"""

from __future__ import annotations

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
from noteloom.app import App
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json
from noteloom.messages import Message, TextDelta, ThinkingDelta, Usage
from noteloom.providers import THINKING_LEVELS, Provider, ProviderRegistry, ThinkingLevel
from noteloom.providers.registry import NO_MODEL_HELP
from noteloom.tools import ToolContext, ToolDef

SYSTEM_PROMPT = (
    "You are the assistant inside noteloom, the user's notes workspace. Today is {today}. "
    "When a question may concern the user's notes, use the tools to look before answering, and say "
    "plainly when nothing matches. Answer in Markdown, briefly."
)
MODEL_OPTION = typer.Option(None, "--model", "-m", help="provider:model (default: $NOTELOOM_MODEL, else providers.default in noteloom.toml; `noteloom models` lists them).")
YES_OPTION = typer.Option(False, "--yes", "-y", help="Approve every tool call that asks for confirmation.")
THINKING_OPTION = typer.Option(None, "--thinking", help="How hard the model thinks: off, low, medium or high.")


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
    app.command("chat")(chat)
    app.command("models")(models)


def stdin_is_tty() -> bool:
    """Whether a person can answer y/N prompts (a seam for tests)."""
    return sys.stdin.isatty()


def ask(
    question: str = typer.Argument(..., help="What to ask."),
    model: str | None = MODEL_OPTION,
    note: str | None = typer.Option(None, "--note", help="Give the model this note (by id) as context."),
    yes: bool = YES_OPTION,
    thinking: str | None = THINKING_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Ask the model one question; it may use the workspace tools. Streams the answer."""
    level = _thinking(thinking)
    with opened(home) as app:
        session = _session(app, model, yes, level)
        message = Message.user(_with_note(app, question, note) if note else question)
        result = anyio.run(session.ask, [message])
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
) -> None:
    """A conversation in the terminal: one message per line, until end of input (Ctrl-D).

    With --pending, --approve or --decline: decide on a web conversation's held tool call instead.
    """
    if pending or approve or decline:
        from noteloom.cli.chat_confirm import confirm_from_terminal

        confirm_from_terminal(home, pending=pending, approve=approve, decline=decline)
        return
    level = _thinking(thinking)
    with opened(home) as app:
        session = _session(app, model, yes, level)
        # One event loop for the whole conversation: the provider's connections belong to it.
        anyio.run(session.converse, stdin_is_tty())
        session.print_totals()


def models(home: Path | None = HOME_OPTION, as_json: bool = JSON_OPTION) -> None:
    """List the configured providers, their models and whether they are ready."""
    with opened(home) as app:
        registry: ProviderRegistry = app.services["providers"]
        infos = registry.describe()
        try:
            default = registry.default_address()
        except Exception:  # a broken default must not hide the list that helps fix it
            default = None
        if as_json:
            print_json({"default": default, "providers": infos})
            return
        typer.echo(f"default model: {default}" if default else f"default model: none ({NO_MODEL_HELP})")
        for info in infos:
            where = "local" if info.local else "remote" if info.local is not None else "?"
            head = f"{info.name:<12} {info.type:<10} {where:<6}"
            if not info.ready:
                typer.echo(f"{head} not ready: {info.problem}")
                continue
            names = list(dict.fromkeys([m for m in [info.default_model, *info.models] if m]))
            listed = ", ".join(f"{info.name}:{m}" for m in names) or f"{info.name}:MODEL (any model name)"
            extra = f"  [{info.base_url}]" if info.base_url else ""
            typer.echo(f"{head} {listed}{extra}")


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
    _line_open: bool = False

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
        while True:
            options = RunOptions(thinking=self.thinking, decisions=decisions)
            result = await run(self.provider, self.model, system, transcript, self.tools, self.context, options,
                               on_event=self.show)
            self._add(result)
            transcript.extend(result.messages)
            appended.extend(result.messages)
            if result.stop_reason != "awaiting_confirmation" or result.pending is None:
                result.messages = appended
                return result
            decision = await anyio.to_thread.run_sync(self._decide, result.pending.description)
            decisions = {result.pending.call_id: decision}

    def _decide(self, description: str) -> Decision:
        if self.approve_all:
            self._err(f"  approved (--yes): {description}")
            return "approve"
        if not stdin_is_tty():
            self._err(f"  declined: {description} (no terminal to ask; pass --yes to approve such calls)")
            return "decline"
        answer = typer.prompt(f"  Allow {description}? [y/N]", default="", show_default=False, err=True)
        return "approve" if answer.strip().lower() in ("y", "yes") else "decline"

    def _add(self, result: RunResult) -> None:
        self.usage = self.usage + result.usage
        if result.cost is None or self.cost is None:
            self.cost = None
        else:
            self.cost += result.cost

    async def show(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta):
            sys.stdout.write(event.text)
            sys.stdout.flush()
            self._line_open = not event.text.endswith("\n")
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
                self._err("stopped: the turn used up its budget of tokens or cost")
            elif event.reason == "cancelled":
                self._err("stopped")

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

    @staticmethod
    def _err(text: str) -> None:
        typer.echo(text, err=True)


def _session(app: App, model: str | None, yes: bool, thinking: ThinkingLevel | None) -> _Session:
    registry: ProviderRegistry = app.services["providers"]
    provider, name = registry.resolve(model)
    tools = app.registry.enabled(app.workspace)
    context = app.tool_context(app.workspace.ensure_owner())
    return _Session(provider, name, tools, context, yes, thinking)


def _thinking(value: str | None) -> ThinkingLevel | None:
    if value is None:
        return None
    if value not in THINKING_LEVELS:
        fail(f"--thinking {value!r} is not a level; use one of {', '.join(THINKING_LEVELS)}")
    return value


def _with_note(app: App, question: str, note_id: str) -> str:
    note = app.workspace.get_note(note_id)
    body = note.body
    if note.source_url:
        # Clipped from the web: fenced like any other text the user did not write.
        nonce = secrets.token_hex(8)
        body = f"<<UNTRUSTED_{nonce}>>\n{body}\n<</UNTRUSTED_{nonce}>>"
    return f"{question}\n\n---\nThe note I have open, {note.title!r} (id {note.id}):\n\n{body}"


def _exit_for(result: RunResult) -> None:
    if result.stop_reason == "error" and result.error is not None:
        fail(f"{result.error} [{result.error.code}]")
    if result.stop_reason == "cancelled":
        raise SystemExit(130)
