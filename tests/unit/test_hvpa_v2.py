"""HVPA line B ("scale intervals", hvpa-v2): buckets, lookup, the decision rules and validation.

The end-to-end vectors live in ``tests/vectors/test_hvpa_v2_vectors.py``; these tests pin the
pieces (reference ``hvpa.md`` sections 3.1-3.5) on the policy object directly, with a hand-built
:class:`~scaling.outcome.View`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scaling.errors import InvalidPolicy
from scaling.events import HpaEvent, VpaEvent, WorkloadEvent, WorkloadRef, decode_event
from scaling.outcome import Outcome, View
from scaling.policies import parse_policy
from scaling.policies.hvpa.v2 import Buckets, HvpaV2Policy, parse_hvpa_v2
from scaling.quantity import parse_quantity

T0 = 1_762_250_400.0  # 2025-11-04T10:00:00Z
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
REF = WorkloadRef(**WL)
MIN_CHANGE = {"cpu": {"value": "100m", "percentage": 80}, "memory": {"value": "100M", "percentage": 80}}
FIXTURE_B_INTERVALS = [
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


def q(text: str) -> int:
    return parse_quantity(text)


def policy_of(container: str, **extra: Any) -> dict[str, Any]:
    return {
        "containerName": container,
        "minAllowed": {"cpu": "100m", "memory": "200M"},
        "maxAllowed": {"cpu": "40", "memory": "100G"},
        **extra,
    }


def manifest(
    *,
    intervals: list[dict[str, Any]] | None = None,
    containers: tuple[str, ...] = ("deployment",),
    overlap: dict[str, Any] | None = None,
    up: dict[str, Any] | None = None,
    down: dict[str, Any] | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    """Fixture B of the reference (section 5), optionally varied."""

    def scale(extra: dict[str, Any] | None) -> dict[str, Any]:
        base = {"updatePolicy": {"updateMode": "Auto"}, "stabilizationDuration": "3m", "minChange": MIN_CHANGE}
        return {**base, **(extra or {})}

    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 1, "maxReplicas": 3}}},
        "vpa": {
            "deploy": True,
            "template": {"spec": {"resourcePolicy": {"containerPolicies": [policy_of(c) for c in containers]}}},
        },
        "scaleUp": scale(up),
        "scaleDown": scale(down),
        "scaleIntervals": FIXTURE_B_INTERVALS if intervals is None else intervals,
        "scalingIntervalsOverlap": (
            {"cpu": {"percentage": 20}, "memory": {"value": "10M"}} if overlap is None else overlap
        ),
        **spec_extra,
    }
    return {
        "apiVersion": "autoscaling.gardener.cloud/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": spec,
    }


def parse(m: dict[str, Any]) -> HvpaV2Policy:
    return parse_hvpa_v2(m, REF)


def view(
    replicas: int,
    containers: dict[str, dict[str, Any]],
    targets: dict[str, dict[str, str]],
    *,
    tick: float = T0,
    hpa_desired: int | None = None,
    oom: dict[str, float] | None = None,
    vpa_conditions: list[dict[str, str]] | None = None,
    kind: str = "Deployment",
) -> View:
    wl = {**WL, "kind": kind}
    spec = decode_event(
        {"type": "workload", "ts": tick, "workload": wl, "replicas": replicas, "containers": containers}
    )
    assert isinstance(spec, WorkloadEvent)
    hpa = None
    if hpa_desired is not None:
        hpa = decode_event({"type": "hpa", "ts": tick, "workload": wl, "desired_replicas": hpa_desired})
        assert isinstance(hpa, HpaEvent)
    raw_vpa: dict[str, Any] = {
        "type": "vpa",
        "ts": tick,
        "workload": wl,
        "containers": {c: {"target": t} for c, t in targets.items()},
    }
    if vpa_conditions is not None:
        raw_vpa["conditions"] = vpa_conditions
    vpa = decode_event(raw_vpa)
    assert isinstance(vpa, VpaEvent)
    return View(tick, WorkloadRef(**wl), spec, hpa, vpa, {}, oom or {}, {})


def decide(
    p: HvpaV2Policy,
    replicas: int,
    requests: dict[str, str],
    target: dict[str, str],
    *,
    limits: dict[str, str] | None = None,
    memory: dict[str, Any] | None = None,
    **kw: Any,
) -> Outcome:
    res: dict[str, Any] = {"requests": requests}
    if limits:
        res["limits"] = limits
    return p.decide(view(replicas, {"deployment": res}, {"deployment": target}, **kw), {} if memory is None else memory)


def reasons(out: Outcome) -> set[str]:
    return {b.reason for b in out.blocked}


def per_pod(b: Buckets, replicas: int) -> tuple[int, int, int, int]:
    bucket = b.at(replicas)
    assert bucket is not None
    return bucket.min["cpu"], bucket.max["cpu"], bucket.min["memory"], bucket.max["memory"]


# --- 3.1 effective scaling intervals ---------------------------------------------------------


def test_fixture_b_intervals_derive_the_reference_per_pod_buckets() -> None:
    b = parse(manifest()).spec.buckets["deployment"]
    assert [x.replicas for x in b.buckets] == [1, 2, 3, 4, 5, 6]
    # reference hvpa.md section 5: r1 100m-1 / 200M-2G, r2 400m-5.3 / 990M-8242.5M, r3 2827m-10.2 / 5485M-15495M
    assert per_pod(b, 1) == (q("100m"), q("1"), q("200M"), q("2G"))
    assert per_pod(b, 2) == (q("400m"), q("5300m"), q("990M"), q("8242.5M"))
    assert per_pod(b, 3) == (q("2827m"), q("10200m"), q("5485M"), q("15495M"))
    # and the rest of the comment in hvpa-v2's suite_test.go
    assert per_pod(b, 4) == (q("6120m"), q("15100m"), q("11611.25M"), q("22747.5M"))
    assert per_pod(b, 5) == (q("9664m"), q("20"), q("18188M"), q("30G"))
    assert per_pod(b, 6) == (q("13333m"), q("30"), q("24990M"), q("40G"))


def test_round_intervals_derive_the_reference_per_pod_buckets() -> None:
    b = parse(manifest(intervals=ROUND_INTERVALS)).spec.buckets["deployment"]
    expected = {
        1: ("100m", "400m", "200M", "1G"),
        2: ("160m", "600m", "490M", "1.5G"),
        3: ("320m", "800m", "990M", "2G"),
        4: ("480m", "1", "1490M", "2.75G"),
        5: ("640m", "1.5", "2190M", "4G"),
    }
    for r, values in expected.items():
        assert per_pod(b, r) == tuple(q(v) for v in values)
    # r6 memory min is 4G x 5/6 - 10M, truncated in milli-bytes: 3323.33M
    assert per_pod(b, 6) == (q("1"), q("1.75"), 3_323_333_333_333, q("6G"))


def test_missing_interval_maximum_defaults_to_max_allowed() -> None:
    intervals = [{"maxCpu": "1", "maxMemory": "2G", "maxReplicas": 1}, {"maxReplicas": 3}]
    b = parse(manifest(intervals=intervals)).spec.buckets["deployment"]
    assert b.at(3) is not None and b.at(3).max == {"cpu": q("40"), "memory": q("100G")}  # type: ignore[union-attr]
    assert b.last_max == {"cpu": q("40"), "memory": q("100G")}


def test_policy_replica_bounds_run_from_hpa_min_to_the_last_interval() -> None:
    p = parse(manifest())
    assert (p.min_replicas, p.max_replicas) == (1, 6)  # not the HPA template's max of 3
    assert p.spec.hpa_max_replicas == 3


# --- 3.1 lookup --------------------------------------------------------------------------------


def test_lookup_prefers_the_current_replica_count_where_buckets_overlap() -> None:
    b = parse(manifest()).spec.buckets["deployment"]
    total = q("8484m")  # 2.828 x 3: inside both r2 (800m..10.6) and r3 (8481m..30.6)
    assert b.lookup("cpu", total, bias=3) == 3
    assert b.lookup("cpu", total, bias=1) == 2  # otherwise the lowest bucket that holds it
    assert b.lookup("cpu", total, bias=9) == 2  # a bias without bucket is ignored


def test_lookup_outside_every_bucket_finds_nothing() -> None:
    b = parse(manifest()).spec.buckets["deployment"]
    assert b.lookup("cpu", q("50m"), bias=1) is None
    assert b.lookup("memory", q("241G"), bias=6) is None


# --- 3.2 estimate ---------------------------------------------------------------------------------


def test_scale_down_hysteresis_keeps_replicas_while_one_resource_fits_the_current_bucket() -> None:
    # cpu alone would move to 2 replicas (6 cores total), memory still fits r3
    out = decide(parse(manifest()), 3, {"cpu": "8", "memory": "10G"}, {"cpu": "2", "memory": "5.486G"})
    assert out.replicas is None
    assert out.requests == {"deployment": {"cpu": q("2"), "memory": q("5486000k")}}
    assert any("hysteresis" in r for r in out.reasons)


def test_without_overlap_the_same_scale_down_changes_replicas() -> None:
    # reference B8's input: with the 20 % / 10M overlap it stays at 3 replicas; without, r3 starts
    # at 3583m / 5.5G per pod and both totals (8484m / 16.458G) fall to r2
    p = parse(manifest(overlap={}))
    out = decide(p, 3, {"cpu": "8", "memory": "10G"}, {"cpu": "2.828", "memory": "5.486G"})
    assert out.replicas == 2
    assert out.requests == {"deployment": {"cpu": q("4242m"), "memory": q("8229000k")}}


def test_scale_up_never_uses_hysteresis_and_takes_the_larger_estimate() -> None:
    # cpu stays in r1, memory needs r2: the maximum wins (erring on stability)
    out = decide(parse(manifest()), 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "150m", "memory": "2.2G"})
    assert out.replicas == 2


def test_hpa_desired_replicas_count_as_todays_pods_times_desired() -> None:
    p = parse(manifest(intervals=ROUND_INTERVALS))
    out = decide(p, 2, {"cpu": "250m", "memory": "600M"}, {"cpu": "250m", "memory": "600M"}, hpa_desired=6)
    assert out.inputs["hpa_desired_replicas"] == 6
    assert out.replicas == 3
    assert out.requests == {"deployment": {"cpu": q("500m"), "memory": q("1200000k")}}


def test_without_hpa_status_desired_replicas_are_zero() -> None:
    out = decide(parse(manifest()), 3, {"cpu": "8", "memory": "10G"}, {"cpu": "2.828", "memory": "5.486G"})
    assert out.inputs["hpa_desired_replicas"] == 0


def test_scale_in_that_would_grow_pods_is_paradoxical() -> None:
    out = decide(parse(manifest()), 3, {"cpu": "150m", "memory": "2.2G"}, {"cpu": "150m", "memory": "1.8G"})
    assert out.replicas is None and out.requests == {}
    assert reasons(out) == {"ParadoxicalScaling"}
    assert [(b.target, b.wanted) for b in out.blocked] == [("replicas", 2), ("deployment/memory", "1800000k")]


def test_scale_in_that_grows_only_one_resource_is_not_paradoxical() -> None:
    # reference B12 without base resources: cpu per pod grows 150m -> 225m, memory shrinks
    out = decide(parse(manifest()), 3, {"cpu": "150m", "memory": "2.2G"}, {"cpu": "150m", "memory": "0.8G"})
    assert out.replicas == 2 and out.blocked == []
    assert out.requests == {"deployment": {"cpu": q("225m"), "memory": q("1200000k")}}


def test_scale_out_that_would_shrink_every_pod_keeps_the_pods() -> None:
    out = decide(parse(manifest()), 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "150m", "memory": "2.2G"})
    assert out.replicas == 2
    assert out.requests == {} and out.blocked == []
    assert any("paradoxical, resources kept" in r for r in out.reasons)


def test_scale_out_never_shrinks_a_pod_resource() -> None:
    # memory per pod would fall to 2G / 2 = 1G < 1.2G today: kept at 1.2G; cpu rises to 400m
    p = parse(manifest(intervals=ROUND_INTERVALS))
    out = decide(p, 1, {"cpu": "150m", "memory": "1.2G"}, {"cpu": "800m", "memory": "1.2G"})
    assert out.replicas == 2
    assert out.requests == {"deployment": {"cpu": q("400m")}}


def test_min_change_compares_totals_and_blocks_only_if_both_are_small() -> None:
    p = parse(manifest())
    small = decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "150m", "memory": "1.89G"})
    assert reasons(small) == {"MinChange"}
    # the same per-pod delta on 3 replicas is a 270M total: above the 100M threshold
    big = decide(p, 3, {"cpu": "3", "memory": "6G"}, {"cpu": "3", "memory": "6.09G"})
    assert big.blocked == [] and big.requests == {"deployment": {"memory": q("6090000k")}}


def test_update_mode_off_blocks_that_direction_only() -> None:
    p = parse(manifest(down={"updatePolicy": {"updateMode": "Off"}}))
    down = decide(p, 3, {"cpu": "150m", "memory": "2.2G"}, {"cpu": "150m", "memory": "0.8G"})
    assert reasons(down) == {"UpdatePolicy"} and down.replicas is None and down.requests == {}
    up = decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"})
    assert up.blocked == [] and up.replicas == 2


def test_stabilization_window_counts_from_the_shared_last_scaling() -> None:
    p = parse(manifest())
    memory = {"last_scale_time": T0 - 120}
    out = decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory)
    assert reasons(out) == {"StabilizationWindow"}
    assert memory == {"last_scale_time": T0 - 120}
    later = decide(
        p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory, tick=T0 + 60
    )
    assert later.replicas == 2 and memory["last_scale_time"] == T0 + 60


def test_oom_kill_overrides_scale_up_stabilization_and_min_change_but_not_scale_down() -> None:
    p = parse(manifest())
    oom = {"deployment": T0 - 30}
    up = decide(
        p,
        1,
        {"cpu": "150m", "memory": "1.8G"},
        {"cpu": "150m", "memory": "1.89G"},  # below minChange
        memory={"last_scale_time": T0 - 60},
        oom=oom,
    )
    assert up.blocked == [] and up.requests == {"deployment": {"memory": q("1890000k")}}
    down = decide(
        p,
        3,
        {"cpu": "150m", "memory": "2.2G"},
        {"cpu": "150m", "memory": "0.8G"},
        memory={"last_scale_time": T0 - 60},
        oom=oom,
    )
    assert reasons(down) == {"StabilizationWindow"}
    # an OOM kill older than the last scaling does not count
    stale = decide(
        p,
        1,
        {"cpu": "150m", "memory": "1.8G"},
        {"cpu": "150m", "memory": "1.89G"},
        memory={"last_scale_time": T0 - 10},
        oom=oom,
    )
    assert reasons(stale) == {"StabilizationWindow"}


def test_closed_maintenance_window_blocks_and_open_one_lets_through() -> None:
    hour = int(T0 // 3600) % 24
    closed = {"begin": f"{(hour + 3) % 24:02d}0000+0000", "end": f"{(hour + 4) % 24:02d}0000+0000"}
    mode = {"updatePolicy": {"updateMode": "MaintenanceWindow"}}
    p = parse(manifest(down=mode, maintenanceTimeWindow=closed))
    out = decide(p, 3, {"cpu": "150m", "memory": "2.2G"}, {"cpu": "150m", "memory": "0.8G"})
    assert reasons(out) == {"MaintenanceWindow"}
    opened = {"begin": f"{(hour - 1) % 24:02d}0000+0000", "end": f"{(hour + 1) % 24:02d}0000+0000"}
    p = parse(manifest(down=mode, maintenanceTimeWindow=opened))
    assert decide(p, 3, {"cpu": "150m", "memory": "2.2G"}, {"cpu": "150m", "memory": "0.8G"}).replicas == 2


def test_unusable_vpa_conditions_stop_scaling() -> None:
    p = parse(manifest())
    for conditions in (
        [{"type": "RecommendationProvided", "status": "True"}, {"type": "LowConfidence", "status": "True"}],
        [{"type": "RecommendationProvided", "status": "False"}],
        [{"type": "ConfigDeprecated", "status": "False"}],  # no RecommendationProvided at all
    ):
        out = decide(
            p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, vpa_conditions=conditions
        )
        assert out.replicas is None and out.requests == {} and out.blocked == []
    ok = [{"type": "RecommendationProvided", "status": "True"}, {"type": "ConfigUnsupported", "status": "False"}]
    assert decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, vpa_conditions=ok).replicas


def test_zero_replicas_and_daemonsets_are_never_scaled() -> None:
    p = parse(manifest())
    assert decide(p, 0, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}).replicas is None
    ds = decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, kind="DaemonSet")
    assert ds.replicas is None and ds.requests == {}


# --- 3.3 / 3.4 finalise --------------------------------------------------------------------------


def test_base_resources_move_the_fixed_share_per_replica() -> None:
    base = {"cpu": {"value": "100m"}, "memory": {"percentage": 10}}
    p = parse(manifest(baseResourcesPerReplica=base))
    out = decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"})
    # (250m x 2 - 100m + 200m) / 2 and (4G - 180M + 2 x 200M) / 2
    assert out.requests == {"deployment": {"cpu": q("300m"), "memory": q("2110000k")}}


def test_base_resources_are_skipped_when_todays_request_is_all_base() -> None:
    base = {"cpu": {"value": "200m"}}
    p = parse(manifest(intervals=ROUND_INTERVALS, baseResourcesPerReplica=base))
    out = decide(p, 1, {"cpu": "150m", "memory": "400M"}, {"cpu": "500m", "memory": "1.2G"})
    assert out.replicas == 2
    assert out.requests == {"deployment": {"cpu": q("250m"), "memory": q("600M")}}


def test_base_resources_only_apply_when_replicas_change() -> None:
    base = {"cpu": {"value": "100m"}, "memory": {"percentage": 10}}
    p = parse(manifest(baseResourcesPerReplica=base))
    out = decide(p, 3, {"cpu": "8", "memory": "10G"}, {"cpu": "2.828", "memory": "5.486G"})
    assert out.replicas is None
    assert out.requests == {"deployment": {"cpu": q("2828m"), "memory": q("5486000k")}}


def test_proportional_limits_stay_because_the_old_request_is_already_overwritten() -> None:
    # HVPA v2 quirk (reference 3.3): limit x new / new = the old limit
    out = decide(
        parse(manifest()),
        3,
        {"cpu": "150m", "memory": "2.2G"},
        {"cpu": "150m", "memory": "0.8G"},
        limits={"cpu": "3", "memory": "4G"},
    )
    assert out.requests == {"deployment": {"cpu": q("225m"), "memory": q("1200000k")}}
    assert out.limits == {}


def test_gap_limits_follow_the_new_request() -> None:
    gap = {"cpu": {"value": "1", "percentage": 80}, "memory": {"value": "1", "percentage": 80}}
    m = manifest()
    m["spec"]["vpa"]["limitsRequestsGapScaleParams"] = gap
    out = decide(
        parse(m),
        3,
        {"cpu": "150m", "memory": "2.2G"},
        {"cpu": "150m", "memory": "0.8G"},
        limits={"cpu": "3", "memory": "4G"},
    )
    # max(225m x 1.8, 225m + 1) and max(1.2G x 1.8, 1.2G + 1 byte), memory rounded up to kB
    assert out.limits == {"deployment": {"cpu": q("1225m"), "memory": q("2160000k")}}


def test_missing_limits_are_never_added() -> None:
    out = decide(parse(manifest()), 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"})
    assert out.limits == {}


def test_recommendation_below_min_allowed_is_floored_and_keeps_replicas() -> None:
    # both totals fall below the smallest bucket: tandem keeps the first bucket (upstream divides by 0)
    out = decide(parse(manifest()), 1, {"cpu": "300m", "memory": "500M"}, {"cpu": "50m", "memory": "100M"})
    assert out.replicas is None
    assert out.requests == {"deployment": {"cpu": q("100m"), "memory": q("200M")}}


def test_recommendation_beyond_the_last_interval_takes_its_max_replicas_and_max_allowed() -> None:
    out = decide(parse(manifest()), 4, {"cpu": "10", "memory": "20G"}, {"cpu": "50", "memory": "20G"})
    assert out.replicas == 6
    # 200 cores / 6 per pod would exceed maxAllowed 40: tandem keeps requests within bounds
    assert out.requests["deployment"]["cpu"] == q("33333m")
    capped = decide(parse(manifest()), 6, {"cpu": "30", "memory": "20G"}, {"cpu": "50", "memory": "20G"})
    assert capped.replicas is None and capped.requests == {"deployment": {"cpu": q("40")}}


def test_a_workload_beyond_the_buckets_is_only_moved_into_them_by_a_change() -> None:
    p = parse(manifest())
    blocked = decide(
        p, 8, {"cpu": "10", "memory": "20G"}, {"cpu": "5", "memory": "10G"}, memory={"last_scale_time": T0 - 60}
    )
    assert reasons(blocked) == {"StabilizationWindow"} and blocked.replicas is None
    moved = decide(p, 8, {"cpu": "10", "memory": "20G"}, {"cpu": "5", "memory": "10G"})
    assert moved.replicas is not None and p.min_replicas <= moved.replicas <= p.max_replicas


def test_min_change_of_one_container_is_waived_when_another_changes_the_pod() -> None:
    p = parse(manifest(intervals=ROUND_INTERVALS, containers=("app", "side")))
    small = {"cpu": "260m", "memory": "610M"}
    spec = {
        "app": {"requests": {"cpu": "250m", "memory": "600M"}},
        "side": {"requests": {"cpu": "250m", "memory": "600M"}},
    }
    out = p.decide(view(2, spec, {"app": {"cpu": "300m", "memory": "700M"}, "side": small}), {})
    assert out.blocked == []
    assert out.requests == {
        "app": {"cpu": q("300m"), "memory": q("700M")},
        "side": {"cpu": q("260m"), "memory": q("610M")},
    }
    alone = p.decide(view(2, spec, {"app": {"cpu": "250m", "memory": "600M"}, "side": small}), {})
    assert reasons(alone) == {"MinChange"} and alone.requests == {}


def test_containers_without_recommendation_or_in_mode_off_are_untouched() -> None:
    m = manifest(containers=("deployment",))
    m["spec"]["vpa"]["template"]["spec"]["resourcePolicy"]["containerPolicies"].append(policy_of("sidecar", mode="Off"))
    p = parse(m)
    spec = {
        "deployment": {"requests": {"cpu": "150m", "memory": "1.8G"}},
        "sidecar": {"requests": {"cpu": "10m", "memory": "10M"}},
        "other": {"requests": {"cpu": "10m", "memory": "10M"}},
    }
    targets = {"deployment": {"cpu": "500m", "memory": "4G"}, "sidecar": {"cpu": "1", "memory": "1G"}}
    out = p.decide(view(1, spec, targets), {})
    assert out.replicas == 2 and set(out.requests) == {"deployment"}


# --- 3.5 bookkeeping ------------------------------------------------------------------------------


def test_scaling_remembers_time_inputs_and_result_as_json_values() -> None:
    memory: dict[str, Any] = {}
    out = decide(
        parse(manifest()), 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory
    )
    assert out.replicas == 2
    assert memory == {
        "last_scale_time": T0,
        "last_processed": {
            "hpa_desired_replicas": None,
            "vpa_target": {"deployment": {"cpu": q("500m"), "memory": q("4G")}},
        },
        "last_scaling": {
            "replicas": 2,
            "requests": {"deployment": {"cpu": q("250m"), "memory": q("2G")}},
            "limits": {},
        },
    }


def test_unchanged_recommendation_is_not_processed_again() -> None:
    p = parse(manifest())
    memory: dict[str, Any] = {}
    decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory)
    saved = copy.deepcopy(memory)
    # the workload now shows the scaling; the VPA still says 500m/4G per pod
    out = decide(p, 2, {"cpu": "250m", "memory": "2G"}, {"cpu": "500m", "memory": "4G"}, memory=memory, tick=T0 + 600)
    assert out.replicas is None and out.requests == {} and out.blocked == []
    assert memory == saved
    # drift: the old spec is back, so the last scaling is applied again without a new timestamp
    drift = decide(
        p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory, tick=T0 + 900
    )
    assert drift.replicas == 2 and drift.requests == {"deployment": {"cpu": q("250m"), "memory": q("2G")}}
    assert memory == saved


def test_blocked_scaling_leaves_the_recommendation_unprocessed() -> None:
    p = parse(manifest())
    memory: dict[str, Any] = {"last_scale_time": T0 - 60}
    decide(p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory)
    assert "last_processed" not in memory
    later = decide(
        p, 1, {"cpu": "150m", "memory": "1.8G"}, {"cpu": "500m", "memory": "4G"}, memory=memory, tick=T0 + 300
    )
    assert later.replicas == 2


# --- parsing and validation --------------------------------------------------------------------


def test_parse_policy_dispatches_the_gardener_api_group_to_line_b() -> None:
    p = parse_policy(manifest(), REF)
    assert isinstance(p, HvpaV2Policy)
    assert (p.kind, p.name, p.workload) == ("Hvpa", "web", REF)


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    m = copy.deepcopy(base or manifest())
    cur: Any = m
    parts = path.split(".")
    for part in parts[:-1]:
        if "[" in part:
            name, idx = part[:-1].split("[")
            cur = cur[name][int(idx)]
        else:
            cur = cur.setdefault(part, {})
    if value is _DELETE:
        del cur[parts[-1]]
    else:
        cur[parts[-1]] = value
    return m


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.scaleIntervals", _DELETE, "spec.scaleIntervals"),
        ("spec.scaleIntervals", [], "spec.scaleIntervals"),
        ("spec.scaleIntervals[1].maxReplicas", 1, "spec.scaleIntervals[1].maxReplicas"),
        ("spec.scaleIntervals[0].maxReplicas", _DELETE, "spec.scaleIntervals[0].maxReplicas"),
        ("spec.scaleIntervals[0].maxReplicas", "two", "spec.scaleIntervals[0].maxReplicas"),
        ("spec.scaleIntervals[2].maxCpu", "lots", "spec.scaleIntervals[2].maxCpu"),
        ("spec.scaleIntervals[0].maxMemory", "100M", "spec.scaleIntervals[0].maxMemory"),  # below minAllowed
        (
            "spec.scaleIntervals[1].effectiveIntervalExtrapolation",
            "cubic",
            "spec.scaleIntervals[1].effectiveIntervalExtrapolation",
        ),
        ("spec.hpa.template.spec.minReplicas", 0, "spec.hpa.template.spec.minReplicas"),
        ("spec.hpa.template.spec.minReplicas", 2, "spec.scaleIntervals[0].maxReplicas"),
        ("spec.hpa.deploy", "yes", "spec.hpa.deploy"),
        ("spec.scaleUp.updatePolicy.updateMode", "Sometimes", "spec.scaleUp.updatePolicy.updateMode"),
        ("spec.scaleDown.updatePolicy.updateMode", "MaintenanceWindow", "spec.maintenanceTimeWindow"),
        ("spec.scaleDown.stabilizationDuration", "3 minutes", "spec.scaleDown.stabilizationDuration"),
        ("spec.scaleUp.minChange.cpu.percentage", -5, "spec.scaleUp.minChange.cpu.percentage"),
        ("spec.scalingIntervalsOverlap.cpu.percentage", "20%", "spec.scalingIntervalsOverlap.cpu.percentage"),
        ("spec.baseResourcesPerReplica", {"memory": {"value": "ten"}}, "spec.baseResourcesPerReplica.memory.value"),
        ("spec.vpa.limitsRequestsGapScaleParams", {"cpu": 5}, "spec.vpa.limitsRequestsGapScaleParams.cpu"),
        ("spec.maintenanceTimeWindow", {"begin": "22:00", "end": "230000+0000"}, "spec.maintenanceTimeWindow.begin"),
    ],
)
def test_invalid_manifests_name_the_offending_field(path: str, value: Any, field: str) -> None:
    with pytest.raises(InvalidPolicy) as err:
        parse(_with(path, value))
    assert err.value.field == field


def test_interval_without_maximum_needs_a_max_allowed_to_default_to() -> None:
    m = manifest(intervals=[{"maxMemory": "2G", "maxReplicas": 2}])
    del m["spec"]["vpa"]["template"]["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"]
    with pytest.raises(InvalidPolicy) as err:
        parse(m)
    assert err.value.field == "spec.scaleIntervals[0].maxCpu"
    assert "maxAllowed.cpu" in err.value.reason
    # without any container policy the intervals alone must give every maximum
    m = manifest(intervals=[{"maxMemory": "2G", "maxReplicas": 2}])
    m["spec"]["vpa"]["template"]["spec"]["resourcePolicy"]["containerPolicies"] = []
    with pytest.raises(InvalidPolicy) as err:
        parse(m)
    assert err.value.field == "spec.scaleIntervals[0].maxCpu"
