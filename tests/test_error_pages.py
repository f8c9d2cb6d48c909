"""Friendly error pages (web/error_pages.py): a browser's navigation that ends in 401, 403, 404,
405 or 500 gets a page saying what happened and what to do, with the same status; API clients
and the pages' own fetches keep the JSON errors unchanged, and /mcp is never touched."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from noteloom.accounts import TokenScopes
from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.plugins import hookimpl
from noteloom.web.app import create_web_app
from noteloom.web.error_pages import PAGES, error_page, wants_page

#: What Chromium sends when a person opens an address.
NAVIGATE = {
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
    "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document",
}
#: An old client without fetch metadata that prefers HTML.
HTML_ONLY = {"Accept": "text/html"}
#: The pages' own fetch() calls and API clients.
CLIENTS: list[dict[str, str]] = [
    {}, {"Accept": "*/*"}, {"Accept": "application/json"},
    {"Accept": "*/*", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
    {"Accept": "text/html", "Sec-Fetch-Mode": "cors"},
    {"Accept": "application/json, text/html;q=0.5"},
]
SECRET = "the-database-password-is-hunter2"


class Boom:
    """A plugin whose route fails, to provoke a 500 without a test route in the product."""

    @hookimpl
    def register_web_routes(self, register: Any) -> None:
        from fastapi import APIRouter

        router = APIRouter()

        @router.get("/fail")
        async def fail() -> None:
            raise RuntimeError(SECRET)

        register("boom", router)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "home")}), plugins=[Boom()], load_entry_points=False)
    try:
        yield a
    finally:
        a.close()


@asynccontextmanager
async def web(app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_web_app(app), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


def is_page(r: httpx.Response, status: int) -> bool:
    return (r.status_code == status and r.headers["content-type"].startswith("text/html")
            and f'data-status="{status}"' in r.text and PAGES[status].title in r.text
            and "script-src 'self'" in r.headers["content-security-policy"]
            and r.headers["cache-control"] == "no-store")


@pytest.mark.parametrize(("headers", "page"), [
    (NAVIGATE, True), (HTML_ONLY, True),
    ({"Accept": "text/html;q=0.9, application/json;q=0.5"}, True),
    ({"Accept": "application/xhtml+xml"}, True),
    ({"Sec-Fetch-Mode": "navigate"}, True),
    *[(h, False) for h in CLIENTS],
    ({"Accept": "text/html;q=0"}, False),
    ({"Accept": "text/html;q=oops"}, False),
    ({"Sec-Fetch-Mode": "no-cors", "Accept": "text/html"}, False),
])
def test_only_a_browsers_navigation_wants_a_page(headers: dict[str, str], page: bool) -> None:
    scope = {"type": "http", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    assert wants_page(scope) is page


@pytest.mark.anyio
async def test_an_api_address_opened_in_the_browser_without_a_session_says_to_sign_in(app: App) -> None:
    async with web(app) as c:
        r = await c.get("/api/v1/notes", headers=NAVIGATE)
        assert is_page(r, 401), r.text
        assert 'href="/">Sign in</a>' in r.text
        assert r.headers["www-authenticate"] == 'Bearer realm="noteloom"'
        assert "theme.js" in r.text and "noteloom.css" in r.text
        assert is_page(await c.get("/attachments/" + "0" * 32, headers=HTML_ONLY), 401)


@pytest.mark.anyio
async def test_clients_keep_the_json_errors_exactly(app: App) -> None:
    token = access_token(app)
    bearer = {"Authorization": f"Bearer {token}"}
    async with web(app) as c:
        for headers in CLIENTS:
            r = await c.get("/api/v1/notes", headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized", headers
            r = await c.get("/nope", headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized", headers
            r = await c.get("/api/v1/notes/" + "0" * 32, headers={**headers, **bearer})
            assert r.status_code == 404 and r.json()["error"] == "not_found", headers
            r = await c.get("/attachments/" + "0" * 32, headers={**headers, **bearer})
            assert r.status_code == 404 and r.json() == {"detail": f"no attachment {'0' * 32!r}"}, headers
            r = await c.get("/api/v1/auth/sign-in", headers=headers)
            assert r.status_code == 405 and r.json()["error"] == "method_not_allowed", headers


@pytest.mark.anyio
async def test_an_unknown_address_is_the_404_page_signed_in_or_not(app: App) -> None:
    bearer = {"Authorization": f"Bearer {access_token(app)}"}
    async with web(app) as c:
        for path in ("/nope", "/notes", "/api/v1/nope", "/static/nope.js"):
            assert is_page(await c.get(path, headers=NAVIGATE), 404), path
            assert is_page(await c.get(path, headers={**NAVIGATE, **bearer}), 404), path
        page = await c.get("/nope", headers=NAVIGATE)
        assert "Check the address" in page.text and 'href="/">Go to your notes</a>' in page.text
        head = await c.head("/nope", headers=NAVIGATE)
        assert head.status_code == 404 and head.content == b"" and head.headers["content-type"].startswith("text/html")


@pytest.mark.anyio
async def test_a_missing_attachment_opened_in_the_browser_is_the_404_page(app: App) -> None:
    bearer = {"Authorization": f"Bearer {access_token(app)}"}
    async with web(app) as c:
        assert is_page(await c.get("/attachments/" + "0" * 32, headers={**NAVIGATE, **bearer}), 404)
        assert is_page(await c.get("/api/v1/notes/" + "0" * 32, headers={**NAVIGATE, **bearer}), 404)


@pytest.mark.anyio
async def test_a_refused_scope_and_a_wrong_method_get_their_pages(app: App) -> None:
    owner = app.workspace.ensure_owner()
    tools_only = app.workspace.create_token(owner.id, name="tools", scopes=TokenScopes(tools=frozenset({"search_notes"})))
    async with web(app) as c:
        r = await c.get("/api/v1/notes", headers={**NAVIGATE, "Authorization": f"Bearer {tools_only}"})
        assert is_page(r, 403) and "Ask the workspace" in r.text
        r = await c.get("/api/v1/auth/sign-in", headers=NAVIGATE)
        assert is_page(r, 405) and r.headers["allow"] == "POST"


@pytest.mark.anyio
async def test_a_failure_is_the_500_page_without_the_error_and_clients_get_no_page(app: App) -> None:
    bearer = {"Authorization": f"Bearer {access_token(app)}"}
    async with web(app) as c:
        r = await c.get("/plugins/boom/fail?x=1", headers={**NAVIGATE, **bearer})
        assert is_page(r, 500)
        assert SECRET not in r.text and "Traceback" not in r.text and "RuntimeError" not in r.text
        assert '<a class="primary" href="">Try again</a>' in r.text
        plain = await c.get("/plugins/boom/fail", headers=bearer)
        assert plain.status_code == 500 and "<html" not in plain.text and SECRET not in plain.text


@pytest.mark.anyio
async def test_mcp_and_html_answers_are_never_replaced(app: App) -> None:
    async with web(app) as c:
        r = await c.get("/mcp", headers=NAVIGATE)
        assert "data-status" not in r.text
        r = await c.post("/mcp", headers=NAVIGATE, json={})
        assert "data-status" not in r.text
        shell = await c.get("/api/docs", headers=NAVIGATE)
        assert shell.status_code == 200 and "swagger-ui" in shell.text and "data-status" not in shell.text


def test_the_address_is_escaped_and_no_link_leaves_the_site() -> None:
    html = error_page(404, '/x"><script>alert(1)</script>', "a=<b>").decode()
    assert "<script>alert" not in html and "&lt;script&gt;" in html and "a=&lt;b&gt;" in html
    html = error_page(500, "//evil.example/x").decode()
    assert 'href="//evil.example' not in html
