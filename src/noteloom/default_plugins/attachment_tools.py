"""``read_attachment``: a note's own file (imported from Joplin, or added to the note), read
the way the chat reads an attachment.

The file must belong to the note named, and the note must be one the tools may see (the
notebook scope, the trash: a note outside reads as missing). Its kind comes from the stored
bytes (:func:`noteloom.attachments.sniff`), never from the stored type; the caps of
``[attachments]`` apply. Text, PDF and HTML are given as their text (extracted on call, in
the child process, and kept in memory by attachment and version); images, and PDFs without a
text layer, are handed over whole as blocks where the reader takes them: an MCP client
(``model_capabilities`` is ``None``) always, a chat or recipe model as it declares. An image
a model cannot see is refused with what to do. Everything read is untrusted: fenced.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from anyio import to_thread

from noteloom.attachments import (
    AttachmentLimits,
    Extraction,
    Sniffed,
    check_size,
    encode,
    extract,
    refusal_for_model,
    sniff,
)
from noteloom.default_plugins.workspace_tools.schemas import output_schema_of
from noteloom.default_plugins.workspace_tools.scope import visible_note
from noteloom.errors import InvalidInput, NotFound
from noteloom.hooks import hookimpl
from noteloom.providers.base import ModelCapabilities
from noteloom.tools import FileCapabilities, ToolContext, ToolDef, ToolError, ToolResult
from noteloom.workspace import Attachment, Note

#: What a surface that hands files to its client as they are (MCP) may be given.
PASS_THROUGH = ModelCapabilities(vision=True, document=True)
#: Extractions kept, by (attachment, version, size, cap): a PDF's text is worth keeping
#: while a model reads it a few times over, not forever.
_KEPT = 32

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note_id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The note's id."},
        "attachment_id": {
            "type": "string", "minLength": 1, "maxLength": 64,
            "description": "The attachment's id (the note's body links it as :/ID).",
        },
    },
    "required": ["note_id", "attachment_id"],
    "additionalProperties": False,
}


_OUTPUT = output_schema_of(
    {
        "note_id": {"type": "string"},
        "attachment_id": {"type": "string"},
        "name": {"type": "string"},
        "kind": {"type": "string", "description": "What the bytes are: text, pdf, html, image …"},
        "mime": {"type": "string"},
        "size": {"type": "integer", "description": "Bytes."},
        "status": {"type": "string", "description": "How the text extraction went."},
        "text": {"type": "string"},
        "note": {"type": "string"},
        "file": {"type": "string", "description": "Says the whole file is attached to the result as content."},
    },
    ["note_id", "attachment_id", "name", "kind", "mime", "size", "status", "text"],
)


class _Extractions:
    """A few recent extractions, shared by the calls of one process."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[Any, ...], Extraction] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], make: Callable[[], Extraction]) -> Extraction:
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        found = make()
        if found.status != "failed":  # a timeout may pass on a quieter machine: try again next time
            with self._lock:
                self._kept[key] = found
                while len(self._kept) > self._size:
                    self._kept.popitem(last=False)
        return found


_EXTRACTIONS = _Extractions(_KEPT)


def _limits(ctx: ToolContext) -> AttachmentLimits:
    section = ctx.settings.get("attachments", {})
    return AttachmentLimits.from_settings(section if section is not None else {})


def _listing(attachments: list[Attachment]) -> str:
    if not attachments:
        return "it has no attachments"
    shown = ", ".join(f"{a.title or a.filename!r} ({a.id})" for a in attachments[:20])
    more = f" and {len(attachments) - 20} more" if len(attachments) > 20 else ""
    return f"its attachments are {shown}{more}"


def _find(ctx: ToolContext, note_id: str, attachment_id: str) -> tuple[Note, Attachment]:
    ws = ctx.workspace
    with ws.read() as c:
        note = visible_note(ctx, c, note_id)
        try:
            found = ws.get_attachment(attachment_id, conn=c)
        except NotFound:
            found = None
        if found is None or found.note_id != note.id:
            listing = _listing(ws.list_attachments(note.id, conn=c))
            raise ToolError(f"note {note_id!r} has no attachment {attachment_id!r}; {listing}")
    return note, found


def _read(ctx: ToolContext, args: dict[str, Any]) -> tuple[Attachment, Sniffed, bytes, Extraction, AttachmentLimits]:
    limits = _limits(ctx)
    _, att = _find(ctx, str(args["note_id"]), str(args["attachment_id"]))
    name = att.title or att.filename
    path = ctx.workspace.attachment_path(att.id, att.filename)
    try:
        size = path.stat().st_size
        # Over every cap at once: no need to read it to refuse it.
        if size > max(limits.image_bytes, limits.pdf_bytes, limits.text_bytes):
            check_size(Sniffed("pdf", "application/pdf"), size, limits, name=name)
        data = path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"the file of attachment {att.id!r} ({name!r}) is missing from the workspace") from None
    try:
        sniffed = sniff(data, att.filename)
        check_size(sniffed, len(data), limits, name=name)
    except InvalidInput as exc:
        raise ToolError(f"attachment {att.id!r} cannot be read: {exc}") from None
    key = (att.id, att.updated_time, len(data), limits.text_chars)
    extraction = _EXTRACTIONS.get(key, lambda: extract(data, sniffed, limits))
    return att, sniffed, data, extraction, limits


async def _read_attachment(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    att, sniffed, data, extraction, limits = await to_thread.run_sync(_read, ctx, args)
    caps: FileCapabilities = ctx.model_capabilities if ctx.model_capabilities is not None else PASS_THROUGH
    name = att.title or att.filename
    refusal = refusal_for_model(sniffed, "extract", caps)
    if refusal is not None:
        raise ToolError(f"attachment {name!r} is {sniffed.mime}, and {refusal}")
    encoded = encode(
        name=name, sniffed=sniffed, extraction=extraction, load=lambda: data, mode="extract",
        caps=caps, ref=att.id, text_chars=limits.text_chars,
    )
    payload: dict[str, Any] = {
        "note_id": att.note_id,
        "attachment_id": att.id,
        "name": name,
        "kind": sniffed.kind,
        "mime": sniffed.mime,
        "size": len(data),
        "status": extraction.status,
        "text": encoded.text,
    }
    if encoded.note is not None:
        payload["note"] = encoded.note
    if encoded.blocks:
        what = "image" if sniffed.kind == "image" else "document"
        payload["file"] = f"the whole file is attached to this result as {'an' if what == 'image' else 'a'} {what}"
    return ToolResult(payload, untrusted=True, blocks=encoded.blocks)


READ_ATTACHMENT = ToolDef(
    name="read_attachment",
    title="Read a note's attachment",
    description=(
        "Read a file attached to a note: the text of a PDF, HTML or text file; an image (or a PDF "
        "without text) as the file itself. Give the note's id and the attachment's id (the body links it as :/ID)."
    ),
    input_schema=_SCHEMA,
    output_schema=_OUTPUT,
    handler=_read_attachment,
    effect="read",
    untrusted_output=True,
    within_notebooks=True,
)


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    """Register ``read_attachment``."""
    register(READ_ATTACHMENT)
