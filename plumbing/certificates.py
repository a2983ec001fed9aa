"""Make and inspect TLS material: a private CA and a serving certificate it signs (the webhook's, by
certs/; the controller's self-signed one when it is given no certificate files).

Everything here is a pure function of its arguments (plus fresh key randomness): no files, no
printing, no clock. Callers pass `now`, so renewal decisions are reproducible in tests.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Keys we can sign certificates with. New keys are always P-256; RSA is accepted so that an
# existing CA someone provisioned by hand keeps working.
SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

# Certificates start this far in the past so a node or API server whose clock lags ours still
# accepts a certificate issued a moment ago.
CLOCK_SKEW = timedelta(minutes=5)
# X.509 caps commonName at 64 characters (RFC 5280 ub-common-name).
_MAX_COMMON_NAME = 64

_T = TypeVar("_T")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_MAX_SUBDOMAIN = 253


class CertError(ValueError):
    """Bad input to certificate issuance; the message is one line, fit to show a user as-is."""


# --- validation -----------------------------------------------------------------------------


def validate_label(value: str, what: str) -> str:
    """Return `value` if it is a DNS-1123 label (what Kubernetes requires of Service/Namespace names)."""
    if not _LABEL.fullmatch(value):
        raise CertError(
            f"{what} {value!r} is not a valid DNS-1123 label "
            "(1-63 lowercase letters, digits or '-', starting and ending with a letter or digit)"
        )
    return value


def validate_dns_name(value: str) -> str:
    """Return `value` if it is a DNS-1123 subdomain, optionally with a leading `*.` wildcard.

    Anything else would either be rejected by clients' hostname matching or never match at all,
    so it is better refused up front than silently put into a certificate.
    """
    body = value[2:] if value.startswith("*.") else value
    if not body or len(value) > _MAX_SUBDOMAIN or not all(_LABEL.fullmatch(p) for p in body.split(".")):
        raise CertError(
            f"DNS name {value!r} is not a valid DNS-1123 subdomain "
            "(lowercase labels of letters, digits or '-', separated by '.', at most 253 characters; "
            "an optional leading '*.' is allowed)"
        )
    return value


def parse_ip(value: str | IPAddress) -> IPAddress:
    """Parse one IPv4/IPv6 address (not a network) for an IP SAN."""
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        raise CertError(f"IP address {value!r} is not a valid IPv4 or IPv6 address") from None


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server (or a pod) may use to reach `service` in `namespace`.

    The API server calls webhooks at `<svc>.<ns>.svc`; the other forms cover in-cluster clients
    and tools that use a shorter or the fully qualified name.
    """
    validate_label(service, "service")
    validate_label(namespace, "namespace")
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def requested_sans(
    service: str,
    namespace: str,
    extra_dns: Iterable[str] = (),
    extra_ips: Iterable[str | IPAddress] = (),
) -> tuple[list[str], list[IPAddress]]:
    """Validate a whole request and return the de-duplicated SAN lists (service names first)."""
    names = service_dns_names(service, namespace) + [validate_dns_name(n) for n in extra_dns]
    ips = [parse_ip(ip) for ip in extra_ips]
    return _dedupe(names), _dedupe(ips)


def _dedupe(items: Iterable[_T]) -> list[_T]:
    return list(dict.fromkeys(items))


def as_utc(now: datetime) -> datetime:
    """`now` in UTC; refuses a naive datetime."""
    # A naive datetime would silently be read as local time by some callers and UTC by others.
    if now.tzinfo is None or now.utcoffset() is None:
        raise CertError("now must be a timezone-aware datetime")
    return now.astimezone(UTC)


def _positive(valid_for: timedelta, what: str) -> timedelta:
    if valid_for <= timedelta(0):
        raise CertError(f"{what} must be positive, got {valid_for}")
    return valid_for


