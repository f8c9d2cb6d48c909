"""Markdown to safe HTML: markdown-it renders, nh3 removes what is unsafe.

The page renders the same Markdown with markdown-it from npm (``assets/src/markdown.js``)
set up exactly as here: CommonMark with GFM tables, strikethrough and task lists, math kept
as source, ``[[Title]]`` wiki links and Joplin ``:/ID`` links left for resolution. A parity
test (``tests/browser/test_render_parity.py``) holds the two outputs equal, so a change here
needs its twin there.

What the renderer marks (the page's ``NoteloomRender`` works from these):

- a task item: ``<li class="task-list-item" data-line="N">`` with a disabled checkbox, ``N``
  the item's 0-based line in the body (what ``POST /api/v1/notes/{id}/tasks`` toggles);
- fenced code: ``<pre><code class="language-X">`` (highlighted in the page only);
- math: ``<span class="math-inline">`` / ``<div class="math-display">`` holding the TeX
  source (KaTeX renders it in the page; exports keep the source);
- ``[[Title|label]]``: ``<a class="wikilink" data-wikilink="Title">label</a>``;
- ``:/ID``: ``<a data-joplin-id="ID">`` (no href) and ``<img data-joplin-id="ID"
  src="/attachments/ID">``.

Given a :data:`LinkResolver` (``web/links.py`` builds one acting as the reader),
:func:`render_markdown` resolves those links: a note to ``/notes/ID``, an attachment to
``/attachments/ID``, anything else (missing, or not the reader's to see) to
``class="link-unresolved"`` without a href. Only ``http``, ``https`` and ``mailto`` URLs and
those site paths ever become links.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.tasklists import tasklists_plugin

__all__ = ["LINK_SCHEMES", "UNRESOLVED", "LinkRefs", "LinkResolver", "Resolved", "link_refs", "render_markdown",
           "safe_link", "task_lines", "toggle_task"]

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_JOPLIN = re.compile(r"^:/([0-9a-f]{32})$")
UNRESOLVED = "link-unresolved"
# What a browser ignores in a URL: C0 controls and spaces at either end, tabs and newlines
# anywhere ("java\tscript:" is javascript:).
_URL_IGNORED = re.compile(r"[\t\n\r]")
_URL_EDGES = "".join(chr(c) for c in range(0x21))
# An attribute value that could close a comment or a raw-text element if the HTML were ever
# read as XML or re-parsed: removed, as DOMPurify does in the page (its ATTR_VALUE_BREAKOUT).
_BREAKOUT = re.compile(r"((--!?|\])>)|</(style|script|title|xmp|textarea|noscript|iframe|noembed|noframes)", re.I)

# The tags and attributes that survive; assets/src/markdown.js gives DOMPurify the same lists.
_ALLOWED_TAGS = nh3.ALLOWED_TAGS | {"input"}
_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "a": {"href", "hreflang", "class", "data-joplin-id", "data-wikilink"},
    "img": {"src", "width", "alt", "align", "height", "title", "class", "data-joplin-id"},
    "code": {"class"},
    "span": {"class"},
    "div": {"class"},
    "ul": {"class"},
    "ol": {"start", "class"},
    "li": {"class", "data-line"},
    "input": {"class", "type", "checked", "disabled"},
}


@dataclass(frozen=True)
class LinkRefs:
    """The links of a body that need resolving: Joplin ids and wiki-link titles."""

    ids: frozenset[str] = frozenset()
    titles: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resolved:
    """Where the reader's links lead: ids that are notes or attachments they may see, and
    titles of notes they may see (title → note id). Anything absent is unresolved."""

    notes: frozenset[str] = frozenset()
    attachments: frozenset[str] = frozenset()
    titles: dict[str, str] = field(default_factory=dict)


#: Resolves a body's links for the person reading it (``web/links.py``).
LinkResolver = Callable[[LinkRefs], Resolved]


def _math_inline(state: StateInline, silent: bool) -> bool:
    """``$x$``: the opener not followed by a space, the closer not after a space nor before a
    digit (so ``$5 and $10`` is prose), content on any lines of the paragraph, ``\\$`` kept."""
    src, start = state.src, state.pos
    if src[start] != "$" or start + 1 >= state.posMax or src[start + 1] in " \t\n$":
        return False
    end = start + 1
    while True:
        end = src.find("$", end)
        if end == -1 or end >= state.posMax:
            return False
        if src[end - 1] == "\\":
            end += 1
            continue
        if src[end - 1] in " \t\n" or (end + 1 < len(src) and src[end + 1] in "0123456789"):
            return False
        break
    if not silent:
        token = state.push("math_inline", "span", 0)
        token.content = src[start + 1:end]
        token.markup = "$"
    state.pos = end + 1
    return True


def _math_block(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """``$$`` opening a line, up to the line ending in ``$$`` (or the end of the container)."""
    pos = state.bMarks[start_line] + state.tShift[start_line]
    maximum = state.eMarks[start_line]
    if state.sCount[start_line] - state.blkIndent >= 4 or state.src[pos:pos + 2] != "$$":
        return False
    first = state.src[pos + 2:maximum]
    if silent:
        return True
    lines: list[str] = []
    line = start_line
    if first.rstrip().endswith("$$") and first.strip() != "":
        lines.append(first.rstrip()[:-2])
    else:
        lines.append(first)
        while True:
            line += 1
            if line >= end_line:
                break
            pos = state.bMarks[line] + state.tShift[line]
            maximum = state.eMarks[line]
            if pos < maximum and state.sCount[line] < state.blkIndent:
                break
            text = state.src[pos:maximum]
            if text.rstrip().endswith("$$"):
                lines.append(text.rstrip()[:-2])
                break
            lines.append(text)
    state.line = line + 1
    token = state.push("math_block", "div", 0)
    token.block = True
    token.content = "\n".join(lines).strip("\n")
    token.markup = "$$"
    token.map = [start_line, state.line]
    return True


def _wikilink(state: StateInline, silent: bool) -> bool:
    """``[[Title]]`` or ``[[Title|label]]`` on one line, no brackets inside."""
    src, start = state.src, state.pos
    if not src.startswith("[[", start):
        return False
    end = src.find("]]", start + 2)
    if end == -1 or end > state.posMax:
        return False
    inner = src[start + 2:end]
    if not inner.strip() or any(c in inner for c in "[]\n"):
        return False
    title, _, label = inner.partition("|")
    title, label = title.strip(), (label.strip() or title.strip())
    if not title:
        return False
    if not silent:
        opener = state.push("link_open", "a", 1)
        opener.attrs = {"class": "wikilink", "data-wikilink": title}
        opener.markup = "wikilink"
        text = state.push("text", "", 0)
        text.content = label
        state.push("link_close", "a", -1).markup = "wikilink"
    state.pos = end + 2
    return True


def _backslash_before_break(state: StateInline, silent: bool) -> bool:
    """A backslash before trailing spaces is a literal backslash, and the spaces still make a
    hard break (CommonMark, and markdown-it in the page; markdown-it-py's escape rule keeps the
    spaces as text instead). Server side only: it mends a difference, it adds no syntax."""
    src, pos = state.src, state.pos
    if src[pos] != "\\" or pos + 1 >= state.posMax or src[pos + 1] not in " \t":
        return False
    if not silent:
        state.pending += "\\"
    state.pos += 1
    return True


_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]*")


def _mark_links(state: StateCore) -> None:
    """Task items carry their line; ``:/ID`` links and images carry the id, not the URL; a
    fence's language that is not a plain name is dropped (DOMPurify drops such a class)."""
    for token in state.tokens:
        if token.type == "fence" and not _LANGUAGE.fullmatch((token.info.split() or [""])[0]):
            token.info = ""
        if token.type == "list_item_open" and "task-list-item" in str(token.attrGet("class") or "") and token.map:
            token.attrSet("data-line", str(token.map[0]))
        for child in token.children or ():
            if child.type == "link_open":
                m = _JOPLIN.match(str(child.attrGet("href") or ""))
                if m:
                    del child.attrs["href"]
                    child.attrSet("data-joplin-id", m.group(1))
            elif child.type == "image":
                m = _JOPLIN.match(str(child.attrGet("src") or ""))
                if m:
                    child.attrSet("src", f"/attachments/{m.group(1)}")
                    child.attrSet("data-joplin-id", m.group(1))


