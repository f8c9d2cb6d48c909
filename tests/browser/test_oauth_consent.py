"""The OAuth consent page in a real browser: a remote client's authorization request lands
there, the person signs in, chooses read or read-write and some notebooks, and the browser
goes back to the client with a code the client trades for a token carrying exactly that;
Deny sends it back with access_denied. axe finds nothing serious on the page."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2 as httpx
import pytest
from page_support import ARTIFACTS, DESK, PHONE, Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

CALLBACK = "http://127.0.0.1:7/callback"  # never reached: the test answers it in the browser
AXE = Path(__file__).with_name("vendor") / "axe.min.js"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("oauth-consent")
    (home / "noteloom.toml").write_text("[mcp]\noauth = true\n", encoding="utf-8")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        for title in ("Work", "Home"):
            ws.create_note(f"{title} note", "text", ws.create_notebook(title).id)
        app.registry.set_enabled(ws, "create_note", True)
        token = access_token(app)
    finally:
        app.close()
    with served(home) as url:
        yield Live(url, token, home, {})


def authorize_url(live: Live) -> tuple[str, str, str]:
    """A registered client's authorization URL, its client ID and its PKCE verifier."""
    reg = httpx.post(live.url + "/oauth/register", timeout=60, json={
        "client_name": "Browser Client", "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})
    reg.raise_for_status()
    client_id = reg.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": CALLBACK, "state": "st",
                       "code_challenge": challenge, "code_challenge_method": "S256",
                       "scope": "notes:read notes:write"})
    return f"{live.url}/oauth/authorize?{query}", client_id, verifier


def open_consent(browser: Any, live: Live, viewport: dict[str, int]) -> tuple[Any, Any, list[str], str, str]:
    """A fresh browser at the consent page of a new request, signed in with the token."""
    url, client_id, verifier = authorize_url(live)
    context = browser.new_context(viewport=viewport)
    landed: list[str] = []

    def callback(route: Any) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<title>back</title><p>back at the client</p>")

    context.route(CALLBACK + "*", callback)
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    expect(page).to_have_url(f"{live.url}/oauth/consent?request=" + page.url.split("request=")[-1])
    # Not signed in: the page asks first, then shows the request.
    page.locator("#sign-in-token").fill(live.token)
    page.get_by_role("button", name="Sign in with the token").click()
    expect(page.locator("#consent-form")).to_be_visible()
    return context, page, landed, client_id, verifier


def axe_findings(page: Any) -> list[str]:
    page.evaluate(AXE.read_text(encoding="utf-8"))
    found = page.evaluate("""async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
        .filter((v) => ["serious", "critical"].includes(v.impact) || v.id === "landmark-one-main"
                       || v.id === "page-has-heading-one")
        .map((v) => v.id + ": " + v.help)""")
    return list(found)


@pytest.mark.parametrize("size", ["desk", "phone"])
def test_allow_read_for_one_notebook_sends_a_code_the_client_trades_for_exactly_that(
        browser: Any, live: Live, size: str) -> None:
    context, page, landed, client_id, verifier = open_consent(browser, live, DESK if size == "desk" else PHONE)
    try:
        expect(page.locator("#consent-client")).to_have_text("Browser Client")
        expect(page.locator("#consent-redirect")).to_have_text("127.0.0.1:7")
        expect(page.locator("#consent-unverified")).to_be_visible()  # a registered client's name is its own claim
        assert axe_findings(page) == []
        page.get_by_label("Work").check()
        # The tools: a write tool shows only once changes are allowed; untick one read tool.
        write_tool = page.locator("#consent-tools input[value='create_note']")
        expect(write_tool).to_be_hidden()
        page.get_by_label("Read and change your notes", exact=False).check()
        expect(write_tool).to_be_visible()
        page.get_by_label("Read your notes", exact=False).check()
        expect(write_tool).to_be_hidden()
        page.locator("#consent-tools input[value='list_tags']").uncheck()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"oauth-consent-form-{size}.png"))
        page.get_by_role("button", name="Allow").click()
        expect(page.get_by_text("back at the client")).to_be_visible()
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"oauth-consent-allow-{size}.png"))
        context.close()
    query = parse_qs(urlsplit(landed[-1]).query)
    assert query["state"] == ["st"] and query["iss"] == [live.url]
    tokens = httpx.post(live.url + "/oauth/token", timeout=60, data={
        "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": CALLBACK,
        "client_id": client_id, "code_verifier": verifier}).json()
    assert tokens["scope"].startswith("notes:read notebook:Work tool:")
    granted = {s.removeprefix("tool:") for s in tokens["scope"].split() if s.startswith("tool:")}
    assert "search_notes" in granted and "list_tags" not in granted and "create_note" not in granted
    listed = httpx.post(live.url + "/mcp", timeout=60, headers={"Authorization": f"Bearer {tokens['access_token']}"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "search_notes", "arguments": {"query": "note"}}}).json()
    text = listed["result"]["content"][0]["text"]
    assert "Work note" in text and "Home note" not in text


def test_deny_sends_the_client_back_with_access_denied(browser: Any, live: Live) -> None:
    context, page, landed, _, _ = open_consent(browser, live, PHONE)
    try:
        page.get_by_role("button", name="Deny").click()
        expect(page.get_by_text("back at the client")).to_be_visible()
    finally:
        context.close()
    query = parse_qs(urlsplit(landed[-1]).query)
    assert query["error"] == ["access_denied"] and query["state"] == ["st"]
