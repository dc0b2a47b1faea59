"""Gardener HVPA, weight-based line: the released API and the seed proposal's form.

Two manifests map onto one :class:`HvpaSpec`:

* the **released** API (``autoscaling.k8s.io/v1alpha1`` with ``hpa``/``vpa`` blocks, integer
  ``vpaWeight`` 0-100) follows the released controller (hvpa-controller v0.17.0, ``master``;
  reference ``hvpa.md`` section 2), quirks included;
* the **seed** form (``hpaTemplate``/``vpaTemplate``, fractional ``vpaWeight`` 0-1, stage fields,
  ``minCpuChange``...) follows ``seeds/hvpa-controller-proposal.md`` and adds its modes
  (HPA-preferred, HPA-biased, VPA-biased, mixed).

Every place where the two differ is listed in ``docs/hvpa.md``.  Weights are kept as exact
``Fraction`` of 1 so that ``ceil``/``floor``/``trunc`` land where Go's integer and float64 maths do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from ..outcome import Outcome, View
from ..quantity import bytes_of, format_quantity, parse_quantity
from ..recommend.vpa import ContainerPolicy as VpaContainerPolicy
from .base import duration_field, get_path, int_field, mapping_field
from .bounds import Bounds, ContainerBounds
from .registry import PolicyKind, register
from .templates import HpaTemplate, VpaTemplate

__all__ = ["MODES", "Change", "ContainerPolicy", "HvpaPolicy", "HvpaSpec", "Interval", "ScaleType", "Window"]

RESOURCES = ("cpu", "memory")
UPDATE_MODES = ("Auto", "Off", "MaintenanceWindow")
MODES = ("WeightBased", "HpaPreferred", "HpaBiased", "VpaBiased", "Mixed")
# HVPA: getThreshold defaults when neither value nor percentage is set (reference hvpa.md 2.6).
DEFAULT_MIN_CHANGE = {"cpu": 200, "memory": 200_000_000 * 1000}


@dataclass(frozen=True, slots=True)
class Change:
    """HVPA ``ChangeParams``: an absolute ``value`` (milli-units) and/or a ``percentage``."""

    value: int | None = None
    percentage: int | None = None


@dataclass(frozen=True, slots=True)
class ScaleType:
    """HVPA ``ScaleType`` for one direction of one axis."""

    mode: str = "Auto"
    min_change: Mapping[str, Change] = field(default_factory=dict)
    stabilization: float = 0.0


@dataclass(frozen=True, slots=True)
class Interval:
    start: int
    last: int
    weight: Fraction  # vpaWeight as a fraction of 1


@dataclass(frozen=True, slots=True)
class Window:
    """Daily maintenance window in UTC seconds of the day, bounds inclusive (utils/timewindow.go)."""

    begin: int
    end: int

    def contains(self, t: float) -> bool:
        # HVPA: second precision, inclusive at both ends, wraps over midnight when end < begin.
        s = math.floor(t) % 86400
        if self.begin <= self.end:
            return self.begin <= s <= self.end
        return s >= self.begin or s <= self.end

    @classmethod
    def parse(cls, begin: object, end: object, where: str) -> Window:
        return cls(_parse_window_time(begin, f"{where}.begin"), _parse_window_time(end, f"{where}.end"))


def _parse_window_time(value: object, where: str) -> int:
    # HVPA: layout "150405-0700", e.g. "220000+0100", converted to UTC (reference hvpa.md 1.1).
    if not isinstance(value, str) or len(value) != 11 or value[6] not in "+-":
        raise InvalidPolicy(where, f"{value!r} is not HHMMSS+HHMM (like '220000+0100')")
    try:
        hh, mm, ss = int(value[0:2]), int(value[2:4]), int(value[4:6])
        oh, om = int(value[7:9]), int(value[9:11])
    except ValueError:
        raise InvalidPolicy(where, f"{value!r} is not HHMMSS+HHMM (like '220000+0100')") from None
    if hh > 23 or mm > 59 or ss > 59 or oh > 23 or om > 59:
        raise InvalidPolicy(where, f"{value!r} is not a valid time of day")
    offset = (oh * 3600 + om * 60) * (1 if value[6] == "+" else -1)
    return (hh * 3600 + mm * 60 + ss - offset) % 86400


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    """The VPA ``containerPolicies`` entry that HVPA consults (mode, controlled*, bounds)."""

    name: str
    mode: str | None = None
    controlled_resources: tuple[str, ...] | None = None
    controlled_values: str | None = None
    min_allowed: Mapping[str, int] = field(default_factory=dict)
    max_allowed: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MixedThresholds:
    """Seed "Mixed" mode: apply HPA if |desired - current| > ``replicas``, VPA if Δ > ``resources``."""

    replicas: int = 1
    resources: Mapping[str, Change] = field(default_factory=dict)
    prefer: str = "hpa"


@dataclass(frozen=True, slots=True)
class HvpaSpec:
    name: str
    workload: WorkloadRef
    form: str  # "released" | "seed"
    controls_replicas: bool
    min_replicas: int
    max_replicas: int
    hpa_deploy: bool
    vpa_deploy: bool
    hpa_up: ScaleType
    hpa_down: ScaleType
    vpa_up: ScaleType
    vpa_down: ScaleType
    intervals: tuple[Interval, ...]
    containers: tuple[ContainerPolicy, ...]
    limits_gap: Mapping[str, Change]
    window: Window | None
    mode: str = "WeightBased"
    mixed: MixedThresholds | None = None
    hpa_metrics: tuple[Mapping[str, Any], ...] = ()
    hpa_behavior: Mapping[str, Any] | None = None

    def container_policy(self, name: str) -> ContainerPolicy | None:
        return find_container_policy(self.containers, name)


def find_container_policy(policies: Sequence[ContainerPolicy], name: str) -> ContainerPolicy | None:
    """VPA: the first policy naming the container, else the ``"*"`` default (reference hvpa.md 2.5)."""
    for p in policies:
        if p.name == name:
            return p
    for p in policies:
        if p.name == "*":
            return p
    return None


# --- manifest parsing ------------------------------------------------------------------------


def _change(obj: Mapping[str, Any], where: str) -> Change:
    if not isinstance(obj, Mapping):
        raise InvalidPolicy(where, "expected an object with value and/or percentage")
    value = obj.get("value")
    milli = None
    if value is not None:
        try:
            milli = parse_quantity(value)
        except ValueError as exc:
            raise InvalidPolicy(f"{where}.value", str(exc)) from None
    try:
        pct = int_field(obj, "percentage", None)
    except InvalidPolicy as exc:
        raise exc.within(where) from None
    return Change(milli, pct)


def _scale_params(obj: Mapping[str, Any], where: str) -> dict[str, Change]:
    out: dict[str, Change] = {}
    for res in RESOURCES:
        if isinstance(obj.get(res), Mapping):
            out[res] = _change(obj[res], f"{where}.{res}")
        elif obj.get(res) is not None:
            raise InvalidPolicy(f"{where}.{res}", "expected an object with value and/or percentage")
    return out


def _scale_type(parent: Mapping[str, Any], key: str, prefix: str = "spec") -> ScaleType:
    where = f"{prefix}.{key}"
    try:
        obj = mapping_field(parent, key)
        mode = get_path(obj, "updatePolicy.updateMode") or "Auto"
        if mode not in UPDATE_MODES:
            raise InvalidPolicy("updatePolicy.updateMode", f"{mode!r} is not one of {', '.join(UPDATE_MODES)}")
        return ScaleType(
            mode,
            _scale_params(mapping_field(obj, "minChange"), f"{where}.minChange"),
            duration_field(obj, "stabilizationDuration") if "stabilizationDuration" in obj else 0.0,
        )
    except InvalidPolicy as exc:
        if exc.field.startswith(where):
            raise
        raise exc.within(prefix if exc.field.startswith(key) else where) from None


def _ci_get(obj: Mapping[str, Any], key: str) -> Any:
    """Manifests in the seed write ``MinAllowed``; accept any capitalisation of the first letter."""
    if key in obj:
        return obj[key]
    return obj.get(key[0].upper() + key[1:])


def _container_policies(resource_policy: Mapping[str, Any], where: str) -> tuple[ContainerPolicy, ...]:
    raw = resource_policy.get("containerPolicies") or []
    if not isinstance(raw, list):
        raise InvalidPolicy(f"{where}.containerPolicies", "expected a list")
    out = []
    for i, p in enumerate(raw):
        w = f"{where}.containerPolicies[{i}]"
        if not isinstance(p, Mapping):
            raise InvalidPolicy(w, "expected an object")
        name = _ci_get(p, "containerName")
        if not isinstance(name, str) or not name:
            raise InvalidPolicy(f"{w}.containerName", "required string is missing")
        bounds: dict[str, dict[str, int]] = {}
        for key in ("minAllowed", "maxAllowed"):
            values = _ci_get(p, key) or {}
            if not isinstance(values, Mapping):
                raise InvalidPolicy(f"{w}.{key}", "expected an object of quantities")
            bounds[key] = {}
            for res, q in values.items():
                try:
                    bounds[key][res] = parse_quantity(q)
                except ValueError as exc:
                    raise InvalidPolicy(f"{w}.{key}.{res}", str(exc)) from None
        cr = _ci_get(p, "controlledResources")
        if cr is not None and (not isinstance(cr, list) or not all(isinstance(r, str) for r in cr)):
            raise InvalidPolicy(f"{w}.controlledResources", "expected a list of resource names")
        cv = _ci_get(p, "controlledValues")
        if cv not in (None, "RequestsAndLimits", "RequestsOnly"):
            raise InvalidPolicy(f"{w}.controlledValues", f"{cv!r} is not RequestsAndLimits or RequestsOnly")
        mode = _ci_get(p, "mode")
        if mode not in (None, "Auto", "Off", "Initial", "Recreate"):
            raise InvalidPolicy(f"{w}.mode", f"{mode!r} is not a VPA container mode")
        out.append(
            ContainerPolicy(
                name, mode, None if cr is None else tuple(cr), cv, bounds["minAllowed"], bounds["maxAllowed"]
            )
        )
    for p in out:
        for res, lo in p.min_allowed.items():
            hi = p.max_allowed.get(res)
            if hi is not None and lo > hi:
                raise InvalidPolicy(f"{where}.containerPolicies", f"{p.name}: minAllowed.{res} is above maxAllowed")
    return tuple(out)


def _weight(value: object, where: str, *, fractional: bool) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidPolicy(where, f"expected a number, got {value!r}")
    if fractional:
        # Seed: vpaWeight is a fraction between 0 and 1 (seeds/hvpa-controller-proposal.md).
        w = Fraction(str(value))
        if not 0 <= w <= 1:
            raise InvalidPolicy(where, f"{value} is outside 0..1")
        return w
    # Released: vpaWeight is an integer percentage, CRD min 0 / max 100 (reference hvpa.md 1.1).
    if isinstance(value, float) and not value.is_integer():
        raise InvalidPolicy(where, f"{value} is not an integer percentage (0-100); 0-1 fractions are the seed form")
    if not 0 <= value <= 100:
        raise InvalidPolicy(where, f"{value} is outside 0..100")
    return Fraction(int(value), 100)


def _intervals(raw: object, where: str, *, fractional: bool) -> tuple[Interval, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidPolicy(where, "expected a list of intervals")
    out = []
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(w, "expected an object")
        start = int_field(item, "startReplicaCount", 0)
        last = int_field(item, "lastReplicaCount", 0)
        assert start is not None and last is not None
        if start and last and start > last:
            raise InvalidPolicy(w, f"startReplicaCount {start} is above lastReplicaCount {last}")
        out.append(Interval(start, last, _weight(item.get("vpaWeight", 0), f"{w}.vpaWeight", fractional=fractional)))
    return tuple(out)


def _stage_intervals(spec: Mapping[str, Any]) -> tuple[Interval, ...] | None:
    """The original proposal's three stages (``StageTwoStartReplicaCount``...), as intervals."""

    def pick(name: str) -> Any:
        return spec.get(name, spec.get(name[0].upper() + name[1:]))

    names = (
        "stageTwoStartReplicaCount",
        "stageTwoStopReplicaCount",
        "firstStageVpaWeight",
        "secondStageVpaWeight",
        "thirdStageVpaWeight",
    )
    if all(pick(n) is None for n in names):
        return None
    x1, x2 = pick(names[0]), pick(names[1])
    for n, v in ((names[0], x1), (names[1], x2)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InvalidPolicy(f"spec.{n}", f"expected a replica count >= 1, got {v!r}")
    w = [_weight(pick(n) or 0, f"spec.{n}", fractional=True) for n in names[2:]]
    # Seed: stage 1 is minReplicas..x1, stage 2 x1..x2, stage 3 x2..maxReplicas.  x1 and x2 are
    # optional; without x2 stage 2 runs to maxReplicas.  0 bounds mean min/max (as released).
    stages = []
    if x1 is not None and x1 > 1:
        stages.append(Interval(0, x1 - 1, w[0]))
    stages.append(Interval(x1 or 0, x2 or 0, w[1]))
    if x2 is not None:
        stages.append(Interval(x2 + 1, 0, w[2]))
    return tuple(stages)


def _metrics(raw: object, where: str) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(m, Mapping) for m in raw):
        raise InvalidPolicy(where, "expected a list of metric specs")
    return tuple(raw)


