"""controller/serving.py: the controller's secure port, against real sockets on loopback.

Who may read is kube/delegated_auth.py's (tests/unit/kube/test_delegated_auth.py; against the real
apiserver in tests/integration/test_secure_serving.py); here the server around it: TLS, the deadlines,
the cap on connections, the limits, a renewed certificate served without a restart.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from controller import serving
from controller.health import health_endpoints
from controller.serving import CertificateFiles, self_signed_files
from kube.delegated_auth import DelegatedAuth
from plumbing.auth_settings import AuthSettings
from tests.unit.kube.test_delegated_auth import Reviews


@pytest.fixture
def certificate(tmp_path: Path) -> CertificateFiles:
    return CertificateFiles(*self_signed_files(tmp_path, datetime.now(UTC)))


def start(certificate: CertificateFiles) -> serving.ThreadingHTTPServer:
    answer = health_endpoints(lambda: (True, "ok"), lambda: (True, "ok"))
    return serving.serve("127.0.0.1", 0, answer, tls=certificate, auth=DelegatedAuth(Reviews(), AuthSettings()))


@pytest.fixture
def port(certificate: CertificateFiles) -> Iterator[int]:
    server = start(certificate)
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def client_context(certificate: CertificateFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certificate.cert_file)  # the file carries its CA
    return context


def request(port: int, certificate: CertificateFiles, raw: bytes) -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as plain,
        client_context(certificate).wrap_socket(plain, server_hostname="localhost") as tls,
    ):
        tls.sendall(raw)
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def status_of(reply: bytes) -> int:
    """The status line's code; for a request too broken to have a version, http.server's error page's."""
    if reply.startswith(b"HTTP/"):
        return int(reply.split(b" ", 2)[1])
    return int(re.search(rb"Error code: (\d+)", reply).group(1))  # type: ignore[union-attr]


def get(path: str, token: str | None = None) -> bytes:
    header = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{header}\r\n".encode()


ANSWERS = [
    ("a probe needs no token", get("/healthz"), 200),
    ("/livez answers as /healthz", get("/livez"), 200),
    ("/readyz needs no token", get("/readyz"), 200),
    ("metrics without a token are refused", get("/metrics"), 401),
    ("a stranger's metrics are forbidden", get("/metrics", "stranger"), 403),
    ("a reader gets the metrics", get("/metrics", "reader"), 200),
    ("a POST is not served", b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 405),
    ("a request line that is not HTTP is 400", b"HELLO\r\n\r\n", 400),
    ("more than 100 headers is 431", b"GET /healthz HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431),
    ("a header line past 64 KiB is 431", b"GET /healthz HTTP/1.1\r\nX-A: " + b"b" * 70000 + b"\r\n\r\n", 431),
    ("a request line past 64 KiB is 414", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
]


@pytest.mark.parametrize(("raw", "status"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS])
def test_the_answer(port, certificate, raw, status):
    assert status_of(request(port, certificate, raw)) == status


def test_the_metrics_a_reader_gets_are_the_processs(port, certificate):
    reply = request(port, certificate, get("/metrics", "reader"))
    assert b"python_info" in reply and b"Connection: close" in reply


def test_plain_http_to_the_secure_port_is_closed_without_an_answer(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        plain.sendall(get("/metrics"))
        started = time.monotonic()
        received = b""
        with contextlib.suppress(ConnectionResetError):  # reset or closed: either way, no answer
            while chunk := plain.recv(65536):
                received += chunk  # a TLS alert record at most
        assert b"HTTP/" not in received
        assert time.monotonic() - started < 2


def test_a_handshake_that_never_finishes_is_closed_at_its_deadline(monkeypatch, certificate):
    monkeypatch.setattr(serving, "HANDSHAKE_TIMEOUT", 0.5)
    server = start(certificate)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as idle:
            started = time.monotonic()
            assert idle.recv(1) == b""
            assert 0.4 < time.monotonic() - started < 2
    finally:
        server.shutdown()


def test_a_request_trickled_a_byte_at_a_time_is_cut_at_the_connection_deadline(monkeypatch, certificate):
    monkeypatch.setattr(serving, "CONNECTION_DEADLINE", 1.0)
    server = start(certificate)
    started = time.monotonic()
    cut = None
    try:
        with (
            socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as plain,
            client_context(certificate).wrap_socket(plain, server_hostname="localhost") as tls,
        ):
            for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                try:
                    tls.sendall(bytes([byte]))
                    time.sleep(0.1)  # the client's pace is what is tested: it never finishes in time
                except OSError:
                    cut = time.monotonic() - started
                    break
            else:
                tls.settimeout(2)
                assert tls.recv(1) == b""
                cut = time.monotonic() - started
    finally:
        server.shutdown()
    assert cut is not None and cut < 3


def test_past_the_cap_a_new_connection_is_closed_and_the_open_ones_are_served(monkeypatch, certificate):
    monkeypatch.setattr(serving, "MAX_CONNECTIONS", 3)
    server = start(certificate)
    port = server.server_address[1]
    try:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        time.sleep(0.2)  # let the server accept them
        with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
            assert extra.recv(1) == b""
        for connection in idle:
            connection.close()
        deadline = time.monotonic() + 5
        while True:  # the slots free as the server notices the closed connections
            try:
                assert status_of(request(port, certificate, get("/healthz"))) == 200
                break
            except (ssl.SSLError, OSError, IndexError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        server.shutdown()


def test_a_renewed_certificate_is_served_to_new_connections_without_a_restart(tmp_path, port, certificate):
    def served_serial() -> int:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as plain,
            context.wrap_socket(plain) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number

    first = served_serial()
    renewed = tmp_path / "renewed"
    renewed.mkdir()
    new_cert, new_key = self_signed_files(renewed, datetime.now(UTC))
    Path(certificate.cert_file).write_bytes(Path(new_cert).read_bytes())
    Path(certificate.key_file).write_bytes(Path(new_key).read_bytes())
    second = served_serial()
    assert second != first
    assert second == x509.load_pem_x509_certificate(Path(new_cert).read_bytes()).serial_number


def test_a_half_written_renewal_keeps_the_certificate_served_before(tmp_path, port, certificate):
    Path(certificate.key_file).write_text("not a key")
    assert status_of(request(port, certificate, get("/healthz"))) == 200


def test_the_self_signed_certificate_names_the_host_and_loopback(tmp_path):
    cert_file, _ = self_signed_files(tmp_path, datetime.now(UTC))
    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert socket.gethostname().lower() in names.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert oct(Path(tmp_path / "tls.key").stat().st_mode & 0o777) == "0o600"


def test_the_self_signed_certificate_is_renewed_before_it_ends():
    now = [datetime.now(UTC)]
    certificate = serving.SelfSigned(clock=lambda: now[0])
    first = certificate.not_after
    certificate.context()
    assert certificate.not_after == first  # a year to go: kept
    now[0] = first - serving.RENEW_BEFORE + timedelta(seconds=1)
    certificate.context()
    assert certificate.not_after > first  # renewed: the next connection gets the new one
    assert certificate.not_after - now[0] > serving.SELF_SIGNED_VALIDITY - timedelta(days=1)


def test_the_self_signed_certificates_directory_goes_when_the_process_exits():
    """Its private key is the process's alone: none is left in the temporary directory after it (the tests'
    controllers, run without --tls-cert-file, once left one per run)."""
    made = subprocess.run(
        [sys.executable, "-c", "from controller.serving import SelfSigned; print(SelfSigned().cert_file)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    directory = Path(made.stdout.strip()).parent
    assert directory.name.startswith("taintkeeper-serving-"), made.stdout
    assert not directory.exists()
