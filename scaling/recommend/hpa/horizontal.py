"""One HPA reconcile: every metric's proposal, the largest kept, then normalized; the recommender entry.

Upstream: ``pkg/controller/podautoscaler/horizontal.go`` ``reconcileAutoscaler``,
``computeReplicasForMetrics`` and ``computeReplicasForMetric`` (docs/recommenders.md 1.1, 1.6, 1.9.3),
including the status conditions and ``currentMetrics`` they leave.  ``now`` is the tick's event time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .arithmetic import MAX_INT32, MAX_INT64, format_milli_quantity, milli_of_number, wrap_int64
from .behavior import Behavior, parse_behavior
from .config import HpaConfig
from .metric_specs import MetricSpec, parse_metrics
from .model import HpaResult, HpaState, MetricInputs, PodInfo
from .normalize import limit_legacy, limit_with_behavior, stabilize_legacy, stabilize_with_behavior, store_scale_event
from .replica_calculator import (
    Ctx,
    MetricError,
    Tolerances,
    object_value,
    per_pod_ratio,
    plain_replicas,
    resource_pod_metrics,
    resource_utilization_replicas,
    series,
    usage_ratio_replica_count,
)

__all__ = ["recommend"]

_new_tuple = tuple.__new__


@dataclass(slots=True)
class _Proposal:
    replicas: int
    status: dict[str, Any]

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(self, replicas: int, status: dict[str, Any]) -> None:
        self.replicas = replicas
        self.status = status


def _current(**fields: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        out[key] = value if key == "averageUtilization" else format_milli_quantity(value)
    return out


def _metric_id(spec: MetricSpec) -> dict[str, Any]:
    mid: dict[str, Any] = {"name": spec.name}
    if spec.selector is not None:
        mid["selector"] = spec.selector
    return mid


def _compute_metric(ctx: Ctx, spec: MetricSpec) -> _Proposal:
    """One metric's proposal (``computeReplicasForMetric``), raising ``MetricError`` if invalid."""
    if spec.type in ("Resource", "ContainerResource"):
        field_name = "resource" if spec.type == "Resource" else "containerResource"
        head: dict[str, Any] = {"name": spec.name}
        if spec.container:
            head["container"] = spec.container
        # HPA: computeStatusForResourceMetricGeneric -- an averageValue target wins over utilization.
        if spec.average_value is not None:
            metrics = resource_pod_metrics(ctx, spec.name, spec.container)
            replicas, usage = plain_replicas(ctx, metrics, spec.average_value, spec.name)
            current = _current(averageValue=usage)
        else:
            replicas, utilization, raw = resource_utilization_replicas(ctx, spec)
            current = {"averageUtilization": utilization, "averageValue": format_milli_quantity(raw)}
        return _Proposal(replicas, {"type": spec.type, field_name: {**head, "current": current}})
    if spec.type == "Pods":
        assert spec.average_value is not None
        values = series(ctx, spec.name, "custom metrics")
        # Per-workload (None-keyed) samples are not pod metrics; unknown pods stay, as upstream.
        metrics = {pod: milli_of_number(v, 1000) for pod, v in values.items() if pod is not None}
        if not metrics:
            raise MetricError(f"unable to get metric {spec.name}: no metrics returned from custom metrics API")
        replicas, usage = plain_replicas(ctx, metrics, spec.average_value, "")
        status = {"metric": _metric_id(spec), "current": _current(averageValue=usage)}
        return _Proposal(replicas, {"type": "Pods", "pods": status})
    if spec.type == "Object":
        value = object_value(ctx, spec)
        described = dict(spec.described_object or {})
        # HPA: computeStatusForObjectMetric -- Value if type Value and set, else AverageValue.
        if spec.target_type == "Value" and spec.value is not None:
            replicas = usage_ratio_replica_count(ctx, float(value) / float(spec.value))
            current = _current(value=value)
        elif spec.target_type == "AverageValue" and spec.average_value is not None:
            replicas, average = per_pod_ratio(ctx, value, spec.average_value)
            current = _current(averageValue=average)
        else:  # pragma: no cover - parse_metrics guarantees the field of the declared type
            raise MetricError(
                "invalid object metric source: neither a value target nor an average value target was set"
            )
        status = {"describedObject": described, "metric": _metric_id(spec), "current": current}
        return _Proposal(replicas, {"type": "Object", "object": status})
    # External: HPA computeStatusForExternalMetric -- an averageValue target wins over value.
    values = series(ctx, spec.name, "external metrics")
    samples = [milli_of_number(v, 1000) for v in values.values()]
    if spec.average_value is not None:
        usage = 0
        for v in samples:
            # GetExternalPerPodMetricReplicas: int64 sum, a negative total taken as overflow.
            usage = wrap_int64(usage + v)
            if usage < 0:
                usage = MAX_INT64
                break
        replicas, average = per_pod_ratio(ctx, usage, spec.average_value)
        current = _current(averageValue=average)
    else:
        assert spec.value is not None
        usage = 0
        for v in samples:
            # GetExternalMetricReplicas: sum capped at MaxInt64 on positive overflow.
            if v > 0 and usage > MAX_INT64 - v:
                usage = MAX_INT64
                break
            usage = wrap_int64(usage + v)
        replicas = usage_ratio_replica_count(ctx, float(usage) / float(spec.value))
        current = _current(value=usage)
    return _Proposal(replicas, {"type": "External", "external": {"metric": _metric_id(spec), "current": current}})


