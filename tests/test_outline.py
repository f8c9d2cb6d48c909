"""The outline of a Markdown note: its sections, their paths and addressing them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom.errors import SectionError
from noteloom.outline import (
    _INLINE,
    Section,
    _collapse,
    _heading_text,
    _headings_fast,
    _headings_markdown_it,
    _plain_text,
    innermost_section,
    innermost_section_in,
    outline_text,
    resolve_section,
    section_text,
    sections,
)


def summary(body: str) -> list[tuple[str, int, str]]:
    return [(s.path, s.level, s.heading) for s in sections(body)]


# --- headings -------------------------------------------------------------


def test_atx_and_setext_headings_are_both_sections_with_their_levels() -> None:
    body = "Title\n=====\n\nintro\n\n## Atx two ##\n\nSub\n---\n\n### Three\n"
    assert summary(body) == [
        ("1", 1, "Title"),
        ("1.1", 2, "Atx two"),
        ("1.2", 2, "Sub"),
        ("1.2.1", 3, "Three"),
    ]


def test_a_heading_nests_under_the_nearest_previous_heading_of_a_lower_level() -> None:
    body = "## A\n\n# B\n\n### C\n\n## D\n\n# E\n"
    assert summary(body) == [
        ("1", 2, "A"),
        ("2", 1, "B"),
        ("2.1", 3, "C"),
        ("2.2", 2, "D"),
        ("3", 1, "E"),
    ]


def test_a_heading_that_skips_levels_nests_directly_as_a_child() -> None:
    assert summary("# Top\n\n### Deep\n\n#### Deeper\n") == [
        ("1", 1, "Top"),
        ("1.1", 3, "Deep"),
        ("1.1.1", 4, "Deeper"),
    ]


def test_a_section_runs_to_the_next_heading_of_equal_or_higher_level() -> None:
    body = "# A\na\n## A1\na1\n### A1x\nx\n## A2\na2\n# B\nb\n"
    by_path = {s.path: section_text(body, s) for s in sections(body)}
    assert by_path["1"] == "# A\na\n## A1\na1\n### A1x\nx\n## A2\na2\n"
    assert by_path["1.1"] == "## A1\na1\n### A1x\nx\n"
    assert by_path["1.1.1"] == "### A1x\nx\n"
    assert by_path["1.2"] == "## A2\na2\n"
    assert by_path["2"] == "# B\nb\n"


def test_chars_is_the_length_of_the_raw_section_text() -> None:
    body = "lead\n\n# One\n\nbody text\n\n## Two\n\nmore\n"
    for sec in sections(body):
        assert sec.chars == len(section_text(body, sec)) == sec.end - sec.start


def test_section_zero_and_the_top_level_sections_add_up_to_the_whole_body() -> None:
    body = "lead in\n\n# One\n\n## One.one\n\ntext\n\n# Two\n\ntail\n"
    top = [s for s in sections(body) if "." not in s.path]
    assert sum(s.chars for s in top) == len(body)


def test_headings_inside_code_and_html_blocks_are_not_headings() -> None:
    body = (
        "# Real\n\n"
        "```bash\n# a shell comment\n```\n\n"
        "~~~~\n```\n# still code\n~~~~\n\n"
        "    # indented code\n\n"
        "<div>\n# inside html\n</div>\n\n"
        "<!--\n\n# inside a comment\n-->\n\n"
        "## Also real\n"
    )
    assert summary(body) == [("1", 1, "Real"), ("1.1", 2, "Also real")]


def test_headings_inside_block_quotes_and_list_items_count_as_in_the_rendered_note() -> None:
    body = "# Top\n\n> ## Quoted\n\n- item\n\n  ### In a list\n"
    assert summary(body) == [("1", 1, "Top"), ("1.1", 2, "Quoted"), ("1.1.1", 3, "In a list")]


def test_heading_text_is_the_plain_inline_text() -> None:
    body = "## Hello *world*\n\n## Run `make test` now\n\n## See [the docs](https://x.org) &amp; more\n"
    assert [s.heading for s in sections(body)] == [
        "Hello world",
        "Run make test now",
        "See the docs & more",
    ]


def test_heading_text_drops_strikethrough_markers_as_the_renderer_does() -> None:
    assert sections("## ~~Old~~ New plan\n")[0].heading == "Old New plan"


def test_heading_text_uses_link_references_defined_anywhere_in_the_note() -> None:
    body = "# Read [the guide]\n\ntext\n\n[the guide]: https://example.org\n"
    assert sections(body)[0].heading == "Read the guide"


def test_whitespace_in_headings_collapses_to_single_spaces() -> None:
    body = "A setext heading\n  over   two\tlines\n===\n\n##   Tabs\tand   runs  \t##\n"
    assert [s.heading for s in sections(body)] == [
        "A setext heading over two lines",
        "Tabs and runs",
    ]
    assert "\t" not in "".join(line.split("\t", 2)[2] for line in outline_text(body).split("\n"))


def test_cjk_headings_keep_their_text_and_count_characters() -> None:
    body = "前言\n\n# 同步冲突\n\n请先备份。\n\n概要\n===\n\n内容\n"
    secs = sections(body)
    assert [(s.path, s.heading) for s in secs] == [("0", ""), ("1", "同步冲突"), ("2", "概要")]
    assert secs[1].chars == len("# 同步冲突\n\n请先备份。\n\n")
    assert resolve_section(body, "同步冲突") == secs[1]


def test_offsets_are_in_the_raw_body_even_with_crlf_line_ends() -> None:
    body = "intro\r\n\r\n# One\r\ntext\r\n## Two\r\nmore\r\n"
    one, two = sections(body)[1:]
    assert body[one.start :].startswith("# One")
    assert section_text(body, two) == "## Two\r\nmore\r\n"


# --- section 0 -------------------------------------------------------------


def test_section_zero_is_the_text_before_the_first_heading() -> None:
    body = "Some lead text.\n\n# First\n"
    zero = sections(body)[0]
    assert zero == Section("0", "", 0, 0, len("Some lead text.\n\n"))


def test_section_zero_is_omitted_when_it_is_only_whitespace() -> None:
    assert [s.path for s in sections(" \n\t\n# First\n")] == ["1"]
    assert [s.path for s in sections("# First\n")] == ["1"]


def test_a_note_without_headings_is_section_zero_alone() -> None:
    assert sections("just text\n\nand more") == [Section("0", "", 0, 0, 19)]
    assert sections("") == [Section("0", "", 0, 0, 0)]


# --- the outline text ----------------------------------------------------------


def test_the_outline_is_a_header_then_one_tab_separated_line_per_section() -> None:
    body = "lead\n\n# Release\n\n## Desktop\n\ntext\n"
    assert outline_text(body) == ("path\tchars\theading\n0\t6\n1\t28\tRelease\n1.1\t17\tDesktop")


def test_the_outline_of_a_note_without_headings_is_its_length() -> None:
    assert outline_text("x" * 480) == "path\tchars\theading\n0\t480"


# --- resolving an address ----------------------------------------------------------


BODY = (
    "lead\n\n# Release\n\n## Windows\n\nwin\n\n## Linux\n\n### Windows\n\nwine\n\n"
    "# Mobile\n\n## iOS\n\n## 1.2\n\nnumbered heading\n"
)


def test_a_path_resolves_to_its_section() -> None:
    sec = resolve_section(BODY, "1.2.1")
    assert (sec.heading, section_text(BODY, sec)) == ("Windows", "### Windows\n\nwine\n\n")


def test_a_unique_heading_resolves_to_its_section() -> None:
    assert resolve_section(BODY, "iOS").path == "2.1"


def test_paths_are_tried_before_headings() -> None:
    assert resolve_section(BODY, "1.2").heading == "Linux"
    assert resolve_section(BODY, "2.2").heading == "1.2"


def test_an_address_is_collapsed_like_the_outline_before_matching() -> None:
    body = "Multi line\n  heading\ttext\n===\n\n## Other\n"
    heading = outline_text(body).split("\n")[1].split("\t")[2]
    assert resolve_section(body, heading).path == "1"
    assert resolve_section(body, "  Multi   line heading\n text ").path == "1"
    assert resolve_section(body, " 1.1 ").heading == "Other"


def test_heading_match_is_exact_and_case_sensitive() -> None:
    with pytest.raises(SectionError):
        resolve_section(BODY, "ios")
    with pytest.raises(SectionError):
        resolve_section(BODY, "iO")


def test_an_ambiguous_heading_is_an_error_listing_the_candidates_with_paths() -> None:
    with pytest.raises(SectionError) as caught:
        resolve_section(BODY, "Windows")
    message = str(caught.value)
    assert "1.1 Windows" in message
    assert "1.2.1 Windows" in message
    assert "path" in message


def test_an_unknown_address_is_an_error_naming_it_and_pointing_to_the_outline() -> None:
    with pytest.raises(SectionError) as caught:
        resolve_section(BODY, "Android")
    assert "'Android'" in str(caught.value)
    assert "outline" in str(caught.value)
    with pytest.raises(SectionError):
        resolve_section(BODY, "9.9")
    with pytest.raises(SectionError):
        resolve_section(BODY, "   ")


def test_path_zero_always_resolves_to_the_text_before_the_first_heading() -> None:
    assert section_text(BODY, resolve_section(BODY, "0")) == "lead\n\n"
    body = "\n\n# First\n"
    assert resolve_section(body, "0") == Section("0", "", 0, 0, 2)
    assert resolve_section("no headings", "0") == Section("0", "", 0, 0, 11)


# --- the innermost section of an offset -----------------------------------------


def test_an_offset_belongs_to_its_innermost_section() -> None:
    assert innermost_section(BODY, BODY.index("wine")).path == "1.2.1"
    assert innermost_section(BODY, BODY.index("## Linux")).path == "1.2"
    assert innermost_section(BODY, BODY.index("win\n")).path == "1.1"
    assert innermost_section(BODY, BODY.index("numbered")).path == "2.2"
    assert innermost_section(BODY, len(BODY)).path == "2.2"


def test_offsets_before_the_first_heading_are_in_section_zero_even_if_it_is_omitted() -> None:
    assert innermost_section(BODY, 2).path == "0"
    body = "\n\n# First\ntext"
    assert [s.path for s in sections(body)] == ["1"]
    assert innermost_section(body, 1) == Section("0", "", 0, 0, 2)
    assert innermost_section("no headings here", 5).path == "0"


def test_innermost_section_accepts_sections_computed_once() -> None:
    secs = sections(BODY)
    for offset in (0, BODY.index("wine"), BODY.index("iOS"), len(BODY)):
        assert innermost_section_in(secs, offset) == innermost_section(BODY, offset)


def test_offsets_outside_the_body_are_refused() -> None:
    with pytest.raises(ValueError):
        innermost_section(BODY, -1)
    with pytest.raises(ValueError):
        innermost_section(BODY, len(BODY) + 1)
    with pytest.raises(ValueError):
        innermost_section_in([], 0)


def test_the_returned_list_is_the_callers_own() -> None:
    body = "# A\n\n# B\n"
    sections(body).clear()
    assert len(sections(body)) == 2


# --- the fast path agrees with markdown-it -------------------------------------------


def test_long_notes_with_crlf_line_ends_get_the_same_sections_shifted() -> None:
    lf = "".join(f"# Part {n}\n\ntext\n\n## Sub {n}\nmore\n\n" for n in range(2000))
    crlf = lf.replace("\n", "\r\n")
    assert len(lf) > 20_000
    lf_secs, crlf_secs = sections(lf), sections(crlf)
    assert [s.path for s in lf_secs] == [s.path for s in crlf_secs]
    for a, b in zip(lf_secs, crlf_secs, strict=True):
        assert section_text(crlf, b) == section_text(lf, a).replace("\n", "\r\n")


def test_a_fence_the_cheap_scan_misjudges_falls_back_to_markdown_it() -> None:
    # The ``` inside the HTML block is not a fence, so the last ``` opens one
    # that never closes; the scan pairs them up the other way round.
    body = "<div>\n```\n\nfoo\n```\n\n# in code\n\n" + "para\n\n" * 5000
    assert _headings_fast(body) is None
    assert summary(body) == [("0", 0, "")]


def test_long_notes_take_the_fast_path_and_agree_with_markdown_it() -> None:
    part = (
        "# Part {n}\n\nText *with* markup.\n\n```py\n# comment\n\nx = 1\n```\n\n"
        "- item\n\n  ## Nested {n}\n\n> quote\n\nSetext {n}\n---\n\n" + "filler line\n" * 40 + "\n"
    )
    body = "".join(part.format(n=n) for n in range(200))
    assert len(body) > 100_000
    fast = _headings_fast(body)
    assert fast is not None
    assert fast == _headings_markdown_it(body)
    assert len(fast) == 600


# Lines chosen to stress where markdown-it decides what is a heading.
# fmt: off
TRICKY_LINES = [
    "# h", "## h2 ##", "# a #", "# #", "#  x  ##  ", "# x\\#", "# x#", "#\t#", "## *em* h",
    "# h &amp; ~~s~~", "  # h", "    # h", "\t# tab", "#", "###### six", "####### seven",
    "- # h", "> # h", "> ## q", "1. ## h", "Setext\twith tab", "===", "---", "  ---", "> ---",
    "- - -", "```", "~~~", "````", "``` py", "```a`b", "  ```", "   ~~~", "> ```",
    "<!--", "-->", "<!-- x -->", "<pre>", "</pre>", "<div>", "</div>", "<?php", "?>",
    "<!DOCTYPE", ">", "<![CDATA[", "]]>", "<script>", "</script>",
    "", "", "", "", "text", "text", "more *text*", "- item", "* item", "+ item", "1. item",
    "2) item", "-", "1.", "  text", "  - nested", "    code", "     five", "> text", ">",
    "[ref]: /u", "## [ref]", "| a | b |", "|---|---|", "同步 ## 冲突", "## 同步冲突",
]
# fmt: on

documents = st.lists(
    st.one_of(st.sampled_from(TRICKY_LINES), st.text(alphabet=" #=-`~>*\tab\n", max_size=12)),
    max_size=80,
).map("\n".join)


@settings(max_examples=400, deadline=None)
@given(documents)
def test_the_fast_path_finds_exactly_the_headings_markdown_it_finds(body: str) -> None:
    fast = _headings_fast(body)
    if fast is not None:
        assert fast == _headings_markdown_it(body)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab1 *_~`[]()<>&#;!:/\\\n\t\u00a0é"), max_size=30))
def test_plain_headings_skip_inline_parsing_without_changing_their_text(content: str) -> None:
    parsed = _collapse(_plain_text(_INLINE.parseInline(content, {})))
    assert _heading_text(content, {}) == parsed


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from(["\n", "\r\n"]))
def test_sections_nest_resolve_and_cover_the_body(body: str, newline: str) -> None:
    body = body.replace("\n", newline)
    secs = sections(body)
    headed = [s for s in secs if s.level]

    # Section 0 comes first and stops where the first heading starts.
    if secs[0].path == "0":
        assert secs[0].start == 0
        assert secs[0].end == (headed[0].start if headed else len(body))
    else:
        assert body[: headed[0].start].strip() == ""

    # Top-level sections tile the body from the first heading to the end.
    top = [s for s in headed if "." not in s.path]
    if top:
        assert [s.start for s in top[1:]] == [s.end for s in top[:-1]]
        assert top[-1].end == len(body)

    for sec in headed:
        assert re.fullmatch(r"[1-9][0-9]*(\.[1-9][0-9]*)*", sec.path)
        assert resolve_section(body, sec.path) == sec
        assert sec.heading == " ".join(sec.heading.split())
        # Subsections are exactly the headings inside the span.
        inside = {s.path for s in headed if sec.start < s.start < sec.end}
        below = {s.path for s in headed if s.path.startswith(sec.path + ".")}
        assert inside == below
        assert innermost_section(body, sec.start) == sec
        # A heading copied from the outline resolves, unless it is ambiguous.
        unique = [s.heading for s in headed].count(sec.heading) == 1
        path_like = re.fullmatch(r"0|[1-9][0-9]*(\.[1-9][0-9]*)*", sec.heading)
        if unique and sec.heading and not path_like:
            assert resolve_section(body, sec.heading) == sec
