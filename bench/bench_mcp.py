"""MCP ``tools/call`` throughput and latency over real HTTP (uvicorn on loopback).

Run from the repository root::

    .venv/bin/python -m bench.bench_mcp [--notes 100000] [--clients 8] [--seconds 10] [--workers N]

A workspace of ``--notes`` notes from ``bench.corpus`` is built once and kept under
``bench/.out/`` (``--rebuild`` makes it anew). ``noteloom``'s web app then serves it
from a child process (so the server does not share the GIL with the load) — by default
one process per core, as ``noteloom serve --workers N`` runs — and
``--clients`` concurrent keep-alive connections send JSON-RPC ``tools/call`` requests
for ``search_notes`` (queries drawn from the corpus vocabulary) and ``read_note``
(random notes, the default 8,000-character cap), one scenario after the other.
Latency is measured per call from the first request byte to the last response byte.

Target on 2 cores: at least 500 calls/s and a p50 under 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / ".out"
TARGET_RATE = 500.0
TARGET_P50_MS = 10.0


# -- the workspace ----------------------------------------------------------------------------


def build(home: Path, notes: int, *, rebuild: bool) -> None:
    """The benchmark workspace in ``home`` (built once, reused while the marker is there)."""
    from bench.corpus import generate, load
    from noteloom.app import open_app
    from noteloom.config import load_settings

    marker = home / "bench-mcp.json"
    if marker.exists() and not rebuild:
        return
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    started = time.perf_counter()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        load(app.workspace, generate(notes))
    finally:
        app.close()
    marker.write_text(json.dumps({"notes": notes}))
    print(f"built a workspace of {notes} notes in {time.perf_counter() - started:.1f} s", flush=True)


def sample_inputs(notes: int, count: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """Note ids and search queries to send, drawn like a model would: ids of real notes,
    queries of one to three everyday words, some rare names, some filters."""
    from bench.corpus import TOPICS, generate

    corpus = generate(notes)
    rng = random.Random(seed)
    ids = [corpus.note(rng.randrange(notes)).id for _ in range(count)]
    words = [w for text in TOPICS.values() for w in text.split() if w.isascii() and len(w) > 3]
    queries: list[str] = []
    for _ in range(count):
        shape = rng.random()
        if shape < 0.5:
            queries.append(" ".join(rng.sample(words, 2)))
        elif shape < 0.7:
            queries.append(rng.choice(words))
        elif shape < 0.85:
            queries.append(f'"{rng.choice(words)} {rng.choice(words)}"')
        elif shape < 0.95:
            queries.append(f"{rng.choice(words)[:4]}* type:todo")
        else:
            queries.append(f"{rng.choice(corpus.pools.rare_words)}")
    return ids, queries


# -- the server -------------------------------------------------------------------------------


def serve(home: Path, workers: int = 1) -> None:
    """Child-process entry: serve ``home`` on a free loopback port, print where and the token."""

    import uvicorn

    from noteloom.app import access_token, open_app
    from noteloom.config import load_settings
    from noteloom.web.app import create_web_app
    from noteloom.web.listen import listen_sockets

    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}))
    token = access_token(app)
    # Connections queue from now on, before uvicorn is up.
    socks = listen_sockets("127.0.0.1", 0, workers)
    print(f"LISTENING {socks[0].getsockname()[1]} {token}", flush=True)
    if workers > 1:
        # As `noteloom serve --workers N` runs: each process opens the workspace itself.
        from functools import partial

        from noteloom.web.app import served_app
        from noteloom.web.workers import Supervisor

        app.close()
        # The MCP path is measured, not background indexing of 100,000 notes.
        (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n", encoding="utf-8")
        settings = load_settings({"NOTELOOM_HOME": str(home)})
        Supervisor(socks, partial(served_app, settings), {"log_level": "warning", "access_log": False}).run()
        return
    config = uvicorn.Config(create_web_app(app), log_level="warning", access_log=False, lifespan="on")
    uvicorn.Server(config).run(sockets=socks)


class Server:
    """The server child process, for the duration of a ``with`` block."""

    def __init__(self, home: Path, workers: int = 1) -> None:
        self.home = home
        self.workers = workers

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_mcp", "--serve", str(self.home), "--workers", str(self.workers)],
            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1],
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline() if self.proc.stdout else ""))
        reader.start()
        reader.join(120)
        if not line or not line[0].startswith("LISTENING "):
            self.__exit__()
            raise RuntimeError(f"the server did not start (it said {line!r})")
        _, port, self.token = line[0].split()
        self.port = int(port)
        return self

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far (all threads of it and its worker processes), from /proc."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat.parent.name) == self.proc.pid or int(fields[1]) == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the load ---------------------------------------------------------------------------------


class Connection:
    """A minimal HTTP/1.1 keep-alive client: the load generator must cost far less than the
    server, or it measures itself (the two share 2 cores)."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def post(self, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nAuthorization: Bearer {self.token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


