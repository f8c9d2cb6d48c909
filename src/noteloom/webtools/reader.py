"""HTML already fetched, as what a model reads (trafilatura does the parsing).

``reader`` tries, in order: the main article as Markdown (headings, lists, tables, link
text and targets kept; navigation, footers, comments, scripts, styles and images left out);
the page's embedded data when the visible body gives nothing (a JavaScript-rendered page
ships its article as JSON-LD ``articleBody`` with a ``headline``, or only an OpenGraph /
``<meta>`` description); and last the whole page as text. ``full`` is that last step alone:
for pages that are no single article (link hubs, search results, indexes). Neither runs
any script of the page: what a page fetches after loading, and does not embed, is missed.

Text is capped at :data:`MAX_CHARS` characters with a ``[truncated N characters]`` marker.
CPU-bound and blocking: call it in a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["reader", "full"]
#: Where the text came from: the article, the page's embedded data, the whole page, or a
#: document that was text already.
Source = Literal["article", "embedded", "page", "text"]

#: The most characters of a page a model is given (about 8k tokens).
MAX_CHARS = 30_000
#: An article of fewer words may be a script-rendered page's placeholder (see :func:`extract`).
_SHORT_WORDS = 50


@dataclass(frozen=True)
class Extracted:
    title: str | None
    text: str
    source: Source
    #: Characters cut off at :data:`MAX_CHARS` (0: none).
    truncated: int = 0


def cap(text: str, limit: int = MAX_CHARS) -> tuple[str, int]:
    """``text`` cut at ``limit`` characters with a marker saying how much was left out."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return text[:limit] + f"\n\n[truncated {cut} characters]", cut


def extract(html: str, mode: Mode = "reader", *, url: str | None = None) -> Extracted:
    """The text of ``html`` in ``mode`` (see the module's docstring); the title from the
    page's metadata (OpenGraph, JSON-LD, ``<title>``)."""
    import trafilatura  # loaded on the first page read, not when the app starts

    tree = trafilatura.load_html(html)
    if tree is None:  # nothing parsable as HTML: what the page said, as it said it
        return _extracted(None, html.strip(), "text")
    title = _title(tree, url)
    if mode == "reader":
        embedded = _embedded(tree, title)  # before extract(), which prunes the tree it is given
        article = (trafilatura.extract(
            tree, url=url, output_format="markdown", include_tables=True, include_links=True,
            include_images=False, include_comments=False, include_formatting=True,
            prune_xpath="//noscript",  # "enable JavaScript" is no article
        ) or "").strip()
        # A script-rendered page's few visible words (a loading note, a cookie line) lose to
        # the fuller text it embeds; a real article wins over its own summary.
        if article and (embedded is None or len(article.split()) >= _SHORT_WORDS or len(article) >= len(embedded[1])):
            return _extracted(title, article, "article")
        if embedded is not None:
            return _extracted(embedded[0] or title, embedded[1], "embedded")
    # The whole page's visible text, a block element a paragraph (trafilatura's html2txt
    # runs it all into one line, which loses a link hub's or a table's structure).
    import html_text

    body = tree.find(".//body")  # the title is given apart
    return _extracted(title, str(html_text.extract_text(body if body is not None else tree)).strip(), "page")


def _extracted(title: str | None, text: str, source: Source) -> Extracted:
    body, cut = cap(text)
    return Extracted(title.strip() if title and title.strip() else None, body, source, cut)


def _title(tree: Any, url: str | None) -> str | None:
    from trafilatura.metadata import extract_metadata

    try:
        meta = extract_metadata(tree, default_url=url)
    except Exception:  # metadata is a nicety; a page it chokes on still has its text
        meta = None
    title = getattr(meta, "title", None) if meta is not None else None
    if title:
        return str(title)
    found = tree.findtext(".//title")
    return found.strip() if found else None


def _embedded(tree: Any, title: str | None) -> tuple[str | None, str] | None:
    """``(headline, text)`` from the data a page ships for scripts and crawlers: JSON-LD's
    ``articleBody`` (or ``text``/``description``) first, then OpenGraph and ``<meta>``."""
    for item in _json_ld(tree):
        body = next((item[k] for k in ("articleBody", "text", "description") if isinstance(item.get(k), str)
                     and item[k].strip()), None)
        if body:
            headline = next((item[k] for k in ("headline", "name") if isinstance(item.get(k), str)), None)
            text = body.strip()
            return headline, (f"# {headline.strip()}\n\n{text}" if headline else text)
    description = _meta(tree, "og:description", "description", "twitter:description")
    if description:
        headline = _meta(tree, "og:title", "twitter:title") or title
        return headline, (f"# {headline}\n\n{description}" if headline else description)
    return None


def _json_ld(tree: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in the page's JSON-LD blocks (``@graph`` and lists opened), the
    ones with an ``articleBody`` first."""
    found: list[dict[str, Any]] = []

    def walk(value: Any, depth: int = 0) -> None:
        if depth > 8:
            return
        if isinstance(value, list):
            for v in value[:200]:
                walk(v, depth + 1)
        elif isinstance(value, dict):
            found.append(value)
            for key in ("@graph", "mainEntity", "mainEntityOfPage"):
                walk(value.get(key), depth + 1)

    for script in tree.xpath('//script[contains(translate(@type, "LDJSON", "ldjson"), "ld+json")]'):
        try:
            walk(json.loads(script.text or ""))
        except ValueError:
            continue
    found.sort(key=lambda item: "articleBody" not in item)
    yield from found


def _meta(tree: Any, *names: str) -> str | None:
    for name in names:
        for el in tree.xpath("//meta[@property=$n or @name=$n]", n=name):
            content = (el.get("content") or "").strip()
            if content:
                return str(content)
    return None
