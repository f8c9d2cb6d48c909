"""A recipe run whose process is killed mid-stream: the next process to run recipes on the
workspace settles it failed, "interrupted", keeps its partial trace, counts the failure
and tells the owner. The process is really killed (SIGKILL), nothing is simulated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from noteloom import db
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.recipes import store
from noteloom.recipes import tables as t
from noteloom.runs import store as run_store
from recipe_support import service

pytestmark = pytest.mark.anyio


def _wait_for(check: object, timeout: float = 120.0) -> None:
    """Until ``check()`` is true; ``timeout`` only bounds a process that never gets there."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("the run never got under way")
        time.sleep(0.05)


async def test_a_run_killed_mid_stream_is_settled_interrupted_by_the_next_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"id": "c1", "name": "search_notes", "arguments": {"query": "plan"}}]},
        {"chunks": ["Half of the report"], "hang": True},
    ]))
    (home / "noteloom.toml").write_text(f'[providers.play]\ntype = "scripted"\nscript = "{script}"\n')
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        owner = app.workspace.ensure_owner()
        rid = service(app).add(owner, {"name": "digest", "prompt": "Report.", "model": "play",
                                       "tools": ["search_notes"]})["id"]
    finally:
        app.close()
    proc = subprocess.Popen([sys.executable, "-m", "noteloom", "recipes", "run", "digest", "--home", str(home)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        def writing() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            with db.read_tx(app.engine) as c:
                runs = store.runs_of(c, rid)
                return bool(runs) and any(e.kind == "text" for e in run_store.read_events(c, runs[0].run_id, 0))

        _wait_for(writing)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        with db.read_tx(app.engine) as c:
            [run] = store.runs_of(c, rid)
        assert run.status == "running"  # as the killed process left it
        async with service(app).running():
            pass  # the engine settles the runs of runners that are gone as it starts
        detail = await anyio.to_thread.run_sync(service(app).run, owner, run.run_id)
        recipe = service(app).get(owner, "digest")
        with db.read_tx(app.engine) as c:
            kinds = [r.kind for r in c.execute(t.notifications.select())]
    finally:
        app.close()
    assert detail["status"] == "failed" and detail["error"].startswith("[interrupted]")
    assert [(c["tool"], c["outcome"]) for c in detail["trace"]] == [("search_notes", "ok")]
    assert recipe["failures"] == 1
    assert kinds == ["failure"]
