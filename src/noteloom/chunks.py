"""A note cut into chunks for embedding, along its Markdown sections.

Each chunk is a run of one section's own text (the part before its first
subsection), or of several neighbouring sections when they are short and share
a top-level section, or a window of a long section. Windows are cut at
paragraph, line, sentence or word boundaries and overlap a little, so a
sentence on a cut is still whole in one of them. Together the chunks cover the
note's body end to end, however long it is.

A chunk's ``text`` (what gets embedded) starts with the note's title and the
heading path of its section, so a chunk deep in a long note still says what it
is about. ``content_hash`` is the hash of that text: a chunk whose hash did not
change need not be embedded again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from noteloom.outline import Section, sections

__all__ = ["CHUNKER_VERSION", "Chunk", "ChunkSpec", "chunk_note"]

#: Changes whenever the same note would be cut differently; stored with the index.
CHUNKER_VERSION = "1"


@dataclass(frozen=True)
class ChunkSpec:
    """How big chunks get: ``max_chars`` of body per chunk, neighbours overlapping by ``overlap``."""

    max_chars: int = 900
    overlap: int = 120
    #: Neighbouring short sections are merged up to this many characters.
    merge_chars: int = 600
    #: The embedding model's window in tokens (0: unknown). A chunk whose text would run
    #: past it is cut smaller, so no text is lost to the model's truncation.
    max_tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_chars < 100:
            raise ValueError(f"max_chars {self.max_chars} is too small; use 100 or more")
        if not 0 <= self.overlap < self.max_chars // 2:
            raise ValueError(f"overlap {self.overlap} must be >= 0 and under half of max_chars")
        if self.max_tokens and self.max_tokens < 32:
            raise ValueError(f"max_tokens {self.max_tokens} is too small; use 32 or more (or 0 for no limit)")

    @property
    def key(self) -> str:
        """What identifies this way of chunking (stored with the index)."""
        key = f"v{CHUNKER_VERSION}:{self.max_chars}:{self.overlap}:{self.merge_chars}"
        return key + (f":t{self.max_tokens}" if self.max_tokens else "")


@dataclass(frozen=True)
class Chunk:
    """One piece of a note to embed; ``start``/``end`` are offsets into the raw body."""

    note_id: str
    ordinal: int
    section_path: str
    heading: str
    heading_path: tuple[str, ...]
    start: int
    end: int
    text: str
    content_hash: str


@dataclass(frozen=True)
class _Segment:
    """A section's own text: from its heading to its first subsection (or its end)."""

    section: Section
    start: int
    end: int


#: Counts the tokens of each text the way the embedding model will (``Embedder.count_tokens``).
TokenCounter = Callable[[Sequence[str]], list[int]]


def chunk_note(
    note_id: str, title: str, body: str, spec: ChunkSpec | None = None, count_tokens: TokenCounter | None = None
) -> list[Chunk]:
    """The chunks of one note, in document order. A note with no text at all has none;
    a note with a title only has one chunk, the title.

    With ``count_tokens`` and ``spec.max_tokens``, a window whose text is longer than the
    model's window (dense text: code, CJK, numbers) is cut again, smaller, until it fits;
    only those windows are counted again, so the work stays linear in the body."""
    spec = spec or ChunkSpec()
    title = " ".join(title.split())
    secs = sections(body) if body.strip() else []
    by_path = {s.path: s for s in secs}
    pieces: list[tuple[Section | None, int, int]] = []
    for group in _groups(_segments(secs, body), body, spec):
        common = _common_section(group, by_path)
        for start, end in _windows(body, group[0].start, group[-1].end, spec):
            pieces.append((common, start, end))
    if not pieces:
        if not title:
            return []
        pieces.append((None, 0, len(body)))
    texts = [_embed_text(title, _heading_path(sec, by_path) if sec is not None else (), body[a:b]) for sec, a, b in pieces]
    if count_tokens is not None and spec.max_tokens:
        pieces, texts = _fit(pieces, texts, title, body, by_path, spec, count_tokens)
    out: list[Chunk] = []
    for ordinal, ((sec, start, end), text) in enumerate(zip(pieces, texts, strict=True)):
        heading_path = _heading_path(sec, by_path) if sec is not None else ()
        out.append(
            Chunk(
                note_id=note_id,
                ordinal=ordinal,
                section_path=sec.path if sec is not None else "0",
                heading=sec.heading if sec is not None else "",
                heading_path=heading_path,
                start=start,
                end=end,
                text=text,
                content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest()[:32],
            )
        )
    return out


_Piece = tuple[Section | None, int, int]