_FAILED_REASON = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


#: The messages of two conditions ``reconcileAutoscaler`` sets.
_GOT_SCALE = "the HPA controller was able to get the target's current scale"
_SCALED_TO_ZERO = "scaling is disabled since the replica count of the target is zero"


class _Conditions:
    """HPA status conditions; setting a type again replaces it (``setCondition``)."""

    def __init__(self) -> None:
        self._by_type: dict[str, dict[str, str]] = {}

    def set(self, type_: str, status: str, reason: str, message: str) -> None:
        self._by_type[type_] = {"type": type_, "status": status, "reason": reason, "message": message}

    def as_list(self) -> list[dict[str, str]]:
        order = ("AbleToScale", "ScalingActive", "ScalingLimited")
        return [self._by_type[t] for t in order if t in self._by_type]


def _check_int(value: object, name: str, lo: int) -> int:
    if type(value) is int and lo <= value <= MAX_INT32:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or value > MAX_INT32:
        raise ValueError(f"{name}: must be an integer in [{lo}, {MAX_INT32}], got {value!r}")
    return value


#: The parsed specs of the HPA templates seen lately, by the identity of the raw ones.  A policy's
#: template is parsed once and handed over on every tick (tandem's own HPA runs every 15 s per
#: workload), so parsing it again each time was a fifth of the recommender's cost.  Only tuples are
#: remembered: the raw specs are parsed policy manifests, never changed once parsed, and the entry
#: keeps them alive, so an ``id`` cannot be reused while it is here.
_PARSED: dict[tuple[int, int], tuple[object, object, list[MetricSpec], Behavior | None]] = {}
_PARSED_MAX = 1024


def _parsed_spec(
    spec_metrics: Sequence[Mapping[str, Any]] | None, behavior: Mapping[str, Any] | None
) -> tuple[list[MetricSpec], Behavior | None]:
    key = (id(spec_metrics), id(behavior))
    hit = _PARSED.get(key)
    if hit is not None and hit[0] is spec_metrics and hit[1] is behavior:
        return hit[2], hit[3]
    metric_specs = parse_metrics(spec_metrics)
    rules = parse_behavior(behavior)
    if type(spec_metrics) is tuple:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = (spec_metrics, behavior, metric_specs, rules)
    return metric_specs, rules


#: The tolerances of the behaviors seen lately, with the config they were read with: the same
#: parsed behavior comes back every tick (see ``_PARSED``, which keeps it alive).
_TOLERANCES: dict[tuple[int, int], tuple[Behavior | None, HpaConfig, Tolerances]] = {}


