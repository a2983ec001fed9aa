"""hack/chart_readme.py: the chart README's values table, read from a small hand-made values.yaml and schema,
and the head made from Chart.yaml. (tests/chart/test_readme.py keeps the chart's own README in step.)"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from hack.chart_readme import UNSET, Comment, ValueRow, oldest_kubernetes, readme, value_comments, value_rows

VALUES = """\
# The file's head, apart from the first value by a blank line: no value's.

# Where the image comes from.
image:
  repository: app
  pullPolicy: IfNotPresent  # Never, offline
server:
  # How many serve; the schema's words give way.
  replicas: 2
  # port: 80   (an example, commented out: not the next value's)

  labels: {}
  peers:
  - name: a
    # inside a list: part of the list's value
    weight: 1
  mode: fast
  flags:
    verbose: true
    # level: INFO   (an example: a blank line sets it apart from the next value)

    note: "a # in quotes"
    # debug: false   (an example at the flags' indentation, right above the server's next value)
  empty: {}
"""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "image": {
            "type": "object",
            "properties": {
                "repository": {"type": "string", "description": "the registry and name"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            },
        },
        "server": {
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "description": "the schema's words"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "peers": {"type": "array", "items": {"type": "object"}},
                "mode": {"type": ["string", "number"]},
                "flags": {
                    "type": "object",
                    "description": "the server's flags",
                    "properties": {
                        "verbose": {"type": "boolean"},
                        "note": {"type": "string"},
                        "level": {"enum": ["DEBUG", "INFO"], "description": "how much it says"},
                    },
                },
                "empty": {"type": "object", "properties": {"inner": {"type": "string"}}},
                "schedule": {"type": "string", "description": "not in values.yaml"},
            },
        },
    },
}


class Row(NamedTuple):
    name: str
    expected: ValueRow


ROWS = [
    Row(
        "an object with a comment: its own row, no default",
        ValueRow("image", "object", "", "Where the image comes from."),
    ),
    Row(
        "a value without a comment: the schema's description",
        ValueRow("image.repository", "string", "app", "the registry and name"),
    ),
    Row(
        "an enum, with the comment after it",
        ValueRow("image.pullPolicy", "one of `Always`, `IfNotPresent`, `Never`", "IfNotPresent", "Never, offline"),
    ),
    Row(
        "the comment above a value before the schema's description",
        ValueRow("server.replicas", "integer", "2", "How many serve; the schema's words give way."),
    ),
    Row(
        "a map, past a commented-out example and a blank line: nothing describes it",
        ValueRow("server.labels", "map of string", "{}", ""),
    ),
    Row(
        "an array: one value, written as a flow sequence",
        ValueRow("server.peers", "list of object", "[{name: a, weight: 1}]", ""),
    ),
    Row("several types", ValueRow("server.mode", "string or number", "fast", "")),
    Row("a nested object with a description", ValueRow("server.flags", "object", "", "the server's flags")),
    Row("a nested value", ValueRow("server.flags.verbose", "boolean", "true", "")),
    Row("a # in quotes is no comment", ValueRow("server.flags.note", "string", "'a # in quotes'", "")),
    Row(
        "a value the schema allows and values.yaml leaves unset",
        ValueRow("server.flags.level", "one of `DEBUG`, `INFO`", UNSET, "how much it says"),
    ),
    Row(
        "an empty object, under a comment indented otherwise: one value, not opened, undescribed",
        ValueRow("server.empty", "object", "{}", ""),
    ),
    Row(
        "a value of the schema's only, after those values.yaml sets",
        ValueRow("server.schedule", "string", UNSET, "not in values.yaml"),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_each_value_gets_its_type_default_and_description(row: Row):
    by_path = {found.path: found for found in value_rows(SCHEMA, VALUES)}
    assert by_path.get(row.expected.path) == row.expected


def test_values_come_in_values_yamls_order_then_the_schemas_others():
    assert [row.path for row in value_rows(SCHEMA, VALUES)] == [
        "image",
        "image.repository",
        "image.pullPolicy",
        "server.replicas",
        "server.labels",
        "server.peers",
        "server.mode",
        "server.flags",
        "server.flags.verbose",
        "server.flags.note",
        "server.flags.level",
        "server.empty",
        "server.schedule",
    ]


def test_a_comment_is_its_lines_joined_and_the_one_after_the_value():
    text = "a:\n  # first line\n  #   and second\n  b: 1  # after\n"
    assert value_comments(text)[("a", "b")] == Comment("first line and second", "after")


def test_values_yaml_the_reader_cannot_follow_is_refused_not_misread():
    block_scalar = "script: |\n  key: value\n"
    with pytest.raises(ValueError, match=r"script\.key"):
        value_rows({"type": "object"}, block_scalar)


def test_a_cell_keeps_its_pipes_and_stars_literal():
    schema = {"type": "object", "properties": {"controllers": {"type": "string", "description": "* | `-a|b*`"}}}
    table = readme(CHART_YAML, schema, "controllers: '*'\n").splitlines()
    assert table[-1] == "| `controllers` | string | `'*'` | \\* \\| `-a\\|b*` |"


CHART_YAML = """\
name: demo
description: A demo chart.
version: 1.2.3
appVersion: "4.5"
kubeVersion: ">=1.25.0-0"
"""


def test_the_head_comes_from_chart_yaml():
    made = readme(CHART_YAML, SCHEMA, VALUES)
    assert "A demo chart. Chart 1.2.3, taintkeeper 4.5." in made
    assert "Kubernetes 1.25 or later" in made


@pytest.mark.parametrize(
    "kube_version, oldest",
    [(">=1.21.0-0", "1.21"), (">= 1.25.0", "1.25"), (">=v1.30", "1.30")],
)
def test_the_oldest_kubernetes_is_the_lower_bound(kube_version: str, oldest: str):
    assert oldest_kubernetes(kube_version) == oldest


@pytest.mark.parametrize("kube_version", ["<1.30.0", ">=1.21.0 <1.30.0", "1.21.x"])
def test_a_kube_version_with_no_lower_bound_alone_is_refused(kube_version: str):
    with pytest.raises(ValueError, match="kubeVersion"):
        oldest_kubernetes(kube_version)
