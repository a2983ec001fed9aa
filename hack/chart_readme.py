"""`python -m hack.chart_readme` (`make chart-readme`): charts/taintkeeper/README.md, made from the chart's
Chart.yaml, values.yaml and values.schema.json.

The README is made whole, never edited by hand (tests/chart/test_readme.py fails when it differs from what
this makes): a head saying what the chart installs, how to install it and where to look afterwards, then one
row per value: its dotted path, its type (the schema's), its default (values.yaml's) and what it sets (the
comment above it in values.yaml, else the schema's description). An object with a non-empty default is
opened into its values, those the schema allows but values.yaml leaves unset included (the flags).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "taintkeeper"
README = CHART / "README.md"
UNSET = "unset"

KEY_LINE = re.compile(r"(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:[ \t]+(?P<rest>.*))?$")
COMMENT_LINE = re.compile(r"(?P<indent> *)#[ \t]?(?P<text>.*)$")


@dataclass(frozen=True)
class Comment:
    """What values.yaml says of one value: the comment lines right above it, and the comment after it."""

    above: str
    after: str


@dataclass(frozen=True)
class ValueRow:
    path: str
    type: str
    default: str  # values.yaml's, as YAML; UNSET when it sets none; "" for an object opened into its values
    description: str


def _inline_comment(rest: str) -> str:
    """The comment after a value on its line: from the first `#` after a space that no quote encloses."""
    quote: str | None = None
    for index, char in enumerate(rest):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or rest[index - 1] in " \t"):
            return rest[index + 1 :].strip()
    return ""


def value_comments(values_text: str) -> dict[tuple[str, ...], Comment]:
    """Each mapping key's comment in values.yaml, by its path. A comment belongs to the key right under it
    at its indentation: a blank line, or lines indented otherwise (a commented-out example), part them.
    Sequences are values as a whole: nothing inside one is read."""
    comments: dict[tuple[str, ...], Comment] = {}
    parents: list[tuple[int, str]] = []  # (indentation, key) of the mappings the next key may be in
    pending: list[tuple[int, str]] = []  # the comment lines since the last other line
    sequence_indent: int | None = None  # the indentation of the `- ` items being passed over
    for line in values_text.splitlines():
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if sequence_indent is not None:
            if stripped and (indent > sequence_indent or (indent == sequence_indent and stripped.startswith("-"))):
                continue
            if stripped:
                sequence_indent = None
        if stripped.startswith("#"):
            found = COMMENT_LINE.match(line)
            assert found  # any line whose first character is `#`
            pending.append((indent, found["text"].rstrip()))
            continue
        key = KEY_LINE.match(line)
        if key is None:
            if stripped.startswith("-"):
                sequence_indent = indent
            pending = []
            continue
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = (*(name for _, name in parents), key["key"])
        above: list[str] = []
        for comment_indent, text in reversed(pending):
            if comment_indent != indent:
                break
            above.insert(0, text.strip())
        comments[path] = Comment(" ".join(above), _inline_comment(key["rest"] or ""))
        parents.append((indent, key["key"]))
        pending = []
    return comments


def _is_in(values: Any, path: tuple[str, ...]) -> bool:
    for name in path:
        if not isinstance(values, dict) or name not in values:
            return False
        values = values[name]
    return True


def shown(value: Any) -> str:
    """A value as values.yaml would write it on one line: a YAML scalar, or a YAML flow collection."""
    # Dumped as the one item of a flow list, so that a scalar is quoted as it would be in a flow collection.
    return yaml.safe_dump([value], default_flow_style=True, width=sys.maxsize, sort_keys=False).strip()[1:-1]


def type_of(schema: Mapping[str, Any]) -> str:
    """What the schema allows, in words: `one of` its enum, the type (`or` between several), `list of`
    the items' type, `map of` the values' type for an object whose keys are free."""
    if "enum" in schema:
        return "one of " + ", ".join(f"`{shown(choice)}`" for choice in schema["enum"])
    declared = schema.get("type")
    if declared is None:
        return "any"
    if isinstance(declared, list):
        return " or ".join(declared)
    items = schema.get("items")
    if declared == "array" and isinstance(items, dict) and ("type" in items or "enum" in items):
        return f"list of {type_of(items)}"
    free = schema.get("additionalProperties")
    if declared == "object" and "properties" not in schema and isinstance(free, dict) and free:
        return f"map of {type_of(free)}"
    return "list" if declared == "array" else str(declared)


def value_rows(schema: Mapping[str, Any], values_text: str) -> list[ValueRow]:
    """One row per value: the values values.yaml sets in its order, then those the schema adds. An object
    whose schema names its properties and whose default is not empty is opened: its own row only when
    something describes it, then its values'."""
    values = yaml.safe_load(values_text) or {}
    comments = value_comments(values_text)
    for path in comments:
        if not _is_in(values, path):  # a construct the line reader does not know (a block scalar, say)
            raise ValueError(f"values.yaml: the comments were read for {'.'.join(path)}, which it does not set")
    rows: list[ValueRow] = []

    def visit(path: tuple[str, ...], schema: Mapping[str, Any], is_set: bool, value: Any) -> None:
        comment = comments.get(path, Comment("", ""))
        described = comment.above or schema.get("description", "")
        description = "; ".join(part for part in (described, comment.after) if part)
        opened = "properties" in schema and isinstance(value, dict) and bool(value)
        if opened:
            if description:
                rows.append(ValueRow(".".join(path), type_of(schema), "", description))
            for name, child_schema, child_is_set, child_value in _children(schema, value):
                visit((*path, name), child_schema, child_is_set, child_value)
        else:
            rows.append(ValueRow(".".join(path), type_of(schema), shown(value) if is_set else UNSET, description))

    for name, child_schema, child_is_set, child_value in _children(schema, values):
        visit((name,), child_schema, child_is_set, child_value)
    return rows


