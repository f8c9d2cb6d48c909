"""Money is data: privacy (``private``, ``local``) and price are separate facts. A provider's
``prices`` apply whatever its privacy; a server of the user's own defaults to free; a
price nobody knows stays unknown; and a paid private remote trips a budget."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from llm_support import Replay, fixture_bytes, no_network  # noqa: F401
from noteloom.agent import RunOptions, UsageEvent, run
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import ConfigError
from noteloom.messages import Message, Usage
from noteloom.providers import Provider
from noteloom.providers.base import ProviderConfig
from noteloom.providers.openai_compat import OpenAICompatProvider
from noteloom.providers.pricing import price_of
from noteloom.providers.sdk import common_options

MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
PRICES = 'prices = {"big-model" = {input = 0.9, output = 0.9}}\n'
REMOTE = 'base_url = "https://gpu.example.invalid/v1"\napi_key = "k"\n'
LOOPBACK = 'base_url = "http://127.0.0.1:11434/v1"\n'


def provider(tmp_path: Path, table: str) -> Provider:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "noteloom.toml").write_text(f'[providers.p]\ntype = "openai"\n{table}')
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        found, _ = app.services["providers"].resolve("p:big-model")
        assert isinstance(found, Provider)
        return found
    finally:
        app.close()


@pytest.mark.parametrize(
    ("table", "private", "cost"),
    [
        # A server on this machine: private and free, unless priced.
        (LOOPBACK, True, Decimal(0)),
        (LOOPBACK + PRICES, True, Decimal("1.8")),
        # A rented host marked private: private, and billed by its prices (the Fireworks case).
        (REMOTE + "private = true\n", True, None),
        (REMOTE + "private = true\n" + PRICES, True, Decimal("1.8")),
        # A host the user says runs on their own machine: free unless priced.
        (REMOTE + "local = true\n", True, Decimal(0)),
        (REMOTE + "local = true\n" + PRICES, True, Decimal("1.8")),
        # A public remote: what its prices say; unknown when nobody knows the model.
        (REMOTE, False, None),
        (REMOTE + PRICES, False, Decimal("1.8")),
        # A loopback address the user marks as not local (a tunnel to a paid host).
        (LOOPBACK + "local = false\n", False, None),
    ],
)
def test_privacy_and_price_are_separate(tmp_path: Path, table: str, private: bool, cost: Decimal | None) -> None:
    found = provider(tmp_path, table)
    assert found.local is private
    assert found.cost("big-model", MILLION) == cost


def test_the_price_table_of_the_big_vendors_still_prices_official_endpoints() -> None:
    official = OpenAICompatProvider("openai", api_key="k")
    cost = official.cost("gpt-5-mini", MILLION)
    assert cost is not None and cost > 0
    assert price_of(MILLION, "gpt-5-mini", free=True) == Decimal(0)
    assert price_of(MILLION, "gpt-5-mini", free=True, table={"gpt-5-mini": {"input": 1, "output": 1}}) == 2


def test_private_and_local_must_be_true_or_false(tmp_path: Path) -> None:
    for key in ("private", "local"):
        with pytest.raises(ConfigError, match=rf"\[providers.p\]: {key} must be true or false"):
            provider(tmp_path, REMOTE + f'{key} = "yes"\n')


@pytest.mark.anyio
async def test_a_paid_private_remote_trips_a_cost_budget(app: App, no_network: None) -> None:  # noqa: F811
    config = ProviderConfig("fireworks", "openai", {
        "base_url": "https://api.fireworks.ai/inference/v1", "private": True,
        "prices": {"gpt-5-mini": {"input": 100.0, "output": 100.0}},
    }, api_key="k")
    replay = Replay(fixture_bytes("openai_parallel_tools.sse"), 2)
    fireworks = OpenAICompatProvider("fireworks", **common_options(config, "OPENAI_API_KEY"),
                                     http_client=replay.client())
    assert fireworks.local  # private …
    events: list[UsageEvent] = []

    async def on_event(event: object) -> None:
        if isinstance(event, UsageEvent):
            events.append(event)

    # … and paid: 443 tokens at $100 per million is $0.0443 a call; the budget pays for two.
    result = await run(fireworks, "gpt-5-mini", "s", [Message.user("hi")], [], app.tool_context(),
                       RunOptions(max_cost=Decimal("0.1"), max_tokens=100), on_event=on_event)
    assert result.stop_reason == "budget_exceeded" and result.limit == "max_cost"
    assert [e.cost for e in events] == [Decimal("0.0443"), Decimal("0.0443")]
    assert result.cost is not None and result.cost <= Decimal("0.1")
    assert len(replay.requests) == 2
    await fireworks.aclose()
