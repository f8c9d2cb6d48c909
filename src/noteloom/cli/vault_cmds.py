"""``noteloom vault …``: a person's vault, the key of their private and fortress chats.

``init`` sets the vault passphrase and shows the recovery key once; ``status`` says whether
there is one and how many windows are open; ``unlock`` opens a window for an API token (so
scripts and MCP clients using it can read protected chats; the web app opens its own on
the chat page), or resets a lost passphrase with ``--recovery``; ``lock`` closes every
window; ``rotate`` gives the vault a new keypair and moves every sealed value to it.

A passphrase is never an argument (it would sit in the shell's history and in ``ps``): it
is read from stdin with ``--passphrase-stdin``, or asked at the terminal (twice when set).
``--user`` names the person (default: the owner).
"""

from __future__ import annotations

import sys
from pathlib import Path

import sqlalchemy as sa
import typer

from noteloom.app import App, access_token
from noteloom.chat import rotation
from noteloom.chat.wiring import Stores
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, USAGE, fail, opened, print_json
from noteloom.cli.dates import show_date
from noteloom.errors import Locked
from noteloom.vault import DEFAULT_TTL_S, Vault, vault_windows
from noteloom.workspace import User

vault_app = typer.Typer(
    help="Your vault: the passphrase that seals private and fortress chats, its windows and keys.",
    no_args_is_help=True,
)

USER_OPTION = typer.Option(None, "--user", help="Whose vault (name or id; default: the owner).")
STDIN_OPTION = typer.Option(False, "--passphrase-stdin", help="Read the passphrase from stdin, never an argument.")
LOSS_WARNING = (
    "Keep this recovery key somewhere safe: it is shown only now. If you lose both your vault passphrase "
    "and this recovery key, your protected chats cannot be read by anyone, not even by you."
)


def register(app: typer.Typer) -> None:
    app.add_typer(vault_app, name="vault")


def _person(app: App, user: str | None) -> User:
    return app.workspace.find_person(user) if user else app.workspace.ensure_owner()


def _read_stdin() -> str:
    text = sys.stdin.read()
    line = text[:-1] if text.endswith("\n") else text
    line = line[:-1] if line.endswith("\r") else line
    if not line:
        fail("--passphrase-stdin read nothing: pipe the passphrase in (`printf %s PASSPHRASE | noteloom …`)", USAGE)
    return line


def _passphrase(prompt: str, from_stdin: bool, *, twice: bool = False) -> str:
    if from_stdin:
        return _read_stdin()
    first = str(typer.prompt(prompt, default="", show_default=False, hide_input=True, err=True))
    if not first:
        fail("no passphrase typed; nothing changed")
    if twice and str(typer.prompt("The same passphrase again", default="", show_default=False, hide_input=True,
                                  err=True)) != first:
        fail("the two passphrases differ; nothing changed")
    return first


@vault_app.command("init")
def init(user: str | None = USER_OPTION, passphrase_stdin: bool = STDIN_OPTION,
         home: Path | None = HOME_OPTION) -> None:
    """Set up the vault with a passphrase (not the web password) and show the recovery key once."""
    with opened(home) as app:
        person = _person(app, user)
        passphrase = _passphrase("Vault passphrase (at least 8 characters)", passphrase_stdin, twice=True)
        recovery = Vault(app.engine).create(person.id, passphrase)
    typer.echo(f"Vault set up for {person.name}.")
    typer.echo(f"Recovery key: {recovery}")
    typer.echo(LOSS_WARNING)


@vault_app.command("status")
def status(user: str | None = USER_OPTION, as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Whether there is a vault, its key generation, and the windows open now."""
    with opened(home) as app:
        person = _person(app, user)
        vault = Vault(app.engine)
        exists = vault.exists(person.id)
        w = vault_windows
        with app.workspace.read() as c:
            open_until = list(c.execute(sa.select(w.c.expires_time).where(
                w.c.user_id == person.id, w.c.expires_time > vault._wall())).scalars())
        out: dict[str, object] = {"user": person.name, "exists": exists, "generation": vault.generation(person.id) if exists else None,
               "open_windows": len(open_until), "latest_expiry": max(open_until) if open_until else None}
    if as_json:
        print_json(out)
        return
    if not exists:
        typer.echo(f"{person.name} has no vault; `noteloom vault init` sets one up.")
        return
    until = f", the last until {show_date(max(open_until))}" if open_until else ""
    typer.echo(f"{person.name}'s vault: key generation {out['generation']}, {len(open_until)} window(s) open{until}.")


@vault_app.command("unlock")
def unlock(
    user: str | None = USER_OPTION,
    recovery: bool = typer.Option(False, "--recovery", help="Use the recovery key and set a new passphrase."),
    minutes: float = typer.Option(DEFAULT_TTL_S / 60, "--minutes", min=1, max=24 * 60,
                                  help="How long the window stays open."),
    passphrase_stdin: bool = STDIN_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Open a window for the owner's API token (the one `noteloom token` prints), so what uses
    it reads protected chats; with --recovery, reset a lost passphrase with the recovery key."""
    if recovery and passphrase_stdin:
        fail("--recovery asks for the recovery key and the new passphrase at the terminal; run it there", USAGE)
    with opened(home) as app:
        person = _person(app, user)
        vault = Vault(app.engine)
        credential = access_token(app)
        if app.workspace.verify_token(credential).id != person.id:
            fail(f"the token `noteloom token` prints is not {person.name}'s: open their window from the web app")
        if recovery:
            key = _passphrase("Recovery key", False)
            new = _passphrase("New vault passphrase", False, twice=True)
            window = vault.open_window(person.id, credential, recovery_key=key, new_passphrase=new,
                                       ttl_s=minutes * 60)
        else:
            window = vault.open_window(person.id, credential, passphrase=_passphrase("Vault passphrase",
                                                                                     passphrase_stdin),
                                       ttl_s=minutes * 60)
    typer.echo(f"Unlocked for the API token until {show_date(window.expires_time)}.")


@vault_app.command("lock")
def lock(user: str | None = USER_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Close every window of the vault (every browser and token, on every worker)."""
    with opened(home) as app:
        person = _person(app, user)
        closed = Vault(app.engine).close_windows(person.id)
    typer.echo(f"Locked: {closed} window(s) closed.")


@vault_app.command("rotate")
def rotate(user: str | None = USER_OPTION, passphrase_stdin: bool = STDIN_OPTION,
           home: Path | None = HOME_OPTION) -> None:
    """Give the vault a new keypair and move every sealed value to it (asks the passphrase)."""
    with opened(home) as app:
        person = _person(app, user)
        vault = Vault(app.engine)
        vault.unlock(person.id, _passphrase("Vault passphrase", passphrase_stdin), ttl_s=3600)
        keys = vault.keys(person.id)
        if keys is None:
            raise Locked("the vault did not open")
        try:
            done = rotation.rotate(app.engine, Stores.open(app.workspace).attachments.blobs, keys)
        finally:
            vault.lock(person.id)
    typer.echo(f"Rotated: key generation {done.generation}; {done.resealed} sealed value(s) moved to it.")
