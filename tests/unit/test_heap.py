"""agents/heap.py: the worker's full garbage collections come from its timer, once a minute at most."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from agents.heap import HeapPolicy


@pytest.fixture
def policy() -> Iterator[HeapPolicy]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    heap = HeapPolicy(interval=60.0)
    try:
        yield heap
    finally:
        heap.uninstall()
        gc.set_threshold(*saved)


def test_installed_policy_stops_automatic_full_collections_and_keeps_the_young_ones(policy: HeapPolicy) -> None:
    policy.install()
    assert gc.get_threshold() == (700, 10, 2**31 - 1)
    policy.uninstall()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_full_collection_runs_once_the_interval_is_over(policy: HeapPolicy) -> None:
    policy.install()
    start = policy._last
    assert policy.tick(start + 59.9) is False
    assert policy.tick(start + 60.0) is True
    assert policy.collections == 1
    assert policy.tick(start + 119.9) is False
    assert policy.tick(start + 120.0) is True
    assert policy.collections == 2


def test_a_slow_collection_spaces_the_next_to_a_hundred_times_its_duration(policy: HeapPolicy) -> None:
    policy.install()
    start = policy._last
    assert policy.tick(start + 60.0) is True
    policy._took = 2.0  # as if that collection had taken 2 s
    assert policy.tick(start + 60.0 + 199.0) is False
    assert policy.tick(start + 60.0 + 200.0) is True


def test_the_scheduled_collection_frees_cyclic_garbage_of_the_oldest_generation(policy: HeapPolicy) -> None:
    class Node:
        other: object = None

    policy.install()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.collect(1)
    gc.collect(1)  # both survived the young generations: they sit in the oldest one
    alive = weakref.ref(a)
    del a, b
    gc.collect(1)
    assert alive() is not None  # the young collections do not look at the oldest generation
    assert policy.tick(policy._last + 60.0) is True
    assert alive() is None


def test_a_policy_not_installed_never_collects(policy: HeapPolicy) -> None:
    assert policy.tick(policy._last + 3600.0) is False
    assert policy.collections == 0
