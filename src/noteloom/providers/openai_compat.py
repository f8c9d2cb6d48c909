"""Any OpenAI-compatible ``/v1/chat/completions`` server, through the official ``openai`` SDK.

One adapter serves OpenAI itself and the local servers (Ollama, llama.cpp, vLLM,
LM Studio …). Those servers stream tool calls in many dialects; ``ChunkAssembler``
accepts them all: a reused or missing ``index``, missing ids, ``arguments`` sent as
an object, a name repeated in every chunk, malformed JSON. Reasoning arrives in a
``reasoning_content``/``reasoning`` field or inline in ``<think>`` tags.

Files go out as content parts: images as ``image_url`` (a data URL), PDFs as ``file`` parts
(``file_data``, a data URL). A tool message takes text only, so the files a tool result
hands over follow its tool messages in one user message.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
    is_local_url,
    token_count,
)
from noteloom.providers.errors import ProviderError, body_error, code_for_status, provider_error
from noteloom.providers.reachability import ReachabilityProbe
from noteloom.providers.sdk import SdkProvider, common_options, max_output_option
from noteloom.providers.think import Kind, ThinkSplitter

if TYPE_CHECKING:
    import httpx2
    import openai


OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-5-mini"
THINK_TAG_MODES = ("auto", "open", "off")


#: OpenAI's own models that read images and PDFs (chat completions take PDFs as ``file``
#: parts on the models with vision): the families by name prefix, kept short on purpose.
#: A dated or sized variant (``gpt-4o-mini``, ``gpt-4.1-2025-04-14``, ``gpt-5.1``) belongs
#: to its family.
_OPENAI_VISION = re.compile(r"^(gpt-4o|gpt-4\.1|gpt-5|o3|o4-mini)([-.]|$)")
#: Variants of those families that read no files: audio and speech models, search
#: previews, and o3-mini (text only).
_OPENAI_NO_FILES = re.compile(r"audio|realtime|transcribe|tts|search|^o3-mini")


def openai_capabilities(model: str) -> ModelCapabilities:
    """What a model of the official OpenAI API reads besides text, from its name (see
    ``_OPENAI_VISION``); other models are text-only unless their table says otherwise."""
    if _OPENAI_VISION.match(model) and not _OPENAI_NO_FILES.search(model):
        return ModelCapabilities(vision=True, document=True)
    return TEXT_ONLY


class OpenAICompatProvider(SdkProvider):
    """An OpenAI-compatible server. ``base_url=None`` means OpenAI itself."""

    vendor = "openai"
    vendor_label = "OpenAI"

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
        send_reasoning_effort: bool = True,
        think_tags: str = "auto",
        stream_usage: bool = True,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        model_capabilities: Mapping[str, Mapping[str, bool]] | None = None,
        probe: bool = False,
    ) -> None:
        if think_tags not in THINK_TAG_MODES:
            raise ConfigError(f"[providers.{name}]: think_tags must be one of {', '.join(THINK_TAG_MODES)}, not {think_tags!r}")
        self._set_common(
            name, base_url or OPENAI_URL, api_key=api_key, models=models, local=local, free=free, timeouts=timeouts,
            max_retries=max_retries, prices=prices, http_client=http_client, model_capabilities=model_capabilities,
        )
        self.official = urlsplit(self.base_url).hostname == "api.openai.com"
        self.default_model = default_model or (DEFAULT_OPENAI_MODEL if self.official else None)
        self.send_reasoning_effort = send_reasoning_effort
        self.think_tags = think_tags
        self.stream_usage = stream_usage
        self.extra_body = dict(extra_body or {})
        #: The reachability check made before a call (``probe``: on for a server of the
        #: user's own when built from its table), or ``None``.
        self.probe = (ReachabilityProbe(name, self.base_url, timeout=self.timeouts.probe, http_client=http_client)
                      if probe and not self.official else None)

    @classmethod
    def from_config(cls, config: ProviderConfig) -> OpenAICompatProvider:
        extra = config.options.get("extra_body", {})
        if not isinstance(extra, Mapping):
            raise ConfigError(f"{config.where}: extra_body must be a table")
        options = common_options(config, "OPENAI_API_KEY")
        self_hosted = options["free"] if options["free"] is not None else is_local_url(options["base_url"])
        provider = cls(
            config.name,
            **options,
            probe=config.get_bool("probe", self_hosted),
            send_reasoning_effort=config.get_bool("reasoning_effort", True),
            think_tags=config.get_str("think_tags", "auto") or "auto",
            stream_usage=config.get_bool("stream_usage", True),
            extra_body=extra,
        )
        provider.max_output_tokens = max_output_option(config)
        return provider

    def known_capabilities(self, model: str) -> ModelCapabilities:
        # Another server (Ollama, llama.cpp, vLLM …) may serve anything under any name: what
        # its models read is for its table to declare.
        return openai_capabilities(model) if self.official else TEXT_ONLY

    def _sdk(self) -> openai.AsyncOpenAI:
        import openai

        client: openai.AsyncOpenAI = self._sdk_client(openai.AsyncOpenAI)
        return client

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_wire_messages(request.system_text, request.messages),
            "stream": True,
        }
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": dict(t.input_schema)},
                }
                for t in request.tools
            ]
        effort = reasoning_effort(request.thinking) if self.send_reasoning_effort else None
        if effort is not None:
            kwargs["reasoning_effort"] = effort
        if request.max_tokens is not None:
            kwargs["max_completion_tokens" if self.official else "max_tokens"] = request.max_tokens
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        client = self._sdk()
        kwargs = self.request_kwargs(request)
        assembler = ChunkAssembler(ThinkSplitter(start_inside=self.think_tags == "open") if self.think_tags != "off" else None)

        async def open_stream() -> Any:
            return await client.chat.completions.create(**kwargs)

        if self.probe is not None:
            await self.probe.check()

        async with aclosing(self._relay(open_stream, assembler)) as events:
            async for event in events:
                yield event

    def _connection_error(self) -> type[BaseException]:
        import openai

        return openai.APIConnectionError

    def _vendor_error(self, exc: BaseException) -> ProviderError | None:
        import openai

        if isinstance(exc, openai.APIStatusError):
            kind, code, message = body_error(exc.body)
            return provider_error(
                code_for_status(exc.status_code, error_type=exc.type or kind, error_code=exc.code or code, text=message),
                self.label,
                status=exc.status_code,
            )
        if isinstance(exc, openai.APIError):
            # An {"error": …} object inside a 200 stream: no status, only the body.
            kind, code, message = body_error(exc.body)
            return provider_error(
                code_for_status(None, error_type=exc.type or kind, error_code=exc.code or code, text=message),
                self.label,
                "the server reported an error mid-answer",
            )
        return None


def reasoning_effort(level: ThinkingLevel | None) -> str | None:
    """``off`` → ``none``; other levels pass through; unset sends nothing."""
    if level is None:
        return None
    return "none" if level == "off" else level


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Canonical messages as ``chat.completions`` messages. Thinking is not sent back."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    tool_names: dict[str, str] = {}
    # Files handed over by tool results, waiting for the end of the run of tool messages.
    files: list[dict[str, Any]] = []
    for m in messages:
        if files and m.role != "tool":
            out.append({"role": "user", "content": files})
            files = []
        if m.role == "system":
            out.append({"role": "system", "content": m.text})
        elif m.role == "user":
            if not any(isinstance(p, ImagePart | DocumentPart) for p in m.parts):
                out.append({"role": "user", "content": m.text})
                continue
            content: list[dict[str, Any]] = []
            for p in m.parts:
                if isinstance(p, TextPart) and p.text:
                    content.append({"type": "text", "text": p.text})
                elif isinstance(p, ImagePart | DocumentPart):
                    content.append(file_part(p))
            out.append({"role": "user", "content": content})
        elif m.role == "assistant":
            calls = m.tool_calls
            tool_names.update((c.id, c.name) for c in calls)
            if not m.text and not calls:
                continue
            # content "" rather than null: llama.cpp's server answers 500 to null with tool_calls.
            msg: dict[str, Any] = {"role": "assistant", "content": m.text}
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                    }
                    for c in calls
                ]
            out.append(msg)
        else:
            for r in m.tool_results:
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.content})
            # A tool message takes text only (chat completions has no image or file part for
            # it), so the files a result hands over follow the last of the tool messages
            # (no other message may come between a call and its results) in one user
            # message, each result's files introduced by the call they belong to.
            for r in m.tool_results:
                if r.blocks:
                    name = tool_names.get(r.call_id)
                    call = f"{r.call_id} ({name})" if name else r.call_id
                    files.append({"type": "text", "text": f"The files returned by tool call {call}:"})
                    files.extend(file_part(b) for b in r.blocks)
    if files:
        out.append({"role": "user", "content": files})
    return out


def file_part(p: ImagePart | DocumentPart) -> dict[str, Any]:
    """An image (``image_url``, a data URL unless it has a URL of its own) or a PDF (a ``file``
    part with its bytes as a data URL) as a ``chat.completions`` content part."""
    if isinstance(p, DocumentPart):
        return {"type": "file", "file": {"filename": p.title or "document.pdf",
                                         "file_data": f"data:{p.media_type};base64,{file_data(p)}"}}
    url = p.url or f"data:{p.media_type};base64,{file_data(p)}"
    return {"type": "image_url", "image_url": {"url": url}}


@dataclass
class _Call:
    """One tool call being assembled from stream fragments."""

    id: str | None = None
    name: str | None = None
    text: list[str] = field(default_factory=list)
    obj: dict[str, Any] | None = None

    def complete(self) -> bool:
        """Whether the arguments so far are already a whole JSON object."""
        if self.obj is not None:
            return True
        raw = "".join(self.text).strip()
        if not raw:
            return False
        try:
            return isinstance(json.loads(raw), dict)
        except ValueError:
            return False


class ChunkAssembler:
    """Turns ``chat.completion.chunk`` dicts into canonical stream events."""

    def __init__(self, splitter: ThinkSplitter | None) -> None:
        self.splitter = splitter
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.thinking: list[str] = []
        self.pre_text: list[str] = []  # answer text seen before any <think>: may be re-labelled

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            out.append(UsageUpdate(parse_usage(usage)))
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta") or {}
            for key in ("reasoning_content", "reasoning", "thinking"):
                value = delta.get(key)
                if isinstance(value, str) and value:
                    self._think(out, value)
                    break
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._segments(out, self.splitter.feed(content) if self.splitter else [("text", content)])
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for tc in calls:
                    if isinstance(tc, Mapping):
                        self._close_thinking(out)
                        self._tool_fragment(tc)
            legacy = delta.get("function_call")
            if isinstance(legacy, Mapping):
                self._tool_fragment({"function": legacy})
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def finish(self, label: str) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self.splitter is not None:
            self._segments(out, self.splitter.flush())
        self._close_thinking(out)
        if self.finish_reason is None:
            raise provider_error("api_stream_error", label, "the stream ended before the model finished")
        calls = self._finished_calls()
        out.extend(ToolCallDone(c) for c in calls)
        reason: FinishReason
        if calls:
            # Ollama says "stop" even when it called tools.
            reason = "tool_use"
        elif self.finish_reason == "length":
            reason = "max_tokens"
        elif self.finish_reason == "content_filter":
            reason = "refusal"
        else:
            reason = "end_turn"
        out.append(StreamEnd(reason))
        return out

    def _segments(self, out: list[StreamEvent], segments: list[tuple[Kind, str]]) -> None:
        for kind, text in segments:
            if kind == "thinking":
                self._think(out, text)
            elif kind == "text":
                self._text(out, text)
            else:
                # A </think> that was never opened: the text shown so far was reasoning.
                whole = ("".join(self.pre_text) + "".join(self.thinking)).strip()
                self.pre_text, self.thinking = [], []
                if whole:
                    out.append(ThinkingDone(ThinkingPart(whole), absorbs_text=True))

    def _think(self, out: list[StreamEvent], text: str) -> None:
        self.thinking.append(text)
        out.append(ThinkingDelta(text))

    def _text(self, out: list[StreamEvent], text: str) -> None:
        self._close_thinking(out)
        if self.splitter is not None and not self.splitter.seen_open:
            self.pre_text.append(text)
        out.append(TextDelta(text))

    def _close_thinking(self, out: list[StreamEvent]) -> None:
        text = "".join(self.thinking).strip()
        self.thinking = []
        if text:
            out.append(ThinkingDone(ThinkingPart(text)))

    def _tool_fragment(self, tc: Mapping[str, Any]) -> None:
        index = tc.get("index")
        call_id = tc.get("id") or None
        fn = tc.get("function") or {}
        name = fn.get("name") if isinstance(fn, Mapping) else None
        args = fn.get("arguments") if isinstance(fn, Mapping) else None
        target: _Call | None = None
        if call_id is not None:
            target = next((c for c in self.calls if c.id == call_id), None)
            if target is None:
                prior = self.by_index.get(index) if isinstance(index, int) else None
                # A new id under a known index is a new call unless that call had no id yet.
                if prior is not None and prior.id is None and not prior.complete():
                    target = prior
                    target.id = call_id
        elif isinstance(index, int) and index in self.by_index:
            target = self.by_index[index]
        elif index is None and self.calls:
            target = self.calls[-1]
        if target is not None and name and target.name and target.complete() and (args or name != target.name):
            # Ollama reuses index 0 (and omits ids) for each new call: a name after
            # complete arguments starts the next one. llama.cpp's repeated name does not.
            target = None
        if target is None:
            target = _Call(id=call_id)
            self.calls.append(target)
        if isinstance(index, int):
            self.by_index[index] = target
        if name and not target.name:
            target.name = str(name)
        if isinstance(args, Mapping):
            target.obj = dict(args)
        elif isinstance(args, str) and args:
            target.text.append(args)

    def _finished_calls(self) -> list[ToolCallPart]:
        out: list[ToolCallPart] = []
        seen: set[str] = set()
        for c in self.calls:
            raw = "".join(c.text).strip()
            if not c.name and c.obj is None and not raw:
                continue
            arguments: dict[str, Any] = {}
            error: str | None = None
            if c.obj is not None:
                arguments = c.obj
            elif raw:
                try:
                    parsed = json.loads(raw)
                except ValueError as exc:
                    error = f"the arguments are not valid JSON ({exc}); send one JSON object"
                else:
                    if isinstance(parsed, dict):
                        arguments = parsed
                    else:
                        error = f"the arguments must be a JSON object, not {type(parsed).__name__}"
            if not c.name:
                error = "the tool call has no tool name"
            call_id = c.id or f"call_{secrets.token_hex(6)}"
            if call_id in seen:
                call_id = f"{call_id}_{secrets.token_hex(3)}"
            seen.add(call_id)
            out.append(ToolCallPart(call_id, c.name or "", arguments, error))
        return out


def parse_usage(data: Mapping[str, Any]) -> Usage:
    """OpenAI usage: ``prompt_tokens`` already includes the cached ones."""

    num = token_count
    prompt_details = data.get("prompt_tokens_details")
    completion_details = data.get("completion_tokens_details")
    cached = num(prompt_details, "cached_tokens") or num(data, "cached_tokens")
    return Usage(
        input_tokens=num(data, "prompt_tokens"),
        output_tokens=num(data, "completion_tokens"),
        cache_read_tokens=cached,
        cache_write_tokens=0,
        reasoning_tokens=num(completion_details, "reasoning_tokens"),
    )
