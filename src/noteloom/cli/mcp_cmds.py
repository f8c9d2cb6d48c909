"""``noteloom mcp`` (the stdio MCP server and its switch) and ``noteloom tools`` (toggles, policies, scope)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from noteloom.app import App
from noteloom.cli.common import HOME_OPTION, JSON_OPTION, fail, opened, print_json
from noteloom.policy import (
    POLICIES,
    PolicySources,
    check_policy,
    configured,
    default_words,
    set_policy,
)
from noteloom.tools import SCOPE_KEY, NotebookScope, ToolDef, scope_from_setting

mcp_app = typer.Typer(
    help="Serve the notes to AI apps over MCP on stdin/stdout; `enable`/`disable` switch MCP on or off.",
    invoke_without_command=True,
)
tools_app = typer.Typer(
    help="The tools AI apps and the chat may use: list them, turn them on or off, set whether they ask first, "
    "limit them to notebooks.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(mcp_app, name="mcp")
    app.add_typer(tools_app, name="tools")


# -- mcp ----------------------------------------------------------------------------------


USER_OPTION = typer.Option(None, "--user", help="Act as this person (name or id): the tools see what they may "
                           "see and change what they may change. Default: the workspace's owner.")


@mcp_app.callback()
def mcp_stdio(
    ctx: typer.Context,
    home: Path | None = HOME_OPTION,
    user: str | None = USER_OPTION,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request to stderr."),
) -> None:
    """Without a subcommand: serve MCP over stdio as the owner (or --user), until stdin ends."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = (home, user, verbose)  # `noteloom mcp --user ann stdio` means ann too
        return
    _serve_stdio(home, user, verbose)


@mcp_app.command("stdio")
def mcp_stdio_named(
    ctx: typer.Context,
    home: Path | None = HOME_OPTION,
    user: str | None = USER_OPTION,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request to stderr."),
) -> None:
    """Serve MCP over stdio as the owner (or --user), until stdin ends: the same as plain `noteloom mcp`."""
    outer_home, outer_user, outer_verbose = ctx.obj or (None, None, False)
    _serve_stdio(home or outer_home, user or outer_user, verbose or outer_verbose)


def _serve_stdio(home: Path | None, user: str | None, verbose: bool) -> None:
    import logging

    import anyio

    from noteloom.mcp import McpServer, configure_stderr_logging, serve_stdio
    from noteloom.postings import serving

    # stdout carries the protocol alone: keep a private handle on it, then point fd 1
    # (and sys.stdout) at stderr so a stray print or a C library cannot corrupt it.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    configure_stderr_logging(logging.DEBUG if verbose else logging.WARNING)
    try:
        with opened(home) as a:
            owner = a.workspace.ensure_owner()
            # An unknown name fails the command here (one line on stderr), before any request.
            person = a.workspace.find_person(user) if user is not None else owner
            with serving():
                anyio.run(serve_stdio, McpServer(a), person, sys.stdin.buffer, protocol_out)
    except KeyboardInterrupt:
        pass
    finally:
        protocol_out.close()


@mcp_app.command("enable")
def mcp_enable(home: Path | None = HOME_OPTION) -> None:
    """Let AI apps in over MCP (HTTP at /mcp and stdio). This is the default."""
    from noteloom.mcp import ENABLED_KEY

    with opened(home) as a:
        a.workspace.set_setting(ENABLED_KEY, True)
        typer.echo("MCP is on")


@mcp_app.command("disable")
def mcp_disable(home: Path | None = HOME_OPTION) -> None:
    """Turn MCP off: /mcp answers 403 and `noteloom mcp` refuses every request."""
    from noteloom.mcp import ENABLED_KEY

    with opened(home) as a:
        a.workspace.set_setting(ENABLED_KEY, False)
        typer.echo("MCP is off")


@mcp_app.command("status")
def mcp_status(home: Path | None = HOME_OPTION) -> None:
    """Say whether MCP is on, where it listens and which tools it offers."""
    from noteloom.cli.server_cmds import read_runtime
    from noteloom.mcp import mcp_enabled

    with opened(home) as a:
        on = mcp_enabled(a.workspace)
        # The port a running `noteloom serve` wrote down, not the configured default.
        running = read_runtime(a.settings.data_dir)
        typer.echo(f"MCP is {'on' if on else 'off'}")
        if running is None:
            host = _shown_host(a.settings.host)
            typer.echo(f"  http:  not running (`noteloom serve` would serve http://{host}:{a.settings.port}/mcp)")
        else:
            host = _shown_host(str(running.get("host") or a.settings.host))
            typer.echo(f"  http:  http://{host}:{running['port']}/mcp (served by process {running['pid']})")
        typer.echo("  stdio: noteloom mcp (--user NAME: as that person)")
        typer.echo(f"  tools: {', '.join(t.name for t in a.registry.enabled(a.workspace)) or '(none)'}")


