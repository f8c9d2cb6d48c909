"""What the chat keeps: conversations, messages, turn events, pending actions, proposed edits.

Plain frozen dataclasses; the stores build them from rows and the surfaces turn
them into JSON. Statuses and event kinds are closed ``Literal`` sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any, Literal, get_args

from noteloom.agent.events import Budgets
from noteloom.errors import InvalidInput
from noteloom.messages import Message, Usage
from noteloom.policy import POLICIES, Policy
from noteloom.providers.base import THINKING_LEVELS, ThinkingLevel
from noteloom.runs.store import RunEvent

ChatRole = Literal["user", "assistant", "note"]
MessageStatus = Literal["running", "complete", "failed", "cancelled", "awaiting_confirmation"]
#: A turn in one of these states is not running: nothing will change it but a user's action.
SETTLED: frozenset[str] = frozenset({"complete", "failed", "cancelled", "awaiting_confirmation"})
ActionStatus = Literal["pending", "approved", "declined"]
EditStatus = Literal["proposed", "accepted", "rejected", "undone"]
#: The kind of the run (``noteloom.runs``) of a turn; the run's id is the assistant message's.
TURN_RUN = "chat_turn"
EventKind = Literal[
    "status",  # the turn's status changed (running, after a confirmation, or settled)
    "activity",  # a stage label: "Waiting for model…", "Running tool: search_notes…"
    "text",  # a piece of answer text
    "thinking",  # a piece of reasoning
    "tool_call",  # the model asked for a tool
    "tool_result",  # a tool answered
    "usage",  # tokens and cost so far
    "edit",  # a proposed edit to the open note
    "pending_action",  # a call waits for the user's approval
    "privacy_warning",  # the model is not private and the chat holds private content (first, when said)
    "error",  # the turn failed; the data carries the classified code and message
    "done",  # the turn settled; always the last event of a run
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
#: A conversation's capability toggles, and the tools each one offers (off: none of them, and
#: nothing of that kind in the prompt). Web tools come later: the toggle exists already.
CAPABILITY_TOOLS: dict[str, tuple[str, ...]] = {
    "memory_access": ("remember", "recall", "forget"),
    "history_access": ("search_conversations",),
    "web_access": ("fetch_url", "web_search", "clip_url"),
    "data_access": ("describe_data", "query_data"),
}
CAPABILITIES: tuple[str, ...] = tuple(CAPABILITY_TOOLS)
#: How a conversation's attachments reach the model (``Controls.attachment_mode``).
ATTACHMENT_MODES: tuple[str, ...] = ("extract", "on_demand", "original")
#: The command of the note row ``/clear`` writes: history sent to a model starts after it.
CLEAR_COMMAND = "clear"


@dataclass(frozen=True)
class Controls:
    """A conversation's model controls and capability toggles; ``None`` = the setting's default."""

    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    thinking_level: ThinkingLevel | None = None
    instructions: str | None = None
    #: Offer workspace tools at all (search, read, write notes).
    workspace_tools: bool = True
    #: Offer the workspace tools that write (still only those enabled in the registry).
    workspace_writes: bool = True
    #: Budgets per turn (``max_tokens`` above is the output-token one); ``None`` leaves
    #: each to ``[agent]`` in noteloom.toml, then to the default.
    max_steps: int | None = None
    #: USD, as an exact decimal string ("0.10").
    max_cost: str | None = None
    #: Seconds of wall-clock time.
    time_limit: float | None = None
    #: This conversation's own tool policies (tool name -> auto | confirm | deny), the last
    #: layer of noteloom.policy; ``deny`` from any other layer still wins.
    tool_policies: dict[str, Policy] = field(default_factory=dict)
    #: Capabilities; ``None`` = the default. Memory (remember, recall, forget and the memory
    #: context in the prompt) follows the workspace's ``chat.memory_default``, on unless set
    #: off; history (search_conversations), web and data (describe_data, query_data) are off.
    memory_access: bool | None = None
    history_access: bool | None = None
    web_access: bool | None = None
    data_access: bool | None = None
    #: The data sources generic reads may use here (``None``: every source the workspace opted in).
    data_sources: list[str] | None = None
    #: How attachments reach the model (``noteloom.attachments.Mode``): ``extract`` (text
    #: first), ``on_demand`` (text first, and ``view_attachment`` for the original) or
    #: ``original`` (whole files where the model takes them); ``None`` = ``extract``.
    attachment_mode: str | None = None

    def budgets(self) -> Budgets:
        """This conversation's budget layer (the output tokens from ``max_tokens``)."""
        return Budgets(self.max_steps, self.max_tokens, None if self.max_cost is None else Decimal(self.max_cost),
                       self.time_limit)

    def merged(self, changes: dict[str, Any]) -> Controls:
        """These controls with ``changes`` applied and checked; unknown keys are refused."""
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise InvalidInput(f"unknown control {unknown[0]!r}; known controls: {', '.join(sorted(names))}",
                               field=unknown[0])
        return check_controls(replace(self, **changes))


