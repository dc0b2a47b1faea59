"""Tandem's HPA recommender against the upstream controller (reference hpa-vpa-customhpa.md section 1).

Every vector of reference 1.10 has a test named after the behaviour it pins, asserting the exact
values upstream expects.  Upstream's replica tests use two containers per pod; the vectors give
per-pod sums, so each pod here has two containers ``c1``/``c2`` carrying half of the pod's usage and
request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from scaling.recommend.hpa import (
    Behavior,
    HpaConfig,
    HpaResult,
    HpaState,
    MetricInputs,
    PodInfo,
    ScalingPolicy,
    ScalingRules,
    Tolerances,
    format_milli_quantity,
    limit_legacy,
    limit_with_behavior,
    parse_behavior,
    parse_metrics,
    recommend,
    replicas_changed_in_period,
    stabilize_legacy,
    stabilize_with_behavior,
    store_scale_event,
)

NOW = 1_762_250_400.0  # a tick, in event time
LONG_AGO = NOW - 3600.0  # pods started an hour ago: outside the 300 s CPU initialization period


def cpu_target(pct: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": pct}},
    }


def pod(name: str, state: str = "ready") -> PodInfo:
    """A pod in one of the states the vectors use."""
    if state in ("ready", "missing"):
        return PodInfo(name, ready=True, phase="Running", started=LONG_AGO, ready_since=LONG_AGO + 5)
    if state == "unready":
        # Ready=False and never became ready: last transition within the initial readiness delay.
        return PodInfo(name, ready=False, phase="Running", started=LONG_AGO, ready_since=LONG_AGO + 1)
    if state == "hot":
        # Started 10 s ago, Ready 5 s ago: the 15 s sample window began before readiness.
        return PodInfo(name, ready=True, phase="Running", started=NOW - 10, ready_since=NOW - 5)
    if state == "Failed":
        return PodInfo(name, ready=False, phase="Failed", started=LONG_AGO, ready_since=LONG_AGO)
    if state == "Pending":
        return PodInfo(name, ready=False, phase="Pending", started=None)
    raise AssertionError(state)


def split(total: int) -> dict[str, int]:
    assert total % 2 == 0
    return {"c1": total // 2, "c2": total // 2}


def resource_inputs(
    usages: Sequence[int | None], requests: Sequence[int], resource: str = "cpu"
) -> tuple[list[str], MetricInputs]:
    names = [f"pod-{i}" for i in range(len(requests))]
    usage = {
        n: {c: {resource: v} for c, v in split(u).items()} for n, u in zip(names, usages, strict=False) if u is not None
    }
    per_pod = {n: {c: {resource: v} for c, v in split(r).items()} for n, r in zip(names, requests, strict=True)}
    return names, MetricInputs(pod_usage=usage, pod_requests=per_pod)


def run(
    metrics: Sequence[Mapping[str, Any]],
    *,
    current: int,
    pods: Sequence[PodInfo],
    inputs: MetricInputs,
    status: int | None = None,
    min_replicas: int = 1,
    max_replicas: int = 100,
    behavior: Mapping[str, Any] | None = None,
    state: HpaState | None = None,
    now: float = NOW,
    cfg: HpaConfig | None = None,
) -> tuple[HpaResult, HpaState]:
    return recommend(
        metrics,
        behavior,
        min_replicas,
        max_replicas,
        current,
        current if status is None else status,
        pods,
        inputs,
        state or HpaState(),
        now,
        cfg or HpaConfig(),
    )


def only_proposal(result: HpaResult) -> int | str:
    assert len(result.per_metric) == 1
    return result.per_metric[0][1]


def resource_current(result: HpaResult) -> dict[str, Any]:
    current: dict[str, Any] = result.current_metrics[0]["resource"]["current"]
    return current


# ---------------------------------------------------------------------------------------------
# Reference 1.10 vectors: per-metric proposals
# ---------------------------------------------------------------------------------------------


def test_resource_utilization_scale_up_is_ceil_of_ratio_times_ready_pods() -> None:
    # resource_scale_up: 3000/6000 = 50 % vs 30 % -> ceil(1.667 x 3) = 5
    names, inputs = resource_inputs([600, 1000, 1400], [2000, 2000, 2000])
    result, _ = run([cpu_target(30)], current=3, pods=[pod(n) for n in names], inputs=inputs)
    assert only_proposal(result) == 5
    assert result.desired_replicas == 5
    assert resource_current(result) == {"averageUtilization": 50, "averageValue": "1"}  # 3000m / 3


def test_hot_cpu_pod_inside_initialization_period_counts_as_zero_on_scale_up() -> None:
    # resource_scale_up_hot_cpu_pod: ready pods 2400/4000 = 60 %; the hot pod is assumed at 0:
    # 2400/6000 = 40 % -> ceil(1.333 x 3) = 4; reported utilization is the first ratio's 60 %.
    names, inputs = resource_inputs([600, 1000, 1400], [2000, 2000, 2000])
    pods = [pod(names[0], "hot"), pod(names[1]), pod(names[2])]
    result, _ = run([cpu_target(30)], current=3, pods=pods, inputs=inputs)
    assert only_proposal(result) == 4
    assert resource_current(result)["averageUtilization"] == 60


def test_failed_pods_are_ignored() -> None:
    # resource_failed_pods_ignored: 2400/4000 = 60 % -> ceil(2 x 2 ready pods) = 4
    names, inputs = resource_inputs([1000, 1400, None, None], [2000, 2000, 2000, 2000])
    pods = [pod(names[0]), pod(names[1]), pod(names[2], "Failed"), pod(names[3], "Failed")]
    result, _ = run([cpu_target(30)], current=2, pods=pods, inputs=inputs)
    assert only_proposal(result) == 4
    assert resource_current(result)["averageUtilization"] == 60


def test_scale_down_multiplies_by_ready_pods_and_excludes_unready() -> None:
    # resource_scale_down_excludes_unready: 1800/6000 = 30 % vs 50 % -> ceil(0.6 x 3) = 2
    names, inputs = resource_inputs([200, 600, 1000, 500, 500], [2000] * 5)
    states = ["ready", "ready", "ready", "unready", "unready"]
    result, _ = run(
        [cpu_target(50)], current=5, pods=[pod(n, s) for n, s in zip(names, states, strict=True)], inputs=inputs
    )
    assert only_proposal(result) == 2
    assert resource_current(result)["averageUtilization"] == 30


def test_utilization_within_tolerance_keeps_current() -> None:
    # resource_within_tolerance: 6120/6000 = 102 % -> ratio 1.02 is inside 0.1
    names, inputs = resource_inputs([2020, 2060, 2040], [1800, 2000, 2200])
    result, _ = run([cpu_target(100)], current=3, pods=[pod(n) for n in names], inputs=inputs)
    assert only_proposal(result) == 3
    assert resource_current(result) == {"averageUtilization": 102, "averageValue": "2040m"}


def test_missing_pods_assumed_at_request_on_scale_down() -> None:
    # resource_missing_metrics_scale_down: 990/4000 = 24 %; missing pods at 100 % of request:
    # 4990/8000 = 62 % -> ceil(0.62 x 4) = 3
    names, inputs = resource_inputs([800, 190, None, None], [2000] * 4)
    result, _ = run([cpu_target(100)], current=4, pods=[pod(n) for n in names], inputs=inputs)
    assert only_proposal(result) == 3
    assert resource_current(result)["averageUtilization"] == 24


def test_missing_and_unready_pods_on_scale_down() -> None:
    # resource_missing_and_unready_scale_down: ready 400/4000 = 10 %; the missing pod at
    # max(100, 50) % of its request, the unready pod left out: 2400/6000 = 40 % -> ceil(0.8 x 3) = 3
    names, inputs = resource_inputs([200, 200, 200, None], [2000] * 4)
    pods = [pod(names[0], "unready"), pod(names[1]), pod(names[2]), pod(names[3], "missing")]
    result, _ = run([cpu_target(50)], current=4, pods=pods, inputs=inputs)
    assert only_proposal(result) == 3
    assert resource_current(result)["averageUtilization"] == 10


def pods_metric(name: str, average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": average}},
    }


def test_pods_metric_scales_up_on_the_average() -> None:
    # pods_metric_scale_up: average 20000m vs 15000m -> ceil(1.333 x 3) = 4
    inputs = MetricInputs(series={"qps": {"pod-0": 20.0, "pod-1": 10.0, "pod-2": 30.0}})
    pods = [pod(f"pod-{i}") for i in range(3)]
    result, _ = run([pods_metric("qps", "15")], current=3, pods=pods, inputs=inputs)
    assert only_proposal(result) == 4
    assert result.current_metrics[0]["pods"]["current"] == {"averageValue": "20"}


def test_pods_metric_average_is_truncated_to_int64_milli_and_within_tolerance() -> None:
    # pods_metric_tolerance_int_average: 62000m / 3 = 20666m (truncated) vs 20000m -> 1.033, keep 3
    inputs = MetricInputs(series={"qps": {"pod-0": 20.0, "pod-1": 21.0, "pod-2": 21.0}})
    pods = [pod(f"pod-{i}") for i in range(3)]
    result, _ = run([pods_metric("qps", "20")], current=3, pods=pods, inputs=inputs)
    assert only_proposal(result) == 3
    assert result.current_metrics[0]["pods"]["current"] == {"averageValue": "20666m"}


def object_metric(target: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
            "metric": {"name": "qps"},
            "target": target,
        },
    }


def test_object_value_multiplies_by_ready_running_pods() -> None:
    # object_value_uses_ready_pod_count: 50000m / 10000m = 5 x 1 ready running pod = 5
    pods = [pod("pod-0"), pod("pod-1", "unready"), pod("pod-2", "unready")]
    inputs = MetricInputs(series={"qps": {None: 50.0}})
    result, _ = run([object_metric({"type": "Value", "value": "10"})], current=3, pods=pods, inputs=inputs)
    assert only_proposal(result) == 5
    assert result.current_metrics[0]["object"]["current"] == {"value": "50"}


def test_object_average_value_within_tolerance_keeps_status_replicas() -> None:
    # object_average_value_tolerance: 20166m / (5000m x 4) = 1.008 -> keep 4; reported ceil(20166/4)
    inputs = MetricInputs(series={"qps": {None: 20.166}})
    pods = [pod(f"pod-{i}") for i in range(4)]
    metric = object_metric({"type": "AverageValue", "averageValue": "5"})
    result, _ = run([metric], current=4, status=4, pods=pods, inputs=inputs)
    assert only_proposal(result) == 4
    assert result.current_metrics[0]["object"]["current"] == {"averageValue": "5042m"}


def external_metric(target: dict[str, Any]) -> dict[str, Any]:
    selector = {"matchLabels": {"queue": "jobs"}}
    return {"type": "External", "external": {"metric": {"name": "qps", "selector": selector}, "target": target}}


def test_external_value_scales_down_by_ready_pods() -> None:
    # external_value_scale_down: 8600m / 14334m = 0.59998 -> ceil(0.59998 x 5) = 3
    inputs = MetricInputs(series={"qps": {"a": 8.0, "b": 0.6}})
    pods = [pod(f"pod-{i}") for i in range(5)]
    result, _ = run([external_metric({"type": "Value", "value": "14334m"})], current=5, pods=pods, inputs=inputs)
    assert only_proposal(result) == 3
    assert result.current_metrics[0]["external"]["current"] == {"value": "8600m"}


def test_external_average_value_divides_the_sum_by_the_target() -> None:
    # external_average_value_down: ceil(8600 / 2867) = 3; reported ceil(8600 / 5) = 1720m
    inputs = MetricInputs(series={"qps": {None: 8.6}})
    pods = [pod(f"pod-{i}") for i in range(5)]
    metric = external_metric({"type": "AverageValue", "averageValue": "2867m"})
    result, _ = run([metric], current=5, status=5, pods=pods, inputs=inputs)
    assert only_proposal(result) == 3
    assert result.current_metrics[0]["external"]["current"] == {"averageValue": "1720m"}


def test_one_invalid_metric_blocks_a_scale_down() -> None:
    # multi_metric_one_invalid_blocks_scale_down: CPU proposes ceil(0.56 x 5) = 3 < 5, the other
    # metric is invalid -> no scaling, ScalingActive=False InvalidMetricSourceType.
    names, inputs = resource_inputs([100, 300, 500, 250, 250], [1000] * 5)
    metrics = [cpu_target(50), {"type": "CheddarCheese"}]
    result, state = run(metrics, current=5, min_replicas=2, max_replicas=6, pods=[pod(n) for n in names], inputs=inputs)
    assert result.desired_replicas == 5
    assert result.per_metric[0] == ("cpu resource utilization (percentage of request)", 3)
    assert isinstance(result.per_metric[1][1], str)
    active = result.condition("ScalingActive")
    assert active is not None
    assert (active["status"], active["reason"]) == ("False", "InvalidMetricSourceType")
    # No normalization ran: the history only holds the first-sight seed.
    assert state.recommendations == [(5, NOW)]


# ---------------------------------------------------------------------------------------------
# Reference 1.10 vectors: normalization
# ---------------------------------------------------------------------------------------------


def test_legacy_stabilization_reuses_slots_older_than_the_window() -> None:
    # legacy_stabilize_old_entries_reused: both entries are older than 300 s -> 3, history stays 2 long
    history = [(10, NOW - 600), (9, NOW - 540)]
    stabilized, new_history = stabilize_legacy(history, 3, NOW, 300.0)
    assert stabilized == 3
    assert new_history == [(10, NOW - 600), (3, NOW)]  # the last old entry in list order is overwritten


def test_legacy_scale_up_limit_is_max_of_double_and_four() -> None:
    # legacy_scale_up_limit: max(2 x 3, 4) = 6
    assert limit_legacy(3, 10, 1, 20)[:2] == (6, "ScaleUpLimit")
    # Through the reconcile: the limit binds and ScalingLimited says so.
    inputs = MetricInputs(series={"qps": {None: 100.0}})
    pods = [pod(f"pod-{i}") for i in range(3)]
    result, _ = run(
        [object_metric({"type": "Value", "value": "30"})], current=3, max_replicas=20, pods=pods, inputs=inputs
    )
    assert result.metric_replicas == 10  # ceil(3.333 x 3)
    assert result.desired_replicas == 6
    limited = result.condition("ScalingLimited")
    assert limited is not None and (limited["status"], limited["reason"]) == ("True", "ScaleUpLimit")


def defaulted(behavior: Mapping[str, Any]) -> Behavior:
    b = parse_behavior(behavior)
    assert b is not None
    return b


def test_behavior_default_scale_up_is_max_of_four_pods_and_double() -> None:
    # behavior_default_scale_up: max(10 + 4, ceil(10 x 2)) = 20
    assert limit_with_behavior(10, 50, 1, 1000, [], [], defaulted({}), NOW)[:2] == (20, "ScaleUpLimit")
    # End to end: an Object metric proposing 50 from 10 pods; behavior {} takes the API defaults.
    inputs = MetricInputs(series={"qps": {None: 50.0}})
    pods = [pod(f"pod-{i}") for i in range(10)]
    result, state = run(
        [object_metric({"type": "Value", "value": "10"})],
        current=10,
        max_replicas=1000,
        behavior={},
        pods=pods,
        inputs=inputs,
    )
    assert (result.metric_replicas, result.stabilized_replicas, result.desired_replicas) == (50, 50, 20)
    assert state.scale_up_events == [(10, NOW)]


def test_behavior_percent_policy_rounds_up() -> None:
    # behavior_percent_1pct_rounds_up: ceil(3 x 1.01) = 4
    b = defaulted(
        {"scaleUp": {"policies": [{"type": "Percent", "value": 1, "periodSeconds": 60}], "selectPolicy": "Max"}}
    )
    assert limit_with_behavior(3, 1000, 1, 2000, [], [], b, NOW)[:2] == (4, "ScaleUpLimit")


def test_behavior_scale_down_max_select_takes_the_biggest_drop() -> None:
    # behavior_scale_down_max_select_takes_biggest_drop: min(100 - 20, trunc(100 x 0.99)) = 80
    b = defaulted(
        {
            "scaleDown": {
                "policies": [
                    {"type": "Pods", "value": 20, "periodSeconds": 60},
                    {"type": "Percent", "value": 1, "periodSeconds": 60},
                ],
                "selectPolicy": "Max",
            }
        }
    )
    assert limit_with_behavior(100, 2, 1, 1000, [], [], b, NOW)[:2] == (80, "ScaleDownLimit")


RECENT_UP_EVENTS = [(1, NOW - 100), (5, NOW - 60), (9, NOW - 20)]


def test_behavior_scale_up_subtracts_recent_up_events_from_the_period_start() -> None:
    # behavior_up_with_recent_up_events: (100 - 15) + 150 = 235
    b = defaulted({"scaleUp": {"policies": [{"type": "Pods", "value": 150, "periodSeconds": 120}]}})
    assert limit_with_behavior(100, 500, 1, 1000, RECENT_UP_EVENTS, [], b, NOW)[:2] == (235, "ScaleUpLimit")


def test_behavior_scale_up_percent_with_up_and_down_events() -> None:
    # behavior_up_percent_with_up_and_down_events: periodStart = 6 - 4 + 2 = 4; ceil(4 x 4) = 16
    b = defaulted({"scaleUp": {"policies": [{"type": "Percent", "value": 300, "periodSeconds": 300}]}})
    up, down = [(4, NOW - 60)], [(2, NOW - 60)]
    assert limit_with_behavior(6, 24, 1, 1000, up, down, b, NOW)[:2] == (16, "ScaleUpLimit")


def test_behavior_scale_up_capped_by_max_replicas() -> None:
    # behavior_up_capped_by_max: only the 9 of 20 s ago is inside 60 s: 91 + 300 = 391 > max 200
    b = defaulted({"scaleUp": {"policies": [{"type": "Pods", "value": 300, "periodSeconds": 60}]}})
    assert limit_with_behavior(100, 500, 1, 200, RECENT_UP_EVENTS, [], b, NOW)[:2] == (200, "TooManyReplicas")


def test_behavior_scale_down_percent_with_up_and_down_events() -> None:
    # behavior_down_percent_with_up_and_down_events: periodStart = 10 - 2 + 4 = 12; trunc(12 x 0.5) = 6
    b = defaulted({"scaleDown": {"policies": [{"type": "Percent", "value": 50, "periodSeconds": 180}]}})
    up, down = [(2, NOW - 60)], [(4, NOW - 60)]
    assert limit_with_behavior(10, 1, 1, 1000, up, down, b, NOW)[:2] == (6, "ScaleDownLimit")


def test_behavior_stabilization_scale_down_takes_the_highest_of_the_window() -> None:
    # stabilize_scale_down_window: max(3, 4, 5) = 5; the proposal is appended
    history = [(4, NOW - 120), (5, NOW - 60)]
    stabilized, reason, _, new_history = stabilize_with_behavior(history, 100, 3, NOW, 0.0, 180.0)
    assert (stabilized, reason) == (5, "ScaleDownStabilized")
    assert [r for r, _ in new_history] == [4, 5, 3]


def test_behavior_stabilization_reuses_a_slot_older_than_both_windows() -> None:
    # stabilize_reuse_slot_older_than_both_windows: min(100, 6, 5, 9) = 5; the 6000 s-old slot is reused
    history = [(10, NOW - 6000), (6, NOW - 60), (5, NOW - 120), (9, NOW - 180)]
    stabilized, reason, _, new_history = stabilize_with_behavior(history, 1, 100, NOW, 300.0, 0.0)
    assert (stabilized, reason) == (5, "ScaleUpStabilized")
    assert [r for r, _ in new_history] == [100, 6, 5, 9]


def test_store_scale_event_replaces_the_last_outdated_event() -> None:
    # store_events_replace_last_outdated: longest period 60 s; the two 61 s-old events are outdated
    previous = [(8, NOW - 29), (6, NOW - 59), (7, NOW - 61), (9, NOW - 61)]
    assert replicas_changed_in_period(previous, 60, NOW) == 14
    rules = defaulted(
        {
            "scaleUp": {
                "policies": [
                    {"type": "Pods", "value": 10, "periodSeconds": 60},
                    {"type": "Percent", "value": 100, "periodSeconds": 30},
                ]
            }
        }
    ).scale_up
    assert rules.longest_period == 60
    assert store_scale_event(previous, 5, NOW, rules.longest_period) == [
        (8, NOW - 29),
        (6, NOW - 59),
        (7, NOW - 61),
        (5, NOW),
    ]


def twenty_pods_at(util_pct: int) -> tuple[list[PodInfo], MetricInputs]:
    usage = util_pct * 10  # request 1000m
    names = [f"pod-{i}" for i in range(20)]
    inputs = MetricInputs(
        pod_usage={n: {"app": {"cpu": usage}} for n in names}, container_requests={"app": {"cpu": 1000}}
    )
    return [pod(n) for n in names], inputs


def test_per_hpa_scale_up_tolerance_overrides_the_cluster_flag() -> None:
    # per_hpa_tolerance_asymmetric: 63 % vs 60 % is ratio 1.05 > 1 + 0.02 -> ceil(1.05 x 20) = 21
    pods, inputs = twenty_pods_at(63)
    behavior = {"scaleUp": {"tolerance": "0.02"}}
    result, _ = run([cpu_target(60)], current=20, behavior=behavior, pods=pods, inputs=inputs)
    assert only_proposal(result) == 21
    assert result.desired_replicas == 21
    # Gate off, or no per-HPA tolerance: the cluster's 0.1 keeps 20.
    off, _ = run(
        [cpu_target(60)],
        current=20,
        behavior=behavior,
        pods=pods,
        inputs=inputs,
        cfg=HpaConfig(configurable_tolerance=False),
    )
    assert only_proposal(off) == 20
    plain, _ = run([cpu_target(60)], current=20, behavior={}, pods=pods, inputs=inputs)
    assert only_proposal(plain) == 20


# ---------------------------------------------------------------------------------------------
# Tolerance bounds
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("util", "expected"),
    [
        (55, 20),  # ratio exactly 1.1: inclusive bound, no scale
        (45, 20),  # ratio exactly 0.9: inclusive bound, no scale
        (56, 23),  # 1.12 -> ceil(22.4)
        (44, 18),  # 0.88 -> ceil(17.6)
    ],
)
def test_tolerance_bounds_are_inclusive(util: int, expected: int) -> None:
    pods, inputs = twenty_pods_at(util)
    result, _ = run([cpu_target(50)], current=20, pods=pods, inputs=inputs)
    assert only_proposal(result) == expected


def test_tolerances_is_within() -> None:
    t = Tolerances(0.1, 0.1)
    assert t.is_within(1.1) and t.is_within(0.9) and t.is_within(1.0)
    assert not t.is_within(1.1000000000000003) and not t.is_within(0.8999999999999999)
    asym = Tolerances(scale_down=0.2, scale_up=0.05)
    assert asym.is_within(0.8) and not asym.is_within(1.06)


def test_scale_down_tolerance_per_direction() -> None:
    pods, inputs = twenty_pods_at(42)  # 42/50 = 0.84
    result, _ = run(
        [cpu_target(50)], current=20, behavior={"scaleDown": {"tolerance": "200m"}}, pods=pods, inputs=inputs
    )
    assert only_proposal(result) == 20
    result, _ = run([cpu_target(50)], current=20, pods=pods, inputs=inputs)
    assert only_proposal(result) == 17  # ceil(0.84 x 20) = ceil(16.8)


# ---------------------------------------------------------------------------------------------
# Pod classification and metric sources
# ---------------------------------------------------------------------------------------------


def test_older_pod_that_never_became_ready_is_unready_only_for_cpu() -> None:
    names = ["pod-0", "pod-1"]
    pods = [pod("pod-0"), pod("pod-1", "unready")]
    usage = {n: {"app": {"cpu": 900, "memory": 900}} for n in names}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000, "memory": 1000}})
    cpu, _ = run([cpu_target(50)], current=2, pods=pods, inputs=inputs)
    # CPU: the unready pod is assumed at 0 on a scale-up: 900/2000 = 45 % -> within tolerance of 50 %.
    assert only_proposal(cpu) == 2
    mem_metric = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 50}},
    }
    mem, _ = run([mem_metric], current=2, pods=pods, inputs=inputs)
    # Memory: readiness is not examined: 90 % / 50 % -> ceil(1.8 x 2) = 4.
    assert only_proposal(mem) == 4


def test_pod_that_became_ready_after_its_start_delay_is_ready_despite_ready_false() -> None:
    # Older pod, Ready=False but its last transition is long after start + 30 s: it was ready once.
    flapping = PodInfo("pod-1", ready=False, phase="Running", started=LONG_AGO, ready_since=NOW - 60)
    usage = {n: {"app": {"cpu": 900}} for n in ("pod-0", "pod-1")}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}})
    result, _ = run([cpu_target(50)], current=2, pods=[pod("pod-0"), flapping], inputs=inputs)
    assert only_proposal(result) == 4  # 90 % / 50 % x 2 ready pods


def test_young_pod_is_ready_once_a_full_window_follows_readiness() -> None:
    young = PodInfo("pod-1", ready=True, phase="Running", started=NOW - 100, ready_since=NOW - 60)
    usage = {n: {"app": {"cpu": 900}} for n in ("pod-0", "pod-1")}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}}, sample_ts={"pod-1": NOW - 40})
    result, _ = run([cpu_target(50)], current=2, pods=[pod("pod-0"), young], inputs=inputs)
    assert only_proposal(result) == 4
    late = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}}, sample_ts={"pod-1": NOW - 50})
    result, _ = run([cpu_target(50)], current=2, pods=[pod("pod-0"), young], inputs=late)
    # The sample (window 15 s) started before the pod was ready: unready, assumed 0 -> 45 %, keep 2.
    assert only_proposal(result) == 2


def test_pending_pods_are_unready_and_count_zero_on_scale_up() -> None:
    usage = {"pod-0": {"app": {"cpu": 1500}}}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}})
    result, _ = run([cpu_target(50)], current=2, pods=[pod("pod-0"), pod("pod-1", "Pending")], inputs=inputs)
    # 150 % / 50 % = 3 > 1 with an unready pod: 1500/2000 = 75 % -> ceil(1.5 x 2) = 3.
    assert only_proposal(result) == 3


def test_missing_pods_count_zero_on_scale_up() -> None:
    usage = {"pod-0": {"app": {"cpu": 1500}}}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}})
    result, _ = run([cpu_target(50)], current=2, pods=[pod("pod-0"), pod("pod-1")], inputs=inputs)
    assert only_proposal(result) == 3  # same arithmetic as the pending pod


def test_missing_pods_use_the_target_above_100_percent_on_scale_down() -> None:
    # Current upstream assumes max(100, target) % of the request for a missing pod on scale-down.
    usage = {"pod-0": {"app": {"cpu": 500}}}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}})
    result, _ = run([cpu_target(200)], current=2, pods=[pod("pod-0"), pod("pod-1")], inputs=inputs)
    # r = 50/200 = 0.25; missing at 2000m: 2500/2000 = 125 % -> r2 = 0.625 -> ceil(1.25) = 2.
    assert only_proposal(result) == 2


def test_container_resource_uses_one_container() -> None:
    usage = {f"pod-{i}": {"app": {"cpu": 800}, "sidecar": {"cpu": 10}} for i in range(2)}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}, "sidecar": {"cpu": 1000}})
    metric = {
        "type": "ContainerResource",
        "containerResource": {
            "name": "cpu",
            "container": "app",
            "target": {"type": "Utilization", "averageUtilization": 40},
        },
    }
    result, _ = run([metric], current=2, pods=[pod("pod-0"), pod("pod-1")], inputs=inputs)
    assert result.per_metric[0] == ("cpu container resource utilization (percentage of request)", 4)
    whole, _ = run([cpu_target(40)], current=2, pods=[pod("pod-0"), pod("pod-1")], inputs=inputs)
    assert only_proposal(whole) == 2  # 1620/4000 = 40 %


def test_resource_average_value_uses_memory_bytes() -> None:
    usage = {f"pod-{i}": {"app": {"memory": 600 * 2**20}} for i in range(3)}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"memory": 2**30}})
    metric = {
        "type": "Resource",
        "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "400Mi"}},
    }
    result, _ = run([metric], current=3, pods=[pod(f"pod-{i}") for i in range(3)], inputs=inputs)
    assert result.per_metric[0] == ("memory resource", 5)  # 600/400 = 1.5 -> ceil(4.5)
    assert result.current_metrics[0]["resource"]["current"] == {"averageValue": "629145600"}


def test_missing_request_makes_the_metric_invalid() -> None:
    usage = {"pod-0": {"app": {"cpu": 500}}}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"memory": 100}})
    result, _ = run([cpu_target(50)], current=1, pods=[pod("pod-0")], inputs=inputs)
    assert result.desired_replicas == 1
    assert only_proposal(result) == "missing request for cpu in container app of Pod pod-0"
    active = result.condition("ScalingActive")
    assert active is not None and active["reason"] == "FailedGetResourceMetric"


def test_all_metrics_invalid_means_no_scaling_and_no_history() -> None:
    result, state = run([pods_metric("qps", "1")], current=3, pods=[pod("pod-0")], inputs=MetricInputs())
    assert result.desired_replicas == 3
    assert result.metric_replicas is None
    assert state.recommendations == [(3, NOW)]


def test_largest_valid_metric_wins_and_invalid_ones_do_not_block_a_scale_up() -> None:
    names, inputs = resource_inputs([3000, 3000], [2000, 2000])
    inputs = MetricInputs(pod_usage=inputs.pod_usage, pod_requests=inputs.pod_requests, series={"qps": {None: 30.0}})
    metrics = [cpu_target(50), object_metric({"type": "Value", "value": "10"}), pods_metric("absent", "1")]
    result, _ = run(metrics, current=2, pods=[pod(n) for n in names], inputs=inputs)
    assert [p for _, p in result.per_metric][:2] == [6, 6]  # 150 %/50 % x 2 ; 30/10 x 2
    assert result.metric_replicas == 6
    assert result.desired_replicas == 4  # legacy scale-up limit max(2 x 2, 4)
    active = result.condition("ScalingActive")
    assert active is not None and active["status"] == "True"


def test_object_and_external_scale_from_zero() -> None:
    inputs = MetricInputs(series={"qps": {None: 25.0}})
    result, _ = run(
        [object_metric({"type": "Value", "value": "10"})], current=0, min_replicas=0, pods=[], inputs=inputs
    )
    assert only_proposal(result) == 3  # ceil(2.5), no tolerance, no ready pods needed
    assert result.desired_replicas == 3


# ---------------------------------------------------------------------------------------------
# Reconcile branches and legacy stabilization over time
# ---------------------------------------------------------------------------------------------


def test_target_at_zero_replicas_disables_scaling() -> None:
    result, _ = run([cpu_target(50)], current=0, pods=[], inputs=MetricInputs())
    assert result.desired_replicas == 0
    active = result.condition("ScalingActive")
    assert active is not None and active["reason"] == "ScalingDisabled"


def test_current_outside_bounds_goes_to_the_bound_without_metrics() -> None:
    above, _ = run([cpu_target(50)], current=12, max_replicas=10, pods=[], inputs=MetricInputs())
    assert (above.desired_replicas, above.reason, above.per_metric) == (
        10,
        "Current number of replicas above Spec.MaxReplicas",
        [],
    )
    below, state = run([cpu_target(50)], current=1, min_replicas=3, pods=[], inputs=MetricInputs(), behavior={})
    assert below.desired_replicas == 3
    assert state.scale_up_events == [(2, NOW)]  # a rescale with behavior records an event


def test_legacy_scale_down_waits_for_the_stabilization_window() -> None:
    pods, high = twenty_pods_at(50)
    _, low = twenty_pods_at(25)
    cfg = HpaConfig()
    state = HpaState()
    result, state = run([cpu_target(50)], current=20, pods=pods, inputs=high, state=state, now=NOW, cfg=cfg)
    assert result.desired_replicas == 20
    # From NOW + 15 the load halves: the proposal is 10, but 20 was proposed 15..300 s ago.
    for t in range(15, 300, 15):
        result, state = run([cpu_target(50)], current=20, pods=pods, inputs=low, state=state, now=NOW + t, cfg=cfg)
        assert (result.metric_replicas, result.desired_replicas) == (10, 20)
        able = result.condition("AbleToScale")
        assert able is not None and able["reason"] == "ScaleDownStabilized"
    # At NOW + 300 the last 20 (proposed at NOW) is exactly 300 s old: no longer counted (age < 300).
    result, state = run([cpu_target(50)], current=20, pods=pods, inputs=low, state=state, now=NOW + 300, cfg=cfg)
    assert result.desired_replicas == 10
    assert result.reason == "All metrics below target"
    # History stays bounded: one entry per tick of the window, plus the seed and the boundary one.
    assert len(state.recommendations) <= 22


def test_legacy_has_no_scale_event_memory() -> None:
    usage = {n: {"app": {"cpu": 1000}} for n in ("pod-0", "pod-1")}
    inputs = MetricInputs(pod_usage=usage, container_requests={"app": {"cpu": 1000}})
    result, state = run([cpu_target(50)], current=2, pods=[pod("pod-0"), pod("pod-1")], inputs=inputs)
    assert result.desired_replicas == 4  # 100 % / 50 % x 2, within max(2 x 2, 4)
    assert state.scale_up_events == [] and state.scale_down_events == []


# ---------------------------------------------------------------------------------------------
# Behavior policies and selectPolicy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("select", "expected"), [("Max", 20), ("Min", 14), ("Disabled", 10)])
def test_select_policy_on_scale_up(select: str, expected: int) -> None:
    b = defaulted({"scaleUp": {"selectPolicy": select}})  # default policies: 4 pods, 100 %
    assert limit_with_behavior(10, 50, 1, 1000, [], [], b, NOW)[0] == expected


@pytest.mark.parametrize(("select", "expected"), [("Max", 50), ("Min", 90), ("Disabled", 100)])
def test_select_policy_on_scale_down(select: str, expected: int) -> None:
    policies = [
        {"type": "Pods", "value": 10, "periodSeconds": 60},
        {"type": "Percent", "value": 50, "periodSeconds": 60},
    ]
    b = defaulted({"scaleDown": {"selectPolicy": select, "policies": policies}})
    assert limit_with_behavior(100, 1, 1, 1000, [], [], b, NOW)[0] == expected


def test_scale_down_respects_min_replicas_with_reason() -> None:
    b = defaulted({})
    assert limit_with_behavior(10, 1, 3, 1000, [], [], b, NOW)[:2] == (3, "TooFewReplicas")


def test_events_exactly_one_period_old_no_longer_count() -> None:
    assert replicas_changed_in_period([(4, NOW - 15), (2, NOW - 14.5)], 15, NOW) == 2


def test_behavior_defaults_only_when_behavior_is_present() -> None:
    assert parse_behavior(None) is None
    b = defaulted({"scaleDown": {"stabilizationWindowSeconds": 60}})
    assert b.scale_up == ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
    assert b.scale_down == ScalingRules(60, "Max", (ScalingPolicy("Percent", 100, 15),))
    assert defaulted({}).scale_down.stabilization_window_seconds is None  # filled by the controller flag


@pytest.mark.parametrize(
    ("behavior", "message"),
    [
        ({"scaleUp": {"selectPolicy": "Fastest"}}, "behavior.scaleUp.selectPolicy: unknown 'Fastest'"),
        ({"scaleDown": {"policies": []}}, "behavior.scaleDown.policies: must specify at least one Policy"),
        ({"scaleDown": {"stabilizationWindowSeconds": 3601}}, "behavior.scaleDown.stabilizationWindowSeconds"),
        ({"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 0}]}}, "policies[0].periodSeconds"),
        ({"scaleUp": {"policies": [{"type": "Nodes", "value": 1, "periodSeconds": 5}]}}, "policies[0].type"),
        ({"scaleUp": {"tolerance": "-1"}}, "behavior.scaleUp.tolerance"),
    ],
)
def test_bad_behavior_raises_with_the_field_path(behavior: Mapping[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_behavior(behavior)


def test_behavior_scale_down_is_rate_limited_across_ticks() -> None:
    # Pods 2 per 60 s; a stable 25 % load on 20 pods proposes 10 each tick.
    behavior = {
        "scaleDown": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}
    }
    state = HpaState()
    current = 20
    seen = []
    for t in range(0, 181, 15):
        names = [f"pod-{i}" for i in range(current)]
        usage = 5000 // current  # total demand 5000m over 1000m requests at 50 % target
        inputs = MetricInputs(
            pod_usage={n: {"app": {"cpu": usage}} for n in names}, container_requests={"app": {"cpu": 1000}}
        )
        result, state = run(
            [cpu_target(50)],
            current=current,
            pods=[pod(n) for n in names],
            inputs=inputs,
            behavior=behavior,
            state=state,
            now=NOW + t,
        )
        current = result.desired_replicas
        seen.append(current)
    # -2 at 0 s, then nothing until that event is 60 s old (age < 60 counts), and so on.
    assert seen == [18, 18, 18, 18, 16, 16, 16, 16, 14, 14, 14, 14, 12]


# ---------------------------------------------------------------------------------------------
# Specs, config, state
# ---------------------------------------------------------------------------------------------


def test_v2beta1_specs_are_converted() -> None:
    specs = parse_metrics(
        [
            {"type": "Resource", "resource": {"name": "cpu", "targetAverageUtilization": 60}},
            {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "500m"}},
            {
                "type": "Object",
                "object": {"target": {"kind": "Ingress", "name": "main"}, "metricName": "hits", "targetValue": 10},
            },
            {"type": "External", "external": {"metricName": "queue", "targetAverageValue": "30"}},
        ]
    )
    assert (specs[0].target_type, specs[0].average_utilization) == ("Utilization", 60)
    assert (specs[1].name, specs[1].average_value) == ("qps", 500)
    assert (specs[2].target_type, specs[2].value, specs[2].described_object) == (
        "Value",
        10000,
        {"kind": "Ingress", "name": "main"},
    )
    assert (specs[3].target_type, specs[3].average_value) == ("AverageValue", 30000)


def test_no_metrics_defaults_to_cpu_80_percent() -> None:
    (spec,) = parse_metrics([])
    assert (spec.type, spec.name, spec.average_utilization) == ("Resource", "cpu", 80)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Foo"}}},
            "metrics[0].resource.target.type: unknown 'Foo'",
        ),
        (
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
            "metrics[0].resource.target.averageUtilization: required",
        ),
        (
            {
                "type": "Pods",
                "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "lots"}},
            },
            "metrics[0].pods.target.averageValue: 'lots' is not a Kubernetes quantity",
        ),
        ({"type": "Object", "object": {"metric": {"name": "x"}, "target": {}}}, "metrics[0].object.describedObject"),
        ({"type": "External", "external": {"target": {"type": "Value", "value": 1}}}, "metrics[0].external.metric"),
        ({"resource": {}}, "metrics[0].type"),
    ],
)
def test_bad_metric_specs_raise_with_the_field_path(spec: Mapping[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        recommend([spec], None, 1, 10, 1, 1, [pod("pod-0")], MetricInputs(), HpaState(), NOW, HpaConfig())


def test_config_from_mapping_accepts_upstream_names() -> None:
    cfg = HpaConfig.from_mapping(
        {
            "horizontal-pod-autoscaler-tolerance": 0.05,
            "horizontal-pod-autoscaler-downscale-stabilization": "5m0s",
            "cpuInitializationPeriod": "2m",
            "initial_readiness_delay": 10,
            "horizontalPodAutoscalerSyncPeriod": "30s",
            "HPAConfigurableTolerance": False,
        }
    )
    assert cfg == HpaConfig(0.05, 300.0, 120.0, 10.0, 30.0, False)
    assert HpaConfig.from_mapping(None) == HpaConfig()
    with pytest.raises(ValueError, match=re.escape("hpa.horizontal-pod-autoscaler-upscale-delay: unknown setting")):
        HpaConfig.from_mapping({"horizontal-pod-autoscaler-upscale-delay": "3m"})
    with pytest.raises(ValueError, match=re.escape("hpa.tolerance")):
        HpaConfig.from_mapping({"tolerance": -1})
    with pytest.raises(ValueError, match="duplicates"):
        HpaConfig.from_mapping({"tolerance": 0.1, "horizontal-pod-autoscaler-tolerance": 0.2})


def test_state_round_trips_through_a_plain_dict() -> None:
    state = HpaState([(3, NOW), (4, NOW + 15.5)], [(2, NOW)], [(1, NOW + 30)])
    d = state.to_dict()
    assert d == {
        "recommendations": [[3, NOW], [4, NOW + 15.5]],
        "scale_up_events": [[2, NOW]],
        "scale_down_events": [[1, NOW + 30]],
    }
    assert HpaState.from_dict(d) == state
    assert HpaState.from_dict({}) == HpaState()
    with pytest.raises(ValueError, match=r"scale_up_events\[0\]"):
        HpaState.from_dict({"scale_up_events": [["2", NOW]]})


def test_recommend_does_not_mutate_the_given_state() -> None:
    state = HpaState()
    pods, inputs = twenty_pods_at(50)
    _, new_state = run([cpu_target(50)], current=20, pods=pods, inputs=inputs, state=state)
    assert state == HpaState() and new_state.recommendations == [(20, NOW), (20, NOW)]


def test_format_milli_quantity_is_canonical_decimal_si() -> None:
    assert [format_milli_quantity(v) for v in (0, 1500, 20000, 2_000_000, 629145600000, 20666)] == [
        "0",
        "1500m",
        "20",
        "2k",
        "629145600",
        "20666m",
    ]


# ---------------------------------------------------------------------------------------------
# HPA replicas follow the load
# ---------------------------------------------------------------------------------------------

DAY = 24 * 3600
TICK = 15


def hourly_demand(t: float) -> int:
    """A generated daily CPU demand curve, in millicores for the whole workload.

    Quiet night, a morning ramp, a plateau over the working day, an evening step down.
    """
    hour = int(t // 3600) % 24
    if hour < 7:
        return 2000
    if hour < 9:
        return 6000
    if hour < 17:
        return 12000
    if hour < 21:
        return 6000
    return 2000


def simulate_day(behavior: Mapping[str, Any] | None) -> dict[int, int]:
    """Run recommend() every 15 s for a day; per-pod usage = demand // replicas; feed back."""
    start = NOW - NOW % DAY  # midnight
    current = 4
    state = HpaState()
    replicas_at: dict[int, int] = {}
    for t in range(0, DAY, TICK):
        names = [f"web-{i}" for i in range(current)]
        usage = hourly_demand(t) // current
        inputs = MetricInputs(
            pod_usage={n: {"app": {"cpu": usage}} for n in names}, container_requests={"app": {"cpu": 1000}}
        )
        pods = [PodInfo(n, ready=True, phase="Running", started=start - 3600, ready_since=start - 3590) for n in names]
        result, state = recommend(
            [cpu_target(50)], behavior, 2, 30, current, current, pods, inputs, state, start + t, HpaConfig()
        )
        current = result.desired_replicas
        replicas_at[t] = current  # replicas after the tick at t
    return replicas_at