def parse_hvpa(manifest: Mapping[str, Any], workload: WorkloadRef) -> HvpaSpec:
    """Parse an ``autoscaling.k8s.io/v1alpha1`` Hvpa in either the released or the seed form."""
    spec = mapping_field(manifest, "spec", required=True)
    meta = mapping_field(manifest, "metadata")
    name = str(meta.get("name") or workload.name)
    annotations = mapping_field(meta, "annotations")
    seed = any(
        k in spec
        for k in (
            "hpaTemplate",
            "vpaTemplate",
            "hpaSpec",
            "vpaSpec",
            "mode",
            "scaleUpStabilizationWindow",
            "scaleDownStabilizationWindow",
            "scaleUpDelay",
            "scaleDownDelay",
            "minCpuChange",
            "minMemChange",
        )
    )
    seed = seed or _stage_intervals(spec) is not None
    if seed:
        return _parse_seed(spec, name, workload)

    hpa = mapping_field(spec, "hpa")
    vpa = mapping_field(spec, "vpa")
    tmpl = mapping_field(hpa, "template.spec")
    min_r = int_field(tmpl, "minReplicas", 1, minimum=1)
    max_r = int_field(tmpl, "maxReplicas", None, minimum=1)
    if hpa and max_r is None:
        raise InvalidPolicy("spec.hpa.template.spec.maxReplicas", "required integer is missing")
    assert min_r is not None
    max_r = max_r if max_r is not None else min_r
    if max_r < min_r:
        raise InvalidPolicy("spec.hpa.template.spec.maxReplicas", f"{max_r} is below minReplicas {min_r}")
    window = None
    mtw = spec.get("maintenanceTimeWindow")
    if mtw is not None:
        if not isinstance(mtw, Mapping):
            raise InvalidPolicy("spec.maintenanceTimeWindow", "expected an object with begin and end")
        window = Window.parse(mtw.get("begin"), mtw.get("end"), "spec.maintenanceTimeWindow")
    return HvpaSpec(
        name=name,
        workload=workload,
        form="released",
        # HVPA: replicas change only with annotation hpa-controller: hvpa (reference hvpa.md 1.1).
        controls_replicas=annotations.get("hpa-controller") == "hvpa",
        min_replicas=min_r,
        max_replicas=max_r,
        hpa_deploy=bool(hpa.get("deploy", False)),
        vpa_deploy=bool(vpa.get("deploy", False)),
        hpa_up=_scale_type(hpa, "scaleUp", "spec.hpa"),
        hpa_down=_scale_type(hpa, "scaleDown", "spec.hpa"),
        vpa_up=_scale_type(vpa, "scaleUp", "spec.vpa"),
        vpa_down=_scale_type(vpa, "scaleDown", "spec.vpa"),
        intervals=_intervals(
            spec.get("weightBasedScalingIntervals"), "spec.weightBasedScalingIntervals", fractional=False
        ),
        containers=_container_policies(
            mapping_field(vpa, "template.spec.resourcePolicy"), "spec.vpa.template.spec.resourcePolicy"
        ),
        limits_gap=_scale_params(
            mapping_field(vpa, "limitsRequestsGapScaleParams"), "spec.vpa.limitsRequestsGapScaleParams"
        ),
        window=window,
        hpa_metrics=_metrics(tmpl.get("metrics"), "spec.hpa.template.spec.metrics"),
        # an empty behavior still means "behavior with upstream defaults", not the legacy rules
        hpa_behavior=mapping_field(tmpl, "behavior") if tmpl.get("behavior") is not None else None,
    )


