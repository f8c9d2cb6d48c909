"""How each AI app is told about noteloom: one source for the README's per-client snippets
and ``noteloom mcp config --client NAME``.

:data:`CLIENTS` holds the apps and the transports each takes; :func:`render` makes one
app's snippet for a :class:`Machine` (the ``noteloom`` command, the workspace folder, the
HTTP address and the token). The README shows them rendered for :data:`README_MACHINE`
(placeholders), each fenced block under a ``<!-- mcp-config NAME TRANSPORT -->`` marker;
:func:`update_readme` rewrites those blocks, and a test checks the README is unchanged by it,
so a snippet cannot drift from what the command prints. The token is never printed: a
snippet that needs one shows :data:`TOKEN_PLACEHOLDER` (``noteloom token`` prints the real
one) or has the app ask for it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Transport = Literal["stdio", "http"]
Format = Literal["json", "sh", "text"]
TOKEN_PLACEHOLDER = "nl_your_token_here"
SERVER_NAME = "noteloom"


@dataclass(frozen=True)
class Machine:
    """What a snippet names: the command that runs noteloom, the workspace folder, the MCP URL."""

    command: str
    home: str
    url: str
    token: str = TOKEN_PLACEHOLDER

    @property
    def stdio_args(self) -> list[str]:
        return ["mcp", "--home", self.home]


#: The README's machine: a macOS user's default folder (Claude Desktop and Cursor run there
#: most), the command found on PATH, the default port.
README_MACHINE = Machine(
    command="noteloom",
    home="/Users/me/Library/Application Support/noteloom",
    url="http://localhost:8765/mcp",
)


@dataclass(frozen=True)
class Snippet:
    """One app's configuration: its text, how it is written, and where it goes."""

    text: str
    format: Format
    where: str


Renderer = Callable[[Machine], Snippet]


@dataclass(frozen=True)
class Client:
    name: str
    title: str
    #: By transport, the first being the app's usual one.
    renderers: dict[Transport, Renderer]

    @property
    def transports(self) -> list[Transport]:
        return list(self.renderers)


def _json(value: Any) -> str:
    """JSON indented by two, a list of plain values kept on one line (as people write ``args``)."""
    return _pretty(value, "") + "\n"


