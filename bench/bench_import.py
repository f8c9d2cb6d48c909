"""Import speed: N notes (default 100,000) into a fresh SQLite workspace through the real
``noteloom import`` command, from a Markdown folder and from a ``.jex`` archive, or from a
vault folder given with ``--vault`` (one shaped like users' own, from the shared corpus).

Run from the repository root::

    .venv/bin/python -m bench.bench_import [--notes N] [--seed S] [--formats md,jex] [--keep]
    .venv/bin/python -m bench.bench_import --vault PATH

Every import runs with embeddings off (``[embeddings] enabled = false``), so it measures
the import and the keyword index. Each line carries wall and CPU seconds, peak RSS, notes
per second and the load average before and after (on a shared machine the wall time
follows the load; the CPU time does not).

The notes come from ``bench.corpus`` (deterministic). They are loaded into a scratch
workspace and exported with ``noteloom.interop`` (export times are printed too), then
each export is imported by a ``noteloom import`` subprocess into a fresh workspace. For
each import it reports the peak memory (the child's ``ru_maxrss``) per MB of input, above
the peak of importing a single note.
Files go under ``bench/.out/`` and are removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.corpus import generate, load
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.interop import export_workspace

TARGET_SECONDS = 60.0
TARGET_NOTES = 100_000
TARGET_PEAK_MB = 500
MB = 1 << 20
OUT = Path(__file__).resolve().parent / ".out"


# Runs ``noteloom`` and, at exit, writes to argv[1] the process's peak RSS (VmHWM) and the
# CPU seconds of each of its threads (sampled from /proc every 0.2 s, so a thread that ended
# keeps its last figure), and of its child processes (the reading process: its CPU and its
# own VmHWM, added to the peak). Not ru_maxrss: Linux carries the parent's high-water mark over
# fork and exec into it, so a child of this (large) bench process would report the bench's own size.
_PEAK_WRAPPER = """
import atexit, json, os, runpy, sys, threading
out = sys.argv.pop(1)
tick = os.sysconf("SC_CLK_TCK")
cpu = {}
child_peak = {}
def sample():
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        cpu[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                kids = f.read().split()
        except OSError:
            kids = []
        for pid in kids:  # the import's reading process: its CPU and its own peak
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/status") as f:
                    kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
            except (OSError, StopIteration):
                continue
            cpu["child-" + pid] = ("child", (int(fields[11]) + int(fields[12])) / tick)
            child_peak[pid] = max(child_peak.get(pid, 0), kb)
def sampler():
    while True:
        sample()
        threading.Event().wait(0.2)
threading.Thread(target=sampler, name="bench-sampler", daemon=True).start()
def peak():
    sample()
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    threads = sorted((c, n) for n, c in cpu.values() if n != "bench-sampler")
    with open(out, "w") as f:
        json.dump({"peak": kb * 1024, "child_peak": sum(child_peak.values()) * 1024, "threads": threads}, f)
atexit.register(peak)
sys.argv[0] = "noteloom"
runpy.run_module("noteloom", run_name="__main__", alter_sys=True)
"""


def _import(source: Path, home: Path) -> tuple[float, float, int, dict[str, object]]:
    """Wall and CPU seconds and peak RSS (bytes) of one ``noteloom import`` subprocess, and
    its JSON summary (with ``threads``: the CPU seconds of its busiest threads, most first).
    The peak is the whole process as the kernel counted it (interpreter, SQLite's cache and
    all), not only Python objects as tracemalloc would see them."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n", encoding="utf-8")
    env = {**os.environ, "NOTELOOM_HOME": str(home)}
    env.pop("NOTELOOM_DATABASE_URL", None)
    peak_file = home.parent / f"{home.name}.peak"
    cmd = [sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), "import", str(source), "--json", "--no-progress"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    cpu = usage.ru_utime + usage.ru_stime
    if child.returncode != 0:
        raise SystemExit(f"noteloom import failed ({child.returncode}): {stderr.strip()}")
    summary: dict[str, object] = json.loads(stdout)
    measured = json.loads(peak_file.read_text())
    summary["threads"] = [c for c, _ in sorted(measured["threads"], reverse=True) if c >= 0.1]
    summary["child_peak"] = int(measured.get("child_peak", 0))
    return seconds, cpu, int(measured["peak"]) + summary["child_peak"], summary


def _input_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _baseline(work: Path) -> int:
    """Peak RSS of importing one tiny note: what the process costs before any input."""
    folder = work / "baseline-md"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "one.md").write_text("# One\n\nbody\n", encoding="utf-8")
    return _import(folder, work / "import-baseline")[2]


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f}/{five:.1f}/{fifteen:.1f} on {os.cpu_count()} cores"


