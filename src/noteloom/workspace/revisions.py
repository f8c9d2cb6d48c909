"""A note's history: every earlier version, kept as reverse deltas with full snapshots.

The current version lives in ``notes``. Each row of ``revisions`` is one earlier version,
either in full (a *snapshot*: ``body`` set, ``delta`` NULL — every row written before
migration 0007 is one) or as an edit script (``delta``, see ``delta.py``) that rebuilds it
from the next newer version: the next row up, or the note itself for the newest row.

Why reverse: before an append, the note was a prefix of what it is after, so the script
of the old version is one copy (~15 bytes) and the appended text is stored once, in the
note. Nothing already written changes when a version is added, and the newest versions,
the ones people go back to, sit closest to their base.

A new row is a snapshot when the scripts since the newest snapshot, its own included,
add up to at least its full text (Mercurial's revlog rule: a snapshot then costs no more
than the scripts it cuts short, so the history stays within about twice the scripts'
size), or when that chain would grow past ``MAX_CHAIN`` rows (which bounds the rows one
rebuild reads). Each row keeps the length and total size of its chain for that decision.

A title is NULL when it is the same as the next newer version's; snapshots always
carry theirs.

On PostgreSQL, a rebuild reads its base and its chain in one statement (one snapshot of
the data even under READ COMMITTED), and writers lock the note row first, so two writers
of one note take turns and each deltas against what the other committed.
"""

from __future__ import annotations

import difflib
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom import db
from noteloom.db import new_id
from noteloom.errors import NotFound, StorageError
from noteloom.workspace import delta

#: The most scripts one rebuild applies (999 appends' scripts: read and composed in ~12 ms here).
MAX_CHAIN = 1000

_r = db.revisions
# A version's length without reading its text: rows from before migration 0007 have none.
_CHARS = sa.func.coalesce(_r.c.chars, sa.func.length(_r.c.body))
# Sorts above every revision: the note's current version, the base of the newest chain.
_CURRENT = 2**62


#: What a listing shows of a version, its text left in the database:
#: ``(id, title, chars, version_time, created_time)``.
Listed = tuple[str, str, int, int, int]


def record(c: Connection, note: Any, title: str, body: str, t: int) -> int:
    """Keep ``note``'s version (its row, read under a lock) as it gives way to ``title``
    and ``body`` at time ``t``. Returns the time to stamp the change with: ``t``, or later
    when needed to keep the note's history in strict order."""
    note_id: str = note.id
    old_title: str = note.title
    old_body: str = note.body
    newest = c.execute(
        sa.select(_r.c.created_time, _r.c.chain_len, _r.c.chain_chars)
        .where(_r.c.note_id == note_id)
        .order_by(_r.c.created_time.desc(), _r.c.id.desc())
        .limit(1)
    ).first()
    chain_len, chain_chars = 0, 0
    if newest is not None:
        # The chain rebuilds versions by the order of these times: never let one tie.
        t = max(t, newest.created_time + 1)
        chain_len, chain_chars = newest.chain_len or 0, newest.chain_chars or 0
    script = delta.encode(len(body), delta.diff(body, old_body))
    chain_len += 1
    chain_chars += len(script)
    snapshot = chain_chars >= len(old_body) or chain_len > MAX_CHAIN
    c.execute(
        _r.insert(),
        {
            "id": new_id(),
            "note_id": note_id,
            "title": old_title if snapshot or old_title != title else None,
            "body": old_body if snapshot else None,
            "delta": None if snapshot else script,
            "chars": len(old_body),
            "chain_len": 0 if snapshot else chain_len,
            "chain_chars": 0 if snapshot else chain_chars,
            "version_time": note.updated_time,
            "created_time": t,
        },
    )
    return t


