"""POST /mcp goes to its endpoint ahead of FastAPI's routing, and answers exactly as through it:
the credential and header middlewares still wrap it, failures are mapped as the app maps them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.errors import NotFound
from noteloom.mcp import McpServer
from noteloom.web.app import create_web_app

HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
PING = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode()


@pytest.fixture
def web_app(tmp_path: Path) -> Iterator[App]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text("[embeddings]\nenabled = false\n", encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        yield app
    finally:
        app.close()


def _client(app: App, **kw: Any) -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=create_web_app(app), **kw)
    return httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765")


def _auth(app: App) -> dict[str, str]:
    return {**HEADERS, "Authorization": f"Bearer {access_token(app)}"}


@pytest.mark.anyio
async def test_mcp_answers_within_the_credential_and_header_middlewares(web_app: App) -> None:
    async with _client(web_app) as http:
        r = await http.post("/mcp", content=PING, headers=_auth(web_app))
        assert r.status_code == 200 and r.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
        # The query string is no part of the path: the same endpoint answers.
        r = await http.post("/mcp?x=1", content=PING, headers=_auth(web_app))
        assert r.json()["id"] == 7
        r = await http.post("/mcp", content=PING, headers=HEADERS)
        assert r.status_code == 401
        r = await http.post("/mcp", content=PING, headers={**_auth(web_app), "Origin": "https://evil.example"})
        assert r.status_code == 403
        r = await http.get("/mcp", headers=_auth(web_app))
        assert r.status_code == 405 and r.headers["allow"] == "POST"


@pytest.mark.anyio
async def test_other_paths_still_go_through_the_routes(web_app: App) -> None:
    async with _client(web_app) as http:
        assert (await http.get("/health")).json()["status"] == "ok"
        r = await http.post("/mcp/", content=PING, headers=_auth(web_app))
        assert r.status_code != 200  # not the endpoint: FastAPI's routing decides
        r = await http.post("/mcpx", content=PING, headers=_auth(web_app))
        assert r.status_code == 404


@pytest.mark.anyio
async def test_a_domain_error_out_of_the_endpoint_is_mapped_as_the_app_maps_it(
    web_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def missing(self: McpServer) -> Any:
        raise NotFound("the settings row 'x' does not exist")

    monkeypatch.setattr(McpServer, "current_preflight", missing)
    async with _client(web_app) as http:
        r = await http.post("/mcp", content=PING, headers=_auth(web_app))
    assert r.status_code == 404
    assert r.json()["error"] == "not_found" and "does not exist" in r.json()["message"]


@pytest.mark.anyio
async def test_a_bug_out_of_the_endpoint_is_a_plain_500_and_reaches_the_server(
    web_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: McpServer) -> Any:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(McpServer, "current_preflight", broken)
    async with _client(web_app, raise_app_exceptions=False) as http:
        r = await http.post("/mcp", content=PING, headers=_auth(web_app))
    assert r.status_code == 500 and r.text == "Internal Server Error"
    assert "secret" not in r.text
    async with _client(web_app) as http:
        with pytest.raises(RuntimeError, match="secret detail"):  # raised on, for the server's log
            await http.post("/mcp", content=PING, headers=_auth(web_app))


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "HEAD", "GET", "DELETE"])
async def test_every_method_is_answered_as_the_route_answers_it(web_app: App, method: str) -> None:
    from noteloom.web.mcp_http import McpFirst

    full = create_web_app(web_app)
    routed = full
    while not isinstance(routed, McpFirst):  # the middlewares down to McpFirst, then its FastAPI app
        routed = routed.app
    headers = _auth(web_app)

    async def answer(asgi: Any) -> tuple[int, str, str]:
        transport = httpx2.ASGITransport(app=asgi)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
            r = await http.request(method, "/mcp", headers=headers)
        return r.status_code, r.headers.get("allow", ""), r.text

    # Past the credential check (done outside both), the route and the fast path agree.
    with_user = _WithUser(routed.app, web_app)
    assert await answer(full) == await answer(with_user)


class _WithUser:
    """The FastAPI app alone, with the user TokenAuth would have put in the scope."""

    def __init__(self, api: Any, app: App) -> None:
        self.api, self.user = api, app.workspace.verify_token(access_token(app))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        scope.setdefault("state", {})["user"] = self.user
        await self.api(scope, receive, send)