def _parse_seed(spec: Mapping[str, Any], name: str, workload: WorkloadRef) -> HvpaSpec:
    hpa = mapping_field(spec, "hpaTemplate") or mapping_field(spec, "hpaSpec")
    vpa = mapping_field(spec, "vpaTemplate") or mapping_field(spec, "vpaSpec")
    where_hpa = "spec.hpaTemplate" if "hpaTemplate" in spec else "spec.hpaSpec"
    min_r = int_field(hpa, "minReplicas", 1, minimum=1)
    max_r = int_field(hpa, "maxReplicas", None, minimum=1)
    if max_r is None:
        raise InvalidPolicy(f"{where_hpa}.maxReplicas", "required integer is missing")
    assert min_r is not None
    if max_r < min_r:
        raise InvalidPolicy(f"{where_hpa}.maxReplicas", f"{max_r} is below minReplicas {min_r}")
    metrics = _metrics(hpa.get("metrics"), f"{where_hpa}.metrics")
    if not metrics and hpa.get("targetCPUUtilizationPercentage") is not None:
        pct = int_field(hpa, "targetCPUUtilizationPercentage", None, minimum=1)
        metrics = (
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": pct}},
            },
        )

    def stab(*keys: str) -> float:
        for k in keys:
            if k in spec:
                return duration_field(spec, k)
        return 0.0

    up_stab = stab("scaleUpStabilizationWindow", "scaleUpDelay")
    down_stab = stab("scaleDownStabilizationWindow", "scaleDownDelay")
    min_change = {}
    for key, res in (("minCpuChange", "cpu"), ("minMemChange", "memory")):
        if spec.get(key) is not None:
            min_change[res] = _change(spec[key], f"spec.{key}")
    up = ScaleType("Auto", min_change, up_stab)
    down = ScaleType("Auto", min_change, down_stab)
    mode = spec.get("mode", "WeightBased")
    if mode not in MODES:
        raise InvalidPolicy("spec.mode", f"{mode!r} is not one of {', '.join(MODES)}")
    mixed = None
    if mode == "Mixed":
        m = mapping_field(spec, "mixed")
        prefer = str(m.get("prefer", "hpa")).lower()
        if prefer not in ("hpa", "vpa"):
            raise InvalidPolicy("spec.mixed.prefer", f"{prefer!r} is not hpa or vpa")
        mixed = MixedThresholds(
            int_field(m, "replicaThreshold", 1) or 0,
            _scale_params(mapping_field(m, "resourceThreshold"), "spec.mixed.resourceThreshold"),
            prefer,
        )
    intervals = _stage_intervals(spec)
    if intervals is None:
        intervals = _intervals(
            spec.get("weightBasedScalingIntervals"), "spec.weightBasedScalingIntervals", fractional=True
        )
    return HvpaSpec(
        name=name,
        workload=workload,
        form="seed",
        # Seed: "takes only the recommendations ... applies them on its own": it owns replicas.
        controls_replicas=True,
        min_replicas=min_r,
        max_replicas=max_r,
        hpa_deploy=True,
        vpa_deploy=True,
        hpa_up=up,
        hpa_down=down,
        vpa_up=up,
        vpa_down=down,
        intervals=intervals,
        containers=_container_policies(
            mapping_field(vpa, "resourcePolicy"),
            f"spec.{'vpaTemplate' if 'vpaTemplate' in spec else 'vpaSpec'}.resourcePolicy",
        ),
        limits_gap={},
        window=None,
        mode=mode,
        mixed=mixed,
        hpa_metrics=metrics,
        hpa_behavior=mapping_field(hpa, "behavior") if hpa.get("behavior") is not None else None,
    )


