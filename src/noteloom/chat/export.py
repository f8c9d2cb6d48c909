"""A conversation as a document: Markdown (the stored text intact) or plain text.

Both are role-labelled turns in order; tool calls are summarised in one line each, and
a message's attached files are named (their contents are not copied in).
Plain text strips Markdown for pasting where it is not rendered: emphasis and inline
code marks go, headings and fences lose their markers, and ``[text](url)`` becomes
``text (url)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token

from noteloom.chat.records import ChatMessage, Conversation
from noteloom.chat.views import tool_calls_of, usd

if TYPE_CHECKING:
    from noteloom.chat.attachments import Attachment

Files = Mapping[str, Sequence["Attachment"]]

ExportFormat = Literal["md", "txt"]
_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_LABEL = {"user": "You", "assistant": "Assistant", "note": "Note"}


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _tool_line(call: dict[str, object]) -> str:
    args = call.get("arguments") or {}
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items()) if isinstance(args, dict) else ""
    if len(shown) > 120:
        shown = shown[:119] + "…"
    return f"Tool {call['name']}({shown}): {call['status']}"


def _status_line(m: ChatMessage) -> str | None:
    if m.status == "cancelled":
        return "(cancelled; the answer above is partial)"
    if m.status == "failed":
        return f"(failed: {m.error_message or m.error_code})"
    if m.status == "awaiting_confirmation":
        return "(waiting for the user's approval of a tool call)"
    if m.status == "running":
        return "(still running)"
    return None


def _files_line(files: Sequence[Attachment]) -> str | None:
    if not files:
        return None
    return "Attached: " + ", ".join(
        f"{a.name} ({a.kind}, {a.size} bytes{', removed' if a.removed else ''})" for a in files)


def export_markdown(conversation: Conversation, messages: list[ChatMessage], files: Files | None = None) -> str:
    out = [f"# {conversation.title}", "", f"Exported {_when(conversation.updated_time)}", ""]
    for m in messages:
        out += [f"## {_LABEL[m.role]} · {_when(m.created_time)}", ""]
        attached = _files_line((files or {}).get(m.id, ()))
        if attached:
            out += [f"*{attached}*", ""]
        for call in tool_calls_of(m):
            out.append(f"> {_tool_line(call)}")
        if tool_calls_of(m):
            out.append("")
        if m.content:
            out += [m.content.rstrip(), ""]
        status = _status_line(m)
        if status:
            out += [f"*{status}*", ""]
    cost = usd(conversation.cost_usd)
    out.append(f"---\nTokens: {conversation.input_tokens} in, {conversation.output_tokens} out · cost: ${cost}"
               + (" (some turns unpriced)" if conversation.unpriced_turns else ""))
    return "\n".join(out).rstrip() + "\n"


def export_text(conversation: Conversation, messages: list[ChatMessage], files: Files | None = None) -> str:
    out = [conversation.title, "=" * min(len(conversation.title), 72), ""]
    for m in messages:
        out.append(f"{_LABEL[m.role]} ({_when(m.created_time)}):")
        attached = _files_line((files or {}).get(m.id, ()))
        if attached:
            out.append(f"[{attached}]")
        for call in tool_calls_of(m):
            out.append(f"  [{_tool_line(call)}]")
        if m.content:
            out.append(markdown_to_text(m.content))
        status = _status_line(m)
        if status:
            out.append(status)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def export(conversation: Conversation, messages: list[ChatMessage], fmt: ExportFormat,
           files: Files | None = None) -> str:
    if fmt == "md":
        return export_markdown(conversation, messages, files)
    return export_text(conversation, messages, files)


def markdown_to_text(markdown: str) -> str:
    """Markdown rendered down to plain text (block structure kept as lines)."""
    lines: list[str] = []
    prefix: list[str] = []
    ordinal: list[int] = []
    for tok in _MD.parse(markdown):
        if tok.type == "bullet_list_open":
            ordinal.append(0)
        elif tok.type == "ordered_list_open":
            ordinal.append(int(tok.attrGet("start") or 1))
        elif tok.type in ("bullet_list_close", "ordered_list_close"):
            ordinal.pop()
            if not ordinal:
                lines.append("")
        elif tok.type == "list_item_open":
            if ordinal and ordinal[-1]:
                prefix.append(f"{ordinal[-1]}. ")
                ordinal[-1] += 1
            else:
                prefix.append("- ")
        elif tok.type == "list_item_close":
            prefix.pop()
        elif tok.type == "inline":
            indent = "  " * max(len(prefix) - 1, 0)
            lead = indent + (prefix[-1] if prefix else "")
            lines.append(lead + _inline_text(tok.children or []))
            if prefix:
                prefix[-1] = " " * len(prefix[-1])
        elif tok.type in ("fence", "code_block"):
            lines.append(tok.content.rstrip("\n"))
            if not prefix:
                lines.append("")
        elif tok.type == "hr":
            lines.append("---")
        elif tok.type in ("paragraph_close", "heading_close") and not prefix:
            lines.append("")
    return "\n".join(lines).strip("\n")


def _inline_text(children: list[Token]) -> str:
    out: list[str] = []
    href: list[str] = []
    for c in children:
        if c.type in ("text", "code_inline"):
            out.append(c.content)
        elif c.type in ("softbreak",):
            out.append(" ")
        elif c.type == "hardbreak":
            out.append("\n")
        elif c.type == "link_open":
            href.append(str(c.attrGet("href") or ""))
        elif c.type == "link_close":
            url = href.pop() if href else ""
            if url and url != "".join(out[-1:]):
                out.append(f" ({url})")
        elif c.type == "image":
            out.append(c.content or "image")
    return "".join(out)
