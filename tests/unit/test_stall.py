"""The stall watchdog's rules (agents/stall.py): lag without progress for the timeout is a stall."""

from __future__ import annotations

import pytest

from agents.stall import Stall, StallWatch

TP = ("tandem.hpa", 1)


def test_an_input_with_lag_and_no_progress_for_the_timeout_is_stalled() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    assert watch.check(0.0, {TP: (100, 318)}) == ([], False)
    assert watch.check(59.0, {TP: (100, 318)}) == ([], False)
    stalled, must_exit = watch.check(60.0, {TP: (100, 318)})
    assert stalled == [Stall("tandem.hpa", 1, 100, 318, 60.0)]
    assert not must_exit
    assert stalled[0].describe() == (
        "input tandem.hpa[1] stalled: position 100, high watermark 318, no progress for 60 s"
    )


def test_a_stall_lasting_stall_exit_seconds_asks_the_worker_to_exit() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    watch.check(0.0, {TP: (0, 5)})
    stalled, must_exit = watch.check(300.0, {TP: (0, 5)})
    assert [s.position for s in stalled] == [0] and must_exit


def test_an_input_whose_position_is_not_known_yet_is_not_judged() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    for now in (0.0, 100.0, 400.0):
        assert watch.check(now, {TP: (None, 5)}) == ([], False)


def test_any_progress_resets_the_timer() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    watch.check(0.0, {TP: (100, 318)})
    watch.check(50.0, {TP: (101, 318)})
    assert watch.check(100.0, {TP: (101, 318)}) == ([], False)
    assert len(watch.check(110.0, {TP: (101, 318)})[0]) == 1


def test_a_caught_up_input_is_never_stalled_however_long_it_is_idle() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    for now in (0.0, 1000.0, 5000.0):
        assert watch.check(now, {TP: (318, 318), ("tandem.metrics", 0): (None, None)}) == ([], False)


def test_an_input_no_longer_assigned_is_forgotten() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300)
    watch.check(0.0, {TP: (100, 318)})
    watch.check(30.0, {})
    assert watch.check(70.0, {TP: (100, 318)}) == ([], False)  # a new timer from 70 s


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        StallWatch(0, 10)


def test_an_input_read_but_not_committed_for_the_timeout_is_stalled() -> None:
    """A message read and never acknowledged holds the group's commit back for good (issue #18):
    the committed offset stays while the read position went on."""
    watch = StallWatch(stall_timeout=60, stall_exit=300, what="commit")
    assert watch.check(0.0, {TP: (481, 801)}) == ([], False)
    assert watch.check(30.0, {TP: (481, 900)}) == ([], False)  # reading on does not reset the timer
    stalled, must_exit = watch.check(60.0, {TP: (481, 900)})
    assert stalled == [Stall("tandem.hpa", 1, 481, 900, 60.0, "commit")]
    assert not must_exit
    assert stalled[0].describe() == (
        "input tandem.hpa[1] stalled: committed offset 481 while read up to 900, no commit progress for 60 s"
    )


def test_a_commit_that_catches_up_is_not_a_stall() -> None:
    watch = StallWatch(stall_timeout=60, stall_exit=300, what="commit")
    watch.check(0.0, {TP: (481, 801)})
    assert watch.check(59.0, {TP: (801, 801)}) == ([], False)
    assert watch.check(200.0, {TP: (801, 801)}) == ([], False)
