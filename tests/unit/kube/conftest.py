"""Fixtures the leader election and write fence tests share."""

from __future__ import annotations

import pytest

from tests.unit.kube.test_leader import FakeClock, MemoryLeases


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> MemoryLeases:
    return MemoryLeases()
