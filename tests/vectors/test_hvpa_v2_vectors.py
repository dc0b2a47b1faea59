"""Reference ``hvpa.md`` section 5, line B (hvpa-v2 "scale intervals"), through ``tandem replay``.

Fixture B (``controllers/suite_test.go`` on branch ``hvpa-v2``): container ``deployment``; HPA
min 1 / max 3 and no HPA status (desired 0); VPA minAllowed 100m/200M, maxAllowed 40/100G;
top-level scaleUp/scaleDown ``Auto``, ``3m``, minChange cpu {100m, 80 %} / memory {100M, 80 %};
scaleIntervals ``[{1, 2G, 1}, {20, 30G, 5}, {30, 40G, 6}]``; overlap cpu 20 %, memory 10M.
The HPA template carries no metrics here so that tandem's own HPA recommender stays silent: the
upstream tests run with ``hpaStatus: nil``.

Besides the vectors the reference lists (B2, B4, B5, B7, B8, B10, B12, B14-B18), the remaining
entries of the same upstream test table are replayed too (named by their upstream title), since
the reference states that the section-3 formulas reproduce all of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.quantity import parse_quantity
from tests.replaying import blocked_reasons, decisions, ev, replay

T0 = 1_762_250_400.0  # 2025-11-04T10:00:00Z, a multiple of the 15 s sync period
HOUR = int(T0 // 3600) % 24
MIN_CHANGE = {"cpu": {"value": "100m", "percentage": 80}, "memory": {"value": "100M", "percentage": 80}}
GAP_B = {"cpu": {"value": "1", "percentage": 80}, "memory": {"value": "1", "percentage": 80}}
DEFAULT_INTERVALS = [
    {"maxCpu": "1", "maxMemory": "2G", "maxReplicas": 1},
    {"maxCpu": "20", "maxMemory": "30G", "maxReplicas": 5},
    {"maxCpu": "30", "maxMemory": "40G", "maxReplicas": 6},
]
ROUND_INTERVALS = [
    {"maxCpu": "0.4", "maxMemory": "1G", "maxReplicas": 1},
    {"maxCpu": "0.6", "maxMemory": "1.5G", "maxReplicas": 2},
    {"maxCpu": "0.8", "maxMemory": "2G", "maxReplicas": 3},
    {"maxCpu": "1", "maxMemory": "2.75G", "maxReplicas": 4},
    {"maxCpu": "1.5", "maxMemory": "4G", "maxReplicas": 5},
    {"maxCpu": "1.75", "maxMemory": "6G", "maxReplicas": 6},
]
UNSCALED_SMALL = {"requests": {"cpu": "150m", "memory": "1.8G"}, "limits": {"cpu": "3", "memory": "4G"}}
UNSCALED_LARGE = {"requests": {"cpu": "150m", "memory": "2.2G"}, "limits": {"cpu": "3", "memory": "4G"}}
BASE = {"cpu": {"value": "100m"}, "memory": {"percentage": 10}}


def fixture_b(
    *,
    modes: str = "Auto",
    window: tuple[str, str] | None = None,
    gap: bool = False,
    base: dict[str, Any] | None = None,
    intervals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    def scale() -> dict[str, Any]:
        return {"updatePolicy": {"updateMode": modes}, "stabilizationDuration": "3m", "minChange": MIN_CHANGE}

    vpa: dict[str, Any] = {
        "deploy": True,
        "template": {
            "spec": {
                "resourcePolicy": {
                    "containerPolicies": [
                        {
                            "containerName": "deployment",
                            "minAllowed": {"cpu": "100m", "memory": "200M"},
                            "maxAllowed": {"cpu": "40", "memory": "100G"},
                        }
                    ]
                }
            }
        },
    }
    if gap:
        vpa["limitsRequestsGapScaleParams"] = GAP_B
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 1, "maxReplicas": 3}}},
        "vpa": vpa,
        "scaleUp": scale(),
        "scaleDown": scale(),
        "scaleIntervals": intervals if intervals is not None else DEFAULT_INTERVALS,
        "scalingIntervalsOverlap": {"cpu": {"percentage": 20}, "memory": {"value": "10M"}},
    }
    if base is not None:
        spec["baseResourcesPerReplica"] = base
    if window:
        spec["maintenanceTimeWindow"] = {"begin": window[0], "end": window[1]}
    return {
        "apiVersion": "autoscaling.gardener.cloud/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": spec,
    }


def step(
    ts: float,
    replicas: int,
    resources: dict[str, Any],
    target: dict[str, str],
    *,
    vpa_conditions: list[dict[str, str]] | None = None,
    hpa_desired: int | None = None,
) -> list[dict[str, Any]]:
    """One observation: the workload spec, optionally an HPA status, and a VPA recommendation."""
    events = [ev("workload", ts, replicas=replicas, containers={"deployment": resources})]
    if hpa_desired is not None:
        events.append(ev("hpa", ts, desired_replicas=hpa_desired))
    vpa: dict[str, Any] = {"containers": {"deployment": {"target": target}}}
    if vpa_conditions is not None:
        vpa["conditions"] = vpa_conditions
    events.append(ev("vpa", ts, **vpa))
    return events


def run(tmp_path: Path, events: list[dict[str, Any]], manifest: dict[str, Any]) -> list[dict[str, Any]]:
    out, _ = replay(tmp_path, events, [manifest])
    return out


def requests_of(decision: dict[str, Any], section: str = "requests") -> dict[str, int]:
    changes = decision["data"].get("containers", {}).get("deployment", {}).get(section, {})
    return {res: parse_quantity(v["to"]) for res, v in changes.items()}


def assert_scaled(
    decision: dict[str, Any],
    *,
    replicas: int | None,
    before: dict[str, str],
    requests: dict[str, str],
    limits: dict[str, str] | None = None,
    limits_before: dict[str, str] | None = None,
) -> None:
    """Exact replicas, requests and limits by value (tandem writes memory as ``...k``)."""
    data = decision["data"]
    if replicas is None:
        assert "replicas" not in data
    else:
        assert data["replicas"]["to"] == replicas
    got = requests_of(decision)
    # A resource absent from the decision kept its value: compare the full resulting request.
    full = {res: got.get(res, parse_quantity(before[res])) for res in requests}
    assert full == {res: parse_quantity(v) for res, v in requests.items()}
    got_limits = requests_of(decision, "limits")
    if limits is None:
        assert got_limits == {}
    else:
        assert limits_before is not None
        full_limits = {res: got_limits.get(res, parse_quantity(limits_before[res])) for res in limits}
        assert full_limits == {res: parse_quantity(v) for res, v in limits.items()}
    assert data["blocked"] == []


# --- vectors listed in the reference ---------------------------------------------------------


def test_b2_scale_in_that_would_grow_pods_is_paradoxical(tmp_path: Path) -> None:
    out = run(tmp_path, step(T0, 3, UNSCALED_LARGE, {"cpu": "150m", "memory": "1.8G"}), fixture_b(gap=True))
    assert decisions(out) == []
    assert len(out) == 1 and out[0]["type"] == "dev.tandem.blocked.v1"
    assert set(blocked_reasons(out[0])) == {"ParadoxicalScaling"}
    # the refused scale-in and the per-pod growth it implied, both reported
    assert {"target": "replicas", "reason": "ParadoxicalScaling", "wanted": 2} in out[0]["data"]["blocked"]
    assert "replicas" not in out[0]["data"] and "containers" not in out[0]["data"]


def test_b4_overall_scale_down_with_more_smaller_replicas_is_not_paradoxical(tmp_path: Path) -> None:
    before = {"cpu": "15", "memory": "20G"}
    out = run(tmp_path, step(T0, 1, {"requests": before}, {"cpu": "1500m", "memory": "4G"}), fixture_b())
    [d] = decisions(out)
    assert_scaled(d, replicas=2, before=before, requests={"cpu": "750m", "memory": "2000000k"})


def test_b5_total_based_min_change_blocks_a_small_scale_up(tmp_path: Path) -> None:
    out = run(tmp_path, step(T0, 1, UNSCALED_SMALL, {"cpu": "150m", "memory": "1.89G"}), fixture_b(gap=True))
    assert decisions(out) == []
    assert [e["type"] for e in out] == ["dev.tandem.blocked.v1"]
    assert set(blocked_reasons(out[0])) == {"MinChange"}
    assert out[0]["data"]["blocked"] == [{"target": "deployment/memory", "reason": "MinChange", "wanted": "1890000k"}]


def test_b7_open_maintenance_window_lets_scale_in_happen_with_gap_limits(tmp_path: Path) -> None:
    window = (f"{(HOUR - 1) % 24:02d}0000+0000", f"{(HOUR + 1) % 24:02d}0000+0000")
    manifest = fixture_b(modes="MaintenanceWindow", window=window, gap=True)
    out = run(tmp_path, step(T0, 3, UNSCALED_LARGE, {"cpu": "150m", "memory": "0.8G"}), manifest)
    [d] = decisions(out)
    assert_scaled(
        d,
        replicas=2,
        before=UNSCALED_LARGE["requests"],
        requests={"cpu": "225m", "memory": "1200000k"},
        limits={"cpu": "1225m", "memory": "2160000k"},
        limits_before=UNSCALED_LARGE["limits"],
    )


def test_b8_scale_down_inside_the_interval_overlap_keeps_replicas(tmp_path: Path) -> None:
    before = {"cpu": "8", "memory": "10G"}
    out = run(tmp_path, step(T0, 3, {"requests": before}, {"cpu": "2.828", "memory": "5.486G"}), fixture_b())
    [d] = decisions(out)
    assert_scaled(d, replicas=None, before=before, requests={"cpu": "2828m", "memory": "5486000k"})


def test_b10_base_resources_per_replica_on_scale_out(tmp_path: Path) -> None:
    before = {"cpu": "150m", "memory": "1.8G"}
    out = run(tmp_path, step(T0, 1, {"requests": before}, {"cpu": "500m", "memory": "4G"}), fixture_b(base=BASE))
    [d] = decisions(out)
    assert_scaled(d, replicas=2, before=before, requests={"cpu": "300m", "memory": "2110000k"})


def test_b12_base_resources_per_replica_on_scale_in(tmp_path: Path) -> None:
    before = {"cpu": "150m", "memory": "2.2G"}
    out = run(tmp_path, step(T0, 3, {"requests": before}, {"cpu": "150m", "memory": "0.8G"}), fixture_b(base=BASE))
    [d] = decisions(out)
    assert_scaled(d, replicas=2, before=before, requests={"cpu": "175m", "memory": "990000k"})


def test_b14_b18_full_round_scales_up_one_replica_per_step_with_round_intervals(tmp_path: Path) -> None:
    steps = [
        (1, {"cpu": "150m", "memory": "0.4G"}, {"cpu": "500m", "memory": "1.2G"}),
        (2, {"cpu": "250m", "memory": "600000k"}, {"cpu": "900m", "memory": "2.4G"}),
        (3, {"cpu": "600m", "memory": "1600000k"}, {"cpu": "1200m", "memory": "3G"}),
        (4, {"cpu": "900m", "memory": "2250000k"}, {"cpu": "1600m", "memory": "4.2G"}),
        (5, {"cpu": "1280m", "memory": "3360000k"}, {"cpu": "3", "memory": "6.6G"}),
    ]
    expected = [
        (2, {"cpu": "250m", "memory": "600000k"}),
        (3, {"cpu": "600m", "memory": "1600000k"}),
        (4, {"cpu": "900m", "memory": "2250000k"}),
        (5, {"cpu": "1280m", "memory": "3360000k"}),
        (6, {"cpu": "2500m", "memory": "5500000k"}),
    ]
    events: list[dict[str, Any]] = []
    for i, (replicas, requests, target) in enumerate(steps):
        # 5 minutes apart: past the 3m stabilization after each scaling
        events += step(T0 + 300 * i, replicas, {"requests": requests}, target)
    out = run(tmp_path, events, fixture_b(intervals=ROUND_INTERVALS))
    ds = decisions(out)
    assert len(ds) == len(out) == 5
    for d, (replicas, requests), (_, before, _) in zip(ds, expected, steps, strict=True):
        assert_scaled(d, replicas=replicas, before=before, requests=requests)
    # beyond the 6 replicas of fixture B's HPA template max 3: the intervals bound line B
    assert ds[-1]["data"]["replicas"] == {"from": 5, "to": 6}


# --- the other entries of the same upstream hvpa-v2 test table --------------------------------


def test_scale_out_that_would_shrink_every_pod_keeps_the_pods(tmp_path: Path) -> None:
    # upstream: "UpdateMode Auto, scale up, paradoxical scaling, replicas increases, resources per replica decreases"
    out = run(tmp_path, step(T0, 1, UNSCALED_SMALL, {"cpu": "150m", "memory": "2.2G"}), fixture_b(gap=True))
    [d] = decisions(out)
    assert d["data"]["replicas"] == {"from": 1, "to": 2}
    assert "containers" not in d["data"]
    assert d["data"]["blocked"] == []


def test_overall_scale_up_with_fewer_larger_replicas_is_not_paradoxical(tmp_path: Path) -> None:
    # upstream: "UpdateMode Auto, overall scale up, paradoxical scaling, but replicas decrease"
    before = {"cpu": "150m", "memory": "1.8G"}
    out = run(tmp_path, step(T0, 3, {"requests": before}, {"cpu": "500m", "memory": "4G"}), fixture_b())
    [d] = decisions(out)
    assert_scaled(d, replicas=2, before=before, requests={"cpu": "750m", "memory": "6000000k"})


def test_closed_maintenance_window_blocks_scale_in(tmp_path: Path) -> None:
    # upstream: "UpdateMode maintenanceWindow, blocked scaling"
    window = (f"{(HOUR + 3) % 24:02d}0000+0000", f"{(HOUR + 4) % 24:02d}0000+0000")
    manifest = fixture_b(modes="MaintenanceWindow", window=window)
    out = run(tmp_path, step(T0, 3, UNSCALED_LARGE, {"cpu": "150m", "memory": "0.8G"}), manifest)
    assert decisions(out) == []
    assert [e["type"] for e in out] == ["dev.tandem.blocked.v1"]
    assert set(blocked_reasons(out[0])) == {"MaintenanceWindow"}


def test_scale_up_within_the_current_bucket_keeps_replicas(tmp_path: Path) -> None:
    # upstream: "UpdateMode Auto, scale up, no bucket switch even when scaling intervals overlap"
    before = {"cpu": "8", "memory": "10G"}
    out = run(tmp_path, step(T0, 3, {"requests": before}, {"cpu": "9.5", "memory": "13G"}), fixture_b())
    [d] = decisions(out)
    assert_scaled(d, replicas=None, before=before, requests={"cpu": "9500m", "memory": "13000000k"})


def test_scale_out_without_base_resources_splits_the_total(tmp_path: Path) -> None:
    # upstream: "UpdateMode Auto, scale up, nil base resource usage"
    before = {"cpu": "150m", "memory": "1.8G"}
    out = run(tmp_path, step(T0, 1, {"requests": before}, {"cpu": "500m", "memory": "4G"}), fixture_b())
    [d] = decisions(out)
    assert_scaled(d, replicas=2, before=before, requests={"cpu": "250m", "memory": "2000000k"})


def test_vpa_with_unsupported_config_is_not_used(tmp_path: Path) -> None:
    # upstream: "VPA unsupported condition" (getScalingRecommendations errors out: no scaling)
    conditions = [
        {"type": "ConfigUnsupported", "status": "True"},
        {"type": "RecommendationProvided", "status": "True"},
    ]
    events = step(
        T0,
        2,
        {"requests": {"cpu": "300m", "memory": "200M"}},
        {"cpu": "500m", "memory": "3G"},
        vpa_conditions=conditions,
    )
    assert run(tmp_path, events, fixture_b()) == []


# --- tandem's event-time bookkeeping of the same rules ---------------------------------------


def test_stabilization_blocks_a_second_scaling_within_three_minutes(tmp_path: Path) -> None:
    before = {"cpu": "150m", "memory": "0.4G"}
    events = step(T0, 1, {"requests": before}, {"cpu": "500m", "memory": "1.2G"})
    events += step(T0 + 60, 2, {"requests": {"cpu": "250m", "memory": "600000k"}}, {"cpu": "900m", "memory": "2.4G"})
    out = run(tmp_path, events, fixture_b(intervals=ROUND_INTERVALS))
    assert [e["type"] for e in out] == ["dev.tandem.decision.v1", "dev.tandem.blocked.v1"]
    assert set(blocked_reasons(out[1])) == {"StabilizationWindow"}
    assert {"target": "replicas", "reason": "StabilizationWindow", "wanted": 3} in out[1]["data"]["blocked"]


def test_oom_kill_after_the_last_scaling_overrides_scale_up_stabilization(tmp_path: Path) -> None:
    events = step(T0, 1, {"requests": {"cpu": "150m", "memory": "0.4G"}}, {"cpu": "500m", "memory": "1.2G"})
    events.append(ev("metric", T0 + 60, pod="web-1", container="deployment", cpu=0.2, memory=6e8, oom=True))
    events += step(T0 + 60, 2, {"requests": {"cpu": "250m", "memory": "600000k"}}, {"cpu": "900m", "memory": "2.4G"})
    out = run(tmp_path, events, fixture_b(intervals=ROUND_INTERVALS))
    ds = decisions(out)
    assert len(ds) == 2
    assert ds[1]["data"]["replicas"] == {"from": 2, "to": 3}
    assert any("OOM" in r for r in ds[1]["data"]["reasons"])


def test_a_stale_recommendation_is_not_applied_twice(tmp_path: Path) -> None:
    # HVPA v2 lastProcessedRecommendations: the same VPA target after scaling must not scale again
    events = step(T0, 1, {"requests": {"cpu": "150m", "memory": "0.4G"}}, {"cpu": "500m", "memory": "1.2G"})
    later = ev(
        "workload", T0 + 600, replicas=2, containers={"deployment": {"requests": {"cpu": "250m", "memory": "600000k"}}}
    )
    out = run(tmp_path, [*events, later], fixture_b(intervals=ROUND_INTERVALS))
    assert len(decisions(out)) == len(out) == 1


def test_drift_is_repaired_while_the_recommendation_is_unchanged(tmp_path: Path) -> None:
    # HVPA v2 applyLastApplied: someone puts the old spec back; the last scaling is re-applied
    before = {"requests": {"cpu": "150m", "memory": "0.4G"}}
    events = step(T0, 1, before, {"cpu": "500m", "memory": "1.2G"})
    events.append(ev("workload", T0 + 600, replicas=1, containers={"deployment": before}))
    out = run(tmp_path, events, fixture_b(intervals=ROUND_INTERVALS))
    ds = decisions(out)
    assert len(ds) == 2
    for d in ds:
        assert_scaled(d, replicas=2, before=before["requests"], requests={"cpu": "250m", "memory": "600000k"})
    assert any("drift repair" in r for r in ds[1]["data"]["reasons"])


def test_hpa_desired_replicas_raise_the_total(tmp_path: Path) -> None:
    # newTotal = max(vpaTarget x current, request x hpaDesired): HPA wants 6 of today's pods, so
    # totals become 1500m / 3.6G; both fit only the 3-replica bucket (960m..2.4 / 2970M..6G).
    before = {"cpu": "250m", "memory": "600000k"}
    events = step(T0, 2, {"requests": before}, {"cpu": "250m", "memory": "600M"}, hpa_desired=6)
    out = run(tmp_path, events, fixture_b(intervals=ROUND_INTERVALS))
    [d] = decisions(out)
    assert d["data"]["inputs"]["hpa_desired_replicas"] == 6
    assert_scaled(d, replicas=3, before=before, requests={"cpu": "500m", "memory": "1200000k"})