def listing(c: Connection, note_id: str) -> list[Listed]:
    """The note's earlier versions, newest first, without reading or rebuilding any text."""
    current_title = sa.select(db.notes.c.title).where(db.notes.c.id == note_id).scalar_subquery()
    # One statement: the note's title (the base of NULL titles) and the rows agree.
    rows = c.execute(
        sa.select(
            _r.c.id, _r.c.title, _CHARS.label("chars"), _r.c.version_time, _r.c.created_time,
            current_title.label("current_title"),
        )
        .where(_r.c.note_id == note_id)
        .order_by(_r.c.created_time.desc(), _r.c.id)
    ).all()
    out: list[Listed] = []
    title = rows[0][5] if rows else ""
    for rid, row_title, chars, version_time, created_time, _ in rows:  # plain tuples: 1,000s of rows
        title = row_title if row_title is not None else title
        out.append((rid, title, int(chars), version_time, created_time))
    return out


def note_of(c: Connection, revision_id: str) -> str:
    """The id of the note ``revision_id`` is a version of."""
    found = c.execute(sa.select(_r.c.note_id).where(_r.c.id == revision_id)).scalar()
    if found is None:
        raise NotFound(f"no revision {revision_id!r}; `noteloom notes history NOTE` lists them")
    return str(found)


def text(c: Connection, revision_id: str) -> tuple[str, str]:
    """The full title and body of one earlier version, rebuilt from its chain."""
    target = c.execute(
        sa.select(_r.c.note_id, _r.c.title, _r.c.body, _r.c.delta, _CHARS.label("chars"), _r.c.created_time)
        .where(_r.c.id == revision_id)
    ).first()
    if target is None:
        raise NotFound(f"no revision {revision_id!r}; `noteloom notes history NOTE` lists them")
    if target.delta is None:
        return target.title, target.body
    note_id, since = target.note_id, target.created_time
    newer = sa.and_(_r.c.note_id == note_id, _r.c.created_time >= since)
    base_time = sa.select(sa.func.min(_r.c.created_time)).where(newer, _r.c.delta.is_(None)).scalar_subquery()
    chain = sa.select(_r.c.created_time, _r.c.title, _r.c.body, _r.c.delta).where(
        newer, sa.or_(base_time.is_(None), _r.c.created_time <= base_time)
    )
    current = sa.select(
        sa.literal(_CURRENT, sa.BigInteger), db.notes.c.title, db.notes.c.body, sa.cast(sa.null(), sa.Text)
    ).where(db.notes.c.id == note_id, base_time.is_(None))
    rows = sorted(c.execute(sa.union_all(chain, current)).all(), key=lambda r: r[0], reverse=True)
    if len(rows) < 2 or rows[0][3] is not None or rows[-1][0] != since:
        raise _damaged(revision_id, note_id, "its chain has no full version to start from")
    title, body = rows[0][1], rows[0][2]
    scripts = []
    for _, row_title, _, script in rows[1:]:
        title = row_title if row_title is not None else title
        try:
            scripts.append(delta.decode(script))
        except delta.ScriptError as exc:
            raise _damaged(revision_id, note_id, str(exc)) from None
    try:
        rebuilt = delta.rebuild(body, scripts)
    except delta.ScriptError as exc:
        raise _damaged(revision_id, note_id, str(exc)) from None
    if len(rebuilt) != target.chars:
        raise _damaged(revision_id, note_id, f"it rebuilds to {len(rebuilt)} characters, not {target.chars}")
    return title, rebuilt


def unified_diff(old: tuple[str, str], new: tuple[str, str], old_label: str, new_label: str) -> str:
    """A unified diff from ``(title, body)`` ``old`` to ``new``, as ``diff -u`` prints it."""
    out: list[str] = []
    if old[0] != new[0]:
        out.append(f"title: {old[0]!r} -> {new[0]!r}\n")
    lines = difflib.unified_diff(
        old[1].splitlines(keepends=True), new[1].splitlines(keepends=True), old_label, new_label
    )
    for line in lines:
        # The last line of a body without a final newline, marked as diff marks it.
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _damaged(revision_id: str, note_id: str, why: str) -> StorageError:
    return StorageError(
        f"revision {revision_id!r} of note {note_id!r} cannot be rebuilt: {why}. Its history was "
        "changed outside noteloom; the note's current version is unaffected"
    )
