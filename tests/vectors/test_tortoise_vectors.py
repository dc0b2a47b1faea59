"""Reference ``tortoise.md`` section 3, through ``tandem replay`` end to end.

Tortoise's unit tests start from a Tortoise status (phase, slot values, condition ages); here every
case is *staged* by a stream that brings the policy to that state the way a cluster would: an
Initializing tick, a GatheringData tick, then the tick at which the gathering period is over
(daily mode, 24 h slots, so the period is one day and one tick fills the history).  The expected
values are those of the vector, read from the decision of the tick the vector describes.

Vectors the seed's four-week rule replaces (``docs/tortoise.md``), and so not run here:
"replica slots: new candidates replace decayed old values", "replica slots: no decay when updated
< 23h ago" and "replica slots: no slot for current hour" (tandem keeps per-week peaks and every
slot exists).  Their replacement is tested in ``tests/unit/test_history.py`` and by the six-week
stream at the end of this file.  A vector's slot values (``slotMin``/``slotMax``) become a replica
count whose seed bounds are those values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import schemas
from scaling.hpa_metrics import apply_changes
from scaling.policies.tortoise.history import replica_bounds
from scaling.quantity import format_quantity, parse_quantity
from tests.replaying import decisions, ev, replay

H = 3600.0
DAY = 24 * H
#: 2025-11-02T00:00:00+09:00, a Sunday in Asia/Tokyo, a multiple of every sync period used here.
T0 = 1_762_009_200.0
#: The tick at which a daily-mode Tortoise has gathered data for one day (GatheringData began at T0 + 60).
TW = T0 + 60 + DAY

#: Reference section 3: the controller (internal/controller/testdata) configuration.
CONTROLLER: dict[str, Any] = {
    "GatheringDataPeriodType": "daily",
    "RangeOfMinMaxReplicasRecommendationHours": 24,
    "HPATargetUtilizationMaxIncrease": 25,
    "HPATargetUtilizationUpdateInterval": "1h",
    "MaximumMinReplicas": 1000,
    "MaximumMaxReplicas": 10000,
    "MinimumMinReplicas": 3,
    "PreferredMaxReplicas": 30,
    "MinimumTargetResourceUtilization": 40,
    "MaximumTargetResourceUtilization": 90,
    "MinimumCPURequest": "10m",
    "MinimumMemoryRequest": "10Mi",
    "MinimumCPURequestPerContainer": {"istio-proxy": "11m"},
    "MinimumMemoryRequestPerContainer": {"istio-proxy": "11Mi"},
    "MaximumCPURequest": "10",
    "MaximumMemoryRequest": "10Gi",
    "MaxAllowedScalingDownRatio": 0,
    "BufferRatioOnVerticalResource": 0,
    "ReplicaReductionFactor": 0.95,
    "HPAExternalMetricExclusionRegex": ".*-exclude-metric",
    "FeatureFlags": ["VerticalScalingBasedOnPreferredMaxReplicas"],
}
DAILY = {"GatheringDataPeriodType": "daily", "RangeOfMinMaxReplicasRecommendationHours": 24}
DECISION_SCHEMA = schemas.validator("decision")


def tortoise(mode: str = "Auto", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {"updateMode": mode, "targetRefs": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}, **spec},
    }


def policies(**per_container: dict[str, str]) -> list[dict[str, Any]]:
    return [{"containerName": c, "policy": p} for c, p in per_container.items()]


def workload(
    ts: float, replicas: int, requests: dict[str, tuple[str, str]], limits: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    limits = limits or {}
    containers = {
        c: {"requests": {"cpu": cpu, "memory": mem}, "limits": limits.get(c, {})} for c, (cpu, mem) in requests.items()
    }
    return ev("workload", ts, replicas=replicas, containers=containers)


def hpa(
    ts: float,
    min_r: int,
    max_r: int,
    targets: dict[str, int],
    *,
    conditions: list[dict[str, Any]] | None = None,
    current: list[float] | None = None,
) -> dict[str, Any]:
    metrics = [
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": key.split("/")[1],
                "container": key.split("/")[0],
                "target": {"type": "Utilization", "averageUtilization": v},
            },
        }
        for key, v in targets.items()
    ]
    current = [40.0] * len(targets) if current is None else current
    current_metrics = [
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": k.split("/")[1],
                "container": k.split("/")[0],
                "current": {"averageUtilization": v},
            },
        }
        for k, v in zip(targets, current, strict=False)
    ]
    if conditions is None:
        conditions = [{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}]
    return ev(
        "hpa",
        ts,
        desired_replicas=min_r,
        min_replicas=min_r,
        max_replicas=max_r,
        metrics=metrics,
        current_metrics=current_metrics,
        conditions=conditions,
    )


def vpa(
    ts: float, targets: dict[str, tuple[str, str]], upper: dict[str, tuple[str, str]] | None = None
) -> dict[str, Any]:
    containers: dict[str, Any] = {}
    for c, (cpu, mem) in targets.items():
        containers[c] = {"target": {"cpu": cpu, "memory": mem}}
        if upper and c in upper:
            containers[c]["upper_bound"] = {"cpu": upper[c][0], "memory": upper[c][1]}
    return ev("vpa", ts, containers=containers, conditions=[{"type": "RecommendationProvided", "status": "True"}])


def run(
    tmp_path: Path, events: Iterable[dict[str, Any]], settings: dict[str, Any], sync: float = 60
) -> list[dict[str, Any]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "tandem.yaml"
    config.write_text(yaml.safe_dump({"tortoise": settings}))
    out, _ = replay(tmp_path, list(events), (), "--config", str(config), "--sync-period", str(sync))
    for e in out:
        DECISION_SCHEMA.validate(e)  # every audit event keeps the contract
    return out


def at(out: list[dict[str, Any]], tick: float) -> dict[str, Any]:
    """The data of the audit event of ``tick`` (decision or blocked)."""
    found = [e["data"] for e in out if e["data"]["tick"] == tick]
    assert len(found) == 1, f"expected one audit event at {tick}, got {len(found)}"
    return found[0]


def hpa_changes(data: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (v["from"], v["to"]) if "from" in v else {kk: (vv["from"], vv["to"]) for kk, vv in v.items()}
        for k, v in data.get("hpa", {}).items()
    }


def requests_to(data: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        c: {r: v["to"] for r, v in sections.get("requests", {}).items()}
        for c, sections in data.get("containers", {}).items()
    }


def mem(text: str) -> str:
    return format_quantity("memory", parse_quantity(text))


def staged(
    requests: dict[str, tuple[str, str]],
    replicas: int | Callable[[float], int],
    hpa_ev: Callable[[float], dict[str, Any]] | None,
    vpa_ev: Callable[[float], dict[str, Any]],
    manifest: dict[str, Any],
    ticks: Iterable[float] = (T0, T0 + 60, TW),
    limits: dict[str, dict[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The policy at ``T0``, then at every tick: the workload (as observed), the HPA and the VPA."""
    events = [ev("policy", T0, policy=manifest)]
    for ts in ticks:
        n = replicas(ts) if callable(replicas) else replicas
        events.append(workload(ts, n, requests, limits))
        if hpa_ev is not None:
            events.append(hpa_ev(ts))
        events.append(vpa_ev(ts))
    return events


# --- target utilisation (recommender_test.go TestUpdateRecommendation) ------------------------

TWO_CONTAINERS = policies(app={"memory": "Horizontal"}, **{"istio-proxy": {"cpu": "Horizontal"}})
TWO_REQUESTS = {"app": ("1", "5Gi"), "istio-proxy": ("1", "1Gi")}


def test_target_utilisation_two_containers_one_horizontal_resource_each(tmp_path: Path) -> None:
    settings = {
        **DAILY,
        "MaximumTargetResourceUtilization": 90,
        "MinimumTargetResourceUtilization": 40,
        "MaximumMaxReplicas": 1000,
        "MaximumMinReplicas": 100,
        # The upstream test checks the recommendation; let it reach the HPA in one step.
        "HPATargetUtilizationMaxIncrease": 100,
    }
    out = run(
        tmp_path,
        staged(
            TWO_REQUESTS,
            100,
            lambda ts: hpa(ts, 3, 200, {"app/memory": 60, "istio-proxy/cpu": 50}),
            lambda ts: vpa(ts, {"app": ("1", "4Gi"), "istio-proxy": ("600m", "1Gi")}),
            tortoise(autoscalingPolicy=TWO_CONTAINERS),
        ),
        settings,
    )
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    # app: U = ceil(4/5 × 100) = 80, 100 - (80 - 60) = 80; istio: U = 60, 100 - (60 - 50) = 90, clamp 90
    assert hpa_changes(working)["target_utilization"] == {"app/memory": (60, 80), "istio-proxy/cpu": (50, 90)}


