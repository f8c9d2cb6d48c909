"""Plugin hooks. Built-in tools, providers and embedders register through these same hooks.

A plugin is a module (or object) with functions marked ``@hookimpl``; installed
packages expose theirs under the ``noteloom`` entry-point group::

    from noteloom.plugins import hookimpl

    @hookimpl
    def register_tools(register):
        register(ToolDef(name="word_count", ...))

Each hook receives a ``register`` callback; call it once per thing you add.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "noteloom"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class Hooks:
    @hookspec
    def register_tools(self, register: Callable[[Any], None]) -> None:
        """Add tools: call ``register(ToolDef(...))`` for each. They appear in chat, recipes and MCP."""

    @hookspec
    def register_providers(self, register: Callable[..., None]) -> None:
        """Add LLM provider types: ``register(type_name, factory)``."""

    @hookspec
    def register_embedders(self, register: Callable[..., None]) -> None:
        """Add embedder types: ``register(type_name, factory)``."""

    @hookspec
    def register_pipeline_jobs(self, register: Callable[..., None]) -> None:
        """Add pipeline jobs for recipes: ``register(job)``."""


DEFAULT_PLUGINS: list[str] = [
    "noteloom.default_plugins.workspace_tools",
    "noteloom.default_plugins.providers",
    "noteloom.default_plugins.embedders",
    "noteloom.default_plugins.semantic_tools",
]


def plugin_manager(extra: list[Any] | None = None, *, load_entry_points: bool = True) -> pluggy.PluginManager:
    """A plugin manager with the built-in plugins, installed plugins and ``extra`` ones."""
    import importlib

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(Hooks)
    for name in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_entry_points:
        _load_entry_points(pm)
    for plugin in extra or []:
        pm.register(plugin)
    return pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Register the plugins installed packages declare under the ``noteloom`` entry-point group.

    What ``pm.load_setuptools_entrypoints`` does, through ``entry_points(group=…)``: that
    reads the group's entries without building every installed distribution's metadata
    first (a twentieth of a second at every start of the command line in a full venv).
    """
    from importlib.metadata import entry_points

    for ep in entry_points(group=PROJECT):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        pm.register(ep.load(), name=ep.name)
