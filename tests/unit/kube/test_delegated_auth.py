"""kube/delegated_auth.py: who may read a server's paths, decided from the apiserver's reviews.

The reviews here are an in-process object answering as the apiserver would (its answers are what is
tested against the real apiserver in tests/integration/test_secure_serving.py); a clock is injected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kube.delegated_auth import DelegatedAuth, always_allowed, bearer_token
from kube.reviews import AccessAnswer, Caller, TokenAnswer, token_answer
from plumbing.auth_settings import AuthSettings

READER = Caller("system:serviceaccount:monitoring:prometheus", "uid-1", ("system:serviceaccounts",))
STRANGER = Caller("system:serviceaccount:default:default", "uid-2", ("system:serviceaccounts",))


@dataclass
class Reviews:
    tokens: dict[str, Caller] = field(default_factory=lambda: {"reader": READER, "stranger": STRANGER})
    allowed: set[tuple[str, str, str]] = field(default_factory=lambda: {(READER.name, "/metrics", "get")})
    down: bool = False
    token_reviews: list[str] = field(default_factory=list)
    access_reviews: list[tuple[str, str, str]] = field(default_factory=list)

    def review_token(self, token: str) -> TokenAnswer:
        self.token_reviews.append(token)
        if self.down:
            raise ConnectionError("connection refused")
        caller = self.tokens.get(token)
        return TokenAnswer(caller) if caller else TokenAnswer(None, "invalid bearer token")

    def review_access(self, caller: Caller, path: str, verb: str) -> AccessAnswer:
        self.access_reviews.append((caller.name, path, verb))
        if self.down:
            raise ConnectionError("connection refused")
        return AccessAnswer((caller.name, path, verb) in self.allowed, "" if caller is READER else "no RBAC rule")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gate(reviews: Reviews, clock: Clock | None = None, **settings: object) -> DelegatedAuth:
    return DelegatedAuth(reviews, AuthSettings(**settings), monotonic=clock or Clock())  # type: ignore[arg-type]


VERDICTS = [
    ("the probes' paths need no token", "/healthz", "GET", None, None),
    ("/readyz needs no token", "/readyz", "GET", None, None),
    ("/livez needs no token", "/livez", "GET", None, None),
    ("metrics without a token are 401", "/metrics", "GET", None, 401),
    ("a header that is not Bearer is 401", "/metrics", "GET", "Basic dXNlcjpwYXNz", 401),
    ("an empty bearer token is 401", "/metrics", "GET", "Bearer ", 401),
    ("a token the apiserver does not accept is 401", "/metrics", "GET", "Bearer forged", 401),
    ("a caller without the right is 403", "/metrics", "GET", "Bearer stranger", 403),
    ("a reader's metrics are answered", "/metrics", "GET", "Bearer reader", None),
    ("the scheme is matched in any case", "/metrics", "GET", "bearer reader", None),
    ("a reader may not post to /metrics", "/metrics", "POST", "Bearer reader", 403),
    ("a reader may not read another path", "/debug/pprof", "GET", "Bearer reader", 403),
    ("an unknown path without a token is 401, not 404", "/nothing", "GET", None, 401),
]


@pytest.mark.parametrize(
    ("path", "method", "authorization", "status"), [v[1:] for v in VERDICTS], ids=[v[0] for v in VERDICTS]
)
def test_the_verdict(path, method, authorization, status):
    refusal = gate(Reviews()).check(path, method, authorization)
    assert (refusal.status if refusal else None) == status


def test_a_refusal_names_the_user_the_verb_and_the_path():
    refusal = gate(Reviews()).check("/metrics", "GET", "Bearer stranger")
    assert refusal is not None
    assert refusal.message == (
        'Forbidden: user "system:serviceaccount:default:default" cannot get path "/metrics": no RBAC rule'
    )


def test_the_apiserver_down_is_401_for_the_token_and_500_for_the_access():
    reviews = Reviews(down=True)
    refusal = gate(reviews).check("/metrics", "GET", "Bearer reader")
    assert refusal is not None and refusal.status == 401 and "could not be checked" in refusal.message
    reviews = Reviews()
    auth = gate(reviews)
    assert auth.check("/metrics", "GET", "Bearer reader") is None  # the token's answer is now cached
    reviews.down = True
    auth._access = type(auth._access)(4)  # forget the access answer only
    refusal = auth.check("/metrics", "GET", "Bearer reader")
    assert refusal is not None and refusal.status == 500


def test_answers_are_kept_for_their_ttl_then_asked_again():
    reviews, clock = Reviews(), Clock()
    auth = gate(reviews, clock, token_ttl=10, authorized_ttl=10, unauthorized_ttl=5)
    for _ in range(3):
        assert auth.check("/metrics", "GET", "Bearer reader") is None
        assert auth.check("/metrics", "GET", "Bearer stranger").status == 403
    assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (2, 2)
    clock.now += 5  # the refusal's 5 s are over, the allowance's 10 s not
    auth.check("/metrics", "GET", "Bearer reader")
    auth.check("/metrics", "GET", "Bearer stranger")
    assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (2, 3)
    clock.now += 5
    auth.check("/metrics", "GET", "Bearer reader")
    assert (len(reviews.token_reviews), len(reviews.access_reviews)) == (3, 4)


def test_a_token_the_apiserver_refused_is_not_asked_about_again_within_the_ttl():
    reviews = Reviews()
    auth = gate(reviews)
    for _ in range(5):
        assert auth.check("/metrics", "GET", "Bearer forged").status == 401
    assert reviews.token_reviews == ["forged"]


def test_a_failed_review_is_not_cached():
    reviews = Reviews(down=True)
    auth = gate(reviews)
    auth.check("/metrics", "GET", "Bearer reader")
    reviews.down = False
    assert auth.check("/metrics", "GET", "Bearer reader") is None
    assert len(reviews.token_reviews) == 2


def test_the_cache_never_holds_a_token():
    auth = gate(Reviews())
    auth.check("/metrics", "GET", "Bearer reader")
    assert "reader" not in repr(auth._tokens._entries)


PATHS = [
    ("an exact path", "/healthz", ("/healthz",), True),
    ("not a prefix without a star", "/healthz/etcd", ("/healthz",), False),
    ("a prefix with a star", "/healthz/etcd", ("/healthz*",), True),
    ("a star matches the bare prefix", "/healthz", ("/healthz*",), True),
    ("no pattern, no path", "/healthz", (), False),
]


@pytest.mark.parametrize(("path", "patterns", "allowed"), [p[1:] for p in PATHS], ids=[p[0] for p in PATHS])
def test_always_allowed_paths(path, patterns, allowed):
    assert always_allowed(path, patterns) is allowed


HEADERS = [
    ("a bearer token", "Bearer abc", "abc"),
    ("spaces around", "  Bearer   abc  ", "abc"),
    ("no header", None, None),
    ("another scheme", "Basic abc", None),
    ("two words", "Bearer a b", None),
    ("no token", "Bearer", None),
]


@pytest.mark.parametrize(("header", "token"), [h[1:] for h in HEADERS], ids=[h[0] for h in HEADERS])
def test_bearer_token(header, token):
    assert bearer_token(header) == token


def test_a_token_review_status_becomes_a_caller_or_the_reason():
    status = {
        "authenticated": True,
        "user": {"username": "u", "uid": "1", "groups": ["g"], "extra": {"b": ["2"], "a": ["1"]}},
    }
    assert token_answer(status) == TokenAnswer(Caller("u", "1", ("g",), (("a", ("1",)), ("b", ("2",)))))
    assert token_answer({"authenticated": False, "error": "expired"}) == TokenAnswer(None, "expired")
    assert token_answer({}) == TokenAnswer(None, "the token was not accepted")
