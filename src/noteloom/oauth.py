"""OAuth 2.1 for remote MCP clients: what the flow keeps, and what its scopes mean.

The server is its own authorization server (``web/oauth.py`` speaks the protocol through
the MCP SDK's handlers). What a client is granted is what a scoped API token can carry
(:class:`~noteloom.accounts.TokenScopes`), because the access tokens *are* API tokens: the
token middleware, the MCP server and every tool already honour them, and ``noteloom token
list`` shows and ``noteloom token revoke`` ends them like any other.

Scopes, as the client asks and the consent page grants them:

- ``notes:read``: read tools only (a read-only token);
- ``notes:write``: every tool the person has on (the workspace's toggles still decide);
- ``notebook:<path>`` (percent-encoded title path, e.g. ``notebook:Work%2FClients``): only
  these notebooks and what is under them;
- ``tool:<name>``: only these tools (of those the person has on).

Notebooks and tools are chosen on the consent page, never widened by the client.

:class:`OAuthStore` keeps the clients (registered through dynamic client registration, or
known by their client ID metadata document's URL) and the grants of the flow (a pending
authorization request, a code, a refresh token), each secret stored as its SHA-256 only.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, unquote

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from noteloom import db
from noteloom.accounts import TokenScopes
from noteloom.db import new_id, now_ms

READ_SCOPE = "notes:read"
WRITE_SCOPE = "notes:write"
NOTEBOOK_PREFIX = "notebook:"
TOOL_PREFIX = "tool:"
#: What a client may ask for; notebooks are chosen on the consent page.
SUPPORTED_SCOPES = (READ_SCOPE, WRITE_SCOPE)

#: How long each step of the flow holds, in milliseconds.
REQUEST_TTL_MS = 10 * 60 * 1000  # the consent page may be left open a while
CODE_TTL_MS = 60 * 1000  # a code is traded at once by the client
ACCESS_TTL_MS = 60 * 60 * 1000
REFRESH_TTL_MS = 30 * 24 * 60 * 60 * 1000
#: A client metadata document is fetched again after this long.
DOCUMENT_TTL_MS = 24 * 60 * 60 * 1000
#: Dynamic registration is open to anyone who reaches the server: a cap keeps it bounded.
MAX_REGISTERED_CLIENTS = 1000

#: ``spent``: a refresh token already traded, kept (its hash) until it would have expired, so
#: that its second use is recognised as the theft it is (see :meth:`OAuthStore.end_family`).
GrantKind = Literal["request", "code", "refresh", "spent"]


def token_scopes(scopes: list[str]) -> TokenScopes:
    """What a granted scope list lets a token do."""
    notebooks = tuple(unquote(s[len(NOTEBOOK_PREFIX):]) for s in scopes if s.startswith(NOTEBOOK_PREFIX))
    tools = frozenset(s[len(TOOL_PREFIX):] for s in scopes if s.startswith(TOOL_PREFIX))
    return TokenScopes(read_only=WRITE_SCOPE not in scopes, notebooks=notebooks, tools=tools or None)


def granted_scopes(write: bool, notebooks: list[str], tools: list[str] | None = None) -> list[str]:
    """The scope list of a consent: read, maybe write, the notebooks chosen (none: all) and
    the tools chosen (``None``: every tool the person has on)."""
    out = [READ_SCOPE, *([WRITE_SCOPE] if write else [])]
    out += [NOTEBOOK_PREFIX + quote(path, safe="") for path in notebooks]
    return out + [TOOL_PREFIX + name for name in (tools or [])]


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Grant:
    """A live grant of the flow, as stored."""

    id: str
    kind: GrantKind
    client_id: str
    user_id: str | None
    data: dict[str, Any]
    expires_time: int


class OAuthStore:
    """The clients and grants of the OAuth flow, in the workspace's database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- clients ---------------------------------------------------------------------------

    def client(self, client_id: str) -> tuple[dict[str, Any], str, int | None] | None:
        """``(info, source, fetched_time)`` of a known client, or ``None``."""
        c = db.oauth_clients.c
        with db.reading(self.engine, None) as conn:
            row = conn.execute(sa.select(c.info, c.source, c.fetched_time).where(c.client_id == client_id)).first()
        return None if row is None else (dict(row.info), str(row.source), row.fetched_time)

    def save_client(self, client_id: str, info: dict[str, Any], source: str) -> None:
        """Keep a client's information (a registered one once; a document's on each fetch)."""
        c = db.oauth_clients.c
        now = now_ms()
        with db.writing(self.engine, None) as conn:
            if source == "registered":
                count = conn.execute(sa.select(sa.func.count()).where(c.source == "registered")).scalar_one()
                if count >= MAX_REGISTERED_CLIENTS:
                    raise OverflowError(f"at most {MAX_REGISTERED_CLIENTS} clients may register")
            found = conn.execute(sa.select(c.client_id).where(c.client_id == client_id)).first()
            if found is None:
                conn.execute(db.oauth_clients.insert().values(
                    client_id=client_id, info=info, source=source, created_time=now,
                    fetched_time=now if source == "document" else None))
            else:
                conn.execute(db.oauth_clients.update().where(c.client_id == client_id)
                             .values(info=info, fetched_time=now if source == "document" else None))

    # -- grants ----------------------------------------------------------------------------

    def add(self, kind: GrantKind, client_id: str, user_id: str | None, data: dict[str, Any], ttl_ms: int) -> str:
        """A new grant; returns its secret (shown once: only its hash is kept)."""
        secret = secrets.token_urlsafe(32)
        now = now_ms()
        with db.writing(self.engine, None) as conn:
            # Expired grants go as new ones come: the table never holds more than a day's flow.
            conn.execute(db.oauth_grants.delete().where(db.oauth_grants.c.expires_time <= now))
            conn.execute(db.oauth_grants.insert().values(
                id=new_id(), kind=kind, secret_hash=_hash(secret), client_id=client_id, user_id=user_id,
                data=data, created_time=now, expires_time=now + ttl_ms))
        return secret

    def find(self, kind: GrantKind, secret: str) -> Grant | None:
        """The live grant of this kind with this secret, or ``None`` (unknown, expired)."""
        g = db.oauth_grants.c
        with db.reading(self.engine, None) as conn:
            row = conn.execute(sa.select(g.id, g.kind, g.client_id, g.user_id, g.data, g.expires_time).where(
                g.secret_hash == _hash(secret), g.kind == kind, g.expires_time > now_ms())).first()
        if row is None:
            return None
        return Grant(row.id, row.kind, row.client_id, row.user_id, dict(row.data), row.expires_time)

    def take(self, kind: GrantKind, secret: str, *, remember: bool = True) -> Grant | None:
        """:meth:`find`, and the grant is used up: a code is gone, a refresh token becomes
        ``spent`` (remembered, so that using it again is seen; ``remember=False``, a revoked
        one, is gone). Of two takers at once, one gets it."""
        grant = self.find(kind, secret)
        if grant is None:
            return None
        g = db.oauth_grants.c
        with db.writing(self.engine, None) as conn:
            if kind == "refresh" and remember:
                used = conn.execute(db.oauth_grants.update().where(g.id == grant.id, g.kind == "refresh")
                                    .values(kind="spent")).rowcount
            else:
                used = conn.execute(db.oauth_grants.delete().where(g.id == grant.id)).rowcount
        return grant if used == 1 else None

    def end_family(self, family: str) -> list[tuple[str, str | None]]:
        """Forget the live refresh tokens descended from one consent (``family``: a refresh
        token presented again after it was traded means someone else holds a copy, RFC 9700
        4.14.2); ``(access token name, user id)`` of each, for the caller to revoke."""
        g = db.oauth_grants.c
        with db.writing(self.engine, None) as conn:
            rows = conn.execute(sa.select(g.id, g.user_id, g.data).where(g.kind == "refresh")).all()
            ended = [r for r in rows if dict(r.data).get("family") == family]
            if ended:
                conn.execute(db.oauth_grants.delete().where(g.id.in_([r.id for r in ended])))
        return [(str(dict(r.data).get("token_name") or ""), r.user_id) for r in ended]

    def holder_of(self, token_name: str) -> str | None:
        """The client holding the access token named ``token_name`` (its refresh token says)."""
        g = db.oauth_grants.c
        with db.reading(self.engine, None) as conn:
            rows = conn.execute(sa.select(g.client_id, g.data).where(g.kind == "refresh")).all()
        return next((str(r.client_id) for r in rows if dict(r.data).get("token_name") == token_name), None)

    def drop_for_token(self, token_name: str) -> None:
        """Forget the refresh tokens that renew the access token named ``token_name``."""
        g = db.oauth_grants.c
        with db.writing(self.engine, None) as conn:
            rows = conn.execute(sa.select(g.id, g.data).where(g.kind == "refresh")).all()
            ids = [r.id for r in rows if dict(r.data).get("token_name") == token_name]
            if ids:
                conn.execute(db.oauth_grants.delete().where(g.id.in_(ids)))
