"""What every workspace mixin shares: the engine, the data directory and the transaction helpers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sqlalchemy.engine import Connection, Engine

from noteloom import db


class Store:
    """The engine and data directory, and the ``conn=`` composition of reads and writes."""

    engine: Engine
    data_dir: Path
    attachments_dir: Path

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One atomic write; compose several operations by passing ``conn=`` through."""
        with db.write_tx(self.engine) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with db.read_tx(self.engine) as conn:
            yield conn

    def _w(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.writing(self.engine, conn)

    def _r(self, conn: Connection | None) -> AbstractContextManager[Connection]:
        return db.reading(self.engine, conn)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
