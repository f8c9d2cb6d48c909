"""The web, read on the user's behalf: pages as Markdown or text, and a search engine.

- :mod:`noteloom.webtools.reader` turns HTML already fetched into what a model reads:
  ``reader`` (the main article as Markdown, through trafilatura; then the page's embedded
  data — JSON-LD ``articleBody``/``headline``, OpenGraph — for a JavaScript-rendered page
  whose visible body is empty; then the whole page) or ``full`` (the whole page as text).
  It parses, it never fetches.
- :mod:`noteloom.webtools.fetch` gets the bytes through the guarded client
  (:class:`noteloom.outbound.OutboundClient`: only public addresses unless the operator
  allows more, every redirect checked, time, size and decompression capped) and hands them
  to the reader in a worker thread.
- :mod:`noteloom.webtools.search` asks a search engine the operator configured in
  ``[web_search]`` (a SearXNG instance or the Brave Search API), through the same client.

Everything these return came from outside: the tools that show it to a model fence it.
"""

from noteloom.webtools.fetch import MAX_PAGE_BYTES, Page, WebFetcher
from noteloom.webtools.reader import MAX_CHARS, Extracted, Mode, extract
from noteloom.webtools.search import (
    BraveSearch,
    SearchBackend,
    SearchHit,
    SearxngSearch,
    search_from_settings,
)

__all__ = [
    "MAX_CHARS",
    "MAX_PAGE_BYTES",
    "BraveSearch",
    "Extracted",
    "Mode",
    "Page",
    "SearchBackend",
    "SearchHit",
    "SearxngSearch",
    "WebFetcher",
    "extract",
    "search_from_settings",
]
