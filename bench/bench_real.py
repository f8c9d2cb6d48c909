"""noteloom on vaults shaped like users' own: every row of the "fast on real vaults" table.

Run from the repository root::

    .venv/bin/python -m bench.bench_real [--sizes 2000,10000,100000] [--only ROW …]
        [--semantic-notes N] [--seconds S] [--keyword-only]

The vaults come from the shared ``corpus.py`` (seed 42) and the queries from its
``queries_bench.txt``; both, and the workspaces imported from them, are cached under
``.bench-cache/`` (see ``bench/real_cache.py``). Every measurement runs in a child process
of its own: ``noteloom import`` and ``noteloom index`` as commands, searches against
``noteloom serve`` on 127.0.0.1 through MCP. Each figure is printed with its target and the
machine's 1-minute load average; a summary table closes the run. Targets are judged on an
otherwise idle machine: on a loaded one, read the figures with the load beside them.

Rows (``--only`` takes these names; several ``--only`` add up):

- ``import``: ``noteloom import`` of the vault into a new workspace (the keyword index is
  built as the notes go in): wall, CPU, peak RSS;
- ``semantic``: ``noteloom index`` over a fresh import (sizes up to 2,000; ``--semantic-notes``
  indexes only the first N notes of the vault, to iterate quickly): wall, CPU, peak RSS, notes/s;
- ``latency``: one client (the official MCP client), each query in turn: p50/p95, keyword
  and hybrid mode;
- ``zero-hit``: queries no note matches: p50 and the most hits any of them returned;
- ``load``: 8 clients for ``--seconds``: calls/s, p50, server CPU per call (from ``/proc``);
- ``rss``: the server's resident memory after that load (all of it and the anonymous part),
  with embeddings and, on a server of its own, without;
- ``workers``: ``noteloom serve --workers 2``: calls/s with 8 clients, RSS summed over the processes.

Hybrid search needs a semantic index: the real one when ``semantic`` has indexed the whole
vault of that size (cached), otherwise synthetic vectors of the model's dimension with
queries embedded for real (``bench/real_vectors.py``; cached too). ``--keyword-only`` serves
the keyword workspace with embeddings off and leaves the hybrid figures out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import real_cache as cache
from bench.real_server import (
    Latency,
    Memory,
    Served,
    Throughput,
    child_env,
    distinct_queries,
    load1,
    many_clients,
    noteloom_cmd,
    official_client,
    one_client,
    run_measured,
    serve,
    wait_ready,
)

ROWS = ("import", "semantic", "latency", "zero-hit", "load", "rss", "workers")
DEFAULT_SIZES = (2000, 10000, 100000)
CLIENTS = 8
#: Where in the distinct queries a hybrid load starts: past what a keyword load before it sent.
HYBRID_START = 9000
#: What warms a server up (loads its model): a query of none of the measured lists.
WARMUP_QUERY = "warm up the server"
KEYWORD_OFF = "[embeddings]\nenabled = false\n"
#: Queries no note of the vault matches (made-up words; a phrase of words that never meet).
ZERO_HIT = [
    "qzxvbnotaword",
    "flurbnax",
    "glimtorvex zandrophile",
    "xylophonic quorbitude",
    '"purple elephant quantum"',
    "snarflewump*",
    "vrexlington",
    "mordwhistle plinkorama",
]


# -- the record of the run ------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    size: int
    name: str
    figure: str
    target: str
    met: bool | None  # None: no target at this size, or not measured
    load: float


class Report:
    """Rows as they are measured (printed at once) and the summary table at the end."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, size: int, name: str, figure: str, target: str, met: bool | None) -> None:
        row = Row(size, name, figure, target, met, load1())
        self.rows.append(row)
        print(f"  {name:<34} {figure}  | target {target}: {_verdict(met)}  (load {row.load:.2f})", flush=True)

    def note(self, text: str) -> None:
        print(f"  {text} (load {load1():.2f})", flush=True)

    def summary(self) -> str:
        head = ("notes", "row", "noteloom", "target", "met", "load")
        lines = [(f"{r.size:,}", r.name, r.figure, r.target, _verdict(r.met), f"{r.load:.2f}") for r in self.rows]
        widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
        fmt = " | ".join(f"{{:<{w}}}" for w in widths)
        out = [fmt.format(*head), "-+-".join("-" * w for w in widths)]
        out += [fmt.format(*line) for line in lines]
        return "\n".join(out)


