"""The guarded outbound client: only http(s), only addresses the policy admits, connected to the
address it checked, redirects checked again, time and size capped, webhooks signed."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import pickle
import socket
import ssl
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import brotli  # type: ignore[import-untyped]
import httpx2
import pytest

from http_support import FakeDns, Tls, loopback_http, make_tls
from noteloom.errors import ConfigError, InvalidInput, OutboundRefused, Unavailable
from noteloom.outbound import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    USER_AGENT,
    OutboundClient,
    OutboundPolicy,
    _Decoder,  # the bounded decoder, tested on its own for its memory
    decode_text,
    refusal,
    sign,
    verify,
)

pytestmark = pytest.mark.anyio


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    """A loopback HTTP server of the test's own; ``seen`` lists what reached it."""

    port: int
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            server.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/redirect":
                self._send(int(query.get("status", ["302"])[0]), b"", {"Location": query["to"][0]})
            elif parts.path == "/loop":
                self._send(302, b"", {"Location": "/loop"})
            elif parts.path == "/sized":  # declares its length
                self._send(200, b"x" * int(query["n"][0]))
            elif parts.path == "/endless":  # no length: read until the connection closes
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for _ in range(10_000):
                        self.wfile.write(b"y" * 65536)
                except OSError:
                    pass  # the client hung up at its cap: what the test wants
                self.close_connection = True
            elif parts.path == "/encoded":  # ``n`` bytes of text, compressed with ``enc``
                n, enc = int(query.get("n", ["1000"])[0]), query["enc"][0]
                self._send(200, _compressed(b"z" * n, enc), {"Content-Encoding": enc, "Content-Type": "text/plain"})
            elif parts.path == "/typed":  # a body of the type asked for
                self._send(200, query.get("body", ["<p>hi</p>"])[0].encode("latin-1"),
                           {"Content-Type": query["type"][0]})
            elif parts.path == "/silent":  # answers nothing until the test ends
                server.release.wait(60)
                self._send(200, b"late")
            else:
                self._send(200, b"hello " + self.command.encode())

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_HEAD = _answer

    return Handler


def _compressed(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data, 9)
    if encoding == "deflate":
        return zlib.compress(data, 9)
    if encoding == "raw-deflate":
        out = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        return out.compress(data) + out.flush()
    if encoding == "br":
        return bytes(brotli.compress(data))
    return data


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(port=0)
    with loopback_http(_handler(srv)) as srv.port:
        try:
            yield srv
        finally:
            srv.release.set()  # a handler held back by a test lets go before the server stops


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    return make_tls(tmp_path, "hooks.noteloom.test")


@pytest.fixture
def https_server(tls: Tls) -> Iterator[tuple[Server, list[str | None]]]:
    """The loopback server over TLS; the list collects the SNI names clients sent."""
    srv, names = Server(port=0), list[str | None]()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert, tls.key)
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)
    with loopback_http(_handler(srv), tls=context) as srv.port:
        yield srv, names


def trusting(*entries: str, **caps: Any) -> OutboundClient:
    return OutboundClient(OutboundPolicy(allow=frozenset(entries), **caps))


# -- addresses and the policy -------------------------------------------------------------------


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "169.254.3.4",
    "100.64.0.1", "100.100.100.200", "0.0.0.0", "0.1.2.3", "224.0.0.1", "240.0.0.1", "255.255.255.255",
    "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::", "64:ff9b::a00:1",
])
def test_non_public_addresses_are_refused_with_a_reason(address: str) -> None:
    assert refusal(address) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:2800:220:1:248:1893:25c8:1946",
                                     "::ffff:93.184.216.34"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(address) is None


def test_the_reason_names_the_kind_of_address() -> None:
    assert refusal("127.0.0.1") == "a loopback address"
    assert refusal("169.254.169.254") == "a cloud metadata address"
    assert refusal("::ffff:10.1.1.1") == "a private address"
    assert refusal("100.64.1.1") == "a shared (carrier-grade NAT) address"


