"""The names of the disruption-budget opt-in (tainteviction/disruption_budget.py reads them): on a
pod or its namespace. A leaf, so the slim views (objects.py) keep them without importing a loop's
package."""

from __future__ import annotations

EVICTION_ANNOTATION = "taintkeeper.io/eviction"
RESPECT_DISRUPTION_BUDGET = "respect-disruption-budget"  # its one value
BUDGET_TIMEOUT_ANNOTATION = "taintkeeper.io/disruption-budget-timeout"
ANNOTATIONS = (EVICTION_ANNOTATION, BUDGET_TIMEOUT_ANNOTATION)
