"""Memories as rows: blocking functions that take a connection, so a caller composes them
into a transaction of its own.

Every read is scoped to one person: their personal rows and every shared row, never
another's personal ones. A memory outside that scope reads exactly like one that does not
exist (``None``, an empty list, :class:`NotFound` with the same message), so an id guessed
or copied from elsewhere tells nothing.

Who may change what: a personal row only its owner; a shared row any person of the
workspace (shared memory is curated by people, from the page and the command line; the
AI's ``remember`` always writes personal rows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from noteloom.db import new_id, now_ms
from noteloom.errors import InvalidInput, NotFound
from noteloom.memory.tables import memories as m

MemoryScope = Literal["personal", "shared"]
MemorySource = Literal["ai", "user"]
SCOPES: tuple[str, ...] = get_args(MemoryScope)

TITLE_MAX = 255
CONTENT_MAX = 50_000
TAGS_MAX = 20
TAG_MAX = 64
#: Longest title made from a memory's first line when none is given.
DERIVED_TITLE = 80
#: Most rows one search or listing returns.
LIMIT_MAX = 500
#: Most words of a search query that count (each must match).
QUERY_TERMS_MAX = 12

_WORD = re.compile(r"\w[\w'-]*")


@dataclass(frozen=True)
class Memory:
    """One remembered fact, with where it came from."""

    id: str
    scope: MemoryScope
    #: The owner of a personal memory; ``None`` for a shared one.
    user_id: str | None
    title: str
    content: str
    tags: tuple[str, ...]
    source: MemorySource
    conversation_id: str | None
    run_id: str | None
    message_id: str | None
    created_by: str | None
    created_time: int
    updated_time: int

    @property
    def by_ai(self) -> bool:
        """Written by a tool call (the AI): shown with a badge so a person can correct it."""
        return self.source == "ai"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "scope": self.scope, "title": self.title, "content": self.content,
            "tags": list(self.tags), "source": self.source, "by_ai": self.by_ai,
            "conversation_id": self.conversation_id, "run_id": self.run_id, "message_id": self.message_id,
            "created_by": self.created_by, "created_time": self.created_time, "updated_time": self.updated_time,
        }


def _memory(r: Row[Any]) -> Memory:
    tags = r.tags if isinstance(r.tags, list) else []
    return Memory(
        r.id, r.scope, r.user_id, r.title, r.content, tuple(str(t) for t in tags), r.source,
        r.conversation_id, r.run_id, r.message_id, r.created_by, r.created_time, r.updated_time,
    )


# -- scope --------------------------------------------------------------------------------------


def visible(user_id: str, scope: MemoryScope | None = None) -> sa.ColumnElement[bool]:
    """The SQL condition of the rows ``user_id`` sees: their personal rows and every shared
    row (or one of the two), none forgotten. For selects of one's own (titles only, counts)."""
    mine = sa.and_(m.c.scope == "personal", m.c.user_id == user_id)
    shared = m.c.scope == "shared"
    which = mine if scope == "personal" else shared if scope == "shared" else sa.or_(mine, shared)
    return sa.and_(which, m.c.deleted_time.is_(None))


def scoped(
    conn: Connection, user_id: str, *, scope: MemoryScope | None = None, limit: int | None = None,
) -> list[Memory]:
    """The memories ``user_id`` sees (their personal ones and all shared ones, or one scope),
    newest change first."""
    q = sa.select(m).where(visible(user_id, scope)).order_by(m.c.updated_time.desc(), m.c.id)
    if limit is not None:
        q = q.limit(_limit(limit))
    return [_memory(r) for r in conn.execute(q)]


def get(conn: Connection, user_id: str, memory_id: str) -> Memory | None:
    """One memory ``user_id`` sees, or ``None`` (missing, forgotten or someone else's alike)."""
    r = conn.execute(sa.select(m).where(m.c.id == memory_id, visible(user_id))).first()
    return None if r is None else _memory(r)


def by_ids(conn: Connection, user_id: str, ids: Iterable[str]) -> list[Memory]:
    """The memories among ``ids`` that ``user_id`` sees, in the order asked; the others are
    left out without a word (a foreign id is never fetched blind)."""
    wanted = list(dict.fromkeys(i for i in ids if isinstance(i, str)))[:LIMIT_MAX]
    if not wanted:
        return []
    rows = {r.id: _memory(r) for r in conn.execute(sa.select(m).where(m.c.id.in_(wanted), visible(user_id)))}
    return [rows[i] for i in wanted if i in rows]


def search(
    conn: Connection, user_id: str, query: str, *, scope: MemoryScope | None = None, limit: int = 20,
) -> list[Memory]:
    """Memories ``user_id`` sees whose title, content or tags hold every word of ``query``
    (case-insensitive; literal: no operators), those with a word in the title first, then
    the newest.

    A scan, not an index: 10,000 memories of a few hundred characters are searched in a few
    milliseconds on SQLite (``tests/test_memory_store.py`` measures it), and memories are
    far fewer than notes. ``lower()`` folds ASCII only on SQLite (Unicode on PostgreSQL)."""
    terms = query_terms(query)
    if not terms:
        raise InvalidInput("the search query holds no word; give one or more words", field="query")
    title = sa.func.lower(m.c.title)
    text_of = sa.func.lower(m.c.title + " " + m.c.content + " " + sa.cast(m.c.tags, sa.Text))
    matches = [text_of.contains(t, autoescape=True) for t in terms]
    in_title = sa.or_(*(title.contains(t, autoescape=True) for t in terms))
    q = (
        sa.select(m).where(visible(user_id, scope), *matches)
        .order_by(sa.case((in_title, 0), else_=1), m.c.updated_time.desc(), m.c.id)
        .limit(_limit(limit))
    )
    return [_memory(r) for r in conn.execute(q)]


