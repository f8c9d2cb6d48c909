"""What a model call cost, in USD.

Privacy and price are separate facts. Order of precedence: a price the user wrote in
the provider's table wins, whatever the provider's privacy (a private remote such as a
rented GPU host is still billed); a server on this machine or the user's network costs
nothing unless priced; otherwise the ``genai-prices`` table, which knows the big
vendors. When nobody knows the model the cost is ``None`` (unknown), never a made-up
zero.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from decimal import Decimal

from noteloom.messages import Usage

log = logging.getLogger("noteloom.providers")
MILLION = Decimal(1_000_000)
ZERO = Decimal(0)


def price_of(
    usage: Usage,
    model: str,
    *,
    free: bool = False,
    vendor: str | None = None,
    api_url: str | None = None,
    table: Mapping[str, Mapping[str, float]] | None = None,
) -> Decimal | None:
    """The cost of ``usage`` on ``model``; ``free`` says the server is the user's own (free
    unless ``table`` prices the model); ``vendor`` (``openai``, ``anthropic``) or ``api_url``
    tell the price table whose price list to use."""
    if table and model in table:
        return _from_table(usage, table[model])
    if free:
        return ZERO
    return _genai_price(usage, model, vendor, api_url)


def output_rate(
    cost: Callable[[Usage], Decimal | None],
) -> Decimal | None:
    """USD per output token of a model, from its ``cost`` function (``None`` when unknown)."""
    million = cost(Usage(output_tokens=1_000_000))
    return None if million is None else million / MILLION


def _from_table(usage: Usage, prices: Mapping[str, float]) -> Decimal:
    def rate(key: str, fallback: str | None = None) -> Decimal:
        value = prices.get(key, prices.get(fallback, 0.0) if fallback else 0.0)
        return Decimal(str(value))

    uncached = max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
    total = (
        uncached * rate("input")
        + usage.cache_read_tokens * rate("cache_read", "input")
        + usage.cache_write_tokens * rate("cache_write", "input")
        + usage.output_tokens * rate("output")
    )
    return total / MILLION


def _genai_price(usage: Usage, model: str, vendor: str | None, api_url: str | None) -> Decimal | None:
    import genai_prices  # imported late: it loads a large table

    gp_usage = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if vendor:
                calc = genai_prices.calc_price(gp_usage, model, provider_id=vendor)
            elif api_url:
                calc = genai_prices.calc_price(gp_usage, model, provider_api_url=api_url)
            else:
                calc = genai_prices.calc_price(gp_usage, model)
    except LookupError:
        return None
    except Exception:  # the table is data we do not control: a bad entry must not fail a turn
        log.warning("price lookup failed for %r", model, exc_info=True)
        return None
    return Decimal(calc.total_price)