def _verdict(met: bool | None) -> str:
    return "—" if met is None else ("met" if met else "NOT MET")


def _ms(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.1f} ms"


# -- workspaces -------------------------------------------------------------------------------


def _private_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, mode=0o700)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _init(home: Path, *, embeddings: bool) -> None:
    _private_dir(home)
    if not embeddings:
        _write_private(home / "noteloom.toml", KEYWORD_OFF)
    done = run_measured(noteloom_cmd("init", "--home", str(home)), env=child_env())
    if done.returncode != 0:
        raise cache.BenchError(f"noteloom init failed: {done.stderr.strip()[-2000:]}")


def _import(vault: Path, home: Path, notes: int) -> Any:
    ran = run_measured(noteloom_cmd("import", str(vault), "--home", str(home), "--json", "--no-progress"), env=child_env())
    if ran.returncode != 0:
        raise cache.BenchError(f"noteloom import failed ({ran.returncode}): {ran.stderr.strip()[-2000:]}")
    summary = json.loads(ran.stdout)
    if summary.get("notes") != notes:
        raise cache.BenchError(f"noteloom import took {summary.get('notes')} notes of {notes}: {ran.stdout[:2000]}")
    return ran


def import_row(report: Report, size: int, *, measure: bool) -> Path:
    """The keyword workspace of ``size`` notes (embeddings off), imported now when measured
    or missing; the import is the ``import`` row."""
    vault, summary = cache.vault(size)
    key = cache.workspace_key(summary, kind="keyword")
    cached = cache.cached_workspace(f"kw-{size}", key)
    if cached is not None and not measure:
        return cached
    fresh = cache.workspace_home(f"kw-{size}.new")
    _init(fresh, embeddings=False)
    ran = _import(vault, fresh, size)
    target_s = 60.0 if size >= 100_000 else None
    met = ran.peak_rss_mb < 500 and (target_s is None or ran.wall_s <= target_s)
    report.add(
        size, "cold keyword index (import)",
        f"{ran.wall_s:.1f} s wall, {ran.cpu_s:.1f} s CPU, peak RSS {ran.peak_rss_mb:.0f} MB, "
        f"{size / ran.wall_s:,.0f} notes/s",
        "≤ 60 s, peak RSS < 500 MB" if target_s else "peak RSS < 500 MB (≤ 60 s at 100,000)", met,
    )
    if cached is None:
        home = cache.workspace_home(f"kw-{size}")
        shutil.rmtree(home, ignore_errors=True)
        fresh.rename(home)
        cache.seal(home, key)
        return home
    shutil.rmtree(fresh, ignore_errors=True)
    return cached


def describe_index() -> dict[str, Any]:
    """The embedder and chunker a workspace with default settings indexes with."""
    probe = cache.workspace_home("describe")
    if not (probe / "noteloom.db").exists():
        _private_dir(probe)
    done = run_measured([sys.executable, "-m", "bench.real_vectors", "--describe", str(probe)],
                        env=child_env(), cwd=cache.ROOT)
    if done.returncode != 0:
        raise cache.BenchError(f"could not read the embedder settings: {done.stderr.strip()[-2000:]}")
    described: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return described


def semantic_row(report: Report, size: int, notes: int) -> None:
    """``noteloom index`` over a fresh import of the first ``notes`` notes of the vault."""
    _, summary = cache.vault(size)
    vault = cache.vault(size)[0] if notes >= size else cache.subset_vault(size, notes)
    home = cache.workspace_home(f"sem-{size}" if notes >= size else f"sem-{size}-first{notes}")
    _init(home, embeddings=True)
    _import(vault, home, notes)
    ran = run_measured(noteloom_cmd("index", "--home", str(home)), env=child_env())
    if ran.returncode != 0:
        raise cache.BenchError(f"noteloom index failed ({ran.returncode}): {ran.stderr.strip()[-2000:]}")
    target_s = 150.0 * notes / 2000
    label = "semantic index" + ("" if notes >= size else f" (first {notes:,} notes)")
    report.add(
        size, label,
        f"{ran.wall_s:.1f} s wall, {ran.cpu_s:.1f} s CPU, peak RSS {ran.peak_rss_mb:.0f} MB, "
        f"{notes / ran.wall_s:.1f} notes/s  [{ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else ''}]",
        f"≤ {target_s:.0f} s (2,000 in 150 s), peak RSS < 800 MB",
        ran.wall_s <= target_s and ran.peak_rss_mb < 800,
    )
    if notes >= size:
        cache.seal(home, cache.workspace_key(summary, kind="semantic", **describe_index()))


