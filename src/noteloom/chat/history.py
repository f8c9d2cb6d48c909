"""What a model is sent as the conversation so far: pure functions over stored messages.

Only settled exchanges count (a failed turn is left out with its question); history
starts after the last ``/clear``; a tool call always travels with its result; and a
byte cap drops the oldest exchanges first, keeping a leading system message and
never splitting an exchange (so never a tool call from its result). What only a
person's screen uses (a tool result's render spec) is not sent, nor counted.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from noteloom.chat.records import CLEAR_COMMAND, ChatMessage
from noteloom.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ToolResultPart,
    message_to_dict,
)
from noteloom.providers.base import CHARS_PER_TOKEN, file_tokens

#: The default history cap, in bytes of the JSON form of the messages.
DEFAULT_HISTORY_BYTES = 200 * 1024
NOT_RUN = "not run: the turn stopped before this call"


def history_before(
    rows: Sequence[ChatMessage], position: int, user_message: Callable[[ChatMessage], Message] | None = None,
) -> list[Message]:
    """The replayable history of the exchanges before ``position``; ``user_message`` makes a
    user's row a message (by default its text; a turn adds its attachments)."""
    as_message = user_message or (lambda r: Message.user(r.content))
    start = 0
    earlier = [r for r in rows if r.position < position]
    for i, r in enumerate(earlier):
        if r.role == "note" and r.command == CLEAR_COMMAND:
            start = i + 1
    out: list[Message] = []
    pending_user: ChatMessage | None = None
    for r in earlier[start:]:
        if r.role == "user":
            pending_user = r
        elif r.role == "assistant" and pending_user is not None:
            if r.status in ("complete", "cancelled"):
                turn = list(r.transcript) or ([Message.assistant(r.content)] if r.content else [])
                if turn:
                    out.append(as_message(pending_user))
                    out.extend(turn)
            pending_user = None
    return replayable(out)


def replayable(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every unanswered tool call given an error result right after its
    message (providers refuse a call without a result) and empty messages left out."""
    answered = {p.call_id for m in messages for p in m.tool_results}
    out: list[Message] = []
    for m in messages:
        if not m.parts:
            continue
        out.append(m)
        if m.role == "assistant":
            missing = [c for c in m.tool_calls if c.id not in answered]
            if missing:
                out.append(Message("tool", tuple(ToolResultPart(c.id, NOT_RUN, True) for c in missing)))
    return out


def for_model(message: Message) -> Message:
    """``message`` without its tool results' render specs (the model reads their content)."""
    if not any(isinstance(p, ToolResultPart) and p.render is not None for p in message.parts):
        return message
    return Message(message.role, tuple(
        dataclasses.replace(p, render=None) if isinstance(p, ToolResultPart) else p for p in message.parts
    ))


def message_bytes(message: Message) -> int:
    """What ``message`` weighs against the history cap: the bytes of its JSON form, and for
    each file it hands over whole (an image, a PDF) what a model is charged for it, in bytes
    of text at the same rate, rather than the file's own size (a stored file keeps only its
    ref, and a 5 MB photo costs a model no more than a small one)."""
    files = [b for p in message.parts
             for b in (p.blocks if isinstance(p, ToolResultPart) else (p,)) if isinstance(b, ImagePart | DocumentPart)]
    if files:
        message = Message(message.role, tuple(_without_bytes(p) for p in message.parts))
    size = len(json.dumps(message_to_dict(message), ensure_ascii=False).encode("utf-8"))
    return size + sum(file_tokens(f) * CHARS_PER_TOKEN for f in files)


def _without_bytes(part: Part) -> Part:
    if isinstance(part, ImagePart | DocumentPart):
        return dataclasses.replace(part, data="")
    if isinstance(part, ToolResultPart) and part.blocks:
        return dataclasses.replace(part, blocks=tuple(dataclasses.replace(b, data="") for b in part.blocks))
    return part


def _starts_exchange(m: Message) -> bool:
    return m.role == "user" and not m.tool_results


def cap_history(messages: Sequence[Message], max_bytes: int) -> list[Message]:
    """Drop whole exchanges, oldest first, until the messages fit ``max_bytes``.

    A leading system message stays; the newest exchange always stays, even alone over the cap.
    """
    messages = [for_model(m) for m in messages]
    head = list(messages[:1]) if messages and messages[0].role == "system" else []
    groups: list[list[Message]] = []
    for m in messages[len(head):]:
        if not groups or _starts_exchange(m):
            groups.append([m])
        else:
            groups[-1].append(m)
    sizes = [sum(message_bytes(m) for m in g) for g in groups]
    total = sum(message_bytes(m) for m in head) + sum(sizes)
    drop = 0
    while drop < len(groups) - 1 and total > max_bytes:
        total -= sizes[drop]
        drop += 1
    return head + [m for g in groups[drop:] for m in g]
