"""The one guarded client for outbound HTTP: webhooks now, fetched pages later.

A URL a user typed may point anywhere, including at the machine noteloom runs on, the
network behind it or the cloud's metadata service. So every request goes through
:class:`OutboundClient`, which:

- accepts ``http`` and ``https`` URLs only, without credentials in them;
- resolves the host itself (:data:`Resolver`, ``socket.getaddrinfo`` in a thread) and
  refuses the request when *any* address it resolves to is loopback, private, link-local,
  multicast, reserved, unspecified, shared (100.64/10), in 0.0.0.0/8 or a cloud metadata
  address (IPv4 inside IPv6 — mapped, 6to4, NAT64 — is judged as the IPv4 address), unless
  the operator's :class:`OutboundPolicy` allows it;
- connects to the address it checked: its network backend is handed the checked address
  for the URL's host and port and connects to nothing else, so a DNS answer that changes
  between the check and the connection (DNS rebinding) cannot move it. The URL keeps its
  host name, so the ``Host`` header, TLS SNI and the certificate check use the name;
- follows redirects itself (at most ``max_redirects``), each hop checked the same way;
- caps the whole exchange's time, the request body and the response body (streamed and
  cut off at the cap; a declared ``Content-Length`` over it is refused before reading);
- decodes ``gzip``, ``deflate`` and ``br`` bodies itself, a bounded step at a time, so the
  cap holds for the *decoded* bytes: a small compressed bomb is cut off at the cap without
  ever being inflated in memory past it. Any other ``Content-Encoding`` is refused;
- when the caller names the media types it reads (``accept``), refuses a successful answer
  of another type before reading its body (a page fetch wants HTML or text, not a video);
- sends ``User-Agent: noteloom/<version>`` unless the caller sets one.

A response's text (:meth:`OutboundResponse.text`) is decoded with the charset its
``Content-Type`` names, else the one an HTML page declares in its first bytes, else a byte
order mark, else UTF-8 when the bytes are UTF-8, else what ``charset_normalizer`` detects.

Webhooks are signed (:func:`signed_headers`): ``X-Noteloom-Timestamp`` carries the Unix
time in seconds, ``X-Noteloom-Signature`` is ``sha256=`` and the hex HMAC-SHA256, keyed with
the webhook's secret, of ``f"{timestamp}.".encode() + body``. A receiver recomputes it over
the raw body it received (:func:`verify` does, and refuses a stale timestamp).

Errors: a URL or address that is not allowed, a body over a cap, too many redirects raise
:class:`~noteloom.errors.OutboundRefused` (an ``InvalidInput`` of ``field`` ``url``, or
``content``); a host that does not resolve, answer or finish in time raises
:class:`~noteloom.errors.Unavailable`. An HTTP error status is an answer, not an error.
"""

from __future__ import annotations

import codecs
import hashlib
import hmac
import ipaddress
import re
import socket
import ssl
import time
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import brotli  # type: ignore[import-untyped]
import httpcore2
import httpx2
from anyio import to_thread

from noteloom import __version__
from noteloom.errors import ConfigError, OutboundRefused, Unavailable

__all__ = [
    "ACCEPT_ENCODING",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "USER_AGENT",
    "OutboundClient",
    "OutboundPolicy",
    "OutboundResponse",
    "Resolver",
    "check_url",
    "decode_text",
    "refusal",
    "sign",
    "signed_headers",
    "system_resolve",
    "verify",
]

SIGNATURE_HEADER = "X-Noteloom-Signature"
TIMESTAMP_HEADER = "X-Noteloom-Timestamp"
USER_AGENT = f"noteloom/{__version__} (a notes app fetching on its user's behalf)"
#: The encodings the client decodes (bounded); it asks for these only.
ACCEPT_ENCODING = "gzip, deflate, br"

