"""The sections of a Markdown note: its outline, and addressing one part of it.

A note's headings, as markdown-it renders them, cut its raw body into
sections. Each section has a positional ``path`` that reflects nesting
(``"1"``, ``"1.2"``, ``"1.2.1"``) and runs from its heading line to the next
heading of the same or a higher level, so it includes its subsections. The
text before the first heading is section ``"0"``; it is left out when it is
only whitespace, and a note without headings is section ``"0"`` alone.

Offsets are ``str`` indices into the *raw* body (``\\r\\n`` line ends
included), so ``body[s.start:s.end]`` is the section and search hits found in
the raw body map straight onto a section.

Headings are taken from every nesting depth (a heading inside a block quote or
list item is a heading in the rendered note, so it is one here too); such a
section starts at the beginning of the heading's line, container markers
included. Heading text is the plain text a reader sees, with whitespace
collapsed to single spaces. An address that matches nothing, or several
headings, raises :class:`~noteloom.errors.SectionError`.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

from noteloom.errors import SectionError

__all__ = [
    "OUTLINE_HEADER",
    "Section",
    "innermost_section",
    "innermost_section_in",
    "outline_text",
    "resolve_section",
    "section_text",
    "sections",
    "sections_through",
]

OUTLINE_HEADER = "path\tchars\theading"

# Configured like the renderer (noteloom.web.render) so the outline matches
# the rendered note: tables change the block structure, strikethrough only
# the text of headings. Like the renderer, it knows no YAML front matter: a
# "---" / "title: x" / "---" opening reads as a rule and a setext heading.
# The block pass alone tells where headings are, and inline parsing is most of
# markdown-it's cost on a long note, so it runs only on the heading texts.
# The parsers are made on first use: importing markdown-it is a cost every command would
# pay, and most never outline a note.


@functools.cache
def _blocks() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])


@functools.cache
def _inline() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("strikethrough")


@functools.cache
def _md_trim() -> str | None:
    """What markdown-it trims off an ATX heading's text (3.x strips all whitespace)."""
    from markdown_it.common import utils as md_utils

    return getattr(md_utils, "MD_TRIM_CHARS", None)

# markdown-it normalises \r\n and lone \r to \n before numbering lines.
_LINE_BREAK = re.compile(r"\r\n?|\n")
_PATH = re.compile(r"0|[1-9][0-9]*(?:\.[1-9][0-9]*)*")


@dataclass(frozen=True)
class Section:
    """One section of a note: a heading and the raw text it governs.

    ``level`` is the heading level (1-6), or 0 for section ``"0"``, whose
    ``heading`` is empty. ``start`` and ``end`` are character offsets into the
    raw body, ``end`` exclusive.
    """

    path: str
    heading: str
    level: int
    start: int
    end: int

    @property
    def chars(self) -> int:
        """The length of the section's text, subsections included."""
        return self.end - self.start


def sections(body: str) -> list[Section]:
    """All sections of ``body`` in document order, section ``"0"`` first if present."""
    return list(_cached_sections(body))


def outline_text(body: str) -> str:
    """The outline of ``body`` as tab-separated lines, for a model to read.

    The first line is the header ``path\\tchars\\theading``; then one line per
    section, ``path\\tchars\\theading``, where ``chars`` counts the section
    with its subsections. Section ``"0"`` has no heading, so its line is just
    ``0\\t<chars>`` with no trailing tab. Headings never contain tabs or
    newlines (whitespace is collapsed), so the format cannot break. Lines are
    joined with ``\\n`` and there is no final newline.
    """
    return _format_outline(_cached_sections(body))


