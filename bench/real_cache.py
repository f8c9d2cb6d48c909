"""The benchmark's inputs on real shapes: vaults from the shared ``corpus.py``, its query list,
and the workspaces built from them, each made once and kept under ``.bench-cache/``.

Where things are (each overridable from the environment):

- the cache: ``<repo>/.bench-cache`` (``NOTELOOM_BENCH_CACHE``);
- the generator: ``<repo>/../shared/bench/corpus.py`` (``NOTELOOM_BENCH_CORPUS``);
- the queries: ``queries_bench.txt`` beside the generator (``NOTELOOM_BENCH_QUERIES``).

A vault is generated with seed 42 and the summary the generator prints is kept beside it.
The generator's text comes from this Python's docstrings, so the summary's
``training_fingerprint`` is stored once (``fingerprint.json``) and every later vault must
carry the same one: another fingerprint means other notes, and figures that cannot be
compared with earlier runs. A workspace carries a key (``bench-key.json``): the vault's
summary, noteloom's version, its migrations and whatever else built it (the embedder, the
chunker); any difference and it is built again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SEED = 42
KEY_FILE = "bench-key.json"


class BenchError(RuntimeError):
    """The benchmark cannot run as asked; the message says what to do."""


def cache_root() -> Path:
    return Path(os.environ.get("NOTELOOM_BENCH_CACHE") or ROOT / ".bench-cache")


def corpus_script() -> Path:
    path = Path(os.environ.get("NOTELOOM_BENCH_CORPUS") or ROOT.parent / "shared" / "bench" / "corpus.py")
    if not path.is_file():
        raise BenchError(f"the vault generator {path} is missing; set NOTELOOM_BENCH_CORPUS to the shared corpus.py")
    return path


def queries_path() -> Path:
    return Path(os.environ.get("NOTELOOM_BENCH_QUERIES") or corpus_script().parent / "queries_bench.txt")


def load_queries(path: Path | None = None) -> list[str]:
    """The benchmark queries: one a line, blank lines and ``#`` comments left out."""
    path = path or queries_path()
    if not path.is_file():
        raise BenchError(f"the query list {path} is missing; set NOTELOOM_BENCH_QUERIES")
    queries = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    queries = [q for q in queries if q and not q.startswith("#")]
    if not queries:
        raise BenchError(f"{path} holds no query")
    return queries


# -- vaults -----------------------------------------------------------------------------------


def vault(notes: int) -> tuple[Path, dict[str, Any]]:
    """The vault of ``notes`` notes (seed 42) and the generator's summary of it."""
    root = cache_root() / "vaults"
    out, summary_file = root / f"v{notes}", root / f"v{notes}.json"
    if summary_file.is_file() and out.is_dir():
        summary: dict[str, Any] = json.loads(summary_file.read_text())
    else:
        shutil.rmtree(out, ignore_errors=True)  # a generation cut short
        root.mkdir(parents=True, exist_ok=True)
        print(f"generating a vault of {notes:,} notes (seed {SEED}) …", flush=True)
        done = subprocess.run(
            [sys.executable, str(corpus_script()), str(out), "--notes", str(notes), "--seed", str(SEED), "--stats"],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            raise BenchError(f"corpus.py failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        summary.pop("out_dir", None)  # where it was written is no property of the vault
        summary_file.write_text(json.dumps(summary, indent=1))
    check_fingerprint(summary)
    return out, summary


def check_fingerprint(summary: dict[str, Any]) -> None:
    """Refuse a vault whose training text differs from the one the first vault was made from."""
    stored = cache_root() / "fingerprint.json"
    mine = {"training_fingerprint": summary.get("training_fingerprint"), "python": summary.get("python")}
    if not mine["training_fingerprint"]:
        raise BenchError("corpus.py printed no training_fingerprint; is it the shared generator?")
    if not stored.is_file():
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(mine, indent=1))
        return
    first = json.loads(stored.read_text())
    if first.get("training_fingerprint") != mine["training_fingerprint"]:
        raise BenchError(
            f"corpus.py's training fingerprint is {mine['training_fingerprint']} (Python {mine['python']}), "
            f"but the cached vaults were made with {first.get('training_fingerprint')} "
            f"(Python {first.get('python')}): the notes would differ. Generate with the same Python minor "
            f"version, or empty {cache_root()} to start over"
        )


def subset_vault(notes: int, first: int) -> Path:
    """The first ``first`` notes (in path order) of the vault of ``notes``, as a vault of its own."""
    src, _ = vault(notes)
    out = cache_root() / "vaults" / f"v{notes}-first{first}"
    marker = out / ".complete"
    if marker.is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    for path in sorted(p for p in src.rglob("*.md"))[:first]:
        target = out / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    marker.write_text("")
    return out


# -- workspaces -------------------------------------------------------------------------------


def schema_key() -> dict[str, str]:
    """noteloom's version and the migrations it ships: a workspace built by another is stale."""
    import noteloom

    versions = Path(noteloom.__file__).parent / "migrations" / "versions"
    names = sorted(p.name for p in versions.glob("*.py"))
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode() + b"\0" + (versions / name).read_bytes())
    return {"version": noteloom.__version__, "migrations": digest.hexdigest()[:16]}


def workspace_key(summary: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"vault": summary, **schema_key(), **extra}


def cached_workspace(name: str, key: dict[str, Any]) -> Path | None:
    """The cached workspace ``name`` when it was built under ``key``, else ``None``."""
    home = cache_root() / "workspaces" / name
    try:
        if json.loads((home / KEY_FILE).read_text()) == key:
            return home
    except (OSError, ValueError):
        pass
    return None


def workspace_home(name: str) -> Path:
    return cache_root() / "workspaces" / name


def seal(home: Path, key: dict[str, Any]) -> None:
    """Mark ``home`` as complete under ``key`` (written last: a build cut short stays stale)."""
    (home / KEY_FILE).write_text(json.dumps(key, indent=1))


def copy_workspace(src: Path, dst: Path) -> None:
    """A copy of a closed workspace (its database, WAL included) without its key."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(KEY_FILE, "server.json", "*.log"))
