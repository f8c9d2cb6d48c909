"""OAuth 2.1 for remote MCP clients, with the official MCP client's OAuth support against a
real server on loopback: discovery from the 401, registration (dynamic, or a client ID
metadata document), the consent page's decision, PKCE, refresh, revocation, and the scopes
consented to holding on every call."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from api_support import app_with
from http_support import FakeDns, loopback_http, make_tls
from livesrv import LiveServer, live_server
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.errors import ConfigError
from noteloom.outbound import OutboundClient
from noteloom.web import oauth as oauth_web
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio
REDIRECT = "http://127.0.0.1:7/callback"  # never opened: the test plays the browser


@pytest.fixture
def oauth_app(tmp_path: Path) -> Iterator[App]:
    app = app_with(tmp_path / "home", '[mcp]\noauth = true\n\n[outbound]\nallow = ["127.0.0.1"]\n')
    ws = app.workspace
    work = ws.create_notebook("Work")
    home_book = ws.create_notebook("Home")
    ws.create_note("Quarterly plan", "The plan for the quarter: ship OAuth.", work.id)
    ws.create_note("Garden plan", "The plan for the garden: tomatoes.", home_book.id)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def live(oauth_app: App) -> Iterator[LiveServer]:
    with live_server(oauth_app) as srv:
        yield srv


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """The browser and the person in it: opens the authorization URL the client hands over,
    and answers the consent page as the signed-in owner (through the page's own API)."""

    def __init__(self, srv: LiveServer, *, approve: bool = True, write: bool = False,
                 notebooks: tuple[str, ...] = (), tools: list[str] | None = None) -> None:
        self.srv, self.approve, self.write, self.notebooks, self.tools = srv, approve, write, notebooks, tools
        self.url: str | None = None
        self.seen: dict[str, Any] = {}

    async def redirect(self, url: str) -> None:
        self.url = url

    async def callback(self) -> AuthorizationCodeResult:
        assert self.url is not None
        async with httpx2.AsyncClient(timeout=120) as http:
            first = await http.get(self.url, follow_redirects=False)
            assert first.status_code == 302, first.text
            consent = urlsplit(first.headers["location"])
            assert consent.path == "/oauth/consent"
            secret = parse_qs(consent.query)["request"][0]
            page = await http.get(self.srv.url + "/oauth/consent")
            assert page.status_code == 200 and "Allow an application" in page.text
            api = f"{self.srv.url}/api/v1/oauth/requests/{secret}"
            self.seen = (await http.get(api, headers=self.srv.auth)).json()
            answer = await http.post(f"{api}/decision", headers=self.srv.auth, json={
                "approve": self.approve, "write": self.write, "notebooks": list(self.notebooks),
                "tools": self.tools})
            assert answer.status_code == 200, answer.text
        back = urlsplit(answer.json()["redirect"])
        query = {k: v[0] for k, v in parse_qs(back.query).items()}
        assert f"{back.scheme}://{back.netloc}{back.path}" == REDIRECT
        if "error" in query:
            raise PermissionError(query["error"])
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def oauth_client(srv: LiveServer, person: Person, storage: Memory, *, metadata_url: str | None = None) -> Client:
    auth = OAuthClientProvider(
        srv.mcp_url,
        OAuthClientMetadata(client_name="Remote Notes Client", redirect_uris=[REDIRECT],  # type: ignore[list-item]
                            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                            token_endpoint_auth_method="none"),
        storage, redirect_handler=person.redirect, callback_handler=person.callback, client_metadata_url=metadata_url,
    )
    http = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(120))
    return Client(streamable_http_client(srv.mcp_url, http_client=http))  # type: ignore[arg-type]


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_the_official_client_discovers_registers_and_gets_only_what_was_consented(live: LiveServer) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        refused = await http.post(live.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401
    assert f'resource_metadata="{live.url}/.well-known/oauth-protected-resource/mcp"' in refused.headers[
        "www-authenticate"]

    person, storage = Person(live, write=False, notebooks=("Work",)), Memory()
    async with oauth_client(live, person, storage) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        found = await client.call_tool("search_notes", {"query": "plan"})
    # The consent page showed the client by the name it registered with, and where it goes back to.
    assert person.seen["client_name"] == "Remote Notes Client"
    assert person.seen["redirect_host"] == "127.0.0.1:7" and person.seen["verified_by_document"] is False
    assert {"Home", "Work"} <= set(person.seen["notebooks"])
    # Read-only and only Work: no write tool is listed, Home's note is not found.
    assert "search_notes" in names and not {"create_note", "update_note", "delete_note"} & names
    assert "Quarterly plan" in text_of(found) and "Garden plan" not in text_of(found)
    assert storage.tokens is not None and storage.tokens.scope == "notes:read notebook:Work"
    assert storage.client is not None and storage.client.client_id


async def test_the_tools_chosen_at_consent_are_all_the_client_sees(live: LiveServer, oauth_app: App) -> None:
    oauth_app.registry.set_enabled(oauth_app.workspace, "create_note", True)
    person = Person(live, write=False, tools=["search_notes", "read_note", "create_note"])
    async with oauth_client(live, person, Memory()) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    offered = {t["name"]: t["writes"] for t in person.seen["tools"]}
    assert offered["search_notes"] is False and offered["create_note"] is True
    # Read access: the write tool ticked is dropped; only the two read tools are there.
    assert names == {"search_notes", "read_note"}
    async with httpx2.AsyncClient(timeout=120) as http:
        client_id = await _register(http, live)
        _, challenge = _pkce()
        first = await http.get(live.url + "/oauth/authorize", params={
            "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
            "code_challenge_method": "S256"}, follow_redirects=False)
        secret = parse_qs(urlsplit(first.headers["location"]).query)["request"][0]
        api = f"{live.url}/api/v1/oauth/requests/{secret}/decision"
        foreign = await http.post(api, headers=live.auth, json={"approve": True, "tools": ["delete_everything"]})
        assert foreign.status_code == 422 and "delete_everything" in foreign.json()["message"]
        none = await http.post(api, headers=live.auth, json={"approve": True, "tools": ["create_note"]})
        assert none.status_code == 422 and "at least one tool" in none.json()["message"]


async def test_a_declined_consent_sends_the_client_back_with_access_denied(live: LiveServer) -> None:
    person = Person(live, approve=False)
    with pytest.raises(BaseException) as info:
        async with oauth_client(live, person, Memory()) as client:
            await client.list_tools()
    assert "access_denied" in repr(info.value) or "access_denied" in str(info.value.__cause__) or any(
        "access_denied" in str(e) for e in getattr(info.value, "exceptions", ()))


async def _metadata(live: LiveServer) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=120) as http:
        resource = (await http.get(live.url + "/.well-known/oauth-protected-resource/mcp")).json()
        server = (await http.get(live.url + "/.well-known/oauth-authorization-server")).json()
    return {"resource": resource, "server": server}