def query_terms(query: str) -> list[str]:
    """The words of a search query, lowercased, each once, at most :data:`QUERY_TERMS_MAX`."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query or "")))[:QUERY_TERMS_MAX]


# -- changes ------------------------------------------------------------------------------------


def add(
    conn: Connection, user_id: str, content: str, *, title: str = "", tags: Sequence[str] = (),
    scope: MemoryScope = "personal", source: MemorySource = "user", conversation_id: str | None = None,
    run_id: str | None = None, message_id: str | None = None,
) -> Memory:
    """A new memory: ``scope`` personal (owned by ``user_id``) or shared (written by the
    person ``user_id``). Without a title its first line makes one. ``InvalidInput`` names
    the field of empty content and of anything over its cap."""
    if scope not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}", field="scope")
    body = check_content(content)
    heading = check_title(title) or derived_title(body)
    tm = now_ms()
    memory_id, owner, labels = new_id(), user_id if scope == "personal" else None, check_tags(tags)
    row: dict[str, Any] = {
        "id": memory_id, "scope": scope, "user_id": owner,
        "title": heading, "content": body, "tags": list(labels), "source": source,
        "conversation_id": conversation_id, "run_id": run_id, "message_id": message_id,
        "created_by": user_id, "created_time": tm, "updated_time": tm, "deleted_time": None,
    }
    conn.execute(m.insert(), row)
    return Memory(
        memory_id, scope, owner, heading, body, labels, source, conversation_id, run_id,
        message_id, user_id, tm, tm,
    )


def edit(
    conn: Connection, user_id: str, memory_id: str, *, title: str | None = None,
    content: str | None = None, tags: Sequence[str] | None = None,
) -> Memory:
    """Change a memory ``user_id`` may change (their personal one, or any shared one); the
    fields given change. An AI-written memory keeps its provenance: where it came from is
    still true after a person corrects it."""
    current = get(conn, user_id, memory_id)
    if current is None:
        raise NotFound(missing(memory_id))
    values: dict[str, Any] = {}
    if content is not None:
        values["content"] = check_content(content)
    if title is not None:
        values["title"] = check_title(title) or derived_title(values.get("content", current.content))
    if tags is not None:
        values["tags"] = list(check_tags(tags))
    if not values:
        return current
    values["updated_time"] = max(now_ms(), current.updated_time + 1)
    conn.execute(m.update().where(m.c.id == memory_id, visible(user_id)).values(**values))
    changed = get(conn, user_id, memory_id)
    assert changed is not None
    return changed


def delete(conn: Connection, user_id: str, memory_id: str, *, shared_too: bool = True) -> bool:
    """Forget a memory (its row stays, marked deleted): ``user_id``'s personal one, or with
    ``shared_too`` a shared one. ``False`` when there was nothing of theirs to forget (the
    caller says so without telling missing from foreign)."""
    res = conn.execute(
        m.update().where(m.c.id == memory_id, visible(user_id, None if shared_too else "personal"))
        .values(deleted_time=now_ms())
    )
    return bool(res.rowcount)


def missing(memory_id: str) -> str:
    """The one message for a memory that is missing, forgotten or someone else's."""
    return f"no memory {memory_id!r}; list or search your memories to find its id"


# -- checks -------------------------------------------------------------------------------------


def check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("a memory needs content: write the fact to keep", field="content")
    if len(content) > CONTENT_MAX:
        raise InvalidInput(f"content is {len(content):,} characters; a memory holds at most {CONTENT_MAX:,}",
                           field="content")
    _no_nul(content, "content")
    return content.strip()


def check_title(title: str | None) -> str:
    """The title with its whitespace collapsed (a newline must not break a list of titles)."""
    text = " ".join(str(title or "").split())
    if len(text) > TITLE_MAX:
        raise InvalidInput(f"title is {len(text)} characters; at most {TITLE_MAX}", field="title")
    _no_nul(text, "title")
    return text


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags stripped and whitespace-collapsed, each once (case-insensitively), none empty."""
    if isinstance(tags, str):
        raise InvalidInput("tags must be a list of words, not one string", field="tags")
    out: dict[str, str] = {}
    for tag in tags:
        text = " ".join(str(tag).split())
        if not text:
            continue
        if len(text) > TAG_MAX:
            raise InvalidInput(f"tag {text[:20]!r}… is {len(text)} characters; at most {TAG_MAX}", field="tags")
        _no_nul(text, "tags")
        out.setdefault(text.casefold(), text)
    if len(out) > TAGS_MAX:
        raise InvalidInput(f"{len(out)} tags; a memory has at most {TAGS_MAX}", field="tags")
    return tuple(out.values())


def derived_title(content: str) -> str:
    """A title from the content's first line, cut at :data:`DERIVED_TITLE` characters."""
    first = " ".join(content.strip().split("\n", 1)[0].split())
    return first if len(first) <= DERIVED_TITLE else first[: DERIVED_TITLE - 1].rstrip() + "…"


def _no_nul(text: str, field: str) -> None:
    if "\x00" in text:
        raise InvalidInput(f"{field} holds a NUL character, which cannot be stored", field=field)


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive whole number, not {limit!r}", field="limit")
    return min(limit, LIMIT_MAX)