def check_controls(c: Controls) -> Controls:
    """``c`` if every control is in range; ``InvalidInput`` naming the first one that is not."""
    if c.model is not None and (not isinstance(c.model, str) or not c.model.strip() or len(c.model) > 200):
        raise InvalidInput(f"model {c.model!r} is not a model name; write it as provider:model, e.g. echo:echo",
                           field="model")
    if c.temperature is not None and not _number_in(c.temperature, 0.0, 2.0):
        raise InvalidInput(f"temperature {c.temperature!r} is out of range; use a number from 0 to 2",
                           field="temperature")
    if c.top_p is not None and not _number_in(c.top_p, 0.0, 1.0):
        raise InvalidInput(f"top_p {c.top_p!r} is out of range; use a number from 0 to 1", field="top_p")
    if c.max_tokens is not None and (
        isinstance(c.max_tokens, bool) or not isinstance(c.max_tokens, int) or not 1 <= c.max_tokens <= 1_000_000
    ):
        raise InvalidInput(f"max_tokens {c.max_tokens!r} is out of range; use a whole number from 1 to 1000000",
                           field="max_tokens")
    if c.thinking_level is not None and c.thinking_level not in THINKING_LEVELS:
        raise InvalidInput(
            f"thinking_level {c.thinking_level!r} is unknown; use one of {', '.join(THINKING_LEVELS)}",
            field="thinking_level",
        )
    if c.instructions is not None and len(c.instructions) > 20_000:
        raise InvalidInput(f"instructions are {len(c.instructions)} characters long; keep them under 20000",
                           field="instructions")
    for name in ("workspace_tools", "workspace_writes"):
        if not isinstance(getattr(c, name), bool):
            raise InvalidInput(f"{name} must be true or false, not {getattr(c, name)!r}", field=name)
    for name in CAPABILITIES:
        value = getattr(c, name)
        if value is not None and not isinstance(value, bool):
            raise InvalidInput(f"{name} must be true, false or null (the default), not {value!r}", field=name)
    if c.data_sources is not None:
        sources = c.data_sources
        if (not isinstance(sources, list | tuple) or len(sources) > 200
                or not all(isinstance(x, str) and 0 < len(x.strip()) <= 200 for x in sources)):
            raise InvalidInput("data_sources must be a list of data source names (at most 200), or null for every "
                               "source the workspace opted in; describe_data lists them", field="data_sources")
        c = replace(c, data_sources=list(dict.fromkeys(x.strip() for x in sources)))
    if c.attachment_mode is not None and c.attachment_mode not in ATTACHMENT_MODES:
        raise InvalidInput(
            f"attachment_mode {c.attachment_mode!r} is unknown; use one of {', '.join(ATTACHMENT_MODES)}, "
            "or null for the default (extract)", field="attachment_mode")
    if c.max_steps is not None and not (isinstance(c.max_steps, int) and not isinstance(c.max_steps, bool)
                                        and 1 <= c.max_steps <= 1000):
        raise InvalidInput(f"max_steps {c.max_steps!r} is out of range; use a whole number from 1 to 1000",
                           field="max_steps")
    if c.time_limit is not None and not _number_in(c.time_limit, 1.0, 86_400.0):
        raise InvalidInput(f"time_limit {c.time_limit!r} is out of range; use a number of seconds from 1 to 86400",
                           field="time_limit")
    if not isinstance(c.tool_policies, dict) or len(c.tool_policies) > 200:
        raise InvalidInput("tool_policies must be an object of tool name to \"auto\", \"confirm\" or \"deny\"",
                           field="tool_policies")
    for name, value in c.tool_policies.items():
        if not isinstance(name, str) or not 0 < len(name) <= 100 or value not in POLICIES:
            raise InvalidInput(
                f"tool_policies: {name!r} = {value!r}; give a tool's name and one of {', '.join(POLICIES)}",
                field="tool_policies",
            )
    if c.max_cost is not None:
        try:
            cost = Budgets.checked(max_cost=c.max_cost).max_cost
        except InvalidInput:
            cost = None
        if cost is None or cost > 1_000_000:
            raise InvalidInput(f"max_cost {c.max_cost!r} is not an amount in USD; write it as a decimal string, e.g. \"0.10\"",
                           field="max_cost")
        # One spelling per amount, and it fits the column.
        c = replace(c, max_cost=format(cost.normalize(), "f"), time_limit=None if c.time_limit is None else float(c.time_limit))
    elif c.time_limit is not None:
        c = replace(c, time_limit=float(c.time_limit))
    return c