async def test_the_metadata_names_this_server_pkce_and_the_scopes(live: LiveServer) -> None:
    meta = await _metadata(live)
    assert meta["resource"]["resource"] == live.mcp_url
    assert meta["resource"]["authorization_servers"] == [live.url]
    server = meta["server"]
    assert server["issuer"] == live.url and server["code_challenge_methods_supported"] == ["S256"]
    assert server["client_id_metadata_document_supported"] is True
    assert server["scopes_supported"] == ["notes:read", "notes:write"]
    assert server["token_endpoint"] == live.url + "/oauth/token"


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


async def _code(http: httpx2.AsyncClient, live: LiveServer, client_id: str, challenge: str, *,
                write: bool = True) -> str:
    """Through /oauth/authorize and the consent decision to a code, by hand."""
    first = await http.get(live.url + "/oauth/authorize", params={
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
        "code_challenge_method": "S256", "state": "s1", "scope": "notes:read notes:write"}, follow_redirects=False)
    assert first.status_code == 302, first.text
    secret = parse_qs(urlsplit(first.headers["location"]).query)["request"][0]
    answer = await http.post(f"{live.url}/api/v1/oauth/requests/{secret}/decision", headers=live.auth,
                             json={"approve": True, "write": write})
    assert answer.status_code == 200, answer.text
    query = parse_qs(urlsplit(answer.json()["redirect"]).query)
    assert query["state"] == ["s1"] and query["iss"] == [live.url]
    return query["code"][0]


async def _register(http: httpx2.AsyncClient, live: LiveServer) -> str:
    reg = await http.post(live.url + "/oauth/register", json={
        "client_name": "By hand", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]})
    assert reg.status_code == 201, reg.text
    return str(reg.json()["client_id"])


