"""Start-up cost of the command line: CPU seconds of commands that compute no embedding.

Run from the repository root::

    .venv/bin/python -m bench.bench_startup [--runs 5]

Each command runs in a fresh process (``python -m noteloom …``) on a workspace made for
the run, and the figure is that process's user + system CPU time (``resource.getrusage``
of the children), the median of ``--runs``. It also says which heavy modules the command
imported: none of torch, sentence-transformers, the model SDKs or the web server should
load for these commands.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_CPU_SECONDS = 1.0
HEAVY = ("torch", "sentence_transformers", "openai", "anthropic", "fastapi", "uvicorn", "numpy", "alembic")
COMMANDS = {
    "noteloom ask start-up CPU": ["ask", "-m", "echo", "hi"],
    "noteloom notes list start-up CPU": ["notes", "list"],
}
#: Runs the CLI like the ``noteloom`` script, then reports the heavy modules it loaded.
PROBE = (
    "import json, sys\n"
    "from noteloom.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\n"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    before = _children_cpu()
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    spent = _children_cpu() - before
    if proc.returncode != 0:
        raise SystemExit(f"`noteloom {' '.join(args)}` failed: {proc.stderr.strip()[-500:]}")
    heavy = json.loads(proc.stderr.strip().splitlines()[-1])
    return spent, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    opts, _ = parser.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "NOTELOOM_HOME": str(home)}
        env.pop("NOTELOOM_DATABASE_URL", None)
        # What a user runs has its bytecode cached (pip compiles it at install; a source
        # checkout writes it at the first run): a shell that forbids writing it would time
        # the compiler at every run instead. The untimed first run of each command below
        # writes it.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "noteloom", "init"], env=env, capture_output=True, check=True)
        subprocess.run([sys.executable, "-m", "noteloom", "notes", "add", "Packing list", "--body", "tent, stove"],
                       env=env, capture_output=True, check=False, stdin=subprocess.DEVNULL)
        failed = False
        for label, args in COMMANDS.items():
            run_once(args, env)  # untimed: writes bytecode
            figures = []
            heavy: list[str] = []
            for _ in range(opts.runs):
                spent, heavy = run_once(args, env)
                figures.append(spent)
            median = statistics.median(figures)
            verdict = "ok" if median < TARGET_CPU_SECONDS else "OVER TARGET"
            print(f"{label}: {median:.2f} s (min {min(figures):.2f}, max {max(figures):.2f}; "
                  f"target < {TARGET_CPU_SECONDS:.0f} s without embeddings work) {verdict}")
            print(f"  heavy modules imported: {', '.join(heavy) or 'none'}")
            failed = failed or bool({"torch", "sentence_transformers"} & set(heavy))
        if failed:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