def _children(schema: Mapping[str, Any], value: Any) -> list[tuple[str, Mapping[str, Any], bool, Any]]:
    """(name, schema, set in values.yaml, value) of an object's values: those set, then the schema's others."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    free = schema.get("additionalProperties")
    set_here: Mapping[str, Any] = value if isinstance(value, dict) else {}
    children = [
        (name, properties.get(name, free if isinstance(free, dict) else {}), True, child)
        for name, child in set_here.items()
    ]
    return children + [(name, child, False, None) for name, child in properties.items() if name not in set_here]


CODE_SPAN = re.compile(r"(`[^`]*`)")


def _cell(text: str) -> str:
    """Text for a markdown table cell: a `|` would end the cell, even in a code span; a `*` outside one could
    start emphasis."""
    parts = CODE_SPAN.split(text)  # prose at the even places, code spans at the odd
    return "".join(part if index % 2 else part.replace("*", "\\*") for index, part in enumerate(parts)).replace(
        "|", "\\|"
    )


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def values_table(rows: Sequence[ValueRow]) -> str:
    lines = ["| value | type | default | what it sets |", "|---|---|---|---|"]
    for row in rows:
        default = row.default if row.default == UNSET else _code(row.default)
        lines.append(f"| `{row.path}` | {_cell(row.type)} | {default} | {_cell(row.description)} |")
    return "\n".join(lines) + "\n"


HEAD = """\
# taintkeeper's Helm chart

<!-- Made by `make chart-readme` (hack/chart_readme.py) from Chart.yaml, values.yaml and values.schema.json:
change those, not this file. -->

{description} Chart {version}, taintkeeper {app_version}.

## What it installs

Into the release's namespace (`helm install -n NAMESPACE`); with its default values in `taintkeeper-system`
and `namespace.create=true`, exactly what `kubectl apply -k manifests/` installs (`tests/chart/` compares the
two object for object):

- the controller, Deployment `taintkeeper-controller`: the node lifecycle and taint eviction controllers, one
  replica acting while it holds the Lease `taintkeeper-controller`, the others on warm stand-by;
- the webhook, Deployment and Service `taintkeeper-webhook` behind the MutatingWebhookConfiguration
  `taintkeeper`, which gives pods the default NoExecute tolerations (`admission.mode: policy`: kube-apiserver
  itself does, by a MutatingAdmissionPolicy, on Kubernetes 1.36+);
