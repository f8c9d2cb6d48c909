"""Notes over JSON for the app's editor: list and search, read, create, save (with a guard
against overwriting a newer version; title, body, tags and the to-do fields), the trash and
back, attachments, revisions and restore.

Every route acts as the person asking, within their token's notebooks (``web/access.py``):
lists, searches and counts hold only what they may see, a note or notebook out of sight is
a 404 exactly like a missing one, and a change to a notebook shared with them to read only
is a 403."""

from __future__ import annotations

from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from pydantic import BaseModel, Field, StrictBool
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from noteloom.app import App
from noteloom.errors import ConfigError, Conflict, Forbidden, NotFound
from noteloom.search import search_notes
from noteloom.web.access import request_scope
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
)
from noteloom.web.limits import allow_uploads
from noteloom.web.render import render_markdown, safe_link
from noteloom.workspace import Note
from noteloom.workspace.model import MAX_TIME_MS

#: The largest file the editor may attach to a note (the server's body cap applies first).
#: The largest file a note takes by default (``[attachments] max_mb``: 10).
ATTACHMENT_BYTES = 10 * 1024 * 1024
#: What a multipart body carries besides the file (boundaries, part headers, the file name).
UPLOAD_OVERHEAD = 64 * 1024


class NoteCreate(StrictModel):
    title: str = Field(min_length=1, max_length=1000)
    body: str = Field("", max_length=10_000_000)
    notebook_id: str | None = Field(None, pattern=ID_PATTERN, description="Omit for the default notebook.")


class NotePatch(StrictModel):
    title: str | None = Field(None, min_length=1, max_length=1000)
    body: str | None = Field(None, max_length=10_000_000)
    tags: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None, max_length=200, description="The note's tags, all of them: those missing are removed, new ones made.")
    is_todo: StrictBool | None = None
    todo_due: int | None = Field(None, ge=0, le=MAX_TIME_MS,
                                 description="When the to-do is due (ms since 1970); null clears it.")
    todo_completed: int | None = Field(None, ge=0, le=MAX_TIME_MS,
                                       description="When the to-do was done (ms since 1970); null: not done.")
    base_updated_time: int | None = Field(
        None, ge=0, le=MAX_COUNT, description="The updated_time the edit started from; 409 if the note has changed since."
    )


class NoteDetail(NoteOut):
    """A note as the editor shows it: with its to-do fields, and whether it is in the trash."""

    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    deleted_time: int | None = Field(description="When it went to the trash; null for a live note.")
    created_time: int
    source_url: str | None = Field(None, description="Where the note came from, when that is an http, https or "
                                                     "mailto URL (anything else is withheld: it must not become a link).")
    writable: bool = Field(True, description="Whether you may change it (false: shared with you to read, or a "
                                             "read-only token).")


class RevisionOut(BaseModel):
    id: str
    title: str
    body: str


class AttachmentOut(BaseModel):
    id: str
    filename: str
    mime: str
    size: int


class PreviewIn(StrictModel):
    markdown: str = Field(max_length=10_000_000)


class PreviewOut(BaseModel):
    html: str = Field(description="Sanitised HTML.")


class NoteItem(BaseModel):
    id: str
    notebook_id: str
    title: str
    updated_time: int
    snippet: str | None = None
    is_todo: bool = False
    todo_due: int | None = None
    todo_completed: int | None = None


class NoteList(BaseModel):
    notes: list[NoteItem]


class RevisionItem(BaseModel):
    id: str
    title: str
    chars: int
    version_time: int = Field(description="When that version was written.")
    created_time: int = Field(description="When it was replaced.")


class RevisionList(BaseModel):
    revisions: list[RevisionItem]


