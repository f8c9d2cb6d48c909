"""Keyword search, on SQLite and on PostgreSQL: operators, filters, CJK, snippets and
sections, ranking, the trash, and an index that moves with every write."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noteloom import outline
from noteloom.errors import InvalidInput, QueryError
from noteloom.search import SNIPPET_CHARS, SearchHit, count_matches, search_notes
from noteloom.workspace import Workspace

DAY = 86_400_000


def local_ms(year: int, month: int, day: int, hour: int = 12) -> int:
    """A local time, as the query language reads dates."""
    return int(datetime(year, month, day, hour).timestamp() * 1000)


def found(ws: Workspace, query: str, **kw: object) -> set[str]:
    return {h.title for h in search_notes(ws, query, limit=100, **kw)}  # type: ignore[arg-type]


def ordered(ws: Workspace, query: str, **kw: object) -> list[str]:
    return [h.title for h in search_notes(ws, query, limit=100, **kw)]  # type: ignore[arg-type]


def only(hits: list[SearchHit]) -> SearchHit:
    assert len(hits) == 1, [h.title for h in hits]
    return hits[0]


# -- words, phrases, prefixes, negation -----------------------------------------------------


def test_every_word_must_match(any_ws: Workspace) -> None:
    any_ws.create_note("both", "apple and banana")
    any_ws.create_note("one", "apple only")
    assert found(any_ws, "apple banana") == {"both"}
    assert found(any_ws, "APPLE") == {"both", "one"}


def test_a_phrase_needs_its_words_next_to_each_other_in_order(any_ws: Workspace) -> None:
    any_ws.create_note("adjacent", "we flew to New York in May")
    any_ws.create_note("apart", "a new plan for York")
    any_ws.create_note("reversed", "york new")
    assert found(any_ws, '"new york"') == {"adjacent"}


def test_a_phrase_does_not_run_from_the_title_into_the_body(any_ws: Workspace) -> None:
    any_ws.create_note("Alpha", "beta gamma")
    assert found(any_ws, '"alpha beta"') == set()
    assert found(any_ws, '"beta gamma"') == {"Alpha"}


def test_a_star_matches_word_starts_also_at_the_end_of_a_phrase(any_ws: Workspace) -> None:
    any_ws.create_note("garden", "the garden shed")
    any_ws.create_note("gardening", "gardening gloves")
    any_ws.create_note("guard", "a guard dog")
    assert found(any_ws, "gard*") == {"garden", "gardening"}
    assert found(any_ws, '"the gard*"') == {"garden"}
    assert found(any_ws, "gardening*") == {"gardening"}


def test_negated_words_and_phrases_exclude(any_ws: Workspace) -> None:
    any_ws.create_note("plain", "apple pie")
    any_ws.create_note("with pear", "apple and pear pie")
    any_ws.create_note("fruit salad", "apple in a fruit salad")
    assert found(any_ws, "apple -pear") == {"plain", "fruit salad"}
    assert found(any_ws, 'apple -"fruit salad"') == {"plain", "with pear"}
    assert found(any_ws, "apple -pear -salad") == {"plain"}


def test_a_query_of_only_negations_lists_every_other_note(any_ws: Workspace) -> None:
    any_ws.create_note("a", "apple")
    any_ws.create_note("b", "banana")
    any_ws.create_note("c", "cherry")
    assert found(any_ws, "-apple -cherry") == {"b"}


def test_title_and_body_filters_look_in_one_field(any_ws: Workspace) -> None:
    any_ws.create_note("Kyoto temples", "notes from the trip")
    any_ws.create_note("Trip notes", "we saw Kyoto temples")
    assert found(any_ws, "title:kyoto") == {"Kyoto temples"}
    assert found(any_ws, "body:kyoto") == {"Trip notes"}
    assert found(any_ws, 'title:"kyoto temples"') == {"Kyoto temples"}
    assert found(any_ws, "-title:kyoto trip") == {"Trip notes"}
    assert found(any_ws, "title:tem*") == {"Kyoto temples"}


def test_words_that_look_like_full_text_syntax_are_searched_as_words(any_ws: Workspace) -> None:
    any_ws.create_note("syntax", "stand NEAR the door AND wait OR leave; (x) ^caret a*b col:val")
    any_ws.create_note("other", "nothing to see")
    for query in ["NEAR", "AND", "OR", "NOT near", "(x)", "^caret", "a*b", '"col:val"', "near(the", "{door}", "'wait'"]:
        expected = set() if query == "NOT near" else {"syntax"}
        assert found(any_ws, query) == expected, query


def test_search_ignores_case_and_matches_exact_accents(any_ws: Workspace) -> None:
    any_ws.create_note("dessert", "Crème brûlée at the Café")
    assert found(any_ws, "CRÈME") == {"dessert"}
    assert found(any_ws, "café") == {"dessert"}
    assert found(any_ws, '"crème brûlée"') == {"dessert"}


def test_accents_are_optional_on_sqlite(ws: Workspace) -> None:
    ws.create_note("dessert", "Crème brûlée at the Café")
    assert found(ws, "creme brulee cafe") == {"dessert"}
    hit = only(search_notes(ws, "brulee"))
    assert "brûlée" in hit.snippet


# -- filters ----------------------------------------------------------------------------------


def test_tag_filters_exact_wildcard_any_and_none(any_ws: Workspace) -> None:
    any_ws.create_note("soup", "", tags=["Recipes", "winter"])
    any_ws.create_note("plan", "", tags=["project-x"])
    any_ws.create_note("bare", "")
    assert found(any_ws, "tag:recipes") == {"soup"}
    assert found(any_ws, "tag:RECIPES tag:winter") == {"soup"}
    assert found(any_ws, "tag:proj*") == {"plan"}
    assert found(any_ws, "tag:*") == {"soup", "plan"}
    assert found(any_ws, "-tag:*") == {"bare"}
    assert found(any_ws, "-tag:recipes") == {"plan", "bare"}
    assert found(any_ws, "tag:nothing") == set()
    assert found(any_ws, "-tag:nothing") == {"soup", "plan", "bare"}


def test_a_tag_name_with_like_wildcards_is_matched_literally(any_ws: Workspace) -> None:
    any_ws.create_note("percent", "", tags=["100%"])
    any_ws.create_note("under", "", tags=["a_b"])
    any_ws.create_note("other", "", tags=["axb", "1000"])
    assert found(any_ws, "tag:100%") == {"percent"}
    assert found(any_ws, "tag:a_b") == {"under"}
    assert found(any_ws, "tag:a_*") == {"under"}


def test_a_notebook_filter_includes_sub_notebooks_and_several_are_ored(any_ws: Workspace) -> None:
    work = any_ws.create_notebook("Work")
    meetings = any_ws.create_notebook("Meetings", work.id)
    home = any_ws.create_notebook("My Home")
    other = any_ws.create_notebook("Other")
    any_ws.create_note("w", "note", work.id)
    any_ws.create_note("m", "note", meetings.id)
    any_ws.create_note("h", "note", home.id)
    any_ws.create_note("o", "note", other.id)
    assert found(any_ws, "notebook:work") == {"w", "m"}
    assert found(any_ws, "notebook:Meetings") == {"m"}
    assert found(any_ws, 'notebook:"my home" notebook:work') == {"w", "m", "h"}
    assert found(any_ws, "note -notebook:work") == {"h", "o"}
    assert found(any_ws, "notebook:work/meetings") == {"m"}
    assert found(any_ws, "notebook:M*") == {"m", "h"}
    assert found(any_ws, "notebook:nowhere") == set()


def test_date_filters_mean_on_or_after_and_negated_before(any_ws: Workspace) -> None:
    any_ws.create_note("old", "x", created_time=local_ms(2021, 3, 5), updated_time=local_ms(2024, 2, 1))
    any_ws.create_note("new", "x", created_time=local_ms(2024, 1, 31), updated_time=local_ms(2024, 1, 31))
    any_ws.create_note("due", "x", is_todo=True, todo_due=local_ms(2024, 6, 1))
    assert found(any_ws, "x created:20240131") == {"new", "due"}
    assert found(any_ws, "-created:2022") == {"old"}
    assert found(any_ws, "created:202103 -created:202104") == {"old"}
    assert found(any_ws, "updated:20240201 -updated:20240202") == {"old"}
    assert found(any_ws, "due:20240601") == {"due"}
    assert found(any_ws, "-due:20240601") == set()
    assert found(any_ws, "-due:20240602") == {"due"}


def test_relative_dates_count_back_from_now(any_ws: Workspace) -> None:
    now = local_ms(2025, 6, 18)
    any_ws.create_note("recent", "x", created_time=now - 2 * DAY)
    any_ws.create_note("older", "x", created_time=now - 20 * DAY)
    any_ws.create_note("ancient", "x", created_time=now - 800 * DAY)
    assert found(any_ws, "created:day-5", now_ms=now) == {"recent"}
    assert found(any_ws, "created:week-4", now_ms=now) == {"recent", "older"}
    assert found(any_ws, "-created:year-1", now_ms=now) == {"ancient"}
    assert found(any_ws, "created:month-0", now_ms=now) == {"recent"}


def test_type_and_completion_filters(any_ws: Workspace) -> None:
    any_ws.create_note("note", "x")
    any_ws.create_note("open", "x", is_todo=True)
    any_ws.create_note("done", "x", is_todo=True, todo_completed=local_ms(2024, 1, 1))
    assert found(any_ws, "type:todo") == {"open", "done"}
    assert found(any_ws, "type:note") == {"note"}
    assert found(any_ws, "-type:note") == {"open", "done"}
    assert found(any_ws, "iscompleted:1") == {"done"}
    assert found(any_ws, "iscompleted:0") == {"open"}
    assert found(any_ws, "-iscompleted:1") == {"note", "open"}


def test_id_and_source_url_filters(any_ws: Workspace) -> None:
    a = any_ws.create_note("a", "x", source_url="https://Example.org/blog/1")
    any_ws.create_note("b", "x", source_url="https://news.example.net/2")
    any_ws.create_note("c", "x")
    assert found(any_ws, f"id:{a.id}") == {"a"}
    assert found(any_ws, f"x -id:{a.id}") == {"b", "c"}
    assert found(any_ws, "sourceurl:https://example.org/blog/1") == {"a"}
    assert found(any_ws, "sourceurl:*example*") == {"a", "b"}
    assert found(any_ws, "-sourceurl:*example.org*") == {"b", "c"}


def test_any_ors_words_and_filters_while_negations_and_notebooks_still_restrict(any_ws: Workspace) -> None:
    main = any_ws.create_notebook("Main").id
    book = any_ws.create_notebook("Book")
    any_ws.create_note("apple", "apple", main)
    any_ws.create_note("banana", "banana", main)
    any_ws.create_note("tagged", "nothing", main, tags=["fruit"])
    any_ws.create_note("apple pear", "apple pear", main)
    any_ws.create_note("neither", "cherry", main)
    any_ws.create_note("apple in book", "apple", book.id)
    assert found(any_ws, "any:1 apple banana") == {"apple", "banana", "apple pear", "apple in book"}
    assert found(any_ws, "any:1 apple banana -pear") == {"apple", "banana", "apple in book"}
    assert found(any_ws, "any:1 banana tag:fruit") == {"banana", "tagged"}
    assert found(any_ws, "any:1 apple notebook:book") == {"apple in book"}
    assert count_matches(any_ws, "any:1 banana tag:fruit") == 2
    # Text matches first, best first; notes that only meet a filter after them.
    assert ordered(any_ws, "any:1 banana tag:fruit") == ["banana", "tagged"]
    assert [h.title for h in search_notes(any_ws, "any:1 banana tag:fruit", limit=1, offset=1)] == ["tagged"]


# -- CJK --------------------------------------------------------------------------------------


def test_cjk_words_inside_longer_runs_are_found(any_ws: Workspace) -> None:
    any_ws.create_note("zh", "今天我们去市场买了新鲜的蔬菜和水果。")
    any_ws.create_note("ja", "週末に京都へ旅行する予定です。")
    any_ws.create_note("ko", "주말에 부산으로 여행을 갈 계획입니다.")
    any_ws.create_note("mixed", "Python中文分词 works")
    assert found(any_ws, "市场") == {"zh"}
    assert found(any_ws, "新鲜的蔬菜") == {"zh"}
    assert found(any_ws, "京都") == {"ja"}
    assert found(any_ws, "旅行") == {"ja"}
    assert found(any_ws, "여행") == {"ko"}
    assert found(any_ws, "中文") == {"mixed"}
    assert found(any_ws, "python中文") == {"mixed"}
    assert found(any_ws, "菜") == {"zh"}  # a single character, last of its run
    assert found(any_ws, "市") == {"zh"}
    assert found(any_ws, "蔬果") == set()  # not adjacent in the text
    hit = only(search_notes(any_ws, "蔬菜"))
    assert "蔬菜" in hit.snippet and hit.section == "0"


# -- snippets and sections --------------------------------------------------------------------

SECTIONED = """Intro line without the word.

