"""A loopback HTTP server for tests: artifacts, status URLs, redirects, slow answers.

Register a path with what it answers, then point URLs at ``server.url(path)``::

    with LoopbackServer() as server:
        server.route("/a.mp4", body=b"...", headers={"content-type": "video/mp4"})
        server.route("/slow", body=b"x", delay=2.0)
        server.route("/gone", status=404)
        server.route("/big", body=lambda: repeat_chunks(50 * MiB), length=50 * MiB)
        server.route("/trickle", body=lambda: endless(b"x"), interval=0.5)

It runs on ``devstack.loopback.LoopbackHTTPServer``: 127.0.0.1 on an ephemeral
port, served from a daemon thread, stopped when the ``with`` block ends (a
sleeping ``delay`` or ``interval`` is cut short). ``hits`` counts requests per
path, ``answered`` the requests whose handling has ended (the client hung up or
the answer was sent), ``requests`` keeps each request's path and headers.
"""

from __future__ import annotations

import datetime
import itertools
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from devstack.loopback import LoopbackHTTPServer, Served

MiB = 1024 * 1024

Body = bytes | Callable[[], Iterable[bytes]]


@dataclass
class Route:
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Body = b""
    delay: float = 0.0
    """Seconds to wait before answering (to trip a client's read timeout)."""
    length: int | None = None
    """Content-Length to declare for a generated body (omitted: close-delimited)."""
    interval: float = 0.0
    """Seconds to wait before each chunk of a generated body (a trickling server)."""
    raw: bool = False
    """The generated body is the whole answer: status line and headers included."""


@dataclass(frozen=True)
class SeenRequest:
    path: str
    headers: dict[str, str]


def repeat_chunks(total: int, chunk: bytes = b"sume" * (16 * 1024)) -> Iterable[bytes]:
    """``total`` bytes made of one reused chunk: a large body that costs no memory."""
    view = memoryview(chunk)
    sent = 0
    while sent < total:
        piece = view[: min(len(chunk), total - sent)]
        sent += len(piece)
        yield bytes(piece) if len(piece) < len(chunk) else chunk


def endless(chunk: bytes) -> Iterable[bytes]:
    """The same chunk forever: a body that never ends (stopped by the server's exit)."""
    return itertools.repeat(chunk)


class LoopbackServer(Served):
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()
        self.requests: list[SeenRequest] = []
        self.lock = threading.Lock()
        self.http = LoopbackHTTPServer(_Handler, self, tls=tls)
        self.scheme = self.http.scheme

    @property
    def port(self) -> int:
        return self.http.port

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return self.http.url(path, host)

    def route(
        self,
        path: str,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        body: Body = b"",
        delay: float = 0.0,
        length: int | None = None,
        interval: float = 0.0,
        raw: bool = False,
    ) -> str:
        """Serve ``path``; returns its URL."""
        self.routes[path] = Route(status, dict(headers or {}), body, delay, length, interval, raw)
        return self.url(path)

    def wait_answered(self, path: str, timeout: float = 10.0) -> bool:
        """Whether handling a request for ``path`` ended within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.answered[path]:
                    return True
            time.sleep(0.02)
        return False

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        return self.route(path, status=status, headers={"location": location})


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: every answer closes its connection, so a body of
    # unknown length needs no chunked encoding.
    protocol_version = "HTTP/1.0"
    server: LoopbackHTTPServer

    def do_GET(self) -> None:
        owner: LoopbackServer = self.server.owner
        path = self.path
        with owner.lock:
            owner.hits[path] += 1
            owner.requests.append(
                SeenRequest(path, {k.lower(): v for k, v in self.headers.items()})
            )
        route = owner.routes.get(path) or Route(status=404, body=b"not found")
        try:
            if route.delay and self.server.stopping.wait(route.delay):
                return
            # The client may give up first (a timeout test, a size cap): the
            # server drops its connection quietly.
            self._answer(route)
        finally:
            with owner.lock:
                owner.answered[path] += 1

    def _answer(self, route: Route) -> None:
        if route.raw:
            self._chunks(route)
            return
        self.send_response(route.status)
        for name, value in route.headers.items():
            self.send_header(name, value)
        if isinstance(route.body, bytes):
            self.send_header("content-length", str(len(route.body)))
            self.end_headers()
            self.wfile.write(route.body)
            return
        if route.length is not None:
            self.send_header("content-length", str(route.length))
        self.end_headers()
        self._chunks(route)

    def _chunks(self, route: Route) -> None:
        assert callable(route.body)
        for chunk in route.body():
            # True at once when the server is stopping.
            if self.server.stopping.wait(route.interval):
                return
            self.wfile.write(chunk)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def tls_context(directory: Path, hostnames: Iterable[str]) -> tuple[ssl.SSLContext, str]:
    """A server TLS context for ``hostnames`` and the path of the CA that signed it.

    A throwaway CA and leaf certificate, written under ``directory``, so a client
    can verify the server exactly as it would a real one (chain, SAN, SNI).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("sume test CA"))
        .issuer_name(name("sume test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    hosts = list(hostnames)
    leaf = (
        x509.CertificateBuilder()
        .subject_name(name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca.pem"
    cert_path = directory / "server.pem"
    key_path = directory / "server.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return context, str(ca_path)


class StatusServer(LoopbackServer):
    """Sume's status endpoint: ``GET /v1/jobs/<job_id>``; unknown jobs get a 404."""

    def job_url(self, job_id: str) -> str:
        return self.url(f"/v1/jobs/{job_id}")

    def answer(self, job_id: str, data: Any, status: int = 200) -> str:
        text = data if isinstance(data, str) else json.dumps(data)
        headers = {"content-type": "application/json"}
        self.route(f"/v1/jobs/{job_id}", status, headers, text.encode())
        return text

    def polls_of(self, job_id: str) -> int:
        return self.hits[f"/v1/jobs/{job_id}"]