def hms(h: int, m: int = 0, s: int = 0) -> int:
    return h * 3600 + m * 60 + s


def test_hpa_replicas_follow_the_daily_load() -> None:
    r = simulate_day(behavior=None)
    # 00:00-07:00, 2000m on 4 pods: 500m = 50 % of the 1000m request, ratio 1 -> 4 all night.
    assert r[hms(6, 59, 45)] == 4
    # 07:00, demand 6000m: 1500m/pod = 150 % -> ceil(3 x 4) = 12, capped by max(2 x 4, 4) = 8.
    assert r[hms(7)] == 8
    # 07:00:15, 8 pods: 750m = 75 % -> ceil(1.5 x 8) = 12 (limit 16); then 500m each, stable.
    assert r[hms(7, 0, 15)] == 12
    assert r[hms(8, 59, 45)] == 12
    # 09:00, 12000m on 12 pods: 100 % -> ceil(2 x 12) = 24 = max(2 x 12, 4) -> 24, stable at 500m.
    assert r[hms(9)] == 24
    assert r[hms(12)] == 24
    # 17:00, 6000m on 24 pods: 250m = 25 % -> ceil(0.5 x 24) = 12, but the 24 proposed until
    # 16:59:45 holds it (legacy 300 s window) until that proposal is 300 s old at 17:04:45.
    assert r[hms(17)] == 24
    assert r[hms(17, 4, 30)] == 24
    assert r[hms(17, 4, 45)] == 12
    # 21:00, 2000m on 12 pods: 166m, 1992/12000 = 16 % -> ceil(0.32 x 12) = ceil(3.84) = 4, after 300 s.
    assert r[hms(21, 4, 30)] == 12
    assert r[hms(21, 4, 45)] == 4
    assert r[hms(23, 59, 45)] == 4
    assert max(r.values()) == 24 and min(r.values()) == 4


