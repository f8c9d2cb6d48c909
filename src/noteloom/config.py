"""Settings that a user sets by hand: environment variables and ``noteloom.toml``.

Settings that the app changes at run time (tool toggles, scopes …) live in the
database instead (see ``Workspace.get_setting``). Only the composition root
(``app.py``) and the CLI read this module.
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noteloom.errors import ConfigError

SETTINGS_FILE = "noteloom.toml"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def default_data_dir() -> Path:
    """The platform's usual place for an application's data."""
    home = Path.home()
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "noteloom"
    if sys.platform == "win32":
        base = os.environ.get("APPDATA")
        return (Path(base) if base else home / "AppData" / "Roaming") / "noteloom"
    base = os.environ.get("XDG_DATA_HOME")
    return (Path(base) if base else home / ".local" / "share") / "noteloom"


@dataclass(frozen=True)
class ServerLimits:
    """What one client may hold or send (``[server]`` in ``noteloom.toml``).

    A connection must finish its request headers within ``header_timeout`` seconds of
    connecting (or of its first byte after a keep-alive pause), may stay silent between
    requests or between pieces of a body for ``idle_timeout`` seconds, and each server
    process holds at most ``max_connections`` (fewer if its open-files limit is lower).
    """

    #: A note body may be 10,000,000 characters, about 10 MB of JSON when written in ASCII.
    max_body_bytes: int = 16 * 1024 * 1024
    header_timeout: float = 10.0
    idle_timeout: float = 15.0
    max_connections: int = 1000


@dataclass(frozen=True)
class Settings:
    """Everything noteloom reads from the environment and its settings file."""

    data_dir: Path
    database_url: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    trash_retention_days: int = 90
    limits: ServerLimits = field(default_factory=ServerLimits)
    #: The whole parsed ``noteloom.toml``, for sections later layers own (providers, embeddings …).
    file: dict[str, Any] = field(default_factory=dict)

    @property
    def attachments_dir(self) -> Path:
        return self.data_dir / "attachments"

    @property
    def token_file(self) -> Path:
        return self.data_dir / "token"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def section(self, name: str) -> dict[str, Any]:
        """A table of the settings file, or an empty one."""
        value = self.file.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"[{name}] in {SETTINGS_FILE} must be a table, not {type(value).__name__}")
        return value


def load_settings(
    env: dict[str, str] | None = None,
    *,
    data_dir: Path | None = None,
    host: str | None = None,
    port: int | None = None,
) -> Settings:
    """Read settings: explicit arguments win over the environment, which wins over the file."""
    env = dict(os.environ) if env is None else env
    root = data_dir or (Path(env["NOTELOOM_HOME"]) if env.get("NOTELOOM_HOME") else default_data_dir())
    root = root.expanduser().resolve()
    file = _read_file(root / SETTINGS_FILE)
    server = _table(file, "server")
    database = _table(file, "database")
    trash = _table(file, "trash")

    url = env.get("NOTELOOM_DATABASE_URL") or database.get("url") or f"sqlite:///{root / 'noteloom.db'}"
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"database url {url!r} is not a URL; use sqlite:///PATH or postgresql+psycopg://…")
    retention = trash.get("retention_days", 90)
    if not isinstance(retention, int) or retention < 0:
        raise ConfigError(f"[trash] retention_days must be a whole number of days >= 0, not {retention!r}")
    final_port = port if port is not None else server.get("port", DEFAULT_PORT)
    if not isinstance(final_port, int) or not 0 <= final_port <= 65535:
        raise ConfigError(f"[server] port must be a number from 0 to 65535, not {final_port!r}")
    final_host = host or server.get("host", DEFAULT_HOST)
    if not isinstance(final_host, str):
        raise ConfigError(f"[server] host must be a string, not {final_host!r}")
    return Settings(
        data_dir=root,
        database_url=url,
        host=final_host,
        port=final_port,
        trash_retention_days=retention,
        limits=_server_limits(server),
        file=file,
    )


def _server_limits(server: dict[str, Any]) -> ServerLimits:
    defaults = ServerLimits()
    values: dict[str, Any] = {}
    for name, kind, floor, unit in (
        ("max_body_bytes", int, 1024, "bytes"),
        ("max_connections", int, 1, "connections"),
        ("header_timeout", float, 0.1, "seconds"),
        ("idle_timeout", float, 0.1, "seconds"),
    ):
        value = server.get(name, getattr(defaults, name))
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (kind is int and not isinstance(value, int)) or value < floor:
            whole = "a whole number of " if kind is int else "a number of "
            raise ConfigError(f"[server] {name} must be {whole}{unit} >= {floor}, not {value!r}")
        values[name] = kind(value)
    return ServerLimits(**values)


def _read_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name} is not valid TOML: {exc}. Fix the file and start again.") from exc


def _table(file: dict[str, Any], name: str) -> dict[str, Any]:
    value = file.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[{name}] in {SETTINGS_FILE} must be a table")
    return value
