"""What the real-shapes benchmark measures with: commands in child processes (wall, CPU,
peak RSS of that child alone), ``noteloom serve`` as a child on 127.0.0.1, the processes
of a server (CPU and memory from ``/proc``), and MCP clients: the official ``mcp`` client
for latency, a lean keep-alive JSON-RPC client for load (it must cost far less than the
server it loads; both share the machine's cores).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_mcp import Connection
from bench.real_cache import BenchError

CLK_TCK = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 300.0


def load1() -> float:
    """The machine's 1-minute load average, printed beside every figure."""
    return os.getloadavg()[0]


# -- commands ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """One command run to its end: what it said and what it cost."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


def noteloom_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "noteloom", *args]


def child_env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NOTELOOM_DATABASE_URL"}
    if home is not None:
        env["NOTELOOM_HOME"] = str(home)
    return env


def run_measured(cmd: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ran:
    """Run ``cmd`` to its end; its wall time, its CPU and its peak RSS (of it and the children
    it waited for, nobody else's: ``wait4`` on its pid)."""
    started = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b""), daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else b""), daemon=True),
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    return Ran(
        proc.returncode,
        b"".join(out).decode(errors="replace"),
        b"".join(err).decode(errors="replace"),
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,  # KiB on Linux
    )


# -- server processes -------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, CPU ticks) of ``pid``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[11]) + int(fields[12])


