"""Reference ``hvpa.md`` section 5, line A (released HVPA), through ``tandem replay`` end to end.

Fixture A (controllers/suite_test.go + hvpa_controller_test.go on master): container
``deployment``, requests 300m/200M, limits 2/5G, HPA min 1 / max 3, all update modes Auto, all
stabilization 3m, minChange cpu {100m, 80 %} / memory {100M, 80 %}, annotation
``hpa-controller: hvpa``.  The upstream tests pass ``vpaWeight`` directly; here one interval
covering min..max carries it, which the weight lookup turns into exactly that weight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaling.quantity import parse_quantity
from tests.replaying import blocked_reasons, decisions, ev, replay

T0 = 1_762_250_400.0  # 2025-11-04T10:00:00Z, a multiple of the 15 s sync period


def fixture_a(
    weight: int,
    *,
    modes: str = "Auto",
    window: tuple[str, str] | None = None,
    gap: bool = False,
    controlled_values: str | None = None,
    intervals: list[dict[str, Any]] | None = None,
    min_replicas: int = 1,
    max_replicas: int = 3,
) -> dict[str, Any]:
    min_change = {"cpu": {"value": "100m", "percentage": 80}, "memory": {"value": "100M", "percentage": 80}}

    def scale(**extra: Any) -> dict[str, Any]:
        return {"updatePolicy": {"updateMode": modes}, "stabilizationDuration": "3m", **extra}

    vpa: dict[str, Any] = {
        "deploy": True,
        "scaleUp": scale(minChange=min_change),
        "scaleDown": scale(minChange=min_change),
    }
    if gap:
        vpa["limitsRequestsGapScaleParams"] = {
            "cpu": {"value": "1", "percentage": 80},
            "memory": {"value": "1G", "percentage": 80},
        }
    if controlled_values:
        vpa["template"] = {
            "spec": {
                "resourcePolicy": {"containerPolicies": [{"containerName": "*", "controlledValues": controlled_values}]}
            }
        }
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "hpa": {
            "deploy": True,
            "scaleUp": scale(),
            "scaleDown": scale(),
            "template": {"spec": {"minReplicas": min_replicas, "maxReplicas": max_replicas}},
        },
        "vpa": vpa,
        "weightBasedScalingIntervals": intervals
        if intervals is not None
        else [{"vpaWeight": weight, "startReplicaCount": 0, "lastReplicaCount": 0}],
    }
    if window:
        spec["maintenanceTimeWindow"] = {"begin": window[0], "end": window[1]}
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"},
        },
        "spec": spec,
    }


def workload(ts: float, replicas: int, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None):
    return ev(
        "workload",
        ts,
        replicas=replicas,
        containers={
            "deployment": {
                "requests": requests or {"cpu": "300m", "memory": "200M"},
                "limits": limits if limits is not None else {"cpu": "2", "memory": "5G"},
            }
        },
    )


def hpa(ts: float, desired: int, limited: bool, max_replicas: int = 3):
    return ev(
        "hpa",
        ts,
        desired_replicas=desired,
        max_replicas=max_replicas,
        conditions=[{"type": "ScalingLimited", "status": "True" if limited else "False"}],
    )


def vpa(ts: float, cpu: str, memory: str, conditions: list[dict[str, str]] | None = None):
    fields: dict[str, Any] = {"containers": {"deployment": {"target": {"cpu": cpu, "memory": memory}}}}
    if conditions is not None:
        fields["conditions"] = conditions
    return ev("vpa", ts, **fields)


def only(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(events) == 1, events
    return events[0]


def q(value: str) -> int:
    return parse_quantity(value)


def change(data: dict[str, Any], section: str, res: str) -> int | None:
    entry = data.get("containers", {}).get("deployment", {}).get(section, {}).get(res)
    return None if entry is None else q(entry["to"])


def test_a1_weighted_memory_up_cpu_below_min_change_gap_limits(tmp_path: Path) -> None:
    out, _ = replay(
        tmp_path, [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G")], [fixture_a(40, gap=True)]
    )
    data = only(decisions(out))["data"]
    assert data["replicas"] == {"from": 2, "to": 3}  # ceil(2 + 1 x 0.6)
    assert change(data, "requests", "memory") == q("1320000k")  # 200M + (3G - 200M) x 0.4
    assert change(data, "limits", "memory") == q("2376000k")  # max(1320M x 1.8, 1320M + 1G)
    assert change(data, "requests", "cpu") is None  # delta 80m < 100m
    assert change(data, "limits", "cpu") is None
    assert blocked_reasons(only(decisions(out))) == ["MinChange"]
    assert data["blocked"][0]["target"] == "deployment/cpu"


def test_a3_closed_maintenance_window_blocks_scale_down_on_both_axes(tmp_path: Path) -> None:
    # now = 10:00:15Z; window now+3h .. now+4h (UTC)
    manifest = fixture_a(90, modes="MaintenanceWindow", window=("130000+0000", "140000+0000"))
    out, _ = replay(tmp_path, [workload(T0 + 1, 2), hpa(T0 + 2, 1, False), vpa(T0 + 3, "50m", "50M")], [manifest])
    assert decisions(out) == []
    blocked = only(out)
    assert blocked["type"] == "dev.tandem.blocked.v1"
    assert set(blocked_reasons(blocked)) == {"MaintenanceWindow"}
    targets = {b["target"]: b.get("wanted") for b in blocked["data"]["blocked"]}
    assert targets["replicas"] == 1  # floor(2 - 1 x 0.1)
    assert {"deployment/cpu", "deployment/memory"} <= set(targets)


def test_a5_vertical_scale_up_waits_while_hpa_can_scale_out(tmp_path: Path) -> None:
    out, _ = replay(tmp_path, [workload(T0 + 1, 2), hpa(T0 + 2, 3, False), vpa(T0 + 3, "500m", "3G")], [fixture_a(40)])
    data = only(decisions(out))["data"]
    assert data["replicas"] == {"from": 2, "to": 3}
    assert "containers" not in data
    assert set(blocked_reasons(only(decisions(out)))) == {"UpdatePolicy"}


def test_a8_requests_only_caps_request_at_existing_limit(tmp_path: Path) -> None:
    events = [
        workload(T0 + 1, 3, {"cpu": "300m", "memory": "500M"}, {"memory": "600M"}),
        hpa(T0 + 2, 3, True),
        vpa(T0 + 3, "500m", "800M"),
    ]
    out, _ = replay(tmp_path, events, [fixture_a(100, controlled_values="RequestsOnly")])
    data = only(decisions(out))["data"]
    assert "replicas" not in data
    assert change(data, "requests", "cpu") == q("500m")
    assert change(data, "requests", "memory") == q("600M")
    assert "limits" not in data["containers"]["deployment"]
    assert data["blocked"] == []


def test_a9_vpa_config_unsupported_ignores_the_recommendation(tmp_path: Path) -> None:
    conditions = [{"type": "ConfigUnsupported", "status": "True"}, {"type": "RecommendationProvided", "status": "True"}]
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G", conditions)]
    out, _ = replay(tmp_path, events, [fixture_a(40)])
    data = only(decisions(out))["data"]
    assert data["replicas"] == {"from": 2, "to": 3}
    assert "containers" not in data
    assert data["blocked"] == []


def test_a11_scale_out_from_a_full_vpa_stage_borrows_the_next_fractional_weight(tmp_path: Path) -> None:
    intervals = [
        {"start": 1, "last": 1, "vpaWeight": 100},
        {"start": 2, "last": 4, "vpaWeight": 60},
        {"start": 5, "last": 10, "vpaWeight": 0},
    ]
    manifest = fixture_a(
        0,
        intervals=[
            {"startReplicaCount": i["start"], "lastReplicaCount": i["last"], "vpaWeight": i["vpaWeight"]}
            for i in intervals
        ],
        max_replicas=10,
    )
    out, _ = replay(tmp_path, [workload(T0 + 1, 1), hpa(T0 + 2, 3, False, max_replicas=10)], [manifest])
    data = only(decisions(out))["data"]
    assert data["replicas"] == {"from": 1, "to": 2}  # ceil(1 + 2 x 0.4)
    assert data["reasons"][0].startswith("hvpa: vpaWeight 60 at 1 replicas (hpaWeight 40)")


def test_a14_stabilization_window_blocks_both_axes(tmp_path: Path) -> None:
    # A first scaling at T0+15 sets lastScaleTime; two minutes later the 3m window still holds.
    first = [workload(T0 + 1, 1), hpa(T0 + 2, 2, False)]
    later = T0 + 15 + 120
    second = [workload(later - 10, 2), hpa(later - 9, 3, True), vpa(later - 8, "500m", "3G")]
    out, _ = replay(tmp_path, [*first, *second], [fixture_a(40)])
    first_decision = only(decisions(out))
    assert first_decision["data"]["tick"] == T0 + 15
    assert first_decision["data"]["replicas"] == {"from": 1, "to": 2}
    blocked = [e for e in out if e["type"] == "dev.tandem.blocked.v1"]
    data = only(blocked)["data"]
    assert data["tick"] == later
    assert set(blocked_reasons(only(blocked))) == {"StabilizationWindow"}
    assert {b["target"] for b in data["blocked"]} == {"replicas", "deployment/cpu", "deployment/memory"}


def test_a15_oom_override_turns_weight_zero_into_one_and_skips_min_change_and_hpa_gate(tmp_path: Path) -> None:
    oom = ev("metric", T0 + 4, pod="web-1", container="deployment", memory=199_000_000, oom=True)
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 2, False), vpa(T0 + 3, "500m", "3G"), oom]
    out, _ = replay(tmp_path, events, [fixture_a(0)])
    data = only(decisions(out))["data"]
    assert change(data, "requests", "cpu") == q("302m")  # 300m + trunc(200m x 1/100)
    assert change(data, "requests", "memory") == q("228000k")  # 200M + 28M
    assert change(data, "limits", "cpu") == q("2013m")  # 2 x 302/300, truncated
    assert change(data, "limits", "memory") == q("5700000k")  # 5G x 228M/200M
    assert "hvpa: OOM kill since the last scaling overrides scale-up stabilization and minChange" in data["reasons"]


def test_oom_override_is_cleared_by_the_scaling_it_caused(tmp_path: Path) -> None:
    oom = ev("metric", T0 + 4, pod="web-1", container="deployment", memory=199_000_000, oom=True)
    later = [
        workload(T0 + 600, 2, {"cpu": "302m", "memory": "228000k"}, {"cpu": "2013m", "memory": "5700000k"}),
        vpa(T0 + 601, "500m", "3G"),
    ]
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 2, False), vpa(T0 + 3, "500m", "3G"), oom, *later]
    out, _ = replay(tmp_path, events, [fixture_a(0)])
    assert len(decisions(out)) == 1  # without a new OOM, weight 0 blocks again
    assert blocked_reasons(out[-1]) == ["Weight", "Weight"]


@pytest.mark.parametrize(
    ("window", "clock", "contains"),
    [
        (("160000+0000", "190000+0000"), "15:59:59.9999", False),
        (("160000+0000", "190000+0000"), "16:00:00", True),
        (("160000+0000", "190000+0000"), "19:00:00", True),
        (("160000+0000", "190000+0000"), "19:01:00", False),
        (("230000+0000", "010000+0000"), "22:59:59.9999", False),
        (("230000+0000", "010000+0000"), "00:59:00", True),
        (("230000+0000", "010000+0000"), "01:00:00", True),
        (("230000+0000", "010000+0000"), "02:00:00", False),
        (("230000+0000", "000000+0000"), "00:00:00", True),
        (("230000+0000", "000000+0000"), "01:00:00", False),
    ],
)
def test_c1_maintenance_window_containment(tmp_path: Path, window: tuple[str, str], clock: str, contains: bool) -> None:
    # Through the replay: a scale-down (HPA desired 1) in MaintenanceWindow mode happens iff inside.
    hh, mm, rest = clock.split(":")
    day = 1_762_214_400.0  # 2025-11-04T00:00:00Z
    tick = day + int(hh) * 3600 + int(mm) * 60 + float(rest)
    manifest = fixture_a(0, modes="MaintenanceWindow", window=window)
    events = [workload(tick - 0.0001, 2), hpa(tick, 1, False)]
    out, _ = replay(tmp_path, events, [manifest], "--sync-period", "0.0001")
    got = decisions(out)
    if contains:
        assert only(got)["data"]["replicas"] == {"from": 2, "to": 1}
    else:
        assert got == []
        assert blocked_reasons(only(out)) == ["MaintenanceWindow"]
