"""Import at the scale of real vaults: the fast readers agree with the slow ones, and the
import streams (it never holds every note)."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom.interop import links
from noteloom.interop.frontmatter import _Loader, _parse_simple, parse

# -- link targets: the scan from the '=' signs finds what the pattern finds everywhere ------------

_HTML_PIECES = st.sampled_from(
    ["src", "SRC", "href", "HRef", "\u017frc", "=", " ", "\n", "\t", '"', "'", "a", "b.png", "<img ", "x", "\u00a0", "é"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_HTML_PIECES, max_size=40).map("".join))
def test_html_link_targets_are_the_matches_of_the_pattern(body: str) -> None:
    assert links._html_spans(body) == [m.span("value") for m in links._HTML.finditer(body)]


def test_html_link_targets_of_a_note() -> None:
    body = 'x = 1\n<img src="a.png"> <a HREF = \'b c.pdf\'>\nsrc="c"=href="d" xsrc="no"'
    assert [body[s:e] for s, e in links.link_spans(body)] == ["a.png", "b c.pdf", "c", "d"]


# -- front matter: the fast reader gives the library's answer, or leaves it to the library --------

_VALUES = st.sampled_from(
    ['"When a"', '"a \\"q\\" b"', '"back\\\\slash"', '"bad \\n escape"', "'it''s'", "plain text",
     "2025-05-15T19:57:33Z", "2024-01-02", "2024-01-02 10:00:00", "2024-1-2", "2024-01-02T10:00:00.5+01:00",
     "[]", "[a, b]", "[ a ,b ]", "[a,,b]", "[yes, no]", "[true]", "[1, 2]", "['x, y']", "x: y", "#c", "null",
     "true", "0123", '"tab\there"', '"\u2028"', "'\x07'", '"é ü 日本"', "[日本, x]", "[a]b", ""]
)
_ITEMS = st.sampled_from(["  - read", "- x", "    - deep", "  - 'q'", '  - "dq"', "  - 2024-01-01", "  -  two", "  - yes"])
_ENTRY = st.tuples(st.sampled_from(["title", "tags", "created", "x"]), _VALUES, st.lists(_ITEMS, max_size=3))


@settings(max_examples=500, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=4))
def test_the_fast_reader_agrees_with_yaml_on_what_other_tools_write(entries: list[tuple[str, str, list[str]]]) -> None:
    text = "".join(f"{k}: {v}\n" if v else f"{k}:\n" + "".join(f"{i}\n" for i in items) for k, v, items in entries)
    fast = _parse_simple(text)
    if fast is None:
        return
    expected = yaml.load(text, Loader=_Loader)  # an error here would mean the fast reader accepted bad YAML
    assert fast == expected and [type(v) for v in fast.values()] == [type(v) for v in expected.values()]


def test_front_matter_of_real_vaults_takes_the_fast_reader() -> None:
    text = 'title: "When \\"a\\""\ntags:\n  - read\n  - access\ncreated: 2025-05-15T19:57:33Z\nupdated: 2025-07-31\n'
    expected = {"title": 'When "a"', "tags": ["read", "access"], "created": "2025-05-15T19:57:33Z",
                "updated": "2025-07-31"}
    assert _parse_simple(text) == expected == parse(text, "note.md")
    assert _parse_simple("title: x\ntags: []\n") == {"title": "x", "tags": []}
