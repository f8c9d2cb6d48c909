"""Whether the runner of a ``running`` run is alive: a lease each run engine holds.

Every run engine (one per server process, or per ``noteloom chat --approve``) takes a
random id and holds a workspace lock named after it (:class:`noteloom.locks.WorkspaceLock`:
a ``flock`` on SQLite, a session advisory lock on PostgreSQL) for as long as it lives.
The id is written with each run it starts, in the transaction that makes the run
``running``. The operating system (or PostgreSQL, when the connection drops) frees the
lock the moment the process dies, so anyone who can take a runner's lock knows that
none of its runs is running any more: a server starting after a crash settles them at
once instead of waiting for their heartbeat to go stale. A runner that holds its lock
is alive, whichever process or server it is in (``serve --workers``, several servers on
one PostgreSQL), and its runs are left alone.

Where the lock proves nothing (an in-memory database, a lock that cannot be taken for
another reason) the heartbeat still decides, as before.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os

from sqlalchemy.engine import Engine

from noteloom.db import new_id
from noteloom.errors import StorageError
from noteloom.locks import WorkspaceLock

log = logging.getLogger("noteloom.runs")

_PREFIX = "runner-"


def _lock(engine: Engine, runner_id: str) -> WorkspaceLock:
    return WorkspaceLock(engine, _PREFIX + runner_id)


def _discard(lock: WorkspaceLock) -> None:
    """Release ``lock`` and remove its file: a runner's id is never used again."""
    path = lock.path
    lock.release()
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class RunnerLease:
    """This runner's id and the lock that proves it is alive."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.id = new_id()
        self._lock = _lock(engine, self.id)

    def acquire(self) -> None:
        if not self._lock.try_acquire():  # a fresh random id: nobody else can hold it
            raise StorageError(f"the run engine lock {self._lock.name!r} is held by someone else; start again")

    def release(self) -> None:
        _discard(self._lock)


def runner_gone(engine: Engine, runner_id: str) -> bool:
    """``True`` when no live process holds the lease of ``runner_id``; ``False`` when one
    does, or when the lock cannot tell (an in-memory database)."""
    lock = _lock(engine, runner_id)
    if engine.dialect.name == "sqlite" and lock.path is None:
        return False
    try:
        if not lock.try_acquire():
            return False
    except Exception:  # unsure: leave the run to its heartbeat
        log.warning("could not probe runner %s", runner_id, exc_info=True)
        return False
    _discard(lock)
    return True


def sweep_leases(engine: Engine) -> int:
    """Remove the lock files runners that died left beside a SQLite database; the number removed."""
    probe = _lock(engine, "*").path
    if probe is None:
        return 0
    removed = 0
    for path in glob.glob(glob.escape(probe[: -len("*.lock")]) + "*.lock"):
        runner_id = os.path.basename(path)[: -len(".lock")].rpartition(_PREFIX)[2]
        if runner_id and runner_gone(engine, runner_id):
            removed += 1
    return removed
