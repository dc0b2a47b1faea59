"""HVPA manifests (reference hvpa.md section 1, the seed proposal's form): parsed and validated
into one :class:`HvpaSpec`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ...errors import InvalidPolicy
from ...events import WorkloadRef
from ...quantity import parse_quantity
from ..base import duration_field, get_path, int_field, mapping_field

__all__ = ["MODES", "Change", "ContainerPolicy", "HvpaSpec", "Interval", "ScaleType", "Window", "parse_hvpa"]

RESOURCES = ("cpu", "memory")
UPDATE_MODES = ("Auto", "Off", "MaintenanceWindow")
MODES = ("WeightBased", "HpaPreferred", "HpaBiased", "VpaBiased", "Mixed")


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


def scale_params(obj: Mapping[str, Any], where: str) -> dict[str, Change]:
    out: dict[str, Change] = {}
    for res in RESOURCES:
        if isinstance(obj.get(res), Mapping):
            out[res] = _change(obj[res], f"{where}.{res}")
        elif obj.get(res) is not None:
            raise InvalidPolicy(f"{where}.{res}", "expected an object with value and/or percentage")
    return out


def scale_type(parent: Mapping[str, Any], key: str, prefix: str = "spec") -> ScaleType:
    where = f"{prefix}.{key}"
    try:
        obj = mapping_field(parent, key)
        mode = get_path(obj, "updatePolicy.updateMode") or "Auto"
        if mode not in UPDATE_MODES:
            raise InvalidPolicy("updatePolicy.updateMode", f"{mode!r} is not one of {', '.join(UPDATE_MODES)}")
        return ScaleType(
            mode,
            scale_params(mapping_field(obj, "minChange"), f"{where}.minChange"),
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


def container_policies(resource_policy: Mapping[str, Any], where: str) -> tuple[ContainerPolicy, ...]:
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
        # Seed: vpaWeight is a fraction between 0 and 1 ("HVPA controller" proposal, "Weight based
        # scaling": https://github.com/gardener/hvpa-controller/blob/master/Proposal.md).
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


def metric_list(raw: object, where: str) -> tuple[Mapping[str, Any], ...]:
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
        hpa_up=scale_type(hpa, "scaleUp", "spec.hpa"),
        hpa_down=scale_type(hpa, "scaleDown", "spec.hpa"),
        vpa_up=scale_type(vpa, "scaleUp", "spec.vpa"),
        vpa_down=scale_type(vpa, "scaleDown", "spec.vpa"),
        intervals=_intervals(
            spec.get("weightBasedScalingIntervals"), "spec.weightBasedScalingIntervals", fractional=False
        ),
        containers=container_policies(
            mapping_field(vpa, "template.spec.resourcePolicy"), "spec.vpa.template.spec.resourcePolicy"
        ),
        limits_gap=scale_params(
            mapping_field(vpa, "limitsRequestsGapScaleParams"), "spec.vpa.limitsRequestsGapScaleParams"
        ),
        window=window,
        hpa_metrics=metric_list(tmpl.get("metrics"), "spec.hpa.template.spec.metrics"),
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
    metrics = metric_list(hpa.get("metrics"), f"{where_hpa}.metrics")
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
            scale_params(mapping_field(m, "resourceThreshold"), "spec.mixed.resourceThreshold"),
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
        containers=container_policies(
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
