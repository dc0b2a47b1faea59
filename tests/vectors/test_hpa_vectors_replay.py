"""Reference ``hpa-vpa-customhpa.md`` 1.10 (HPA vectors) through ``tandem replay`` end to end.

Each vector's inputs are written as contract events (docs/contract.md §3): a ``workload`` event
(replicas, container requests and, where the vector needs readiness or phase, ``pods``), ``metric``
events with container samples or named series, and an Hvpa (released API) manifest whose
``spec.hpa.template.spec`` carries the vector's bounds, metrics and behavior.  No cluster sends
``hpa`` events, so tandem's own HPA recommender decides; ``--include-recommendations`` writes its
``hpa`` events, and the tests assert ``desired_replicas`` and the conditions the vector states.

How vector inputs map to events:

* Upstream replica tests use two containers per pod; the vectors give per-pod sums, so each pod here
  has containers ``c1``/``c2`` with half the pod's usage and request.
* The contract has one request per container (the pod template's).  Utilization only depends on the
  sums of usage and request over the pods that have samples, so a vector with unequal per-pod
  requests (``resource_within_tolerance``: 1800/2000/2200) is expressed with equal ones of the same
  sum (3 x 2000).
* A pod's Ready-condition transition time is not in the contract; tandem takes ``started`` for it.
  "unready" pods are Running, ``ready: false``, started long ago (never became ready); the "hot"
  CPU pod started 10 s before the sample, which lies inside the 15 s sample window after readiness.
* Scale-down vectors give the replica calculator's proposal.  Without ``behavior`` the controller
  holds a scale-down for the 300 s downscale stabilization window (the first reconcile seeds the
  history with the current replicas), so those tests feed the same samples every 15 s and assert
  the HPA holds the current replicas until ``T + 300`` and proposes the vector's value there.
* Normalization vectors (stabilization, rate limits, scale events) state a proposal and previous
  recommendations or scale events.  Proposals come from one External ``AverageValue`` metric with
  target 1 (``demand``): its proposal is ``ceil(value)`` whenever ``value / replicas`` is outside
  the tolerance.  Previous recommendations and scale events are produced by earlier ticks, each
  with a ``workload`` event pinning the replicas of that moment (upstream's tests plant them in the
  controller's memory the same way); a tick without any ``demand`` sample has no valid metric, which
  seeds the history with the current replicas and stores nothing else (reference 1.1 step 2, 1.6).
  Ages that are not multiples of 15 s use ``--sync-period``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.replaying import ev, replay

T = 1_762_250_400.0  # 2025-11-04T10:00:00Z: a multiple of 1, 15, 20 and 60 s
LONG_AGO = T - 3600.0  # outside the 300 s CPU initialization period

# ---------------------------------------------------------------------------------------------
# Events and manifests
# ---------------------------------------------------------------------------------------------


def hvpa(
    metrics: Sequence[Mapping[str, Any]],
    *,
    behavior: Mapping[str, Any] | None = None,
    min_replicas: int = 1,
    max_replicas: int = 100,
) -> dict[str, Any]:
    """An Hvpa (released API) deploying an HPA with ``metrics``/``behavior``, and no VPA."""
    template: dict[str, Any] = {"minReplicas": min_replicas, "maxReplicas": max_replicas, "metrics": list(metrics)}
    if behavior is not None:
        template["behavior"] = dict(behavior)
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"},
        },
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "hpa": {"deploy": True, "template": {"spec": template}},
            "vpa": {"deploy": False},
        },
    }


def cpu_utilization(pct: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": pct}},
    }


def pods_metric(name: str, average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": average}},
    }


def object_metric(name: str, target: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "main"},
            "metric": {"name": name},
            "target": dict(target),
        },
    }


def external_metric(name: str, target: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "External", "external": {"metric": {"name": name}, "target": dict(target)}}


#: The proposal driver of the normalization vectors: proposal = ceil(demand) (outside tolerance).
DEMAND = external_metric("demand", {"type": "AverageValue", "averageValue": "1"})


def containers(pod_request_m: int = 2000) -> dict[str, Any]:
    """Two containers ``c1``/``c2`` sharing the pod's CPU request."""
    half = f"{pod_request_m // 2}m"
    return {"c1": {"requests": {"cpu": half}}, "c2": {"requests": {"cpu": half}}}


