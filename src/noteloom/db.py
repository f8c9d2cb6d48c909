"""The database: engine, schema and migrations. Nothing above this module sees SQL dialects.

SQLite (WAL, busy timeout, foreign keys on) by default; PostgreSQL by URL
(``postgresql+psycopg://…``). On SQLite every connection loads the sqlite-vec
extension when it can; when the standard ``sqlite3`` module cannot load extensions
(many Python builds), the engine runs on ``pysqlite3`` instead, if installed. The schema is SQLAlchemy Core tables; Alembic
migrations in ``noteloom/migrations`` are applied when the app starts.
"""

from __future__ import annotations

import functools
import importlib.util
import operator
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from noteloom.errors import StorageError

metadata = sa.MetaData()

ID = sa.String(32)
MS = sa.BigInteger  # milliseconds since the Unix epoch, as Joplin stores them

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("is_owner", sa.Boolean, nullable=False, default=False),
    sa.Column("created_time", MS, nullable=False),
    # People (0018): owner | admin | member, and an Argon2id hash for the web sign-in.
    sa.Column("role", sa.String(16), nullable=False, server_default="member"),
    sa.Column("password_hash", sa.Text),
    sa.Index("ix_users_name", "name"),
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("revoked_time", MS),
    sa.Column("last_used_time", MS),
    # Scoped tokens (0016): NULL name reads as "default", NULL scopes as full access.
    sa.Column("name", sa.String(100)),
    sa.Column("scopes", sa.JSON),
    sa.Column("expires_time", MS),
)

