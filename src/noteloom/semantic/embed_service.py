"""The embedding service: one embedder per machine, shared by the processes that serve a workspace.

``noteloom serve --workers N`` runs N server processes; each used to load the local model
itself (1.8–2.2 GB for two workers). Instead one service process owns the one
:class:`~noteloom.embedders.Embedder` and every worker embeds through a
:class:`RemoteEmbedder`, which implements the same protocol (the worker never imports
the model's libraries).

- **Where**: a Unix socket in a folder of the workspace home (``run/``, mode 0700; the
  socket 0600), named for the process that started the service, so two servers on one
  workspace never take each other's. A home whose path is too long for a socket address
  gets a private (0700) folder from :func:`tempfile.mkdtemp` instead.
- **Who may talk to it**: the folder and socket modes keep every other user out; on top,
  a connection must pass ``multiprocessing.connection``'s HMAC challenge with a random
  32-byte key the starter made and hands to its children (through the spawn pipe to the
  service and to workers alike, never through the environment). A client of another server, or a leftover socket, fails the challenge
  rather than getting someone else's vectors.
- **Wire**: ``multiprocessing.connection`` messages (length-prefixed), never pickled: a
  request is a JSON object, a reply a JSON header line followed by the vectors as
  float32 bytes (rows × dimensions).
- **Lifecycle** (:class:`ServiceProcess`): a spawned process that binds its socket before
  it reports ready and loads the model right after, so the first query does not wait for
  it; it dies with its starter (Linux's PR_SET_PDEATHSIG), stops on SIGTERM and removes
  its socket. Whoever started it restarts it when it dies (``ensure_running``), at the
  same address with the same key, and :class:`RemoteEmbedder` reconnects by itself.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import secrets
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from noteloom.embedders import Embedder
from noteloom.errors import EmbedderUnavailable, EmbeddingError, NoteloomError

log = logging.getLogger(__name__)

__all__ = [
    "EmbedService",
    "EmbedderSource",
    "RemoteEmbedder",
    "ServiceEndpoint",
    "ServiceProcess",
]

#: The longest request a service reads (a batch of chunks is well under a megabyte).
MAX_REQUEST = 64 * 1024 * 1024
#: Seconds a caller is told to wait when the service went away mid-request: the server looks
#: for a dead service twice a second and starts it again (loading the model takes a moment).
RESTART_WAIT = 5.0
#: Room for a socket path: ``sun_path`` holds 108 bytes on Linux (104 on macOS), with the NUL.
_MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class ServiceEndpoint:
    """Where a service listens, the key it asks for, the name of its embedder and the model's
    window in tokens (0 when the embedder cannot count tokens), known without asking it."""

    address: str
    authkey: bytes = field(repr=False)
    name: str
    max_tokens: int = 0


@dataclass(frozen=True)
class EmbedderSource:
    """How a service process builds its embedder: ``module:callable`` called with ``kwargs``
    (an import path, so it travels to a spawned process as text)."""

    target: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Embedder:
        module_name, _, attr = self.target.partition(":")
        if not module_name or not attr:
            raise EmbeddingError(f"embedder source {self.target!r} is not of the form 'module:callable'")
        built = getattr(importlib.import_module(module_name), attr)(**self.kwargs)
        if not isinstance(built, Embedder):
            raise EmbeddingError(f"{self.target} built {type(built).__name__}, which is not an embedder")
        return built


# -- the wire ---------------------------------------------------------------------------------


def _pack_vectors(header: dict[str, Any], vectors: Sequence[Sequence[float]]) -> bytes:
    dims = len(vectors[0]) if vectors else 0
    if any(len(v) != dims for v in vectors):
        raise EmbeddingError("the embedder returned vectors of different sizes")
    flat = array("f")
    for v in vectors:
        flat.extend(v)
    head = json.dumps({**header, "rows": len(vectors), "dimensions": dims}).encode()
    return head + b"\n" + flat.tobytes()


def _unpack(reply: bytes) -> tuple[dict[str, Any], list[list[float]]]:
    head, _, body = reply.partition(b"\n")
    header = json.loads(head)
    if not isinstance(header, dict):
        raise EmbeddingError("the embedding service sent a malformed reply")
    rows, dims = int(header.get("rows", 0)), int(header.get("dimensions", 0))
    flat = array("f")
    flat.frombytes(body)
    if len(flat) != rows * dims:
        raise EmbeddingError("the embedding service sent a reply of the wrong length")
    values = flat.tolist()
    return header, [values[i * dims : (i + 1) * dims] for i in range(rows)]


# -- the service ------------------------------------------------------------------------------


class EmbedService:
    """Answers ``describe``, ``embed_documents`` and ``embed_query`` for one embedder on a Unix
    socket, one thread per connection. The embedder is built (and its model loaded) in the
    background once the socket listens; requests that come first wait for it."""

    def __init__(self, source: EmbedderSource | Embedder, address: str, authkey: bytes) -> None:
        self.address = address
        self._authkey = authkey
        self._source = source
        self._embedder: Embedder | None = None
        self._error: str | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._count = threading.Lock()
        self.requests = 0
        self._sock = _bind(address)

    def load(self) -> None:
        """Build the embedder and load its model (done once; errors are kept for the replies)."""
        try:
            embedder = self._source.build() if isinstance(self._source, EmbedderSource) else self._source
            embedder.dimensions  # noqa: B018 - loads the model now, not on the first query
            self._embedder = embedder
        except Exception as exc:
            self._error = str(exc) if isinstance(exc, NoteloomError) else f"{type(exc).__name__}: {exc}"
            log.warning("the embedding service cannot embed: %s", self._error)
        finally:
            self._ready.set()

    def serve_forever(self) -> None:
        """Load the embedder in the background and answer connections until :meth:`close`."""
        threading.Thread(target=self.load, name="embed-load", daemon=True).start()
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                if self._stop.is_set():
                    return
                raise
            conn = Connection(client.detach())
            threading.Thread(target=self._serve, args=(conn,), name="embed-conn", daemon=True).start()

    def close(self) -> None:
        """Stop answering and remove the socket (connections in flight finish their request)."""
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes an accept() in another thread
        self._sock.close()
        try:
            if stat.S_ISSOCK(os.lstat(self.address).st_mode):
                os.unlink(self.address)
        except FileNotFoundError:
            pass

    def _serve(self, conn: Connection) -> None:
        with conn:
            try:
                # The challenge runs here, not in accept(), so a client that stalls in it
                # holds up only its own connection.
                deliver_challenge(conn, self._authkey)
                answer_challenge(conn, self._authkey)
            except (AuthenticationError, EOFError, OSError):
                return
            while True:
                try:
                    request = conn.recv_bytes(MAX_REQUEST)
                except (EOFError, OSError):
                    return
                try:
                    conn.send_bytes(self._answer(request))
                except OSError:
                    return

    def _answer(self, raw: bytes) -> bytes:
        with self._count:
            self.requests += 1
        try:
            request = json.loads(raw)
            op = request.get("op") if isinstance(request, dict) else None
            if op == "ping":
                return _pack_vectors({"pid": os.getpid(), "requests": self.requests}, [])
            self._ready.wait()
            embedder = self._embedder
            if embedder is None:
                raise EmbeddingError(self._error or "the embedding service has no embedder")
            if op == "describe":
                return _pack_vectors({"name": embedder.name, "dims": embedder.dimensions, "pid": os.getpid()}, [])
            if op == "embed_documents":
                texts = request.get("texts")
                if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                    raise EmbeddingError("embed_documents takes a list of strings")
                return _pack_vectors({}, embedder.embed_documents(texts))
            if op == "count_tokens":
                texts = request.get("texts")
                count = getattr(embedder, "count_tokens", None)
                if count is None or not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                    raise EmbeddingError("count_tokens takes a list of strings, for an embedder that counts tokens")
                return _pack_vectors({"counts": [int(n) for n in count(texts)]}, [])
            if op == "embed_query":
                text = request.get("text")
                if not isinstance(text, str):
                    raise EmbeddingError("embed_query takes a string")
                return _pack_vectors({}, [embedder.embed_query(text)])
            raise EmbeddingError(f"the embedding service knows no request {op!r}")
        except Exception as exc:
            message = str(exc) if isinstance(exc, NoteloomError) else f"{type(exc).__name__}: {exc}"
            return json.dumps({"error": message}).encode() + b"\n"


def _bind(address: str) -> socket.socket:
    """A listening Unix socket at ``address``, its folder 0700 and the socket 0600 (a leftover file at the
    address, from a service killed outright, is replaced)."""
    path = Path(address)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = path.parent.lstat()
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid():
        raise EmbeddingError(f"{path.parent} is not a folder of this user; remove it")
    os.chmod(path.parent, 0o700)
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the socket is made 0600, with no moment at a looser mode
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(old)
    os.chmod(address, 0o600)
    sock.listen(64)
    return sock


# -- the client -------------------------------------------------------------------------------


class RemoteEmbedder:
    """An :class:`~noteloom.embedders.Embedder` that embeds through an :class:`EmbedService`.

    Thread-safe: each call takes a connection of its own from a small pool. A call whose
    connection breaks (the service restarted) is sent once more on a fresh connection;
    connecting waits up to ``connect_timeout`` seconds for the service to come (back), then
    raises :class:`~noteloom.errors.EmbeddingError`.
    """

    def __init__(self, endpoint: ServiceEndpoint, *, connect_timeout: float = 10.0) -> None:
        self.endpoint = endpoint
        #: The model's window, so chunks are cut as they are for the embedder itself.
        self.max_tokens = endpoint.max_tokens
        self.connect_timeout = connect_timeout
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._dimensions: int | None = None

    @property
    def name(self) -> str:
        return self.endpoint.name

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            header, _ = self._call({"op": "describe"})
            if header.get("name") != self.endpoint.name:
                raise EmbeddingError(
                    f"the embedding service at {self.endpoint.address} embeds with {header.get('name')!r}, "
                    f"not {self.endpoint.name!r}; restart noteloom serve"
                )
            self._dimensions = int(header["dims"])
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        _, vectors = self._call({"op": "embed_documents", "texts": list(texts)})
        if len(vectors) != len(texts):
            raise EmbeddingError(f"the embedding service returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def embed_query(self, text: str) -> list[float]:
        _, vectors = self._call({"op": "embed_query", "text": text})
        return vectors[0]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as the service's model counts them (used when ``max_tokens``)."""
        if not texts:
            return []
        counts = self._call({"op": "count_tokens", "texts": list(texts)})[0].get("counts")
        if not isinstance(counts, list) or len(counts) != len(texts):
            raise EmbeddingError("the embedding service sent a malformed count of tokens")
        return [int(n) for n in counts]

    def ping(self) -> dict[str, Any]:
        """The service's process id and how many requests it has answered."""
        return self._call({"op": "ping"})[0]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _call(self, request: dict[str, Any]) -> tuple[dict[str, Any], list[list[float]]]:
        data = json.dumps(request).encode()
        for attempt in range(2):
            conn, fresh = self._take()
            try:
                conn.send_bytes(data)
                reply = conn.recv_bytes()
            except (EOFError, OSError) as exc:
                conn.close()
                if fresh or attempt:
                    raise EmbedderUnavailable(
                        f"the embedding service at {self.endpoint.address} went away mid-request ({exc or 'closed'}); "
                        "noteloom serve restarts it: try again in a moment", retry_after=RESTART_WAIT,
                    ) from None
                continue  # a pooled connection to a service since restarted
            with self._lock:
                self._idle.append(conn)
            header, vectors = _unpack(reply)
            if "error" in header:
                raise EmbeddingError(f"the embedding service: {header['error']}")
            return header, vectors
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self) -> tuple[Connection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), False
        deadline = time.monotonic() + self.connect_timeout
        pause = 0.01
        while True:
            try:
                return Client(self.endpoint.address, family="AF_UNIX", authkey=self.endpoint.authkey), True
            except AuthenticationError:
                raise EmbeddingError(
                    f"the embedding service at {self.endpoint.address} refused this process's key "
                    "(it belongs to another server); restart noteloom serve"
                ) from None
            except (FileNotFoundError, ConnectionRefusedError, EOFError, OSError) as exc:
                if time.monotonic() >= deadline:
                    raise EmbeddingError(
                        f"the embedding service at {self.endpoint.address} is not running ({exc}); "
                        "noteloom serve starts it again: try again in a moment"
                    ) from None
            time.sleep(pause)  # the service is (re)starting: its socket appears shortly
            pause = min(pause * 2, 0.2)


