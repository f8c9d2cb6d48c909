"""The composition root: reads settings, opens the database, loads plugins, wires the layers.

Nothing else reads configuration or the environment; surfaces receive a ready ``App``.
"""

from __future__ import annotations

import glob
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
from sqlalchemy.engine import Engine, make_url

from noteloom import db
from noteloom.config import SETTINGS_FILE, Settings, load_settings
from noteloom.errors import AuthError
from noteloom.pipeline import PipelineJob
from noteloom.plugins import pipeline_jobs, plugin_manager
from noteloom.providers import provider_registry
from noteloom.semantic.wiring import open_index
from noteloom.tools import SCOPE_KEY, ToolContext, ToolDef, ToolRegistry, scope_from_setting
from noteloom.workspace import User, Workspace

log = logging.getLogger(__name__)


@dataclass
class App:
    settings: Settings
    engine: Engine
    workspace: Workspace
    plugins: pluggy.PluginManager
    registry: ToolRegistry
    #: Services later layers attach (providers, the semantic index, the chat service …).
    services: dict[str, Any] = field(default_factory=dict)
    #: The pipeline jobs plugins register (``register_pipeline_jobs``), by name: what recipes run.
    pipeline_jobs: dict[str, PipelineJob] = field(default_factory=dict)

    def tool_context(self, user: User | None = None, **extra: Any) -> ToolContext:
        scope = scope_from_setting(self.workspace.get_setting(SCOPE_KEY))
        return ToolContext(
            workspace=self.workspace,
            user=user,
            scope=scope,
            settings=self.settings.file,
            services=self.services,
            **extra,
        )

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
) -> App:
    """Open (and migrate) the workspace described by ``settings``."""
    settings = settings or load_settings()
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
    services: dict[str, Any] = {}
    embedders: dict[str, Any] = {}
    pm.hook.register_embedders(register=embedders.__setitem__)
    index = open_index(engine, settings.section("embeddings"), embedders, os.environ)
    if index is not None:
        services["semantic"] = index
    registry = ToolRegistry()

    def register_tool(tool: ToolDef) -> None:
        # A tool that needs a service which is off (semantic search …) is left out entirely.
        if all(name in services for name in tool.requires):
            registry.register(tool, check_schema=not is_builtin(tool))

    pm.hook.register_tools(register=register_tool)
    app = App(settings, engine, workspace, pm, registry, services)
    app.services["providers"] = provider_registry(settings.file, os.environ, pm)
    app.pipeline_jobs = pipeline_jobs(pm)
    return app