def test_hpa_replicas_follow_the_daily_load_with_behavior() -> None:
    behavior = {"scaleDown": {"policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}
    r = simulate_day(behavior)
    # Scale-up: default policies allow max(4 + 4, ceil(4 x 2)) = 8 at 07:00, 12 at 07:00:15.
    assert r[hms(7)] == 8
    assert r[hms(7, 0, 15)] == 12
    assert r[hms(9)] == 24
    # 17:00: proposals of 12 wait for the 300 s default window (the 24 of 16:59:45 ages out at
    # 17:04:45), then at most 2 pods per 60 s: 22, 20 at 17:05:45, ... 12 at 17:09:45.
    assert r[hms(17, 4, 30)] == 24
    assert r[hms(17, 4, 45)] == 22
    assert r[hms(17, 5, 30)] == 22
    assert r[hms(17, 5, 45)] == 20
    assert r[hms(17, 8, 45)] == 14
    assert r[hms(17, 9, 45)] == 12
    assert r[hms(20)] == 12
    # 21:00: proposal 4 from 12 pods; after the window, 2 per minute: 10 at 21:04:45 ... 4 at 21:07:45.
    assert r[hms(21, 4, 45)] == 10
    assert r[hms(21, 7, 45)] == 4
    assert r[hms(23, 59, 45)] == 4


# --- the plain-pods fast paths (replica_calculator._plain_pods) give the general path's results ---

_pod = st.builds(
    PodInfo,
    st.sampled_from(["p0", "p1", "p2", "p3"]),
    st.booleans(),
    st.sampled_from(["Running", "Running", "Pending", "Failed", "Succeeded"]),
    st.sampled_from([None, float("-inf"), float("nan"), NOW - 3600.0, NOW - 300.0, NOW - 299.0, NOW - 10.0]),
    st.sampled_from([None, NOW - 3600.0, NOW - 20.0]),
    st.booleans(),
)


@hyp_settings(max_examples=300, deadline=None)
@given(
    pods=st.lists(_pod, max_size=5),
    usage=st.dictionaries(
        st.sampled_from(["p0", "p1", "p2", "p3", "p9"]),
        st.dictionaries(
            st.sampled_from(["c1", "c2"]),
            st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(0, 5000), max_size=2),
            min_size=1,
            max_size=2,
        ),
        max_size=5,
    ),
    resource=st.sampled_from(["cpu", "memory"]),
    container=st.sampled_from(["", "c1"]),
    value_target=st.booleans(),
    as_tuple=st.booleans(),
    per_pod_requests=st.booleans(),
)
def test_plain_pod_fast_paths_match_the_general_path(
    pods: list[PodInfo],
    usage: dict[str, Any],
    resource: str,
    container: str,
    value_target: bool,
    as_tuple: bool,
    per_pod_requests: bool,
) -> None:
    from scaling.recommend.hpa import replica_calculator

    kind = "ContainerResource" if container else "Resource"
    target = (
        {"type": "AverageValue", "averageValue": "300m"}
        if value_target
        else {"type": "Utilization", "averageUtilization": 60}
    )
    field = {"name": resource, "target": target}
    if container:
        field["container"] = container
    metrics = [{"type": kind, ("containerResource" if container else "resource"): field}]
    requests = {"c1": {"cpu": 500, "memory": 1000}, "c2": {"cpu": 250, "memory": 2000}}
    inputs = MetricInputs(
        usage,
        requests,
        pod_requests={"p1": {"c1": {"cpu": 100, "memory": 100}}} if per_pod_requests else {},
        sample_ts={p: NOW - 5.0 for p in usage},
    )
    seq: Sequence[PodInfo] = tuple(pods) if as_tuple else pods

    def run() -> tuple[Any, ...]:
        r, s = recommend(metrics, None, 1, 20, 4, 4, seq, inputs, HpaState(), NOW)
        return (r.desired_replicas, r.conditions, r.per_metric, r.current_metrics, r.metric_replicas, s)

    fast = run()
    replica_calculator._PLAIN.clear()
    plain = replica_calculator._plain_pods
    replica_calculator._plain_pods = lambda _pods: None  # type: ignore[assignment]
    try:
        general = run()
    finally:
        replica_calculator._plain_pods = plain
    assert general == fast


def test_pod_whose_metrics_lack_the_container_is_missing_not_an_error() -> None:
    # HPA: metrics/client.go getContainerMetrics (k8s.io/kubernetes 1.36) only logs a pod whose
    # metrics lack the container: b is missing, a alone gives 1000m / 500m = 200 %; scaling up,
    # the missing pod counts 0: (1000 + 0) / 1000 = 100 %, inside the tolerance: keep 2 replicas.
    from scaling.recommend.hpa.config import HpaConfig as Cfg
    from scaling.recommend.hpa.metric_specs import MetricSpec
    from scaling.recommend.hpa.model import MetricInputs as Inputs
    from scaling.recommend.hpa.model import PodInfo as Pod
    from scaling.recommend.hpa.replica_calculator import Ctx, Tolerances, resource_utilization_replicas

    now = 1_700_000_000.0
    pods = (Pod("a", True, "Running", now - 3600, now - 3000), Pod("b", True, "Running", now - 3600, now - 3000))
    inputs = Inputs(
        pod_usage={"a": {"app": {"cpu": 1000}, "side": {"cpu": 100}}, "b": {"side": {"cpu": 100}}},
        container_requests={"app": {"cpu": 500}, "side": {"cpu": 100}},
    )
    ctx = Ctx(pods, inputs, now, Cfg(), Tolerances(0.1, 0.1), 2, 2)
    spec = MetricSpec(0, "ContainerResource", "cpu", "app", "Utilization", average_utilization=100)
    assert resource_utilization_replicas(ctx, spec) == (2, 200, 1000)