async def test_a_code_needs_its_verifier_works_once_and_refresh_rotates_with_reuse_detection(live: LiveServer) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        client_id = await _register(http, live)
        verifier, challenge = _pkce()
        code = await _code(http, live, client_id, challenge)
        token_url = live.url + "/oauth/token"
        base = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
        wrong = await http.post(token_url, data={**base, "code_verifier": _pkce()[0]})
        assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
        good = await http.post(token_url, data={**base, "code_verifier": verifier})
        assert good.status_code == 200, good.text
        tokens = good.json()
        assert tokens["token_type"] == "Bearer" and tokens["scope"] == "notes:read notes:write"
        again = await http.post(token_url, data={**base, "code_verifier": verifier})
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

        async def ping(token: str) -> int:
            r = await http.post(live.mcp_url, headers={"Authorization": f"Bearer {token}"},
                                json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            return r.status_code

        assert await ping(tokens["access_token"]) == 200
        refreshed = await http.post(token_url, data={"grant_type": "refresh_token", "client_id": client_id,
                                                     "refresh_token": tokens["refresh_token"]})
        assert refreshed.status_code == 200, refreshed.text
        fresh = refreshed.json()
        assert fresh["access_token"] != tokens["access_token"] and fresh["scope"] == "notes:read notes:write"
        assert await ping(tokens["access_token"]) == 401, "the renewed access token is revoked"
        assert await ping(fresh["access_token"]) == 200

        # Revoking an access token takes the refresh token renewing it along (another consent).
        verifier2, challenge2 = _pkce()
        code2 = await _code(http, live, client_id, challenge2)
        other = await http.post(token_url, data={**base, "code": code2, "code_verifier": verifier2})
        assert other.status_code == 200, other.text
        revoked = await http.post(live.url + "/oauth/revoke", data={"token": other.json()["access_token"],
                                                                    "client_id": client_id})
        assert revoked.status_code == 200, revoked.text
        assert await ping(other.json()["access_token"]) == 401
        dead = await http.post(token_url, data={"grant_type": "refresh_token", "client_id": client_id,
                                                "refresh_token": other.json()["refresh_token"]})
        assert dead.status_code == 400 and dead.json()["error"] == "invalid_grant"

        # A used refresh token presented again: someone holds a copy, so its grant ends. The
        # tokens that replaced it stop working; the other consent's are not touched.
        verifier3, challenge3 = _pkce()
        code3 = await _code(http, live, client_id, challenge3)
        bystander = (await http.post(token_url, data={**base, "code": code3, "code_verifier": verifier3})).json()
        reused = await http.post(token_url, data={"grant_type": "refresh_token", "client_id": client_id,
                                                  "refresh_token": tokens["refresh_token"]})
        assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
        assert await ping(fresh["access_token"]) == 401, "the successor's access token is revoked"
        after = await http.post(token_url, data={"grant_type": "refresh_token", "client_id": client_id,
                                                 "refresh_token": fresh["refresh_token"]})
        assert after.status_code == 400 and after.json()["error"] == "invalid_grant"
        assert await ping(bystander["access_token"]) == 200
        renewed = await http.post(token_url, data={"grant_type": "refresh_token", "client_id": client_id,
                                                   "refresh_token": bystander["refresh_token"]})
        assert renewed.status_code == 200, renewed.text


async def test_the_flow_refuses_what_it_must(live: LiveServer, oauth_app: App) -> None:
    async with httpx2.AsyncClient(timeout=120) as http:
        client_id = await _register(http, live)
        _, challenge = _pkce()
        params = {"response_type": "code", "client_id": client_id, "code_challenge": challenge,
                  "code_challenge_method": "S256", "state": "s"}
        # A redirect URI the client did not register: an error here, never a redirect there.
        elsewhere = await http.get(live.url + "/oauth/authorize",
                                   params={**params, "redirect_uri": "https://evil.example/cb"}, follow_redirects=False)
        assert elsewhere.status_code == 400 and "evil.example" not in elsewhere.headers.get("location", "")
        # Another server's resource: refused back to the client.
        other = await http.get(live.url + "/oauth/authorize", params={
            **params, "redirect_uri": REDIRECT, "resource": "https://other.example/mcp"}, follow_redirects=False)
        assert other.status_code == 302 and "error=invalid_request" in other.headers["location"]
        # A script URL or plain http to another host cannot be registered.
        for bad in ("javascript:alert(1)", "http://evil.example/cb"):
            reg = await http.post(live.url + "/oauth/register", json={
                "client_name": "x", "redirect_uris": [bad], "token_endpoint_auth_method": "none"})
            assert reg.status_code == 400, (bad, reg.text)
        # The consent API wants the person: no credential, a read-only token, an unknown request.
        first = await http.get(live.url + "/oauth/authorize", params={**params, "redirect_uri": REDIRECT},
                               follow_redirects=False)
        secret = parse_qs(urlsplit(first.headers["location"]).query)["request"][0]
        api = f"{live.url}/api/v1/oauth/requests/{secret}"
        assert (await http.get(api)).status_code == 401
        owner = oauth_app.workspace.ensure_owner()
        from noteloom.accounts import TokenScopes
        read_only = oauth_app.workspace.create_token(owner.id, name="ro", scopes=TokenScopes(read_only=True))
        limited = await http.post(f"{api}/decision", headers={"Authorization": f"Bearer {read_only}"},
                                  json={"approve": True})
        assert limited.status_code == 403
        assert (await http.get(api + "x", headers=live.auth)).status_code == 404
        # A notebook that is not the person's cannot be granted; a decided request is gone.
        nowhere = await http.post(f"{api}/decision", headers=live.auth, json={"approve": True, "notebooks": ["Nope"]})
        assert nowhere.status_code == 422 and "Nope" in nowhere.json()["message"]
        done = await http.post(f"{api}/decision", headers=live.auth, json={"approve": True})
        assert done.status_code == 200
        twice = await http.post(f"{api}/decision", headers=live.auth, json={"approve": True})
        assert twice.status_code == 404


class Document(BaseHTTPRequestHandler):
    """Serves a client ID metadata document at /client.json (its URL is its client_id)."""

    body: bytes = b""

    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/client.json" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


async def test_a_client_known_by_its_metadata_document(oauth_app: App, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tls = make_tls(tmp_path, "client.noteloom.test")
    trusted = ssl.create_default_context(cafile=str(tls.ca))
    # The server fetches the document through its guarded client, here trusting the test's CA
    # and resolving the client's name to this machine (allowed by [outbound] allow).
    monkeypatch.setattr(oauth_web, "OutboundClient", lambda policy: OutboundClient(
        policy, resolve=FakeDns(client_noteloom_test=[["127.0.0.1"]]), ssl_context=trusted))
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(tls.cert, tls.key)
    with loopback_http(Document, tls=served) as port, live_server(oauth_app) as live:
        url = f"https://client.noteloom.test:{port}/client.json"
        Document.body = json.dumps({"client_id": url, "client_name": "Documented Client", "redirect_uris": [REDIRECT],
                                    "grant_types": ["authorization_code", "refresh_token"],
                                    "response_types": ["code"], "token_endpoint_auth_method": "none"}).encode()
        person, storage = Person(live, write=True), Memory()
        async with oauth_client(live, person, storage, metadata_url=url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
        assert person.seen["client_name"] == "Documented Client" and person.seen["verified_by_document"] is True
        assert "search_notes" in names
        assert storage.client is not None and storage.client.client_id == url
        # A document that names another client_id is not believed.
        Document.body = json.dumps({"client_id": "https://other.example/c.json", "redirect_uris": [REDIRECT]}).encode()
        async with httpx2.AsyncClient(timeout=120) as http:
            refused = await http.get(live.url + "/oauth/authorize", params={
                "response_type": "code", "client_id": url + "?v=2", "redirect_uri": REDIRECT,
                "code_challenge": _pkce()[1], "code_challenge_method": "S256"}, follow_redirects=False)
        assert refused.status_code == 400 and "not found" in refused.text


def test_off_by_default_on_loopback_and_beyond_loopback_it_needs_a_public_address(tmp_path: Path) -> None:
    app = app_with(tmp_path / "plain", "")
    try:
        with live_server(app) as srv:
            r = httpx2.get(srv.url + "/.well-known/oauth-authorization-server", timeout=120)
            assert r.status_code == 404
            challenge = httpx2.post(srv.mcp_url, json={}, timeout=120).headers["www-authenticate"]
            assert "resource_metadata" not in challenge
    finally:
        app.close()
    wide = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "plain")}, host="0.0.0.0"),
                    load_entry_points=False)
    try:
        with pytest.raises(ConfigError, match="public_url"):
            create_web_app(wide)
    finally:
        wide.close()