def _tolerances(rules: Behavior | None, cfg: HpaConfig) -> Tolerances:
    key = (id(rules), id(cfg))
    hit = _TOLERANCES.get(key)
    if hit is not None and hit[0] is rules and hit[1] is cfg:
        return hit[2]
    tolerances = Tolerances.for_hpa(rules, cfg)
    if len(_TOLERANCES) >= _PARSED_MAX:
        _TOLERANCES.clear()
    _TOLERANCES[key] = (rules, cfg, tolerances)
    return tolerances


def recommend(
    spec_metrics: Sequence[Mapping[str, Any]] | None,
    behavior: Mapping[str, Any] | None,
    min_replicas: int,
    max_replicas: int,
    current_replicas: int,
    status_replicas: int,
    pods: Sequence[PodInfo],
    inputs: MetricInputs,
    state: HpaState,
    now: float,
    cfg: HpaConfig | None = None,
) -> tuple[HpaResult, HpaState]:
    """One HPA reconcile (``reconcileAutoscaler``, reference 1.1), pure.

    ``current_replicas`` is the target's ``spec.replicas`` and ``status_replicas`` its
    ``status.replicas``; ``min_replicas`` is the HPA's (the caller applies the default of 1).
    ``state`` is not modified: the new state is returned, and the rescale is assumed to succeed
    (a scale event is recorded when ``behavior`` is present and the replica count changes).
    Malformed metric specs or behavior raise ``ValueError`` naming the field; metrics that cannot
    be computed (no samples, missing requests, unknown source type) are invalid metrics, reported
    in the result as the controller reports them.
    """
    cfg = cfg or HpaConfig()
    _check_arguments(min_replicas, max_replicas, current_replicas, status_replicas, now)
    metric_specs, rules = _parsed_spec(spec_metrics, behavior)

    new_state = _record_initial_recommendation(state.copy(), current_replicas, float(now))

    conditions = _Conditions()
    conditions.set("AbleToScale", "True", "SucceededGetScale", _GOT_SCALE)
    per_metric: list[tuple[str, int | str]] = []
    statuses: list[dict[str, Any]] = []
    metric_replicas: int | None = None
    stabilized: int | None = None
    reason = ""
    rescale = True
    desired = 0

    if current_replicas == 0 and min_replicas != 0:
        # Autoscaling is off for a target scaled to zero by hand (reference 1.1 step 4).
        rescale = False
        conditions.set("ScalingActive", "False", "ScalingDisabled", _SCALED_TO_ZERO)
    elif current_replicas > max_replicas:
        reason = "Current number of replicas above Spec.MaxReplicas"
        desired = max_replicas
    elif current_replicas < min_replicas:
        reason = "Current number of replicas below Spec.MinReplicas"
        desired = min_replicas
    else:
        ctx = Ctx(
            pods=pods,
            inputs=inputs,
            now=float(now),
            cfg=cfg,
            tolerances=_tolerances(rules, cfg),
            spec_replicas=current_replicas,
            status_replicas=status_replicas,
        )
        found = _desired_from_metrics(
            ctx, metric_specs, rules, new_state, conditions, per_metric, statuses, min_replicas, max_replicas
        )
        if found is None:  # the metrics are invalid: no scaling this round, no stabilization (reference 1.6)
            unchanged = (current_replicas, conditions.as_list(), per_metric, statuses, None, None, "")
            return _new_tuple(HpaResult, unchanged), new_state
        desired, metric_replicas, stabilized, reason = found
        rescale = desired != current_replicas

    if rescale:
        _record_rescale(new_state, conditions, rules, current_replicas, desired, float(now))
    else:
        desired = current_replicas
        reason = ""

    # HpaResult(...), without the Python ``__new__`` that ``NamedTuple`` generates (an interpreted
    # frame per tick, even compiled)
    fields = (desired, conditions.as_list(), per_metric, statuses, metric_replicas, stabilized, reason)
    result = _new_tuple(HpaResult, fields)
    return result, new_state


