"""What a data source is when a call reads it: its visible fields and the rows it may see.

A source becomes a :class:`Table` per call, never cached, so a column added to an attached
database later is seen (and, when its name looks like a credential, hidden) on the next
call. The workspace's own sources are fixed ``SELECT`` statements over noteloom's tables
with the owner, trash and notebook-scope conditions already in them; an attached table is
reflected from its database, read-only.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.elements import ColumnElement

from noteloom import db
from noteloom.errors import ConfigError
from noteloom.recipes import tables as rt
from noteloom.runs import tables as runs_t
from noteloom.tools import ToolContext, ToolError

#: How a field's values are compared and shown. ``time_ms``: noteloom's epoch milliseconds,
#: read and written as ISO 8601; ``any``: SQLite columns declared without a type.
Kind = Literal["text", "integer", "number", "boolean", "datetime", "date", "time_ms", "json", "binary", "any", "other"]

#: Column names that look like credentials: never shown, filtered or sorted on, whatever
#: the configuration says (``_key``, ``_token``, ``_hash`` … at the end, and the bare words;
#: camelCase is split first, so ``apiKey`` is ``api_Key``).
CREDENTIAL = re.compile(
    r"(?:^|_)(?:password|passwd|pwd|secret|key|apikey|token|hash|salt|credentials?|otp|pin)$"
    r"|(?:password|passwd|secret|token|hash)$",
    re.IGNORECASE,
)

#: Longest time one query on an attached PostgreSQL database may run.
STATEMENT_TIMEOUT_MS = 10_000


def is_credential(name: str) -> bool:
    """Whether a column called ``name`` may hold a credential (then it is never exposed)."""
    return bool(CREDENTIAL.search(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)))


@dataclass(frozen=True)
class Field:
    name: str
    kind: Kind
    #: Text others wrote: a result carrying it is fenced as untrusted.
    untrusted: bool = False


@dataclass(frozen=True)
class Table:
    """A source as one call sees it."""

    name: str
    description: str
    fields: tuple[Field, ...]
    #: The rows the caller may read; its columns are named after the fields.
    rows: sa.FromClause
    #: ``sqlite`` or ``postgresql``: how values are bound.
    dialect: str
    #: Default order: ``(field, descending)`` pairs.
    default_sort: tuple[tuple[str, bool], ...] = ()
    #: A hidden column whose non-empty value makes that row's text untrusted (a clipped note).
    row_untrusted: str | None = None
    #: Whether only the caller's own rows are in it.
    owner_scoped: bool = False
    #: Whether the rows come from noteloom's own tables (typed by us) or an attached database.
    attached: bool = False

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    def column(self, name: str) -> ColumnElement[Any]:
        col: ColumnElement[Any] = self.rows.c[name]
        return sa.type_coerce(col, sa.types.NullType()) if self.attached else col


# --- the workspace's own entities -------------------------------------------------------------------


@dataclass(frozen=True)
class WorkspaceSource:
    name: str
    description: str
    kinds: dict[str, Kind]
    build: Callable[[ToolContext, Connection], sa.Select[Any]]
    default_sort: tuple[tuple[str, bool], ...]
    owner_scoped: bool = False
    row_untrusted: str | None = None

    def table(self, ctx: ToolContext, conn: Connection) -> Table:
        if self.owner_scoped and ctx.user is None:
            raise ToolError(f"{self.name} belong to a user; this call has none (sign in, or use a token)")
        fields = tuple(Field(n, k) for n, k in self.kinds.items())
        return Table(self.name, self.description, fields, self.build(ctx, conn).subquery(self.name),
                     conn.dialect.name, self.default_sort, self.row_untrusted, self.owner_scoped)


def _note_rows(ctx: ToolContext, conn: Connection, *, todos: bool) -> sa.Select[Any]:
    n, nb, nt, tg = db.notes, db.notebooks, db.note_tags, db.tags
    tags = (
        sa.select(sa.func.aggregate_strings(tg.c.title, ", "))
        .select_from(nt.join(tg, tg.c.id == nt.c.tag_id))
        .where(nt.c.note_id == n.c.id)
        .scalar_subquery()
    )
    cols: list[Any] = [n.c.id, n.c.title, n.c.notebook_id, nb.c.title.label("notebook"), tags.label("tags")]
    if todos:
        cols += [n.c.todo_due.label("due"), n.c.todo_completed.label("completed"),
                 n.c.todo_completed.is_not(None).label("done")]
    else:
        cols += [n.c.is_todo]
    cols += [n.c.source_url, n.c.created_time, n.c.updated_time]
    q = (
        sa.select(*cols)
        .select_from(n.join(nb, nb.c.id == n.c.notebook_id))
        .where(n.c.deleted_time.is_(None), nb.c.deleted_time.is_(None))
    )
    if todos:
        q = q.where(n.c.is_todo.is_(True))
    allowed = ctx.allowed_notebooks(conn=conn)
    if allowed is not None:
        q = q.where(n.c.notebook_id.in_(sorted(allowed)))
    return q


def _notebooks(ctx: ToolContext, conn: Connection) -> sa.Select[Any]:
    nb, n = db.notebooks, db.notes
    count = (sa.select(sa.func.count()).where(n.c.notebook_id == nb.c.id, n.c.deleted_time.is_(None))
             .scalar_subquery())
    allowed = ctx.allowed_notebooks(conn=conn)
    # A parent the caller may not see does not exist for them, not even as an id.
    parent = nb.c.parent_id if allowed is None else sa.case(
        (nb.c.parent_id.in_(sorted(allowed)), nb.c.parent_id), else_=sa.null())
    q = sa.select(nb.c.id, nb.c.title, parent.label("parent_id"), count.label("note_count"), nb.c.created_time,
                  nb.c.updated_time).where(nb.c.deleted_time.is_(None))
    return q if allowed is None else q.where(nb.c.id.in_(sorted(allowed)))


def _tags(ctx: ToolContext, conn: Connection) -> sa.Select[Any]:
    tg, nt, n = db.tags, db.note_tags, db.notes
    live = sa.select(sa.func.count()).select_from(nt.join(n, n.c.id == nt.c.note_id)).where(
        nt.c.tag_id == tg.c.id, n.c.deleted_time.is_(None))
    allowed = ctx.allowed_notebooks(conn=conn)
    if allowed is not None:
        live = live.where(n.c.notebook_id.in_(sorted(allowed)))
    count = live.scalar_subquery()
    # A tag on no note the caller may see is not theirs to see either.
    return sa.select(tg.c.id, tg.c.title, count.label("note_count"), tg.c.created_time,
                     tg.c.updated_time).where(count > 0)


def _conversations(ctx: ToolContext, conn: Connection) -> sa.Select[Any]:
    from noteloom.chat import tables as ct  # the chat loads only when its data is read
    from noteloom.chat.search import searchable

    assert ctx.user is not None
    cv, m = ct.conversations, ct.messages
    count = sa.select(sa.func.count()).where(m.c.conversation_id == cv.c.id).scalar_subquery()
    return sa.select(
        cv.c.id, cv.c.title, cv.c.pinned, cv.c.model, count.label("message_count"), cv.c.input_tokens,
        cv.c.output_tokens, cv.c.cost_usd, cv.c.created_time, cv.c.updated_time,
    ).where(cv.c.user_id == ctx.user.id, cv.c.deleted_time.is_(None), searchable(cv))


def _recipes(ctx: ToolContext, conn: Connection) -> sa.Select[Any]:
    assert ctx.user is not None
    r = rt.recipes
    return sa.select(
        r.c.id, r.c.name, r.c.mode, r.c.schedule, r.c.timezone, r.c.model, r.c.enabled, r.c.paused_reason,
        r.c.failures, r.c.next_fire_time, r.c.created_time, r.c.updated_time,
    ).where(r.c.user_id == ctx.user.id)


def _recipe_runs(ctx: ToolContext, conn: Connection) -> sa.Select[Any]:
    assert ctx.user is not None
    rr, r, run = rt.recipe_runs, rt.recipes, runs_t.runs
    return (
        sa.select(
            rr.c.run_id, rr.c.recipe_id, r.c.name.label("recipe"), rr.c.trigger, rr.c.status, rr.c.mode,
            rr.c.model, rr.c.error_code, rr.c.items_done, rr.c.items_failed, rr.c.tool_calls, rr.c.dry_run,
            run.c.input_tokens, run.c.output_tokens, run.c.cost_usd, rr.c.created_time, rr.c.finished_time,
        )
        .select_from(rr.join(r, r.c.id == rr.c.recipe_id).join(run, run.c.id == rr.c.run_id))
        .where(r.c.user_id == ctx.user.id)
    )


_NOTE_KINDS: dict[str, Kind] = {"id": "text", "title": "text", "notebook_id": "text", "notebook": "text",
                                "tags": "text"}
_TIMES: dict[str, Kind] = {"created_time": "time_ms", "updated_time": "time_ms"}

#: The workspace's entities a user may opt in (``[data] workspace = [...]``). Note bodies are
#: not among them: read_note reads a body within its budget and flags a clipped one itself.
WORKSPACE: dict[str, WorkspaceSource] = {s.name: s for s in (
    WorkspaceSource(
        "notes", "Notes' metadata (no bodies): title, notebook, tags, whether a to-do, source URL, times",
        {**_NOTE_KINDS, "is_todo": "boolean", "source_url": "text", **_TIMES},
        lambda ctx, conn: _note_rows(ctx, conn, todos=False), (("updated_time", True),),
        row_untrusted="source_url"),
    WorkspaceSource(
        "todos", "To-dos: title, notebook, tags, due and completed times, done",
        {**_NOTE_KINDS, "due": "time_ms", "completed": "time_ms", "done": "boolean", "source_url": "text", **_TIMES},
        lambda ctx, conn: _note_rows(ctx, conn, todos=True), (("due", False), ("updated_time", True)),
        row_untrusted="source_url"),
    WorkspaceSource(
        "notebooks", "Notebooks: title, parent notebook, number of notes, times",
        {"id": "text", "title": "text", "parent_id": "text", "note_count": "integer", **_TIMES},
        _notebooks, (("title", False),)),
    WorkspaceSource(
        "tags", "Tags in use: title, number of notes, times",
        {"id": "text", "title": "text", "note_count": "integer", **_TIMES}, _tags, (("title", False),)),
    WorkspaceSource(
        "conversations", "Your chats' metadata (no messages): title, model, messages, tokens, cost, times",
        {"id": "text", "title": "text", "pinned": "boolean", "model": "text", "message_count": "integer",
         "input_tokens": "integer", "output_tokens": "integer", "cost_usd": "text", **_TIMES},
        _conversations, (("updated_time", True),), owner_scoped=True),
    WorkspaceSource(
        "recipes", "Your recipes: name, mode, schedule, model, enabled, failures, next fire time",
        {"id": "text", "name": "text", "mode": "text", "schedule": "text", "timezone": "text", "model": "text",
         "enabled": "boolean", "paused_reason": "text", "failures": "integer", "next_fire_time": "time_ms",
         **_TIMES},
        _recipes, (("name", False),), owner_scoped=True),
    WorkspaceSource(
        "recipe_runs", "Your recipes' runs (no reports): recipe, trigger, status, items, tokens, cost, times",
        {"run_id": "text", "recipe_id": "text", "recipe": "text", "trigger": "text", "status": "text",
         "mode": "text", "model": "text", "error_code": "text", "items_done": "integer", "items_failed": "integer",
         "tool_calls": "integer", "dry_run": "boolean", "input_tokens": "integer", "output_tokens": "integer",
         "cost_usd": "text", "created_time": "time_ms", "finished_time": "time_ms"},
        _recipe_runs, (("created_time", True),), owner_scoped=True),
)}


# --- attached read-only databases -------------------------------------------------------------------


@dataclass(frozen=True)
class AttachedTable:
    """An opted-in table of an attached database, as configured."""

    database: str
    table: str
    description: str
    exclude: frozenset[str]
    untrusted: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


class AttachedDatabase:
    """A database named in ``[data.sources.NAME]``, opened read-only on each use (no pool:
    nothing stays open between calls, so the app owns nothing to close)."""

    def __init__(self, name: str, url: str, key: str) -> None:
        self.name = name
        parsed = sa.engine.make_url(url)
        backend = parsed.get_backend_name()
        self.shown_url = parsed.render_as_string(hide_password=True)
        if backend == "sqlite":
            path = os.path.expanduser(parsed.database or "")
            if not os.path.isabs(path):
                raise ConfigError(f"{key} must name a database file by its absolute path, like "
                                  f"sqlite:////home/me/crm.db, not {self.shown_url!r}")
            self.path = path
            self.engine = sa.create_engine("sqlite://", creator=self._sqlite, poolclass=NullPool)
        elif backend == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")  # the driver noteloom ships with
            self.path = ""
            # Read-only at the server for the whole session, and a time limit on each statement.
            options = f"-c default_transaction_read_only=on -c statement_timeout={STATEMENT_TIMEOUT_MS}"
            self.engine = sa.create_engine(parsed, poolclass=NullPool, connect_args={"options": options})
        else:
            raise ConfigError(f"{key} must be a sqlite:/// or postgresql:// URL, not {self.shown_url!r}")
        self.dialect = backend

    def _sqlite(self) -> sqlite3.Connection:
        # mode=ro: SQLite itself refuses every write; query_only on top refuses even a
        # statement that would write to a temporary table.
        conn = sqlite3.connect(f"file:{quote(self.path)}?mode=ro", uri=True, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        return conn

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A read-only transaction that is rolled back, never committed."""
        try:
            conn = self.engine.connect()
        except sa.exc.DBAPIError as exc:
            raise ToolError(f"data source {self.name!r} cannot be opened ({_short(exc)}); "
                            "the user should check [data.sources] in noteloom.toml") from None
        try:
            with conn.begin() as tx:
                if self.dialect == "postgresql":
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                yield conn
                tx.rollback()
        finally:
            conn.close()

    def table(self, conn: Connection, spec: AttachedTable) -> Table:
        """``spec``'s table as it is now: reflected, credential-like and excluded columns left out."""
        try:
            reflected = sa.Table(spec.table, sa.MetaData(), autoload_with=conn)
        except sa.exc.NoSuchTableError:
            raise ToolError(f"data source {spec.name!r} is configured but its database has no table "
                            f"{spec.table!r}; the user should check noteloom.toml") from None
        excluded = {e.lower() for e in spec.exclude}
        untrusted = {u.lower() for u in spec.untrusted}
        fields = tuple(
            Field(c.name, kind_of(c.type), c.name.lower() in untrusted)
            for c in reflected.columns
            if not is_credential(c.name) and c.name.lower() not in excluded
        )
        pk = tuple((c.name, False) for c in reflected.primary_key.columns if any(f.name == c.name for f in fields))
        return Table(spec.name, spec.description, fields, reflected, self.dialect, pk, attached=True)


def kind_of(t: sa.types.TypeEngine[Any]) -> Kind:
    """How a reflected column type is compared and shown."""
    checks: tuple[tuple[type[Any] | tuple[type[Any], ...], Kind], ...] = (
        (sa.Boolean, "boolean"), (sa.Integer, "integer"), (sa.Numeric, "number"), (sa.DateTime, "datetime"),
        (sa.Date, "date"), ((sa.String, sa.Enum), "text"), (sa.JSON, "json"), (sa.LargeBinary, "binary"),
        (sa.types.NullType, "any"),
    )
    for types, kind in checks:
        if isinstance(t, types):
            return kind
    return "other"


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:200]
