"""Start an MCP server the way an AI app would, from a command and its arguments, and check
it answers ``initialize`` over stdio: shared by the bundle and the client-snippet tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "launcher", "version": "1"}},
}


def initialize_over_stdio(command: str, args: list[str], *, env: dict[str, str] | None = None,
                          cwd: Path | None = None, then: tuple[dict[str, Any], ...] = ()) -> dict[Any, Any]:
    """Run ``command args`` with a bare environment (apps pass few variables: no
    ``NOTELOOM_HOME``, no virtual environment), send ``initialize`` (and the requests
    ``then``) and end the input; the answers by id. Fails the test if the server printed
    anything that is not an answer on stdout."""
    bare = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    done = subprocess.run(
        [command, *args], input="".join(json.dumps(m) + "\n" for m in (INITIALIZE, *then)),
        capture_output=True, text=True,
        env=bare, cwd=cwd, timeout=120, check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert done.returncode == 0 and len(lines) == 1 + len(then), (done.returncode, done.stdout, done.stderr[-2000:])
    answers = {a["id"]: a for a in map(json.loads, lines)}
    assert answers[1]["result"]["serverInfo"]["name"] == "noteloom", answers
    return answers
