"""tests/support/refusals.py: a refusal in a log is found, a time or a uid that holds 403 is not."""

from __future__ import annotations

import pytest

from tests.support.refusals import REFUSED

LINES = [
    ("an ApiException's status", "kubernetes.client.exceptions.ApiException: (403)", True),
    ("the API's reason", 'pods is forbidden: User "x" cannot list resource "pods"', True),
    ("a status code field", "request failed code=403 path=/api/v1/nodes", True),
    ("Python logging's milliseconds (seen failing the suite)", "2026-11-27 03:42:14,403 INFO taintkeeper", False),
    ("an RFC 3339 time's fraction", '"time": "2026-11-27T03:42:14.403+00:00"', False),
    ("a uid segment", "uid=1d6d889d-403a-457d-a1e3-b691624004e2", False),
    ("a port or count", "listening on :8403, 14033 requests", False),
]


@pytest.mark.parametrize(("line", "refused"), [c[1:] for c in LINES], ids=[c[0] for c in LINES])
def test_a_refusal_is_told_from_a_number_that_only_contains_403(line: str, refused: bool):
    assert bool(REFUSED.search(line)) is refused
