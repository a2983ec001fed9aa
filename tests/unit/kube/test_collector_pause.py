"""The informer keeps the cyclic garbage collector out of its LISTs (collector_paused)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kube.informer import collector_paused


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_a_list_runs_without_the_collector_and_gives_it_back() -> None:
    gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_lists_give_the_collector_back_only_when_the_last_one_ends() -> None:
    gc.enable()
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_collector_switched_off_before_the_list_stays_off() -> None:
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_a_failing_list_gives_the_collector_back() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the LIST failed")
    assert gc.isenabled()