def test_the_allow_list_admits_what_it_names_and_nothing_more() -> None:
    policy = OutboundPolicy(allow=frozenset({"127.0.0.1:8080", "10.0.0.0/8", "hooks.lan", "[::1]:9000",
                                             "169.254.0.0/16"}))
    assert policy.admits("127.0.0.1", 8080, "127.0.0.1") is None
    assert policy.admits("127.0.0.1", 8081, "127.0.0.1") == "a loopback address"
    assert policy.admits("x.example", 443, "10.20.30.40") is None
    assert policy.admits("x.example", 443, "192.168.0.1") == "a private address"
    assert policy.admits("HOOKS.lan", 8443, "192.168.0.1") is None
    assert policy.admits("::1", 9000, "::1") is None and policy.admits("::1", 9001, "::1") is not None
    # A network admits link-local addresses, never the metadata service: only its own address does.
    assert policy.admits("x.example", 80, "169.254.1.1") is None
    assert policy.admits("x.example", 80, "169.254.169.254") == "a cloud metadata address"
    assert policy.admits("hooks.lan", 80, "169.254.169.254") == "a cloud metadata address"
    assert OutboundPolicy(allow=frozenset({"169.254.169.254"})).admits("m", 80, "169.254.169.254") is None


@pytest.mark.parametrize("entry", ["127.0.0.1:http", "[::1]", "hooks.lan:0", "a b", "10.0.0.0/33x", ""])
def test_a_malformed_allow_entry_is_a_configuration_error(entry: str) -> None:
    with pytest.raises(ConfigError, match="allow entry"):
        OutboundPolicy(allow=frozenset({entry}))


# -- requests -----------------------------------------------------------------------------------


async def test_a_loopback_url_is_refused_unless_the_operator_allows_it(server: Server) -> None:
    with pytest.raises(OutboundRefused) as info:
        await OutboundClient().request("GET", server.url("/ok"))
    assert info.value.address == "127.0.0.1" and info.value.field == "url"
    assert "loopback" in str(info.value) and "[outbound] allow" in str(info.value)
    assert isinstance(info.value, InvalidInput)
    assert server.seen == []  # refused before connecting

    for entry in ("127.0.0.1", f"127.0.0.1:{server.port}", "127.0.0.0/8"):
        answer = await trusting(entry).request("GET", server.url("/ok"))
        assert (answer.status, answer.body, answer.address) == (200, b"hello GET", "127.0.0.1")
    assert len(server.seen) == 3

    with pytest.raises(OutboundRefused):  # another port of the same address is not allowed
        await trusting(f"127.0.0.1:{server.port + 1}").request("GET", server.url("/ok"))


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com:70/1",
                                 "javascript:alert(1)", "data:text/plain,hi", "//example.com/x", "http:///x"])
async def test_only_http_and_https_are_requested(url: str) -> None:
    with pytest.raises(OutboundRefused):
        await OutboundClient().request("GET", url)


async def test_credentials_in_the_url_are_refused(server: Server) -> None:
    with pytest.raises(OutboundRefused, match="credentials"):
        await trusting("127.0.0.1").request("GET", f"http://me:secret@127.0.0.1:{server.port}/ok")
    assert server.seen == []


async def test_a_host_that_resolves_to_a_private_address_is_refused(server: Server) -> None:
    dns = FakeDns(inside_example=[["10.1.2.3"]], mixed_example=[["93.184.216.34", "127.0.0.1"]])
    client = OutboundClient(resolve=dns)
    with pytest.raises(OutboundRefused, match=r"inside\.example resolves to 10\.1\.2\.3, is a private address"):
        await client.request("GET", "http://inside.example/")
    # Every answer is checked, not only the first.
    with pytest.raises(OutboundRefused) as info:
        await client.request("GET", f"http://mixed.example:{server.port}/ok")
    assert info.value.address == "127.0.0.1"
    assert server.seen == []


