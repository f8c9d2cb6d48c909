"""Hardening of what lies around the workspace: which files an API client can make the
server read, who may read the data folder, what a missing ``--home`` does, and what
reaches the terminal when the CLI prints text someone else wrote."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from chat_support import running_chat
from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.web.app import create_web_app

# -- files named by API clients -------------------------------------------------------------

_opened: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and args and isinstance(args[0], str | bytes | Path):
        _opened.append(str(args[0]))


sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only inside watch_opens()


@contextmanager
def watch_opens() -> Iterator[list[str]]:
    """Every path this process opens from Python (builtins.open, os.open, Path.open …) meanwhile."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_api_client_cannot_make_the_server_read_a_file_through_a_model_address(
    app: App, tmp_path: Path, anyio_backend: str
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([{"text": "the contents of a file the client named"}]))
    token = access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with running_chat(app), httpx.AsyncClient(
        transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {token}"}
    ) as c:
        sent = await c.post("/api/v1/chat/send", json={"message": "hi", "controls": {"model": "echo"}})
        assert sent.status_code == 202, sent.text
        conversation = sent.json()["conversation_id"]
        for address in ("scripted:/etc/shadow", f"scripted:{secret}", "scripted:/dev/zero"):
            with watch_opens() as opened:
                r = await c.patch(f"/api/v1/chat/conversations/{conversation}",
                                  json={"controls": {"model": address}})
                again = await c.post("/api/v1/chat/send", json={
                    "message": "hi", "conversation_id": conversation, "controls": {"model": address}})
            assert r.status_code == 422, r.text
            assert again.status_code == 422, again.text
            message = r.json()["message"]
            assert address in message and "noteloom.toml" in message and "[providers.NAME]" in message
            assert not [p for p in opened if p in ("/etc/shadow", "/dev/zero", str(secret))], opened
        kept = (await c.get(f"/api/v1/chat/conversations/{conversation}")).json()
        assert kept["controls"]["model"] == "echo", "a refused model leaves the controls as they were"


# -- who may read the data folder -------------------------------------------------------------

MAKE_A_WORKSPACE = r"""
import json, os, sys
from pathlib import Path
os.umask(0o022)  # what most shells and service managers hand a process
from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from noteloom.locks import WorkspaceLock

home = Path(sys.argv[1])
app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
note = app.workspace.create_note("Holiday", "Passport number 1234")
app.workspace.add_attachment(note.id, b"scan", "passport.png")
access_token(app)
lock = WorkspaceLock(app.engine, "test")
assert lock.try_acquire()
# Every file exists now, the WAL and shared-memory files too (a connection is open).
modes = {str(p.relative_to(home)): p.stat().st_mode & 0o777 for p in [home, *home.rglob("*")]}
print(json.dumps(modes))
"""


def _modes(home: Path) -> dict[str, int]:
    return {str(p.relative_to(home)): p.stat().st_mode & 0o777 for p in [home, *home.rglob("*")]}


def test_a_new_workspace_is_readable_by_its_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-c", MAKE_A_WORKSPACE, str(home)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    modes: dict[str, int] = json.loads(done.stdout)
    names = set(modes)
    assert {".", "noteloom.db", "noteloom.db-wal", "noteloom.db-shm", "token", "attachments",
            "noteloom.db-test.lock"} <= names, names
    assert any(n.startswith("attachments/") for n in names), names
    for name, mode in modes.items():
        is_dir = (home / name).is_dir()
        assert mode == (0o700 if is_dir else 0o600), f"{name}: {oct(mode)}"


def test_opening_a_workspace_left_readable_by_others_makes_it_private_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    note = app.workspace.create_note("Holiday", "Passport number 1234")
    app.workspace.add_attachment(note.id, b"scan", "passport.png")
    access_token(app)
    app.close()
    (home / "noteloom.toml").write_text('[trash]\nretention_days = 30\n')
    (home / "holiday.txt").write_text("not noteloom's file")
    # As an earlier version (or a umask of 022) left them.
    for path in [home, *home.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert (home / "noteloom.db").stat().st_mode & 0o777 == 0o644

    with caplog.at_level(logging.WARNING, logger="noteloom.app"):
        again = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        again.workspace.create_note("After", "written once the files are private")
        modes = _modes(home)
    finally:
        again.close()
    assert modes.pop("holiday.txt") == 0o644, "a file noteloom does not own is left alone"
    for name, mode in modes.items():
        assert mode == (0o700 if (home / name).is_dir() else 0o600), f"{name}: {oct(mode)}"
    assert {"noteloom.db", "noteloom.db-wal", "noteloom.toml", "token"} <= set(modes)
    said = [r.getMessage() for r in caplog.records if "readable by their owner only" in r.getMessage()]
    assert len(said) == 1 and str(home) in said[0], caplog.text


# -- a --home that names no workspace -----------------------------------------------------------


@pytest.mark.parametrize("command", [["mcp"], ["notes", "list"], ["serve", "--port", "0"], ["token"]])
def test_a_home_that_does_not_exist_is_an_error_and_nothing_is_created(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo" / "noteloom"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTELOOM_HOME", "NOTELOOM_DATABASE_URL")}
    for args, extra in (([*command, "--home", str(missing)], {}), (command, {"NOTELOOM_HOME": str(missing)})):
        done = subprocess.run([sys.executable, "-m", "noteloom", *args], env={**env, **extra}, input="",
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stdout == ""
        assert done.stderr.splitlines() == [
            f"error: no workspace at {missing}; run `noteloom init --home {missing}` to create one"
        ], done.stderr
        assert not (tmp_path / "typo").exists()


def test_init_creates_the_workspace_a_named_home_then_opens(tmp_path: Path) -> None:
    home = tmp_path / "new"
    runner = CliRunner()
    made = runner.invoke(cli, ["init", "--home", str(home)])
    assert made.exit_code == 0 and f"workspace: {home}" in made.stdout, made.output
    assert runner.invoke(cli, ["notes", "add", "First", "--home", str(home)]).exit_code == 0
    listed = runner.invoke(cli, ["notes", "list", "--json", "--home", str(home)])
    assert [n["title"] for n in json.loads(listed.stdout)] == ["First"]
    (tmp_path / "a-file").write_text("")
    wrong = runner.invoke(cli, ["notes", "list", "--home", str(tmp_path / "a-file")])
    assert wrong.exit_code == 1 and "is a file, not a workspace folder" in wrong.stderr


# -- what reaches the terminal --------------------------------------------------------------

OSC = "\x1b]0;pwned\x07"
CSI = "\x1b[31m"
#: Bytes a terminal acts on: ESC, BEL, the other C0 controls but tab and newline, DEL, C1.
CONTROLS = {*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)}


