"""The two reviews a server asks the apiserver for before it answers a caller: who sent this bearer
token (TokenReview), and may that caller use this path (SubjectAccessReview on a non-resource path).

The apiserver's delegating authentication and authorization make the same two requests
(k8s.io/apiserver pkg/authentication/authenticatorfactory, pkg/authorization/authorizerfactory); the
server's ServiceAccount needs `create` on both (the built-in ClusterRole system:auth-delegator).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kube.request import request_json

REVIEW_TIMEOUT = (3.0, 5.0)  # connect, read: a scrape waits at most this long for one review


@dataclass(frozen=True)
class Caller:
    """An authenticated user as the TokenReview named it; what a SubjectAccessReview asks about."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())


@dataclass(frozen=True)
class TokenAnswer:
    """A TokenReview's answer: the caller, or why the token was not accepted."""

    caller: Caller | None
    error: str = ""


@dataclass(frozen=True)
class AccessAnswer:
    allowed: bool
    reason: str = ""


class ApiReviews:
    """TokenReview and SubjectAccessReview through a client made on first use (`connect`)."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._client: Any = None

    def _api(self) -> Any:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def review_token(self, token: str) -> TokenAnswer:
        """Raises the client's errors (the apiserver unreachable, the review refused)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = request_json(
            self._api(), "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=body, timeout=REVIEW_TIMEOUT
        )
        return token_answer(answer.get("status") or {})

    def review_access(self, caller: Caller, path: str, verb: str) -> AccessAnswer:
        """Raises the client's errors."""
        spec: dict[str, Any] = {
            "user": caller.name,
            "groups": list(caller.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = {key: list(values) for key, values in caller.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = request_json(
            self._api(),
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body=body,
            timeout=REVIEW_TIMEOUT,
        )
        status = answer.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        return AccessAnswer(allowed, str(status.get("reason") or status.get("evaluationError") or ""))


def token_answer(status: dict[str, Any]) -> TokenAnswer:
    """A TokenReview's status as a TokenAnswer."""
    if not status.get("authenticated"):
        return TokenAnswer(None, str(status.get("error") or "the token was not accepted"))
    user = status.get("user") or {}
    extra = tuple(sorted((str(key), tuple(values or ())) for key, values in (user.get("extra") or {}).items()))
    return TokenAnswer(
        Caller(str(user.get("username") or ""), str(user.get("uid") or ""), tuple(user.get("groups") or ()), extra)
    )