def _record_initial_recommendation(state: HpaState, current: int, now: float) -> HpaState:
    """HPA ``recordInitialRecommendation``: the first sight of an HPA seeds its history."""
    if not state.recommendations:
        state.recommendations.append((current, now))
    return state


def _check_arguments(min_replicas: int, max_replicas: int, current: int, status: int, now: float) -> None:
    """:func:`recommend`'s arguments, each named in the ``ValueError`` of a bad one."""
    if not (
        type(min_replicas) is int
        and type(max_replicas) is int
        and type(current) is int
        and type(status) is int
        and 0 <= min_replicas <= MAX_INT32
        and 1 <= max_replicas <= MAX_INT32
        and 0 <= current <= MAX_INT32
        and 0 <= status <= MAX_INT32
    ):  # the common case in one test; else each check, for its message
        _check_int(min_replicas, "min_replicas", 0)
        _check_int(max_replicas, "max_replicas", 1)
        _check_int(current, "current_replicas", 0)
        _check_int(status, "status_replicas", 0)
    if min_replicas > max_replicas:
        raise ValueError(f"min_replicas: {min_replicas} is greater than max_replicas {max_replicas}")
    # A float (the common case) skips the type tests, which build ``int | float`` on every call.
    if (type(now) is not float and (isinstance(now, bool) or not isinstance(now, int | float))) or not math.isfinite(
        now
    ):
        raise ValueError(f"now: must be a finite time, got {now!r}")


def _desired_from_metrics(
    ctx: Ctx,
    metric_specs: Sequence[MetricSpec],
    rules: Behavior | None,
    state: HpaState,
    conditions: _Conditions,
    per_metric: list[tuple[str, int | str]],
    statuses: list[dict[str, Any]],
    min_replicas: int,
    max_replicas: int,
) -> tuple[int, int, int, str] | None:
    """``reconcileAutoscaler``'s default case (reference 1.1): ``computeReplicasForMetrics``, then
    ``normalizeDesiredReplicas`` or ``normalizeDesiredReplicasWithBehaviors``: (desired, the
    metrics' proposal, the stabilized one, the rescale reason), or ``None`` when the metrics are
    invalid (all of them, or some and the rest would scale down; ``state`` is then left as it is)."""
    current_replicas = ctx.spec_replicas
    replicas, metric_name, invalid = _compute_for_metrics(ctx, metric_specs, per_metric, statuses, conditions)
    if invalid:
        return None
    desired = 0
    reason = ""
    rescale_metric = ""
    if replicas > desired:
        desired = replicas
        rescale_metric = metric_name
    if desired > current_replicas:
        reason = f"{rescale_metric} above target"
    if desired < current_replicas:
        reason = "All metrics below target"
    if rules is None:
        desired, stabilized = _normalize_legacy(
            state, conditions, current_replicas, desired, min_replicas, max_replicas, ctx.now, ctx.cfg
        )
    else:
        desired, stabilized = _normalize_with_behavior(
            state, conditions, rules, current_replicas, desired, min_replicas, max_replicas, ctx.now, ctx.cfg
        )
    return desired, replicas, stabilized, reason


def _record_rescale(
    state: HpaState, conditions: _Conditions, rules: Behavior | None, current: int, desired: int, now: float
) -> None:
    """After a rescale: the AbleToScale condition, and ``storeScaleEvent`` (only with behavior,
    only after an actual rescale; reference 1.9.4)."""
    conditions.set(
        "AbleToScale",
        "True",
        "SucceededRescale",
        f"the HPA controller was able to update the target scale to {desired}",
    )
    if rules is not None:
        if desired > current:
            state.scale_up_events = store_scale_event(
                state.scale_up_events, desired - current, now, rules.scale_up.longest_period
            )
        else:
            state.scale_down_events = store_scale_event(
                state.scale_down_events, current - desired, now, rules.scale_down.longest_period
            )