def pod(name: str, state: str = "ready", *, tick: float = T) -> dict[str, Any]:
    """A pod in one of the vector states (see the module docstring)."""
    if state == "ready":
        return {"name": name, "ready": True, "phase": "Running", "started": LONG_AGO}
    if state == "unready":
        return {"name": name, "ready": False, "phase": "Running", "started": LONG_AGO}
    if state == "hot":
        return {"name": name, "ready": True, "phase": "Running", "started": tick - 10}
    if state == "Failed":
        return {"name": name, "ready": False, "phase": "Failed", "started": LONG_AGO}
    raise AssertionError(state)


def names(n: int) -> list[str]:
    return [f"pod-{i}" for i in range(n)]


def workload(
    ts: float, replicas: int, *, pods: Sequence[Mapping[str, Any]] | None = None, request_m: int = 2000
) -> dict[str, Any]:
    fields: dict[str, Any] = {"replicas": replicas, "containers": containers(request_m)}
    if pods is not None:
        fields["pods"] = list(pods)
    return ev("workload", ts, **fields)


def cpu_samples(ts: float, usage_m: Sequence[int | None]) -> dict[str, Any]:
    """One scrape: pod ``pod-i`` uses ``usage_m[i]`` millicores, half in each container (None: no sample)."""
    samples = []
    for name, u in zip(names(len(usage_m)), usage_m, strict=True):
        if u is None:
            continue
        assert u % 2 == 0
        samples += [{"pod": name, "container": c, "cpu": (u // 2) / 1000} for c in ("c1", "c2")]
    return ev("metric", ts, samples=samples)


def series(ts: float, name: str, values: Mapping[str | None, float]) -> dict[str, Any]:
    samples = [{"series": name, "value": v, **({"pod": p} if p is not None else {})} for p, v in values.items()]
    return ev("metric", ts, samples=samples)


def demand_tick(ts: float, replicas: int, demand: float | None) -> list[dict[str, Any]]:
    """A tick of the normalization vectors: the replicas at ``ts`` and the demand (None: no sample)."""
    out = [workload(ts, replicas)]
    if demand is not None:
        out.append(series(ts, "demand", {None: demand}))
    return out


def every_tick(start: float, end: float, make: Any, step: float = 15.0) -> list[dict[str, Any]]:
    """``make(ts)``'s events at every tick from ``start`` to ``end`` inclusive."""
    out: list[dict[str, Any]] = []
    for i in range(int((end - start) // step) + 1):
        out += make(start + i * step)
    return out


# ---------------------------------------------------------------------------------------------
# Running and reading
# ---------------------------------------------------------------------------------------------


def run_hpa(
    tmp_path: Path, events: Iterable[Mapping[str, Any]], policy: Mapping[str, Any], *extra: str
) -> list[dict[str, Any]]:
    """Replay; return tandem's own ``hpa`` events (published when they change)."""
    out, err = replay(tmp_path, events, [policy], "--include-recommendations", *extra)
    assert "rejected 0" in err, err
    hpas = [e for e in out if e.get("type") == "hpa"]
    assert hpas, "no hpa recommendation was published"
    assert all(e["source"] == "tandem" for e in hpas)
    return hpas


def at(hpas: Sequence[Mapping[str, Any]], tick: float) -> Mapping[str, Any]:
    """The HPA recommendation in force at ``tick``: the last one published at or before it."""
    current = [e for e in hpas if e["ts"] <= tick]
    assert current, f"nothing published by {tick}"
    return current[-1]


def published(hpas: Sequence[Mapping[str, Any]]) -> list[tuple[float, int]]:
    """(seconds after T, desired replicas) of every published recommendation."""
    return [(e["ts"] - T, e["desired_replicas"]) for e in hpas]


def condition(event: Mapping[str, Any], type_: str) -> tuple[str, str]:
    for c in event["conditions"]:
        if c["type"] == type_:
            return c["status"], c["reason"]
    raise AssertionError(f"no {type_} condition in {event['conditions']}")


def current_metric(event: Mapping[str, Any]) -> Mapping[str, Any]:
    (status,) = event["current_metrics"]
    source = {"Resource": "resource", "Pods": "pods", "Object": "object", "External": "external"}[status["type"]]
    current: Mapping[str, Any] = status[source]["current"]
    return current


def held_then_scaled_down(
    tmp_path: Path, per_tick: Any, policy: Mapping[str, Any], current: int
) -> tuple[list[tuple[float, int]], Mapping[str, Any]]:
    """Feed ``per_tick(ts)`` every 15 s for 300 s; check the first tick holds ``current`` because of
    the stabilization; return (published, the recommendation at T + 300)."""
    hpas = run_hpa(tmp_path, every_tick(T, T + 300, per_tick), policy)
    first = at(hpas, T)
    assert first["desired_replicas"] == current
    assert condition(first, "AbleToScale") == ("True", "ScaleDownStabilized")
    return published(hpas), at(hpas, T + 300)


# ---------------------------------------------------------------------------------------------
# Per-metric proposals (replica_calculator_test.go)
# ---------------------------------------------------------------------------------------------


def test_resource_scale_up_is_ceil_of_ratio_times_ready_pods(tmp_path: Path) -> None:
    # resource_scale_up: 3000m / 6000m = 50 % vs 30 % -> ceil(1.667 x 3) = 5
    events = [workload(T, 3, pods=[pod(n) for n in names(3)]), cpu_samples(T, [600, 1000, 1400])]
    hpa = at(run_hpa(tmp_path, events, hvpa([cpu_utilization(30)])), T)
    assert hpa["desired_replicas"] == 5
    assert current_metric(hpa) == {"averageUtilization": 50, "averageValue": "1"}
    assert condition(hpa, "ScalingActive") == ("True", "ValidMetricFound")
    assert condition(hpa, "ScalingLimited") == ("False", "DesiredWithinRange")


def test_hot_cpu_pod_inside_initialization_period_scales_up_less(tmp_path: Path) -> None:
    # resource_scale_up_hot_cpu_pod: pod-0 started 10 s before the sample (ready since then), so its
    # 15 s sample window began before readiness: unready, assumed 0 on a scale-up.  Ready pods
    # 2400/4000 = 60 %; with pod-0 at 0: 2400/6000 = 40 % -> ceil(1.333 x 3) = 4.
    pods = [pod("pod-0", "hot"), pod("pod-1"), pod("pod-2")]
    events = [workload(T, 3, pods=pods), cpu_samples(T, [600, 1000, 1400])]
    hpa = at(run_hpa(tmp_path, events, hvpa([cpu_utilization(30)])), T)
    assert hpa["desired_replicas"] == 4
    assert current_metric(hpa)["averageUtilization"] == 60


def test_failed_pods_are_ignored(tmp_path: Path) -> None:
    # resource_failed_pods_ignored: two Failed pods without samples are dropped, not missing:
    # 2400/4000 = 60 % vs 30 % -> ceil(2 x 2) = 4 (legacy limit max(2 x 2, 4) = 4).
    pods = [pod("pod-0"), pod("pod-1"), pod("pod-2", "Failed"), pod("pod-3", "Failed")]
    events = [workload(T, 2, pods=pods), cpu_samples(T, [1000, 1400, None, None])]
    hpa = at(run_hpa(tmp_path, events, hvpa([cpu_utilization(30)])), T)
    assert hpa["desired_replicas"] == 4
    assert current_metric(hpa)["averageUtilization"] == 60


def test_scale_down_excludes_unready_pods_and_multiplies_by_ready_ones(tmp_path: Path) -> None:
    # resource_scale_down_excludes_unready: ready 1800/6000 = 30 % vs 50 % -> ceil(0.6 x 3) = 2.
    pods = [pod("pod-0"), pod("pod-1"), pod("pod-2"), pod("pod-3", "unready"), pod("pod-4", "unready")]

    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 5, pods=pods), cpu_samples(ts, [200, 600, 1000, 500, 500])]

    seen, last = held_then_scaled_down(tmp_path, tick, hvpa([cpu_utilization(50)]), current=5)
    assert seen == [(0, 5), (300, 2)]
    assert current_metric(last)["averageUtilization"] == 30


def test_utilization_within_tolerance_keeps_current(tmp_path: Path) -> None:
    # resource_within_tolerance: 6120m / 6000m = 102 % vs 100 % -> 1.02 is inside 0.1: keep 3.
    events = [workload(T, 3, pods=[pod(n) for n in names(3)]), cpu_samples(T, [2020, 2060, 2040])]
    hpa = at(run_hpa(tmp_path, events, hvpa([cpu_utilization(100)])), T)
    assert hpa["desired_replicas"] == 3
    assert current_metric(hpa) == {"averageUtilization": 102, "averageValue": "2040m"}
    assert condition(hpa, "ScalingActive") == ("True", "ValidMetricFound")


def test_missing_pods_are_assumed_at_their_request_on_scale_down(tmp_path: Path) -> None:
    # resource_missing_metrics_scale_down: 990/4000 = 24 %; the two pods without samples at
    # max(100, 100) % of their request: 4990/8000 = 62 % -> ceil(0.62 x 4) = 3.
    pods = [pod(n) for n in names(4)]

    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 4, pods=pods), cpu_samples(ts, [800, 190, None, None])]

    seen, last = held_then_scaled_down(tmp_path, tick, hvpa([cpu_utilization(100)]), current=4)
    assert seen == [(0, 4), (300, 3)]
    assert current_metric(last)["averageUtilization"] == 24


def test_missing_and_unready_pods_on_scale_down(tmp_path: Path) -> None:
    # resource_missing_and_unready_scale_down: ready 400/4000 = 10 % vs 50 %; the missing pod at
    # max(100, 50) % of its request, the unready one left out: 2400/6000 = 40 % -> ceil(0.8 x 3) = 3.
    pods = [pod("pod-0", "unready"), pod("pod-1"), pod("pod-2"), pod("pod-3")]

    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 4, pods=pods), cpu_samples(ts, [200, 200, 200, None])]

    seen, last = held_then_scaled_down(tmp_path, tick, hvpa([cpu_utilization(50)]), current=4)
    assert seen == [(0, 4), (300, 3)]
    assert current_metric(last)["averageUtilization"] == 10