def _shown_host(host: str) -> str:
    return "localhost" if host in ("127.0.0.1", "::1", "localhost") else host


def _outer_home(ctx: typer.Context, home: Path | None) -> Path | None:
    """``--home`` given to the command, else to ``noteloom mcp`` before it."""
    return home if home is not None else (ctx.obj or (None, None, False))[0]


@mcp_app.command("bundle")
def mcp_bundle(
    ctx: typer.Context,
    home: Path | None = HOME_OPTION,
    out: Path = typer.Option(Path("noteloom.mcpb"), "--out", "-o", help="The file to write."),
) -> None:
    """Write an .mcpb bundle that installs this workspace's MCP server in Claude Desktop in one click.

    It starts this machine's noteloom by its full path with --home filled in: open the file
    with Claude Desktop (or drag it onto Settings → Extensions)."""
    from noteloom.mcp.bundle import write_bundle

    with opened(_outer_home(ctx, home)) as a:
        try:
            path = write_bundle(a, out)
        except (LookupError, OSError) as exc:
            fail(f"no bundle written: {exc}")
        typer.echo(f"wrote {path} (serves {a.settings.data_dir}); open it with Claude Desktop to install")


@mcp_app.command("config")
def mcp_config(
    ctx: typer.Context,
    client: str = typer.Option(..., "--client", "-c", help="The AI app: one of the names `--client list` shows."),
    transport: str | None = typer.Option(None, "--transport", "-t", help="stdio or http (default: the app's usual)."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Print the configuration snippet that connects an AI app to this workspace (this machine's paths;
    for HTTP, [mcp] public_url when set, else the local address)."""
    from noteloom.mcp.clients import CLIENTS, for_machine, render

    if client == "list":
        for c in CLIENTS:
            typer.echo(f"{c.name:<16} {c.title} ({', '.join(c.transports)})")
        return
    from noteloom.cli.server_cmds import read_runtime
    from noteloom.web.oauth import configured_base

    with opened(_outer_home(ctx, home)) as a:
        # The public address when [mcp] public_url names one, else where serve listens here.
        public = configured_base(a)
        running = read_runtime(a.settings.data_dir)
        host = _shown_host(str((running or {}).get("host") or a.settings.host))
        url = f"{public}/mcp" if public else f"http://{host}:{(running or {}).get('port') or a.settings.port}/mcp"
        try:
            snippet = render(client, transport, for_machine(a.settings.data_dir, url))
        except LookupError as exc:  # an unknown app or transport (KeyError), no noteloom command
            fail(str(exc.args[0]))
        typer.echo(snippet.text, nl=False)
        if snippet.where:
            typer.echo(f"# {snippet.where}", err=True)


# -- tools ----------------------------------------------------------------------------------


def _tool(a: App, name: str) -> ToolDef:
    names = [t.name for t in a.registry.all()]
    if name not in names:
        fail(f"no tool named {name!r}; `noteloom tools list` shows the {len(names)} there are")
    return a.registry.get(name)


@tools_app.command("list")
def tools_list(as_json: bool = JSON_OPTION, home: Path | None = HOME_OPTION) -> None:
    """Every tool, whether it is on, what it may do (read, write, destructive) and its policy.

    The policy column: auto (runs), confirm (asks first), deny (never runs); confirm* asks
    for some calls only (update_note replacing a body, manage_tags removing tags …)."""
    with opened(home) as a:
        enabled = {t.name for t in a.registry.enabled(a.workspace)}
        sources = PolicySources.read(a.workspace.settings_with_prefix("tool."), a.settings.file)
        rows: list[dict[str, str | bool | None]] = [
            {
                "name": t.name,
                "enabled": t.name in enabled,
                "effect": t.effect,
                "default": t.enabled_by_default,
                "policy": configured(t, sources) or default_words(t),
                "policy_default": default_words(t),
                "title": t.title or "",
            }
            for t in a.registry.all()
        ]
        if as_json:
            print_json(rows)
            return
        width = max((len(str(r["name"])) for r in rows), default=4)
        for r in rows:
            state = "on " if r["enabled"] else "off"
            default = "" if r["enabled"] == r["default"] else f"  (default {'on' if r['default'] else 'off'})"
            typer.echo(f"{r['name']:<{width}}  {state}  {r['effect']:<11}  {r['policy']:<8}  {r['title']}{default}")
        for left in a.left_out:  # why a tool is missing from the list
            typer.echo(f"note: {left.reason()}", err=True)


@tools_app.command("policy")
def tools_policy(
    name: str = typer.Argument(..., help="The tool, e.g. update_note."),
    policy: str | None = typer.Argument(None, help="auto (runs), confirm (asks first) or deny (never runs)."),
    clear: bool = typer.Option(False, "--clear", help="Back to the tool's default."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Set whether a tool's calls run, ask first or are refused, on every surface; without a policy, show it.

    noteloom.toml [agent.tool_policies] wins over this setting; deny wins wherever it is set."""
    if clear and policy is not None:
        fail("give a policy or --clear, not both")
    if policy is not None and policy not in POLICIES:
        fail(f"{policy!r} is not a policy; use one of {', '.join(POLICIES)}")
    with opened(home) as a:
        tool = _tool(a, name)
        if clear or policy is not None:
            set_policy(a.workspace, tool.name, None if clear else check_policy(policy))
        sources = PolicySources.read(a.workspace.settings_with_prefix("tool."), a.settings.file)
        now = configured(tool, sources)
        if now is None:
            typer.echo(f"{tool.name}: {default_words(tool)} (the tool's default)")
        else:
            overruled = "" if policy is None or now == policy else " (noteloom.toml overrules this setting)"
            typer.echo(f"{tool.name}: {now}{overruled}")


def _toggle(names: list[str], all_tools: bool, on: bool, home: Path | None) -> None:
    if not names and not all_tools:
        fail("name the tools (`noteloom tools list` shows them), or pass --all")
    with opened(home) as a:
        tools = a.registry.all() if all_tools else [_tool(a, n) for n in names]
        for t in tools:
            a.registry.set_enabled(a.workspace, t.name, on)
        typer.echo(f"{'on' if on else 'off'}: {', '.join(t.name for t in tools)}")


@tools_app.command("enable")
def tools_enable(
    names: list[str] = typer.Argument(None, help="Tool names, e.g. create_note update_note."),
    all_tools: bool = typer.Option(False, "--all", help="Every tool, write tools included."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Turn tools on (write tools are off until you turn them on)."""
    _toggle(names or [], all_tools, True, home)


@tools_app.command("disable")
def tools_disable(
    names: list[str] = typer.Argument(None, help="Tool names."),
    all_tools: bool = typer.Option(False, "--all", help="Every tool."),
    home: Path | None = HOME_OPTION,
) -> None:
    """Turn tools off: they disappear from MCP, the chat and recipes."""
    _toggle(names or [], all_tools, False, home)


@tools_app.command("scope")
def tools_scope(
    patterns: list[str] = typer.Argument(
        None, help="Notebook titles or paths, wildcards allowed ('Work', 'Work/*', 'Projects*'); '!' excludes."
    ),
    clear: bool = typer.Option(False, "--clear", help="Remove the limit: tools see every notebook."),
    as_json: bool = JSON_OPTION,
    home: Path | None = HOME_OPTION,
) -> None:
    """Show or set which notebooks tools may see and touch; without patterns, show the scope."""
    if clear and patterns:
        fail("give patterns or --clear, not both")
    with opened(home) as a:
        ws = a.workspace
        if clear:
            ws.delete_setting(SCOPE_KEY)
        elif patterns:
            scope = NotebookScope(patterns)
            if not scope.patterns:
                fail("the patterns are all empty; give notebook titles or paths, or --clear")
            ws.set_setting(SCOPE_KEY, scope.patterns)
        scope = scope_from_setting(ws.get_setting(SCOPE_KEY))
        books = ws.list_notebooks(with_counts=False)
        allowed = scope.allowed_ids(books)
        by_id = {b.id: b for b in books}

        def path(book_id: str) -> str:
            parts: list[str] = []
            cur = by_id.get(book_id)
            while cur is not None and len(parts) < 64:
                parts.append(cur.title)
                cur = by_id.get(cur.parent_id) if cur.parent_id else None
            return "/".join(reversed(parts))

        visible = sorted(path(b.id) for b in books if allowed is None or b.id in allowed)
        if as_json:
            print_json({"patterns": scope.patterns, "notebooks": visible})
            return
        if scope.unrestricted:
            typer.echo("tools may use every notebook (no scope set)")
            return
        typer.echo(f"scope: {' '.join(scope.patterns)}")
        typer.echo(f"notebooks tools may use ({len(visible)}):" if visible else "no notebook matches: tools see no notes")
        for p in visible:
            typer.echo(f"  {p}")
