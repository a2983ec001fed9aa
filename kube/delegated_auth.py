"""Who may read a server's endpoints, decided as kube-controller-manager decides it for its own port:
the bearer token checked by a TokenReview, the path by a SubjectAccessReview for that caller, both
answers kept for a few seconds; the probes' paths (`--authorization-always-allow-paths`) open to all.
The settings and their flags are plumbing/auth_settings.py's.

The verdict is an HTTP status and a one-line message, or None to go ahead. The reviews come from
`reviews` (kube/reviews.py `ApiReviews` in the servers; anything with the same two methods in tests).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kube.errors import describe_error
from kube.expiring_cache import ExpiringCache
from kube.reviews import AccessAnswer, Caller, TokenAnswer

if TYPE_CHECKING:  # kube/ and plumbing/ import each other nothing at run time
    from plumbing.auth_settings import AuthSettings

logger = logging.getLogger("taintkeeper.delegated_auth")

CACHE_CAPACITY = 1024  # distinct tokens (and callers x paths) remembered; the oldest go first


class Reviews(Protocol):
    def review_token(self, token: str) -> TokenAnswer: ...

    def review_access(self, caller: Caller, path: str, verb: str) -> AccessAnswer: ...


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def always_allowed(path: str, patterns: Sequence[str]) -> bool:
    """`path` matches one of the patterns: exactly, or by prefix where the pattern ends in `*`
    (the apiserver's `--authorization-always-allow-paths` rule)."""
    return any(path.startswith(p[:-1]) if p.endswith("*") else path == p for p in patterns)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header (the scheme in any case), or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


class DelegatedAuth:
    def __init__(
        self,
        reviews: Reviews,
        settings: AuthSettings,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        capacity: int = CACHE_CAPACITY,
    ) -> None:
        self.settings = settings
        self._reviews = reviews
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._tokens: ExpiringCache[str, TokenAnswer] = ExpiringCache(capacity)
        self._access: ExpiringCache[tuple[Caller, str, str], AccessAnswer] = ExpiringCache(capacity)

    def check(self, path: str, method: str, authorization: str | None) -> Refusal | None:
        """None when the request may be answered; else the refusal to send."""
        if always_allowed(path, self.settings.always_allow_paths):
            return None
        token = bearer_token(authorization)
        if token is None:
            return Refusal(401, "Unauthorized: a bearer token is needed for " + path)
        answer = self._token_answer(token)
        if answer is None:
            return Refusal(401, "Unauthorized: the token could not be checked (the apiserver did not answer)")
        if answer.caller is None:
            return Refusal(401, "Unauthorized: " + answer.error)
        verb = method.lower()  # a non-resource request's verb is its method (the apiserver's RequestInfo)
        access = self._access_answer(answer.caller, path, verb)
        if access is None:
            return Refusal(500, "the caller's access could not be checked (the apiserver did not answer)")
        if not access.allowed:
            reason = f": {access.reason}" if access.reason else ""
            return Refusal(403, f'Forbidden: user "{answer.caller.name}" cannot {verb} path "{path}"{reason}')
        return None

    def _token_answer(self, token: str) -> TokenAnswer | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # the cache never holds a token itself
        with self._lock:
            cached = self._tokens.get(key, self._monotonic())
        if cached is not None:
            return cached
        try:
            answer = self._reviews.review_token(token)
        except Exception as error:  # not cached: the next request asks again
            logger.warning("TokenReview failed: %s", describe_error(error))
            return None
        with self._lock:
            self._tokens.put(key, answer, self.settings.token_ttl, self._monotonic())
        return answer

    def _access_answer(self, caller: Caller, path: str, verb: str) -> AccessAnswer | None:
        key = (caller, path, verb)
        with self._lock:
            cached = self._access.get(key, self._monotonic())
        if cached is not None:
            return cached
        try:
            answer = self._reviews.review_access(caller, path, verb)
        except Exception as error:
            logger.warning("SubjectAccessReview failed: %s", describe_error(error))
            return None
        ttl = self.settings.authorized_ttl if answer.allowed else self.settings.unauthorized_ttl
        with self._lock:
            self._access.put(key, answer, ttl, self._monotonic())
        return answer
