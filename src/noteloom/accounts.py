"""Users, API tokens and the settings the app changes at run time (tool toggles, scope …).

A mixin of ``Workspace``: the same engine, the same ``conn=`` composition.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.db import new_id, now_ms
from noteloom.errors import AuthError


@dataclass(frozen=True)
class User:
    id: str
    name: str
    is_owner: bool


class Accounts:
    """Users, tokens (stored hashed) and run-time settings."""

    engine: Engine

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)

    def read(self) -> AbstractContextManager[Connection]:
        return db.read_tx(self.engine)

    def owner(self, *, conn: Connection | None = None) -> User | None:
        with self._r(conn) as c:
            r = c.execute(sa.select(db.users).where(db.users.c.is_owner.is_(True)).limit(1)).first()
            return User(r.id, r.name, True) if r else None

    def ensure_owner(self, name: str = "owner", *, conn: Connection | None = None) -> User:
        with self._w(conn) as c:
            existing = self.owner(conn=c)
            if existing is not None:
                return existing
            uid = new_id()
            c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": True, "created_time": now_ms()})
            return User(uid, name, True)

    def create_token(self, user_id: str, *, revoke_others: bool = False, conn: Connection | None = None) -> str:
        """A new API token for ``user_id``; only its hash is stored."""
        token = "nl_" + secrets.token_urlsafe(32)
        with self._w(conn) as c:
            if revoke_others:
                c.execute(
                    db.api_tokens.update()
                    .where(db.api_tokens.c.user_id == user_id, db.api_tokens.c.revoked_time.is_(None))
                    .values(revoked_time=now_ms())
                )
            c.execute(
                db.api_tokens.insert(),
                {"id": new_id(), "user_id": user_id, "token_hash": _hash_token(token), "created_time": now_ms()},
            )
        return token

    def verify_token(self, token: str | None) -> User:
        """The user a live token belongs to; ``AuthError`` otherwise."""
        if not token:
            raise AuthError("a token is required: send `Authorization: Bearer TOKEN` (`noteloom token` prints one)")
        with self.read() as c:
            r = c.execute(
                sa.select(db.users)
                .select_from(db.api_tokens.join(db.users, db.users.c.id == db.api_tokens.c.user_id))
                .where(db.api_tokens.c.token_hash == _hash_token(token), db.api_tokens.c.revoked_time.is_(None))
            ).first()
        if r is None:
            raise AuthError("the token is wrong or revoked (`noteloom token` prints a valid one)")
        return User(r.id, r.name, bool(r.is_owner))

    def get_setting(self, key: str, default: Any = None, *, conn: Connection | None = None) -> Any:
        with self._r(conn) as c:
            v = c.execute(sa.select(db.settings.c.value).where(db.settings.c.key == key)).scalar()
        return default if v is None else json.loads(v)

    def settings_with_prefix(self, *prefixes: str, conn: Connection | None = None) -> dict[str, Any]:
        """Every setting whose key starts with one of ``prefixes``, in one query."""
        with self._r(conn) as c:
            cond = sa.or_(*(db.settings.c.key.startswith(p) for p in prefixes))
            rows = c.execute(sa.select(db.settings).where(cond)).all()
        return {r.key: json.loads(r.value) for r in rows}

    def set_setting(self, key: str, value: Any, *, conn: Connection | None = None) -> None:
        data = json.dumps(value)
        with self._w(conn) as c:
            res = c.execute(db.settings.update().where(db.settings.c.key == key).values(value=data))
            if not res.rowcount:
                c.execute(db.settings.insert(), {"key": key, "value": data})

    def delete_setting(self, key: str, *, conn: Connection | None = None) -> None:
        with self._w(conn) as c:
            c.execute(db.settings.delete().where(db.settings.c.key == key))


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