def _controls_in(text: str) -> list[str]:
    return [hex(ord(c)) for c in text if ord(c) in CONTROLS]


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A workspace whose note, notebook and tag were named by someone with a terminal in mind."""
    home = tmp_path / "home"
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        book = app.workspace.create_notebook(f"Inbox{OSC}")
        note = app.workspace.create_note(
            f"{OSC}Packing {CSI}list\x9b2J", f"Tent{CSI} and stove\x07\r\n\tthen maps\x1b]52;c;cHduZWQ=\x1b\\",
            book.id, tags=[f"trip{CSI}"],
        )
        app.workspace.update_note(note.id, title=f"{OSC}Packing {CSI}list\x9b2J (v2)")
    finally:
        app.close()
    return {"id": note.id, "home": str(home)}


def test_titles_bodies_tags_and_paths_reach_the_terminal_without_control_sequences(
    hostile: dict[str, str],
) -> None:
    runner = CliRunner()
    note = hostile["id"]
    for args in (["notes", "list"], ["notes", "search", "tent"], ["notes", "show", note],
                 ["notes", "history", note], ["notebooks", "list"], ["tags", "list"],
                 ["notes", "add", "x", "--notebook", f"Nowhere{OSC}"]):
        result = runner.invoke(cli, args)
        shown = result.stdout + result.stderr
        assert not _controls_in(shown), (args, _controls_in(shown), shown)
        if args[1] != "add":  # the error quotes the name with repr(): visible, and inert
            assert "pwned" not in shown, (args, shown)
    listed = runner.invoke(cli, ["notes", "list"]).stdout
    assert "Packing list (v2)" in listed
    body = runner.invoke(cli, ["notes", "show", note]).stdout
    assert "Tent and stove\n\tthen maps" in body, "newlines and tabs of a body are kept"
    assert "trip" in runner.invoke(cli, ["tags", "list"]).stdout
    assert "Inbox (1)" in runner.invoke(cli, ["notebooks", "list"]).stdout


def test_json_output_keeps_every_character_escaped(hostile: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["notes", "show", hostile["id"], "--json"])
    assert result.exit_code == 0, result.output
    assert not _controls_in(result.stdout.replace("\n", "")), "controls are \\u escapes in JSON"
    shown = json.loads(result.stdout)
    assert shown["title"] == f"{OSC}Packing {CSI}list\x9b2J (v2)"
    assert shown["tags"] == [f"trip{CSI}"]


def test_a_real_terminal_process_gets_clean_bytes(hostile: dict[str, str]) -> None:
    env = {**os.environ, "NOTELOOM_HOME": hostile["home"]}
    env.pop("NOTELOOM_DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-m", "noteloom", "notes", "show", hostile["id"]],
                          env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert not [b for b in done.stdout if b in CONTROLS and b < 0x80], done.stdout
    assert not _controls_in(done.stdout.decode("utf-8")), done.stdout
    assert b"Packing list (v2)" in done.stdout


def test_a_streamed_answer_and_its_tool_calls_reach_the_terminal_clean(
    hostile: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "answer.json"
    # Sequences cut across chunks, as a stream delivers them.
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "search_notes", "arguments": {"query": f"tent{OSC}"}}]},
        {"chunks": ["Pack the \x1b", "]0;pw", "ned\x07tent ", "and \x1b[3", "1mstove\x1b[0m."]},
    ]))
    Path(hostile["home"], "noteloom.toml").write_text(f'[providers.play]\ntype = "scripted"\nscript = "{script}"\n')
    result = CliRunner().invoke(cli, ["ask", "what do I pack?", "-m", "play"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Pack the tent and stove.\n"
    assert "→ search_notes" in result.stderr
    assert not _controls_in(result.stderr), result.stderr
