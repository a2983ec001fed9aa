"""Tests for the `certs` package: issuance, the reuse/renew policy on disk, and the CLI."""

from __future__ import annotations

import base64
import ipaddress
import os
import socket
import ssl
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given
from hypothesis import strategies as st

from certs import store
from plumbing import certificates as issue
from plumbing.certificates import CertError

REPO = Path(__file__).resolve().parents[3]
# Passed explicitly everywhere; it is the real time (to the second, as X.509 stores it) only because
# the TLS handshake tests verify certificates against the real clock.
NOW = datetime.now(UTC).replace(microsecond=0)
SVC, NS = "taintkeeper-webhook", "taintkeeper-system"
FILES = (store.CA_CERT, store.CA_KEY, store.TLS_CERT, store.TLS_KEY)
DAY = timedelta(days=1)


def run_ensure(out: Path, extra_dns: list[str] | None = None, now: datetime = NOW) -> store.Result:
    return store.ensure(
        out,
        SVC,
        NS,
        extra_dns or [],
        ["127.0.0.1"],
        ca_valid_for=3650 * DAY,
        cert_valid_for=365 * DAY,
        renew_before=30 * DAY,
        now=now,
    )


def snapshot(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in FILES if (out / name).exists()}


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def issued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory of material, shared by the read-only tests (key generation is the slow part)."""
    out = tmp_path_factory.mktemp("issued")
    run_ensure(out, ["webhook.example.com", "*.apps.example.com"])
    return out


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("func", "value", "ok"),
    [
        pytest.param(issue.validate_label, "taintkeeper-webhook", True, id="label-lowercase-with-dash-ok"),
        pytest.param(issue.validate_label, "a" * 63, True, id="label-63-chars-ok"),
        pytest.param(issue.validate_label, "a" * 64, False, id="label-64-chars-rejected"),
        pytest.param(issue.validate_label, "Bad_Name", False, id="label-uppercase-underscore-rejected"),
        pytest.param(issue.validate_label, "-lead", False, id="label-leading-dash-rejected"),
        pytest.param(issue.validate_label, "trail-", False, id="label-trailing-dash-rejected"),
        pytest.param(issue.validate_label, "", False, id="label-empty-rejected"),
        pytest.param(issue.validate_label, "a.b", False, id="label-with-dot-rejected"),
        pytest.param(issue.validate_dns_name, "webhook.example.com", True, id="subdomain-ok"),
        pytest.param(issue.validate_dns_name, "*.example.com", True, id="wildcard-prefix-ok"),
        pytest.param(issue.validate_dns_name, "a.*.example.com", False, id="inner-wildcard-rejected"),
        pytest.param(issue.validate_dns_name, "*", False, id="bare-wildcard-rejected"),
        pytest.param(issue.validate_dns_name, "example..com", False, id="empty-label-rejected"),
        pytest.param(issue.validate_dns_name, "example.com.", False, id="trailing-dot-rejected"),
        pytest.param(issue.validate_dns_name, "Example.com", False, id="uppercase-subdomain-rejected"),
        pytest.param(issue.validate_dns_name, ".".join(["a" * 63] * 4), False, id="over-253-chars-rejected"),
        pytest.param(issue.parse_ip, "127.0.0.1", True, id="ipv4-ok"),
        pytest.param(issue.parse_ip, "fd00::1", True, id="ipv6-ok"),
        pytest.param(issue.parse_ip, "999.1.1.1", False, id="ipv4-octet-out-of-range-rejected"),
        pytest.param(issue.parse_ip, "10.0.0.0/8", False, id="network-rejected"),
        pytest.param(issue.parse_ip, "localhost", False, id="hostname-as-ip-rejected"),
    ],
)
def test_validators_accept_valid_and_reject_invalid_with_one_line_message(
    func: Callable[..., object], value: str, ok: bool
) -> None:
    args = (value, "service") if func is issue.validate_label else (value,)
    if ok:
        func(*args)
        return
    with pytest.raises(CertError) as excinfo:
        func(*args)
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert "\n" not in message
    assert repr(value) in message


_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)


@given(svc=_label, ns=_label)
def test_service_dns_names_are_four_valid_names_with_the_service_suffixes(svc: str, ns: str) -> None:
    names = issue.service_dns_names(svc, ns)
    suffixes = ["", f".{ns}", f".{ns}.svc", f".{ns}.svc.cluster.local"]
    assert len(names) == 4
    for name, suffix in zip(names, suffixes, strict=True):
        assert name == svc + suffix
        assert issue.validate_dns_name(name) == name


@pytest.mark.parametrize(
    ("service", "namespace"),
    [
        pytest.param("Bad_Name", "default", id="bad-service"),
        pytest.param("webhook", "kube.system", id="namespace-with-dot"),
    ],
)
def test_service_dns_names_rejects_invalid_labels(service: str, namespace: str) -> None:
    with pytest.raises(CertError):
        issue.service_dns_names(service, namespace)


# --- issued material -------------------------------------------------------------------------


def test_serving_cert_sans_cn_and_extensions(issued: Path) -> None:
    cert, ca = load_cert(issued / store.TLS_CERT), load_cert(issued / store.CA_CERT)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        SVC,
        f"{SVC}.{NS}",
        f"{SVC}.{NS}.svc",
        f"{SVC}.{NS}.svc.cluster.local",
        "webhook.example.com",
        "*.apps.example.com",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == SVC
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ca_ski
    assert issue.signed_by(cert, ca)
    assert cert.not_valid_after_utc == NOW + 365 * DAY


def test_ca_is_a_path_length_zero_p256_ca(issued: Path) -> None:
    ca = load_cert(issued / store.CA_CERT)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical
    assert (constraints.value.ca, constraints.value.path_length) == (True, 0)
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey)
    assert ca.public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    assert ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)


def test_serving_cert_from_another_ca_is_not_signed_by_this_one(issued: Path, tmp_path: Path) -> None:
    _, other_ca = issue.make_ca("other", 10 * DAY, NOW)
    assert not issue.signed_by(load_cert(issued / store.TLS_CERT), other_ca)


@pytest.mark.parametrize(
    ("path", "mode"),
    [pytest.param(name, store.KEY_MODE if name.endswith(".key") else store.CERT_MODE, id=name) for name in FILES],
)
def test_file_modes_keys_private_certs_world_readable(issued: Path, path: str, mode: int) -> None:
    assert mode_of(issued / path) == mode


def _handshake(out: Path, server_hostname: str, cafile: Path | None = None) -> None:
    """A real TLS handshake over a socketpair: server uses tls.crt/key, client trusts ca.crt."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(out / store.TLS_CERT, out / store.TLS_KEY)
    client_ctx = ssl.create_default_context(cafile=cafile or out / store.CA_CERT)
    server_sock, client_sock = socket.socketpair()
    for sock in (server_sock, client_sock):
        sock.settimeout(10)

    def serve() -> None:
        with server_ctx.wrap_socket(server_sock, server_side=True) as tls:
            tls.sendall(b"ok")

    with ThreadPoolExecutor(1) as pool:
        server = pool.submit(serve)
        try:
            with client_ctx.wrap_socket(client_sock, server_hostname=server_hostname) as tls:
                assert tls.recv(2) == b"ok"
        finally:
            client_sock.close()
            server_error = server.exception()
    # The server only fails when the client aborts, which the client side already reported.
    assert server_error is None


