"""Keyword search where notes are long and words common: a hit is placed by folding only as
much of its body as needed, and rankings are kept while the index stays as it was; both give
exactly what the plain way gives."""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom import outline, search
from noteloom.query import parse_query
from noteloom.search import SearchHit, search_notes
from noteloom.workspace import Workspace

# -- the plain way: the whole body folded, every section looked at ------------------------


def whole_folded(body: str) -> str:
    text = body.lower()
    if not body.isascii():
        if len(text) != len(body):
            text = "".join(c if len(c.lower()) != 1 else c.lower() for c in body)
        text = search._fold_text(text)
    return text


def whole_matches(rx: object, word_start: bool, text: str) -> Iterator[tuple[int, int]]:
    for m in rx.finditer(text):  # type: ignore[attr-defined]
        if not word_start or m.start() == 0 or not text[m.start() - 1].isalnum():
            yield m.span()


def plain_place(query: str, body: str) -> tuple[tuple[int, int], str] | None:
    """Where search placed a hit before it folded bodies a prefix at a time."""
    patterns = [search._anchor_pattern(t) for t in parse_query(query).body_terms]
    text = whole_folded(body)
    secs = outline.sections(body)
    if len(patterns) == 1:
        span = next(whole_matches(*patterns[0], text), None)
        return None if span is None else (span, outline.innermost_section_in(secs, span[0]).path)
    matches = []
    for rx, word_start in patterns:
        spans = []
        for span in whole_matches(rx, word_start, text):
            spans.append(span)
            if len(spans) == search._MATCHES_PER_TERM:
                break
        matches.append(spans)
    if not any(matches):
        return None
    found: dict[str, tuple[outline.Section, set[int]]] = {}
    first: dict[str, tuple[int, int]] = {}
    for term, spans in enumerate(matches):
        for span in spans:
            inner = outline.innermost_section_in(secs, span[0])
            parents = (s for s in secs if 0 < s.level < inner.level and s.start <= span[0] < s.end)
            for sec in (inner, *parents):
                found.setdefault(sec.path, (sec, set()))[1].add(term)
                if sec.path not in first or span[0] < first[sec.path][0]:
                    first[sec.path] = span
    best = min(found, key=lambda p: (-len(found[p][1]), -found[p][0].level, first[p][0]))
    return first[best], found[best][0].path


def fast_place(query: str, body: str) -> tuple[tuple[int, int], str] | None:
    anchor = search._Anchor(parse_query(query).body_terms)
    row = search._Row(0, "n" + str(hash(body)), "t", "b", 1, 0.0)
    placed = anchor.place(row, body)
    return None if placed is None else (placed[0], placed[1].path)


# Words that fold into each other (accents, case, a final sigma, the one letter that
# lower-cases to two), CJK, and separators of every kind, so prefixes get cut everywhere.
WORDS = ["cafe", "Café", "CAFÉ", "naïve", "ΟΔΟΣ", "οδος", "İstanbul", "istanbul", "über", "uber",
         "数据", "数", "据库", "foo", "foo_bar", "fo", "x1", "straße"]
SEPARATORS = [" ", "  ", "\n", "\n\n", " - ", "_", ".", ", ", "'", "\t", "\u0301", "—", "\r\n"]
HEADINGS = ["# Top", "## Mid", "### Low", "Setext\n===", "Under\n---"]
QUERIES = ["cafe", "café", "caf", "οδος", "οδοσ", "ΟΔΟΣ", "istanbul", "uber", "数据", "数", "foo", "fo", "fo*", "foo_bar",
           '"foo bar"', '"cafe naive"', "cafe foo", "istanbul 数据 uber", "x1 straße", "strasse"]


@st.composite
def bodies(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 120))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            parts.append("\n" + draw(st.sampled_from(HEADINGS)) + "\n")
        else:
            parts.append(draw(st.sampled_from(WORDS)))
        parts.append(draw(st.sampled_from(SEPARATORS)))
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(body=bodies(), query=st.sampled_from(QUERIES))
def test_folding_a_prefix_at_a_time_places_hits_as_folding_it_all(body: str, query: str) -> None:
    plain = plain_place(query, body)
    old = search._FIRST_FOLD
    try:
        for first in range(1, 80):  # tiny first prefixes: cuts fall everywhere
            search._FIRST_FOLD = first
            assert fast_place(query, body) == plain, first
    finally:
        search._FIRST_FOLD = old


def test_prefixes_end_after_a_space_and_cover_the_body_once() -> None:
    body = "Σ" * 5000 + " ΑΣ\u0301 " + "x" * 20_000 + "\nend"
    folding = search._Folding(body)
    cuts = []
    while folding.grow():
        cuts.append(len(folding.text))
    assert cuts[-1] == len(body) and cuts == sorted(set(cuts))
    assert all(body[c - 1] in " \n" for c in cuts[:-1])
    assert folding.text == whole_folded(body)


def test_a_match_deep_in_a_400k_character_note_gets_its_snippet_and_section(ws: Workspace) -> None:
    rng = random.Random(3)
    filler = " ".join(rng.choice(["lorem", "ipsum", "dolor", "sit", "amet"]) for _ in range(12_000))
    body = "# Start\n\n" + filler + "\n\n## Middle\n\n" + filler + "\n\n## Late\n\nthe Wömbat waits here.\n\n" + filler
    assert len(body) > 150_000
    ws.create_note("long", body)
    hit = only(search_notes(ws, "wombat"))
    assert hit.section_heading == "Late"
    assert "Wömbat waits here" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    section = outline.resolve_section(body, hit.section or "")
    assert section.start <= body.index("Wömbat") < section.end


