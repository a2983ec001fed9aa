"""What an API error means, decided in one place: its status, the apiserver's message, one log line.

The generated client raises `ApiException` (and subclasses per status) carrying the response's
status, reason and body; the body is the apiserver's `Status` object as JSON. Callers ask
`is_not_found(error)` and the like instead of comparing numbers, and log `describe_error(error)`.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

FORBIDDEN = 403
NOT_FOUND = 404
# A write against a stale resourceVersion or a failed precondition (uid); on create: AlreadyExists.
CONFLICT = 409
# The resourceVersion a LIST or WATCH resumes from is too old (Expired/Gone): list afresh.
GONE = 410
# Unprocessable: invalid, or a JSON patch whose `test` op failed (the object changed since it was read).
INVALID = 422


class ChangedSinceRead(Exception):
    """The object changed since it was read (409, or 422 from a JSON patch's failed `test` op): read it
    again and decide afresh."""


def status_code(error: BaseException) -> int | None:
    """The HTTP status of an API error; None for anything else (a connection error, a timeout)."""
    status = getattr(error, "status", None) if isinstance(error, ApiException) else None
    return status if isinstance(status, int) else None


def is_not_found(error: BaseException) -> bool:
    return status_code(error) == NOT_FOUND


def is_conflict(error: BaseException) -> bool:
    return status_code(error) == CONFLICT


def is_gone(error: BaseException) -> bool:
    return status_code(error) == GONE


def is_invalid(error: BaseException) -> bool:
    return status_code(error) == INVALID


def status_body(error: BaseException) -> dict[str, Any]:
    """The apiserver's Status object that came with the error ({} when there is none or it is not JSON)."""
    body = getattr(error, "body", None)
    if not body:
        return {}
    try:
        status = json.loads(body)
    except (TypeError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


def api_message(error: BaseException) -> str:
    """The apiserver's own message for an API error, else its HTTP reason, else ""."""
    message = status_body(error).get("message")
    if message:
        return str(message)
    reason = getattr(error, "reason", None)
    return str(reason) if reason else ""


def describe_error(error: BaseException) -> str:
    """One short line for a log: an API error as `403 Forbidden: <the apiserver's message>`,
    anything else as `TypeName: text` (white space folded, cut at 300 characters)."""
    status = getattr(error, "status", None)
    if isinstance(status, int) and hasattr(error, "reason"):
        message = str(status_body(error).get("message") or "")
        return f"{status} {getattr(error, 'reason', '')}" + (f": {message}" if message else "")
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
