"""The chat's JSON API under ``/api/v1/chat``: send, poll, stream events, cancel, confirm,
proposed edits, and conversation housekeeping. Documented by the OpenAPI schema.

Every route acts for the user whose token came with the request; another user's
conversation reads as missing. Errors are ``{"error": code, "message": text}``:
404 missing, 409 a clash with the current state (a turn already running, an edit
that no longer fits), 422 bad input naming the field, 503 when the chat's turn
runner is not running (``api_base.HTTP_ERRORS`` maps them all).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Annotated, Any, Literal
from urllib.parse import quote

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from noteloom.app import App
from noteloom.attachments import AttachmentLimits
from noteloom.chat import ChatService
from noteloom.chat.attachments import Attachment, Upload
from noteloom.chat.records import Conversation
from noteloom.chat.search import PROTECTED_SKIPPED
from noteloom.chat.service import SendResult
from noteloom.chat.views import conversation_view
from noteloom.errors import Unavailable
from noteloom.jsonvalues import dumps, encodable, find_problem
from noteloom.vault import Vault
from noteloom.web.api_base import (
    ERRORS,
    ID_PATTERN,
    MAX_COUNT,
    NO_NUL,
    ApiError,
    ApiJSONResponse,
    IdPath,
    NoteOut,
    StrictModel,
    checked_body,
    install_error_handlers,
    note_out,
    user_of,
)
from noteloom.web.limits import allow_uploads
from noteloom.web.render import render_markdown
from noteloom.web.vault_api import keys_of

# -- payloads ---------------------------------------------------------------------------


class SelectionIn(StrictModel):
    start: int = Field(ge=0, le=MAX_COUNT, description="First selected character (code points, not UTF-16 units).")
    end: int = Field(ge=0, le=MAX_COUNT, description="One past the last selected character.")

    @model_validator(mode="after")
    def _ordered(self) -> SelectionIn:
        if self.end < self.start:
            raise ValueError("end must not be before start")
        return self


class NoteContextIn(StrictModel):
    note_id: str = Field(pattern=ID_PATTERN, description="The note open beside the chat.")
    selection: SelectionIn | None = None


class ControlsIn(StrictModel):
    """A conversation's controls; a field left out keeps its value, ``null`` resets it to the default."""

    model: str | None = Field(None, min_length=1, max_length=200, description="provider:model, e.g. echo:echo")
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000, description="Output-token budget per turn.")
    thinking_level: Literal["off", "low", "medium", "high"] | None = None
    instructions: str | None = Field(None, max_length=20_000, description="This chat's voice; null = default.")
    workspace_tools: bool | None = Field(None, description="Offer workspace tools at all.")
    workspace_writes: bool | None = Field(None, description="Offer the workspace tools that write.")
    max_steps: int | None = Field(None, ge=1, le=1000, description="Model calls per turn; null = [agent] or 8.")
    max_cost: Decimal | None = Field(
        None, ge=0, le=1_000_000, max_digits=20, decimal_places=10, allow_inf_nan=False,
        description="USD per turn (priced calls only), as a number or a decimal string; null = [agent].",
    )
    time_limit: float | None = Field(None, ge=1, le=86_400, allow_inf_nan=False,
                                     description="Seconds of wall-clock time per turn; null = [agent].")
    tool_policies: dict[str, Literal["auto", "confirm", "deny"]] | None = Field(
        None, max_length=200,
        description="This conversation's tool policies, over the workspace's and noteloom.toml's "
                    "(a deny from those still wins); replaces the whole set, null clears it.",
    )
    memory_access: bool | None = Field(
        None, description="The memory tools and the memories in the prompt; null = the workspace's default "
                          "(GET /api/v1/chat/models says it).")
    history_access: bool | None = Field(None, description="search_conversations over your past chats; null = off.")
    web_access: bool | None = Field(
        None, description="The web tools (fetch_url, web_search, clip_url; each also enabled under tools); null = off.")
    data_access: bool | None = Field(None, description="describe_data and query_data; null = off.")
    data_sources: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, max_length=200,
        description="The data sources this chat's generic reads may use; null = every source the workspace opted in.")
    attachment_mode: Literal["extract", "on_demand", "original"] | None = Field(
        None, description="How attachments reach the model: extract (their text), on_demand (their text, and "
                          "view_attachment for an original), original (whole files where the model takes "
                          "them); null = extract.")

    def changes(self) -> dict[str, Any]:
        out = self.model_dump(exclude_unset=True)
        for flag in ("workspace_tools", "workspace_writes"):
            if flag in out and out[flag] is None:
                del out[flag]  # a toggle has no "default" to fall back to
        if "tool_policies" in out and out["tool_policies"] is None:
            out["tool_policies"] = {}
        return out