def test_target_utilisation_skipped_when_replicas_equal_maximum_max_replicas(tmp_path: Path) -> None:
    settings = {**DAILY, "MaximumMaxReplicas": 1000, "MaximumMinReplicas": 100, "HPATargetUtilizationMaxIncrease": 100}
    out = run(
        tmp_path,
        staged(
            TWO_REQUESTS,
            1000,
            lambda ts: hpa(ts, 3, 1000, {"app/memory": 60, "istio-proxy/cpu": 50}),
            lambda ts: vpa(ts, {"app": ("1", "4Gi"), "istio-proxy": ("600m", "1Gi")}),
            tortoise(autoscalingPolicy=TWO_CONTAINERS),
        ),
        settings,
    )
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    assert "target_utilization" not in working.get("hpa", {})
    assert any("MaximumMaxReplicas" in r for r in working["reasons"])


# --- applying to the HPA (hpa/service_test.go TestClient_UpdateHPAFromTortoiseRecommendation) -

#: Slot values 3 / 6 are the seed bounds of 3 replicas; VPA 695 of a 1000 request gives U = 70,
#: so the recommended targets are 100 - (70 - 60) = 90 (app memory) and 100 - (70 - 50) = 80.
APPLY = {
    **DAILY,
    "HPATargetUtilizationMaxIncrease": 50,
    "HPATargetUtilizationUpdateInterval": "1h",
    "MaximumMinReplicas": 1000,
    "MaximumMaxReplicas": 10001,
    # Keeps the requests of this HPA-only vector as they are (3 replicas would shrink them).
    "MaxAllowedScalingDownRatio": 1,
}
APPLY_REQUESTS = {"app": ("1", "1000Mi"), "istio-proxy": ("1000m", "1Gi")}


def apply_vpa(ts: float) -> dict[str, Any]:
    return vpa(ts, {"app": ("1", "695Mi"), "istio-proxy": ("695m", "1Gi")})


def apply_events(mode: str = "Auto", before: dict[str, int] | None = None) -> list[dict[str, Any]]:
    targets = before or {"app/memory": 60, "istio-proxy/cpu": 50}
    return staged(
        APPLY_REQUESTS,
        3,
        lambda ts: hpa(ts, 1, 2, targets),
        apply_vpa,
        tortoise(mode, autoscalingPolicy=TWO_CONTAINERS),
    )


def test_hpa_apply_targets_and_min_max_from_recommendations(tmp_path: Path) -> None:
    out = run(tmp_path, apply_events(), APPLY)
    assert hpa_changes(at(out, TW)) == {
        "min_replicas": (1, 3),
        "max_replicas": (2, 6),
        "target_utilization": {"app/memory": (60, 90), "istio-proxy/cpu": (50, 80)},
    }


def test_hpa_apply_target_rate_limit_blocks_targets_but_not_replicas(tmp_path: Path) -> None:
    # At TW the HPA already has the recommended targets: the application is allowed and stamped.
    events = apply_events(before={"app/memory": 90, "istio-proxy/cpu": 80})
    # A minute later the HPA is back to 1/2 and 60/50 (hpaTargetUpdatedConditionAge 1m).
    events += [workload(TW + 60, 3, APPLY_REQUESTS), hpa(TW + 60, 1, 2, {"app/memory": 60, "istio-proxy/cpu": 50})]
    out = run(tmp_path, events, APPLY)
    assert hpa_changes(at(out, TW)) == {"min_replicas": (1, 3), "max_replicas": (2, 6)}
    later = at(out, TW + 60)
    assert hpa_changes(later) == {"min_replicas": (1, 3), "max_replicas": (2, 6)}
    assert [(b["target"], b["reason"], b["wanted"]) for b in later["blocked"]] == [
        ("hpa/target_utilization", "Cooldown", "app/memory=90"),
        ("hpa/target_utilization", "Cooldown", "istio-proxy/cpu=80"),
    ]


def test_hpa_apply_off_mode_leaves_the_hpa_untouched(tmp_path: Path) -> None:
    out = run(tmp_path, apply_events("Off"), APPLY)
    assert out and all(e["data"]["dry_run"] for e in out)
    # The dry run still shows what Auto would do.
    assert hpa_changes(at(out, TW))["min_replicas"] == (1, 3)


def test_hpa_apply_gathering_data_leaves_the_hpa_untouched(tmp_path: Path) -> None:
    events = [e for e in apply_events("Off") if e["ts"] < TW]
    out = run(tmp_path, events, APPLY)
    assert all("hpa" not in e["data"] for e in out)
    assert [b["reason"] for b in at(out, T0 + 60)["blocked"]] == ["GatheringData", "GatheringData"]


def test_emergency_pins_min_replicas_to_the_recommended_max(tmp_path: Path) -> None:
    events = apply_events()
    events += [ev("policy", TW + 60, policy=tortoise("Emergency", autoscalingPolicy=TWO_CONTAINERS))]
    events += [workload(TW + 60, 3, APPLY_REQUESTS)]
    out = run(tmp_path, events, APPLY)
    emergency = at(out, TW + 60)
    assert emergency["reasons"][0] == "tortoise: phase Emergency"
    assert hpa_changes(emergency) == {"min_replicas": (3, 6)}
    # Final HPA: min 6, max 6, targets 90 / 80 (the vector's expected HPA).
    assert fold_hpa(out, {"min_replicas": 1, "max_replicas": 2, "app/memory": 60, "istio-proxy/cpu": 50}) == {
        "min_replicas": 6,
        "max_replicas": 6,
        "app/memory": 90,
        "istio-proxy/cpu": 80,
    }


def test_back_to_normal_finishes_when_reduced_value_falls_below_recommendation(tmp_path: Path) -> None:
    events = apply_events()
    events += [ev("policy", TW + 60, policy=tortoise("Emergency", autoscalingPolicy=TWO_CONTAINERS))]
    events += [workload(TW + 60, 3, APPLY_REQUESTS)]
    # Emergency is turned off; the HPA reports minReplicas 1 (the vector's hpaBefore).
    events += [ev("policy", TW + 120, policy=tortoise("Auto", autoscalingPolicy=TWO_CONTAINERS))]
    events += [workload(TW + 120, 3, APPLY_REQUESTS), hpa(TW + 120, 1, 6, {"app/memory": 90, "istio-proxy/cpu": 80})]
    out = run(tmp_path, events, APPLY)
    back = at(out, TW + 120)
    assert back["reasons"][0] == "tortoise: phase Working"
    assert "tortoise: BackToNormal finished at minReplicas 3" in back["reasons"]
    assert hpa_changes(back) == {"min_replicas": (1, 3)}


def fold_hpa(out: list[dict[str, Any]], state: dict[str, Any]) -> dict[str, Any]:
    """The HPA after every non-dry-run decision of ``out`` is applied to ``state``."""
    state = dict(state)
    for e in decisions(out):
        if e["data"]["dry_run"]:
            continue
        for name, change in hpa_changes(e["data"]).items():
            if name == "target_utilization":
                for key, (_, to) in change.items():
                    state[key] = to
            else:
                state[name] = change[1]
    return state


# --- right-sizing (recommender_test.go TestService_UpdateVPARecommendation) ------------------

PREFERRED = {
    **DAILY,
    "PreferredMaxReplicas": 3,
    "MinimumMinReplicas": 1,
    "MaximumCPURequest": "1000m",
    "MaximumMemoryRequest": "1Gi",
    "BufferRatioOnVerticalResource": 0,
    "FeatureFlags": ["VerticalScalingBasedOnPreferredMaxReplicas"],
}


def test_right_sizing_first_sighting_above_preferred_max_only_flips_condition(tmp_path: Path) -> None:
    later = TW + 31 * 60
    out = run(
        tmp_path,
        staged(
            {"app": ("500m", "500Mi")},
            lambda ts: 2 if ts < TW else 4,  # above PreferredMaxReplicas from TW on
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 80, "app/memory": 80}),
            lambda ts: vpa(ts, {"app": ("500m", "500Mi")}),
            tortoise(autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Horizontal"})),
            ticks=(T0, T0 + 60, TW, later),
        ),
        PREFERRED,
    )
    first = at(out, TW)
    assert requests_to(first) == {}  # recommendedResource 500m / 500Mi: unchanged
    # 31 minutes later (the next vector's condition age) the requests grow ×1.3.
    assert requests_to(at(out, later)) == {"app": {"cpu": "650m", "memory": mem("650Mi")}}


