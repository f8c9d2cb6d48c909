"""trip_packing: an example noteloom plugin that plans what to pack from the user's own notes.

It adds one tool, ``plan_trip_packing(destination, days, companions)``, which the chat, the
command line (``noteloom ask``) and MCP clients all see, a renderer that shows its list
with a picture per item, and the pictures themselves as static files of the plugin.
Installed packages expose it under the ``noteloom`` entry-point group (see pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from noteloom.plugins import ToolDef, hookimpl
from trip_packing.tool import PLAN_TRIP_PACKING, PLUGIN

__all__ = ["PLAN_TRIP_PACKING", "PLUGIN", "STATIC", "register_static", "register_tools"]

#: The bundled pictures, served at /plugins/trip_packing/static/NAME.svg.
STATIC = Path(str(files(__name__) / "static"))


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    register(PLAN_TRIP_PACKING)


@hookimpl
def register_static(register: Callable[[str, Path], None]) -> None:
    register(PLUGIN, STATIC)
