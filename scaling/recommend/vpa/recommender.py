"""The recommender entry: per container, estimate, round, cap to the policy; and the actuation-time cap.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/logic/recommender.go``
(``GetRecommendedPodResources``), ``pkg/recommender/routines/capping_post_processor.go`` (the
global max-allowed caps) and ``pkg/utils/vpa/capping.go`` (policy bounds, ``RequestsOnly`` limits;
docs/recommenders.md 2.7 step 5, 2.8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from .arithmetic import RESOURCES, resource_amount, scale_resource
from .config import VpaConfig
from .estimator import estimate_container
from .model import ContainerState
from .policy import ContainerPolicy, policy_for

__all__ = ["Recommendation", "cap_to_container_limits", "recommend"]

_new_tuple = tuple.__new__


class Recommendation(NamedTuple):
    """One container's recommendation, each a ``{"cpu": millicores, "memory": bytes}`` dict.

    Resources outside the policy's controlled resources are absent.  ``uncapped_target`` is the
    target before minAllowed/maxAllowed capping (after rounding), as in the VPA status.  A named
    tuple, read-only: built on every recommender run, where a frozen dataclass paid an
    ``object.__setattr__`` call per field.
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


def recommend(
    containers: Mapping[str, ContainerState],
    now: float,
    cfg: VpaConfig,
    policies: Mapping[str, ContainerPolicy] | None = None,
) -> dict[str, Recommendation]:
    """Recommendations for one VPA's containers, keyed by container name.

    ``containers`` holds one (merged, see :func:`merge_states`) aggregate per container name.
    Pipeline (reference 2.7), per container and resource:

    1. containers with scaling mode ``Off`` are left out (VPA: routines/vpa.go
       GetContainerNameToAggregateStateMap); every other aggregate given is recommended, also one
       without CPU samples (CPU at the minimum) and one past its expiry, which upstream drops
       only at its hourly garbage collection (:func:`~.model.collect_garbage`, the caller's);
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
        policy = policy_for(name, policies)
        if policy is not None and policy.mode == "Off":
            continue
        active.append((name, state, policy))
    if not active:
        return {}
    minimum, global_max = _run_constants(cfg, len(active))
    round_cpu = cfg.round_cpu_millicores
    round_memory = cfg.round_memory_bytes
    out: dict[str, Recommendation] = {}
    for name, state, policy in active:
        target, lower, upper = estimate_container(state, cfg, minimum)
        if policy is None:
            controlled: tuple[str, ...] = RESOURCES
            min_allowed: Mapping[str, int] = _NO_BOUNDS
            max_allowed: Mapping[str, int] = global_max
        else:
            controlled = policy.controlled_resources
            min_allowed = policy.min_allowed
            # The policy's maxAllowed first, the global flags for the resources it leaves out.
            max_allowed = {**global_max, **policy.max_allowed} if global_max else policy.max_allowed
        # VPA: logic/recommender.go FilterControlledResources, then model/types.go
        # ResourcesAsResourceList rounding (uncappedTarget is the same rounded target), then
        # utils/vpa/capping.go applyVPAPolicyForContainer (``_cap``), in one pass per resource.
        t: dict[str, int] = {}
        lb: dict[str, int] = {}
        ub: dict[str, int] = {}
        capped_t: dict[str, int] = {}
        capped_lb: dict[str, int] = {}
        capped_ub: dict[str, int] = {}
        for r in RESOURCES:
            if r not in controlled:
                continue
            scale = round_cpu if r == "cpu" else round_memory
            vt, vl, vu = target[r], lower[r], upper[r]
            if scale != 1:
                vt, vl, vu = _round_up(vt, scale), _round_up(vl, scale), _round_up(vu, scale)
            t[r], lb[r], ub[r] = vt, vl, vu
            # maybeCapToMin then maybeCapToMax; a missing or zero bound is no bound.
            lo = min_allowed.get(r, 0)
            hi = max_allowed.get(r, 0)
            if lo:
                vt, vl, vu = lo if vt < lo else vt, lo if vl < lo else vl, lo if vu < lo else vu
            if hi:
                vt, vl, vu = hi if vt > hi else vt, hi if vl > hi else vl, hi if vu > hi else vu
            capped_t[r], capped_lb[r], capped_ub[r] = vt, vl, vu
        # Recommendation(target, lower_bound, upper_bound, uncapped_target), without the Python
        # ``__new__`` that ``NamedTuple`` generates (an interpreted frame, even compiled)
        out[name] = _new_tuple(Recommendation, (capped_t, capped_lb, capped_ub, t))
    return out


#: A policy without minAllowed (shared, read-only).
_NO_BOUNDS: Mapping[str, int] = MappingProxyType({})
#: :func:`_run_constants` of the configs seen lately: id -> (the config, containers, the constants).
_CONSTANTS: dict[int, tuple[VpaConfig, int, dict[str, int], dict[str, int]]] = {}


def _run_constants(cfg: VpaConfig, active: int) -> tuple[dict[str, int], dict[str, int]]:
    """(the per-container minimum, the global maxAllowed caps) of a run over ``active`` containers.

    VPA: logic/recommender.go GetRecommendedPodResources splits the pod minimum evenly over the
    containers; routines/capping_post_processor.go caps with the global max flags.  Both depend
    on the config (frozen) and the number of containers alone, so they are remembered per config
    (the entry keeps it alive, so its ``id`` is not reused while it is here); the dicts are read only.
    """
    hit = _CONSTANTS.get(id(cfg))
    if hit is not None and hit[0] is cfg and hit[1] == active:
        return hit[2], hit[3]
    fraction = 1.0 / float(active)
    min_cpu = scale_resource(resource_amount(cfg.pod_recommendation_min_cpu_millicores * 0.001 * 1000.0), fraction)
    min_memory = scale_resource(resource_amount(cfg.pod_recommendation_min_memory_mb * 1024 * 1024), fraction)
    global_max: dict[str, int] = {}
    if cfg.container_recommendation_max_allowed_cpu is not None:
        global_max["cpu"] = cfg.container_recommendation_max_allowed_cpu
    if cfg.container_recommendation_max_allowed_memory is not None:
        global_max["memory"] = cfg.container_recommendation_max_allowed_memory
    minimum = {"cpu": min_cpu, "memory": min_memory}
    if len(_CONSTANTS) >= 64:
        _CONSTANTS.clear()
    _CONSTANTS[id(cfg)] = (cfg, active, minimum, global_max)
    return minimum, global_max


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
    return _new_tuple(Recommendation, (target, lower, upper, dict(rec.uncapped_target))), notes
