"""The one place that decides whether a tool call runs, waits for the user, or is refused.

A call's policy is ``auto`` (it runs), ``confirm`` (the user signs it off first) or
``deny`` (it never runs). Layers, weakest first; a later layer that names the tool
replaces what came before, and ``deny`` in any layer wins outright::

    the tool's default      ToolDef.needs_approval(args): confirm, else auto
    the workspace setting   tool.NAME.policy (``noteloom tools policy``, the API)
    noteloom.toml           [agent.tool_policies]  ([chat.tool_policies] still read, deprecated)
    the run                 a per-conversation or per-run override (RunOptions.policies)

Every surface asks :func:`resolve`: the agent loop (web chat, ``ask``/``chat``, recipes)
and MCP, which has no way to ask the user yet and so runs ``confirm`` calls of enabled
tools but refuses ``deny`` with :data:`DENIED`, the text the model gets elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from noteloom.access import sees_notebook
from noteloom.errors import ConfigError, NotFound

if TYPE_CHECKING:
    from noteloom.tools import ToolDef
    from noteloom.workspace import User, Workspace

log = logging.getLogger("noteloom.policy")

Policy = Literal["auto", "confirm", "deny"]
POLICIES: tuple[Policy, ...] = get_args(Policy)
POLICY_KEY = "tool.{name}.policy"
_PREFIX, _SUFFIX = POLICY_KEY.split("{name}")

#: What a refused call answers, on every surface (model result, MCP ``isError`` text).
DENIED = "{name} is not allowed here (the user's policy for it is deny); do not try it again, tell the user instead"


def denied(name: str) -> str:
    return DENIED.format(name=name)


@dataclass(frozen=True)
class PolicySources:
    """The layers above a tool's default, each ``{tool name: policy}``."""

    workspace: Mapping[str, Policy] = field(default_factory=dict)
    file: Mapping[str, Policy] = field(default_factory=dict)
    override: Mapping[str, Policy] = field(default_factory=dict)

    @classmethod
    def read(
        cls, settings: Mapping[str, Any], file: Mapping[str, Any], override: Mapping[str, Policy] | None = None
    ) -> PolicySources:
        """From workspace settings already read (keys ``tool.NAME.policy``) and the settings file."""
        return cls(workspace_policies(settings), file_policies(file), dict(override or {}))


def tool_default(tool: ToolDef, args: Mapping[str, Any]) -> Policy:
    return "confirm" if tool.needs_approval(args) else "auto"


def resolve(tool: ToolDef, args: Mapping[str, Any], sources: PolicySources) -> Policy:
    """The effective policy of one call of ``tool`` with ``args``."""
    chosen = tool_default(tool, args)
    for layer in (sources.workspace, sources.file, sources.override):
        value = layer.get(tool.name)
        if value == "deny":
            return "deny"
        if value is not None:
            chosen = value
    return chosen


def configured(tool: ToolDef, sources: PolicySources) -> Policy | None:
    """What the layers above the default say for ``tool`` (``None``: the default holds)."""
    values = [v for layer in (sources.workspace, sources.file, sources.override) if (v := layer.get(tool.name))]
    if "deny" in values:
        return "deny"
    return values[-1] if values else None


DefaultWords = Literal["auto", "confirm", "confirm*"]


def default_words(tool: ToolDef) -> DefaultWords:
    """The tool's default in a word: ``auto``, ``confirm``, or ``confirm*`` (some calls)."""
    if not tool.may_need_approval:
        return "auto"
    return "confirm" if tool.approval is None else "confirm*"


def workspace_policies(settings: Mapping[str, Any]) -> dict[str, Policy]:
    """``tool.NAME.policy`` settings among ``settings``; a malformed value is logged and skipped."""
    out: dict[str, Policy] = {}
    for key, value in settings.items():
        if not (key.startswith(_PREFIX) and key.endswith(_SUFFIX)) or len(key) <= len(_PREFIX) + len(_SUFFIX):
            continue
        if value in POLICIES:
            out[key[len(_PREFIX) : -len(_SUFFIX)]] = cast(Policy, value)
        else:
            log.warning("setting %s is %r; expected auto, confirm or deny (ignoring it)", key, value)
    return out


def file_policies(file: Mapping[str, Any]) -> dict[str, Policy]:
    """``[agent.tool_policies]`` of noteloom.toml, over the deprecated ``[chat.tool_policies]``."""
    out: dict[str, Policy] = {}
    for table in ("chat", "agent"):
        section = file.get(table, {})
        policies = section.get("tool_policies", {}) if isinstance(section, dict) else {}
        if not isinstance(policies, dict):
            raise ConfigError(f"[{table}.tool_policies] must be a table of tool = \"auto\" | \"confirm\" | \"deny\"")
        for name, value in policies.items():
            if value not in POLICIES:
                raise ConfigError(f"[{table}.tool_policies] {name} = {value!r}: use one of {', '.join(POLICIES)}")
            out[str(name)] = cast(Policy, value)
    return out


def check_policy(value: Any) -> Policy:
    if value not in POLICIES:
        raise ValueError(f"{value!r} is not a policy; use one of {', '.join(POLICIES)}")
    return cast(Policy, value)


def set_policy(workspace: Workspace, name: str, policy: Policy | None) -> None:
    """Store (or, with ``None``, forget) the workspace setting of tool ``name``."""
    key = POLICY_KEY.format(name=name)
    if policy is None:
        workspace.delete_setting(key)
    else:
        workspace.set_setting(key, check_policy(policy))


# -- plain-language descriptions ------------------------------------------------------------


def note_label(workspace: Workspace, note_id: str, user: User | None = None) -> str:
    """``'Packing list' (Travel/Packing)`` for a note id, or ``note 'ID'`` when it is gone;
    with ``user``, a note they may not see is named as such, never by its title.

    Blocking (it queries the database)."""
    try:
        note = workspace.get_note(note_id, include_deleted=True)
    except NotFound:
        return f"note {note_id!r}"
    if user is not None and not sees_notebook(workspace, user, note.notebook_id):
        return "a note you cannot see"
    path: list[str] = []
    book_id: str | None = note.notebook_id
    while book_id and len(path) < 64:
        try:
            book = workspace.get_notebook(book_id)
        except NotFound:
            break
        path.append(book.title)
        book_id = book.parent_id
    where = f" ({'/'.join(reversed(path))})" if path else ""
    return f"{_quote(note.title)}{where}"


def describe_call(tool: ToolDef, args: Mapping[str, Any], workspace: Workspace, user: User | None = None) -> str:
    """The line a person reads before signing a call off (blocking: notes are named by title,
    as ``user`` may see them)."""
    try:
        return tool.describe_call(args, lambda note_id: note_label(workspace, note_id, user))
    except Exception:  # a description must never stop the card from showing
        log.exception("could not describe a call of %s", tool.name)
        return tool.describe_call(args, lambda note_id: f"note {note_id!r}")


def _quote(text: str, limit: int = 60) -> str:
    s = " ".join(text.split())
    return "'" + (s if len(s) <= limit else s[: limit - 1] + "…") + "'"
