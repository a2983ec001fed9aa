"""hack.wait.wait_for: the one polling loop of hack/, bench/ and the test suites."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from hack.wait import WaitTimeout, wait_for


def answers(*values: object):
    """A condition returning (or raising) `values` in turn, then the last one for ever."""
    remaining = list(values)

    def condition() -> object:
        value = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if isinstance(value, BaseException):
            raise value
        return value

    return condition


def test_returns_the_first_truthy_value() -> None:
    assert wait_for(answers(None, [], {"ready": True}), 5, "the pod", interval=0) == {"ready": True}


def test_an_ignored_exception_is_not_yet_and_any_other_propagates_at_once() -> None:
    assert (
        wait_for(
            answers(ApiException(status=404, reason="Not Found"), "there"),
            5,
            "the Secret",
            interval=0,
            ignore=ApiException,
        )
        == "there"
    )
    with pytest.raises(ValueError, match="broken"):
        wait_for(answers(ValueError("broken"), "there"), 5, "the Secret", interval=0, ignore=ApiException)
    with pytest.raises(ApiException):
        wait_for(answers(ApiException(status=404, reason="Not Found"), "there"), 5, "the Secret", interval=0)


def test_a_timeout_names_what_how_long_and_the_last_value() -> None:
    with pytest.raises(TimeoutError) as raised:
        wait_for(answers(False), 0.05, "the pod Ready", interval=0.01)
    assert isinstance(raised.value, WaitTimeout)
    assert str(raised.value) == "timed out after 0.05s waiting for the pod Ready (last: False)"
    assert raised.value.last is False


def test_a_timeout_after_an_error_shows_it_on_one_line_and_chains_it() -> None:
    error = ApiException(status=503, reason="Service Unavailable")
    with pytest.raises(WaitTimeout, match=r"waiting for the Secret \(last: ApiException 503 Service Unavailable\)$"):
        wait_for(answers(error), 0.02, "the Secret", interval=0.01, ignore=Exception)
    with pytest.raises(WaitTimeout, match=r"\(last: RuntimeError: first line\)$") as raised:
        wait_for(answers(RuntimeError("first line\nsecond line")), 0.02, "x", interval=0.01, ignore=RuntimeError)
    assert isinstance(raised.value.__cause__, RuntimeError)


class Pending:
    """Falsy, with a long repr (a status object, say)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "p" * 1000


def test_a_long_last_value_is_shortened() -> None:
    with pytest.raises(WaitTimeout) as raised:
        wait_for(Pending, 0.01, "x", interval=0.01)
    assert str(raised.value) == f"timed out after 0.01s waiting for x (last: {'p' * 300}...)"