# Kitchen

Some   words
here.

Pantry
------

The saffron jar is on the top shelf.

## Deep

More text with saffron again.
"""


def test_the_section_of_a_hit_holds_its_first_body_match(any_ws: Workspace) -> None:
    any_ws.create_note("spices", SECTIONED)
    hit = only(search_notes(any_ws, "saffron"))
    assert (hit.section, hit.section_heading) == ("1.1", "Pantry")
    sec = outline.resolve_section(SECTIONED, hit.section)
    assert sec.start <= SECTIONED.index("saffron") < sec.end
    assert "The saffron jar is on the top shelf." in hit.snippet


def test_a_match_on_a_setext_heading_line_belongs_to_that_heading(any_ws: Workspace) -> None:
    body = "# Top\n\nText.\n\nQuince notes\n------------\n\nBody of it.\n"
    any_ws.create_note("q", body)
    hit = only(search_notes(any_ws, "quince"))
    assert (hit.section, hit.section_heading) == ("1.1", "Quince notes")


def test_a_match_before_any_heading_is_section_zero(any_ws: Workspace) -> None:
    body = "Loose words: marmalade.\n\n# Later\n\nmarmalade again\n"
    any_ws.create_note("m", body)
    hit = only(search_notes(any_ws, "marmalade"))
    assert (hit.section, hit.section_heading) == ("0", "")


def test_the_snippet_is_a_whitespace_normalised_window_with_ellipses_where_cut(any_ws: Workspace) -> None:
    filler = " ".join(f"word{i}" for i in range(200))
    body = f"{filler}\n\n   the   rare\tkumquat\n\nsits here. {filler}"
    any_ws.create_note("long", body)
    hit = only(search_notes(any_ws, "kumquat"))
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert "the rare kumquat sits here." in hit.snippet
    assert "  " not in hit.snippet and "\n" not in hit.snippet
    assert len(hit.snippet) <= SNIPPET_CHARS + 2


def test_a_short_body_is_shown_whole_without_ellipses(any_ws: Workspace) -> None:
    any_ws.create_note("short", "A kumquat.\n")
    assert only(search_notes(any_ws, "kumquat")).snippet == "A kumquat."


def test_the_anchor_is_the_first_match_of_any_body_word_and_respects_word_bounds(any_ws: Workspace) -> None:
    body = "# One\n\nscatter and catalog\n\n# Two\n\nthe cat sat\n\n# Three\n\ndog\n"
    any_ws.create_note("pets", body)
    hit = only(search_notes(any_ws, "cat dog"))
    assert (hit.section, hit.section_heading) == ("2", "Two")
    hit = only(search_notes(any_ws, "cat*"))
    assert hit.section == "1" and "catalog" in hit.snippet


def test_the_anchor_stays_aligned_when_lower_casing_changes_lengths(any_ws: Workspace) -> None:
    # "İ" lower-cases to two characters: offsets found in a lower-cased copy would drift.
    body = "# İSTANBUL\n\n" + "İ" * 80 + " words\n\n# Next\n\nthe kumquat here\n"
    any_ws.create_note("dotted", body)
    hit = only(search_notes(any_ws, "kumquat"))
    assert (hit.section, hit.section_heading) == ("2", "Next")
    assert hit.snippet.endswith("words # Next the kumquat here")


def test_a_phrase_anchors_where_the_whole_phrase_occurs(any_ws: Workspace) -> None:
    body = "# A\n\nnew things\n\n# B\n\nnew\n  york\n"
    any_ws.create_note("ny", body)
    hit = only(search_notes(any_ws, '"new york"'))
    assert hit.section == "2" and "new york" in hit.snippet


def test_a_title_only_match_has_no_section_and_the_start_of_the_body_as_snippet(any_ws: Workspace) -> None:
    any_ws.create_note("Quokka facts", "Nothing\n\nhere   yet.")
    hit = only(search_notes(any_ws, "quokka"))
    assert (hit.section, hit.section_heading) == (None, None)
    assert hit.snippet == "Nothing here yet."


def test_queries_without_a_body_word_have_no_snippet_or_section(any_ws: Workspace) -> None:
    any_ws.create_note("Quokka facts", "quokka body", tags=["animals"])
    for query in ["tag:animals", "title:quokka", "type:note", "-body:zebra"]:
        hit = only(search_notes(any_ws, query))
        assert (hit.snippet, hit.section, hit.section_heading) == ("", None, None), query


def test_a_late_match_in_a_long_note_maps_to_its_section(any_ws: Workspace) -> None:
    parts = []
    for i in range(40):
        parts.append(f"## Part {i}\n\n" + ("lorem ipsum dolor sit amet " * 180) + "\n")
    parts.append("### Coda\n\nthe wombat waits at the very end\n")
    body = "# Book\n\n" + "\n".join(parts)
    assert len(body) > 190_000
    any_ws.create_note("long", body)
    hit = only(search_notes(any_ws, "wombat"))
    sec = outline.resolve_section(body, hit.section or "")
    assert sec.heading == "Coda" == hit.section_heading
    assert sec.start <= body.index("wombat") < sec.end


QUOKKA_LOG = (
    "# Quokkas\n\nThe quokka lives on Rottnest Island.\n\n"
    "## Counts\n\nWe counted 120 in spring.\n\n"
    "## Sightings\n\n### North shore\n\nA wallaby, then quokka number 577 by the lighthouse.\n\n"
    "### South shore\n\nNothing to report.\n"
)


def test_several_words_place_the_hit_where_they_occur_together(any_ws: Workspace) -> None:
    any_ws.create_note("Island log", QUOKKA_LOG)
    hit = only(search_notes(any_ws, "quokka 577"))
    assert hit.section_heading == "North shore", "not the first quokka's section"
    sec = outline.resolve_section(QUOKKA_LOG, hit.section or "")
    assert sec.start <= QUOKKA_LOG.index("quokka number") < sec.end
    assert "quokka number 577" in hit.snippet and "Rottnest" not in hit.snippet
    # Order does not matter, nor does the first word being rare.
    assert only(search_notes(any_ws, "577 quokka")).section == hit.section
    # Words in sibling sections meet in their parent; a lone word keeps its first place.
    assert only(search_notes(any_ws, "wallaby report")).section_heading == "Sightings"
    assert only(search_notes(any_ws, "quokka")).section_heading == "Quokkas"


def test_the_section_with_most_of_the_words_wins_when_none_has_all(any_ws: Workspace) -> None:
    body = "# A\n\nspring tide\n\n# B\n\nspring tide lighthouse\n\n# C\n\nquay\n"
    any_ws.create_note("Harbour", body)
    assert only(search_notes(any_ws, "quay spring tide lighthouse")).section_heading == "B"
    assert only(search_notes(any_ws, "quay spring")).section_heading == "A", "a tie goes to the earliest"


# -- ranking ------------------------------------------------------------------------------------


def test_a_title_match_ranks_above_a_body_match(any_ws: Workspace) -> None:
    any_ws.create_note("Trip", "kyoto temples travel notes about the city")
    any_ws.create_note("Kyoto", "temples travel notes about the city and more")
    hits = search_notes(any_ws, "kyoto")
    assert [h.title for h in hits] == ["Kyoto", "Trip"]
    assert hits[0].score > hits[1].score > 0


def test_a_denser_match_ranks_higher(any_ws: Workspace) -> None:
    any_ws.create_note("once", "lemon " + "filler words here " * 30)
    any_ws.create_note("often", "lemon lemon lemon " + "filler words here " * 10)
    assert ordered(any_ws, "lemon") == ["often", "once"]


def test_ties_go_to_the_most_recently_updated_note_also_across_pages(any_ws: Workspace) -> None:
    base = local_ms(2024, 1, 1)
    for i in [3, 0, 4, 1, 2, 5, 6]:
        any_ws.create_note(f"n{i}", "identical text", updated_time=base + i * DAY, created_time=base)
    expected = [f"n{i}" for i in [6, 5, 4, 3, 2, 1, 0]]
    assert ordered(any_ws, "identical") == expected
    pages = [h.title for off in range(0, 7, 2) for h in search_notes(any_ws, "identical", limit=2, offset=off)]
    assert pages == expected


def test_filter_only_queries_list_the_newest_first(any_ws: Workspace) -> None:
    base = local_ms(2024, 1, 1)
    for i in [2, 0, 1]:
        any_ws.create_note(f"n{i}", "x", tags=["t"], updated_time=base + i * DAY, created_time=base)
    assert ordered(any_ws, "tag:t") == ["n2", "n1", "n0"]
    assert [h.title for h in search_notes(any_ws, "tag:t", limit=1, offset=1)] == ["n1"]
    assert all(h.score == 0.0 for h in search_notes(any_ws, "tag:t"))


def test_filter_only_queries_give_the_same_pages_however_sqlite_drives_them(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import noteloom.search as search

    base = local_ms(2024, 1, 1)
    books = [ws.create_notebook(f"Book {i}") for i in range(3)]
    child = ws.create_notebook("Child", books[0].id)
    for i in range(30):
        book = [*books, child][i % 4]
        tags = [t for t, k in (("red", 2), ("blue", 3), ("green", 5)) if i % k == 0]
        ws.create_note(f"n{i}", "x", book.id, tags=tags, updated_time=base + (i * 7 % 30) * DAY, created_time=base)
    queries = ["tag:red", "tag:red tag:blue", "tag:red -tag:green", "notebook:book*", 'notebook:"book 0"',
               'notebook:"book 0" tag:blue', "-tag:*", "tag:nothing", "type:note tag:green"]
    results = {}
    for drive_limit in (0, 10**9):  # never start from a filter / always when one exists
        monkeypatch.setattr(search, "_DRIVE_LIMIT", drive_limit)
        results[drive_limit] = [
            [h.id for off in (0, 5, 10) for h in search_notes(ws, q, limit=5, offset=off)] for q in queries
        ]
    assert results[0] == results[10**9]
    assert all(results[0][:3])


def test_filtered_text_queries_give_the_same_pages_from_a_window_of_best_matches_as_from_all(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered text query first checks only the best matches (``_WINDOW``); pages must be
    the same as when every match is joined to its note, ties and paging included."""
    import noteloom.search as search

    base = local_ms(2024, 1, 1)
    book = ws.create_notebook("Book")
    for i in range(60):
        words = " ".join(["alpha"] * (1 + i % 4) + ["beta"] * (i % 3) + ["filler"] * (i % 7))
        ws.create_note(
            f"n{i}", words, book.id if i % 5 == 0 else None, tags=["red"] if i % 3 == 0 else [],
            is_todo=i % 2 == 0, updated_time=base + (i % 9) * DAY, created_time=base,
        )
    queries = ["alpha type:todo", "alpha tag:red", "alpha -beta type:note", "alph* type:todo", "beta notebook:book",
               "alpha beta -tag:red", "alpha iscompleted:0"]

    def pages() -> list[list[str]]:
        return [[h.id for off in (0, 3, 7, 20) for h in search_notes(ws, q, limit=4, offset=off)] for q in queries]

    monkeypatch.setattr(search._Plan, "_sqlite_window_page", lambda *a, **k: None)
    every = pages()
    monkeypatch.undo()
    settled = []
    real = search._Plan._sqlite_window_page

    def counting(self: search._Plan, *args: object) -> object:
        out = real(self, *args)  # type: ignore[arg-type]
        settled.append(out is not None)
        return out

    monkeypatch.setattr(search._Plan, "_sqlite_window_page", counting)
    monkeypatch.setattr(search, "_WINDOW_PER_ROW", 0)
    for window in (1, 6, 12, 25, 10**6):  # settled by the window, falling back, or all in it
        monkeypatch.setattr(search, "_WINDOW", window)
        assert pages() == every, window
    assert any(settled) and not all(settled)  # both ways were taken
    assert all(every)


