"""The README stays true: every `noteloom …` line it shows names a real command with real
options (their behaviour is tested in the per-command tests), and both set-up commands exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import typer
import typer.main

from noteloom.cli import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def shown_commands() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    lines: list[str] = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("noteloom "):
                lines.append(line.split("  #", 1)[0].split(" # ", 1)[0])
    return [shlex.split(line)[1:] for line in lines]


def is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def resolve(args: list[str]) -> tuple[Any, list[str]]:
    command: Any = typer.main.get_command(cli)
    rest = list(args)
    while is_group(command) and rest and not rest[0].startswith("-"):
        sub = command.get_command(typer.Context(command), rest[0])
        assert sub is not None, f"`noteloom {' '.join(args)}`: no command {rest[0]!r}"
        command, rest = sub, rest[1:]
    return command, rest


def test_the_readme_shows_many_commands() -> None:
    assert len(shown_commands()) >= 25


def test_every_command_in_the_readme_exists_with_its_options() -> None:
    for args in shown_commands():
        command, rest = resolve(args)
        assert not is_group(command) or command.invoke_without_command, (
            f"`noteloom {' '.join(args)}` names a group, not a command"
        )
        known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
        for token in rest:
            if token.startswith("-") and token != "-":
                name = token.split("=", 1)[0]
                assert name in known, f"`noteloom {' '.join(args)}`: {command.name} has no option {name}"


def test_the_two_set_up_commands_are_make_targets() -> None:
    readme = README.read_text(encoding="utf-8")
    makefile = (README.parent / "Makefile").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("##", 1)[0]
    assert re.findall(r"^make (\w+)", setup, flags=re.M) == ["serve", "test"]
    for target in ("serve", "test", "lint", "bench"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
