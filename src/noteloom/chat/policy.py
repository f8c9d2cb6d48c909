"""Which tool calls of a chat turn run at once and which wait for the user's approval.

Reads run inline; additive writes (a new note or notebook, added tags, appended text,
a restore) run inline; replacing or removing content (``update_note`` with ``body`` or
``replace_text``, ``delete_note``, removing tags) asks first. A write tool we know
nothing about (a plugin's) asks too. Session tools only propose edits: they run.

Each tool's policy can be set outright: the run-time setting ``tool.NAME.policy`` (the
one the agent reads, shared with recipes and the CLI) wins over ``[chat.tool_policies]``
in ``noteloom.toml``, which wins over the defaults above.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from noteloom.agent import POLICIES, POLICY_KEY, Policy
from noteloom.chat.toolset import is_session_tool
from noteloom.errors import ConfigError
from noteloom.tools import ToolDef

_ADDITIVE = frozenset({"create_note", "create_notebook", "restore_note"})


def default_policy(tool: ToolDef, args: Mapping[str, Any]) -> Policy:
    """The chat's policy for one call of ``tool`` with ``args``, before any override."""
    if tool.effect == "read" or is_session_tool(tool.name):
        return "auto"
    if tool.name in _ADDITIVE:
        return "auto"
    if tool.name == "update_note":
        return "confirm" if ("body" in args or "replace_text" in args) else "auto"
    if tool.name == "manage_tags":
        return "confirm" if args.get("remove") else "auto"
    return "confirm"


def policy_for(tool: ToolDef, args: Mapping[str, Any], overrides: Mapping[str, Policy]) -> Policy:
    if is_session_tool(tool.name):
        return "auto"
    return overrides.get(tool.name) or default_policy(tool, args)


def overrides_from(file_table: Mapping[str, Any], runtime: Mapping[str, Any]) -> dict[str, Policy]:
    """Per-tool overrides: the settings file's table, then run-time settings on top.

    ``runtime`` holds workspace settings; those named ``tool.NAME.policy`` count.
    """
    out: dict[str, Policy] = {}
    for name, value in file_table.items():
        if value not in POLICIES:
            raise ConfigError(f"[chat.tool_policies] {name} = {value!r}: use one of {', '.join(POLICIES)}")
        out[str(name)] = cast(Policy, value)
    prefix, suffix = POLICY_KEY.split("{name}")
    for key, value in runtime.items():
        if key.startswith(prefix) and key.endswith(suffix) and value in POLICIES:
            out[key[len(prefix) : -len(suffix)]] = cast(Policy, value)
    return out


def describe_call(tool: ToolDef, args: Mapping[str, Any], note_title: str | None = None) -> str:
    """A plain-language line for a confirmation card; ``note_title`` is the title of the
    note ``args["id"]`` names, when it exists (an id alone tells a person nothing)."""
    note = args.get("id")
    what = ""
    if isinstance(note, str):
        what = f" note “{_short(note_title, 60)}” ({note})" if note_title else f" note {note}"
    if tool.name == "update_note":
        if "body" in args:
            return f"Replace the whole text of{what} with {len(str(args['body']))} characters."
        if "replace_text" in args:
            rt = args.get("replace_text") or {}
            return f"In{what}, replace “{_short(rt.get('find', ''))}” with “{_short(rt.get('replace', ''))}”."
        return f"Change{what}."
    if tool.name == "delete_note":
        return f"Move{what} to the trash."
    if tool.name == "manage_tags":
        parts = []
        if args.get("remove"):
            parts.append("remove tags " + ", ".join(map(str, args["remove"])))
        if args.get("add"):
            parts.append("add tags " + ", ".join(map(str, args["add"])))
        return f"On{what}: " + " and ".join(parts) + "."
    return f"Run {tool.title or tool.name} with {_short(str(dict(args)), 160)}."


def _short(text: Any, limit: int = 80) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
