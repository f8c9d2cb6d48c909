"""What the adapters on a vendor SDK (``openai``, ``anthropic``) share: the settings every
one of them takes, their label and models, the price of a call, the SDK client and its
timeouts, relaying the SDK's stream through an assembler, the failures that are not the
vendor's own, and the reading of the options common to their configuration tables."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from noteloom.errors import ConfigError
from noteloom.jsonvalues import encodable_values
from noteloom.messages import StreamEvent, Usage
from noteloom.providers.base import (
    TEXT_ONLY,
    ModelCapabilities,
    ModelRequest,
    ProviderConfig,
    Timeouts,
    declared,
    is_local_url,
    transport_error,
    upstream_items,
)
from noteloom.providers.errors import ProviderError, provider_error
from noteloom.providers.pricing import price_of

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("noteloom.providers")


class Assembler(Protocol):
    """Turns the SDK's stream items (as plain dicts) into our stream events."""

    def feed(self, item: Mapping[str, Any]) -> list[StreamEvent]: ...

    def finish(self, label: str) -> list[StreamEvent]: ...


class SdkProvider:
    """Mixed into an adapter whose ``__init__`` sets the attributes declared here."""

    #: The vendor's name in the price table, and how users know it.
    vendor: ClassVar[str]
    vendor_label: ClassVar[str]

    name: str
    base_url: str
    official: bool
    api_key: str | None
    #: Traffic stays private (the protocol's older name; ``private`` says the same).
    local: bool
    private: bool
    #: The server is the user's own (their machine or network): probed before a call, given
    #: the longer idle timeout, free unless priced.
    self_hosted: bool
    #: The server is the user's own (this machine or their network): free unless priced.
    free: bool
    timeouts: Timeouts
    max_retries: int
    prices: dict[str, Mapping[str, float]]
    #: The most output tokens a call may produce when the request sets no limit (the
    #: table's ``max_output_tokens``); ``None``: the model's own maximum, unknown here.
    max_output_tokens: int | None = None
    #: What each model's table in noteloom.toml declares it reads (``vision``, ``document``).
    model_capabilities: dict[str, dict[str, bool]]
    _models: list[str]
    _http_client: httpx2.AsyncClient | None
    _client: Any

    def _set_common(
        self,
        name: str,
        base_url: str,
        *,
        api_key: str | None,
        models: Sequence[str],
        local: bool | None,
        timeouts: Timeouts | None,
        free: bool | None = None,
        max_retries: int,
        prices: Mapping[str, Mapping[str, float]] | None,
        http_client: httpx2.AsyncClient | None,
        model_capabilities: Mapping[str, Mapping[str, bool]] | None = None,
    ) -> None:
        """The settings every adapter takes (``base_url`` with the vendor's default applied)."""
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self._models = list(models)
        self.local = self.private = is_local_url(self.base_url) if local is None else local
        self.self_hosted = is_local_url(self.base_url) if free is None else free
        # Price is not privacy: a remote marked private is still billed by its host.
        self.free = self.self_hosted
        self.timeouts = timeouts or Timeouts()
        self.max_retries = max_retries
        self.prices = dict(prices or {})
        self._http_client = http_client
        self._client = None
        self.model_capabilities = {m: dict(d) for m, d in (model_capabilities or {}).items()}

    @property
    def label(self) -> str:
        return self.vendor_label if self.official else f"Provider {self.name!r} ({self.base_url})"

    def models(self) -> list[str]:
        return list(self._models)

    def capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` reads besides text: the adapter's knowledge of its vendor's models
        (:meth:`known_capabilities`), with the model's own table written over it."""
        return declared(self.known_capabilities(model), self.model_capabilities.get(model))

    def known_capabilities(self, model: str) -> ModelCapabilities:
        """What the adapter knows of ``model`` without a declaration: nothing, by default."""
        return TEXT_ONLY

    def max_output(self, request: ModelRequest) -> int | None:
        """The output limit of ``request`` on this provider, for a budget's worst case."""
        return request.max_tokens or self.max_output_tokens

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        return price_of(
            usage,
            model,
            free=self.free,
            vendor=self.vendor if self.official else None,
            api_url=None if self.official else self.base_url,
            table=self.prices,
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _sdk_client(self, factory: Callable[..., Any]) -> Any:
        """The SDK client, made on first use by ``factory`` (the SDK's async client class)."""
        if self._client is None:
            self._client = factory(
                # Always explicit, so the SDK never falls back to keys or profiles of its own;
                # SDKs insist on a key even for local servers, which ignore it.
                api_key=self.api_key or "no-key",
                base_url=self.base_url,
                timeout=self._sdk_timeout(),
                max_retries=self.max_retries,
                http_client=self._http_client or _owned_http_client(factory),
            )
        return self._client

    async def _relay(
        self, open_stream: Callable[[], Awaitable[Any]], assembler: Assembler
    ) -> AsyncGenerator[StreamEvent, None]:
        """The SDK's stream under our deadlines, through ``assembler``; closes it on the way out."""
        items = upstream_items(open_stream, timeouts=self.timeouts, label=self.label, classify=self._classify)
        async with aclosing(items):
            async for item in items:
                data = item.to_dict(warnings=False) if hasattr(item, "to_dict") else item
                # A "\\ud800" escape decodes to a lone surrogate, which no database or answer
                # can encode: the turn could then never be stored. Such text becomes U+FFFD here.
                data = encodable_values(data)
                for event in assembler.feed(data):
                    yield event
        for event in assembler.finish(self.label):
            yield event

    def _classify(self, exc: BaseException, started: bool) -> ProviderError:
        """A failure as one of our codes: the SDK's dropped connection, the vendor's own
        errors (``_vendor_error``), our deadlines and transport errors, else a bug."""
        log.warning("%s: %s: %s", self.label, type(exc).__name__, exc)
        if isinstance(exc, self._connection_error()):
            return provider_error("api_stream_error" if started else "api_network_error", self.label,
                                  "the connection dropped" if started else "")
        found = self._vendor_error(exc) or transport_error(exc, started, self.label)
        if found is not None:
            return found
        log.error("%s: unexpected error", self.label, exc_info=exc)
        return provider_error("api_stream_error", self.label, "an unexpected error")

    def _connection_error(self) -> type[BaseException]:
        """The SDK's exception for a connection that failed or dropped."""
        raise NotImplementedError

    def _vendor_error(self, exc: BaseException) -> ProviderError | None:
        """``exc`` classified if it is one of the SDK's API errors, else ``None``."""
        raise NotImplementedError

    def _sdk_timeout(self) -> httpx2.Timeout:
        """Our own deadlines cut first-token waits and stalls; the SDK's read timeout only
        has to be the longer of the two."""
        import httpx2

        t = self.timeouts
        return httpx2.Timeout(connect=t.connect, read=max(t.first_token, t.idle), write=t.idle, pool=t.connect)


def common_options(config: ProviderConfig, key_env: str) -> dict[str, Any]:
    """The constructor arguments every SDK adapter reads the same way from its table."""
    base_url = config.get_str("base_url")
    if base_url is None and not config.api_key:
        raise ConfigError(
            f"provider {config.name!r} needs an API key: set {config.api_key_env or key_env} "
            "(or try the offline model with -m echo)"
        )
    # "local" or "private": traffic stays with the user ("private" wins when both are
    # written). Only "local" (the server runs on the user's own machine) or a
    # loopback/private-network address also means free unless priced, the reachability
    # check and the longer idle timeout; a private remote (a rented host) is billed by its
    # prices and keeps the remote defaults.
    for key in ("local", "private"):
        value = config.options.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{config.where}: {key} must be true or false, not {value!r}")
    own = config.options.get("local")
    private = config.options.get("private", own)
    self_hosted = own if own is not None else is_local_url(base_url)
    return {
        "base_url": base_url,
        "api_key": config.api_key,
        "default_model": config.get_str("default_model"),
        "models": config.get_models(),
        "local": private,
        "free": own,
        "timeouts": Timeouts.from_options(config.options, config.where, local=self_hosted),
        "max_retries": config.get_int("max_retries", 2),
        "prices": config.get_prices(),
        "model_capabilities": config.declared_capabilities(),
    }


def max_output_option(config: ProviderConfig) -> int | None:
    """``max_output_tokens = N``: what a call of this provider can produce at most when it sets
    no limit of its own (genai-prices knows context windows, not output limits)."""
    if "max_output_tokens" not in config.options:
        return None
    value = config.get_int("max_output_tokens", 0)
    if value < 1:
        raise ConfigError(f"{config.where}: max_output_tokens must be a whole number above 0, not {value!r}")
    return value


def _owned_http_client(factory: Callable[..., Any]) -> httpx2.AsyncClient:
    """The SDK's HTTP client with its own defaults (timeouts, limits, keep-alive), minus
    its garbage-collection hook: the client an SDK makes for itself, when dropped unclosed,
    schedules its ``aclose`` on whatever event loop is running at that moment, which is not
    the loop its connections belong to when the provider outlived that loop (a workspace
    opened again, a test after another) and then fails there with "Event loop is closed".
    Ours is closed by :meth:`aclose`, or dropped with the provider and its sockets closed."""
    sdk = sys.modules[factory.__module__.split(".", 1)[0]]
    client: httpx2.AsyncClient = sdk.DefaultAsyncHttpxClient()
    return client