@pytest.mark.parametrize(
    "hostname",
    [
        pytest.param(f"{SVC}.{NS}.svc", id="service-dns-name-as-the-apiserver-calls-it"),
        pytest.param("127.0.0.1", id="ip-san"),
        pytest.param("foo.apps.example.com", id="wildcard-extra-dns-name"),
    ],
)
def test_tls_handshake_succeeds_for_names_in_the_san(issued: Path, hostname: str) -> None:
    _handshake(issued, hostname)


@pytest.mark.parametrize(
    "hostname",
    [
        pytest.param(f"other.{NS}.svc", id="other-service-name"),
        pytest.param("127.0.0.2", id="other-ip"),
    ],
)
def test_tls_handshake_fails_for_names_not_in_the_san(issued: Path, hostname: str) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(issued, hostname)


def test_tls_handshake_fails_when_client_trusts_a_different_ca(issued: Path, tmp_path: Path) -> None:
    _, other_ca = issue.make_ca("other", 10 * DAY, NOW)
    cafile = tmp_path / "other.crt"
    cafile.write_bytes(store.cert_to_pem(other_ca))
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        _handshake(issued, f"{SVC}.{NS}.svc", cafile=cafile)


def test_ca_bundle_is_one_line_base64_of_the_ca_pem(issued: Path) -> None:
    pem = (issued / store.CA_CERT).read_bytes()
    bundle = store.ca_bundle(pem)
    assert "\n" not in bundle
    decoded = base64.b64decode(bundle, validate=True)
    assert decoded == pem
    assert decoded.startswith(b"-----BEGIN CERTIFICATE-----")