class SendIn(StrictModel):
    message: str = Field("", max_length=100_000,
                         description="Text, or a slash command; may be empty when a file is attached.")
    conversation_id: str | None = Field(None, pattern=ID_PATTERN, description="Omit to start a conversation.")
    note_context: NoteContextIn | None = None
    controls: ControlsIn | None = None
    security_level: Literal["standard", "private", "fortress"] | None = Field(
        None, description="A new chat's level (with conversation_id omitted); private and fortress need your "
                          "vault unlocked (423 otherwise). Change an existing chat's with PATCH.")


class SendOut(BaseModel):
    conversation_id: str
    message_id: str = Field(description="The assistant message to poll, or the note a slash command wrote.")
    status: str
    user_message_id: str | None = None
    created_conversation: bool = False
    privacy_warning: str | None = Field(
        None, description="Set when the turn's model is not private and the chat holds private content "
        "(attached files, or the note open beside it); the turn still runs.")


class EditIn(StrictModel):
    message: str = Field(min_length=1, max_length=100_000, description="The question's new text.")


class ConfirmIn(StrictModel):
    decision: Literal["approve", "decline"]


class ConversationPatch(StrictModel):
    title: str | None = Field(None, min_length=1, max_length=200)
    pinned: bool | None = None
    controls: ControlsIn | None = None
    deleted: Literal[False] | None = Field(None, description="false restores a deleted conversation.")
    security_level: Literal["standard", "private", "fortress"] | None = Field(
        None, description="Raise (seals what is stored; no unlock needed) or lower (opens it; 423 unless your "
                          "vault is unlocked). Fortress needs a private model: set controls.model with it, "
                          "or 422 names the model. 409 while a turn runs or waits for a decision.")


class UsageOut(BaseModel):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class ControlsOut(BaseModel):
    model: str | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    thinking_level: str | None
    instructions: str | None
    workspace_tools: bool
    workspace_writes: bool
    max_steps: int | None = None
    max_cost: str | None = Field(None, description="USD, exact.")
    time_limit: float | None = None
    tool_policies: dict[str, str] = Field(default_factory=dict)
    memory_access: bool | None = Field(None, description="null: the workspace's default.")
    history_access: bool | None = None
    web_access: bool | None = None
    data_access: bool | None = None
    data_sources: list[str] | None = None
    attachment_mode: Literal["extract", "on_demand", "original"] | None = Field(None, description="null: extract.")


class ConversationOut(BaseModel):
    id: str
    title: str
    pinned: bool
    controls: ControlsOut
    usage: UsageOut
    cost_usd: str | None = Field(description="USD, exact; a lower bound when unpriced_turns > 0.")
    unpriced_turns: int
    created_time: int
    updated_time: int
    deleted: bool
    security_level: Literal["standard", "private", "fortress"] = "standard"
    protected: bool = Field(False, description="private or fortress: its content is sealed at rest.")
    locked: bool = Field(False, description="Protected and your vault is locked: the title is a placeholder, "
                                            "the instructions are null, opening it answers 423.")


class DiffOp(BaseModel):
    op: Literal["equal", "insert", "delete"]
    text: str


class EditOut(BaseModel):
    id: str
    message_id: str
    note_id: str
    tool: str
    anchor: str | None
    status: Literal["proposed", "accepted", "rejected", "undone"]
    old_text: str
    new_text: str
    diff: list[DiffOp]
    created_time: int
    decided_time: int | None


class NamedOut(BaseModel):
    id: str
    kind: Literal["note", "notebook", "hidden"] = Field(
        description="hidden: a note or notebook you cannot see (named by neither title nor notebook).")
    title: str | None
    notebook: str | None = Field(description="A note's notebook path, e.g. Travel/Packing.")


class PendingOut(BaseModel):
    id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    description: str
    status: str
    created_time: int
    decided_time: int | None
    names: list[NamedOut] = Field(default_factory=list, description="The notes and notebooks the arguments name "
                                  "by id, with their titles as you see them.")