def test_pods_metric_scales_up_on_the_average(tmp_path: Path) -> None:
    # pods_metric_scale_up: per-pod qps 20, 10, 30 -> average 20000m vs 15000m -> ceil(1.333 x 3) = 4
    events = [
        workload(T, 3, pods=[pod(n) for n in names(3)]),
        series(T, "qps", {"pod-0": 20, "pod-1": 10, "pod-2": 30}),
    ]
    hpa = at(run_hpa(tmp_path, events, hvpa([pods_metric("qps", "15")])), T)
    assert hpa["desired_replicas"] == 4
    assert current_metric(hpa) == {"averageValue": "20"}


def test_pods_metric_average_is_truncated_milli_and_within_tolerance(tmp_path: Path) -> None:
    # pods_metric_tolerance_int_average: 62000m / 3 = 20666m (int64 division) vs 20000m -> 1.033: keep 3
    events = [
        workload(T, 3, pods=[pod(n) for n in names(3)]),
        series(T, "qps", {"pod-0": 20, "pod-1": 21, "pod-2": 21}),
    ]
    hpa = at(run_hpa(tmp_path, events, hvpa([pods_metric("qps", "20")])), T)
    assert hpa["desired_replicas"] == 3
    assert current_metric(hpa) == {"averageValue": "20666m"}
    assert condition(hpa, "ScalingActive") == ("True", "ValidMetricFound")


