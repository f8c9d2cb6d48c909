"""A real noteloom web server on 127.0.0.1 for tests that need real HTTP.

Two ways to run one:

- ``live_server(app)``: uvicorn in a background thread of the test process, serving
  the very ``App`` the test holds (fast to start; the test can change the workspace
  directly and see the effect over HTTP);
- ``live_server_process(home)``: ``python tests/livesrv.py --home HOME`` in a child
  process, for load tests and browsers, where the server must not share the GIL.

Both bind the socket before the server starts, so the port is known and free of
races, and both stop the server when the ``with`` block ends.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from noteloom.app import App, access_token
from noteloom.config import ServerLimits
from noteloom.web.app import create_web_app
from noteloom.web.listen import listen_socket
from noteloom.web.server import Server, uvicorn_config

START_TIMEOUT = 120.0


@dataclass(frozen=True)
class LiveServer:
    """Where a running server listens, and the owner's token for it."""

    url: str
    token: str

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def bound_socket(host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket on a free port of ``host``, made as ``noteloom serve`` makes it."""
    return listen_socket(host, 0)


def _config(asgi: Any, limits: ServerLimits, **kwargs: Any) -> uvicorn.Config:
    """The server ``noteloom serve`` runs (its protocol with the connection limits)."""
    return uvicorn_config(asgi, limits, log_level="warning", lifespan="on", access_log=False, **kwargs)


def served_url(printed: str) -> str:
    """The server's address from the ``web:`` line ``noteloom serve`` prints (its sign-in
    link, the token after ``#`` or ``?``)."""
    return re.split(r"/[?#]", printed.strip(), maxsplit=1)[0].replace("localhost", "127.0.0.1")


@contextmanager
def live_server(app: App) -> Iterator[LiveServer]:
    """Serve ``app`` from a background thread for the duration of the block."""
    token = access_token(app)
    sock = bound_socket()
    port = sock.getsockname()[1]
    server = Server(_config(create_web_app(app), app.settings.limits))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="livesrv", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    ready = threading.Event()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the live server stopped while starting; see the log above")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the live server did not start within {START_TIMEOUT} s")
        ready.wait(0.005)
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", token)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@contextmanager
def live_server_process(home: Path, *, env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    """Serve the workspace in ``home`` from a child process for the duration of the block."""
    child_env = {**os.environ, **(env or {}), "NOTELOOM_HOME": str(home)}
    src = str(Path(__file__).resolve().parents[1] / "src")
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (src, child_env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--home", str(home)],
        stdout=subprocess.PIPE,
        env=child_env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = _readline_within(proc, START_TIMEOUT)
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"the live server process did not start (it said {line!r})")
        _, url, token = line.split()
        yield LiveServer(url, token)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


@dataclass(frozen=True)
class ServeProcess:
    """A running ``noteloom serve``: where it listens, its process id, where its log goes."""

    server: LiveServer
    pid: int
    log: Path


@contextmanager
def noteloom_serve(
    home: Path, *args: str, log: Path, preexec: Any = None, env: dict[str, str] | None = None
) -> Iterator[ServeProcess]:
    """Run ``python -m noteloom serve --port 0 ARGS`` on ``home`` (stderr into ``log``) for the
    duration of the block, then stop it with SIGINT as a user's Ctrl+C would."""
    child_env = {**os.environ, **(env or {}), "NOTELOOM_HOME": str(home)}
    child_env.pop("NOTELOOM_DATABASE_URL", None)
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "noteloom", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=err, env=child_env, text=True, preexec_fn=preexec,
        )
    try:
        url = token = ""
        while not token:
            line = _readline_within(proc, START_TIMEOUT)
            if not line:
                raise RuntimeError(f"noteloom serve stopped while starting:\n{log.read_text()}")
            key, _, value = line.partition(":")
            if key == "web":
                url = served_url(value)
            elif key == "token":
                token = value.strip()
        yield ServeProcess(LiveServer(url, token), proc.pid, log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()


def _readline_within(proc: subprocess.Popen[str], timeout: float) -> str:
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout)
    if not result:
        raise TimeoutError(f"the live server process did not report its port within {timeout} s")
    return result[0].strip()


def _main() -> None:
    """Child-process entry: serve NOTELOOM_HOME (or --home) and print ``LISTENING URL TOKEN``."""
    from noteloom.app import open_app
    from noteloom.config import load_settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    app = open_app(load_settings(data_dir=args.home))
    token = access_token(app)
    sock = bound_socket(args.host)
    sock.listen(2048)  # connections queue from now on, before uvicorn is up
    print(f"LISTENING http://{args.host}:{sock.getsockname()[1]} {token}", flush=True)
    Server(_config(create_web_app(app), app.settings.limits)).run(sockets=[sock])


if __name__ == "__main__":
    _main()
