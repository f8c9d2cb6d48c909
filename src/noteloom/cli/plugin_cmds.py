"""Commands installed plugins add (``register_cli_commands``), after noteloom's own.

Only installed plugins (the ``noteloom`` entry-point group) are asked: the command line is
built before any workspace is opened. A plugin's command or group named like one of
noteloom's, or like an earlier plugin's, is left out with a warning: no plugin replaces
``notes`` or ``serve``. A plugin that fails to load is left out here too; opening the app
reports its error properly.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import pluggy
import typer
from typer.main import get_command_name, get_group
from typer.models import CommandInfo, DefaultPlaceholder, TyperInfo

log = logging.getLogger("noteloom.cli")


def register(app: typer.Typer) -> None:
    from noteloom.plugins import plugin_manager

    try:
        pm = plugin_manager(defaults=False)
    except Exception as exc:
        log.warning("the installed plugins' commands are left out: a plugin failed to load (%s)", exc)
        return
    add_plugin_commands(app, pm)


def add_plugin_commands(app: typer.Typer, pm: pluggy.PluginManager) -> list[str]:
    """Let ``pm``'s plugins add commands to ``app``; the names of those added."""
    taken = {n for c in app.registered_commands for n in _own_names(c)}
    taken |= {n for g in app.registered_groups for n in _own_names(g)}
    commands, groups = len(app.registered_commands), len(app.registered_groups)
    pm.hook.register_cli_commands(cli=app)
    added: list[str] = []
    app.registered_commands[commands:] = _kept(app.registered_commands[commands:], taken, added)
    app.registered_groups[groups:] = _kept(app.registered_groups[groups:], taken, added)
    return added


Entry = TypeVar("Entry", CommandInfo, TyperInfo)


def _kept(fresh: list[Entry], taken: set[str], added: list[str]) -> list[Entry]:
    kept: list[Entry] = []
    for entry in fresh:
        names = _plugin_names(entry)
        clash = sorted(names & taken)
        if clash:
            log.warning("a plugin's command %s is left out: noteloom has a command of that name already",
                        ", ".join(repr(n) for n in clash))
            continue
        kept.append(entry)
        taken |= names
        added += sorted(names)
    return kept


def _value(v: Any) -> Any:
    return v.value if isinstance(v, DefaultPlaceholder) else v


def _own_names(entry: CommandInfo | TyperInfo) -> set[str]:
    """The name of one of noteloom's own commands or groups (each is named, or named by its function)."""
    if isinstance(entry, CommandInfo):
        name = _value(entry.name)
        if name:
            return {str(name)}
        return {get_command_name(entry.callback.__name__)} if entry.callback else set()
    name = _value(entry.name) or (entry.typer_instance and _value(entry.typer_instance.info.name))
    return {str(name)} if name else set()


def _plugin_names(entry: CommandInfo | TyperInfo) -> set[str]:
    """The names a plugin's entry adds, as Typer resolves them (a group without a name adds
    its commands one by one)."""
    probe = typer.Typer()
    if isinstance(entry, CommandInfo):
        probe.registered_commands.append(entry)
    else:
        probe.registered_groups.append(entry)
    return set(get_group(probe).commands)
