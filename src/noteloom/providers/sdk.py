"""What the adapters on a vendor SDK (``openai``, ``anthropic``) share: their name and
label, their models, the price of a call, the timeouts handed to the SDK, the client's
lifetime, and the reading of the options common to their configuration tables."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from noteloom.errors import ConfigError
from noteloom.messages import Usage
from noteloom.providers.base import ProviderConfig, Timeouts
from noteloom.providers.pricing import price_of

if TYPE_CHECKING:
    import httpx2


class SdkProvider:
    """Mixed into an adapter whose ``__init__`` sets the attributes declared here."""

    #: The vendor's name in the price table, and how users know it.
    vendor: ClassVar[str]
    vendor_label: ClassVar[str]

    name: str
    base_url: str
    official: bool
    local: bool
    timeouts: Timeouts
    prices: dict[str, Mapping[str, float]]
    _models: list[str]
    _client: Any

    @property
    def label(self) -> str:
        return self.vendor_label if self.official else f"Provider {self.name!r} ({self.base_url})"

    def models(self) -> list[str]:
        return list(self._models)

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        return price_of(
            usage,
            model,
            local=self.local,
            vendor=self.vendor if self.official else None,
            api_url=None if self.official else self.base_url,
            table=self.prices,
        )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

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
    # "local" or "private": traffic stays with the user, and calls cost nothing.
    local = config.options.get("local", config.options.get("private"))
    if local is not None and not isinstance(local, bool):
        raise ConfigError(f"{config.where}: local must be true or false, not {local!r}")
    return {
        "base_url": base_url,
        "api_key": config.api_key,
        "default_model": config.get_str("default_model"),
        "models": config.get_models(),
        "local": local,
        "timeouts": Timeouts.from_options(config.options, config.where),
        "max_retries": config.get_int("max_retries", 2),
        "prices": config.get_prices(),
    }
