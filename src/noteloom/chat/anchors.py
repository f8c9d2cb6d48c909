"""Where a proposed edit goes in a note, and whether it still fits there. Pure text functions.

A session tool names its place by an *anchor* (a short piece of the note's text that
occurs once), by a fenced block's tag, or by the user's selection. The edit is
planned as "replace ``old_text`` at this span with ``new_text``"; accepting it later
finds ``old_text`` again (at the same offsets, or through the anchor) and refuses
when it is gone, so an edit is never applied to the wrong text.

Offsets are ``str`` indices (code points) into the raw body.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")

SessionTool = Literal[
    "edit_selection",
    "rewrite_paragraph",
    "insert_before_anchor",
    "insert_after_anchor",
    "append_to_note",
    "replace_structured_block",
]


class AnchorError(ValueError):
    """The anchor, tag or selection does not name exactly one place; the message says why."""


class EditStale(ValueError):
    """The text an edit replaces is no longer in the note; the message says what to do."""


@dataclass(frozen=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True)
class FencedBlock:
    """A top-level fenced code block: ``tag`` is the first word of its info string."""

    tag: str
    start: int
    end: int
    #: The lines between the fences (the closing fence excluded; to the end if unclosed).
    content: Span


@dataclass(frozen=True)
class PlannedEdit:
    span: Span
    old_text: str
    new_text: str


def _lines(body: str) -> list[tuple[int, int, str]]:
    """``(start, end_without_newline, text)`` of each line."""
    out: list[tuple[int, int, str]] = []
    for m in _LINE.finditer(body):
        if m.start() == len(body) and m.start() == m.end():
            break
        text = m.group().rstrip("\r\n")
        out.append((m.start(), m.start() + len(text), text))
    return out


def fenced_blocks(body: str) -> list[FencedBlock]:
    """The fenced code blocks that are not inside a list or quote, in order."""
    blocks: list[FencedBlock] = []
    lines = _lines(body)
    i = 0
    while i < len(lines):
        start, _, text = lines[i]
        m = _FENCE_OPEN.match(text)
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        fence = m.group(1)
        closer = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not closer.match(lines[j][2]):
            j += 1
        content_start = lines[i + 1][0] if i + 1 < len(lines) else len(body)
        if j < len(lines):
            content_end, end = lines[j][0], lines[j][1]
        else:
            content_end = end = len(body)
        info = m.group(2).strip().split()
        blocks.append(FencedBlock(info[0] if info else "", start, end, Span(content_start, content_end)))
        i = j + 1
    return blocks


def paragraphs(body: str) -> list[Span]:
    """Runs of non-blank lines; a fenced block is never split by the blank lines inside it."""
    fences = [(b.start, b.end) for b in fenced_blocks(body)]
    spans: list[Span] = []
    cur: list[int] | None = None
    for start, end, text in _lines(body):
        in_fence = any(fs <= start < fe for fs, fe in fences)
        if text.strip() or in_fence:
            if cur is None:
                cur = [start, end]
            else:
                cur[1] = end
        elif cur is not None:
            spans.append(Span(cur[0], cur[1]))
            cur = None
    if cur is not None:
        spans.append(Span(cur[0], cur[1]))
    return spans


def find_anchor(body: str, anchor: str) -> Span:
    """Where ``anchor`` occurs in ``body``: exactly once, or once when runs of whitespace
    are taken as equal (models often re-wrap lines). ``AnchorError`` otherwise."""
    needle = anchor.strip()
    if not needle:
        raise AnchorError("the anchor is empty; copy a short phrase from the note that occurs once")
    hits = _occurrences(body, needle)
    if not hits:
        pattern = r"\s+".join(re.escape(w) for w in needle.split())
        hits = [Span(m.start(), m.end()) for m in re.finditer(pattern, body)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise AnchorError(
            f"the anchor {_short(needle)!r} is not in the note; copy a phrase exactly as the note has it"
        )
    raise AnchorError(
        f"the anchor {_short(needle)!r} occurs {len(hits)} times in the note; "
        "use a longer phrase that occurs only once"
    )


def _occurrences(body: str, needle: str) -> list[Span]:
    out: list[Span] = []
    i = body.find(needle)
    while i != -1 and len(out) < 50:
        out.append(Span(i, i + len(needle)))
        i = body.find(needle, i + 1)
    return out


def paragraph_around(body: str, span: Span) -> Span:
    """The paragraphs that ``span`` touches, as one span."""
    touched = [p for p in paragraphs(body) if p.start <= span.end and span.start <= p.end]
    if not touched:
        raise AnchorError("the anchor falls between paragraphs; pick a phrase inside one")
    return Span(touched[0].start, touched[-1].end)


def structured_block(body: str, tag: str) -> FencedBlock:
    """The one fenced block whose tag is ``tag`` (case-insensitive)."""
    wanted = tag.strip().strip("`~").strip().lower()
    blocks = fenced_blocks(body)
    hits = [b for b in blocks if b.tag.lower() == wanted]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        known = ", ".join(sorted({repr(b.tag) for b in blocks})) or "none"
        raise AnchorError(f"no fenced block tagged {tag!r} in the note (tags there: {known})")
    raise AnchorError(
        f"{len(hits)} fenced blocks are tagged {tag!r}; rewrite the one you mean with "
        "rewrite_paragraph and an anchor from inside it"
    )


def append_separator(body: str) -> str:
    """What goes between a body and a new block appended to it: one blank line."""
    if not body or body.endswith("\n\n"):
        return ""
    return "\n" if body.endswith("\n") else "\n\n"


def plan(
    tool: SessionTool,
    body: str,
    text: str,
    *,
    anchor: str | None = None,
    tag: str | None = None,
    selection: tuple[int, int, str] | None = None,
) -> PlannedEdit:
    """The edit ``tool`` would make to ``body``; ``AnchorError`` when its place is unclear."""
    block_text = text.strip("\r\n")
    if tool == "edit_selection":
        if selection is None:
            raise AnchorError("there is no selection to edit")
        start, end, selected = selection
        return PlannedEdit(Span(start, end), selected, text)
    if tool == "append_to_note":
        return PlannedEdit(Span(len(body), len(body)), "", append_separator(body) + text)
    if tool == "replace_structured_block":
        block = structured_block(body, tag or "")
        content = block.content
        new = text if not text or text.endswith("\n") else text + "\n"
        return PlannedEdit(content, body[content.start : content.end], new)
    para = paragraph_around(body, find_anchor(body, anchor or ""))
    old = body[para.start : para.end]
    if tool == "rewrite_paragraph":
        return PlannedEdit(para, old, block_text)
    if tool == "insert_before_anchor":
        return PlannedEdit(para, old, f"{block_text}\n\n{old}")
    if tool == "insert_after_anchor":
        return PlannedEdit(para, old, f"{old}\n\n{block_text}")
    raise AnchorError(f"{tool!r} is not a session tool")


def relocate(tool: str, body: str, span: Span, old_text: str, anchor: str | None) -> Span:
    """Where ``old_text`` is in ``body`` now: at ``span`` if it is still there, else found again
    through the anchor (or tag, or the selected text when it occurs once). ``EditStale`` when gone."""
    if tool == "append_to_note":
        return Span(len(body), len(body))
    if span.end <= len(body) and body[span.start : span.end] == old_text:
        return span
    try:
        if tool == "replace_structured_block":
            found = structured_block(body, anchor or "").content
        elif tool == "edit_selection":
            hits = _occurrences(body, old_text) if old_text else []
            found = hits[0] if len(hits) == 1 else Span(-1, -1)
        else:
            found = paragraph_around(body, find_anchor(body, anchor or ""))
    except AnchorError as exc:
        raise EditStale(f"the note has changed and this edit no longer fits ({exc}); ask again") from None
    if found.start < 0 or body[found.start : found.end] != old_text:
        what = "selected text" if tool == "edit_selection" else "text this edit replaces"
        raise EditStale(f"the note has changed: the {what} is no longer there; ask for the edit again")
    return found


def splice(body: str, span: Span, new_text: str) -> str:
    return body[: span.start] + new_text + body[span.end :]


DiffOp = Literal["equal", "insert", "delete"]


def word_diff(old: str, new: str) -> list[tuple[DiffOp, str]]:
    """A word-level diff of ``old`` → ``new`` for display, adjacent runs merged."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    out: list[tuple[DiffOp, str]] = []

    def push(op: DiffOp, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            push("equal", "".join(a[i1:i2]))
        else:
            push("delete", "".join(a[i1:i2]))
            push("insert", "".join(b[j1:j2]))
    return out


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
