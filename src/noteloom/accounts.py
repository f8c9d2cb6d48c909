"""Users, API tokens, browser sessions and the settings the app changes at run time (tool toggles, scope …).

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

#: A browser session ends after this long without a request (a tab left open overnight
#: signs in again in the morning) …
SESSION_IDLE_MS = 12 * 3600 * 1000
#: … and this long after sign-in however busy it is, so a copied session token cannot live forever.
SESSION_MAX_MS = 7 * 24 * 3600 * 1000
#: A session's last use is written at most this often: a write on every request would cost a
#: transaction each and wake every cache that watches the database for commits.
SESSION_TOUCH_MS = 5 * 60 * 1000
SESSION_PREFIX = "nls_"


@dataclass(frozen=True)
class User:
    id: str
    name: str
    is_owner: bool


@dataclass(frozen=True)
class WebSession:
    """A live browser session: whose it is and until when it holds unless used again."""

    user: User
    valid_until: int


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

    def start_session(self, token: str | None, *, conn: Connection | None = None) -> tuple[str, WebSession]:
        """Trade a live API token for a new browser session token (only its hash is stored)."""
        if not token:
            raise AuthError("a token is required to sign in: paste the one `noteloom token` prints")
        session = SESSION_PREFIX + secrets.token_urlsafe(32)
        now = now_ms()
        with self._w(conn) as c:
            r = c.execute(
                sa.select(db.api_tokens.c.id.label("token_id"), db.users)
                .select_from(db.api_tokens.join(db.users, db.users.c.id == db.api_tokens.c.user_id))
                .where(db.api_tokens.c.token_hash == _hash_token(token), db.api_tokens.c.revoked_time.is_(None))
            ).first()
            if r is None:
                raise AuthError("the token is wrong or revoked: paste the one `noteloom token` prints")
            # Housekeeping where it costs nothing extra: this is a write transaction anyway.
            s = db.web_sessions.c
            c.execute(
                db.web_sessions.delete().where(
                    sa.or_(s.revoked_time.is_not(None), s.expires_time < now, s.last_used_time < now - SESSION_IDLE_MS)
                )
            )
            c.execute(
                db.web_sessions.insert(),
                {"id": new_id(), "user_id": r.id, "token_id": r.token_id, "session_hash": _hash_token(session),
                 "created_time": now, "last_used_time": now, "expires_time": now + SESSION_MAX_MS},
            )
        return session, WebSession(User(r.id, r.name, bool(r.is_owner)), now + SESSION_IDLE_MS)

    def verify_session(self, session: str | None) -> WebSession:
        """The live session ``session`` names (its last use noted now and then); ``AuthError``
        when it is unknown, expired, signed out, or its API token was revoked."""
        if not session:
            raise AuthError("sign in first: open the link `noteloom serve` printed, or paste your token")
        now = now_ms()
        s = db.web_sessions.c
        with self.read() as c:
            r = c.execute(
                sa.select(s.id.label("session_id"), s.last_used_time, s.expires_time, db.users)
                .select_from(
                    db.web_sessions.join(db.api_tokens, db.api_tokens.c.id == s.token_id)
                    .join(db.users, db.users.c.id == s.user_id)
                )
                .where(s.session_hash == _hash_token(session), s.revoked_time.is_(None),
                       db.api_tokens.c.revoked_time.is_(None))
            ).first()
        if r is None or now >= r.expires_time or now >= r.last_used_time + SESSION_IDLE_MS:
            raise AuthError(
                "the session has expired or was signed out: sign in again with your token (`noteloom token` prints it)"
            )
        last_used = r.last_used_time
        if now - last_used >= SESSION_TOUCH_MS:
            with self._w(None) as c:
                c.execute(db.web_sessions.update().where(s.id == r.session_id).values(last_used_time=now))
            last_used = now
        return WebSession(User(r.id, r.name, bool(r.is_owner)), min(r.expires_time, last_used + SESSION_IDLE_MS))

    def end_session(self, session: str, *, conn: Connection | None = None) -> None:
        """Sign a browser session out (unknown or already ended: nothing to do)."""
        with self._w(conn) as c:
            c.execute(
                db.web_sessions.update()
                .where(db.web_sessions.c.session_hash == _hash_token(session), db.web_sessions.c.revoked_time.is_(None))
                .values(revoked_time=now_ms())
            )

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
