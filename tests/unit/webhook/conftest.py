"""What the webhook's tests share: the `--fast-paths` switch, so a test that takes it runs both ways."""

from __future__ import annotations

import pytest

SWITCH_IDS = {True: "fast paths on", False: "fast paths off"}


@pytest.fixture(params=list(SWITCH_IDS), ids=list(SWITCH_IDS.values()))
def fast_paths(request: pytest.FixtureRequest) -> bool:
    """The `--fast-paths` switch (webhook/fast_paths.py): each test taking it runs with it on and off."""
    return bool(request.param)
