"""Installed plugins: a package that declares a ``noteloom`` entry point is registered."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from noteloom.plugins import plugin_manager

PLUGIN = '''
from noteloom.plugins import hookimpl

@hookimpl
def register_tools(register):
    pass
'''


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A distribution on ``sys.path`` whose metadata names a module under the ``noteloom`` group."""
    (tmp_path / "nl_sample_plugin.py").write_text(PLUGIN)
    info = tmp_path / "nl_sample_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nl-sample-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[noteloom]\nsample = nl_sample_plugin\n\n[other]\nnot-ours = os\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "sample"
    sys.modules.pop("nl_sample_plugin", None)


def test_an_installed_plugin_is_registered_under_its_entry_point_name(installed_plugin: str) -> None:
    pm = plugin_manager()
    plugin = pm.get_plugin(installed_plugin)
    assert plugin is not None and plugin.__name__ == "nl_sample_plugin"
    assert pm.get_plugin("not-ours") is None


def test_installed_plugins_are_left_out_when_entry_points_are_not_loaded(installed_plugin: str) -> None:
    assert plugin_manager(load_entry_points=False).get_plugin(installed_plugin) is None
