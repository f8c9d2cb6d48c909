"""The tools of one chat turn: workspace tools from the registry plus session tools for
the note the user has open. Building the list is a pure function of its inputs.

- no note open → workspace tools only;
- a note, no selection → workspace tools + ``rewrite_paragraph``, ``insert_before_anchor``,
  ``insert_after_anchor``, ``append_to_note``, and ``replace_structured_block`` only
  when the note has a fenced block;
- a selection → workspace tools + ``edit_selection`` only.

Session tools never write: each call becomes a proposed edit the user accepts or
rejects (``propose_edit``). They act as the person asking all the same: a call on an open
note they may not see reads as a missing note, one on a note they may only read is refused
(``Forbidden``), so nothing is proposed that they could not accept. ``view_attachment`` is a session tool too: offered in the
``on_demand`` attachment mode, on a model that reads images or documents, when the
conversation has files; it returns one file's original by its ref, within the
conversation only (``view_attachment_tool``). The conversation's toggles narrow the workspace tools
(off, or read-only) and offer each capability's tools (memory, history, data) only while
it is on; they never add a tool the registry has disabled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anyio import to_thread

from noteloom.access import access_scope
from noteloom.chat.anchors import AnchorError, SessionTool, fenced_blocks, plan
from noteloom.chat.edits import Edits
from noteloom.chat.records import CAPABILITY_TOOLS, Controls, ProposedEdit, Selection
from noteloom.default_plugins.workspace_tools.scope import writable_note
from noteloom.errors import NotFound
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolResult

if TYPE_CHECKING:
    from noteloom.chat.attachments import Attachment

#: The proposer a turn hands in: records one session tool call as a proposed edit.
Proposer = Callable[[SessionTool, dict[str, Any]], Awaitable[dict[str, Any]]]

SESSION_TOOL_NAMES: tuple[SessionTool, ...] = (
    "edit_selection",
    "rewrite_paragraph",
    "insert_before_anchor",
    "insert_after_anchor",
    "append_to_note",
    "replace_structured_block",
)


@dataclass(frozen=True)
class FocusedNote:
    """The note open beside the chat, as it was when the message was sent."""

    note_id: str
    title: str
    body: str
    selection: Selection | None = None
    #: Clipped from the web (it has a source URL): the model reads it fenced, as material.
    untrusted: bool = False


_TEXT = {"type": "string", "description": "The new Markdown text."}
_ANCHOR = {
    "type": "string",
    "minLength": 1,
    "description": "A short phrase copied exactly from the note that occurs only once in it "
    "and lies in the paragraph meant.",
}
_SCHEMAS: dict[SessionTool, tuple[str, dict[str, Any]]] = {
    "edit_selection": (
        "Replace the text the user has selected in the open note with new text. The user "
        "reviews the change and accepts or rejects it.",
        {"text": _TEXT},
    ),
    "rewrite_paragraph": (
        "Replace the paragraph of the open note that contains the anchor phrase with new text "
        "(a paragraph is a run of lines between blank lines; a fenced block counts as one). "
        "The user reviews the change and accepts or rejects it.",
        {"anchor": _ANCHOR, "text": _TEXT},
    ),
    "insert_before_anchor": (
        "Insert new text as a paragraph just before the paragraph of the open note that "
        "contains the anchor phrase. The user reviews the change and accepts or rejects it.",
        {"anchor": _ANCHOR, "text": _TEXT},
    ),
    "insert_after_anchor": (
        "Insert new text as a paragraph just after the paragraph of the open note that "
        "contains the anchor phrase. The user reviews the change and accepts or rejects it.",
        {"anchor": _ANCHOR, "text": _TEXT},
    ),
    "append_to_note": (
        "Add new text at the end of the open note. The user reviews the change and accepts or rejects it.",
        {"text": _TEXT},
    ),
    "replace_structured_block": (
        "Replace the contents of the fenced code block of the open note whose tag (the word "
        "after the opening ``` fence, such as mermaid or json) is given; the fences stay. The "
        "user reviews the change and accepts or rejects it.",
        {"tag": {"type": "string", "minLength": 1, "description": "The block's tag, e.g. mermaid."}, "text": _TEXT},
    ),
}


def session_tool_names(note: FocusedNote | None) -> list[SessionTool]:
    """Which session tools a turn offers for ``note``."""
    if note is None:
        return []
    if note.selection is not None:
        return ["edit_selection"]
    names: list[SessionTool] = ["rewrite_paragraph", "insert_before_anchor", "insert_after_anchor", "append_to_note"]
    if fenced_blocks(note.body):
        names.append("replace_structured_block")
    return names


def workspace_tools(enabled: Sequence[ToolDef], controls: Controls, *, data_readable: bool = True) -> list[ToolDef]:
    """The registry's enabled tools, narrowed by the conversation's toggles: a capability's
    tools (memory, history, data, web) only while it is on — and then whatever the note
    toggles say — and the other tools by the workspace and writes toggles. ``controls`` is
    resolved: a capability left to its default counts as on only when it is ``True``.
    ``data_readable`` false (no source opted in, or the chat's allowlist leaves none) withholds
    the data tools even with data on: they would fail on every call."""
    out: list[ToolDef] = []
    for t in enabled:
        capability = capability_of(t.name)
        if capability is not None:
            if getattr(controls, capability) is True and (capability != "data_access" or data_readable):
                out.append(t)
        elif controls.workspace_tools and (controls.workspace_writes or t.effect == "read"):
            out.append(t)
    return out


def capability_of(tool_name: str) -> str | None:
    """The capability toggle that offers ``tool_name`` (``memory_access`` …), or ``None``."""
    for capability, names in CAPABILITY_TOOLS.items():
        if tool_name in names:
            return capability
    return None


def session_tool(name: SessionTool, propose: Proposer, note_id: str | None = None) -> ToolDef:
    """A session tool; with ``note_id`` (the open note) each call first checks, as the person
    the call acts for, that they may see and change that note."""
    description, props = _SCHEMAS[name]

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        if note_id is not None:
            await to_thread.run_sync(_check_open_note, ctx, note_id)
        return await propose(name, args)

    return ToolDef(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": props, "required": list(props), "additionalProperties": False},
        handler=handler,
        # Proposals change nothing until the user accepts them.
        effect="read",
        title=name.replace("_", " ").capitalize(),
    )


def turn_tools(note: FocusedNote | None, enabled: Sequence[ToolDef], controls: Controls, propose: Proposer, *,
               data_readable: bool = True) -> list[ToolDef]:
    """Every tool the turn offers; a session tool wins over a registry tool of the same name."""
    session = [session_tool(n, propose, note.note_id if note else None) for n in session_tool_names(note)]
    taken = {t.name for t in session}
    return [t for t in workspace_tools(enabled, controls, data_readable=data_readable) if t.name not in taken] + session


def _check_open_note(ctx: ToolContext, note_id: str) -> None:
    """The person's own access decides (the note is open beside their chat; the workspace's
    tool scope never hid it from session tools): the owner and admins may edit any note."""
    scope = access_scope(ctx.workspace, ctx.user)
    if scope is None:
        return
    with ctx.workspace.read() as c:
        writable_note(dataclasses.replace(ctx, scope=scope), c, note_id)


def is_session_tool(name: str) -> bool:
    return name in SESSION_TOOL_NAMES


def propose_edit(
    edits: Edits, message_id: str, focused: FocusedNote, tool: SessionTool, args: dict[str, Any]
) -> ProposedEdit:
    """Plan a session tool's edit against the note as it is now and store it as proposed.

    ``ToolError`` (seen by the model) when the anchor, tag or selection names no single place.
    """
    try:
        note = edits.workspace.get_note(focused.note_id)
    except NotFound:
        raise ToolError(f"the open note {focused.note_id!r} is gone or in the trash; nothing can be edited") from None
    text = str(args.get("text", ""))
    selection = None
    if tool == "edit_selection":
        sel = focused.selection
        if sel is None:
            raise ToolError("nothing is selected in the note; use another tool")
        selection = (sel.start, sel.end, sel.text)
    try:
        planned = plan(tool, note.body, text, anchor=args.get("anchor"), tag=args.get("tag"), selection=selection)
    except AnchorError as exc:
        raise ToolError(str(exc)) from None
    locator = args.get("tag") if tool == "replace_structured_block" else args.get("anchor")
    return edits.propose(message_id, note.id, tool, planned, text=text, anchor=locator)


VIEW_ATTACHMENT = "view_attachment"
#: What a turn hands in to open a file it may still read: its original as a tool result.
Opener = Callable[["Attachment"], Awaitable[ToolResult]]


def view_attachment_tool(files: Sequence[Attachment], open_original: Opener) -> ToolDef:
    """``view_attachment(ref)``: the original of one of ``files`` (this conversation's),
    resolved by its ref only — never by name; an unknown ref lists the ones there are."""
    by_ref: Mapping[str, Attachment] = {a.id: a for a in files}

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        ref = str(args.get("ref", "")).strip()
        found = by_ref.get(ref)
        if found is None:
            known = "; ".join(f"{a.id} ({a.name})" for a in files) or "none"
            raise ToolError(f"no attachment of this conversation has the ref {ref!r}; its refs are: {known}")
        return await open_original(found)

    return ToolDef(
        name=VIEW_ATTACHMENT,
        description=(
            "Read the original of a file the user attached to this conversation, when its text is not enough "
            "(a layout, a figure, a scanned page): PDFs come back as documents, images as images. Give the ref "
            "shown as [ref ID] beside the file."
        ),
        input_schema={
            "type": "object",
            "properties": {"ref": {"type": "string", "minLength": 1, "description": "The file's ref, e.g. the ID "
                                                                                      "in [ref ID]."}},
            "required": ["ref"],
            "additionalProperties": False,
        },
        handler=handler,
        effect="read",
        title="View attachment",
    )
