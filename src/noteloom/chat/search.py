"""Search over a user's past conversations: the one place chat text is matched.

A search matches the user's words *literally* (``%``, ``_``, quotes and backslashes are
plain characters; LIKE's wildcards are escaped, the text travels as a bound parameter)
and ignoring case, against a conversation's title and the text of its user and
assistant messages (not tool results, not slash-command notes). Only the searcher's own
conversations that are not deleted are read, newest activity first.

Every search of chat text by SQL goes through :func:`searchable`, a predicate on the
conversation row: it admits standard conversations only, since a protected one's text is
sealed (matching it there would be matching ciphertext). Protected conversations are
matched here too, by opening them with their owner's keys (``noteloom.chat.sealing``), and
only then. Should chat text ever get a full-text index, it is built and queried here too,
behind the same predicate, so no sealed text enters it.

Protected conversations (``noteloom.chat.sealing``) are matched only with their owner's
keys, by opening their titles and messages here (:func:`protected_matches`): chat volume
is small, so this scan needs no index (which would hold their words in clear). Without the
keys they are skipped, and the surfaces say so with :data:`PROTECTED_SKIPPED`, a fixed
sentence: never whether, or how often, they matched.

Matching is a scan, not an index: 2,000 conversations of 20 messages each (40,000
messages of ~420 characters) take 30–55 ms a search on SQLite and 0.2 s on PostgreSQL
(ILIKE over 17 MB; ``tests/test_history_tools.py`` prints the figures), well under a
model call. A trigram index (PostgreSQL) or FTS table would go here, behind the same
predicate.
Case folding is the database's: PostgreSQL folds every script; SQLite's ``lower`` folds
ASCII letters only, so ``É`` finds ``é`` there only when typed in the same case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from noteloom.chat import tables as t
from noteloom.vault import Keys

#: The longest snippet returned, in characters (ellipses excluded).
SNIPPET_CHARS = 200
#: The most conversations one search returns.
MAX_HITS = 50
#: The longest query taken, in characters.
QUERY_MAX = 200
#: The roles whose text is searched.
SEARCHED_ROLES = ("user", "assistant")
#: What a search says when protected chats were left out (the vault locked, or a model that
#: is not private): the same words whatever was asked, and no count.
PROTECTED_SKIPPED = (
    "Protected (private and fortress) chats were not searched: they are read only with your vault unlocked"
    " (and, for a model's search, on a private model). Unlock your vault to include them."
)
#: The key of ``ToolContext.settings`` under which a chat turn lends ``search_conversations``
#: its owner's keys: only a turn on a private model does, so protected chats' words never reach
#: a cloud model through a search.
SEALED_READER = "chat.sealed_reader"


@dataclass(frozen=True)
class ConversationHit:
    """One conversation a search found: where it matched and the text around the match."""

    conversation_id: str
    title: str
    created_time: int
    updated_time: int
    #: ``message`` when some message's text matched (the snippet is from the earliest such
    #: message), else ``title``.
    matched: Literal["title", "message"]
    snippet: str
    message_id: str | None = None


def searchable(conversations: sa.Table = t.conversations) -> ColumnElement[bool]:
    """Whether a conversation's text may be searched by SQL: standard ones only.

    Every SQL search in this module filters by it; a conversation it refuses is never
    matched, counted or quoted by SQL."""
    return conversations.c.security_level == "standard"


def matching(needle: str, dialect: str, *, roles: Sequence[str] | None = SEARCHED_ROLES) -> ColumnElement[bool]:
    """A searchable conversation whose title, or the text of one of its messages (of ``roles``;
    ``None``: any), contains ``needle`` as written, ignoring case. The chat list's search and
    :func:`search_conversations` both match through it."""
    cv, m = t.conversations, t.messages
    in_message = sa.select(m.c.id).where(m.c.conversation_id == cv.c.id, _contains(m.c.content, needle, dialect))
    if roles is not None:
        in_message = in_message.where(m.c.role.in_(roles))
    return sa.and_(searchable(cv), sa.or_(_contains(cv.c.title, needle, dialect), in_message.exists()))


def _contains(column: ColumnElement[str], needle: str, dialect: str) -> ColumnElement[bool]:
    """``column`` contains ``needle`` as written, ignoring case (wildcards escaped)."""
    if dialect == "sqlite":
        # SQLite's LIKE ignores ASCII case itself; lower() on every row first costs a third more.
        return column.contains(needle, autoescape=True)
    return column.icontains(needle, autoescape=True)


def has_protected(conn: Connection, user_id: str) -> bool:
    """Whether ``user_id`` has a protected conversation (what a skipped search mentions)."""
    cv = t.conversations
    return conn.execute(sa.select(cv.c.id).where(
        cv.c.user_id == user_id, cv.c.security_level != "standard", cv.c.deleted_time.is_(None)).limit(1)
    ).first() is not None


@dataclass(frozen=True)
class ProtectedMatch:
    """A protected conversation that matched, opened: its row, title, where and what."""

    row: Any
    title: str
    matched: Literal["title", "message"]
    snippet: str
    message_id: str | None = None


def protected_matches(
    conn: Connection, user_id: str, needle: str, keys: Keys, *, roles: Sequence[str] | None = SEARCHED_ROLES,
    deleted: bool = False, exclude: str | None = None,
) -> list[ProtectedMatch]:
    """``user_id``'s protected conversations whose title or a message's text (of ``roles``;
    ``None``: any) contains ``needle``, ignoring case, opened with ``keys``, most recently
    active first. The snippet is from the earliest matching message, else the title."""
    if keys.user_id != user_id:
        return []
    folded = needle.casefold()
    cv, m = t.conversations, t.messages
    q = sa.select(cv).where(cv.c.user_id == user_id, cv.c.security_level != "standard",
                            cv.c.deleted_time.is_not(None) if deleted else cv.c.deleted_time.is_(None))
    if exclude is not None:
        q = q.where(cv.c.id != exclude)
    out: list[ProtectedMatch] = []
    for conv in conn.execute(q.order_by(cv.c.updated_time.desc(), cv.c.id)).all():
        title = keys.open_text(conv.id, "title", conv.title)
        mq = sa.select(m.c.id, m.c.content, m.c.sealed).where(m.c.conversation_id == conv.id).order_by(m.c.position)
        if roles is not None:
            mq = mq.where(m.c.role.in_(list(roles)))
        hit: ProtectedMatch | None = None
        for r in conn.execute(mq):
            text = keys.open_text(r.id, "content", r.content) if r.sealed else r.content
            if folded in text.casefold():
                hit = ProtectedMatch(conv, title, "message", snippet(text, needle), r.id)
                break
        if hit is None and folded in title.casefold():
            hit = ProtectedMatch(conv, title, "title", snippet(title, needle))
        if hit is not None:
            out.append(hit)
    return out


def search_conversations(
    conn: Connection,
    user_id: str,
    query: str,
    *,
    limit: int = 10,
    exclude: str | None = None,
    keys: Keys | None = None,
) -> tuple[list[ConversationHit], bool]:
    """The user's own conversations matching ``query``, most recently active first, and
    whether there were more than ``limit``. ``exclude`` names a conversation to leave out
    (the one asking: its latest message holds the query itself). Protected conversations
    are searched only with ``keys`` (their owner's), by opening them."""
    needle = " ".join(query.split()).lower()[:QUERY_MAX]
    if not needle:
        return [], False
    limit = max(1, min(limit, MAX_HITS))
    if keys is not None:
        hits, more = search_conversations(conn, user_id, query, limit=limit, exclude=exclude)
        opened = [ConversationHit(p.row.id, p.title, p.row.created_time, p.row.updated_time, p.matched, p.snippet,
                                  p.message_id)
                  for p in protected_matches(conn, user_id, needle, keys, exclude=exclude)]
        merged = sorted([*hits, *opened], key=lambda h: (-h.updated_time, h.conversation_id))
        return merged[:limit], more or len(merged) > limit
    cv, m = t.conversations, t.messages
    dialect = conn.dialect.name
    q = (
        sa.select(cv.c.id, cv.c.title, cv.c.created_time, cv.c.updated_time)
        .where(cv.c.user_id == user_id, cv.c.deleted_time.is_(None), matching(needle, dialect))
        .order_by(cv.c.updated_time.desc(), cv.c.id)
        .limit(limit + 1)
    )
    if exclude is not None:
        q = q.where(cv.c.id != exclude)
    rows = conn.execute(q).all()
    more = len(rows) > limit
    rows = rows[:limit]
    if not rows:
        return [], False
    ids = [r.id for r in rows]
    first = (
        sa.select(m.c.conversation_id, sa.func.min(m.c.position).label("position"))
        .where(m.c.conversation_id.in_(ids), m.c.role.in_(SEARCHED_ROLES), _contains(m.c.content, needle, dialect))
        .group_by(m.c.conversation_id)
        .subquery()
    )
    found = {
        r.conversation_id: (r.id, r.content)
        for r in conn.execute(
            sa.select(m.c.conversation_id, m.c.id, m.c.content).join(
                first, sa.and_(m.c.conversation_id == first.c.conversation_id, m.c.position == first.c.position)
            )
        )
    }
    hits = []
    for r in rows:
        message = found.get(r.id)
        if message is None:
            hits.append(ConversationHit(r.id, r.title, r.created_time, r.updated_time, "title", snippet(r.title, needle)))
        else:
            hits.append(ConversationHit(r.id, r.title, r.created_time, r.updated_time, "message",
                                        snippet(message[1], needle), message[0]))
    return hits, more


def snippet(text: str, needle: str, width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``text`` (whitespace collapsed) around the first
    place ``needle`` occurs, with ``…`` where it was cut."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    at = flat.lower().find(needle.lower())
    if at < 0:
        at = 0
    # The match a third of the way in: some words before it, more after.
    start = max(0, min(at - width // 3, len(flat) - width))
    end = start + width
    out = flat[start:end]
    return ("…" if start > 0 else "") + out + ("…" if end < len(flat) else "")
