"""OAuth 2.1 for remote MCP clients: noteloom as its own authorization server.

On when ``[mcp] oauth = true`` in noteloom.toml; by default on exactly when ``serve``
listens on an address other than loopback (a remote client such as ChatGPT cannot be handed
a token file). Local bearer tokens keep working either way.

What a client sees (the MCP authorization spec, 2025-06-18 and later):

- ``/mcp`` without a credential answers 401 with ``WWW-Authenticate: Bearer
  resource_metadata="…/.well-known/oauth-protected-resource/mcp"``;
- protected-resource metadata (RFC 9728) names this server as the authorization server;
  its metadata (RFC 8414) lists the endpoints, PKCE S256, the scopes, and says client ID
  metadata documents are accepted;
- a client registers itself (``/oauth/register``, RFC 7591) or uses the HTTPS URL of its
  client ID metadata document as its ``client_id`` (fetched through the guarded outbound
  client, so it cannot reach this machine's network unless ``[outbound] allow`` says so);
- ``/oauth/authorize`` (authorization code + PKCE, the redirect URI checked against the
  client's) sends the browser to the consent page, ``/oauth/consent``: the person signs
  in as on any page and sees the client, where it will send them back, and what it asks;
  they choose read or read-write and, if they like, some notebooks only;
- ``/oauth/token`` trades the code (once, with the PKCE verifier) for an access token and a
  refresh token; a refresh token is used once and replaced, and the access token it renewed
  is revoked; one presented again after its use ends the grant it descends from (its
  successor and that one's access token are revoked: RFC 9700's reuse detection);
  ``/oauth/revoke`` takes either back.

The protocol's pieces are the MCP SDK's handlers (``mcp.server.auth``); what they are
given to work with is :class:`Provider`, over :class:`noteloom.oauth.OAuthStore` and the
workspace's API tokens (an access token is a scoped API token, so everything that honours
those honours it). TLS is terminated in front (see docs/remote.md) or by uvicorn; the
metadata names the address of ``[mcp] public_url``, required when listening beyond loopback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import BaseModel, Field, ValidationError
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response

from noteloom.app import App
from noteloom.db import new_id, now_ms
from noteloom.errors import ConfigError, NotFound, OutboundRefused, Unavailable
from noteloom.oauth import (
    ACCESS_TTL_MS,
    CODE_TTL_MS,
    DOCUMENT_TTL_MS,
    NOTEBOOK_PREFIX,
    REFRESH_TTL_MS,
    REQUEST_TTL_MS,
    SUPPORTED_SCOPES,
    TOOL_PREFIX,
    WRITE_SCOPE,
    OAuthStore,
    granted_scopes,
    token_scopes,
)
from noteloom.outbound import OutboundClient, OutboundPolicy
from noteloom.web.access import request_scope, token_scopes_of
from noteloom.web.api_base import (
    ERRORS,
    ApiError,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)
from noteloom.web.pages import templates

log = logging.getLogger("noteloom.oauth")

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
MCP_PATH = "/mcp"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
#: The paths the flow answers without a credential (the consent page's data needs one).
PUBLIC_PATHS = frozenset({
    "/.well-known/oauth-authorization-server", RESOURCE_METADATA_PATH, RESOURCE_METADATA_PATH + MCP_PATH,
    "/oauth/authorize", "/oauth/token", "/oauth/register", "/oauth/revoke", "/oauth/consent",
})
#: The largest client metadata document read.
DOCUMENT_MAX_BYTES = 16 * 1024

#: This request's public base URL, for the provider's answers (the SDK calls it without the request).
_base: ContextVar[str] = ContextVar("noteloom_oauth_base")


def oauth_enabled(app: App) -> bool:
    """``[mcp] oauth`` if set, else whether the server listens beyond loopback."""
    value = app.settings.section("mcp").get("oauth")
    if value is None:
        return app.settings.host not in LOOPBACK
    if not isinstance(value, bool):
        raise ConfigError("[mcp] oauth in noteloom.toml must be true or false")
    return value


def configured_base(app: App) -> str | None:
    """``[mcp] public_url`` without its trailing slash, checked; ``None`` when unset."""
    value = app.settings.section("mcp").get("public_url")
    if value is None:
        return None
    parts = urlsplit(str(value))
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"[mcp] public_url must be an address such as https://notes.example.org, not {value!r}")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        raise ConfigError("[mcp] public_url must be https:// beyond loopback (OAuth sends tokens to it)")
    return str(value).rstrip("/")


def base_url(app: App, request: StarletteRequest) -> str:
    """Where clients reach this server: ``[mcp] public_url``, else (on loopback only) the
    address the request came to."""
    configured = configured_base(app)
    if configured is not None:
        return configured
    host = request.headers.get("host", "")
    if urlsplit(f"http://{host}").hostname not in LOOPBACK:
        raise ApiError(400, "bad_request", "this server's public address is not configured: set [mcp] public_url "
                                           "in noteloom.toml to the https:// address clients use")
    return f"http://{host}"


class Provider:
    """What the SDK's OAuth handlers ask of an authorization server, answered from the
    workspace (``mcp.server.auth.provider.OAuthAuthorizationServerProvider``)."""

    def __init__(self, app: App, outbound: OutboundClient | None = None) -> None:
        self.app = app
        self.store = OAuthStore(app.workspace.engine)
        self.outbound = outbound or OutboundClient(OutboundPolicy.from_settings(app.settings.file))

    # -- clients ---------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        known = await to_thread.run_sync(self.store.client, client_id)
        stale = known is None or known[2] is None or now_ms() - known[2] > DOCUMENT_TTL_MS
        if _is_document_url(client_id) and stale:
            return await self._fetch_document(client_id)
        if known is None:
            return None
        return OAuthClientInformationFull.model_validate(known[0])

    async def _fetch_document(self, url: str) -> OAuthClientInformationFull | None:
        """A client ID metadata document: fetched (guarded), checked, kept for a day."""
        try:
            response = await self.outbound.request("GET", url, accept=["application/json"],
                                                   max_bytes=DOCUMENT_MAX_BYTES)
            if response.status != 200:
                log.warning("client metadata document %s answered %s", url, response.status)
                return None
            doc = json.loads(response.body)
        except (OutboundRefused, Unavailable, ValueError) as exc:
            log.warning("client metadata document %s could not be read: %s", url, exc)
            return None
        if not isinstance(doc, dict) or doc.get("client_id") != url:
            log.warning("client metadata document %s does not name itself as its client_id", url)
            return None
        if doc.get("token_endpoint_auth_method", "none") != "none":
            log.warning("client metadata document %s asks for client authentication, which it cannot have", url)
            return None
        if redirect_problem(doc.get("redirect_uris")) is not None:
            log.warning("client metadata document %s: %s", url, redirect_problem(doc.get("redirect_uris")))
            return None
        doc.setdefault("scope", " ".join(SUPPORTED_SCOPES))
        doc["token_endpoint_auth_method"] = "none"
        try:
            info = OAuthClientInformationFull.model_validate(doc)
        except ValidationError as exc:
            log.warning("client metadata document %s is not valid client metadata: %s", url, exc)
            return None
        await to_thread.run_sync(self.store.save_client, url,
                                 info.model_dump(mode="json", exclude_none=True), "document")
        return info

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_id is None or _is_document_url(client_info.client_id):
            raise RegistrationError("invalid_client_metadata", "no client ID was assigned")
        problem = redirect_problem(list(client_info.redirect_uris or []))
        if problem is not None:
            raise RegistrationError("invalid_redirect_uri", problem)
        try:
            await to_thread.run_sync(self.store.save_client, client_info.client_id,
                                     client_info.model_dump(mode="json", exclude_none=True), "registered")
        except OverflowError as exc:
            raise RegistrationError("invalid_client_metadata", str(exc)) from None

    # -- the authorization request ---------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        base = _base.get()
        if params.resource is not None and params.resource.rstrip("/") != base + MCP_PATH:
            raise AuthorizeError("invalid_request", f"resource must be this server's MCP endpoint, {base}{MCP_PATH}")
        data = {
            "redirect_uri": str(params.redirect_uri),
            "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
            "code_challenge": params.code_challenge,
            "scopes": params.scopes,
            "state": params.state,
            "resource": params.resource,
        }
        assert client.client_id is not None
        secret = await to_thread.run_sync(self.store.add, "request", client.client_id, None, data, REQUEST_TTL_MS)
        return f"{base}/oauth/consent?request={secret}"

    # -- codes and tokens ------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        grant = await to_thread.run_sync(self.store.find, "code", authorization_code)
        if grant is None or grant.client_id != client.client_id:
            return None
        d = grant.data
        return AuthorizationCode(
            code=authorization_code, scopes=d["scopes"], expires_at=grant.expires_time / 1000,
            client_id=grant.client_id, code_challenge=d["code_challenge"], redirect_uri=d["redirect_uri"],
            redirect_uri_provided_explicitly=d["redirect_uri_provided_explicitly"], resource=d.get("resource"),
            subject=grant.user_id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        grant = await to_thread.run_sync(self.store.take, "code", authorization_code.code)
        if grant is None or grant.user_id is None:
            raise TokenError("invalid_grant", "the authorization code was already used or has expired")
        return await to_thread.run_sync(self._issue, client, grant.user_id, list(authorization_code.scopes),
                                        authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        grant = await to_thread.run_sync(self.store.find, "refresh", refresh_token)
        if grant is None:
            await to_thread.run_sync(self._end_if_spent, refresh_token)
            return None
        if grant.client_id != client.client_id:
            return None
        return RefreshToken(token=refresh_token, client_id=grant.client_id, scopes=grant.data["scopes"],
                            expires_at=grant.expires_time // 1000, resource=grant.data.get("resource"),
                            subject=grant.user_id)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        grant = await to_thread.run_sync(self.store.take, "refresh", refresh_token.token)
        if grant is None or grant.user_id is None:
            raise TokenError("invalid_grant", "the refresh token was already used, revoked or has expired")
        old: list[str] = grant.data["scopes"]
        # A client may narrow what it holds; the notebooks chosen at consent always stay.
        kept = [s for s in old if s in scopes or s.startswith((NOTEBOOK_PREFIX, TOOL_PREFIX))] if scopes else old
        user_id = grant.user_id
        await to_thread.run_sync(self._revoke_name, grant.data.get("token_name"), user_id)
        return await to_thread.run_sync(self._issue, client, user_id, kept, grant.data.get("resource"),
                                        grant.data.get("family") or grant.id)

    async def load_access_token(self, token: str) -> AccessToken | None:
        try:
            found = await to_thread.run_sync(self.app.workspace.check_token, token)
        except Exception:  # AuthError: unknown, revoked or expired, all alike
            return None
        expires = found.expires_time // 1000 if found.expires_time is not None else None
        return AccessToken(token=token, client_id="", scopes=[], expires_at=expires, subject=found.user.id)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        await self.revoke_for(token.client_id, token.token)

    async def revoke_for(self, client_id: str, token: str) -> None:
        """Revoke ``token`` (an access or a refresh token) if ``client_id`` holds it; a
        refresh token takes its access token with it, and the other way round."""
        def run() -> None:
            grant = self.store.find("refresh", token)
            if grant is not None:
                if grant.client_id == client_id and self.store.take("refresh", token, remember=False) is not None:
                    self._revoke_name(grant.data.get("token_name"), grant.user_id)
                return
            name = self.app.workspace.token_name_of(token)
            if name is not None and self.store.holder_of(name) == client_id:
                self.app.workspace.revoke_secret(token)
                self.store.drop_for_token(name)
        await to_thread.run_sync(run)

    def _end_if_spent(self, refresh_token: str) -> None:
        """A refresh token presented again after it was traded: a copy is in other hands (the
        client's or a thief's, no telling which), so the grant it came from ends. The refresh
        token that replaced it and the access token that one renews are revoked, and the
        person consents again."""
        spent = self.store.find("spent", refresh_token)
        if spent is None:
            return
        family = spent.data.get("family") or spent.id
        ended = self.store.end_family(family)
        if not ended:
            return  # that grant has already ended
        for name, user_id in ended:
            self._revoke_name(name, user_id)
        log.warning("OAuth: a used refresh token of client %s was presented again; its grant is ended (%d token(s) revoked)",
                    spent.client_id, len(ended))

    def _issue(self, client: OAuthClientInformationFull, user_id: str, scopes: list[str],
               resource: str | None, family: str | None = None) -> OAuthToken:
        """An access token (a scoped API token that expires) and the refresh token renewing it;
        ``family``: the consent the refresh token descends from (a new one for a code)."""
        assert client.client_id is not None
        label = (client.client_name or urlsplit(client.client_id).hostname or "client")[:40]
        name = f"oauth {label} {secrets.token_hex(4)}"
        access = self.app.workspace.create_token(user_id, name=name, scopes=token_scopes(scopes),
                                                 expires_time=now_ms() + ACCESS_TTL_MS)
        refresh = self.store.add("refresh", client.client_id, user_id,
                                 {"scopes": scopes, "token_name": name, "resource": resource,
                                  "family": family or new_id()}, REFRESH_TTL_MS)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=ACCESS_TTL_MS // 1000,
                          refresh_token=refresh, scope=" ".join(scopes))

    def _revoke_name(self, name: str | None, user_id: str | None) -> None:
        if not name:
            return
        with contextlib.suppress(NotFound):  # already revoked, or expired
            self.app.workspace.revoke_token(name, user_id)


def authorization_server_metadata(base: str) -> OAuthMetadata:
    """RFC 8414 metadata of this server reached at ``base``."""
    return OAuthMetadata(
        issuer=base,  # type: ignore[arg-type]
        authorization_endpoint=f"{base}/oauth/authorize",  # type: ignore[arg-type]
        token_endpoint=f"{base}/oauth/token",  # type: ignore[arg-type]
        registration_endpoint=f"{base}/oauth/register",  # type: ignore[arg-type]
        revocation_endpoint=f"{base}/oauth/revoke",  # type: ignore[arg-type]
        scopes_supported=list(SUPPORTED_SCOPES),
        response_types_supported=["code"],
        grant_types_supported=["authorization_code", "refresh_token"],
        token_endpoint_auth_methods_supported=["none", "client_secret_post", "client_secret_basic"],
        revocation_endpoint_auth_methods_supported=["none", "client_secret_post", "client_secret_basic"],
        code_challenge_methods_supported=["S256"],
        client_id_metadata_document_supported=True,
        # RFC 9207: the redirect names its issuer, so a client talking to several servers
        # cannot be fooled into sending our code to another (a mix-up attack).
        authorization_response_iss_parameter_supported=True,
    )


def issuer(base: str) -> str:
    """The ``iss`` of an authorization response: the metadata's issuer, exactly as serialised."""
    return str(authorization_server_metadata(base).model_dump(mode="json")["issuer"])


