"""The real-shapes benchmark: its caches, its arguments, and a run on a tiny vault whose rows
carry their targets and the load average. Figures are not judged here (speed is the
benchmark's business); what is checked is that every row is there and honest.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("NOTELOOM_BENCH_CORPUS") or ROOT.parent / "shared" / "bench" / "corpus.py")
needs_corpus = pytest.mark.skipif(not CORPUS.is_file(), reason=f"the shared vault generator is not at {CORPUS}")


@pytest.fixture
def bench_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("NOTELOOM_BENCH_CACHE", str(tmp_path / "cache"))
    from bench import real_cache

    yield real_cache


def test_queries_leave_out_comments_and_blank_lines(bench_cache: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("# a comment\n\nsocket timeout\n  \"event loop\"  \n# another\nencod*\n", encoding="utf-8")
    assert bench_cache.load_queries(path) == ["socket timeout", '"event loop"', "encod*"]
    path.write_text("# only comments\n", encoding="utf-8")
    with pytest.raises(bench_cache.BenchError, match="holds no query"):
        bench_cache.load_queries(path)


def test_a_vault_with_another_training_fingerprint_is_refused(bench_cache: ModuleType) -> None:
    bench_cache.check_fingerprint({"training_fingerprint": "f42d7818d9cb4204", "python": "3.11.7"})
    bench_cache.check_fingerprint({"training_fingerprint": "f42d7818d9cb4204", "python": "3.11.7"})
    stored = json.loads((bench_cache.cache_root() / "fingerprint.json").read_text())
    assert stored["training_fingerprint"] == "f42d7818d9cb4204"
    with pytest.raises(bench_cache.BenchError, match=r"training fingerprint is 0000.*f42d7818d9cb4204"):
        bench_cache.check_fingerprint({"training_fingerprint": "0000", "python": "3.12.1"})
    with pytest.raises(bench_cache.BenchError, match="no training_fingerprint"):
        bench_cache.check_fingerprint({"python": "3.11.7"})


def test_a_workspace_built_under_another_key_is_stale(bench_cache: ModuleType) -> None:
    key = bench_cache.workspace_key({"notes": 30, "training_fingerprint": "x"}, kind="keyword")
    assert {"version", "migrations", "vault", "kind"} <= set(key)
    home = bench_cache.workspace_home("kw-30")
    assert bench_cache.cached_workspace("kw-30", key) is None  # nothing built yet
    home.mkdir(parents=True)
    assert bench_cache.cached_workspace("kw-30", key) is None  # built, but not sealed: cut short
    bench_cache.seal(home, key)
    assert bench_cache.cached_workspace("kw-30", key) == home
    assert bench_cache.cached_workspace("kw-30", {**key, "migrations": "other"}) is None
    assert bench_cache.cached_workspace("kw-30", {**key, "kind": "synthetic"}) is None


def test_bad_arguments_get_a_clear_error(bench_cache: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    from bench import bench_real

    for argv, message in [
        (["--sizes", "2k"], "--sizes takes whole numbers"),
        (["--sizes", "0"], "at least one size"),
        (["--semantic-notes", "0"], "--semantic-notes takes"),
        (["--seconds", "0"], "--seconds must be positive"),
        (["--only", "everything"], "invalid choice"),
    ]:
        with pytest.raises(SystemExit):
            bench_real.parse(argv)
        assert message in capsys.readouterr().err
    args = bench_real.parse(["--sizes", "2000,10_000", "--notes", "5"])  # other modules' options pass by
    assert args.sizes == [2000, 10000]


def test_a_missing_generator_is_named(bench_cache: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NOTELOOM_BENCH_CORPUS", str(tmp_path / "nowhere" / "corpus.py"))
    with pytest.raises(bench_cache.BenchError, match=r"nowhere.*NOTELOOM_BENCH_CORPUS"):
        bench_cache.vault(30)


@needs_corpus
def test_a_run_on_a_tiny_vault_prints_every_row_with_its_target_and_the_load(tmp_path: Path) -> None:
    env = {**os.environ, "NOTELOOM_BENCH_CACHE": str(tmp_path / "cache"), "NOTELOOM_BENCH_CORPUS": str(CORPUS)}
    env.pop("NOTELOOM_HOME", None)
    rows = ["import", "latency", "zero-hit", "rss"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_real", "--sizes", "30", "--keyword-only", "--rounds", "1",
         *(a for r in rows for a in ("--only", r))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    expected = [
        "cold keyword index (import)",
        "search_notes 1 client, keyword",
        "zero-hit queries, keyword",
        "RSS after load, 1 process",
    ]
    lines = out.splitlines()
    for name in expected:
        measured = [line for line in lines if line.strip().startswith(name) and "| target" in line]
        assert len(measured) == 1, (name, out)
        assert re.search(r"\| target .+: (met|NOT MET|—)  \(load \d+\.\d\d\)$", measured[0]), measured[0]
    assert "hybrid" not in out  # no semantic index: no hybrid figure pretends to be one
    table = out[out.index("Summary") :].splitlines()
    header = next(line for line in table if line.startswith("notes"))
    assert [c.strip() for c in header.split("|")] == ["notes", "row", "noteloom", "target", "met", "load"]
    body = [line for line in table if line.startswith("30 ")]
    assert [line.split("|")[1].strip() for line in body] == expected
    for line in body:
        cells = [c.strip() for c in line.split("|")]
        assert cells[3] and re.fullmatch(r"\d+\.\d\d", cells[5]), line
    # A zero-hit query returns nothing; the keyword workspace and the vault are cached for the next run.
    assert "most hits returned 0" in out
    cache = tmp_path / "cache"
    assert (cache / "workspaces" / "kw-30" / "bench-key.json").is_file()
    assert json.loads((cache / "fingerprint.json").read_text())["training_fingerprint"]
