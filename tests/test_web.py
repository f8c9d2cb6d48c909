"""The web surface: a header credential guards every route with data; pages are shells whose
notes come rendered, safely, from JSON routes."""

from __future__ import annotations

import time

import httpx2 as httpx
import pytest

from noteloom.app import App, access_token
from noteloom.web.app import create_web_app
from noteloom.web.render import render_markdown


@pytest.fixture
def client(app: App) -> httpx.Client:
    return httpx.Client(transport=httpx.ASGITransport(app=create_web_app(app)), base_url="http://testserver")


async def _get(app: App, path: str, **kw: object) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        return await c.get(path, **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_health_needs_no_token(app: App) -> None:
    r = await _get(app, "/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/api/v1/notes", "/api/v1/notebooks", "/api/v1/openapi.json",
                                  "/api/v1/notes/" + "0" * 32 + "/rendered", "/attachments/" + "0" * 32])
async def test_every_route_with_data_needs_the_token(app: App, path: str) -> None:
    r = await _get(app, path)
    assert r.status_code == 401
    assert "token" in r.json()["message"]
    bad = await _get(app, path, headers={"Authorization": "Bearer nl_wrong"})
    assert bad.status_code == 401


@pytest.mark.anyio
async def test_a_token_in_the_query_authenticates_nothing_and_sets_no_cookie(app: App) -> None:
    """A URL ends up in logs, history and Referer: only the page's script reads ?token=
    (to sign in, then drops it); the server neither accepts it nor puts it in a cookie."""
    token = access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        shell = await c.get(f"/?token={token}")
        assert shell.status_code == 200 and "set-cookie" not in shell.headers and token not in shell.text
        for path in ("/api/v1/notes", "/mcp"):
            r = await c.post(path, params={"token": token}) if path == "/mcp" else await c.get(path, params={"token": token})
            assert r.status_code == 401, path


@pytest.mark.anyio
async def test_pages_are_shells_and_their_data_comes_from_the_json_routes(app: App) -> None:
    ws = app.workspace
    token = access_token(app)
    book = ws.create_notebook("Garden")
    roses = ws.create_notebook("Roses", book.id)
    note = ws.create_note("Watering", "# Plan\n\n- **morning** only\n", book.id, tags=["outdoor"])
    auth = {"Authorization": f"Bearer {token}"}
    for path in ("/", f"/notebooks/{book.id}", f"/notes/{note.id}"):
        page = await _get(app, path, headers=auth)
        assert page.status_code == 200
        assert "Garden" not in page.text and "Watering" not in page.text  # even with the token
    books = (await _get(app, "/api/v1/notebooks", headers=auth)).json()
    assert {(b["title"], b["parent_id"]) for b in books} >= {("Garden", None), ("Roses", book.id)}
    assert roses.id in {b["id"] for b in books}
    listing = (await _get(app, f"/api/v1/notes?notebook_id={book.id}", headers=auth)).json()
    assert [n["title"] for n in listing["notes"]] == ["Watering"]
    rendered = (await _get(app, f"/api/v1/notes/{note.id}/rendered", headers=auth)).json()
    assert "<strong>morning</strong>" in rendered["html"] and rendered["tags"] == ["outdoor"]
    missing = await _get(app, "/api/v1/notes/" + "f" * 32 + "/rendered", headers=auth)
    assert missing.status_code == 404


def test_unsafe_html_in_notes_is_removed() -> None:
    html = render_markdown(
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n[x](javascript:alert(3))\n\n'
        '<a href="javascript:alert(4)">y</a> <a href="https://ok.example">ok</a> ![p](:/' + "a" * 32 + ")"
    )
    assert "<script" not in html and "onerror" not in html and 'href="javascript' not in html
    assert 'href="https://ok.example"' in html
    assert f'src="/attachments/{"a" * 32}"' in html


@pytest.mark.anyio
async def test_attachments_are_served_only_with_the_token(app: App) -> None:
    note = app.workspace.create_note("pic", "")
    att = app.workspace.add_attachment(note.id, b"hello", "hello.txt")
    token = access_token(app)
    assert (await _get(app, f"/attachments/{att.id}")).status_code == 401
    r = await _get(app, f"/attachments/{att.id}", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.content == b"hello"
    assert r.headers["content-security-policy"] == "sandbox"
    assert r.headers["x-content-type-options"] == "nosniff"


@pytest.mark.anyio
async def test_served_connections_send_without_waiting_for_acks() -> None:
    """Accepted connections have TCP_NODELAY, so a response written as head + body is not
    held back ~40 ms by the peer's delayed ACK."""
    import asyncio
    import socket

    from noteloom.web.listen import listen_socket

    seen: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    sock = listen_socket("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
    assert seen and seen[0] != 0


def test_a_group_of_sockets_shares_one_port_and_the_kernel_spreads_connections_over_them() -> None:
    """One socket per server process (``serve --workers N``): new connections are spread
    over the group, where one shared socket gave a burst of them to one process."""
    import select
    import socket

    from noteloom.errors import ConfigError
    from noteloom.web.listen import listen_socket, listen_sockets

    group = listen_sockets("127.0.0.1", 0, 2)
    port = group[0].getsockname()[1]
    clients: list[socket.socket] = []
    try:
        assert [s.getsockname()[1] for s in group] == [port, port]
        for _ in range(32):
            clients.append(socket.create_connection(("127.0.0.1", port)))
        accepted = [0, 0]
        for s in group:
            s.setblocking(False)
        deadline = time.monotonic() + 60
        while sum(accepted) < 32 and time.monotonic() < deadline:
            ready, _, _ = select.select(group, [], [], 0.1)
            for s in ready:
                conn, _ = s.accept()
                conn.close()
                accepted[group.index(s)] += 1
        assert sum(accepted) == 32
        assert min(accepted) > 0, accepted
        # The port is taken: neither a plain server nor another group may join it.
        with pytest.raises(ConfigError, match="in use"):
            listen_socket("127.0.0.1", port)
        with pytest.raises(ConfigError, match="in use"):
            listen_sockets("127.0.0.1", port, 2)
    finally:
        for c in clients:
            c.close()
        for s in group:
            s.close()


def test_a_port_in_use_is_a_clear_error() -> None:
    from noteloom.errors import ConfigError
    from noteloom.web.listen import listen_socket

    first = listen_socket("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError, match="in use"):
            listen_socket("127.0.0.1", first.getsockname()[1])
    finally:
        first.close()


def test_vendored_browser_assets_are_the_pinned_packages() -> None:
    """`make assets` pins exact versions (no ranges), the lock file agrees, and what is
    committed under static/vendor is that version, with its licence, and nothing unused."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    wanted = json.loads((root / "assets" / "package.json").read_text())["dependencies"]
    locked = json.loads((root / "assets" / "package-lock.json").read_text())["packages"]
    vendor = root / "src" / "noteloom" / "web" / "static" / "vendor"
    assert wanted, "no pinned packages"
    for name, version in wanted.items():
        assert version[0].isdigit() and not set(version) & set("^~<>=* x"), (name, version)
        assert locked[f"node_modules/{name}"]["version"] == version
    bundle = vendor / "swagger-ui" / "swagger-ui-bundle.js"
    assert f'"{wanted["swagger-ui-dist"]}"' in bundle.read_text(encoding="utf-8")
    files = sorted(p.name for p in (vendor / "swagger-ui").iterdir())
    assert files == ["LICENSE", "NOTICE", "swagger-ui-bundle.js", "swagger-ui-bundle.js.LICENSE.txt", "swagger-ui.css"]