class NotebookItem(BaseModel):
    id: str
    parent_id: str | None
    title: str
    note_count: int


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/notes`` and ``/api/v1/notebooks``."""
    install_error_handlers(api)
    ws = app.workspace
    r = APIRouter(prefix="/api/v1", tags=["notes"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    @r.get("/notes", response_model=NoteList)
    async def list_notes(
        request: Request,
        q: Annotated[str | None, Query(max_length=1000, pattern=NO_NUL,
                                       description="A search query; omit for the newest notes.")] = None,
        notebook_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_COUNT)] = 0,
    ) -> dict[str, Any]:
        """Recently changed notes, or the notes matching `q` (the search syntax of the app);
        only notes you may see."""
        scope = request_scope(request, ws)

        def books(c: Any) -> set[str] | None:
            visible = scope.visible_ids(c)
            if notebook_id is None:
                return visible
            return {notebook_id} if visible is None or notebook_id in visible else set()

        if q and q.strip():
            def search() -> list[Any]:
                with ws.read() as c:
                    return search_notes(ws, q, limit=limit, offset=offset, notebook_ids=books(c), conn=c)

            hits = await to_thread.run_sync(search)
            return {"notes": [{"id": h.id, "notebook_id": h.notebook_id, "title": h.title,
                               "updated_time": h.updated_time, "snippet": h.snippet} for h in hits]}

        def listing() -> list[Any]:
            with ws.read() as c:
                return ws.list_notes(notebook_id, limit=limit, offset=offset, notebook_ids=books(c), conn=c)

        rows = await to_thread.run_sync(listing)
        return {"notes": [{"id": n.id, "notebook_id": n.notebook_id, "title": n.title,
                           "updated_time": n.updated_time, "is_todo": n.is_todo, "todo_due": n.todo_due,
                           "todo_completed": n.todo_completed} for n in rows]}

    @r.post("/notes", response_model=NoteOut, status_code=201)
    async def create_note(request: Request, body: NoteCreate) -> dict[str, Any]:
        """Create a note: in `notebook_id` (one you may change), else in your default notebook
        (your first own notebook, made for you if you have none)."""
        scope = request_scope(request, ws)

        def create() -> Any:
            with ws.write() as c:
                book = scope.new_note_notebook(body.notebook_id, c)
                return ws.create_note(body.title, body.body, book, conn=c)

        return note_out(await to_thread.run_sync(create))

    @r.get("/notes/{note_id}", response_model=NoteDetail)
    async def get_note(
        request: Request, note_id: IdPath,
        trashed: Annotated[bool, Query(description="Answer for a note in the trash too (`deleted_time` set).")] = False,
    ) -> dict[str, Any]:
        scope = request_scope(request, ws)

        def read() -> tuple[Note, bool]:
            with ws.read() as c:
                note = scope.note(note_id, c, trashed=trashed)
                try:
                    scope.note(note_id, c, write=True, trashed=trashed)
                except Forbidden:
                    return note, False
                return note, not scope.tokens.read_only

        note, writable = await to_thread.run_sync(read)
        return {**note_detail(note), "writable": writable}

    @r.patch("/notes/{note_id}", response_model=NoteDetail)
    async def update_note(request: Request, note_id: IdPath, body: NotePatch) -> dict[str, Any]:
        """Save a new title, body, tags (the full list) and/or to-do fields; a new title or
        body keeps the previous version as a revision."""
        scope = request_scope(request, ws)
        sent = body.model_fields_set
        todo: dict[str, Any] = {k: getattr(body, k) for k in ("todo_due", "todo_completed") if k in sent}

        def save() -> Any:
            with ws.write() as c:
                current = scope.note(note_id, c, write=True)
                if body.base_updated_time is not None and body.base_updated_time != current.updated_time:
                    raise Conflict(
                        f"note {note_id!r} has changed since you opened it; reload it, then edit again"
                    )
                if body.tags is not None:
                    wanted = {t.strip().lower(): t.strip() for t in body.tags}
                    have = {t.lower() for t in current.tags}
                    ws.remove_tags(note_id, [t for t in current.tags if t.lower() not in wanted], conn=c)
                    ws.add_tags(note_id, [t for k, t in wanted.items() if k not in have], conn=c)
                return ws.update_note(note_id, title=body.title, body=body.body, is_todo=body.is_todo,
                                      conn=c, **todo)

        return note_detail(await to_thread.run_sync(save))

    @r.delete("/notes/{note_id}", status_code=204, response_class=Response)
    async def trash_note(request: Request, note_id: IdPath) -> Response:
        """Move a note to the trash (`POST .../restore` brings it back)."""
        scope = request_scope(request, ws)

        def run() -> None:
            with ws.write() as c:
                scope.note(note_id, c, write=True)
                ws.delete_note(note_id, conn=c)

        await to_thread.run_sync(run)
        return Response(status_code=204)

    @r.post("/notes/{note_id}/restore", response_model=NoteDetail)
    async def restore_note(request: Request, note_id: IdPath) -> dict[str, Any]:
        """Bring a note back from the trash, to its notebook (or, when that is gone, to the
        default one: refused with 403 if you may not write there)."""
        scope = request_scope(request, ws)

        def run() -> Any:
            with ws.write() as c:
                note = scope.note(note_id, c, write=True, trashed=True)
                if note.deleted_time is None:
                    raise Conflict(f"note {note_id!r} is not in the trash")
                ws.restore(note_id, conn=c)
                try:
                    return scope.note(note_id, c, write=True)
                except NotFound:  # its notebook is gone and the fallback is out of sight
                    raise Forbidden(f"note {note_id!r} would come back in a notebook you may not use (its own "
                                    "is gone); restore that notebook first, or ask its owner") from None

        return note_detail(await to_thread.run_sync(run))

    @r.get("/notes/{note_id}/revisions", response_model=RevisionList)
    async def revisions(request: Request, note_id: IdPath) -> dict[str, Any]:
        """Earlier versions, newest first (of a note in the trash too)."""
        scope = request_scope(request, ws)

        def listing() -> list[Any]:
            with ws.read() as c:
                scope.note(note_id, c, trashed=True)
                return ws.list_revisions(note_id, conn=c)

        revs = await to_thread.run_sync(listing)
        return {"revisions": [{"id": v.id, "title": v.title, "chars": v.chars, "version_time": v.version_time,
                               "created_time": v.created_time} for v in revs]}

    @r.get("/notes/{note_id}/revisions/{revision_id}", response_model=RevisionOut)
    async def revision(request: Request, note_id: IdPath, revision_id: IdPath) -> dict[str, Any]:
        """An earlier version's full title and body (to compare with the current one)."""
        scope = request_scope(request, ws)

        def read() -> tuple[str, str]:
            with ws.read() as c:
                scope.note(note_id, c, trashed=True)
                if not any(v.id == revision_id for v in ws.list_revisions(note_id, conn=c)):
                    raise NotFound(f"revision {revision_id!r} is not a version of note {note_id!r}")
                return ws.revision_text(revision_id, conn=c)

        title, text = await to_thread.run_sync(read)
        return {"id": revision_id, "title": title, "body": text}

    @r.post("/notes/{note_id}/revisions/{revision_id}/restore", response_model=NoteDetail)
    async def restore(request: Request, note_id: IdPath, revision_id: IdPath) -> dict[str, Any]:
        """Make an earlier version current (the current one becomes a revision too)."""
        scope = request_scope(request, ws)

        def run() -> Any:
            with ws.write() as c:
                scope.note(note_id, c, write=True)
                if not any(v.id == revision_id for v in ws.list_revisions(note_id, conn=c)):
                    raise Conflict(f"revision {revision_id!r} is not a version of note {note_id!r}")
                return ws.restore_revision(revision_id, conn=c)

        return note_detail(await to_thread.run_sync(run))

    @r.post("/notes/preview", response_model=PreviewOut)
    async def preview(request: Request, body: PreviewIn) -> dict[str, Any]:
        """Markdown rendered to safe HTML, as the note pages show it."""
        request_scope(request, ws)
        return {"html": await to_thread.run_sync(render_markdown, body.markdown)}

    @r.get("/notebooks", response_model=list[NotebookItem])
    async def notebooks(request: Request) -> list[dict[str, Any]]:
        """The notebooks you may see, with their notes' counts (a notebook shared with you
        without its parent shows at the top)."""
        scope = request_scope(request, ws)

        def listing() -> list[Any]:
            with ws.read() as c:
                return scope.visible_notebooks(c)

        books = await to_thread.run_sync(listing)
        return [{"id": b.id, "parent_id": b.parent_id, "title": b.title, "note_count": b.note_count} for b in books]

    api.include_router(r)
    limit_mb = note_file_mb(app)
    # The route's multipart body may carry a file of that size, whatever [server] max_body_bytes
    # says of other bodies (web/limits.py lets it through).
    allow_uploads(api, "/api/v1/notes/{id}/attachments", int(limit_mb * 1024 * 1024) + UPLOAD_OVERHEAD)
    api.include_router(_uploads(app, limit_mb))


