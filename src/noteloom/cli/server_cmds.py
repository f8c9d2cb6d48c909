"""``noteloom init`` and ``serve``; ``token`` is registered from ``token_cmds``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from noteloom.app import access_token
from noteloom.cli.common import HOME_OPTION, opened

if TYPE_CHECKING:
    from noteloom.app import App
    from noteloom.semantic.embed_service import ServiceProcess


def register(app: typer.Typer) -> None:
    from noteloom.cli.token_cmds import token_app

    app.add_typer(token_app, name="token")

    @app.command()
    def init(home: Path | None = HOME_OPTION, name: str = typer.Option("owner", help="The owner's name.")) -> None:
        """Create the workspace (if needed), its owner and an access token."""
        with opened(home, create=True) as a:
            a.workspace.ensure_owner(name)
            token = access_token(a)
            typer.echo(f"workspace: {a.settings.data_dir}")
            typer.echo(f"database:  {_safe_url(a.settings.database_url)}")
            typer.echo(f"token:     {token}")

    @app.command()
    def serve(
        home: Path | None = HOME_OPTION,
        host: str | None = typer.Option(None, help="Address to listen on (default 127.0.0.1)."),
        port: int | None = typer.Option(None, help="Port to listen on (default 8765)."),
        workers: int = typer.Option(
            1, min=1, max=64, help="Server processes sharing the port (each uses one core; SQLite WAL and "
            "PostgreSQL both serve several)."
        ),
    ) -> None:
        """Serve the web page, the JSON API and MCP (at /mcp)."""
        from functools import partial

        from noteloom.config import load_settings
        from noteloom.web.app import create_web_app, served_app
        from noteloom.web.listen import listen_sockets
        from noteloom.web.server import raise_fd_limit, return_freed_memory, serve
        from noteloom.web.workers import Supervisor

        raise_fd_limit()  # before anything is opened; the workers inherit it
        return_freed_memory()
        with opened(home) as a:
            settings = load_settings(data_dir=home, host=host, port=port)
            token = access_token(a)
            socks = listen_sockets(settings.host, settings.port, workers)
            bound_port = socks[0].getsockname()[1]
            shown = "localhost" if settings.host in ("127.0.0.1", "::1", "localhost") else settings.host
            base = f"http://{shown}:{bound_port}"
            runtime = write_runtime(a.settings.data_dir, settings.host, bound_port)
            typer.echo(f"noteloom is serving the workspace in {a.settings.data_dir}")
            # After "#", so the token never reaches the server, its access log or a proxy: the
            # page's script reads it, trades it for a session and clears the address bar.
            typer.echo(f"  web:   {base}/#token={token}")
            typer.echo(f"  mcp:   {base}/mcp")
            typer.echo(f"  token: {token}")
            if workers == 1:
                try:
                    with socks[0]:
                        serve(
                            create_web_app(a, background=True, claims_scheduled=True), socks, settings.limits,
                            log_level="warning", timeout_graceful_shutdown=5,
                        )
                finally:
                    remove_runtime(runtime)
                return
            service = _embed_service(a)
        # Several processes: each opens the workspace itself, from the settings read here
        # (handed over in its spawn arguments), and serves on a socket of its own; see
        # noteloom.web.workers.
        supervisor = Supervisor(
            socks, partial(served_app, settings), {"log_level": "warning", "timeout_graceful_shutdown": 5},
            limits=settings.limits, service=service,
        )
        try:
            supervisor.run()
        finally:
            remove_runtime(runtime)
            for sock in socks:
                sock.close()
        if supervisor.failed:
            raise typer.Exit(1)


def _embed_service(a: App) -> ServiceProcess | None:
    """One embedding service for all the workers, when semantic search is on."""
    from noteloom.semantic.embed_service import EmbedderSource, ServiceProcess

    index = a.services.semantic
    if index is None:
        return None
    source = EmbedderSource("noteloom.web.workers:workspace_embedder", {"config": dict(a.settings.section("embeddings"))})
    # The window the index cuts chunks to, as it would for the embedder in this process.
    window = index.spec.max_tokens if callable(getattr(index.embedder, "count_tokens", None)) else 0
    return ServiceProcess(source, index.embedder.name, a.settings.data_dir, max_tokens=window)


# -- the runtime file: which port a running `serve` listens on ----------------------------

RUNTIME_FILE = "server.json"


def write_runtime(data_dir: Path, host: str, port: int) -> Path:
    """Say where this server listens, for `noteloom mcp status` (0600; removed at exit)."""
    path = data_dir / RUNTIME_FILE
    body = json.dumps({"pid": os.getpid(), "host": host, "port": port, "started": int(time.time())})
    tmp = path.with_name(f".{RUNTIME_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(body)
    os.replace(tmp, path)
    return path


def remove_runtime(path: Path) -> None:
    """Remove the runtime file if it is still this process's (a newer server may own it)."""
    info = read_runtime(path.parent, check_alive=False)
    if info is not None and info.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def read_runtime(data_dir: Path, *, check_alive: bool = True) -> dict[str, Any] | None:
    """The running server's ``{"pid", "host", "port", "started"}``, or ``None`` when no server
    runs (no file, an unreadable one, or one a killed server left behind)."""
    try:
        info = json.loads((data_dir / RUNTIME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int) or not isinstance(info.get("port"), int):
        return None
    if check_alive and not _alive(info["pid"]):
        return None
    return info


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process holds the pid: not our server
        return False
    except OSError:
        return False
    return True


def _safe_url(url: str) -> str:
    """The database URL without a password."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, where = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{where}" if ":" in creds else url
    return url
