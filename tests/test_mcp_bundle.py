"""``noteloom mcp bundle``: the .mcpb file Claude Desktop installs in one click.

The manifest is checked against the MCPB manifest schema vendored from the
``@anthropic-ai/mcpb`` npm package (tests/mcpb/, its ``mcpb-manifest-latest.schema.json``
of version 2.1.2, MIT licence), and also by that package's own ``mcpb validate`` when
``scripts/install-mcpb.sh`` has put it in .peers/. The command the manifest names is then
started as Claude Desktop starts it, and must answer ``initialize``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from mcp_launch_support import initialize_over_stdio
from noteloom.app import open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.mcp.bundle import MANIFEST_VERSION, noteloom_executable, platform_name

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((Path(__file__).parent / "mcpb" / f"mcpb-manifest-v{MANIFEST_VERSION}.schema.json").read_text())
MCPB_CLI = ROOT / ".peers" / "mcpb" / "node_modules" / ".bin" / "mcpb"


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a note, and the bundle written for it by the command."""
    home = tmp_path / "my notes"  # a space: the path must reach the server as one argument
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    app.workspace.create_note("Bundled", "hello")
    app.registry.set_enabled(app.workspace, "create_note", True)
    app.close()
    out = tmp_path / "out" / "noteloom.mcpb"
    result = CliRunner().invoke(cli, ["mcp", "bundle", "--home", str(home), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert str(out) in result.output and str(home) in result.output
    return home, out


def test_the_bundle_is_a_zip_whose_manifest_fits_the_mcpb_schema(made: tuple[Path, Path]) -> None:
    home, out = made
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert sorted(z.namelist()) == ["icon.png", "manifest.json"]
        manifest = json.loads(z.read("manifest.json"))
        icon = z.read("icon.png")
    jsonschema.Draft7Validator(SCHEMA).validate(manifest)
    assert manifest["manifest_version"] == MANIFEST_VERSION
    assert icon.startswith(b"\x89PNG\r\n\x1a\n") and manifest["icon"] == "icon.png"
    server = manifest["server"]
    assert server["type"] == "binary"
    config = server["mcp_config"]
    assert Path(config["command"]).is_absolute() and Path(config["command"]) == noteloom_executable()
    assert config["args"] == ["mcp", "--home", str(home.absolute())]
    tools = {t["name"] for t in manifest["tools"]}
    assert {"search_notes", "read_note", "create_note"} <= tools  # as turned on now
    assert "delete_note" not in tools and manifest["tools_generated"] is True
    assert manifest["compatibility"]["platforms"] == [platform_name()]


def test_a_manifest_the_schema_refuses_is_refused() -> None:
    """The vendored schema is strict: the checks above could fail."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"manifest_version": MANIFEST_VERSION, "name": "x", "version": "1", "description": "d",
                             "author": {"name": "a"}, "server": {"type": "binary", "mcp_config": {}}}, SCHEMA)


@pytest.mark.skipif(not MCPB_CLI.exists(), reason="the mcpb CLI is not installed (scripts/install-mcpb.sh)")
def test_the_official_mcpb_cli_validates_and_reads_the_bundle(made: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = made
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(out) as z:
        z.extractall(unpacked)
    checked = subprocess.run([str(MCPB_CLI), "validate", str(unpacked / "manifest.json")],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0 and "validation passes" in checked.stdout, checked.stdout + checked.stderr
    info = subprocess.run([str(MCPB_CLI), "info", str(out)], capture_output=True, text=True, timeout=120, check=False)
    assert info.returncode == 0, info.stdout + info.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_the_command_in_the_bundle_starts_the_server_and_answers_initialize(made: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    _, out = made
    with zipfile.ZipFile(out) as z:
        config = json.loads(z.read("manifest.json"))["server"]["mcp_config"]
    search = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "search_notes", "arguments": {"query": "hello"}}}
    answers = initialize_over_stdio(config["command"], config["args"], env=config["env"], cwd=tmp_path, then=(search,))
    assert answers[1]["result"]["capabilities"]["tools"] is not None
    # It serves the workspace named in the bundle, not a fresh default one.
    found = answers[2]["result"]["structuredContent"]["results"]
    assert [r["title"] for r in found] == ["Bundled"]


def test_without_a_noteloom_command_no_bundle_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "x.mcpb"
    result = CliRunner().invoke(cli, ["mcp", "bundle", "--home", str(home), "--out", str(out)])
    assert result.exit_code != 0 and "noteloom command" in result.output and not out.exists()