async def test_the_connection_goes_to_the_checked_address_whatever_dns_says_later(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS rebinding: the first answer passes the check, a later one would point elsewhere.
    dns = FakeDns(hooks_noteloom_test=[["127.0.0.1"], ["10.66.66.66"]])
    real = socket.getaddrinfo

    def no_second_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        assert host != "hooks.noteloom.test", "the name was resolved again at connect time"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_second_lookup)
    client = OutboundClient(OutboundPolicy(allow=frozenset({"127.0.0.1"})), resolve=dns)
    answer = await client.request("GET", f"http://hooks.noteloom.test:{server.port}/ok")
    assert (answer.status, answer.address) == (200, "127.0.0.1")
    assert dns.asked == ["hooks.noteloom.test"]
    # The request kept its name: the Host header (and, over TLS, SNI and the certificate) use it.
    assert server.seen[0].headers["host"] == f"hooks.noteloom.test:{server.port}"


async def test_over_tls_the_name_is_sent_and_checked_while_the_pinned_address_is_used(
    tls: Tls, https_server: tuple[Server, list[str | None]]
) -> None:
    server, sni = https_server
    ours = ssl.create_default_context(cafile=str(tls.ca))
    client = OutboundClient(OutboundPolicy(allow=frozenset({"127.0.0.1"})),
                            resolve=FakeDns(hooks_noteloom_test=[["127.0.0.1"]]), ssl_context=ours)
    answer = await client.request("GET", f"https://{tls.name}:{server.port}/ok")
    assert (answer.status, answer.body, answer.address) == (200, b"hello GET", "127.0.0.1")
    assert sni == [tls.name] and server.seen[0].headers["host"] == f"{tls.name}:{server.port}"
    # The certificate is checked against the URL's name: the address alone does not match it.
    with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        await client.request("GET", f"https://127.0.0.1:{server.port}/ok")
    # And the default context does not trust a CA the operator did not give it.
    with pytest.raises(Unavailable):
        await OutboundClient(client.policy, resolve=FakeDns(hooks_noteloom_test=[["127.0.0.1"]])).request(
            "GET", f"https://{tls.name}:{server.port}/ok")
    assert len(server.seen) == 1


async def test_each_redirect_is_checked_again(server: Server) -> None:
    client = OutboundClient(OutboundPolicy(allow=frozenset({f"127.0.0.1:{server.port}"})),
                            resolve=FakeDns(metadata_example=[["169.254.169.254"]]))
    for target, address in (("http://10.0.0.1/", "10.0.0.1"), ("http://metadata.example/latest/", "169.254.169.254"),
                            (f"http://127.0.0.1:{server.port + 1}/", "127.0.0.1")):
        with pytest.raises(OutboundRefused) as info:
            await client.request("GET", server.url(f"/redirect?to={target}"))
        assert info.value.address == address
    assert [s.path.split("?")[0] for s in server.seen] == ["/redirect"] * 3

    with pytest.raises(OutboundRefused, match="ftp"):
        await client.request("GET", server.url("/redirect?to=ftp://example.com/"))


async def test_allowed_redirects_are_followed_and_a_loop_is_cut(server: Server) -> None:
    client = trusting("127.0.0.1")
    answer = await client.request("POST", server.url("/redirect?status=307&to=/ok"), content=b"{}")
    assert (answer.status, answer.body, answer.url) == (200, b"hello POST", server.url("/ok"))
    assert server.seen[-1].body == b"{}"  # 307 keeps the method and the body
    answer = await client.request("POST", server.url("/redirect?status=303&to=/ok"), content=b"{}")
    assert answer.body == b"hello GET"

    server.seen.clear()
    with pytest.raises(OutboundRefused, match="redirects more than 5 times"):
        await client.request("GET", server.url("/loop"))
    assert len(server.seen) == 6


