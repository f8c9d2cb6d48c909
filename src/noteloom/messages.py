"""The one canonical message form every provider translates to and from.

A conversation is a list of ``Message``; each has a role and a tuple of parts::

    Message.user("What is on my list?")
    Message("assistant", (ThinkingPart("…", signature="…"), TextPart("Let me look."),
                          ToolCallPart("call_1", "search_notes", {"query": "list"})))
    Message("tool", (ToolResultPart("call_1", "3 notes …"),))

Providers stream ``StreamEvent`` values while a model answers: text and thinking
deltas to show, finished thinking blocks and tool calls to keep, usage, and one
``StreamEnd`` with the reason the model stopped. Nothing outside ``noteloom.providers``
knows a wire format. ``to_dict``/``from_dict`` give a JSON-ready form for storage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

Role = Literal["system", "user", "assistant", "tool"]
#: Why one model call ended.
FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """Model reasoning, kept verbatim: some providers need it sent back unchanged."""

    text: str
    #: The provider's proof that the block is unaltered; without one it is never sent back.
    signature: str | None = None
    #: Opaque encrypted reasoning (the text is then empty).
    redacted: str | None = None
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ImagePart:
    media_type: str
    #: Base64 bytes, or empty when ``url`` is given (or when ``ref`` is and the bytes are
    #: read again before the part is sent).
    data: str = ""
    url: str | None = None
    #: The stored attachment the bytes came from (``noteloom.attachments``). A stored
    #: transcript keeps the ref, never the bytes; whoever builds a request from it reads
    #: the bytes again (and checks the reader may still see them).
    ref: str | None = None
    kind: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A whole file the model reads natively (a PDF), for models that declare ``document``."""

    media_type: str
    #: Base64 bytes; empty in a stored transcript, where ``ref`` names the attachment.
    data: str = ""
    #: The file's name as shown to the model and the user.
    title: str | None = None
    ref: str | None = None
    kind: Literal["document"] = "document"


#: What a tool result may carry besides its text: whole files a model reads natively.
BlockPart = ImagePart | DocumentPart


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: Set when the model sent arguments that are not a JSON object: what was wrong.
    #: The loop answers such a call with an error result instead of running it.
    error: str | None = None
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    call_id: str
    content: str
    is_error: bool = False
    #: How a person's screen shows the result (a checked ``noteloom.renderspec`` JSON form);
    #: stored with the transcript, never sent to a model.
    render: dict[str, Any] | None = None
    #: Files the result hands the model whole (``view_attachment``): images and documents,
    #: sent inside the tool result where the wire format allows it. Untrusted, always.
    blocks: tuple[BlockPart, ...] = ()
    kind: Literal["tool_result"] = "tool_result"


Part = TextPart | ThinkingPart | ImagePart | DocumentPart | ToolCallPart | ToolResultPart


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...] = ()

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", (TextPart(text),))

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (TextPart(text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", (TextPart(text),))

    @property
    def text(self) -> str:
        """The visible text of the message (thinking excluded)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def thinking(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, ThinkingPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one or more model calls.

    ``input_tokens`` is the whole prompt, cached parts included
    (``input = uncached + cache_read + cache_write``); ``reasoning_tokens`` are part
    of ``output_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


# -- stream events -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of answer text, to show as it arrives."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of reasoning, to show as it arrives."""

    text: str
    kind: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True)
class ThinkingDone:
    """A finished reasoning block, as the transcript keeps it (with its signature)."""

    part: ThinkingPart
    #: The answer text streamed so far in this call was reasoning after all (a
    #: ``</think>`` that was never opened): it is in ``part`` and leaves the answer.
    absorbs_text: bool = False
    kind: Literal["thinking_done"] = "thinking_done"


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    """A complete tool call the model asked for."""

    call: ToolCallPart
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """Usage of the current call so far; a later update replaces an earlier one."""

    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The model stopped; always the last event of a successful stream."""

    reason: FinishReason
    kind: Literal["end"] = "end"


StreamEvent = TextDelta | ThinkingDelta | ThinkingDone | ToolCallDone | UsageUpdate | StreamEnd


# -- JSON form ---------------------------------------------------------------------------


def part_to_dict(part: Part) -> dict[str, Any]:
    """A JSON-ready dict; empty optional fields are left out."""
    if isinstance(part, TextPart):
        return {"kind": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        out: dict[str, Any] = {"kind": "thinking", "text": part.text}
        if part.signature is not None:
            out["signature"] = part.signature
        if part.redacted is not None:
            out["redacted"] = part.redacted
        return out
    if isinstance(part, ImagePart):
        out = {"kind": "image", "media_type": part.media_type, "data": "" if part.ref else part.data}
        if part.url is not None:
            out["url"] = part.url
        if part.ref is not None:
            out["ref"] = part.ref
        return out
    if isinstance(part, DocumentPart):
        out = {"kind": "document", "media_type": part.media_type, "data": "" if part.ref else part.data}
        if part.title is not None:
            out["title"] = part.title
        if part.ref is not None:
            out["ref"] = part.ref
        return out
    if isinstance(part, ToolCallPart):
        out = {"kind": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments}
        if part.error is not None:
            out["error"] = part.error
        return out
    if isinstance(part, ToolResultPart):
        out = {"kind": "tool_result", "call_id": part.call_id, "content": part.content, "is_error": part.is_error}
        if part.render is not None:
            out["render"] = part.render
        if part.blocks:
            out["blocks"] = [part_to_dict(b) for b in part.blocks]
        return out
    assert_never(part)


def part_from_dict(data: Mapping[str, Any]) -> Part:
    kind = data.get("kind")
    if kind == "text":
        return TextPart(str(data["text"]))
    if kind == "thinking":
        return ThinkingPart(str(data.get("text", "")), data.get("signature"), data.get("redacted"))
    if kind == "image":
        return ImagePart(str(data["media_type"]), str(data.get("data", "")), data.get("url"), data.get("ref"))
    if kind == "document":
        return DocumentPart(str(data["media_type"]), str(data.get("data", "")), data.get("title"), data.get("ref"))
    if kind == "tool_call":
        return ToolCallPart(str(data["id"]), str(data["name"]), dict(data.get("arguments") or {}), data.get("error"))
    if kind == "tool_result":
        render = data.get("render")
        blocks = tuple(_block_from_dict(b) for b in data.get("blocks") or ())
        return ToolResultPart(str(data["call_id"]), str(data["content"]), bool(data.get("is_error", False)),
                              dict(render) if isinstance(render, Mapping) else None, blocks)
    raise ValueError(
        f"unknown message part kind {kind!r}; expected text, thinking, image, document, tool_call or tool_result"
    )


def _block_from_dict(data: Mapping[str, Any]) -> BlockPart:
    part = part_from_dict(data)
    if not isinstance(part, ImagePart | DocumentPart):
        raise ValueError(f"a tool result's block must be an image or a document, not {data.get('kind')!r}")
    return part


def message_to_dict(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": [part_to_dict(p) for p in message.parts]}


def message_from_dict(data: Mapping[str, Any]) -> Message:
    role = data.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"unknown message role {role!r}; expected system, user, assistant or tool")
    return Message(role, tuple(part_from_dict(p) for p in data.get("parts", ())))


def messages_to_list(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


def messages_from_list(data: Iterable[Mapping[str, Any]]) -> list[Message]:
    return [message_from_dict(d) for d in data]


def usage_to_dict(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
    }


def usage_from_dict(data: Mapping[str, Any]) -> Usage:
    return Usage(**{k: int(data.get(k, 0) or 0) for k in usage_to_dict(Usage())})
