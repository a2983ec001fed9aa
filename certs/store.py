"""Keep the webhook's TLS files in a directory up to date: reuse what is still good, replace the rest.

The layout mirrors what the webhook will later mount from a Secret: `tls.crt`/`tls.key` as in a
kubernetes.io/tls Secret, plus `ca.crt` as cert-manager adds it, and `ca.key` so later runs can
re-issue the serving certificate without changing the CA (and so without touching caBundle).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from plumbing import certificates as issue
from plumbing.certificates import CertError, IPAddress, SigningKey

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
KEY_MODE = 0o600
CERT_MODE = 0o644
CA_COMMON_NAME = "taintkeeper-webhook-ca"

Action = Literal["created", "reused", "renewed"]


class StoreError(Exception):
    """The output directory cannot be used (not a directory, not writable, I/O failure)."""


@dataclass(frozen=True)
class Result:
    """What `ensure` did, for a log line, plus the CA PEM the webhook configuration needs."""

    out_dir: Path
    ca_action: Action
    cert_action: Action
    ca_pem: bytes
    ca_not_after: datetime
    cert_not_after: datetime
    # Why something was replaced or fixed; empty when everything was created fresh or reused.
    reasons: tuple[str, ...] = ()


def ca_bundle(ca_pem: bytes) -> str:
    """`clientConfig.caBundle` for a webhook configuration: base64 of the PEM (not DER), one line."""
    return base64.b64encode(ca_pem).decode("ascii")


# --- PEM -------------------------------------------------------------------------------------


def cert_to_pem(cert: x509.Certificate) -> bytes:
    """PEM-encode a certificate."""
    return cert.public_bytes(serialization.Encoding.PEM)


def key_to_pem(key: PrivateKeyTypes) -> bytes:
    """Unencrypted PKCS#8 PEM: what gunicorn/ssl and a kubernetes.io/tls Secret expect."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# --- files -----------------------------------------------------------------------------------