async def test_the_response_size_is_capped(server: Server) -> None:
    client = trusting("127.0.0.1", max_response_bytes=1000)
    assert (await client.request("GET", server.url("/sized?n=1000"))).body == b"x" * 1000
    with pytest.raises(OutboundRefused, match="larger than 1000 bytes"):
        await client.request("GET", server.url("/sized?n=1001"))
    # Without a declared length the body is read only up to the cap (the server would send 640 MiB).
    with pytest.raises(OutboundRefused, match="larger than 1000 bytes"):
        await client.request("GET", server.url("/endless"))


async def test_the_request_body_is_capped(server: Server) -> None:
    with pytest.raises(OutboundRefused) as info:
        await trusting("127.0.0.1", max_request_bytes=10).request("POST", server.url("/ok"), content=b"x" * 11)
    assert info.value.field == "content" and server.seen == []


async def test_a_host_that_does_not_answer_is_unavailable(server: Server) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(Unavailable, match=r"could not reach 127\.0\.0\.1"):
        await trusting("127.0.0.1").request("GET", f"http://127.0.0.1:{closed}/")
    # A server that never answers runs into the time cap (the result does not depend on the cap's size).
    with pytest.raises(Unavailable, match=r"did not answer within 0\.3 s"):
        await trusting("127.0.0.1", timeout=0.3).request("GET", server.url("/silent"))


async def test_a_host_that_does_not_resolve_is_unavailable() -> None:
    with pytest.raises(Unavailable, match="could not be resolved"):
        await OutboundClient().request("GET", "http://no-such-host.invalid/")


def test_the_refused_address_survives_a_trip_between_processes() -> None:
    error = pickle.loads(pickle.dumps(OutboundRefused("no", address="10.0.0.1")))
    assert (type(error), error.field, error.address) == (OutboundRefused, "url", "10.0.0.1")


# -- signatures ---------------------------------------------------------------------------------


