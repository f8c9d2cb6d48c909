"""What every workspace tool shares: worker-thread handlers, ISO 8601 times, note-shaped answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from anyio import from_thread, to_thread

from noteloom.tools import Handler, ToolContext, ToolError, ToolResult
from noteloom.workspace import Note
from noteloom.workspace.model import MAX_TIME_MS, TIME_RANGE, iso_time, ms_of


def threaded(fn: Callable[[ToolContext, dict[str, Any]], Any]) -> Handler:
    """An async handler running ``fn(ctx, args)`` in one worker thread (the database is sync)."""

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        return await to_thread.run_sync(fn, ctx, args)

    handler.__name__ = fn.__name__
    return handler


def progress_reporter(ctx: ToolContext) -> Callable[[float, float | None, str | None], None] | None:
    """For a tool running in a worker thread (:func:`threaded`): a function that sends its
    MCP client a progress notification, or ``None`` when the client asked for none."""
    client = ctx.client
    if client is None or client.progress_token is None:
        return None

    def report(progress: float, total: float | None, message: str | None) -> None:
        from_thread.run(client.progress, progress, total, message)

    return report


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC string (``None`` stays ``None``); defined for
    any stored value, even one outside the range the workspace now accepts."""
    return None if ms is None else iso_time(ms)


def parse_time(value: Any, arg: str) -> int | None:
    """An ISO 8601 date or date-time from a tool argument as epoch ms; UTC unless an offset is given."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if " " in text else text)
    except ValueError:
        raise ToolError(
            f"argument {arg!r}: {value!r} is not an ISO 8601 date; write it like "
            "2026-12-01 or 2026-12-01T09:30:00Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    ms = ms_of(parsed)  # exact, and defined where an offset carries the time past year 9999
    if ms <= 0:
        raise ToolError(f"argument {arg!r}: {value!r} is before 1970; give a later date")
    if ms > MAX_TIME_MS:
        raise ToolError(
            f"argument {arg!r}: {value!r} is after 9999-12-31T23:59:59.999Z in UTC; "
            f"give a date within {TIME_RANGE}"
        )
    return ms


def note_meta(note: Note, notebook_title: str) -> dict[str, Any]:
    """What every note-shaped answer carries besides the body."""
    out: dict[str, Any] = {
        "id": note.id,
        "title": note.title,
        "notebook_id": note.notebook_id,
        "notebook": notebook_title,
        "tags": list(note.tags),
        "created_time": iso(note.created_time),
        "updated_time": iso(note.updated_time),
        "is_todo": note.is_todo,
        "todo_due": iso(note.todo_due),
        "todo_completed": iso(note.todo_completed),
    }
    if note.source_url:
        out["source_url"] = note.source_url
    return out


def untrusted_if(payload: dict[str, Any], notes: Sequence[Note]) -> ToolResult:
    """Text from outside the user's own writing (clipped from a URL) is flagged for the agent;
    said per call, so a tool declaring ``untrusted_output`` fences only what needs it."""
    return ToolResult(payload, untrusted=any(n.source_url for n in notes))
