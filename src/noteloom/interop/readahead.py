"""Reading ahead: an iterator run in a thread (or a child process), a bounded number of items
ahead of its consumer.

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
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Generic, Protocol, TypeVar

from noteloom.errors import ImportExportError


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


# -- in a process of its own ------------------------------------------------------------------


T_co = TypeVar("T_co", bound=_Sized, covariant=True)
A = TypeVar("A")


class ChildSource(Protocol[T_co]):
    """What a child process reads: its items, and what reading them left aside (notices,
    files made) since the last call to ``drain``, for the parent to take back."""

    def __iter__(self) -> Iterator[T_co]: ...

    def drain(self) -> object: ...



_ITEMS, _DONE, _FAILED = "items", "done", "failed"
#: Bytes read from or written to the pipe at a time: a group is ~2 MiB of pickled notes.
_PIPE_BUFFER = 1 << 20

#: The child's first lines: Ctrl-C is the parent's to handle (it closes the pipe, the child
#: then stops), and the child imports what the parent can (its ``sys.path``). A plain
#: ``python -c``, not multiprocessing's spawn, which runs the parent's main script again
#: in the child when it is a file: a script of a user's without a ``__main__`` guard would
#: import its folder a second time there.
_BOOT = (
    "import signal, sys, pickle; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "sys.path[:] = pickle.load(sys.stdin.buffer); "
    "from noteloom.interop.readahead import _child_main; _child_main(int(sys.argv[1]))"
)


class ChildFailed(ImportExportError):
    """The reading process ended without saying why (killed, or out of memory)."""


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` itself when it survives pickling, else an import error of the same message."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return ImportExportError(f"reading the import failed: {type(exc).__name__}: {exc}")
    return exc


def _child_main(fd: int) -> None:
    """The child: reads the source its parent sent on stdin in groups, written to ``fd`` by
    a thread of its own so that reading goes on while the pipe is full; stops as soon as
    the pipe breaks (the parent closed it, or died)."""
    open_source, arg, depth, group_size, group_bytes, prepare = pickle.load(sys.stdin.buffer)
    pipe = os.fdopen(fd, "wb", buffering=_PIPE_BUFFER)
    out: queue.Queue[tuple[object, ...] | None] = queue.Queue(maxsize=depth)
    broken = threading.Event()

    def send() -> None:
        try:
            while (message := out.get()) is not None:
                pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
                pipe.flush()
                if message[0] != _ITEMS:
                    return
        except OSError:  # the parent is gone or stopped reading
            broken.set()
            with contextlib.suppress(queue.Empty):
                while True:
                    out.get_nowait()  # free a reader blocked on the full queue

    def put(message: tuple[object, ...]) -> bool:
        while not broken.is_set():
            try:
                out.put(message, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    sender = threading.Thread(target=send, name="noteloom-import-sender", daemon=True)
    sender.start()
    source = None
    group: list[Any] = []
    size = 0
    try:
        source = open_source(arg)
        for item in source:
            if broken.is_set():
                return
            if prepare is not None:
                prepare(item)
            group.append(item)
            size += len(item.body)
            if len(group) >= group_size or size >= group_bytes:
                if not put((_ITEMS, group, source.drain())):
                    return
                group, size = [], 0
        put((_DONE, group, source.drain()))
    except BaseException as exc:
        put((_FAILED, group, source.drain() if source is not None else None, _picklable(exc)))
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
        with contextlib.suppress(queue.Full):
            out.put(None, timeout=0.1)
        sender.join()
        with contextlib.suppress(OSError):
            pipe.close()


class ProcessReadAhead(Generic[T]):
    """``with ProcessReadAhead(open_source, arg, take_back=…) as it: for x in it: …``.

    ``open_source(arg)`` is called in a child process (a new interpreter: no fork of a
    process with threads), so reading and parsing hold another GIL than the consumer's;
    ``open_source``, ``arg`` and ``prepare`` are pickled (module-level names). Items come
    back in groups (bounded as ``ReadAhead``'s: at most ``depth`` groups waiting in the
    child, and one in the pipe), with what the source's ``drain`` gave after each group,
    handed to ``take_back`` before the group's items are seen. The source's exception is
    raised here after the items read before it. Leaving the ``with`` block closes the pipe:
    the child stops at its next item, and is waited for; a child whose parent died stops
    the same way, at its next group."""

    def __init__(
        self,
        open_source: Callable[[A], ChildSource[T]],
        arg: A,
        *,
        take_back: Callable[[object], None],
        depth: int = 4,
        group: int = 64,
        group_bytes: int = 2 << 20,
        prepare: Callable[[T], None] | None = None,
    ) -> None:
        self._job = (open_source, arg, depth, group, group_bytes, prepare)
        self._take_back = take_back
        self.process: subprocess.Popen[bytes] | None = None
        self._pipe: IO[bytes] | None = None

    def start(self) -> None:
        """Start the child (``OSError`` when processes cannot be started here)."""
        job = pickle.dumps(self._job, protocol=pickle.HIGHEST_PROTOCOL)  # a bad argument fails here
        read_fd, write_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(write_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(write_fd,),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child's end: a dead child reads as the end here
        self._pipe = os.fdopen(read_fd, "rb", buffering=_PIPE_BUFFER)
        assert self.process.stdin is not None
        try:
            pickle.dump(list(sys.path), self.process.stdin)
            self.process.stdin.write(job)
            self.process.stdin.close()
        except OSError:  # it died at once: told below, when nothing comes
            pass

    def __enter__(self) -> Iterator[T]:
        if self.process is None:
            self.start()
        return self._consume()

    def __exit__(self, *_exc: object) -> None:
        if self._pipe is not None:
            self._pipe.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # stuck in one file: nothing more is read from it
                self.process.kill()
                self.process.wait()

    def _consume(self) -> Iterator[T]:
        assert self._pipe is not None and self.process is not None
        while True:
            try:
                message = pickle.load(self._pipe)
            except EOFError:
                code = self.process.wait()
                raise ChildFailed(
                    f"the import's reading process ended early (exit code {code}); import again"
                ) from None
            kind, items, side = message[0], message[1], message[2]
            if side is not None:
                self._take_back(side)
            yield from items
            if kind == _DONE:
                return
            if kind == _FAILED:
                raise message[3]
