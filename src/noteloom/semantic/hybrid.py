"""Hybrid ranking: keyword and semantic search fused into one list, one result per note.

A textbook fusion with equal weights does worse than semantic search alone on
descriptions: keyword search ranks notes that share the query's words but not its
meaning (distractors) first. So the weights follow what each ranking is good at,
read from the query's shape; ``bench/bench_semantic.py`` measures the result per
kind of query.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from noteloom.errors import InvalidInput
from noteloom.semantic.index import ChunkHit, SemanticIndex

if TYPE_CHECKING:
    from sqlalchemy import Connection

Mode = Literal["keyword", "semantic", "hybrid"]
QueryShape = Literal["keyword", "natural"]


@dataclass(frozen=True)
class NoteHit:
    """One note found by :func:`hybrid_search`, with its best section."""

    id: str
    title: str
    notebook_id: str
    updated_time: int
    snippet: str
    section: str | None
    section_heading: str | None
    score: float
    #: Which ranking found it: ``keyword``, ``semantic`` or ``both``.
    found_by: str
    #: The notebook's title and whether the note was clipped, when the ranking that
    #: found it read them (keyword search does); ``None`` otherwise.
    notebook: str | None = None
    clipped: bool | None = None


@dataclass(frozen=True)
class HybridResult:
    hits: list[NoteHit]
    #: The mode actually used (``hybrid`` falls back to ``keyword`` without a built index).
    mode: Mode
    pending_notes: int = 0
    has_more: bool = False


_FILTER = re.compile(r"(?:^|\s)-?[a-z]+:\S", re.IGNORECASE)
_CODE = re.compile(r"\d|[_/\\#@]|[a-z][A-Z]|\w-\w|\w\.\w")
_ID = re.compile(r"\b[0-9a-f]{32}\b")


def query_shape(query: str) -> QueryShape:
    """``keyword`` for what keyword syntax says best (quoted phrases, filters, ids, codes,
    a word or two); ``natural`` for a description in plain words."""
    text = query.strip()
    words = text.split()
    if '"' in text or _FILTER.search(text) or _ID.search(text) or text.endswith("*"):
        return "keyword"
    if len(words) <= 2:
        return "keyword"
    if sum(1 for w in words if _CODE.search(w)) * 3 >= len(words):
        return "keyword"
    return "natural"


#: Rank-fusion constant: small, so first places count for much more than tenth places.
RRF_K = 10
#: Weight of the ranking a query's shape does not favour. Measured on bench/eval: equal
#: weights let keyword distractors push paraphrase answers out of the top five.
MINOR_WEIGHT = 0.35


def hybrid_search(
    ws: Any,
    index: SemanticIndex | None,
    query: str,
    *,
    mode: Mode | None = None,
    limit: int = 20,
    offset: int = 0,
    notebook_ids: Collection[str] | None = None,
    conn: Connection | None = None,
) -> HybridResult:
    """Notes for ``query``, one per note with its best section, in the mode asked for.

    ``mode=None`` means hybrid when the semantic index is built, keyword otherwise.
    Hybrid fuses the two rankings by weighted reciprocal rank; the weights follow the
    query's shape (:func:`query_shape`): keyword-shaped queries lead with keyword
    search, descriptions with semantic search, the other ranking weighing
    ``MINOR_WEIGHT``. A description whose words all match (keyword search is AND)
    is strong evidence, so then both weigh alike. Keyword syntax a natural-language
    query breaks (a stray quote, ``:``) does not fail a hybrid search: that arm is
    just left out. ``conn`` runs the keyword arm in the caller's read transaction.
    """
    from noteloom.errors import QueryError
    from noteloom.search import search_notes

    built = index is not None and index.is_built()
    if mode is None:
        mode = "hybrid" if built else "keyword"
    if mode != "keyword" and index is None:
        raise InvalidInput("semantic search is off in this workspace; use mode 'keyword'")
    want = offset + limit + 1
    if mode == "keyword":
        hits = search_notes(ws, query, limit=limit + 1, offset=offset, notebook_ids=notebook_ids, conn=conn)
        out = [_from_keyword(h, float(h.score)) for h in hits]
        return HybridResult(out[:limit], "keyword", 0, len(out) > limit)
    assert index is not None
    sem = index.search(query, limit=want, notebook_ids=notebook_ids, relevance="loose", one_per_note=True)
    semantic = [_from_chunk(h) for h in sem.hits]
    if mode == "semantic":
        page = semantic[offset : offset + limit + 1]
        return HybridResult(page[:limit], "semantic", sem.pending_notes, len(page) > limit)
    try:
        keyword = [
            _from_keyword(h, float(h.score))
            for h in search_notes(ws, query, limit=want, notebook_ids=notebook_ids, conn=conn)
        ]
    except QueryError:
        keyword = []
    fused = fuse(query, keyword, semantic)
    page = fused[offset : offset + limit + 1]
    return HybridResult(page[:limit], "hybrid", sem.pending_notes, len(page) > limit)


def fuse(query: str, keyword: Sequence[NoteHit], semantic: Sequence[NoteHit]) -> list[NoteHit]:
    """One ranking from two, weighted by the query's shape (see :func:`hybrid_search`)."""
    shape = query_shape(query)
    if shape == "keyword":
        wk, ws = 1.0, MINOR_WEIGHT
    elif keyword:
        wk, ws = 1.0, 1.0
    else:
        wk, ws = MINOR_WEIGHT, 1.0
    scores: dict[str, float] = {}
    best: dict[str, NoteHit] = {}
    sources: dict[str, set[str]] = {}
    for weight, hits, name in ((wk, keyword, "keyword"), (ws, semantic, "semantic")):
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (RRF_K + rank + 1)
            sources.setdefault(hit.id, set()).add(name)
            # The section shown comes from the ranking that leads for this query.
            lead = "keyword" if wk >= ws else "semantic"
            if hit.id not in best or (name == lead and best[hit.id].found_by != lead):
                best[hit.id] = hit
    order = sorted(scores, key=lambda nid: (-scores[nid], best[nid].title, nid))
    out = []
    for nid in order:
        hit = best[nid]
        found = "both" if len(sources[nid]) == 2 else next(iter(sources[nid]))
        out.append(
            NoteHit(
                hit.id, hit.title, hit.notebook_id, hit.updated_time, hit.snippet, hit.section,
                hit.section_heading, round(scores[nid], 6), found, hit.notebook, hit.clipped,
            )
        )
    return out


def _from_keyword(h: Any, score: float) -> NoteHit:
    return NoteHit(
        h.id, h.title, h.notebook_id, h.updated_time, h.snippet, h.section, h.section_heading, score, "keyword",
        h.notebook, h.clipped,
    )


def _from_chunk(h: ChunkHit) -> NoteHit:
    return NoteHit(
        h.note_id, h.title, h.notebook_id, h.updated_time, h.snippet, h.section, h.section_heading, h.score,
        "semantic",
    )