async def test_a_signed_post_is_verifiable_by_the_receiver(server: Server) -> None:
    body, secret = b'{"kind": "failure"}', "s3cret-token"
    answer = await trusting("127.0.0.1").post_signed(server.url("/hook"), body, secret, now=1_700_000_000)
    assert answer.ok
    got = server.seen[0]
    assert (got.method, got.body, got.headers["content-type"]) == ("POST", body, "application/json")
    ts, signature = got.headers[TIMESTAMP_HEADER.lower()], got.headers[SIGNATURE_HEADER.lower()]
    assert ts == "1700000000"
    # The documented recipe, computed independently of noteloom's own helper.
    expected = hmac.new(secret.encode(), f"{ts}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert signature == f"sha256={expected}" == sign(body, secret, 1_700_000_000)
    assert verify(got.body, secret, ts, signature, now=1_700_000_100)
    assert not verify(got.body + b" ", secret, ts, signature, now=1_700_000_100)  # tampered body
    assert not verify(got.body, "other", ts, signature, now=1_700_000_100)  # wrong secret
    assert not verify(got.body, secret, "1700000001", signature, now=1_700_000_100)  # moved timestamp
    assert not verify(got.body, secret, ts, signature, now=1_700_000_000 + 301)  # replayed late


# -- bodies: encodings, types, charsets ----------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
async def test_compressed_bodies_are_decoded(server: Server, encoding: str) -> None:
    answer = await trusting("127.0.0.1").request("GET", server.url(f"/encoded?enc={encoding}&n=50000"))
    assert answer.body == b"z" * 50_000
    assert server.seen[0].headers["accept-encoding"] == "gzip, deflate, br"


async def test_raw_deflate_as_some_servers_send_it_is_decoded(server: Server) -> None:
    # Served under the name "deflate" by a server of the test's own: zlib's raw stream.
    compressed = _compressed(b"hello raw deflate", "raw-deflate")
    import httpx2

    from noteloom.outbound import _Decoder
    decoder = _Decoder("deflate", httpx2.URL("http://x.example/"), 1000)
    assert decoder.feed(compressed[:3]) + decoder.feed(compressed[3:]) == b"hello raw deflate"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
async def test_a_compression_bomb_is_cut_off_at_the_cap_on_its_decoded_bytes(server: Server, encoding: str) -> None:
    client = trusting("127.0.0.1", max_response_bytes=100_000)
    # 20 MB of text in a body of a few kilobytes: the cap counts what it decodes to.
    with pytest.raises(OutboundRefused, match="larger than 100000 bytes"):
        await client.request("GET", server.url(f"/encoded?enc={encoding}&n=20000000"))
    assert len(_compressed(b"z" * 20_000_000, encoding)) < 100_000


@pytest.mark.parametrize("encoding", ["gzip", "br"])
def test_a_bomb_is_never_inflated_in_memory_past_the_cap(encoding: str) -> None:
    bomb = _compressed(b"\0" * 200_000_000, encoding)  # 200 MB of zeros in a few hundred kilobytes
    decoder = _Decoder(encoding, httpx2.URL("http://bomb.example/"), 1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(OutboundRefused, match="larger than 1000000 bytes"):
            decoder.feed(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak  # the cap and a step over it, not the 200 MB


async def test_an_encoding_it_cannot_bound_is_refused(server: Server) -> None:
    with pytest.raises(OutboundRefused, match="'compress' encoding"):
        await trusting("127.0.0.1").request("GET", server.url("/encoded?enc=compress"))


async def test_a_type_the_caller_does_not_read_is_refused_unread(server: Server) -> None:
    client = trusting("127.0.0.1")
    with pytest.raises(OutboundRefused, match="'image/png', not a type noteloom reads here"):
        await client.request("GET", server.url("/typed?type=image/png"), accept=("text/html", "text/*"))
    page = await client.request("GET", server.url("/typed?type=text/plain;charset=utf-8"),
                                accept=("text/html", "text/*"))
    assert page.media_type == "text/plain" and page.text() == "<p>hi</p>"
    # Without ``accept`` any type is an answer (a webhook's receiver answers what it likes).
    assert (await client.request("GET", server.url("/typed?type=image/png"))).status == 200


async def test_the_cap_can_be_set_per_request(server: Server) -> None:
    client = trusting("127.0.0.1", max_response_bytes=10)
    assert len((await client.request("GET", server.url("/sized?n=5000"), max_bytes=6000)).body) == 5000
    with pytest.raises(OutboundRefused):
        await client.request("GET", server.url("/sized?n=5000"))


async def test_requests_say_who_sends_them_unless_the_caller_does(server: Server) -> None:
    client = trusting("127.0.0.1")
    await client.request("GET", server.url("/ok"))
    await client.request("GET", server.url("/ok"), headers={"User-Agent": "mine"})
    assert [s.headers["user-agent"] for s in server.seen] == [USER_AGENT, "mine"]
    assert USER_AGENT.startswith("noteloom/")


@pytest.mark.parametrize(("body", "content_type", "text"), [
    ("café".encode("latin-1"), "text/html; charset=ISO-8859-1", "café"),
    ('<meta charset="windows-1252"><p>caf\xe9 \x93q\x94'.encode("latin-1"), "text/html", "<p>café “q”"),
    ("café ünïcödé".encode(), "text/html", "café ünïcödé"),
    (b"\xef\xbb\xbfbom", "", "bom"),
    ("caf\xe9".encode("latin-1"), "text/html; charset=no-such-codec", "caf"),
])
def test_text_is_decoded_with_the_charset_the_answer_declares_or_detected(body: bytes, content_type: str,
                                                                          text: str) -> None:
    assert text in decode_text(body, content_type)


def test_undeclared_non_utf8_text_is_detected() -> None:
    sample = ("Ceci est une phrase française assez longue, écrite à l'été, où l'on déjeune près "
              "de la forêt. " * 5)
    assert decode_text(sample.encode("cp1252")) == sample