def vectors_workspace(report: Report, size: int, kw_home: Path, index: dict[str, Any]) -> tuple[Path, str]:
    """A workspace of ``size`` notes with a built semantic index: the real one when cached,
    else synthetic vectors (built now when missing)."""
    _, summary = cache.vault(size)
    real = cache.cached_workspace(f"sem-{size}", cache.workspace_key(summary, kind="semantic", **index))
    if real is not None:
        return real, "real vectors"
    key = cache.workspace_key(summary, kind="synthetic", **index)
    cached = cache.cached_workspace(f"syn-{size}", key)
    if cached is not None:
        return cached, "synthetic vectors"
    home = cache.workspace_home(f"syn-{size}")
    cache.copy_workspace(kw_home, home)
    (home / "noteloom.toml").unlink(missing_ok=True)
    ran = run_measured([sys.executable, "-m", "bench.real_vectors", str(home)], env=child_env(), cwd=cache.ROOT)
    if ran.returncode != 0:
        raise cache.BenchError(f"filling synthetic vectors failed: {ran.stderr.strip()[-3000:]}")
    filled = json.loads(ran.stdout.strip().splitlines()[-1])
    report.note(f"synthetic vectors filled in {ran.wall_s:.0f} s: {filled}")
    # Keyed by what the vectors were made for, should the defaults have moved meanwhile.
    cache.seal(home, cache.workspace_key(summary, kind="synthetic", embedder=filled["embedder"],
                                         chunker=filled["chunker"]))
    return home, "synthetic vectors"


# -- searches ---------------------------------------------------------------------------------


@contextmanager
def server(home: Path, workers: int, log_name: str) -> Iterator[Served]:
    logs = cache.cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with serve(home, workers=workers, log=logs / f"{log_name}.log") as served:
        yield served


def _latency_figure(lat: Latency) -> str:
    errors = f", {lat.errors} errors" if lat.errors else ""
    return f"p50 {_ms(lat.p50_ms)}, p95 {_ms(lat.p95_ms)} over {lat.calls} calls{errors}"


def _load_figure(t: Throughput) -> str:
    errors = f", {t.errors} errors" if t.errors else ""
    return (f"{t.rate:.0f} calls/s, p50 {_ms(t.p50_ms)}, p95 {_ms(t.p95_ms)}, "
            f"server CPU {t.cpu_ms_per_call:.2f} ms/call{errors}")


def _mem_figure(m: Memory) -> str:
    return f"RSS {m.rss_mb:.0f} MB, anonymous {m.anon_mb:.0f} MB ({m.processes} process{'es' if m.processes > 1 else ''})"


@dataclass
class Options:
    rows: set[str]
    queries: list[str]  # the list's own, for one client
    others: list[str]  # other queries, none seen before, for the official client
    distinct: list[str]  # for loads: none repeats within one
    seconds: float
    warmup: float
    rounds: int