Cell = str | int | float | bool | None


class ImageOut(BaseModel):
    type: Literal["image"]
    src: str = Field(description="/plugins/NAME/static/PATH (fetch it as is) or /attachments/ID (fetch it "
                                 "with the credential, as the page does)")
    alt: str


class MarkdownOut(BaseModel):
    type: Literal["markdown"]
    text: str
    html: str | None = Field(None, description="The text as sanitised HTML, as the answers have it.")


class ItemOut(BaseModel):
    title: str
    subtitle: str | None
    thumbnail: ImageOut | None


class ItemListOut(BaseModel):
    type: Literal["list"]
    items: list[ItemOut]


class TableOut(BaseModel):
    type: Literal["table"]
    columns: list[str]
    rows: list[list[Cell]]


class KeyValuesOut(BaseModel):
    type: Literal["key_values"]
    pairs: list[tuple[str, Cell]]


class GalleryOut(BaseModel):
    type: Literal["gallery"]
    images: list[ImageOut]


RenderOut = Annotated[
    MarkdownOut | ItemListOut | TableOut | KeyValuesOut | GalleryOut | ImageOut, Field(discriminator="type")
]


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]
    status: Literal["pending", "done", "error"]
    result: str | None = Field(None, description="What the tool answered, as the model read it (JSON text for "
                                                 "most tools, or the error); null while it runs.")
    untrusted: bool = Field(False, description="The result holds text the user did not write (it was fenced "
                                               "for the model).")
    render: RenderOut | None = Field(None, description="How to show the result, from the tool's renderer; "
                                                        "null shows it as JSON.")


class ErrorInfo(BaseModel):
    code: str | None
    message: str | None


class RememberedOut(BaseModel):
    id: str
    title: str
    layer: Literal[1, 2]


class AttachmentOut(BaseModel):
    id: str = Field(description="The file's ref; GET /api/v1/chat/attachments/{id} returns its bytes.")
    name: str
    kind: Literal["image", "pdf", "text", "html"]
    mime: str
    size: int
    status: Literal["ok", "verbatim", "no_text", "failed", "not_needed"] = Field(
        description="How its text was extracted at upload (failed: not extractable; the model gets the "
                    "original where it can).")
    removed: bool = Field(False, description="Its bytes are gone (the conversation was deleted).")


class BranchOut(BaseModel):
    index: int = Field(description="Which branch this message is, from 1.")
    count: int
    ids: list[str] = Field(description="The message ids of the branches, oldest first.")


class MessageOut(BaseModel):
    id: str
    conversation_id: str
    position: int
    parent_id: str | None = Field(None, description="The message this one follows; null for a first message.")
    branch: BranchOut | None = Field(
        None, description="Set when this message has branches (regenerated answers, edited questions): "
                          "POST /messages/{id}/show shows another.")
    role: Literal["user", "assistant", "note"]
    status: Literal["running", "complete", "failed", "cancelled", "awaiting_confirmation"]
    content: str | None = Field(description="The final text (Markdown); null while running.")
    content_html: str | None = Field(None, description="The final text as sanitised HTML (not for user messages).")
    thinking: str | None = Field(None, description="The model's reasoning, when it showed any.")
    partial_text: str | None = Field(description="The answer so far, while running.")
    activity: str | None = Field(description="The stage label while running, e.g. 'Running tool: search_notes…'.")
    running_seconds: float | None
    model: str | None
    stop_reason: str | None
    error: ErrorInfo | None
    usage: UsageOut | None
    cost_usd: str | None
    cancelled: bool
    pending_action: PendingOut | None
    tool_calls: list[ToolCallOut]
    edits: list[EditOut]
    note_context: dict[str, Any] | None
    command: str | None
    memories: list[RememberedOut] | None = Field(
        None, description="The memories the turn's prompt was given (layer 1: in full, layer 2: the title); "
                          "null when memory was off.")
    attachments: list[AttachmentOut] | None = Field(None, description="A user message's files; null on others.")
    last_seq: int = Field(description="The last event number; stream events after it.")
    created_time: int
    finished_time: int | None


class ConversationDetail(ConversationOut):
    messages: list[MessageOut]


