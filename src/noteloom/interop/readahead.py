"""Reading ahead: an iterator run in a thread, a bounded number of items ahead of its consumer.

An import reads and parses files (Python, holding the GIL) while SQLite indexes the notes
before (C, without the GIL): on two cores the two overlap. The queue between them is
bounded, in groups of items and in bytes, so the reader never holds more than
``depth`` groups. The consumer sees the items in order, then the reader's exception if it
raised one (after the items read before it). Leaving the ``with`` block early (an error
while writing, Ctrl-C) stops the reader at its next item and waits for its thread, so
nothing reads into a staging folder that is being removed.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Protocol, TypeVar


class _Sized(Protocol):
    body: str


T = TypeVar("T", bound=_Sized)

_END = object()


class ReadAhead(Generic[T]):
    """``with ReadAhead(items) as it: for x in it: …``: ``items`` is iterated in a thread."""

    def __init__(
        self,
        items: Iterable[T],
        *,
        depth: int = 4,
        group: int = 64,
        group_bytes: int = 2 << 20,
        prepare: Callable[[T], None] | None = None,
    ) -> None:
        """``prepare`` is called on each item in the reading thread, before it is queued."""
        self._items = items
        self._prepare = prepare
        self._group = group
        self._group_bytes = group_bytes
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="noteloom-import-reader", daemon=True)

    def __enter__(self) -> Iterator[T]:
        self._thread.start()
        return self._consume()

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        # Free a reader blocked on a full queue; it sees the stop before its next item.
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def _put(self, value: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        group: list[T] = []
        size = 0
        try:
            for item in self._items:
                if self._stop.is_set():
                    return
                if self._prepare is not None:
                    self._prepare(item)
                group.append(item)
                size += len(item.body)
                if len(group) >= self._group or size >= self._group_bytes:
                    if not self._put(group):
                        return
                    group, size = [], 0
            if group and not self._put(group):
                return
            self._put(_END)
        except BaseException as exc:  # handed to the consumer, which raises it in its thread
            if group and not self._put(group):
                return
            self._put(exc)
        finally:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()

    def _consume(self) -> Iterator[T]:
        while True:
            got = self._queue.get()
            if got is _END:
                return
            if isinstance(got, BaseException):
                raise got
            assert isinstance(got, list)
            yield from got