# --- inspection helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        pytest.param(NOW, False, id="fresh"),
        pytest.param(NOW + 334 * DAY, False, id="31-days-left"),
        pytest.param(NOW + 335 * DAY, True, id="exactly-30-days-left"),
        pytest.param(NOW + 400 * DAY, True, id="expired"),
        pytest.param(NOW - DAY, True, id="not-yet-valid"),
    ],
)
def test_needs_renewal_within_window_expired_or_not_yet_valid(issued: Path, now: datetime, expected: bool) -> None:
    assert issue.needs_renewal(load_cert(issued / store.TLS_CERT), now, 30 * DAY) is expected


@pytest.mark.parametrize(
    ("dns", "ips", "expected"),
    [
        pytest.param([f"{SVC}.{NS}.svc"], [], True, id="service-name"),
        pytest.param(["WEBHOOK.example.com"], ["127.0.0.1"], True, id="case-insensitive-name-and-ip"),
        pytest.param(["new.example.com"], [], False, id="missing-name"),
        pytest.param(["foo.apps.example.com"], [], False, id="wildcard-does-not-count-as-literal"),
        pytest.param([], ["10.0.0.1"], False, id="missing-ip"),
    ],
)
def test_covers_requires_every_requested_name_and_ip(
    issued: Path, dns: list[str], ips: list[str], expected: bool
) -> None:
    assert issue.covers(load_cert(issued / store.TLS_CERT), dns, ips) is expected


def test_serving_cert_never_outlives_its_ca() -> None:
    ca_key, ca_cert = issue.make_ca("short", 10 * DAY, NOW)
    _, cert = issue.make_serving_cert(ca_key, ca_cert, ["a.example.com"], [], 365 * DAY, NOW)
    assert cert.not_valid_after_utc == ca_cert.not_valid_after_utc


def test_naive_now_is_rejected() -> None:
    with pytest.raises(CertError, match="timezone-aware"):
        issue.make_ca("x", DAY, datetime(2030, 1, 1))  # naive on purpose


# --- ensure: the reuse/renew policy ------------------------------------------------------------


def test_first_run_creates_everything(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    result = run_ensure(out)
    assert (result.ca_action, result.cert_action, result.reasons) == ("created", "created", ())
    assert result.ca_pem == (out / store.CA_CERT).read_bytes()
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)  # no temp files left behind


def test_second_run_reuses_both_and_leaves_files_byte_identical(tmp_path: Path) -> None:
    run_ensure(tmp_path, ["webhook.example.com"])
    before = snapshot(tmp_path)
    result = run_ensure(tmp_path, ["webhook.example.com"], now=NOW + 10 * DAY)
    assert (result.ca_action, result.cert_action, result.reasons) == ("reused", "reused", ())
    assert snapshot(tmp_path) == before


def _corrupt_tls_crt(out: Path) -> None:
    (out / store.TLS_CERT).write_text("not a certificate\n")


def _swap_tls_key(out: Path) -> None:
    (out / store.TLS_KEY).write_bytes((out / store.CA_KEY).read_bytes())


def _tls_from_other_ca(out: Path) -> None:
    ca_key, ca_cert = issue.make_ca("other", 3650 * DAY, NOW)
    key, cert = issue.make_serving_cert(ca_key, ca_cert, issue.service_dns_names(SVC, NS), [], 365 * DAY, NOW)
    (out / store.TLS_KEY).write_bytes(store.key_to_pem(key))
    (out / store.TLS_CERT).write_bytes(store.cert_to_pem(cert))


def _delete_tls(out: Path) -> None:
    (out / store.TLS_CERT).unlink()
    (out / store.TLS_KEY).unlink()


def _delete_ca_key(out: Path) -> None:
    (out / store.CA_KEY).unlink()


def _corrupt_ca_crt(out: Path) -> None:
    (out / store.CA_CERT).write_bytes(b"\x00\xff garbage")


def _ca_is_a_leaf(out: Path) -> None:
    (out / store.CA_CERT).write_bytes((out / store.TLS_CERT).read_bytes())
    (out / store.CA_KEY).write_bytes((out / store.TLS_KEY).read_bytes())


def _no_damage(out: Path) -> None:
    pass