def test_object_value_multiplies_by_ready_running_pods(tmp_path: Path) -> None:
    # object_value_uses_ready_pod_count: 50 / 10 = 5 x 1 ready running pod = 5 (not x 3 replicas)
    pods = [pod("pod-0"), pod("pod-1", "unready"), pod("pod-2", "unready")]
    events = [workload(T, 3, pods=pods), series(T, "qps", {None: 50})]
    hpa = at(run_hpa(tmp_path, events, hvpa([object_metric("qps", {"type": "Value", "value": "10"})])), T)
    assert hpa["desired_replicas"] == 5
    assert current_metric(hpa) == {"value": "50"}


def test_object_average_value_within_tolerance_keeps_status_replicas(tmp_path: Path) -> None:
    # object_average_value_tolerance: 20166m / (5000m x 4) = 1.008 -> keep 4; reported ceil(20166 / 4)
    events = [workload(T, 4), series(T, "qps", {None: 20.166})]
    metric = object_metric("qps", {"type": "AverageValue", "averageValue": "5"})
    hpa = at(run_hpa(tmp_path, events, hvpa([metric])), T)
    assert hpa["desired_replicas"] == 4
    assert current_metric(hpa) == {"averageValue": "5042m"}
    assert condition(hpa, "ScalingActive") == ("True", "ValidMetricFound")


