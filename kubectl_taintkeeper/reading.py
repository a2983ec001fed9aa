"""An optional read of one API object, for the reports that go on when one cannot be made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Reading(Generic[T]):
    """An optional read: its value, or `error` (one line) saying why it could not be made.
    Neither: the thing does not exist (a Lease never created)."""

    value: T | None = None
    error: str | None = None
