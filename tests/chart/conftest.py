"""helm for the chart's tests, built before the first of them starts (outside every test's timeout, in any
test order), and the fixture that hands it to them."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.chart.helm import build_helm


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any("helm" in getattr(item, "fixturenames", ()) for item in session.items):
        with contextlib.suppress(RuntimeError):  # the fixture reports it, on each test that needs helm
            build_helm()


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary built from hack/upstream/helm (`hack/local-cluster.sh build-helm`)."""
    try:
        return build_helm()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