def resolve_section(body: str, address: str) -> Section:
    """The section of ``body`` that ``address`` names.

    ``address`` is a path (``"1.2.1"``, ``"0"``) or the exact text of a
    heading, compared case-sensitively after whitespace is collapsed as in the
    outline, so a heading copied from :func:`outline_text` resolves. Paths are
    tried first. ``"0"`` always resolves, to the text before the first heading,
    even when the outline leaves it out for being blank.

    Raises :class:`SectionError` when nothing matches, or when several
    headings do (the message lists them with their paths).
    """
    wanted = _collapse(address)
    secs = _cached_sections(body)
    if _PATH.fullmatch(wanted):
        if wanted == "0":
            return _section_zero(secs)
        for sec in secs:
            if sec.path == wanted:
                return sec
    matches = [sec for sec in secs if sec.level and sec.heading == wanted]
    if len(matches) == 1:
        return matches[0]
    if matches:
        candidates = "; ".join(f"{sec.path} {sec.heading}" for sec in matches)
        raise SectionError(
            f"Section {address!r} is ambiguous: {len(matches)} headings match "
            f"({candidates}). Use a path to pick one."
        )
    raise SectionError(
        f"No section {address!r} in this note. Call the outline to list its "
        "section paths and headings, then use one of those."
    )


def section_text(body: str, section: Section) -> str:
    """The raw text of ``section``, subsections included."""
    return body[section.start : section.end]


def innermost_section(body: str, offset: int) -> Section:
    """The innermost section of ``body`` containing the character ``offset``.

    Offsets before the first heading give section ``"0"``, even when the
    outline leaves it out for being blank. ``offset == len(body)`` belongs to
    the last section.
    """
    if not 0 <= offset <= len(body):
        raise ValueError(f"offset {offset} is outside the body (0..{len(body)})")
    return innermost_section_in(_cached_sections(body), offset)


def sections_through(body: str, offset: int) -> tuple[Section, ...]:
    """The sections of ``body`` that start at or before ``offset``, read from only as much
    of the body as they need: what :func:`sections` gives for them (path, heading, level
    and start), except that a section still open where the reading stopped ends there.
    So :func:`innermost_section_in` over them names the same section at ``offset`` (and
    at any offset before it) as over :func:`sections`, at a cost that grows with
    ``offset``, not with the body.

    The text read ends at the first blank line after ``offset`` that an unindented line
    follows. Nothing that decides whether a line before it is a heading looks past such a
    line: it ends every paragraph (so every setext heading), table, block quote, list and
    indented code block, and a fence or HTML block still open there holds the same lines
    whether it closes later or at the end of the text read. Only a link reference
    definition after it can change a heading's text, and only a heading left with a ``[``
    in its text (a link not resolved: one resolved by an earlier definition stays so, the
    first definition of a label wins); with such a heading and ``]:`` anywhere after the
    cut, the whole body is read.
    """
    if not 0 <= offset <= len(body):
        raise ValueError(f"offset {offset} is outside the body (0..{len(body)})")
    m = _RAW_CUT.search(body, offset + 1) if offset < len(body) else None
    if m is None:
        return _cached_sections(body)
    secs = _compute_sections(body[: m.end()])
    if any("[" in sec.heading for sec in secs) and body.find("]:", m.end()) >= 0:
        return _cached_sections(body)
    return secs


# A blank line, then a line that starts unindented (any line ends): a \r\n is one line end
# (the atomic groups never take its \r alone), and the lookahead never cuts one in two.
_RAW_CUT = re.compile(r"(?>\r\n|\r|\n)[ \t]*(?>\r\n|\r|\n)(?=[^ \t\r\n])")


def innermost_section_in(secs: Sequence[Section], offset: int) -> Section:
    """:func:`innermost_section` over sections already computed by :func:`sections`."""
    if not secs:
        raise ValueError("no sections given; pass the result of sections(body)")
    if offset < 0 or offset > secs[-1].end:
        raise ValueError(f"offset {offset} is outside the body (0..{secs[-1].end})")
    # In document order, the last section starting at or before the offset
    # contains it: every section that starts later starts after the offset,
    # and a section that contains a later-starting one contains it whole.
    i = bisect.bisect_right(secs, offset, key=_start) - 1
    if i < 0:
        return _section_zero(secs)
    return secs[i]


def _collapse(text: str) -> str:
    """Every run of whitespace (Unicode's, as ``str.split`` sees it) made one space, ends stripped."""
    return " ".join(text.split())


def _start(section: Section) -> int:
    return section.start


def _section_zero(secs: Sequence[Section]) -> Section:
    if secs[0].path == "0":
        return secs[0]
    return Section("0", "", 0, 0, secs[0].start)


