"""kube/clock_offset.py: the apiserver's clock against ours, bounded from Date headers."""

from __future__ import annotations

import pytest

from kube.clock_offset import ClockOffset, dates_every_change, narrowest, offset_from

DATE = "Fri, 27 Nov 2026 03:40:00 GMT"
SERVER = 1795750800.0  # DATE as epoch seconds

ONE_RESPONSE = [
    ("our clock in step: the offset 0 lies within", 1795750800.2, 1795750800.3, (-0.3, 0.8)),
    ("our clock 10 s ahead", 1795750810.2, 1795750810.3, (-10.3, -9.2)),
    ("a slow answer widens the bounds by its time", 1795750799.0, 1795750801.0, (-1.0, 2.0)),
]


@pytest.mark.parametrize(
    ("sent", "received", "bounds"), [c[1:] for c in ONE_RESPONSE], ids=[c[0] for c in ONE_RESPONSE]
)
def test_one_response_bounds_the_offset_by_its_round_trip_and_the_dates_second(sent, received, bounds):
    offset = offset_from(DATE, sent, received)
    assert offset is not None
    assert (round(offset.low, 6), round(offset.high, 6)) == bounds
    assert offset.low <= SERVER - (sent + received) / 2 <= offset.high


@pytest.mark.parametrize("header", ["", "yesterday", "Fri, 99 Nov 2026 03:40:00 GMT"])
def test_a_date_that_cannot_be_read_gives_nothing(header):
    assert offset_from(header, 1.0, 2.0) is None


NARROWING = [
    ("the samples' bounds intersect", [ClockOffset(-0.3, 0.8), ClockOffset(-0.6, 0.5)], ClockOffset(-0.3, 0.5)),
    ("an unreadable sample is left out", [None, ClockOffset(-0.3, 0.8)], ClockOffset(-0.3, 0.8)),
    ("no sample: nothing known", [None, None], None),
    ("samples that contradict (a clock stepped): nothing known", [ClockOffset(0, 1), ClockOffset(5, 6)], None),
]


@pytest.mark.parametrize(("samples", "expected"), [c[1:] for c in NARROWING], ids=[c[0] for c in NARROWING])
def test_several_samples_narrow_the_offset_to_what_all_allow(samples, expected):
    assert narrowest(samples) == expected


VERSIONS = [
    ("1.37 re-dates a stamp at every renewal", "v1.37.2", True),
    ("1.25, the first release that does (kubernetes#110058)", "v1.25.0", True),
    ("1.24 re-dates only when the fields owned change", "v1.24.17", False),
    ("1.20, the old end", "v1.20.2", False),
    ("a build with a suffix", "v1.30.1-eks-1234+abc", True),
    ("a version that cannot be read: not trusted", "", False),
    ("garbage: not trusted", "latest", False),
]


@pytest.mark.parametrize(("version", "expected"), [c[1:] for c in VERSIONS], ids=[c[0] for c in VERSIONS])
def test_only_an_apiserver_from_1_25_dates_every_change_of_a_value(version, expected):
    assert dates_every_change(version) is expected
