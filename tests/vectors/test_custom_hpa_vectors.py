"""Reference ``hpa-vpa-customhpa.md`` section 3.3 (Nanit custom HPA), through ``tandem replay``.

The environment is the upstream ``envfile.dev``: period 15 s, min 5, max 20, target 100,
up cooldown 10 s, down cooldown 5 s, up max factor 0.2, down max 0.05, up min 0.1, down min 0.01.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.replaying import blocked_reasons, decisions, ev, replay

T0 = 1_762_250_400.0


def custom_hpa(**behavior: float) -> dict[str, Any]:
    b = {
        "scaleUpCooldown": 10,
        "scaleDownCooldown": 5,
        "scaleUpMaxFactor": 0.2,
        "scaleDownMaxFactor": 0.05,
        "scaleUpMinFactor": 0.1,
        "scaleDownMinFactor": 0.01,
    }
    b.update(behavior)
    max_replicas = int(b.pop("maxReplicas", 20))
    return {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "target": {"value": 100},
            "metric": {"series": "queue_depth"},
            "minReplicas": 5,
            "maxReplicas": max_replicas,
            "controlLoopPeriod": 15,
            "behavior": b,
        },
    }


def workload(ts: float, replicas: int) -> dict[str, Any]:
    return ev("workload", ts, replicas=replicas, containers={"app": {"requests": {"cpu": "100m"}}})


def sample(ts: float, value: float) -> dict[str, Any]:
    return ev("metric", ts, series="queue_depth", value=value)


def test_factor_is_metric_divided_by_target_and_clamped_by_up_max_factor(tmp_path: Path) -> None:
    out, _ = replay(tmp_path, [workload(T0 + 1, 10), sample(T0 + 2, 150.0)], [custom_hpa()])
    (d,) = decisions(out)
    assert d["data"]["replicas"] == {"from": 10, "to": 12}  # factor 1.5 clamped to 1 + 0.2
    assert "factor 150/100 = 1.5, clamped 1.2 (up)" in d["data"]["reasons"][0]


def test_factor_in_range_scales_up_and_rounds_up(tmp_path: Path) -> None:
    out, _ = replay(tmp_path, [workload(T0 + 1, 10), sample(T0 + 2, 115.0)], [custom_hpa()])
    (d,) = decisions(out)
    assert d["data"]["replicas"] == {"from": 10, "to": 12}  # ceil(10 x 1.15) = ceil(11.5)


def test_scale_down_inside_min_factor_dead_band_is_refused(tmp_path: Path) -> None:
    # factor 0.995 >= 1 - 0.01: refused; 200 x 0.995 = 199 would have been a change.
    out, _ = replay(tmp_path, [workload(T0 + 1, 200), sample(T0 + 2, 99.5)], [custom_hpa(maxReplicas=300)])
    assert decisions(out) == []
    assert blocked_reasons(out[0]) == ["MinFactor"]
    assert out[0]["data"]["blocked"][0]["wanted"] == 199


def test_scale_up_in_cooldown_is_refused(tmp_path: Path) -> None:
    # Two evaluations 5 s apart (sync period and loop period 5 s): the second is inside the 10 s cooldown.
    manifest = custom_hpa()
    manifest["spec"]["controlLoopPeriod"] = 5
    events = [workload(T0 + 1, 10), sample(T0 + 2, 130.0), workload(T0 + 6, 12), sample(T0 + 7, 130.0)]
    out, _ = replay(tmp_path, events, [manifest], "--sync-period", "5")
    assert [d["data"]["replicas"] for d in decisions(out)] == [{"from": 10, "to": 12}]
    assert blocked_reasons(out[-1]) == ["Cooldown"]
    assert out[-1]["data"]["tick"] == T0 + 10


def test_executor_clamps_to_max_replicas_before_rounding(tmp_path: Path) -> None:
    out, _ = replay(tmp_path, [workload(T0 + 1, 10), sample(T0 + 2, 200.0)], [custom_hpa(scaleUpMaxFactor=1.0)])
    (d,) = decisions(out)
    assert d["data"]["replicas"] == {"from": 10, "to": 20}


def test_executor_plain_scale_up(tmp_path: Path) -> None:
    out, _ = replay(tmp_path, [workload(T0 + 1, 10), sample(T0 + 2, 150.0)], [custom_hpa(scaleUpMaxFactor=1.0)])
    (d,) = decisions(out)
    assert d["data"]["replicas"] == {"from": 10, "to": 15}


def test_scale_down_that_rounds_to_no_change_still_starts_the_cooldown(tmp_path: Path) -> None:
    # 20 x 0.97 = 19.4 -> 20: nothing changes at T0+3, but the 5 s down cooldown starts; the
    # deeper scale-down at T0+6 (factor 0.9 clamped to 0.95 -> 19) is refused by it, and the one
    # at T0+9 is allowed.
    manifest = custom_hpa()
    manifest["spec"]["controlLoopPeriod"] = 3
    events = [workload(T0 + 1, 20), sample(T0 + 2, 97.0), sample(T0 + 4, 90.0), sample(T0 + 7, 90.0)]
    out, _ = replay(tmp_path, events, [manifest], "--sync-period", "3")
    assert [e["data"]["tick"] for e in out] == [T0 + 6, T0 + 9]
    assert blocked_reasons(out[0]) == ["Cooldown"]
    assert out[0]["data"]["blocked"][0]["wanted"] == 19
    assert out[1]["data"]["replicas"] == {"from": 20, "to": 19}


def test_stale_sample_is_ignored(tmp_path: Path) -> None:
    # Prometheus' 5-minute lookback: a sample older than 300 s at the tick is no sample.
    out, _ = replay(tmp_path, [sample(T0 + 1, 150.0), workload(T0 + 400, 10)], [custom_hpa()])
    assert out == []