def process_tree(root: int) -> list[int]:
    """``root`` and every live descendant of it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parents[int(entry.name)] = st[0]
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier and pid not in tree]
        tree.extend(frontier)
    return [pid for pid in tree if pid in parents or pid == root]


def cpu_seconds(pids: Sequence[int]) -> float:
    return sum(st[1] for st in map(_stat, pids) if st is not None) / CLK_TCK


@dataclass(frozen=True)
class Memory:
    """Resident memory of a server's processes, summed: all of it, and the anonymous part
    (heap, the model's weights: what the file cache cannot give back)."""

    processes: int
    rss_mb: float
    anon_mb: float


def memory(pids: Sequence[int]) -> Memory:
    rss = anon = 0.0
    count = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss += int(values.get("VmRSS", "0 kB").split()[0]) / 1024
        anon += int(values.get("RssAnon", "0 kB").split()[0]) / 1024
        count += 1
    return Memory(count, rss, anon)


@dataclass
class Served:
    """A running ``noteloom serve``."""

    proc: subprocess.Popen[str]
    port: int
    token: str
    workers: int
    pids: list[int] = field(default_factory=list)

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def tree(self) -> list[int]:
        # The supervisor and its workers; the list is read once the workers answer.
        if not self.pids:
            self.pids = process_tree(self.proc.pid)
        return self.pids

    def cpu(self) -> float:
        return cpu_seconds(self.tree())

    def memory(self) -> Memory:
        return memory(self.tree())


@contextmanager
def serve(home: Path, *, workers: int = 1, log: Path) -> Iterator[Served]:
    """``noteloom serve --port 0`` on ``home`` for the duration of the block (stopped with
    SIGINT, as a user's Ctrl-C would)."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            noteloom_cmd("serve", "--home", str(home), "--port", "0", "--workers", str(workers)),
            stdout=subprocess.PIPE, stderr=err, env=child_env(home), text=True,
        )
    try:
        port = 0
        token = ""
        while not token:
            line = _readline_within(proc, START_TIMEOUT)
            if not line:
                raise BenchError(f"noteloom serve stopped while starting:\n{log.read_text()[-3000:]}")
            key, _, value = line.strip().partition(":")
            if key == "web":
                port = int(value.strip().split("/")[2].rsplit(":", 1)[1])
            elif key == "token":
                token = value.strip()
        served = Served(proc, port, token, workers)
        yield served
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
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout)
    if not got:
        raise BenchError(f"noteloom serve said nothing within {timeout:.0f} s")
    return got[0]


# -- clients ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class Latency:
    """Calls made one after the other by one client."""

    calls: int
    p50_ms: float
    p95_ms: float
    max_hits: int
    errors: int
    server_cpu_s: float


def distinct_queries(base: Sequence[str], count: int, seed: int = 42) -> list[str]:
    """Up to ``count`` queries none of which repeats: ``base``, then pairs, triples and
    quadruples of its plain words (AND-ed, as users narrow a search), each group in a fixed
    random order. A load that cycles through a few dozen queries measures the server's
    caches, not its search."""
    import itertools
    import random

    words = list(dict.fromkeys(
        w.strip('"') for q in base for w in q.split() if w.strip('"').isalnum()
    ))
    rng = random.Random(seed)
    out = list(dict.fromkeys(base))
    for size in (2, 3, 4):
        if len(out) >= count:
            break
        group = list(itertools.islice(itertools.combinations(words, size), 50 * count))
        rng.shuffle(group)
        out = list(dict.fromkeys([*out, *(" ".join(g) for g in group)]))
    return out[:count]


def search_args(query: str, mode: str | None, limit: int = 10) -> dict[str, Any]:
    args: dict[str, Any] = {"query": query, "limit": limit}
    if mode is not None:
        args["mode"] = mode
    return args


async def one_client(
    served: Served, queries: Sequence[str], mode: str | None, *, rounds: int
) -> tuple[Latency, Latency]:
    """Every query once as the server first sees it, then ``rounds`` times more (what its
    caches make of a repeated query), one call after the other on one keep-alive connection."""
    conn = Connection(served.port, served.token)
    await conn.open()
    runs: list[Latency] = []
    try:
        for round_queries in (queries, list(queries) * rounds):
            latencies: list[float] = []
            errors = max_hits = 0
            cpu = -served.cpu()
            for i, q in enumerate(round_queries):
                body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                   "params": {"name": "search_notes", "arguments": search_args(q, mode)}}).encode()
                t0 = time.perf_counter()
                status, data = await conn.post(body)
                latencies.append((time.perf_counter() - t0) * 1000)
                answer = json.loads(data)
                if status != 200 or "error" in answer or answer["result"].get("isError"):
                    errors += 1
                else:
                    max_hits = max(max_hits, len(answer["result"]["structuredContent"]["results"]))
            cpu += served.cpu()
            runs.append(Latency(len(latencies), percentile(latencies, 0.5), percentile(latencies, 0.95),
                                max_hits, errors, cpu))
    finally:
        await conn.close()
    return runs[0], runs[1]


async def official_client(served: Served, queries: Sequence[str], mode: str | None) -> Latency:
    """Every query once through the official MCP client (``mcp``): what an AI app sees, the
    client's own cost included."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {served.token}"}, timeout=120)
    latencies: list[float] = []
    errors = max_hits = 0
    async with Client(streamable_http_client(served.mcp_url, http_client=http), mode="legacy") as client:
        cpu = -served.cpu()
        for q in queries:
            t0 = time.perf_counter()
            try:
                result = await client.call_tool("search_notes", search_args(q, mode))
            except MCPError:  # a JSON-RPC error (a bug on the server): counted, not fatal
                result = None
            latencies.append((time.perf_counter() - t0) * 1000)
            if result is None or result.is_error:
                errors += 1
            else:
                hits = (result.structured_content or {}).get("results", [])
                max_hits = max(max_hits, len(hits))
        cpu += served.cpu()
    await http.aclose()
    return Latency(len(latencies), percentile(latencies, 0.5), percentile(latencies, 0.95), max_hits, errors, cpu)


@dataclass(frozen=True)
class Throughput:
    """Calls made by several clients at once for a fixed time."""

    clients: int
    calls: int
    seconds: float
    p50_ms: float
    p95_ms: float
    errors: int
    server_cpu_s: float

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        return self.server_cpu_s / self.calls * 1000 if self.calls else float("nan")


async def many_clients(
    served: Served, queries: Sequence[str], mode: str | None, *, clients: int, seconds: float, warmup: float,
    start: int = 0,
) -> Throughput:
    """``clients`` keep-alive connections sending ``search_notes`` calls back to back, the
    queries in turn from ``start``."""
    latencies: list[float] = []
    errors = calls = 0
    counter = start
    measuring = False
    stop_at = time.perf_counter() + warmup + seconds

    async def worker() -> None:
        nonlocal errors, calls, counter
        conn = Connection(served.port, served.token)
        await conn.open()
        try:
            while time.perf_counter() < stop_at:
                counter += 1
                params = {"name": "search_notes", "arguments": search_args(queries[counter % len(queries)], mode)}
                body = json.dumps({"jsonrpc": "2.0", "id": counter, "method": "tools/call", "params": params}).encode()
                t0 = time.perf_counter()
                status, data = await conn.post(body)
                elapsed = (time.perf_counter() - t0) * 1000
                if not measuring:
                    continue
                calls += 1
                latencies.append(elapsed)
                answer = json.loads(data)
                if status != 200 or "error" in answer or answer["result"].get("isError"):
                    errors += 1
        finally:
            await conn.close()

    cpu = [0.0, 0.0]

    async def clock() -> float:
        nonlocal measuring
        await asyncio.sleep(warmup)
        measuring = True
        cpu[0] = served.cpu()
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        cpu[1] = served.cpu()
        return time.perf_counter() - started

    results = await asyncio.gather(clock(), *(worker() for _ in range(clients)))
    elapsed = results[0]
    assert elapsed is not None
    return Throughput(
        clients, calls, elapsed, percentile(latencies, 0.5), percentile(latencies, 0.95),
        errors, cpu[1] - cpu[0],
    )


async def wait_ready(served: Served, mode: str | None, query: str, timeout: float = START_TIMEOUT) -> None:
    """Until ``search_notes`` answers in ``mode`` on every worker (a worker loads its model on
    first use or in the background; a call that waits for it is no measurement)."""
    deadline = time.monotonic() + timeout
    answered = 0
    conns = [Connection(served.port, served.token) for _ in range(2 * served.workers)]
    for c in conns:
        await c.open()
    try:
        while answered < 4 * served.workers:
            if time.monotonic() > deadline:
                raise BenchError(f"search_notes ({mode or 'default'} mode) did not answer within {timeout:.0f} s")
            replies = await asyncio.gather(*(
                c.post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "search_notes", "arguments": search_args(query, mode)}}).encode())
                for c in conns
            ))
            # A failing call still answers: the rows count such calls as errors.
            answered += len(replies)
    finally:
        for c in conns:
            await c.close()
    served.pids = process_tree(served.proc.pid)
