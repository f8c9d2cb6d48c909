"""The weekly review prompt: what changed in a notebook (and below it) in the last seven days."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from noteloom import db
from noteloom.default_plugins.mcp_prompts.build import any_clipped, attachments, line, with_rule
from noteloom.default_plugins.mcp_prompts.gather import Found, books, notes_by_id, subtree
from noteloom.tools import ToolContext
from noteloom.workspace import Note
from noteloom.workspace.model import iso_time

DAY_MS = 86_400_000
#: The period a weekly review covers.
DAYS = 7
#: At most this many notes per list (changed, open to-dos); the text says when there are more.
LIST_MAX = 100


@dataclass(frozen=True)
class Week:
    """What a notebook's week was, as gathered."""

    path: str
    since: int
    now: int
    found: Found
    created: list[Note]
    updated: list[Note]
    done: list[Note]
    open: list[Note]
    overdue: list[Note]
    more_changed: bool
    more_open: bool


def gather(ctx: ToolContext, ref: str) -> Week:
    """The week of the notebook ``ref`` names (its id, path or title), as the asker sees it."""
    ws = ctx.workspace
    now = db.now_ms()
    since = now - DAYS * DAY_MS
    n = db.notes
    with ws.read() as c:
        b = books(ctx, c)
        root = b.resolve(ref)
        ids = sorted(subtree(b, root))
        live = [n.c.deleted_time.is_(None), n.c.notebook_id.in_(ids)]
        changed = c.execute(
            sa.select(n.c.id).where(*live, n.c.updated_time >= since)
            .order_by(n.c.updated_time.desc(), n.c.id).limit(LIST_MAX + 1)
        ).scalars().all()
        done = c.execute(
            sa.select(n.c.id).where(*live, n.c.is_todo.is_(True), n.c.todo_completed >= since)
            .order_by(n.c.todo_completed.desc(), n.c.id).limit(LIST_MAX)
        ).scalars().all()
        still_open = c.execute(
            sa.select(n.c.id).where(*live, n.c.is_todo.is_(True), n.c.todo_completed.is_(None))
            .order_by(n.c.todo_due.is_(None), n.c.todo_due, n.c.updated_time.desc(), n.c.id).limit(LIST_MAX + 1)
        ).scalars().all()
        notes = {x.id: x for x in notes_by_id(ctx, c, [*changed[:LIST_MAX], *done, *still_open[:LIST_MAX]])}
        paths = {nb: b.path(nb) for nb in {x.notebook_id for x in notes.values()} | {root.id}}
    changed_notes = [notes[i] for i in changed[:LIST_MAX] if i in notes]
    open_notes = [notes[i] for i in still_open[:LIST_MAX] if i in notes]
    return Week(
        path=paths[root.id],
        since=since,
        now=now,
        found=Found(changed_notes, paths),
        created=[x for x in changed_notes if x.created_time >= since],
        updated=[x for x in changed_notes if x.created_time < since],
        done=[notes[i] for i in done if i in notes],
        open=open_notes,
        overdue=[x for x in open_notes if x.todo_due is not None and x.todo_due < now],
        more_changed=len(changed) > LIST_MAX,
        more_open=len(still_open) > LIST_MAX,
    )


def messages(ctx: ToolContext, week: Week) -> list[dict[str, Any]]:
    """The review's instruction, the week's lists, and the changed notes attached."""
    f = week.found

    def section(title: str, notes: list[Note], said: str, time: str, more: bool = False) -> str:
        if not notes:
            return f"## {title}: none"
        rows = [line(ctx, x, f, f"{said} {_day(ms)}" if (ms := getattr(x, time)) else "") for x in notes]
        if more:
            rows.append(f"- … and more (only the first {LIST_MAX} are listed)")
        return f"## {title} ({len(notes)})\n" + "\n".join(rows)

    intro = (
        f"Write a weekly review of my notebook “{week.path}” for {_day(week.since)} to {_day(week.now)} (UTC), "
        "from what changed in it below: what was started, what moved on, what got done, which to-dos are "
        "still open or overdue, and what deserves attention next week. Name notes by their titles. "
        "The notes changed this week are attached in full."
    )
    if not (week.created or week.updated or week.done):
        intro += f"\n\nNothing was created, changed or done in this notebook in the last {DAYS} days."
    parts = [
        intro,
        section("Notes created", week.created, "created", "created_time", week.more_changed),
        section("Notes updated", week.updated, "updated", "updated_time", week.more_changed),
        section("To-dos done", week.done, "done", "todo_completed"),
        section("To-dos open", week.open, "due", "todo_due", week.more_open),
        section("To-dos overdue", week.overdue, "was due", "todo_due"),
    ]
    listed = [*week.found.notes, *week.done, *week.open]
    return [with_rule(ctx, "\n\n".join(parts), any_clipped(listed)), *attachments(ctx, f)]


def _day(ms: int) -> str:
    return iso_time(ms)[:10]