def _pretty(value: Any, pad: str) -> str:
    inner = pad + "  "
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(k, ensure_ascii=False)}: {_pretty(v, inner)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(inner + _pretty(v, inner) for v in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def _stdio_entry(m: Machine) -> dict[str, Any]:
    return {"command": m.command, "args": m.stdio_args}


def _bearer(m: Machine) -> str:
    return f"Bearer {m.token}"


def _mcp_servers(entry: dict[str, Any], where: str) -> Snippet:
    return Snippet(_json({"mcpServers": {SERVER_NAME: entry}}), "json", where)


CLAUDE_DESKTOP_FILE = ("claude_desktop_config.json (Settings → Developer → Edit Config; macOS: "
                       "~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\)")
CURSOR_FILE = "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)"
VSCODE_FILE = ".vscode/mcp.json in the workspace (or MCP: Open User Configuration)"


def _claude_desktop_stdio(m: Machine) -> Snippet:
    return _mcp_servers(_stdio_entry(m), CLAUDE_DESKTOP_FILE)


def _claude_desktop_http(m: Machine) -> Snippet:
    # Claude Desktop's config file starts processes only: mcp-remote bridges it to the URL.
    entry = {
        "command": "npx",
        "args": ["-y", "mcp-remote", m.url, "--header", "Authorization:${NOTELOOM_AUTH}"],
        "env": {"NOTELOOM_AUTH": _bearer(m)},
    }
    return _mcp_servers(entry, CLAUDE_DESKTOP_FILE)


def _cursor_stdio(m: Machine) -> Snippet:
    return _mcp_servers(_stdio_entry(m), CURSOR_FILE)


def _cursor_http(m: Machine) -> Snippet:
    return _mcp_servers({"url": m.url, "headers": {"Authorization": _bearer(m)}}, CURSOR_FILE)


def _claude_code_stdio(m: Machine) -> Snippet:
    argv = ["claude", "mcp", "add", SERVER_NAME, "--", m.command, *m.stdio_args]
    return Snippet(shlex.join(argv) + "\n", "sh", "run in a terminal; add --scope user for every project")


def _claude_code_http(m: Machine) -> Snippet:
    head = shlex.join(["claude", "mcp", "add", "--transport", "http", SERVER_NAME, m.url])
    text = f"{head} \\\n  --header {shlex.quote('Authorization: ' + _bearer(m))}\n"
    return Snippet(text, "sh", "run in a terminal; add --scope user for every project")


def _vscode_stdio(m: Machine) -> Snippet:
    return Snippet(_json({"servers": {SERVER_NAME: {"type": "stdio", **_stdio_entry(m)}}}), "json", VSCODE_FILE)


def _vscode_http(m: Machine) -> Snippet:
    # VS Code asks for the token once and keeps it in its secret storage.
    value = {
        "inputs": [{"type": "promptString", "id": "noteloom-token", "password": True,
                    "description": "noteloom token (`noteloom token` prints it)"}],
        "servers": {SERVER_NAME: {"type": "http", "url": m.url,
                                  "headers": {"Authorization": "Bearer ${input:noteloom-token}"}}},
    }
    return Snippet(_json(value), "json", VSCODE_FILE)


def _chatgpt_http(m: Machine) -> Snippet:
    text = f"Name: {SERVER_NAME}\nMCP Server URL: {m.url}\nAuthentication: OAuth\n"
    return Snippet(text, "text", "ChatGPT → Settings → Apps & Connectors → Advanced: developer mode, then Create")


def _generic_stdio(m: Machine) -> Snippet:
    text = f"command: {m.command}\nargs: {json.dumps(m.stdio_args, ensure_ascii=False)}\n"
    return Snippet(text, "text", "any app that starts MCP servers as processes (stdio)")


def _generic_http(m: Machine) -> Snippet:
    text = f"URL: {m.url}\nheader: Authorization: {_bearer(m)}\n"
    return Snippet(text, "text", "any app that connects to a Streamable HTTP MCP server")


CLIENTS: tuple[Client, ...] = (
    Client("claude-desktop", "Claude Desktop", {"stdio": _claude_desktop_stdio, "http": _claude_desktop_http}),
    Client("claude-code", "Claude Code", {"stdio": _claude_code_stdio, "http": _claude_code_http}),
    Client("cursor", "Cursor", {"http": _cursor_http, "stdio": _cursor_stdio}),
    Client("vscode", "VS Code (GitHub Copilot)", {"stdio": _vscode_stdio, "http": _vscode_http}),
    Client("chatgpt", "ChatGPT (remote only)", {"http": _chatgpt_http}),
    Client("generic", "Any other MCP app", {"stdio": _generic_stdio, "http": _generic_http}),
)
BY_NAME = {c.name: c for c in CLIENTS}


def render(client: str, transport: str | None, machine: Machine) -> Snippet:
    """``client``'s snippet over ``transport`` (``None``: the app's usual one) for ``machine``.

    Raises ``KeyError`` with a sentence naming the choices for an unknown app or transport."""
    found = BY_NAME.get(client)
    if found is None:
        raise KeyError(f"no AI app called {client!r}; choose one of {', '.join(BY_NAME)}")
    chosen = transport or found.transports[0]
    renderer = next((r for t, r in found.renderers.items() if t == chosen), None)
    if renderer is None:
        raise KeyError(f"{found.title} takes {' or '.join(found.transports)}, not {chosen!r}")
    return renderer(machine)


def for_machine(home: Path, url: str, command: str | None = None) -> Machine:
    """This machine: the installed ``noteloom`` by its full path (apps that start servers
    do not see the shell's PATH), the workspace folder, the MCP URL."""
    from noteloom.mcp.bundle import noteloom_executable

    return Machine(command=command or str(noteloom_executable()), home=str(home.absolute()), url=url)


MARKER = re.compile(
    r"(<!-- mcp-config (?P<client>[\w-]+) (?P<transport>\w+) -->\n```(?P<lang>\w*)\n)(?P<body>.*?)(^```$)",
    re.DOTALL | re.MULTILINE,
)


def readme_blocks(text: str) -> list[tuple[str, str, str]]:
    """The README's marked blocks: ``(client, transport, body)`` in order."""
    return [(m["client"], m["transport"], m["body"]) for m in MARKER.finditer(text)]


def update_readme(text: str, machine: Machine = README_MACHINE) -> str:
    """``text`` with every marked block rendered afresh for ``machine``."""
    return MARKER.sub(lambda m: m[1] + render(m["client"], m["transport"], machine).text + m[6], text)