#: ``(host, port)`` to the addresses it resolves to (text, as ``getaddrinfo`` gives them).
Resolver = Callable[[str, int], Awaitable[list[str]]]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Instance metadata services answer here with the cloud credentials of the machine
#: (AWS/GCP/Azure/OpenStack on 169.254.169.254, AWS over IPv6, Alibaba Cloud).
METADATA = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT; not private to Python
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Headers that must not follow a redirect to another origin.
_PRIVATE_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


# -- addresses --------------------------------------------------------------------------------


def _embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64): where it really goes."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(address: str | IPAddress) -> str | None:
    """Why ``address`` is no place to send a request to (``"a loopback address"`` …), or
    ``None`` for a public address."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    inner = _embedded_v4(ip)
    if inner is not None:
        return refusal(inner)
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    checks: tuple[tuple[bool, str], ...] = (
        (ip in METADATA, "a cloud metadata address"),
        (ip.is_unspecified, "the unspecified address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _THIS_NETWORK, "an address of 'this network' (0.0.0.0/8)"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED, "a shared (carrier-grade NAT) address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    return next((reason for hit, reason in checks if hit), None)


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host``, in its order."""
    try:
        infos = await to_thread.run_sync(
            lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM), abandon_on_cancel=True
        )
    except socket.gaierror as exc:
        raise Unavailable(f"the host {host!r} could not be resolved ({exc.strerror}); check the URL") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# -- the operator's policy ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    """One allow-list entry: a network (an address is a /32 or /128) or a host name."""

    network: IPNetwork | None
    host: str | None
    port: int | None

    def admits(self, host: str, port: int, ip: IPAddress) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            if ip.version != self.network.version or ip not in self.network:
                return False
            # A metadata address is reachable by naming that very address only.
            return ip not in METADATA or self.network.num_addresses == 1
        return self.host == host and ip not in METADATA


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"[outbound] allow entry {entry!r} has no valid port; write HOST, HOST:PORT or NETWORK/PREFIX")
    return int(text)


def _parse_rule(entry: str) -> _Rule:
    """``127.0.0.1``, ``127.0.0.1:8080``, ``[::1]:8080``, ``::1``, ``10.0.0.0/8``, ``hooks.lan``,
    ``hooks.lan:8443``."""
    text = entry.strip().lower()
    if text.startswith("["):
        inside, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ConfigError(f"[outbound] allow entry {entry!r}: write [IPV6]:PORT or the address alone")
        try:
            return _Rule(ipaddress.ip_network(inside), None, _parse_port(rest[1:], entry))
        except ValueError as exc:
            raise ConfigError(f"[outbound] allow entry {entry!r} is no IPv6 address") from exc
    try:
        return _Rule(ipaddress.ip_network(text, strict=False), None, None)
    except ValueError:
        pass
    name, sep, port_text = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    port = _parse_port(port_text, entry) if sep else None
    try:
        return _Rule(ipaddress.ip_network(name), None, port)
    except ValueError:
        pass
    if not name or not all(part and part.replace("-", "").replace("_", "").isalnum() for part in name.split(".")):
        raise ConfigError(f"[outbound] allow entry {entry!r} is no host, address or network")
    return _Rule(None, name, port)


