"""The Holt-Winters baseline's horizon (analysis/holt_winters.py): read from the manifest's annotation,
so that it looks as far ahead as the ``spec.predictive.horizon`` it is compared with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis.holt_winters import HORIZON, HORIZON_ANNOTATION, baseline_horizon
from analysis.traces import convert
from cli.main import main as tandem

ROOT = Path(__file__).resolve().parents[2]
BIKES = ROOT / "tests" / "data" / "hourly_bikesharing-2018-06-04.csv"
EXAMPLES = ROOT / "examples" / "simulate"


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


def test_simulate_refuses_a_bad_baseline_horizon_before_it_simulates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "bikes.jsonl"
    convert("bikeshare", BIKES, stream, days=1)
    doc = next(
        d for d in yaml.safe_load_all((EXAMPLES / "horizontal.yaml").read_text()) if d["metadata"]["name"] == "web"
    )
    doc["metadata"]["annotations"] = {"tandem.dev/simulate-baseline": "holt-winters", HORIZON_ANNOTATION: "soon"}
    policy = tmp_path / "hw.yaml"
    policy.write_text(yaml.safe_dump(doc))
    assert tandem(["simulate", str(stream), "--policy", str(policy), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert f"tandem simulate: {policy}: annotation tandem.dev/simulate-baseline-horizon: " in err