# --- issuance -------------------------------------------------------------------------------


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh ECDSA P-256 key: every API-server call does a TLS handshake, and P-256 makes the
    server's signature several times cheaper than RSA-2048 at comparable strength."""
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(
    common_name: str, valid_for: timedelta, now: datetime
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA that may sign leaf certificates only (path_length=0), nothing else."""
    now = as_utc(now)
    _positive(valid_for, "CA validity")
    if not 1 <= len(common_name) <= _MAX_COMMON_NAME:
        raise CertError(f"CA common name must be 1-{_MAX_COMMON_NAME} characters, got {len(common_name)}")
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + valid_for)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        # Optional for a self-signed root, but strict verifiers (OpenSSL X509_STRICT) like it.
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_serving_cert(
    ca_key: SigningKey,
    ca_cert: x509.Certificate,
    dns_names: Sequence[str],
    ips: Sequence[str | IPAddress],
    valid_for: timedelta,
    now: datetime,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A TLS server certificate for `dns_names`/`ips`, signed by the CA, with a fresh key.

    Its validity is clipped to the CA's: a leaf that outlives its issuer could not be verified
    anyway, and clipping keeps the renewal check on the leaf alone sufficient.
    """
    now = as_utc(now)
    _positive(valid_for, "certificate validity")
    names = _dedupe(validate_dns_name(n) for n in dns_names)
    addresses = _dedupe(parse_ip(ip) for ip in ips)
    if not names and not addresses:
        raise CertError("a serving certificate needs at least one DNS name or IP address")
    if not is_ca(ca_cert) or not key_matches(ca_key, ca_cert):
        raise CertError("the CA certificate is not a CA or does not match the CA key")
    not_before = max(now - CLOCK_SKEW, ca_cert.not_valid_before_utc)
    not_after = min(now + valid_for, ca_cert.not_valid_after_utc)
    if not_after <= now:
        raise CertError(f"the CA expired at {ca_cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")

    key = new_key()
    # Clients match against the SAN only; the CN is for humans reading logs. A name too long for
    # the CN means an empty subject, and RFC 5280 then requires the SAN to be critical.
    common_name = names[0] if names and len(names[0]) <= _MAX_COMMON_NAME else None
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    san = x509.SubjectAlternativeName([x509.DNSName(n) for n in names] + [x509.IPAddress(ip) for ip in addresses])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            # ECDHE key exchange only needs signatures; keyEncipherment is an RSA-transport thing.
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(san, critical=common_name is None)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_identifier(ca_cert), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _authority_key_identifier(ca_cert: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    # Chain builders pick the issuer by AKI == SKI; use the CA's own SKI when it has one (a
    # hand-made CA may have computed it differently from the public key).
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key())  # type: ignore[arg-type]
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


# --- inspection -----------------------------------------------------------------------------


def needs_renewal(cert: x509.Certificate, now: datetime, renew_before: timedelta) -> bool:
    """True when `cert` expires within `renew_before` of `now` (or already has), or is not yet
    valid (which means it was made by a clock we cannot trust)."""
    now = as_utc(now)
    return now < cert.not_valid_before_utc or cert.not_valid_after_utc - now <= renew_before


def covers(cert: x509.Certificate, dns_names: Iterable[str], ips: Iterable[str | IPAddress]) -> bool:
    """True when the certificate's SAN lists every requested name and IP literally.

    A wildcard in the certificate does not count as covering a concrete name: the request said
    which names it wants, and reissuing is cheap.
    """
    return not missing_sans(cert, dns_names, ips)


def missing_sans(cert: x509.Certificate, dns_names: Iterable[str], ips: Iterable[str | IPAddress]) -> list[str]:
    """The requested names/IPs (as text) absent from the certificate's SAN, for log messages."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        have_names: set[str] = set()
        have_ips: set[IPAddress] = set()
    else:
        have_names = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
        have_ips = {
            ip
            for ip in san.get_values_for_type(x509.IPAddress)
            if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)
        }  # not networks
    missing = [n for n in dns_names if n.lower() not in have_names]
    return missing + [str(ip) for ip in map(parse_ip, ips) if ip not in have_ips]


def signed_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> bool:
    """True when `ca_cert` is the issuer of `cert` (names match and the signature verifies).

    `verify_directly_issued_by` exists in every cryptography release this project allows (>=42).
    """
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def is_ca(cert: x509.Certificate) -> bool:
    """True when the certificate may sign other certificates (BasicConstraints ca=True)."""
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def key_matches(key: PrivateKeyTypes, cert: x509.Certificate) -> bool:
    """True when `key` is the private half of the certificate's public key."""
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    try:
        return key.public_key().public_bytes(*spki) == cert.public_key().public_bytes(*spki)
    except (ValueError, TypeError):
        return False