def _format_outline(secs: Sequence[Section]) -> str:
    lines = [OUTLINE_HEADER]
    for sec in secs:
        if sec.level:
            lines.append(f"{sec.path}\t{sec.chars}\t{sec.heading}")
        else:
            lines.append(f"{sec.path}\t{sec.chars}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=64)
def _cached_sections(body: str) -> tuple[Section, ...]:
    return _compute_sections(body)


def _compute_sections(body: str) -> tuple[Section, ...]:
    """The sections of ``body``, computed afresh (the cache sits in front of this)."""
    norm = _LINE_BREAK.sub("\n", body) if "\r" in body else body
    headings = _headings_fast(norm)
    if headings is None:
        headings = _headings_markdown_it(norm)
    if not headings:
        return (Section("0", "", 0, 0, len(body)),)
    starts = [offset for offset, _, _ in headings]
    if norm is not body:
        starts = _raw_offsets(body, norm, starts)

    out: list[Section] = []
    if body[: starts[0]].strip():
        out.append(Section("0", "", 0, 0, starts[0]))

    # A heading closes every open heading of its level or deeper (their
    # sections end where it starts) and nests under the one left open, so a
    # section's span is exactly its heading plus its subsections.
    paths: list[str] = []
    ends = [len(body)] * len(headings)
    open_: list[tuple[int, str, int]] = []  # (level, path, index)
    children: dict[str, int] = {}
    for i, (_, level, _) in enumerate(headings):
        while open_ and open_[-1][0] >= level:
            ends[open_.pop()[2]] = starts[i]
        parent = open_[-1][1] if open_ else ""
        children[parent] = n = children.get(parent, 0) + 1
        path = f"{parent}.{n}" if parent else str(n)
        open_.append((level, path, i))
        paths.append(path)

    for i, (_, level, text) in enumerate(headings):
        out.append(Section(paths[i], text, level, starts[i], ends[i]))
    return tuple(out)


def _raw_offsets(body: str, norm: str, offsets: list[int]) -> list[int]:
    """Line-start offsets in ``norm`` (line ends made ``\\n``) moved to ``body``."""
    raw_starts = [0]
    raw_starts.extend(m.end() for m in _LINE_BREAK.finditer(body))
    out: list[int] = []
    line = prev = 0
    for offset in offsets:
        line += norm.count("\n", prev, offset)
        prev = offset
        out.append(raw_starts[line])
    return out


def _headings_markdown_it(norm: str) -> list[tuple[int, int, str]]:
    """Headings from one markdown-it pass over the whole body: the reference answer.

    Each is (offset of its first line, level, collapsed plain text), in order.
    """
    env: dict[str, Any] = {}
    tokens = _blocks().parse(norm, env)
    line_starts = [0]
    line_starts.extend(m.end() for m in re.finditer("\n", norm))
    return _collect_headings(tokens, env, line_starts.__getitem__)


def _collect_headings(
    tokens: Sequence[Token], env: dict[str, Any], offset_of_line: Callable[[int], int]
) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            text = _heading_text(tokens[i + 1].content, env)
            found.append((offset_of_line(token.map[0]), int(token.tag[1:]), text))
    return found


def _heading_text(content: str, env: dict[str, Any]) -> str:
    """The collapsed plain text of a heading's inline source."""
    if _INLINE_MARKUP.search(content) is None:
        return _collapse(content)
    return _collapse(_plain_text(_inline().parseInline(content, env)))


# The fast path. markdown-it spends ~35 ms on the block structure of a
# 200,000-character note, nearly all of it on lines that cannot hold a
# heading. So the body is cut into chunks at lines where markdown-it is back
# at the top level with nothing open, and only the chunks that might matter
# go through markdown-it, back to back in one pass. It is not a second
# parser: it returns exactly what the full pass returns, or gives up.
#
# * A chunk starts at an unindented line after a blank line. The blank line
#   ends every paragraph, table, HTML block of kinds 6-7 and block quote; the
#   unindented line ends every list and indented code block. A list or quote
#   that starts there begins afresh, which changes nothing about headings
#   (a loose list cut in two is two lists with the same items). Only fenced
#   code and HTML blocks of kinds 1-5 (``<pre``, ``<!--``, ...) run on across
#   such a line, and a cheap scan of their openers and closers avoids cutting
#   inside them.
# * That scan can be fooled (a fence line inside an HTML block, say). So after
#   the pass, a top-level fence or HTML block that runs into the blank line
#   ending its chunk proves a cut unsafe, and the full pass is used instead.
# * A chunk is skipped only when none of its lines could be a heading or a
#   setext underline at any depth, open a fence or HTML block, or define a
#   link reference (a reference changes the text of headings elsewhere).
#   Those tests are loose on purpose: a needless chunk only costs time.
# It is used at every size: measured on the 100,000-note bench corpus it costs a quarter
# of the full pass from 300-character notes (0.006 against 0.024 ms) to 10,000-character
# ones (0.7 against 3.5 ms). Search places every hit in its section, so this is most of a
# cold hit's cost.
_CUT = re.compile(r"\n[ \t]*\n(?=[^ \t\n])")
_OPENER = re.compile(
    r"^ {0,3}(?:(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)"
    r"|<(?P<html>(?i:script|pre|style|textarea)(?=[ \t>\n]|$)|!--|\?|!\[CDATA\[|![A-Za-z]))",
    re.MULTILINE,
)
_HTML_CLOSER = {
    "!--": re.compile("-->"),
    "?": re.compile(r"\?>"),
    "![CDATA[": re.compile(r"\]\]>"),
}
_HTML_CLOSER_RAW = re.compile(r"</(?:script|pre|style|textarea)>", re.IGNORECASE)
_HTML_CLOSER_DECL = re.compile(">")
# Whatever block quote and list markers may put before a line's content.
# Possessive, so that long runs of these characters cannot make it backtrack.
_PREFIX = r"[ \t>*+\-.)0-9]*+"
_PREFIX_NO_DASH = r"[ \t>*+.)0-9]*+"
_MAYBE_RELEVANT = re.compile(
    rf"^{_PREFIX}(?:#|```|~~~|=+[ \t]*+$)"  # ATX heading, fence, = underline
    rf"|^{_PREFIX_NO_DASH}-{_PREFIX}$"  # - underline
    r"|<[!?]|<(?i:script|pre|style|textarea)"  # HTML blocks of kinds 1-5
    r"|\]:",  # link reference definition
    re.MULTILINE,
)
# Where inline markup can start (escape, code span, emphasis, link or image,
# autolink or HTML, entity, strikethrough); text without any reads as itself.
_INLINE_MARKUP = re.compile(r"[\\`*_<\[]|~~|&[#A-Za-z0-9]")


def _headings_fast(norm: str) -> list[tuple[int, int, str]] | None:
    """What :func:`_headings_markdown_it` returns, or None when a cut proved unsafe."""
    starts = _chunk_starts(norm)
    ends = [*starts[1:], len(norm)]

    # Pick the chunks that need markdown-it, merging neighbours into runs. A
    # chunk that is one ATX heading, a blank line and nothing relevant is read
    # here: at the top level nothing else can claim that line.
    runs: list[tuple[int, int]] = []  # (first chunk, last chunk) of each run
    lone: list[tuple[int, int, str]] = []  # (offset, level, inline source)
    pos = 0
    while (m := _MAYBE_RELEVANT.search(norm, pos)) is not None:
        i = bisect.bisect_right(starts, m.start()) - 1
        pos = ends[i]
        if m.start() == starts[i] and (atx := _lone_atx_heading(norm, starts[i], pos)):
            lone.append((starts[i], *atx))
        elif runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))

    # One markdown-it pass over the runs, back to back. Every chunk but the
    # body's last ends with a blank line, so no block runs from one into the
    # next unless a cut was wrong, which the check below catches.
    pieces = [norm[starts[first] : ends[last]] for first, last in runs]
    concat = "".join(pieces)
    env: dict[str, Any] = {}
    tokens = _blocks().parse(concat, env) if concat else []
    line_starts = [0]
    line_starts.extend(m.end() for m in re.finditer("\n", concat))
    run_at: list[int] = []  # offset of each run in the concatenation
    run_line: list[int] = []  # ... and its first line there
    at = 0
    for piece in pieces:
        run_at.append(at)
        run_line.append(bisect.bisect_left(line_starts, at))
        at += len(piece)

    last_run_ends_body = bool(runs) and ends[runs[-1][1]] == len(norm)
    for token in tokens:
        if token.level == 0 and token.type in ("fence", "html_block") and token.map:
            k = bisect.bisect_right(run_line, token.map[0]) - 1
            run_end = run_line[k + 1] if k + 1 < len(runs) else len(line_starts) - 1
            if token.map[1] >= run_end and not (k == len(runs) - 1 and last_run_ends_body):
                return None

    def body_offset(line: int) -> int:
        k = bisect.bisect_right(run_line, line) - 1
        return starts[runs[k][0]] + line_starts[line] - run_at[k]

    found = _collect_headings(tokens, env, body_offset)
    found.extend((offset, level, _heading_text(src, env)) for offset, level, src in lone)
    found.sort()
    return found


