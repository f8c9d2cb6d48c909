"""``noteloom mcp bundle``: an MCP Bundle (``.mcpb``) that installs this workspace's stdio
server in Claude Desktop with one click.

A bundle is a zip holding ``manifest.json`` (the MCPB manifest, :data:`MANIFEST_VERSION`,
as the ``@anthropic-ai/mcpb`` package's schema defines it) and ``icon.png``. It carries no
server code: the server is the ``noteloom`` already installed here, so the manifest's
``server`` is of type ``binary`` and launches that executable by its absolute path with
``mcp --home <the workspace's absolute path>``. The bundle therefore fits this machine
only (``compatibility.platforms`` names its platform); anyone else makes their own.

``tools`` lists the tools MCP offers now, for the install dialog; ``tools_generated`` says
the list can change (tools are turned on and off with ``noteloom tools``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

from noteloom import __version__
from noteloom.app import App

#: The MCPB manifest version written: the one ``@anthropic-ai/mcpb``'s
#: ``mcpb-manifest-latest.schema.json`` describes.
MANIFEST_VERSION = "0.3"
ICON = "icon.png"
DESCRIPTION = "Your noteloom notes in Claude: search and read them, and write them when you allow it."


def noteloom_executable() -> Path:
    """The ``noteloom`` command of the Python running now (beside its interpreter, as a
    virtual environment or pipx installs it), else the one on ``PATH``."""
    name = "noteloom.exe" if os.name == "nt" else "noteloom"
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return beside.absolute()
    found = shutil.which("noteloom")
    if found is None:
        raise LookupError("the noteloom command is not installed where this Python or PATH can find it; "
                          "install noteloom (pipx install noteloom) and make the bundle again")
    return Path(found).absolute()


def server_command(home: Path, executable: Path | None = None) -> tuple[str, list[str]]:
    """The command and arguments that start this workspace's stdio server."""
    exe = executable or noteloom_executable()
    return str(exe), ["mcp", "--home", str(home.absolute())]


def platform_name() -> str:
    """This machine's platform as MCPB names it (``darwin``, ``win32`` or ``linux``)."""
    return "win32" if sys.platform.startswith("win") else "darwin" if sys.platform == "darwin" else "linux"


def manifest(app: App, executable: Path | None = None) -> dict[str, Any]:
    """The ``manifest.json`` of a bundle for ``app``'s workspace."""
    from noteloom.mcp import McpServer

    home = app.settings.data_dir
    command, args = server_command(home, executable)
    tools = [{"name": t.name, "description": t.description} for t in app.registry.enabled(app.workspace)]
    out: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "name": "noteloom",
        "display_name": "noteloom",
        "version": __version__,
        "description": DESCRIPTION,
        "long_description": (
            f"Serves the noteloom workspace in `{home}` over MCP (stdio), as its owner. "
            "Write tools appear only once you turn them on with `noteloom tools enable`."
        ),
        "author": {"name": "noteloom"},
        "icon": ICON,
        "server": {
            "type": "binary",
            # No code travels in the bundle: its entry point is the installed noteloom.
            "entry_point": command,
            "mcp_config": {"command": command, "args": args, "env": {}},
        },
        "tools": tools,
        "tools_generated": True,
        "keywords": ["notes", "markdown", "knowledge base"],
        "compatibility": {"platforms": [platform_name()]},
    }
    if McpServer(app).capabilities.prompts is not None:
        out["prompts_generated"] = True
    return out


def bundle_bytes(app: App, executable: Path | None = None) -> bytes:
    """The ``.mcpb`` file's bytes: the manifest and the icon, zipped."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest(app, executable), indent=2, ensure_ascii=False) + "\n")
        z.writestr(ICON, resources.files("noteloom.mcp").joinpath(ICON).read_bytes())
    return buf.getvalue()


def write_bundle(app: App, out: Path, executable: Path | None = None) -> Path:
    """Write the bundle to ``out`` (replacing a file there) and return its path."""
    data = bundle_bytes(app, executable)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out