# -- the trash and keeping the index in step -------------------------------------------------------


def test_trashed_notes_are_never_returned_and_come_back_on_restore(any_ws: Workspace) -> None:
    main = any_ws.create_notebook("Main")
    book = any_ws.create_notebook("Book")
    lone = any_ws.create_note("lone", "walrus", main.id)
    any_ws.create_note("in book", "walrus", book.id)
    any_ws.delete_note(lone.id)
    assert found(any_ws, "walrus") == {"in book"}
    assert found(any_ws, "-zebra") == {"in book"}
    any_ws.delete_notebook(book.id)
    assert found(any_ws, "walrus") == set()
    assert count_matches(any_ws, "walrus") == 0
    any_ws.restore(lone.id)
    any_ws.restore(book.id)
    assert found(any_ws, "walrus") == {"lone", "in book"}


def test_the_index_follows_edits_and_forgets_purged_notes(any_ws: Workspace) -> None:
    note = any_ws.create_note("Draft", "old words")
    any_ws.update_note(note.id, title="Final", body="new words")
    assert found(any_ws, "old") == set()
    assert found(any_ws, "draft") == set()
    assert found(any_ws, "new final") == {"Final"}
    other = any_ws.create_notebook("Elsewhere")
    any_ws.update_note(note.id, notebook_id=other.id)  # no text change
    assert found(any_ws, "new") == {"Final"}
    any_ws.delete_note(note.id)
    any_ws.purge(note.id)
    assert found(any_ws, "new") == set()
    again = any_ws.create_note("Again", "new words")
    assert found(any_ws, "new") == {"Again"} and again.id != note.id


