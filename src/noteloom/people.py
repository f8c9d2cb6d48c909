"""People of a workspace: adding and removing them, their roles and passwords, and the
notebooks shared with them. A mixin of ``Workspace`` (the same engine and ``conn=``).

Who may do what here is checked by the surfaces (``noteloom users`` is the workspace's own
command line, acting for the owner; the API lets admins manage people and lets a notebook's
owner or an admin share it): these methods take an ``actor`` where a rule depends on who asks.

Rules, whoever asks: there is exactly one owner, whose role never changes and who is never
removed; any admin may add people as admins or members, but only the owner may change or
remove an admin, so admins cannot push each other out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

import nacl.exceptions
import nacl.pwhash.argon2id as argon2id
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.accounts import User
from noteloom.db import new_id, now_ms
from noteloom.errors import Conflict, Forbidden, InvalidInput, NotFound

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from noteloom.workspace.model import Notebook

Role = Literal["owner", "admin", "member"]
ROLES: tuple[Role, ...] = get_args(Role)
ShareAccess = Literal["read", "write"]
SHARE_ACCESS: tuple[ShareAccess, ...] = get_args(ShareAccess)


def sees_everything(user: User | None) -> bool:
    """Whether ``user`` sees every notebook (the owner, admins, and no user: the command line
    acting for the owner)."""
    return user is None or user.role in ("owner", "admin")


NAME_MAX = 100
PASSWORD_MIN = 8
PASSWORD_MAX = 1024


def hash_password(password: str) -> str:
    """An Argon2id hash of ``password`` (libsodium's string form: salt and limits inside)."""
    _check_password(password)
    return argon2id.str(password.encode(), opslimit=argon2id.OPSLIMIT_INTERACTIVE,
                        memlimit=argon2id.MEMLIMIT_INTERACTIVE).decode()


def check_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches ``stored`` (no hash: never). Without a stored hash a dummy
    one is checked, so a wrong name costs as long as a wrong password."""
    candidate = (stored or _DUMMY).encode()
    try:
        ok = argon2id.verify(candidate, password.encode("utf-8", "surrogatepass"))
    except (nacl.exceptions.InvalidkeyError, nacl.exceptions.CryptoError, ValueError):
        ok = False
    return ok and stored is not None


_DUMMY = argon2id.str(b"not a password", opslimit=argon2id.OPSLIMIT_INTERACTIVE,
                      memlimit=argon2id.MEMLIMIT_INTERACTIVE).decode()


def _check_password(password: str) -> None:
    if not isinstance(password, str) or not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise InvalidInput(f"a password is {PASSWORD_MIN} to {PASSWORD_MAX} characters", field="password")


def _check_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > NAME_MAX or any(ch.isspace() and ch != " " for ch in name) or "/" in name:
        raise InvalidInput(f"a person's name is 1 to {NAME_MAX} characters on one line, without '/', not {name!r}",
                           field="name")
    return name


def _check_role(role: str) -> str:
    if role not in ROLES or role == "owner":
        raise InvalidInput(f"a role is admin or member, not {role!r} (a workspace has one owner)", field="role")
    return role


@dataclass(frozen=True)
class Person:
    """A person as ``noteloom users list`` and the API show them."""

    id: str
    name: str
    role: str
    created_time: int
    has_password: bool
    notebooks: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "role": self.role, "created_time": self.created_time,
                "has_password": self.has_password, "notebooks": self.notebooks}


@dataclass(frozen=True)
class Share:
    notebook_id: str
    user_id: str
    user_name: str
    access: str
    created_time: int

    def to_json(self) -> dict[str, Any]:
        return {"notebook_id": self.notebook_id, "user_id": self.user_id, "user_name": self.user_name,
                "access": self.access, "created_time": self.created_time}


class People:
    """Users beyond the owner: roles, passwords, removal, shared notebooks."""

    engine: Engine

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    # -- people -----------------------------------------------------------------------------

    def list_people(self, *, conn: Connection | None = None) -> list[Person]:
        u, nb = db.users, db.notebooks
        with self._r(conn) as c:
            owner = c.execute(sa.select(u.c.id).where(u.c.role == "owner").limit(1)).scalar()
            counts: dict[str, int] = {}
            for who, n in c.execute(
                sa.select(nb.c.owner_id, sa.func.count())
                .where(nb.c.parent_id.is_(None), nb.c.deleted_time.is_(None))
                .group_by(nb.c.owner_id)
            ).all():
                key = who or owner or ""
                counts[key] = counts.get(key, 0) + n
            rows = c.execute(sa.select(u).order_by(u.c.created_time, u.c.name)).all()
        return [Person(r.id, r.name, r.role, r.created_time, r.password_hash is not None, counts.get(r.id, 0))
                for r in rows]

    def find_person(self, ref: str, *, conn: Connection | None = None) -> User:
        """A person by id or name; ``NotFound`` otherwise."""
        u = db.users
        with self._r(conn) as c:
            r = c.execute(sa.select(u).where(sa.or_(u.c.id == ref, u.c.name == (ref or "").strip()))
                          .order_by(sa.case((u.c.id == ref, 0), else_=1)).limit(1)).first()
        if r is None:
            raise NotFound(f"no person named {ref!r}; `noteloom users list` lists them")
        return User.of(r)

    def add_person(self, name: str, *, role: str = "member", password: str | None = None,
                   actor: User | None = None, conn: Connection | None = None) -> User:
        """A new person (``actor``: who asks; only the owner or an admin may)."""
        _require_admin(actor)
        name, role = _check_name(name), _check_role(role)
        hashed = hash_password(password) if password is not None else None
        with self._w(conn) as c:
            if c.execute(sa.select(db.users.c.id).where(db.users.c.name == name)).first():
                raise Conflict(f"someone is named {name!r} already; pick another name")
            uid = new_id()
            c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "role": role,
                                          "password_hash": hashed, "created_time": now_ms()})
        return User(uid, name, False, role)

    def set_role(self, ref: str, role: str, *, actor: User | None = None, conn: Connection | None = None) -> User:
        _require_admin(actor)
        role = _check_role(role)
        with self._w(conn) as c:
            person = self.find_person(ref, conn=c)
            _may_manage(actor, person)
            c.execute(db.users.update().where(db.users.c.id == person.id).values(role=role))
        return User(person.id, person.name, False, role)

    def set_password(self, ref: str, password: str | None, *, actor: User | None = None,
                     conn: Connection | None = None) -> None:
        """Set (``None``: clear) a person's web password; a person may set their own."""
        with self._w(conn) as c:
            person = self.find_person(ref, conn=c)
            if actor is not None and actor.id != person.id:
                _require_admin(actor)
                _may_manage(actor, person)
            hashed = hash_password(password) if password is not None else None
            c.execute(db.users.update().where(db.users.c.id == person.id).values(password_hash=hashed))
            # A new password signs out the browser sessions the old one started.
            s = db.web_sessions
            c.execute(s.update().where(s.c.user_id == person.id, s.c.token_id.is_(None), s.c.revoked_time.is_(None))
                      .values(revoked_time=now_ms()))

    def remove_person(self, ref: str, *, notebooks: Literal["transfer", "delete"], transfer_to: str | None = None,
                      actor: User | None = None, conn: Connection | None = None) -> dict[str, Any]:
        """Remove a person. Their notebooks go to ``transfer_to`` (``notebooks="transfer"``) or
        to the trash (``"delete"``, the usual trash: the workspace owner can restore them);
        their conversations, personal memories, recipes and tokens go with them."""
        _require_admin(actor)
        if notebooks not in ("transfer", "delete"):
            raise InvalidInput("say what becomes of their notebooks: transfer them to someone, or delete them",
                               field="notebooks")
        from noteloom.workspace.notebooks import Notebooks

        ws: Any = self
        assert isinstance(ws, Notebooks)
        with self._w(conn) as c:
            person = self.find_person(ref, conn=c)
            _may_manage(actor, person)
            if person.role == "owner":
                raise Forbidden("the workspace owner cannot be removed")
            nb = db.notebooks
            tops = list(c.execute(sa.select(nb.c.id).where(nb.c.owner_id == person.id, nb.c.parent_id.is_(None))
                                  .order_by(nb.c.id)).scalars())
            target: str | None = None
            if notebooks == "transfer":
                if not transfer_to:
                    raise InvalidInput("name the person who gets their notebooks", field="transfer_to")
                heir = self.find_person(transfer_to, conn=c)
                if heir.id == person.id:
                    raise InvalidInput("transfer their notebooks to someone else", field="transfer_to")
                target = None if heir.role == "owner" else heir.id
            trashed = 0
            for top in tops:
                live = c.execute(sa.select(nb.c.deleted_time).where(nb.c.id == top)).scalar() is None
                if notebooks == "delete" and live:
                    trashed += ws.delete_notebook(top, conn=c)
            # Whatever is left of theirs (trashed or not) belongs to the heir, or the owner.
            c.execute(nb.update().where(nb.c.owner_id == person.id).values(owner_id=target))
            c.execute(db.notebook_shares.delete().where(db.notebook_shares.c.user_id == person.id))
            c.execute(db.users.delete().where(db.users.c.id == person.id))
        return {"removed": person.name, "notebooks": len(tops), "notes_trashed": trashed,
                "transferred_to": transfer_to if notebooks == "transfer" else None}

    # -- shared notebooks ---------------------------------------------------------------------

    def share_notebook(self, notebook_id: str, person: str, access: str, *, actor: User | None = None,
                       conn: Connection | None = None) -> Share:
        """Share a notebook (and everything under it) with ``person``; sharing again changes
        the access. Its owner or an admin may."""
        if access not in SHARE_ACCESS:
            raise InvalidInput(f"access is read or write, not {access!r}", field="access")
        with self._w(conn) as c:
            owner = self._check_sharer(c, notebook_id, actor)
            who = self.find_person(person, conn=c)
            if who.id == owner:
                raise InvalidInput(f"{who.name} owns this notebook already", field="person")
            s = db.notebook_shares
            now = now_ms()
            c.execute(s.delete().where(s.c.notebook_id == notebook_id, s.c.user_id == who.id))
            c.execute(s.insert(), {"notebook_id": notebook_id, "user_id": who.id, "access": access,
                                   "created_time": now, "created_by": actor.id if actor else None})
        return Share(notebook_id, who.id, who.name, access, now)

    def unshare_notebook(self, notebook_id: str, person: str, *, actor: User | None = None,
                         conn: Connection | None = None) -> bool:
        with self._w(conn) as c:
            self._check_sharer(c, notebook_id, actor)
            who = self.find_person(person, conn=c)
            s = db.notebook_shares
            gone = c.execute(s.delete().where(s.c.notebook_id == notebook_id, s.c.user_id == who.id)).rowcount
        return bool(gone)

    def notebook_shares(self, notebook_id: str, *, actor: User | None = None,
                        conn: Connection | None = None) -> list[Share]:
        with self._r(conn) as c:
            self._check_sharer(c, notebook_id, actor)
            s, u = db.notebook_shares, db.users
            rows = c.execute(sa.select(s, u.c.name).select_from(s.join(u, u.c.id == s.c.user_id))
                             .where(s.c.notebook_id == notebook_id).order_by(u.c.name)).all()
        return [Share(r.notebook_id, r.user_id, r.name, r.access, r.created_time) for r in rows]

    def notebook_owner(self, notebook_id: str, *, conn: Connection | None = None) -> str | None:
        """The id of the person a notebook belongs to (``None``: no owner user exists yet)."""
        nb, u = db.notebooks, db.users
        with self._r(conn) as c:
            row = c.execute(sa.select(nb.c.owner_id).where(nb.c.id == notebook_id)).first()
            if row is None:
                raise NotFound(f"notebook {notebook_id!r} does not exist; list_notebooks shows the notebooks there are")
            if row.owner_id is not None:
                return str(row.owner_id)
            return c.execute(sa.select(u.c.id).where(u.c.role == "owner").limit(1)).scalar()

    def _check_sharer(self, c: Connection, notebook_id: str, actor: User | None) -> str | None:
        """The notebook's owner id, after checking ``actor`` may share it (a notebook they
        cannot see reads as missing)."""
        row = c.execute(sa.select(db.notebooks.c.deleted_time).where(db.notebooks.c.id == notebook_id)).first()
        owner = self.notebook_owner(notebook_id, conn=c) if row is not None and row.deleted_time is None else None
        if row is None or row.deleted_time is not None:
            raise NotFound(f"notebook {notebook_id!r} does not exist; list_notebooks shows the notebooks there are")
        if actor is not None and not actor.is_admin and actor.id != owner:
            ws: Any = self
            chain = ws.notebook_path(notebook_id, conn=c)
            if not chain_access(chain, actor.id, self.shares_of(actor.id, conn=c), owner):
                raise NotFound(f"notebook {notebook_id!r} does not exist; list_notebooks shows the notebooks there are")
            raise Forbidden("only the notebook's owner or an admin may share it")
        return owner

    def shares_of(self, user_id: str, *, conn: Connection | None = None) -> dict[str, ShareAccess]:
        """The notebooks shared with ``user_id``: ``{notebook id: access}``."""
        s = db.notebook_shares
        with self._r(conn) as c:
            rows = c.execute(sa.select(s.c.notebook_id, s.c.access).where(s.c.user_id == user_id)).all()
        return {r.notebook_id: r.access for r in rows}

    def owner_id(self, *, conn: Connection | None = None) -> str | None:
        """The workspace owner's id (whose every notebook with no ``owner_id`` is)."""
        with self._r(conn) as c:
            return c.execute(sa.select(db.users.c.id).where(db.users.c.role == "owner").limit(1)).scalar()


def chain_access(chain: Sequence[Notebook], user_id: str, shares: Mapping[str, str],
                 workspace_owner: str | None) -> ShareAccess | None:
    """What ``user_id`` may do with the last notebook of ``chain`` (root first) as a member:
    ``write`` when it is theirs (its top notebook's owner; ``None`` there is the workspace
    owner) or shared with them to write at or above it, ``read`` when shared to read, else
    ``None`` (it does not exist for them)."""
    if not chain:
        return None
    if (chain[0].owner_id or workspace_owner) == user_id:
        return "write"
    got = [shares[b.id] for b in chain if b.id in shares]
    if "write" in got:
        return "write"
    return "read" if got else None


def _require_admin(actor: User | None) -> None:
    if not sees_everything(actor):
        raise Forbidden("only the workspace owner or an admin may manage people")


def _may_manage(actor: User | None, person: User) -> None:
    """The owner's role and existence are fixed; only the owner changes or removes an admin."""
    if person.role == "owner":
        raise Forbidden("the workspace owner's role is fixed and the owner cannot be removed")
    if person.role == "admin" and actor is not None and actor.role != "owner":
        raise Forbidden("only the workspace owner may change or remove an admin")
