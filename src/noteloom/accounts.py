"""Users, API tokens, browser sessions and the settings the app changes at run time (tool toggles, scope …).

A mixin of ``Workspace``: the same engine, the same ``conn=`` composition.

A token belongs to a user and carries :class:`TokenScopes`: read-only, a tool allowlist, a
notebook scope (the pattern language of ``noteloom tools scope``), and it may expire. The
scopes only ever take away from what the user may do; an unscoped token (every token made
before scopes existed, and the one ``noteloom token`` keeps in its file) is the user's full
access. A browser session hangs off the token it was started with, so it carries that
token's scopes and ends when the token expires or is revoked. Where the scopes are enforced:
``web/auth.py`` (the JSON API and the pages) and ``mcp.py`` (tools over HTTP).
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
from noteloom.errors import AuthError, InvalidInput, NotFound

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
    #: ``owner``, ``admin`` or ``member`` (``noteloom.access``); the owner's is always ``owner``.
    role: str = "member"

    def __post_init__(self) -> None:
        if self.is_owner and self.role != "owner":
            object.__setattr__(self, "role", "owner")

    @property
    def is_admin(self) -> bool:
        """The owner or an admin: manages people and sees every notebook."""
        return self.role in ("owner", "admin")

    @staticmethod
    def of(row: Any) -> User:
        """From a ``users`` row (or any row carrying its columns)."""
        return User(row.id, row.name, bool(row.is_owner), row.role or "member")


#: The name a token gets when none is given (and that tokens made before names existed have).
DEFAULT_TOKEN_NAME = "default"
TOKEN_NAME_MAX = 100
#: A token's last use is written at most this often (as a session's is).
TOKEN_TOUCH_MS = SESSION_TOUCH_MS


@dataclass(frozen=True)
class TokenScopes:
    """What a token may do beyond identifying its user; the defaults take nothing away.

    ``read_only``: only tools whose effect is ``read`` (and, on the JSON API, no writes);
    ``tools``: only these tools (``None``: every tool the workspace has on); ``notebooks``:
    notebook patterns, intersected with the workspace's own scope (never widening it).
    """

    read_only: bool = False
    tools: frozenset[str] | None = None
    notebooks: tuple[str, ...] = ()

    @property
    def unrestricted(self) -> bool:
        return not self.read_only and self.tools is None and not self.notebooks

    def to_json(self) -> dict[str, Any] | None:
        if self.unrestricted:
            return None
        return {"read_only": self.read_only, "tools": sorted(self.tools) if self.tools is not None else None,
                "notebooks": list(self.notebooks)}

    @staticmethod
    def from_json(value: Any) -> TokenScopes:
        """The scopes stored with a token; anything unreadable takes everything away
        (a token whose limits cannot be read must not fall back to full access)."""
        if value is None:
            return FULL_ACCESS
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return NO_ACCESS
        if not isinstance(value, dict):
            return NO_ACCESS
        tools = value.get("tools")
        notebooks = value.get("notebooks") or []
        if (tools is not None and not isinstance(tools, list)) or not isinstance(notebooks, list):
            return NO_ACCESS
        return TokenScopes(
            read_only=bool(value.get("read_only", False)),
            tools=frozenset(str(t) for t in tools) if tools is not None else None,
            notebooks=tuple(str(p) for p in notebooks),
        )

    def describe(self) -> str:
        """One line for ``noteloom token list``."""
        if self.unrestricted:
            return "full access"
        parts: list[str] = []
        if self.read_only:
            parts.append("read-only")
        if self.tools is not None:
            parts.append("tools: " + (",".join(sorted(self.tools)) or "(none)"))
        if self.notebooks:
            parts.append("notebooks: " + " ".join(self.notebooks))
        return "; ".join(parts)


FULL_ACCESS = TokenScopes()
NO_ACCESS = TokenScopes(read_only=True, tools=frozenset())


@dataclass(frozen=True)
class Grant:
    """What a live credential grants: its user, the token's scopes, and when it stops
    holding (``None``: it does not expire)."""

    user: User
    scopes: TokenScopes = FULL_ACCESS
    expires_time: int | None = None


@dataclass(frozen=True)
class TokenInfo:
    """A token as ``noteloom token list`` shows it (never the token itself)."""

    id: str
    name: str
    user_id: str
    user_name: str
    created_time: int
    expires_time: int | None
    last_used_time: int | None
    scopes: TokenScopes


@dataclass(frozen=True)
class WebSession:
    """A live browser session: whose it is and until when it holds unless used again;
    it carries the scopes of the token it was started with."""

    user: User
    valid_until: int
    scopes: TokenScopes = FULL_ACCESS


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
            return User.of(r) if r else None

    def ensure_owner(self, name: str = "owner", *, conn: Connection | None = None) -> User:
        with self._w(conn) as c:
            existing = self.owner(conn=c)
            if existing is not None:
                return existing
            uid = new_id()
            c.execute(db.users.insert(),
                      {"id": uid, "name": name, "is_owner": True, "role": "owner", "created_time": now_ms()})
            return User(uid, name, True, "owner")

    def create_token(
        self,
        user_id: str,
        *,
        revoke_others: bool = False,
        name: str = DEFAULT_TOKEN_NAME,
        scopes: TokenScopes = FULL_ACCESS,
        expires_time: int | None = None,
        conn: Connection | None = None,
    ) -> str:
        """A new API token for ``user_id``; only its hash is stored. ``revoke_others`` revokes
        every earlier token of the user; otherwise ``name`` must not be one of the user's
        live tokens' names (``noteloom token revoke NAME`` must name one token)."""
        name = name.strip()
        if not name or len(name) > TOKEN_NAME_MAX or any(ch.isspace() and ch != " " for ch in name):
            raise InvalidInput(f"a token's name is 1 to {TOKEN_NAME_MAX} characters on one line, not {name!r}",
                               field="name")
        now = now_ms()
        if expires_time is not None and expires_time <= now:
            raise InvalidInput("the expiry is in the past: give a later date or a duration such as 30d",
                               field="expires")
        token = "nl_" + secrets.token_urlsafe(32)
        t = db.api_tokens.c
        with self._w(conn) as c:
            if revoke_others:
                c.execute(
                    db.api_tokens.update()
                    .where(t.user_id == user_id, t.revoked_time.is_(None))
                    .values(revoked_time=now)
                )
            else:
                taken = c.execute(
                    sa.select(t.id).where(t.user_id == user_id, t.revoked_time.is_(None), _live(t, now),
                                          sa.func.coalesce(t.name, DEFAULT_TOKEN_NAME) == name)
                ).first()
                if taken is not None and name != DEFAULT_TOKEN_NAME:
                    raise InvalidInput(
                        f"a live token is already named {name!r}: revoke it first "
                        f"(`noteloom token revoke {name}`) or choose another name", field="name")
            c.execute(
                db.api_tokens.insert(),
                {"id": new_id(), "user_id": user_id, "token_hash": _hash_token(token), "created_time": now,
                 "name": name, "scopes": scopes.to_json(), "expires_time": expires_time},
            )
        return token

    def list_tokens(self, user_id: str | None = None, *, conn: Connection | None = None) -> list[TokenInfo]:
        """Live (unrevoked, unexpired) tokens, oldest first; of one user, or of everyone."""
        t = db.api_tokens.c
        query = (
            sa.select(t.id, t.name, t.user_id, db.users.c.name.label("user_name"), t.created_time, t.expires_time,
                      t.last_used_time, t.scopes)
            .select_from(db.api_tokens.join(db.users, db.users.c.id == t.user_id))
            .where(t.revoked_time.is_(None), _live(t, now_ms()))
            .order_by(t.created_time, t.id)
        )
        if user_id is not None:
            query = query.where(t.user_id == user_id)
        with self._r(conn) as c:
            rows = c.execute(query).all()
        return [TokenInfo(r.id, r.name or DEFAULT_TOKEN_NAME, r.user_id, r.user_name, r.created_time,
                          r.expires_time, r.last_used_time, TokenScopes.from_json(r.scopes)) for r in rows]

    def revoke_token(self, name_or_id: str, user_id: str | None = None, *, conn: Connection | None = None) -> TokenInfo:
        """Revoke one live token, named by its id or its name (of ``user_id`` when given);
        its browser sessions end with it. ``NotFound`` when none matches, ``InvalidInput``
        when a name matches several (then the id says which)."""
        wanted = name_or_id.strip()
        with self._w(conn) as c:
            live = self.list_tokens(user_id, conn=c)
            matches = [i for i in live if i.id == wanted] or [i for i in live if i.name == wanted]
            if not matches:
                raise NotFound(f"no live token is named {wanted!r}; `noteloom token list` shows the live ones")
            if len(matches) > 1:
                ids = ", ".join(i.id for i in matches)
                raise InvalidInput(f"several live tokens are named {wanted!r} ({ids}): revoke one by its id",
                                   field="token")
            c.execute(db.api_tokens.update().where(db.api_tokens.c.id == matches[0].id).values(revoked_time=now_ms()))
        return matches[0]

    def token_name_of(self, token: str) -> str | None:
        """The name of the live token whose value is ``token``, or ``None``."""
        t = db.api_tokens.c
        with self._r(None) as c:
            row = c.execute(sa.select(t.name).where(t.token_hash == _hash_token(token), t.revoked_time.is_(None))).first()
        return None if row is None else str(row.name)

    def revoke_secret(self, token: str, *, conn: Connection | None = None) -> str | None:
        """Revoke the live token whose value is ``token`` (an OAuth client giving its access
        token back); its name, or ``None`` when no live token has that value."""
        t = db.api_tokens.c
        with self._w(conn) as c:
            row = c.execute(sa.select(t.id, t.name).where(t.token_hash == _hash_token(token),
                                                          t.revoked_time.is_(None))).first()
            if row is None:
                return None
            c.execute(db.api_tokens.update().where(t.id == row.id).values(revoked_time=now_ms()))
        return str(row.name)

    def verify_token(self, token: str | None) -> User:
        """The user a live token belongs to; ``AuthError`` otherwise."""
        return self.check_token(token).user

    def check_token(self, token: str | None) -> Grant:
        """What a live token grants (its user and scopes); ``AuthError`` when it is missing,
        unknown, revoked or expired (all alike). Its last use is noted now and then."""
        if not token:
            raise AuthError("a token is required: send `Authorization: Bearer TOKEN` (`noteloom token` prints one)")
        now = now_ms()
        t = db.api_tokens.c
        with self.read() as c:
            r = c.execute(
                sa.select(t.id.label("token_id"), t.scopes, t.expires_time, t.last_used_time.label("token_used"),
                          db.users)
                .select_from(db.api_tokens.join(db.users, db.users.c.id == t.user_id))
                .where(t.token_hash == _hash_token(token), t.revoked_time.is_(None))
            ).first()
        if r is None or (r.expires_time is not None and now >= r.expires_time):
            raise AuthError("the token is wrong or revoked, or has expired (`noteloom token` prints a valid one)")
        if r.token_used is None or now - r.token_used >= TOKEN_TOUCH_MS:
            with self._w(None) as c:
                c.execute(db.api_tokens.update().where(t.id == r.token_id).values(last_used_time=now))
        return Grant(User.of(r), TokenScopes.from_json(r.scopes), r.expires_time)

    def start_session(self, token: str | None, *, conn: Connection | None = None) -> tuple[str, WebSession]:
        """Trade a live API token for a new browser session token (only its hash is stored)."""
        if not token:
            raise AuthError("a token is required to sign in: paste the one `noteloom token` prints")
        session = SESSION_PREFIX + secrets.token_urlsafe(32)
        now = now_ms()
        with self._w(conn) as c:
            t = db.api_tokens.c
            r = c.execute(
                sa.select(t.id.label("token_id"), t.scopes, t.expires_time.label("token_expires"), db.users)
                .select_from(db.api_tokens.join(db.users, db.users.c.id == t.user_id))
                .where(t.token_hash == _hash_token(token), t.revoked_time.is_(None), _live(t, now))
            ).first()
            if r is None:
                raise AuthError("the token is wrong or revoked, or has expired: paste the one `noteloom token` prints")
            # A session never outlives the token it was started with.
            expires = now + SESSION_MAX_MS if r.token_expires is None else min(now + SESSION_MAX_MS, r.token_expires)
            self._sweep_sessions(c, now)
            c.execute(
                db.web_sessions.insert(),
                {"id": new_id(), "user_id": r.id, "token_id": r.token_id, "session_hash": _hash_token(session),
                 "created_time": now, "last_used_time": now, "expires_time": expires},
            )
        return session, WebSession(User.of(r), min(expires, now + SESSION_IDLE_MS),
                                    TokenScopes.from_json(r.scopes))

    def start_password_session(self, name: str, password: str, *,
                               conn: Connection | None = None) -> tuple[str, WebSession]:
        """Sign a person in by name and password (``noteloom users password`` sets one): a new
        browser session with their full access. A wrong name and a wrong password read alike."""
        from noteloom.people import check_password

        wrong = AuthError("the name or the password is wrong")
        if not name or not password:
            raise wrong
        with self.read() as c:
            r = c.execute(sa.select(db.users).where(db.users.c.name == name.strip())).first()
        if not check_password(r.password_hash if r is not None else None, password):
            raise wrong
        assert r is not None
        session = SESSION_PREFIX + secrets.token_urlsafe(32)
        now = now_ms()
        with self._w(conn) as c:
            self._sweep_sessions(c, now)
            c.execute(
                db.web_sessions.insert(),
                {"id": new_id(), "user_id": r.id, "token_id": None, "session_hash": _hash_token(session),
                 "created_time": now, "last_used_time": now, "expires_time": now + SESSION_MAX_MS},
            )
        return session, WebSession(User.of(r), now + SESSION_IDLE_MS)

    @staticmethod
    def _sweep_sessions(c: Connection, now: int) -> None:
        """Housekeeping where it costs nothing extra (a write transaction anyway)."""
        s = db.web_sessions.c
        c.execute(
            db.web_sessions.delete().where(
                sa.or_(s.revoked_time.is_not(None), s.expires_time < now, s.last_used_time < now - SESSION_IDLE_MS)
            )
        )

    def verify_session(self, session: str | None) -> WebSession:
        """The live session ``session`` names (its last use noted now and then); ``AuthError``
        when it is unknown, expired, signed out, or its API token was revoked."""
        if not session:
            raise AuthError("sign in first: open the link `noteloom serve` printed, or paste your token")
        now = now_ms()
        s = db.web_sessions.c
        with self.read() as c:
            r = c.execute(
                sa.select(s.id.label("session_id"), s.last_used_time, s.expires_time, db.api_tokens.c.scopes,
                          db.api_tokens.c.expires_time.label("token_expires"), db.users)
                .select_from(
                    db.web_sessions.outerjoin(db.api_tokens, db.api_tokens.c.id == s.token_id)
                    .join(db.users, db.users.c.id == s.user_id)
                )
                # A password sign-in's session has no token; a token's ends with it.
                .where(s.session_hash == _hash_token(session), s.revoked_time.is_(None),
                       sa.or_(s.token_id.is_(None), db.api_tokens.c.revoked_time.is_(None)))
            ).first()
        if (r is None or now >= r.expires_time or now >= r.last_used_time + SESSION_IDLE_MS
                or (r.token_expires is not None and now >= r.token_expires)):
            raise AuthError(
                "the session has expired or was signed out: sign in again with your token (`noteloom token` prints it)"
            )
        last_used = r.last_used_time
        if now - last_used >= SESSION_TOUCH_MS:
            with self._w(None) as c:
                c.execute(db.web_sessions.update().where(s.id == r.session_id).values(last_used_time=now))
            last_used = now
        until = min(r.expires_time, last_used + SESSION_IDLE_MS)
        if r.token_expires is not None:
            until = min(until, r.token_expires)
        return WebSession(User.of(r), until, TokenScopes.from_json(r.scopes))

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


def _live(t: Any, now: int) -> Any:
    """The condition that a token row has not expired at ``now``."""
    return sa.or_(t.expires_time.is_(None), t.expires_time > now)


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
