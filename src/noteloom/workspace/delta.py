"""Edit scripts: how one text is rebuilt, exactly, from another.

A script is a list of operations over a *source* text: a ``(start, end)`` pair copies
that slice of the source, a ``str`` inserts itself. Applying a script to the source it
was made from gives the target back character for character (CRLF, unicode and empty
texts included): nothing here is fuzzy, unlike diff-match-patch's patches.

Making a script is cheap for the edits notes see: the common prefix and suffix are cut
off first (C-speed slice comparisons), so an append or a one-word change costs the size
of the change, whatever the size of the note. Only what is left in the middle goes to
``difflib.SequenceMatcher``, over lines, and only while the two line counts are small
enough for its quadratic worst case; past that, lines that occur once on each side
anchor it (patience diff) and only the gaps between anchors are diffed.

Rebuilding an old version through many scripts does not materialise every version in
between: ``rebuild`` composes the scripts into pieces of the base text and inserted
text, and joins them once at the end.

Scripts are stored as compact JSON: ``[source_len, [start, end], "text", …]``.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher
from itertools import accumulate

Copy = tuple[int, int]
Op = Copy | str

# SequenceMatcher runs in time up to about the product of the two line counts (2,000 random
# lines against 2,000: 70 ms here); past this, lines unique on both sides anchor the diff.
_LINE_PAIRS_LIMIT = 4_000_000


# Past this many pieces (plus one per 8 KB of text, as a join costs the text's length), a
# rebuild joins its text and goes on from one piece: the oldest of 300 scattered edits of a
# 60 KB note took 104 ms to rebuild without it, 33 ms at 64 pieces, 11 ms at 8.
_MAX_PIECES = 8


class ScriptError(ValueError):
    """An encoded script is malformed, or does not fit the text it is applied to."""


def diff(source: str, target: str) -> list[Op]:
    """A script that turns ``source`` into ``target``."""
    ops: list[Op] = []
    _segment(ops, source, 0, len(source), target, anchors=True)
    return ops


def apply(source: str, ops: Sequence[Op]) -> str:
    """``source`` transformed by ``ops`` (made by ``diff(source, …)``)."""
    return rebuild(source, [(len(source), ops)])


def rebuild(base: str, scripts: Iterable[tuple[int, Sequence[Op]]]) -> str:
    """Apply each ``(source_len, ops)`` script in turn, starting from ``base``.

    Raises ``ScriptError`` when a script does not fit the text before it (its source
    length differs, or it copies past the end)."""
    pieces: list[Op] = [(0, len(base))] if base else []
    for source_len, ops in scripts:
        pieces = _compose(pieces, source_len, ops)
        if len(pieces) > _MAX_PIECES + source_len // 8192:
            # Edits scattered over a note split it into ever more pieces, and composing costs
            # their number per script: one join now costs less than keeping them.
            base = _join(base, pieces)
            pieces = [(0, len(base))] if base else []
    return _join(base, pieces)


def _join(base: str, pieces: list[Op]) -> str:
    return "".join(base[p[0] : p[1]] if isinstance(p, tuple) else p for p in pieces)


def encode(source_len: int, ops: Sequence[Op]) -> str:
    items: list[object] = [source_len]
    items.extend(list(op) if isinstance(op, tuple) else op for op in ops)
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


def decode(text: str) -> tuple[int, list[Op]]:
    """``(source_len, ops)`` of an encoded script; ``ScriptError`` when malformed."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise ScriptError(f"not a script: {exc}") from None
    # ``type(x) is int`` (not isinstance): JSON's true/false must not pass for numbers. A
    # rebuild decodes up to a thousand scripts, so the checks stay inline.
    if type(items) is not list or not items or type(items[0]) is not int or items[0] < 0:
        raise ScriptError("a script starts with the length of its source")
    ops: list[Op] = []
    for item in items[1:]:
        if type(item) is str:
            ops.append(item)
            continue
        if type(item) is list and len(item) == 2:
            a, b = item
            if type(a) is int and type(b) is int and 0 <= a <= b:
                ops.append((a, b))
                continue
        raise ScriptError(f"{item!r} is neither a copy nor an insert")
    return items[0], ops


def _copy(ops: list[Op], start: int, end: int) -> None:
    if start >= end:
        return
    last = ops[-1] if ops else None
    if isinstance(last, tuple) and last[1] == start:
        ops[-1] = (last[0], end)
    else:
        ops.append((start, end))


def _insert(ops: list[Op], text: str) -> None:
    if not text:
        return
    if ops and isinstance(ops[-1], str):
        ops[-1] += text
    else:
        ops.append(text)


def _segment(ops: list[Op], source: str, start: int, end: int, target: str, *, anchors: bool) -> None:
    """The script of ``source[start:end]`` → ``target``: shared ends copied, the middle diffed."""
    old = source[start:end]
    p = _common_prefix(old, target)
    q = _common_suffix(old, target, min(len(old), len(target)) - p)
    _copy(ops, start, start + p)
    if p < len(old) - q and p < len(target) - q:
        _middle(ops, source, start + p, end - q, target[p : len(target) - q], anchors=anchors)
    else:
        _insert(ops, target[p : len(target) - q])
    _copy(ops, end - q, end)


