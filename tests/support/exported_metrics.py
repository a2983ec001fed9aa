"""The Prometheus series taintkeeper exports: what alert rules and dashboard queries may name."""

from __future__ import annotations

import re

from prometheus_client.metrics import MetricWrapperBase

import controller.backfill.metrics
import controller.metrics
import controller.nodelifecycle.metrics
import controller.outofservice.metrics
import controller.tainteviction.metrics
import webhook.metrics

MODULES = (
    controller.metrics,
    controller.nodelifecycle.metrics,
    controller.tainteviction.metrics,
    controller.backfill.metrics,
    controller.outofservice.metrics,
    webhook.metrics,
)
# taintkeeper's own prefix and the upstream subsystems whose names it keeps
OURS = re.compile(r"\b(?:taintkeeper|node_collector|taint_eviction_controller|pod_gc_collector)_\w+")
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def exported_families() -> dict[str, str]:
    """Each metric family's name (a counter's without `_total`) and its type."""
    return {
        family.name: family.type
        for module in MODULES
        for metric in vars(module).values()
        if isinstance(metric, MetricWrapperBase)
        for family in metric.describe()
    }


def exported_series() -> set[str]:
    return {name + suffix for name, kind in exported_families().items() for suffix in SUFFIXES[kind]}


def series_named(query: str) -> set[str]:
    """The names of taintkeeper's series a PromQL query reads."""
    return set(OURS.findall(query))
