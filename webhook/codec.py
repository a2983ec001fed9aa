"""JSON in and out of the webhook: orjson, with the standard library wherever orjson would differ.

orjson parses and serialises faster than the `json` module, and reads every AdmissionReview the
apiserver sends the same way (its integers are int64); what orjson refuses but `json` accepts (a
UTF-8 byte order mark, NaN, lone surrogates) is read by `json`, so a body is refused (HTTP 400)
exactly when `json` would refuse it. The one difference left: an integer beyond 64 bits, which no
Kubernetes object holds, is read as a float.
"""

from __future__ import annotations

import json

import orjson

CONTENT_TYPE = "application/json"  # of what `dumps` makes


def loads(body: bytes) -> object:
    """The JSON value of `body`; raises ValueError (json.JSONDecodeError) or RecursionError as `json.loads` does."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def dumps(value: object) -> bytes:
    """Compact JSON of `value` (dicts, lists, strings, numbers, booleans, None) as UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits, a lone surrogate read by `loads`
        return json.dumps(value, separators=(",", ":")).encode()
