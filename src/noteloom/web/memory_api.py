"""Memories over JSON under ``/api/v1/memory``: list (one scope, words), read, add, change
and delete the facts the assistant keeps.

Every route acts for the user whose token came with the request, through
:mod:`noteloom.memory.store`: their personal memories and the workspace's shared ones;
another person's memory reads as missing (404, the same answer as an unknown id), for
admins too. Shared memories and whether new chats have memory are the workspace's: every
person's assistant reads them, so the owner and admins add, change and delete them and set
the default, and a member reads them (a change is 403). The AI never writes shared ones (its
``remember`` tool writes personal ones only). Errors are ``{"error": code, "message":
text}`` (``api_base.HTTP_ERRORS``): 403 for a member changing what is the workspace's, 404
missing, 422 bad input naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, StrictBool

from noteloom import db
from noteloom.accounts import User
from noteloom.app import App
from noteloom.chat.wiring import MEMORY_DEFAULT_KEY, memory_default
from noteloom.errors import Forbidden, InvalidInput, NotFound
from noteloom.memory import store
from noteloom.memory.store import CONTENT_MAX, LIMIT_MAX, TAG_MAX, TAGS_MAX, TITLE_MAX, Memory
from noteloom.web.api_base import (
    ERRORS,
    NO_NUL,
    ApiJSONResponse,
    IdPath,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)

Tag = Annotated[str, Field(min_length=1, max_length=TAG_MAX)]
SHARED_ONLY = ("shared memories are the workspace's, read by everyone's assistant: only the owner or an admin "
               "adds, changes or deletes them (keep it as a personal one, scope: personal)")


class MemoryIn(StrictModel):
    """A new memory: yours (``personal``) or the workspace's (``shared``)."""

    content: str = Field(..., min_length=1, max_length=CONTENT_MAX, description="The fact; not blank.")
    title: str = Field("", max_length=TITLE_MAX, description="A short title (the content's first line if empty).")
    tags: list[Tag] = Field(default_factory=list, max_length=TAGS_MAX)
    scope: Literal["personal", "shared"] = "personal"


class MemoryPatch(StrictModel):
    """The fields sent change; the others stay."""

    content: str | None = Field(None, min_length=1, max_length=CONTENT_MAX)
    title: str | None = Field(None, max_length=TITLE_MAX)
    tags: list[Tag] | None = Field(None, max_length=TAGS_MAX)


class MemoryOut(BaseModel):
    id: str
    scope: Literal["personal", "shared"]
    title: str
    content: str
    tags: list[str]
    source: Literal["ai", "user"]
    by_ai: bool = Field(description="Written by the assistant (its remember tool): shown with a badge.")
    conversation_id: str | None = Field(description="The chat an AI-written memory came from.")
    run_id: str | None = Field(description="The recipe run an AI-written memory came from.")
    message_id: str | None
    created_by: str | None
    created_time: int
    updated_time: int


