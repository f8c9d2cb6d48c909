"""``noteloom chat`` as a client of the chat service: the web chat's conversations, in a terminal.

Every line typed is sent through ``ChatService.send`` exactly as the web page sends it, so
the terminal stores the same rows (the conversation shows in the web chat's list and in
``GET /api/v1/chat/conversations``), gets the same slash commands (``/clear``, ``/model``,
``/system``, ``/cost``: never sent to a model), the same history cap and the same approval
policy. The turn runs in this process (the app's chat, as ``chat --approve`` runs it);
its stored events stream here: the answer to stdout, tool calls, command replies, y/N
questions and the closing totals to stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import anyio
import typer
from anyio import to_thread

from noteloom.app import CHAT, App
from noteloom.attachments import AttachmentLimits
from noteloom.chat import ChatService
from noteloom.chat.attachments import Upload
from noteloom.chat.records import Conversation
from noteloom.errors import ConfigError, InvalidInput, NoteloomError, NotFound
from noteloom.workspace import User

Decision = Literal["approve", "decline"]
#: Asked with the held call's description; ``None`` leaves the call waiting (decided later).
Decide = Callable[[str], Decision | None]


def find_conversation(chat: ChatService, owner: User, ref: str | None, latest: bool) -> Conversation | None:
    """The conversation ``--conversation REF`` (an id or a unique prefix) or ``-c`` (the one
    active most recently) names; ``None`` for a new one."""
    if ref is None and not latest:
        return None
    every = chat.stores.conversations.find(owner.id, limit=10_000)
    if ref is None:
        if not every:
            raise NotFound("there is no conversation to continue yet; run `noteloom chat` to start one")
        return max(every, key=lambda c: (c.updated_time, c.id))
    wanted = ref.strip().lower()
    matches = [c for c in every if c.id == wanted] or [c for c in every if wanted and c.id.startswith(wanted)]
    if len(matches) != 1:
        what = "no conversation" if not matches else f"{len(matches)} conversations"
        raise InvalidInput(f"{what} with id {ref!r}; the web chat's list or "
                           "`GET /api/v1/chat/conversations` shows the ids (a unique prefix will do)")
    return matches[0]


@dataclass
class Printer:
    """The answer on stdout, everything else on stderr, with a line ended before a note."""

    line_open: bool = False
    #: ``end_line`` ended the answer's line early: the step break that follows needs one newline less.
    ended_early: bool = False

    def text(self, text: str) -> None:
        if self.ended_early and text.startswith("\n"):
            text = text[1:]
        if not text:
            return
        self.ended_early = False
        sys.stdout.write(text)
        sys.stdout.flush()
        self.line_open = not text.endswith("\n")

    def end_line(self) -> None:
        if self.line_open:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.line_open = False
            self.ended_early = True

    def note(self, text: str) -> None:
        self.end_line()
        typer.echo(text, err=True)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """One stored turn event, as the terminal shows it."""
        if kind == "text":
            self.text(str(data.get("text", "")))
        elif kind == "tool_call":
            args = json.dumps(data.get("arguments"), ensure_ascii=False)
            self.note(f"→ {data.get('name')} {args if len(args) <= 200 else args[:199] + '…'}")
        elif kind == "tool_result":
            content = str(data.get("content", ""))
            if data.get("is_error"):
                first = content.strip().splitlines()[0] if content.strip() else ""
                self.note(f"  ✗ {first[:200]}")
            else:
                self.note(f"  ✓ {len(content)} characters")
        elif kind == "activity" and str(data.get("label", "")).startswith("Waiting for"):
            from noteloom.cli.chat_cmds import status_is_tty

            if status_is_tty():
                self.note(str(data["label"]))
        elif kind == "done" and data.get("stop_reason") in ("max_steps", "budget_exceeded"):
            from noteloom.cli.chat_cmds import LIMIT_WORDS

            limit = str(data.get("limit") or "")
            words = "limit of model calls" if limit == "max_steps" else LIMIT_WORDS.get(limit, "budget")
            self.note(f"stopped: the turn reached its {words}")


async def follow(
    chat: ChatService, owner: User, message_id: str, printer: Printer, decide: Decide, *, after: int = 0
) -> dict[str, Any]:
    """Show a stored turn's events until it settles, asking ``decide`` for each held call;
    the message as it stands at the end."""
    seen = after
    while True:
        async for event in chat.events(owner, message_id, seen):
            printer.event(event.kind, event.data)
            seen = event.seq
        view = await chat.message(owner, message_id)
        if view["status"] != "awaiting_confirmation" or not view["pending_action"]:
            printer.end_line()
            return view
        printer.end_line()
        decision = await to_thread.run_sync(decide, view["pending_action"]["description"])
        if decision is None:
            return view
        await chat.confirm(owner, message_id, decision)


@dataclass
class Totals:
    """Tokens and cost of the turns this session ran."""

    model: str | None = None
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = Decimal(0)
    seen: set[str] = field(default_factory=set)

    def add(self, view: dict[str, Any]) -> None:
        usage = view.get("usage") or {}
        self.model = view.get("model") or self.model
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.cached_tokens += int(usage.get("cache_read_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))
        cost = view.get("cost_usd")
        self.cost = None if cost is None or self.cost is None else self.cost + Decimal(cost)

    def line(self, fallback: str) -> str:
        cached = f" ({self.cached_tokens} cached)" if self.cached_tokens else ""
        cost = "unknown" if self.cost is None else f"${self.cost:.4f}"
        return (f"[{self.model or fallback}] tokens: {self.input_tokens} in{cached}, "
                f"{self.output_tokens} out · cost: {cost}")


async def converse(
    app: App, *, controls: dict[str, Any], conversation_ref: str | None, latest: bool, decide: Decide,
    interactive: bool, read_line: Callable[[], str], attach: Sequence[Path] = (),
) -> None:
    """Lines from ``read_line`` as messages of one stored conversation, until end of input;
    the files ``attach`` names go with the first message."""
    chat = ChatService(app)
    files = await to_thread.run_sync(read_files, attach, chat.settings.attachments)
    owner = app.workspace.ensure_owner()
    printer = Printer()
    totals = Totals()
    if controls.get("model"):
        controls = {**controls, "model": await to_thread.run_sync(chat.check_model, controls["model"])}
    conv = await to_thread.run_sync(find_conversation, chat, owner, conversation_ref, latest)
    conversation_id = conv.id if conv else None
    if conv is not None and controls:
        await chat.update_conversation(owner, conv.id, controls=controls)
    fallback = controls.get("model") or (conv.controls.model if conv else None) or _default_model(chat)
    if interactive:
        where = f"Continuing {conv.title!r} ({conv.id[:8]})" if conv else "Chatting"
        printer.note(f"{where} with {fallback}. /clear, /model ID, /system TEXT, /cost; end with Ctrl-D.")
    async with app.background(CHAT):
        chat = running_chat(app)  # the app's own, whose turn runner runs now
        while True:
            if interactive:
                typer.echo("you> ", nl=False, err=True)
            line = await to_thread.run_sync(read_line)
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            with_files = files if files and not text.startswith("/") else []
            try:
                # The session's options go with the message that creates the conversation.
                sent = await chat.send(owner, text, conversation_id=conversation_id,
                                       controls=controls if conversation_id is None else None,
                                       attachments=with_files)
            except NoteloomError as exc:
                printer.note(f"error: {exc}")
                continue
            finally:
                if with_files:
                    files = []  # sent, or refused with the reason: either way not sent again
            conversation_id = sent.conversation_id
            if sent.user_message_id is None:  # a slash command: its reply is a note row
                printer.note((await chat.message(owner, sent.message_id))["content"])
                continue
            view = await follow(chat, owner, sent.message_id, printer, decide)
            totals.add(view)
            if view["status"] == "failed" and view.get("error"):
                error = view["error"]
                printer.note(f"error: {error['message']} [{error['code']}]")
            elif view["status"] == "awaiting_confirmation":
                printer.note(f"waiting for approval: run `noteloom chat --approve {sent.message_id[:8]}` (or --decline)")
            typer.echo("", err=True)
    if conversation_id is not None:
        printer.note(f"conversation {conversation_id[:8]} · continue with `noteloom chat -c` "
                     f"or `--conversation {conversation_id[:8]}`")
    printer.note(totals.line(fallback))


def running_chat(app: App) -> ChatService:
    """The app's chat, whose turn runner runs (within ``app.background(CHAT)``)."""
    chat = app.services.chat
    if chat is None:
        raise RuntimeError("the chat is not running in this app")
    return chat


def _default_model(chat: ChatService) -> str:
    """The model a new turn would use, for the greeting (no provider is asked anything)."""
    try:
        return chat.runner.resolve_model(chat.settings.model)[2]
    except ConfigError:
        return "no model configured"


def read_files(paths: Sequence[Path], limits: AttachmentLimits) -> list[Upload]:
    """The files to attach, each read up to one byte past the largest cap (the send's check
    then names the cap its kind has)."""
    largest = max(limits.image_bytes, limits.pdf_bytes, limits.text_bytes)
    out = []
    for path in paths:
        with path.open("rb") as f:
            out.append(Upload(path.name, f.read(largest + 1)))
    return out


def read_stdin_line() -> str:
    return sys.stdin.readline()


def run_conversation(app: App, **kwargs: Any) -> None:
    anyio.run(lambda: converse(app, **kwargs))