def test_right_sizing_mixed_policy_cpu_grows_x13_memory_follows_vpa(tmp_path: Path) -> None:
    t1, t2 = T0 + 60, T0 + 60 + 31 * 60
    out = run(
        tmp_path,
        staged(
            {"app": ("500m", "500Mi")},
            4,
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 80}),
            lambda ts: vpa(ts, {"app": ("500m", "800Mi")}),
            tortoise(autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Vertical"})),
            ticks=(T0, t1, t2),
        ),
        PREFERRED,
    )
    # t1: PartlyWorking (memory is Vertical), the condition turns True; t2, 31 min later: ×1.3.
    assert requests_to(at(out, t1)) == {"app": {"memory": mem("800Mi")}}
    assert requests_to(at(out, t2)) == {"app": {"cpu": "650m", "memory": mem("800Mi")}}


def test_right_sizing_at_minimum_min_replicas_shrinks_to_vpa_value(tmp_path: Path) -> None:
    settings = {**DAILY, "MinimumMinReplicas": 3, "PreferredMaxReplicas": 6, "MaxAllowedScalingDownRatio": 0}
    out = run(
        tmp_path,
        staged(
            {"app": ("130m", "130Mi")},
            3,
            None,  # the HPA Tortoise creates
            lambda ts: vpa(ts, {"app": ("120m", "120Mi")}),
            tortoise(
                autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Horizontal"}),
                resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "100m", "memory": "100Mi"}}],
            ),
        ),
        settings,
    )
    assert hpa_changes(at(out, T0))["min_replicas"] == (None, 3)
    assert requests_to(at(out, TW)) == {"app": {"cpu": "120m", "memory": mem("120Mi")}}


def test_right_sizing_no_shrink_when_close_to_preferred_max(tmp_path: Path) -> None:
    both = {"cpu": "Horizontal", "memory": "Horizontal"}
    out = run(
        tmp_path,
        staged(
            {"test-container": ("1", "10Gi"), "test-container2": ("1", "10Gi")},
            9,
            lambda ts: hpa(
                ts,
                1,
                100,
                {f"{c}/{r}": 80 for c in ("test-container", "test-container2") for r in ("cpu", "memory")},
            ),
            lambda ts: vpa(ts, {"test-container": ("100m", "1Gi"), "test-container2": ("1", "10Gi")}),
            tortoise(autoscalingPolicy=policies(**{"test-container": both, "test-container2": both})),
        ),
        {**DAILY, "PreferredMaxReplicas": 10},
    )
    assert at(out, TW)["reasons"][0] == "tortoise: phase Working"
    assert all("containers" not in e["data"] for e in out)


# --- vertical (recommender_test.go, tortoise_test.go, pod_test.go) ----------------------------

VERTICAL = policies(app={"cpu": "Vertical", "memory": "Vertical"})


def test_vertical_scale_up_applies_buffer_twice(tmp_path: Path) -> None:
    settings = {
        **DAILY,
        "BufferRatioOnVerticalResource": 0.1,
        "MaxAllowedScalingDownRatio": 0,
        "MaximumCPURequest": "1000m",
        "MaximumMemoryRequest": "1Gi",
    }
    out = run(
        tmp_path,
        staged(
            {"app": ("130m", "130Mi")},
            5,
            None,
            lambda ts: vpa(ts, {"app": ("120m", "120Mi")}),
            tortoise(
                autoscalingPolicy=VERTICAL,
                resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "100m", "memory": "100Mi"}}],
            ),
            ticks=(T0, T0 + 60),
        ),
        settings,
    )
    # 120 × 1.1 = 132 > 130 -> 132 × 1.1 = 145.2 -> 145m; memory exactly 145.2Mi (written in tandem's form)
    assert requests_to(at(out, T0 + 60)) == {"app": {"cpu": "145m", "memory": mem("145.2Mi")}}


@pytest.mark.parametrize(
    ("max_allocated", "global_max"),
    [({"cpu": "300m", "memory": "300Mi"}, ("1000m", "1Gi")), ({"cpu": "1000m", "memory": "1Gi"}, ("300m", "300Mi"))],
)
def test_vertical_max_caps_spec_and_global_smaller_wins(
    tmp_path: Path, max_allocated: dict[str, str], global_max: tuple[str, str]
) -> None:
    settings = {
        **DAILY,
        "BufferRatioOnVerticalResource": 0,
        "MaximumCPURequest": global_max[0],
        "MaximumMemoryRequest": global_max[1],
    }
    out = run(
        tmp_path,
        staged(
            {"app": ("130m", "130Mi")},
            5,
            None,
            lambda ts: vpa(ts, {"app": ("500m", "0.5Gi")}),
            tortoise(
                autoscalingPolicy=VERTICAL,
                resourcePolicy=[{"containerName": "app", "maxAllocatedResources": max_allocated}],
            ),
            ticks=(T0, T0 + 60),
        ),
        settings,
    )
    assert requests_to(at(out, T0 + 60)) == {"app": {"cpu": "300m", "memory": mem("300Mi")}}


def test_request_application_decreases_at_most_once_per_hour(tmp_path: Path) -> None:
    both = {"cpu": "Vertical", "memory": "Vertical"}
    manifest = tortoise(autoscalingPolicy=policies(app=both, sidecar=both))
    settings = {**DAILY, "BufferRatioOnVerticalResource": 0, "MaxAllowedScalingDownRatio": 0}
    small = {"app": ("1500m", "1.5Gi"), "sidecar": ("1500m", "1.5Gi")}
    big = {"app": ("2", "2Gi"), "sidecar": ("2", "2Gi")}
    t1, t2, t3 = T0 + 60, T0 + 120, T0 + 60 + 3 * H
    events = [
        ev("policy", T0, policy=manifest),
        workload(T0, 5, small),
        vpa(T0, {"app": ("2", "2Gi"), "sidecar": ("2", "2Gi")}),
        workload(t1, 5, small),  # t1: scale up to 2 / 2Gi (VerticalRecommendationUpdated now)
        vpa(t2, {"app": ("1", "1Gi"), "sidecar": ("1", "1Gi")}),
        workload(t2, 5, big),  # t2, 1 minute later: the decrease to 1 / 1Gi waits
        workload(t3, 5, big),  # t3, 3 hours after: it goes through
    ]
    out = run(tmp_path, events, settings)
    assert requests_to(at(out, t1)) == {
        "app": {"cpu": "2", "memory": mem("2Gi")},
        "sidecar": {"cpu": "2", "memory": mem("2Gi")},
    }
    blocked = at(out, t2)
    assert "containers" not in blocked
    assert sorted((b["target"], b["reason"]) for b in blocked["blocked"]) == [
        ("app/cpu", "Cooldown"),
        ("app/memory", "Cooldown"),
        ("sidecar/cpu", "Cooldown"),
        ("sidecar/memory", "Cooldown"),
    ]
    assert requests_to(at(out, t3)) == {
        "app": {"cpu": "1", "memory": mem("1Gi")},
        "sidecar": {"cpu": "1", "memory": mem("1Gi")},
    }


