"""The ``noteloom`` command line. Each command group lives in its own module and
registers itself on the one Typer app through ``register(app)``."""

from __future__ import annotations

import importlib
import sys

import typer

from noteloom.cli.common import LOGS, fail_with, terminal_logging, unexpected
from noteloom.cli.terminal import guard

cli = typer.Typer(
    name="noteloom",
    help="noteloom: a local-first notes workspace with an AI layer built in.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


#: Commands that run a server keep the server's own logging (stacks on stderr).
SERVER_COMMANDS = {"serve"}


@cli.callback()
def _every_command(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", help="Show log details and stacks on stderr."),
) -> None:
    # Before any command prints: titles, bodies, answers and errors may carry terminal
    # escape sequences from whoever wrote them (see noteloom.cli.terminal).
    guard()
    if ctx.invoked_subcommand not in SERVER_COMMANDS:
        ctx.call_on_close(terminal_logging(verbose))


# Command-group modules, in the order their commands show in --help.
COMMAND_MODULES = [
    "noteloom.cli.server_cmds",
    "noteloom.cli.workspace_cmds",
    "noteloom.cli.mcp_cmds",
    "noteloom.cli.user_cmds",
    "noteloom.cli.index_cmds",
    "noteloom.cli.interop_cmds",
    "noteloom.cli.chat_cmds",
    "noteloom.cli.recipe_cmds",
    "noteloom.cli.memory_cmds",
    "noteloom.cli.vault_cmds",
    "noteloom.cli.plugin_cmds",  # installed plugins' commands, after ours (none can replace one)
]

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(cli)


def main() -> None:
    """Entry point of the ``noteloom`` script: domain errors become one line on stderr."""
    from noteloom.errors import NoteloomError

    try:
        cli()
    except NoteloomError as exc:
        fail_with(exc)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug: one line here, the stack in the log (or on stderr with --verbose)
        if LOGS.verbose:
            raise
        unexpected(exc)