def _middle(ops: list[Op], source: str, start: int, end: int, target: str, *, anchors: bool) -> None:
    """The script of ``source[start:end]`` → ``target`` (both non-empty), line by line."""
    a = source[start:end].splitlines(keepends=True)
    b = target.splitlines(keepends=True)
    a_at = _offsets(a, start)
    b_at = _offsets(b, 0)
    if len(a) * len(b) > _LINE_PAIRS_LIMIT:
        if anchors:
            _anchored(ops, source, a, a_at, target, b, b_at)
        else:
            _insert(ops, target)
        return
    matcher = SequenceMatcher(None, a, b)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _copy(ops, a_at[i1], a_at[i2])
        elif tag == "insert":
            _insert(ops, target[b_at[j1] : b_at[j2]])
        elif tag == "replace":
            # Several lines each with a word changed: keep what the blocks share at both ends.
            s0, s1 = a_at[i1], a_at[i2]
            t0, t1 = b_at[j1], b_at[j2]
            old, new = source[s0:s1], target[t0:t1]
            p = _common_prefix(old, new)
            q = _common_suffix(old, new, min(len(old), len(new)) - p)
            _copy(ops, s0, s0 + p)
            _insert(ops, new[p : len(new) - q])
            _copy(ops, s1 - q, s1)
        # "delete": nothing of those source lines is copied


def _anchored(
    ops: list[Op], source: str, a: list[str], a_at: list[int], target: str, b: list[str], b_at: list[int]
) -> None:
    """Large middles (two edits far apart in a long note, a prepend with an append): lines
    found once on each side, in the same order, are kept as they are (patience diff's
    anchors, linear time); each gap between them is diffed on its own, without anchors."""
    i0 = j0 = 0
    for i, j in [*_unique_anchors(a, b), (len(a), len(b))]:
        if i > i0 or j > j0:
            _segment(ops, source, a_at[i0], a_at[i], target[b_at[j0] : b_at[j]], anchors=False)
        if i < len(a):
            _copy(ops, a_at[i], a_at[i + 1])
        i0, j0 = i + 1, j + 1


def _unique_anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` with ``a[i] == b[j]`` unique in both, the longest run increasing in both."""
    count_a, count_b = Counter(a), Counter(b)
    in_b = {line: j for j, line in enumerate(b) if count_b[line] == 1}
    pairs = [(i, in_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and line in in_b]
    # Longest increasing subsequence of the j's, by patience sorting.
    tails: list[int] = []
    tail_at: list[int] = []
    back = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        x = bisect_left(tails, j)
        if x == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[x] = j
            tail_at[x] = k
        back[k] = tail_at[x - 1] if x else -1
    out: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        out.append(pairs[k])
        k = back[k]
    return out[::-1]


def _offsets(lines: list[str], start: int) -> list[int]:
    return list(accumulate(map(len, lines), initial=start))


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by slice comparisons of doubling size."""
    n = min(len(a), len(b))
    lo, step = 0, 256
    while lo < n:
        hi = min(lo + step, n)
        if a[lo:hi] != b[lo:hi]:
            while hi - lo > 1:  # a[:lo] == b[:lo]; they differ somewhere in [lo, hi)
                mid = (lo + hi) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return n


def _common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most ``limit``."""
    na, nb = len(a), len(b)
    lo, step = 0, 256
    while lo < limit:
        hi = min(lo + step, limit)
        if a[na - hi : na - lo] != b[nb - hi : nb - lo]:
            while hi - lo > 1:  # the last lo agree; they differ somewhere in the last hi
                mid = (lo + hi) // 2
                if a[na - mid : na - lo] == b[nb - mid : nb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, step = hi, step * 2
    return limit


def _compose(pieces: list[Op], source_len: int, ops: Sequence[Op]) -> list[Op]:
    """The pieces of the text ``ops`` make from the text ``pieces`` stand for."""
    starts: list[int] = []
    total = 0
    for p in pieces:
        starts.append(total)
        total += p[1] - p[0] if isinstance(p, tuple) else len(p)
    if total != source_len:
        raise ScriptError(f"the script was made from a text of {source_len} characters, not {total}")
    out: list[Op] = []
    for op in ops:
        if isinstance(op, str):
            _insert(out, op)
            continue
        a, b = op
        if b > total:
            raise ScriptError(f"copy {list(op)!r} reaches past the end of its source ({total})")
        i = bisect_right(starts, a) - 1
        while a < b:
            piece, at = pieces[i], starts[i]
            size = piece[1] - piece[0] if isinstance(piece, tuple) else len(piece)
            take = min(b, at + size)
            if isinstance(piece, tuple):
                _copy(out, piece[0] + a - at, piece[0] + take - at)
            else:
                _insert(out, piece[a - at : take - at])
            a = take
            i += 1
    return out