def test_the_index_changes_inside_the_write_transaction_and_rolls_back_with_it(any_ws: Workspace) -> None:
    note = any_ws.create_note("n", "before")
    with pytest.raises(RuntimeError), any_ws.write() as conn:
        any_ws.update_note(note.id, body="after", conn=conn)
        assert found(any_ws, "after", conn=conn) == {"n"}
        assert found(any_ws, "before", conn=conn) == set()
        raise RuntimeError("abandon the edit")
    assert found(any_ws, "before") == {"n"}
    assert found(any_ws, "after") == set()


def test_notebook_ids_restrict_the_search_to_exactly_those_notebooks(any_ws: Workspace) -> None:
    a = any_ws.create_notebook("A")
    child = any_ws.create_notebook("Child", a.id)
    b = any_ws.create_notebook("B")
    any_ws.create_note("in a", "otter", a.id)
    any_ws.create_note("in child", "otter", child.id)
    any_ws.create_note("in b", "otter", b.id)
    assert found(any_ws, "otter", notebook_ids=[a.id]) == {"in a"}
    assert found(any_ws, "otter", notebook_ids={a.id, child.id}) == {"in a", "in child"}
    assert found(any_ws, "otter", notebook_ids=[]) == set()
    assert found(any_ws, "notebook:b", notebook_ids=[a.id]) == set()
    assert found(any_ws, "-otter", notebook_ids=[b.id]) == set()
    assert count_matches(any_ws, "otter", notebook_ids=[a.id, b.id]) == 2