@pytest.mark.parametrize(
    ("damage", "extra_dns", "now", "ca_action", "cert_action", "reason"),
    [
        pytest.param(
            _no_damage,
            ["new.example.com"],
            NOW,
            "reused",
            "renewed",
            "does not cover new.example.com",
            id="new-extra-dns-name-reissues-only-the-serving-cert",
        ),
        pytest.param(
            _no_damage,
            [],
            NOW + 340 * DAY,
            "reused",
            "renewed",
            "within the 30 days",
            id="serving-cert-within-renew-before-is-renewed",
        ),
        pytest.param(
            _no_damage,
            [],
            NOW + 3651 * DAY,
            "renewed",
            "renewed",
            "ca.crt expired",
            id="expired-ca-regenerates-both",
        ),
        pytest.param(
            _no_damage,
            [],
            NOW - DAY,
            "renewed",
            "renewed",
            "not valid before",
            id="clock-before-issue-regenerates-both",
        ),
        pytest.param(
            _corrupt_tls_crt,
            [],
            NOW,
            "reused",
            "renewed",
            "tls.crt is not a valid PEM certificate",
            id="corrupt-tls-crt-is-replaced",
        ),
        pytest.param(
            _swap_tls_key,
            [],
            NOW,
            "reused",
            "renewed",
            "tls.key does not match tls.crt",
            id="mismatched-tls-key-is-replaced",
        ),
        pytest.param(
            _tls_from_other_ca,
            [],
            NOW,
            "reused",
            "renewed",
            "not signed by the current CA",
            id="serving-cert-from-another-ca-is-replaced",
        ),
        pytest.param(
            _delete_tls,
            [],
            NOW,
            "reused",
            "created",
            None,
            id="missing-serving-cert-is-created-with-the-existing-ca",
        ),
        pytest.param(
            _delete_ca_key,
            [],
            NOW,
            "renewed",
            "renewed",
            "ca.key is missing",
            id="missing-ca-key-regenerates-both",
        ),
        pytest.param(
            _corrupt_ca_crt,
            [],
            NOW,
            "renewed",
            "renewed",
            "ca.crt is not a valid PEM certificate",
            id="corrupt-ca-crt-regenerates-both",
        ),
        pytest.param(
            _ca_is_a_leaf,
            [],
            NOW,
            "renewed",
            "renewed",
            "ca.crt is not a CA certificate",
            id="non-ca-certificate-in-ca-crt-regenerates-both",
        ),
    ],
)
def test_ensure_replaces_only_what_is_unusable(
    tmp_path: Path,
    damage: Callable[[Path], None],
    extra_dns: list[str],
    now: datetime,
    ca_action: str,
    cert_action: str,
    reason: str | None,
) -> None:
    run_ensure(tmp_path)
    damage(tmp_path)
    before = snapshot(tmp_path)

    result = run_ensure(tmp_path, extra_dns, now=now)

    assert (result.ca_action, result.cert_action) == (ca_action, cert_action)
    if reason is None:
        assert result.reasons == ()
    else:
        assert any(reason in r for r in result.reasons), result.reasons
    after = snapshot(tmp_path)
    if ca_action == "reused":
        assert after[store.CA_CERT] == before[store.CA_CERT]
        assert after[store.CA_KEY] == before[store.CA_KEY]
    else:
        assert after[store.CA_KEY] != before.get(store.CA_KEY)
    assert after[store.TLS_CERT] != before.get(store.TLS_CERT)
    assert result.ca_pem == after[store.CA_CERT]
    # Whatever happened, the directory now holds a consistent, current, complete set ...
    cert, ca = load_cert(tmp_path / store.TLS_CERT), load_cert(tmp_path / store.CA_CERT)
    assert issue.signed_by(cert, ca)
    assert issue.covers(cert, issue.service_dns_names(SVC, NS) + extra_dns, ["127.0.0.1"])
    assert not issue.needs_renewal(cert, now, 30 * DAY)
    assert all(mode_of(tmp_path / n) == (0o600 if n.endswith(".key") else 0o644) for n in FILES)
    # ... that the next run leaves alone.
    again = run_ensure(tmp_path, extra_dns, now=now)
    assert (again.ca_action, again.cert_action) == ("reused", "reused")
    assert snapshot(tmp_path) == after


@pytest.mark.parametrize("key_file", [store.CA_KEY, store.TLS_KEY])
def test_reused_key_with_loose_mode_is_tightened_to_0600(tmp_path: Path, key_file: str) -> None:
    run_ensure(tmp_path)
    (tmp_path / key_file).chmod(0o644)
    before = snapshot(tmp_path)
    result = run_ensure(tmp_path)
    assert (result.ca_action, result.cert_action) == ("reused", "reused")
    assert mode_of(tmp_path / key_file) == 0o600
    assert result.reasons == (f"{key_file} had mode 0644; changed to 0600",)
    assert snapshot(tmp_path) == before