def search_rows(report: Report, size: int, home: Path, vectors: str | None, opts: Options) -> None:
    """latency, zero-hit, load and rss on one server process; workers on two."""
    modes: list[tuple[str, str | None]] = [("keyword", "keyword")]
    if vectors:
        modes.append(("hybrid", None))  # the default mode when the index is on
    where = f" [{vectors}]" if vectors else ""
    one_anon = float("nan")
    if opts.rows & {"latency", "zero-hit", "load", "rss"}:
        with server(home, 1, f"serve-{size}") as served:
            for _, mode in modes:
                asyncio.run(wait_ready(served, mode, WARMUP_QUERY))
            keyword_p50 = float("nan")
            if "latency" in opts.rows:
                for label, mode in modes:
                    first, again = asyncio.run(one_client(served, opts.queries, mode, rounds=opts.rounds))
                    official = asyncio.run(official_client(served, opts.others, mode))
                    figure = (f"first sight {_latency_figure(first)}; repeated p50 {_ms(again.p50_ms)}; "
                              f"official mcp client p50 {_ms(official.p50_ms)}")
                    errors = first.errors + again.errors + official.errors
                    if label == "keyword":
                        keyword_p50 = first.p50_ms
                        report.add(size, "search_notes 1 client, keyword", figure,
                                   "p50 < 20 ms", errors == 0 and first.p50_ms < 20)
                    else:
                        bound = min(25.0, 2 * keyword_p50) if not math.isnan(keyword_p50) else 25.0
                        report.add(size, f"search_notes 1 client, hybrid{where}", figure,
                                   f"p50 ≤ 2× keyword and ≤ 25 ms (≤ {bound:.1f} ms)",
                                   errors == 0 and first.p50_ms <= bound)
            if "zero-hit" in opts.rows:
                for label, mode in modes:
                    first, again = asyncio.run(one_client(served, ZERO_HIT, mode, rounds=opts.rounds))
                    report.add(size, f"zero-hit queries, {label}{where if label == 'hybrid' else ''}",
                               f"first sight p50 {_ms(first.p50_ms)}, repeated {_ms(again.p50_ms)}; "
                               f"most hits returned {max(first.max_hits, again.max_hits)}",
                               "0 hits", first.errors + again.errors == 0 and max(first.max_hits, again.max_hits) == 0)
            keyword_rate = float("nan")
            if "load" in opts.rows:
                for label, mode in modes:
                    t = asyncio.run(many_clients(served, opts.distinct, mode, clients=CLIENTS,
                                                 seconds=opts.seconds, warmup=opts.warmup,
                                                 start=0 if mode == "keyword" else HYBRID_START))
                    if label == "keyword":
                        keyword_rate = t.rate
                        report.add(size, f"{CLIENTS} clients, keyword", _load_figure(t),
                                   "p50 < 20 ms, server CPU ≤ 5 ms/call",
                                   t.errors == 0 and t.p50_ms < 20 and t.cpu_ms_per_call <= 5)
                    else:
                        report.add(size, f"{CLIENTS} clients, hybrid{where}", _load_figure(t),
                                   f"≥ half of keyword's calls/s (≥ {keyword_rate / 2:.0f})",
                                   t.errors == 0 and t.rate >= keyword_rate / 2)
            if "rss" in opts.rows:
                m = served.memory()
                limit = 700 if vectors else 300
                report.add(size, "RSS after load, 1 process" + (", with embeddings" if vectors else ""),
                           _mem_figure(m), f"anonymous < {limit} MB", m.anon_mb < limit)
                one_anon = m.anon_mb
    if "workers" in opts.rows:
        with server(home, 2, f"serve-{size}-workers2") as served:
            asyncio.run(wait_ready(served, "keyword", WARMUP_QUERY))
            t = asyncio.run(many_clients(served, opts.distinct, "keyword", clients=CLIENTS,
                                         seconds=opts.seconds, warmup=opts.warmup))
            report.add(size, f"--workers 2, {CLIENTS} clients, keyword", _load_figure(t),
                       "≥ 300 calls/s", t.errors == 0 and t.rate >= 300)
            if vectors:
                asyncio.run(wait_ready(served, None, WARMUP_QUERY))
                t = asyncio.run(many_clients(served, opts.distinct, None, clients=CLIENTS,
                                             seconds=opts.seconds, warmup=opts.warmup, start=HYBRID_START))
                report.add(size, f"--workers 2, {CLIENTS} clients, hybrid{where}", _load_figure(t), "—", None)
            m = served.memory()
            if vectors and not math.isnan(one_anon):
                report.add(size, "RSS after load, --workers 2, with embeddings", _mem_figure(m),
                           f"model once per machine: anonymous ≤ 1 process + 300 MB (≤ {one_anon + 300:.0f} MB)",
                           m.anon_mb <= one_anon + 300)
            else:
                report.add(size, "RSS after load, --workers 2" + (", with embeddings" if vectors else ""),
                           _mem_figure(m), "—", None)


