"""What the command line imports before it answers: a command that embeds nothing, validates
no tool call and talks to no PostgreSQL loads none of the modules that cost start-up.

The start-up figure itself is measured by ``bench/bench_startup.py``; this checks the
cause of a regression (a heavy import at module level), which does not depend on timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Modules a ``notes list`` or an ``ask`` with the echo model has no use for.
NOT_AT_START = (
    "torch",
    "sentence_transformers",
    "numpy",
    "openai",
    "anthropic",
    "uvicorn",
    "fastapi",
    "alembic",
    "jsonschema",
    "pydantic",
    "sqlalchemy.dialects.postgresql",
    "noteloom.semantic.hybrid",
)
PROBE = (
    "import json, sys\n"
    "from noteloom.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    print(json.dumps([m for m in {NOT_AT_START!r} if m in sys.modules]), file=sys.stderr)\n"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("startup") / "home"
    subprocess.run([sys.executable, "-m", "noteloom", "init", "--home", str(home)], check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    return home


@pytest.mark.parametrize("args", [["notes", "list"], ["ask", "-m", "echo", "hi"]], ids=["notes-list", "ask"])
def test_a_command_that_embeds_nothing_imports_none_of_the_heavy_modules(home: Path, args: list[str]) -> None:
    env = {**os.environ, "NOTELOOM_HOME": str(home)}
    env.pop("NOTELOOM_DATABASE_URL", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert loaded == []
