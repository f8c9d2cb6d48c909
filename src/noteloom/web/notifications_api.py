"""``/api/v1/notifications`` and ``/api/v1/webhooks``: what recipes told their owner, and where
else it goes.

Every route acts for the user whose credential came with the request: another user's
notifications and webhooks are never listed, marked or removed (one of theirs reads as
missing). A webhook's secret, which its receiver checks signatures with, is in the answer
to the ``POST`` that adds it and nowhere else. Errors have the API's shape
(``api_base``): 422 naming the field for bad input (a URL that is not http(s), one the
operator's ``[outbound]`` policy refuses, an unknown kind), 404 for a webhook that is not
yours.
"""

from __future__ import annotations

from typing import Annotated, Any

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator

from noteloom.app import App
from noteloom.notifications import KINDS, LIST_MAX, Notification, Notifications, Webhook
from noteloom.outbound import OutboundPolicy
from noteloom.web.api_base import (
    ERRORS,
    ID_PATTERN,
    ApiJSONResponse,
    IdPath,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)


class NotificationOut(BaseModel):
    id: str
    kind: str = Field(description=f"One of {', '.join(KINDS)}.")
    title: str
    body: str
    recipe_id: str | None
    run_id: str | None
    created_time: int = Field(description="ms since the epoch (UTC).")
    read_time: int | None = Field(description="When it was marked read; null while unread.")


class NotificationList(BaseModel):
    notifications: list[NotificationOut]
    unread: int = Field(description="How many of yours are unread (all of them, not only those listed).")


class CountOut(BaseModel):
    unread: int


class ReadIn(StrictModel):
    """Either ``ids`` or ``all: true``."""

    ids: list[Annotated[str, Field(pattern=ID_PATTERN)]] | None = Field(
        None, max_length=LIST_MAX, description="Notifications to mark read (ids not yours are passed over).")
    all: bool | None = Field(None, description="true: mark every notification of yours read.")

    @model_validator(mode="after")
    def _one(self) -> ReadIn:
        if (self.ids is None) == (self.all is not True):
            raise ValueError("send either ids (a list) or all: true")
        return self


class ReadOut(BaseModel):
    marked: int = Field(description="How many were unread and are read now.")
    unread: int


class WebhookIn(StrictModel):
    url: str = Field(min_length=1, max_length=2000, description="http(s) URL the notifications are POSTed to.")
    kinds: list[str] = Field(default_factory=lambda: [str(k) for k in KINDS], max_length=len(KINDS) * 2,
                             description=f"Which kinds it receives: {', '.join(KINDS)} (default: all).")


class WebhookOut(BaseModel):
    id: str
    url: str
    kinds: list[str]
    enabled: bool
    last_status: str | None = Field(description="The last delivery's HTTP status, or why nothing was answered.")
    last_time: int | None
    created_time: int


class WebhookCreated(WebhookOut):
    secret: str = Field(description="Signs each delivery; shown this once, keep it with the receiver.")


def _notification(n: Notification) -> dict[str, Any]:
    return {"id": n.id, "kind": n.kind, "title": n.title, "body": n.body, "recipe_id": n.recipe_id,
            "run_id": n.run_id, "created_time": n.created_time, "read_time": n.read_time}


def _webhook(w: Webhook) -> dict[str, Any]:
    return {"id": w.id, "url": w.url, "kinds": list(w.kinds), "enabled": w.enabled, "last_status": w.last_status,
            "last_time": w.last_time, "created_time": w.created_time}


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/notifications`` and ``/api/v1/webhooks`` to the web app."""
    install_error_handlers(api)
    store = Notifications(app.workspace.engine, OutboundPolicy.from_settings(app.settings.file))
    r = APIRouter(prefix="/api/v1", tags=["notifications"], responses=ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    @r.get("/notifications", response_model=NotificationList)
    async def listing(
        request: Request,
        unread: Annotated[bool, Query(description="Only unread ones.")] = False,
        limit: Annotated[int, Query(ge=1, le=LIST_MAX)] = 50,
    ) -> dict[str, Any]:
        """Your notifications, newest first, and how many are unread."""
        user = user_of(request)

        def read() -> dict[str, Any]:
            items = store.list(user.id, unread_only=unread, limit=limit)
            return {"notifications": [_notification(n) for n in items], "unread": store.unread_count(user.id)}

        return await to_thread.run_sync(read)

    @r.get("/notifications/count", response_model=CountOut)
    async def count(request: Request) -> dict[str, Any]:
        """How many of your notifications are unread (the page's badge)."""
        user = user_of(request)
        return {"unread": await to_thread.run_sync(store.unread_count, user.id)}

    @r.post("/notifications/read", response_model=ReadOut)
    async def mark_read(request: Request, body: ReadIn) -> dict[str, Any]:
        """Mark some (``ids``) or all (``all: true``) of your notifications read."""
        user = user_of(request)

        def mark() -> dict[str, Any]:
            marked = store.mark_read(user.id, "all" if body.all else (body.ids or []))
            return {"marked": marked, "unread": store.unread_count(user.id)}

        return await to_thread.run_sync(mark)

    @r.get("/webhooks", response_model=list[WebhookOut])
    async def webhooks(request: Request) -> list[dict[str, Any]]:
        """Your webhooks, oldest first, each with its last delivery's outcome (never its secret)."""
        user = user_of(request)
        return [_webhook(w) for w in await to_thread.run_sync(store.list_webhooks, user.id)]

    @r.post("/webhooks", response_model=WebhookCreated, status_code=201)
    async def add_webhook(request: Request, body: WebhookIn) -> dict[str, Any]:
        """Add a webhook; the answer carries its secret, this once."""
        user = user_of(request)

        def add() -> dict[str, Any]:
            wid, secret = store.add_webhook(user.id, body.url, body.kinds)
            made = next(w for w in store.list_webhooks(user.id) if w.id == wid)
            return {**_webhook(made), "secret": secret}

        return await to_thread.run_sync(add)

    @r.delete("/webhooks/{webhook_id}", status_code=204, response_class=Response)
    async def remove_webhook(request: Request, webhook_id: IdPath) -> Response:
        """Remove one of your webhooks (404 if it is not yours)."""
        user = user_of(request)
        await to_thread.run_sync(store.remove_webhook, user.id, webhook_id)
        return Response(status_code=204)

    api.include_router(r)
