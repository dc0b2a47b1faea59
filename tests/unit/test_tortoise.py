"""Tortoise policy rules, one at a time, on :meth:`TortoisePolicy.decide` (reference ``tortoise.md``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef, decode_event
from scaling.outcome import Outcome, View
from scaling.policies import parse_policy
from scaling.policies.tortoise import HpaState, TortoisePolicy, TortoiseSettings, parse_tortoise
from scaling.policies.tortoise.history import ReplicaHistory
from scaling.quantity import format_quantity, parse_quantity
from tests.replaying import ev

REF = WorkloadRef("c1", "shop", "Deployment", "web")
H = 3600.0
DAY = 24 * H
#: Wednesday 2025-11-26T10:00:00+09:00.
NOW = 1_762_009_200.0 + 24 * DAY + 10 * H


def q(text: str) -> int:
    return parse_quantity(text)


def manifest(mode: str = "Auto", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"updateMode": mode, "targetRefs": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}, **spec},
    }


def policy(mode: str = "Auto", **spec: Any) -> TortoisePolicy:
    return parse_tortoise(manifest(mode, **spec), REF)


def hpa_raw(
    min_r: int | None = 3,
    max_r: int | None = 100,
    targets: dict[str, int] | None = None,
    *,
    ts: float = NOW - 30,
    conditions: list[dict[str, Any]] | None = None,
    current: list[float] | None = None,
) -> dict[str, Any]:
    targets = {"app/cpu": 70} if targets is None else targets
    metrics = []
    for key, value in targets.items():
        c, r = key.split("/")
        metrics.append(
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": r,
                    "container": c,
                    "target": {"type": "Utilization", "averageUtilization": value},
                },
            }
        )
    extra: dict[str, Any] = {"metrics": metrics}
    if conditions is not None:
        extra["conditions"] = conditions
    if current is not None:
        extra["current_metrics"] = [
            {
                "type": "ContainerResource",
                "containerResource": {"name": "cpu", "container": "app", "current": {"averageUtilization": v}},
            }
            for v in current
        ]
    return ev("hpa", ts, desired_replicas=min_r or 1, min_replicas=min_r, max_replicas=max_r, **extra)


def make_view(
    tick: float = NOW,
    *,
    replicas: int = 5,
    requests: dict[str, dict[str, str]] | None = None,
    limits: dict[str, dict[str, str]] | None = None,
    hpa: dict[str, Any] | None = None,
    vpa: dict[str, dict[str, dict[str, str]]] | None = None,
    vpa_conditions: list[dict[str, Any]] | None = None,
    settings: dict[str, Any] | None = None,
) -> View:
    requests = requests if requests is not None else {"app": {"cpu": "1", "memory": "1Gi"}}
    limits = limits or {}
    containers = {c: {"requests": r, "limits": limits.get(c, {})} for c, r in requests.items()}
    spec = decode_event(ev("workload", tick - 60, replicas=replicas, containers=containers))
    vpa_ev = None
    if vpa is not None:
        extra = {"conditions": vpa_conditions} if vpa_conditions is not None else {}
        vpa_ev = decode_event(ev("vpa", tick - 60, containers=vpa, **extra))
    return View(
        tick=tick,
        workload=REF,
        spec=spec,  # type: ignore[arg-type]
        hpa=decode_event(hpa) if hpa is not None else None,  # type: ignore[arg-type]
        vpa=vpa_ev,  # type: ignore[arg-type]
        series={},
        oom={},
        settings={"sync_period": 15.0, "tortoise": settings or {}},
    )


def vpa_of(**containers: tuple[str, str]) -> dict[str, dict[str, dict[str, str]]]:
    return {c: {"target": {"cpu": cpu, "memory": mem}} for c, (cpu, mem) in containers.items()}


def full_history(
    peak: int, now: float = NOW, tz: str = "Asia/Tokyo", width: int = 1, skip: int | None = None
) -> dict[str, Any]:
    """A history whose every slot of the last week (but ``skip`` hours ago) saw ``peak`` replicas."""
    h = ReplicaHistory(tz, width)
    for k in range(7 * 24):
        if k != skip:
            h.observe(now - k * H, peak)
    return h.to_dict()


def working(
    p: TortoisePolicy, view: View, peak: int | None = None, phase: str = "Working", **extra: Any
) -> dict[str, Any]:
    """Policy memory of a Tortoise that has been working for a while."""
    hpa = HpaState.of_event(view.hpa) if view.hpa is not None else None
    pol = p._policies(view, hpa)
    st = TortoiseSettings.from_mapping(view.settings["tortoise"])
    mem: dict[str, Any] = {
        "phase": phase,
        "pol": {f"{c}/{r}": k for (c, r), k in pol.items()},
        "rp": {f"{c}/{r}": ["Off" if k == "Off" else "Working", NOW - 30 * DAY] for (c, r), k in pol.items()},
        "hist": full_history(peak if peak is not None else view.spec.replicas, view.tick, st.timezone, st.slot_hours),
    }
    mem.update(extra)
    return mem


def targets(out: Outcome) -> dict[str, tuple[int | None, int | None]]:
    return dict(out.hpa.get("target_utilization", {}))


def reasons(out: Outcome) -> list[str]:
    return [b.reason for b in out.blocked]


# --- parsing ---------------------------------------------------------------------------------


def test_parse_policy_dispatches_the_tortoise_kind() -> None:
    p = parse_policy(manifest(), REF)
    assert isinstance(p, TortoisePolicy)
    assert (p.kind, p.name, p.workload) == ("Tortoise", "web", REF)


def test_update_mode_defaults_to_off_as_the_webhook_does() -> None:
    m = manifest()
    del m["spec"]["updateMode"]
    assert parse_tortoise(m, REF).spec.update_mode == "Off"


def test_parse_reads_policies_bounds_and_max_replicas() -> None:
    p = policy(
        autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Horizontal", "memory": "Vertical"}}],
        resourcePolicy=[
            {
                "containerName": "app",
                "minAllocatedResources": {"cpu": "100m"},
                "maxAllocatedResources": {"memory": "2Gi"},
            }
        ],
        maxReplicas=40,
    )
    assert p.spec.autoscaling_policy == {"app": {"cpu": "Horizontal", "memory": "Vertical"}}
    assert p.spec.resource_policy["app"].min_allocated == {"cpu": 100}
    assert p.spec.resource_policy["app"].max_allocated == {"memory": q("2Gi")}
    assert p.spec.max_replicas == 40


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: m.update(apiVersion="autoscaling.mercari.com/v1beta2"), "apiVersion"),
        (lambda m: m["spec"].pop("targetRefs"), "spec.targetRefs"),
        (
            lambda m: m["spec"]["targetRefs"]["scaleTargetRef"].update(kind="StatefulSet"),
            "spec.targetRefs.scaleTargetRef.kind",
        ),
        (lambda m: m["spec"]["targetRefs"]["scaleTargetRef"].pop("name"), "spec.targetRefs.scaleTargetRef.name"),
        (lambda m: m["spec"].update(updateMode="Sometimes"), "spec.updateMode"),
        (lambda m: m["spec"].update(deletionPolicy="Sometimes"), "spec.deletionPolicy"),
        (
            lambda m: m["spec"].update(autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Diagonal"}}]),
            "spec.autoscalingPolicy[0].policy.cpu",
        ),
        (
            lambda m: m["spec"].update(autoscalingPolicy=[{"containerName": "app", "policy": {"gpu": "Vertical"}}]),
            "spec.autoscalingPolicy[0].policy.gpu",
        ),
        (
            lambda m: m["spec"].update(
                resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "lots"}}]
            ),
            "spec.resourcePolicy[0].minAllocatedResources.cpu",
        ),
        (
            lambda m: m["spec"].update(
                resourcePolicy=[
                    {
                        "containerName": "app",
                        "minAllocatedResources": {"cpu": "2"},
                        "maxAllocatedResources": {"cpu": "1"},
                    }
                ]
            ),
            "spec.resourcePolicy[0].minAllocatedResources.cpu",
        ),
        (
            lambda m: m["spec"].update(resourcePolicy=[{"containerName": "app"}, {"containerName": "app"}]),
            "spec.resourcePolicy[1].containerName",
        ),
        (lambda m: m["spec"].update(maxReplicas=0), "spec.maxReplicas"),
        (lambda m: m["spec"].update(horizontalPodAutoscalerBehavior=[1]), "spec.horizontalPodAutoscalerBehavior"),
    ],
)
def test_bad_manifests_are_rejected_naming_the_field(change: Any, field: str) -> None:
    m = manifest()
    change(m)
    with pytest.raises(InvalidPolicy) as info:
        parse_tortoise(m, REF)
    assert info.value.field == field


# --- settings --------------------------------------------------------------------------------


def test_settings_default_to_tortoises_config_defaults() -> None:
    s = TortoiseSettings.from_mapping({})
    assert (s.slot_hours, s.period, s.timezone) == (1, "weekly", "Asia/Tokyo")
    assert (s.max_multiplier, s.min_multiplier, s.reduction_factor) == (2.0, 0.5, 0.95)
    assert (s.min_target, s.max_target) == (65, 90)
    assert (s.minimum_min_replicas, s.maximum_min_replicas, s.preferred_max_replicas, s.maximum_max_replicas) == (
        3,
        10,
        30,
        100,
    )
    assert s.max_request == {"cpu": 10_000, "memory": q("10Gi")}
    assert s.min_request == {"cpu": 50, "memory": q("50Mi")}
    assert (s.buffer_ratio, s.max_scale_down_ratio) == (0.1, 0.8)
    assert (s.update_interval, s.target_max_increase, s.target_update_interval, s.grace_period) == (
        15.0,
        5,
        86_400.0,
        300.0,
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"MinimumMinReplica": 3}, "tortoise.MinimumMinReplica"),
        ({"RangeOfMinMaxReplicasRecommendationHours": 5}, "tortoise.RangeOfMinMaxReplicasRecommendationHours"),
        ({"GatheringDataPeriodType": "monthly"}, "tortoise.GatheringDataPeriodType"),
        ({"TimeZone": "Mars/Olympus"}, "tortoise.TimeZone"),
        ({"HPATargetUtilizationMaxIncrease": 0}, "tortoise.HPATargetUtilizationMaxIncrease"),
        ({"MaxAllowedScalingDownRatio": 1.5}, "tortoise.MaxAllowedScalingDownRatio"),
        ({"MaximumCPURequest": "ten"}, "tortoise.MaximumCPURequest"),
        ({"EmergencyModeGracePeriod": "soon"}, "tortoise.EmergencyModeGracePeriod"),
        ({"MinimumMinReplicas": 10}, "tortoise.MaximumMinReplicas"),
        ({"PreferredMaxReplicas": 100}, "tortoise.PreferredMaxReplicas"),
        ({"FeatureFlags": ["Teleport"]}, "tortoise.FeatureFlags"),
        ({"ResourceLimitMultiplier": {"cpu": 0}}, "tortoise.ResourceLimitMultiplier.cpu"),
    ],
)
def test_bad_settings_are_rejected_naming_the_key(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        TortoiseSettings.from_mapping(raw)
    assert info.value.field == field


def test_values_tortoise_accepts_are_accepted_without_invented_bounds() -> None:
    s = TortoiseSettings.from_mapping(
        {
            "MaxReplicasRecommendationMultiplier": 5000,
            "BufferRatioOnVerticalResource": 150,
            "MinimumMinReplicas": 3,
            "MaximumMinReplicas": 2_000_000,
            "PreferredMaxReplicas": 3_000_000,
            "MaximumMaxReplicas": 2**31 - 1,
        }
    )
    assert (s.max_multiplier, s.buffer_ratio, s.maximum_max_replicas) == (5000.0, 150.0, 2**31 - 1)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"RangeOfMinMaxReplicasRecommendationHours": 5}, "5 does not divide 24: the day must split into equal slots"),
        ({"ReplicaReductionFactor": 1.5}, "1.5 is outside 0.0..1.0: BackToNormal multiplies minReplicas by it"),
        ({"BufferRatioOnVerticalResource": -0.1}, "-0.1 is below 0.0: the recommendation is multiplied by 1 +"),
        ({"MaximumMaxReplicas": 2**31}, "2147483648 is outside 1..2147483647: HPA replica counts are int32"),
        (
            {"FeatureFlags": ["VerticalScalingBasedOnPreferredMaxReplica"]},
            "unknown feature flag 'VerticalScalingBasedOnPreferredMaxReplica' (did you mean "
            "VerticalScalingBasedOnPreferredMaxReplicas?) (Tortoise would ignore it",
        ),
    ],
)
def test_a_value_tandem_refuses_says_why_and_what_tortoise_does(raw: dict[str, Any], why: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        TortoiseSettings.from_mapping(raw)
    assert why in str(info.value)


def test_per_container_minimum_replaces_the_global_floor_for_that_resource_only() -> None:
    s = TortoiseSettings.from_mapping({"MinimumCPURequestPerContainer": {"istio-proxy": "100m"}})
    assert s.global_min("istio-proxy", "cpu") == 100
    assert s.global_min("istio-proxy", "memory") == q("50Mi")
    assert s.global_min("app", "cpu") == 50


# --- phases ----------------------------------------------------------------------------------


def test_first_tick_initializes_and_creates_the_hpa_tortoise_would_create() -> None:
    p = policy()
    mem: dict[str, Any] = {}
    out = p.decide(make_view(vpa=vpa_of(app=("500m", "500Mi"))), mem)
    assert mem["phase"] == "Initializing"
    assert mem["rp"] == {"app/cpu": ["GatheringData", NOW], "app/memory": ["GatheringData", NOW]}
    assert out.hpa == {
        "min_replicas": (None, 3),
        "max_replicas": (None, 100),
        "target_utilization": {"app/cpu": (None, 70)},
    }
    assert mem["hpa"]["targets"] == {"app/cpu": 70}


def test_an_attached_hpa_is_not_created_again() -> None:
    p = policy(
        targetRefs={"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "horizontalPodAutoscalerName": "mine"}
    )
    out = p.decide(make_view(vpa=vpa_of(app=("500m", "500Mi"))), {})
    assert out.hpa == {}
    assert any("waiting for HPA 'mine'" in r for r in out.reasons)


def test_vertical_resources_work_as_soon_as_the_vpa_is_ready_and_the_hpa_waits() -> None:
    p = policy()
    mem: dict[str, Any] = {}
    p.decide(make_view(NOW, hpa=hpa_raw()), mem)
    out = p.decide(make_view(NOW + 15, hpa=hpa_raw(), vpa=vpa_of(app=("500m", "1Gi"))), mem)
    assert mem["phase"] == "PartlyWorking"
    assert mem["rp"]["app/memory"][0] == "Working"
    assert mem["rp"]["app/cpu"] == ["GatheringData", NOW + 15]
    assert out.hpa == {}
    assert reasons(out) == ["GatheringData", "GatheringData"]


def test_nothing_happens_until_the_vpa_recommends_every_container() -> None:
    p = policy()
    mem: dict[str, Any] = {}
    both = hpa_raw(targets={"app/cpu": 70, "sidecar/cpu": 70})
    p.decide(make_view(NOW, hpa=both), mem)
    view = make_view(
        NOW + 15,
        requests={"app": {"cpu": "1", "memory": "1Gi"}, "sidecar": {"cpu": "100m", "memory": "64Mi"}},
        hpa=both,
        vpa=vpa_of(app=("2", "2Gi")),
    )
    out = p.decide(view, mem)
    assert (out.hpa, out.requests) == ({}, {})
    assert any("no recommendation for container sidecar" in r for r in out.reasons)
    out = p.decide(
        make_view(
            NOW + 30,
            hpa=hpa_raw(),
            vpa=vpa_of(app=("2", "2Gi")),
            vpa_conditions=[{"type": "RecommendationProvided", "status": "False"}],
        ),
        mem,
    )
    assert any("RecommendationProvided" in r for r in out.reasons)


def test_horizontal_resources_work_after_the_gathering_period_with_a_full_history() -> None:
    p = policy()
    view = make_view(replicas=6, hpa=hpa_raw(3, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, phase="PartlyWorking")
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - 7 * DAY]
    out = p.decide(view, mem)
    assert mem["phase"] == "Working"
    assert out.hpa["min_replicas"] == (3, 3)
    assert out.hpa["max_replicas"] == (100, 12)


def test_horizontal_resources_keep_gathering_before_the_period_ends() -> None:
    p = policy()
    view = make_view(replicas=6, hpa=hpa_raw(3, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, phase="PartlyWorking")
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - 7 * DAY + 1]
    out = p.decide(view, mem)
    assert mem["phase"] == "PartlyWorking"
    assert "max_replicas" not in out.hpa


def test_horizontal_resources_keep_gathering_while_a_slot_has_no_sample() -> None:
    p = policy()
    view = make_view(replicas=6, hpa=hpa_raw(3, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, phase="PartlyWorking")
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - 20 * DAY]
    mem["hist"] = full_history(6, skip=5)
    p.decide(view, mem)
    assert mem["phase"] == "PartlyWorking"


def test_daily_gathering_takes_one_day() -> None:
    p = policy()
    settings = {"GatheringDataPeriodType": "daily", "RangeOfMinMaxReplicasRecommendationHours": 24}
    view = make_view(replicas=6, hpa=hpa_raw(3, 100), vpa=vpa_of(app=("600m", "1Gi")), settings=settings)
    mem = working(p, view, phase="PartlyWorking")
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - DAY]
    p.decide(view, mem)
    assert mem["phase"] == "Working"


def test_a_policy_change_sends_that_resource_back_to_gathering_data() -> None:
    old = policy(autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Vertical", "memory": "Vertical"}}])
    view = make_view(hpa=hpa_raw(3, 100, {}), vpa=vpa_of(app=("1", "1Gi")))
    mem = working(old, view)
    new = policy(autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Horizontal", "memory": "Vertical"}}])
    out = new.decide(view, mem)
    assert mem["rp"]["app/cpu"] == ["GatheringData", NOW]
    assert mem["phase"] == "PartlyWorking"
    assert targets(out) == {"app/cpu": (None, 70)}  # the HPA gets a metric for the new Horizontal pair


def test_derived_policy_follows_the_attached_hpa_metrics_and_zero_requests_are_off() -> None:
    p = policy(targetRefs={"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "horizontalPodAutoscalerName": "h"})
    view = make_view(
        requests={"app": {"cpu": "1", "memory": "1Gi"}, "side": {"memory": "64Mi"}},
        hpa=hpa_raw(3, 10, {"app/memory": 60}),
    )
    assert p._policies(view, HpaState.of_event(view.hpa)) == {  # type: ignore[arg-type]
        ("app", "cpu"): "Vertical",
        ("app", "memory"): "Horizontal",
        ("side", "cpu"): "Off",
        ("side", "memory"): "Vertical",
    }


def test_reconciles_at_most_once_per_update_interval() -> None:
    p = policy()
    view = make_view(hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")), settings={"TortoiseUpdateInterval": "1m"})
    mem = working(p, view, last=NOW - 30)
    assert p.decide(view, mem).hpa == {}
    mem["last"] = NOW - 60
    assert p.decide(view, mem).hpa["min_replicas"] == (1, 3)


# --- target utilization ----------------------------------------------------------------------


def two_container_view(**kw: Any) -> tuple[TortoisePolicy, View, dict[str, Any]]:
    """Reference vector 'two containers, one Horizontal resource each'."""
    p = policy(
        autoscalingPolicy=[
            {"containerName": "app", "policy": {"memory": "Horizontal"}},
            {"containerName": "istio-proxy", "policy": {"cpu": "Horizontal"}},
        ]
    )
    settings = {
        "MaximumTargetResourceUtilization": 90,
        "MinimumTargetResourceUtilization": 40,
        "HPATargetUtilizationMaxIncrease": 100,
        "MaximumMaxReplicas": 1000,
        "MaximumMinReplicas": 100,
        **kw.pop("settings", {}),
    }
    view = make_view(
        replicas=kw.pop("replicas", 100),
        requests={"app": {"cpu": "1", "memory": "5Gi"}, "istio-proxy": {"cpu": "1", "memory": "1Gi"}},
        hpa=hpa_raw(3, 200, kw.pop("hpa_targets", {"app/memory": 60, "istio-proxy/cpu": 50})),
        vpa=kw.pop("vpa", vpa_of(app=("1", "4Gi"), **{"istio-proxy": ("600m", "1Gi")})),
        settings=settings,
    )
    return p, view, working(p, view, **kw)


def test_target_utilization_is_100_minus_the_extra_usage_per_container() -> None:
    p, view, mem = two_container_view()
    out = p.decide(view, mem)
    # app: U = ceil(4/5 × 100) = 80, 100 - (80 - 60) = 80; istio: U = 60, 100 - (60 - 50) = 90, clamp 90
    assert targets(out) == {"app/memory": (60, 80), "istio-proxy/cpu": (50, 90)}
    assert mem["trec"] == {"app/memory": 80, "istio-proxy/cpu": 90}


def test_target_is_kept_when_usage_is_below_it() -> None:
    p, view, mem = two_container_view(hpa_targets={"app/memory": 85, "istio-proxy/cpu": 50})
    p.decide(view, mem)
    assert mem["trec"]["app/memory"] == 85  # U = 80 < 85


def test_target_is_clamped_to_the_configured_range() -> None:
    p, view, mem = two_container_view(
        settings={"MinimumTargetResourceUtilization": 65},
        vpa=vpa_of(app=("1", "4.75Gi"), **{"istio-proxy": ("600m", "1Gi")}),
        hpa_targets={"app/memory": 55, "istio-proxy/cpu": 50},
    )
    p.decide(view, mem)
    assert mem["trec"]["app/memory"] == 65  # U = 95: 100 - (95 - 55) = 60, raised to 65


def test_target_falls_back_to_the_current_one_outside_0_100() -> None:
    p, view, mem = two_container_view(
        vpa=vpa_of(app=("1", "10Gi"), **{"istio-proxy": ("600m", "1Gi")}),
        hpa_targets={"app/memory": 70, "istio-proxy/cpu": 50},
    )
    p.decide(view, mem)
    assert mem["trec"]["app/memory"] == 70  # U = 200: 100 - 130 < 0


def test_target_is_not_recomputed_at_maximum_max_replicas() -> None:
    p, view, mem = two_container_view(replicas=1000, trec={"app/memory": 66})
    out = p.decide(view, mem)
    assert mem["trec"] == {"app/memory": 66}
    assert targets(out) == {"app/memory": (60, 66)}


def test_target_increase_is_limited_per_application_but_decreases_are_not() -> None:
    p, view, mem = two_container_view(
        settings={"HPATargetUtilizationMaxIncrease": 5}, hpa_targets={"app/memory": 60, "istio-proxy/cpu": 95}
    )
    out = p.decide(view, mem)
    # app wants 80: +5 at most; istio wants 100 - (60 - 95) = 135 -> 95 -> clamp 90: a decrease, whole
    assert targets(out) == {"app/memory": (60, 65), "istio-proxy/cpu": (95, 90)}
    assert mem["tgt_at"] == NOW


def test_targets_wait_for_the_update_interval_but_min_and_max_do_not() -> None:
    p, view, mem = two_container_view(settings={"HPATargetUtilizationUpdateInterval": "1h"}, tgt_at=NOW - 60)
    out = p.decide(view, mem)
    assert targets(out) == {}
    assert out.hpa["min_replicas"] == (3, 50)
    assert [(b.target, b.reason, b.wanted) for b in out.blocked] == [
        ("hpa/target_utilization", "Cooldown", "app/memory=80"),
        ("hpa/target_utilization", "Cooldown", "istio-proxy/cpu=90"),
    ]
    mem["tgt_at"] = NOW - 3 * H
    mem.pop("last")
    assert targets(p.decide(view, mem)) == {"app/memory": (60, 80), "istio-proxy/cpu": (50, 90)}


def test_a_horizontal_pair_without_hpa_metric_gets_one_at_70() -> None:
    p = policy(autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Horizontal", "memory": "Vertical"}}])
    view = make_view(hpa=hpa_raw(3, 10, {"app/memory": 60}), vpa=vpa_of(app=("1", "1Gi")))
    mem = working(p, view)
    out = p.decide(view, mem)
    assert targets(out) == {"app/cpu": (None, 70)}
    # The Vertical pair's metric is removed (syncHPAMetricsWithTortoiseAutoscalingPolicy).
    assert out.hpa["metrics"] == {"removed": [{"type": "ContainerResource", "container": "app", "name": "memory"}]}
    assert mem["hpa"]["targets"] == {"app/cpu": 70}


def with_metrics(raw: dict[str, Any], *extra: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "metrics": [*raw["metrics"], *extra]}


def external(name: str) -> dict[str, Any]:
    return {
        "type": "External",
        "external": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": "10"}},
    }


RESOURCE_CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
}


def test_resource_metrics_are_removed_and_external_ones_kept_without_an_exclusion_regex() -> None:
    p = policy()
    raw = with_metrics(hpa_raw(3, 10, {"app/cpu": 70}), RESOURCE_CPU, external("queue-depth-exclude-metric"))
    view = make_view(hpa=raw, vpa=vpa_of(app=("1", "1Gi")))
    out = p.decide(view, working(p, view))
    assert out.hpa["metrics"] == {"removed": [{"type": "Resource", "name": "cpu"}]}


def test_external_metrics_matching_the_exclusion_regex_are_removed_anywhere_in_the_name() -> None:
    # HPAExternalMetricExclusionRegex ".*-exclude-metric" of the controller tests; Go's MatchString
    # finds the pattern anywhere, so "exclude" alone matches "a-exclude-metric-b" too.
    p = policy()
    raw = with_metrics(
        hpa_raw(3, 10, {"app/cpu": 70}),
        external("datadog-exclude-metric"),
        external("queue-depth"),
        external("a-exclude-metric-b"),
    )
    settings = {"HPAExternalMetricExclusionRegex": "exclude-metric"}
    view = make_view(hpa=raw, vpa=vpa_of(app=("1", "1Gi")), settings=settings)
    out = p.decide(view, working(p, view))
    assert out.hpa["metrics"] == {
        "removed": [
            {"type": "External", "name": "datadog-exclude-metric"},
            {"type": "External", "name": "a-exclude-metric-b"},
        ]
    }


def test_external_metrics_are_not_excluded_while_gathering_data() -> None:
    # excludeExternalMetric runs when Tortoise writes its recommendation, which it does not do
    # in GatheringData.
    p = policy(autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Horizontal", "memory": "Off"}}])
    raw = with_metrics(hpa_raw(3, 10, {"app/cpu": 70}), external("x-exclude-metric"))
    settings = {"HPAExternalMetricExclusionRegex": ".*-exclude-metric"}
    view = make_view(hpa=raw, vpa=vpa_of(app=("1", "1Gi")), settings=settings)
    mem = working(p, view, phase="GatheringData")
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - DAY]  # a week is needed
    out = p.decide(view, mem)
    assert mem["phase"] == "GatheringData"
    assert "metrics" not in out.hpa
    mem["rp"]["app/cpu"] = ["GatheringData", NOW - 8 * DAY]
    mem.pop("last")
    assert p.decide(view, mem).hpa["metrics"] == {"removed": [{"type": "External", "name": "x-exclude-metric"}]}


# --- min / max replicas ----------------------------------------------------------------------


def test_min_and_max_replicas_come_from_the_four_week_peak_of_the_slot() -> None:
    p = policy()
    view = make_view(replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, peak=10)
    out = p.decide(view, mem)
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((1, 5), (100, 20))
    assert out.inputs["slot_peak_replicas"] == 10


def test_caps_apply_maximum_min_spec_max_and_maximum_max_replicas() -> None:
    p = policy(maxReplicas=18)
    settings = {"MaximumMinReplicas": 4, "MaximumMaxReplicas": 15, "PreferredMaxReplicas": 12}
    view = make_view(replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")), settings=settings)
    out = p.decide(view, working(p, view, peak=10))
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((1, 4), (100, 15))


def test_min_replicas_never_exceed_max_replicas() -> None:
    p = policy(maxReplicas=2)
    view = make_view(replicas=2, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    out = p.decide(view, working(p, view, peak=10))
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((1, 2), (100, 2))


def test_the_current_tick_is_recorded_in_the_history() -> None:
    p = policy()
    view = make_view(replicas=30, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, peak=10)
    out = p.decide(view, mem)
    assert out.hpa["max_replicas"] == (100, 60)
    assert ReplicaHistory.from_dict(mem["hist"]).peak(NOW) == 30


# --- vertical --------------------------------------------------------------------------------

VERTICAL = [{"containerName": "app", "policy": {"cpu": "Vertical", "memory": "Vertical"}}]


def vertical(
    requests: tuple[str, str],
    vpa: tuple[str, str],
    settings: dict[str, Any] | None = None,
    limits: dict[str, str] | None = None,
    **spec: Any,
) -> tuple[TortoisePolicy, View, dict[str, Any]]:
    p = policy(autoscalingPolicy=VERTICAL, **spec)
    view = make_view(
        requests={"app": {"cpu": requests[0], "memory": requests[1]}},
        limits={"app": limits} if limits else None,
        vpa=vpa_of(app=vpa),
        settings=settings,
    )
    return p, view, working(p, view)


def test_vertical_scale_up_applies_the_buffer_twice() -> None:
    p, view, mem = vertical(
        ("130m", "130Mi"),
        ("120m", "120Mi"),
        {"MaxAllowedScalingDownRatio": 0, "MaximumCPURequest": "1000m", "MaximumMemoryRequest": "1Gi"},
        resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "100m", "memory": "100Mi"}}],
    )
    out = p.decide(view, mem)
    # 120 × 1.1 = 132 > 130 -> 132 × 1.1 = 145.2, truncated to milli-units
    assert out.requests == {"app": {"cpu": 145, "memory": q("145.2Mi")}}


def test_vertical_small_decrease_is_ignored() -> None:
    p, view, mem = vertical(("1", "1Gi"), ("800m", "800Mi"))
    assert p.decide(view, mem).requests == {}


def test_vertical_decrease_goes_no_lower_than_max_allowed_scaling_down_ratio() -> None:
    p, view, mem = vertical(("1", "1000Mi"), ("100m", "100Mi"))
    out = p.decide(view, mem)
    assert out.requests == {"app": {"cpu": 800, "memory": q("800Mi")}}


def test_vertical_decrease_without_ratio_goes_to_the_ideal_size() -> None:
    p, view, mem = vertical(("1", "1000Mi"), ("200m", "200Mi"), {"MaxAllowedScalingDownRatio": 0})
    out = p.decide(view, mem)
    assert out.requests == {"app": {"cpu": 220, "memory": int(float(q("200Mi")) * 1.1)}}


@pytest.mark.parametrize(
    ("max_allocated", "global_max"),
    [({"cpu": "300m", "memory": "300Mi"}, ("1000m", "1Gi")), ({"cpu": "1000m", "memory": "1Gi"}, ("300m", "300Mi"))],
)
def test_vertical_size_is_capped_by_the_smaller_of_max_allocated_and_the_global_maximum(
    max_allocated: dict[str, str], global_max: tuple[str, str]
) -> None:
    p, view, mem = vertical(
        ("130m", "130Mi"),
        ("500m", "0.5Gi"),
        {"BufferRatioOnVerticalResource": 0, "MaximumCPURequest": global_max[0], "MaximumMemoryRequest": global_max[1]},
        resourcePolicy=[{"containerName": "app", "maxAllocatedResources": max_allocated}],
    )
    assert p.decide(view, mem).requests == {"app": {"cpu": 300, "memory": q("300Mi")}}


def test_vertical_size_respects_min_allocated_and_the_per_container_floor() -> None:
    p = policy(
        autoscalingPolicy=[{"containerName": "istio-proxy", "policy": {"cpu": "Vertical", "memory": "Vertical"}}]
    )
    settings = {
        "MaxAllowedScalingDownRatio": 0,
        "BufferRatioOnVerticalResource": 0,
        "MinimumCPURequestPerContainer": {"istio-proxy": "11m"},
        "MinimumMemoryRequestPerContainer": {"istio-proxy": "11Mi"},
    }
    view = make_view(
        requests={"istio-proxy": {"cpu": "100m", "memory": "100Mi"}},
        vpa=vpa_of(**{"istio-proxy": ("1m", "1Mi")}),
        settings=settings,
    )
    assert p.decide(view, working(p, view)).requests == {"istio-proxy": {"cpu": 11, "memory": q("11Mi")}}


def test_requests_decrease_at_most_once_per_hour_but_increase_at_once() -> None:
    settings = {"BufferRatioOnVerticalResource": 0, "MaxAllowedScalingDownRatio": 0}
    p, view, mem = vertical(("2", "2Gi"), ("1", "1Gi"), settings)
    mem["req_at"] = NOW - 60
    out = p.decide(view, mem)
    assert out.requests == {}
    assert [(b.target, b.reason, b.wanted) for b in out.blocked] == [
        ("app/cpu", "Cooldown", "1"),
        ("app/memory", "Cooldown", format_quantity("memory", q("1Gi"))),
    ]
    mem["req_at"] = NOW - 3 * H
    mem.pop("last")
    assert p.decide(view, mem).requests == {"app": {"cpu": 1000, "memory": q("1Gi")}}
    assert mem["req_at"] == NOW
    p, view, mem = vertical(("2", "2Gi"), ("3", "1Gi"), settings)
    mem["req_at"] = NOW - 60
    assert p.decide(view, mem).requests == {"app": {"cpu": 3000, "memory": q("1Gi")}}


@pytest.mark.parametrize(
    ("settings", "limits", "expected"),
    [
        ({}, {"cpu": "300m", "memory": "100Mi"}, {"cpu": 600, "memory": q("200Mi")}),
        (
            {"ResourceLimitMultiplier": {"cpu": 3, "memory": 1}},
            {"cpu": "200m", "memory": "100Mi"},
            {"cpu": 600, "memory": q("200Mi")},
        ),
        ({"MinimumCPULimit": "700m"}, {"cpu": "300m", "memory": "100Mi"}, {"cpu": 700, "memory": q("200Mi")}),
        ({}, {"memory": "150Mi"}, {"memory": q("300Mi")}),
    ],
)
def test_limits_keep_their_ratio_to_requests(
    settings: dict[str, Any], limits: dict[str, str], expected: dict[str, int]
) -> None:
    p, view, mem = vertical(
        ("100m", "100Mi"), ("200m", "200Mi"), {"BufferRatioOnVerticalResource": 0, **settings}, limits
    )
    out = p.decide(view, mem)
    assert out.requests == {"app": {"cpu": 200, "memory": q("200Mi")}}
    assert out.limits == {"app": expected}


def test_the_vpa_maximum_is_sticky_between_target_and_upper_bound() -> None:
    p, view, mem = vertical(("1", "1Gi"), ("500m", "500Mi"))
    mem["vmax"] = {"app/cpu": 700, "app/memory": q("2Gi")}
    vpa = {"app": {"target": {"cpu": "500m", "memory": "500Mi"}, "upper_bound": {"cpu": "900m", "memory": "1Gi"}}}
    view = make_view(requests={"app": {"cpu": "1", "memory": "1Gi"}}, vpa=vpa)
    p.decide(view, mem)
    # cpu: 500m < 700m < 900m is kept; memory: 2Gi is above the upper bound -> the target
    assert mem["vmax"] == {"app/cpu": 700, "app/memory": q("500Mi")}


# --- right-sizing of Horizontal resources ----------------------------------------------------

PREFERRED = {
    "PreferredMaxReplicas": 3,
    "MinimumMinReplicas": 1,
    "MaximumCPURequest": "1000m",
    "MaximumMemoryRequest": "1Gi",
    "BufferRatioOnVerticalResource": 0,
    "FeatureFlags": ["VerticalScalingBasedOnPreferredMaxReplicas"],
}


def preferred(policy_: dict[str, str], **extra: Any) -> tuple[TortoisePolicy, View, dict[str, Any]]:
    p = policy(autoscalingPolicy=[{"containerName": "app", "policy": policy_}])
    view = make_view(
        replicas=4,
        requests={"app": {"cpu": "500m", "memory": "500Mi"}},
        hpa=hpa_raw(1, 100, {f"app/{r}": 80 for r, k in policy_.items() if k == "Horizontal"}),
        vpa=vpa_of(app=("500m", extra.pop("vpa_memory", "500Mi"))),
        settings=PREFERRED,
    )
    return p, view, working(p, view, **extra)


def test_first_sighting_above_preferred_max_only_sets_the_condition() -> None:
    p, view, mem = preferred({"cpu": "Horizontal", "memory": "Horizontal"})
    out = p.decide(view, mem)
    assert out.requests == {}
    assert mem["pref"] == [True, NOW]


def test_above_preferred_max_the_request_grows_30_percent_every_30_minutes() -> None:
    p, view, mem = preferred(
        {"cpu": "Horizontal", "memory": "Vertical"}, pref=[True, NOW - 31 * 60], vpa_memory="800Mi"
    )
    out = p.decide(view, mem)
    assert out.requests == {"app": {"cpu": 650, "memory": q("800Mi")}}
    assert mem["pref"] == [True, NOW]
    p, view, mem = preferred({"cpu": "Horizontal", "memory": "Horizontal"}, pref=[True, NOW - 29 * 60])
    assert p.decide(view, mem).requests == {}


def test_below_preferred_max_the_condition_turns_false() -> None:
    p, view, mem = preferred({"cpu": "Horizontal", "memory": "Horizontal"}, pref=[True, NOW - 3 * H])
    view = make_view(
        replicas=2,
        requests={"app": {"cpu": "500m", "memory": "500Mi"}},
        hpa=hpa_raw(1, 100, {"app/cpu": 80, "app/memory": 80}),
        vpa=vpa_of(app=("500m", "500Mi")),
        settings=PREFERRED,
    )
    p.decide(view, mem)
    assert mem["pref"] == [False, NOW]


def horizontal_pod(replicas: int, settings: dict[str, Any], vpa: dict[str, tuple[str, str]], **kw: Any) -> Outcome:
    p = policy(
        autoscalingPolicy=[
            {"containerName": c, "policy": {"cpu": "Horizontal", "memory": "Horizontal"}} for c in sorted(vpa)
        ],
        resourcePolicy=kw.pop("resourcePolicy", []),
    )
    requests = kw.pop("requests", {c: {"cpu": "1", "memory": "10Gi"} for c in vpa})
    hpa_targets = {f"{c}/{r}": 80 for c in vpa for r in ("cpu", "memory")}
    view = make_view(
        replicas=replicas,
        requests=requests,
        hpa=hpa_raw(kw.pop("hpa_min", 1), 100, hpa_targets),
        vpa=vpa_of(**vpa),
        settings=settings,
    )
    return p.decide(view, working(p, view))


def test_near_preferred_max_requests_are_kept_even_when_unbalanced() -> None:
    out = horizontal_pod(9, {"PreferredMaxReplicas": 10}, {"app": ("100m", "1Gi"), "app2": ("1", "10Gi")})
    assert out.requests == {}


def test_at_minimum_min_replicas_requests_shrink_to_the_vpa_value() -> None:
    out = horizontal_pod(
        3,
        {"MinimumMinReplicas": 3, "PreferredMaxReplicas": 6, "MaxAllowedScalingDownRatio": 0},
        {"app": ("120m", "120Mi")},
        requests={"app": {"cpu": "130m", "memory": "130Mi"}},
        resourcePolicy=[{"containerName": "app", "minAllocatedResources": {"cpu": "100m", "memory": "100Mi"}}],
    )
    assert out.requests == {"app": {"cpu": 120, "memory": q("120Mi")}}


def test_at_minimum_min_replicas_requests_never_grow() -> None:
    out = horizontal_pod(3, {"MinimumMinReplicas": 3, "PreferredMaxReplicas": 6}, {"app": ("2", "12Gi")})
    assert out.requests == {}


def test_unbalanced_containers_shrink_to_usage_over_target() -> None:
    # Reference 2.d doc example: istio-proxy 5 cores, VPA 2 cores, target 80 -> 2 / 0.8 = 2.5 cores.
    out = horizontal_pod(
        10,
        {"MaxAllowedScalingDownRatio": 0},
        {"app": ("8", "8Gi"), "istio-proxy": ("2", "8Gi")},
        requests={"app": {"cpu": "10", "memory": "10Gi"}, "istio-proxy": {"cpu": "5", "memory": "10Gi"}},
    )
    assert out.requests == {"istio-proxy": {"cpu": 2500}}


def test_balancing_waits_while_the_hpa_holds_replicas_at_min() -> None:
    out = horizontal_pod(
        10,
        {"MaxAllowedScalingDownRatio": 0},
        {"app": ("8", "8Gi"), "istio-proxy": ("2", "8Gi")},
        requests={"app": {"cpu": "10", "memory": "10Gi"}, "istio-proxy": {"cpu": "5", "memory": "10Gi"}},
        hpa_min=10,
    )
    assert out.requests == {}


def test_a_single_horizontal_resource_keeps_its_request_within_bounds() -> None:
    p = policy(
        autoscalingPolicy=[{"containerName": "app", "policy": {"cpu": "Horizontal"}}],
        resourcePolicy=[{"containerName": "app", "maxAllocatedResources": {"cpu": "1"}}],
    )
    view = make_view(
        replicas=10,
        requests={"app": {"cpu": "4", "memory": "4Gi"}},
        hpa=hpa_raw(1, 100, {"app/cpu": 50}),
        vpa=vpa_of(app=("3", "3Gi")),
    )
    assert p.decide(view, working(p, view)).requests == {"app": {"cpu": 1000}}


# --- emergency -------------------------------------------------------------------------------


def emergency_setup(mode: str, phase: str = "Working", **kw: Any) -> tuple[TortoisePolicy, View, dict[str, Any]]:
    p = policy(mode)
    view = make_view(
        replicas=kw.pop("replicas", 3),
        hpa=kw.pop("hpa", hpa_raw(3, 6)),
        vpa=vpa_of(app=("600m", "1Gi")),
        settings=kw.pop("settings", None),
    )
    return p, view, working(p, view, peak=3, phase=phase, **kw)


def test_manual_emergency_pins_min_replicas_to_the_recommended_max() -> None:
    p, view, mem = emergency_setup("Emergency")
    out = p.decide(view, mem)
    assert mem["phase"] == "Emergency"
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((3, 6), (6, 6))


def test_emergency_is_refused_while_gathering_data() -> None:
    p, view, mem = emergency_setup("Emergency", phase="GatheringData")
    for key in mem["rp"]:
        mem["rp"][key] = ["GatheringData", NOW - H]
    out = p.decide(view, mem)
    assert mem["phase"] == "PartlyWorking"
    assert ("hpa/min_replicas", "GatheringData") in [(b.target, b.reason) for b in out.blocked]
    assert "min_replicas" not in out.hpa


def test_back_to_normal_reduces_min_replicas_step_by_step_then_works() -> None:
    p, view, mem = emergency_setup("Auto", phase="Emergency", hpa=hpa_raw(6, 6))
    seen = []
    for step in range(5):
        view = make_view(NOW + step * 15, replicas=3, hpa=hpa_raw(6, 6), vpa=vpa_of(app=("600m", "1Gi")))
        out = p.decide(view, mem)
        seen.append((mem["phase"], out.hpa.get("min_replicas")))
    # 6 -> trunc(5.7) = 5 -> trunc(4.75) = 4 -> trunc(3.8) = 3 -> trunc(2.85) = 2 < 3: recommended min, done
    assert seen == [
        ("BackToNormal", (6, 5)),
        ("BackToNormal", (5, 4)),
        ("BackToNormal", (4, 3)),
        ("Working", (3, 3)),
        ("Working", (3, 3)),
    ]


def test_back_to_normal_finishes_when_the_reduced_value_falls_below_the_recommendation() -> None:
    p, view, mem = emergency_setup("Auto", phase="BackToNormal", hpa=hpa_raw(1, 6))
    out = p.decide(view, mem)
    assert mem["phase"] == "Working"
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((1, 3), (6, 6))


def failing(age: float) -> list[dict[str, Any]]:
    stamp = NOW - age
    from datetime import UTC, datetime

    text = datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        {"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric", "lastTransitionTime": text}
    ]


def test_automatic_emergency_after_the_grace_period_of_failed_metrics() -> None:
    p, view, mem = emergency_setup("Auto", hpa=hpa_raw(3, 6, conditions=failing(6 * 60)))
    out = p.decide(view, mem)
    assert mem["phase"] == "Emergency"
    assert out.hpa["min_replicas"] == (3, 6)
    p, view, mem = emergency_setup("Auto", hpa=hpa_raw(3, 6, conditions=failing(4 * 60)))
    p.decide(view, mem)
    assert mem["phase"] == "Working"


def test_failed_metrics_without_a_transition_time_count_from_the_first_tick_seen() -> None:
    bad = [{"type": "ScalingActive", "status": "False", "reason": "FailedGetResourceMetric"}]
    p, view, mem = emergency_setup("Auto", hpa=hpa_raw(3, 6, conditions=bad))
    p.decide(view, mem)
    assert (mem["phase"], mem["bad_since"]) == ("Working", NOW)
    later = make_view(NOW + 300, replicas=3, hpa=hpa_raw(3, 6, conditions=bad), vpa=vpa_of(app=("600m", "1Gi")))
    p.decide(later, mem)
    assert mem["phase"] == "Emergency"


def test_automatic_emergency_lasts_while_metrics_are_zero_then_returns_to_normal() -> None:
    p, view, mem = emergency_setup("Auto", hpa=hpa_raw(3, 6, current=[0, 0]))
    p.decide(view, mem)
    assert (mem["phase"], mem["auto"]) == ("Emergency", True)
    view = make_view(NOW + 15, replicas=6, hpa=hpa_raw(6, 6, ts=NOW + 10, current=[0]), vpa=vpa_of(app=("600m", "1Gi")))
    p.decide(view, mem)
    assert mem["phase"] == "Emergency"
    view = make_view(
        NOW + 30, replicas=6, hpa=hpa_raw(6, 6, ts=NOW + 25, current=[40]), vpa=vpa_of(app=("600m", "1Gi"))
    )
    out = p.decide(view, mem)
    assert mem["phase"] == "BackToNormal"
    assert out.hpa["min_replicas"] == (6, 5)


def test_a_tortoise_without_horizontal_resources_never_goes_to_emergency() -> None:
    p = policy("Emergency", autoscalingPolicy=VERTICAL)
    view = make_view(hpa=hpa_raw(3, 6, current=[0]), vpa=vpa_of(app=("1", "1Gi")))
    mem = working(p, view)
    p.decide(view, mem)
    assert mem["phase"] == "Working"


def test_history_and_recommendations_are_frozen_in_emergency() -> None:
    p, view, mem = emergency_setup("Emergency", phase="Emergency", replicas=40, trec={"app/cpu": 77})
    before = copy.deepcopy(mem["hist"])
    out = p.decide(view, mem)
    assert mem["hist"] == before
    assert mem["trec"] == {"app/cpu": 77}
    assert targets(out) == {"app/cpu": (70, 75)}  # the frozen recommendation, +5 at most
    assert out.requests == {}


# --- dry run and assumed HPA state -----------------------------------------------------------


def test_off_mode_is_a_dry_run_reported_once() -> None:
    p = policy("Off")
    view = make_view(replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, peak=10)
    out = p.decide(view, mem)
    assert out.dry_run
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((1, 5), (100, 20))
    mem.pop("last")
    again = p.decide(view, mem)
    assert again.dry_run and again.hpa == {} and again.requests == {}
    assert "hpa" not in mem and "tgt_at" not in mem


@pytest.mark.parametrize("settings", [{"GlobalDisableMode": True}, {"ExcludedNamespaces": ["shop"]}])
def test_effectively_off_tortoises_are_dry_runs(settings: dict[str, Any]) -> None:
    p = policy("Auto")
    view = make_view(replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")), settings=settings)
    out = p.decide(view, working(p, view, peak=10))
    assert out.dry_run
    assert out.mode == "Auto"
    assert any("EffectiveModeOverridden" in r for r in out.reasons)


def test_decided_hpa_values_hold_until_a_newer_hpa_event() -> None:
    p = policy()
    view = make_view(replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, peak=10)
    p.decide(view, mem)
    assert mem["hpa"] == {"tick": NOW, "min": 5, "max": 20, "targets": {"app/cpu": 70}}
    same = make_view(NOW + 15, replicas=4, hpa=hpa_raw(1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    assert p.decide(same, mem).hpa["min_replicas"] == (5, 5)
    newer = make_view(NOW + 30, replicas=4, hpa=hpa_raw(2, 100, ts=NOW + 20), vpa=vpa_of(app=("600m", "1Gi")))
    assert p.decide(newer, mem).hpa["min_replicas"] == (2, 5)


def test_memory_is_plain_json_and_a_reload_between_ticks_changes_nothing() -> None:
    import json

    settings = {"GatheringDataPeriodType": "daily", "RangeOfMinMaxReplicasRecommendationHours": 24}

    def views() -> list[View]:
        return [
            make_view(
                NOW + k * H,
                replicas=3 + k % 7,
                hpa=hpa_raw(3, 100, ts=NOW - 60),
                vpa=vpa_of(app=("600m", "900Mi" if k < 20 else "300Mi")),
                settings=settings,
            )
            for k in range(40)
        ]

    def outcome(o: Outcome) -> tuple[Any, ...]:
        return (o.hpa, o.requests, o.limits, [b.as_dict() for b in o.blocked], o.reasons, o.dry_run, o.inputs)

    kept: dict[str, Any] = {}
    same = policy()
    straight = [outcome(same.decide(v, kept)) for v in views()]
    reloaded: dict[str, Any] = {}
    replayed = []
    for v in views():
        fresh = policy()
        replayed.append(outcome(fresh.decide(v, reloaded)))
        reloaded = json.loads(json.dumps(reloaded))
    assert replayed == straight
    assert kept["phase"] == "Working"
    assert any(o[0].get("min_replicas") for o in straight)
    assert any(o[1] for o in straight)


# --- tandem's own HPA (hpa_template) ----------------------------------------------------------


def own_targets(tmpl: Any) -> dict[str, int]:
    return {
        f"{m['containerResource']['container']}/{m['containerResource']['name']}": m["containerResource"]["target"][
            "averageUtilization"
        ]
        for m in tmpl.metrics
    }


def test_own_hpa_is_the_hpa_tortoise_creates_then_the_one_it_decided() -> None:
    from scaling.policies.tortoise import DEFAULT_HPA_BEHAVIOR

    p = policy()
    mem: dict[str, Any] = {}
    assert p.hpa_template(mem) is None  # nothing created before the first reconcile
    p.decide(make_view(vpa=vpa_of(app=("600m", "1Gi"))), mem)
    tmpl = p.hpa_template(mem)
    assert (tmpl.min_replicas, tmpl.max_replicas, own_targets(tmpl)) == (3, 100, {"app/cpu": 70})
    assert {m["type"] for m in tmpl.metrics} == {"ContainerResource"}
    assert {m["containerResource"]["target"]["type"] for m in tmpl.metrics} == {"Utilization"}
    assert tmpl.behavior == DEFAULT_HPA_BEHAVIOR
    # What tandem decided later; a Horizontal pair without a decided target gets Tortoise's 70.
    mem["hpa"] = {"tick": NOW, "min": 5, "max": 20, "targets": {"app/cpu": 77}}
    mem["pol"] = {"app/cpu": "Horizontal", "app/memory": "Horizontal", "side/cpu": "Off"}
    tmpl = p.hpa_template(mem)
    assert (tmpl.min_replicas, tmpl.max_replicas) == (5, 20)
    assert own_targets(tmpl) == {"app/cpu": 77, "app/memory": 70}


def test_no_hpa_template_an_attached_hpa_or_without_horizontal_resources() -> None:
    mem = {"pol": {"app/cpu": "Horizontal"}}
    assert (
        policy(targetRefs={"scaleTargetRef": {"name": "web"}, "horizontalPodAutoscalerName": "h"}).hpa_template(mem)
        is None
    )
    assert policy().hpa_template({"pol": {"app/cpu": "Vertical", "app/memory": "Off"}}) is None


def test_a_dry_run_own_hpa_keeps_the_initial_bounds_of_the_settings() -> None:
    p = policy("Off")
    mem: dict[str, Any] = {}
    p.decide(make_view(settings={"MinimumMinReplicas": 4, "MaximumMaxReplicas": 50}), mem)
    assert "hpa" not in mem
    tmpl = p.hpa_template(json.loads(json.dumps(mem)))  # what a reloaded state holds
    assert (tmpl.min_replicas, tmpl.max_replicas, own_targets(tmpl)) == (4, 50, {"app/cpu": 70})


def own_hpa_event(ts: float, conditions: list[dict[str, Any]], min_r: int = 5, max_r: int = 20) -> dict[str, Any]:
    return {**hpa_raw(min_r, max_r, ts=ts, conditions=conditions), "source": "tandem"}


ACTIVE = [{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}]
NO_METRICS = [{"type": "ScalingActive", "status": "False", "reason": "FailedGetContainerResourceMetric"}]


def test_the_own_hpa_never_replaces_the_decided_hpa() -> None:
    p = policy()
    view = make_view(replicas=4, hpa=own_hpa_event(NOW, ACTIVE, 1, 100), vpa=vpa_of(app=("600m", "1Gi")))
    mem = working(p, view, peak=10, hpa={"tick": NOW - 15, "min": 5, "max": 20, "targets": {"app/cpu": 70}})
    out = p.decide(view, mem)
    assert out.hpa["min_replicas"] == (5, 5)  # from the decision, not the event's 1


def test_the_own_hpa_failing_counts_only_once_it_has_computed_its_metrics() -> None:
    # A stream that never carries samples says nothing about the HPA's health.
    p, view, mem = emergency_setup("Auto", hpa=own_hpa_event(NOW - 600, NO_METRICS, 3, 6))
    for k in range(0, 30):
        view = make_view(
            NOW + 60 * k, replicas=3, hpa=own_hpa_event(NOW + 60 * k, NO_METRICS, 3, 6), vpa=vpa_of(app=("600m", "1Gi"))
        )
        p.decide(view, mem)
    assert mem["phase"] == "Working" and "bad_since" not in mem
    # Once it has: the grace period runs from the first tick that saw the failure, then Emergency.
    p, view, mem = emergency_setup("Auto", hpa=own_hpa_event(NOW - 60, ACTIVE, 3, 6))
    seen = []
    for k, conditions in enumerate([ACTIVE] + [NO_METRICS] * 6):
        view = make_view(
            NOW + 60 * k, replicas=3, hpa=own_hpa_event(NOW + 60 * k, conditions, 3, 6), vpa=vpa_of(app=("600m", "1Gi"))
        )
        p.decide(view, mem)
        seen.append(mem["phase"])
    assert mem["own_ok"] is True
    assert seen == ["Working"] * 6 + ["Emergency"]  # failing from NOW + 60, 300 s later


def test_emergency_entered_with_more_replicas_pins_min_to_the_recommended_max_as_it_stood() -> None:
    # mercari/tortoise internal/controller/tortoise_controller.go Reconcile: UpdateTortoisePhase
    # moves to Emergency before RecommenderService.UpdateRecommendations, which returns at once in
    # Emergency (pkg/recommender/recommender.go): the raised count (5) never reaches the slots, and
    # min is pinned to the max recommended from the recorded peak 3 (3 x 2 = 6), not 10.
    p, view, mem = emergency_setup("Emergency", replicas=5)
    hist_before = mem["hist"]
    out = p.decide(view, mem)
    assert mem["phase"] == "Emergency"
    assert out.inputs["slot_peak_replicas"] == 3
    assert (out.hpa["min_replicas"], out.hpa["max_replicas"]) == ((3, 6), (6, 6))
    assert mem["hist"] == hist_before


def test_automatic_emergency_does_not_record_the_replicas_of_the_tick_that_enters_it() -> None:
    # the same order for UpdateTortoisePhaseIfHPAIsUnhealthy, also before UpdateRecommendations
    p, view, mem = emergency_setup("Auto", replicas=5, hpa=hpa_raw(3, 6, conditions=failing(6 * 60)))
    hist_before = mem["hist"]
    out = p.decide(view, mem)
    assert mem["phase"] == "Emergency"
    assert out.inputs["slot_peak_replicas"] == 3
    assert out.hpa["min_replicas"] == (3, 6)
    assert mem["hist"] == hist_before


def test_off_mode_skips_a_horizontal_resource_whose_metric_the_hpa_lacks() -> None:
    # pkg/hpa/service.go UpdateHPASpecFromTortoiseAutoscalingPolicy leaves the HPA alone in Off;
    # pkg/recommender/recommender.go updateHPATargetUtilizationRecommendations then finds no
    # istio-proxy/cpu metric (GetHPATargetValue fails) and skips it.  In Auto the metric is added
    # at 70 first: U = 60, 100 - (60 - 70) = 110 > 100, so the current 70 is kept.
    autoscaling = [
        {"containerName": "app", "policy": {"memory": "Horizontal"}},
        {"containerName": "istio-proxy", "policy": {"cpu": "Horizontal"}},
    ]
    for mode, expected in (("Off", {"app/memory": 80}), ("Auto", {"app/memory": 80, "istio-proxy/cpu": 70})):
        p = policy(mode, autoscalingPolicy=autoscaling)
        view = make_view(
            replicas=100,
            requests={"app": {"cpu": "1", "memory": "5Gi"}, "istio-proxy": {"cpu": "1", "memory": "1Gi"}},
            hpa=hpa_raw(3, 200, {"app/memory": 60}),
            vpa=vpa_of(app=("1", "4Gi"), **{"istio-proxy": ("600m", "1Gi")}),
            settings={
                "MaximumTargetResourceUtilization": 90,
                "MinimumTargetResourceUtilization": 40,
                "MaximumMaxReplicas": 1000,
            },
        )
        mem = working(p, view)
        p.decide(view, mem)
        assert mem["trec"] == expected, mode