def keyword_rss_row(report: Report, size: int, kw_home: Path, opts: Options) -> None:
    """A server without embeddings, after a keyword load: its memory."""
    with server(kw_home, 1, f"serve-{size}-keyword") as served:
        asyncio.run(wait_ready(served, "keyword", WARMUP_QUERY))
        asyncio.run(many_clients(served, opts.distinct, "keyword", clients=CLIENTS,
                                 seconds=min(opts.seconds, 5.0), warmup=opts.warmup))
        m = served.memory()
        report.add(size, "RSS after load, 1 process, no embeddings", _mem_figure(m),
                   "anonymous < 300 MB", m.anon_mb < 300)


# -- the run ----------------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="Vault sizes, comma-separated (default: %(default)s).")
    parser.add_argument("--only", action="append", choices=ROWS, metavar="ROW",
                        help=f"Measure only these rows ({', '.join(ROWS)}); repeatable.")
    parser.add_argument("--semantic-notes", type=int, default=None,
                        help="Index only the first N notes of the vault in the semantic row (default: all).")
    parser.add_argument("--seconds", type=float, default=10.0, help="Measured seconds per load (default: %(default)s).")
    parser.add_argument("--warmup", type=float, default=2.0, help="Unmeasured seconds before each load.")
    parser.add_argument("--rounds", type=int, default=2, help="Measured rounds of the queries at one client.")
    parser.add_argument("--keyword-only", action="store_true",
                        help="No semantic index: keyword figures only, embeddings off.")
    args, _unknown = parser.parse_known_args(argv)  # `python -m bench` hands every module the same arguments
    try:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes takes whole numbers separated by commas, not {args.sizes!r}")
    if not args.sizes or any(s < 1 for s in args.sizes):
        parser.error("--sizes needs at least one size of 1 note or more")
    if args.semantic_notes is not None and args.semantic_notes < 1:
        parser.error("--semantic-notes takes a number of notes, 1 or more")
    if args.seconds <= 0 or args.warmup < 0 or args.rounds < 1:
        parser.error("--seconds must be positive, --warmup not negative, --rounds at least 1")
    return args


def run(argv: list[str], out: Callable[[str], None] = print) -> Report:
    args = parse(argv)
    rows = set(args.only or ROWS)
    if args.keyword_only:
        rows.discard("semantic")
    queries = cache.load_queries()
    distinct = distinct_queries(queries, 20_000)
    opts = Options(rows, queries, distinct[len(queries) : 2 * len(queries)], distinct[2 * len(queries) :],
                   args.seconds, args.warmup, args.rounds)
    report = Report()
    out(f"noteloom on real shapes: sizes {', '.join(f'{s:,}' for s in args.sizes)}; rows {', '.join(sorted(rows))}; "
        f"{len(opts.queries)} queries from {cache.queries_path().name}; {os.cpu_count()} cores; "
        f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}; cache {cache.cache_root()}")
    needs_index = not args.keyword_only and bool(rows & {"semantic", "latency", "zero-hit", "load", "rss", "workers"})
    index = describe_index() if needs_index else {}
    if needs_index and not index.get("embedder"):
        out("semantic search is off here (no embeddings extra?): keyword figures only")
        needs_index = False
        rows.discard("semantic")
    for size in args.sizes:
        started = time.perf_counter()
        _, summary = cache.vault(size)
        out(f"\n== {size:,} notes ({summary.get('bytes', 0) / 1e6:.1f} MB, fingerprint "
            f"{summary.get('training_fingerprint')}) ==")
        kw_home = import_row(report, size, measure="import" in rows)
        if "semantic" in rows and size <= 2000:
            semantic_row(report, size, min(size, args.semantic_notes or size))
        search = rows & {"latency", "zero-hit", "load", "rss", "workers"}
        if search:
            if needs_index:
                home, vectors = vectors_workspace(report, size, kw_home, describe_index())
                search_rows(report, size, home, vectors, opts)
                if "rss" in rows:
                    keyword_rss_row(report, size, kw_home, opts)
            else:
                search_rows(report, size, kw_home, None, opts)
        out(f"-- {size:,} notes took {time.perf_counter() - started:.0f} s")
    out("\nSummary (targets are judged on an idle machine; load = 1-minute load average at the figure)\n")
    out(report.summary())
    return report


def main() -> None:
    try:
        run(sys.argv[1:])
    except cache.BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
