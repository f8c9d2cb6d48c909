"""The listening socket for the server.

Made here rather than by uvicorn because asyncio turns on TCP_NODELAY only for sockets
whose protocol is IPPROTO_TCP, and a socket made with the defaults reports protocol 0.
Without NODELAY, a response written in two pieces (head, then body) waits for the
client's delayed ACK: about 40 ms per request, whatever the request costs.
"""

from __future__ import annotations

import socket

from noteloom.errors import ConfigError


def listen_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A bound, listening TCP socket whose accepted connections get TCP_NODELAY."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host!r}: {exc.strerror}; use an address such as 127.0.0.1") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"port {port} on {host} is in use or not allowed ({exc.strerror}); pick another with --port") from exc
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock
