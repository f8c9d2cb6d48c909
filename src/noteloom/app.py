"""The composition root: reads settings, opens the database, loads plugins, wires the layers.

Nothing else reads configuration or the environment, and nothing writes the environment;
surfaces receive a ready ``App``. ``open_app`` builds the services in dependency order
(embedders, the semantic index, the providers, then the tools, each registered once the
services it requires exist; :mod:`noteloom.services`), and the ``App`` owns the background
work (the indexer, the chat's turn runner): ``App.background`` starts and stops it, for
``serve`` (in every worker) and the commands that need it; nothing else starts it.
"""

from __future__ import annotations

import glob
import logging
import os
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
from sqlalchemy.engine import Engine, make_url

from noteloom import db
from noteloom.access import access_scope
from noteloom.config import SETTINGS_FILE, Settings, load_settings
from noteloom.data import DataCatalog
from noteloom.embedders import EmbedderFactory
from noteloom.errors import AuthError
from noteloom.folders import Folders
from noteloom.memory.similarity import MemoryVectors
from noteloom.outbound import OutboundPolicy
from noteloom.pipeline import PipelineJob
from noteloom.plugins import pipeline_jobs, plugin_manager
from noteloom.providers import provider_registry
from noteloom.recipes.service import RecipeService
from noteloom.semantic.embed_service import ServiceEndpoint
from noteloom.semantic.index import SemanticIndex
from noteloom.semantic.wiring import open_index
from noteloom.services import BackgroundService, Services
from noteloom.tools import (
    SCOPE_KEY,
    NotebookScope,
    ToolContext,
    ToolDef,
    ToolRegistry,
    narrowed,
    scope_from_setting,
)
from noteloom.webtools.fetch import WebFetcher
from noteloom.webtools.search import search_from_settings
from noteloom.workspace import User, Workspace

log = logging.getLogger(__name__)

#: The names of the app's own background services (``App.background``).
INDEXER, CHAT, RECIPES, SCHEDULER = "indexer", "chat", "recipes", "scheduler"


@dataclass(frozen=True)
class LeftOut:
    """A tool that was not registered: services it requires are off, or no service has the name."""

    tool: str
    off: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    def reason(self) -> str:
        parts = []
        if self.off:
            parts.append(f"{_names(self.off)} {'is' if len(self.off) == 1 else 'are'} off")
        if self.unknown:
            parts.append(f"this app has no service called {_names(self.unknown)}")
        return f"tool {self.tool!r} is left out: it requires {_names(self.off + self.unknown)}, and " + "; ".join(parts)


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in names)


@dataclass
class App:
    settings: Settings
    engine: Engine
    workspace: Workspace
    plugins: pluggy.PluginManager
    registry: ToolRegistry
    services: Services
    #: Tools not registered because a service they require is off (or does not exist).
    left_out: list[LeftOut] = field(default_factory=list)
    #: The pipeline jobs plugins register (``register_pipeline_jobs``), by name: what recipes run.
    pipeline_jobs: dict[str, PipelineJob] = field(default_factory=dict)
    #: The background work this app can run, in the order it starts (``background``).
    background_services: list[BackgroundService] = field(default_factory=list)
    _running: list[str] = field(default_factory=list, init=False, repr=False)

    def tool_context(self, user: User | None = None, *, scope: NotebookScope | None = None, **extra: Any) -> ToolContext:
        """The context of a tool call; ``scope`` when the caller read it already (else it is read now)."""
        if scope is None:
            scope = scope_from_setting(self.workspace.get_setting(SCOPE_KEY))
        # The person asking: a member sees their own notebooks and those shared with them.
        scope = narrowed(scope, access_scope(self.workspace, user))
        return ToolContext(
            workspace=self.workspace,
            user=user,
            scope=scope,
            settings=self.settings.file,
            services=self.services,
            **extra,
        )

    @property
    def running(self) -> tuple[str, ...]:
        """The names of the background services running now."""
        return tuple(self._running)

    @asynccontextmanager
    async def background(self, *names: str, claims_scheduled: bool = False) -> AsyncIterator[App]:
        """Run background services for the block: the ones ``names`` names, or all of them.

        A service of scheduled work (``BackgroundService.scheduled``) starts with the others
        only where ``claims_scheduled`` (one process of a server claims it). They start in
        order and stop in reverse; none runs twice in one app.
        """
        known = [s.name for s in self.background_services]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"no background service called {_names(tuple(unknown))} (known: {_names(tuple(known))})")
        chosen = [
            s for s in self.background_services
            if s.name in names or (not names and (claims_scheduled or not s.scheduled))
        ]
        twice = [s.name for s in chosen if s.name in self._running]
        if twice:
            raise RuntimeError(f"{_names(tuple(twice))} already running in this app")
        async with AsyncExitStack() as stack:
            for service in chosen:
                await stack.enter_async_context(service.start())
                self._running.append(service.name)
                stack.callback(self._running.remove, service.name)
            yield self

    def close(self) -> None:
        self.workspace.data_version.close()
        self.engine.dispose()


def is_builtin(tool: ToolDef) -> bool:
    """Whether ``tool`` is one of noteloom's own (registered by ``noteloom.default_plugins``)."""
    return getattr(tool.handler, "__module__", "").startswith("noteloom.default_plugins.")


def access_token(app: App, *, rotate: bool = False) -> str:
    """The owner's API token, kept in a 0600 file in the data directory (the database
    stores only its hash). Creates the owner and the token on first use; ``rotate``
    revokes every earlier token."""
    owner = app.workspace.ensure_owner()
    path = app.settings.token_file
    if not rotate and path.exists():
        token = path.read_text(encoding="utf-8").strip()
        try:
            if app.workspace.verify_token(token).id == owner.id:
                return token
        except AuthError:
            pass
    token = app.workspace.create_token(owner.id, revoke_others=rotate)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(token + "\n", encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return token


def _make_private(settings: Settings) -> None:
    """Take the group's and others' bits off the data folder and what noteloom keeps in it
    (workspaces made by earlier versions, or under a umask of 022, were readable by every
    local user). Only noteloom's own files are touched: ``--home`` may name a folder that
    holds other things too."""
    if os.name != "posix":
        return
    home = settings.data_dir
    paths = [home, home / SETTINGS_FILE, settings.token_file, settings.token_file.with_name("token.part")]
    # Attachments, and the staging folders of imports with their lock files. A folder
    # made under our umask holds files made under it, so only a loose folder is walked
    # (stat-ing 10,000 attachments on every open took 0.36 s).
    for tree in [settings.attachments_dir, *home.glob(".import-*")]:
        paths.append(tree)
        if _loose(tree):
            for folder, dirs, files in os.walk(tree):
                paths += [Path(folder, name) for name in (*dirs, *files)]
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        database = Path(url.database).resolve()
        # -wal, -shm and -journal beside it, and the workspace locks (locks.py).
        paths += [database, *database.parent.glob(glob.escape(database.name) + "-*")]
    fixed = 0
    for path in paths:
        try:
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or not mode & 0o077:
                continue  # a link's own bits mean nothing, and chmod would follow it
            os.chmod(path, stat.S_IMODE(mode) & 0o700)
            fixed += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot make %s private to its owner: %s", path, exc.strerror)
    if fixed:
        log.warning("made %d file(s) of the workspace in %s readable by their owner only (they were open to "
                    "others, as earlier versions of noteloom left them)", fixed, home)


def _loose(path: Path) -> bool:
    try:
        return bool(path.lstat().st_mode & 0o077)
    except OSError:
        return False


def open_app(
    settings: Settings | None = None,
    *,
    plugins: list[Any] | None = None,
    load_entry_points: bool = True,
    env: Mapping[str, str] | None = None,
    embed_service: ServiceEndpoint | None = None,
) -> App:
    """Open (and migrate) the workspace described by ``settings``.

    ``env`` is the environment the settings, providers and embedders read (the process's,
    read once, by default). ``embed_service`` is a shared embedding service to embed
    through (``serve --workers N`` starts one): this process then never loads the model.
    """
    env = dict(os.environ) if env is None else env
    settings = settings or load_settings(dict(env))
    if os.name == "posix":
        # Notes, attachments and the token are the owner's alone, whatever umask the
        # shell, the service manager or the desktop app that started us has set.
        os.umask(0o077)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    _make_private(settings)
    engine = db.create_db_engine(settings.database_url)
    db.migrate(engine)
    workspace = Workspace(engine, settings.data_dir)
    # What imports killed mid-way left: their staging folders, and files moved into place
    # for rows that never committed. Only looked into when there are any: the import
    # machinery is not loaded by every command.
    if glob.glob(glob.escape(str(settings.data_dir)) + "/.import-*"):
        from noteloom.interop.staging import clean_stale

        clean_stale(workspace)
    if settings.trash_retention_days:
        workspace.purge_expired(settings.trash_retention_days)
    pm = plugin_manager(plugins, load_entry_points=load_entry_points)
    services = _services(engine, settings, pm, env, embed_service)
    services.add("data", DataCatalog(settings.file))  # generic reads; bad [data] fails here
    # The web tools: pages through the guarded client; a search engine only once [web_search] names one.
    outbound = OutboundPolicy.from_settings(settings.file)
    services.add("web", WebFetcher(outbound))
    services.add("web_search", search_from_settings(settings.file, env, outbound))
    # read_file and list_dir; None (the tools left out) until [files] shares a folder; a bad root fails here
    services.add("folders", Folders.from_settings(settings.section("files"), base=settings.data_dir, home=env.get("HOME")))
    app = App(settings, engine, workspace, pm, ToolRegistry(), services)
    app.pipeline_jobs = pipeline_jobs(pm)
    # Before the tools: create_recipe requires it.
    services.recipes = RecipeService(app)
    app.registry, app.left_out = _tools(pm, services)
    app.background_services = _background(app)
    return app


def _services(
    engine: Engine, settings: Settings, pm: pluggy.PluginManager, env: Mapping[str, str],
    embed_service: ServiceEndpoint | None,
) -> Services:
    """The services, each after what it needs: embedders, the semantic index, the providers."""
    embedders: dict[str, EmbedderFactory] = {}
    pm.hook.register_embedders(register=embedders.__setitem__)
    index = open_index(engine, settings.section("embeddings"), embedders, env, endpoint=embed_service)
    # Cheap to make (no model, no thread): it embeds only while the indexer runs (_background).
    vectors = MemoryVectors(index.embedder, query_vector=index.query_vector) if index is not None else None
    return Services(providers=provider_registry(settings.file, env, pm), semantic=index, memory_vectors=vectors)


def _tools(pm: pluggy.PluginManager, services: Services) -> tuple[ToolRegistry, list[LeftOut]]:
    """The tools whose required services exist; the others are left out, and said so."""
    registry = ToolRegistry()
    left_out: list[LeftOut] = []

    def register_tool(tool: ToolDef) -> None:
        unknown = tuple(n for n in tool.requires if not services.known(n))
        off = tuple(n for n in tool.requires if services.known(n) and n not in services)
        if off or unknown:
            left = LeftOut(tool.name, off, unknown)
            left_out.append(left)
            # Ours without an embedder is the keyword-only workspace, not news; a plugin's
            # tool that never appears is.
            log.log(logging.INFO if is_builtin(tool) and not unknown else logging.WARNING, "%s", left.reason())
            return
        registry.register(tool, check_schema=not is_builtin(tool))

    pm.hook.register_tools(register=register_tool)
    return registry, left_out


def _background(app: App) -> list[BackgroundService]:
    """The app's own background work: the semantic indexer (when it is on), the chat's turn
    runner, the recipes' runner, and (in the process that claims scheduled work) the
    recipes' scheduler."""
    out = []
    index, vectors = app.services.semantic, app.services.memory_vectors
    if index is not None:
        out.append(BackgroundService(INDEXER, lambda: _indexing(index, vectors)))
    out.append(BackgroundService(CHAT, lambda: _chat(app)))
    recipes = app.services.recipes
    assert recipes is not None
    out.append(BackgroundService(RECIPES, recipes.running))
    out.append(BackgroundService(SCHEDULER, recipes.scheduling, scheduled=True))
    return out


@asynccontextmanager
async def _indexing(index: SemanticIndex, vectors: MemoryVectors | None) -> AsyncIterator[SemanticIndex]:
    """The semantic indexer, and beside it the memories' vectors (both embed in the background:
    a one-shot command, which runs neither, never loads the model for them)."""
    async with index.running(), AsyncExitStack() as stack:
        if vectors is not None:
            await stack.enter_async_context(vectors.running())
        yield index


def _chat(app: App) -> AbstractAsyncContextManager[Any]:
    from noteloom.chat import chat_lifespan  # the chat's modules load when a process runs it

    return chat_lifespan(app)
