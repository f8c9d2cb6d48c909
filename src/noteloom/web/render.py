"""Markdown to safe HTML for the pages: markdown-it renders, nh3 removes what is unsafe."""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])
_RESOURCE = re.compile(r'(src|href)="(?::/)([0-9a-f]{32})"')
_ALLOWED_TAGS = nh3.ALLOWED_TAGS | {"input"}


def render_markdown(body: str) -> str:
    """HTML for a note body, with scripts, handlers and unsafe URLs removed.
    Links to attachments written as ``:/ID`` point at the attachment route."""
    html = _md.render(body)
    html = _RESOURCE.sub(lambda m: f'{m.group(1)}="/attachments/{m.group(2)}"', html)
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