# --- the rules -------------------------------------------------------------------------------


def vpa_weight(intervals: Sequence[Interval], current: int, desired: int, min_r: int, max_r: int) -> Fraction:
    """HVPA ``getVpaWeightFromIntervals`` (reference hvpa.md 2.3).

    The first interval containing the *current* replicas wins.  A weight-100 stage borrows: on
    scale-in the last fractional weight seen before it, on scale-out the next fractional one.
    """
    last_fraction = _ONE
    found = False
    for iv in intervals:
        start = iv.start or min_r
        last = iv.last or max_r
        w = iv.weight
        fractional = w.numerator < w.denominator  # w < 1, without Fraction arithmetic
        if not found and start <= current <= last:
            if fractional:
                return w
            if desired < current:
                return last_fraction
            if desired == current:
                return _ONE
            found = True  # scale-out from a 100 % stage: keep walking for the next fraction
            continue
        if fractional:
            if found:
                return w
            last_fraction = w
    return _ONE if found else _ZERO


def min_change_threshold(change: Change | None, current: int, resource: str) -> int:
    """HVPA ``getThreshold``: the smaller of value and percentage of the current request (2.6)."""
    if change is None or (change.value is None and change.percentage is None):
        return DEFAULT_MIN_CHANGE[resource]
    by_pct = current * change.percentage // 100 if change.percentage is not None else None
    if change.value is None:
        assert by_pct is not None
        return by_pct
    if by_pct is None:
        return change.value
    return min(change.value, by_pct)


