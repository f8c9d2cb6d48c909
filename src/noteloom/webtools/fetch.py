"""A web page fetched through the guarded client and read (:mod:`noteloom.webtools.reader`).

Every byte comes through :class:`noteloom.outbound.OutboundClient`; trafilatura only parses
what it fetched. A page is asked for as HTML or text: an answer of another type (an image,
a PDF, JSON) is refused before its body is read, and so is an answer without a type whose
first bytes are binary. The body is capped at :data:`MAX_PAGE_BYTES` decoded bytes, the
text given to a model at :data:`~noteloom.webtools.reader.MAX_CHARS` characters. An HTTP
error status is a :class:`~noteloom.errors.ToolError` naming it (the page's own text is
not shown: it is usually the site's error page).
"""

from __future__ import annotations

from dataclasses import dataclass

from anyio import to_thread

from noteloom.outbound import OutboundClient, OutboundPolicy, OutboundResponse
from noteloom.tools import ToolError
from noteloom.webtools.reader import Mode, Source, cap, extract

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

    def __init__(self, policy: OutboundPolicy | None = None, *, client: OutboundClient | None = None) -> None:
        self.client = client or OutboundClient(policy)

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
            found = await to_thread.run_sync(lambda: extract(text, mode, url=response.url))
            return Page(response.url, found.title, mode, found.source, found.text, found.truncated)
        body, cut = cap(text.strip())
        return Page(response.url, None, mode, "text", body, cut)


def _is_html(response: OutboundResponse, text: str) -> bool:
    if response.media_type:
        return response.media_type in _HTML
    head = text[:1024].lstrip().lower()
    return head.startswith(("<!doctype html", "<html")) or "<body" in head or "<head" in head
