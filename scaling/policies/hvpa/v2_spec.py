"""Gardener HVPA, line B (``autoscaling.gardener.cloud``): its spec, parsed, and the effective
scaling intervals ("buckets") cut from its ``scaleIntervals``; the policy is :mod:`.v2`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidPolicy
from ...events import WorkloadRef
from ...quantity import format_quantity
from ..base import get_path, int_field, mapping_field, quantity_field
from .spec import (
    Change,
    ContainerPolicy,
    ScaleType,
    Window,
    container_policies,
    find_container_policy,
    metric_list,
    scale_params,
    scale_type,
)

__all__ = [
    "BLOCK_ORDER",
    "EXTRAPOLATIONS",
    "RESOURCES",
    "WAIVABLE",
    "Bucket",
    "Buckets",
    "HvpaV2Spec",
    "ScaleInterval",
    "build_buckets",
    "parse_hvpa_v2_spec",
]

RESOURCES = ("cpu", "memory")
#: HVPA v2: finaliseScalingParameters lists blocked scalings in this priority order (reference 3.5).
BLOCK_ORDER = ("UpdatePolicy", "StabilizationWindow", "MaintenanceWindow", "MinChange", "ParadoxicalScaling")
#: HVPA v2: a container blocked only by these is changed anyway when another container changes (3.3).
WAIVABLE = ("MinChange", "StabilizationWindow")
EXTRAPOLATIONS = ("linear", "horizontalOnly")
_FIELD = {"cpu": "maxCpu", "memory": "maxMemory"}


# --- effective scaling intervals ("buckets") -------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScaleInterval:
    """One ``scaleIntervals`` entry; a ``None`` maximum defaults to the container's ``maxAllowed``."""

    max_replicas: int
    max_per_pod: Mapping[str, int | None]


@dataclass(frozen=True, slots=True)
class Bucket:
    """The per-pod range allowed at exactly ``replicas`` replicas (milli-units, both ends inclusive)."""

    replicas: int
    min: Mapping[str, int]
    max: Mapping[str, int]

    def accepts(self, resource: str, total: int) -> bool:
        # HVPA v2: a bucket holds a *total* v iff r x min <= v <= r x max (reference hvpa.md 3.1).
        return self.replicas * self.min[resource] <= total <= self.replicas * self.max[resource]


@dataclass(frozen=True, slots=True)
class Buckets:
    """All buckets of one container, one per replica count from minReplicas upwards."""

    buckets: tuple[Bucket, ...]
    #: The last interval's per-pod maximum (its ``maxCpu``/``maxMemory`` or the defaulted maxAllowed).
    last_max: Mapping[str, int]

    @property
    def first_replicas(self) -> int:
        return self.buckets[0].replicas

    @property
    def last_replicas(self) -> int:
        return self.buckets[-1].replicas

    def at(self, replicas: int) -> Bucket | None:
        i = replicas - self.first_replicas
        return self.buckets[i] if 0 <= i < len(self.buckets) else None

    def lookup(self, resource: str, total: int, bias: int) -> int | None:
        """The replica count whose bucket holds ``total``; ``None`` when no bucket does.

        HVPA v2: the bucket of the current replica count is tried first, so that where overlapping
        buckets both hold a total the workload stays put; then buckets in ascending order (3.1).
        """
        current = self.at(bias)
        if current is not None and current.accepts(resource, total):
            return bias
        for b in self.buckets:
            if b.accepts(resource, total):
                return b.replicas
        return None