def test_count_matches_counts_what_search_pages_through(any_ws: Workspace) -> None:
    for i in range(25):
        any_ws.create_note(f"n{i}", "heron" + (" egret" if i % 2 else ""), tags=["bird"] if i % 3 else [])
    for query in ["heron", "heron -egret", "tag:bird", "heron tag:bird -egret", "any:1 egret tag:bird"]:
        seen = [h.id for off in (0, 10, 20) for h in search_notes(any_ws, query, limit=10, offset=off)]
        assert len(seen) == len(set(seen)) == count_matches(any_ws, query), query


def test_malformed_queries_raise_query_error(any_ws: Workspace) -> None:
    any_ws.create_note("n", "x")
    for query in ['"open', "foo:bar", "created:2023-13-45", "due:week-x", "tag:", "", "!!!"]:
        with pytest.raises(QueryError):
            search_notes(any_ws, query)
        with pytest.raises(QueryError):
            count_matches(any_ws, query)


def test_limit_and_offset_are_checked(ws: Workspace) -> None:
    ws.create_note("n", "x")
    assert search_notes(ws, "x", limit=0) == []
    for bad in [{"limit": -1}, {"limit": 10_000}, {"offset": -1}, {"limit": True}]:
        with pytest.raises(InvalidInput):
            search_notes(ws, "x", **bad)  # type: ignore[arg-type]


