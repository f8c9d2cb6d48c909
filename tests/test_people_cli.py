"""People from the command line: `noteloom users`, `share`/`unshare`, tokens of a person and
MCP over stdio acting as one.

The README's "People" commands run here in the order it shows them, each followed by what
it must have done (on SQLite and PostgreSQL); passwords come from stdin or are asked twice
at a terminal, never from an argument; `users rm` never decides silently.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from noteloom.app import App, open_app
from noteloom.cli import cli, user_cmds
from noteloom.config import load_settings
from noteloom.errors import AuthError

README = Path(__file__).resolve().parents[1] / "README.md"
ANN_PASSWORD = "ann's long password"
ADA_PASSWORD = "ada's long password"


class Cli:
    """`noteloom …` in this process on one workspace, and the workspace itself."""

    def __init__(self, home: Path, database_url: str | None = None) -> None:
        self.home, self.database_url = home, database_url
        self.runner = CliRunner()

    def __call__(self, *args: str, ok: bool = True, input: str | None = None, code: int | None = None) -> str:
        result = self.runner.invoke(cli, list(args), input=input)
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        if code is not None:
            assert result.exit_code == code, output
        assert (result.exit_code == 0) == (ok and code in (None, 0)), output
        return output

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "NOTELOOM_DATABASE_URL"}
        env["NOTELOOM_HOME"] = str(self.home)
        if self.database_url:
            env["NOTELOOM_DATABASE_URL"] = self.database_url
        return env

    def app(self) -> App:
        return open_app(load_settings(self.env()), load_entry_points=False)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    home = tmp_path / "cli-home"
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    monkeypatch.setattr(user_cmds, "stdin_is_tty", lambda: False)
    c = Cli(home)
    c("init")
    yield c


def at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(user_cmds, "stdin_is_tty", lambda: True)


def stdio(c: Cli, *args: str, messages: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """`noteloom ARGS` as its own process (stdio MCP takes over the process's stdout)."""
    lines = "".join(json.dumps(m) + "\n" for m in messages)
    return subprocess.run([sys.executable, "-m", "noteloom", *args], env=c.env(), input=lines, capture_output=True,
                          text=True, check=False, timeout=300, cwd=c.home.parent)


HANDSHAKE: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]
LIST_NOTEBOOKS = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_notebooks", "arguments": {}}}


def notebooks_seen(proc: subprocess.CompletedProcess[str]) -> set[str]:
    assert proc.returncode == 0, proc.stderr
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    result = replies[2]["result"]
    assert result["isError"] is False, result
    return {b["title"] for b in result["structuredContent"]["notebooks"]}


