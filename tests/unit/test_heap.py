"""agents/heap.py: the worker's full garbage collections come from its timer, once a minute at most,
in a moment when it is idle."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from agents.heap import COMPLETE_EVERY, HeapPolicy

#: The clock's reading when the policy starts: a whole number, so that every sum below is exact
#: (a monotonic reading such as 64972.774600916 made 780.0 later compare as 779.9999999999).
START = 1000.0


@pytest.fixture
def policy() -> Iterator[HeapPolicy]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    heap = HeapPolicy(interval=60.0, now=START)
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
    assert policy.tick(START + 59.9) is False
    assert policy.tick(START + 60.0) is True
    assert policy.collections == 1
    assert policy.tick(START + 119.9) is False
    assert policy.tick(START + 120.0) is True
    assert policy.collections == 2


def test_a_slow_collection_spaces_the_next_to_a_hundred_times_its_duration(policy: HeapPolicy) -> None:
    policy.install()
    assert policy.tick(START + 60.0) is True
    policy._took = 2.0  # as if that collection had taken 2 s
    assert policy.tick(START + 60.0 + 199.0) is False
    assert policy.tick(START + 60.0 + 200.0) is True


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
    assert policy.tick(START + policy.period()) is True
    assert alive() is None


def test_a_policy_not_installed_never_collects(policy: HeapPolicy) -> None:
    assert policy.tick(START + 3600.0) is False
    assert policy.collections == 0


def test_a_due_collection_waits_for_the_worker_to_be_idle(policy: HeapPolicy) -> None:
    policy.install()
    assert policy.tick(START + 60.0, idle=False) is False
    assert policy.tick(START + 100.0, idle=False) is False
    assert policy.collections == 0
    assert policy.tick(START + 100.25, idle=True) is True
    assert policy.collections == 1


def test_a_worker_never_idle_still_collects_three_periods_after_the_last(policy: HeapPolicy) -> None:
    policy.install()
    assert policy.tick(START + 179.9, idle=False) is False
    assert policy.tick(START + 180.0, idle=False) is True
    policy._took = 2.0  # the period is now 200 s: the patience grows with it, to 600 s
    assert policy.tick(START + 180.0 + 599.0, idle=False) is False
    assert policy.tick(START + 180.0 + 600.0, idle=False) is True


class _Node:
    other: object = None


def _due(policy: HeapPolicy) -> float:
    """A time when the next collection is due, whatever the last one took: twice its period after it
    (exactly one period after may round below it once a slow collection made the period 100 x 0.0123...)."""
    return policy._last + 2 * policy.period()


def _cycle() -> tuple[_Node, weakref.ref[_Node]]:
    """Two objects that only reference each other: one of them, and a weak reference to it."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a, weakref.ref(a)


def test_survivors_are_frozen_and_a_later_cycle_is_found_by_the_next_collection(policy: HeapPolicy) -> None:
    policy.install()
    kept = _Node()
    assert policy.tick(_due(policy)) is True
    assert policy.complete is True  # the first scheduled collection walks everything
    # its survivors are frozen: in no generation, so no later collection walks them
    assert gc.get_freeze_count() > 0
    assert all(o is not kept for o in gc.get_objects())
    node, alive = _cycle()
    gc.collect(1)
    gc.collect(1)  # in the oldest generation, where only the scheduled collection looks
    del node
    gc.collect(1)
    assert alive() is not None
    assert policy.tick(_due(policy)) is True
    assert policy.complete is False
    assert alive() is None  # garbage made after the freeze: found without walking the frozen objects


def test_a_cycle_frozen_while_alive_is_freed_by_the_next_complete_collection(policy: HeapPolicy) -> None:
    policy.install()
    node, alive = _cycle()
    assert policy.tick(_due(policy)) is True  # complete, and the cycle frozen while referenced
    del node
    for _ in range(COMPLETE_EVERY - 1):
        assert policy.tick(_due(policy)) is True
        assert policy.complete is False
        assert alive() is not None  # frozen: no partial collection walks it
    assert policy.tick(_due(policy)) is True
    assert policy.complete is True
    assert alive() is None
    assert policy.collections == COMPLETE_EVERY + 1


def test_uninstalling_unfreezes(policy: HeapPolicy) -> None:
    policy.install()
    assert policy.tick(_due(policy)) is True
    assert gc.get_freeze_count() > 0
    policy.uninstall()
    assert gc.get_freeze_count() == 0
