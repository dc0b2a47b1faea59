"""The recommender entry: per container, estimate, round, cap to the policy; and the actuation-time cap.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/logic/recommender.go``
(``GetRecommendedPodResources``), ``pkg/recommender/routines/capping_post_processor.go`` (the
global max-allowed caps) and ``pkg/utils/vpa/capping.go`` (policy bounds, ``RequestsOnly`` limits;
docs/recommenders.md 2.7 step 5, 2.8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .arithmetic import _RESOURCES, _amount, _scale
from .config import VpaConfig
from .estimator import _estimate
from .model import ContainerState
from .policy import ContainerPolicy, _policy_for

__all__ = ["Recommendation", "cap_to_container_limits", "recommend"]


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One container's recommendation, each a ``{"cpu": millicores, "memory": bytes}`` dict.

    Resources outside the policy's controlled resources are absent.  ``uncapped_target`` is the
    target before minAllowed/maxAllowed capping (after rounding), as in the VPA status.
    """

    target: dict[str, int]
    lower_bound: dict[str, int]
    upper_bound: dict[str, int]
    uncapped_target: dict[str, int]

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {
            "target": dict(self.target),
            "lower_bound": dict(self.lower_bound),
            "upper_bound": dict(self.upper_bound),
            "uncapped_target": dict(self.uncapped_target),
        }


def _round_up(value: int, scale: int) -> int:
    # VPA: model/types.go RoundUpToScale, applied in ResourcesAsResourceList when the flag != 1
    # and the quantity is not zero.
    if scale == 1 or value == 0:
        return value
    return math.ceil(float(value) / float(scale)) * scale


def _cap(values: dict[str, int], min_allowed: Mapping[str, int], max_allowed: Mapping[str, int]) -> dict[str, int]:
    # VPA: utils/vpa/capping.go applyVPAPolicyForContainer: maybeCapToMin then maybeCapToMax,
    # a missing or zero bound is no bound.
    out: dict[str, int] = {}
    for res, v in values.items():
        lo = min_allowed.get(res, 0)
        if lo and v < lo:
            v = lo
        hi = max_allowed.get(res, 0)
        if hi and v > hi:
            v = hi
        out[res] = v
    return out


def recommend(
    containers: Mapping[str, ContainerState],
    now: float,
    cfg: VpaConfig,
    policies: Mapping[str, ContainerPolicy] | None = None,
) -> dict[str, Recommendation]:
    """Recommendations for one VPA's containers, keyed by container name.

    ``containers`` holds one (merged, see :func:`merge_states`) aggregate per container name.
    Pipeline (reference 2.7), per container and resource:

    1. containers with scaling mode ``Off``, without CPU samples, or expired at ``now`` are left
       out (VPA: routines GetContainerNameToAggregateStateMap; model isExpired);
    2. percentile of the histogram -> integer amount (target 0.9, lower 0.5, upper 0.95);
    3. + trunc(amount x margin fraction);
    4. lower x (1 + 0.001/confidence)^-2, upper x (1 + 1/confidence);
    5. max(amount, pod minimum / number of containers left after step 1);
    6. keep the controlled resources; round up to ``round_cpu_millicores``/``round_memory_bytes``;
       ``uncapped_target`` = target;
    7. cap target/lower/upper to the policy's minAllowed/maxAllowed, the global max flags filling
       resources missing from maxAllowed (VPA: routines/capping_post_processor.go).
    """
    active: list[tuple[str, ContainerState, ContainerPolicy | None]] = []
    for name in sorted(containers):
        state = containers[name]
        policy = _policy_for(name, policies)
        if policy is not None and policy.mode == "Off":
            continue
        if state.total_samples_count <= 0 or state.is_expired(now, cfg):
            continue
        active.append((name, state, policy))
    if not active:
        return {}

    # VPA: logic/recommender.go GetRecommendedPodResources - the pod minimum is split evenly.
    fraction = 1.0 / float(len(active))
    min_cpu = _scale(_amount(cfg.pod_recommendation_min_cpu_millicores * 0.001 * 1000.0), fraction)
    min_memory = _scale(_amount(cfg.pod_recommendation_min_memory_mb * 1024 * 1024), fraction)

    global_max: dict[str, int] = {}
    if cfg.container_recommendation_max_allowed_cpu is not None:
        global_max["cpu"] = cfg.container_recommendation_max_allowed_cpu
    if cfg.container_recommendation_max_allowed_memory is not None:
        global_max["memory"] = cfg.container_recommendation_max_allowed_memory

    out: dict[str, Recommendation] = {}
    rounding = {"cpu": cfg.round_cpu_millicores, "memory": cfg.round_memory_bytes}
    minimum = {"cpu": min_cpu, "memory": min_memory}
    for name, state, policy in active:
        target, lower, upper = _estimate(state, cfg, minimum)
        if policy is None:
            controlled: tuple[str, ...] = _RESOURCES
            min_allowed: Mapping[str, int] = {}
            max_allowed: Mapping[str, int] = global_max
        else:
            controlled = policy.controlled_resources
            min_allowed = policy.min_allowed
            # The policy's maxAllowed first, the global flags for the resources it leaves out.
            max_allowed = {**global_max, **policy.max_allowed} if global_max else policy.max_allowed
        # VPA: logic/recommender.go FilterControlledResources, then model/types.go
        # ResourcesAsResourceList rounding (uncappedTarget is the same rounded target).
        t: dict[str, int] = {}
        lb: dict[str, int] = {}
        ub: dict[str, int] = {}
        for r in _RESOURCES:
            if r in controlled:
                scale = rounding[r]
                t[r] = _round_up(target[r], scale)
                lb[r] = _round_up(lower[r], scale)
                ub[r] = _round_up(upper[r], scale)
        out[name] = Recommendation(
            target=_cap(t, min_allowed, max_allowed),
            lower_bound=_cap(lb, min_allowed, max_allowed),
            upper_bound=_cap(ub, min_allowed, max_allowed),
            uncapped_target=t,
        )
    return out


def cap_to_container_limits(
    rec: Recommendation, limits: Mapping[str, int], policy: ContainerPolicy | None
) -> tuple[Recommendation, list[str]]:
    """Actuation-time cap for ``controlledValues: RequestsOnly`` (reference 2.8).

    VPA: utils/vpa/capping.go capRecommendationToContainerLimit - with RequestsOnly, target, lower
    and upper bound are lowered to the container's current limit (``limits``: millicores/bytes;
    limits themselves are never changed).  With RequestsAndLimits nothing changes here.  Returns
    the capped recommendation and upstream's annotations for the target (e.g. ``"memory capped to
    container limit"``).
    """
    if policy is None or policy.controlled_values != "RequestsOnly":
        return rec, []

    def cap(values: dict[str, int]) -> tuple[dict[str, int], list[str]]:
        out = dict(values)
        notes: list[str] = []
        for res, limit in limits.items():
            if res in out and out[res] > limit:
                out[res] = limit
                notes.append(f"{res} capped to container limit")
        return out, notes

    target, notes = cap(rec.target)
    lower, _ = cap(rec.lower_bound)
    upper, _ = cap(rec.upper_bound)
    return Recommendation(target, lower, upper, dict(rec.uncapped_target)), notes