# Browser sign-ins: a page trades the API token for one of these and sends it in a header
# (never a cookie: browsers send a host's cookies to every port of it). Each hangs off the
# API token it was made with, so revoking that token ends its sessions too.
web_sessions = sa.Table(
    "web_sessions",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # NULL: started by a password sign-in (0018), not from a token.
    sa.Column("token_id", ID, sa.ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True),
    sa.Column("session_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("last_used_time", MS, nullable=False),
    sa.Column("expires_time", MS, nullable=False),
    sa.Column("revoked_time", MS),
)

# OAuth 2.1 for remote MCP clients (0023, web/oauth.py): the clients (registered, or known by
# their metadata document's URL) and the short-lived grants of the flow: an authorization
# request waiting for the person's consent, a code, a refresh token. Secrets are stored hashed;
# the access tokens themselves are API tokens (``api_tokens``) with the scopes consented to.
oauth_clients = sa.Table(
    "oauth_clients",
    metadata,
    sa.Column("client_id", sa.String(512), primary_key=True),
    sa.Column("info", sa.JSON, nullable=False),
    sa.Column("source", sa.String(16), nullable=False),  # "registered" | "document"
    sa.Column("created_time", MS, nullable=False),
    sa.Column("fetched_time", MS),
)

oauth_grants = sa.Table(
    "oauth_grants",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # "request" | "code" | "refresh"
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("client_id", sa.String(512), nullable=False),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE")),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("expires_time", MS, nullable=False),
    sa.Index("ix_oauth_grants_expires", "expires_time"),
)

notebooks = sa.Table(
    "notebooks",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("parent_id", ID, index=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
    sa.Column("deleted_time", MS),
    # Items trashed by one delete share a batch id, so a restore brings them back together.
    sa.Column("trash_batch", ID),
    # Whose it is (0018); NULL: the workspace owner's. A sub-notebook's is its top notebook's.
    sa.Column("owner_id", ID, sa.ForeignKey("users.id", name="fk_notebooks_owner")),
    sa.Index("ix_notebooks_owner", "owner_id"),
)

# A notebook shared with a person, and everything under it: access ``read`` or ``write``.
notebook_shares = sa.Table(
    "notebook_shares",
    metadata,
    sa.Column("notebook_id", ID, sa.ForeignKey("notebooks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("access", sa.String(8), nullable=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("created_by", ID),
    sa.Index("ix_notebook_shares_user", "user_id"),
)

notes = sa.Table(
    "notes",
    metadata,
    # A stable integer key for the full-text index (SQLite FTS5 needs an integer rowid).
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", ID, nullable=False, unique=True),
    sa.Column("notebook_id", ID, sa.ForeignKey("notebooks.id"), nullable=False, index=True),
    sa.Column("title", sa.Text, nullable=False, default=""),
    sa.Column("body", sa.Text, nullable=False, default=""),
    sa.Column("is_todo", sa.Boolean, nullable=False, default=False),
    sa.Column("todo_due", MS),
    sa.Column("todo_completed", MS),
    sa.Column("source_url", sa.Text, nullable=False, default=""),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False, index=True),
    sa.Column("deleted_time", MS),
    sa.Column("trash_batch", ID),
    # Only notes in the trash (migration 0005 makes it partial on both databases): "not in
    # the trash" goes through the index of live notes by recency (migration 0002) instead.
    # Migrations own the DDL; naming a ``postgresql_where`` here would import SQLAlchemy's
    # PostgreSQL dialect into every SQLite process (a twentieth of a second of start-up).
    sa.Index("ix_notes_trashed", "deleted_time", sqlite_where=sa.text("deleted_time IS NOT NULL")),
    # Live notes newest first with the columns filters test (migration 0002): a query made
    # only of filters reads it and touches the table only for the page it returns.
    sa.Index("ix_notes_live_recent", "updated_time", "id", "notebook_id", "created_time", "is_todo", "todo_due",
             "todo_completed", sqlite_where=sa.text("deleted_time IS NULL")),
    # Live notes by notebook (migration 0021): the notebook tree's counts from the index alone.
    sa.Index("ix_notes_live_notebook", "notebook_id", sqlite_where=sa.text("deleted_time IS NULL")),
)

tags = sa.Table(
    "tags",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("title", sa.Text, nullable=False),
    # Tag names are unique regardless of case; this is the lower-cased title.
    sa.Column("title_key", sa.Text, nullable=False, unique=True),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
)

note_tags = sa.Table(
    "note_tags",
    metadata,
    sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("tag_id", ID, sa.ForeignKey("tags.id", ondelete="CASCADE"), primary_key=True, index=True),
    sa.Column("created_time", MS, nullable=False),
)

revisions = sa.Table(
    "revisions",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), nullable=False),
    # A full version (a snapshot: ``body``) or an edit script rebuilding it from the next
    # newer version (``delta``); NULL title: the same as the next newer version's. See
    # workspace/revisions.py (migration 0007).
    sa.Column("title", sa.Text),
    sa.Column("body", sa.Text),
    sa.Column("delta", sa.Text),
    sa.Column("chars", sa.Integer),  # the version's length (NULL before 0007: length(body))
    # Scripts between this row and the snapshot below it, and their total size.
    sa.Column("chain_len", sa.Integer),
    sa.Column("chain_chars", sa.Integer),
    # When that version was written (the note's updated_time then) and when it was replaced.
    sa.Column("version_time", MS, nullable=False),
    sa.Column("created_time", MS, nullable=False),
    # A note's history in order; it also serves lookups by note alone.
    sa.Index("ix_revisions_note_time", "note_id", "created_time"),
)

attachments = sa.Table(
    "attachments",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), index=True),
    sa.Column("title", sa.Text, nullable=False, default=""),
    sa.Column("filename", sa.Text, nullable=False),
    sa.Column("mime", sa.Text, nullable=False, default="application/octet-stream"),
    sa.Column("size", sa.BigInteger, nullable=False, default=0),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
)

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),  # JSON
)