def test_external_value_scales_down_by_ready_running_pods(tmp_path: Path) -> None:
    # external_value_scale_down: 8600m / 14334m = 0.59998 -> ceil(0.59998 x 5 ready pods) = 3
    pods = [pod(n) for n in names(5)]

    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 5, pods=pods), series(ts, "qps", {None: 8.6})]

    metric = external_metric("qps", {"type": "Value", "value": "14334m"})
    seen, last = held_then_scaled_down(tmp_path, tick, hvpa([metric]), current=5)
    assert seen == [(0, 5), (300, 3)]
    assert current_metric(last) == {"value": "8600m"}


def test_external_average_value_divides_the_total_by_the_target(tmp_path: Path) -> None:
    # external_average_value_down: ceil(8600 / 2867) = 3; reported ceil(8600 / 5 status replicas) = 1720m
    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 5), series(ts, "qps", {None: 8.6})]

    metric = external_metric("qps", {"type": "AverageValue", "averageValue": "2867m"})
    seen, last = held_then_scaled_down(tmp_path, tick, hvpa([metric]), current=5)
    assert seen == [(0, 5), (300, 3)]
    assert current_metric(last) == {"averageValue": "1720m"}


def test_one_invalid_metric_blocks_a_scale_down(tmp_path: Path) -> None:
    # multi_metric_one_invalid_blocks_scale_down: CPU alone proposes ceil(0.56 x 5) = 3 (1400/5000 =
    # 28 % vs 50 %), the CheddarCheese metric is invalid -> no scaling, ever; ScalingActive=False.
    pods = [pod(n) for n in names(5)]

    def tick(ts: float) -> list[dict[str, Any]]:
        return [workload(ts, 5, pods=pods, request_m=1000), cpu_samples(ts, [100, 300, 500, 250, 250])]

    metrics = [cpu_utilization(50), {"type": "CheddarCheese"}]
    hpas = run_hpa(tmp_path / "invalid", every_tick(T, T + 300, tick), hvpa(metrics, min_replicas=2, max_replicas=6))
    assert published(hpas) == [(0, 5)]
    assert condition(at(hpas, T + 300), "ScalingActive") == ("False", "InvalidMetricSourceType")
    # The same stream without the invalid metric: held 300 s by stabilization, then 3.
    valid = run_hpa(tmp_path / "valid", every_tick(T, T + 300, tick), hvpa(metrics[:1], min_replicas=2, max_replicas=6))
    assert published(valid) == [(0, 5), (300, 3)]


# ---------------------------------------------------------------------------------------------
# Normalization (horizontal_test.go and derived)
# ---------------------------------------------------------------------------------------------


def test_legacy_stabilization_ignores_recommendations_older_than_the_window(tmp_path: Path) -> None:
    # legacy_stabilize_old_entries_reused: history 10 (600 s ago) and 9 (540 s ago), proposal 3:
    # both are older than 300 s -> 3 (the new proposal overwrites the last old slot, so the
    # history stays 2 long; that bookkeeping is internal).
    events = [
        *demand_tick(T - 600, 10, None),  # no metric yet: the history holds only the seed 10
        # 9 / 5 = 1.8 -> proposal 9 (stored raw); desired max(9, seed 10 of 60 s ago) = 10
        *demand_tick(T - 540, 5, 9),
        *demand_tick(T, 9, 3),  # 3 / 9 = 0.33 -> 3: neither 10 nor 9 is younger than 300 s
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND]))
    assert published(hpas) == [(-600, 10), (-540, 10), (0, 3)]
    assert condition(at(hpas, T - 600), "ScalingActive") == ("False", "FailedGetExternalMetric")
    assert condition(at(hpas, T), "ScalingLimited") == ("False", "DesiredWithinRange")


def test_legacy_scale_up_limit_is_max_of_double_and_four(tmp_path: Path) -> None:
    # legacy_scale_up_limit: current 3, proposal 10 (10 / 3 = 3.33) -> max(2 x 3, 4) = 6
    hpas = run_hpa(tmp_path, demand_tick(T, 3, 10), hvpa([DEMAND], max_replicas=20))
    assert at(hpas, T)["desired_replicas"] == 6
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "ScaleUpLimit")


