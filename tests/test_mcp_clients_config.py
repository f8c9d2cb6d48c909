"""The per-app MCP snippets: the README's equal what ``noteloom mcp config`` renders (so
they cannot drift), each parses as what its fence says, every stdio one starts the server
as the app would, and every HTTP one's address and header get in."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from typer.testing import CliRunner

from mcp_launch_support import INITIALIZE, initialize_over_stdio
from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.mcp.bundle import noteloom_executable
from noteloom.mcp.clients import (
    CLIENTS,
    README_MACHINE,
    TOKEN_PLACEHOLDER,
    Machine,
    Snippet,
    for_machine,
    readme_blocks,
    render,
    update_readme,
)
from noteloom.web.app import create_web_app

README = Path(__file__).resolve().parent.parent / "README.md"
PAIRS = [(c.name, t) for c in CLIENTS for t in c.transports]
FENCES = {"json": "json", "sh": "sh", "text": "text"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("clients") / "my notes"
    app = open_app(load_settings({"NOTELOOM_HOME": str(path)}), load_entry_points=False)
    app.workspace.create_note("Configured", "hello from the snippet")
    app.close()
    yield path


def launch(snippet: Snippet) -> tuple[str, list[str], dict[str, str]]:
    """The command, arguments and environment an app would start from ``snippet``."""
    if snippet.format == "json":
        value = json.loads(snippet.text)
        entry = (value.get("mcpServers") or value["servers"])["noteloom"]
        return entry["command"], entry["args"], entry.get("env", {})
    if snippet.format == "sh":
        argv = shlex.split(snippet.text.replace("\\\n", " "))
        return argv[argv.index("--") + 1], argv[argv.index("--") + 2:], {}
    fields = dict(line.split(": ", 1) for line in snippet.text.splitlines())
    return fields["command"], json.loads(fields["args"]), {}


def address(snippet: Snippet) -> tuple[str, dict[str, str]]:
    """The URL and headers an app would connect with from an HTTP ``snippet``."""
    if snippet.format == "json":
        value = json.loads(snippet.text)
        entry = (value.get("mcpServers") or value["servers"])["noteloom"]
        if "url" in entry:
            return entry["url"], entry.get("headers", {})
        args, env = entry["args"], entry["env"]  # the mcp-remote bridge
        name, value_ = args[args.index("--header") + 1].split(":", 1)
        return args[args.index("mcp-remote") + 1], {name: value_.replace("${NOTELOOM_AUTH}", env["NOTELOOM_AUTH"])}
    if snippet.format == "sh":
        argv = shlex.split(snippet.text.replace("\\\n", " "))
        name, value_ = argv[argv.index("--header") + 1].split(": ", 1)
        return argv[argv.index("noteloom") + 1], {name: value_}
    fields = dict(line.split(": ", 1) for line in snippet.text.splitlines())
    if "header" in fields:
        name, value_ = fields["header"].split(": ", 1)
        return fields.get("URL") or fields["MCP Server URL"], {name: value_}
    return fields["MCP Server URL"], {}


def test_the_readme_shows_every_snippet_once_as_rendered() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = readme_blocks(text)
    assert sorted((c, t) for c, t, _ in blocks) == sorted(PAIRS)
    assert update_readme(text) == text, "README snippets drifted: rewrite them with noteloom.mcp.clients.update_readme"
    for client, transport, body in blocks:
        snippet = render(client, transport, README_MACHINE)
        fence = text[text.index(f"<!-- mcp-config {client} {transport} -->"):].split("\n")[1]
        assert fence == "```" + FENCES[snippet.format], (client, transport)
        assert body == snippet.text
        if snippet.format == "json":
            json.loads(body)
        elif snippet.format == "sh":
            assert shlex.split(body.replace("\\\n", " "))[:3] == ["claude", "mcp", "add"]


def test_a_drifted_readme_block_is_caught() -> None:
    text = README.read_text(encoding="utf-8")
    marker = "<!-- mcp-config cursor stdio -->\n```json\n"
    drifted = text.replace(marker, marker + "// edited by hand\n")
    assert drifted != text and update_readme(drifted) != drifted


@pytest.mark.parametrize(("client", "transport"), [p for p in PAIRS if p[1] == "stdio"])
def test_each_stdio_snippet_starts_the_server(client: str, transport: str, home: Path, tmp_path: Path) -> None:
    snippet = render(client, transport, for_machine(home, "http://localhost:8765/mcp"))
    command, args, env = launch(snippet)
    assert Path(command) == noteloom_executable() and str(home) in args
    search = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "search_notes", "arguments": {"query": "snippet"}}}
    answers = initialize_over_stdio(command, args, env=env, cwd=tmp_path, then=(search,))
    assert [r["title"] for r in answers[2]["result"]["structuredContent"]["results"]] == ["Configured"]


@pytest.mark.anyio
@pytest.mark.parametrize(("client", "transport"), [p for p in PAIRS if p[1] == "http"])
async def test_each_http_snippet_reaches_the_server_with_its_header(client: str, transport: str,
                                                                  tmp_path: Path) -> None:
    app: App = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "h")}), load_entry_points=False)
    try:
        token = access_token(app)
        snippet = render(client, transport, Machine("noteloom", str(tmp_path / "h"), "http://127.0.0.1:8765/mcp", token))
        assert token in snippet.text or "${input:noteloom-token}" in snippet.text or client == "chatgpt"
        url, headers = address(snippet)
        headers = {k: v.replace("${input:noteloom-token}", token) for k, v in headers.items()}
        parts = urlsplit(url)
        transport_ = httpx2.ASGITransport(app=create_web_app(app))
        async with httpx2.AsyncClient(transport=transport_, base_url=f"{parts.scheme}://{parts.netloc}") as http:
            r = await http.post(parts.path, json=INITIALIZE,
                                headers={**headers, "Accept": "application/json, text/event-stream"})
        if client == "chatgpt":  # OAuth or nothing: the bearer-token server refuses it (the README says so)
            assert r.status_code == 401
        else:
            assert r.status_code == 200, r.text
            assert r.json()["result"]["serverInfo"]["name"] == "noteloom"
    finally:
        app.close()


def test_the_command_prints_this_machines_snippet(home: Path) -> None:
    result = CliRunner().invoke(cli, ["mcp", "config", "--client", "cursor", "--transport", "stdio", "--home", str(home)])
    assert result.exit_code == 0, result.output
    expected = render("cursor", "stdio", for_machine(home, "http://localhost:8765/mcp"))
    assert result.stdout == expected.text
    assert json.loads(result.stdout)["mcpServers"]["noteloom"]["args"] == ["mcp", "--home", str(home.absolute())]
    before = CliRunner().invoke(cli, ["mcp", "--home", str(home), "config", "-c", "cursor", "-t", "stdio"])
    assert before.exit_code == 0 and before.stdout == expected.text  # --home given to `noteloom mcp`
    usual = CliRunner().invoke(cli, ["mcp", "config", "--client", "claude-code", "--home", str(home)])
    assert usual.exit_code == 0 and usual.stdout.startswith("claude mcp add noteloom -- ")
    http = CliRunner().invoke(cli, ["mcp", "config", "-c", "generic", "-t", "http", "--home", str(home)])
    assert http.exit_code == 0 and "URL: http://localhost:8765/mcp" in http.stdout
    assert f"Bearer {TOKEN_PLACEHOLDER}" in http.stdout


def test_http_snippets_name_the_public_address_when_one_is_set(tmp_path: Path) -> None:
    home = tmp_path / "remote"
    home.mkdir()
    (home / "noteloom.toml").write_text('[mcp]\npublic_url = "https://notes.example.org/"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["mcp", "config", "--client", "chatgpt", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "MCP Server URL: https://notes.example.org/mcp\n" in result.stdout
    (home / "noteloom.toml").write_text('[mcp]\npublic_url = "http://notes.example.org"\n', encoding="utf-8")
    bad = CliRunner().invoke(cli, ["mcp", "config", "--client", "chatgpt", "--home", str(home)])
    assert bad.exit_code != 0 and "https://" in bad.output


@pytest.mark.parametrize(("args", "says"), [
    (["--client", "emacs"], "choose one of claude-desktop"),
    (["--client", "chatgpt", "--transport", "stdio"], "takes http, not 'stdio'"),
])
def test_an_unknown_app_or_transport_names_the_choices(home: Path, args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli, ["mcp", "config", *args, "--home", str(home)])
    assert result.exit_code != 0 and says in result.output


def test_list_names_every_app(home: Path) -> None:
    result = CliRunner().invoke(cli, ["mcp", "config", "--client", "list"])
    assert result.exit_code == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == [c.name for c in CLIENTS]