- the webhook's serving certificate: a Job per release revision and the daily CronJob
  `taintkeeper-certs-renew` (`certificates.mode: certManager`: cert-manager's Issuers and Certificates);
- PodDisruptionBudgets, ServiceAccounts and their RBAC; the roles `taintkeeper-viewer` and
  `taintkeeper-fencer` for the people who run `kubectl taintkeeper`, bound to no one;
- a pre-delete hook that removes the webhook configuration before anything else at uninstall;
- when enabled: the alerts' PrometheusRule, the Grafana dashboard's ConfigMap, a NetworkPolicy.

## Installing

```sh
# from the repository's root; then give the namespace taintkeeper's labels, as the notes printed say
helm install taintkeeper charts/taintkeeper -n taintkeeper-system --create-namespace
helm test taintkeeper -n taintkeeper-system
```

Everything namespaced goes into the release's namespace, and what names it follows it (the webhook's skip of
its own namespace, the certificate's names, the Lease, the RBAC subjects). Helm makes that namespace without
labels: the notes say when it lacks `pod-security.kubernetes.io/enforce: restricted`, and the `kubectl
label` that gives it what taintkeeper's own namespace carries (`namespace.create=true` makes the namespace
with them, for `helm template | kubectl apply`, or `helm install --take-ownership` into a namespace made
before). One release per cluster: a second one is refused, naming the first (its controller is the
cluster's node lifecycle controller, and its cluster-wide objects keep fixed names). `helm test` checks
that a pod created in `helmTest.podNamespace` gets the tolerations and that the controller holds its Lease.
Kubernetes {oldest_kubernetes} or later (1.20: `kubectl apply -k manifests/kube-1.20/`).
Then switch off what taintkeeper replaces ([Replacing the
built-ins](../../docs/operating.md#replacing-the-built-ins)). More: [Installing with
Helm](../../docs/operating.md#installing-with-helm), values for cert-manager, shorter grace periods and
managed clusters in [examples/](examples/), [Upgrading](../../docs/operating.md#upgrading) (upgrade,
rollback, uninstall).

## After installing

Helm prints what to check next (`templates/NOTES.txt`). To see what the controller sees (zones, tainted
nodes, pending evictions, the leader), `pip install .` in taintkeeper's repository puts the kubectl plugin
on the PATH:

```sh
kubectl taintkeeper status --lease-namespace taintkeeper-system   # the release's namespace
kubectl taintkeeper explain node NODE
```

People who are not cluster-admin need the ClusterRole and the Role `taintkeeper-viewer` bound ([Roles for
operators](../../docs/operating.md#roles-for-operators)); [explain and
status](../../docs/operating.md#explain-and-status) says what they print.

The Grafana dashboard: `--set grafanaDashboard.enabled=true` adds the ConfigMap
`taintkeeper-grafana-dashboard`, labelled `grafana_dashboard=1`, which the Grafana sidecar loads once it
searches the release's namespace; the dashboard is "taintkeeper" (`GRAFANA_URL/d/taintkeeper`). Without the
sidecar, import `manifests/monitoring/grafana/taintkeeper.json` ([Dashboard](../../docs/operating.md#dashboard)).
The alerts: `--set prometheusRule.enabled=true` ([Alerts](../../docs/operating.md#alerts)).

## Values

Every value with its type (`values.schema.json`: `helm install` refuses any other, naming the value), its
default (`values.yaml`) and what it sets. A flag left unset takes the program's own default: [the
controller's](../../docs/operating.md#the-controller), [the webhook's](../../docs/operating.md#the-webhook).

"""


def oldest_kubernetes(kube_version: str) -> str:
    """The oldest minor release Chart.yaml's kubeVersion allows: `>=1.21.0-0` (pre-releases too) is 1.21."""
    found = re.fullmatch(r">=\s*v?(\d+\.\d+)(?:\.\d+)?(?:-0)?", kube_version.strip())
    if found is None:
        raise ValueError(f"Chart.yaml: kubeVersion {kube_version!r} is not a lower bound alone")
    return found[1]


def readme(chart_yaml_text: str, schema: Mapping[str, Any], values_text: str) -> str:
    chart = yaml.safe_load(chart_yaml_text)
    head = HEAD.format(
        description=chart["description"],
        version=chart["version"],
        app_version=chart["appVersion"],
        oldest_kubernetes=oldest_kubernetes(chart["kubeVersion"]),
    )
    return head + values_table(value_rows(schema, values_text))


def readme_of(chart: Path = CHART) -> str:
    """The README the chart's files make."""
    return readme(
        (chart / "Chart.yaml").read_text(),
        json.loads((chart / "values.schema.json").read_text()),
        (chart / "values.yaml").read_text(),
    )


def main() -> None:
    README.write_text(readme_of())
    print(README.relative_to(ROOT))


if __name__ == "__main__":
    main()