def only(hits: list[SearchHit]) -> SearchHit:
    assert len(hits) == 1, [h.title for h in hits]
    return hits[0]


# -- kept rankings -------------------------------------------------------------------------


def titles(ws: Workspace, query: str, **kw: int) -> list[str]:
    return [h.title for h in search_notes(ws, query, **kw)]


def test_a_kept_ranking_is_dropped_by_every_write_that_changes_the_index(ws: Workspace) -> None:
    a = ws.create_note("a", "otter otter")
    ws.create_note("b", "otter")
    assert titles(ws, "otter") == ["a", "b"]
    assert titles(ws, "otter") == ["a", "b"]  # from the kept ranking
    c = ws.create_note("c", "otter otter otter")
    assert titles(ws, "otter") == ["c", "a", "b"]
    ws.update_note(a.id, body="no longer")
    assert titles(ws, "otter") == ["c", "b"]
    ws.delete_note(c.id)
    assert titles(ws, "otter") == ["b"]


def test_a_write_transaction_sees_its_own_changes_and_leaves_no_ranking_behind(ws: Workspace) -> None:
    ws.create_note("kept", "heron")
    assert titles(ws, "heron") == ["kept"]
    with pytest.raises(RuntimeError), ws.write() as conn:
        ws.create_note("abandoned", "heron heron", conn=conn)
        assert [h.title for h in search_notes(ws, "heron", conn=conn)] == ["abandoned", "kept"]
        raise RuntimeError("roll back")
    assert titles(ws, "heron") == ["kept"]
    ws.create_note("later", "heron heron heron")
    assert titles(ws, "heron") == ["later", "kept"]


def test_an_edit_that_keeps_the_title_still_moves_the_ranking(ws: Workspace) -> None:
    a = ws.create_note("a", "lynx")
    ws.create_note("b", "lynx lynx")
    assert titles(ws, "lynx") == ["b", "a"]
    ws.update_note(a.id, body="lynx lynx lynx")
    assert titles(ws, "lynx") == ["a", "b"]


def test_pages_from_kept_rankings_equal_pages_ranked_afresh(ws: Workspace) -> None:
    rng = random.Random(11)
    words = ["kiwi", "emu", "kea", "tui", "moa"]
    for i in range(120):
        ws.create_note(f"n{i}", " ".join(rng.choice(words) for _ in range(rng.randint(1, 30))))
    queries = ["kiwi", "kiwi emu", "kea -moa", '"tui kea"', "k*", "kiwi tag:none", "emu any:1 moa"]

    def every_page() -> list[list[tuple[str, float, str]]]:
        out = []
        for q in queries:
            for limit, offset in [(5, 0), (5, 5), (20, 0), (20, 20), (50, 40), (1, 0)]:
                out.append([(h.id, h.score, h.snippet) for h in search_notes(ws, q, limit=limit, offset=offset)])
        return out

    def forget() -> None:
        search._rankings.clear()
        search._places.clear()
        search._outlines.clear()

    forget()
    afresh = every_page()
    kept = every_page()  # the same pages, now from kept rankings and placements
    assert kept == afresh
    forget()
    assert every_page() == afresh


def test_rankings_are_kept_only_for_read_transactions(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.create_note("a", "ibis")
    search._rankings.clear()
    search_notes(ws, "ibis")
    assert search._rankings._lists  # a read: kept
    search._rankings.clear()
    with ws.write() as conn:
        search_notes(ws, "ibis", conn=conn)
    assert not search._rankings._lists


def test_accents_fold_like_the_index_in_long_notes(ws: Workspace) -> None:
    body = ("word " * 2000) + "\n" + unicodedata.normalize("NFC", "Ça CRÈME brûlée") + "\n"
    ws.create_note("dessert", body)
    hit = only(search_notes(ws, "creme"))
    assert "CRÈME" in hit.snippet


def test_kept_rankings_serve_only_what_they_hold_and_stay_within_their_budget() -> None:
    kept = search._Rankings()
    kept.put("s1", "a", 3, [(1, -3.0), (2, -2.0), (3, -1.0)])  # read to 3: there may be more
    kept.put("s1", "b", 10, [(4, -1.0)])  # read to 10, found 1: all there is
    assert kept.get("s1", "a", 2) == [(1, -3.0), (2, -2.0)]
    assert kept.get("s1", "a", 4) is None
    assert kept.get("s1", "b", 500) == [(4, -1.0)]
    assert kept.get("s2", "a", 2) is None  # another state of the index
    kept.put("s2", "c", 1, [(5, -1.0)])
    assert kept.get("s1", "b", 10) is None  # the new state replaced them all
    small = search._Rankings()
    small.BUDGET = 5
    for i in range(4):
        small.put("s", f"q{i}", 2, [(i, -1.0), (i + 10, -0.5)])
    assert small.get("s", "q0", 2) is None and small.get("s", "q1", 2) is None  # least recently used went
    assert small.get("s", "q3", 2) == [(3, -1.0), (13, -0.5)]
    assert small._size <= 5