class MemoryDefault(StrictModel):
    """Whether new chats have memory (``chat.memory_default``; on unless set off)."""

    memory_default: StrictBool = Field(description="New chats have memory unless a chat sets its own toggle.")


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/memory/...`` to the web app."""
    install_error_handlers(api)
    r = APIRouter(prefix="/api/v1/memory", tags=["memory"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)
    engine = app.engine

    def listing(user_id: str, scope: store.MemoryScope | None, q: str | None, limit: int) -> list[Memory]:
        with db.read_tx(engine) as c:
            if q is None or not q.strip():
                return store.scoped(c, user_id, scope=scope, limit=limit)
            try:
                return store.search(c, user_id, q, scope=scope, limit=limit)
            except InvalidInput as exc:
                raise InvalidInput(str(exc), field="q") from None

    def one(user_id: str, memory_id: str) -> Memory:
        with db.read_tx(engine) as c:
            memory = store.get(c, user_id, memory_id)
        if memory is None:
            raise NotFound(store.missing(memory_id))
        return memory

    def may_change(user: User, memory: Memory | None, memory_id: str) -> None:
        if memory is None:
            raise NotFound(store.missing(memory_id))
        if memory.scope == "shared" and not user.is_admin:
            raise Forbidden(SHARED_ONLY)

    def adding(user: User, body: MemoryIn) -> Memory:
        if body.scope == "shared" and not user.is_admin:
            raise Forbidden(SHARED_ONLY)
        with db.write_tx(engine) as c:
            return store.add(c, user.id, body.content, title=body.title, tags=body.tags, scope=body.scope,
                             source="user")

    def changing(user: User, memory_id: str, body: MemoryPatch) -> Memory:
        with db.write_tx(engine) as c:
            may_change(user, store.get(c, user.id, memory_id), memory_id)
            return store.edit(c, user.id, memory_id, title=body.title, content=body.content, tags=body.tags)

    def deleting(user: User, memory_id: str) -> None:
        with db.write_tx(engine) as c:
            may_change(user, store.get(c, user.id, memory_id), memory_id)
            if not store.delete(c, user.id, memory_id):
                raise NotFound(store.missing(memory_id))

    def default_state() -> dict[str, bool]:
        return {"memory_default": memory_default(app.workspace.get_setting(MEMORY_DEFAULT_KEY))}

    def set_default(on: bool) -> dict[str, bool]:
        app.workspace.set_setting(MEMORY_DEFAULT_KEY, on)
        return default_state()

    # Fixed paths before /{memory_id}.

    @r.get("/default", response_model=MemoryDefault)
    async def get_default() -> dict[str, bool]:
        """Whether new chats have memory (a chat that set its own toggle keeps it)."""
        return await to_thread.run_sync(default_state)

    @r.put("/default", response_model=MemoryDefault)
    async def put_default(request: Request, body: MemoryDefault) -> dict[str, bool]:
        """Turn memory on or off for new chats (the workspace's owner or an admin)."""
        if not user_of(request).is_admin:
            raise Forbidden("only the workspace's owner or an admin sets whether new chats have memory")
        return await to_thread.run_sync(set_default, body.memory_default)

    @r.get("", response_model=list[MemoryOut])
    async def list_memories(
        request: Request,
        scope: Literal["personal", "shared"] | None = Query(None, description="Only yours, or only shared ones."),
        q: str | None = Query(None, max_length=1000, pattern=NO_NUL,
                              description="Words that must all appear in the title, text or tags (any case)."),
        limit: int = Query(200, ge=1, le=LIMIT_MAX),
    ) -> list[dict[str, Any]]:
        """Your memories and the shared ones, newest change first (with ``q``: title matches first)."""
        uid = user_of(request).id
        rows = await to_thread.run_sync(lambda: listing(uid, scope, q, limit))
        return [m.as_dict() for m in rows]

    @r.post("", response_model=MemoryOut, status_code=201)
    async def add(request: Request, body: MemoryIn) -> dict[str, Any]:
        """Keep a fact: yours, or (the owner or an admin) the workspace's shared one, which the
        assistant recalls for everyone."""
        user = user_of(request)
        return (await to_thread.run_sync(lambda: adding(user, body))).as_dict()

    @r.get("/{memory_id}", response_model=MemoryOut)
    async def get(request: Request, memory_id: IdPath) -> dict[str, Any]:
        """One memory in full, with where it came from."""
        uid = user_of(request).id
        return (await to_thread.run_sync(lambda: one(uid, memory_id))).as_dict()

    @r.patch("/{memory_id}", response_model=MemoryOut)
    async def patch(request: Request, memory_id: IdPath, body: MemoryPatch) -> dict[str, Any]:
        """Correct a memory: yours, or (the owner or an admin) a shared one. It applies from the
        next chat turn or run."""
        user = user_of(request)
        return (await to_thread.run_sync(lambda: changing(user, memory_id, body))).as_dict()

    @r.delete("/{memory_id}", status_code=204, response_class=Response)
    async def delete(request: Request, memory_id: IdPath) -> Response:
        """Delete a memory: yours, or (the owner or an admin) a shared one."""
        user = user_of(request)
        await to_thread.run_sync(lambda: deleting(user, memory_id))
        return Response(status_code=204)

    api.include_router(r)
