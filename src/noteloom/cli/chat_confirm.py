"""``noteloom chat --pending | --approve ID | --decline ID``: decide, from a terminal, on the
tool calls web conversations wait on, and finish those turns here.

The turn resumes in this process (its answer streams to stdout, tool calls to stderr);
a web page that has the conversation open follows it through the stored events.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio
import typer

from noteloom.app import CHAT, App
from noteloom.chat import ChatService
from noteloom.cli.common import fail, opened, print_json
from noteloom.cli.conversation import Printer, follow, running_chat
from noteloom.workspace import User


def confirm_from_terminal(
    home: Path | None, *, pending: bool, approve: str | None, decline: str | None, as_json: bool = False
) -> None:
    if sum(bool(x) for x in (pending, approve, decline)) > 1:
        fail("give one of --pending, --approve MESSAGE_ID or --decline MESSAGE_ID")
    with opened(home) as app:
        owner = app.workspace.ensure_owner()
        if pending:
            _list(app, owner, as_json)
            return
        decision: Literal["approve", "decline"] = "approve" if approve else "decline"
        code = anyio.run(_decide, app, owner, str(approve or decline), decision)
        if code:
            raise SystemExit(code)


def _list(app: App, owner: User, as_json: bool) -> None:
    waiting = anyio.run(ChatService(app).pending, owner)
    if as_json:
        print_json(waiting)
        return
    if not waiting:
        typer.echo("No tool call is waiting for approval.")
        return
    for w in waiting:
        typer.echo(f"{w['message_id']}  [{w['conversation']}]  {w['description']}")
    typer.echo("Approve with `noteloom chat --approve MESSAGE_ID` (or --decline); a unique prefix of the id will do.")


async def _decide(app: App, owner: User, ref: str, decision: Literal["approve", "decline"]) -> int:
    chat = ChatService(app)
    waiting = await chat.pending(owner)
    matches = [w["message_id"] for w in waiting if w["message_id"].startswith(ref.strip().lower())]
    if len(matches) != 1:
        known = ", ".join(w["message_id"][:8] for w in waiting) or "none"
        what = "no waiting tool call" if not matches else f"{len(matches)} waiting tool calls"
        fail(f"{what} for message {ref!r} (waiting: {known}); `noteloom chat --pending` lists them")
    message_id = matches[0]

    def ask_again(description: str) -> Literal["approve", "decline"] | None:
        if not sys.stdin.isatty():
            return None  # left waiting: said below
        answer = typer.prompt(f"  {description} Allow? [y/N]", default="", show_default=False, err=True)
        return "approve" if answer.strip().lower() in ("y", "yes") else "decline"

    async with app.background(CHAT):
        chat = running_chat(app)  # the app's own, whose turn runner runs now
        seen = (await chat.message(owner, message_id))["last_seq"]
        await chat.confirm(owner, message_id, decision)
        typer.echo(f"{decision}d; finishing the turn…", err=True)
        # Shown as `noteloom chat` shows a turn: the answer on stdout, the calls on stderr.
        view = await follow(chat, owner, message_id, Printer(), ask_again, after=seen)
    if view["status"] == "awaiting_confirmation" and view["pending_action"]:
        typer.echo(f"waiting for approval again: {view['pending_action']['description']}\n"
                   f"run `noteloom chat --approve {message_id[:8]}` (or --decline)", err=True)
        return 0
    usage, cost = view["usage"] or {}, view["cost_usd"]
    typer.echo(f"[{view['model']}] {view['status']} · tokens: {usage.get('input_tokens', 0)} in, "
               f"{usage.get('output_tokens', 0)} out · cost: {'unknown' if cost is None else '$' + cost}", err=True)
    if view["status"] == "failed":
        typer.echo(f"error: {view['error']['message']}", err=True)
        return 1
    return 0

