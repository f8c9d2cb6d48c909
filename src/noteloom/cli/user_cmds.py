"""``noteloom users`` (people of the workspace: add, list, role, password, rm) and ``noteloom
share``/``unshare`` (a notebook for someone else to read or change).

The command line is the workspace's own: it acts with the owner's authority (``actor=None``
in :mod:`noteloom.people`), so it may do what the owner may. A password is never an
argument (it would sit in the shell's history and in ``ps``): it is read from stdin with
``--password-stdin``, or asked twice when a person is at the terminal. Removing someone
never decides silently what becomes of their notebooks: ``--transfer-to`` or ``--delete``,
or the question at the terminal; elsewhere the command refuses and says which to pass.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import typer

from noteloom.cli.common import HOME_OPTION, JSON_OPTION, USAGE, fail, opened, print_json
from noteloom.cli.dates import show_date
from noteloom.people import ROLES, Person

users_app = typer.Typer(
    help="The people of this workspace: add them, list them, set their role and web password, remove them.",
    no_args_is_help=True,
)

ROLE_CHOICES = ", ".join(r for r in ROLES if r != "owner")
PASSWORD_STDIN = typer.Option(False, "--password-stdin", help="Read the password from stdin (a pipe or a file), "
                              "never from an argument.")


def register(app: typer.Typer) -> None:
    app.add_typer(users_app, name="users")
    app.command("share")(share)
    app.command("unshare")(unshare)


def stdin_is_tty() -> bool:
    """Whether a person at the terminal can answer (a seam for tests)."""
    return sys.stdin.isatty()


def _password_from_stdin() -> str:
    text = sys.stdin.read()
    # One line: a file or `echo` ends it with a newline that is not part of the password.
    password = text[:-1] if text.endswith("\n") else text
    password = password[:-1] if password.endswith("\r") else password
    if not password:
        fail("--password-stdin read nothing: pipe the password in (`printf %s PASSWORD | noteloom …`)", USAGE)
    return password


def _ask_password(name: str, *, optional: bool) -> str | None:
    """The password typed twice at the terminal (``None``: left empty where that is allowed)."""
    hint = " (empty: none for now)" if optional else ""
    first = typer.prompt(f"Web password for {name}{hint}", default="", show_default=False, hide_input=True,
                         err=True)
    if not first:
        if optional:
            return None
        fail("no password typed; nothing changed")
    again = typer.prompt("The same password again", default="", show_default=False, hide_input=True, err=True)
    if again != first:
        fail("the two passwords differ; nothing changed")
    return str(first)


# -- users ----------------------------------------------------------------------------------


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="Their name, which they sign in with (one line, no '/')."),
    role: str = typer.Option("member", "--role", help=f"{ROLE_CHOICES}: an admin manages people and sees every "
                             "notebook; a member sees their own and those shared with them."),
    password_stdin: bool = PASSWORD_STDIN,
    home: Path | None = HOME_OPTION,
) -> None:
    """Add a person. Their web password comes from stdin (--password-stdin) or is asked at the terminal."""
    password = _password_from_stdin() if password_stdin else (
        _ask_password(name, optional=True) if stdin_is_tty() else None)
    with opened(home) as a:
        a.workspace.ensure_owner()
        person = a.workspace.add_person(name, role=role, password=password)
        typer.echo(f"added {person.name} ({person.role})")
        if password is None:
            typer.echo(f"{person.name} has no web password yet: `noteloom users password {person.name}` sets one "
                       f"(or `noteloom token --new --user {person.name}` for MCP and the API)", err=True)


@users_app.command("list")
def users_list(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Everyone: name, role, whether they have a web password, how many notebooks they own."""
    with opened(home) as a:
        a.workspace.ensure_owner()
        people = a.workspace.list_people()
        if as_json:
            print_json([p.to_json() for p in people])
            return
        width = max((len(p.name) for p in people), default=4)
        for p in people:
            books = f"{p.notebooks} notebook{'' if p.notebooks == 1 else 's'}"
            password = "password set" if p.has_password else "no password"
            typer.echo(f"{p.name:<{width}}  {p.role:<6}  {password:<12}  {books}")


@users_app.command("role")
def users_role(
    name: str = typer.Argument(..., help="The person, by name or id."),
    role: str = typer.Argument(..., help=ROLE_CHOICES),
    home: Path | None = HOME_OPTION,
) -> None:
    """Make someone an admin or a member (the owner stays the owner)."""
    with opened(home) as a:
        person = a.workspace.set_role(name, role)
        typer.echo(f"{person.name} is {'an' if person.role == 'admin' else 'a'} {person.role} now")


@users_app.command("password")
def users_password(
    name: str = typer.Argument(..., help="The person, by name or id."),
    clear: bool = typer.Option(False, "--clear", help="Remove their password: they can no longer sign in to the "
                               "web app with one."),
    password_stdin: bool = PASSWORD_STDIN,
    home: Path | None = HOME_OPTION,
) -> None:
    """Set someone's web password (asked twice, or from stdin); it signs out their password sessions."""
    if clear and password_stdin:
        fail("give --clear or --password-stdin, not both", USAGE)
    password: str | None = None
    if not clear:
        if password_stdin:
            password = _password_from_stdin()
        elif stdin_is_tty():
            password = _ask_password(name, optional=False)
        else:
            fail("no terminal to ask the password at: pipe it in with --password-stdin (or pass --clear)", USAGE)
    with opened(home) as a:
        person = a.workspace.find_person(name)
        a.workspace.set_password(person.id, password)
        done = "cleared" if password is None else "set"
        typer.echo(f"password {done} for {person.name}; their earlier browser sign-ins with a password have ended")


