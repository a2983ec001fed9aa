"""`python -m certs`: create or refresh the webhook's TLS files and print the caBundle.

stdout carries only the base64 caBundle, so `CA_BUNDLE=$(python -m certs ...)` works; the one-line
summary and any error go to stderr. Bad arguments exit 2 with one `certs: error: ...` line.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NoReturn

from certs import store
from certs.store import StoreError
from plumbing import certificates as issue
from plumbing.arguments import OneLineErrorParser
from plumbing.certificates import CertError

USAGE_ERROR = 2
RUNTIME_ERROR = 1
# A century; beyond it timedelta/X.509 dates overflow long before anyone would want such a cert.
MAX_DAYS = 36500


def _fail(message: str, code: int) -> NoReturn:
    print(f"certs: error: {message}", file=sys.stderr)
    sys.exit(code)


def build_parser() -> argparse.ArgumentParser:
    """The command line, kept separate so tests and --help agree on it."""
    parser = OneLineErrorParser(
        prog="python -m certs",
        label="certs",
        description="Create or refresh the webhook's CA and serving certificate; print the caBundle.",
    )
    parser.add_argument("--service", required=True, help="Service name of the webhook")
    parser.add_argument("--namespace", default="taintkeeper-system", help="its namespace (%(default)s)")
    parser.add_argument("--out-dir", required=True, type=Path, help="where ca.crt/ca.key/tls.crt/tls.key live")
    parser.add_argument("--dns-name", action="append", default=[], help="extra DNS SAN (repeatable)")
    parser.add_argument("--ip", action="append", default=[], help="extra IP SAN, e.g. 127.0.0.1 (repeatable)")
    parser.add_argument("--ca-days", type=int, default=3650, help="CA validity in days (%(default)s)")
    parser.add_argument("--cert-days", type=int, default=365, help="serving cert validity (%(default)s)")
    parser.add_argument(
        "--renew-before-days",
        type=int,
        default=30,
        help="replace a certificate this many days before it expires (%(default)s)",
    )
    parser.add_argument(
        "--print",
        choices=["ca-bundle", "none"],
        default="ca-bundle",
        help="what to write to stdout: the base64 caBundle (default) or nothing",
    )
    return parser


def _check_days(args: argparse.Namespace) -> None:
    for flag, days in (("--ca-days", args.ca_days), ("--cert-days", args.cert_days)):
        if not 0 < days <= MAX_DAYS:
            raise CertError(f"{flag} must be between 1 and {MAX_DAYS}, got {days}")
    if args.renew_before_days < 0:
        raise CertError(f"--renew-before-days must not be negative, got {args.renew_before_days}")
    if args.renew_before_days >= args.cert_days:
        raise CertError(
            f"--renew-before-days ({args.renew_before_days}) must be less than --cert-days ({args.cert_days})"
        )
    if args.renew_before_days >= args.ca_days:
        raise CertError(f"--renew-before-days ({args.renew_before_days}) must be less than --ca-days ({args.ca_days})")


def summary(result: store.Result) -> str:
    """One stderr line saying what happened, e.g. `CA reused, serving certificate created in ...`."""
    line = (
        f"certs: CA {result.ca_action}, serving certificate {result.cert_action} in {result.out_dir} "
        f"(valid until {result.cert_not_after:%Y-%m-%dT%H:%M:%SZ})"
    )
    return f"{line}: {'; '.join(result.reasons)}" if result.reasons else line


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sync"]:
        from certs.sync import main as sync_main

        return sync_main(argv[1:])
    if argv[:1] == ["unregister"]:
        from certs.unregister import main as unregister_main

        return unregister_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        # Validate everything before creating any directory or file.
        issue.requested_sans(args.service, args.namespace, args.dns_name, args.ip)
        _check_days(args)
        store.prepare_out_dir(args.out_dir)
    except (CertError, StoreError) as e:
        _fail(str(e), USAGE_ERROR)
    try:
        result = store.ensure(
            args.out_dir,
            args.service,
            args.namespace,
            args.dns_name,
            args.ip,
            ca_valid_for=timedelta(days=args.ca_days),
            cert_valid_for=timedelta(days=args.cert_days),
            renew_before=timedelta(days=args.renew_before_days),
            now=datetime.now(UTC),
        )
    except (CertError, StoreError) as e:
        _fail(str(e), RUNTIME_ERROR)
    if args.print == "ca-bundle":
        print(store.ca_bundle(result.ca_pem))
    print(summary(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