def readme_people_commands() -> list[str]:
    section = README.read_text(encoding="utf-8").split("\n## People\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("noteloom ")]


# -- the README, in order -----------------------------------------------------------------------


def test_the_readme_people_commands_do_what_it_says(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "readme-home"
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", database_url)
    at_a_terminal(monkeypatch)
    c = Cli(home, database_url)
    c("init")
    (tmp_path / "ada-password.txt").write_text(ADA_PASSWORD + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    a = c.app()
    try:
        ws = a.workspace
        work = ws.create_notebook("Work")
        ws.create_notebook("Team", parent_id=work.id)
        ws.create_notebook("Private")
    finally:
        a.close()

    commands = readme_people_commands()
    assert len(commands) == 11, commands
    for line in commands:
        words = shlex.split(line)[1:]
        stdin: str | None = None
        if "<" in words:  # `< FILE`: the file on stdin
            at = words.index("<")
            stdin = (tmp_path / words[at + 1]).read_text(encoding="utf-8")
            words = words[:at] + words[at + 2:]
        command = " ".join(words[:2])
        if command == "mcp --user":
            seen = notebooks_seen(stdio(c, *words, messages=[*HANDSHAKE, LIST_NOTEBOOKS]))
            assert seen == {"Work", "Team", "Ann's"}, seen  # hers, and Work shared with her; not Private
            continue
        if command == "users add" and stdin is None:  # asked twice at the terminal
            stdin = f"{ANN_PASSWORD}\n{ANN_PASSWORD}\n"
        if command == "users password":
            stdin = "a new long password\n" * 2
        out = c(*words, input=stdin)
        a = c.app()
        try:
            ws = a.workspace
            people = {p.name: p for p in ws.list_people()}
            if command == "users add" and words[2] == "ann":
                assert people["ann"].role == "member" and people["ann"].has_password
                ws.create_notebook("Ann's", owner_id=people["ann"].id)
                ws.create_note("ann's plan", "text", notebook_id=ws.find_notebook("Ann's").id)
            elif command == "users add":
                assert people["ada"].role == "admin"
                session, _ = ws.start_password_session("ada", ADA_PASSWORD)  # the newline was not part of it
                assert session
            elif command == "users list":
                assert re.search(r"^ann\s+member\s+password set\s+1 notebook$", out, flags=re.M), out
                assert re.search(r"^owner\s+owner\s+no password\s+2 notebooks$", out, flags=re.M), out
            elif command == "share Work" and "--list" not in words:
                assert ws.shares_of(people["ann"].id) == {ws.find_notebook("Work").id: "read"}
            elif command == "share Work":
                assert re.search(r"^ann\tread\tsince ", out, flags=re.M), out
            elif command == "token --new":
                token = next(x for x in out.splitlines() if x.startswith("nl_"))
                assert ws.check_token(token).user.name == "ann"
                assert re.search(r"^ann-laptop\t\w+\tuser ann\t", c("token", "list"), flags=re.M)
            elif command == "unshare Work":
                assert ws.shares_of(people["ann"].id) == {}
            elif command == "users password":
                assert ws.start_password_session("ann", "a new long password")
                with pytest.raises(AuthError):
                    ws.start_password_session("ann", ANN_PASSWORD)
            elif command == "users role":
                assert people["ann"].role == "admin"
            elif command == "users rm":
                assert "ann" not in people
                assert ws.notebook_owner(ws.find_notebook("Ann's").id) == people["ada"].id
                assert "now belongs to ada" in out
            else:
                raise AssertionError(f"the README shows `{line}`, which this test does not check")
        finally:
            a.close()


# -- users ------------------------------------------------------------------------------------


def test_a_password_comes_from_stdin_or_twice_from_the_terminal_never_from_an_argument(
    run: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("users", "add", "ann", "--password-stdin", input=ANN_PASSWORD + "\r\n")
    assert "no web password yet" in run("users", "add", "bob")  # no terminal, no --password-stdin
    assert "--password-stdin read nothing" in run("users", "add", "cy", "--password-stdin", input="", code=2)
    assert "no terminal" in run("users", "password", "bob", code=2)
    at_a_terminal(monkeypatch)
    assert "differ" in run("users", "password", "bob", input="first password\nother password\n", ok=False)
    run("users", "password", "bob", input="bob's long password\n" * 2)
    assert "8 to 1024 characters" in run("users", "add", "dee", input="short\nshort\n", ok=False)
    run("users", "add", "eve", input="\n")  # left empty at the terminal: no password for now
    assert "No such option" in run("users", "add", "fay", "--password", "x" * 12, code=2)
    a = run.app()
    try:
        ws = a.workspace
        for name, password in (("ann", ANN_PASSWORD), ("bob", "bob's long password")):
            assert ws.start_password_session(name, password)[1].user.name == name
        listed = {p.name: p.has_password for p in ws.list_people()}
        assert listed == {"owner": False, "ann": True, "bob": True, "eve": False}
    finally:
        a.close()
    run("users", "password", "ann", "--clear")
    people = json.loads(run("users", "list", "--json"))
    assert {p["name"]: p["has_password"] for p in people}["ann"] is False
    assert set(people[0]) == {"id", "name", "role", "created_time", "has_password", "notebooks"}


def test_roles_follow_the_owners_rules(run: Cli) -> None:
    run("users", "add", "ann")
    assert "ann is an admin now" in run("users", "role", "ann", "admin")
    assert "a member now" in run("users", "role", "ann", "member")
    assert "a role is admin or member" in run("users", "role", "ann", "owner", ok=False)
    assert "owner's role is fixed" in run("users", "role", "owner", "member", ok=False)
    assert "no person named 'nobody'" in run("users", "role", "nobody", "admin", ok=False)
    assert "a role is admin or member" in run("users", "add", "bob", "--role", "boss", ok=False)
    assert "someone is named 'ann' already" in run("users", "add", "ann", ok=False)


def _two_people_and_a_notebook(run: Cli) -> None:
    run("users", "add", "ann")
    run("users", "add", "bob")
    a = run.app()
    try:
        ws = a.workspace
        mine = ws.create_notebook("Ann's", owner_id=ws.find_person("ann").id)
        ws.create_note("plan", "text", notebook_id=mine.id)
    finally:
        a.close()


def test_removing_someone_never_decides_about_their_notebooks_silently(run: Cli) -> None:
    _two_people_and_a_notebook(run)
    refused = run("users", "rm", "ann", code=2)
    assert "--transfer-to NAME" in refused and "--delete" in refused and "1 notebook" in refused
    assert "not both" in run("users", "rm", "ann", "--transfer-to", "bob", "--delete", code=2)
    assert "cannot be removed" in run("users", "rm", "owner", "--delete", ok=False)
    assert "no person named 'zed'" in run("users", "rm", "ann", "--transfer-to", "zed", ok=False)
    assert "removed bob (they owned no notebooks)" in run("users", "rm", "bob")  # nothing to decide
    assert "in the trash (1 notes" in run("users", "rm", "ann", "--delete")
    a = run.app()
    try:
        assert [p.name for p in a.workspace.list_people()] == ["owner"]
        assert "Ann's" not in {b.title for b in a.workspace.list_notebooks(with_counts=False)}
    finally:
        a.close()


def test_at_a_terminal_rm_asks_what_becomes_of_the_notebooks(run: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _two_people_and_a_notebook(run)
    at_a_terminal(monkeypatch)
    assert "cancelled; ann is still here" in run("users", "rm", "ann", input="c\n", ok=False)
    asked = run("users", "rm", "ann", input="t\nbob\n")
    assert "ann owns 1 notebook" in asked and "Transfer to whom? (owner, bob)" in asked
    assert "now belongs to bob" in asked
    a = run.app()
    try:
        ws = a.workspace
        assert ws.notebook_owner(ws.find_notebook("Ann's").id) == ws.find_person("bob").id
    finally:
        a.close()
    assert "in the trash" in run("users", "rm", "bob", input="d\n")


# -- shares -----------------------------------------------------------------------------------


def test_sharing_from_the_command_line(run: Cli) -> None:
    run("users", "add", "ann")
    a = run.app()
    try:
        work = a.workspace.create_notebook("Work")
        a.workspace.create_notebook("Plans", parent_id=work.id)
    finally:
        a.close()
    assert "Work is not shared with anyone" in run("share", "Work", "--list")
    assert "ann may read Work and its sub-notebooks" in run("share", "Work", "ann")
    assert "ann may read and change Work" in run("share", work.id, "ann", "--write")
    [share] = json.loads(run("share", "Work", "--list", "--json"))
    assert (share["user_name"], share["access"]) == ("ann", "write")
    assert "name the person" in run("share", "Work", code=2)
    assert "--list shows" in run("share", "Work", "ann", "--list", code=2)
    assert "no notebook named 'Nope'" in run("share", "Nope", "ann", ok=False)
    assert "no person named 'zed'" in run("share", "Work", "zed", ok=False)
    assert "owns this notebook already" in run("share", "Work", "owner", ok=False)
    assert "no longer shared with ann" in run("unshare", "Work", "ann")
    assert "Work is not shared with ann" in run("unshare", "Work", "ann", ok=False)


# -- tokens and stdio MCP of a person ------------------------------------------------------------


def test_a_token_belongs_to_the_person_named_and_the_owners_stays_as_it_was(run: Cli) -> None:
    run("users", "add", "ann")
    own = run("token").strip()
    made = run("token", "--new", "--user", "ann", "--read-only")
    token = next(x for x in made.splitlines() if x.startswith("nl_"))
    assert "ann's, read-only" in made
    assert "add --new" in run("token", "--user", "ann", code=2)
    assert "no person named 'zed'" in run("token", "--new", "--user", "zed", ok=False)
    listed = run("token", "list")
    assert re.search(r"^default\t\w+\tuser ann\t.*read-only$", listed, flags=re.M), listed
    assert re.search(r"^default\t\w+\tuser owner\t.*full access$", listed, flags=re.M), listed
    assert [i["user"] for i in json.loads(run("token", "list", "--json", "--user", "ann"))] == ["ann"]
    a = run.app()
    try:
        assert a.workspace.check_token(token).user.name == "ann"
        assert a.workspace.check_token(own).user.name == "owner"
    finally:
        a.close()
    assert run("token").strip() == own  # plain `token` is still the owner's, unchanged


def test_stdio_mcp_acts_as_the_person_named_and_refuses_an_unknown_one(run: Cli) -> None:
    run("users", "add", "ann")
    a = run.app()
    try:
        ws = a.workspace
        ws.create_notebook("Owner's")
        ws.create_notebook("Ann's", owner_id=ws.find_person("ann").id)
    finally:
        a.close()
    messages = [*HANDSHAKE, LIST_NOTEBOOKS]
    assert notebooks_seen(stdio(run, "mcp", "--user", "ann", messages=messages)) == {"Ann's"}
    assert notebooks_seen(stdio(run, "mcp", "stdio", "--user", "ann", messages=messages)) == {"Ann's"}
    assert notebooks_seen(stdio(run, "mcp", messages=messages)) == {"Owner's", "Ann's"}  # the owner, as before
    unknown = stdio(run, "mcp", "--user", "zed", messages=messages)
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert "no person named 'zed'" in unknown.stderr
