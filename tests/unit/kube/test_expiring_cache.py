"""kube.expiring_cache.py: entries expire at their TTL; the oldest go first at capacity."""

from __future__ import annotations

import pytest

from kube.expiring_cache import ExpiringCache


def test_an_entry_is_kept_until_its_ttl_and_gone_at_it():
    cache: ExpiringCache[str, int] = ExpiringCache(4)
    cache.put("a", 1, ttl=10, now=100)
    assert cache.get("a", now=109.9) == 1
    assert cache.get("a", now=110) is None
    assert len(cache) == 0


def test_a_ttl_of_zero_keeps_nothing_and_drops_what_was_there():
    cache: ExpiringCache[str, int] = ExpiringCache(4)
    cache.put("a", 1, ttl=10, now=0)
    cache.put("a", 2, ttl=0, now=1)
    assert cache.get("a", now=1) is None


def test_at_capacity_the_oldest_entry_goes_first():
    cache: ExpiringCache[int, int] = ExpiringCache(3)
    for key in range(5):
        cache.put(key, key, ttl=60, now=0)
    assert len(cache) == 3
    assert [cache.get(k, now=1) for k in range(5)] == [None, None, 2, 3, 4]


def test_putting_again_makes_an_entry_the_newest():
    cache: ExpiringCache[str, int] = ExpiringCache(2)
    cache.put("a", 1, ttl=60, now=0)
    cache.put("b", 2, ttl=60, now=0)
    cache.put("a", 3, ttl=60, now=0)
    cache.put("c", 4, ttl=60, now=0)
    assert (cache.get("a", now=1), cache.get("b", now=1), cache.get("c", now=1)) == (3, None, 4)


def test_a_capacity_below_one_is_refused():
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        ExpiringCache(0)