def _migration() -> ModuleType:
    path = Path(__file__).parents[1] / "src/noteloom/migrations/versions/0002_keyword_index.py"
    spec = importlib.util.spec_from_file_location("keyword_index_migration", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_migration_indexes_the_notes_already_there(any_ws: Workspace) -> None:
    any_ws.create_note("kept", "pelican")
    gone = any_ws.create_note("trashed", "pelican")
    any_ws.delete_note(gone.id)
    m = _migration()
    with any_ws.write() as conn:
        sqlite = conn.dialect.name == "sqlite"
        for statement in m.SQLITE_DOWN if sqlite else m.POSTGRES_DOWN:
            conn.exec_driver_sql(statement)
        for statement in m.SQLITE_UP if sqlite else m.POSTGRES_UP:
            conn.exec_driver_sql(statement)
    assert found(any_ws, "pelican") == {"kept"}
    any_ws.restore(gone.id)
    assert found(any_ws, "pelican") == {"kept", "trashed"}


# -- fuzz -------------------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    ['"', "-", ":", "*", "(", ")", "^", "+", "{", "}", "'", "\\", " ", "  ", "NEAR", "AND", "OR",
     "NOT", "title:", "body:", "tag:", "notebook:", "created:", "updated:", "due:", "any:1",
     "type:todo", "iscompleted:1", "sourceurl:", "day-3", "2024", "apple", "app", "中文", "中",
     "é", "\x00", "\n", "%", "_", "&", "|", "!", "<->", ":*", "'A", "\U0001f600"]
)
_QUERIES = st.one_of(st.text(max_size=40), st.lists(st.one_of(_PIECES, st.text(max_size=4)), max_size=16).map("".join))


