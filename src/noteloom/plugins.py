"""noteloom's public plugin API: the hooks, and everything a plugin author needs to use them.

A plugin is a module (or object) with functions marked ``@hookimpl``; an installed package
names its module under the ``noteloom`` entry-point group (``[project.entry-points.noteloom]``
in its ``pyproject.toml``). noteloom's own tools, providers and embedders register through
these very hooks (``noteloom.default_plugins``)::

    from noteloom.plugins import ToolContext, ToolDef, hookimpl

    async def word_count(ctx: ToolContext, text: str) -> dict[str, int]:
        \"\"\"Count the words of a text.\"\"\"
        return {"words": len(text.split())}

    @hookimpl
    def register_tools(register):
        register(ToolDef.from_function(word_count))

Each hook receives a ``register`` callback (``register_cli_commands`` the command line
itself): call it once per thing you add. ``docs/plugins.md`` documents every hook with its
signature and a complete worked example; a test fails when the two drift apart.

What this module re-exports is the stable surface: tools (``ToolDef``, ``ToolContext``,
``ToolError``, ``ToolResult``), renderers (the ``noteloom.renderspec`` blocks), provider
types (``ProviderType``, ``ProviderSetting``, with ``Provider`` and ``ProviderConfig``),
embedders (``Embedder``, ``EmbedderFactory``), pipeline jobs (``PipelineJob`` and its
parts), notification channels (``NotificationChannel``, ``Notification``) and MCP
resources (``McpResource``, ``McpResourceTemplate``) and prompts (``McpPrompt``,
``PromptArgument`` and the message helpers of ``noteloom.promptdefs``). It sits in
the engine layer, the lowest that can name provider types; the command line's and the
web's types are named for the type checker only, never imported here.
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import pluggy

from noteloom.embedders import Embedder, EmbedderFactory
from noteloom.hooks import PROJECT, hookimpl, hookspec
from noteloom.pipeline import BasePipelineJob, PipelineItem, PipelineJob, PipelineRun, check_job
from noteloom.promptdefs import (
    McpPrompt,
    PromptArgument,
    image_message,
    resource_message,
    text_message,
)
from noteloom.providers.base import Provider, ProviderConfig
from noteloom.providers.registry import ProviderSetting, ProviderType
from noteloom.renderspec import (
    Gallery,
    Image,
    Item,
    ItemList,
    KeyValues,
    Markdown,
    RenderSpec,
    Table,
    asset,
    attachment,
)
from noteloom.tools import ToolContext, ToolDef, ToolError, ToolResult

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint
    from pathlib import Path

    import typer
    from fastapi import APIRouter

__all__ = [
    "DEFAULT_PLUGINS",
    "PROJECT",
    "BasePipelineJob",
    "Embedder",
    "EmbedderFactory",
    "Gallery",
    "Hooks",
    "Image",
    "Item",
    "ItemList",
    "KeyValues",
    "Markdown",
    "McpPrompt",
    "McpResource",
    "McpResourceTemplate",
    "Notification",
    "NotificationChannel",
    "NotificationKind",
    "PipelineItem",
    "PipelineJob",
    "PipelineRun",
    "PromptArgument",
    "Provider",
    "ProviderConfig",
    "ProviderSetting",
    "ProviderType",
    "RenderSpec",
    "Table",
    "ToolContext",
    "ToolDef",
    "ToolError",
    "ToolResult",
    "asset",
    "attachment",
    "hookimpl",
    "hookspec",
    "image_message",
    "mcp_resources",
    "notification_channels",
    "pipeline_jobs",
    "plugin_manager",
    "resource_message",
    "text_message",
]

log = logging.getLogger("noteloom.plugins")

#: What a notification is about: a run failed, waits for approval, hit its budget, succeeded,
#: flagged items (pipeline mode), or its recipe was paused after repeated failures.
NotificationKind = Literal["failure", "approval", "budget", "success", "flagged", "paused"]


# The notification's shape lives here, not in ``noteloom.notifications`` (services), because
# the hook below must name it and this module sits in the engine layer.
@dataclass(frozen=True)
class Notification:
    """A notification as stored (``noteloom.notifications``) and as channels receive it."""

    id: str
    user_id: str
    kind: NotificationKind
    title: str
    body: str
    recipe_id: str | None
    run_id: str | None
    #: UTC milliseconds.
    created_time: int
    read_time: int | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON object webhooks receive."""
        return {"id": self.id, "kind": self.kind, "title": self.title, "body": self.body,
                "recipe_id": self.recipe_id, "run_id": self.run_id, "created_time": self.created_time}


@runtime_checkable
class NotificationChannel(Protocol):
    """Somewhere notifications go besides the app and webhooks (a chat service, a desktop
    notifier, e-mail): ``send`` is awaited once per notification, after it is stored."""

    name: str

    async def send(self, notification: Notification) -> None: ...