@dataclass(frozen=True)
class OutboundPolicy:
    """What the operator lets outbound requests do.

    ``allow`` names destinations that are not public but trusted all the same (the
    ``[outbound] allow`` setting): an address (``127.0.0.1``, ``::1``), a network
    (``10.0.0.0/8``) or a host name (``hooks.lan``), each optionally with a port
    (``127.0.0.1:8080``, ``[::1]:8080``, ``hooks.lan:8443``). A host name entry trusts
    whatever that name resolves to, except a metadata address, which only its own
    address entry admits. A malformed entry is a ``ConfigError``.
    """

    allow: frozenset[str] = frozenset()
    #: Seconds for the whole exchange: resolving, connecting, every redirect, the body.
    timeout: float = 15.0
    max_response_bytes: int = 1024 * 1024
    max_request_bytes: int = 1024 * 1024
    max_redirects: int = 5
    _rules: tuple[_Rule, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rules", tuple(_parse_rule(e) for e in sorted(self.allow)))

    @classmethod
    def from_settings(cls, file: Mapping[str, Any]) -> OutboundPolicy:
        """The ``[outbound]`` table of noteloom.toml (``ConfigError`` naming a bad value)::

            [outbound]
            allow = ["127.0.0.1:8080", "hooks.lan"]   # non-public destinations you trust
            timeout = 15                               # seconds per exchange
        """
        table = file.get("outbound", {})
        if not isinstance(table, Mapping):
            raise ConfigError("[outbound] in noteloom.toml must be a table")
        unknown = sorted(set(table) - {"allow", "timeout"})
        if unknown:
            raise ConfigError(f"[outbound] has no setting {unknown[0]!r}; known settings: allow, timeout")
        allow = table.get("allow", [])
        if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
            raise ConfigError("[outbound] allow must be a list of addresses, networks or host names")
        timeout = table.get("timeout", 15.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            raise ConfigError(f"[outbound] timeout must be a number of seconds from 0 to 600, not {timeout!r}")
        return cls(frozenset(allow), float(timeout))

    def admits(self, host: str, port: int, address: str) -> str | None:
        """Why ``host:port`` at ``address`` is refused, or ``None`` when it may be reached."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        reason = refusal(ip)
        if reason is None or any(rule.admits(host.lower(), port, ip) for rule in self._rules):
            return None
        return reason


# -- URLs, signatures ---------------------------------------------------------------------------


def check_url(url: str | httpx2.URL, *, field: str = "url") -> httpx2.URL:
    """``url`` parsed, when its form may be requested at all: ``http``/``https``, a host, no
    credentials. Its addresses are checked when it is requested."""
    try:
        parsed = url if isinstance(url, httpx2.URL) else httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError, ValueError) as exc:
        raise OutboundRefused(f"{str(url)!r} is not a URL: {exc}", field=field) from exc
    if parsed.scheme not in ("http", "https"):
        raise OutboundRefused(f"{str(url)!r} is not an http or https URL; noteloom sends requests over "
                              "HTTP(S) only", field=field)
    if not parsed.host:
        raise OutboundRefused(f"{str(url)!r} names no host", field=field)
    if parsed.userinfo:
        raise OutboundRefused("the URL carries a user name or password; leave credentials out of it "
                              "(a webhook is authenticated by its signature)", field=field)
    return parsed


def sign(body: bytes, secret: str, timestamp: int) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``f"{timestamp}.".encode() + body`` keyed with
    ``secret`` (UTF-8), what ``X-Noteloom-Signature`` carries."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed_headers(body: bytes, secret: str, *, now: int | None = None) -> dict[str, str]:
    """The two headers that sign ``body``: ``X-Noteloom-Timestamp`` (Unix seconds, ``now``
    unless given) and ``X-Noteloom-Signature`` (:func:`sign`)."""
    ts = int(time.time()) if now is None else now
    return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign(body, secret, ts)}


def verify(body: bytes, secret: str, timestamp: str, signature: str, *, tolerance: float | None = 300,
           now: float | None = None) -> bool:
    """What a receiver does: the signature matches ``body`` and ``timestamp`` and, unless
    ``tolerance`` is ``None``, the timestamp is within ``tolerance`` seconds of ``now``."""
    if not timestamp.isdigit():
        return False
    if tolerance is not None and abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    return hmac.compare_digest(sign(body, secret, int(timestamp)), signature)


# -- the client ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutboundResponse:
    """An answer, read whole (up to the cap). ``url`` is where it came from after redirects,
    ``address`` the checked address that answered."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str
    address: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def media_type(self) -> str:
        """The ``Content-Type`` without its parameters, lower case (``""`` when none is sent)."""
        return _media_type(self.headers)

    def text(self) -> str:
        """The body as text (see the module's docstring for how its charset is found);
        bytes that do not decode become U+FFFD."""
        return decode_text(self.body, self.headers.get("content-type", ""))


class _PinnedBackend(httpcore2.AsyncNetworkBackend):
    """Connects a host and port to the address checked for them, and to nothing else."""

    def __init__(self) -> None:
        self.pins: dict[tuple[str, int], str] = {}
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        address = self.pins.get((host.lower(), port))
        if address is None:  # nothing but the checked request may open a connection
            raise OutboundRefused(f"no checked address for {host}:{port}; outbound requests go through "
                                  "OutboundClient.request", field="url")
        return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore2.AsyncNetworkStream:
        raise OutboundRefused("outbound requests do not go to Unix sockets", field="url")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class _PinnedTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport over a connection pool that connects through the pins only; no
    proxy (one would connect on our behalf, to an address we did not check)."""

    def __init__(self, backend: _PinnedBackend, ssl_context: ssl.SSLContext | None) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context or httpx2.create_ssl_context(trust_env=False), network_backend=backend,
            max_connections=4,
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, AsyncIterable)
        req = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                              target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions,
        )
        resp = await self._pool.handle_async_request(req)
        assert isinstance(resp.stream, AsyncIterable)
        return httpx2.Response(status_code=resp.status, headers=resp.headers, stream=_Stream(resp.stream),
                               extensions=resp.extensions)

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Stream(httpx2.AsyncByteStream):
    def __init__(self, inner: AsyncIterable[bytes]) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            yield part

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


#: What a failed exchange raises below us: the network, TLS, a broken HTTP answer.
_NETWORK_ERRORS = (httpx2.HTTPError, httpcore2.NetworkError, httpcore2.TimeoutException, httpcore2.ProtocolError,
                   httpcore2.UnsupportedProtocol, OSError, ssl.SSLError)


class OutboundClient:
    """The guarded client (see the module's docstring). One client serves any number of
    requests, each on its own connections; ``resolve`` replaces the system resolver (tests),
    ``ssl_context`` the default certificate check (another CA bundle; never switch it off)."""

    def __init__(self, policy: OutboundPolicy | None = None, *, resolve: Resolver = system_resolve,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.policy = policy or OutboundPolicy()
        self._resolve = resolve
        self._ssl = ssl_context

    async def request(self, method: str, url: str, *, content: bytes = b"",
                      headers: Mapping[str, str] | None = None, accept: Iterable[str] | None = None,
                      max_bytes: int | None = None) -> OutboundResponse:
        """Send one request, following redirects, every hop checked; the whole exchange
        within ``policy.timeout`` seconds. ``accept``: the media types (``text/*`` for a
        family) a successful answer may have, others are refused unread (an answer without
        a ``Content-Type`` passes: the caller judges its bytes); ``max_bytes``: this
        request's cap on the decoded body instead of ``policy.max_response_bytes``."""
        if len(content) > self.policy.max_request_bytes:
            raise OutboundRefused(f"the request body has {len(content)} bytes, more than the "
                                  f"{self.policy.max_request_bytes} an outbound request may carry", field="content")
        target = check_url(url)
        sent = {"User-Agent": USER_AGENT, **dict(headers or {})}
        if not any(k.lower() == "accept-encoding" for k in sent):
            sent["Accept-Encoding"] = ACCEPT_ENCODING
        limits = _Limits(max_bytes or self.policy.max_response_bytes, tuple(accept) if accept is not None else None)
        try:
            with anyio.fail_after(self.policy.timeout):
                return await self._exchange(method.upper(), target, content, sent, limits)
        except TimeoutError as exc:
            raise Unavailable(f"{target.host} did not answer within {self.policy.timeout:g} s; "
                              "check that it is up", retry_after=None) from exc

    async def post_signed(self, url: str, body: bytes, secret: str, *, content_type: str = "application/json",
                          now: int | None = None) -> OutboundResponse:
        """POST ``body`` signed with ``secret`` (:func:`signed_headers`)."""
        headers = {"Content-Type": content_type, **signed_headers(body, secret, now=now)}
        return await self.request("POST", url, content=body, headers=headers)

    async def _pin(self, url: httpx2.URL) -> str:
        """The address to connect to for ``url``: every address its host resolves to must pass."""
        host, port = url.raw_host.decode("ascii").lower(), _port(url)
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = await self._resolve(host, port)
        if not addresses:
            raise Unavailable(f"the host {host!r} resolves to no address; check the URL")
        for address in addresses:
            reason = self.policy.admits(host, port, address)
            if reason is not None:
                shown = "" if address == host else f" resolves to {address},"
                raise OutboundRefused(
                    f"{url.host}{shown} is {reason}; noteloom sends requests there only when the operator "
                    "allows it ([outbound] allow)", field="url", address=address)
        return addresses[0]

    async def _exchange(self, method: str, url: httpx2.URL, content: bytes,
                        headers: dict[str, str], limits: _Limits) -> OutboundResponse:
        backend = _PinnedBackend()
        # A backstop only: the whole exchange's cap (``request``) is the one that fires.
        timeout = httpx2.Timeout(self.policy.timeout + 5)
        async with httpx2.AsyncClient(transport=_PinnedTransport(backend, self._ssl), trust_env=False, follow_redirects=False,
                                      timeout=timeout) as client:
            for _hop in range(self.policy.max_redirects + 1):
                address = await self._pin(url)
                backend.pins[(url.raw_host.decode("ascii").lower(), _port(url))] = address
                answer = await self._send(client, method, url, content, headers, address, limits)
                location = answer.headers.get("location")
                if answer.status not in _REDIRECTS or not location:
                    return answer
                following = check_url(url.join(location))
                if following.origin != url.origin:
                    headers = {k: v for k, v in headers.items() if k.lower() not in _PRIVATE_HEADERS}
                # What browsers and httpx do: 303 asks for a GET, and so do 301/302 after a POST.
                if (answer.status == 303 and method != "HEAD") or (answer.status in (301, 302) and method == "POST"):
                    method, content = "GET", b""
                    headers = {k: v for k, v in headers.items() if k.lower() not in ("content-type", "content-length")}
                url = following
        raise OutboundRefused(f"{url} redirects more than {self.policy.max_redirects} times; give the final URL",
                              field="url")

    async def _send(self, client: httpx2.AsyncClient, method: str, url: httpx2.URL, content: bytes,
                    headers: dict[str, str], address: str, limits: _Limits) -> OutboundResponse:
        cap = limits.max_bytes
        try:
            async with client.stream(method, url, content=content or None, headers=headers) as response:
                declared = response.headers.get("content-length", "")
                encodings = _encodings(response.headers)
                if declared.isdigit() and int(declared) > cap:  # compressed or not, the decoded is no less
                    raise _too_large(url, cap)
                media = _media_type(response.headers)
                if (limits.accept is not None and 200 <= response.status_code < 300 and media
                        and not _accepted(media, limits.accept)):
                    raise OutboundRefused(f"{url} answered with {media!r}, not a type noteloom reads here "
                                          f"({', '.join(limits.accept)})", field="url")
                decoders = [_decoder(e, url, cap) for e in reversed(encodings)]
                body = bytearray()
                async for chunk in response.aiter_raw():
                    for decoder in decoders:
                        chunk = decoder.feed(chunk)
                    body += chunk
                    if len(body) > cap:
                        raise _too_large(url, cap)
                return OutboundResponse(response.status_code, dict(response.headers), bytes(body), str(url), address)
        except _NETWORK_ERRORS as exc:
            raise Unavailable(f"could not reach {url.host} at {address}: {exc or type(exc).__name__}; "
                              "check that it is up and the URL is right") from exc


def _port(url: httpx2.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _too_large(url: httpx2.URL, cap: int) -> OutboundRefused:
    return OutboundRefused(f"the answer of {url} is larger than {cap} bytes, the most noteloom reads", field="url")


# -- bodies: bounded decoding, media types, charsets --------------------------------------------


@dataclass(frozen=True)
class _Limits:
    max_bytes: int
    accept: tuple[str, ...] | None


def _media_type(headers: Mapping[str, str]) -> str:
    value = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    return value.split(";", 1)[0].strip().lower()


def _accepted(media: str, accept: tuple[str, ...]) -> bool:
    return any(media == a or (a.endswith("/*") and media.startswith(a[:-1])) for a in accept)


def _encodings(headers: httpx2.Headers) -> list[str]:
    """The ``Content-Encoding`` layers in the order they were applied (``identity`` left out)."""
    values = ",".join(headers.get_list("content-encoding"))
    return [e for e in (v.strip().lower() for v in values.split(",")) if e and e != "identity"]


class _Decoder:
    """One ``Content-Encoding`` layer undone a bounded step at a time: no step yields more
    than what is left under the cap, plus one byte to notice going over it."""

    def __init__(self, encoding: str, url: httpx2.URL, cap: int) -> None:
        self.encoding, self.url, self.cap, self.total = encoding, url, cap, 0
        self._brotli = brotli.Decompressor() if encoding == "br" else None
        # deflate is meant to be zlib-wrapped, and some servers send it raw: tried in that order.
        wbits = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding)
        self._zlib = zlib.decompressobj(wbits) if wbits is not None else None
        self._first = encoding == "deflate"

    def _room(self) -> int:
        return self.cap - self.total + 1

    def _take(self, out: bytearray, chunk: bytes) -> None:
        out += chunk
        self.total += len(chunk)
        if self.total > self.cap:
            raise _too_large(self.url, self.cap)

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        try:
            if self._brotli is not None:
                self._take(out, self._brotli.process(data, output_buffer_limit=self._room()))
                while not self._brotli.is_finished() and not self._brotli.can_accept_more_data():
                    self._take(out, self._brotli.process(b"", output_buffer_limit=self._room()))
                return bytes(out)
            assert self._zlib is not None
            if self._first and len(data) >= 2:
                self._first = False
                if not ((data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0):  # no zlib header
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            while data and not self._zlib.eof:
                self._take(out, self._zlib.decompress(data, self._room()))
                data = self._zlib.unconsumed_tail
        except (zlib.error, brotli.error) as exc:
            raise Unavailable(f"the {self.encoding} body of {self.url} is broken ({exc}); the site sent a "
                              "damaged answer") from exc
        return bytes(out)


def _decoder(encoding: str, url: httpx2.URL, cap: int) -> _Decoder:
    if encoding not in ("gzip", "x-gzip", "deflate", "br"):
        raise OutboundRefused(f"{url} answered in the {encoding!r} encoding; noteloom reads gzip, deflate, br "
                              "and plain bodies only", field="url")
    return _Decoder(encoding, url, cap)


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _codec(name: str | bytes | None) -> str | None:
    if not name:
        return None
    text = name.decode("ascii", "replace") if isinstance(name, bytes) else name
    try:
        return codecs.lookup(text.strip().strip("\"'")).name
    except LookupError:
        return None


def decode_text(body: bytes, content_type: str = "") -> str:
    """``body`` as text: the charset ``content_type`` names, else an HTML ``<meta>`` charset
    in the first 2 KiB, else a byte order mark, else UTF-8 if it is, else a detected one
    (windows-1252 when too short to tell)."""
    declared = next((p.split("=", 1)[1] for p in content_type.split(";")[1:]
                     if p.strip().lower().startswith("charset=")), None)
    meta = _META_CHARSET.search(body[:2048])
    codec = _codec(declared) or _codec(meta.group(1) if meta else None)
    if codec is None:
        codec = next((name for bom, name in _BOMS if body.startswith(bom)), None)
    if codec is None:
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            import charset_normalizer  # only for the rare page that declares nothing and is not UTF-8

            best = charset_normalizer.from_bytes(body[:200_000]).best() if len(body) >= 64 else None
            codec = _codec(best.encoding) if best is not None else None
            # Without a BOM a UTF-16/32 guess is a misreading of a few bytes; the web's own
            # default for an undeclared page is windows-1252.
            if codec is None or codec.startswith(("utf-16", "utf-32")):
                codec = "cp1252"
    return body.decode(codec or "utf-8", errors="replace")
