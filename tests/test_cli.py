"""The command line as a user types it (every command the README shows runs here)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from noteloom.cli import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True, input: str | None = None) -> str:
        result = runner.invoke(cli, list(args), input=input)
        if ok:
            assert result.exit_code == 0, f"{args}: {result.output}"
        else:
            assert result.exit_code != 0, f"{args} should have failed: {result.output}"
        return result.output

    return invoke


def test_a_first_session_in_the_terminal(run) -> None:  # type: ignore[no-untyped-def]
    out = run("init")
    token = re.search(r"token:\s+(\S+)", out).group(1)  # type: ignore[union-attr]
    assert run("token").strip() == token
    run("notebooks", "add", "Garden")
    run("notebooks", "add", "Roses", "--parent", "Garden")
    note_id = run("notes", "add", "Pruning", "--body", "Cut in March.", "--notebook", "Garden/Roses",
                  "--tag", "howto", "--due", "2027-03-01").strip()
    assert re.fullmatch(r"[0-9a-f]{32}", note_id)
    listed = json.loads(run("notes", "list", "--json"))
    assert [n["title"] for n in listed] == ["Pruning"] and listed[0]["is_todo"] is True
    shown = json.loads(run("notes", "show", note_id, "--json"))
    assert shown["body"] == "Cut in March." and shown["tags"] == ["howto"]
    run("notes", "edit", note_id, "--append", "Again in July.", "--done")
    assert json.loads(run("notes", "show", note_id, "--json"))["body"] == "Cut in March.\n\nAgain in July."
    history = json.loads(run("notes", "history", note_id, "--json"))
    assert [h["body"] for h in history] == ["Cut in March."]
    run("notes", "history", note_id, "--restore", history[0]["id"])
    assert json.loads(run("notes", "show", note_id, "--json"))["body"] == "Cut in March."
    books = json.loads(run("notebooks", "list", "--json"))
    assert {b["title"]: b["note_count"] for b in books} == {"Garden": 0, "Roses": 1}
    run("tags", "add", note_id, "roses", "spring")
    assert {t["title"] for t in json.loads(run("tags", "list", "--json"))} == {"howto", "roses", "spring"}
    run("tags", "rm", note_id, "spring")
    run("notes", "rm", note_id)
    assert json.loads(run("notes", "list", "--trash", "--json"))[0]["id"] == note_id
    run("notes", "restore", note_id)
    run("notes", "rm", note_id)
    run("notes", "purge", note_id)
    assert json.loads(run("notes", "list", "--trash", "--json")) == []
    run("notebooks", "rm", "Garden")
    assert json.loads(run("notebooks", "list", "--json")) == []
    assert [t["kind"] for t in json.loads(run("notes", "list", "--trash", "--json"))] == ["notebook"]
    run("notes", "purge", "--all")
    assert json.loads(run("notes", "list", "--trash", "--json")) == []


def test_search_from_the_terminal(run) -> None:  # type: ignore[no-untyped-def]
    run("notebooks", "add", "Garden")
    wanted = run("notes", "add", "Pruning roses", "--body", "# Spring\n\nCut them in March.",
                 "--notebook", "Garden", "--tag", "howto").strip()
    run("notes", "add", "Winter pruning", "--body", "Prune apples in winter.", "--tag", "howto")
    run("notes", "add", "Pruners", "--body", "Sharpen the pruners.")
    hits = json.loads(run("notes", "search", "prun* tag:howto -winter", "--json"))
    assert [h["id"] for h in hits] == [wanted]
    out = run("notes", "search", 'title:"unbalanced', ok=False)
    assert out.startswith("error:") and "Traceback" not in out


def test_token_new_rotates_the_token(run) -> None:  # type: ignore[no-untyped-def]
    first = run("token").strip()
    second = run("token", "--new").strip()
    assert first != second and run("token").strip() == second


def test_bad_input_gets_one_line_and_a_non_zero_exit(run) -> None:  # type: ignore[no-untyped-def]
    for args, expected in [
        (("notes", "show", "0" * 32), "does not exist"),
        (("notes", "add", "x", "--due", "31/12/2026"), "not a date"),
        (("notes", "add", "x", "--notebook", "Nowhere"), "no notebook named 'Nowhere'"),
        (("notes", "add", "x", "--file", "/no/such/file.md"), "no file"),
        (("notes", "purge"), "one trashed item id"),
        (("notes", "restore", "1" * 32), "nothing with id"),
    ]:
        out = run(*args, ok=False)
        error_lines = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(error_lines) == 1 and expected in error_lines[0], out
        assert "Traceback" not in out


def test_noteloom_serve_prints_the_url_and_token_and_serves(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = {**os.environ, "NOTELOOM_HOME": str(tmp_path / "home")}
    env.pop("NOTELOOM_DATABASE_URL", None)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "noteloom", "serve", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        url = _wait_for_url(proc)
        assert f":{port}/#token=" in url
        token = url.split("token=", 1)[1]
        deadline = time.monotonic() + 120
        while True:
            try:
                r = httpx2.get(url, timeout=30)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert r.status_code == 200 and "noteloom" in r.text
        # the page is a data-free shell; what it shows needs the token (or a session made from it)
        assert httpx2.get(f"http://127.0.0.1:{port}/api/v1/notes", timeout=30).status_code == 401
        notes = httpx2.get(f"http://127.0.0.1:{port}/api/v1/notes", headers={"Authorization": f"Bearer {token}"})
        assert notes.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)  # a bound for a hung shutdown only


@pytest.mark.slow
def test_make_serve_starts_noteloom(tmp_path: Path) -> None:
    """The README's first command (the venv exists already, so it only starts the server), on a
    machine without a data folder yet: the platform's default folder is created."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("NOTELOOM_HOME", None)
    env.pop("NOTELOOM_DATABASE_URL", None)
    port = _free_port()
    proc = subprocess.Popen(
        ["make", "-s", "serve", f"ARGS=--port {port}"], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        url = _wait_for_url(proc, timeout=240)
        deadline = time.monotonic() + 120
        while True:
            try:
                assert httpx2.get(url, timeout=30).status_code == 200
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        created = tmp_path / "data" / "noteloom"
        assert (created / "noteloom.db").is_file() and created.stat().st_mode & 0o777 == 0o700
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=180)  # a bound for a hung shutdown only


