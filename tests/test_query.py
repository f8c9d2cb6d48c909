"""The query language parser: what each query means, and what it says when a query is wrong."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom.errors import QueryError
from noteloom.query import (
    MAX_ITEMS,
    CompletedFilter,
    DateFilter,
    IdFilter,
    NotebookFilter,
    Query,
    SourceUrlFilter,
    TagFilter,
    TextTerm,
    Token,
    TypeFilter,
    index_tokens,
    parse_query,
)

TZ = timezone(timedelta(hours=2))
# Wednesday 2025-06-18 15:30 at UTC+2.
NOW = int(datetime(2025, 6, 18, 15, 30, tzinfo=TZ).timestamp() * 1000)


def ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=TZ).timestamp() * 1000)


def parse(text: str) -> Query:
    return parse_query(text, now_ms=NOW, tz=TZ)


def texts(q: Query) -> list[str]:
    return [" ".join(t.text for t in term.tokens) for term in q.terms]


def test_plain_words_are_separate_terms_that_must_all_match() -> None:
    q = parse("Apple  banana")
    assert texts(q) == ["Apple", "banana"]
    assert not q.match_any
    assert all(t.field == "all" and not t.negated and not t.phrase for t in q.terms)


def test_a_quoted_phrase_is_one_term_of_several_tokens() -> None:
    (term,) = parse('"new york city"').terms
    assert term.phrase and term.text == "new york city"
    assert [t.text for t in term.tokens] == ["new", "york", "city"]


def test_a_trailing_star_makes_a_prefix_also_as_the_last_word_of_a_phrase() -> None:
    word, inner, outer = parse('gard* "hello wor*" "big ap"*').terms
    assert word.prefix and word.tokens == (Token("gard", prefix=True),)
    assert inner.tokens == (Token("hello"), Token("wor", prefix=True))
    assert outer.tokens == (Token("big"), Token("ap", prefix=True))


def test_a_dash_negates_words_phrases_and_filters() -> None:
    q = parse('apple -banana -"fruit salad" -tag:old -notebook:Archive')
    assert [t.negated for t in q.terms] == [False, True, True]
    assert q.filters == (TagFilter("old", negated=True), NotebookFilter("archive", negated=True))


def test_a_lone_dash_or_punctuation_is_not_a_word() -> None:
    q = parse("apple - ... !!")
    assert texts(q) == ["apple"]


def test_words_with_inner_punctuation_become_phrases_of_their_parts() -> None:
    (term,) = parse("e-mail").terms
    assert term.phrase and [t.text for t in term.tokens] == ["e", "mail"]


@pytest.mark.parametrize(
    "query",
    ["NEAR(a b)", "a AND b OR c NOT d", "^start", "x + y", "{title body}", "a*b", "'quoted'", "(x)"],
)
def test_full_text_syntax_in_user_words_is_only_ever_tokens(query: str) -> None:
    q = parse(query)
    for term in q.terms:
        for tok in term.tokens:
            assert tok.text.isalnum(), tok


def test_an_inner_star_is_a_separator_not_a_wildcard() -> None:
    (term,) = parse("fo*o").terms
    assert [t.text for t in term.tokens] == ["fo", "o"] and not term.prefix


def test_title_and_body_filters_are_text_terms_on_one_field() -> None:
    title, body, phrase = parse('title:Kyoto body:ramen* title:"old town"').terms
    assert (title.field, title.text) == ("title", "Kyoto")
    assert (body.field, body.prefix) == ("body", True)
    assert phrase.field == "title" and phrase.phrase


def test_filter_names_are_case_insensitive_and_values_lower_cased() -> None:
    q = parse('TAG:Recipes Notebook:"My  Book" SourceURL:*Example.org*')
    assert q.filters == (
        TagFilter("recipes"),
        NotebookFilter("my book"),
        SourceUrlFilter("*example.org*"),
    )


def test_tag_wildcards_are_kept_for_the_search() -> None:
    q = parse("tag:* -tag:* tag:proj*")
    assert q.filters == (TagFilter("*"), TagFilter("*", negated=True), TagFilter("proj*"))


def test_type_completed_and_id_filters() -> None:
    note_id = "0123456789abcdef0123456789ABCDEF"
    q = parse(f"type:TODO -type:note iscompleted:1 iscompleted:0 id:{note_id} -id:{note_id.lower()}")
    assert q.filters == (
        TypeFilter(todo=True),
        TypeFilter(todo=False, negated=True),
        CompletedFilter(True),
        CompletedFilter(False),
        IdFilter(note_id.lower()),
        IdFilter(note_id.lower(), negated=True),
    )


def test_any_switches_to_or() -> None:
    assert parse("a b any:1").match_any
    assert not parse("a b any:0").match_any


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("20240229", (2024, 2, 29)),
        ("202402", (2024, 2, 1)),
        ("2024", (2024, 1, 1)),
        ("day-0", (2025, 6, 18)),
        ("day-1", (2025, 6, 17)),
        ("day-18", (2025, 5, 31)),
        ("week-0", (2025, 6, 16)),  # weeks start on Monday
        ("week-2", (2025, 6, 2)),
        ("month-0", (2025, 6, 1)),
        ("month-6", (2024, 12, 1)),
        ("month-18", (2023, 12, 1)),
        ("year-0", (2025, 1, 1)),
        ("YEAR-3", (2022, 1, 1)),
    ],
)
def test_dates_are_local_midnights_absolute_or_counted_back_from_now(
    value: str, expected: tuple[int, int, int]
) -> None:
    (f,) = parse(f"created:{value}").filters
    assert f == DateFilter("created", ms(*expected))


def test_a_plain_date_filter_means_on_or_after_and_a_negated_one_before() -> None:
    q = parse("updated:2024 -due:day-0")
    assert q.filters == (DateFilter("updated", ms(2024, 1, 1)), DateFilter("due", ms(2025, 6, 18), negated=True))


def test_relative_dates_follow_the_given_now() -> None:
    later = NOW + 3 * 86_400_000
    (f,) = parse_query("created:day-0", now_ms=later, tz=TZ).filters
    assert isinstance(f, DateFilter) and f.since == ms(2025, 6, 21)


def test_cjk_runs_become_overlapping_pairs_and_a_lone_character_a_prefix() -> None:
    assert index_tokens("中文字") == (Token("中文", cjk=True), Token("文字", cjk=True))
    assert index_tokens("中") == (Token("中", prefix=True, cjk=True),)
    assert index_tokens("東京タワー") == tuple(
        Token(p, cjk=True) for p in ("東京", "京タ", "タワ", "ワー")
    )
    assert index_tokens("abc中文") == (Token("abc"), Token("中文", cjk=True))
    (term,) = parse("여행을").terms
    assert term.phrase and [t.text for t in term.tokens] == ["여행", "행을"]


def test_a_url_or_a_word_ending_in_a_colon_is_text_not_a_filter() -> None:
    q = parse("https://example.org/path re: meeting")
    assert [t.text for t in q.terms] == ["https://example.org/path", "re:", "meeting"]
    assert q.filters == ()


def test_a_quoted_colon_is_text() -> None:
    (term,) = parse('"foo:bar"').terms
    assert [t.text for t in term.tokens] == ["foo", "bar"]


def test_a_query_of_only_negations_or_filters_is_allowed() -> None:
    assert parse("-tag:*").filters == (TagFilter("*", negated=True),)
    assert parse("-apple").terms[0].negated


def test_text_is_unicode_normalised_before_tokenising() -> None:
    decomposed = "cafe\u0301"
    (term,) = parse(decomposed).terms
    assert term.tokens == (Token("café"),)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ('"unbalanced', "never closed"),
        ('apple title:"two words', "never closed"),
        ("foo:bar", "unknown filter foo:"),
        ("colour:red", '"colour:red"'),
        ("created:2023-13-45", "YYYYMMDD"),
        ("created:20231345", "not a date"),
        ("updated:202313", "not a date"),
        ("due:week-x", "week-N"),
        ("due:tomorrow", "not a date"),
        ("created:year-99999", "not a date"),
        ("title:", "title:word"),
        ("tag: recipes", "needs a value"),
        ('notebook:""', "needs a value"),
        ("type:page", "note or todo"),
        ("iscompleted:yes", "iscompleted:"),
        ("any:2", "any:"),
        ("-any:1", "cannot be negated"),
        ("id:12345", "32 hexadecimal"),
        ("", "empty"),
        ("   ", "empty"),
        ("!!! ---", "no letters or digits"),
        ("*", "no letters or digits"),
        (" ".join(["w"] * (MAX_ITEMS + 1)), f"at most {MAX_ITEMS}"),
    ],
)
def test_a_malformed_query_says_what_is_wrong_and_how_to_write_it(query: str, says: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(query)
    assert says in str(info.value)


def test_a_phrase_longer_than_the_token_budget_is_refused() -> None:
    with pytest.raises(QueryError, match="too long"):
        parse('"' + " ".join(f"w{i}" for i in range(250)) + '"')


def test_a_query_object_exposes_its_parts() -> None:
    q = parse('apple -pear title:kiwi body:"fig jam"')
    assert [t.text for t in q.positive_terms] == ["apple", "kiwi", "fig jam"]
    assert [t.text for t in q.negative_terms] == ["pear"]
    assert [t.text for t in q.body_terms] == ["apple", "fig jam"]
    assert isinstance(q.terms[0], TextTerm)


_SYNTAX = st.sampled_from(
    ['"', "-", ":", "*", "(", ")", "^", "+", "{", "}", "'", "\\", " ", "NEAR", "AND", "OR", "NOT",
     "title:", "body:", "tag:", "notebook:", "created:", "due:", "any:", "id:", "type:", "day-",
     "2024", "中文", "é", "\x00", "\n", "\u0301", "\U0001f600"]
)
_QUERY_TEXT = st.one_of(st.text(max_size=60), st.lists(st.one_of(_SYNTAX, st.text(max_size=5)), max_size=20).map("".join))


@settings(max_examples=400, deadline=None)
@given(_QUERY_TEXT)
def test_any_text_either_parses_or_raises_query_error(text: str) -> None:
    try:
        q = parse(text)
    except QueryError as exc:
        assert str(exc)
        return
    assert q.terms or q.filters
    for term in q.terms:
        assert term.tokens
        assert all(tok.text and all(ch.isalnum() for ch in tok.text) for tok in term.tokens)


def test_control_characters_in_a_query_separate_words() -> None:
    from noteloom.query import parse_query

    words = [t.text for t in parse_query("basil\x00pesto").terms]
    assert len(words) == 2 and words == [t.text for t in parse_query("basil pesto").terms]
