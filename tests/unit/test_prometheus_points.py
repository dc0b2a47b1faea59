"""A range query's ``values`` as points (streams.prometheus_api._points): the grid's fast path and
the exact one give the same points, and what is not a finite number is left out."""

from __future__ import annotations

from streams.prometheus_api import _points


def test_a_run_without_gaps_is_every_step_of_the_grid() -> None:
    values = [[1767225600, "0.5"], [1767225660, "1"], [1767225720, "2.25"]]
    assert _points(values, 60_000) == {1767225600000: 0.5, 1767225660000: 1.0, 1767225720000: 2.25}


def test_a_gap_keeps_the_times_that_came() -> None:
    values = [[1767225600, "1"], [1767225720, "3"], [1767225780, "4"]]
    assert _points(values, 60_000) == {1767225600000: 1.0, 1767225720000: 3.0, 1767225780000: 4.0}


def test_nan_and_infinities_are_left_out() -> None:
    values = [[60, "1"], [120, "NaN"], [180, "+Inf"], [240, "-Inf"], [300, "5"]]
    assert _points(values, 60_000) == {60_000: 1.0, 300_000: 5.0}


def test_a_sum_that_overflows_still_keeps_every_finite_point() -> None:
    values = [[60, "1e308"], [120, "1e308"]]
    assert _points(values, 60_000) == {60_000: 1e308, 120_000: 1e308}


def test_a_step_below_a_second_keeps_millisecond_times() -> None:
    values = [[1.5, "1"], [2, "2"], [2.5, "3"]]
    assert _points(values, 500) == {1500: 1.0, 2000: 2.0, 2500: 3.0}


def test_no_values_no_points() -> None:
    assert _points([], 60_000) == {}


def test_a_single_point() -> None:
    assert _points([[120, "7"]], 60_000) == {120_000: 7.0}