def _wait_for_url(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        m = re.search(r"web:\s+(\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("no URL printed:\n" + "".join(seen))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_two_workers(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """``noteloom serve --workers 2`` on a new workspace (no embeddings); its process and port."""
    env = {**os.environ, "NOTELOOM_HOME": str(tmp_path / "home")}
    env.pop("NOTELOOM_DATABASE_URL", None)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "noteloom.toml").write_text("[embeddings]\nenabled = false\n")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "noteloom", "serve", "--port", str(port), "--workers", "2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    return proc, port


def test_serve_with_several_workers_answers_from_each_and_stops_cleanly(tmp_path: Path) -> None:
    proc, port = _serve_two_workers(tmp_path)
    try:
        url = _wait_for_url(proc)
        token = url.split("token=", 1)[1]
        auth = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        children = _children(proc.pid)
        assert len(children) >= 2
        # Writes in one process are seen by the others (one workspace, several processes).
        for i in range(20):
            r = httpx2.post(f"http://127.0.0.1:{port}/api/v1/notes", json={"title": f"n{i}", "body": "x"},
                            headers=auth, timeout=30)
            assert r.status_code in (200, 201), r.text
        listed = {n["title"] for n in _all_notes(port, auth)}
        assert {f"n{i}" for i in range(20)} <= listed
        # A worker that dies is replaced, and the server keeps answering.
        workers = [pid for pid in children if "spawn_main" in _cmdline(pid)]
        assert len(workers) == 2, [_cmdline(pid) for pid in children]
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:
            now = [pid for pid in _children(proc.pid) if "spawn_main" in _cmdline(pid) and _alive(pid)]
            if len(now) == 2 and workers[0] not in now:
                break
            assert time.monotonic() < deadline, "the dead worker was not replaced"
            time.sleep(0.1)
        children = list({*children, *now})
        for _ in range(10):  # fresh connections reach both sockets, the new worker's too
            assert httpx2.get(f"http://127.0.0.1:{port}/api/v1/notes", headers=auth, timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=180)  # a bound for a hung shutdown only
    # The workers are joined before the parent exits; helpers such as multiprocessing's
    # resource tracker notice the parent is gone a moment later. None may outlive that.
    _assert_all_exit(children)


def _assert_all_exit(pids: list[int]) -> None:
    deadline = time.monotonic() + 60
    while (left := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [_cmdline(pid) for pid in left]


def test_a_supervisor_killed_outright_takes_its_workers_along(tmp_path: Path) -> None:
    proc, port = _serve_two_workers(tmp_path)
    workers: list[int] = []
    try:
        _wait_for_url(proc)
        deadline = time.monotonic() + 120
        while len(workers := [p for p in _children(proc.pid) if "spawn_main" in _cmdline(p)]) < 2:
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.1)
        while True:  # both serving, so each has passed the point where it ties itself to the parent
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.1)
        proc.kill()
        proc.wait(timeout=180)  # a bound for a hung shutdown only
        _assert_all_exit(workers)
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return f"{pid} (gone)"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _all_notes(port: int, auth: dict[str, str]) -> list[dict[str, object]]:
    r = httpx2.get(f"http://127.0.0.1:{port}/api/v1/notes", params={"limit": 100}, headers=auth, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    return list(body["notes"] if isinstance(body, dict) else body)