#: Redirect URI schemes never followed: they would run or read something in the browser.
BLOCKED_SCHEMES = frozenset({"javascript", "data", "vbscript", "file", "blob", "about"})


def redirect_problem(uris: list[Any] | None) -> str | None:
    """Why a client's redirect URIs are refused, or ``None``: https, http to loopback only
    (OAuth 2.1), or an application's own scheme (``cursor://…``); never a script or data URL."""
    for uri in uris or []:
        parts = urlsplit(str(uri))
        scheme = parts.scheme.lower()
        if scheme in BLOCKED_SCHEMES:
            return f"redirect URI scheme {scheme}: is not allowed"
        if scheme == "http" and parts.hostname not in (*LOOPBACK, "[::1]"):
            return f"redirect URI {uri} must be https:// (plain http only to this machine)"
    return None


def _is_document_url(client_id: str) -> bool:
    """A client ID that is the URL of its metadata document: https with a path (http only
    on loopback, for a client developed on this machine)."""
    parts = urlsplit(client_id)
    if parts.scheme == "https":
        return bool(parts.hostname) and parts.path not in ("", "/")
    return parts.scheme == "http" and parts.hostname in LOOPBACK and parts.path not in ("", "/")


# -- the consent page's API ------------------------------------------------------------------


class ConsentTool(BaseModel):
    name: str
    title: str
    writes: bool = Field(description="It changes something (granted only with read and write).")


