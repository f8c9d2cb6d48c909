"""The tools of a turn are a pure function of the open note; the system prompt keeps its
scaffolding whatever the voice. (Which calls ask first: tests/test_policy.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from noteloom.chat.prompt import DEFAULT_VOICE, system_prompt, voice
from noteloom.chat.records import Controls, Selection
from noteloom.chat.toolset import FocusedNote, session_tool_names, turn_tools, workspace_tools
from noteloom.tools import ToolContext, ToolDef


async def _noop(ctx: ToolContext, args: dict[str, Any]) -> Any:
    return {}


async def _propose(tool: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {}


def _tool(name: str, effect: str = "read") -> ToolDef:
    return ToolDef(name, name, {"type": "object"}, _noop, effect=effect)  # type: ignore[arg-type]


REGISTRY = [_tool("search_notes"), _tool("read_note"), _tool("create_note", "write"),
            _tool("update_note", "write"), _tool("delete_note", "destructive")]
PLAIN = FocusedNote("a" * 32, "Plan", "One.\n\nTwo.")
FENCED = FocusedNote("a" * 32, "Plan", "One.\n\n```json\n{}\n```\n")
SELECTED = FocusedNote("a" * 32, "Plan", "One.\n\nTwo.", Selection(0, 4, "One."))


def _names(note: FocusedNote | None, controls: Controls | None = None) -> list[str]:
    return [t.name for t in turn_tools(note, REGISTRY, controls or Controls(), _propose)]


def test_no_open_note_means_workspace_tools_only() -> None:
    assert session_tool_names(None) == []
    assert _names(None) == [t.name for t in REGISTRY]


def test_an_open_note_adds_the_anchor_and_append_tools() -> None:
    assert session_tool_names(PLAIN) == [
        "rewrite_paragraph", "insert_before_anchor", "insert_after_anchor", "append_to_note",
    ]


def test_the_block_tool_appears_only_when_the_note_has_a_fenced_block() -> None:
    assert "replace_structured_block" in session_tool_names(FENCED)
    assert "replace_structured_block" not in session_tool_names(PLAIN)


def test_a_selection_offers_edit_selection_and_no_other_session_tool() -> None:
    names = _names(SELECTED)
    assert names[-1] == "edit_selection"
    assert not {"rewrite_paragraph", "append_to_note"} & set(names)


def test_the_list_is_a_pure_function_of_its_inputs() -> None:
    assert _names(FENCED) == _names(FENCED)
    assert [t.input_schema for t in turn_tools(SELECTED, REGISTRY, Controls(), _propose)] == [
        t.input_schema for t in turn_tools(SELECTED, REGISTRY, Controls(), _propose)
    ]


def test_conversation_toggles_narrow_the_registry_and_never_widen_it() -> None:
    assert workspace_tools(REGISTRY, Controls(workspace_tools=False)) == []
    read_only = workspace_tools(REGISTRY, Controls(workspace_writes=False))
    assert [t.name for t in read_only] == ["search_notes", "read_note"]
    assert workspace_tools(REGISTRY[:1], Controls()) == REGISTRY[:1]  # a disabled tool stays out
    # Session tools only propose edits: they stay when writes are off.
    assert "rewrite_paragraph" in _names(PLAIN, Controls(workspace_writes=False))


NOW = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def test_the_voice_falls_back_from_the_chat_to_the_setting_to_the_default() -> None:
    assert voice("Be terse.", "Be kind.") == "Be terse."
    assert voice("  ", "Be kind.") == "Be kind."
    assert voice(None, None) == DEFAULT_VOICE


def test_the_scaffolding_stays_whatever_the_voice() -> None:
    blocks = system_prompt(voice_text="Talk like a pirate.", now=NOW, note=None, tool_names=[])
    text = "\n".join(b.text for b in blocks)
    assert blocks[0].text == "Talk like a pirate."
    assert "Monday 30 November 2026, 09:15" in text and "Markdown" in text
    assert "Tools:" not in text  # no tool rules without tools
    assert blocks[-1].cache is False  # the clock comes last, after the cacheable prefix


def test_the_open_note_and_selection_are_in_the_prompt_and_a_long_body_is_capped() -> None:
    blocks = system_prompt(voice_text="v", now=NOW, note=SELECTED, tool_names=["search_notes", "edit_selection"])
    text = "\n".join(b.text for b in blocks)
    assert "Title: Plan" in text and "<selection>\nOne.\n</selection>" in text
    assert "Tools:" in text and "Editing the open note" in text
    long = FocusedNote("a" * 32, "Long", "# Head\n\n" + "word " * 5000)
    capped = "\n".join(b.text for b in system_prompt(voice_text="v", now=NOW, note=long, tool_names=[], body_cap=1000))
    assert "the first 1000 of" in capped and "path\tchars\theading" in capped
    assert len(capped) < 3000