def note_file_mb(app: App) -> float:
    """The largest file a note takes, in MB: ``[attachments] max_mb`` in noteloom.toml (10);
    a ``ConfigError`` when it is not a number of at least 0.001."""
    limit = app.settings.section("attachments").get("max_mb", ATTACHMENT_BYTES / (1024 * 1024))
    if not isinstance(limit, int | float) or isinstance(limit, bool) or not limit >= 0.001:
        raise ConfigError(f"[attachments] max_mb must be a number >= 0.001 (MB, the largest file a note takes), not {limit!r}")
    return float(limit)


def _uploads(app: App, limit_mb: float) -> APIRouter:
    """The upload route reads its own multipart body: no shared JSON body check."""
    ws = app.workspace
    limit = int(limit_mb * 1024 * 1024)
    r = APIRouter(prefix="/api/v1", tags=["notes"], responses=ERRORS, default_response_class=ApiJSONResponse)

    @r.post("/notes/{note_id}/attachments", response_model=AttachmentOut, status_code=201,
            openapi_extra=_UPLOAD_BODY, responses={413: ERRORS[422]})
    async def attach(request: Request, note_id: IdPath) -> dict[str, Any]:
        """Attach a file to a note (multipart, one part named `file`, at most `[attachments]
        max_mb` in noteloom.toml, 10 MB by default); link it in the note as `![name](:/ID)` or
        `[name](:/ID)`."""
        scope = request_scope(request, ws)
        if not request.headers.get("content-type", "").lower().startswith("multipart/form-data"):
            raise ApiError(422, "invalid_input", "file: send multipart/form-data with one file part named file", "file")
        try:
            form = await request.form(max_files=1, max_fields=1)
        except HTTPException as exc:
            raise ApiError(422, "invalid_input", f"file: {exc.detail}; send one file part named file", "file") from None
        try:
            part = form.get("file")
            if not isinstance(part, UploadFile) or set(form) != {"file"}:
                raise ApiError(422, "invalid_input", "file: send one file part named file (with a filename)", "file")
            data = await part.read(limit + 1)
            filename = (part.filename or "").strip() or "file"
            mime = (part.content_type or "").split(";")[0].strip() or None
        finally:
            await form.close()
        if len(data) > limit:
            raise ApiError(413, "payload_too_large",
                           f"file: larger than {limit_mb:g} MB, the largest file a note takes on this server "
                           "([attachments] max_mb in noteloom.toml)", "file")
        if len(filename) > 255 or "\x00" in filename:
            raise ApiError(422, "invalid_input", "file: the file name must be under 256 characters", "file")

        def store() -> Any:
            with ws.write() as c:
                scope.note(note_id, c, write=True)
                return ws.add_attachment(note_id, data, filename, mime=mime, conn=c)

        att = await to_thread.run_sync(store)
        return {"id": att.id, "filename": att.filename, "mime": att.mime, "size": att.size}

    return r


_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "properties": {"file": {"type": "string", "format": "binary"}}, "required": ["file"],
        }}},
    },
}


def note_detail(note: Note) -> dict[str, Any]:
    return {**note_out(note), "is_todo": note.is_todo, "todo_due": note.todo_due,
            "todo_completed": note.todo_completed, "deleted_time": note.deleted_time,
            "created_time": note.created_time, "source_url": safe_link(note.source_url)}