@users_app.command("rm")
def users_rm(
    name: str = typer.Argument(..., help="The person, by name or id."),
    transfer_to: str | None = typer.Option(None, "--transfer-to", help="Give their notebooks to this person."),
    delete: bool = typer.Option(False, "--delete", help="Move their notebooks to the trash (the owner can "
                                "restore them until it is emptied)."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Remove a person, with their chats, memories, recipes and tokens; their notebooks go to
    --transfer-to or to the trash (--delete). Without either, it asks."""
    if transfer_to is not None and delete:
        fail("give --transfer-to or --delete, not both", USAGE)
    with opened(home) as a:
        ws = a.workspace
        person = ws.find_person(name)
        if person.role == "owner":
            fail(f"{person.name} owns the workspace and cannot be removed")
        owned = next((p.notebooks for p in ws.list_people() if p.id == person.id), 0)
        what: Literal["transfer", "delete"] = "delete" if delete else "transfer"
        if transfer_to is None and not delete and owned:
            if not stdin_is_tty():
                fail(f"say what becomes of {person.name}'s {owned} notebook{'' if owned == 1 else 's'}: pass "
                     "--transfer-to NAME (someone else gets them) or --delete (to the trash)", USAGE)
            what, transfer_to = _ask_what_becomes(ws.list_people(), person.name, person.id, owned)
        elif transfer_to is None and not delete:
            what = "delete"  # nothing of theirs to decide about
        out = ws.remove_person(person.id, notebooks=what, transfer_to=transfer_to)
        if not owned:
            typer.echo(f"removed {person.name} (they owned no notebooks)")
        elif what == "transfer":
            typer.echo(f"removed {person.name}; their {owned} notebook{'' if owned == 1 else 's'} "
                       f"now belong{'s' if owned == 1 else ''} to {transfer_to}")
        else:
            typer.echo(f"removed {person.name}; their notebooks are in the trash ({out['notes_trashed']} "
                       "notes; `noteloom notes list --trash` shows them)")


def _ask_what_becomes(people: list[Person], name: str, person_id: str,
                      owned: int) -> tuple[Literal["transfer", "delete"], str | None]:
    others = [p.name for p in people if p.id != person_id]
    typer.echo(f"{name} owns {owned} notebook{'' if owned == 1 else 's'}. Transfer them to someone, "
               "or delete them (to the trash)?", err=True)
    answer = typer.prompt("[t]ransfer, [d]elete or [c]ancel", default="c", err=True).strip().lower()
    if answer in ("d", "delete"):
        return "delete", None
    if answer not in ("t", "transfer"):
        fail(f"cancelled; {name} is still here")
    heir = typer.prompt(f"Transfer to whom? ({', '.join(others)})", default="", show_default=False, err=True)
    heir = str(heir).strip()
    if not heir:
        fail(f"no one named; cancelled, {name} is still here")
    return "transfer", heir


# -- shares ---------------------------------------------------------------------------------


def share(
    notebook: str = typer.Argument(..., help="The notebook: title, Parent/Child path or id."),
    person: str | None = typer.Argument(None, help="Who may read it (and with --write, change it)."),
    write: bool = typer.Option(False, "--write", help="They may change it too (and its sub-notebooks)."),
    list_them: bool = typer.Option(False, "--list", help="Show who it is shared with instead."),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Share a notebook, with its sub-notebooks, for someone to read (or --write); --list shows its shares."""
    if list_them and (person is not None or write):
        fail("--list shows the notebook's shares: give no person and no --write with it", USAGE)
    if not list_them and person is None:
        fail("name the person to share it with, or pass --list to see who has it", USAGE)
    with opened(home) as a:
        ws = a.workspace
        book = ws.find_notebook(notebook)
        if list_them:
            shares = ws.notebook_shares(book.id)
            if as_json:
                print_json([s.to_json() for s in shares])
                return
            if not shares:
                typer.echo(f"{book.title} is not shared with anyone")
            for s in shares:
                typer.echo(f"{s.user_name}\t{s.access}\tsince {show_date(s.created_time)}")
            return
        assert person is not None
        made = ws.share_notebook(book.id, person, "write" if write else "read")
        if as_json:
            print_json(made.to_json())
            return
        may = "read and change" if made.access == "write" else "read"
        typer.echo(f"{made.user_name} may {may} {book.title} and its sub-notebooks")


def unshare(
    notebook: str = typer.Argument(..., help="The notebook: title, Parent/Child path or id."),
    person: str = typer.Argument(..., help="Whose share ends."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Stop sharing a notebook with someone."""
    with opened(home) as a:
        ws = a.workspace
        book = ws.find_notebook(notebook)
        who = ws.find_person(person)
        if not ws.unshare_notebook(book.id, who.id):
            fail(f"{book.title} is not shared with {who.name}; `noteloom share {book.title!r} --list` shows "
                 "who it is shared with")
        typer.echo(f"{book.title} is no longer shared with {who.name}")