def _number_in(value: Any, low: float, high: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


@dataclass(frozen=True)
class Conversation:
    id: str
    user_id: str
    title: str
    pinned: bool
    controls: Controls
    input_tokens: int
    output_tokens: int
    #: The sum of the priced turns; ``unpriced_turns`` > 0 makes it a lower bound.
    cost_usd: Decimal
    unpriced_turns: int
    created_time: int
    updated_time: int
    deleted_time: int | None = None
    #: standard | private | fortress (``noteloom.chat.sealing``).
    security_level: str = "standard"
    #: Protected and read without its owner's keys: the title is a placeholder and the
    #: instructions are not shown.
    locked: bool = False

    @property
    def protected(self) -> bool:
        return self.security_level in ("private", "fortress")


@dataclass(frozen=True)
class Selection:
    """A selected range of a note body, in code points (not UTF-16 units), and its text then."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class NoteContext:
    """The note the user had open when sending, and what was selected in it."""

    note_id: str
    selection: Selection | None = None


@dataclass(frozen=True)
class ChatMessage:
    id: str
    conversation_id: str
    position: int
    role: ChatRole
    #: The visible text (Markdown): the user's words, the assistant's answer, a note's output.
    content: str
    status: MessageStatus
    created_time: int
    updated_time: int
    #: Assistant rows: the canonical messages of the turn, replayed as history.
    transcript: tuple[Message, ...] = ()
    error_code: str | None = None
    error_message: str | None = None
    activity: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    #: ``None``: nobody knows the price (never a made-up zero).
    cost_usd: Decimal | None = None
    note_context: NoteContext | None = None
    #: Note rows: the slash command that wrote them.
    command: str | None = None
    started_time: int | None = None
    finished_time: int | None = None
    #: Assistant rows: the memories the turn's prompt was given (id, title, layer 1 or 2);
    #: ``None`` when memory was off (or the turn is older than memory).
    memories: tuple[dict[str, Any], ...] | None = None
    #: Stored sealed (its conversation is protected).
    sealed: bool = False
    #: Sealed and read without its owner's keys: content, transcript, error and the
    #: selected text are empty here (and must not be written back).
    locked: bool = False
    #: The message this one follows (``None``: the first); see ``noteloom.chat.branches``.
    parent_id: str | None = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED


#: One stored event of a turn: its run's event (``noteloom.runs``); ``seq`` counts from 1
#: per assistant message, ``kind`` is one of ``EventKind``.
TurnEvent = RunEvent


@dataclass(frozen=True)
class PendingAction:
    """A tool call held for the user's approval."""

    id: str
    message_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    description: str
    status: ActionStatus
    created_time: int
    decided_time: int | None = None
    #: Sealed and read without its owner's keys: arguments and description are empty.
    locked: bool = False


@dataclass(frozen=True)
class ProposedEdit:
    """A change to a note a session tool proposed; the user accepts or rejects it.

    ``span_start``/``span_end`` locate ``old_text`` in the body as it was when proposed;
    accepting replaces it with ``new_text`` — only if ``old_text`` is still there.
    """

    id: str
    message_id: str
    note_id: str
    tool: str
    anchor: str | None
    span_start: int
    span_end: int
    old_text: str
    new_text: str
    text: str
    status: EditStatus
    created_time: int
    revision_id: str | None = None
    applied_time: int | None = None
    decided_time: int | None = None