def test_behavior_default_scale_up_is_max_of_four_pods_and_double(tmp_path: Path) -> None:
    # behavior_default_scale_up: current 10, proposal 50, default scaleUp policies (Pods 4 / 15 s,
    # Percent 100 / 15 s, Max) -> max(10 + 4, 10 x 2) = 20.  (``scaleUp: {}`` is a present behavior
    # whose scale-up rules are all API defaults.)
    policy = hvpa([DEMAND], behavior={"scaleUp": {}}, max_replicas=1000)
    hpa = at(run_hpa(tmp_path, demand_tick(T, 10, 50), policy), T)
    assert hpa["desired_replicas"] == 20
    assert condition(hpa, "ScalingLimited") == ("True", "ScaleUpLimit")


def test_behavior_percent_policy_rounds_up(tmp_path: Path) -> None:
    # behavior_percent_1pct_rounds_up: current 3, proposal 1000, Percent 1 / 60 s -> ceil(3 x 1.01) = 4
    behavior = {"scaleUp": {"policies": [{"type": "Percent", "value": 1, "periodSeconds": 60}], "selectPolicy": "Max"}}
    hpa = at(run_hpa(tmp_path, demand_tick(T, 3, 1000), hvpa([DEMAND], behavior=behavior, max_replicas=2000)), T)
    assert hpa["desired_replicas"] == 4
    assert condition(hpa, "ScalingLimited") == ("True", "ScaleUpLimit")


def test_behavior_scale_down_max_select_takes_the_biggest_drop(tmp_path: Path) -> None:
    # behavior_scale_down_max_select_takes_biggest_drop: current 100, stabilized 2 (a zero
    # scale-down window makes the proposal the stabilized value), Pods 20 / 60 s and Percent 1 / 60 s:
    # min(100 - 20, trunc(100 x 0.99)) = 80.
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [
                {"type": "Pods", "value": 20, "periodSeconds": 60},
                {"type": "Percent", "value": 1, "periodSeconds": 60},
            ],
            "selectPolicy": "Max",
        }
    }
    hpa = at(run_hpa(tmp_path, demand_tick(T, 100, 2), hvpa([DEMAND], behavior=behavior, max_replicas=1000)), T)
    assert hpa["desired_replicas"] == 80
    assert condition(hpa, "ScalingLimited") == ("True", "ScaleDownLimit")


def recent_up_events() -> list[dict[str, Any]]:
    """Scale-up events of +1 (100 s ago), +5 (60 s ago) and +9 (20 s ago), as the vectors plant them."""
    return [
        *demand_tick(T - 100, 5, 6),  # 6 / 5 = 1.2 -> +1
        *demand_tick(T - 60, 10, 15),  # 1.5 -> +5
        *demand_tick(T - 20, 20, 29),  # 1.45 -> +9
    ]


def test_behavior_scale_up_counts_recent_up_events_in_the_period(tmp_path: Path) -> None:
    # behavior_up_with_recent_up_events: current 100, proposal 500, Pods 150 / 120 s; all three
    # events are inside 120 s: periodStart = 100 - 15 = 85 -> 85 + 150 = 235.
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 150, "periodSeconds": 120}], "selectPolicy": "Max"}}
    events = [*recent_up_events(), *demand_tick(T, 100, 500)]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000), "--sync-period", "20")
    assert published(hpas) == [(-100, 6), (-60, 15), (-20, 29), (0, 235)]
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "ScaleUpLimit")


def test_behavior_scale_up_percent_with_up_and_down_events(tmp_path: Path) -> None:
    # behavior_up_percent_with_up_and_down_events: current 6, proposal 24, Percent 300 / 300 s, an
    # up event of 4 and a down event of 2 inside the period: periodStart = 6 - 4 + 2 = 4 ->
    # ceil(4 x 4) = 16.  (The vector dates both events 60 s ago; one reconcile makes one event, so the
    # down event is 30 s old here -- any age under the 300 s period counts the same.)
    behavior = {
        "scaleUp": {"policies": [{"type": "Percent", "value": 300, "periodSeconds": 300}], "selectPolicy": "Max"}
    }
    events = [
        *demand_tick(T - 60, 3, 7),  # 7 / 3 = 2.33 -> +4 (limit ceil(3 x 4) = 12)
        *demand_tick(T - 30, 10, 8),  # 0.8 -> -2 (the highest recommendation of the last 300 s is 8)
        *demand_tick(T, 6, 24),
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000))
    assert published(hpas) == [(-60, 7), (-30, 8), (0, 16)]
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "ScaleUpLimit")


