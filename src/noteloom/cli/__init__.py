"""The ``noteloom`` command line. Each command group lives in its own module and
registers itself on the one Typer app through ``register(app)``."""

from __future__ import annotations

import importlib
import sys

import typer

from noteloom.cli.common import fail
from noteloom.cli.terminal import guard

cli = typer.Typer(
    name="noteloom",
    help="noteloom: a local-first notes workspace with an AI layer built in.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@cli.callback()
def _every_command() -> None:
    # Before any command prints: titles, bodies, answers and errors may carry terminal
    # escape sequences from whoever wrote them (see noteloom.cli.terminal).
    guard()


# Command-group modules, in the order their commands show in --help.
COMMAND_MODULES = [
    "noteloom.cli.server_cmds",
    "noteloom.cli.workspace_cmds",
    "noteloom.cli.mcp_cmds",
    "noteloom.cli.index_cmds",
    "noteloom.cli.interop_cmds",
    "noteloom.cli.chat_cmds",
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main() -> None:
    """Entry point of the ``noteloom`` script: domain errors become one line on stderr."""
    from noteloom.errors import NoteloomError

    try:
        cli()
    except NoteloomError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        sys.exit(130)