#: What an MCP resource's read function returns: text, or bytes (sent base64 as a blob).
ResourceBody = str | bytes


@dataclass(frozen=True)
class McpResource:
    """A fixed resource a plugin offers to MCP clients, listed and read beside the notes.

    ``read()`` (sync or async) returns its content: ``str`` is sent as text, ``bytes`` as a
    base64 blob, either with ``mime_type``. A sync one runs in a worker thread.
    """

    uri: str
    name: str
    read: Callable[[], ResourceBody | Awaitable[ResourceBody]]
    mime_type: str = "text/plain"
    title: str | None = None
    description: str | None = None


#: A ``{name}`` variable of a URI template: one path segment's worth of text (RFC 6570, level 1).
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class McpResourceTemplate:
    """A family of resources a plugin offers, such as ``test://items/{id}/data``.

    ``read(variables)`` (sync or async) is given the template's variables as matched in the
    URI asked for (``{"id": "123"}``; each matches one or more characters other than ``/``)
    and returns text or bytes as :class:`McpResource`'s ``read`` does. Raise ``LookupError``
    when there is no such resource: the client gets "resource not found".
    """

    uri_template: str
    name: str
    read: Callable[[Mapping[str, str]], ResourceBody | Awaitable[ResourceBody]]
    mime_type: str = "text/plain"
    title: str | None = None
    description: str | None = None

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables ``uri`` gives this template, or ``None`` when it is not one of its URIs."""
        parts = _TEMPLATE_VAR.split(self.uri_template)
        pattern = "".join(
            f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part) for i, part in enumerate(parts)
        )
        found = re.fullmatch(pattern, uri)
        return dict(found.groupdict()) if found else None


class Hooks:
    """The hook specifications. Each is called once when an app (or the command line) starts."""

    @hookspec
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        """Add tools: ``register(ToolDef.from_function(fn))`` (or a ``ToolDef`` written out)
        for each. They appear alike in the chat, recipes and MCP. A tool whose ``requires``
        names a service that is off is left out, and the app says so."""

    @hookspec
    def register_providers(self, register: Callable[[ProviderType], None]) -> None:
        """Add LLM provider types: ``register(ProviderType(name, factory, key_env=...,
        settings=...))`` for each. A ``[providers.NAME]`` table with ``type = "name"`` then
        makes one; ``-m NAME:MODEL`` addresses it."""

    @hookspec
    def register_embedders(self, register: Callable[[str, EmbedderFactory], None]) -> None:
        """Add embedder kinds: ``register(kind, factory)``, where ``factory(config, env)``
        builds an ``Embedder`` from the ``[embeddings]`` table (``type = "kind"``) and the
        environment."""

    @hookspec
    def register_pipeline_jobs(self, register: Callable[[PipelineJob], None]) -> None:
        """Add pipeline jobs for recipes in pipeline mode: ``register(job)`` for each
        (``noteloom.pipeline`` states the contract)."""

    @hookspec
    def register_notification_channels(self, register: Callable[[NotificationChannel], None]) -> None:
        """Add notification channels: ``register(channel)`` for each, an object with a ``name``
        and ``async def send(notification)``. Every notification a user gets (a recipe's
        failure, an approval it waits for, …) is sent to every channel once it is stored,
        besides the user's webhooks. ``send`` runs in the delivering task: return when done,
        raise when it failed (the failure is logged; other channels and webhooks go on)."""

    @hookspec
    def register_mcp_resources(self, register: Callable[[McpResource | McpResourceTemplate], None]) -> None:
        """Add MCP resources: ``register(McpResource(uri, name, read, mime_type=...))`` for a
        fixed one, ``register(McpResourceTemplate(uri_template, name, read, ...))`` for a
        family; MCP clients list and read them beside the notes (``resources/list``,
        ``resources/templates/list``, ``resources/read``). A URI noteloom's own resources use
        (``note:``, ``notebook:``, ``noteloom:``) or one registered already is refused."""

    @hookspec
    def register_cli_commands(self, cli: typer.Typer) -> None:
        """Add commands to the ``noteloom`` command line: ``@cli.command()`` or
        ``cli.add_typer(group, name=...)``. A name noteloom uses already is refused."""

    @hookspec
    def register_web_routes(self, register: Callable[[str, APIRouter], None]) -> None:
        """Add web routes: ``register(name, router)`` serves a FastAPI ``APIRouter`` under
        ``/plugins/{name}/``, behind the same credential check, CSRF rules and
        Content-Security-Policy as noteloom's own routes."""

    @hookspec
    def register_static(self, register: Callable[[str, Path], None]) -> None:
        """Add static files: ``register(name, directory)`` serves the files of ``directory``
        at ``/plugins/{name}/static/{path}`` (no path leaves it; no credential needed, so
        they must hold no user data). ``renderspec.asset(name, path)`` points at them."""

    @hookspec
    def register_mcp_prompts(self, register: Callable[[McpPrompt], None]) -> None:
        """Add MCP prompts: ``register(McpPrompt(name, description, get, arguments=[...]))``
        for each (``noteloom.promptdefs``). MCP clients list them with ``prompts/list`` and
        build them with ``prompts/get``; an argument's ``complete`` answers
        ``completion/complete``. A second prompt of one name replaces the first, with a warning."""