def test_behavior_scale_up_capped_by_max_replicas(tmp_path: Path) -> None:
    # behavior_up_capped_by_max: current 100, proposal 500, Pods 300 / 60 s: only the +9 of 20 s ago
    # is younger than 60 s: 91 + 300 = 391 > maxReplicas 200 -> 200, TooManyReplicas.
    behavior = {"scaleUp": {"policies": [{"type": "Pods", "value": 300, "periodSeconds": 60}], "selectPolicy": "Max"}}
    events = [*recent_up_events(), *demand_tick(T, 100, 500)]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=200), "--sync-period", "20")
    assert at(hpas, T)["desired_replicas"] == 200
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "TooManyReplicas")


def test_behavior_scale_down_percent_with_up_and_down_events(tmp_path: Path) -> None:
    # behavior_down_percent_with_up_and_down_events: current 10, stabilized 1, Percent 50 / 180 s,
    # an up event of 2 and a down event of 4 inside the period: periodStart = 10 - 2 + 4 = 12 ->
    # trunc(12 x 0.5) = 6.  (Both 60 s old in the vector; the up event is 45 s old here.)
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 50, "periodSeconds": 180}],
            "selectPolicy": "Max",
        }
    }
    events = [
        *demand_tick(T - 60, 8, 4),  # 0.5 -> -4 (limit trunc(8 x 0.5) = 4)
        *demand_tick(T - 45, 4, 6),  # 1.5 -> +2 (default scale-up policies: max(4 + 4, 4 x 2) = 8)
        *demand_tick(T, 10, 1),
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000))
    assert published(hpas) == [(-60, 4), (-45, 6), (0, 6)]
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "ScaleDownLimit")


def test_behavior_stabilization_scales_down_only_to_the_highest_of_the_window(tmp_path: Path) -> None:
    # stabilize_scale_down_window: current 100, proposal 3, windows up 0 / down 180 s, history 4
    # (120 s ago) and 5 (60 s ago) -> max(3, 4, 5) = 5; the default scale-down rate (100 % / 15 s)
    # does not bind.
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 0}, "scaleDown": {"stabilizationWindowSeconds": 180}}
    events = [
        *demand_tick(T - 120, 4, None),  # no metric: the history is the seed 4
        *demand_tick(T - 60, 5, 5),  # ratio 1: recommendation 5 (the current replicas)
        *demand_tick(T, 100, 3),
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000))
    assert published(hpas) == [(-120, 4), (-60, 5), (0, 5)]
    assert condition(at(hpas, T), "ScalingLimited") == ("False", "DesiredWithinRange")


def test_behavior_stabilization_scales_up_only_to_the_lowest_of_the_window(tmp_path: Path) -> None:
    # stabilize_reuse_slot_older_than_both_windows: current 1, proposal 100, windows up 300 / down 0 s,
    # recommendations 10 (6000 s ago, outside both windows), 9 (180 s), 5 (120 s), 6 (60 s):
    # min(100, 9, 5, 6) = 5.  (Which slot the new entry reuses is internal bookkeeping; here the
    # history is built in time order, so the 10 is the slot the 9 reuses.)
    behavior = {"scaleUp": {"stabilizationWindowSeconds": 300}, "scaleDown": {"stabilizationWindowSeconds": 0}}
    events = [
        *demand_tick(T - 6000, 10, None),  # seed 10
        # Each earlier recommendation is the replicas of its moment (ratio 1, inside the tolerance).
        *demand_tick(T - 180, 9, 9),
        *demand_tick(T - 120, 5, 5),
        *demand_tick(T - 60, 6, 6),
        *demand_tick(T, 1, 100),
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000))
    assert published(hpas) == [(-6000, 10), (-180, 9), (-120, 5), (-60, 6), (0, 5)]
    assert condition(at(hpas, T), "AbleToScale") == ("True", "SucceededRescale")
    assert condition(at(hpas, T), "ScalingLimited") == ("False", "DesiredWithinRange")


