"""Per-metric replica proposals: upstream's ``ReplicaCalculator``.

Upstream: ``pkg/controller/podautoscaler/replica_calculator.go`` (``GetResourceReplicas``,
``GetMetricReplicas``, ``GetObjectMetricReplicas``, ``GetExternalMetricReplicas``, ``groupPods``,
``calculatePodRequests``, ``Tolerances``) and ``metrics/utilization.go``; docs/recommenders.md 1.2-1.5.
Each function mirrors one upstream function and keeps its integer truncations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .arithmetic import MAX_INT32, MAX_INT64, MIN_INT32, ceil_int32, go_div, milli_of_number
from .behavior import Behavior
from .config import HpaConfig
from .metric_specs import MetricSpec
from .model import MetricInputs, PodInfo

__all__ = ["Tolerances"]


@dataclass(frozen=True)
class Tolerances:
    """The tolerance band (reference 1.4): keep current iff ``1 - down <= ratio <= 1 + up``."""

    scale_down: float
    scale_up: float

    def is_within(self, ratio: float) -> bool:
        # HPA: replica_calculator.go Tolerances.isWithin -- inclusive bounds, so ratio 1.1 with
        # tolerance 0.1 does not scale (reference 1.4).
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)

    @classmethod
    def for_hpa(cls, behavior: Behavior | None, cfg: HpaConfig) -> Tolerances:
        # HPA: horizontal.go tolerancesForHpa -- per-direction behavior tolerance when the
        # HPAConfigurableTolerance gate is on, else the cluster flag (reference 1.4).
        t = cls(cfg.tolerance, cfg.tolerance)
        if behavior is None or not cfg.configurable_tolerance:
            return t
        down = behavior.scale_down.tolerance
        up = behavior.scale_up.tolerance
        return cls(t.scale_down if down is None else down, t.scale_up if up is None else up)


class MetricError(Exception):
    """A metric that cannot produce a proposal this tick (the controller's invalid metric)."""


@dataclass(slots=True)
class Ctx:
    """What every metric of one reconcile reads (built per tick: plain slots, not frozen, since a
    frozen dataclass pays for each field on construction)."""

    pods: Sequence[PodInfo]
    inputs: MetricInputs
    now: float
    cfg: HpaConfig
    tolerances: Tolerances
    spec_replicas: int
    status_replicas: int

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(
        self,
        pods: Sequence[PodInfo],
        inputs: MetricInputs,
        now: float,
        cfg: HpaConfig,
        tolerances: Tolerances,
        spec_replicas: int,
        status_replicas: int,
    ) -> None:
        self.pods = pods
        self.inputs = inputs
        self.now = now
        self.cfg = cfg
        self.tolerances = tolerances
        self.spec_replicas = spec_replicas
        self.status_replicas = status_replicas


@dataclass(slots=True)
class _Groups:
    ready_count: int
    unready: set[str]
    missing: set[str]
    ignored: set[str]

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(self, ready_count: int, unready: set[str], missing: set[str], ignored: set[str]) -> None:
        self.ready_count = ready_count
        self.unready = unready
        self.missing = missing
        self.ignored = ignored


#: :func:`_plain_pods` of the pod tuples seen lately, by identity (the entry keeps the tuple
#: alive, so its ``id`` is not reused while it is here).
_PLAIN: dict[int, tuple[tuple[PodInfo, ...], tuple[frozenset[str], float | None] | None]] = {}


def _plain_pods(pods: Sequence[PodInfo]) -> tuple[frozenset[str], float | None] | None:
    """What ``groupPods`` needs to know of a pod list that every sample leaves unchanged.

    ``(names, cpu_from)`` when the names are distinct and no pod is being deleted, Failed or
    Pending (steps 1-2 put none aside), else ``None``; ``cpu_from`` is the latest start when every
    pod is Ready with a known, non-NaN start (step 4 then finds a pod unready only inside its CPU
    initialization period, and the latest start decides that for all: rounding is monotone),
    else ``None``.  Remembered for tuples (immutable, and the own HPA hands the same one over on
    every tick); a list is looked at again each time.
    """
    cacheable = type(pods) is tuple
    if cacheable:
        hit = _PLAIN.get(id(pods))
        if hit is not None and hit[0] is pods:
            return hit[1]
    names = frozenset([p.name for p in pods])
    summary: tuple[frozenset[str], float | None] | None = None
    if len(names) == len(pods) and not any(p.deleting or p.phase in ("Failed", "Pending") for p in pods):
        starts = [p.started for p in pods if p.ready and p.started is not None and p.started == p.started]
        summary = (names, max(starts) if len(starts) == len(pods) and starts else None)
    if cacheable:
        if len(_PLAIN) >= 1024:
            _PLAIN.clear()
        _PLAIN[id(pods)] = (tuple(pods), summary)
    return summary


def _group_pods(ctx: Ctx, metrics: Mapping[str, int], resource: str) -> _Groups:
    """Classify pods as the controller's ``groupPods`` does (reference 1.3)."""
    plain = _plain_pods(ctx.pods)
    if plain is not None:
        names, cpu_from = plain
        # Every listed pod is alive, neither Failed nor Pending, and for CPU Ready and past its
        # initialization period (the latest start + the period is not after now): steps 1, 2 and
        # 4 put none aside, so the pods with a sample are ready and the others missing.
        if resource != "cpu" or (cpu_from is not None and not cpu_from + ctx.cfg.cpu_initialization_period > ctx.now):
            absent = set(names.difference(metrics))
            return _Groups(len(names) - len(absent), set(), absent, set())
    ready_count = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    sample_ts = ctx.inputs.sample_ts or {}
    for pod in ctx.pods:
        # HPA: groupPods step 1 -- deleted or Failed pods are dropped completely.
        if pod.deleting or pod.phase == "Failed":
            ignored.add(pod.name)
            continue
        # Step 2: Pending pods count as unready.
        if pod.phase == "Pending":
            unready.add(pod.name)
            continue
        # Step 3: no sample -> missing.
        if pod.name not in metrics:
            missing.add(pod.name)
            continue
        # Step 4: readiness is only examined for the CPU resource.
        if resource == "cpu":
            if pod.started is None:
                is_unready = True
            else:
                since = pod.ready_since if pod.ready_since is not None else pod.started
                if pod.started + ctx.cfg.cpu_initialization_period > ctx.now:
                    # Inside the CPU initialization period: unready if not Ready, or if the sample
                    # window does not lie wholly after the last readiness transition.
                    ts = sample_ts.get(pod.name, ctx.now)
                    is_unready = (not pod.ready) or ts < since + ctx.inputs.sample_window
                else:
                    # Older pod: unready only if not Ready and it never became ready (its last
                    # transition is within the initial readiness delay after start).
                    is_unready = (not pod.ready) and pod.started + ctx.cfg.initial_readiness_delay > since
            if is_unready:
                unready.add(pod.name)
                continue
        ready_count += 1
    return _Groups(ready_count, unready, missing, ignored)


def _resource_scale(resource: str) -> int:
    # CPU arrives in millicores (already milli-units); everything else in base units.
    return 1 if resource == "cpu" else 1000


def resource_pod_metrics(ctx: Ctx, resource: str, container: str) -> dict[str, int]:
    """Per-pod usage in milli-units (``GetResourceMetric``: ``getPodMetrics`` / ``getContainerMetrics``)."""
    usage = ctx.inputs.pod_usage
    if not usage:
        raise MetricError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    scale = _resource_scale(resource)
    out: dict[str, int] = {}
    for pod, containers in usage.items():
        if container:
            # HPA: metrics/client.go getContainerMetrics (k8s.io/kubernetes 1.36): a pod whose
            # metrics lack the container is only logged, and then has no metric (missing); older
            # releases failed the whole metric.
            res = containers.get(container)
            if res is None:
                continue
            if resource in res:
                out[pod] = milli_of_number(res[resource], scale)
            continue
        if len(containers) == 1:
            # One container (the common pod): its integer value, or the loop below for the rest.
            [res] = containers.values()
            value = res.get(resource)
            if type(value) is int:
                out[pod] = value * scale
                continue
        # A pod without containers, or with a container lacking the resource, has no metric.
        if not containers:
            continue
        total = 0
        for res in containers.values():
            if resource not in res:
                break
            value = res[resource]
            total += value * scale if type(value) is int else milli_of_number(value, scale)
        else:
            out[pod] = total
    return out


def _pod_requests(ctx: Ctx, resource: str, container: str) -> dict[str, int]:
    """Per-pod requests in milli-units (``calculateRequests``), for every listed pod.

    A missing request is an error even on an ignored pod, as upstream computes requests over the
    whole pod list.
    """
    scale = _resource_scale(resource)
    out: dict[str, int] = {}
    if not ctx.inputs.pod_requests and ctx.pods:
        # Every pod has the template's requests: computed once, for the first pod (whose name an
        # error carries, as the loop below would raise at it).
        first = _pod_requests_of(ctx.pods[0].name, ctx.inputs.container_requests, resource, container, scale)
        return dict.fromkeys([p.name for p in ctx.pods], first)
    for pod in ctx.pods:
        out[pod.name] = _pod_requests_of(
            pod.name, ctx.inputs.pod_requests.get(pod.name, ctx.inputs.container_requests), resource, container, scale
        )
    return out


def _pod_requests_of(
    pod: str, containers: Mapping[str, Mapping[str, int]], resource: str, container: str, scale: int
) -> int:
    """One pod's request of ``resource`` in milli-units (``calculateRequests``' inner loop)."""
    if container:
        if container not in containers:
            raise MetricError(f"container {container} not found in Pod {pod}")
        if resource not in containers[container]:
            raise MetricError(f"missing request for {resource} in container {container} of Pod {pod}")
        return milli_of_number(containers[container][resource], scale)
    total = 0
    for cname, res in containers.items():
        if resource not in res:
            raise MetricError(f"missing request for {resource} in container {cname} of Pod {pod}")
        total += milli_of_number(res[resource], scale)
    return total


def _utilization_ratio(metrics: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: (ratio, utilization %, raw average milli-value).

    Utilization is an integer percent rounded down, over pods having both a metric and a request
    (metrics of unknown pods are ignored); the raw value is the int64 average (reference 1.2).
    """
    metrics_total = 0
    requests_total = 0
    entries = 0
    for pod, value in metrics.items():
        if pod not in requests:
            continue
        metrics_total += value
        requests_total += requests[pod]
        entries += 1
    return _utilization_of(metrics_total, requests_total, entries, target)


def _utilization_of(metrics_total: int, requests_total: int, entries: int, target: int) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio`` from its sums over ``entries`` pods (see ``_utilization_ratio``)."""
    if requests_total == 0:
        raise MetricError("no metrics returned matched known pods")
    percentage = go_div(metrics_total * 100, requests_total)
    if not MIN_INT32 <= percentage <= MAX_INT32:
        raise MetricError(f"resource utilization {percentage} is outside the int32 range")
    return float(percentage) / float(target), percentage, go_div(metrics_total, entries)


def _usage_ratio(metrics: Mapping[str, int], target: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: (ratio, int64 average milli-value, truncated)."""
    usage = go_div(sum(metrics.values()), len(metrics))
    return float(usage) / float(target), usage


def _no_pods() -> MetricError:
    return MetricError("no pods returned by selector while calculating replica count")


def _one_pass_replicas(ctx: Ctx, resource: str, target: int) -> tuple[int, int, int] | None:
    """:func:`resource_utilization_replicas` for the common tick, in one pass; ``None`` for any
    other tick, which goes the general way."""
    current = ctx.spec_replicas
    tol = ctx.tolerances
    pods = ctx.pods
    inputs = ctx.inputs
    usage = inputs.pod_usage
    # The common tick in one pass (the "common tick" of resource_utilization_replicas, without
    # building the per-pod metrics or the groups): a plain pod list whose pods are exactly the pods with samples,
    # each one container holding the resource as an integer, the template's requests for all.
    # Then no pod is put aside (for CPU the latest start is past the initialization period),
    # the metrics are those integers and the sums of GetResourceUtilizationRatio their total
    # and n x the one request.  Anything else goes the general way.
    plain = _plain_pods(pods)
    if (
        plain is not None
        and usage.keys() == plain[0]
        and (resource != "cpu" or (plain[1] is not None and not plain[1] + ctx.cfg.cpu_initialization_period > ctx.now))
    ):
        total = 0
        for containers in usage.values():
            if len(containers) != 1:
                break
            for res in containers.values():
                value = res.get(resource)
            if type(value) is not int:
                break
            total += value
        else:
            n = len(usage)
            scale = 1 if resource == "cpu" else 1000  # _resource_scale, inline
            first = _pod_requests_of(pods[0].name, inputs.container_requests, resource, "", scale)
            total *= scale
            requests_total = first * n
            if requests_total <= 0 or total < 0:  # _utilization_of raises for no requests
                ratio, utilization, raw = _utilization_of(total, requests_total, n, target)
            else:
                # _utilization_of and Tolerances.is_within, inline: positive and non-negative
                # integers, so Go's truncating division is Python's floor division here.
                utilization = total * 100 // requests_total
                if utilization > MAX_INT32:
                    raise MetricError(f"resource utilization {utilization} is outside the int32 range")
                ratio = float(utilization) / float(target)
                raw = total // n
            if (1.0 - tol.scale_down) <= ratio <= (1.0 + tol.scale_up):
                return current, utilization, raw
            return ceil_int32(ratio * float(n)), utilization, raw
    return None


def resource_utilization_replicas(ctx: Ctx, spec: MetricSpec) -> tuple[int, int, int]:
    """``GetResourceReplicas`` (reference 1.2 Utilization, 1.5): (replicas, utilization %, raw)."""
    assert spec.average_utilization is not None
    target = spec.average_utilization
    current = ctx.spec_replicas
    tol = ctx.tolerances
    pods = ctx.pods
    inputs = ctx.inputs
    if pods and inputs.pod_usage and not spec.container and not inputs.pod_requests:
        found = _one_pass_replicas(ctx, spec.name, target)
        if found is not None:
            return found
    metrics = resource_pod_metrics(ctx, spec.name, spec.container)
    if not ctx.pods:
        raise _no_pods()
    groups = _group_pods(ctx, metrics, spec.name)
    for pod in groups.ignored | groups.unready:
        metrics.pop(pod, None)
    if not metrics:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    pods = ctx.pods
    plain = _plain_pods(pods)
    if (
        plain is not None
        and not groups.missing
        and not groups.unready
        and not ctx.inputs.pod_requests
        and len(metrics) == len(plain[0])
    ):
        # The common tick: every listed pod (distinct names) has a sample and is ready, and every
        # pod has the template's requests; then the metrics are exactly the listed pods and the
        # sums of GetResourceUtilizationRatio are the total usage and n x the one request, whose
        # errors are the first pod's (calculatePodRequests walks the pod list from the start).
        n = len(metrics)
        first = _pod_requests_of(
            pods[0].name, ctx.inputs.container_requests, spec.name, spec.container, _resource_scale(spec.name)
        )
        ratio, utilization, raw = _utilization_of(sum(metrics.values()), first * n, n, target)
        if tol.is_within(ratio):
            return current, utilization, raw
        return ceil_int32(ratio * float(groups.ready_count)), utilization, raw
    requests = _pod_requests(ctx, spec.name, spec.container)
    ratio, utilization, raw = _utilization_ratio(metrics, requests, target)

    # Reference 1.5 step 1-2: nothing to fill in -> tolerance, else ceil(r x ready pods).
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tol.is_within(ratio):
            return current, utilization, raw
        return ceil_int32(ratio * float(groups.ready_count)), utilization, raw

    # Step 3: assume values for missing (and, on a scale-up, unready) pods.
    if groups.missing:
        if ratio < 1.0:
            # Scale-down: missing pods at max(100, target) % of their request (current upstream).
            fallback = max(100, target)
            for pod in groups.missing:
                metrics[pod] = go_div(requests[pod] * fallback, 100)
        elif ratio > 1.0:
            for pod in groups.missing:
                metrics[pod] = 0
    if scale_up_with_unready:
        for pod in groups.unready:
            metrics[pod] = 0
    new_ratio, _, _ = _utilization_ratio(metrics, requests, target)

    # Step 4: keep current inside tolerance or when the direction flipped.
    if tol.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, utilization, raw
    # Step 5: n = ceil(r2 x pods with values); keep current if n goes against r2's direction.
    new_replicas = ceil_int32(new_ratio * float(len(metrics)))
    if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
        return current, utilization, raw
    return new_replicas, utilization, raw


def plain_replicas(ctx: Ctx, metrics: dict[str, int], target: int, resource: str) -> tuple[int, int]:
    """``calcPlainMetricReplicas`` (Resource AverageValue and Pods metrics): (replicas, average)."""
    current = ctx.spec_replicas
    tol = ctx.tolerances
    if not ctx.pods:
        raise _no_pods()
    groups = _group_pods(ctx, metrics, resource)
    for pod in groups.ignored | groups.unready:
        metrics.pop(pod, None)
    if not metrics:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")
    ratio, usage = _usage_ratio(metrics, target)

    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tol.is_within(ratio):
            return current, usage
        return ceil_int32(ratio * float(groups.ready_count)), usage

    if groups.missing:
        if ratio < 1.0:
            # Scale-down: missing pods assumed exactly at the target value (reference 1.5).
            for pod in groups.missing:
                metrics[pod] = target
        elif ratio > 1.0:
            for pod in groups.missing:
                metrics[pod] = 0
    if scale_up_with_unready:
        for pod in groups.unready:
            metrics[pod] = 0
    new_ratio, _ = _usage_ratio(metrics, target)

    if tol.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, usage
    new_replicas = ceil_int32(new_ratio * float(len(metrics)))
    # The current code applies the final n-vs-current check in the Pods path too (reference 1.5).
    if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
        return current, usage
    return new_replicas, usage


def _ready_running_pods(ctx: Ctx) -> int:
    # HPA: replica_calculator.go getReadyPodsCount -- phase Running and Ready=True.
    if not ctx.pods:
        raise MetricError(f"unable to calculate ready pods: {_no_pods()}")
    return sum(1 for p in ctx.pods if p.phase == "Running" and p.ready)


def usage_ratio_replica_count(ctx: Ctx, ratio: float) -> int:
    """``getUsageRatioReplicaCount`` for Object/External ``Value`` targets (reference 1.2)."""
    current = ctx.spec_replicas
    if current != 0:
        if ctx.tolerances.is_within(ratio):
            return current
        return ceil_int32(ratio * float(_ready_running_pods(ctx)))
    # Scale-to-zero (HPAScaleToZero): ceil(ratio), no tolerance.
    return ceil_int32(ratio)


def series(ctx: Ctx, name: str, api: str) -> Mapping[str | None, float]:
    values = ctx.inputs.series.get(name)
    if not values:
        raise MetricError(f"unable to get metric {name}: no metrics returned from {api} API")
    return values


def object_value(ctx: Ctx, spec: MetricSpec) -> int:
    values = series(ctx, spec.name, "custom metrics")
    obj_name = (spec.described_object or {}).get("name")
    if None in values:
        raw = values[None]
    elif isinstance(obj_name, str) and obj_name in values:
        raw = values[obj_name]
    else:
        raise MetricError(f"unable to get metric {spec.name}: no value for the described object")
    return milli_of_number(raw, 1000)


def per_pod_ratio(ctx: Ctx, usage: int, target_per_pod: int) -> tuple[int, int]:
    """Object/External ``AverageValue``: ratio against ``status.replicas`` (reference 1.2)."""
    status = ctx.status_replicas
    replicas = status
    denominator = float(target_per_pod) * float(status)
    if denominator != 0:
        ratio = float(usage) / denominator
    else:
        ratio = math.inf if usage > 0 else (-math.inf if usage < 0 else math.nan)
    if not ctx.tolerances.is_within(ratio):
        replicas = ceil_int32(float(usage) / float(target_per_pod))
    if status == 0:
        # Go would convert +Inf/NaN to an undefined int64 here; report the total instead.
        average = usage
    elif float(usage) >= float(MAX_INT64):
        average = MAX_INT64
    else:
        average = math.ceil(float(usage) / float(status))
    return replicas, average