def _lone_atx_heading(norm: str, start: int, end: int) -> tuple[int, str] | None:
    """(level, inline source) if the chunk ``norm[start:end]`` is an ATX heading line,
    a blank line and nothing that could matter; None otherwise.

    Mirrors markdown-it's heading rule for an unindented line. No earlier
    block rule claims such a line when a blank line follows (a table needs a
    delimiter row under it), and a chunk starts at the top level.
    """
    eol = norm.find("\n", start, end)
    after = norm.find("\n", eol + 1, end) if eol >= 0 else -1
    if after < 0 or norm[eol + 1 : after].strip(" \t"):
        return None
    line = norm[start:eol]
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or (level < len(line) and line[level] not in " \t"):
        return None
    if _MAYBE_RELEVANT.search(norm, eol + 1, end) is not None:
        return None
    stop = len(line.rstrip(" \t"))
    hashes = len(line[:stop].rstrip("#"))
    if hashes > level and line[hashes - 1] in " \t":
        stop = hashes
    return level, line[level:stop].strip(_md_trim())


def _chunk_starts(norm: str) -> list[int]:
    """Offsets where markdown-it is back at the top level with nothing open."""
    # Spans of fenced code and HTML blocks of kinds 1-5, as far as a scan of
    # lines that are not indented four columns can tell.
    blocked: list[tuple[int, int]] = []
    pos = 0
    while (m := _OPENER.search(norm, pos)) is not None:
        fence = m.group("fence")
        if fence is not None:
            if fence[0] == "`" and "`" in m.group("info"):
                pos = m.end()
                continue
            closer = _closing_fence(fence[0], len(fence)).search(norm, m.end())
        else:
            closer = _html_closer(m.group("html")).search(norm, m.start())
        if closer is None:
            blocked.append((m.start(), len(norm)))
            break
        end = norm.find("\n", closer.end())
        end = len(norm) if end < 0 else end
        blocked.append((m.start(), end))
        pos = end

    starts = [0]
    b = 0
    for m in _CUT.finditer(norm):
        cut = m.end()
        while b < len(blocked) and blocked[b][1] < cut:
            b += 1
        if b < len(blocked) and blocked[b][0] < cut:
            continue
        starts.append(cut)
    return starts


@functools.lru_cache(maxsize=32)
def _closing_fence(char: str, length: int) -> re.Pattern[str]:
    return re.compile(rf"^ {{0,3}}{re.escape(char)}{{{length},}}[ \t]*$", re.MULTILINE)


def _html_closer(kind: str) -> re.Pattern[str]:
    if kind in _HTML_CLOSER:
        return _HTML_CLOSER[kind]
    if kind.startswith("!"):
        return _HTML_CLOSER_DECL
    return _HTML_CLOSER_RAW


def _plain_text(tokens: Sequence[Token]) -> str:
    """The text a reader sees in parsed inline tokens: markup and raw HTML dropped."""
    parts: list[str] = []
    for token in tokens:
        if token.children:
            parts.append(_plain_text(token.children))
        elif token.type in ("text", "text_special", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def __getattr__(name: str) -> Any:
    # The parsers' old module-level names, made on first use like the rest.
    if name == "_BLOCKS":
        return _blocks()
    if name == "_INLINE":
        return _inline()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
