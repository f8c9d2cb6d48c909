"""The HTTP server: uvicorn's h11 protocol, with limits on what one client may hold.

uvicorn closes a connection that stays idle *between* requests (``timeout_keep_alive``)
but never one that is idle before its first request or that sends its headers or its
body a byte at a time, and it accepts connections until the process runs out of file
descriptors (after which every request failed and asyncio logged a traceback for each
retried accept). :class:`GuardedH11Protocol` adds, per connection:

- a header timeout, from the connection's start (or from the first byte after a
  keep-alive pause) until the request's headers are complete: 408 if some bytes came,
  a silent close if none did;
- a body timeout: a request body that makes no progress for ``idle_timeout`` seconds
  (while the app is waiting for it) is answered 408 and closed;
- a connection cap below the open-files limit: a connection past it is answered
  ``503 Service Unavailable`` with ``Retry-After`` and closed at once.

The cap counts uvicorn's own set of open connections, so it covers a process; with
``serve --workers N`` each process has its own.

We stay on uvicorn (rather than hypercorn or granian) because its hooks are enough for
these limits in ~150 lines, and the SSE streams, the SO_REUSEPORT sockets of
``--workers`` and graceful shutdown keep working as they are tested today.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from noteloom.config import ServerLimits
from noteloom.web.loglimit import limit_repeats

log = logging.getLogger(__name__)

#: Connections asyncio accepts in one go. It passes the listen backlog for this, and a burst
#: of 1,100 connections was accepted whole — with file descriptors running out — before the
#: cap could refuse any. The kernel's queue is set back to ``KERNEL_BACKLOG`` after start.
ACCEPT_BATCH = 32
KERNEL_BACKLOG = 2048
#: Refused connections closed gracefully at one time; past this they are reset at once.
REFUSING_MAX = 32
#: File descriptors kept free of connections: the process's own (about 40: the database and
#: its WAL, the log, pipes, the event loop), provider and PostgreSQL connections, refused
#: connections on their way out, and up to three accept batches not yet seen by the cap.
FD_RESERVE = 256
#: How long a refused connection may take to read its 503 before it is reset.
REFUSAL_LINGER = 2.0


def _plain_response(status: int, reason: str, text: str, extra: str = "") -> bytes:
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    )
    return head.encode("latin-1") + body


# Retry-After: 1 because slots come free continuously as idle connections time out.
_BUSY = _plain_response(
    503, "Service Unavailable", "The server holds as many connections as it may; retry in a second.\n",
    "retry-after: 1\r\n",
)
_SLOW = _plain_response(408, "Request Timeout", "The request was not sent in time; send it again, whole.\n")


def raise_fd_limit() -> int | None:
    """Raise this process's soft open-files limit to its hard limit; the new soft limit
    (``None`` where the system has no such limit)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    # The kernel may allow less than the hard limit (macOS refuses more than OPEN_MAX,
    # 10240, even under an unlimited hard limit): try smaller targets until one holds.
    top = hard if hard != resource.RLIM_INFINITY else 65536
    for target in (top, 10240, 4096):
        if soft < target <= top:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                return target
            except (ValueError, OSError):  # pragma: no cover - macOS
                continue
    return soft


#: Allocations at least this large get pages of their own, given back to the system when freed.
MMAP_THRESHOLD = 128 * 1024


def return_freed_memory() -> bool:
    """Have glibc give large freed blocks back to the system (whether it could be told).

    glibc raises its mmap threshold each time a large block is freed, up to 32 MB, so later
    large blocks come from the heap, which it seldom shrinks. Loading the vectors of 630,000
    chunks at 100,000 notes (passing batches, growing arrays) left a server at 1.45 GB of
    anonymous memory for 0.5 GB in use; with the threshold fixed here it stayed at 0.48 GB.
    """
    import ctypes
    import ctypes.util

    m_mmap_threshold = -3
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False
    return bool(mallopt(m_mmap_threshold, MMAP_THRESHOLD))