# A change feed: every write to a note appends here in the same transaction, so
# indexers (embeddings) and event streams follow changes without missing any.
note_changes = sa.Table(
    "note_changes",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("note_id", ID, nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),  # create | update | delete | restore | purge
    sa.Column("time", MS, nullable=False),
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id() -> str:
    """A 32-character lowercase hex id, the same form Joplin uses."""
    return secrets.token_hex(16)


#: The SQL name of :func:`index_text` on SQLite (migration 0002 gives PostgreSQL its twin).
INDEX_TEXT_SQL = "noteloom_index_text"

# Scripts written without spaces between words (Han, kana, Hangul). The keyword index sees a
# run of them as overlapping character pairs, so a word inside a longer run can be found.
CJK_CHARS = (
    "\u1100-\u11ff\u3005-\u3007\u3040-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
# The first bytes of the UTF-8 of every character above (and of a few others): a text
# whose UTF-8 has none holds no CJK. Most non-ASCII notes hold none (only dashes, quotes
# or accents) and are scanned to their end; one byte class over the UTF-8 scans twice as
# fast as the character class over the text, encoding included.
_CJK_LEAD = re.compile(b"[\xe1\xe3-\xed\xef\xf0]")


def index_text(text: Any) -> Any:
    """``text`` as the keyword index sees it: each CJK run becomes its overlapping character
    pairs plus its last character alone (``中文字`` → ``中文 文字 字``); the rest is unchanged."""
    if not isinstance(text, str) or text.isascii():
        return text
    if _CJK_LEAD.search(text.encode("utf-8", "surrogatepass")) is None:
        return text
    return _CJK_RUN.sub(_cjk_pairs, text)


def _cjk_pairs(m: re.Match[str]) -> str:
    run = m.group()
    # Each character with the next one, the last with the space that ends the run.
    return " " + " ".join(map(operator.add, run, run[1:] + " "))


def create_db_engine(url: str) -> Engine:
    """An engine for ``url`` with the pragmas noteloom relies on."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=8,
            max_overflow=8,
            **_sqlite_module(),
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's begin() issue BEGIN itself, so transactions really are atomic.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            # 64 MiB of page cache per connection (the default is 2 MiB): ranking joins each
            # text match to its note, and at 100,000 notes those rows span far more pages
            # than 2 MiB, which made a filtered search twice as slow. Pages are taken only
            # as they are read.
            cur.execute("PRAGMA cache_size=-65536")
            cur.execute("PRAGMA mmap_size=1073741824")
            cur.close()
            # The keyword index triggers (migration 0002) call it on every write to a note.
            dbapi_conn.create_function(INDEX_TEXT_SQL, 1, index_text, deterministic=True)
            _load_sqlite_vec(dbapi_conn)

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            if conn.info.get("write"):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                # A deferred BEGIN takes no lock, so it cannot fail on a busy database: on the
                # driver's connection (through exec_driver_sql it cost 0.08 ms of CPU, half of a
                # read transaction, at every tool call).
                conn.connection.driver_connection.execute("BEGIN")

        return engine
    if url.startswith("postgresql"):
        return sa.create_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)
    raise StorageError(f"unsupported database URL {url!r}: use sqlite:///PATH or postgresql+psycopg://…")


class DataVersion:
    """A number that changes whenever anyone commits to the database, from any process:
    what a process read at one value is still true while the value holds.

    SQLite's ``PRAGMA data_version`` on a connection of its own, which only ever asks
    this (a few microseconds, no transaction of note: cheap enough for the event loop).
    ``None`` where that is not known (PostgreSQL, an in-memory database): callers then
    read afresh or fall back to a time limit.
    """

    def __init__(self, engine: Engine) -> None:
        database = engine.url.database
        self._path = (
            database
            if engine.dialect.name == "sqlite" and database and database != ":memory:" and "mode=memory" not in database
            else None
        )
        self._dbapi: Any = engine.dialect.dbapi
        self._conn: Any = None
        self._lock = threading.Lock()

    def current(self) -> int | None:
        if self._path is None:
            return None
        with self._lock:
            if self._conn is None:
                self._conn = self._dbapi.connect(self._path, check_same_thread=False, isolation_level=None)
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _sqlite_module() -> dict[str, Any]:
    """``create_engine`` arguments for the DB-API module: the standard ``sqlite3`` when it
    can load extensions (sqlite-vec), else ``pysqlite3`` when installed, else ``sqlite3``."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return {}
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return {}
    return {"module": dbapi2}


@functools.cache
def _sqlite_vec_path() -> str | None:
    """Where the sqlite-vec package keeps its loadable extension, found without importing the
    package (its ``__init__`` imports numpy: a quarter of a second on every command)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        return None
    # What sqlite_vec.loadable_path() returns: the package folder's "vec0" (SQLite adds the suffix).
    return os.path.normpath(os.path.join(next(iter(spec.submodule_search_locations)), "vec0"))


def _load_sqlite_vec(dbapi_conn: Any) -> None:
    """Load sqlite-vec into a new connection when the module and the driver allow it."""
    try:
        where = _sqlite_vec_path()
        if where is None:
            return
        dbapi_conn.enable_load_extension(True)
        try:
            dbapi_conn.load_extension(where)
        finally:
            dbapi_conn.enable_load_extension(False)
    except Exception:  # without it, vectors are searched in memory instead
        return


def sqlite_vec_available(engine: Engine) -> bool:
    """Whether ``engine``'s connections have the sqlite-vec extension loaded."""
    if not is_sqlite(engine):
        return False
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT vec_version()").scalar()
    except sa.exc.DBAPIError:
        return False
    return True


# ``revision = "…"`` and ``down_revision = "…" | None | ("…", "…", …)`` (a merge), as the
# scripts write them; a type annotation before ``=`` is allowed.
_REVISION_LINE = re.compile(
    r"""^(down_revision|revision)(?:\s*:\s*[\w\[\], |]+)?\s*=\s*"""
    r"""(?:["']([^"']+)["']|(None)|\(([^()]*)\))\s*$""",
    re.MULTILINE,
)
_QUOTED = re.compile(r"""["']([^"']+)["']""")
_SEPARATORS = re.compile(r"[\s,]*")


def migration_heads(versions: Path | None = None) -> set[str] | None:
    """The newest revision of every migration branch (one, the ``head``, since the branches
    were merged), read from the scripts' own ``revision`` / ``down_revision`` lines without
    importing Alembic; ``None`` when a script is written some other way: then Alembic decides."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (versions or Path(__file__).with_name("migrations") / "versions").glob("*.py"):
        found: dict[str, list[str]] = {}
        for m in _REVISION_LINE.finditer(script.read_text(encoding="utf-8")):
            name, single, _none, many = m.groups()
            if many is not None and not _SEPARATORS.fullmatch(_QUOTED.sub("", many)):
                return None
            found[name] = [single] if single else _QUOTED.findall(many) if many else []
        if len(found.get("revision", ())) != 1 or "down_revision" not in found:
            return None
        revisions.update(found["revision"])
        parents.update(found["down_revision"])
    return revisions - parents if revisions else None


def _at_heads(engine: Engine) -> bool:
    """Whether the database is at every head already (one small query, no Alembic import)."""
    heads = migration_heads()
    if heads is None:
        return False
    try:
        with engine.connect() as conn:
            stored = {r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version"))}
    except sa.exc.DBAPIError:
        return False  # a new database: no version table yet
    return stored == heads


def migrate(engine: Engine) -> None:
    """Bring the schema up to the migrations' single head (docs/schema.md: each new
    migration revises the head of before, so there is one order for every database).

    A database at every head already is left alone without importing Alembic: that costs
    a few hundred milliseconds of CPU every command would pay."""
    if _at_heads(engine):
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except Exception as exc:  # pragma: no cover - the message is what matters
        raise StorageError(f"could not migrate the database: {exc}") from exc


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """A write transaction. On SQLite it takes the write lock up front (BEGIN IMMEDIATE),
    so a busy database waits for its turn instead of failing half-way."""
    with engine.connect() as conn:
        conn.info["write"] = True
        try:
            with conn.begin():
                yield conn
        finally:
            conn.info.pop("write", None)


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read-only transaction: one consistent snapshot, no write lock. ``conn.info["read_only"]``
    says so to whoever is handed the connection (search keeps rankings only for those)."""
    with engine.connect() as conn:
        conn.info["read_only"] = True
        try:
            with conn.begin():
                yield conn
        finally:
            conn.info.pop("read_only", None)


@contextmanager
def writing(engine: Engine, conn: Connection | None) -> Iterator[Connection]:
    """The caller's transaction when it passes one (``conn=``), else a new write transaction:
    how domain and service methods compose into one atomic operation."""
    if conn is not None:
        yield conn
    else:
        with write_tx(engine) as c:
            yield c


@contextmanager
def reading(engine: Engine, conn: Connection | None) -> Iterator[Connection]:
    """The caller's transaction when it passes one, else a new read transaction."""
    if conn is not None:
        yield conn
    else:
        with read_tx(engine) as c:
            yield c


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"