def prepare_out_dir(out_dir: Path) -> None:
    """Create `out_dir` if needed and prove we can create files in it, before doing any work.

    A probe file is more honest than os.access, which says yes to root even on a read-only mount.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise StoreError(f"out-dir {out_dir} exists and is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create out-dir {out_dir}: {e.strerror or e}") from None
    probe = out_dir / f".probe.{secrets.token_hex(6)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as e:
        raise StoreError(f"out-dir {out_dir} is not writable: {e.strerror or e}") from None


def _stage(path: Path, data: bytes, mode: int) -> Path:
    """Write `data` to a new temp file next to `path` with exactly `mode`; return the temp path.

    The file is created 0600 (O_EXCL, so never someone else's file or symlink) and only then
    set to `mode`, so a private key is never readable by others, not even for a moment.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        os.fchmod(fd, mode)  # exact mode, whatever the umask says
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _write_all(files: Sequence[tuple[Path, bytes, int]]) -> None:
    """Replace several files, each atomically, with the renames back to back.

    Staging everything first keeps the moment where tls.key and tls.crt disagree down to two
    rename calls; a crash in between leaves a mismatch that the next `ensure` detects and repairs.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data, mode in files:
            staged.append((_stage(path, data, mode), path))
        while staged:
            tmp, path = staged[0]
            os.replace(tmp, path)
            staged.pop(0)
    except OSError as e:
        where = e.filename or files[0][0].parent
        raise StoreError(f"cannot write {where}: {e.strerror or e}") from None
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    _fsync_dir(files[0][0].parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the renames durable; not every platform/filesystem allows fsync on a directory.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tighten_key_mode(path: Path) -> str | None:
    """chmod a private key to 0600 if it is anything else; return a note saying so."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode == KEY_MODE:
            return None
        path.chmod(KEY_MODE)
    except OSError as e:
        raise StoreError(f"cannot set mode 0600 on {path}: {e.strerror or e}") from None
    return f"{path.name} had mode {mode:04o}; changed to {KEY_MODE:04o}"


@dataclass(frozen=True)
class _Pair:
    """A certificate and its key as found on disk, or why they cannot be used."""

    cert: x509.Certificate | None
    key: PrivateKeyTypes | None
    problem: str | None  # None when cert and key were both read, parsed and match
    existed: bool  # either file was there: replacing it is a renewal, not a creation


def _load_pair(out_dir: Path, cert_name: str, key_name: str) -> _Pair:
    cert_path, key_path = out_dir / cert_name, out_dir / key_name
    existed = os.path.lexists(cert_path) or os.path.lexists(key_path)
    if not existed:
        return _Pair(None, None, f"{cert_name} and {key_name} do not exist", existed=False)

    cert_bytes, problem = _read(cert_path)
    if problem:
        return _Pair(None, None, problem, existed=True)
    try:
        cert = x509.load_pem_x509_certificate(cert_bytes)
    except ValueError:
        return _Pair(None, None, f"{cert_name} is not a valid PEM certificate", existed=True)

    key_bytes, problem = _read(key_path)
    if problem:
        return _Pair(cert, None, problem, existed=True)
    try:
        key = serialization.load_pem_private_key(key_bytes, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return _Pair(cert, None, f"{key_name} is not a valid unencrypted PEM private key", existed=True)
    if not issue.key_matches(key, cert):
        return _Pair(cert, key, f"{key_name} does not match {cert_name}", existed=True)
    return _Pair(cert, key, None, existed=True)


def _read(path: Path) -> tuple[bytes, str | None]:
    try:
        return path.read_bytes(), None
    except FileNotFoundError:
        return b"", f"{path.name} is missing"
    except OSError as e:
        return b"", f"{path.name} is unreadable ({e.strerror or e})"


def _expiry_problem(name: str, cert: x509.Certificate, now: datetime, renew_before: timedelta) -> str | None:
    if not issue.needs_renewal(cert, now, renew_before):
        return None
    if now < cert.not_valid_before_utc:
        return f"{name} is not valid before {_stamp(cert.not_valid_before_utc)}"
    if cert.not_valid_after_utc <= now:
        return f"{name} expired at {_stamp(cert.not_valid_after_utc)}"
    return f"{name} expires at {_stamp(cert.not_valid_after_utc)}, within the {renew_before} renewal window"


def _stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


def _ca_problem(pair: _Pair, now: datetime, renew_before: timedelta) -> str | None:
    if pair.problem or pair.cert is None:
        return pair.problem
    if not issue.is_ca(pair.cert):
        return f"{CA_CERT} is not a CA certificate"
    if not isinstance(pair.key, SigningKey):
        return f"{CA_KEY} is not an EC or RSA key, which this tool cannot sign with"
    return _expiry_problem(CA_CERT, pair.cert, now, renew_before)


def _cert_problem(
    pair: _Pair,
    ca_cert: x509.Certificate,
    dns_names: list[str],
    ips: list[IPAddress],
    now: datetime,
    renew_before: timedelta,
) -> str | None:
    if pair.problem or pair.cert is None:
        return pair.problem
    if not issue.signed_by(pair.cert, ca_cert):
        return f"{TLS_CERT} is not signed by the current CA"
    missing = issue.missing_sans(pair.cert, dns_names, ips)
    if missing:
        return f"{TLS_CERT} does not cover {', '.join(missing)}"
    return _expiry_problem(TLS_CERT, pair.cert, now, renew_before)


def _reused(key_path: Path, reasons: list[str]) -> Action:
    """A pair kept as it is: its key's mode is tightened if need be, and `reasons` says so."""
    note = _tighten_key_mode(key_path)
    if note:
        reasons.append(note)
    return "reused"


def _replaced(pair: _Pair, reason: str, reasons: list[str]) -> Action:
    """A pair issued anew: a renewal, with `reason` added to `reasons`, when there were files to replace."""
    if not pair.existed:
        return "created"
    reasons.append(reason)
    return "renewed"


# --- the policy ------------------------------------------------------------------------------


def ensure(
    out_dir: Path | str,
    service: str,
    namespace: str,
    extra_dns: Sequence[str] = (),
    extra_ips: Sequence[str | IPAddress] = (),
    *,
    ca_valid_for: timedelta = timedelta(days=3650),
    cert_valid_for: timedelta = timedelta(days=365),
    renew_before: timedelta = timedelta(days=30),
    now: datetime,
) -> Result:
    """Make `out_dir` hold a usable CA and serving certificate, changing as little as possible.

    The CA is kept unless it is missing, unreadable, not a CA, or within `renew_before` of expiry,
    because a new CA means the webhook configuration's caBundle must be updated too. The serving
    certificate is kept only if it is signed by that CA, matches its key, covers every requested
    name/IP and is not due for renewal; otherwise it is re-issued with a fresh key. Broken files
    are replaced (with the reason in `Result.reasons`), never an exception.

    Raises CertError for invalid names/IPs/durations (before touching the disk) and StoreError
    when the directory cannot be used.
    """
    now = issue.as_utc(now)
    dns_names, ips = issue.requested_sans(service, namespace, extra_dns, extra_ips)
    if renew_before < timedelta(0):
        raise CertError(f"renew-before must not be negative, got {renew_before}")
    for what, span in (("CA validity", ca_valid_for), ("certificate validity", cert_valid_for)):
        if span <= timedelta(0):
            raise CertError(f"{what} must be positive, got {span}")
        if renew_before >= span:
            # Otherwise every single run would find the fresh certificate due and replace it.
            raise CertError(f"renew-before ({renew_before}) must be shorter than the {what} ({span})")
    out = Path(out_dir)
    prepare_out_dir(out)
    reasons: list[str] = []
    writes: list[tuple[Path, bytes, int]] = []

    ca = _load_pair(out, CA_CERT, CA_KEY)
    problem = _ca_problem(ca, now, renew_before)
    if problem is None and ca.cert is not None and isinstance(ca.key, SigningKey):
        ca_action = _reused(out / CA_KEY, reasons)
        ca_key, ca_cert = ca.key, ca.cert
        ca_pem = cert_to_pem(ca_cert)
    else:
        ca_action = _replaced(ca, f"new CA: {problem}", reasons)
        ca_key, ca_cert = issue.make_ca(CA_COMMON_NAME, ca_valid_for, now)
        ca_pem = cert_to_pem(ca_cert)
        writes += [(out / CA_KEY, key_to_pem(ca_key), KEY_MODE), (out / CA_CERT, ca_pem, CERT_MODE)]

    tls = _load_pair(out, TLS_CERT, TLS_KEY)
    if ca_action != "reused":
        problem = "the CA changed" if tls.existed else None
    else:
        problem = _cert_problem(tls, ca_cert, dns_names, ips, now, renew_before)
    if problem is None and tls.existed and tls.cert is not None:
        cert_action = _reused(out / TLS_KEY, reasons)
        cert = tls.cert
    else:
        cert_action = _replaced(tls, f"new serving certificate: {problem}", reasons)
        key, cert = issue.make_serving_cert(ca_key, ca_cert, dns_names, ips, cert_valid_for, now)
        writes += [(out / TLS_KEY, key_to_pem(key), KEY_MODE), (out / TLS_CERT, cert_to_pem(cert), CERT_MODE)]

    if writes:
        _write_all(writes)
    return Result(
        out_dir=out,
        ca_action=ca_action,
        cert_action=cert_action,
        ca_pem=ca_pem,
        ca_not_after=ca_cert.not_valid_after_utc,
        cert_not_after=cert.not_valid_after_utc,
        reasons=tuple(reasons),
    )
