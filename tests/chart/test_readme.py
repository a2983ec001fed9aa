"""charts/taintkeeper/README.md is what hack/chart_readme.py makes of the chart's Chart.yaml, values.yaml and
values.schema.json: after one of them changes, `make chart-readme` brings the README back in step; this
fails until it has."""

from __future__ import annotations

from hack.chart_readme import readme_of
from tests.chart.helm import CHART


def test_the_readme_is_made_from_the_charts_files():
    made, committed = readme_of(CHART), (CHART / "README.md").read_text()
    assert committed == made, (
        "charts/taintkeeper/README.md is out of date with the chart's values: run `make chart-readme`"
    )