def _fuzz_workspace(ws: Workspace) -> None:
    book = ws.create_notebook("Book")
    ws.create_note("apple", "apple pie and 中文字", book.id, tags=["fruit", "100%"])
    ws.create_note("todo", "buy apples", is_todo=True, todo_due=local_ms(2024, 5, 1), source_url="https://e.org")
    ws.create_note("near", "NEAR AND OR NOT (x) ^y")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_QUERIES)
def test_any_query_returns_hits_or_raises_query_error_on_sqlite(ws: Workspace, text: str) -> None:
    if not ws.list_notebooks():
        _fuzz_workspace(ws)
    try:
        hits = search_notes(ws, text, limit=5)
    except QueryError:
        return
    assert all(isinstance(h, SearchHit) for h in hits)
    assert count_matches(ws, text) >= len(hits)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_QUERIES)
def test_any_query_returns_hits_or_raises_query_error_on_either_engine(any_ws: Workspace, text: str) -> None:
    if not any_ws.list_notebooks():
        _fuzz_workspace(any_ws)
    try:
        hits = search_notes(any_ws, text, limit=5)
    except QueryError:
        return
    assert all(isinstance(h, SearchHit) for h in hits)


def test_a_note_with_a_huge_vocabulary_is_saved_and_found_by_its_beginning(any_ws: Workspace) -> None:
    words = " ".join(f"w{i:07d}x" for i in range(130_000))  # ~1.3 MB, every word distinct
    any_ws.create_note("huge", "aardvark " + words)
    assert found(any_ws, "aardvark") == {"huge"}
    assert found(any_ws, "w0000001x") == {"huge"}


