"""The listening sockets for the server.

Made here rather than by uvicorn because asyncio turns on TCP_NODELAY only for sockets
whose protocol is IPPROTO_TCP, and a socket made with the defaults reports protocol 0.
Without NODELAY, a response written in two pieces (head, then body) waits for the
client's delayed ACK: about 40 ms per request, whatever the request costs.
"""

from __future__ import annotations

import socket

from noteloom.errors import ConfigError


def listen_socket(host: str, port: int, backlog: int = 2048, *, reuse_port: bool = False) -> socket.socket:
    """A bound, listening TCP socket whose accepted connections get TCP_NODELAY
    (``reuse_port``: one of a group, see :func:`listen_sockets`)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host!r}: {exc.strerror}; use an address such as 127.0.0.1") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"port {port} on {host} is in use or not allowed ({exc.strerror}); pick another with --port") from exc
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def listen_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` listening sockets on one port, one for each server process.

    One socket shared by several processes hands a burst of new connections to
    whichever process wakes first (asyncio accepts everything queued at once), so
    eight clients connecting together all landed on one of two processes. With a
    socket each (SO_REUSEPORT), the kernel spreads new connections over them.

    The port is first bound plainly, so one that is in use is an error here as with a
    single process, rather than a group that another server could join.
    """
    if count == 1:
        return [listen_socket(host, port)]
    if not hasattr(socket, "SO_REUSEPORT"):  # pragma: no cover - Linux and the BSDs have it
        raise ConfigError("this system cannot share a port between processes; serve with --workers 1")
    probe = listen_socket(host, port)
    port = probe.getsockname()[1]
    group: list[socket.socket] = []
    try:
        probe.close()
        for _ in range(count):
            group.append(listen_socket(host, port, reuse_port=True))
    except BaseException:
        for sock in group:
            sock.close()
        raise
    return group
