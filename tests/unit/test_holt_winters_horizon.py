"""The Holt-Winters baseline's horizon (analysis/holt_winters.py): read from the manifest's annotation,
so that it looks as far ahead as the ``spec.predictive.horizon`` it is compared with."""

from __future__ import annotations

from typing import Any

import pytest

from analysis.holt_winters import HORIZON, HORIZON_ANNOTATION, baseline_horizon


def manifest(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "annotations": {"tandem.dev/simulate-baseline": "holt-winters", **annotations}}}


def test_the_baseline_looks_75_seconds_ahead_when_no_horizon_is_annotated() -> None:
    assert HORIZON == 75.0
    assert baseline_horizon(manifest()) == 75.0
    assert baseline_horizon({"metadata": {"name": "web"}}) == 75.0


def test_the_annotated_horizon_is_a_go_duration() -> None:
    assert baseline_horizon(manifest(**{HORIZON_ANNOTATION: "2m15s"})) == 135.0


@pytest.mark.parametrize(
    ("value", "why"),
    [("soon", "duration"), ("0s", "outside \\(0, 24h\\]"), ("25h", "outside \\(0, 24h\\]")],
)
def test_a_horizon_that_is_not_a_positive_duration_is_refused_naming_the_annotation(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=f"annotation tandem.dev/simulate-baseline-horizon: .*{why}"):
        baseline_horizon(manifest(**{HORIZON_ANNOTATION: value}))
