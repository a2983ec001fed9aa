"""The settings of the apiserver's check of a server's callers (kube/delegated_auth.py), with the four
flags both servers take for them under kube-controller-manager's names, parsed here by one set of rules.

No API client is imported: `python -m webhook` parses these before gevent patches the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from plumbing.durations import parse_duration


@dataclass(frozen=True)
class AuthFlag:
    flag: str
    default: str
    metavar: str
    help: str


# kube-controller-manager's defaults (k8s.io/apiserver pkg/server/options/authentication.go, authorization.go)
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
TOKEN_CACHE_TTL = 10.0
AUTHORIZED_CACHE_TTL = 10.0
UNAUTHORIZED_CACHE_TTL = 10.0

TOKEN_TTL_FLAG = AuthFlag(
    "--authentication-token-webhook-cache-ttl",
    "10s",
    "DURATION",
    "how long a TokenReview's answer is kept (accepted or not)",
)
AUTHORIZED_TTL_FLAG = AuthFlag(
    "--authorization-webhook-cache-authorized-ttl",
    "10s",
    "DURATION",
    "how long an allowing SubjectAccessReview's answer is kept",
)
UNAUTHORIZED_TTL_FLAG = AuthFlag(
    "--authorization-webhook-cache-unauthorized-ttl",
    "10s",
    "DURATION",
    "how long a refusing SubjectAccessReview's answer is kept",
)
ALWAYS_ALLOW_PATHS_FLAG = AuthFlag(
    "--authorization-always-allow-paths",
    ",".join(ALWAYS_ALLOW_PATHS),
    "PATH,...",
    "paths answered without a token (a trailing * matches a prefix)",
)
AUTH_FLAGS = (TOKEN_TTL_FLAG, AUTHORIZED_TTL_FLAG, UNAUTHORIZED_TTL_FLAG, ALWAYS_ALLOW_PATHS_FLAG)


@dataclass(frozen=True)
class AuthSettings:
    token_ttl: float = TOKEN_CACHE_TTL
    authorized_ttl: float = AUTHORIZED_CACHE_TTL
    unauthorized_ttl: float = UNAUTHORIZED_CACHE_TTL
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS


def _cache_ttl(flag: AuthFlag, text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{flag.flag}: {error}") from None
    if seconds < 0:
        raise ValueError(f"{flag.flag} must not be negative")
    return seconds


def _always_allow_paths(text: str) -> tuple[str, ...]:
    paths = tuple(p.strip() for p in text.split(",") if p.strip())
    for path in paths:
        if not path.startswith("/"):
            raise ValueError(f"{ALWAYS_ALLOW_PATHS_FLAG.flag}: {path!r} does not start with /")
        if "*" in path[:-1]:
            raise ValueError(f"{ALWAYS_ALLOW_PATHS_FLAG.flag}: {path!r}: * may only end a path")
    return paths


def parse_auth_settings(
    *, token_ttl: str, authorized_ttl: str, unauthorized_ttl: str, always_allow_paths: str
) -> AuthSettings:
    """The four flags' values as given; a bad one raises ValueError with a one-line message naming its flag."""
    return AuthSettings(
        token_ttl=_cache_ttl(TOKEN_TTL_FLAG, token_ttl),
        authorized_ttl=_cache_ttl(AUTHORIZED_TTL_FLAG, authorized_ttl),
        unauthorized_ttl=_cache_ttl(UNAUTHORIZED_TTL_FLAG, unauthorized_ttl),
        always_allow_paths=_always_allow_paths(always_allow_paths),
    )
