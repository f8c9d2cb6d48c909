"""``noteloom token``: print the owner's token, make scoped tokens, list and revoke them.

Plain ``noteloom token`` prints the owner's full-access token (kept in a 0600 file) and
``--new`` rotates it, revoking every earlier token of the owner, exactly as before scopes
existed. ``--new`` with ``--user``, ``--name``, ``--read-only``, ``--tools``, ``--scope`` or
``--expires`` makes one more token instead, of that person (default: the owner) and
limited to what those say; it is printed once and only its hash is stored, so nothing can
show it again. ``list`` shows the live tokens and whose each is (never the tokens
themselves); ``revoke`` ends one by name or id, with its browser sessions.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json
from noteloom.errors import InvalidInput

token_app = typer.Typer(
    help="Print the access token (`--new` rotates it, or with --user/--name/--read-only/--tools/--scope/--expires "
    "makes one more, for that person or scoped); `list` and `revoke` the tokens.",
    invoke_without_command=True,
)

_DURATION = re.compile(r"^\s*(\d{1,6})\s*([mhdw])\s*$", re.I)
_UNIT_MS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def parse_expiry(value: str, now: int) -> int:
    """``30d``, ``12h``, ``90m``, ``2w`` from ``now``, or an ISO date/time → epoch ms."""
    m = _DURATION.match(value)
    if m:
        amount = int(m.group(1))
        if amount == 0:
            raise InvalidInput("expires must be a positive duration such as 30d, or a date", field="expires")
        return now + amount * _UNIT_MS[m.group(2).lower()]
    from noteloom.cli.dates import parse_date

    try:
        return parse_date(value, "expires")
    except InvalidInput:
        raise InvalidInput(
            f"expires {value!r} is neither a duration (30d, 12h, 90m, 2w) nor a date (YYYY-MM-DD or "
            "YYYY-MM-DDTHH:MM, UTC unless an offset is given)", field="expires") from None


@token_app.callback()
def token(
    ctx: typer.Context,
    home: Path | None = HOME_OPTION,
    new: bool = typer.Option(False, "--new", help="Revoke every earlier token and make a new one; with a scope "
                             "option below, make one more token limited to it instead (printed once)."),
    user: str | None = typer.Option(None, "--user", help="Whose token it is (name or id; default: the owner): "
                                    "MCP and the API act as that person."),
    name: str | None = typer.Option(None, "--name", help="The new token's name (for `list` and `revoke`)."),
    read_only: bool = typer.Option(False, "--read-only", help="Only tools that read; no writes over the API."),
    tools: str | None = typer.Option(None, "--tools", help="Only these tools, comma-separated."),
    scope: list[str] = typer.Option([], "--scope", help="Only notebooks matching these patterns (as "
                                    "`noteloom tools scope`: 'Work/*', '!Private'); repeat or comma-separate."),
    expires: str | None = typer.Option(None, "--expires", help="When the token stops working: 30d, 12h, 2w, or "
                                       "a date (YYYY-MM-DD, UTC)."),
) -> None:
    """Print a usable access token (``--new`` rotates it, or makes a scoped one)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = home  # `noteloom token --home H list` means the workspace in H
        return
    scoped = (user is not None or name is not None or read_only or tools is not None or bool(scope)
              or expires is not None)
    if scoped and not new:
        fail("--user, --name, --read-only, --tools, --scope and --expires describe a new token: add --new", 2)
    from noteloom.accounts import TokenScopes
    from noteloom.app import access_token
    from noteloom.db import now_ms

    with opened(home) as a:
        if not scoped:
            typer.echo(access_token(a, rotate=new))
            return
        allowed: frozenset[str] | None = None
        if tools is not None:
            names = [t.strip() for t in tools.split(",") if t.strip()]
            known = {t.name for t in a.registry.all()}
            unknown = [t for t in names if t not in known]
            if unknown or not names:
                raise InvalidInput(
                    f"tools must name tools that exist: no tool named {', '.join(map(repr, unknown))}; `noteloom tools list` shows them"
                    if unknown else "tools must name at least one tool (comma-separated)", field="tools")
            allowed = frozenset(names)
        patterns = tuple(p.strip() for s in scope for p in s.split(",") if p.strip())
        limits = TokenScopes(read_only=read_only, tools=allowed, notebooks=patterns)
        until = parse_expiry(expires, now_ms()) if expires is not None else None
        owner = a.workspace.ensure_owner()
        holder = a.workspace.find_person(user) if user is not None else owner
        made = a.workspace.create_token(holder.id, name=name or "default", scopes=limits, expires_time=until)
        typer.echo(made)
        typer.echo(f"(shown once: only its hash is kept; {holder.name}'s, {limits.describe()})", err=True)


@token_app.command("list")
def token_list(
    ctx: typer.Context,
    home: Path | None = HOME_OPTION,
    as_json: bool = JSON_OPTION,
    user: str | None = typer.Option(None, "--user", help="Only this person's tokens (name or id)."),
) -> None:
    """The live tokens: name, id, whose, created, expires, last used, scopes (never the token)."""
    from noteloom.cli.dates import show_date

    with opened(home or ctx.obj) as a:
        infos = a.workspace.list_tokens(a.workspace.find_person(user).id if user is not None else None)
        if as_json:
            print_json([{"id": i.id, "name": i.name, "user": i.user_name, "created_time": i.created_time,
                         "expires_time": i.expires_time, "last_used_time": i.last_used_time,
                         "scopes": i.scopes.to_json()} for i in infos])
            return
        if not infos:
            typer.echo("no live tokens (`noteloom token` makes one)")
            return
        for i in infos:
            typer.echo(
                f"{i.name}\t{i.id}\tuser {i.user_name}\tcreated {show_date(i.created_time)}\t"
                f"expires {show_date(i.expires_time) or 'never'}\tlast used {show_date(i.last_used_time) or 'never'}\t"
                f"{i.scopes.describe()}"
            )


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    name_or_id: str = typer.Argument(..., metavar="NAME_OR_ID", help="The token's name or id (`noteloom token list`)."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Revoke a token (and end the browser sessions started with it)."""
    with opened(home or ctx.obj) as a:
        info = a.workspace.revoke_token(name_or_id)
        typer.echo(f"revoked {info.name} ({info.id})")
