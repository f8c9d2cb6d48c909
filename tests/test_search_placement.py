"""Placing a hit reads only the part of a note before its match: the sections that start at
or before an offset, read from a prefix of the body, are the whole outline's sections there
(same path, heading, level and start), so the section a search hit names is the same."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from noteloom import outline, search
from noteloom.query import parse_query

# Blocks that decide where headings are, or are not: fences (closed, unclosed, with
# headings inside), setext underlines, HTML blocks that run on over blank lines, front
# matter (read as a rule and a setext heading), lists, quotes, tables, link references
# (which change a heading's text from anywhere), indented code, CJK.
BLOCKS = [
    "# Top", "## Mid", "### Low #", "#NotAHeading", "Setext\n===", "Under\n---", "para\n---",
    "---\ntitle: x\n---", "```\n# in fence\n```", "```python\n## code\n", "~~~\nSetext\n===\n~~~",
    "````\n```\n# still fenced\n````", "<pre>\n# in pre\n\n# still pre\n</pre>", "<!--\n# comment\n\n-->",
    "<div>\n# after div\n</div>", "<div>\n\n# after blank\n", "- item\n\n  # nested\n- two",
    "> quote\n>\n> # quoted\nlazy", "> Setext\n> ===", "| a | b |\n| - | - |\n| # | x |", "# a | b\n--|--",
    "[ref]: /url", "## [ref] heading", "## see [ref]", "    # indented code", "数据 会議", "## 数据",
    "- item\n  ```\n  # in an item's fence", "- <pre>\n\n  # in an item's pre", "> ```\n> # quoted fence",
    "1. one\n\n   Setext in item\n   ---", "text with words", "caf\u00e9 na\u00efve", "\t# tab", "   ### three spaces", "para\n# interrupts",
]
BREAKS = ["\n", "\n\n", "\n \n", "\r\n", "\r\n\r\n", "\r\r", "\n\t\n", "\n\n\n"]


@st.composite
def markdown(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 40))):
        parts.append(draw(st.sampled_from(BLOCKS)))
        parts.append(draw(st.sampled_from(BREAKS)))
    body = "".join(parts)
    if draw(st.booleans()):
        body = body.replace("\n", "\r\n")
    return body


def head(sec: outline.Section) -> tuple[str, str, int, int]:
    return sec.path, sec.heading, sec.level, sec.start


def check(body: str, offset: int) -> None:
    whole = outline.sections(body)
    read = outline.sections_through(body, offset)
    assert head(outline.innermost_section_in(read, offset)) == head(outline.innermost_section_in(whole, offset))
    by_path = {s.path: s for s in whole}
    for sec in read:
        # Every section read is the outline's, only ending sooner when still open.
        full = by_path.get(sec.path)
        if full is None:  # the "0" the whole outline leaves out when blank
            assert sec.path == "0" and not body[: sec.end].strip()
            continue
        assert head(sec) == head(full) and sec.end <= full.end
    # Every section of the outline that starts at or before the offset was read.
    assert {s.path for s in whole if s.start <= offset} <= {s.path for s in read}


@settings(max_examples=400, deadline=None)
@given(body=markdown(), data=st.data())
@example(body="ΟΔΟΣ\r\ncafe \nSetext\n===\n \n# Top\n \n# Top\n ", data=None)
def test_the_sections_read_through_an_offset_are_the_outlines(body: str, data: st.DataObject | None) -> None:
    if data is None:
        offsets = list(range(len(body) + 1))
    else:
        offsets = data.draw(st.lists(st.integers(0, len(body)), min_size=1, max_size=8))
    for offset in offsets:
        check(body, offset)


def test_a_reference_after_the_match_still_names_the_heading() -> None:
    body = "## see [ref]\n\nwombat here\n\n" + "filler\n\n" * 50 + "[ref]: /url\n"
    offset = body.index("wombat")
    sec = outline.innermost_section_in(outline.sections_through(body, offset), offset)
    assert sec.heading == "see ref"


def test_a_match_early_in_a_long_note_reads_only_the_start() -> None:
    body = "# One\n\nwombat\n\n## Two\n\n" + "lorem ipsum\n\n" * 20_000 + "# Last\n"
    read = outline.sections_through(body, body.index("wombat"))
    assert [s.path for s in read] == ["1"]
    assert read[-1].end < 100
    assert outline.sections_through(body, len(body)) == tuple(outline.sections(body))


def test_offsets_outside_the_body_are_refused() -> None:
    for offset in (-1, 7):
        with pytest.raises(ValueError, match="outside the body"):
            outline.sections_through("# Five", offset)


def test_a_kept_partial_outline_grows_for_a_later_match() -> None:
    """A note placed once early, then by a match deep in it, names the deep section."""
    body = "# One\n\nwombat\n\n" + "lorem\n\n" * 2000 + "## Deep\n\nquokka\n\n" + "ipsum\n\n" * 2000
    row = search._Row(0, "placement-grows", "t", "b", 1, 0.0)
    early = search._Anchor(parse_query("wombat").body_terms).place(row, body)
    late = search._Anchor(parse_query("quokka").body_terms).place(row, body)
    both = search._Anchor(parse_query("wombat quokka").body_terms).place(row, body)
    assert early is not None and early[1].path == "1"
    assert late is not None and late[1].path == "1.1" and late[1].heading == "Deep"
    assert both is not None and both[1].path == "1"
