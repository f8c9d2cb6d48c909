"""Notes are cut into chunks along their Markdown sections, covering the body end to end."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom.chunks import Chunk, ChunkSpec, chunk_note
from noteloom.outline import resolve_section

NOTE = "a" * 32


def covered(chunks: list[Chunk], body: str) -> bool:
    """Every non-blank character of the body lies in some chunk's span."""
    spans = sorted((c.start, c.end) for c in chunks)
    pos = 0
    for start, end in spans:
        if body[pos:start].strip():
            return False
        pos = max(pos, end)
    return not body[pos:].strip()


def test_each_section_becomes_a_chunk_prefixed_with_title_and_heading_path() -> None:
    body = (
        "# Garden\n\nIntro to the garden, long enough to stand alone as its own chunk. " * 3
        + "\n\n## Basil\n\n"
        + "Basil wilts when the soil dries out; water it every morning. " * 12
        + "\n\n## Tomatoes\n\n"
        + "Tomatoes need a stake and sun. " * 25
    )
    chunks = chunk_note(NOTE, "My  garden", body, ChunkSpec(max_chars=900, overlap=100, merge_chars=300))
    paths = [c.section_path for c in chunks]
    assert paths == ["1", "1.1", "1.2"]
    basil = chunks[1]
    assert basil.heading == "Basil"
    assert basil.heading_path == ("Garden", "Basil")
    assert basil.text.startswith("My garden > Garden > Basil\n\n")
    assert "water it every morning" in basil.text
    assert body[basil.start : basil.end].lstrip().startswith("## Basil")
    assert all(c.note_id == NOTE for c in chunks)
    assert [c.ordinal for c in chunks] == [0, 1, 2]


def test_short_neighbouring_sections_merge_under_their_common_heading() -> None:
    body = "# Trip\n\n## Monday\nTrain to Porto.\n\n## Tuesday\nBoat on the river.\n\n# Costs\nHotel 80 euros."
    chunks = chunk_note(NOTE, "Holiday", body)
    assert [c.section_path for c in chunks] == ["1", "2"]
    assert "Train to Porto" in chunks[0].text and "Boat on the river" in chunks[0].text
    assert chunks[0].heading == "Trip"
    assert chunks[1].heading_path == ("Costs",)


def test_a_long_section_is_split_into_overlapping_windows_that_cover_it() -> None:
    sentences = [f"Sentence number {i} talks about topic {i % 7}." for i in range(400)]
    body = "# Log\n\n" + " ".join(sentences) + "\n"
    spec = ChunkSpec(max_chars=500, overlap=80)
    chunks = chunk_note(NOTE, "Log", body, spec)
    assert len(chunks) > 20
    assert all(c.end - c.start <= spec.max_chars for c in chunks)
    assert all(c.section_path == "1" for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert b.start < a.end, "neighbouring windows overlap"
        assert b.start > a.start
    assert covered(chunks, body)
    assert "Sentence number 399" in chunks[-1].text


def test_the_answer_at_the_end_of_a_200k_note_is_in_some_chunk() -> None:
    body = "# Notes\n\n" + ("filler words about nothing in particular. " * 5000) + "\n\nThe vault code is 7781.\n"
    chunks = chunk_note(NOTE, "Big", body)
    assert len(body) > 200_000
    assert any("vault code is 7781" in c.text for c in chunks)
    assert covered(chunks, body)


def test_text_before_the_first_heading_is_section_zero() -> None:
    body = "Some preface text here.\n\n# Main\n\nMain text."
    chunks = chunk_note(NOTE, "T", body)
    assert chunks[0].section_path == "0"
    assert chunks[0].heading == "" and chunks[0].heading_path == ()
    assert chunks[0].text.startswith("T\n\nSome preface")


def test_a_note_with_a_title_only_is_one_chunk_and_an_empty_note_none() -> None:
    only = chunk_note(NOTE, "Call the plumber", "")
    assert len(only) == 1 and only[0].text == "Call the plumber"
    assert chunk_note(NOTE, "", "   \n") == []


def test_link_targets_and_tags_are_left_out_of_the_embedded_text() -> None:
    body = "See [the docs](https://example.com/very/long/path?x=1) and <b>bold</b> ![pic](a.png)."
    (chunk,) = chunk_note(NOTE, "Links", body)
    assert "the docs" in chunk.text and "https://" not in chunk.text
    assert "<b>" not in chunk.text and "bold" in chunk.text


def test_the_content_hash_changes_with_the_text_and_only_with_it() -> None:
    body = "# A\n\nalpha text\n\n# B\n\nbeta text"
    before = chunk_note(NOTE, "T", body)
    after = chunk_note(NOTE, "T", body.replace("beta", "gamma"))
    assert before[0].content_hash == after[0].content_hash
    assert before[1].content_hash != after[1].content_hash
    retitled = chunk_note(NOTE, "Other", body)
    assert retitled[0].content_hash != before[0].content_hash


def test_every_chunk_section_path_is_an_address_read_note_accepts() -> None:
    body = "# One\n\ntext\n\n## Two\n\nmore text\n\n### Three\n\n" + "deep text. " * 200
    for c in chunk_note(NOTE, "T", body, ChunkSpec(max_chars=400, overlap=50)):
        sec = resolve_section(body, c.section_path)
        assert sec.start <= c.start and c.end <= sec.end


def test_bad_specs_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        ChunkSpec(max_chars=10)
    with pytest.raises(ValueError, match="overlap"):
        ChunkSpec(max_chars=400, overlap=300)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.from_regex(r"#{1,4} [A-Za-z ]{1,20}", fullmatch=True),
            st.text(alphabet="abcdefg .\n", min_size=0, max_size=300),
        ),
        max_size=12,
    )
)
def test_any_markdown_is_covered_end_to_end_within_the_size_limit(parts: list[str]) -> None:
    body = "\n\n".join(parts)
    spec = ChunkSpec(max_chars=200, overlap=40, merge_chars=120)
    chunks = chunk_note(NOTE, "T", body, spec)
    assert covered(chunks, body)
    assert all(0 <= c.start < c.end <= len(body) or not body.strip() for c in chunks)
    assert all(c.end - c.start <= spec.max_chars for c in chunks if body.strip())