@pytest.mark.parametrize(
    ("settings", "pod", "expected"),
    [
        (
            {},
            {"container": {"cpu": "300m", "memory": "100Mi"}, "istio-proxy": {"cpu": "400m", "memory": "200Mi"}},
            {
                "container": {"cpu": "600m", "memory": mem("200Mi")},
                "istio-proxy": {"cpu": "800m", "memory": mem("400Mi")},
            },
        ),
        (
            {"ResourceLimitMultiplier": {"cpu": 3, "memory": 1}},
            {"container": {"cpu": "200m", "memory": "100Mi"}},
            {"container": {"cpu": "600m", "memory": mem("200Mi")}},
        ),
        (
            {"MinimumCPULimit": "700m"},
            {"container": {"cpu": "300m", "memory": "100Mi"}},
            {"container": {"cpu": "700m", "memory": mem("200Mi")}},
        ),
    ],
)
def test_pod_webhook_limits_keep_their_ratio_multiplier_and_cpu_limit_floor(
    tmp_path: Path, settings: dict[str, Any], pod: dict[str, dict[str, str]], expected: dict[str, dict[str, str]]
) -> None:
    both = {"cpu": "Vertical", "memory": "Vertical"}
    containers = sorted(pod)
    out = run(
        tmp_path,
        staged(
            {c: ("100m", "100Mi") for c in containers},
            5,
            None,
            lambda ts: vpa(ts, {c: ("200m", "200Mi") for c in containers}),
            tortoise(autoscalingPolicy=policies(**{c: both for c in containers})),
            ticks=(T0, T0 + 60),
            limits=pod,
        ),
        {**DAILY, "BufferRatioOnVerticalResource": 0, **settings},
    )
    data = at(out, T0 + 60)
    assert requests_to(data) == {c: {"cpu": "200m", "memory": mem("200Mi")} for c in containers}
    limits = {c: {r: v["to"] for r, v in s["limits"].items()} for c, s in data["containers"].items()}
    assert limits == expected


# --- controller cases (internal/controller/testdata) -----------------------------------------


def test_controller_too_big_request_clamped_by_max_allocated_and_spec_max_replicas(tmp_path: Path) -> None:
    manifest = tortoise(
        maxReplicas=10,
        autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Vertical"}),
        resourcePolicy=[{"containerName": "app", "maxAllocatedResources": {"cpu": "1", "memory": "1Gi"}}],
    )
    out = run(
        tmp_path,
        staged(
            {"app": ("4", "4Gi")},
            10,
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 50}),
            lambda ts: vpa(ts, {"app": ("3", "3Gi")}, upper={"app": ("5", "5Gi")}),
            manifest,
        ),
        CONTROLLER,
    )
    working = at(out, TW)
    assert hpa_changes(working) == {
        "min_replicas": (1, 5),
        "max_replicas": (100, 10),
        "target_utilization": {"app/cpu": (50, 75)},
    }
    assert requests_to(working) == {"app": {"cpu": "1", "memory": mem("1Gi")}}


def test_controller_vpa_suggestion_below_global_floors(tmp_path: Path) -> None:
    # Policies derived from the attached HPA's ContainerResource metrics: cpu Horizontal, memory Vertical.
    manifest = tortoise(
        targetRefs={"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "horizontalPodAutoscalerName": "hpa"}
    )
    out = run(
        tmp_path,
        staged(
            {"app": ("4", "4Gi"), "istio-proxy": ("100m", "100Mi")},
            10,
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 50, "istio-proxy/cpu": 50}),
            lambda ts: vpa(ts, {"app": ("3", "1Mi"), "istio-proxy": ("75m", "1Mi")}),
            manifest,
        ),
        CONTROLLER,
    )
    working = at(out, TW)
    assert hpa_changes(working) == {
        "min_replicas": (1, 5),
        "max_replicas": (100, 20),
        "target_utilization": {"app/cpu": (50, 75), "istio-proxy/cpu": (50, 75)},
    }
    assert requests_to(working) == {"app": {"memory": mem("10Mi")}, "istio-proxy": {"memory": mem("11Mi")}}


def _failing_since(ts: float) -> list[dict[str, Any]]:
    text = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric", "lastTransitionTime": text}
    ]


@pytest.mark.parametrize("with_condition", [True, False], ids=["hpa-condition", "hpa-no-metrics"])
def test_controller_automatic_emergency_when_hpa_cannot_get_metrics(tmp_path: Path, with_condition: bool) -> None:
    # Slot values 3 / 15 are the bounds of 10 replicas with multipliers 0.25 / 1.5.
    settings = {**CONTROLLER, "MinReplicasRecommendationMultiplier": 0.25, "MaxReplicasRecommendationMultiplier": 1.5}
    manifest = tortoise(autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Vertical"}))
    events = staged(
        {"app": ("1", "1Gi")},
        10,
        lambda ts: hpa(ts, 3, 15, {"app/cpu": 50}),
        lambda ts: vpa(ts, {"app": ("500m", "1Gi")}),
        manifest,
    )
    conditions = _failing_since(TW + 60 - 600) if with_condition else None
    events += [
        workload(TW + 60, 10, {"app": ("1", "1Gi")}),
        hpa(TW + 60, 3, 15, {"app/cpu": 50}, conditions=conditions, current=[0]),
    ]
    out = run(tmp_path, events, settings)
    assert at(out, TW)["reasons"][0] == "tortoise: phase Working"
    emergency = at(out, TW + 60)
    assert emergency["reasons"][0] == "tortoise: phase Emergency"
    assert hpa_changes(emergency) == {"min_replicas": (3, 15)}
    assert replica_bounds(10, min_multiplier=0.25, max_multiplier=1.5) == (3, 15)


def test_controller_healthy_hpa_target_clamped_to_90_applied_with_25_step(tmp_path: Path) -> None:
    both = {"cpu": "Horizontal", "memory": "Vertical"}
    manifest = tortoise(autoscalingPolicy=policies(app=both, **{"istio-proxy": both}))
    out = run(
        tmp_path,
        staged(
            {"app": ("10", "10Gi"), "istio-proxy": ("100m", "100Mi")},
            10,
            lambda ts: hpa(ts, 3, 15, {"app/cpu": 30, "istio-proxy/cpu": 30}, current=[30, 30]),
            # memory targets equal the requests (buffer 0): no vertical change
            lambda ts: vpa(ts, {"app": ("3", "10Gi"), "istio-proxy": ("75m", "100Mi")}),
            manifest,
        ),
        CONTROLLER,
    )
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    # app: U = 30 -> 100 -> clamp 90, applied 30 + 25 = 55; istio-proxy: U = 75 -> 55
    assert hpa_changes(working) == {
        "min_replicas": (3, 5),
        "max_replicas": (15, 20),
        "target_utilization": {"app/cpu": (30, 55), "istio-proxy/cpu": (30, 55)},
    }
    assert "containers" not in working


def test_controller_still_gathering_horizontal_data_is_partly_working(tmp_path: Path) -> None:
    manifest = tortoise(autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Vertical"}))
    out = run(
        tmp_path,
        staged(
            {"app": ("1", "1Gi")},
            5,
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 50}),
            lambda ts: vpa(ts, {"app": ("500m", "1Gi")}),
            manifest,
            ticks=(T0, T0 + 60, T0 + 12 * H),
        ),
        CONTROLLER,
    )
    assert all("hpa" not in e["data"] for e in out)
    assert at(out, T0 + 60)["reasons"][0] == "tortoise: phase PartlyWorking"


def test_policy_file_on_the_command_line(tmp_path: Path) -> None:
    manifest = tortoise(autoscalingPolicy=TWO_CONTAINERS)
    events = [e for e in apply_events() if e["type"] != "policy"]
    config = tmp_path / "tandem.yaml"
    config.write_text(yaml.safe_dump({"tortoise": APPLY}))
    out, _ = replay(tmp_path, events, [manifest], "--config", str(config), "--sync-period", "60")
    assert hpa_changes(at(out, TW))["min_replicas"] == (1, 3)


# --- six weeks of replicas: the four-week rule, an emergency and the way back ----------------

WEEKS = 6
HOURS = WEEKS * 7 * 24
E_START = 4 * 7 * 24 + 3 * 24 + 10  # week 5, Wednesday 10:00 (hour index from T0)
E_END = E_START + 6  # updateMode back to Auto six hours later


def six_week_replicas(i: int) -> int:
    """Replicas at hour ``i``: weekday peaks (9-18 h) differ from weekend ones and from week to week."""
    week, day, hour = i // 168, (i // 24) % 7, i % 24
    weekend = day in (0, 6)
    if weekend:
        base = 5 if 11 <= hour < 17 else 2
    else:
        base = (14, 18, 12, 16, 11, 13)[week] if 9 <= hour < 18 else (6 if 7 <= hour < 22 else 3)
    return base + (week * 5 + day * 3 + hour) % 3


