"""What every command shares: opening the workspace, printing JSON, failing with one line.

Everything a command prints goes through ``noteloom.cli.terminal`` (installed for every
command), so no print site needs to clean what it shows."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, NoReturn

import typer

from noteloom.app import App, open_app
from noteloom.cli.terminal import json_text
from noteloom.config import default_data_dir, load_settings
from noteloom.errors import NoteloomError


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise SystemExit(code)


@contextmanager
def opened(home: Path | None = None, *, create: bool = False) -> Iterator[App]:
    """The app for a command; domain errors print one line and exit non-zero.

    A folder named with ``--home`` or ``NOTELOOM_HOME`` must exist unless ``create``
    (``noteloom init``): a typo must not quietly start an empty workspace that an AI app
    then writes to. The platform's default folder is made on first use, so the README's
    first steps and ``make serve`` work on a fresh machine.
    """
    try:
        settings = load_settings(data_dir=home)
        where = settings.data_dir
        if not create and not where.is_dir() and where != default_data_dir().expanduser().resolve():
            if where.exists():
                fail(f"{where} is a file, not a workspace folder; give --home the folder of a workspace")
            fail(f"no workspace at {where}; run `noteloom init --home {shlex.quote(str(where))}` to create one")
        app = open_app(settings)
    except NoteloomError as exc:
        fail(str(exc))
    try:
        yield app
    except NoteloomError as exc:
        fail(str(exc))
    finally:
        app.close()


def to_jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json_text(json.dumps(to_jsonable(value), ensure_ascii=False, indent=2)) + "\n")


HOME_OPTION = typer.Option(None, "--home", help="Data directory (default: $NOTELOOM_HOME or the platform's).")
JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of a table.")