# -- the service's process ----------------------------------------------------------------------


def socket_folder(home: Path) -> Path:
    """The folder of service sockets for the workspace in ``home``."""
    return home / "run"


class ServiceProcess:
    """An :class:`EmbedService` in a spawned process of its own, tied to this one.

    ``start`` returns once the socket listens (the model may still be loading);
    ``ensure_running`` starts it again, at the same address with the same key, after it died.
    """

    def __init__(
        self, source: EmbedderSource, name: str, home: Path, *, max_tokens: int = 0, start_timeout: float = 60.0
    ) -> None:
        import multiprocessing

        self.source = source
        self.start_timeout = start_timeout
        self._ctx = multiprocessing.get_context("spawn")
        self._temp: Path | None = None
        folder = socket_folder(home)
        address = folder / f"embed-{os.getpid()}.sock"
        if len(os.fsencode(address)) > _MAX_SOCKET_PATH:
            self._temp = Path(tempfile.mkdtemp(prefix="noteloom-embed-"))
            address = self._temp / "embed.sock"
        else:
            _remove_stale(folder)
        self.endpoint = ServiceEndpoint(str(address), secrets.token_bytes(32), name, max_tokens)
        self.process: BaseProcess | None = None
        self.restarts = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def start(self) -> None:
        reader, writer = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(
            target=_service_main,
            args=(self.source, self.endpoint.address, self.endpoint.authkey, os.getpid(), writer),
            name="noteloom-embed", daemon=False,
        )
        process.start()
        writer.close()
        self.process = process
        try:
            ready = reader.poll(self.start_timeout) and reader.recv_bytes() == b"ready"
        except (EOFError, OSError):
            ready = False
        finally:
            reader.close()
        if not ready:
            self._end_process()
            raise EmbedderUnavailable(
                f"the embedding service did not start (exit code {process.exitcode}); see the log above"
            )

    def ensure_running(self) -> bool:
        """Start the service again if it died; whether it had to be."""
        if self.process is None or self.process.is_alive():
            return False
        log.warning("the embedding service (process %s) exited with code %s; starting it again",
                    self.process.pid, self.process.exitcode)
        self.restarts += 1
        self.start()
        return True

    def stop(self) -> None:
        """Stop the service for good (its socket and any private folder go too)."""
        self._end_process()
        if self._temp is not None:
            for leftover in self._temp.iterdir():
                leftover.unlink(missing_ok=True)
            self._temp.rmdir()
            self._temp = None

    def _end_process(self, timeout: float = 10.0) -> None:
        process = self.process
        if process is not None and process.is_alive():
            process.terminate()
            process.join(timeout)
            if process.is_alive():
                process.kill()
                process.join()


def _remove_stale(folder: Path) -> None:
    """Sockets of services whose starter is gone (killed outright, it could not clean up)."""
    for path in folder.glob("embed-*.sock"):
        try:
            pid = int(path.stem.removeprefix("embed-"))
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except PermissionError:
            continue


def _service_main(
    source: EmbedderSource, address: str, authkey: bytes, parent: int, ready: Connection
) -> None:  # pragma: no cover - child
    tie_to_parent(parent)
    # Ctrl+C reaches the whole process group; the starter decides when the service stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(name)s: %(message)s")
    service = EmbedService(source, address, authkey)
    ready.send_bytes(b"ready")
    ready.close()
    try:
        service.serve_forever()
    finally:
        service.close()


def tie_to_parent(parent: int) -> None:
    """Have the kernel send SIGTERM when process ``parent`` dies, even by SIGKILL, so nothing
    it started keeps running (and holding the workspace) without it. Linux only."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("cannot tie this process to its parent (errno %s)", ctypes.get_errno())
    elif os.getppid() != parent:  # the parent died before the line above
        os.kill(os.getpid(), signal.SIGTERM)