def _compute_for_metrics(
    ctx: Ctx,
    specs: Sequence[MetricSpec],
    per_metric: list[tuple[str, int | str]],
    statuses: list[dict[str, Any]],
    conditions: _Conditions,
) -> tuple[int, str, bool]:
    """``computeReplicasForMetrics`` (reference 1.6): (largest proposal, its metric, invalid?)."""
    replicas = 0
    metric = ""
    invalid_count = 0
    first_invalid: tuple[str, str] | None = None
    for spec in specs:
        try:
            if not spec.known:
                raise MetricError(f"unknown metric source type {spec.type!r}")
            proposal = _compute_metric(ctx, spec)
        except (MetricError, ValueError) as exc:
            message = str(exc)
            per_metric.append((spec.description, message))
            statuses.append({"type": ""})
            if first_invalid is None:
                reason = _FAILED_REASON.get(spec.type, "InvalidMetricSourceType")
                first_invalid = (reason, f"the HPA was unable to compute the replica count: {message}")
            invalid_count += 1
            continue
        per_metric.append((spec.description, proposal.replicas))
        statuses.append(proposal.status)
        # HPA: the first valid proposal, then any larger one (a zero proposal is replaced too).
        if replicas == 0 or proposal.replicas > replicas:
            replicas = proposal.replicas
            metric = spec.description
    if invalid_count >= len(specs) or (invalid_count > 0 and replicas < ctx.spec_replicas):
        assert first_invalid is not None
        conditions.set("ScalingActive", "False", first_invalid[0], first_invalid[1])
        return -1, "", True
    conditions.set(
        "ScalingActive",
        "True",
        "ValidMetricFound",
        f"the HPA was able to successfully calculate a replica count from {metric}",
    )
    return replicas, metric, False


def _normalize_legacy(
    state: HpaState,
    conditions: _Conditions,
    current: int,
    proposal: int,
    min_replicas: int,
    max_replicas: int,
    now: float,
    cfg: HpaConfig,
) -> tuple[int, int]:
    # HPA: horizontal.go normalizeDesiredReplicas (reference 1.8).
    stabilized, state.recommendations = stabilize_legacy(
        state.recommendations, proposal, now, cfg.downscale_stabilization
    )
    if stabilized != proposal:
        conditions.set(
            "AbleToScale",
            "True",
            "ScaleDownStabilized",
            "recent recommendations were higher than current one, applying the highest recent recommendation",
        )
    else:
        conditions.set("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
    desired, reason, message = limit_legacy(current, stabilized, min_replicas, max_replicas)
    conditions.set("ScalingLimited", "False" if desired == stabilized else "True", reason, message)
    return desired, stabilized


def _normalize_with_behavior(
    state: HpaState,
    conditions: _Conditions,
    behavior: Behavior,
    current: int,
    proposal: int,
    min_replicas: int,
    max_replicas: int,
    now: float,
    cfg: HpaConfig,
) -> tuple[int, int]:
    # HPA: horizontal.go normalizeDesiredReplicasWithBehaviors (reference 1.9); an unset scale-down
    # window takes the controller flag, truncated to whole seconds (maybeInitScaleDownStabilizationWindow).
    down_window = behavior.scale_down.stabilization_window_seconds
    if down_window is None:
        down_window = int(cfg.downscale_stabilization)
    up_window = behavior.scale_up.stabilization_window_seconds or 0
    stabilized, reason, message, state.recommendations = stabilize_with_behavior(
        state.recommendations, current, proposal, now, float(up_window), float(down_window)
    )
    if stabilized != proposal:
        conditions.set("AbleToScale", "True", reason, message)
    else:
        conditions.set("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
    desired, limit_reason, limit_message = limit_with_behavior(
        current, stabilized, min_replicas, max_replicas, state.scale_up_events, state.scale_down_events, behavior, now
    )
    conditions.set("ScalingLimited", "False" if desired == stabilized else "True", limit_reason, limit_message)
    return desired, stabilized