@given(text=st.text(alphabet=st.sampled_from(["a", "b", " ", "\t", "\n", "\u00a0", "\u2003", "\r", "é", "\x0b", "\x1c"]), max_size=40))
def test_snippet_whitespace_collapsing_is_exactly_one_space_per_run(text: str) -> None:
    import re

    from noteloom.search import _collapse_spaces

    assert _collapse_spaces(text) == re.sub(r"\s+", " ", text)


def test_filter_only_queries_read_live_notes_newest_first_without_sorting_them_all(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter that is not selective enough to start from: SQLite (no statistics) must
    read the index of live notes newest first. With a full index on ``deleted_time`` it
    answered "not in the trash" through that and sorted every live note (70-130 ms at
    100,000 notes)."""
    import sqlalchemy as sa

    import noteloom.search as search
    from noteloom.query import parse_query

    monkeypatch.setattr(search, "_DRIVE_LIMIT", 0)
    ws.create_note("n", "x", tags=["important"])
    trashed = ws.create_note("trashed", "x", tags=["important"])
    ws.delete_note(trashed.id)
    for query in ("tag:important", "created:day-30", "-created:2021", "type:todo"):
        with ws.read() as c:
            plan = search._Plan(c, parse_query(query), None)
            stmt = (
                sa.select(*search._COLUMNS).where(*plan._where())
                .order_by(search._n.c.updated_time.desc(), search._n.c.id.desc()).limit(20)
            )
            sql = str(stmt.compile(c, compile_kwargs={"literal_binds": True}))
            steps = " | ".join(r[3] for r in c.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert "ix_notes_live_recent" in steps and "TEMP B-TREE FOR ORDER BY" not in steps, (query, steps)
    assert [h.title for h in search_notes(ws, "tag:important")] == ["n"]
