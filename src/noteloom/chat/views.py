"""The chat's records as JSON-ready dicts: what the API returns and the events carry.

One shape per thing, whichever surface shows it, so a conversation reads the same
from the web page, the JSON API and the command line.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from noteloom.agent.framing import cap_text
from noteloom.chat.anchors import word_diff
from noteloom.chat.eventlog import LiveTurn
from noteloom.chat.records import ChatMessage, Conversation, PendingAction, ProposedEdit
from noteloom.messages import ToolCallPart, usage_to_dict
from noteloom.renderspec import checked_json


def usd(amount: Decimal | None) -> str | None:
    return None if amount is None else format(amount.normalize(), "f")


def conversation_view(c: Conversation) -> dict[str, Any]:
    return {
        "id": c.id,
        "title": c.title,
        "pinned": c.pinned,
        "controls": asdict(c.controls),
        "usage": {"input_tokens": c.input_tokens, "output_tokens": c.output_tokens},
        # A lower bound when some turns had no known price.
        "cost_usd": usd(c.cost_usd),
        "unpriced_turns": c.unpriced_turns,
        "created_time": c.created_time,
        "updated_time": c.updated_time,
        "deleted": c.deleted_time is not None,
        # standard | private | fortress; a protected chat read while its owner's vault is
        # locked has locked true, a placeholder title and no instructions.
        "security_level": c.security_level,
        "protected": c.protected,
        "locked": c.locked,
    }


def edit_view(e: ProposedEdit) -> dict[str, Any]:
    return {
        "id": e.id,
        "message_id": e.message_id,
        "note_id": e.note_id,
        "tool": e.tool,
        "anchor": e.anchor,
        "status": e.status,
        "old_text": e.old_text,
        "new_text": e.new_text,
        "diff": [{"op": op, "text": text} for op, text in word_diff(e.old_text, e.new_text)],
        "created_time": e.created_time,
        "decided_time": e.decided_time,
    }


def pending_view(p: PendingAction) -> dict[str, Any]:
    return {
        "id": p.id,
        "call_id": p.call_id,
        "tool": p.tool,
        "arguments": p.arguments,
        "description": p.description,
        "status": p.status,
        "created_time": p.created_time,
        "decided_time": p.decided_time,
    }


#: UTF-8 bytes of a tool's result that a view carries (the model read at most its result cap).
RESULT_SHOWN = 32 * 1024
_FENCE = re.compile(r"<<UNTRUSTED_([0-9a-f]+)>>\n(.*)\n<</UNTRUSTED_\1>>", re.DOTALL)


def tool_calls_of(m: ChatMessage) -> list[dict[str, Any]]:
    """The tool calls of a turn with how each ended: the result as the model read it (its
    untrusted fence taken off and marked instead) and, for a tool with a renderer, the
    render spec that shows it."""
    results = {r.call_id: r for msg in m.transcript for r in msg.tool_results}
    out: list[dict[str, Any]] = []
    for msg in m.transcript:
        for part in msg.parts:
            if isinstance(part, ToolCallPart):
                r = results.get(part.id)
                result, untrusted = (None, False) if r is None else _shown(r.content)
                out.append({
                    "id": part.id,
                    "name": part.name,
                    "arguments": part.arguments,
                    "status": "pending" if r is None else ("error" if r.is_error else "done"),
                    "result": result,
                    "untrusted": untrusted,
                    "render": None if r is None or r.is_error else checked_json(r.render),
                })
    return out


def _shown(content: str) -> tuple[str, bool]:
    fenced = _FENCE.fullmatch(content)
    text = fenced.group(2) if fenced else content
    return cap_text(text, RESULT_SHOWN), fenced is not None


def message_view(
    m: ChatMessage,
    *,
    pending: PendingAction | None = None,
    edits: list[ProposedEdit] | None = None,
    live: LiveTurn | None = None,
    last_seq: int = 0,
) -> dict[str, Any]:
    """A message as the API shows it. A running turn carries its partial text, its stage
    label and how long it has run; a settled one its final content, usage and cost."""
    running = m.status == "running"
    text = m.content
    activity = m.activity
    if live is not None and running:
        text = live.text or text
        activity = live.activity or activity
        last_seq = max(last_seq, live.last_seq)
    started = m.started_time or m.created_time
    out: dict[str, Any] = {
        "id": m.id,
        "conversation_id": m.conversation_id,
        "position": m.position,
        "role": m.role,
        "status": m.status,
        "content": None if running else m.content,
        "thinking": "\n\n".join(x.thinking for x in m.transcript if x.thinking) or None,
        "partial_text": text if running else None,
        "activity": activity if running else None,
        "running_seconds": round(max(time.time() - started / 1000, 0.0), 1) if running else None,
        "model": m.model,
        "stop_reason": m.stop_reason,
        "error": {"code": m.error_code, "message": m.error_message} if m.status == "failed" else None,
        "usage": usage_to_dict(m.usage) if m.role == "assistant" else None,
        "cost_usd": usd(m.cost_usd) if m.role == "assistant" else None,
        "cancelled": m.status == "cancelled",
        "pending_action": pending_view(pending) if pending is not None and pending.status == "pending" else None,
        "tool_calls": tool_calls_of(m),
        "edits": [edit_view(e) for e in edits or []],
        "note_context": (
            {
                "note_id": m.note_context.note_id,
                "selection": (
                    {"start": m.note_context.selection.start, "end": m.note_context.selection.end}
                    if m.note_context.selection else None
                ),
            }
            if m.note_context and m.role == "user" else None
        ),
        "command": m.command,
        # What the turn's prompt was given from memory (id, title, layer); null: memory was off.
        "memories": [dict(x) for x in m.memories] if m.memories is not None else None,
        "last_seq": last_seq,
        "created_time": m.created_time,
        "finished_time": m.finished_time,
    }
    return out