DEFAULT_PLUGINS: list[str] = [
    "noteloom.default_plugins.workspace_tools",
    "noteloom.default_plugins.providers",
    "noteloom.default_plugins.embedders",
    "noteloom.default_plugins.semantic_tools",
    "noteloom.default_plugins.pipeline_jobs",
    "noteloom.default_plugins.recipe_tools",
    "noteloom.default_plugins.history_tools",
    "noteloom.default_plugins.data_tools",
    "noteloom.default_plugins.memory_tools",
    "noteloom.default_plugins.attachment_tools",
    "noteloom.default_plugins.folder_tools",
    "noteloom.default_plugins.interop_tools",
    "noteloom.default_plugins.web_tools",
    "noteloom.default_plugins.mcp_prompts",
]


def plugin_manager(
    extra: list[Any] | None = None, *, load_entry_points: bool = True, defaults: bool = True
) -> pluggy.PluginManager:
    """A plugin manager with the built-in plugins (unless ``defaults`` is false), installed
    plugins (unless ``load_entry_points`` is false) and ``extra`` ones."""
    import importlib

    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(Hooks)
    if defaults:
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
    for ep in _installed(tuple(sys.path)):
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        pm.register(ep.load(), name=ep.name)


@functools.lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    """The group's entries on this import path, read once per process: the command line
    asks twice (its commands, then the app), and each read stats every installed package
    (13 ms of CPU in our venv)."""
    from importlib.metadata import entry_points

    return tuple(entry_points(group=PROJECT))


def pipeline_jobs(pm: pluggy.PluginManager) -> dict[str, PipelineJob]:
    """The pipeline jobs plugins register, by name (what the recipes' runner runs). Two jobs
    of one name: the plugin loaded later wins (the hook runs it first), and the app says so."""
    jobs: dict[str, PipelineJob] = {}

    def register(job: PipelineJob) -> None:
        checked = check_job(job)
        if checked.name in jobs:
            log.warning("pipeline job %r is registered twice; the plugin loaded later replaces the other",
                        checked.name)
            return
        jobs[checked.name] = checked

    pm.hook.register_pipeline_jobs(register=register)
    return jobs


def notification_channels(pm: pluggy.PluginManager) -> list[NotificationChannel]:
    """The notification channels plugins register, in hook order. A second channel of one
    name is left out, and the app says so; an object that is no channel is refused."""
    channels: dict[str, NotificationChannel] = {}

    def register(channel: NotificationChannel) -> None:
        name = getattr(channel, "name", None)
        if not isinstance(name, str) or not name or not inspect.iscoroutinefunction(getattr(channel, "send", None)):
            raise TypeError(f"{channel!r} is no notification channel: it needs a name and an async send(notification)")
        if name in channels:
            log.warning("notification channel %r is registered twice; the plugin loaded later replaces the other", name)
            return
        channels[name] = channel

    pm.hook.register_notification_channels(register=register)
    return list(channels.values())


#: URI schemes noteloom's own resources use: no plugin resource may take one.
RESERVED_RESOURCE_SCHEMES = ("note", "notebook", "noteloom")


def mcp_resources(pm: pluggy.PluginManager) -> list[McpResource | McpResourceTemplate]:
    """The MCP resources and templates plugins register, in hook order. One in a scheme of
    noteloom's own, or of a URI (template) registered before, is left out with a warning."""
    found: dict[str, McpResource | McpResourceTemplate] = {}

    def register(item: McpResource | McpResourceTemplate) -> None:
        if not isinstance(item, McpResource | McpResourceTemplate):
            raise TypeError(f"{item!r} is no MCP resource: register an McpResource or an McpResourceTemplate")
        uri = item.uri if isinstance(item, McpResource) else item.uri_template
        scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
        if not scheme or scheme in RESERVED_RESOURCE_SCHEMES:
            log.warning("MCP resource %r is left out: it needs a scheme of its own (not %s)",
                        uri, ", ".join(RESERVED_RESOURCE_SCHEMES))
            return
        if uri in found:
            log.warning("MCP resource %r is registered twice; the plugin loaded later replaces the other", uri)
            return
        found[uri] = item

    pm.hook.register_mcp_resources(register=register)
    return list(found.values())
