"""Anthropic's Messages API, through the official ``anthropic`` SDK.

Tool input streams as JSON fragments; thinking blocks come with a signature and go
back unchanged before the tool results that follow them. The stable prefix
(tools + system) carries a cache breakpoint, and so does the newest message, so
each step of a tool loop re-reads the previous one from the cache. Usage is
normalised: the SDK's ``input_tokens`` leaves out cache reads and writes, ours
includes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from noteloom.errors import ConfigError
from noteloom.messages import (
    DocumentPart,
    FinishReason,
    ImagePart,
    Message,
    StreamEnd,
    StreamEvent,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingDone,
    ThinkingPart,
    ToolCallDone,
    ToolCallPart,
    Usage,
    UsageUpdate,
)
from noteloom.providers.base import (
    TEXT_ONLY,
    ModelCapabilities,
    ModelRequest,
    ProviderConfig,
    ThinkingLevel,
    Timeouts,
    file_data,
    token_count,
)
from noteloom.providers.errors import ProviderError, body_error, code_for_status, provider_error
from noteloom.providers.sdk import SdkProvider, common_options

if TYPE_CHECKING:
    import anthropic
    import httpx2


ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
DEFAULT_MAX_TOKENS = 8192
#: Thinking budgets for models that take ``budget_tokens`` rather than an effort level.
BUDGETS: dict[ThinkingLevel, int] = {"off": 0, "low": 2048, "medium": 8192, "high": 24576}
THINKING_MODES = ("auto", "adaptive", "budget")
EPHEMERAL = {"type": "ephemeral"}

_NEW_NAME = re.compile(r"^claude-[a-z]+-(\d+)(?:-(\d{1,2}))?(?:-\d{8})?$")
_OLD_NAME = re.compile(r"^claude-(\d+)(?:-(\d{1,2}))?-[a-z]+")


def adaptive_thinking(model: str) -> bool:
    """Whether ``model`` takes adaptive thinking + an effort level (4.6 and later, and
    names we do not recognise, which are newer) rather than a token budget."""
    m = _NEW_NAME.match(model) or _OLD_NAME.match(model)
    if m is None:
        return True
    version = (int(m.group(1)), int(m.group(2) or 0))
    return version >= (4, 6)


def claude_capabilities(model: str) -> ModelCapabilities:
    """What a Claude model reads besides text, from its name: images from Claude 3 on, whole
    PDFs from Claude 3.5 on (and names we do not recognise that start with ``claude-``, which
    are newer). Anything else (another model behind a compatible server) is text-only
    unless its table says otherwise."""
    if not model.startswith("claude-"):
        return TEXT_ONLY
    m = _NEW_NAME.match(model) or _OLD_NAME.match(model)
    if m is None:
        return TEXT_ONLY if model.startswith(("claude-2", "claude-instant")) else ModelCapabilities(True, True)
    version = (int(m.group(1)), int(m.group(2) or 0))
    return ModelCapabilities(vision=version >= (3, 0), document=version >= (3, 5))


class AnthropicProvider(SdkProvider):
    """Claude models; ``base_url=None`` means Anthropic's own API."""

    vendor = "anthropic"
    vendor_label = "Anthropic"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        default_model: str | None = None,
        models: Sequence[str] = (),
        local: bool | None = None,
        free: bool | None = None,
        timeouts: Timeouts | None = None,
        max_retries: int = 2,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking_mode: str = "auto",
        cache: bool = True,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        model_capabilities: Mapping[str, Mapping[str, bool]] | None = None,
    ) -> None:
        if thinking_mode not in THINKING_MODES:
            raise ConfigError(f"[providers.{name}]: thinking must be one of {', '.join(THINKING_MODES)}, not {thinking_mode!r}")
        self._set_common(
            name, base_url or ANTHROPIC_URL, api_key=api_key, models=models, local=local, free=free, timeouts=timeouts,
            max_retries=max_retries, prices=prices, http_client=http_client, model_capabilities=model_capabilities,
        )
        self.official = base_url is None or self.base_url == ANTHROPIC_URL
        self.default_model = default_model or (DEFAULT_ANTHROPIC_MODEL if self.official else None)
        self.max_tokens = max_tokens
        self.thinking_mode = thinking_mode
        self.cache = cache

    @classmethod
    def from_config(cls, config: ProviderConfig) -> AnthropicProvider:
        return cls(
            config.name,
            **common_options(config, "ANTHROPIC_API_KEY"),
            max_tokens=config.get_int("max_tokens", DEFAULT_MAX_TOKENS),
            thinking_mode=config.get_str("thinking", "auto") or "auto",
            cache=config.get_bool("cache", True),
        )

    def known_capabilities(self, model: str) -> ModelCapabilities:
        # By the model's name whatever the base URL: a proxy in front of Claude serves Claude.
        return claude_capabilities(model)

    def _sdk(self) -> anthropic.AsyncAnthropic:
        import anthropic

        client: anthropic.AsyncAnthropic = self._sdk_client(anthropic.AsyncAnthropic)
        return client

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for ``request``."""
        extra_system, messages = to_wire_messages(request.messages)
        if self.cache and messages:
            _mark_last_block(messages[-1])
        system: list[dict[str, Any]] = []
        cached_upto = -1
        for block in request.system:
            if block.text:
                system.append({"type": "text", "text": block.text})
                if block.cache:
                    cached_upto = len(system) - 1
        system.extend({"type": "text", "text": t} for t in extra_system if t)
        tools = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
            for t in request.tools
        ]
        if self.cache:
            # Tools come before the system prompt in the cached prefix: one breakpoint covers both.
            if cached_upto >= 0:
                system[cached_upto]["cache_control"] = dict(EPHEMERAL)
            elif tools:
                tools[-1]["cache_control"] = dict(EPHEMERAL)
        max_tokens = request.max_tokens or self.max_tokens
        kwargs: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
        thinking_on = False
        if request.thinking == "off":
            kwargs["thinking"] = {"type": "disabled"}
        elif request.thinking is not None:
            thinking_on = True
            adaptive = self.thinking_mode == "adaptive" or (
                self.thinking_mode == "auto" and adaptive_thinking(request.model)
            )
            if adaptive:
                kwargs["thinking"] = {"type": "adaptive"}
                kwargs["output_config"] = {"effort": request.thinking}
            else:
                budget = BUDGETS[request.thinking]
                kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
                # The budget is part of max_tokens and must stay below it.
                max_tokens = max(max_tokens, budget + DEFAULT_MAX_TOKENS // 2)
        kwargs["max_tokens"] = max_tokens
        sampling = {k: v for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v is not None}
        if sampling and not thinking_on:
            # No longer parameters of messages.create; models that accept them read them from the body.
            kwargs["extra_body"] = sampling
        return kwargs

    def max_output(self, request: ModelRequest) -> int:
        """The ``max_tokens`` this adapter sends for ``request`` (it always sends one)."""
        return int(self.request_kwargs(request)["max_tokens"])

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        client = self._sdk()
        kwargs = self.request_kwargs(request)

        async def open_stream() -> Any:
            return await client.messages.create(**kwargs)

        async with aclosing(self._relay(open_stream, EventAssembler())) as events:
            async for event in events:
                yield event

    def _connection_error(self) -> type[BaseException]:
        import anthropic

        return anthropic.APIConnectionError

    def _vendor_error(self, exc: BaseException) -> ProviderError | None:
        import anthropic

        if not isinstance(exc, anthropic.APIStatusError):
            return None
        kind, code, message = body_error(exc.body)
        kind = exc.type or kind
        if exc.status_code == 200:
            # An `event: error` mid-stream arrives with the stream's 200: the body's type decides.
            return provider_error(code_for_status(None, error_type=kind, text=message), self.label,
                                  "the server reported an error mid-answer")
        return provider_error(
            code_for_status(exc.status_code, error_type=kind, error_code=exc.error_code or code, text=message),
            self.label,
            status=exc.status_code,
        )


def to_wire_messages(messages: Sequence[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """``(system texts found in the transcript, API messages)``. Tool results become user
    content; consecutive messages of one role merge, since the API wants them alternating."""
    extra_system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            extra_system.append(m.text)
            continue
        blocks: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, TextPart):
                if p.text:
                    blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ThinkingPart):
                # Only blocks this API signed can go back; others (another provider's) are dropped.
                if p.redacted is not None:
                    blocks.append({"type": "redacted_thinking", "data": p.redacted})
                elif p.signature:
                    blocks.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
            elif isinstance(p, ImagePart | DocumentPart):
                blocks.append(_file_block(p))
            elif isinstance(p, ToolCallPart):
                blocks.append({"type": "tool_use", "id": p.id, "name": p.name, "input": p.arguments})
            else:
                content: str | list[dict[str, Any]] = p.content
                if p.blocks:
                    content = [{"type": "text", "text": p.content}, *(_file_block(b) for b in p.blocks)]
                blocks.append({"type": "tool_result", "tool_use_id": p.call_id, "content": content,
                               "is_error": p.is_error})
        if not blocks:
            continue
        role = "assistant" if m.role == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for msg in out:
        if msg["role"] == "user":
            # Tool results must open the user turn that answers a tool call.
            msg["content"].sort(key=lambda b: b["type"] != "tool_result")
    return extra_system, out


def _mark_last_block(message: dict[str, Any]) -> None:
    content = message["content"]
    if content and content[-1]["type"] not in ("thinking", "redacted_thinking"):
        content[-1]["cache_control"] = dict(EPHEMERAL)


@dataclass
class _Block:
    type: str
    text: list[str] = field(default_factory=list)
    signature: str | None = None
    data: str | None = None
    id: str = ""
    name: str = ""
    json: list[str] = field(default_factory=list)
    input: Any = None


class EventAssembler:
    """Turns Messages stream events (as dicts) into canonical stream events."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.raw_usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        out: list[StreamEvent] = []
        if kind == "message_start":
            message = event.get("message") or {}
            self._usage(out, message.get("usage"))
        elif kind == "content_block_start":
            cb = event.get("content_block") or {}
            block = _Block(str(cb.get("type")))
            self.blocks[int(event.get("index", 0))] = block
            if block.type == "text" and cb.get("text"):
                block.text.append(cb["text"])
                out.append(TextDelta(cb["text"]))
            elif block.type == "thinking":
                if cb.get("thinking"):
                    block.text.append(cb["thinking"])
                    out.append(ThinkingDelta(cb["thinking"]))
                block.signature = cb.get("signature") or None
            elif block.type == "redacted_thinking":
                block.data = str(cb.get("data", ""))
            elif block.type == "tool_use":
                block.id, block.name, block.input = str(cb.get("id", "")), str(cb.get("name", "")), cb.get("input")
        elif kind == "content_block_delta":
            current = self.blocks.get(int(event.get("index", 0)))
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if current is None:
                return out
            if dtype == "text_delta" and delta.get("text"):
                current.text.append(delta["text"])
                out.append(TextDelta(delta["text"]))
            elif dtype == "thinking_delta" and delta.get("thinking"):
                current.text.append(delta["thinking"])
                out.append(ThinkingDelta(delta["thinking"]))
            elif dtype == "signature_delta":
                current.signature = (current.signature or "") + str(delta.get("signature", ""))
            elif dtype == "input_json_delta":
                current.json.append(str(delta.get("partial_json", "")))
        elif kind == "content_block_stop":
            done = self.blocks.get(int(event.get("index", 0)))
            if done is not None:
                out.extend(self._finish_block(done))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self._usage(out, event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return out

    def finish(self, label: str) -> list[StreamEvent]:
        if not self.stopped:
            raise provider_error("api_stream_error", label, "the stream ended before the model finished")
        reason: FinishReason
        if self.stop_reason == "tool_use":
            reason = "tool_use"
        elif self.stop_reason in ("max_tokens", "model_context_window_exceeded"):
            reason = "max_tokens"
        elif self.stop_reason == "refusal":
            reason = "refusal"
        else:
            reason = "end_turn"
        return [StreamEnd(reason)]

    def _finish_block(self, block: _Block) -> list[StreamEvent]:
        if block.type == "thinking":
            # Verbatim: the signature covers the exact text.
            return [ThinkingDone(ThinkingPart("".join(block.text), signature=block.signature))]
        if block.type == "redacted_thinking":
            return [ThinkingDone(ThinkingPart("", redacted=block.data or ""))]
        if block.type != "tool_use":
            return []
        raw = "".join(block.json).strip()
        arguments: dict[str, Any] = {}
        error: str | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError as exc:
                error = f"the arguments are not valid JSON ({exc}); send one JSON object"
            else:
                if isinstance(parsed, dict):
                    arguments = parsed
                else:
                    error = f"the arguments must be a JSON object, not {type(parsed).__name__}"
        elif isinstance(block.input, Mapping):
            arguments = dict(block.input)
        return [ToolCallDone(ToolCallPart(block.id, block.name, arguments, error))]

    def _usage(self, out: list[StreamEvent], usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return
        # Cumulative: each report replaces the fields it carries.
        self.raw_usage.update({k: v for k, v in usage.items() if v is not None})
        out.append(UsageUpdate(parse_usage(self.raw_usage)))


def parse_usage(data: Mapping[str, Any]) -> Usage:
    num = token_count
    read, write = num(data, "cache_read_input_tokens"), num(data, "cache_creation_input_tokens")
    return Usage(
        input_tokens=num(data, "input_tokens") + read + write,
        output_tokens=num(data, "output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=num(data.get("output_tokens_details"), "thinking_tokens"),
    )


def _file_block(p: ImagePart | DocumentPart) -> dict[str, Any]:
    """An image or a PDF as the Messages API takes it, in a user turn or a tool result."""
    if isinstance(p, DocumentPart):
        block: dict[str, Any] = {"type": "document",
                                 "source": {"type": "base64", "media_type": p.media_type, "data": file_data(p)}}
        if p.title:
            block["title"] = p.title
        return block
    source: dict[str, Any] = (
        {"type": "url", "url": p.url} if p.url else {"type": "base64", "media_type": p.media_type, "data": file_data(p)}
    )
    return {"type": "image", "source": source}