def _render_math_inline(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                        env: EnvType) -> str:
    return f'<span class="math-inline">{escapeHtml(tokens[idx].content)}</span>'


def _render_math_block(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                       env: EnvType) -> str:
    return f'<div class="math-display">{escapeHtml(tokens[idx].content)}</div>\n'


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(tasklists_plugin)
    md.block.ruler.before("fence", "math_block", _math_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list"]})
    md.inline.ruler.before("escape", "math_inline", _math_inline)
    md.inline.ruler.before("escape", "backslash_before_break", _backslash_before_break)
    md.inline.ruler.before("link", "wikilink", _wikilink)
    md.core.ruler.push("noteloom_marks", _mark_links)
    md.add_render_rule("math_inline", _render_math_inline)
    md.add_render_rule("math_block", _render_math_block)
    return md


_md = _markdown()


def _links(tokens: Sequence[Token]) -> list[Token]:
    return [child for token in tokens for child in token.children or ()
            if child.type in ("link_open", "image") and (child.attrGet("data-joplin-id") or child.attrGet("data-wikilink"))]


def link_refs(body: str) -> LinkRefs:
    """The Joplin ids and wiki-link titles ``body`` links to (what backlinks look for)."""
    ids: set[str] = set()
    titles: set[str] = set()
    for t in _links(_md.parse(body)):
        if t.attrGet("data-joplin-id"):
            ids.add(str(t.attrGet("data-joplin-id")))
        else:
            titles.add(str(t.attrGet("data-wikilink")))
    return LinkRefs(frozenset(ids), frozenset(titles))


def _unresolve(token: Token) -> None:
    token.attrs.pop("href", None)
    token.attrs.pop("src", None)
    classes = str(token.attrGet("class") or "")
    token.attrSet("class", f"{classes} {UNRESOLVED}".strip())


def _resolve(tokens: Sequence[Token], resolve: LinkResolver) -> None:
    links = _links(tokens)
    if not links:
        return
    refs = LinkRefs(frozenset(str(t.attrGet("data-joplin-id")) for t in links if t.attrGet("data-joplin-id")),
                    frozenset(str(t.attrGet("data-wikilink")) for t in links if t.attrGet("data-wikilink")))
    found = resolve(refs)
    for t in links:
        ref = t.attrGet("data-joplin-id")
        if ref:
            target = (f"/notes/{ref}" if ref in found.notes else f"/attachments/{ref}" if ref in found.attachments
                      else None)
        else:
            note = found.titles.get(str(t.attrGet("data-wikilink")))
            target = f"/notes/{note}" if note else None
        if target is None:
            _unresolve(t)
        elif t.type == "image":
            t.attrSet("src", target)
        else:
            t.attrSet("href", target)


def render_markdown(body: str, resolve: LinkResolver | None = None) -> str:
    """HTML for a note body, with scripts, handlers and unsafe URLs removed.

    Without ``resolve``, ``:/ID`` and ``[[Title]]`` links stay pending (marked by data
    attributes, no href; the page resolves them); with it, as the reader may see them."""
    env: EnvType = {}
    tokens = _md.parse(body, env)
    if resolve is not None:
        _resolve(tokens, resolve)
    html = _md.renderer.render(tokens, _md.options, env)
    return nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=set(LINK_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        attribute_filter=_attribute,
    )


def _attribute(tag: str, name: str, value: str) -> str | None:
    return None if _BREAKOUT.search(value) else value


_TASK = re.compile(r"^((?:[ \t]*>)*[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[)([ xX])(\])")


def task_lines(body: str) -> Collection[int]:
    """The 0-based lines of ``body`` that hold a task item (as ``data-line`` names them)."""
    lines: set[int] = set()
    for token in _md.parse(body):
        if token.type == "list_item_open" and token.attrGet("data-line") is not None:
            lines.add(int(str(token.attrGet("data-line"))))
    return lines


def toggle_task(body: str, line: int, done: bool) -> str | None:
    """``body`` with the task item on ``line`` checked (``done``) or cleared; ``None`` when that
    line holds no task item."""
    if line not in task_lines(body):
        return None
    rows = body.split("\n")
    m = _TASK.match(rows[line])
    if m is None:
        return None
    rows[line] = f"{m.group(1)}{'x' if done else ' '}{m.group(3)}{rows[line][m.end():]}"
    return "\n".join(rows)


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
