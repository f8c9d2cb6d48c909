"""The small protocol every LLM provider implements, and what a model call takes.

A provider turns one ``ModelRequest`` into a stream of ``StreamEvent`` (see
``noteloom.messages``) and prices the usage it reports. To stop a call, cancel the
task (or cancel scope) that iterates the stream: adapters close the upstream
connection on the way out. Failures are raised as ``ProviderError``.
"""

from __future__ import annotations

import binascii
import ipaddress
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal, Protocol, TypeVar, assert_never, runtime_checkable
from urllib.parse import urlsplit

import anyio

from noteloom.errors import ConfigError
from noteloom.messages import (
    DocumentPart,
    ImagePart,
    Message,
    StreamEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from noteloom.providers.errors import ProviderError, provider_error

#: How hard the model may think: ``None`` leaves the provider's default alone.
ThinkingLevel = Literal["off", "low", "medium", "high"]
THINKING_LEVELS: tuple[ThinkingLevel, ...] = ("off", "low", "medium", "high")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SystemBlock:
    """One piece of the system prompt. ``cache`` marks the stable prefix that may be
    cached; blocks that change per run (the untrusted-input nonce) set it False."""

    text: str
    cache: bool = True


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about one tool."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    system: tuple[SystemBlock, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    thinking: ThinkingLevel | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    #: Nucleus sampling; like ``temperature``, sent only when set.
    top_p: float | None = None

    @property
    def system_text(self) -> str:
        return "\n\n".join(b.text for b in self.system if b.text)


#: Characters per token for an estimate that errs high: English prose runs near four,
#: code, JSON and most other scripts nearer three.
CHARS_PER_TOKEN = 3
#: What one image costs in input tokens at most (Anthropic: ~1,600 for the largest size it
#: keeps; OpenAI's high-detail tiles come to a similar figure).
IMAGE_TOKENS = 1600
#: What one page of a PDF read natively costs at most: both vendors give the model each
#: page's text (Anthropic: 1,500-3,000 tokens a page) and the page as an image (above).
PDF_PAGE_TOKENS = 3000 + IMAGE_TOKENS
#: Both vendors take at most 100 pages of PDF in one request: past that the call fails, so
#: no estimate need be higher.
PDF_MAX_PAGES = 100
#: The bytes per page assumed when a PDF's page objects cannot be counted (packed into
#: compressed object streams): a text page with its share of fonts and structure. Lower
#: would err higher, and a scanned page (100 KB and more) is over-counted already.
PDF_BYTES_PER_PAGE = 20_000
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page\b")


#: Page counts of the PDFs seen lately, by a fingerprint of their base64 text.
_PAGES_SEEN: dict[tuple[int, str], int] = {}


def pdf_pages(data: str) -> int:
    """The pages of a base64 PDF for an estimate: its page objects counted, or, when they are
    packed out of sight, one per ``PDF_BYTES_PER_PAGE``; between 1 and ``PDF_MAX_PAGES``."""
    # The budget check estimates every step, and decoding a 10 MB PDF took 60-70 ms (measured,
    # on the event loop): a count is kept per file, known by its length and three slices of
    # it. Two files mistaken for each other only cost an estimate the other file's pages.
    middle = len(data) // 2
    key = (len(data), data[:256] + data[middle:middle + 256] + data[-256:])
    known = _PAGES_SEEN.get(key)
    if known is not None:
        return known
    try:
        raw = binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        raw = b""
    pages = min(max(len(_PAGE_OBJECT.findall(raw)) or -(-len(raw) // PDF_BYTES_PER_PAGE), 1), PDF_MAX_PAGES)
    if len(_PAGES_SEEN) >= 256:
        _PAGES_SEEN.clear()
    _PAGES_SEEN[key] = pages
    return pages


def file_tokens(part: ImagePart | DocumentPart) -> int:
    """What a model is likely charged for a file it reads whole, in tokens (errs high)."""
    return pdf_pages(part.data) * PDF_PAGE_TOKENS if isinstance(part, DocumentPart) else IMAGE_TOKENS


def estimate_input_tokens(request: ModelRequest) -> int:
    """An estimate of the input tokens of ``request`` that errs high (no tokenizer is
    loaded for it): the budget check prices the next call's worst case with it. An image
    counts ``IMAGE_TOKENS``, a PDF ``PDF_PAGE_TOKENS`` a page (``pdf_pages``)."""
    chars = len(request.system_text) + sum(
        len(t.name) + len(t.description) + len(json.dumps(t.input_schema, default=str)) for t in request.tools
    )
    files = 0
    for message in request.messages:
        chars += 8  # role and framing
        for part in message.parts:
            if isinstance(part, TextPart):
                chars += len(part.text)
            elif isinstance(part, ThinkingPart):
                chars += len(part.text) + len(part.redacted or "")
            elif isinstance(part, ToolCallPart):
                chars += len(part.name) + len(json.dumps(part.arguments, default=str))
            elif isinstance(part, ToolResultPart):
                chars += len(part.content)
                files += sum(file_tokens(b) for b in part.blocks)
            elif isinstance(part, ImagePart | DocumentPart):
                files += file_tokens(part)
            else:
                assert_never(part)
    return -(-chars // CHARS_PER_TOKEN) + files


def call_max_output(provider: Provider, request: ModelRequest) -> int | None:
    """The most output tokens ``request`` can produce on ``provider``: what the provider
    will send as its limit (``max_output``, when it has one), else the request's own
    ``max_tokens``; ``None`` when nothing bounds it (the model's own maximum, unknown here:
    ``genai-prices`` knows context windows, not output limits)."""
    own = getattr(provider, "max_output", None)
    if callable(own):
        value = own(request)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return request.max_tokens


def file_data(part: ImagePart | DocumentPart) -> str:
    """The base64 bytes of a file part about to go on the wire.

    A stored transcript keeps a file's ``ref`` and drops its bytes; whoever builds a request
    from it reads them again (checking the reader may still see them). A part that reaches
    an adapter without them is that builder's bug, raised here rather than sent as an empty
    file the model would answer about."""
    if not part.data:
        ref = f" (ref {part.ref!r})" if part.ref else ""
        raise ValueError(
            f"a {part.kind} part{ref} reached the provider without its bytes: read the attachment again "
            "by its ref (noteloom.attachments) before building the model request"
        )
    return part.data


def is_private(provider: Any) -> bool:
    """Whether traffic to ``provider`` stays private: its ``private`` attribute when it has one,
    else its ``local`` (the protocol's older name for the same answer)."""
    value = getattr(provider, "private", None)
    return bool(value if isinstance(value, bool) else getattr(provider, "local", False))


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """What kinds of file a model reads besides text. A model nobody declared is text-only."""

    #: Images (``ImagePart``), in user messages and tool results.
    vision: bool = False
    #: Whole PDFs (``DocumentPart``) read natively.
    document: bool = False


TEXT_ONLY = ModelCapabilities()


def declared(known: ModelCapabilities, declaration: Mapping[str, bool] | None) -> ModelCapabilities:
    """``known`` with what a model's table declares written over it, key by key."""
    if not declaration:
        return known
    return replace(known, **{k: v for k, v in declaration.items() if k in ("vision", "document")})


def capabilities_of(provider: Any, model: str) -> ModelCapabilities:
    """``provider``'s declared capabilities for ``model``: its ``capabilities(model)`` method
    when it has one (the method is optional, so providers written before it keep working),
    text-only otherwise."""
    declare = getattr(provider, "capabilities", None)
    if declare is None:
        return TEXT_ONLY
    found = declare(model)
    return found if isinstance(found, ModelCapabilities) else TEXT_ONLY


@runtime_checkable
class Provider(Protocol):
    """An LLM behind one configured name, addressed as ``name:model``."""

    #: The configured name (``openai``, ``local`` …), the part before the colon.
    name: str
    #: Traffic stays on the machine or a private host (privacy only: what a call costs
    #: is ``cost``'s answer, which a private host with prices answers with its prices).
    #: The name is historical: a rented host marked ``private = true`` says True here too.
    #: Read it through ``is_private``, which prefers a ``private`` attribute when there is one.
    local: bool
    default_model: str | None

    def models(self) -> list[str]:
        """Models this provider is known to serve (may be empty: any name is tried)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one model call; ends with ``StreamEnd`` or raises ``ProviderError``."""
        ...

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        """The price of ``usage`` in USD; ``None`` when the price is unknown."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


#: The longest silence between chunks on a server of the user's own: a model running on a
#: CPU may take minutes over a long answer, and nobody is billed while it thinks.
LOCAL_IDLE = 300.0


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. ``first_token`` covers the request until the first chunk (a local model
    may need a minute to load); ``idle`` is the longest silence between chunks (``LOCAL_IDLE``
    by default on a server of the user's own); ``probe`` bounds the reachability check made
    before a call on such a server (``noteloom.providers.reachability``)."""

    connect: float = 10.0
    first_token: float = 60.0
    idle: float = 120.0
    probe: float = 2.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any], where: str, *, local: bool = False) -> Timeouts:
        """The ``*_timeout`` settings of a table over the defaults (those of a server of the
        user's own when ``local``); ``ConfigError`` naming the key for a value that is not a
        number of seconds above 0."""
        values: dict[str, float] = {"idle": LOCAL_IDLE} if local else {}
        for key, attr in (("connect_timeout", "connect"), ("first_token_timeout", "first_token"),
                          ("idle_timeout", "idle"), ("probe_timeout", "probe")):
            if options.get(key) is not None:
                v = options[key]
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < float("inf"):
                    raise ConfigError(f"{where}: {key} must be a number of seconds above 0, not {v!r}")
                values[attr] = float(v)
        return cls(**values)


@dataclass(frozen=True)
class ProviderConfig:
    """One ``[providers.NAME]`` table (or a built-in default), with its key resolved."""

    name: str
    type: str
    options: Mapping[str, Any] = field(default_factory=dict)
    api_key: str | None = None
    #: Where the key was looked for, to say so when it is missing.
    api_key_env: str | None = None
    #: What is wrong with the table, raised when the provider is used (not when the app opens).
    problem: str | None = None

    @property
    def where(self) -> str:
        return f"[providers.{self.name}]"

    def get_str(self, key: str, default: str | None = None) -> str | None:
        v = self.options.get(key, default)
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{self.where}: {key} must be a string, not {v!r}")
        return v

    def get_bool(self, key: str, default: bool) -> bool:
        v = self.options.get(key, default)
        if not isinstance(v, bool):
            raise ConfigError(f"{self.where}: {key} must be true or false, not {v!r}")
        return v

    def get_int(self, key: str, default: int) -> int:
        v = self.options.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{self.where}: {key} must be a whole number >= 0, not {v!r}")
        return v

    def get_models(self) -> list[str]:
        """``models = ["a", "b"]``, or the names of ``[providers.NAME.models."MODEL"]`` tables."""
        v = self.options.get("models", [])
        if isinstance(v, Mapping):
            return [str(m) for m in v]
        if not isinstance(v, list) or not all(isinstance(m, str) for m in v):
            raise ConfigError(f"{self.where}: models must be a list of model names, not {v!r}")
        return list(v)

    def declared_capabilities(self) -> dict[str, dict[str, bool]]:
        """What each model's own table declares of ``vision`` and ``document`` (only the keys
        it writes: the rest stays the provider's built-in knowledge). The registry has
        checked the tables against the type's settings already."""
        v = self.options.get("models", [])
        if not isinstance(v, Mapping):
            return {}
        out: dict[str, dict[str, bool]] = {}
        for model, table in v.items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"{self.where}: models.{json.dumps(str(model))} must be a table")
            declared: dict[str, bool] = {}
            for key in ("vision", "document"):
                if key in table:
                    value = table[key]
                    if not isinstance(value, bool):
                        raise ConfigError(
                            f"{self.where}: models.{json.dumps(str(model))}: {key} must be true or false, not {value!r}"
                        )
                    declared[key] = value
            out[str(model)] = declared
        return out

    def get_prices(self) -> dict[str, dict[str, float]]:
        """``prices = {"MODEL" = {input = 0.5, output = 1.5, cache_read = 0.05}}``, USD per million tokens."""
        v = self.options.get("prices", {})
        ok = isinstance(v, Mapping) and all(
            isinstance(p, Mapping) and all(isinstance(x, int | float) for x in p.values()) for p in v.values()
        )
        if not ok:
            raise ConfigError(f"{self.where}: prices must map a model to {{input = …, output = …}} (USD per million tokens)")
        return {str(m): {str(k): float(x) for k, x in p.items()} for m, p in v.items()}


def is_local_url(url: str | None) -> bool:
    """True for loopback, private-network and ``.local`` hosts."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost",) or host.endswith(".local") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


class _End:
    pass


END = _End()


async def next_within(it: AsyncIterator[T], seconds: float) -> T | _End:
    """The next item of ``it``, ``END`` when it is exhausted; ``TimeoutError`` after ``seconds``."""
    with anyio.fail_after(seconds):
        try:
            return await it.__anext__()
        except StopAsyncIteration:
            return END


async def upstream_items(
    open_stream: Callable[[], Awaitable[Any]],
    *,
    timeouts: Timeouts,
    label: str,
    classify: Callable[[BaseException, bool], ProviderError],
) -> AsyncGenerator[Any, None]:
    """Open an SDK stream and yield its items under the first-token and idle deadlines.

    ``classify(exc, started)`` turns an SDK error into a ``ProviderError``. The
    upstream stream is closed however the iteration ends (so a cancelled call hangs
    up on the server), shielded from the cancellation that ended it.
    """
    deadline = anyio.current_time() + timeouts.first_token
    try:
        with anyio.fail_after(timeouts.first_token):
            stream = await open_stream()
    except TimeoutError:
        raise provider_error("api_no_response", label) from None
    except ProviderError:
        raise
    except Exception as exc:
        raise classify(exc, False) from exc
    try:
        first = True
        while True:
            wait = max(deadline - anyio.current_time(), 0.001) if first else timeouts.idle
            try:
                item = await next_within(stream, wait)
            except TimeoutError:
                if first:
                    raise provider_error("api_no_response", label) from None
                raise provider_error("api_stream_error", label, f"no data for {timeouts.idle:g} s") from None
            except ProviderError:
                raise
            except Exception as exc:
                raise classify(exc, True) from exc
            if isinstance(item, _End):
                return
            first = False
            yield item
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await stream.close()


def transport_error(exc: BaseException, started: bool, label: str) -> ProviderError | None:
    """The code for a connection-level failure (no HTTP status), or ``None`` if ``exc`` is not one."""
    import json

    import httpx2

    if isinstance(exc, json.JSONDecodeError):
        return provider_error("api_stream_error", label, "the server sent malformed data")
    if isinstance(exc, httpx2.TransportError | anyio.EndOfStream | anyio.BrokenResourceError | ConnectionError):
        if started:
            return provider_error("api_stream_error", label, "the connection dropped")
        return provider_error("api_network_error", label)
    return None


def token_count(m: Any, key: str) -> int:
    """``m[key]`` as a token count from a vendor's usage object: 0 when missing or not a number."""
    v = m.get(key) if isinstance(m, Mapping) else None
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0