def bench_vault(vault: Path, keep: bool) -> None:
    """Import the folder ``vault`` into a fresh workspace and print one line of figures."""
    if not vault.is_dir():
        raise SystemExit(f"--vault {str(vault)!r} is not a folder")
    work = OUT / f"import-vault-{vault.name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        baseline = _baseline(work)
        size = _input_bytes(vault)
        before = _load()
        seconds, cpu, peak, summary = _import(vault, work / "import")
        after = _load()
        notes = int(str(summary["notes"]))
        verdict = ""
        if notes >= TARGET_NOTES:
            ok = seconds < TARGET_SECONDS and peak < TARGET_PEAK_MB * MB
            verdict = (f" ({'meets' if ok else 'MISSES'} the target: {TARGET_NOTES:,} notes in under "
                       f"{TARGET_SECONDS:.0f} s with peak RSS under {TARGET_PEAK_MB} MB, on an idle machine)")
        threads = [float(str(c)) for c in summary["threads"]] if isinstance(summary["threads"], list) else []
        # On two idle cores a pipeline that overlaps well takes about its busiest thread's
        # CPU, or half of all of it, whichever is more: the figure to judge by on a loaded machine.
        idle = max(threads[0] if threads else cpu, cpu / 2)
        print(f"import {vault.name}: {notes:,} notes, {size / MB:.0f} MB in {seconds:.1f} s wall, {cpu:.1f} s CPU "
              f"(threads {', '.join(f'{c:.1f}' for c in threads)} s; ≈{idle:.0f} s on two idle cores), "
              f"peak RSS {peak / MB:.0f} MB (reading process: {int(str(summary['child_peak'])) / MB:.0f} MB; "
              f"one note: {baseline / MB:.0f} MB), "
              f"{notes / seconds:,.0f} notes/s{verdict}; load average {before} before, {after} after")
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench_import", description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=TARGET_NOTES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", default="md,jex", help="comma-separated: md, jex")
    parser.add_argument("--vault", type=Path, help="import this Markdown folder instead of a generated corpus")
    parser.add_argument("--keep", action="store_true", help="keep the generated files in bench/.out")
    args = parser.parse_args(sys.argv[1:])
    if args.vault is not None:
        bench_vault(args.vault, args.keep)
        return
    formats = [f for f in args.formats.split(",") if f]
    work = OUT / f"import-{args.notes}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        corpus = generate(args.notes, args.seed)
        app = open_app(load_settings({"NOTELOOM_HOME": str(work / "source")}), load_entry_points=False)
        try:
            load(app.workspace, corpus)
            print(f"corpus: {args.notes} notes, {len(corpus.notebooks)} notebooks, "
                  f"{len(corpus.tags)} tags loaded in {time.perf_counter() - t0:.1f} s")
            sources: dict[str, Path] = {}
            for fmt in formats:
                dest = work / ("export.jex" if fmt == "jex" else "export-md")
                t1 = time.perf_counter()
                export_workspace(app.workspace, dest, "jex" if fmt == "jex" else "md")
                size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) if dest.is_dir() else dest.stat().st_size
                print(f"export {fmt}: {time.perf_counter() - t1:.1f} s, {size / 1e6:.0f} MB")
                sources[fmt] = dest
        finally:
            app.close()
        print(f"target: {TARGET_NOTES:,} notes in under {TARGET_SECONDS:.0f} s "
              f"(>= {TARGET_NOTES / TARGET_SECONDS:,.0f} notes/s)")
        baseline = _baseline(work)
        print(f"baseline: importing one note peaks at {baseline / MB:.0f} MB RSS")
        for fmt, source in sources.items():
            load_before = _load()
            seconds, cpu, peak, summary = _import(source, work / f"import-{fmt}")
            size = _input_bytes(source)
            notes = int(str(summary["notes"]))
            ok = "ok" if notes == args.notes else f"MISMATCH, expected {args.notes}"
            if args.notes >= TARGET_NOTES:
                verdict = "meets the target" if seconds < TARGET_SECONDS else "MISSES the target"
            else:
                verdict = "start-up included; the target is for 100,000 notes"
            # On a shared machine the wall time follows the load; the CPU time does not.
            print(f"import {fmt}: {notes} notes ({ok}) in {seconds:.1f} s = {notes / seconds:,.0f} notes/s "
                  f"({verdict}); {cpu:.1f} CPU s; load average {load_before} before, {_load()} after")
            print(f"memory {fmt}: peak RSS {peak / MB:.0f} MB for {size / MB:.0f} MB of input = "
                  f"{(peak - baseline) / max(size, 1):.2f} MB per MB of input above the baseline "
                  f"({peak / max(size, 1):.2f} MB per MB in all)")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
