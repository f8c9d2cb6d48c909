"""Link targets inside Markdown bodies: found, and rewritten one by one.

noteloom bodies reference attachments (and other notes) as ``:/ID``. Exports rewrite
those targets to relative file paths and imports rewrite relative paths back, using
the same scanner both ways so a round trip gives the body back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote

# [text](target "title") and ![alt](<target with spaces>), one level of nested parentheses.
_INLINE = re.compile(
    r"\]\(\s*(?:<(?P<angle>[^>\n]*)>|(?P<bare>[^\s()<]+(?:\([^\s()]*\)[^\s()]*)*))"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?\s*\)"
)
# [label]: target
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*(?:<(?P<angle>[^>\n]*)>|(?P<bare>\S+))", re.M)
# <img src="target">, <a href='target'>
_HTML = re.compile(r"\b(?:src|href)\s*=\s*(?P<q>[\"'])(?P<value>[^\"'\n]*)(?P=q)", re.I)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
RESOURCE_LINK = re.compile(r"^:/([0-9a-f]{32})$")
ID_LINK = re.compile(r":/([0-9a-f]{32})")
# Characters a bare Markdown link destination cannot hold as they are.
_UNSAFE = set(" %()<>\"'#?\\[]`")


def link_spans(body: str) -> list[tuple[int, int]]:
    """Start and end offsets of every link target in ``body``, in order, never overlapping."""
    spans: list[tuple[int, int]] = []
    # Each pattern needs its marker; a body without it is not scanned by that pattern.
    for rx, marker in ((_INLINE, "]("), (_REFERENCE, "]:")):
        if marker in body:
            for m in rx.finditer(body):
                group = "angle" if m.group("angle") is not None else "bare"
                spans.append(m.span(group))
    if "=" in body:
        spans.extend(_html_spans(body))
    spans.sort()
    out: list[tuple[int, int]] = []
    last_end = -1
    for start, end in spans:
        if start >= last_end:
            out.append((start, end))
            last_end = end
    return out


def _html_spans(body: str) -> list[tuple[int, int]]:
    """The ``value`` spans of ``_HTML.finditer(body)``, found from the ``=`` signs: a match
    starts at ``src`` or ``href`` just before an ``=`` (and the spaces before it), so the
    pattern is tried at those two places only. Scanning every position of the body took
    most of an import's link work (``\\b`` at the start of a case-blind pattern leaves the
    regex engine nothing to skip ahead by)."""
    out: list[tuple[int, int]] = []
    resume = 0  # where finditer would go on after its last match
    i = body.find("=")
    while i >= 0:
        j = i
        while j > 0 and body[j - 1].isspace():
            j -= 1
        for start in (j - 4, j - 3):  # "href", "src": the leftmost first, as finditer tries them
            if start >= resume:
                m = _HTML.match(body, start)
                if m is not None:
                    out.append(m.span("value"))
                    resume = m.end()
                    break
        i = body.find("=", max(i + 1, resume))
    return out


def rewrite_links(body: str, replace: Callable[[str], str | None]) -> str:
    """``body`` with each link target ``t`` replaced by ``replace(t)`` (``None`` keeps it)."""
    if "](" not in body and "]:" not in body and "=" not in body:
        return body
    parts: list[str] = []
    pos = 0
    for start, end in link_spans(body):
        new = replace(body[start:end])
        if new is None:
            continue
        parts.append(body[pos:start])
        parts.append(new)
        pos = end
    if not parts:
        return body
    parts.append(body[pos:])
    return "".join(parts)


def is_relative_path(target: str) -> bool:
    """True for ``images/a.png`` or ``../b.pdf``; false for URLs, ``:/id``, anchors, absolute paths."""
    return bool(target) and not (
        target.startswith(("#", "/", ":/", "\\")) or _SCHEME.match(target)
    )


def path_of_target(target: str) -> str:
    """The file path a relative link target names: query and fragment dropped, %XX decoded."""
    for sep in ("#", "?"):
        cut = target.find(sep)
        if cut >= 0:
            target = target[:cut]
    return unquote(target)


def quote_path(path: str) -> str:
    """A relative path made safe as a bare link destination (spaces, parentheses … as %XX)."""
    out = []
    for ch in path:
        if ch in _UNSAFE or ord(ch) < 0x20 or ch == "\x7f":
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)