def connection_cap(limits: ServerLimits, fd_limit: int | None) -> int:
    """``max_connections``, lowered so connections can never use up the open-files limit."""
    if fd_limit is None:
        return limits.max_connections
    room = max(8, fd_limit - FD_RESERVE)
    if room < limits.max_connections:
        log.warning(
            "serving at most %d connections, not the %d of [server] max_connections: this process may open "
            "only %d files (raise its hard limit, ulimit -Hn, to allow more)",
            room, limits.max_connections, fd_limit,
        )
    return min(limits.max_connections, room)


class _Refusal(asyncio.Protocol):
    """A connection past the cap: it gets the 503, then its write side is shut.

    Reading (and dropping) what the client sent until it closes, instead of closing at
    once, keeps the kernel from answering with a reset that can destroy the 503 before
    the client reads it.
    """

    def __init__(self, refusing: set[_Refusal], loop: asyncio.AbstractEventLoop) -> None:
        self.refusing, self.loop = refusing, loop
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_BUSY)
        if len(self.refusing) >= REFUSING_MAX:
            # No descriptors to spare for waiting: close now. A client that has sent nothing
            # still reads the 503; one whose request is unread may see a reset after it.
            transport.close()
            return
        self.refusing.add(self)
        if transport.can_write_eof():
            transport.write_eof()
        self.timer = self.loop.call_later(REFUSAL_LINGER, transport.abort)

    def data_received(self, data: bytes) -> None:
        pass

    def eof_received(self) -> bool:
        return False  # close

    def connection_lost(self, exc: Exception | None) -> None:
        self.refusing.discard(self)
        if self.timer is not None:
            self.timer.cancel()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout, a body timeout and a connection cap.

    Subclasses made by :func:`protocol_class` set the class attributes.
    """

    limits: ClassVar[ServerLimits] = ServerLimits()
    cap: ClassVar[int] = ServerLimits().max_connections
    refusing: ClassVar[set[_Refusal]] = set()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.idle_timeout  # type: ignore[assignment]  # a float works
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.cap:
            refusal = _Refusal(self.refusing, self.loop)
            transport.set_protocol(refusal)
            refusal.connection_made(transport)
            return
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_timeout)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            self._cancel_timers()  # closed, or upgraded to a WebSocket, which has its own
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            # Part of the next request's head: its deadline runs from its first byte.
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_timeout)
            return
        self._cancel_header_timer()
        if state is h11.SEND_BODY:
            # After the response, a body the app never read gets one deadline, not one per byte.
            if self._body_timer is None or not (self.cycle and self.cycle.response_complete):
                self._arm_body_timer()
        elif self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def _cancel_timers(self) -> None:
        self._cancel_header_timer()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _arm_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self.loop.call_later(self.limits.idle_timeout, self._body_timeout)

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a pipelined request waits for the one in flight
        if self.conn.trailing_data[0]:
            self.transport.write(_SLOW)
        self.transport.close()

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:
            # The app has not taken what came; the client is not the slow one.
            self._arm_body_timer()
            return
        if self.cycle is not None and not self.cycle.response_started:
            self.transport.write(_SLOW)
        self.transport.close()


def protocol_class(limits: ServerLimits, cap: int) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` for one server, with its own count of refusals."""
    attrs = {"limits": limits, "cap": cap, "refusing": set()}
    return type("ServerProtocol", (GuardedH11Protocol,), attrs)


def uvicorn_config(asgi: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """A uvicorn configuration that serves ``asgi`` within ``limits`` (run it with :class:`Server`)."""
    cap = connection_cap(limits, raise_fd_limit())
    return uvicorn.Config(asgi, http=protocol_class(limits, cap), backlog=ACCEPT_BATCH, **options)


class Server(uvicorn.Server):
    """uvicorn's server, accepting in small batches from a long kernel queue."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        # asyncio listened with the batch size; a long queue costs no file descriptors and
        # holds a burst of clients until they can be accepted (or refused).
        for sock in sockets or []:
            sock.listen(KERNEL_BACKLOG)


def serve(asgi: Any, sockets: list[socket.socket], limits: ServerLimits, **options: Any) -> None:
    """Serve ``asgi`` on ``sockets`` until SIGINT or SIGTERM, with repeated log lines limited."""
    config = uvicorn_config(asgi, limits, **options)
    limit_repeats()
    Server(config).run(sockets=sockets)