def build_buckets(
    intervals: Sequence[ScaleInterval],
    min_replicas: int,
    min_allowed: Mapping[str, int],
    max_allowed: Mapping[str, int],
    overlap: Mapping[str, Change],
    *,
    who: str = "the container",
) -> Buckets:
    """Cut ``scaleIntervals`` into per-replica buckets (HVPA v2 ``getLinearBuckets``, reference 3.1).

    Each interval's per-pod range is split linearly over its replica counts.  The next replica
    count starts where the previous one's *total* ended (``prevMax x r / (r + 1)``), so totals are
    contiguous, and is then lowered by ``scalingIntervalsOverlap``: that overlap is what lets a
    shrinking workload stay in its current bucket (hysteresis) instead of flapping at a boundary.
    Raises :class:`InvalidPolicy` naming the interval field that makes the buckets impossible.
    """
    replicas = min_replicas
    mins = {r: min_allowed.get(r, 0) for r in RESOURCES}
    out: list[Bucket] = []
    last_max: dict[str, int] = {}
    for j, iv in enumerate(intervals):
        where = f"spec.scaleIntervals[{j}]"
        maxes: dict[str, int] = {}
        for res in RESOURCES:
            value = iv.max_per_pod.get(res)
            if value is None:
                # HVPA v2: maxCpu/maxMemory default to the container's VPA maxAllowed (reference 1.2).
                value = max_allowed.get(res)
            if value is None:
                raise InvalidPolicy(
                    f"{where}.{_FIELD[res]}", f"required: {who} has no VPA maxAllowed.{res} to default to"
                )
            if value < mins[res]:
                raise InvalidPolicy(
                    f"{where}.{_FIELD[res]}",
                    f"{format_quantity(res, value)} is below {format_quantity(res, mins[res])}, the per-pod "
                    f"minimum of {who} where this interval starts ({replicas} replicas)",
                )
            maxes[res] = value
        n = iv.max_replicas - replicas + 1  # validated >= 1 by the parser
        start = dict(mins)
        # HVPA v2: step = (max - min at interval start) / n, truncating (reference 3.1).
        step = {res: (maxes[res] - start[res]) // n for res in RESOURCES}
        for i in range(1, n + 1):
            local_max = {res: start[res] + i * step[res] for res in RESOURCES}
            out.append(Bucket(replicas, dict(mins), local_max))
            prev, replicas = replicas, replicas + 1
            # HVPA v2: next min = prevMax x prevReplicas / (prevReplicas + 1), totals contiguous (3.1).
            mins = {res: local_max[res] * prev // replicas for res in RESOURCES}
            for res, change in overlap.items():
                if res not in mins:
                    continue  # HVPA v2 logs and ignores other resource names
                by_pct = mins[res] * change.percentage // 100 if change.percentage is not None else 0
                by_value = change.value or 0
                # HVPA v2: overlap = max(min x pct / 100, value) (reference 3.1); tandem: not below 0.
                mins[res] = max(0, mins[res] - max(by_pct, by_value))
        last_max = maxes
    return Buckets(tuple(out), last_max)


# --- the parsed policy ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HvpaV2Spec:
    name: str
    workload: WorkloadRef
    #: Replica bounds of the policy: HPA minReplicas .. the last scale interval's maxReplicas.
    min_replicas: int
    max_replicas: int
    hpa_max_replicas: int | None
    hpa_enabled: bool
    vpa_enabled: bool
    up: ScaleType
    down: ScaleType
    intervals: tuple[ScaleInterval, ...]
    overlap: Mapping[str, Change]
    base: Mapping[str, Change]
    limits_gap: Mapping[str, Change]
    window: Window | None
    containers: tuple[ContainerPolicy, ...]
    #: Buckets per container policy name (``"*"`` included); absent for policies in mode Off.
    buckets: Mapping[str, Buckets] = field(default_factory=dict)
    #: Buckets for containers without any policy (min 0, no maxAllowed), or why there are none.
    default_buckets: Buckets | None = None
    default_problem: str = ""
    #: The HPA template's metrics and behavior, for tandem's own HPA recommender (as line A).
    hpa_metrics: tuple[Mapping[str, Any], ...] = ()
    hpa_behavior: Mapping[str, Any] | None = None

    def container_policy(self, name: str) -> ContainerPolicy | None:
        return find_container_policy(self.containers, name)  # as in line A

    def buckets_for(self, name: str) -> tuple[Buckets | None, str]:
        """The container's buckets, or ``None`` and why it is left alone."""
        pol = self.container_policy(name)
        if pol is None:
            return self.default_buckets, self.default_problem
        if pol.mode == "Off":
            return None, f"container policy {pol.name!r} has mode Off"
        return self.buckets.get(pol.name), ""


def _precheck_change_params(obj: Mapping[str, Any], where: str) -> None:
    """Validate the ``percentage`` leaves with their full path before the shared helpers read them."""
    for res in RESOURCES:
        sub = obj.get(res)
        if isinstance(sub, Mapping):
            try:
                int_field(sub, "percentage", None)
            except InvalidPolicy as exc:
                raise exc.within(f"{where}.{res}") from None


def _change_params(manifest: Mapping[str, Any], where: str) -> dict[str, Change]:
    obj = mapping_field(manifest, where)
    _precheck_change_params(obj, where)
    return scale_params(obj, where)


def _scale_type_v2(manifest: Mapping[str, Any], key: str) -> ScaleType:
    """Top-level ``spec.scaleUp``/``spec.scaleDown`` (line B moved them out of ``hpa``/``vpa``)."""
    spec = mapping_field(manifest, "spec")
    where = f"spec.{key}"
    obj = mapping_field(spec, key) if isinstance(spec.get(key), Mapping) else {}
    min_change = obj.get("minChange")
    if isinstance(min_change, Mapping):
        _precheck_change_params(min_change, f"{where}.minChange")
    return scale_type(spec, key)


def _bool_field(manifest: Mapping[str, Any], path: str) -> bool | None:
    value = get_path(manifest, path)
    if value is not None and not isinstance(value, bool):
        raise InvalidPolicy(path, f"expected true or false, got {value!r}")
    return value


def _intervals(manifest: Mapping[str, Any], min_replicas: int) -> tuple[ScaleInterval, ...]:
    raw = get_path(manifest, "spec.scaleIntervals")
    if not isinstance(raw, list) or not raw:
        raise InvalidPolicy("spec.scaleIntervals", "required: a non-empty list of {maxCpu, maxMemory, maxReplicas}")
    out = []
    start = min_replicas
    for j, item in enumerate(raw):
        where = f"spec.scaleIntervals[{j}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(where, "expected an object with maxCpu, maxMemory and maxReplicas")
        try:
            max_r = int_field(item, "maxReplicas", None, minimum=1)
            maxes = {res: quantity_field(item, _FIELD[res]) for res in RESOURCES}
        except InvalidPolicy as exc:
            raise exc.within(where) from None
        if max_r is None:
            raise InvalidPolicy(f"{where}.maxReplicas", "required integer is missing")
        if max_r < start:
            first = "hpa minReplicas" if j == 0 else "the previous interval's maxReplicas + 1"
            # HVPA v2 would divide by zero (n = maxReplicas - start + 1); validateScaleIntervals is a TODO.
            raise InvalidPolicy(
                f"{where}.maxReplicas", f"{max_r} is below {start}, where this interval starts ({first})"
            )
        extrapolation = item.get("effectiveIntervalExtrapolation")
        if extrapolation is not None and extrapolation not in EXTRAPOLATIONS:
            raise InvalidPolicy(
                f"{where}.effectiveIntervalExtrapolation",
                f"{extrapolation!r} is not one of {', '.join(EXTRAPOLATIONS)}",
            )
        out.append(ScaleInterval(max_r, maxes))
        start = max_r + 1
    return tuple(out)


def parse_hvpa_v2_spec(manifest: Mapping[str, Any], workload: WorkloadRef) -> HvpaV2Spec:
    """Parse the spec of an ``autoscaling.gardener.cloud/v1alpha1`` Hvpa (docs/contract.md §5).

    Everything that would make the upstream controller error out or divide by zero at reconcile
    time is rejected here instead, naming the field, so a bad manifest is the user's first error.
    """
    mapping_field(manifest, "spec", required=True)
    meta = mapping_field(manifest, "metadata")
    name = str(meta.get("name") or workload.name)
    min_r = int_field(manifest, "spec.hpa.template.spec.minReplicas", 1, minimum=1)
    assert min_r is not None
    hpa_max = int_field(manifest, "spec.hpa.template.spec.maxReplicas", None, minimum=1)
    if hpa_max is not None and hpa_max < min_r:
        raise InvalidPolicy("spec.hpa.template.spec.maxReplicas", f"{hpa_max} is below minReplicas {min_r}")
    intervals = _intervals(manifest, min_r)
    up = _scale_type_v2(manifest, "scaleUp")
    down = _scale_type_v2(manifest, "scaleDown")
    window = None
    mtw = get_path(manifest, "spec.maintenanceTimeWindow")
    if mtw is not None:
        if not isinstance(mtw, Mapping):
            raise InvalidPolicy("spec.maintenanceTimeWindow", "expected an object with begin and end")
        window = Window.parse(mtw.get("begin"), mtw.get("end"), "spec.maintenanceTimeWindow")
    for where, st in (("spec.scaleUp", up), ("spec.scaleDown", down)):
        if st.mode == "MaintenanceWindow" and window is None:
            # HVPA v2 errors out at reconcile time ("maintenance time window is not provided").
            raise InvalidPolicy(
                "spec.maintenanceTimeWindow", f"required when {where}.updatePolicy.updateMode is MaintenanceWindow"
            )
    overlap = _change_params(manifest, "spec.scalingIntervalsOverlap")
    containers = container_policies(
        mapping_field(manifest, "spec.vpa.template.spec.resourcePolicy"), "spec.vpa.template.spec.resourcePolicy"
    )
    buckets: dict[str, Buckets] = {}
    for i, pol in enumerate(containers):
        if pol.mode == "Off":
            continue  # HVPA v2 builds buckets only for containers whose VPA mode is not Off (3.1)
        who = f"spec.vpa.template.spec.resourcePolicy.containerPolicies[{i}] ({pol.name!r})"
        buckets[pol.name] = build_buckets(intervals, min_r, pol.min_allowed, pol.max_allowed, overlap, who=who)
    default_buckets: Buckets | None = None
    default_problem = ""
    try:
        default_buckets = build_buckets(intervals, min_r, {}, {}, overlap, who="a container without VPA policy")
    except InvalidPolicy as exc:
        if not containers:
            raise  # nothing could ever be scaled: say which interval lacks its maximum
        default_problem = f"no VPA container policy, and {exc.field}: {exc.reason}"
    spec = HvpaV2Spec(
        name=name,
        workload=workload,
        min_replicas=min_r,
        max_replicas=intervals[-1].max_replicas,
        hpa_max_replicas=hpa_max,
        hpa_enabled=_bool_field(manifest, "spec.hpa.deploy") is not False,
        vpa_enabled=_bool_field(manifest, "spec.vpa.deploy") is not False,
        up=up,
        down=down,
        intervals=intervals,
        overlap=overlap,
        base=_change_params(manifest, "spec.baseResourcesPerReplica"),
        limits_gap=_change_params(manifest, "spec.vpa.limitsRequestsGapScaleParams"),
        window=window,
        containers=containers,
        buckets=buckets,
        default_buckets=default_buckets,
        default_problem=default_problem,
        hpa_metrics=metric_list(get_path(manifest, "spec.hpa.template.spec.metrics"), "spec.hpa.template.spec.metrics"),
        hpa_behavior=(
            mapping_field(manifest, "spec.hpa.template.spec.behavior")
            if get_path(manifest, "spec.hpa.template.spec.behavior") is not None
            else None
        ),
    )
    return spec