def test_scale_events_older_than_the_longest_period_stop_counting(tmp_path: Path) -> None:
    # store_events_replace_last_outdated: policies Pods 10 / 60 s and Percent 100 / 30 s; previous
    # up events +8 (29 s ago), +6 (59 s), +9 (61 s) and +7 (62 s), the last two outdated (older than
    # the longest period; the vector has both at 61 s, one reconcile makes one event); new change +5.
    # At T, current 21: Pods: 21 - (8 + 6) + 10 = 17 (the 14 of the last 60 s); Percent: 2 x (21 - 8)
    # = 26 -> Max 26, i.e. the change +5.  Storing it reuses an outdated slot, which is never counted
    # again (every period is at most the longest one), so only its effect is observable:
    # at T + 15, current 26: Pods: 26 - (5 + 8) + 10 = 23; Percent: 2 x (26 - 5) = 42 -> 42
    # (52 if the +5 had not been stored).
    behavior = {
        "scaleUp": {
            "policies": [
                {"type": "Pods", "value": 10, "periodSeconds": 60},
                {"type": "Percent", "value": 100, "periodSeconds": 30},
            ]
        }
    }
    events = [
        *demand_tick(T - 62, 2, 9),  # +7 (limit max(2 + 10, 4) = 12)
        *demand_tick(T - 61, 30, 39),  # +9 (limit max(30 - 7 + 10, 2 x 23) = 46)
        *demand_tick(T - 59, 40, 46),  # +6 (limit 2 x (40 - 16) = 48)
        *demand_tick(T - 29, 50, 58),  # +8 (limit 2 x 50 = 100)
        *demand_tick(T, 21, 100),
        *demand_tick(T + 15, 26, 100),
    ]
    hpas = run_hpa(tmp_path, events, hvpa([DEMAND], behavior=behavior, max_replicas=1000), "--sync-period", "1")
    assert published(hpas) == [(-62, 9), (-61, 39), (-59, 46), (-29, 58), (0, 26), (15, 42)]
    assert condition(at(hpas, T), "ScalingLimited") == ("True", "ScaleUpLimit")


def test_per_hpa_scale_up_tolerance_overrides_the_cluster_tolerance(tmp_path: Path) -> None:
    # per_hpa_tolerance_asymmetric: 20 pods at 63 % vs 60 % -> ratio 1.05 > 1 + 0.02 ->
    # ceil(1.05 x 20) = 21; with the HPAConfigurableTolerance gate off, or no per-HPA tolerance: 20.
    pods = [pod(n) for n in names(20)]
    events = [workload(T, 20, pods=pods), cpu_samples(T, [1260] * 20)]
    behavior = {"scaleUp": {"tolerance": "0.02"}}
    on = at(run_hpa(tmp_path / "on", events, hvpa([cpu_utilization(60)], behavior=behavior)), T)
    assert on["desired_replicas"] == 21
    assert current_metric(on)["averageUtilization"] == 63
    config = tmp_path / "gate-off.yaml"
    config.write_text("hpa:\n  HPAConfigurableTolerance: false\n")
    off = at(
        run_hpa(tmp_path / "off", events, hvpa([cpu_utilization(60)], behavior=behavior), "--config", str(config)), T
    )
    assert off["desired_replicas"] == 20
    plain = at(run_hpa(tmp_path / "plain", events, hvpa([cpu_utilization(60)], behavior={"scaleUp": {}})), T)
    assert plain["desired_replicas"] == 20


# ---------------------------------------------------------------------------------------------
# Two places where the replay once differed from the HPA controller (found by these vectors, fixed)
# ---------------------------------------------------------------------------------------------


def test_fractional_millicore_samples_round_up_like_milli_value(tmp_path: Path) -> None:
    # 20 pods at 0.0554 core of a 100m request, target 50 %: upstream 56m -> 56 % -> ratio 1.12 ->
    # ceil(22.4) = 23 (recommend() given 55.4 millicores says 23).  Rounded to 55m: 55 % -> 1.1,
    # inside the tolerance -> 20.
    events = [
        ev("workload", T, replicas=20, containers={"app": {"requests": {"cpu": "100m"}}}),
        ev("metric", T, samples=[{"pod": n, "container": "app", "cpu": 0.0554} for n in names(20)]),
    ]
    hpa = at(run_hpa(tmp_path, events, hvpa([cpu_utilization(50)])), T)
    assert current_metric(hpa)["averageUtilization"] == 56
    assert hpa["desired_replicas"] == 23


def test_an_empty_behavior_takes_the_api_default_rules(tmp_path: Path) -> None:
    # current 1, proposal 10: with behavior (API defaults) the limit is max(1 + 4, 1 x 2) = 5;
    # the legacy path (no behavior) allows max(2 x 1, 4) = 4.
    hpa = at(run_hpa(tmp_path, demand_tick(T, 1, 10), hvpa([DEMAND], behavior={})), T)
    assert hpa["desired_replicas"] == 5
