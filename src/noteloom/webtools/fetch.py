"""A web page fetched through the guarded client and read (:mod:`noteloom.webtools.reader`).

Every byte comes through :class:`noteloom.outbound.OutboundClient`; trafilatura only parses
what it fetched, and only in a child process with a time and a memory limit (the one that
reads attachments, :func:`noteloom.attachments.read_page`): a page built to make the parser
loop or swell ends that child, and the call fails saying so. A page is asked for as HTML or text: an answer of another type (an image,
a PDF, JSON) is refused before its body is read, and so is an answer without a type whose
first bytes are binary. The body is capped at :data:`MAX_PAGE_BYTES` decoded bytes, the
text given to a model at :data:`~noteloom.webtools.reader.MAX_CHARS` characters. An HTTP
error status is a :class:`~noteloom.errors.ToolError` naming it (the page's own text is
not shown: it is usually the site's error page).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast, get_args

from anyio import to_thread

from noteloom.attachments import AttachmentLimits, read_page
from noteloom.outbound import OutboundClient, OutboundPolicy, OutboundResponse
from noteloom.tools import ToolError
from noteloom.webtools import reader
from noteloom.webtools.reader import MAX_CHARS, Mode, Source, cap

#: What reading one page may spend: the reader's own cap on text (and room for its marker),
#: half a minute, and an address space a 5 MB page's tree fits in many times over.
PAGE_LIMITS = AttachmentLimits(text_chars=MAX_CHARS + 1_000, extract_seconds=30.0, extract_memory_mb=1024)
_READER = Path(reader.__file__)

#: The most decoded bytes of one page read (a long article is well under 1 MB of HTML).
MAX_PAGE_BYTES = 5 * 1024 * 1024
_HTML = ("text/html", "application/xhtml+xml")
_ACCEPT = (*_HTML, "text/*")
_ACCEPT_HEADER = "text/html,application/xhtml+xml;q=0.9,text/*;q=0.8"


@dataclass(frozen=True)
class Page:
    """A page as a model reads it: ``url`` is where it was found after redirects."""

    url: str
    title: str | None
    mode: Mode
    source: Source
    text: str
    truncated: int = 0

    def payload(self) -> dict[str, object]:
        out: dict[str, object] = {"url": self.url, "title": self.title, "mode": self.mode,
                                  "extracted_from": self.source, "content": self.text}
        if self.truncated:
            out["truncated_characters"] = self.truncated
        if not self.text:
            out["message"] = ("the page has no readable text: it may be built by scripts after loading, which "
                              "fetch_url does not run")
        return out


class WebFetcher:
    """Fetches and reads pages with one guarded client (``client``; a default one under
    ``policy`` otherwise)."""

    def __init__(self, policy: OutboundPolicy | None = None, *, client: OutboundClient | None = None,
                 limits: AttachmentLimits = PAGE_LIMITS) -> None:
        self.client = client or OutboundClient(policy)
        self.limits = limits

    async def get(self, url: str) -> OutboundResponse:
        """The page's answer, checked: a success of an HTML or text type (see the module)."""
        response = await self.client.request("GET", url, headers={"Accept": _ACCEPT_HEADER}, accept=_ACCEPT,
                                             max_bytes=MAX_PAGE_BYTES)
        if not response.ok:
            raise ToolError(f"{response.url} answered HTTP {response.status}; check the URL, or try another page")
        if not response.media_type and b"\0" in response.body[:1024]:
            raise ToolError(f"{response.url} sent no content type and its bytes are not text; fetch_url reads "
                            "HTML and text pages only")
        return response

    async def fetch(self, url: str, mode: Mode = "reader") -> Page:
        """``url`` read in ``mode``: the reader view (Markdown) or the whole page as text."""
        response = await self.get(url)
        text = response.text()
        if _is_html(response, text):
            found = await to_thread.run_sync(lambda: read_page(text, mode, response.url, _READER, self.limits))
            if found.extraction.status != "ok":
                raise ToolError(f"{response.url} could not be read: the page reader "
                                f"{found.extraction.detail or 'failed'}; try mode full, or another page")
            source = cast(Source, found.source if found.source in get_args(Source) else "page")
            return Page(response.url, found.title, mode, source, found.extraction.text or "", found.truncated)
        body, cut = cap(text.strip())
        return Page(response.url, None, mode, "text", body, cut)


def _is_html(response: OutboundResponse, text: str) -> bool:
    if response.media_type:
        return response.media_type in _HTML
    head = text[:1024].lstrip().lower()
    return head.startswith(("<!doctype html", "<html")) or "<body" in head or "<head" in head