def expected_six_weeks(replicas: dict[float, int]) -> dict[float, tuple[str, int, int]]:
    """Phase, minReplicas and maxReplicas after each tick, computed directly from the replicas.

    The seed's rule with Tortoise's defaults: the peak of the same weekday and hour over the last
    four weeks (``ts - k × 7 days``, k = 0..3), ×1/2 (floor 3, cap 10) and ×2 (cap 100); ticks in
    Emergency and BackToNormal are not recorded; Emergency pins min to max; BackToNormal lowers
    min by trunc(× 0.95) per tick until the recommendation is higher; min never exceeds max.
    """
    recorded: dict[float, int] = {}
    out: dict[float, tuple[str, int, int]] = {}
    phase, current_min = "Working", 3
    for i, ts in enumerate(sorted(replicas)):
        if phase not in ("Emergency", "BackToNormal"):
            recorded[ts] = replicas[ts]
        if i == E_START:
            phase = "Emergency"
        elif i >= E_END and phase == "Emergency":
            phase = "BackToNormal"
        peak = max(recorded[ts - k * 7 * DAY] for k in range(4) if ts - k * 7 * DAY in recorded)
        lo, hi = replica_bounds(peak)
        lo, hi = min(lo, 10), min(hi, 100)
        if phase == "Emergency":
            lo = hi
        elif phase == "BackToNormal":
            reduced = math.trunc(current_min * 0.95)
            if lo > reduced:
                phase = "Working"
            else:
                lo = reduced
        current_min = min(lo, hi)
        out[ts] = (phase, current_min, hi)
    return out


def test_six_week_stream_min_max_emergency_and_back_to_normal(tmp_path: Path) -> None:
    manifest = tortoise(
        autoscalingPolicy=policies(app={"cpu": "Horizontal", "memory": "Vertical"}),
        resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "1"}}],
    )
    emergency = tortoise("Emergency", **{k: v for k, v in manifest["spec"].items() if k != "updateMode"})
    requests = {"app": ("1", "1210Mi")}  # VPA 1000Mi × 1.1 × 1.1: no vertical change
    events: list[dict[str, Any]] = [ev("policy", T0, policy=manifest)]
    events.append(hpa(T0, 3, 100, {"app/cpu": 70}))
    events.append(vpa(T0, {"app": ("600m", "1000Mi")}))
    replicas: dict[float, int] = {}
    for i in range(HOURS):
        ts = T0 + i * H
        if i == E_START:
            events.append(ev("policy", ts, policy=emergency))
        if i == E_END:
            events.append(ev("policy", ts, policy=manifest))
        n = six_week_replicas(i)
        if E_START < i <= E_END + 2:
            n = 40  # what an emergency does to the workload: the history must not see it
        replicas[ts] = n
        events.append(workload(ts, n, requests))
    out = run(tmp_path, events, {}, sync=3600)  # 1 h weekly slots in Asia/Tokyo: Tortoise's defaults

    by_tick = {e["data"]["tick"]: e["data"] for e in out}
    phases = {t: d["reasons"][0].removeprefix("tortoise: phase ") for t, d in by_tick.items()}
    # Working starts once a week of history covers every slot (GatheringData began at T0 + 1 h).
    start = T0 + H + 7 * DAY
    assert phases[start] == "Working"
    assert {p for t, p in phases.items() if t < start} <= {"Initializing", "PartlyWorking"}

    expected = expected_six_weeks(replicas)
    state = {"min_replicas": 3, "max_replicas": 100}
    seen: dict[str, list[tuple[int, int]]] = {"Working": [], "Emergency": [], "BackToNormal": []}
    for ts in sorted(replicas):
        d = by_tick.get(ts)
        if d is not None:
            assert not d["dry_run"]
            for name, change in hpa_changes(d).items():
                if name != "target_utilization":
                    state[name] = change[1]
        if ts < start:
            continue
        if d is not None:
            assert phases[ts] == expected[ts][0], (ts - T0) / H
        phase, lo, hi = expected[ts]
        assert (state["min_replicas"], state["max_replicas"]) == (lo, hi), (ts - T0) / H
        seen[phase].append((lo, hi))
    assert len(seen["Emergency"]) == E_END - E_START
    assert all(lo == hi for lo, hi in seen["Emergency"])
    # The way back: several steps down, each trunc(× 0.95) of the last (or max, if lower).
    steps = [lo for lo, _ in seen["BackToNormal"]]
    assert len(steps) >= 5
    assert all(b < a for a, b in itertools.pairwise(steps))
    assert len(seen["Working"]) > 800
    # The samples of the emergency are not in the history: with them, week 6 would differ.
    week6 = T0 + (E_START + 1 + 7 * 24) * H
    assert expected[week6][2] != replica_bounds(40)[1]
    assert expected[week6][2] == state_after(out, week6)
    # Weekday and weekend peaks of the same hour differ (12:00, Sunday and Monday of week 6).
    sunday, monday = T0 + 5 * 7 * DAY + 12 * H, T0 + 5 * 7 * DAY + DAY + 12 * H
    assert expected[sunday][1:] != expected[monday][1:]


def state_after(out: list[dict[str, Any]], tick: float) -> int:
    """maxReplicas after the last decision at or before ``tick``."""
    value = None
    for e in decisions(out):
        if e["data"]["tick"] <= tick and "max_replicas" in e["data"].get("hpa", {}):
            value = e["data"]["hpa"]["max_replicas"]["to"]
    assert value is not None
    return int(value)


# --- tandem's own HPA: raw metric samples only (no hpa or vpa events) -------------------------

OWN_PODS = ("web-a", "web-b", "web-c", "web-d")
OWN_REQUESTS = {"app": ("1", "1Gi"), "sidecar": ("100m", "128Mi")}
#: cpu per pod: app 875m of 1 core (87 %), sidecar 50m of 100m (50 %).
OWN_USAGE = {"app": 0.875, "sidecar": 0.05}
#: memory Off: the stream's requests stay those Tortoise wants, only the HPA side moves.
OWN_POLICY = policies(app={"cpu": "Horizontal", "memory": "Off"}, sidecar={"cpu": "Horizontal", "memory": "Off"})


def own_metric(ts: float) -> dict[str, Any]:
    samples = [
        {"pod": p, "container": c, "cpu": cpu, "memory": 100_000_000} for p in OWN_PODS for c, cpu in OWN_USAGE.items()
    ]
    return ev("metric", ts, samples=samples)


