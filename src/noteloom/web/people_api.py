"""``/api/v1/me``, ``/api/v1/users`` and ``/api/v1/notebooks/{id}/shares``: who is asking, the
people of the workspace, and who a notebook is shared with.

Who may do what is :mod:`noteloom.people`'s rule, asked with the requesting person as
``actor``: only the owner and admins manage people (anyone else gets 403 ``forbidden``),
only the owner changes or removes an admin, the owner's role is fixed; a notebook's owner
or an admin shares it, and a notebook the person cannot see reads as missing (404).
Removing someone needs ``notebooks``: ``transfer`` (with ``transfer_to``) or ``delete``
(the usual trash), in the query or a JSON body; without it, a 422 says which to send.

A person changes their own password at ``PATCH /api/v1/me/password`` with the old one
(wrong tries count towards the sign-in lockout, ``web/sessions.py``); it ends their
password sessions, this one included, so the answer carries a fresh session. An admin
sets other people's passwords with ``PATCH /api/v1/users/{user}``, never their own there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from anyio import to_thread
from fastapi import APIRouter, Body, Depends, FastAPI, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator

from noteloom.app import App
from noteloom.errors import AuthError, Forbidden, InvalidInput, NotFound
from noteloom.people import NAME_MAX, PASSWORD_MAX, ROLES, SHARE_ACCESS, Person
from noteloom.web.api_base import (
    ERRORS,
    NO_NUL,
    ApiError,
    ApiJSONResponse,
    IdPath,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)
from noteloom.web.auth import SESSION_HEADER
from noteloom.web.sessions import SessionOut, client_of, hashing, password_attempts, too_many
from noteloom.workspace import User

#: A person in a path: their id or their name (names hold no '/').
PersonPath = Annotated[str, Path(min_length=1, max_length=NAME_MAX, pattern=r"^[^\x00/]+$",
                                 description="The person's id or name.")]
RoleIn = Literal["admin", "member"]
Password = Annotated[str, Field(min_length=1, max_length=PASSWORD_MAX)]
ADMINS_ONLY = "only the workspace owner or an admin may manage people"
FORBIDDEN: dict[int | str, dict[str, Any]] = {403: {"description": "Not yours to do (`forbidden`)."}}


class MeOut(BaseModel):
    id: str
    name: str
    role: str = Field(description=f"One of {', '.join(ROLES)}.")
    has_password: bool = Field(description="Whether you can sign in to the web app with a password.")


class PersonOut(BaseModel):
    id: str
    name: str
    role: str = Field(description=f"One of {', '.join(ROLES)}.")
    created_time: int
    has_password: bool
    notebooks: int = Field(description="How many top notebooks they own.")


class PersonIn(StrictModel):
    name: str = Field(min_length=1, max_length=NAME_MAX, description="What they sign in with (one line, no '/').")
    role: RoleIn = "member"
    password: Password | None = Field(None, description="Their web password; omit to set one later.")


class PersonPatch(StrictModel):
    """``role``, ``password`` or both; ``"password": null`` removes their password."""

    role: RoleIn | None = None
    password: Password | None = None

    @model_validator(mode="after")
    def _something(self) -> PersonPatch:
        if not self.model_fields_set or ("role" in self.model_fields_set and self.role is None):
            raise ValueError("send role (admin or member), password (null removes it), or both")
        return self


class RemoveIn(StrictModel):
    notebooks: Literal["transfer", "delete"] | None = Field(
        None, description="transfer: to transfer_to; delete: to the trash, which the owner can restore from.")
    transfer_to: str | None = Field(None, min_length=1, max_length=NAME_MAX,
                                    description="The id or name of who gets their notebooks.")


class RemovedOut(BaseModel):
    removed: str = Field(description="Their name.")
    notebooks: int = Field(description="How many top notebooks they owned.")
    notes_trashed: int
    transferred_to: str | None


class PasswordChange(StrictModel):
    old_password: Password | None = Field(None, description="Your current password (omit only when you have none).")
    new_password: Password


class ShareIn(StrictModel):
    access: Literal["read", "write"] = Field("read", description=f"One of {', '.join(SHARE_ACCESS)}.")


class ShareOut(BaseModel):
    notebook_id: str
    user_id: str
    user_name: str
    access: str
    created_time: int


class _WrongOld(Exception):
    """The old password given to a password change is wrong (or missing)."""


def _require_admin(user: User) -> None:
    if not user.is_admin:
        raise Forbidden(ADMINS_ONLY)


def _person_out(people: list[Person], user_id: str) -> dict[str, Any]:
    found = next((p for p in people if p.id == user_id), None)
    if found is None:  # removed by someone else meanwhile
        raise NotFound(f"no person with id {user_id!r}; GET /api/v1/users lists them")
    return found.to_json()


def install(api: FastAPI, app: App) -> None:
    """Add ``/api/v1/me``, ``/api/v1/users`` and the notebooks' ``/shares``."""
    install_error_handlers(api)
    ws = app.workspace
    attempts = password_attempts(api)
    r = APIRouter(prefix="/api/v1", tags=["people"], responses={**ERRORS, **FORBIDDEN},
                  dependencies=[Depends(checked_body)], default_response_class=ApiJSONResponse)

    # -- me ---------------------------------------------------------------------------------

    @r.get("/me", response_model=MeOut)
    async def me(request: Request) -> dict[str, Any]:
        """Who you are signed in as."""
        user = user_of(request)
        people = await to_thread.run_sync(ws.list_people)
        mine = next((p for p in people if p.id == user.id), None)
        return {"id": user.id, "name": user.name, "role": user.role,
                "has_password": mine is not None and mine.has_password}

    @r.patch("/me/password", response_model=SessionOut,
             responses={429: {"description": "Too many wrong passwords: wait `Retry-After` seconds."}})
    async def change_password(request: Request, body: PasswordChange) -> dict[str, Any]:
        """Change your web password, giving the old one. Your password sessions end (this
        one too): continue with the session in the answer."""
        user = user_of(request)
        client = client_of(request)
        wait = attempts.wait(user.name, client)
        if wait is not None:
            raise too_many(wait)

        def change() -> tuple[str, Any]:
            if any(p.id == user.id and p.has_password for p in ws.list_people()):
                try:  # the check signs in once more; the new password ends that session with the rest
                    ws.start_password_session(user.name, body.old_password or "")
                except AuthError:
                    raise _WrongOld from None
            ws.set_password(user.id, body.new_password, actor=user)
            return ws.start_password_session(user.name, body.new_password)

        try:
            session, found = await to_thread.run_sync(change, limiter=hashing(api))
        except _WrongOld:
            attempts.failed(user.name, client)
            raise ApiError(403, "forbidden", "the old password is wrong (send it as old_password)",
                           "old_password") from None
        attempts.succeeded(user.name)
        # The session this came with has ended (if it was a password one): stop trusting it here at once.
        guard: Any = getattr(request.app.state, "auth", None)
        current = request.headers.get(SESSION_HEADER, "").strip()
        if guard is not None and current:
            guard.forget("session", current)
        return {"session": session, "valid_until": found.valid_until}

    # -- people ------------------------------------------------------------------------------

    @r.get("/users", response_model=list[PersonOut])
    async def list_users(request: Request) -> list[dict[str, Any]]:
        """Everyone in the workspace (owner and admins only)."""
        _require_admin(user_of(request))
        return [p.to_json() for p in await to_thread.run_sync(ws.list_people)]

    @r.post("/users", response_model=PersonOut, status_code=201)
    async def add_user(request: Request, body: PersonIn) -> dict[str, Any]:
        """Add a person (owner and admins only); `password` is optional."""
        actor = user_of(request)
        _require_admin(actor)

        def add() -> dict[str, Any]:
            person = ws.add_person(body.name, role=body.role, password=body.password, actor=actor)
            return _person_out(ws.list_people(), person.id)

        return await to_thread.run_sync(add, limiter=hashing(api))

    @r.patch("/users/{user}", response_model=PersonOut)
    async def change_user(request: Request, user: PersonPath, body: PersonPatch) -> dict[str, Any]:
        """Change someone's role or password (`null` removes it); owner and admins only, and
        only the owner changes an admin. Your own password: `PATCH /api/v1/me/password`."""
        actor = user_of(request)
        _require_admin(actor)

        def change() -> dict[str, Any]:
            person = ws.find_person(user)
            if "password" in body.model_fields_set and person.id == actor.id:
                raise InvalidInput("your own password changes at PATCH /api/v1/me/password, with the old one",
                                   field="password")
            if body.role is not None:
                ws.set_role(person.id, body.role, actor=actor)
            if "password" in body.model_fields_set:
                ws.set_password(person.id, body.password, actor=actor)
            return _person_out(ws.list_people(), person.id)

        return await to_thread.run_sync(change, limiter=hashing(api))

    @r.delete("/users/{user}", response_model=RemovedOut)
    async def remove_user(
        request: Request,
        user: PersonPath,
        notebooks: Annotated[Literal["transfer", "delete"] | None, Query(
            description="What becomes of their notebooks (or send it in the body).")] = None,
        transfer_to: Annotated[str | None, Query(min_length=1, max_length=NAME_MAX, pattern=NO_NUL,
                                                 description="Who gets them, for notebooks=transfer.")] = None,
        body: Annotated[RemoveIn | None, Body()] = None,
    ) -> dict[str, Any]:
        """Remove a person (owner and admins only) with their chats, memories, recipes and
        tokens; their notebooks go to `transfer_to` or to the trash, as `notebooks` says."""
        actor = user_of(request)
        _require_admin(actor)
        what = (body.notebooks if body is not None else None) or notebooks
        heir = (body.transfer_to if body is not None else None) or transfer_to
        if what is None:
            raise InvalidInput("notebooks must say what becomes of their notebooks: transfer (with transfer_to, "
                               "who gets them) or delete (to the trash)", field="notebooks")
        if what == "transfer" and heir is None:
            raise InvalidInput("transfer_to must name who gets their notebooks (an id or a name), or send "
                               "notebooks=delete", field="transfer_to")
        found = await to_thread.run_sync(lambda: ws.remove_person(
            user, notebooks=what, transfer_to=heir if what == "transfer" else None, actor=actor))
        return dict(found)

    # -- shares ------------------------------------------------------------------------------

    @r.get("/notebooks/{notebook_id}/shares", response_model=list[ShareOut])
    async def shares(request: Request, notebook_id: IdPath) -> list[dict[str, Any]]:
        """Who the notebook is shared with (its owner or an admin may ask)."""
        actor = user_of(request)
        found = await to_thread.run_sync(lambda: ws.notebook_shares(notebook_id, actor=actor))
        return [s.to_json() for s in found]

    @r.put("/notebooks/{notebook_id}/shares/{user}", response_model=ShareOut)
    async def share(request: Request, notebook_id: IdPath, user: PersonPath,
                    body: ShareIn | None = None) -> dict[str, Any]:
        """Share the notebook and its sub-notebooks with someone to read (or write); sharing
        again changes the access. Its owner or an admin may."""
        actor = user_of(request)
        access = body.access if body is not None else "read"
        made = await to_thread.run_sync(lambda: ws.share_notebook(notebook_id, user, access, actor=actor))
        return made.to_json()

    @r.delete("/notebooks/{notebook_id}/shares/{user}", status_code=204, response_class=Response)
    async def unshare(request: Request, notebook_id: IdPath, user: PersonPath) -> Response:
        """Stop sharing the notebook with someone (404 when it was not shared with them)."""
        actor = user_of(request)

        def end() -> None:
            if not ws.unshare_notebook(notebook_id, user, actor=actor):
                raise NotFound(f"notebook {notebook_id!r} is not shared with {user!r}; "
                               f"GET /api/v1/notebooks/{notebook_id}/shares lists its shares")

        await to_thread.run_sync(end)
        return Response(status_code=204)

    api.include_router(r)
