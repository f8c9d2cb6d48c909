"""Proposed edits find their place by anchor, tag or selection, and are refused once it is gone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noteloom.chat.anchors import (
    AnchorError,
    EditStale,
    Span,
    fenced_blocks,
    find_anchor,
    paragraphs,
    plan,
    relocate,
    splice,
    word_diff,
)

NOTE = """# Trip

We leave on Friday at nine.
Bring the tent.

```mermaid
graph TD

A --> B
```

Budget: 300 euros.
"""


def test_paragraphs_are_runs_of_lines_and_a_fence_is_one_block() -> None:
    texts = [NOTE[p.start : p.end] for p in paragraphs(NOTE)]
    assert texts == [
        "# Trip",
        "We leave on Friday at nine.\nBring the tent.",
        "```mermaid\ngraph TD\n\nA --> B\n```",
        "Budget: 300 euros.",
    ]


def test_fenced_blocks_know_their_tag_and_contents() -> None:
    [block] = fenced_blocks(NOTE)
    assert block.tag == "mermaid"
    assert NOTE[block.content.start : block.content.end] == "graph TD\n\nA --> B\n"
    assert fenced_blocks("```\nunclosed\n")[0].content == Span(4, 13)
    assert fenced_blocks("no fence here") == []


def test_an_anchor_must_occur_exactly_once() -> None:
    assert NOTE[slice(*_pair(find_anchor(NOTE, "Bring the tent")))] == "Bring the tent"
    with pytest.raises(AnchorError, match="not in the note"):
        find_anchor(NOTE, "Bring the stove")
    with pytest.raises(AnchorError, match="occurs 2 times"):
        find_anchor("a b\n\na b", "a b")
    with pytest.raises(AnchorError, match="empty"):
        find_anchor(NOTE, "   ")


def test_an_anchor_rewrapped_by_the_model_still_matches() -> None:
    span = find_anchor(NOTE, "at nine. Bring")
    assert NOTE[span.start : span.end] == "at nine.\nBring"


def _pair(span: Span) -> tuple[int, int]:
    return span.start, span.end


def test_each_session_tool_plans_its_edit() -> None:
    rewrite = plan("rewrite_paragraph", NOTE, "We leave on Saturday.", anchor="leave on Friday")
    assert rewrite.old_text == "We leave on Friday at nine.\nBring the tent."
    assert splice(NOTE, rewrite.span, rewrite.new_text).count("Saturday") == 1

    before = plan("insert_before_anchor", NOTE, "Packing list below.", anchor="Budget")
    assert before.new_text == "Packing list below.\n\nBudget: 300 euros."
    after = plan("insert_after_anchor", NOTE, "\n\nFood: 50 euros.\n", anchor="Budget")
    assert after.new_text == "Budget: 300 euros.\n\nFood: 50 euros."

    append = plan("append_to_note", "One line", "Two")
    assert splice("One line", append.span, append.new_text) == "One line\n\nTwo"
    assert plan("append_to_note", "", "First").new_text == "First"

    block = plan("replace_structured_block", NOTE, "graph LR\nX --> Y", tag="Mermaid")
    assert "graph LR\nX --> Y\n```" in splice(NOTE, block.span, block.new_text)

    sel = plan("edit_selection", NOTE, "ten", selection=(30, 34, "nine"))
    assert NOTE[30:34] == "nine" and sel.old_text == "nine" and sel.new_text == "ten"


def test_an_unclear_place_is_an_error_for_the_model() -> None:
    with pytest.raises(AnchorError, match="no fenced block tagged 'json'"):
        plan("replace_structured_block", NOTE, "{}", tag="json")
    two = "```json\n{}\n```\n\n```json\n[]\n```\n"
    with pytest.raises(AnchorError, match="2 fenced blocks"):
        plan("replace_structured_block", two, "{}", tag="json")
    with pytest.raises(AnchorError, match="no selection"):
        plan("edit_selection", NOTE, "x")


def test_accepting_finds_the_text_again_after_changes_elsewhere() -> None:
    edit = plan("rewrite_paragraph", NOTE, "New plan.", anchor="Bring the tent")
    changed = "Intro added on top.\n\n" + NOTE
    span = relocate("rewrite_paragraph", changed, edit.span, edit.old_text, "Bring the tent")
    assert changed[span.start : span.end] == edit.old_text


def test_accepting_refuses_an_edit_whose_text_is_gone() -> None:
    edit = plan("rewrite_paragraph", NOTE, "New plan.", anchor="Bring the tent")
    changed = NOTE.replace("Bring the tent.", "Bring the tarp.")
    with pytest.raises(EditStale, match="no longer"):
        relocate("rewrite_paragraph", changed, edit.span, edit.old_text, "Bring the tent")
    reworded = NOTE.replace("Friday", "Sunday")  # anchor still there, paragraph differs
    with pytest.raises(EditStale):
        relocate("rewrite_paragraph", reworded, edit.span, edit.old_text, "Bring the tent")


def test_a_selection_edit_moves_with_its_text_only_when_that_text_is_unique() -> None:
    sel = plan("edit_selection", NOTE, "ten", selection=(30, 34, "nine"))
    moved = "X " + NOTE
    span = relocate("edit_selection", moved, sel.span, sel.old_text, None)
    assert moved[span.start : span.end] == "nine"
    twice = "nine " + NOTE
    with pytest.raises(EditStale, match="selected text"):
        relocate("edit_selection", twice, sel.span, sel.old_text, None)


def test_word_diff_marks_what_changed() -> None:
    assert word_diff("we leave on Friday", "we leave on Saturday") == [
        ("equal", "we leave on "),
        ("delete", "Friday"),
        ("insert", "Saturday"),
    ]
    assert word_diff("", "new") == [("insert", "new")]


@given(
    prefix=st.text(alphabet="ab \n", max_size=30),
    suffix=st.text(alphabet="ab \n", max_size=30),
)
def test_relocated_edits_always_replace_exactly_the_planned_text(prefix: str, suffix: str) -> None:
    body = f"{prefix}\n\nunique marker paragraph\n\n{suffix}"
    edit = plan("rewrite_paragraph", body, "REPLACED", anchor="unique marker")
    shifted = "zz\n\n" + body
    span = relocate("rewrite_paragraph", shifted, edit.span, edit.old_text, "unique marker")
    result = splice(shifted, span, edit.new_text)
    assert result == shifted.replace("unique marker paragraph", "REPLACED", 1)
