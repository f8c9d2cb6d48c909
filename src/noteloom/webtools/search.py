"""Web search through the engine the operator configured (``[web_search]`` in noteloom.toml).

Two backends, each speaking its service's own wire format:

- SearXNG: ``GET {searxng_url}/search?q=…&format=json`` (the instance must have the
  ``json`` format enabled in its ``settings.yml``); results' ``title``, ``url``, ``content``.
- Brave Search API: ``GET {brave_url}/res/v1/web/search?q=…&count=N`` with the
  ``X-Subscription-Token`` header; ``web.results[]``' ``title``, ``url``, ``description``.
  ``brave_url`` defaults to ``https://api.search.brave.com``.

::

    [web_search]
    searxng_url = "http://127.0.0.1:8888"    # or:
    brave_api_key_env = "BRAVE_API_KEY"      # the variable holding the key (or brave_api_key = "…")
    count = 5                                # results when a call names no count (at most 20)

Requests go through the guarded client like every outbound request. A SearXNG instance is
usually on the user's own machine or network, which that client refuses; naming it here is
the operator saying it is trusted, so the search client (and only it) also admits the
configured instance's host and port, as if ``[outbound] allow`` listed it. Everything else
— where its results point, redirects elsewhere — is checked as usual. Without either
setting there is no backend and ``web_search`` is absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import httpx2

from noteloom.errors import ConfigError, OutboundRefused
from noteloom.outbound import (
    OutboundClient,
    OutboundPolicy,
    OutboundResponse,
    Resolver,
    check_url,
    system_resolve,
)
from noteloom.tools import ToolError

DEFAULT_COUNT = 5
MAX_COUNT = 20
BRAVE_URL = "https://api.search.brave.com"
_SNIPPET_CHARS = 500
_KNOWN = ("searxng_url", "brave_api_key", "brave_api_key_env", "brave_url", "count")


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str

    def payload(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


class SearchBackend(Protocol):
    """A search engine: at most ``count`` hits for ``query``."""

    name: str
    default_count: int

    async def search(self, query: str, count: int) -> list[SearchHit]: ...


def _hits(items: Any, snippet_key: str, count: int) -> list[SearchHit]:
    out: list[SearchHit] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        snippet = " ".join(str(item.get(snippet_key) or "").split())
        out.append(SearchHit(" ".join(str(item.get("title") or "").split()), item["url"], snippet[:_SNIPPET_CHARS]))
        if len(out) >= count:
            break
    return out


def _json(response: OutboundResponse, engine: str) -> Any:
    if response.status in (401, 403):
        raise ToolError(f"{engine} refused the search (HTTP {response.status}); the operator should check its "
                        "key or the instance's settings")
    if response.status == 429:
        raise ToolError(f"{engine} says too many searches (HTTP 429); wait a little and search again")
    if not response.ok:
        raise ToolError(f"{engine} answered HTTP {response.status}; try again later")
    try:
        return json.loads(response.text())
    except ValueError as exc:
        raise ToolError(f"{engine} answered with something that is not JSON; the operator should check "
                        "that its JSON output is on") from exc


class SearxngSearch:
    """A SearXNG instance at ``base_url``."""

    name = "searxng"

    def __init__(self, base_url: str, client: OutboundClient, *, default_count: int = DEFAULT_COUNT) -> None:
        self.base_url, self.client, self.default_count = base_url.rstrip("/"), client, default_count

    async def search(self, query: str, count: int) -> list[SearchHit]:
        url = f"{self.base_url}/search?{urlencode({'q': query, 'format': 'json'})}"
        response = await self.client.request("GET", url, headers={"Accept": "application/json"},
                                             accept=("application/json",))
        data = _json(response, "the SearXNG instance")
        return _hits(data.get("results") if isinstance(data, dict) else None, "content", count)


class BraveSearch:
    """The Brave Search API (``base_url`` overridable, for tests and proxies)."""

    name = "brave"

    def __init__(self, api_key: str, client: OutboundClient, *, base_url: str = BRAVE_URL,
                 default_count: int = DEFAULT_COUNT) -> None:
        self.api_key, self.client, self.default_count = api_key, client, default_count
        self.base_url = base_url.rstrip("/")

    async def search(self, query: str, count: int) -> list[SearchHit]:
        url = f"{self.base_url}/res/v1/web/search?{urlencode({'q': query, 'count': count})}"
        response = await self.client.request(
            "GET", url, headers={"Accept": "application/json", "X-Subscription-Token": self.api_key},
            accept=("application/json",))
        data = _json(response, "Brave Search")
        web = data.get("web") if isinstance(data, dict) else None
        return _hits(web.get("results") if isinstance(web, dict) else None, "description", count)


def _url_setting(table: Mapping[str, Any], key: str) -> str:
    value = table[key]
    if not isinstance(value, str):
        raise ConfigError(f"[web_search] {key} must be a URL (a string)")
    try:
        check_url(value, field=key)
    except OutboundRefused as exc:
        raise ConfigError(f"[web_search] {key} = {value!r} is not an http(s) URL") from exc
    return value


def search_from_settings(file: Mapping[str, Any], env: Mapping[str, str], policy: OutboundPolicy | None = None,
                         *, resolve: Resolver = system_resolve) -> SearchBackend | None:
    """The backend ``[web_search]`` configures, or ``None`` when none is (``ConfigError``
    naming a bad or missing value). ``policy``: the operator's outbound policy, widened for
    a SearXNG instance (see the module's docstring)."""
    table = file.get("web_search", {})
    if not isinstance(table, Mapping):
        raise ConfigError("[web_search] in noteloom.toml must be a table")
    unknown = sorted(set(table) - set(_KNOWN))
    if unknown:
        raise ConfigError(f"[web_search] has no setting {unknown[0]!r}; known settings: {', '.join(_KNOWN)}")
    count = table.get("count", DEFAULT_COUNT)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ConfigError(f"[web_search] count must be a whole number from 1 to {MAX_COUNT}, not {count!r}")
    policy = policy or OutboundPolicy()
    brave = "brave_api_key" in table or "brave_api_key_env" in table
    if "searxng_url" in table and brave:
        raise ConfigError("[web_search] names both a SearXNG instance and a Brave key; keep one")
    if "searxng_url" in table:
        base = _url_setting(table, "searxng_url")
        parsed = httpx2.URL(base)
        host = parsed.host if ":" not in parsed.host else f"[{parsed.host}]"
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        widened = OutboundPolicy(policy.allow | {f"{host}:{port}"}, policy.timeout)
        return SearxngSearch(base, OutboundClient(widened, resolve=resolve), default_count=count)
    if not brave:
        return None
    key = table.get("brave_api_key")
    if key is None:
        var = table["brave_api_key_env"]
        if not isinstance(var, str) or not var:
            raise ConfigError("[web_search] brave_api_key_env must name an environment variable")
        key = env.get(var)
        if not key:
            raise ConfigError(f"[web_search] brave_api_key_env names {var}, which is not set; set it to your "
                              "Brave Search API key, or remove [web_search]")
    if not isinstance(key, str) or not key.strip():
        raise ConfigError("[web_search] brave_api_key must be the API key (a string)")
    base = _url_setting(table, "brave_url") if "brave_url" in table else BRAVE_URL
    return BraveSearch(key.strip(), OutboundClient(policy, resolve=resolve), base_url=base, default_count=count)