def _fit(
    pieces: list[_Piece],
    texts: list[str],
    title: str,
    body: str,
    by_path: dict[str, Section],
    spec: ChunkSpec,
    count_tokens: TokenCounter,
) -> tuple[list[_Piece], list[str]]:
    """Pieces whose text runs past ``spec.max_tokens`` cut into windows that fit. Each round
    counts only the windows the last one made, so a body is counted a few times at most."""
    out: list[list[tuple[_Piece, str]]] = [[(p, t)] for p, t in zip(pieces, texts, strict=True)]
    check = [(i, 0) for i in range(len(pieces))]  # (piece, window within it) to count
    for _ in range(4):
        if not check:
            break
        counts = count_tokens([out[i][j][1] for i, j in check])
        split: dict[int, dict[int, list[tuple[_Piece, str]]]] = {}
        for (i, j), tokens in zip(check, counts, strict=True):
            (sec, start, end), _ = out[i][j]
            if tokens <= spec.max_tokens or end - start <= 100:
                continue
            # Characters per token of this very text, with a margin for the title prefix.
            chars = max(100, int((end - start) * spec.max_tokens / tokens * 0.85))
            sub = dataclasses.replace(spec, max_chars=chars, overlap=min(spec.overlap, chars // 4))
            head = _heading_path(sec, by_path) if sec is not None else ()
            split.setdefault(i, {})[j] = [
                ((sec, a, b), _embed_text(title, head, body[a:b])) for a, b in _windows(body, start, end, sub)
            ]
        check = []
        for i, windows in split.items():
            group: list[tuple[_Piece, str]] = []
            for j, item in enumerate(out[i]):
                if j in windows:
                    check.extend((i, len(group) + k) for k in range(len(windows[j])))
                    group.extend(windows[j])
                else:
                    group.append(item)
            out[i] = group
    flat = [item for group in out for item in group]
    return [p for p, _ in flat], [t for _, t in flat]


def _segments(secs: Sequence[Section], body: str) -> list[_Segment]:
    """Each section's own text, skipping segments with nothing but whitespace."""
    out = []
    for i, sec in enumerate(secs):
        end = secs[i + 1].start if i + 1 < len(secs) else len(body)
        end = min(end, sec.end) if sec.end > sec.start else end
        if body[sec.start : end].strip():
            out.append(_Segment(sec, sec.start, end))
    return out


def _top(path: str) -> str:
    return path.split(".", 1)[0]


def _groups(segs: list[_Segment], body: str, spec: ChunkSpec) -> list[list[_Segment]]:
    """Neighbouring short segments under one top-level section, merged while they stay small.

    Segments are contiguous in the body (each one ends where the next begins, blank
    sections aside), so a group spans one range of text.
    """
    groups: list[list[_Segment]] = []
    size = 0
    for seg in segs:
        length = seg.end - seg.start
        if (
            groups
            and size + length <= spec.merge_chars
            and _top(groups[-1][-1].section.path) == _top(seg.section.path)
            and groups[-1][-1].end == seg.start
        ):
            groups[-1].append(seg)
            size += length
        else:
            groups.append([seg])
            size = length
    return groups


def _common_section(group: list[_Segment], by_path: dict[str, Section]) -> Section:
    """The innermost section containing every segment of the group."""
    parts = group[0].section.path.split(".")
    for seg in group[1:]:
        other = seg.section.path.split(".")
        n = 0
        while n < min(len(parts), len(other)) and parts[n] == other[n]:
            n += 1
        parts = parts[:n]
    return by_path[".".join(parts)] if parts else group[0].section


def _heading_path(sec: Section, by_path: dict[str, Section]) -> tuple[str, ...]:
    if not sec.level:
        return ()
    parts = sec.path.split(".")
    chain = [by_path[".".join(parts[: i + 1])] for i in range(len(parts))]
    return tuple(s.heading for s in chain if s.heading)


# Where a window may end, best first: a blank line, a line end, a sentence end, a space.
_BOUNDARIES = (
    re.compile(r"\n[ \t]*\n"),
    re.compile(r"\n"),
    re.compile(r"[.!?。！？][\"')\]]?\s"),
    re.compile(r"\s"),
)


def _windows(body: str, start: int, end: int, spec: ChunkSpec) -> list[tuple[int, int]]:
    """``[start, end)`` cut into windows of at most ``max_chars``, overlapping by about ``overlap``."""
    out: list[tuple[int, int]] = []
    pos = start
    while end - pos > spec.max_chars:
        cut = _cut(body, pos + spec.max_chars // 2, pos + spec.max_chars)
        out.append((pos, cut))
        # The next window starts a little before the cut, at a word boundary.
        back = max(pos + 1, cut - spec.overlap)
        space = body.find(" ", back, cut)
        pos = space + 1 if spec.overlap and space >= 0 else (back if spec.overlap else cut)
    out.append((pos, end))
    return out


def _cut(body: str, lo: int, hi: int) -> int:
    """The best place to end a window within ``(lo, hi]``."""
    for pattern in _BOUNDARIES:
        last = -1
        for m in pattern.finditer(body, lo, hi):
            last = m.end()
        if last > lo:
            return last
    return hi


_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*(?:\s+\"[^\"\n]*\")?\)")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_SPACES = re.compile(r"[ \t]+")
_BLANKS = re.compile(r"\n{3,}")


def _embed_text(title: str, heading_path: tuple[str, ...], piece: str) -> str:
    """Title, heading path and the piece, with link targets and tags left out (they cost
    tokens and say little about meaning)."""
    text = _LINK.sub(r"\1", piece)
    text = _HTML_TAG.sub(" ", text)
    text = _BLANKS.sub("\n\n", _SPACES.sub(" ", text)).strip()
    head = title
    if heading_path:
        trail = " > ".join(heading_path)
        head = f"{title} > {trail}" if title else trail
    return f"{head}\n\n{text}" if text else head
