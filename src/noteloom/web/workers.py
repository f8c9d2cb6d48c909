"""``noteloom serve --workers N``: N server processes on one port and one workspace.

Each worker is a fresh (spawned) process that opens the workspace itself — the
settings travel in its spawn arguments, as a :class:`Worker` and the app factory's
arguments; nothing goes through the environment — and serves on a listening socket of its own
(:func:`noteloom.web.listen.listen_sockets`), so the kernel spreads connections over
the workers. The parent only supervises:

- a worker that dies is started again on the same socket (connections queued on it
  are served by the new one); a worker that dies within ``STARTUP_GRACE`` seconds of
  starting, twice in a row, is a setup error, and the whole server stops;
- a supervisor killed outright (SIGKILL) takes its workers along: the kernel sends each
  SIGTERM when its parent dies (Linux's PR_SET_PDEATHSIG);
- SIGINT or SIGTERM stops every worker gracefully (uvicorn finishes the requests in
  flight, up to ``timeout_graceful_shutdown``), then the parent exits.

With semantic search on, the supervisor first starts one embedding service
(:mod:`noteloom.semantic.embed_service`) and hands every worker its address and key
(``Worker.embed_service``): the model is loaded once, not once per worker. The service is
restarted like a worker when it dies and stopped after the workers. Every worker runs the
app's background services; of the workers, one runs the background indexer (the others
stand by on its workspace lock), and the first claims the server's scheduled work
(``Worker.claims_scheduled``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.process import BaseProcess
from typing import Any

from noteloom.config import ServerLimits
from noteloom.embedders import Embedder
from noteloom.errors import NoteloomError
from noteloom.semantic.embed_service import ServiceEndpoint, ServiceProcess, tie_to_parent

log = logging.getLogger(__name__)

#: A worker that exits sooner than this after starting failed to start.
STARTUP_GRACE = 10.0
#: How long a stopping worker may take before it is killed.
STOP_TIMEOUT = 15.0


@dataclass(frozen=True)
class Worker:
    """What a worker process is told: its place among the workers and where the shared
    embedding service listens (``None``: semantic search is off, or embeds in-process)."""

    index: int
    embed_service: ServiceEndpoint | None = None

    @property
    def claims_scheduled(self) -> bool:
        """Whether this worker runs the server's scheduled work (one of them does)."""
        return self.index == 0


#: What a worker serves: an ASGI app made from what it is told. It is pickled to the spawned
#: process, so a module-level function (or a ``functools.partial`` of one).
AppFactory = Callable[[Worker], Any]


def _worker_main(
    sock: socket.socket, factory: AppFactory, worker: Worker, options: dict[str, Any], limits: ServerLimits,
    parent: int,
) -> None:  # pragma: no cover - child
    from noteloom.web.server import return_freed_memory, serve

    return_freed_memory()
    # The kernel sends SIGTERM when the supervisor dies, even by SIGKILL, so no worker keeps
    # serving (and holding the workspace's locks) without it.
    tie_to_parent(parent)
    serve(partial(factory, worker), [sock], limits, factory=True, **options)


def workspace_embedder(config: Mapping[str, Any]) -> Embedder:
    """The embedder an ``[embeddings]`` table names, built with the installed plugins' factories
    (what the embedding service of ``serve --workers N`` runs)."""
    from noteloom.plugins import plugin_manager
    from noteloom.semantic.wiring import build_embedder

    factories: dict[str, Any] = {}
    plugin_manager().hook.register_embedders(register=factories.__setitem__)
    return build_embedder(config, factories, os.environ)


@dataclass
class _Slot:
    index: int
    sock: socket.socket
    process: BaseProcess | None = None
    started: float = 0.0
    quick_deaths: int = 0


@dataclass
class Supervisor:
    """Runs the app ``app`` makes in one process per socket."""

    sockets: list[socket.socket]
    app: AppFactory
    options: dict[str, Any] = field(default_factory=dict)
    limits: ServerLimits = field(default_factory=ServerLimits)
    poll: float = 0.5
    #: The shared embedding service, started before the workers (``None``: semantic search is off).
    service: ServiceProcess | None = None

    def __post_init__(self) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._stop = threading.Event()
        self._slots = [_Slot(i, s) for i, s in enumerate(self.sockets)]
        self.failed = False

    def run(self) -> None:
        """Serve until SIGINT or SIGTERM (or until workers keep failing to start)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if self.service is not None:
                self.service.start()
            for slot in self._slots:
                self._start(slot)
            while not self._stop.wait(self.poll):
                self._revive()
        finally:
            self._stop_all()
            if self.service is not None:
                self.service.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        self._stop.set()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop.set()

    def _start(self, slot: _Slot) -> None:
        worker = Worker(slot.index, self.service.endpoint if self.service is not None else None)
        process = self._ctx.Process(
            target=_worker_main, args=(slot.sock, self.app, worker, self.options, self.limits, os.getpid()),
            daemon=False,
        )
        process.start()
        slot.process, slot.started = process, time.monotonic()

    def _revive(self) -> None:
        if self.service is not None and not self._stop.is_set():
            try:
                self.service.ensure_running()
            except NoteloomError as exc:  # searches say so until a later try succeeds
                log.error("%s", exc)
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
