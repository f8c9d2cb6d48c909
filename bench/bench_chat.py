"""The chat over real HTTP: how late a token reaches an SSE client, and 20 conversations at once.

Run from the repository root::

    .venv/bin/python -m bench.bench_chat [--tokens 300] [--conversations 20] [--database-url URL]

A ``noteloom`` web app (with the chat's lifespan) is served by uvicorn on 127.0.0.1 in
this process; clients are ``httpx2`` streams over loopback.

1. Added latency: a model stamps each token with ``perf_counter_ns`` as it yields it; the
   client subtracts that stamp from the time the SSE event arrives. It covers the agent
   loop, the event log, the SSE encoder, HTTP and the client's parser. Target: p50 under
   20 ms. (Server and client share this process and its clock.) Measured twice: reading
   from the server that runs the turn, and from a second app and server on the same
   workspace, as a client of ``serve --workers`` may (events then come through the database).
2. Concurrency: ``--conversations`` turns of the ``scripted`` model stream at once, each
   to its own SSE client; half the clients drop the connection midway and resume with
   ``Last-Event-ID``. Every client must see each event exactly once, in order, with the
   whole answer, and the stored events must match what was streamed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import uvicorn

from noteloom.app import CHAT, App, access_token, open_app
from noteloom.config import load_settings
from noteloom.messages import StreamEnd, StreamEvent, TextDelta, Usage, UsageUpdate
from noteloom.providers import ModelRequest
from noteloom.providers.scripted import ScriptedProvider
from noteloom.runs import read_events
from noteloom.web.app import create_web_app

TARGET_P50_MS = 20.0


class StampingModel:
    """Yields ``count`` tokens ``gap`` seconds apart, each carrying the time it was yielded."""

    name = "stamp"
    local = True
    default_model: str | None = "stamp"

    def __init__(self, count: int, gap: float) -> None:
        self.count, self.gap = count, gap

    def models(self) -> list[str]:
        return ["stamp"]

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        return Decimal(0)

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for _ in range(self.count):
            await anyio.sleep(self.gap)
            yield TextDelta(f"{time.perf_counter_ns()} ")
        yield UsageUpdate(Usage(10, self.count))
        yield StreamEnd("end_turn")


async def sse_events(
    client: httpx.AsyncClient, message_id: str, *, after: int = 0, stop_after: int | None = None
) -> AsyncIterator[tuple[int, str, dict[str, Any], int]]:
    """``(seq, kind, data, arrival_ns)`` of each event; ``stop_after`` drops the connection."""
    headers = {"Last-Event-ID": str(after)} if after else {}
    count = 0
    async with client.stream("GET", f"/api/v1/chat/messages/{message_id}/events", headers=headers) as r:
        fields: dict[str, str] = {}
        async for line in r.aiter_lines():
            if line == "":
                if "event" in fields:
                    yield int(fields["id"]), fields["event"], json.loads(fields["data"]), time.perf_counter_ns()
                    count += 1
                    if stop_after is not None and count >= stop_after:
                        return
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value


async def send(client: httpx.AsyncClient, text: str, model: str) -> str:
    r = await client.post("/api/v1/chat/send", json={"message": text, "controls": {"model": model}})
    r.raise_for_status()
    return str(r.json()["message_id"])


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def latency(client: httpx.AsyncClient, turns: int, reader: httpx.AsyncClient | None = None) -> list[float]:
    """Token → client delays; ``reader`` follows the turns through another server."""
    samples: list[float] = []
    for i in range(turns):
        mid = await send(client, f"latency run {i}", "stamp:stamp")
        async for _seq, kind, data, arrived in sse_events(reader or client, mid):
            if kind == "text":
                samples.append((arrived - int(data["text"])) / 1e6)
    return samples


async def concurrency(client: httpx.AsyncClient, app: App, conversations: int, chunks: int) -> dict[str, Any]:
    expected = "".join(f"w{i} " for i in range(chunks))
    ids = [await send(client, f"conversation {n}", "play:script") for n in range(conversations)]
    seen: dict[str, list[int]] = {}
    texts: dict[str, str] = {}
    reconnects = 0

    async def follow(n: int, mid: str) -> None:
        nonlocal reconnects
        seqs: list[int] = []
        text: list[str] = []
        drop = chunks // 2 if n % 2 else None  # every other client drops halfway, then resumes
        last = 0
        while True:
            async for seq, kind, data, _ in sse_events(client, mid, after=last, stop_after=drop):
                seqs.append(seq)
                last = seq
                if kind == "text":
                    text.append(data["text"])
            if drop is None:
                break
            drop = None
            reconnects += 1
        seen[mid], texts[mid] = seqs, "".join(text)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n, mid in enumerate(ids):
            tg.start_soon(follow, n, mid)
    elapsed = time.perf_counter() - started
    problems = 0
    with app.workspace.read() as c:
        for mid in ids:
            seqs = seen[mid]
            stored = [e.seq for e in read_events(c, mid, 0, limit=1_000_000)]
            ok = seqs == list(range(1, len(seqs) + 1)) and seqs == stored and texts[mid] == expected
            problems += not ok
    events = sum(len(s) for s in seen.values())
    return {"elapsed": elapsed, "events": events, "problems": problems, "reconnects": reconnects}


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {"NOTELOOM_HOME": str(Path(tmp) / "home")}
        if args.database_url:
            env["NOTELOOM_DATABASE_URL"] = args.database_url
        app = open_app(load_settings(env), load_entry_points=False)
        providers = app.services["providers"]
        providers.add(StampingModel(args.tokens, args.gap))
        providers.add(ScriptedProvider("play", [{"chunks": [f"w{i} " for i in range(args.chunks)],
                                                  "chunk_delay": 0.002}], loop=True))
        token = access_token(app)
        # A second app on the same workspace stands for another `serve --workers` process.
        other = open_app(load_settings(env), load_entry_points=False)
        server = uvicorn.Server(uvicorn.Config(create_web_app(app, background=[CHAT]), host="127.0.0.1",
                                               port=0, log_level="warning", lifespan="on"))
        second = uvicorn.Server(uvicorn.Config(create_web_app(other, background=[CHAT]), host="127.0.0.1",
                                               port=0, log_level="warning", lifespan="on"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            tg.start_soon(second.serve)
            with anyio.fail_after(20):
                while not (server.started and second.started):
                    await anyio.sleep(0.02)
            port = server.servers[0].sockets[0].getsockname()[1]
            port2 = second.servers[0].sockets[0].getsockname()[1]
            limits = httpx.Limits(max_connections=args.conversations * 2 + 4)
            auth = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits,
                                         headers=auth) as client, \
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{port2}", timeout=60, headers=auth) as reader:
                engine = app.settings.database_url.split(":")[0]
                for label, via in (("same server", None), ("through a second server on the workspace", reader)):
                    samples = await latency(client, args.turns, via)
                    p50 = statistics.median(samples)
                    print(f"token → SSE client latency over {len(samples)} tokens "
                          f"({args.gap * 1000:.0f} ms apart, {engine}, {label}):")
                    print(f"  p50 {p50:.2f} ms · p90 {pct(samples, 90):.2f} ms · p99 {pct(samples, 99):.2f} ms · "
                          f"max {max(samples):.2f} ms  (target p50 < {TARGET_P50_MS:.0f} ms: "
                          f"{'met' if p50 < TARGET_P50_MS else 'MISSED'})")
                result = await concurrency(client, app, args.conversations, args.chunks)
                print(f"{args.conversations} conversations at once, {args.chunks} chunks each: "
                      f"{result['events']} events in {result['elapsed']:.2f} s "
                      f"({result['events'] / result['elapsed']:.0f} events/s), {result['reconnects']} resumed "
                      f"after a dropped connection; lost, duplicated or reordered: "
                      f"{result['problems']} conversation(s)")
            server.should_exit = second.should_exit = True
        other.close()
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tokens", type=int, default=200, help="tokens per latency turn")
    parser.add_argument("--turns", type=int, default=3, help="latency turns")
    parser.add_argument("--gap", type=float, default=0.005, help="seconds between tokens")
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=60, help="chunks per concurrent answer")
    parser.add_argument("--database-url", default=None, help="e.g. postgresql+psycopg://… (default: SQLite)")
    args, _ = parser.parse_known_args()
    anyio.run(run, args)


if __name__ == "__main__":
    main()
