"""Markdown to safe HTML for the pages: markdown-it renders, nh3 removes what is unsafe.
Only ``http``, ``https`` and ``mailto`` URLs ever become links."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])
_RESOURCE = re.compile(r'(src|href)="(?::/)([0-9a-f]{32})"')
_ALLOWED_TAGS = nh3.ALLOWED_TAGS | {"input"}
# What a browser ignores in a URL: C0 controls and spaces at either end, tabs and newlines
# anywhere ("java\tscript:" is javascript:).
_URL_IGNORED = re.compile(r"[\t\n\r]")
_URL_EDGES = "".join(chr(c) for c in range(0x21))


def render_markdown(body: str) -> str:
    """HTML for a note body, with scripts, handlers and unsafe URLs removed.
    Links to attachments written as ``:/ID`` point at the attachment route."""
    html = _md.render(body)
    html = _RESOURCE.sub(lambda m: f'{m.group(1)}="/attachments/{m.group(2)}"', html)
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        url_schemes=set(LINK_SCHEMES),
        link_rel="noopener noreferrer nofollow",
    )


def safe_link(url: str | None) -> str | None:
    """``url`` as a browser would read it when that is an absolute http, https or mailto
    URL, else ``None`` (not a link: ``javascript:``, ``data:``, relative, garbled)."""
    if not url:
        return None
    cleaned = _URL_IGNORED.sub("", url).strip(_URL_EDGES)
    try:
        parts = urlsplit(cleaned)
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in LINK_SCHEMES or (scheme != "mailto" and not parts.hostname):
        return None
    return cleaned