@dataclass
class Result:
    name: str
    calls: int
    seconds: float
    latencies_ms: list[float]
    errors: int
    tool_errors: int
    server_cpu: float = float("nan")

    def line(self) -> str:
        lat = sorted(self.latencies_ms)
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")  # noqa: E731
        rate = self.calls / self.seconds if self.seconds else 0.0
        verdict = "ok" if rate >= TARGET_RATE and p(0.5) < TARGET_P50_MS else "BELOW TARGET"
        return (
            f"{self.name:<22} {self.calls:>7} calls  {rate:>7.0f} calls/s  p50 {p(0.5):6.2f} ms  "
            f"p95 {p(0.95):6.2f} ms  p99 {p(0.99):6.2f} ms  mean {statistics.fmean(lat) if lat else 0:6.2f} ms  "
            f"errors {self.errors}  isError {self.tool_errors}  [{verdict}]\n"
            f"{'':<22} server CPU {self.server_cpu / max(1, self.calls) * 1000:.2f} ms per call "
            f"(one core would serve {self.calls / self.server_cpu if self.server_cpu else 0:.0f} calls/s)"
        )


async def run_load(port: int, token: str, name: str, make: Callable[[int], dict[str, Any]],
                   clients: int, seconds: float, warmup: float, cpu_seconds: Callable[[], float]) -> Result:
    latencies: list[float] = []
    errors = tool_errors = calls = 0
    counter = 0
    measuring = False
    stop_at = time.perf_counter() + warmup + seconds

    async def worker() -> None:
        nonlocal errors, tool_errors, calls, counter
        conn = Connection(port, token)
        await conn.open()
        try:
            while time.perf_counter() < stop_at:
                counter += 1
                body = json.dumps({"jsonrpc": "2.0", "id": counter, "method": "tools/call",
                                   "params": make(counter)}).encode()
                t0 = time.perf_counter()
                status, data = await conn.post(body)
                elapsed = (time.perf_counter() - t0) * 1000
                if not measuring:
                    continue
                calls += 1
                latencies.append(elapsed)
                answer = json.loads(data)
                if status != 200 or "error" in answer:
                    errors += 1
                elif answer["result"].get("isError"):
                    tool_errors += 1
        finally:
            await conn.close()

    cpu = [0.0, 0.0]

    async def clock() -> float:
        nonlocal measuring
        await asyncio.sleep(warmup)
        measuring = True
        cpu[0] = cpu_seconds()
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        cpu[1] = cpu_seconds()
        return time.perf_counter() - started

    results = await asyncio.gather(clock(), *(worker() for _ in range(clients)))
    # Calls still in flight at the end are counted; the CPU they used partly is not: a rounding error.
    return Result(name, calls, float(results[0]), latencies, errors, tool_errors, cpu[1] - cpu[0])


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP tools/call throughput and latency over HTTP.")
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0, help="Measured seconds per scenario.")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rebuild", action="store_true", help="Build the workspace anew.")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1,
        help="Server processes, as `noteloom serve --workers N` (default: one per core, as the README advises).",
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(sys.argv[1:])
    if args.serve:
        serve(args.serve, args.workers)
        return
    home = OUT / f"mcp-{args.notes}"
    build(home, args.notes, rebuild=args.rebuild)
    ids, queries = sample_inputs(args.notes, 5000)
    scenarios: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
        ("search_notes", lambda i: {"name": "search_notes", "arguments": {"query": queries[i % len(queries)], "limit": 10}}),
        ("read_note", lambda i: {"name": "read_note", "arguments": {"id": ids[i % len(ids)]}}),
        ("read_note outline", lambda i: {"name": "read_note", "arguments": {"id": ids[i % len(ids)], "outline": True}}),
    ]
    print(f"{args.notes} notes, {args.clients} concurrent clients, {args.seconds:.0f} s per scenario, "
          f"{args.workers} server process(es), {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} before); "
          f"target >= {TARGET_RATE:.0f} calls/s and p50 < {TARGET_P50_MS:.0f} ms", flush=True)
    with Server(home, args.workers) as server:
        for name, make in scenarios:
            result = asyncio.run(
                run_load(server.port, server.token, name, make, args.clients, args.seconds, args.warmup, server.cpu_seconds)
            )
            print(result.line(), flush=True)


if __name__ == "__main__":
    main()