class TrashItem(BaseModel):
    id: str
    title: str = Field(description="'Locked chat' for a protected one while your vault is locked.")
    locked: bool
    deleted_time: int | None
    messages: int
    attachments: int = Field(description="Attachment records.")
    files: int = Field(description="Attachment files still stored (deleting a chat removes its files at once).")


class TrashTotals(BaseModel):
    conversations: int
    messages: int
    attachments: int
    files: int


class TrashOut(BaseModel):
    dry_run: bool
    conversations: list[TrashItem]
    totals: TrashTotals


class ConversationList(BaseModel):
    conversations: list[ConversationOut]
    search_locked: bool = Field(False, description="A search left your protected chats out because your vault "
                                                   "is locked; message says how to include them (never whether "
                                                   "they matched).")
    message: str | None = None


class CancelOut(BaseModel):
    already_settled: bool


class EditDecisionOut(BaseModel):
    edit: EditOut
    note: NoteOut | None = None


class CapabilitiesOut(BaseModel):
    vision: bool = Field(description="Reads images.")
    document: bool = Field(description="Reads whole PDFs natively.")


class ModelOption(BaseModel):
    id: str
    provider: str
    private: bool = Field(description="Traffic to it stays private: a server of your own, or one marked "
                          "private = true.")
    local: bool = Field(description="The older name of private, kept for clients that read it.")
    capabilities: CapabilitiesOut


class ProviderOut(BaseModel):
    name: str
    type: str
    ready: bool = Field(description="Usable now; when false, problem says why (a missing key, a bad setting).")
    problem: str | None
    private: bool = Field(description="Traffic to it stays private (a server of your own, or private = true).")
    models: list[str] = Field(description="Its models as provider:model (options only when ready).")


class ModelsOut(BaseModel):
    default_model: str | None
    models: list[ModelOption]
    providers: list[ProviderOut] = Field(default_factory=list, description="Every configured provider, usable "
                                         "or not.")
    defaults: dict[str, Any]
    capabilities: dict[str, bool] = Field(default_factory=dict,
                                          description="What each capability left to its default (null) is.")
    unavailable: dict[str, str] = Field(default_factory=dict,
                                        description="Capabilities that cannot be turned on here, and why.")


class PendingItem(BaseModel):
    message_id: str
    conversation_id: str
    conversation: str
    tool: str
    arguments: dict[str, Any]
    description: str
    locked: bool = Field(False, description="Of a protected chat while your vault is locked: the title is a "
                                            "placeholder, the arguments and card are not shown.")


# -- helpers ----------------------------------------------------------------------------


def _send_out(result: SendResult) -> dict[str, Any]:
    return {"conversation_id": result.conversation_id, "message_id": result.message_id, "status": result.status,
            "user_message_id": result.user_message_id, "created_conversation": result.created_conversation,
            "privacy_warning": result.privacy_warning}


def service_of(app: App) -> ChatService:
    service = app.services.chat
    if service is None:
        raise Unavailable("the chat is not running here; start noteloom with `noteloom serve`")
    return service


def conversation_out(c: Conversation) -> dict[str, Any]:
    return conversation_view(c)


def with_html(view: dict[str, Any]) -> dict[str, Any]:
    """Add the rendered answer (the page shows it; other clients may use the Markdown)."""
    if view["role"] != "user" and view.get("content"):
        view["content_html"] = render_markdown(view["content"])
    for call in view.get("tool_calls") or ():
        spec = call.get("render")
        if spec is not None and spec.get("type") == "markdown":
            call["render"] = {**spec, "html": render_markdown(spec["text"])}
    return view


async def rendered(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return await to_thread.run_sync(lambda: [with_html(v) for v in views])


SEND_PATH = "/api/v1/chat/send"
#: What a multipart body holds besides its files: the payload and the parts' framing.
FORM_OVERHEAD = 1024 * 1024
_SEND_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/SendIn"}},
            "multipart/form-data": {"schema": {
                "type": "object",
                "properties": {
                    "payload": {"type": "string", "description": "The JSON object of application/json, as text."},
                    "attachments": {"type": "array", "items": {"type": "string", "format": "binary"}, "maxItems": 5},
                },
                "required": ["payload"],
            }},
        },
    },
}


def attachment_limits(app: App) -> AttachmentLimits:
    service = app.services.chat
    if service is not None:
        return service.settings.attachments
    section = app.settings.file.get("attachments", {})
    return AttachmentLimits.from_settings(section if isinstance(section, dict) else {})


