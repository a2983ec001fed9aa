"""The controller's flags, accepting kube-controller-manager's forms so existing settings carry over.

Durations are Go durations (`5s`, `1m30s`, `300ms`, `1.5h`); booleans are `--flag`,
`--flag=true|false`. Every value is checked at start: a bad one ends the start with one line.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from controller.kube.leader import LeaderElectionConfig
from shared.jsonlog import LOG_FORMATS

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration string -> seconds. `0` alone is allowed; a bare number is not (as in Go)."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    sign = -1.0 if value.startswith("-") else 1.0
    body = value.lstrip("+-")
    position, total = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(f"invalid duration {text!r} (use Go durations such as 5s, 1m30s, 300ms)")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not body:
        raise ValueError(f"invalid duration {text!r} (use Go durations such as 5s, 1m30s, 300ms)")
    return sign * total


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool forms."""
    value = text.strip()
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"invalid boolean {text!r} (use true or false)")


@dataclass(frozen=True)
class ControllerOptions:
    kubeconfig: str | None
    leader_elect: bool
    leader_elect_lease_duration: float
    leader_elect_renew_deadline: float
    leader_elect_retry_period: float
    leader_elect_resource_name: str
    leader_elect_resource_namespace: str
    dry_run: bool
    bind_address: str
    port: int
    taint_eviction_workers: int
    log_format: str
    log_level: str


class OptionsError(ValueError):
    """A flag value that cannot be used; the message names the flag."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise OptionsError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m controller", description="taintkeeper's controller: taint-based eviction.",
                     allow_abbrev=False)
    add = parser.add_argument
    add("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster config, then KUBECONFIG)")
    add("--leader-elect", nargs="?", const="true", default="true", metavar="BOOL",
        help="campaign for the leader Lease and act only while leading (default true)")
    add("--leader-elect-lease-duration", default="15s", metavar="DURATION",
        help="how long a stand-by waits after the last renewal before taking over (default 15s)")
    add("--leader-elect-renew-deadline", default="10s", metavar="DURATION",
        help="how long the leader keeps trying to renew before it stops acting (default 10s)")
    add("--leader-elect-retry-period", default="2s", metavar="DURATION",
        help="how often to try to acquire or renew the Lease (default 2s)")
    add("--leader-elect-resource-name", default="taintkeeper-controller", metavar="NAME")
    add("--leader-elect-resource-namespace", default="taintkeeper-system", metavar="NAMESPACE")
    add("--dry-run", nargs="?", const="true", default="false", metavar="BOOL",
        help="decide, log and record events, but delete nothing")
    add("--bind-address", default="0.0.0.0", help="address for /healthz, /readyz and /metrics")
    add("--port", default="10258", help="port for /healthz, /readyz and /metrics; 0 turns them off")
    add("--taint-eviction-workers", default="8", metavar="N", help="concurrent pod deletions (default 8)")
    add("--log-format", default="plain", help="plain or json")
    add("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    return parser


def _checked(flag: str, parse, raw: str):  # type: ignore[no-untyped-def]
    try:
        return parse(raw)
    except ValueError as error:
        raise OptionsError(f"{flag}: {error}") from None


def _whole(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"invalid whole number {text!r}")
    return int(text)


def parse_options(argv: list[str]) -> ControllerOptions:
    """Parse and validate; raises OptionsError with a one-line message."""
    args = build_parser().parse_args(argv)
    lease = _checked("--leader-elect-lease-duration", parse_duration, args.leader_elect_lease_duration)
    renew = _checked("--leader-elect-renew-deadline", parse_duration, args.leader_elect_renew_deadline)
    retry = _checked("--leader-elect-retry-period", parse_duration, args.leader_elect_retry_period)
    leader_elect = _checked("--leader-elect", parse_bool, args.leader_elect)
    if leader_elect:
        try:  # the one place that knows the rules for these three
            LeaderElectionConfig(args.leader_elect_resource_name, args.leader_elect_resource_namespace, "-",
                                 lease, renew, retry)
        except ValueError as error:
            raise OptionsError(str(error)) from None
    port = _checked("--port", _whole, args.port)
    if port > 65535:
        raise OptionsError(f"--port: {port} is not a port number")
    workers = _checked("--taint-eviction-workers", _whole, args.taint_eviction_workers)
    if workers < 1:
        raise OptionsError("--taint-eviction-workers must be at least 1")
    if args.log_format not in LOG_FORMATS:
        raise OptionsError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, got {args.log_format!r}")
    if args.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise OptionsError(f"--log-level must be DEBUG, INFO, WARNING or ERROR, got {args.log_level!r}")
    return ControllerOptions(
        kubeconfig=args.kubeconfig,
        leader_elect=leader_elect,
        leader_elect_lease_duration=lease,
        leader_elect_renew_deadline=renew,
        leader_elect_retry_period=retry,
        leader_elect_resource_name=args.leader_elect_resource_name,
        leader_elect_resource_namespace=args.leader_elect_resource_namespace,
        dry_run=_checked("--dry-run", parse_bool, args.dry_run),
        bind_address=args.bind_address,
        port=port,
        taint_eviction_workers=workers,
        log_format=args.log_format,
        log_level=args.log_level.upper(),
    )