def run_own(
    tmp_path: Path, ticks: Iterable[float], replicas: Callable[[float], int], sampled: Callable[[float], bool]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Replay ``workload`` (and, where ``sampled``, ``metric``) events at ``ticks``: (audit, own hpa)."""
    events = [ev("policy", T0, policy=tortoise(autoscalingPolicy=OWN_POLICY))]
    for ts in ticks:
        events.append(workload(ts, replicas(ts), OWN_REQUESTS))
        if sampled(ts):
            events.append(own_metric(ts))
    config = tmp_path / "tandem.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump({"tortoise": DAILY}))
    out, err = replay(tmp_path, events, (), "--config", str(config), "--sync-period", "60", "--include-recommendations")
    assert "rejected 0" in err, err
    audit = [e for e in out if e.get("type") != "hpa" and e.get("type") != "vpa"]
    for e in audit:
        DECISION_SCHEMA.validate(e)
    return audit, [e for e in out if e.get("type") == "hpa"]


def own_at(hpas: list[dict[str, Any]], tick: float) -> dict[str, Any]:
    found = [e for e in hpas if e["ts"] == tick]
    assert len(found) == 1, f"expected one own hpa event at {tick}, got {len(found)}"
    return found[0]


def in_force(hpas: list[dict[str, Any]], tick: float) -> dict[str, Any]:
    """The own HPA recommendation at ``tick``: the last one published (on change) at or before it."""
    return [e for e in hpas if e["ts"] <= tick][-1]


def scaling_active(e: dict[str, Any]) -> tuple[str, str] | None:
    return next(((c["status"], c["reason"]) for c in e["conditions"] if c["type"] == "ScalingActive"), None)


def expected_desired(e: dict[str, Any], targets: dict[str, int], replicas: int) -> int:
    """The HPA algorithm on the event's current utilizations: the largest ceil(ratio × pods)."""
    desired = 0
    for m in e["current_metrics"]:
        cr = m["containerResource"]
        ratio = cr["current"]["averageUtilization"] / targets[f"{cr['container']}/{cr['name']}"]
        desired = max(desired, replicas if abs(ratio - 1) <= 0.1 else math.ceil(ratio * replicas))
    return desired


def test_own_hpa_is_the_hpa_tortoise_creates_then_follows_its_decisions(tmp_path: Path) -> None:
    audit, hpas = run_own(tmp_path, (T0, T0 + 60, TW, TW + 60), lambda ts: 4, lambda ts: True)
    assert {e["source"] for e in hpas} == {"tandem"}
    # The first reconcile (Initializing) creates the HPA; tandem recommends it from the next tick on.
    assert hpas[0]["ts"] == T0 + 60
    created = own_at(hpas, T0 + 60)
    assert (created["min_replicas"], created["max_replicas"]) == (3, 100)
    pairs = {(m["containerResource"]["container"], m["containerResource"]["name"]) for m in created["current_metrics"]}
    assert pairs == {("app", "cpu"), ("sidecar", "cpu")}  # one metric per Horizontal pair
    assert {m["type"] for m in created["current_metrics"]} == {"ContainerResource"}
    assert scaling_active(created) == ("True", "ValidMetricFound")
    # app at 87 % against the initial 70: ceil(87 / 70 × 4) = 5
    assert created["desired_replicas"] == expected_desired(created, {"app/cpu": 70, "sidecar/cpu": 70}, 4) == 5
    init = at(audit, T0)
    assert hpa_changes(init)["target_utilization"] == {"app/cpu": (None, 70), "sidecar/cpu": (None, 70)}

    # Working: tandem decides min/max and targets; the own HPA of the next tick is that HPA.
    working = at(audit, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    changes = hpa_changes(working)
    targets = {"app/cpu": 70, "sidecar/cpu": 70}
    targets.update({k: to for k, (_, to) in changes.get("target_utilization", {}).items()})
    assert "min_replicas" not in changes  # 3 already
    after = own_at(hpas, TW + 60)
    assert (after["min_replicas"], after["max_replicas"]) == (3, changes["max_replicas"][1]) == (3, 8)
    # The own VPA's 1038m for a 1-core request: app's target goes 70 -> 100 - (104 - 70) = 66
    # (sidecar's 63m of 100m keeps 70); the own HPA scales against it: ceil(87 / 66 x 4) = 6.
    assert changes["target_utilization"] == {"app/cpu": (70, 66)}
    assert after["desired_replicas"] == expected_desired(after, targets, 4) == 6


def test_own_hpa_without_samples_sends_tortoise_into_emergency_and_back(tmp_path: Path) -> None:
    last = TW + 120  # the last sample before the gap
    stale = last + 180  # the first tick at which it is older than USAGE_MAX_AGE (120 s)
    emergency = stale + 300  # EmergencyModeGracePeriod, counted from the first tick that saw it
    back = last + 720  # samples come back

    def replicas(ts: float) -> int:
        if emergency < ts <= back:
            return 8  # the cluster follows minReplicas = maxReplicas
        return 5 if ts > back else 4

    ticks = [T0, T0 + 60, TW, *(TW + 60 * k for k in range(1, 26))]
    audit, hpas = run_own(tmp_path, ticks, replicas, lambda ts: ts <= last or ts >= back)
    assert scaling_active(in_force(hpas, stale - 60)) == ("True", "ValidMetricFound")
    assert scaling_active(own_at(hpas, stale)) == ("False", "FailedGetContainerResourceMetric")
    assert not [e for e in decisions(audit) if TW < e["data"]["tick"] < emergency]
    pinned = in_force(hpas, back - 60)
    assert (pinned["min_replicas"], pinned["max_replicas"]) == (8, 8)
    assert scaling_active(pinned) == ("False", "FailedGetContainerResourceMetric")
    assert scaling_active(own_at(hpas, back)) == ("True", "ValidMetricFound")

    seen = [
        (
            (e["data"]["tick"] - emergency) / 60,
            e["data"]["reasons"][0].removeprefix("tortoise: phase "),
            hpa_changes(e["data"]),
        )
        for e in audit
        if emergency <= e["data"]["tick"] <= back + 360
    ]
    # Emergency holds while the HPA cannot get its metrics (reported once, then nothing changes
    # until the samples are back), then minReplicas comes back by trunc(x 0.95) per tick:
    # 8 -> 7 -> 6 -> 5 -> 4 -> 3; trunc(2.85) = 2 < 3 (the recommendation) ends BackToNormal
    # without a change; the next Working tick records 5 replicas again: max 2 x 5 = 10.
    assert seen == [
        (0, "Emergency", {"min_replicas": (3, 8)}),
        (1, "Emergency", {}),
        (4, "BackToNormal", {"min_replicas": (8, 7)}),
        (5, "BackToNormal", {"min_replicas": (7, 6)}),
        (6, "BackToNormal", {"min_replicas": (6, 5)}),
        (7, "BackToNormal", {"min_replicas": (5, 4)}),
        (8, "BackToNormal", {"min_replicas": (4, 3)}),
        (9, "Working", {}),
        (10, "Working", {"max_replicas": (8, 10)}),
    ]
    assert (
        at(audit, emergency + 60)["reasons"][1] == "tortoise: the HPA still cannot get its metrics: Emergency continues"
    )
    assert at(audit, back)["reasons"][1] == "tortoise: Emergency is over: minReplicas comes back gradually"
    assert at(audit, back + 300)["reasons"][1] == "tortoise: BackToNormal finished at minReplicas 3"
    assert at(audit, emergency)["reasons"][1] == "tortoise: the HPA cannot get its metrics: automatic Emergency"


# --- Emergency and BackToNormal (internal/controller/testdata, tortoise_controller_test.go) ----
#
# Staged like the upstream fixtures: a Working Tortoise whose recommendations are min 5, max 20
# (10 replicas, multipliers 0.5 / 2), target 75 (VPA 3 of a 4-core request, HPA at 50) and memory
# 3Gi (VPA 3Gi, buffer 0); then, two hours later (past both hourly intervals), the Emergency.  The
# cluster still reports the 4Gi request, as in the fixtures, and the VPA has moved on to 2 / 2Gi:
# Tortoise neither updates its recommendations (``UpdateRecommendations`` returns in Emergency and
# BackToNormal) nor stops applying the frozen ones (``UpdateResourceRequest`` runs in every phase).

TE = TW + 2 * H  # the Emergency's first tick
TB = TE + 2 * H  # Emergency turned off
EMERGENCY_POLICY = policies(app={"cpu": "Horizontal", "memory": "Vertical"})


def emergency_events(*, automatic: bool = False) -> list[dict[str, Any]]:
    events = staged(
        {"app": ("4", "4Gi")},
        10,
        lambda ts: hpa(ts, 1, 100, {"app/cpu": 50}),
        lambda ts: vpa(ts, {"app": ("3", "3Gi")}, upper={"app": ("5", "5Gi")}),
        tortoise(autoscalingPolicy=EMERGENCY_POLICY),
    )
    if not automatic:
        events.append(ev("policy", TE, policy=tortoise("Emergency", autoscalingPolicy=EMERGENCY_POLICY)))
    events += [
        workload(TE, 10, {"app": ("4", "4Gi")}),
        hpa(TE, 5, 20, {"app/cpu": 75}, conditions=_failing_since(TE - 600) if automatic else None),
        vpa(TE, {"app": ("2", "2Gi")}, upper={"app": ("5", "5Gi")}),
    ]
    return events


def test_controller_working_tortoise_before_the_emergency(tmp_path: Path) -> None:
    out = run(tmp_path, emergency_events()[:-4], CONTROLLER)
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    assert hpa_changes(working) == {
        "min_replicas": (1, 5),
        "max_replicas": (100, 20),
        "target_utilization": {"app/cpu": (50, 75)},
    }
    assert requests_to(working) == {"app": {"memory": mem("3Gi")}}


@pytest.mark.parametrize(
    "automatic",
    [False, True],
    ids=["single-container-pod-emergency-started", "automatic-emergency-mode-mixed-policies-unhealthy"],
)
def test_controller_emergency_pins_min_to_the_frozen_max_and_applies_the_frozen_requests(
    tmp_path: Path, automatic: bool
) -> None:
    out = run(tmp_path, emergency_events(automatic=automatic), CONTROLLER)
    emergency = at(out, TE)
    assert emergency["reasons"][0] == "tortoise: phase Emergency"
    # HPA min := recommended max (hpa/service.go ChangeHPAFromTortoiseRecommendation), max and the
    # target from the frozen recommendations: the VPA's 2 / 2Gi changes neither.
    assert hpa_changes(emergency) == {"min_replicas": (5, 20)}
    # The frozen vertical recommendation (3Gi) is written again over the 4Gi the cluster reports.
    assert requests_to(emergency) == {"app": {"memory": mem("3Gi")}}


def test_controller_during_emergency_nothing_changes(tmp_path: Path) -> None:
    # reconcile-for-the-single-container-pod-during-emergency: HPA 20 / 20 / 75 and 3Gi stay.
    events = emergency_events()
    later = TE + 2 * H
    events += [
        workload(later, 20, {"app": ("4", "3Gi")}),
        hpa(later, 20, 20, {"app/cpu": 75}),
        vpa(later, {"app": ("1", "1Gi")}, upper={"app": ("5", "5Gi")}),
    ]
    out = run(tmp_path, events, CONTROLLER)
    assert [e["data"] for e in decisions(out) if e["data"]["tick"] > TE] == []


def test_controller_back_to_normal_reduces_min_by_the_factor_and_reapplies_the_frozen_target(
    tmp_path: Path,
) -> None:
    # reconcile-for-the-single-container-pod-backtonormal: updateMode Auto again while the phase is
    # Emergency; the HPA reports min 19, target 50 and the pods 4Gi.  min := trunc(19 x 0.95) = 18
    # (ReplicaReductionFactor), target 50 -> 75 and memory 4Gi -> 3Gi from the frozen recommendations.
    events = emergency_events()
    events += [
        ev("policy", TB, policy=tortoise("Auto", autoscalingPolicy=EMERGENCY_POLICY)),
        workload(TB, 20, {"app": ("4", "4Gi")}),
        hpa(TB, 19, 20, {"app/cpu": 50}),
        vpa(TB, {"app": ("2", "2Gi")}, upper={"app": ("5", "5Gi")}),
    ]
    out = run(tmp_path, events, CONTROLLER)
    back = at(out, TB)
    assert back["reasons"][0] == "tortoise: phase BackToNormal"
    assert hpa_changes(back) == {"min_replicas": (19, 18), "target_utilization": {"app/cpu": (50, 75)}}
    assert requests_to(back) == {"app": {"memory": mem("3Gi")}}


def test_controller_vertical_only_tortoise_never_enters_automatic_emergency(tmp_path: Path) -> None:
    # reconcile-automatic-emergency-mode-vertical-scaling: ScalingActive=False, but no Horizontal
    # policy (UpdateTortoisePhaseIfHPAIsUnhealthy needs one through the Working HPA): stays Working.
    both = {"cpu": "Vertical", "memory": "Vertical"}
    events = staged(
        {"app": ("10", "10Gi")},
        10,
        lambda ts: hpa(ts, 3, 15, {"app/cpu": 30}, conditions=_failing_since(T0 - DAY), current=[0]),
        lambda ts: vpa(ts, {"app": ("4", "6Gi")}, upper={"app": ("5", "7Gi")}),
        tortoise(autoscalingPolicy=policies(app=both)),
    )
    out = run(tmp_path, events, CONTROLLER)
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    assert "hpa" not in working
    assert requests_to(working) == {"app": {"cpu": "4", "memory": mem("6Gi")}}


def test_controller_single_container_pod_working_excludes_external_metrics_by_the_regex(tmp_path: Path) -> None:
    # reconcile-for-the-single-container-pod-working: the HPA has External metrics
    # hoge-kept-metric and hoge-exclude-metric; HPAExternalMetricExclusionRegex ".*-exclude-metric"
    # (CONTROLLER) removes the second when Tortoise writes min 5, max 20 and target 75.
    def with_externals(ts: float) -> dict[str, Any]:
        e = hpa(ts, 1, 100, {"app/cpu": 50})
        externals = [
            {"type": "External", "external": {"metric": {"name": n}, "target": {"type": "Value", "value": "1"}}}
            for n in ("hoge-kept-metric", "hoge-exclude-metric")
        ]
        return {**e, "metrics": [*externals, *e["metrics"]]}

    events = staged(
        {"app": ("4", "4Gi")},
        10,
        with_externals,
        lambda ts: vpa(ts, {"app": ("3", "3Gi")}, upper={"app": ("5", "5Gi")}),
        tortoise(autoscalingPolicy=EMERGENCY_POLICY),
    )
    out = run(tmp_path, events, CONTROLLER)
    # PartlyWorking (memory is Vertical): Tortoise writes the HPA (UpdateHPAFromTortoiseRecommendation
    # runs past GatheringData), no Horizontal pair is ready yet, so only the exclusion changes it.
    partly = at(out, T0 + 60)
    assert partly["reasons"][0] == "tortoise: phase PartlyWorking"
    assert partly["hpa"] == {"metrics": {"removed": [{"type": "External", "name": "hoge-exclude-metric"}]}}
    # Working: the HPA of the fixture's after/hpa.yaml.  The cluster's hpa event at TW still lists
    # the excluded metric, so it is removed again (the applier's patch finds nothing to remove).
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    assert working["hpa"] == {
        "max_replicas": {"from": 100, "to": 20},
        "metrics": {"removed": [{"type": "External", "name": "hoge-exclude-metric"}]},
        "min_replicas": {"from": 1, "to": 5},
        "target_utilization": {"app/cpu": {"from": 50, "to": 75}},
    }


# --- the HPA's metrics follow the autoscaling policy (mutable AutoscalingPolicy) ---------------
#
# ``UpdateHPASpecFromTortoiseAutoscalingPolicy`` (pkg/hpa/service.go) runs at every reconcile past
# Initializing: with a Horizontal pair, ``syncHPAMetricsWithTortoiseAutoscalingPolicy`` adds a
# ContainerResource metric at 70 per Horizontal pair the HPA lacks and removes every ``Resource``
# metric and the ContainerResource metrics of pairs that are not Horizontal (External ones stay);
# without one, the HPA Tortoise did not create (``horizontalPodAutoscalerName``) is disabled:
# ``disableHPA`` sets ``metrics: nil`` and min = max = the Deployment's replicas.  The fixtures
# are the controller's (``mercari-app``: app 10 / 10Gi, istio-proxy 4 / 4Gi, 10 replicas, the
# monitor VPA at 3 / 3Gi for both, CONTROLLER settings).

MERCARI_REQUESTS = {"app": ("10", "10Gi"), "istio-proxy": ("4", "4Gi")}
MERCARI_HPA = "tortoise-hpa-mercari"
H_V = {"cpu": "Horizontal", "memory": "Vertical"}
V_V = {"cpu": "Vertical", "memory": "Vertical"}


def mercari_vpa(ts: float) -> dict[str, Any]:
    five = ("5", "5Gi")
    return vpa(ts, {"app": ("3", "3Gi"), "istio-proxy": ("3", "3Gi")}, upper={"app": five, "istio-proxy": five})


def with_hpa_name(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    refs = {**manifest["spec"]["targetRefs"], "horizontalPodAutoscalerName": name}
    return {**manifest, "spec": {**manifest["spec"], "targetRefs": refs}}


def test_controller_mutable_autoscalingpolicy_remove_horizontal_2_disables_the_users_hpa(tmp_path: Path) -> None:
    # mutable-autoscalingpolicy-remove-horizontal-2: "Horizontal is removed and modify the existing
    # HPA".  Every pair is Vertical; the HPA named in targetRefs still has app/cpu and istio-proxy/cpu
    # at 50, min 1, max 100 (before/hpa.yaml, reported by the cluster at every tick).
    manifest = with_hpa_name(tortoise(autoscalingPolicy=policies(app=V_V, **{"istio-proxy": V_V})), MERCARI_HPA)
    out = run(
        tmp_path,
        staged(
            MERCARI_REQUESTS,
            10,
            lambda ts: hpa(ts, 1, 100, {"app/cpu": 50, "istio-proxy/cpu": 50}),
            mercari_vpa,
            manifest,
        ),
        CONTROLLER,
    )
    # after/hpa.yaml: min 10, max 10 (the replicas), no metric of the before HPA left.  The one
    # metric the fixture shows, Resource cpu at 80, is the API server's default for an HPA without
    # metrics (autoscaling/v2 SetDefaults_HorizontalPodAutoscaler), not something Tortoise writes.
    expected_hpa = {
        "max_replicas": {"from": 100, "to": 10},
        "metrics": {
            "removed": [
                {"type": "ContainerResource", "container": "app", "name": "cpu"},
                {"type": "ContainerResource", "container": "istio-proxy", "name": "cpu"},
            ]
        },
        "min_replicas": {"from": 1, "to": 10},
    }
    # The first reconcile past Initializing already disables it (no Horizontal pair gathers data) ...
    assert at(out, T0 + 60)["hpa"] == expected_hpa
    # ... and so does the fixture's Working reconcile, where the cluster still reports before/hpa.yaml.
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    assert working["hpa"] == expected_hpa
    before = hpa(TW, 1, 100, {"app/cpu": 50, "istio-proxy/cpu": 50})["metrics"]
    assert apply_changes(before, working["hpa"]["metrics"]["removed"], {}) == []
    # after/tortoise.yaml containerResourceRequests: 3 / 3Gi for both containers (VPA 3 / 3Gi, buffer 0).
    assert requests_to(working) == {
        "app": {"cpu": "3", "memory": mem("3Gi")},
        "istio-proxy": {"cpu": "3", "memory": mem("3Gi")},
    }


def test_controller_disabled_hpa_with_the_api_servers_default_metric_is_left_alone(tmp_path: Path) -> None:
    # After the disabling, the cluster reports the HPA as the API server keeps it: min = max = 10
    # and the defaulted Resource cpu metric at 80.  Removing that metric would only bring it back.
    manifest = with_hpa_name(tortoise(autoscalingPolicy=policies(app=V_V, **{"istio-proxy": V_V})), MERCARI_HPA)

    def disabled(ts: float) -> dict[str, Any]:
        default = {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
        return {**hpa(ts, 10, 10, {}), "metrics": [default]}

    out = run(tmp_path, staged(MERCARI_REQUESTS, 10, disabled, mercari_vpa, manifest), CONTROLLER)
    assert all("hpa" not in e["data"] for e in out)


def test_controller_mutable_autoscalingpolicy_add_another_horizontal_adds_a_metric_at_70(tmp_path: Path) -> None:
    # mutable-autoscalingpolicy-add-another-horizontal: "Tortoise get another Horizontal and modify
    # the existing HPA".  A Working Tortoise (app and istio-proxy cpu Horizontal) gets istio-proxy
    # memory Horizontal two hours after its last HPA update (past HPATargetUtilizationUpdateInterval,
    # as the fixture, whose status has no HPATargetUtilizationUpdated condition); the HPA is
    # before/hpa.yaml: app/cpu and istio-proxy/cpu at 50, min 1, max 100.
    before = lambda ts: hpa(ts, 1, 100, {"app/cpu": 50, "istio-proxy/cpu": 50})  # noqa: E731
    events = staged(
        MERCARI_REQUESTS, 10, before, mercari_vpa, tortoise(autoscalingPolicy=policies(app=H_V, **{"istio-proxy": H_V}))
    )
    later = TW + 2 * H
    added = policies(app=H_V, **{"istio-proxy": {"cpu": "Horizontal", "memory": "Horizontal"}})
    events += [
        ev("policy", later, policy=tortoise(autoscalingPolicy=added)),
        workload(later, 10, MERCARI_REQUESTS),
        before(later),
        mercari_vpa(later),
    ]
    out = run(tmp_path, events, CONTROLLER)
    data = at(out, later)
    # after/hpa.yaml: min 5, max 20; app/cpu stays 50 (its usage 3 / 10 is below the target:
    # the target is kept), istio-proxy/cpu 50 -> 75 (3 / 4: 100 - (75 - 50)), and the new
    # istio-proxy/memory metric at 70, not yet retargeted (its pair gathers data).
    assert hpa_changes(data) == {
        "min_replicas": (1, 5),
        "max_replicas": (100, 20),
        "target_utilization": {"istio-proxy/cpu": (50, 75), "istio-proxy/memory": (None, 70)},
    }
    assert "metrics" not in data["hpa"]  # nothing removed
    after = apply_changes(
        before(later)["metrics"], (), {k: v[1] for k, v in hpa_changes(data)["target_utilization"].items()}
    )
    assert [
        (
            m["containerResource"]["container"],
            m["containerResource"]["name"],
            m["containerResource"]["target"]["averageUtilization"],
        )
        for m in after
    ] == [("app", "cpu", 50), ("istio-proxy", "cpu", 75), ("istio-proxy", "memory", 70)]
    # after/tortoise.yaml containerResourceRequests: app 6 / 3Gi, istio-proxy 4 / 4Gi (its memory is
    # Horizontal now, so the VPA's 3Gi is not applied to it).
    assert requests_to(data) == {"app": {"cpu": "6", "memory": mem("3Gi")}}


def test_hpa_service_resource_type_metric_is_removed(tmp_path: Path) -> None:
    # pkg/hpa/service_test.go TestService_UpdateHPASpecFromTortoiseAutoscalingPolicy "Resource type
    # metric is removed": app all Vertical, istio-proxy cpu Horizontal; the HPA ("existing-hpa",
    # min 1, max 2, 4 replicas) has a Resource cpu metric, app/cpu and istio-proxy/cpu at 70 and an
    # External metric.  HPAExternalMetricExclusionRegex is empty there, as by default here.
    pol = policies(app=V_V, **{"istio-proxy": H_V})
    manifest = with_hpa_name(tortoise(autoscalingPolicy=pol), "existing-hpa")
    external = {
        "type": "External",
        "external": {"metric": {"name": "external-metric"}, "target": {"type": "Value", "value": "1"}},
    }
    resource = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
    }

    def initial(ts: float) -> dict[str, Any]:
        e = hpa(ts, 1, 2, {"app/cpu": 70, "istio-proxy/cpu": 70})
        return {**e, "metrics": [resource, *e["metrics"], external]}

    requests = {"app": ("1", "1Gi"), "istio-proxy": ("1", "1Gi")}
    out = run(
        tmp_path,
        staged(requests, 4, initial, lambda ts: vpa(ts, dict(requests)), manifest, ticks=(T0, T0 + 60)),
        {**DAILY, "BufferRatioOnVerticalResource": 0},
    )
    # The first reconcile past Initializing: the metric sync alone changes the HPA (istio-proxy/cpu
    # still gathers data, so min/max and targets are not written: afterHPA keeps min 1, max 2).
    data = at(out, T0 + 60)
    assert data["hpa"] == {
        "metrics": {
            "removed": [
                {"type": "ContainerResource", "container": "app", "name": "cpu"},
                {"type": "Resource", "name": "cpu"},
            ]
        }
    }
    # afterHPA: istio-proxy/cpu at 70, then the External metric.
    assert apply_changes(initial(T0 + 60)["metrics"], data["hpa"]["metrics"]["removed"], {}) == [
        initial(T0 + 60)["metrics"][2],
        external,
    ]


def test_controller_automatic_emergency_mode_hpa_back_to_working(tmp_path: Path) -> None:
    # reconcile-automatic-emergency-mode-hpa-back-to-working: "Tortoise changes the status back to
    # Working if it finds HPA is working fine now".  The fixture's Tortoise is Working in Auto mode
    # and its HPA healthy (ScalingActive True, current values 3): no automatic Emergency
    # (UpdateTortoisePhaseIfHPAIsUnhealthy acts only on an unhealthy HPA), and the reconcile is a
    # Working one.  before/hpa.yaml: min 3, max 15, app/cpu and istio-proxy/cpu at 30.
    manifest = tortoise("Auto", autoscalingPolicy=policies(app=H_V, **{"istio-proxy": H_V}))
    out = run(
        tmp_path,
        staged(
            MERCARI_REQUESTS,
            10,
            lambda ts: hpa(ts, 3, 15, {"app/cpu": 30, "istio-proxy/cpu": 30}, current=[3, 3]),
            mercari_vpa,
            manifest,
        ),
        CONTROLLER,
    )
    assert not [e for e in out if "Emergency" in e["data"]["reasons"][0]]
    working = at(out, TW)
    assert working["reasons"][0] == "tortoise: phase Working"
    # after/hpa.yaml: min 5, max 20; app/cpu 30 -> 55 (recommended 90, HPATargetUtilizationMaxIncrease
    # 25), istio-proxy/cpu 30 -> 55 (3 / 4 = 75: 100 - (75 - 30)); no metric removed.
    assert working["hpa"] == {
        "max_replicas": {"from": 15, "to": 20},
        "min_replicas": {"from": 3, "to": 5},
        "target_utilization": {"app/cpu": {"from": 30, "to": 55}, "istio-proxy/cpu": {"from": 30, "to": 55}},
    }
    # after/tortoise.yaml containerResourceRequests: app 10 / 3Gi, istio-proxy 4 / 3Gi.
    assert requests_to(working) == {"app": {"memory": mem("3Gi")}, "istio-proxy": {"memory": mem("3Gi")}}