def upload_bytes(limits: AttachmentLimits) -> int:
    """The largest multipart body the send route takes: every file at the largest cap."""
    return limits.per_message * max(limits.image_bytes, limits.pdf_bytes, limits.text_bytes) + FORM_OVERHEAD


def _is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


async def _read_multipart(request: Request, limits: AttachmentLimits) -> tuple[SendIn, list[Upload]]:
    """The payload and the files of a multipart send; each file is spooled to a temporary
    file by the parser and read here up to one byte past the largest cap (the size check
    names the cap of its kind)."""
    try:
        form = await request.form(max_files=limits.per_message + 1, max_fields=8)
    except HTTPException as exc:  # the parser's refusal: too many files or fields, a field too large, bad framing
        if "files" in str(exc.detail).lower():
            raise ApiError(422, "invalid_input", f"attachments: {exc.detail} A message takes at most "
                           f"{limits.per_message} files.", "attachments") from None
        raise ApiError(422, "invalid_input", f"body: {exc.detail} Send the field payload (the JSON object, "
                       "under 1 MB) and files named attachments.", "body") from None
    try:
        unknown = sorted({k for k in form if k not in ("payload", "attachments")})
        if unknown:
            raise ApiError(422, "invalid_input", f"{unknown[0]}: unknown form field; send payload (the JSON "
                           "object) and files named attachments", unknown[0])
        payloads = form.getlist("payload")
        if len(payloads) > 1 or (payloads and not isinstance(payloads[0], str)):
            raise ApiError(422, "invalid_input", "payload: send one payload field holding the JSON object",
                           "payload")
        text = payloads[0] if payloads else "{}"
        assert isinstance(text, str)
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            raise ApiError(422, "invalid_input", "payload: not valid JSON; it holds the same object as a JSON "
                           "send", "payload") from None
        problem = find_problem(raw, forbid_nul=True)
        if problem is not None:
            field = f"payload.{problem.path}" if problem.path else "payload"
            raise ApiError(422, "invalid_input", f"{field}: {problem.message}", field)
        body = SendIn.model_validate(raw)
        largest = max(limits.image_bytes, limits.pdf_bytes, limits.text_bytes)
        files: list[Upload] = []
        for part in form.getlist("attachments"):
            if not isinstance(part, UploadFile):
                raise ApiError(422, "invalid_input", "attachments: each attachment must be a file part (with a "
                               "filename)", "attachments")
            files.append(Upload(part.filename or "", await part.read(largest + 1)))
        if len(files) > limits.per_message:
            raise ApiError(422, "invalid_input", f"attachments: {len(files)} files attached; a message takes at "
                           f"most {limits.per_message}", "attachments")
        return body, files
    finally:
        await form.close()


def attachment_response(att: Attachment, data: bytes) -> Response:
    """The bytes of an attachment, never a page of this origin: HTML is sent as plain text,
    nothing but images is inline, the sandbox CSP and nosniff apply to all of it."""
    media = "text/plain" if att.kind == "html" else att.mime
    if media.startswith("text/") or media == "application/json":
        media += "; charset=utf-8"
    ascii_name = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else "_" for ch in att.name)
    disposition = "inline" if att.kind == "image" else "attachment"
    return Response(data, media_type=media, headers={
        "Content-Disposition": f"{disposition}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(att.name, safe='')}",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, no-store",
    })


