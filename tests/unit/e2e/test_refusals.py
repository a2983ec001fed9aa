"""The e2e suite's judge of 403s in component logs: a refusal counts unless a just-started apiserver made it."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.e2e.providers import KLOG_VERSION_LINE, _klog_time
from tests.e2e.test_logs import REFUSED, refused_by_a_starting_apiserver

# The line stop 33's CI failed on: every watch refused at once, right after bench/admission_latency.py
# restarted kube-apiserver.
WATCH_REFUSED = (
    '{"time": "2026-11-26T03:50:53.810+00:00", "severity": "warning", "logger": "taintkeeper.informer", '
    '"message": "nodes: watch failed (403 Forbidden: nodes is forbidden: User '
    '\\"system:serviceaccount:taintkeeper-system:taintkeeper-controller\\" cannot watch resource '
    '\\"nodes\\" in API group \\"\\" at the cluster scope); retrying in 0.4s from resourceVersion 1525"}'
)
STARTED = datetime.fromisoformat("2026-11-26T03:50:51+00:00").timestamp()


@pytest.mark.parametrize(
    ("case", "line", "starts", "excused"),
    [
        ("a refusal two seconds after the apiserver started is its RBAC cache", WATCH_REFUSED, [STARTED], True),
        ("a refusal with no apiserver start before it counts", WATCH_REFUSED, [], False),
        ("a refusal a minute after the last start counts", WATCH_REFUSED, [STARTED - 60], False),
        ("a start after the refusal excuses nothing", WATCH_REFUSED, [STARTED + 5], False),
        ("a refusal without a time of its own counts", "[ERROR] 403 Forbidden", [STARTED], False),
    ],
)
def test_refusals_counted(case: str, line: str, starts: list[float], excused: bool) -> None:
    assert REFUSED.search(line)
    assert refused_by_a_starting_apiserver(line, starts) is excused, case


def test_the_apiserver_log_gives_each_start_by_its_version_line() -> None:
    log = (
        'I1126 03:50:50.100000   77 flags.go:59] FLAG: --v="2"\n'
        "I1126 03:50:51.250000   77 server.go:182] Version: v1.20.2\n"
        "I1126 03:50:53.000000   77 secure_serving.go:197] Serving securely on [::]:44483\n"
        "I1231 23:59:59.000000   91 server.go:182] Version: v1.20.2\n"
    )
    now = datetime(2026, 11, 26, 4, 0, 0).timestamp()
    starts = [_klog_time(match[1], match[2], now) for match in KLOG_VERSION_LINE.finditer(log)]
    assert starts == [
        datetime(2026, 11, 26, 3, 50, 51, 250000).timestamp(),
        datetime(2025, 12, 31, 23, 59, 59).timestamp(),
    ]  # no year in klog: not in the future
