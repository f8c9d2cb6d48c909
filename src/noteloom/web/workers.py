"""``noteloom serve --workers N``: N server processes on one port and one workspace.

Each worker is a fresh (spawned) process that opens the workspace itself — the
settings travel in the environment — and serves on a listening socket of its own
(:func:`noteloom.web.listen.listen_sockets`), so the kernel spreads connections over
the workers. The parent only supervises:

- a worker that dies is started again on the same socket (connections queued on it
  are served by the new one); a worker that dies within ``STARTUP_GRACE`` seconds of
  starting, twice in a row, is a setup error, and the whole server stops;
- a supervisor killed outright (SIGKILL) takes its workers along: the kernel sends each
  SIGTERM when its parent dies (Linux's PR_SET_PDEATHSIG);
- SIGINT or SIGTERM stops every worker gracefully (uvicorn finishes the requests in
  flight, up to ``timeout_graceful_shutdown``), then the parent exits.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any

from noteloom.config import ServerLimits

log = logging.getLogger(__name__)

#: A worker that exits sooner than this after starting failed to start.
STARTUP_GRACE = 10.0
#: How long a stopping worker may take before it is killed.
STOP_TIMEOUT = 15.0


def _worker_main(
    sock: socket.socket, app: str, options: dict[str, Any], limits: ServerLimits, parent: int
) -> None:  # pragma: no cover - child
    from noteloom.web.server import serve

    _stop_with_parent(parent)

    serve(app, [sock], limits, factory=True, **options)


def _stop_with_parent(parent: int) -> None:
    """Have the kernel send SIGTERM when the supervisor dies, even by SIGKILL, so no worker
    keeps serving (and holding the workspace's locks) without it. Linux only; elsewhere a
    killed supervisor leaves its workers to be stopped by hand."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("cannot tie this server process to its supervisor (errno %s)", ctypes.get_errno())
    elif os.getppid() != parent:  # the supervisor died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


@dataclass
class _Slot:
    sock: socket.socket
    process: BaseProcess | None = None
    started: float = 0.0
    quick_deaths: int = 0


@dataclass
class Supervisor:
    """Runs ``app`` (an import string of an ASGI app factory) in one process per socket."""

    sockets: list[socket.socket]
    app: str
    options: dict[str, Any] = field(default_factory=dict)
    limits: ServerLimits = field(default_factory=ServerLimits)
    poll: float = 0.5

    def __post_init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._slots = [_Slot(s) for s in self.sockets]
        self.failed = False

    def run(self) -> None:
        """Serve until SIGINT or SIGTERM (or until workers keep failing to start)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for slot in self._slots:
                self._start(slot)
            while not self._stop.wait(self.poll):
                self._revive()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        self._stop.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop.set()

    def _start(self, slot: _Slot) -> None:
        process = self._ctx.Process(
            target=_worker_main, args=(slot.sock, self.app, self.options, self.limits, os.getpid()),
            daemon=False,
        )
        process.start()
        slot.process, slot.started = process, time.monotonic()

    def _revive(self) -> None:
        for slot in self._slots:
            process = slot.process
            if process is None or process.is_alive() or self._stop.is_set():
                continue
            quick = time.monotonic() - slot.started < STARTUP_GRACE
            slot.quick_deaths = slot.quick_deaths + 1 if quick else 0
            if slot.quick_deaths >= 2:
                log.error("a server process failed to start twice (exit code %s); stopping", process.exitcode)
                self.failed = True
                self._stop.set()
                return
            log.warning("server process %s exited (code %s); starting another", process.pid, process.exitcode)
            self._start(slot)

    def _stop_all(self) -> None:
        running = [s.process for s in self._slots if s.process is not None and s.process.is_alive()]
        for process in running:
            process.terminate()  # SIGTERM: uvicorn's graceful shutdown
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in running:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("server process %s did not stop in time; killing it", process.pid)
                process.kill()
                process.join()
