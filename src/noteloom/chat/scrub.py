"""Clearing what a rewrite of a chat's stored content leaves behind.

Raising a chat's level rewrites its rows sealed (``noteloom.chat.levels``); the clear text
they held must not survive elsewhere in the database's files or the attachment store:

- SQLite: the rewrite runs with ``PRAGMA secure_delete = ON`` (the space each old row
  version frees is overwritten with zeros), then the write-ahead log is checkpointed with
  ``TRUNCATE`` (the pages go to the main file and the log is emptied). Clear text an
  earlier write had already left in free space (a turn's partial answers, rows deleted
  before) is not reachable row by row, so the database is then ``VACUUM``-ed: rebuilt
  from its live rows only, every free page gone. Its cost grows with the database (a
  level change is rare, and the user asked for exactly this).
- PostgreSQL: an ``UPDATE`` leaves the old row version as a dead tuple until ``VACUUM``
  reclaims it, and even then its bytes stay on the page until the space is reused, and in
  the write-ahead log until the segment is recycled (or in an archive, or a backup, for
  good). We run ``VACUUM`` on the rewritten tables, which makes the old versions
  unreachable; overwriting them is not something PostgreSQL offers short of ``VACUUM
  FULL`` (an exclusive lock on the table). Said so in the README.
- Files: the old file of each rewritten attachment is overwritten with zeros, flushed and
  removed (on a copy-on-write or flash file system the old blocks may survive the
  overwrite: a file system's own guarantee, not ours).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection, Engine

from noteloom.attachments import BlobStore
from noteloom.chat.levels import Rewritten

log = logging.getLogger("noteloom.chat")


@contextmanager
def scrubbing_tx(engine: Engine) -> Iterator[Connection]:
    """A write transaction whose freed space is overwritten (SQLite's ``secure_delete``)."""
    with engine.connect() as conn:
        sqlite = engine.dialect.name == "sqlite"
        driver: Any = conn.connection.driver_connection if sqlite else None
        prior = 0
        if driver is not None:
            prior = int(driver.execute("PRAGMA secure_delete").fetchone()[0])
            driver.execute("PRAGMA secure_delete = ON")
        conn.info["write"] = True
        try:
            with conn.begin():
                yield conn
        finally:
            conn.info.pop("write", None)
            if driver is not None:
                driver.execute(f"PRAGMA secure_delete = {prior}")


def shred(blobs: BlobStore, keys: Iterable[str]) -> None:
    """Overwrite each stored file with zeros, flush it, remove it."""
    for key in keys:
        if not blobs.exists(key):
            continue
        path = blobs.path(key)
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            with open(path, "r+b") as f:
                f.write(b"\0" * size)
                f.flush()
                os.fsync(f.fileno())
        blobs.delete(key)


def clear_free_space(engine: Engine, tables: Iterable[str]) -> None:
    """What rewritten rows left behind in the database's files (see the module docstring)."""
    names = sorted(set(tables))
    if not names:
        return
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            driver: Any = conn.connection.driver_connection
            driver.execute("PRAGMA secure_delete = ON")
            try:
                driver.execute("VACUUM")
            finally:
                driver.execute("PRAGMA secure_delete = OFF")
            busy = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy and busy[0]:
                log.warning("the write-ahead log could not be emptied now (a reader held it); "
                            "it is emptied at the next checkpoint")
        else:
            auto = conn.execution_options(isolation_level="AUTOCOMMIT")
            for name in names:
                auto.exec_driver_sql(f'VACUUM "{name}"')


def after_rewrite(engine: Engine, blobs: BlobStore, done: Rewritten) -> None:
    """Once a rewrite is committed: the files it replaced shredded, the free space cleared.
    A failure here is logged, never raised: the change itself stands."""
    try:
        shred(blobs, done.old)
    except Exception:
        log.exception("could not remove the replaced attachment files")
    try:
        clear_free_space(engine, done.tables)
    except Exception:
        log.exception("could not clear the database's free space after a chat's level changed")