def scaled_limit(resource: str, old_req: int, old_lim: int, new_req: int, gap: Change | None) -> int | None:
    """HVPA ``getScaledResourceLimit`` (reference hvpa.md 2.7); ``None`` means "set no limit"."""
    if old_lim <= 0:
        return None
    if old_req <= 0 or old_req == old_lim:
        return new_req
    if gap is None or (gap.value is None and not gap.percentage):
        # Proportional, integer milli maths, truncating, capped at MaxInt64.
        limit = min(old_lim * new_req // old_req, 2**63 - 1)
    else:
        # PR #72: the larger of the percentage- and value-based candidates.
        by_pct = new_req + new_req * (gap.percentage or 0) // 100
        by_value = new_req + (gap.value or 0)
        limit = max(by_pct, by_value)
    return _round_kb(limit) if resource == "memory" else limit


def _round_kb(milli: int) -> int:
    b = bytes_of(milli)
    return -(-b // 1000) * 1000 * 1000


def vpa_usable(conditions: Sequence[Mapping[str, Any]] | None) -> bool:
    """HVPA PR #68: ignore a recommendation flagged before ``RecommendationProvided`` (2.5)."""
    if not conditions:
        return True  # an empty list is accepted
    for c in conditions:
        t, s = c.get("type"), c.get("status", "True")
        if t in ("ConfigUnsupported", "ConfigDeprecated", "LowConfidence") and s == "True":
            return False
        if t == "RecommendationProvided":
            return bool(s == "True")
    return False


def _off(st: ScaleType, window: Window | None, now: float) -> bool:
    return st.mode == "Off" or (st.mode == "MaintenanceWindow" and (window is None or not window.contains(now)))


def _within(last: float | None, duration: float, now: float) -> bool:
    # HVPA: blocked iff now - lastScaleTime < duration; unset means "infinitely long ago" (2.9).
    return last is not None and now - last < duration


@dataclass(slots=True)
class _Axis:
    """One axis's wish in a tick, before the seed modes pick between HPA and VPA."""

    replicas: int | None = None
    wanted_replicas: int | None = None
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    limits: dict[str, dict[str, int]] = field(default_factory=dict)


class HvpaPolicy:
    """Gardener HVPA, weight-based (released v0.17.0 rules, or the seed proposal's modes)."""

    kind = "Hvpa"

    def __init__(self, spec: HvpaSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload

    def bounds(self) -> Bounds:
        """minReplicas..maxReplicas and each container policy's minAllowed/maxAllowed."""
        return hvpa_bounds(self.kind, self.name, self.spec.min_replicas, self.spec.max_replicas, self.spec.containers)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA HVPA would deploy: tandem computes its recommendation when no cluster sends one."""
        s = self.spec
        if not s.hpa_deploy or not s.hpa_metrics:
            return None
        return HpaTemplate(s.hpa_metrics, s.hpa_behavior, s.min_replicas, s.max_replicas)

    def vpa_template(self) -> VpaTemplate | None:
        """The VPA HVPA would deploy (always ``updateMode: Off``): its container policies."""
        s = self.spec
        if not s.vpa_deploy:
            return None
        policies = {
            p.name: VpaContainerPolicy(
                {r: v if r == "cpu" else bytes_of(v) for r, v in p.min_allowed.items() if r in RESOURCES},
                {r: v if r == "cpu" else bytes_of(v) for r, v in p.max_allowed.items() if r in RESOURCES},
                "Off" if p.mode == "Off" else "Auto",
                tuple(r for r in (p.controlled_resources or RESOURCES) if r in RESOURCES),
                "RequestsOnly" if p.controlled_values == "RequestsOnly" else "RequestsAndLimits",
            )
            for p in s.containers
        }
        return VpaTemplate(policies)

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        s = self.spec
        now = view.tick
        out = Outcome(mode=s.mode if s.form == "seed" else "Auto")
        current = view.spec.replicas
        last_scale: float | None = memory.get("last_scale_time")
        # HVPA 2.10: an OOM kill after the last scaling overrides scale-up stabilization.
        override = any(last_scale is None or ts > last_scale for ts in view.oom.values())

        hpa = view.hpa if s.hpa_deploy else None
        desired = hpa.desired_replicas if hpa is not None else current
        max_r = hpa.max_replicas if hpa is not None and hpa.max_replicas is not None else s.max_replicas
        weight = vpa_weight(s.intervals, current, desired, s.min_replicas, s.max_replicas)
        vpa = view.vpa if s.vpa_deploy else None
        out.inputs = {"replicas": current}
        if hpa is not None:
            out.inputs["hpa_desired_replicas"] = hpa.desired_replicas
        if vpa is not None:
            out.inputs["vpa_target"] = {
                c: {r: q.text for r, q in rec.target.items()} for c, rec in sorted(vpa.containers.items())
            }

        # HVPA 2.2: vertical scale-UP only once the HPA cannot scale out any more.
        limited = (
            not s.hpa_deploy
            or _off(s.hpa_up, s.window, now)
            or (
                hpa is not None
                and bool(hpa.conditions)
                and desired >= max_r
                and any(c.get("type") == "ScalingLimited" and c.get("status", "True") == "True" for c in hpa.conditions)
            )
        )
        if s.form == "seed":
            # Seed: "once replica count reaches maxReplicas ... vertical scaling is done
            # unconditionally"; otherwise the weights alone share the change (no HPA gate).
            limited = True

        vpa_text, hpa_text = _weight_texts(weight, s.form)
        out.reasons.append(f"hvpa: vpaWeight {vpa_text} at {current} replicas (hpaWeight {hpa_text})")
        if override:
            out.reasons.append("hvpa: OOM kill since the last scaling overrides scale-up stabilization and minChange")

        horizontal = self._horizontal(view, out, current, desired, hpa is not None, weight, last_scale, override)
        # Seed modes other than weight-based apply whichever recommendation they pick whole.
        v_weight = _ONE if s.form == "seed" and s.mode != "WeightBased" else weight
        vertical = self._vertical(view, out, vpa, current, v_weight, limited, last_scale, override)
        self._apply_mode(view, out, current, desired, horizontal, vertical, vpa)

        # HVPA 2.8: isScalingOff inspects HPA scale-up and VPA scale-up only (released quirk).
        if s.form == "released" and _off(s.hpa_up, s.window, now) and _off(s.vpa_up, s.window, now):
            out.replicas = None
            out.requests.clear()
            out.limits.clear()
            out.reasons.append("hvpa: scaling is off (HPA and VPA scale-up both Off or outside the maintenance window)")

        if out.replicas is not None:
            # tandem invariant: never leave the policy's replica bounds.
            out.replicas = min(max(out.replicas, s.min_replicas), s.max_replicas)
            if out.replicas == current:
                out.replicas = None
        if out.replicas is not None or out.requests:
            memory["last_scale_time"] = now
        return out

    # HVPA 2.4 getWeightedReplicas
    def _horizontal(
        self,
        view: View,
        out: Outcome,
        current: int,
        desired: int,
        has_hpa: bool,
        weight: Fraction,
        last_scale: float | None,
        override: bool,
    ) -> _Axis:
        s = self.spec
        axis = _Axis()
        if not s.controls_replicas or not has_hpa or desired == 0 or desired == current:
            return axis
        # current + (desired - current) x (1 - weight), ceil up / floor down, in integers: with
        # weight = p/q the change is (desired - current)(q - p)/q, exactly.
        q = weight.denominator
        hpa_share = q - weight.numerator
        change = (desired - current) * hpa_share
        new = current + (-(-change // q) if desired > current else change // q)
        if s.form == "seed" and s.mode != "WeightBased":
            new = desired  # modes apply HPA's recommendation whole; _apply_mode decides whether
        if new == current:
            return axis
        axis.wanted_replicas = new
        now = view.tick
        if hpa_share == 0 and s.mode == "WeightBased":
            out.block("replicas", "Weight", new)
            return axis
        st = s.hpa_up if new > current else s.hpa_down
        if st.mode == "Off":
            out.block("replicas", "UpdatePolicy", new)
        elif st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
            out.block("replicas", "MaintenanceWindow", new)
        elif not override and _within(last_scale, st.stabilization, now):
            # released quirk: the override skips the stabilization check in both directions
            out.block("replicas", "StabilizationWindow", new)
        else:
            axis.replicas = new
            out.reasons.append(f"hvpa: replicas {current} -> {new} from HPA desired {desired}")
        return axis

    # HVPA 2.5 getWeightedRequests
    def _vertical(
        self,
        view: View,
        out: Outcome,
        vpa: Any,
        current: int,
        weight: Fraction,
        limited: bool,
        last_scale: float | None,
        override: bool,
    ) -> _Axis:
        s = self.spec
        axis = _Axis()
        if vpa is None:
            return axis
        if not vpa_usable(vpa.conditions):
            out.reasons.append(
                "hvpa: VPA recommendation ignored (conditions: not provided, unsupported or low confidence)"
            )
            return axis
        now = view.tick
        if override:
            limited = True
            if weight == 0:
                weight = Fraction(1, 100)  # HVPA PR #56-#62: weight 0 becomes 1 under the override
        seed_up_full = s.form == "seed" and current >= s.max_replicas
        for cname in sorted(vpa.containers):
            if cname not in view.spec.containers:
                continue  # containers in the recommendation but not in the pod are ignored
            rec = vpa.containers[cname]
            res_spec = view.spec.containers[cname]
            cpol = s.container_policy(cname)
            if cpol is not None and cpol.mode == "Off":
                continue
            requests_only = cpol is not None and cpol.controlled_values == "RequestsOnly"
            for res in RESOURCES:
                if res not in rec.target:
                    continue
                if cpol is not None and cpol.controlled_resources is not None and res not in cpol.controlled_resources:
                    continue
                target = rec.target[res].milli
                if cpol is not None:
                    # tandem invariant 3: never leave minAllowed/maxAllowed (upstream trusts VPA's capping).
                    if res in cpol.max_allowed:
                        target = min(target, cpol.max_allowed[res])
                    if res in cpol.min_allowed:
                        target = max(target, cpol.min_allowed[res])
                req_q = res_spec.requests.get(res)
                lim_q = res_spec.limits.get(res)
                req = req_q.milli if req_q else 0
                lim = lim_q.milli if lim_q else 0
                w = weight
                if seed_up_full and target > req:
                    w = _ONE
                delta = self._weighted_delta(res, target, req, w)
                if target == req:
                    continue
                tgt = f"{cname}/{res}"
                wanted = format_quantity(res, rec.target[res].milli)
                if w == 0 and s.mode == "WeightBased":
                    out.block(tgt, "Weight", wanted)
                    continue
                if delta == 0:
                    continue
                new_req = req + delta
                if res == "memory":
                    new_req = _round_kb(new_req)
                new_lim = None
                if not requests_only:
                    gap = s.limits_gap.get(res)
                    new_lim = scaled_limit(res, req, lim, new_req, gap)
                # HVPA: requests capped at the new limits, else at the existing ones (PR #98).
                cap = new_lim if new_lim is not None else (lim if lim > 0 else None)
                if cap is not None and new_req > cap:
                    new_req = cap
                if cpol is not None:
                    new_req = min(max(new_req, cpol.min_allowed.get(res, 0)), cpol.max_allowed.get(res, new_req))
                up = delta > 0
                st = s.vpa_up if up else s.vpa_down
                threshold = min_change_threshold(st.min_change.get(res), req, res)
                mag = abs(delta)  # the weighted delta, before kB rounding and capping (2.5)
                if up:
                    if not limited or st.mode == "Off":
                        out.block(tgt, "UpdatePolicy", wanted)
                        continue
                    if not override and _within(last_scale, st.stabilization, now):
                        out.block(tgt, "StabilizationWindow", wanted)
                        continue
                    if st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
                        out.block(tgt, "MaintenanceWindow", wanted)
                        continue
                    if not override and mag < threshold:
                        out.block(tgt, "MinChange", wanted)
                        continue
                else:
                    if st.mode == "Off":
                        out.block(tgt, "UpdatePolicy", wanted)
                        continue
                    if _within(last_scale, st.stabilization, now):  # the override does not bypass this
                        out.block(tgt, "StabilizationWindow", wanted)
                        continue
                    if st.mode == "MaintenanceWindow" and (s.window is None or not s.window.contains(now)):
                        out.block(tgt, "MaintenanceWindow", wanted)
                        continue
                    if mag < threshold:
                        out.block(tgt, "MinChange", wanted)
                        continue
                if new_req != req:
                    axis.requests.setdefault(cname, {})[res] = new_req
                    if new_lim is not None and new_lim != lim:
                        axis.limits.setdefault(cname, {})[res] = new_lim
        return axis

    @staticmethod
    def _weighted_delta(res: str, target: int, req: int, w: Fraction) -> int:
        """trunc((target - current) × w): Go integer division toward zero (reference hvpa.md 2.5).

        CPU works in millicores, memory in whole bytes (``Value()``), so memory is truncated at
        the byte before it comes back as milli-bytes.
        """
        if res == "memory":
            return _trunc_times(bytes_of(target) - bytes_of(req), w) * 1000
        return _trunc_times(target - req, w)

    def _apply_mode(
        self, view: View, out: Outcome, current: int, desired: int, horizontal: _Axis, vertical: _Axis, vpa: Any
    ) -> None:
        """Seed modes choose between the two axes; weight-based keeps both (the released rule)."""
        s = self.spec
        use_h, use_v = True, True
        has_h = horizontal.wanted_replicas is not None
        has_v = bool(vertical.requests)
        if s.mode == "HpaPreferred":
            # vertical up only at maxReplicas, vertical down only at minReplicas
            for cname in list(vertical.requests):
                for res in list(vertical.requests[cname]):
                    req = view.spec.containers[cname].requests.get(res)
                    up = vertical.requests[cname][res] > (req.milli if req else 0)
                    if (up and current < s.max_replicas) or (not up and current > s.min_replicas):
                        out.block(f"{cname}/{res}", "Weight", format_quantity(res, vertical.requests[cname][res]))
                        del vertical.requests[cname][res]
                        vertical.limits.get(cname, {}).pop(res, None)
                if not vertical.requests[cname]:
                    del vertical.requests[cname]
                    vertical.limits.pop(cname, None)
            out.reasons.append("hvpa: mode HpaPreferred scales vertically only at the replica bounds")
        elif s.mode == "HpaBiased":
            use_v = not has_h
            out.reasons.append("hvpa: mode HpaBiased applies VPA only when HPA has no recommendation")
        elif s.mode == "VpaBiased":
            use_h = not has_v
            out.reasons.append("hvpa: mode VpaBiased applies HPA only when VPA has no recommendation")
        elif s.mode == "Mixed" and has_h and has_v and s.mixed is not None:
            h_ok = abs(desired - current) > s.mixed.replicas
            v_ok = self._mixed_vertical_ok(view, vertical, vpa)
            if h_ok and v_ok:
                use_h, use_v = s.mixed.prefer == "hpa", s.mixed.prefer == "vpa"
            else:
                use_h, use_v = h_ok, v_ok
            out.reasons.append(f"hvpa: mode Mixed (HPA over threshold: {h_ok}, VPA over threshold: {v_ok})")
            if not h_ok and not v_ok:
                out.block("replicas", "MinChange", horizontal.wanted_replicas)
        if use_h:
            if horizontal.replicas is not None:
                out.replicas = horizontal.replicas
        elif has_h:
            out.block("replicas", "Weight", horizontal.wanted_replicas)
        if use_v:
            out.requests.update(vertical.requests)
            out.limits.update(vertical.limits)
        else:
            for cname, res_map in vertical.requests.items():
                for res, v in res_map.items():
                    out.block(f"{cname}/{res}", "Weight", format_quantity(res, v))

    def _mixed_vertical_ok(self, view: View, vertical: _Axis, vpa: Any) -> bool:
        assert self.spec.mixed is not None
        for cname, res_map in vertical.requests.items():
            for res, new in res_map.items():
                c = view.spec.containers[cname]
                req = c.requests.get(res)
                lim = c.limits.get(res)
                cur = req.milli if req else 0
                target = vpa.containers[cname].target[res].milli
                y = min_change_threshold(self.spec.mixed.resources.get(res), cur, res)
                # Seed: "difference greater than y, or the recommended value is more than the limit"
                if abs(new - cur) > y or (lim is not None and target > lim.milli):
                    return True
        return False


_ONE = Fraction(1)
_ZERO = Fraction(0)


def _trunc_times(amount: int, w: Fraction) -> int:
    """trunc(amount x w) toward zero, as Go's integer conversion does, in integers (the same
    value ``int(amount * w)`` gives, without building a ``Fraction``)."""
    n = amount * w.numerator
    return n // w.denominator if n >= 0 else -(-n // w.denominator)


@lru_cache(maxsize=256)
def _weight_texts(weight: Fraction, form: str) -> tuple[str, str]:
    """The vpaWeight and hpaWeight as the reasons write them (a policy has a few weights)."""
    return _fmt_weight(weight, form), _fmt_weight(1 - weight, form)


def _fmt_weight(w: Fraction, form: str) -> str:
    if form == "released":
        return str(int(w * 100)) if (w * 100).denominator == 1 else str(float(w * 100))
    return str(float(w))


def hvpa_bounds(
    kind: str, name: str, min_replicas: int, max_replicas: int, containers: Sequence[ContainerPolicy]
) -> Bounds:
    """The bounds of an HVPA (either line): replicas and the VPA container policies' allowed range."""
    policies = {
        p.name: ContainerBounds(p.min_allowed, p.max_allowed, p.mode, f"containerPolicies[{p.name}]")
        for p in containers
    }
    return Bounds(kind, name, min_replicas, max_replicas, True, policies)


def _parse(manifest: Mapping[str, Any], workload: WorkloadRef) -> HvpaPolicy:
    return HvpaPolicy(parse_hvpa(manifest, workload))


KIND = register(PolicyKind("Hvpa", "autoscaling.k8s.io", ("v1alpha1",), "hvpas", _parse))
