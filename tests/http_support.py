"""A real HTTP server on the loopback address for tests that need one to talk to (pages to
fetch, webhooks to receive, TLS to check), run on a thread of its own."""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@contextmanager
def loopback_http(handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve ``handler`` on 127.0.0.1 (over TLS with ``tls``) and give its port; shut down on exit.

    The join's timeout only bounds a server that will not stop."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(30)


@dataclass
class Tls:
    """A CA of the test's own and a server certificate it signed for ``name`` only."""

    name: str
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path, name: str) -> Tls:
    """A CA and a certificate it signed for ``name``, written into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def made(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey,
             ca: bool) -> x509.Certificate:
        b = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                              content_commitment=False, key_encipherment=False,
                                              data_encipherment=False, key_agreement=False, encipher_only=False,
                                              decipher_only=False), critical=True)
        else:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    out = Tls(name, directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    out.ca.write_bytes(made("noteloom test CA", ca_key, "noteloom test CA", ca_key, True)
                       .public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(made(name, key, "noteloom test CA", ca_key, False).public_bytes(serialization.Encoding.PEM))
    out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return out


class FakeDns:
    """A resolver answering from a script: ``answers[host]`` in turn, the last one repeated."""

    def __init__(self, **answers: list[list[str]]) -> None:
        self.answers = {k.replace("_", "."): v for k, v in answers.items()}
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        script = self.answers[host]
        return script.pop(0) if len(script) > 1 else script[0]
