"""The ``<think>`` splitter: whatever way the stream is cut, the same reasoning and answer come out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom.providers.think import ThinkSplitter


def split(chunks: list[str], *, start_inside: bool = False) -> tuple[str, str, bool]:
    """(thinking, text, absorbed) after feeding ``chunks``."""
    splitter = ThinkSplitter(start_inside=start_inside)
    thinking: list[str] = []
    text: list[str] = []
    absorbed = False
    for chunk in chunks:
        for kind, piece in splitter.feed(chunk):
            if kind == "thinking":
                thinking.append(piece)
            elif kind == "text":
                text.append(piece)
            else:
                absorbed = True
    for kind, piece in splitter.flush():
        (thinking if kind == "thinking" else text).append(piece)
    return "".join(thinking), "".join(text), absorbed


def cuts(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut at any set of places."""
    return st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=len(text)).map(
        lambda points: [text[a:b] for a, b in zip([0, *sorted(points)], [*sorted(points), len(text)], strict=True)]
    )


STREAM = "<think>Plan: check <b>dates</b> first.</think>\n\nThe trip is on <think-not> Friday.</think>"


@settings(max_examples=300, deadline=None)
@given(cuts(STREAM))
def test_any_cut_of_a_stream_gives_the_same_thinking_and_answer(chunks: list[str]) -> None:
    thinking, text, absorbed = split(chunks)
    assert thinking == "Plan: check <b>dates</b> first."
    # After the block, a stray closing tag and look-alike tags are answer text.
    assert text == "The trip is on <think-not> Friday.</think>"
    assert not absorbed


ORPHAN = "I should look at the list.\n</think>\n\nMilk and eggs."


@settings(max_examples=200, deadline=None)
@given(cuts(ORPHAN))
def test_a_closing_tag_never_opened_is_reported_wherever_it_is_cut(chunks: list[str]) -> None:
    thinking, text, absorbed = split(chunks)
    assert absorbed
    assert text.endswith("Milk and eggs.")
    assert "</think>" not in thinking + text


@settings(max_examples=200, deadline=None)
@given(cuts(ORPHAN))
def test_a_block_opened_by_the_template_is_thinking_from_the_first_character(chunks: list[str]) -> None:
    thinking, text, absorbed = split(chunks, start_inside=True)
    assert (thinking, text, absorbed) == ("I should look at the list.\n", "Milk and eggs.", False)


def test_text_without_tags_passes_through_and_only_a_possible_tag_is_held_back() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Hello <") == [("text", "Hello ")]
    assert splitter.feed("b>bold") == [("text", "<b>bold")]
    assert splitter.feed(" end <thin") == [("text", " end ")]
    assert splitter.flush() == [("text", "<thin")]


def test_an_unclosed_block_at_the_end_is_all_thinking() -> None:
    assert split(["<think>still going"]) == ("still going", "", False)
