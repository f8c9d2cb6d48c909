"""Tool arguments found valid are remembered per tool, and nothing invalid ever passes for it."""

from __future__ import annotations

from typing import Any

import pytest

from noteloom import tools
from noteloom.tools import ToolArgumentError, ToolDef, validate_args


async def _handler(ctx: Any, args: dict[str, Any]) -> Any:
    return args


SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "mode": {"type": "string", "enum": ["keyword", "semantic"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.fixture
def tool() -> ToolDef:
    return ToolDef(name="find", description="finds", input_schema=SCHEMA, handler=_handler)


def _passed(tool: ToolDef) -> dict[tuple[Any, ...], None]:
    return tools._validator(tool)[1]


def test_valid_arguments_pass_again_and_are_remembered(tool: ToolDef) -> None:
    args = {"query": "socket", "limit": 10}
    assert validate_args(tool, args) is args
    assert len(_passed(tool)) == 1
    again = {"query": "socket", "limit": 10}
    assert validate_args(tool, again) is again
    assert len(_passed(tool)) == 1


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"query": "socket", "limit": True}, "limit"),  # True == 1 in Python, not an integer in JSON Schema
        ({"query": "socket", "limit": 1.5}, "limit"),
        ({"query": "socket", "limit": "1"}, "limit"),
        ({"query": "socket", "limit": 0}, "limit"),
        ({"query": "", "limit": 1}, "query"),
        ({"query": "socket\x00", "limit": 1}, "query"),
        ({"query": "\ud800", "limit": 1}, "query"),
        ({"query": "socket", "limit": 1, "extra": 1}, "extra"),
    ],
)
def test_arguments_equal_in_python_to_valid_ones_are_still_refused(tool: ToolDef, bad: dict[str, Any], where: str) -> None:
    validate_args(tool, {"query": "socket", "limit": 1})
    validate_args(tool, {"query": "socket", "limit": 1.0})  # an integer to JSON Schema
    for _ in range(2):  # a refusal is never remembered as a pass
        with pytest.raises(ToolArgumentError, match=where):
            validate_args(tool, bad)


def test_nested_and_long_arguments_are_checked_every_time(tool: ToolDef) -> None:
    nested = {"query": "socket", "tags": ["a", "b"]}
    validate_args(tool, nested)
    long = {"query": "x" * 5000}
    validate_args(tool, long)
    assert _passed(tool) == {}
    with pytest.raises(ToolArgumentError, match="tags"):
        validate_args(tool, {"query": "socket", "tags": ["a", 1]})


def test_what_is_remembered_stays_bounded(tool: ToolDef) -> None:
    for i in range(tools._VALID_KEPT + 50):
        validate_args(tool, {"query": f"q{i}"})
    assert 0 < len(_passed(tool)) <= tools._VALID_KEPT
    with pytest.raises(ToolArgumentError):
        validate_args(tool, {"query": "q1", "limit": -1})


def test_each_tool_remembers_only_its_own(tool: ToolDef) -> None:
    strict = ToolDef(
        name="strict", description="takes nothing", handler=_handler,
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    )
    validate_args(tool, {"query": "socket"})
    with pytest.raises(ToolArgumentError):
        validate_args(strict, {"query": "socket"})