class ConsentRequestOut(BaseModel):
    client_name: str = Field(description="The name the client gives itself (its own words, not checked).")
    client_id: str
    client_uri: str | None
    redirect_host: str = Field(description="Where the browser goes back to after the decision.")
    verified_by_document: bool = Field(description="The client is known by the URL of its metadata document.")
    write_requested: bool
    notebooks: list[str] = Field(description="The title paths of the notebooks this person may grant.")
    tools: list[ConsentTool] = Field(description="The tools this person has on, which the client may be given.")


class DecisionIn(StrictModel):
    approve: bool
    write: bool = False
    notebooks: list[str] = Field(default_factory=list, max_length=200,
                                 description="Title paths to limit the client to; empty: every notebook of yours.")
    tools: list[str] | None = Field(default=None, max_length=500,
                                    description="Tool names to limit the client to; null: every tool you have on.")


class DecisionOut(BaseModel):
    redirect: str = Field(description="Where the browser goes next: the client's redirect URI.")


def install(api: FastAPI, app: App) -> None:
    """Add the OAuth endpoints when OAuth is on (the challenge on /mcp's 401 with them)."""
    if not oauth_enabled(app):
        return
    if app.settings.host not in LOOPBACK and configured_base(app) is None:
        raise ConfigError("[mcp] oauth is on and the server listens beyond loopback: set [mcp] public_url in "
                          "noteloom.toml to the https:// address clients reach it at")
    install_error_handlers(api)
    provider = Provider(app)
    api.state.oauth_provider = provider
    authenticator = ClientAuthenticator(provider)  # type: ignore[arg-type]

    def routed(handler: Callable[[StarletteRequest], Awaitable[Response]]) -> Callable[[StarletteRequest], Awaitable[Response]]:
        async def endpoint(request: StarletteRequest) -> Response:
            token = _base.set(base_url(app, request))
            try:
                return await handler(request)
            finally:
                _base.reset(token)
        return endpoint

    registration = ClientRegistrationOptions(enabled=True, valid_scopes=list(SUPPORTED_SCOPES),
                                             default_scopes=list(SUPPORTED_SCOPES))
    api.add_route("/oauth/authorize", routed(AuthorizationHandler(provider).handle),  # type: ignore[arg-type]
                  methods=["GET", "POST"], include_in_schema=False)
    api.add_route("/oauth/token", routed(TokenHandler(provider, authenticator).handle),  # type: ignore[arg-type]
                  methods=["POST"], include_in_schema=False)
    api.add_route("/oauth/register", routed(RegistrationHandler(provider, registration).handle),  # type: ignore[arg-type]
                  methods=["POST"], include_in_schema=False)

    async def revoke(request: StarletteRequest) -> Response:
        """RFC 7009, for public clients too (the SDK's handler insists on a client secret):
        the client authenticates as at the token endpoint and revokes only its own tokens;
        an unknown token is answered 200 like a revoked one."""
        try:
            client = await authenticator.authenticate_request(request)
        except AuthenticationError as exc:
            return JSONResponse({"error": "invalid_client", "error_description": exc.message}, status_code=401)
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse({"error": "invalid_request", "error_description": "token is required"},
                                status_code=400)
        assert client.client_id is not None
        await provider.revoke_for(client.client_id, token)
        return Response(status_code=200, headers={"Cache-Control": "no-store"})

    api.add_route("/oauth/revoke", revoke, methods=["POST"], include_in_schema=False)

    async def resource_metadata(request: StarletteRequest) -> Response:
        base = base_url(app, request)
        meta = ProtectedResourceMetadata(
            resource=f"{base}{MCP_PATH}", authorization_servers=[base],  # type: ignore[arg-type,list-item]
            scopes_supported=list(SUPPORTED_SCOPES), bearer_methods_supported=["header"], resource_name="noteloom",
        )
        return _json(meta.model_dump(mode="json", exclude_none=True))

    async def server_metadata(request: StarletteRequest) -> Response:
        return _json(authorization_server_metadata(base_url(app, request)).model_dump(mode="json", exclude_none=True))

    for path in (RESOURCE_METADATA_PATH, RESOURCE_METADATA_PATH + MCP_PATH):
        api.add_route(path, resource_metadata, methods=["GET"], include_in_schema=False)
    api.add_route("/.well-known/oauth-authorization-server", server_metadata, methods=["GET"],
                  include_in_schema=False)

    async def consent_page(request: StarletteRequest) -> Response:
        return templates.TemplateResponse(request, "oauth_consent.html", {}, headers={"Cache-Control": "no-store"})

    api.add_route("/oauth/consent", consent_page, methods=["GET"], include_in_schema=False)

    def challenge(request_base: str) -> str:
        return f'Bearer realm="noteloom", resource_metadata="{request_base}{RESOURCE_METADATA_PATH}{MCP_PATH}"'

    def challenge_for(headers: dict[str, str]) -> str | None:
        configured = configured_base(app)
        if configured is not None:
            return challenge(configured)
        host = headers.get("host", "")
        return challenge(f"http://{host}") if urlsplit(f"http://{host}").hostname in LOOPBACK else None

    api.state.oauth_challenge = challenge_for

    r = APIRouter(prefix="/api/v1/oauth", tags=["oauth"], dependencies=[Depends(checked_body)])

    def pending(request: Request, secret: str) -> Any:
        """The authorization request behind ``secret``, for a person signed in with full access."""
        user_of(request)
        if not token_scopes_of(request).unrestricted:
            raise ApiError(403, "forbidden", "only a sign-in with full access may grant access to a client; "
                                             "sign in with your name and password or your own token")
        grant = provider.store.find("request", secret)
        if grant is None:
            raise ApiError(404, "not_found", "this authorization request is unknown or has expired: "
                                             "start again from the application that asked")
        return grant

    def notebook_paths(request: Request) -> list[str]:
        view = request_scope(request, app.workspace)
        ws = app.workspace
        books = ws.list_notebooks(with_counts=False)
        with ws.read() as conn:
            visible = view.visible_ids(conn)
        by_id = {b.id: b for b in books}

        def path(book_id: str) -> str:
            parts: list[str] = []
            seen: set[str] = set()
            current: str | None = book_id
            while current is not None and current in by_id and current not in seen:
                seen.add(current)
                parts.append(by_id[current].title)
                current = by_id[current].parent_id
            return "/".join(reversed(parts))

        return sorted({path(b.id) for b in books if visible is None or b.id in visible}, key=str.lower)

    def tools_on() -> list[ConsentTool]:
        return [ConsentTool(name=t.name, title=t.title or t.name, writes=t.effect != "read")
                for t in sorted(app.registry.enabled(app.workspace), key=lambda t: t.name)]

    @r.get("/requests/{secret}", response_model=ConsentRequestOut, responses=ERRORS,
           summary="What a client asks for (the consent page)")
    async def show(secret: str, request: Request) -> ConsentRequestOut:
        def read() -> ConsentRequestOut:
            grant = pending(request, secret)
            known = provider.store.client(grant.client_id)
            info = known[0] if known else {}
            requested = grant.data.get("scopes")
            return ConsentRequestOut(
                client_name=str(info.get("client_name") or grant.client_id),
                client_id=grant.client_id,
                client_uri=info.get("client_uri"),
                redirect_host=urlsplit(grant.data["redirect_uri"]).netloc,
                verified_by_document=bool(known and known[1] == "document"),
                write_requested=requested is None or WRITE_SCOPE in requested,
                notebooks=notebook_paths(request),
                tools=tools_on(),
            )
        return await to_thread.run_sync(read)

    @r.post("/requests/{secret}/decision", response_model=DecisionOut, responses=ERRORS,
            summary="Allow or deny a client (the consent page)")
    async def decide(secret: str, body: DecisionIn, request: Request) -> DecisionOut:
        def run() -> DecisionOut:
            grant = pending(request, secret)
            user = user_of(request)
            d = grant.data
            if not body.approve:
                provider.store.take("request", secret)
                return DecisionOut(redirect=construct_redirect_uri(
                    d["redirect_uri"], error="access_denied", error_description="the person declined",
                    state=d["state"], iss=issuer(base_url(app, request))))
            requested = d.get("scopes")
            if body.write and requested is not None and WRITE_SCOPE not in requested:
                raise ApiError(422, "invalid_input", "the client did not ask to write: grant read access, or deny",
                               "write")
            allowed = set(notebook_paths(request))
            unknown = [p for p in body.notebooks if p not in allowed]
            if unknown:
                raise ApiError(422, "invalid_input", f"no notebook of yours is at {unknown[0]!r}", "notebooks")
            tools: list[str] | None = None
            if body.tools is not None:
                offered = {t.name: t for t in tools_on()}
                wrong = [n for n in body.tools if n not in offered]
                if wrong:
                    raise ApiError(422, "invalid_input", f"no tool of yours is named {wrong[0]!r}", "tools")
                tools = sorted({n for n in body.tools if body.write or not offered[n].writes})
                if not tools:
                    raise ApiError(422, "invalid_input", "choose at least one tool the client may use, or deny",
                                   "tools")
            if provider.store.take("request", secret) is None:
                raise ApiError(404, "not_found", "this authorization request was already decided")
            scopes = granted_scopes(body.write, sorted(set(body.notebooks)), tools)
            code = provider.store.add("code", grant.client_id, user.id, {**d, "scopes": scopes}, CODE_TTL_MS)
            return DecisionOut(redirect=construct_redirect_uri(
                d["redirect_uri"], code=code, state=d["state"], iss=issuer(base_url(app, request))))
        return await to_thread.run_sync(run)

    api.include_router(r)


def _json(body: dict[str, Any]) -> Response:
    return JSONResponse(body, headers={"Cache-Control": "no-store", "Access-Control-Allow-Origin": "*"})
