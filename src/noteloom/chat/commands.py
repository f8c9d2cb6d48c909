"""Slash commands typed in the composer: ``/clear``, ``/model <id>``, ``/system <text>``, ``/cost``.

They act on the conversation instead of reaching a model; what they print is kept as a
``note`` message (shown in the transcript, never sent to a model). Only these four
are commands: any other text starting with ``/`` is an ordinary message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

CommandName = Literal["clear", "model", "system", "cost"]
COMMANDS: tuple[CommandName, ...] = get_args(CommandName)


@dataclass(frozen=True)
class Command:
    name: CommandName
    argument: str = ""


def parse_command(text: str) -> Command | None:
    """The command ``text`` is, if it is one (the name is matched ignoring case)."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped[1:].partition(" ")
    if "\n" in head:
        head, _, more = head.partition("\n")
        rest = more + (" " + rest if rest else "")
    name = head.lower()
    for known in COMMANDS:
        if name == known:
            return Command(known, rest.strip())
    return None
