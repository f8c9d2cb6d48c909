"""What every command shares: opening the workspace, printing JSON, failing with one line
and the exit code its error maps to (:data:`EXIT_CODES`).

Everything a command prints goes through ``noteloom.cli.terminal`` (installed for every
command), so no print site needs to clean what it shows."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.core

# typer 0.28 carries its own copy of click: the running command's context is in that copy.
from typer._click.globals import get_current_context

from noteloom.app import App, open_app
from noteloom.cli.terminal import json_text
from noteloom.config import default_data_dir, load_settings
from noteloom.errors import (
    AuthError,
    Busy,
    ConfigError,
    Conflict,
    EmbedderUnavailable,
    EmbeddingError,
    ImportExportError,
    InvalidInput,
    NoteloomError,
    NotFound,
    QueryError,
    SectionError,
    StorageError,
    Unavailable,
    WorkspaceError,
    mapped,
)
from noteloom.providers.errors import ProviderError
from noteloom.tools import ToolArgumentError, ToolError, UnknownTool

#: A command that failed: it could not be done (the message says why).
FAILED = 1
#: A value given on the command line is wrong; as click's own usage errors.
USAGE = 2
#: A service the command needs is not running or cannot be reached (sysexits' EX_UNAVAILABLE).
UNAVAILABLE = 69
#: Other work holds what the command needs: run it again later (sysexits' EX_TEMPFAIL).
TRY_AGAIN = 75

#: The exit code of a command an error stopped, looked up along the error's MRO. Bad input
#: that names an option of the command exits with ``USAGE`` and names the option
#: (:func:`fail_with`); other bad input (a value read from a file, an id that matches
#: nothing) is a ``FAILED`` command, as it always was.
EXIT_CODES: dict[type[BaseException], int] = {
    NoteloomError: FAILED,
    ConfigError: FAILED,
    StorageError: FAILED,
    Unavailable: UNAVAILABLE,
    EmbedderUnavailable: UNAVAILABLE,
    WorkspaceError: FAILED,
    NotFound: FAILED,
    Conflict: FAILED,
    Busy: TRY_AGAIN,
    InvalidInput: FAILED,
    QueryError: FAILED,
    EmbeddingError: FAILED,
    SectionError: FAILED,
    ImportExportError: FAILED,
    AuthError: FAILED,
    ToolError: FAILED,
    ToolArgumentError: FAILED,
    UnknownTool: FAILED,
    ProviderError: FAILED,
}


def fail(message: str, code: int = FAILED) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise SystemExit(code)


def fail_with(exc: NoteloomError, options: Mapping[str, str] | None = None) -> NoReturn:
    """One line for ``exc`` and its exit code. Bad input whose field is an option of the
    running command (or one of ``options``, field → option) is told as that option:
    ``--max-cost must be …``, exit code ``USAGE``."""
    message, code = str(exc), mapped(EXIT_CODES, exc)
    if isinstance(exc, InvalidInput) and exc.field is not None:
        option = _option_of(exc.field, options or {})
        if option is not None:
            code = USAGE
            if option != exc.field:
                name = exc.field
                message = f"{option}{message[len(name):]}" if message.startswith(name + " ") else f"{option}: {message}"
    fail(message, code)


def _option_of(field: str, options: Mapping[str, str]) -> str | None:
    """How the command line spells ``field``: ``--limit`` for ``limit`` when the running
    command has that option, ``TITLE`` for an argument; ``None`` when it takes no such value."""
    if field in options:
        return options[field]
    if field.startswith("-"):
        return field  # named as the option already (``--due``)
    ctx = get_current_context(silent=True)
    for param in ctx.command.params if ctx is not None else ():
        if param.name == field:
            if isinstance(param, typer.core.TyperOption):
                return max(param.opts, key=len)
            return field.upper()  # an argument, as --help shows it
    return None


# -- logs: one line on the terminal, the details in the data folder's log ------------------

LOG_FILE = "noteloom.log"
LOG_MAX_BYTES = 1_000_000
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
VERBOSE_HINT = "run with --verbose for details"
_OURS = "_noteloom_terminal"


@dataclass
class _LogState:
    verbose: bool = False
    file: Path | None = None


LOGS = _LogState()


class _OneLine(logging.Formatter):
    """``warning: the message's first line``: no stack, no timestamp, on the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().strip().splitlines() or [""]
        return f"{record.levelname.lower()}: {lines[0]}"


def _on_terminal(record: logging.LogRecord) -> bool:
    # A record with a stack is a bug its surface already reported in one line (a tool's
    # "internal error … (it was logged)", a failed turn): the stack goes to the log only.
    return LOGS.verbose or not record.exc_info


def _remove_ours() -> None:
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(h)
        h.close()


def terminal_logging(verbose: bool) -> Callable[[], None]:
    """Logs of a command run in a terminal: warnings as one line on stderr (with stacks
    under ``--verbose``); ``log_to_file`` adds the data folder's log once it is known.
    Returns what undoes it when the command ends (the process may run more than one)."""
    LOGS.verbose, LOGS.file = verbose, None
    root = logging.getLogger()
    _remove_ours()
    level = root.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.DEBUG if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s") if verbose else _OneLine())
    handler.addFilter(_on_terminal)
    setattr(handler, _OURS, True)
    root.addHandler(handler)
    if verbose:
        root.setLevel(logging.DEBUG)

    def undo() -> None:
        _remove_ours()
        root.setLevel(level)

    return undo


class _PrivateLog(RotatingFileHandler):
    """The log file, made 0600 (it may quote note titles) and only once something is logged."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        return  # a full disk or a read-only folder: the terminal's line is all there is


def log_to_file(data_dir: Path) -> None:
    """Warnings and errors, with their stacks, to ``noteloom.log`` in the data folder (0600)."""
    root = logging.getLogger()
    if not any(getattr(h, _OURS, False) for h in root.handlers) or LOGS.file is not None:
        return  # not a terminal command (a server keeps its own logging), or done already
    path = data_dir / LOG_FILE
    handler = _PrivateLog(path, maxBytes=LOG_MAX_BYTES, backupCount=2, encoding="utf-8", delay=True)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    setattr(handler, _OURS, True)
    root.addHandler(handler)
    LOGS.file = path


def unexpected(exc: BaseException) -> NoReturn:
    """A bug escaped a command: one line on the terminal, the stack in the log."""
    if LOGS.file is not None:  # the command's own handlers are gone by now: write it here
        handler = _PrivateLog(LOGS.file, maxBytes=LOG_MAX_BYTES, backupCount=2, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.emit(logging.LogRecord("noteloom.cli", logging.ERROR, __file__, 0, "unexpected error", None,
                                       (type(exc), exc, exc.__traceback__)))
        handler.close()
    where = f"; the details are in {LOGS.file}" if LOGS.file else ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    fail(f"unexpected {type(exc).__name__}{': ' + text if text else ''} (a bug{where}; {VERBOSE_HINT})")


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
        if where.is_dir():
            log_to_file(where)
        app = open_app(settings)
    except NoteloomError as exc:
        fail_with(exc)
    try:
        yield app
    except NoteloomError as exc:
        fail_with(exc)
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