# -- routes -----------------------------------------------------------------------------


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/chat/...`` to the web app."""
    install_error_handlers(api)
    vault = Vault(app.engine)
    r = APIRouter(prefix="/api/v1/chat", tags=["chat"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    limits = attachment_limits(app)
    # The send route reads its own body (JSON, or multipart with files): no shared body check.
    uploads = APIRouter(prefix="/api/v1/chat", tags=["chat"], responses=ERRORS, default_response_class=ApiJSONResponse)
    allow_uploads(api, SEND_PATH, upload_bytes(limits))

    @uploads.post("/send", response_model=SendOut, status_code=202, openapi_extra=_SEND_BODY)
    async def send(request: Request) -> dict[str, Any]:
        """Store a message and start its turn in the background; poll or stream the returned message.

        The body is the JSON object, or `multipart/form-data` with that object as the field
        `payload` and up to 5 files as parts named `attachments` (images, PDF, text; the type
        is decided from the bytes). Then `message` may be empty. A file refused (its type, its
        size, too many, or a model that cannot read it) is a 422 naming it and the rule, and
        nothing is stored.

        A slash command (`/clear`, `/model ID`, `/system TEXT`, `/cost`) acts at once and
        returns the note it wrote, with status `complete`. 409 while a turn of the
        conversation is running or waits for a confirmation.
        """
        user = user_of(request)
        files: list[Upload] = []
        if _is_multipart(request):
            body, files = await _read_multipart(request, limits)
        else:
            await checked_body(request)
            try:
                raw = await request.json()
            except (ValueError, RecursionError):
                raise ApiError(422, "invalid_input", "body: the request body is not valid JSON; send one JSON "
                               "object, or multipart/form-data with a payload field", "body") from None
            body = SendIn.model_validate(raw)
        ctx = body.note_context
        chat = service_of(app)  # after the body is checked: a bad body is a 422 on any server
        result = await chat.send(
            user,
            body.message,
            conversation_id=body.conversation_id,
            note_id=ctx.note_id if ctx else None,
            selection=(ctx.selection.start, ctx.selection.end) if ctx and ctx.selection else None,
            controls=body.controls.changes() if body.controls else None,
            attachments=files,
            security_level=body.security_level,
            keys=await keys_of(request, vault),
        )
        return _send_out(result)

    @r.get(
        "/attachments/{attachment_id}",
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}}, "description": "The file's bytes."}},
    )
    async def attachment(request: Request, attachment_id: IdPath) -> Response:
        """An attached file's bytes: images inline, everything else as a download; never
        rendered as a page of this site (HTML comes back as plain text). 404 once deleted."""
        att, data = await service_of(app).attachment(user_of(request), attachment_id, await keys_of(request, vault))
        return attachment_response(att, data)

    @r.get("/messages/{message_id}", response_model=MessageOut)
    async def message(request: Request, message_id: IdPath) -> dict[str, Any]:
        """Poll a message: partial text, activity and running time while it runs; final content,
        usage, cost, pending action and proposed edits once settled."""
        keys = await keys_of(request, vault)
        return (await rendered([await service_of(app).message(user_of(request), message_id, keys)]))[0]

    @r.get(
        "/messages/{message_id}/events",
        response_class=EventSourceResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "Server-sent events."}},
    )
    async def events(
        request: Request,
        message_id: IdPath,
        after_seq: Annotated[int | None, Query(ge=0, le=MAX_COUNT, description="Send events after this number.")] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> EventSourceResponse:
        """The turn's events as server-sent events (`id` = sequence number, `event` = kind,
        `data` = JSON). Reconnect with `after_seq` or `Last-Event-ID` to resume without gaps or
        repeats; the stream ends after the turn settles (its `done` event)."""
        chat = service_of(app)
        user = user_of(request)
        start = after_seq
        if start is None and last_event_id:
            text = last_event_id.strip()
            # ASCII digits only (int() refuses "²", which isdigit() allows), and in range.
            if not (text.isascii() and text.isdigit() and len(text) <= 16 and int(text) <= MAX_COUNT):
                raise ApiError(422, "invalid_input", "Last-Event-ID: must be an event number", "Last-Event-ID")
            start = int(text)
        keys = await keys_of(request, vault)
        view = await chat.message(user, message_id, keys)
        if view["role"] != "assistant":
            raise ApiError(422, "invalid_input", f"message_id: {message_id!r} is not an assistant message",
                           "message_id")

        async def stream() -> AsyncIterator[ServerSentEvent]:
            async for event in chat.events(user, message_id, start or 0, keys):
                # encodable: one lone surrogate in a model's delta must not end the stream.
                yield ServerSentEvent(data=encodable(dumps(event.data)), event=event.kind, id=str(event.seq))

        return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    @r.post("/messages/{message_id}/regenerate", response_model=SendOut, status_code=202)
    async def regenerate(request: Request, message_id: IdPath) -> dict[str, Any]:
        """A new answer to the question of this message (an answer, or the question): a branch
        beside the old answer, which stays reachable. A failed answer is replaced instead (a
        retry: the question is never stored twice). 409 while a turn of the chat runs."""
        result = await service_of(app).regenerate(user_of(request), message_id, await keys_of(request, vault))
        return _send_out(result)

    @r.post("/messages/{message_id}/edit", response_model=SendOut, status_code=202)
    async def edit_and_resend(request: Request, message_id: IdPath, body: EditIn) -> dict[str, Any]:
        """Send new text in place of one of your questions: a branch beside it (the old question
        and its answers stay reachable), answered like a new message."""
        result = await service_of(app).edit_and_resend(user_of(request), message_id, body.message,
                                                        await keys_of(request, vault))
        return _send_out(result)

    @r.post("/messages/{message_id}/show", response_model=ConversationDetail)
    async def show_branch(request: Request, message_id: IdPath) -> dict[str, Any]:
        """Show the branch this message is on (down to its newest messages); the conversation
        as it then reads, and as the next turn's history follows it."""
        detail = await service_of(app).show_branch(user_of(request), message_id, await keys_of(request, vault))
        detail["messages"] = await rendered(detail["messages"])
        return detail

    @r.delete("/messages/{message_id}", status_code=204, response_class=Response)
    async def delete_turn(request: Request, message_id: IdPath) -> Response:
        """Delete one turn: the question with its answers (any of them names the turn), or a
        command's note, and their files. 409 while it runs or waits for a decision."""
        await service_of(app).delete_turn(user_of(request), message_id)
        return Response(status_code=204)

    @r.post("/messages/{message_id}/cancel", response_model=CancelOut)
    async def cancel(request: Request, message_id: IdPath) -> dict[str, Any]:
        """Ask a running turn to stop (within a second; partial text is kept).
        A settled turn answers `{"already_settled": true}`."""
        return {"already_settled": await service_of(app).cancel(user_of(request), message_id)}

    @r.post("/messages/{message_id}/confirm", response_model=MessageOut, status_code=202)
    async def confirm(request: Request, message_id: IdPath, body: ConfirmIn) -> dict[str, Any]:
        """Approve or decline the tool call the turn waits on; the same message continues
        (poll or stream it again)."""
        keys = await keys_of(request, vault)
        return (await rendered([await service_of(app).confirm(user_of(request), message_id, body.decision,
                                                              keys)]))[0]

    @r.post("/edits/{edit_id}/accept", response_model=EditDecisionOut)
    async def accept_edit(
        request: Request,
        edit_id: IdPath,
        applied: Annotated[bool, Query(description="The edit is in the note already: an editor applied it and "
                                                   "saved the note (one undo step there, one revision). Record "
                                                   "it as accepted and change nothing; 409 when the note does "
                                                   "not hold its new text.")] = False,
    ) -> dict[str, Any]:
        """Apply a proposed edit as one new version of the note. 409 when the text it replaces
        is no longer there (nothing is changed then). With `applied=true`, only record that an
        editor applied it (so it is never applied twice)."""
        chat, user = service_of(app), user_of(request)
        if applied:
            edit, note = await chat.record_applied_edit(user, edit_id)
        else:
            edit, note = await chat.accept_edit(user, edit_id)
        return {"edit": edit, "note": note_out(note)}

    @r.post("/edits/{edit_id}/reject", response_model=EditDecisionOut)
    async def reject_edit(request: Request, edit_id: IdPath) -> dict[str, Any]:
        """Drop a proposed edit."""
        return {"edit": await service_of(app).reject_edit(user_of(request), edit_id)}

    @r.post("/edits/{edit_id}/undo", response_model=EditDecisionOut)
    async def undo_edit(request: Request, edit_id: IdPath) -> dict[str, Any]:
        """Put the note back as it was before an accepted edit (409 if it changed since)."""
        edit, note = await service_of(app).undo_edit(user_of(request), edit_id)
        return {"edit": edit, "note": note_out(note)}

    @r.get("/conversations", response_model=ConversationList)
    async def conversations(
        request: Request,
        search: Annotated[str | None, Query(max_length=500, pattern=NO_NUL,
                                            description="Matched literally in titles and messages.")] = None,
        deleted: Annotated[bool, Query(description="List deleted conversations instead.")] = False,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_COUNT)] = 0,
    ) -> dict[str, Any]:
        """Your conversations: pinned first, then most recently active. A protected one shows
        `locked: true` and a placeholder title while your vault is locked. A search matches
        standard chats, and protected ones only while your vault is unlocked (else
        `search_locked: true` says they were left out)."""
        chat, user, keys = service_of(app), user_of(request), await keys_of(request, vault)
        found = await chat.conversations(user, search=search, deleted=deleted, limit=limit, offset=offset, keys=keys)
        skipped = await chat.search_skipped(user, search, keys)
        return {"conversations": [conversation_out(c) for c in found], "search_locked": skipped,
                "message": PROTECTED_SKIPPED if skipped else None}

    @r.get("/conversations/{conversation_id}", response_model=ConversationDetail)
    async def conversation(request: Request, conversation_id: IdPath) -> dict[str, Any]:
        """A conversation with every message (423 `locked` for a protected one while your vault
        is locked: unlock it, then ask again)."""
        detail = await service_of(app).conversation(user_of(request), conversation_id, await keys_of(request, vault))
        detail["messages"] = await rendered(detail["messages"])
        return detail

    @r.patch("/conversations/{conversation_id}", response_model=ConversationOut)
    async def update_conversation(request: Request, conversation_id: IdPath, body: ConversationPatch) -> dict[str, Any]:
        """Rename, pin or unpin, change controls, change the security level, or restore
        (`"deleted": false`)."""
        chat, user = service_of(app), user_of(request)
        if body.deleted is False:
            await chat.restore_conversation(user, conversation_id)
        conv = await chat.update_conversation(
            user, conversation_id, title=body.title, pinned=body.pinned,
            controls=body.controls.changes() if body.controls else None,
            security_level=body.security_level, keys=await keys_of(request, vault),
        )
        return conversation_out(conv)

    @r.delete("/conversations/{conversation_id}", status_code=204, response_class=Response)
    async def delete_conversation(
        request: Request,
        conversation_id: IdPath,
        permanent: Annotated[bool, Query(description="Purge for good, with every message, event and edit.")] = False,
    ) -> Response:
        """Delete a conversation (hidden, restorable), or purge it for good with `permanent=true`."""
        await service_of(app).delete_conversation(user_of(request), conversation_id, permanent=permanent)
        return Response(status_code=204)

    @r.delete("/trash", response_model=TrashOut)
    async def empty_trash(
        request: Request,
        dry_run: Annotated[bool, Query(description="Say what would be removed, and remove nothing.")] = False,
    ) -> dict[str, Any]:
        """Empty your chat trash: every deleted conversation purged for good with its messages,
        events, edits and attachments (rows and files). Answers what was removed (with
        `dry_run=true`: what would be, changing nothing). 409 while one still runs a turn."""
        return await service_of(app).empty_trash(user_of(request), dry_run=dry_run, keys=await keys_of(request, vault))

    @r.get(
        "/conversations/{conversation_id}/export",
        response_class=Response,
        responses={200: {"content": {"text/markdown": {}, "text/plain": {}}, "description": "The document."}},
    )
    async def export(
        request: Request,
        conversation_id: IdPath,
        format: Annotated[Literal["md", "txt"], Query(description="md = Markdown, txt = plain text.")] = "md",
    ) -> Response:
        """The conversation as Markdown or plain text: role-labelled turns, tool calls summarised
        (423 for a protected one while your vault is locked)."""
        name, text = await service_of(app).export(user_of(request), conversation_id, format,
                                                  await keys_of(request, vault))
        media = "text/markdown" if format == "md" else "text/plain"
        return Response(text, media_type=f"{media}; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    @r.get("/models", response_model=ModelsOut)
    async def models() -> dict[str, Any]:
        """Models to pick from, the default one, and the defaults of the other controls."""
        return service_of(app).models()

    @r.get("/pending", response_model=list[PendingItem])
    async def pending(request: Request) -> list[dict[str, Any]]:
        """Every tool call waiting for your approval, across conversations."""
        return await service_of(app).pending(user_of(request), await keys_of(request, vault))

    api.include_router(uploads)
    api.include_router(r)
    _document_model(api, SendIn)


def _document_model(api: FastAPI, model: type[BaseModel]) -> None:
    """Put ``model`` (a body a route reads itself) into the OpenAPI components it refers to."""
    build = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema:
            return api.openapi_schema
        schema = build()
        found = schema.setdefault("components", {}).setdefault("schemas", {})
        own = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in own.pop("$defs", {}).items():
            found.setdefault(name, definition)
        found.setdefault(model.__name__, own)
        return schema

    api.openapi = openapi  # type: ignore[method-assign]
