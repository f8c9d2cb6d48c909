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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from noteloom.errors import InvalidInput
from noteloom.query import Query, parse_query
from noteloom.semantic.index import ChunkHit, Relevance, SemanticIndex
from noteloom.vectors import read_meta

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


#: The relevance floor of the semantic arm in hybrid mode, by query shape. Measured on
#: bench/eval with all-MiniLM-L6-v2: the answer to a description scores 0.30 at least
#: (median 0.47), so ``normal`` (0.25) keeps every one. But a word or two scores high
#: against unrelated notes: 23 words found in no note scored 0.14 to 0.48 against their
#: nearest note (median 0.31; "zqxvorp" 0.31 against a budget), so in hybrid mode, where
#: such a query's exact matches are the answer, semantic hits of keyword-shaped queries
#: need ``strict`` (0.45), which 21 of the 23 stay under. Semantic mode, asked for
#: meaning, keeps ``normal`` for every query (as ``semantic_search_notes`` does): "rail
#: trip" finds a note on a train journey at 0.31.
FLOOR_BY_SHAPE: dict[str, Relevance] = {"keyword": "strict", "natural": "normal"}
SEMANTIC_FLOOR: Relevance = "normal"


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
    The query language means the same in every mode: the query is parsed once (a
    malformed one raises :class:`~noteloom.errors.QueryError` whatever the mode), and
    the semantic arm searches only the notes its filters and exclusions allow
    (:func:`noteloom.search.notes_allowed`), by the meaning of its positive words
    alone. A query of filters only has nothing to compare by meaning: it is answered
    by keyword search in every mode, with no section fields. Semantic hits must reach
    the relevance floor (``FLOOR_BY_SHAPE``, ``SEMANTIC_FLOOR``), so words that no note contains
    and that mean nothing close to any note find nothing. In hybrid mode a keyword-shaped
    query none of whose words any allowed note holds finds nothing, without embedding it.

    Hybrid fuses the two rankings (:func:`fuse`). ``conn`` runs both arms in the
    caller's read transaction.
    """
    from noteloom.search import notes_allowed, search_notes

    if index is None or conn is None:
        built = index is not None and index.is_built()
    else:
        meta = read_meta(conn)
        built = meta is not None and meta.model == index.model
    if mode is None:
        mode = "hybrid" if built else "keyword"
    if mode != "keyword" and index is None:
        raise InvalidInput("semantic search is off in this workspace; use mode 'keyword'", field="mode")
    q = parse_query(query)
    want = offset + limit + 1
    if mode == "keyword" or not q.positive_terms:
        hits = search_notes(ws, q, limit=limit + 1, offset=offset, notebook_ids=notebook_ids, conn=conn)
        out = [_from_keyword(h, float(h.score)) for h in hits]
        return HybridResult(out[:limit], "keyword", 0, len(out) > limit)
    assert index is not None
    shape = query_shape_of(q)
    keyword: list[NoteHit] = []
    if mode == "hybrid":
        keyword = [
            _from_keyword(h, float(h.score))
            for h in search_notes(ws, q, limit=want, notebook_ids=notebook_ids, conn=conn)
        ]
        if not keyword and shape == "keyword" and _in_no_note(ws, q, notebook_ids, conn):
            # Its exact matches are such a query's answer, and no note holds any of its
            # words: semantic hits could only be notes that happen to score high against a
            # word or two (see FLOOR_BY_SHAPE). Nothing is embedded.
            return HybridResult([], "hybrid", 0, False)
    if conn is not None:
        allowed = notes_allowed(conn, q, notebook_ids)
    else:
        with ws.read() as c:
            allowed = notes_allowed(c, q, notebook_ids)
    sem = index.search(
        semantic_text(q),
        limit=want,
        relevance=SEMANTIC_FLOOR if mode == "semantic" else FLOOR_BY_SHAPE[shape],
        one_per_note=True,
        notes=allowed,
        conn=conn,
    )
    semantic = [_from_chunk(h) for h in sem.hits]
    if mode == "semantic":
        page = semantic[offset : offset + limit + 1]
        return HybridResult(page[:limit], "semantic", sem.pending_notes, len(page) > limit)
    fused = fuse(query, keyword, semantic, shape=shape)
    page = fused[offset : offset + limit + 1]
    return HybridResult(page[:limit], "hybrid", sem.pending_notes, len(page) > limit)


def _in_no_note(ws: Any, q: Query, notebook_ids: Collection[str] | None, conn: Connection | None) -> bool:
    """Whether no note the filters allow matches any one of ``q``'s positive words (keyword
    search found nothing for all of them together)."""
    from noteloom.search import search_notes

    terms = q.positive_terms
    if len(terms) == 1 or q.match_any:
        return True
    return not any(
        search_notes(ws, replace(q, terms=(t, *q.negative_terms)), limit=1, notebook_ids=notebook_ids, conn=conn)
        for t in terms
    )


def semantic_text(q: Query) -> str:
    """What the semantic arm embeds: the positive words and phrases, as typed. Filters
    and exclusions restrict the candidates instead; embedded, ``-stove`` would pull
    notes about stoves closer."""
    return " ".join(t.text for t in q.positive_terms)


def query_shape_of(q: Query) -> QueryShape:
    """:func:`query_shape` of a parsed query: a phrase, a prefix or a field-restricted
    word is keyword syntax; otherwise the shape of its positive words."""
    terms = q.positive_terms
    if any(t.prefix or t.field != "all" or (t.phrase and " " in t.text.strip()) for t in terms):
        return "keyword"
    return query_shape(semantic_text(q))


def fuse(
    query: str, keyword: Sequence[NoteHit], semantic: Sequence[NoteHit], *, shape: QueryShape | None = None
) -> list[NoteHit]:
    """One ranking from two, by the query's shape (``shape``, or read from ``query``).

    Keyword-shaped queries (phrases, codes, a word or two) keep keyword search's
    ranking as it is, and the semantic hits it missed follow: hybrid then never does
    worse than keyword search on what keyword syntax says best. Descriptions fuse the
    two by weighted reciprocal rank, semantic search leading, and a description whose
    words all match (keyword search is AND) weighs both alike.
    """
    if shape is None:
        shape = query_shape(query)
    if shape == "keyword":
        return _keyword_first(keyword, semantic)
    if keyword:
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


def _keyword_first(keyword: Sequence[NoteHit], semantic: Sequence[NoteHit]) -> list[NoteHit]:
    """Keyword hits in their order (``both`` when semantic search found them too), then
    the semantic hits keyword search missed, in theirs."""
    sem_ids = {h.id for h in semantic}
    kw_ids = {h.id for h in keyword}
    n = len(keyword) + len(semantic)
    out = [replace(h, found_by="both" if h.id in sem_ids else "keyword") for h in keyword]
    out += [h for h in semantic if h.id not in kw_ids]
    # Scores that follow the order, comparable to the fused ones (higher is better).
    return [replace(h, score=round((n - i) / (RRF_K + n), 6)) for i, h in enumerate(out)]


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
