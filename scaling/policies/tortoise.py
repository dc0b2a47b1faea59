"""Tortoise (mercari/tortoise, ``autoscaling.mercari.com/v1beta3``) on tandem's decision core.

What Tortoise's controller keeps in the Tortoise status lives in the policy *memory* (phase,
per-resource phases, the replica history, the sticky VPA maximum, condition timestamps); what it
writes to the HPA and, through its pod webhook, to the pods comes back as an :class:`Outcome`
(``hpa`` min/max/target utilization, container requests and limits).  ``updateMode: Off`` (and
Tortoise's "effectively Off": ``GlobalDisableMode``, ``ExcludedNamespaces``) is a dry run.

The algorithms follow Tortoise's code (see docs/tortoise.md,
numbers in comments), except the min/max replica history, which follows the seed's four-week
rule (``scaling.history``).  Every other choice where tandem differs, or where Tortoise's
behaviour had to be mapped onto tandem's event-time model, is listed in ``docs/tortoise.md``.
Arithmetic that Tortoise does in float64 (buffers, ratios, ``ceil``/``trunc``) is done on Python
floats, which are the same IEEE doubles, so the results land on the same milli-units.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import InvalidPolicy
from ..events import HpaEvent, VpaEvent, WorkloadRef
from ..history import PERIODS, ReplicaHistory, replica_bounds
from ..outcome import Outcome, View
from ..quantity import bytes_of, format_quantity, parse_duration, parse_quantity
from ..recommend.vpa import ContainerPolicy as VpaContainerPolicy
from ..spelling import did_you_mean
from .base import get_path, int_field, mapping_field
from .bounds import Bounds
from .bounds import ContainerBounds as AllowedBounds
from .registry import PolicyKind, register
from .templates import HpaTemplate, VpaTemplate

__all__ = [
    "API_VERSION",
    "PHASES",
    "ContainerBounds",
    "HpaState",
    "TortoisePolicy",
    "TortoiseSettings",
    "TortoiseSpec",
    "parse_tortoise",
]

API_VERSION = "autoscaling.mercari.com/v1beta3"
RESOURCES = ("cpu", "memory")
UPDATE_MODES = ("Off", "Auto", "Emergency")
AUTOSCALING_TYPES = ("Off", "Horizontal", "Vertical")
PHASES = ("Initializing", "GatheringData", "PartlyWorking", "Working", "Emergency", "BackToNormal")
FEATURE_PREFERRED_MAX = "VerticalScalingBasedOnPreferredMaxReplicas"
FEATURES = (FEATURE_PREFERRED_MAX, "GoMemLimitModificationEnabled")
#: Target utilization of a ContainerResource metric Tortoise adds to an HPA (reference 2.c, 2.g).
NEW_METRIC_TARGET = 70
#: Vertical scale-downs are applied at most once per hour (reference 2.e, ``UpdateResourceRequest``).
SCALE_DOWN_INTERVAL = 3600.0
#: ``ScaledUpBasedOnPreferredMaxReplicas``: one ×1.3 step per 30 minutes (reference 2.d).
PREFERRED_MAX_HOLD = 1800.0
PREFERRED_MAX_GROWTH = 1.3
#: ``globalRecommendedHPABehavior``: the behavior Tortoise writes to its HPA (reference 1.1, 2.g).
DEFAULT_HPA_BEHAVIOR: Mapping[str, Any] = {
    "scaleUp": {"policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}]},
    "scaleDown": {"policies": [{"type": "Percent", "value": 2, "periodSeconds": 90}]},
}
#: HPA conditions that mean "cannot get its metrics" (reference 2.f); tandem's own HPA reports a
#: ContainerResource metric's failure with the upstream reason, which Tortoise's check does not name.
FAILED_METRIC_REASONS = ("FailedGetResourceMetric",)
OWN_FAILED_METRIC_REASONS = ("FailedGetResourceMetric", "FailedGetContainerResourceMetric")

Pair = tuple[str, str]


# --- cluster-admin settings (reference 1.4) ---------------------------------------------------


def _pair_key(pair: Pair) -> str:
    return f"{pair[0]}/{pair[1]}"


@dataclass(frozen=True, slots=True)
class TortoiseSettings:
    """Tortoise's config file (``pkg/config/config.go``): the ``tortoise:`` section of tandem's settings."""

    slot_hours: int = 1
    period: str = "weekly"
    max_multiplier: float = 2.0
    min_multiplier: float = 0.5
    reduction_factor: float = 0.95
    max_target: int = 90
    min_target: int = 65
    minimum_min_replicas: int = 3
    maximum_min_replicas: int = 10
    preferred_max_replicas: int = 30
    maximum_max_replicas: int = 100
    max_request: Mapping[str, int] = field(default_factory=lambda: {"cpu": 10_000, "memory": 10 * 2**30 * 1000})
    min_request: Mapping[str, int] = field(default_factory=lambda: {"cpu": 50, "memory": 50 * 2**20 * 1000})
    min_request_per_container: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    buffer_ratio: float = 0.1
    minimum_cpu_limit: int = 0
    limit_multiplier: Mapping[str, int] = field(default_factory=dict)
    max_scale_down_ratio: float = 0.8
    timezone: str = "Asia/Tokyo"
    update_interval: float = 15.0
    target_max_increase: int = 5
    target_update_interval: float = 86_400.0
    external_exclusion: str = ""
    grace_period: float = 300.0
    features: frozenset[str] = frozenset()
    global_disable: bool = False
    excluded_namespaces: frozenset[str] = frozenset()

    @property
    def gathering_seconds(self) -> float:
        return 86_400.0 if self.period == "daily" else 7 * 86_400.0

    def global_min(self, container: str, resource: str) -> int:
        per = self.min_request_per_container.get(container)
        if per is not None and resource in per:
            return per[resource]
        return self.min_request.get(resource, 0)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> TortoiseSettings:
        """Validate the ``tortoise:`` settings; :class:`InvalidPolicy` names ``tortoise.<Key>``."""
        raw = raw or {}
        if not isinstance(raw, Mapping):
            raise InvalidPolicy("tortoise", "expected a mapping of Tortoise settings")
        for key in raw:
            if key not in _SETTING_KEYS:
                hint = did_you_mean(str(key), _SETTING_KEYS)
                raise InvalidPolicy(f"tortoise.{key}", "unknown Tortoise setting" + hint)
        d = cls()
        width = _int_setting(raw, "RangeOfMinMaxReplicasRecommendationHours", d.slot_hours, 1, 24)
        if 24 % width:
            raise InvalidPolicy("tortoise.RangeOfMinMaxReplicasRecommendationHours", f"{width} does not divide 24")
        period = raw.get("GatheringDataPeriodType", d.period)
        if period not in PERIODS:
            raise InvalidPolicy("tortoise.GatheringDataPeriodType", f"{period!r} is not weekly or daily")
        tz = raw.get("TimeZone", d.timezone)
        if not isinstance(tz, str):  # config.go: TimeZone string
            raise InvalidPolicy("tortoise.TimeZone", f"expected a time zone name, got {type(tz).__name__}")
        try:
            ReplicaHistory(str(tz), width)
        except ValueError as exc:
            raise InvalidPolicy("tortoise.TimeZone", str(exc)) from None
        except OSError:  # "Europe": a directory of the tz database, not a zone (found by fuzzing)
            raise InvalidPolicy("tortoise.TimeZone", f"{tz!r} is not an IANA time zone name") from None
        max_req = {
            "cpu": _qty_setting(raw, "MaximumCPURequest", "10"),
            "memory": _qty_setting(raw, "MaximumMemoryRequest", "10Gi"),
        }
        min_req = {
            "cpu": _qty_setting(raw, "MinimumCPURequest", "50m"),
            "memory": _qty_setting(raw, "MinimumMemoryRequest", "50Mi"),
        }
        per_container: dict[str, dict[str, int]] = {}
        for key, res in (("MinimumCPURequestPerContainer", "cpu"), ("MinimumMemoryRequestPerContainer", "memory")):
            values = raw.get(key) or {}
            if not isinstance(values, Mapping):
                raise InvalidPolicy(f"tortoise.{key}", "expected a mapping of container name to quantity")
            for cname, q in values.items():
                try:
                    per_container.setdefault(str(cname), {})[res] = parse_quantity(q)
                except ValueError as exc:
                    raise InvalidPolicy(f"tortoise.{key}.{cname}", str(exc)) from None
        multipliers = raw.get("ResourceLimitMultiplier") or {}
        if not isinstance(multipliers, Mapping):
            raise InvalidPolicy("tortoise.ResourceLimitMultiplier", "expected a mapping of resource to integer")
        limit_mult: dict[str, int] = {}
        for res, m in multipliers.items():
            if isinstance(m, bool) or not isinstance(m, int) or m < 1:
                raise InvalidPolicy(f"tortoise.ResourceLimitMultiplier.{res}", f"expected an integer >= 1, got {m!r}")
            limit_mult[str(res)] = m
        flags = raw.get("FeatureFlags") or []
        if not isinstance(flags, list) or not all(f in FEATURES for f in flags):
            raise InvalidPolicy("tortoise.FeatureFlags", f"expected a list of {', '.join(FEATURES)}")
        excluded = raw.get("ExcludedNamespaces") or []
        if not isinstance(excluded, list) or not all(isinstance(n, str) for n in excluded):
            raise InvalidPolicy("tortoise.ExcludedNamespaces", "expected a list of namespace names")
        disable = raw.get("GlobalDisableMode", False)
        if not isinstance(disable, bool):
            raise InvalidPolicy("tortoise.GlobalDisableMode", f"expected true or false, got {disable!r}")
        regex = raw.get("HPAExternalMetricExclusionRegex", "")
        try:
            re.compile(str(regex))
        except re.error as exc:
            raise InvalidPolicy("tortoise.HPAExternalMetricExclusionRegex", str(exc)) from None
        for key in ("DefaultHPABehavior",):
            if raw.get(key) is not None and not isinstance(raw[key], Mapping):
                raise InvalidPolicy(f"tortoise.{key}", "expected an HPA behavior object")
        for key in ("IstioSidecarProxyDefaultCPU", "IstioSidecarProxyDefaultMemory"):
            if raw.get(key) is not None:
                _qty_setting(raw, key, "0")
        s = cls(
            slot_hours=width,
            period=str(period),
            max_multiplier=_float_setting(raw, "MaxReplicasRecommendationMultiplier", d.max_multiplier, 0.0, 1000.0),
            min_multiplier=_float_setting(raw, "MinReplicasRecommendationMultiplier", d.min_multiplier, 0.0, 1000.0),
            reduction_factor=_float_setting(raw, "ReplicaReductionFactor", d.reduction_factor, 0.0, 1.0),
            max_target=_int_setting(raw, "MaximumTargetResourceUtilization", d.max_target, 1, 100),
            min_target=_int_setting(raw, "MinimumTargetResourceUtilization", d.min_target, 1, 100),
            minimum_min_replicas=_int_setting(raw, "MinimumMinReplicas", d.minimum_min_replicas, 0, 1_000_000),
            maximum_min_replicas=_int_setting(raw, "MaximumMinReplicas", d.maximum_min_replicas, 1, 1_000_000),
            preferred_max_replicas=_int_setting(raw, "PreferredMaxReplicas", d.preferred_max_replicas, 1, 1_000_000),
            maximum_max_replicas=_int_setting(raw, "MaximumMaxReplicas", d.maximum_max_replicas, 1, 1_000_000),
            max_request=max_req,
            min_request=min_req,
            min_request_per_container=per_container,
            buffer_ratio=_float_setting(raw, "BufferRatioOnVerticalResource", d.buffer_ratio, 0.0, 100.0),
            minimum_cpu_limit=_qty_setting(raw, "MinimumCPULimit", "0"),
            limit_multiplier=limit_mult,
            max_scale_down_ratio=_float_setting(raw, "MaxAllowedScalingDownRatio", d.max_scale_down_ratio, 0.0, 1.0),
            timezone=str(tz),
            update_interval=_duration_setting(raw, "TortoiseUpdateInterval", d.update_interval),
            target_max_increase=_int_setting(raw, "HPATargetUtilizationMaxIncrease", d.target_max_increase, 1, 100),
            target_update_interval=_duration_setting(
                raw, "HPATargetUtilizationUpdateInterval", d.target_update_interval
            ),
            external_exclusion=str(regex),
            grace_period=_duration_setting(raw, "EmergencyModeGracePeriod", d.grace_period),
            features=frozenset(flags),
            global_disable=disable,
            excluded_namespaces=frozenset(excluded),
        )
        # Tortoise validates these at start-up (reference 1.4).
        if not s.minimum_min_replicas < s.maximum_min_replicas <= s.maximum_max_replicas:
            raise InvalidPolicy(
                "tortoise.MaximumMinReplicas", "need MinimumMinReplicas < MaximumMinReplicas <= MaximumMaxReplicas"
            )
        if not s.minimum_min_replicas < s.preferred_max_replicas < s.maximum_max_replicas:
            raise InvalidPolicy(
                "tortoise.PreferredMaxReplicas", "need MinimumMinReplicas < PreferredMaxReplicas < MaximumMaxReplicas"
            )
        if s.min_target > s.max_target:
            raise InvalidPolicy(
                "tortoise.MinimumTargetResourceUtilization", "is above MaximumTargetResourceUtilization"
            )
        if s.min_multiplier <= 0 or s.max_multiplier <= 0:
            raise InvalidPolicy("tortoise.MinReplicasRecommendationMultiplier", "multipliers must be > 0")
        return s


_SETTING_KEYS = frozenset(
    {
        "RangeOfMinMaxReplicasRecommendationHours",
        "GatheringDataPeriodType",
        "MaxReplicasRecommendationMultiplier",
        "MinReplicasRecommendationMultiplier",
        "ReplicaReductionFactor",
        "MaximumTargetResourceUtilization",
        "MinimumTargetResourceUtilization",
        "MinimumMinReplicas",
        "MaximumMinReplicas",
        "PreferredMaxReplicas",
        "MaximumMaxReplicas",
        "MaximumCPURequest",
        "MaximumMemoryRequest",
        "MinimumCPURequest",
        "MinimumCPURequestPerContainer",
        "MinimumMemoryRequest",
        "MinimumMemoryRequestPerContainer",
        "BufferRatioOnVerticalResource",
        "MinimumCPULimit",
        "ResourceLimitMultiplier",
        "MaxAllowedScalingDownRatio",
        "TimeZone",
        "TortoiseUpdateInterval",
        "HPATargetUtilizationMaxIncrease",
        "HPATargetUtilizationUpdateInterval",
        "HPAExternalMetricExclusionRegex",
        "EmergencyModeGracePeriod",
        "DefaultHPABehavior",
        "IstioSidecarProxyDefaultCPU",
        "IstioSidecarProxyDefaultMemory",
        "FeatureFlags",
        "GlobalDisableMode",
        "ExcludedNamespaces",
    }
)


def _int_setting(raw: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPolicy(f"tortoise.{key}", f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidPolicy(f"tortoise.{key}", f"{value} is outside {lo}..{hi}")
    return value


def _float_setting(raw: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidPolicy(f"tortoise.{key}", f"expected a number, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidPolicy(f"tortoise.{key}", f"{value} is outside {lo}..{hi}")
    return float(value)


def _qty_setting(raw: Mapping[str, Any], key: str, default: str) -> int:
    try:
        return parse_quantity(raw.get(key, default))
    except ValueError as exc:
        raise InvalidPolicy(f"tortoise.{key}", str(exc)) from None


def _duration_setting(raw: Mapping[str, Any], key: str, default: float) -> float:
    if key not in raw:
        return default
    try:
        return parse_duration(raw[key])
    except ValueError as exc:
        raise InvalidPolicy(f"tortoise.{key}", str(exc)) from None


# --- the manifest (reference 1.1) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerBounds:
    """``spec.resourcePolicy[]``: floor and ceiling of any request Tortoise writes (milli-units)."""

    container: str
    min_allocated: Mapping[str, int] = field(default_factory=dict)
    max_allocated: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TortoiseSpec:
    name: str
    workload: WorkloadRef
    update_mode: str
    hpa_name: str | None
    resource_policy: Mapping[str, ContainerBounds]
    #: container -> resource -> Off/Horizontal/Vertical; empty means "derive" (reference 1.3).
    autoscaling_policy: Mapping[str, Mapping[str, str]]
    max_replicas: int | None = None
    deletion_policy: str = "NoDelete"
    hpa_behavior: Mapping[str, Any] | None = None


def _resource_list(obj: object, where: str) -> dict[str, int]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise InvalidPolicy(where, "expected an object of resource quantities")
    out: dict[str, int] = {}
    for res, q in obj.items():
        try:
            out[str(res)] = parse_quantity(q)
        except ValueError as exc:
            raise InvalidPolicy(f"{where}.{res}", str(exc)) from None
    return out


def parse_tortoise(manifest: Mapping[str, Any], workload: WorkloadRef) -> TortoisePolicy:
    """Parse a ``Tortoise`` manifest, or raise :class:`InvalidPolicy` naming the field."""
    api = manifest.get("apiVersion")
    if api != API_VERSION:
        raise InvalidPolicy("apiVersion", f"{api!r}: only {API_VERSION} Tortoises are supported")
    spec = mapping_field(manifest, "spec", required=True)
    meta = mapping_field(manifest, "metadata")
    name = str(meta.get("name") or workload.name)
    refs = mapping_field(manifest, "spec.targetRefs", required=True)
    target = mapping_field(manifest, "spec.targetRefs.scaleTargetRef", required=True)
    tname = target.get("name")
    if not isinstance(tname, str) or not tname:
        raise InvalidPolicy("spec.targetRefs.scaleTargetRef.name", "required string is missing")
    kind = target.get("kind", "Deployment")
    if kind != "Deployment":
        # Tortoise's webhook accepts only Deployments (reference 1.1).
        raise InvalidPolicy("spec.targetRefs.scaleTargetRef.kind", f"{kind!r}: Tortoise supports only Deployment")
    hpa_name = refs.get("horizontalPodAutoscalerName")
    if hpa_name is not None and (not isinstance(hpa_name, str) or not hpa_name):
        raise InvalidPolicy("spec.targetRefs.horizontalPodAutoscalerName", f"expected a name, got {hpa_name!r}")
    # The defaulting webhook sets Off when empty (reference 1.1).
    mode = spec.get("updateMode") or "Off"
    if mode not in UPDATE_MODES:
        raise InvalidPolicy("spec.updateMode", f"{mode!r} is not one of {', '.join(UPDATE_MODES)}")
    deletion = spec.get("deletionPolicy") or "NoDelete"
    if deletion not in ("DeleteAll", "NoDelete"):
        raise InvalidPolicy("spec.deletionPolicy", f"{deletion!r} is not DeleteAll or NoDelete")

    bounds: dict[str, ContainerBounds] = {}
    raw_rp = spec.get("resourcePolicy") or []
    if not isinstance(raw_rp, list):
        raise InvalidPolicy("spec.resourcePolicy", "expected a list")
    for i, item in enumerate(raw_rp):
        w = f"spec.resourcePolicy[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(w, "expected an object")
        cname = item.get("containerName")
        if not isinstance(cname, str) or not cname:
            raise InvalidPolicy(f"{w}.containerName", "required string is missing")
        if cname in bounds:
            raise InvalidPolicy(f"{w}.containerName", f"container {cname!r} is listed twice")
        lo = _resource_list(item.get("minAllocatedResources"), f"{w}.minAllocatedResources")
        hi = _resource_list(item.get("maxAllocatedResources"), f"{w}.maxAllocatedResources")
        for res, v in lo.items():
            if hi.get(res) and v > hi[res]:
                raise InvalidPolicy(f"{w}.minAllocatedResources.{res}", "is above maxAllocatedResources")
        bounds[cname] = ContainerBounds(cname, lo, hi)

    policies: dict[str, dict[str, str]] = {}
    raw_ap = spec.get("autoscalingPolicy") or []
    if not isinstance(raw_ap, list):
        raise InvalidPolicy("spec.autoscalingPolicy", "expected a list")
    for i, item in enumerate(raw_ap):
        w = f"spec.autoscalingPolicy[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidPolicy(w, "expected an object")
        cname = item.get("containerName")
        if not isinstance(cname, str) or not cname:
            raise InvalidPolicy(f"{w}.containerName", "required string is missing")
        if cname in policies:
            raise InvalidPolicy(f"{w}.containerName", f"container {cname!r} is listed twice")
        pol = item.get("policy") or {}
        if not isinstance(pol, Mapping):
            raise InvalidPolicy(f"{w}.policy", "expected an object of resource: Off|Horizontal|Vertical")
        policies[cname] = {}
        for res, t in pol.items():
            if res not in RESOURCES:
                raise InvalidPolicy(f"{w}.policy.{res}", "Tortoise scales cpu and memory only")
            if t not in AUTOSCALING_TYPES:
                raise InvalidPolicy(f"{w}.policy.{res}", f"{t!r} is not one of {', '.join(AUTOSCALING_TYPES)}")
            policies[cname][str(res)] = str(t)
    max_r = int_field(manifest, "spec.maxReplicas", None, minimum=1)
    behavior = get_path(spec, "horizontalPodAutoscalerBehavior")
    if behavior is not None and not isinstance(behavior, Mapping):
        raise InvalidPolicy("spec.horizontalPodAutoscalerBehavior", "expected an HPA behavior object")
    return TortoisePolicy(
        TortoiseSpec(
            name=name,
            workload=workload,
            update_mode=str(mode),
            hpa_name=hpa_name,
            resource_policy=bounds,
            autoscaling_policy=policies,
            max_replicas=max_r,
            deletion_policy=str(deletion),
            hpa_behavior=behavior,
        )
    )


# --- HPA state ------------------------------------------------------------------------------


@dataclass(slots=True)
class HpaState:
    """The HPA fields Tortoise owns: min/max replicas and ContainerResource utilization targets.

    ``targets`` is ``None`` when the HPA's metrics are unknown (an ``hpa`` event without
    ``metrics``); then no metric is added, removed or retargeted.
    """

    min_replicas: int | None
    max_replicas: int | None
    targets: dict[Pair, int] | None

    @classmethod
    def of_event(cls, ev: HpaEvent) -> HpaState:
        targets: dict[Pair, int] | None = None
        if ev.metrics is not None:
            targets = {}
            for m in ev.metrics:
                if m.get("type") != "ContainerResource":
                    continue
                cr = m.get("containerResource") or {}
                tgt = cr.get("target") or {}
                value = tgt.get("averageUtilization")
                if tgt.get("type", "Utilization") != "Utilization" or isinstance(value, bool):
                    continue
                if isinstance(value, int) and isinstance(cr.get("container"), str) and isinstance(cr.get("name"), str):
                    targets[(cr["container"], cr["name"])] = value
        # Kubernetes defaults spec.minReplicas to 1.
        return cls(ev.min_replicas if ev.min_replicas is not None else 1, ev.max_replicas, targets)

    def copy(self) -> HpaState:
        return HpaState(self.min_replicas, self.max_replicas, None if self.targets is None else dict(self.targets))

    def to_memory(self, tick: float) -> dict[str, Any]:
        return {
            "tick": tick,
            "min": self.min_replicas,
            "max": self.max_replicas,
            "targets": None if self.targets is None else {_pair_key(p): v for p, v in sorted(self.targets.items())},
        }

    @classmethod
    def of_memory(cls, d: Mapping[str, Any]) -> HpaState:
        raw = d.get("targets")
        targets = None if raw is None else {_split(k): int(v) for k, v in raw.items()}
        return cls(d.get("min"), d.get("max"), targets)


def _split(key: str) -> Pair:
    c, _, r = key.rpartition("/")
    return c, r


# --- the policy ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tick:
    """Working values of one reconcile."""

    view: View
    st: TortoiseSettings
    memory: dict[str, Any]
    out: Outcome
    now: float
    phase: str
    policies: dict[Pair, str]
    hist: ReplicaHistory
    hpa: HpaState | None  # the HPA as it is (or as tandem last decided it)
    hpa_math: HpaState | None  # the same, or the HPA Tortoise would create
    rphases: dict[str, list[Any]]


class TortoisePolicy:
    kind = "Tortoise"

    def __init__(self, spec: TortoiseSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload
        self._settings_cache: tuple[Mapping[str, Any] | None, TortoiseSettings] | None = None
        #: (the ``memory["hist"]`` value last written, its decoded history): saves decoding per tick.
        self._live: tuple[Any, ReplicaHistory] | None = None

    def bounds(self) -> Bounds:
        """maxReplicas (no floor: Tortoise decides the HPA's minReplicas itself) and each container's
        minAllocatedResources/maxAllocatedResources; the HPA named by horizontalPodAutoscalerName."""
        containers = {
            c: AllowedBounds(b.min_allocated, b.max_allocated, None, f"resourcePolicy[{c}]")
            for c, b in self.spec.resource_policy.items()
        }
        return Bounds(
            self.kind,
            self.name,
            None,
            self.spec.max_replicas,
            True,
            containers,
            "minAllocatedResources",
            "maxAllocatedResources",
            self.spec.hpa_name,
        )

    def vpa_template(self) -> VpaTemplate | None:
        """The monitor VPA Tortoise creates (``updateMode: Off``, ``minAllowed`` = ``minAllocatedResources``,
        reference 2.g): tandem recommends it from ``metric`` samples when no cluster sends ``vpa`` events."""
        policies = {
            b.container: VpaContainerPolicy(
                {r: v if r == "cpu" else bytes_of(v) for r, v in b.min_allocated.items() if r in RESOURCES}
            )
            for b in self.spec.resource_policy.values()
        }
        return VpaTemplate(policies)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA Tortoise would have created by now (reference 2.g), from the policy's memory.

        tandem recommends it from ``metric`` samples when no cluster sends ``hpa`` events: one
        ContainerResource Utilization metric per Horizontal pair of the last reconcile
        (``memory["pol"]``) at the target tandem last decided (``memory["hpa"]``), else 70; min/max
        replicas as decided, else the initial ``MinimumMinReplicas``/``MaximumMaxReplicas``
        (``memory["hpa0"]``, kept by dry runs, which never decide an HPA); Tortoise's built-in
        behavior.  ``None`` before the first reconcile, with ``horizontalPodAutoscalerName`` (the
        user's HPA, which tandem cannot know) and without a Horizontal pair.
        """
        pol = memory.get("pol")
        if self.spec.hpa_name is not None or not isinstance(pol, Mapping):
            return None
        horizontal = sorted(_split(k) for k, kind in pol.items() if kind == "Horizontal")
        if not horizontal:
            return None
        decided = memory.get("hpa")
        state = HpaState.of_memory(decided) if isinstance(decided, Mapping) else HpaState(None, None, None)
        initial = memory.get("hpa0")
        d = TortoiseSettings()
        lo, hi = initial if isinstance(initial, list) else (d.minimum_min_replicas, d.maximum_max_replicas)
        max_r = state.max_replicas if state.max_replicas is not None else int(hi)
        min_r = state.min_replicas if state.min_replicas is not None else int(lo)
        max_r = max(max_r, 1)
        min_r = min(max(min_r, 0), max_r)  # an HPA cannot hold min > max (tandem never decides one)
        targets = state.targets or {}
        metrics = tuple(
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": r,
                    "container": c,
                    "target": {"type": "Utilization", "averageUtilization": targets.get((c, r), NEW_METRIC_TARGET)},
                },
            }
            for c, r in horizontal
        )
        return HpaTemplate(metrics, DEFAULT_HPA_BEHAVIOR, min_r, max_r)

    def settings(self, settings: Mapping[str, Any]) -> TortoiseSettings:
        raw = settings.get("tortoise")
        cached = self._settings_cache
        if cached is not None and cached[0] is raw:
            return cached[1]
        parsed = TortoiseSettings.from_mapping(raw)
        self._settings_cache = (raw, parsed)
        return parsed

    # -- reconcile (reference 2.0) -------------------------------------------------------------

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        st = self.settings(view.settings)
        spec = self.spec
        now = view.tick
        out = Outcome(mode=spec.update_mode)
        off_reason = self._off_reason(st)
        out.dry_run = off_reason is not None
        phase = str(memory.get("phase", ""))

        # TortoiseUpdateInterval: at most one reconcile per interval, except an unhandled Emergency.
        last = memory.get("last")
        urgent = spec.update_mode == "Emergency" and phase != "Emergency"
        if isinstance(last, int | float) and now - last < st.update_interval and not urgent:
            return out
        memory["last"] = now
        if out.dry_run:
            # The initial HPA bounds, for ``hpa_template`` (a dry run never decides an HPA).
            initial = [st.minimum_min_replicas, st.maximum_max_replicas]
            if memory.get("hpa0") != initial:
                memory["hpa0"] = initial

        hist = self._history(memory, st)
        # Replica history: fed at every tick, frozen in Emergency and BackToNormal (reference 2.f).
        if phase not in ("Emergency", "BackToNormal") and hist.observe(now, view.spec.replicas):
            memory["hist"] = hist.to_dict()
            self._live = (memory["hist"], hist)

        hpa = self._hpa_state(view, memory)
        policies = self._policies(view, hpa)
        has_h = any(t == "Horizontal" for t in policies.values())
        hpa_math = hpa.copy() if hpa is not None else None
        if hpa_math is None and has_h and spec.hpa_name is None:
            hpa_math = self._initial_hpa(st, policies)
        rphases: dict[str, list[Any]] = memory.setdefault("rp", {})
        t = _Tick(view, st, memory, out, now, phase, policies, hist, hpa, hpa_math, rphases)
        out.inputs = {"replicas": view.spec.replicas}
        if off_reason is not None:
            out.reasons.append(f"tortoise: dry run ({off_reason})")

        if phase == "":
            return self._initialize(t, has_h)

        self._sync_resource_phases(t)
        broken = self._hpa_broken(view.hpa, memory, now, st)
        self._phase_step(t, has_h, broken)
        # Step 5: the HPA's metric list follows the policies.
        if has_h:
            self._sync_metrics(t)

        # Step 6: the monitor VPA must be ready.
        why = self._vpa_unready(view.vpa, policies)
        if why:
            out.reasons.append(f"tortoise: waiting for the VPA recommendation ({why})")
            return self._finish(t)

        # Step 7: Vertical resources work as soon as the VPA is ready.
        vertical = [p for p, kind in policies.items() if kind == "Vertical"]
        for p in vertical:
            if rphases[_pair_key(p)][0] != "Working":
                rphases[_pair_key(p)] = ["Working", now]
        if t.phase == "GatheringData" and vertical:
            t.phase = "PartlyWorking"

        # Step 9: automatic Emergency when the HPA cannot get its metrics (reference 2.f).
        if spec.update_mode == "Auto" and t.phase == "Working" and has_h and broken:
            t.phase = "Emergency"
            memory["auto"] = True
            out.reasons.append("tortoise: the HPA cannot get its metrics: automatic Emergency")

        # Step 10: the sticky VPA maximum (reference 2.e).
        assert view.vpa is not None
        vmax = self._update_vpa_max(view.vpa, policies, memory)
        out.inputs["vpa_max"] = {k: format_quantity(_split(k)[1], v) for k, v in sorted(vmax.items())}

        # Step 11: recommendations, frozen in Emergency and BackToNormal.
        frozen = t.phase in ("Emergency", "BackToNormal")
        trec: dict[str, int] = dict(memory.get("trec") or {})
        vrec: dict[str, dict[str, int]] = {}
        if not frozen:
            if view.spec.replicas == st.maximum_max_replicas:
                out.reasons.append("tortoise: replicas at MaximumMaxReplicas: target utilization not recomputed")
            else:
                trec = self._target_recommendations(t, vmax)
                memory["trec"] = trec
            vrec = self._vertical_recommendations(t, vmax)

        # Step 12: nothing is applied while gathering data.
        if t.phase == "GatheringData":
            self._block_gathering(t, has_h)
            return self._finish(t)

        # Step 13: HPA, then requests.
        if has_h:
            working = [
                p for p, kind in policies.items() if kind == "Horizontal" and rphases[_pair_key(p)][0] == "Working"
            ]
            if working or frozen:
                self._apply_hpa(
                    t, trec, working if not frozen else [p for p, k in policies.items() if k == "Horizontal"]
                )
            else:
                self._block_gathering(t, has_h)
        if not frozen:
            self._apply_requests(t, vrec)
        return self._finish(t)

    # -- helpers: state ------------------------------------------------------------------------

    def _off_reason(self, st: TortoiseSettings) -> str | None:
        if self.spec.update_mode == "Off":
            return "updateMode Off"
        if st.global_disable:
            return "EffectiveModeOverridden: GlobalDisableMode"
        if self.workload.namespace in st.excluded_namespaces:
            return "EffectiveModeOverridden: NamespaceExclusion"
        return None

    def _history(self, memory: dict[str, Any], st: TortoiseSettings) -> ReplicaHistory:
        """The replica history of ``memory``; the decoded object is kept between ticks as long as
        ``memory["hist"]`` is the very value this policy wrote last (a reloaded state decodes again)."""
        raw = memory.get("hist")
        live = self._live
        h: ReplicaHistory | None = None
        if live is not None and raw is live[0]:
            h = live[1]
        elif isinstance(raw, Mapping):
            try:
                h = ReplicaHistory.from_dict(raw)
            except ValueError:
                h = None
        # A changed TimeZone or slot width cannot be mapped onto the old slots: start again.
        if h is None or h.timezone != st.timezone or h.width != st.slot_hours:
            h = ReplicaHistory(st.timezone, st.slot_hours)
            memory["hist"] = h.to_dict()
        self._live = (memory["hist"], h)
        return h

    @staticmethod
    def _hpa_state(view: View, memory: dict[str, Any]) -> HpaState | None:
        """The HPA as tandem last decided it, unless an ``hpa`` event newer than that decision came.

        tandem's own HPA (``source: tandem``) is built from that decision (``hpa_template``): it
        never replaces it."""
        assumed = memory.get("hpa")
        ev = view.hpa
        if isinstance(assumed, Mapping) and (
            ev is None or ev.source == "tandem" or ev.ts <= float(assumed.get("tick", 0))
        ):
            return HpaState.of_memory(assumed)
        memory.pop("hpa", None)
        return HpaState.of_event(ev) if ev is not None else None

    def _initial_hpa(self, st: TortoiseSettings, policies: Mapping[Pair, str]) -> HpaState:
        # Reference 2.g: min MinimumMinReplicas, max MaximumMaxReplicas, ContainerResource 70 per Horizontal pair.
        targets = {p: NEW_METRIC_TARGET for p, kind in policies.items() if kind == "Horizontal"}
        return HpaState(st.minimum_min_replicas, st.maximum_max_replicas, targets)

    def _policies(self, view: View, hpa: HpaState | None) -> dict[Pair, str]:
        """``status.autoscalingPolicy`` (reference 1.3)."""
        containers = sorted(view.spec.containers)
        out: dict[Pair, str] = {}
        explicit = self.spec.autoscaling_policy
        for c in containers:
            if explicit:
                # The webhook adds every container of the Deployment, missing resources as Off.
                pol = explicit.get(c, {})
                for r in RESOURCES:
                    out[(c, r)] = pol.get(r, "Off")
            else:
                out[(c, "cpu")] = "Horizontal"
                out[(c, "memory")] = "Vertical"
                if self.spec.hpa_name is not None and hpa is not None and hpa.targets is not None:
                    for r in RESOURCES:
                        out[(c, r)] = "Horizontal" if (c, r) in hpa.targets else "Vertical"
            for r in RESOURCES:
                q = view.spec.containers[c].requests.get(r)
                if q is None or q.milli == 0:
                    out[(c, r)] = "Off"
        return out

    def _initialize(self, t: _Tick, has_h: bool) -> Outcome:
        """``""`` -> ``Initializing``: resource phases, the HPA Tortoise creates (reference 2.0, 2.g)."""
        t.phase = "Initializing"
        t.rphases.clear()
        for p, kind in t.policies.items():
            t.rphases[_pair_key(p)] = ["Off" if kind == "Off" else "GatheringData", t.now]
        t.memory["pol"] = {_pair_key(p): k for p, k in t.policies.items()}
        t.out.reasons.append(
            f"tortoise: initialized; gathering data for {'1 day' if t.st.period == 'daily' else '1 week'}"
        )
        if has_h and t.hpa is None:
            if self.spec.hpa_name is not None:
                t.out.reasons.append(f"tortoise: waiting for HPA {self.spec.hpa_name!r} (no hpa event yet)")
            else:
                new = t.hpa_math
                assert new is not None
                targets = new.targets or {}
                t.out.hpa = {
                    "min_replicas": (None, new.min_replicas),
                    "max_replicas": (None, new.max_replicas),
                    "target_utilization": {_pair_key(p): (None, v) for p, v in sorted(targets.items())},
                }
                t.out.reasons.append(f"tortoise: creates HPA tortoise-hpa-{self.spec.name}")
                t.memory["_new_hpa"] = True
        return self._finish(t)

    def _sync_resource_phases(self, t: _Tick) -> None:
        """A policy change resets that resource to GatheringData (reference 1.3, 2.0)."""
        previous = t.memory.get("pol") or {}
        current = {_pair_key(p): k for p, k in t.policies.items()}
        for key, kind in current.items():
            if previous.get(key) != kind or key not in t.rphases:
                t.rphases[key] = ["Off" if kind == "Off" else "GatheringData", t.now]
        for key in list(t.rphases):
            if key not in current:
                del t.rphases[key]
        t.memory["pol"] = current

    def _phase_step(self, t: _Tick, has_h: bool, broken: bool) -> None:
        """``UpdateTortoisePhase`` (reference 2.0)."""
        mode = self.spec.update_mode
        if t.phase == "Initializing":
            t.phase = "GatheringData"
            for key, (p, _) in list(t.rphases.items()):
                if p != "Off":
                    t.rphases[key] = ["GatheringData", t.now]
        elif t.phase in ("GatheringData", "PartlyWorking", "Working"):
            t.phase = self._recompute(t, has_h) or t.phase
        elif t.phase == "Emergency" and mode != "Emergency":
            if t.memory.get("auto") and mode == "Auto" and broken:
                t.out.reasons.append("tortoise: the HPA still cannot get its metrics: Emergency continues")
            else:
                t.phase = "BackToNormal"
                t.memory.pop("auto", None)
                t.out.reasons.append("tortoise: Emergency is over: minReplicas comes back gradually")
        if mode == "Emergency" and t.phase != "Emergency":
            if not has_h:
                t.out.reasons.append("tortoise: cannot move to Emergency without a Horizontal policy")
            elif t.phase not in ("PartlyWorking", "Working"):
                t.out.reasons.append(f"tortoise: cannot move to Emergency in phase {t.phase} (not enough data)")
                t.out.block("hpa/min_replicas", "GatheringData")
            else:
                t.phase = "Emergency"
                t.memory.pop("auto", None)
                t.out.reasons.append("tortoise: Emergency: minReplicas pinned to the recommended maxReplicas")

    def _recompute(self, t: _Tick, has_h: bool) -> str | None:
        """Resource phases -> overall phase; Horizontal work needs the period and a full history."""
        covered = t.hist.covered(t.now, t.st.period) if has_h else True
        if not covered:
            for p, kind in t.policies.items():
                key = _pair_key(p)
                if kind == "Horizontal" and t.rphases[key][0] == "Working":
                    t.rphases[key] = ["GatheringData", t.now]
        gathering = working = False
        for key, (p, since) in t.rphases.items():
            if p == "Off":
                continue
            if p == "Working":
                working = True
                continue
            horizontal = t.policies.get(_split(key)) == "Horizontal"
            if float(since) + t.st.gathering_seconds <= t.now and (covered or not horizontal):
                t.rphases[key] = ["Working", t.now]
                working = True
            else:
                gathering = True
        if gathering and working:
            return "PartlyWorking"
        if working:
            return "Working"
        if gathering:
            return "GatheringData"
        return None

    @staticmethod
    def _vpa_unready(vpa: VpaEvent | None, policies: Mapping[Pair, str]) -> str:
        """Why the monitor VPA is not ready (``""`` when it is): reference 2.0 step 6."""
        if vpa is None:
            return "no vpa event yet"
        if vpa.conditions is not None:
            ok = any(
                c.get("type") == "RecommendationProvided" and c.get("status", "True") == "True" for c in vpa.conditions
            )
            if not ok:
                return "condition RecommendationProvided is not True"
        for c in sorted({p[0] for p, kind in policies.items() if kind != "Off"}):
            if c not in vpa.containers:
                return f"no recommendation for container {c}"
        for c, rec in sorted(vpa.containers.items()):
            for r in RESOURCES:
                q = rec.target.get(r)
                if q is None or q.milli == 0:
                    return f"zero {r} target for container {c}"
        return ""

    @staticmethod
    def _update_vpa_max(vpa: VpaEvent, policies: Mapping[Pair, str], memory: dict[str, Any]) -> dict[str, int]:
        """``maxRecommendation`` kept while target < max < upperBound, else the target (reference 2.e)."""
        old = memory.get("vmax") or {}
        vmax: dict[str, int] = {}
        for c in sorted({p[0] for p in policies}):
            rec = vpa.containers.get(c)
            if rec is None:
                continue
            for r in RESOURCES:
                key = f"{c}/{r}"
                tq, uq = rec.target.get(r), rec.upper_bound.get(r)
                target = tq.milli if tq is not None else 0
                upper = uq.milli if uq is not None else 0
                cur = int(old.get(key, 0))
                vmax[key] = cur if target < cur < upper else target
        memory["vmax"] = vmax
        return vmax

    @staticmethod
    def _hpa_broken(ev: HpaEvent | None, memory: dict[str, Any], now: float, st: TortoiseSettings) -> bool:
        """The HPA cannot get its metrics (reference 2.f): ``ScalingActive=False/FailedGetResourceMetric``
        for ``EmergencyModeGracePeriod``, or every current ContainerResource/External value is 0."""
        if ev is None:
            memory.pop("bad_since", None)
            return False
        if ev.source == "tandem":
            # tandem's own HPA speaks for the HPA's health only once it has computed its metrics: a
            # stream that never carries samples for the workload says nothing about a cluster's HPA.
            if any(c.get("type") == "ScalingActive" and c.get("status") == "True" for c in ev.conditions):
                memory["own_ok"] = True
            elif not memory.get("own_ok"):
                memory.pop("bad_since", None)
                return False
        failing = None
        reasons = OWN_FAILED_METRIC_REASONS if ev.source == "tandem" else FAILED_METRIC_REASONS
        for c in ev.conditions:
            if c.get("type") == "ScalingActive" and c.get("status", "True") == "False" and c.get("reason") in reasons:
                failing = c
        if failing is not None:
            since = _rfc3339(failing.get("lastTransitionTime"))
            if since is None:
                since = float(memory.setdefault("bad_since", now))
            return now - since >= st.grace_period
        memory.pop("bad_since", None)
        values = [v for m in ev.current_metrics or () for v in _current_values(m)]
        return bool(values) and not any(v > 0 for v in values)

    # -- recommendations -----------------------------------------------------------------------

    def _target_recommendations(self, t: _Tick, vmax: Mapping[str, int]) -> dict[str, int]:
        """HPA target utilization per Horizontal pair (reference 2.c; seed formula)."""
        st = t.st
        out: dict[str, int] = {}
        if t.hpa_math is None or t.hpa_math.targets is None:
            return out
        for p, kind in t.policies.items():
            if kind != "Horizontal":
                continue
            key = _pair_key(p)
            current = t.hpa_math.targets.get(p)
            q = self._request(t.view, p)
            r = vmax.get(key)
            if current is None or not q or r is None:
                continue  # a missing HPA metric is skipped silently
            upper = math.ceil(float(r) / float(q) * 100)
            if current > upper:
                rec = current  # low usage is blamed on minReplicas or unbalanced sizing
            else:
                rec = 100 - (upper - current)
                if rec <= 0 or rec > 100:
                    rec = current
            if rec > st.max_target:
                rec = st.max_target
            if rec < st.min_target:
                rec = st.min_target
            out[key] = rec
        return out

    def _vertical_recommendations(self, t: _Tick, vmax: Mapping[str, int]) -> dict[str, dict[str, int]]:
        """Requests per container and resource (reference 2.d right-sizing, 2.e vertical)."""
        st, view, memory = t.st, t.view, t.memory
        n = view.spec.replicas
        horizontal = [p for p, kind in t.policies.items() if kind == "Horizontal"]
        hpa_min = t.hpa_math.min_replicas if t.hpa_math is not None else None
        scaled_up = close = False
        if horizontal:
            pref = memory.get("pref")
            was_true = isinstance(pref, list) and bool(pref[0])
            held = was_true and isinstance(pref, list) and float(pref[1]) + PREFERRED_MAX_HOLD > t.now
            if (
                n >= st.preferred_max_replicas
                and hpa_min is not None
                and hpa_min < n
                and FEATURE_PREFERRED_MAX in st.features
                and not held
            ):
                if was_true:
                    scaled_up = True
                memory["pref"] = [True, t.now]
            if n < st.preferred_max_replicas:
                memory["pref"] = [False, t.now]
            close = int(float(st.preferred_max_replicas) * 0.8) < n
        out: dict[str, dict[str, int]] = {}
        for p, kind in t.policies.items():
            if kind == "Off":
                continue
            q = self._request(view, p)
            r = vmax.get(_pair_key(p))
            if not q or r is None:
                continue
            if kind == "Vertical":
                new = self._vertical_size(st, p, q, r)
            else:
                new = self._horizontal_size(t, p, q, r, scaled_up, close, len(horizontal) > 1, hpa_min)
            out.setdefault(p[0], {})[p[1]] = new
        return out

    def _vertical_size(self, st: TortoiseSettings, p: Pair, q: int, r: int) -> int:
        b = st.buffer_ratio
        ideal = float(r) * (1 + b)
        if ideal > float(q):
            # Scale up is immediate and overshoots by the buffer once more.
            return self._justify(st, p, q, int(ideal * (1 + b)))
        previous_ideal = float(q) / (1 + b)
        if previous_ideal * (1 - b) > ideal:
            return self._justify(st, p, q, int(ideal))
        return q  # a small decrease is ignored (and not clamped)

    def _horizontal_size(
        self,
        t: _Tick,
        p: Pair,
        q: int,
        r: int,
        scaled_up: bool,
        close: bool,
        multiple: bool,
        hpa_min: int | None,
    ) -> int:
        """``calculateBestNewSize`` for a Horizontal resource (reference 2.d)."""
        st = t.st
        n = t.view.spec.replicas
        if scaled_up:
            return self._justify(st, p, q, int(float(q) * PREFERRED_MAX_GROWTH))
        if close:
            return q
        if n <= st.minimum_min_replicas:
            return self._justify(st, p, q, r if r < q else q)
        if not multiple or n == hpa_min:
            return self._justify(st, p, q, q)
        target = t.hpa_math.targets.get(p) if t.hpa_math is not None and t.hpa_math.targets is not None else None
        if target is None:
            return q
        upper = float(r) / float(q) * 100
        if float(target) * 0.9 > upper:
            return self._justify(st, p, q, int(float(r) * 100.0 / float(target)))
        return self._justify(st, p, q, q)

    def _justify(self, st: TortoiseSettings, p: Pair, old: int, new: int) -> int:
        """``justifyNewSize``: within [max(minAllocated, global min, old × ratio), min(maxAllocated, global max)]."""
        c, res = p
        b = self.spec.resource_policy.get(c)
        lo = max(b.min_allocated.get(res, 0) if b else 0, st.global_min(c, res))
        hi = st.max_request.get(res, 0)
        spec_hi = b.max_allocated.get(res, 0) if b else 0
        if spec_hi and spec_hi < hi:
            hi = spec_hi
        floor = int(float(old) * st.max_scale_down_ratio)
        if lo < floor:
            lo = floor
        if new > hi:
            return hi
        if new < lo:
            return lo
        return new

    @staticmethod
    def _request(view: View, p: Pair) -> int:
        c = view.spec.containers.get(p[0])
        q = c.requests.get(p[1]) if c is not None else None
        return q.milli if q is not None else 0

    # -- application ---------------------------------------------------------------------------

    def _block_gathering(self, t: _Tick, has_h: bool) -> None:
        if not has_h:
            return
        for target in ("hpa/min_replicas", "hpa/max_replicas"):
            if not any(b.target == target and b.reason == "GatheringData" for b in t.out.blocked):
                t.out.block(target, "GatheringData")

    def _sync_metrics(self, t: _Tick) -> None:
        """Every Horizontal pair gets a ContainerResource metric at 70 (reference 2.c).

        Tortoise also deletes the ContainerResource metrics of non-Horizontal pairs; a decision
        cannot say "remove" (``to`` is a number in ``decision.schema.json``), so tandem leaves them
        and never retargets them.
        """
        hpa = t.hpa_math
        if hpa is None or hpa.targets is None:
            return
        changes: dict[str, tuple[int | None, int | None]] = t.out.hpa.setdefault("target_utilization", {})
        for p, kind in t.policies.items():
            if kind == "Horizontal" and p not in hpa.targets:
                changes[_pair_key(p)] = (None, NEW_METRIC_TARGET)
                hpa.targets[p] = NEW_METRIC_TARGET
        if not changes:
            del t.out.hpa["target_utilization"]

    def _apply_hpa(self, t: _Tick, trec: Mapping[str, int], pairs: list[Pair]) -> None:
        """min/max replicas (reference 2.b, 2.f) and rate-limited targets (reference 2.c)."""
        st, out, hpa = t.st, t.out, t.hpa_math
        if hpa is None:
            out.reasons.append(f"tortoise: waiting for HPA {self.spec.hpa_name!r} (no hpa event yet)")
            return
        before = t.hpa
        peak = t.hist.peak(t.now, st.period)
        out.inputs["slot_peak_replicas"] = peak
        if peak is None:
            out.reasons.append("tortoise: no replica history for this slot: min/max replicas unchanged")
        else:
            rec_min, rec_max = replica_bounds(
                peak,
                min_multiplier=st.min_multiplier,
                max_multiplier=st.max_multiplier,
                minimum_min_replicas=st.minimum_min_replicas,
            )
            out.inputs["recommended_replicas"] = {"min": rec_min, "max": rec_max}
            new_max = rec_max
            if self.spec.max_replicas is not None and new_max > self.spec.max_replicas:
                new_max = self.spec.max_replicas
            if new_max > st.maximum_max_replicas:
                new_max = st.maximum_max_replicas
            new_min = min(rec_min, st.maximum_min_replicas)
            stepped: int | None = None
            if t.phase == "Emergency":
                new_min = new_max
            elif t.phase == "BackToNormal":
                current = hpa.min_replicas if hpa.min_replicas is not None else 1
                reduced = int(float(current) * st.reduction_factor)
                if new_min > reduced:
                    t.phase = "Working"
                    out.reasons.append(f"tortoise: BackToNormal finished at minReplicas {min(new_min, new_max)}")
                else:
                    stepped = current
                    new_min = reduced
            # tandem invariant: never write minReplicas above maxReplicas (Tortoise PR #451, open).
            new_min = min(new_min, new_max)
            if stepped is not None:
                out.reasons.append(f"tortoise: BackToNormal: minReplicas {stepped} -> {new_min}")
            out.hpa["min_replicas"] = (before.min_replicas if before else None, new_min)
            out.hpa["max_replicas"] = (before.max_replicas if before else None, new_max)
        if hpa.targets is None:
            return
        last = t.memory.get("tgt_at")
        allowed = last is None or t.now - float(last) > st.target_update_interval
        changes: dict[str, tuple[int | None, int | None]] = out.hpa.setdefault("target_utilization", {})
        applied = False
        for p in pairs:
            key = _pair_key(p)
            target_now = hpa.targets.get(p)
            proposed = trec.get(key)
            if target_now is None or proposed is None:
                continue
            current = target_now
            if not allowed:
                if proposed != current:
                    out.block("hpa/target_utilization", "Cooldown", f"{key}={proposed}")
                continue
            applied = True
            new = current + st.target_max_increase if proposed - current > st.target_max_increase else proposed
            if new != current:
                if key in changes:  # added by the metric sync on this tick
                    before_t = changes[key][0]
                else:
                    before_t = before.targets.get(p) if before is not None and before.targets is not None else None
                changes[key] = (before_t, new)
        if applied and not out.dry_run:
            t.memory["tgt_at"] = t.now
        if not changes:
            del out.hpa["target_utilization"]

    def _apply_requests(self, t: _Tick, vrec: Mapping[str, Mapping[str, int]]) -> None:
        """``UpdateResourceRequest`` (reference 2.e) and the pod webhook's limits."""
        st, out, view = t.st, t.out, t.view
        changed: dict[str, dict[str, int]] = {}
        increased = False
        for c in sorted(vrec):
            for r in sorted(vrec[c]):
                new = vrec[c][r]
                q = self._request(view, (c, r))
                if new and new != q:
                    changed.setdefault(c, {})[r] = new
                    increased = increased or new > q
        if out.dry_run:
            t.memory.pop("req_at", None)  # VerticalRecommendationUpdated=False in Off mode
        if not changed:
            return
        if not out.dry_run:
            last = t.memory.get("req_at")
            if last is not None and t.now - float(last) < SCALE_DOWN_INTERVAL and not increased:
                for c, res_map in changed.items():
                    for r, v in res_map.items():
                        out.block(f"{c}/{r}", "Cooldown", format_quantity(r, v))
                return
            t.memory["req_at"] = t.now
        for c, res_map in changed.items():
            spec = view.spec.containers[c]
            for r, new in res_map.items():
                out.requests.setdefault(c, {})[r] = new
                old_req, old_lim = spec.requests.get(r), spec.limits.get(r)
                if old_lim is None or old_req is None or old_req.milli == 0:
                    continue
                ratio = float(old_lim.milli) / float(old_req.milli)
                mult = st.limit_multiplier.get(r)
                if mult is not None and ratio < mult:
                    ratio = float(mult)
                limit = int(float(new) * ratio)
                if r == "cpu" and limit < st.minimum_cpu_limit:
                    limit = st.minimum_cpu_limit
                out.limits.setdefault(c, {})[r] = limit

    def _finish(self, t: _Tick) -> Outcome:
        out, memory = t.out, t.memory
        memory["phase"] = t.phase
        out.inputs["phase"] = t.phase
        out.reasons.insert(0, f"tortoise: phase {t.phase}")
        new_hpa = memory.pop("_new_hpa", False)
        if out.dry_run:
            fingerprint = json.dumps(
                [
                    {k: v for k, v in sorted(out.hpa.items())},
                    out.requests,
                    out.limits,
                    [b.as_dict() for b in out.blocked],
                ],
                sort_keys=True,
                default=str,
            )
            if fingerprint == memory.get("dry"):
                # The same proposal as last time: a dry run reports a proposal once, not every tick.
                return Outcome(mode=out.mode, dry_run=True)
            memory["dry"] = fingerprint
            return out
        memory.pop("dry", None)
        if out.hpa:
            self._assume_hpa(t, new_hpa)
        return out

    def _assume_hpa(self, t: _Tick, created: bool) -> None:
        """Remember the HPA as decided: ``hpa`` events older than this tick do not undo it."""
        base = t.hpa if t.hpa is not None else (t.hpa_math if created else None)
        if base is None:
            return
        state = HpaState(base.min_replicas, base.max_replicas, None if base.targets is None else dict(base.targets))
        changed = False
        for name, attr in (("min_replicas", "min_replicas"), ("max_replicas", "max_replicas")):
            pair = t.out.hpa.get(name)
            if pair is not None:
                changed = changed or pair[0] != pair[1]
                setattr(state, attr, pair[1])
        for key, (old, new) in (t.out.hpa.get("target_utilization") or {}).items():
            changed = changed or old != new
            if state.targets is None:
                state.targets = {}
            state.targets[_split(key)] = new
        if changed or created:
            t.memory["hpa"] = state.to_memory(t.now)


def _rfc3339(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _current_values(metric: Mapping[str, Any]) -> list[float]:
    """Current values of a ContainerResource or External ``status.currentMetrics`` entry."""
    kind = metric.get("type")
    if kind == "ContainerResource":
        cur = get_path(metric, "containerResource.current") or {}
        keys: tuple[str, ...] = ("averageUtilization", "averageValue")
    elif kind == "External":
        cur = get_path(metric, "external.current") or {}
        keys = ("value", "averageValue", "averageUtilization")
    else:
        return []
    out: list[float] = []
    if not isinstance(cur, Mapping):
        return out
    for k in keys:
        v = cur.get(k)
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            out.append(float(v))
        else:
            try:
                out.append(parse_quantity(v) / 1000)
            except ValueError:
                continue
    return out


KIND = register(
    PolicyKind(
        "Tortoise",
        "autoscaling.mercari.com",
        ("v1beta3",),
        "tortoises",
        parse_tortoise,
        settings_section="tortoise",
        validate_settings=TortoiseSettings.from_mapping,
    )
)
