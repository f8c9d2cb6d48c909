"""Work that one process at a time should do for a workspace, whatever serves it.

``noteloom serve --workers N`` runs N processes on one workspace, and a CLI command or
a second server may open it too. Background work such as the semantic indexer must run
in one of them only: the others would embed every note again and race to write it.

:class:`WorkspaceLock` is that "one of them", taken without waiting and released by the
operating system when its holder dies, so a crashed holder never blocks the rest:

- SQLite: an advisory ``flock`` on a file beside the database (``<db>-<name>.lock``).
  Locks belong to the open file, so two holders in one process exclude each other too.
- PostgreSQL: a session-level advisory lock, held by a connection kept for the purpose;
  advisory locks are scoped to the database, so workspaces sharing a cluster do not meet.
- An in-memory SQLite database belongs to one engine: the lock is always granted.
"""

from __future__ import annotations

import logging
import zlib
from typing import IO, Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

#: The first half of every PostgreSQL advisory key noteloom takes ("nl" in ASCII).
_PG_NAMESPACE = 0x6E6C


class WorkspaceLock:
    """A named, non-blocking, cross-process lock on one workspace."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self._file: IO[bytes] | None = None
        self._conn: Any = None
        self._memory = False

    @property
    def held(self) -> bool:
        return self._memory or self._file is not None or self._conn is not None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; ``True`` when this instance holds it now."""
        if self.held:
            return True
        dialect = self.engine.dialect.name
        if dialect == "sqlite":
            return self._try_file()
        if dialect == "postgresql":
            return self._try_pg()
        raise NotImplementedError(f"no workspace lock for {dialect}")

    def release(self) -> None:
        self._memory = False
        if self._file is not None:
            import fcntl

            try:
                fcntl.flock(self._file, fcntl.LOCK_UN)
            finally:
                self._file.close()
                self._file = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), {"ns": _PG_NAMESPACE, "key": self._key()})
            except Exception:  # the connection is closed below; that releases it as well
                log.debug("advisory unlock of %s failed", self.name, exc_info=True)
            finally:
                conn.close()

    @property
    def path(self) -> str | None:
        """The lock file of a SQLite database on disk; ``None`` for PostgreSQL and in-memory SQLite."""
        database = self.engine.url.database
        if self.engine.dialect.name != "sqlite" or not database or database == ":memory:" \
                or database.startswith("file::memory:"):
            return None
        return f"{database}-{self.name}.lock"

    def _key(self) -> int:
        return zlib.crc32(self.name.encode()) & 0x7FFFFFFF

    def _try_file(self) -> bool:
        import fcntl

        path = self.path
        if path is None:
            self._memory = True
            return True
        f = open(path, "ab")  # noqa: SIM115 - held open while locked
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        except BaseException:
            f.close()
            raise
        self._file = f
        return True

    def _try_pg(self) -> bool:
        conn = self.engine.connect()
        try:
            got = conn.execute(
                text("SELECT pg_try_advisory_lock(:ns, :key)"), {"ns": _PG_NAMESPACE, "key": self._key()}
            ).scalar_one()
            conn.commit()  # session-level: the lock outlives the transaction
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True
