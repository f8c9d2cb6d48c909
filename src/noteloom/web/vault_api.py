"""The vault's JSON API under ``/api/v1/vault``: set it up, unlock, lock, status, change the
passphrase, rotate the keypair (``noteloom.vault``; what it protects: ``noteloom.chat.sealing``).

Unlocking opens a *shared window* for the credential the request carries (the browser
session, or the API token): every later request with that credential, on any worker of
``noteloom serve``, reads protected chats until the window expires or is closed (lock,
sign-out). The server keeps the vault key only wrapped under a key derived from that
credential, never in clear, and never the credential itself.

Errors are the API's usual ``{"error": code, "message": text}``; besides those: 403
``wrong_passphrase`` (never 401, which would sign the browser out), 423 ``locked`` (the
window is closed: unlock first), 404 when the user has no vault yet, 409 when setting up
a vault the user has.
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator

from noteloom.app import App
from noteloom.chat import rotation
from noteloom.chat.wiring import Stores
from noteloom.errors import Locked
from noteloom.vault import DEFAULT_TTL_S, MIN_PASSPHRASE_CHARS, Keys, Vault
from noteloom.web.api_base import (
    ERRORS,
    ApiJSONResponse,
    ErrorOut,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)
from noteloom.web.auth import credential_from_scope

#: The longest window one unlock opens.
MAX_TTL_S = 24 * 3600
#: What setting a passphrase must say (the API answers it with the recovery key).
LOSS_WARNING = (
    "Keep this recovery key somewhere safe: it is shown only now. If you lose both your vault passphrase "
    "and this recovery key, your protected chats cannot be read by anyone, not even by you."
)

VAULT_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    403: {"model": ErrorOut, "description": "`wrong_passphrase`: the passphrase or recovery key is wrong."},
    423: {"model": ErrorOut, "description": "`locked`: the vault is locked; unlock it first."},
}


def credential_of(request: Request) -> str | None:
    """The credential the request carries (session or token), as sent."""
    return credential_from_scope(request.scope)[1]


async def keys_of(request: Request, vault: Vault) -> Keys | None:
    """The requesting user's keys when the request's credential has an open window."""
    user = user_of(request)
    credential = credential_of(request)
    if not credential:
        return None
    return await to_thread.run_sync(vault.window_keys, user.id, credential)


class SetupIn(StrictModel):
    passphrase: str = Field(min_length=MIN_PASSPHRASE_CHARS, max_length=1024,
                            description="The vault passphrase (not your sign-in password).")
    ttl_seconds: float = Field(DEFAULT_TTL_S, gt=0, le=MAX_TTL_S, allow_inf_nan=False,
                               description="How long the window it opens stays open.")


class UnlockIn(StrictModel):
    passphrase: str | None = Field(None, min_length=1, max_length=1024)
    recovery_key: str | None = Field(None, min_length=1, max_length=200,
                                     description="Instead of the passphrase: the recovery key, with new_passphrase.")
    new_passphrase: str | None = Field(None, min_length=MIN_PASSPHRASE_CHARS, max_length=1024,
                                       description="With recovery_key: the passphrase from now on.")
    ttl_seconds: float = Field(DEFAULT_TTL_S, gt=0, le=MAX_TTL_S, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_way_in(self) -> UnlockIn:
        if (self.passphrase is None) == (self.recovery_key is None):
            raise ValueError("give passphrase, or recovery_key with new_passphrase")
        if self.recovery_key is not None and self.new_passphrase is None:
            raise ValueError("recovery_key needs new_passphrase: the passphrase it replaces was lost")
        return self


class PassphraseIn(StrictModel):
    old_passphrase: str = Field(min_length=1, max_length=1024)
    new_passphrase: str = Field(min_length=MIN_PASSPHRASE_CHARS, max_length=1024)


class StatusOut(BaseModel):
    exists: bool = Field(description="You have a vault (POST /api/v1/vault/setup makes one).")
    unlocked: bool = Field(description="This credential's window is open: protected chats can be read.")
    expires_time: int | None = Field(description="When the window closes (ms since the epoch).")
    generation: int | None = Field(description="The key generation new content is sealed to.")


class SetupOut(StatusOut):
    recovery_key: str = Field(description="Shown once: the only other way into the vault.")
    warning: str


class RotateOut(BaseModel):
    generation: int
    resealed: int = Field(description="Sealed values whose data key was moved to the new keypair.")


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/vault/...``."""
    install_error_handlers(api)
    vault = Vault(app.engine)
    r = APIRouter(prefix="/api/v1/vault", tags=["vault"], responses=VAULT_ERRORS,
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    def status(user_id: str, credential: str | None) -> dict[str, Any]:
        exists = vault.exists(user_id)
        window = vault.shared_window(user_id, credential) if exists else None
        return {"exists": exists, "unlocked": window is not None,
                "expires_time": window.expires_time if window else None,
                "generation": vault.generation(user_id) if exists else None}

    @r.get("", response_model=StatusOut)
    async def get_status(request: Request) -> dict[str, Any]:
        """Whether you have a vault, and whether this credential's window is open (until when)."""
        return await to_thread.run_sync(status, user_of(request).id, credential_of(request))

    @r.post("/setup", response_model=SetupOut, status_code=201)
    async def setup(request: Request, body: SetupIn) -> dict[str, Any]:
        """Set up your vault with a passphrase; it opens a window too. The answer holds the
        recovery key, shown this once: a lost passphrase and recovery key mean your protected
        chats cannot be read by anyone. 409 if you have a vault already."""
        user, credential = user_of(request), credential_of(request) or ""

        def make() -> dict[str, Any]:
            recovery = vault.create(user.id, body.passphrase)
            vault.open_window(user.id, credential, passphrase=body.passphrase, ttl_s=body.ttl_seconds)
            return {**status(user.id, credential), "recovery_key": recovery, "warning": LOSS_WARNING}

        return await to_thread.run_sync(make)

    @r.post("/unlock", response_model=StatusOut)
    async def unlock(request: Request, body: UnlockIn) -> dict[str, Any]:
        """Open a window for this credential, with the passphrase, or with the recovery key and
        a new passphrase (the old one stops working). 403 `wrong_passphrase` when it is wrong."""
        user, credential = user_of(request), credential_of(request) or ""

        def open_() -> dict[str, Any]:
            vault.open_window(user.id, credential, passphrase=body.passphrase, recovery_key=body.recovery_key,
                              new_passphrase=body.new_passphrase, ttl_s=body.ttl_seconds)
            return status(user.id, credential)

        return await to_thread.run_sync(open_)

    @r.post("/lock", status_code=204, response_class=Response)
    async def lock(request: Request) -> Response:
        """Close every window of yours (every browser and token, on every worker)."""
        await to_thread.run_sync(lambda: vault.close_windows(user_of(request).id))
        return Response(status_code=204)

    @r.post("/passphrase", status_code=204, response_class=Response)
    async def change_passphrase(request: Request, body: PassphraseIn) -> Response:
        """Replace the passphrase (the old one must be right; nothing sealed is rewritten)."""
        user = user_of(request)
        await to_thread.run_sync(lambda: vault.change_passphrase(user.id, body.old_passphrase, body.new_passphrase))
        return Response(status_code=204)

    @r.post("/rotate", response_model=RotateOut)
    async def rotate(request: Request) -> dict[str, Any]:
        """Give your vault a new keypair (needs an open window: 423 otherwise) and move every
        sealed value of your chats to it: only each value's data key is re-sealed, the
        content is not rewritten."""
        keys = await keys_of(request, vault)
        if keys is None:
            raise Locked("your vault is locked: unlock it (POST /api/v1/vault/unlock), then rotate")
        blobs = Stores.open(app.workspace).attachments.blobs
        done = await to_thread.run_sync(rotation.rotate, app.engine, blobs, keys)
        return {"generation": done.generation, "resealed": done.resealed}

    api.include_router(r)