def test_new_files_get_exact_modes_even_under_a_restrictive_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        run_ensure(tmp_path)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / store.TLS_CERT) == 0o644
    assert mode_of(tmp_path / store.TLS_KEY) == 0o600


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"service": "Bad_Name"}, "not a valid DNS-1123 label", id="bad-service"),
        pytest.param({"extra_dns": ["a..b"]}, "not a valid DNS-1123 subdomain", id="bad-dns-name"),
        pytest.param({"extra_ips": ["999.1.1.1"]}, "not a valid IPv4 or IPv6", id="bad-ip"),
        pytest.param({"cert_valid_for": timedelta(0)}, "must be positive", id="zero-validity"),
        pytest.param({"renew_before": 365 * DAY}, "must be shorter", id="renew-before-not-shorter"),
        pytest.param({"renew_before": -DAY}, "must not be negative", id="negative-renew-before"),
    ],
)
def test_ensure_rejects_bad_input_before_touching_the_disk(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"out_dir": tmp_path / "out", "service": SVC, "namespace": NS, "now": NOW}
    with pytest.raises(CertError, match=message):
        store.ensure(**{**args, **kwargs})  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_ensure_refuses_an_out_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(store.StoreError, match="not a directory"):
        run_ensure(target)


# --- CLI ---------------------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "certs", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def test_cli_prints_only_the_ca_bundle_and_a_summary_on_stderr(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    first = cli("--service", SVC, "--out-dir", str(out), "--ip", "127.0.0.1", "--dns-name", "a.example.com")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert len(lines) == 1 and first.stdout == lines[0] + "\n"
    assert base64.b64decode(lines[0], validate=True) == (out / store.CA_CERT).read_bytes()
    assert first.stderr.startswith(f"certs: CA created, serving certificate created in {out} (valid until ")
    assert len(first.stderr.splitlines()) == 1

    second = cli("--service", SVC, "--out-dir", str(out), "--ip", "127.0.0.1", "--dns-name", "a.example.com")
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert second.stderr.startswith("certs: CA reused, serving certificate reused")

    quiet = cli("--service", SVC, "--out-dir", str(out), "--print", "none")
    assert (quiet.returncode, quiet.stdout) == (0, "")


# Each case: extra arguments (before --out-dir) and the message the single error line must contain.
@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--service", "Bad_Name"], "'Bad_Name' is not a valid DNS-1123 label", id="invalid-service"),
        pytest.param(["--service", SVC, "--namespace", "Kube_System"], "namespace", id="invalid-namespace"),
        pytest.param(["--service", SVC, "--ip", "999.1.1.1"], "'999.1.1.1' is not a valid", id="invalid-ip"),
        pytest.param(["--service", SVC, "--dns-name", "bad..name"], "'bad..name'", id="invalid-dns-name"),
        pytest.param(["--service", SVC, "--cert-days", "0"], "--cert-days must be", id="zero-cert-days"),
        pytest.param(["--service", SVC, "--ca-days", "-1"], "--ca-days must be", id="negative-ca-days"),
        pytest.param(["--service", SVC, "--cert-days", "abc"], "invalid int value", id="non-integer-days"),
        pytest.param(
            ["--service", SVC, "--renew-before-days", "365"],
            "must be less than --cert-days",
            id="renew-before-not-below-cert-days",
        ),
        pytest.param(["--service", SVC, "--print", "pem"], "invalid choice", id="unknown-print-choice"),
        pytest.param([], "required: --service", id="missing-service"),
    ],
)
def test_cli_bad_arguments_exit_2_with_one_error_line_and_write_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    result = cli(*args, "--out-dir", str(out))
    assert_usage_error(result, message)
    assert not out.exists(), "nothing may be written when the arguments are bad"


@pytest.mark.parametrize(
    ("out_dir", "message"),
    [
        pytest.param("file", "is not a directory", id="out-dir-is-a-file"),
        pytest.param("file/sub", "cannot create out-dir", id="out-dir-below-a-file"),
    ],
)
def test_cli_unusable_out_dir_exits_2(tmp_path: Path, out_dir: str, message: str) -> None:
    (tmp_path / "file").write_text("x")
    assert_usage_error(cli("--service", SVC, "--out-dir", str(tmp_path / out_dir)), message)


def assert_usage_error(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("certs: error: ")
    assert len(result.stderr.splitlines()) == 1
    assert message in result.stderr
