"""Tandem's HPA recommender: the autoscaling/v2 HorizontalPodAutoscaler replica computation, pure.

Why re-implement the controller instead of reading the HPA's status?  Tandem must be able to say
what the HPA *would* decide for a workload that has no HPA object yet (a policy's HPA template), for a
replayed history, and for a what-if; and it must decide in event time, deterministically, from the
samples on the stream.  So this module reproduces ``kube-controller-manager``'s HPA arithmetic
(``pkg/controller/podautoscaler/{horizontal,replica_calculator}.go`` and ``metrics/utilization.go``)
from explicit inputs and an explicit, serialisable per-HPA state -- no Kubernetes client, no clock
(``now`` is the tick's event time), standard library only.

The specification followed literally is ``/work/shared/reference/hpa-vpa-customhpa.md`` section 1;
comments of the form "(reference 1.5)" point into it, and name the upstream function they mirror.

Units.  Upstream computes in *milli-units* held in int64 and in *integer percent*; every truncation
matters (several upstream expectations depend on them), so this module does the same with Python
ints.  Inputs use the units of the metrics pipeline:

* ``MetricInputs.pod_usage`` and the requests: ``"cpu"`` in millicores (already milli-units), every
  other resource (``"memory"``, ...) in base units (bytes), converted internally to milli-units as
  ``Quantity.MilliValue()`` would (x1000).
* ``MetricInputs.series`` values: plain numbers in base units (``12.5`` requests/s), converted to
  milli-units rounding up like ``MilliValue()``; a quantity string (``"12500m"``) is accepted too.
* Targets in metric specs: quantities (``"500m"``, ``"1Gi"``, ``10``), parsed exactly by
  :func:`scaling.quantity.parse_quantity`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from ..quantity import parse_decimal, parse_duration, parse_quantity

__all__ = [
    "DEFAULT_SCALE_DOWN_RULES",
    "DEFAULT_SCALE_UP_RULES",
    "Behavior",
    "HpaConfig",
    "HpaResult",
    "HpaState",
    "MetricInputs",
    "MetricSpec",
    "PodInfo",
    "ScalingPolicy",
    "ScalingRules",
    "Tolerances",
    "format_milli_quantity",
    "limit_legacy",
    "limit_with_behavior",
    "parse_behavior",
    "parse_metrics",
    "recommend",
    "replicas_changed_in_period",
    "stabilize_legacy",
    "stabilize_with_behavior",
    "store_scale_event",
]

_MAX_INT32 = 2**31 - 1
_MIN_INT32 = -(2**31)
_MAX_INT64 = 2**63 - 1

# HPA: horizontal.go, scaleUpLimitFactor / scaleUpLimitMinimum (reference 1.8).
_SCALE_UP_LIMIT_FACTOR = 2.0
_SCALE_UP_LIMIT_MINIMUM = 4.0


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HpaConfig:
    """kube-controller-manager's HPA flags (reference 1.1), in seconds, with upstream defaults.

    ``configurable_tolerance`` is the ``HPAConfigurableTolerance`` feature gate (beta and on by
    default since Kubernetes 1.35, reference 1.4): when off, per-HPA ``behavior.*.tolerance`` is
    ignored, as the controller does.  ``sync_period`` is not used by :func:`recommend` itself (the
    caller decides when to tick) but belongs to the same ``hpa:`` settings section.
    """

    tolerance: float = 0.1
    downscale_stabilization: float = 300.0
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0
    sync_period: float = 15.0
    configurable_tolerance: bool = True

    def __post_init__(self) -> None:
        for name in (
            "tolerance",
            "downscale_stabilization",
            "cpu_initialization_period",
            "initial_readiness_delay",
            "sync_period",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"hpa.{name}: must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"hpa.{name}: must be >= 0, got {value!r}")
        if self.sync_period <= 0:
            raise ValueError(f"hpa.sync_period: must be > 0, got {self.sync_period!r}")
        if not isinstance(self.configurable_tolerance, bool):
            raise ValueError("hpa.configurable_tolerance: must be a boolean")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> HpaConfig:
        """Build from the ``hpa:`` section of tandem's YAML settings.

        Keys may be the upstream flag names (``horizontal-pod-autoscaler-tolerance``,
        ``horizontal-pod-autoscaler-downscale-stabilization``, ...), the component-config names
        (``horizontalPodAutoscalerTolerance``), or the short snake/camel names of this class
        (``tolerance``, ``downscale_stabilization``, ``cpuInitializationPeriod``...).  Durations are
        numbers of seconds or Go duration strings (``"5m0s"``).  An unknown key is a ``ValueError``
        naming it: a typo in a tuning knob must not silently fall back to the default.
        """
        if m is None:
            return cls()
        if not isinstance(m, Mapping):
            raise ValueError("hpa: must be a mapping")
        values: dict[str, Any] = {}
        seen_as: dict[str, str] = {}
        for key, raw in m.items():
            if not isinstance(key, str):
                raise ValueError(f"hpa: keys must be strings, got {key!r}")
            name = _CONFIG_ALIASES.get(_canonical_key(key))
            if name is None:
                raise ValueError(f"hpa.{key}: unknown setting")
            if name in seen_as:
                raise ValueError(f"hpa.{key}: duplicates hpa.{seen_as[name]}")
            seen_as[name] = key
            try:
                if name == "configurable_tolerance":
                    if not isinstance(raw, bool):
                        raise ValueError("must be a boolean")
                    values[name] = raw
                elif name == "tolerance":
                    values[name] = _plain_float(raw)
                else:
                    values[name] = parse_duration(raw)
            except ValueError as exc:
                raise ValueError(f"hpa.{key}: {exc}") from None
        return cls(**values)


def _canonical_key(key: str) -> str:
    k = key.replace("-", "").replace("_", "").lower()
    for prefix in ("horizontalpodautoscaler", "hpa"):
        if k.startswith(prefix) and k != "hpaconfigurabletolerance":
            k = k[len(prefix) :]
            break
    return k


_CONFIG_ALIASES = {
    "tolerance": "tolerance",
    "downscalestabilization": "downscale_stabilization",
    "downscalestabilizationwindow": "downscale_stabilization",
    "cpuinitializationperiod": "cpu_initialization_period",
    "initialreadinessdelay": "initial_readiness_delay",
    "syncperiod": "sync_period",
    "configurabletolerance": "configurable_tolerance",
    "hpaconfigurabletolerance": "configurable_tolerance",
}


def _plain_float(raw: object) -> float:
    if isinstance(raw, bool):
        raise ValueError("must be a number")
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(Decimal(raw.strip()))
        except InvalidOperation:
            raise ValueError(f"{raw!r} is not a number") from None
    raise ValueError(f"must be a number, got {type(raw).__name__}")


# --------------------------------------------------------------------------------------------------
# Inputs, state, result
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """What ``groupPods`` reads from a pod (reference 1.3).

    ``ready`` is the status of the pod's Ready condition; ``ready_since`` its last transition time.
    When ``ready_since`` is unknown the pod's ``started`` time stands in for it (a pod cannot become
    ready before it starts; this is the only approximation, and it only matters for CPU metrics of
    pods younger than the CPU initialization period).  ``deleting`` is "deletionTimestamp is set".
    """

    name: str
    ready: bool
    phase: str
    started: float | None
    ready_since: float | None = None
    deleting: bool = False


@dataclass(frozen=True)
class MetricInputs:
    """The metric samples of one tick.

    * ``pod_usage``: pod -> container -> resource -> latest usage (``"cpu"`` millicores, other
      resources base units such as bytes).  A pod absent here has no metric ("missing").
    * Requests: **one choice, the workload's pod template**: ``container_requests`` is container ->
      resource -> request (same units as usage), shared by every pod, as for a Deployment; list
      restartable init containers (sidecars) as containers too.  ``pod_requests`` optionally
      overrides it for individual pods (pod -> container -> resource), e.g. during a rollout or an
      in-place resize.  Pod-level requests (PodLevelResources) are not modelled.
    * ``series``: named custom/external series -> pod name (``None`` for a per-workload or
      per-object value) -> value in base units.  ``Pods`` metrics read the pod-keyed values of the
      series named by ``metric.name``; ``Object`` metrics read the ``None`` entry (or the entry keyed
      by ``describedObject.name``); ``External`` metrics sum every entry.  Label selectors in the
      specs are not evaluated: the stream assembles each named series already selected.
    * ``sample_ts``: when each pod's resource sample was taken (default: ``now``), and
      ``sample_window``: the window of those samples (metrics-server's ``window``, default 15 s);
      both feed the CPU readiness rule (reference 1.3 step 4).
    """

    pod_usage: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    container_requests: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    pod_requests: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    series: Mapping[str, Mapping[str | None, float]] = field(default_factory=dict)
    sample_ts: Mapping[str, float] | None = None
    sample_window: float = 15.0


@dataclass
class HpaState:
    """Per-HPA memory that must survive between ticks (reference 5).

    The controller keeps these in memory only; tandem keeps them in a table, so they are plain lists
    of ``(replicas, event time)`` and ``(absolute replica change, event time)`` pairs.  Their size is
    bounded: a new entry overwrites an outdated one when there is one.
    """

    recommendations: list[tuple[int, float]] = field(default_factory=list)
    scale_up_events: list[tuple[int, float]] = field(default_factory=list)
    scale_down_events: list[tuple[int, float]] = field(default_factory=list)

    def copy(self) -> HpaState:
        return HpaState(list(self.recommendations), list(self.scale_up_events), list(self.scale_down_events))

    def to_dict(self) -> dict[str, Any]:
        return {
            "recommendations": [[r, t] for r, t in self.recommendations],
            "scale_up_events": [[c, t] for c, t in self.scale_up_events],
            "scale_down_events": [[c, t] for c, t in self.scale_down_events],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HpaState:
        if not isinstance(d, Mapping):
            raise ValueError("hpa state: must be a mapping")
        lists: list[list[tuple[int, float]]] = []
        for name in ("recommendations", "scale_up_events", "scale_down_events"):
            raw = d.get(name, [])
            if not isinstance(raw, list | tuple):
                raise ValueError(f"hpa state.{name}: must be a list")
            out: list[tuple[int, float]] = []
            for i, item in enumerate(raw):
                if (
                    not isinstance(item, list | tuple)
                    or len(item) != 2
                    or isinstance(item[0], bool)
                    or not isinstance(item[0], int)
                    or isinstance(item[1], bool)
                    or not isinstance(item[1], int | float)
                ):
                    raise ValueError(f"hpa state.{name}[{i}]: must be [int, time]")
                out.append((item[0], float(item[1])))
            lists.append(out)
        return cls(lists[0], lists[1], lists[2])


@dataclass(frozen=True)
class HpaResult:
    """The outcome of one reconcile.

    ``conditions`` are the HPA status conditions this reconcile sets (``type``, ``status``,
    ``reason``, ``message``), as the controller would leave them after a successful rescale.
    ``per_metric`` has one ``(description, proposal)`` per metric spec, where the proposal is the
    replica count or, for an invalid metric, the error message.  ``current_metrics`` has the
    ``status.currentMetrics`` shape.  ``metric_replicas`` is the largest valid proposal before
    normalization and ``stabilized_replicas`` the value after stabilization (both ``None`` when the
    reconcile did not get that far); ``reason`` is the controller's rescale reason.
    """

    desired_replicas: int
    conditions: list[dict[str, str]]
    per_metric: list[tuple[str, int | str]]
    current_metrics: list[dict[str, Any]] = field(default_factory=list)
    metric_replicas: int | None = None
    stabilized_replicas: int | None = None
    reason: str = ""

    def condition(self, type_: str) -> dict[str, str] | None:
        """The condition of ``type_``, if this reconcile set it."""
        for c in self.conditions:
            if c["type"] == type_:
                return c
        return None


# --------------------------------------------------------------------------------------------------
# Numbers: Go integer semantics and quantities
# --------------------------------------------------------------------------------------------------


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero; Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _wrap_int64(v: int) -> int:
    """Two's-complement int64 wrap-around, as Go's ``+`` overflows."""
    return (v + 2**63) % 2**64 - 2**63


def _ceil_int32(x: float) -> int:
    """``int32(math.Ceil(x))`` guarded the way the current controller guards it (capped at int32)."""
    if math.isnan(x):
        return 0
    if x > _MAX_INT32:
        return _MAX_INT32
    if x < _MIN_INT32:
        return _MIN_INT32
    return math.ceil(x)


def _milli_of_number(value: object, scale: int) -> int:
    """Milli-units of a sample: ``scale`` is 1 for millicores and 1000 for base units.

    Fractions round up, as ``Quantity.MilliValue()`` does; floats go through their shortest decimal
    form so that ``0.1`` is 100 milli-units, not 101.
    """
    if isinstance(value, bool):
        raise ValueError("a metric value must be a number")
    if isinstance(value, int):
        return value * scale
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"metric value {value!r} is not finite")
        return int((Decimal(repr(value)) * scale).to_integral_value(rounding=ROUND_CEILING))
    if isinstance(value, str):
        milli = parse_quantity(value)
        return milli if scale == 1000 else -(-milli // 1000)
    raise ValueError(f"a metric value must be a number, got {type(value).__name__}")


def format_milli_quantity(milli: int) -> str:
    """``resource.NewMilliQuantity(milli, DecimalSI).String()``: the canonical DecimalSI form.

    ``20666`` -> ``"20666m"``, ``20000`` -> ``"20"``, ``2_000_000`` -> ``"2k"``.
    """
    if milli % 1000 != 0:
        return f"{milli}m"
    n = milli // 1000
    if n == 0:
        return "0"
    exp = 0
    while n % 1000 == 0 and exp < 18:
        n //= 1000
        exp += 3
    return f"{n}{_DECIMAL_SUFFIX[exp]}"


_DECIMAL_SUFFIX = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def _quantity_float(value: object) -> float:
    """A quantity as the nearest float (``Quantity.AsApproximateFloat64``), for tolerances.

    Not :func:`parse_quantity`: a tolerance such as ``"0.0005"`` is finer than a milli-unit.
    """
    if isinstance(value, bool):
        raise ValueError("must be a quantity")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not finite")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"must be a quantity, got {type(value).__name__}")
    number = parse_decimal(value)
    return float(number)


# --------------------------------------------------------------------------------------------------
# Metric specs (autoscaling/v2, and v2beta1 converted)
# --------------------------------------------------------------------------------------------------

_SOURCE_FIELD = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


@dataclass(frozen=True)
class MetricSpec:
    """One autoscaling/v2 ``MetricSpec``, validated, with target quantities in milli-units.

    Several target fields may be set at once (v2beta1 conversion sets both ``value`` and
    ``averageValue`` for Object metrics); which one wins is the controller's choice, reproduced in
    :func:`recommend`.  A spec whose ``type`` is unknown is kept (``known`` false): the controller
    reports it as an invalid metric (``InvalidMetricSourceType``) rather than failing the HPA.
    """

    index: int
    type: str
    name: str = ""
    container: str = ""
    target_type: str = ""
    average_utilization: int | None = None
    value: int | None = None
    average_value: int | None = None
    selector: Any = None
    described_object: Mapping[str, Any] | None = None
    known: bool = True

    @property
    def description(self) -> str:
        """The controller's name for the metric (``metricNameProposal`` in ``horizontal.go``)."""
        if not self.known:
            return f"unknown metric source type {self.type!r}"
        if self.type in ("Resource", "ContainerResource"):
            if self.average_value is not None:
                return f"{self.name} resource"
            kind = "container resource" if self.type == "ContainerResource" else "resource"
            return f"{self.name} {kind} utilization (percentage of request)"
        if self.type == "Pods":
            return f"pods metric {self.name}"
        if self.type == "Object":
            kind = (self.described_object or {}).get("kind", "Object")
            return f"{kind} metric {self.name}"
        return f"external metric {self.name}({_selector_text(self.selector)})"


def _selector_text(selector: Any) -> str:
    if selector is None:
        return "<nil>"
    return json.dumps(selector, sort_keys=True, separators=(",", ":"), default=str)


def parse_metrics(spec_metrics: Sequence[Mapping[str, Any]] | None, *, path: str = "metrics") -> list[MetricSpec]:
    """Validate and normalize HPA metric specs; raise ``ValueError`` naming the field path.

    autoscaling/v2beta1 shapes (``targetAverageUtilization``, ``targetAverageValue``,
    ``metricName``, ``targetValue``...) are converted as the API server's conversion does.  An empty
    or missing list gets the API default: one CPU ``Utilization`` metric at 80 % (reference 1.7).
    """
    if spec_metrics is None or (isinstance(spec_metrics, Sequence) and len(spec_metrics) == 0):
        return [MetricSpec(0, "Resource", name="cpu", target_type="Utilization", average_utilization=80)]
    if isinstance(spec_metrics, str | bytes) or not isinstance(spec_metrics, Sequence):
        raise ValueError(f"{path}: must be a list of metric specs")
    return [_parse_metric(i, m, f"{path}[{i}]") for i, m in enumerate(spec_metrics)]


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: must be a mapping")
    return value


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: must be a non-empty string")
    return value


def _positive_quantity(value: Any, where: str) -> int:
    try:
        milli = parse_quantity(value)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if milli <= 0:
        raise ValueError(f"{where}: must be positive")
    return milli


def _parse_metric(index: int, raw: Any, where: str) -> MetricSpec:
    spec = _mapping(raw, where)
    type_ = spec.get("type")
    if not isinstance(type_, str) or not type_:
        raise ValueError(f"{where}.type: must be a non-empty string")
    if type_ not in _SOURCE_FIELD:
        # HPA: horizontal.go computeReplicasForMetric, unknown type -> InvalidMetricSourceType
        # (an invalid metric, not a broken HPA; reference 1.10 multi_metric_one_invalid_blocks_scale_down).
        return MetricSpec(index, type_, known=False)
    fname = _SOURCE_FIELD[type_]
    src = _mapping(spec.get(fname), f"{where}.{fname}")
    loc = f"{where}.{fname}"
    # v2beta1 names its fields differently; its Object source also has a ``target`` (the object).
    if "target" not in src or any(k in src for k in _V2BETA1_KEYS):
        return _parse_v2beta1(index, type_, src, loc)
    return _parse_v2(index, type_, src, loc)


_V2BETA1_KEYS = ("metricName", "targetAverageUtilization", "targetAverageValue", "targetValue")


def _parse_target(target: Mapping[str, Any], loc: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    ttype = target.get("type")
    if ttype not in allowed:
        if not isinstance(ttype, str) or not ttype:
            raise ValueError(f"{loc}.type: must be one of {', '.join(allowed)}")
        raise ValueError(f"{loc}.type: unknown {ttype!r} (expected {' or '.join(allowed)})")
    out: dict[str, Any] = {"target_type": ttype}
    if target.get("averageUtilization") is not None:
        util = target["averageUtilization"]
        if isinstance(util, bool) or not isinstance(util, int) or util < 1:
            raise ValueError(f"{loc}.averageUtilization: must be an integer >= 1")
        out["average_utilization"] = util
    if target.get("averageValue") is not None:
        out["average_value"] = _positive_quantity(target["averageValue"], f"{loc}.averageValue")
    if target.get("value") is not None:
        out["value"] = _positive_quantity(target["value"], f"{loc}.value")
    required = {"Utilization": "averageUtilization", "AverageValue": "averageValue", "Value": "value"}[ttype]
    if target.get(required) is None:
        raise ValueError(f"{loc}.{required}: required for target type {ttype}")
    return out


def _metric_identifier(src: Mapping[str, Any], loc: str) -> tuple[str, Any]:
    metric = _mapping(src.get("metric"), f"{loc}.metric")
    return _name(metric.get("name"), f"{loc}.metric.name"), metric.get("selector")


def _parse_v2(index: int, type_: str, src: Mapping[str, Any], loc: str) -> MetricSpec:
    target = _mapping(src.get("target"), f"{loc}.target")
    tloc = f"{loc}.target"
    if type_ in ("Resource", "ContainerResource"):
        name = _name(src.get("name"), f"{loc}.name")
        container = _name(src.get("container"), f"{loc}.container") if type_ == "ContainerResource" else ""
        t = _parse_target(target, tloc, ("Utilization", "AverageValue"))
        return MetricSpec(index, type_, name=name, container=container, **t)
    if type_ == "Pods":
        name, selector = _metric_identifier(src, loc)
        t = _parse_target(target, tloc, ("AverageValue",))
        return MetricSpec(index, type_, name=name, selector=selector, **t)
    if type_ == "Object":
        described = _mapping(src.get("describedObject"), f"{loc}.describedObject")
        _name(described.get("kind"), f"{loc}.describedObject.kind")
        _name(described.get("name"), f"{loc}.describedObject.name")
        name, selector = _metric_identifier(src, loc)
        t = _parse_target(target, tloc, ("Value", "AverageValue"))
        return MetricSpec(index, type_, name=name, selector=selector, described_object=dict(described), **t)
    name, selector = _metric_identifier(src, loc)
    t = _parse_target(target, tloc, ("Value", "AverageValue"))
    return MetricSpec(index, type_, name=name, selector=selector, **t)


def _parse_v2beta1(index: int, type_: str, src: Mapping[str, Any], loc: str) -> MetricSpec:
    """Convert a v2beta1 source as ``Convert_v2beta1_*MetricSource_To_autoscaling_*`` does."""
    if type_ in ("Resource", "ContainerResource"):
        name = _name(src.get("name"), f"{loc}.name")
        container = _name(src.get("container"), f"{loc}.container") if type_ == "ContainerResource" else ""
        util = src.get("targetAverageUtilization")
        avg = src.get("targetAverageValue")
        if util is None and avg is None:
            raise ValueError(
                f"{loc}.targetAverageUtilization: one of targetAverageUtilization or targetAverageValue is required"
            )
        if util is not None and (isinstance(util, bool) or not isinstance(util, int) or util < 1):
            raise ValueError(f"{loc}.targetAverageUtilization: must be an integer >= 1")
        average_value = _positive_quantity(avg, f"{loc}.targetAverageValue") if avg is not None else None
        return MetricSpec(
            index,
            type_,
            name=name,
            container=container,
            target_type="Utilization" if util is not None else "AverageValue",
            average_utilization=util,
            average_value=average_value,
        )
    if type_ == "Pods":
        name = _name(src.get("metricName"), f"{loc}.metricName")
        avg_raw = src.get("targetAverageValue")
        if avg_raw is None:
            raise ValueError(f"{loc}.targetAverageValue: required")
        return MetricSpec(
            index,
            type_,
            name=name,
            selector=src.get("selector"),
            target_type="AverageValue",
            average_value=_positive_quantity(avg_raw, f"{loc}.targetAverageValue"),
        )
    if type_ == "Object":
        described = _mapping(src.get("target"), f"{loc}.target")
        _name(described.get("kind"), f"{loc}.target.kind")
        _name(described.get("name"), f"{loc}.target.name")
        name = _name(src.get("metricName"), f"{loc}.metricName")
        if src.get("targetValue") is None:
            raise ValueError(f"{loc}.targetValue: required")
        value = _positive_quantity(src["targetValue"], f"{loc}.targetValue")
        avg_raw = src.get("averageValue")
        avg_val = _positive_quantity(avg_raw, f"{loc}.averageValue") if avg_raw is not None else None
        return MetricSpec(
            index,
            type_,
            name=name,
            selector=src.get("selector"),
            described_object=dict(described),
            target_type="AverageValue" if avg_val is not None else "Value",
            value=value,
            average_value=avg_val,
        )
    name = _name(src.get("metricName"), f"{loc}.metricName")
    tv, tav = src.get("targetValue"), src.get("targetAverageValue")
    if tv is None and tav is None:
        raise ValueError(f"{loc}.targetValue: one of targetValue or targetAverageValue is required")
    return MetricSpec(
        index,
        type_,
        name=name,
        selector=src.get("metricSelector"),
        target_type="Value" if tv is not None else "AverageValue",
        value=_positive_quantity(tv, f"{loc}.targetValue") if tv is not None else None,
        average_value=_positive_quantity(tav, f"{loc}.targetAverageValue") if tav is not None else None,
    )


# --------------------------------------------------------------------------------------------------
# Behavior (reference 1.7) and tolerances (reference 1.4)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingPolicy:
    """One ``HPAScalingPolicy``: ``type`` ``Pods`` or ``Percent``, ``value`` per ``period_seconds``."""

    type: str
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """``HPAScalingRules`` after API defaulting.

    ``stabilization_window_seconds`` stays ``None`` for a scale-down direction that did not set it:
    the *controller* fills it from ``--horizontal-pod-autoscaler-downscale-stabilization``.
    """

    stabilization_window_seconds: int | None
    select_policy: str
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None

    @property
    def longest_period(self) -> int:
        # HPA: horizontal.go getLongestPolicyPeriod
        return max((p.period_seconds for p in self.policies), default=0)


@dataclass(frozen=True)
class Behavior:
    """``spec.behavior`` with API defaults filled in (only ever built when behavior is present)."""

    scale_up: ScalingRules
    scale_down: ScalingRules


# HPA: pkg/apis/autoscaling/v2/defaults.go GenerateHPAScaleUpRules / GenerateHPAScaleDownRules (reference 1.7).
DEFAULT_SCALE_UP_RULES = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN_RULES = ScalingRules(None, "Max", (ScalingPolicy("Percent", 100, 15),))


def parse_behavior(behavior: Mapping[str, Any] | None, *, path: str = "behavior") -> Behavior | None:
    """Validate ``spec.behavior`` and apply the API defaults; ``None`` stays ``None``.

    Defaults only exist when behavior is present: an HPA without behavior takes the legacy path
    (reference 1.8), which has no rate policies at all.  Validation follows the API server's limits
    (stabilization 0-3600 s, period 1-1800 s, value > 0, at least one policy, tolerance >= 0).
    """
    if behavior is None:
        return None
    b = _mapping(behavior, path)
    up = _parse_rules(b.get("scaleUp"), f"{path}.scaleUp", DEFAULT_SCALE_UP_RULES)
    down = _parse_rules(b.get("scaleDown"), f"{path}.scaleDown", DEFAULT_SCALE_DOWN_RULES)
    return Behavior(up, down)


def _int_field(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{where}: must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def _parse_rules(raw: Any, where: str, default: ScalingRules) -> ScalingRules:
    # HPA: defaults.go copyHPAScalingRules -- every field the user set replaces the default's.
    if raw is None:
        return default
    r = _mapping(raw, where)
    window = default.stabilization_window_seconds
    if r.get("stabilizationWindowSeconds") is not None:
        window = _int_field(r["stabilizationWindowSeconds"], f"{where}.stabilizationWindowSeconds", 0, 3600)
    select = default.select_policy
    if r.get("selectPolicy") is not None:
        select = r["selectPolicy"]
        if select not in ("Max", "Min", "Disabled"):
            raise ValueError(f"{where}.selectPolicy: unknown {select!r} (expected Max, Min or Disabled)")
    policies = default.policies
    if r.get("policies") is not None:
        raw_policies = r["policies"]
        if isinstance(raw_policies, str | bytes) or not isinstance(raw_policies, Sequence):
            raise ValueError(f"{where}.policies: must be a list")
        if not raw_policies:
            raise ValueError(f"{where}.policies: must specify at least one Policy")
        parsed: list[ScalingPolicy] = []
        for i, p in enumerate(raw_policies):
            ploc = f"{where}.policies[{i}]"
            pm = _mapping(p, ploc)
            ptype = pm.get("type")
            if ptype not in ("Pods", "Percent"):
                raise ValueError(f"{ploc}.type: unknown {ptype!r} (expected Pods or Percent)")
            value = _int_field(pm.get("value"), f"{ploc}.value", 1, _MAX_INT32)
            period = _int_field(pm.get("periodSeconds"), f"{ploc}.periodSeconds", 1, 1800)
            parsed.append(ScalingPolicy(ptype, value, period))
        policies = tuple(parsed)
    tolerance = default.tolerance
    if r.get("tolerance") is not None:
        try:
            tolerance = _quantity_float(r["tolerance"])
        except ValueError as exc:
            raise ValueError(f"{where}.tolerance: {exc}") from None
        if tolerance < 0:
            raise ValueError(f"{where}.tolerance: must be >= 0")
    return ScalingRules(window, select, policies, tolerance)


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


# --------------------------------------------------------------------------------------------------
# Per-metric proposals (reference 1.2, 1.3, 1.5)
# --------------------------------------------------------------------------------------------------


class _MetricError(Exception):
    """A metric that cannot produce a proposal this tick (the controller's invalid metric)."""


@dataclass(frozen=True)
class _Ctx:
    pods: Sequence[PodInfo]
    inputs: MetricInputs
    now: float
    cfg: HpaConfig
    tolerances: Tolerances
    spec_replicas: int
    status_replicas: int


@dataclass(frozen=True)
class _Groups:
    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def _group_pods(ctx: _Ctx, metrics: Mapping[str, int], resource: str) -> _Groups:
    """Classify pods as the controller's ``groupPods`` does (reference 1.3)."""
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
    return _Groups(ready_count, frozenset(unready), frozenset(missing), frozenset(ignored))


def _resource_scale(resource: str) -> int:
    # CPU arrives in millicores (already milli-units); everything else in base units.
    return 1 if resource == "cpu" else 1000


def _resource_pod_metrics(ctx: _Ctx, resource: str, container: str) -> dict[str, int]:
    """Per-pod usage in milli-units (``GetResourceMetric``: ``getPodMetrics`` / ``getContainerMetrics``)."""
    usage = ctx.inputs.pod_usage
    if not usage:
        raise _MetricError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    scale = _resource_scale(resource)
    out: dict[str, int] = {}
    for pod, containers in usage.items():
        if container:
            if container not in containers:
                raise _MetricError(
                    f"unable to get metrics for resource {resource}: failed to get container metrics: "
                    f"container {container} not present in metrics for pod {pod}"
                )
            res = containers[container]
            if resource in res:
                out[pod] = _milli_of_number(res[resource], scale)
            continue
        # A pod without containers, or with a container lacking the resource, has no metric.
        if not containers:
            continue
        total = 0
        complete = True
        for res in containers.values():
            if resource not in res:
                complete = False
                break
            total += _milli_of_number(res[resource], scale)
        if complete:
            out[pod] = total
    return out


def _pod_requests(ctx: _Ctx, resource: str, container: str) -> dict[str, int]:
    """Per-pod requests in milli-units (``calculateRequests``), for every listed pod.

    A missing request is an error even on an ignored pod, as upstream computes requests over the
    whole pod list.
    """
    scale = _resource_scale(resource)
    out: dict[str, int] = {}
    for pod in ctx.pods:
        containers = ctx.inputs.pod_requests.get(pod.name, ctx.inputs.container_requests)
        if container:
            if container not in containers:
                raise _MetricError(f"container {container} not found in Pod {pod.name}")
            if resource not in containers[container]:
                raise _MetricError(f"missing request for {resource} in container {container} of Pod {pod.name}")
            out[pod.name] = _milli_of_number(containers[container][resource], scale)
            continue
        total = 0
        for cname, res in containers.items():
            if resource not in res:
                raise _MetricError(f"missing request for {resource} in container {cname} of Pod {pod.name}")
            total += _milli_of_number(res[resource], scale)
        out[pod.name] = total
    return out


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
    if requests_total == 0:
        raise _MetricError("no metrics returned matched known pods")
    percentage = _go_div(metrics_total * 100, requests_total)
    if not _MIN_INT32 <= percentage <= _MAX_INT32:
        raise _MetricError(f"resource utilization {percentage} is outside the int32 range")
    return float(percentage) / float(target), percentage, _go_div(metrics_total, entries)


def _usage_ratio(metrics: Mapping[str, int], target: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: (ratio, int64 average milli-value, truncated)."""
    usage = _go_div(sum(metrics.values()), len(metrics))
    return float(usage) / float(target), usage


def _no_pods() -> _MetricError:
    return _MetricError("no pods returned by selector while calculating replica count")


def _resource_utilization_replicas(ctx: _Ctx, spec: MetricSpec) -> tuple[int, int, int]:
    """``GetResourceReplicas`` (reference 1.2 Utilization, 1.5): (replicas, utilization %, raw)."""
    assert spec.average_utilization is not None
    target = spec.average_utilization
    current = ctx.spec_replicas
    tol = ctx.tolerances
    metrics = _resource_pod_metrics(ctx, spec.name, spec.container)
    if not ctx.pods:
        raise _no_pods()
    groups = _group_pods(ctx, metrics, spec.name)
    for pod in groups.ignored | groups.unready:
        metrics.pop(pod, None)
    if not metrics:
        raise _MetricError("did not receive metrics for targeted pods (pods might be unready)")
    requests = _pod_requests(ctx, spec.name, spec.container)
    ratio, utilization, raw = _utilization_ratio(metrics, requests, target)

    # Reference 1.5 step 1-2: nothing to fill in -> tolerance, else ceil(r x ready pods).
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tol.is_within(ratio):
            return current, utilization, raw
        return _ceil_int32(ratio * float(groups.ready_count)), utilization, raw

    # Step 3: assume values for missing (and, on a scale-up, unready) pods.
    if groups.missing:
        if ratio < 1.0:
            # Scale-down: missing pods at max(100, target) % of their request (current upstream).
            fallback = max(100, target)
            for pod in groups.missing:
                metrics[pod] = _go_div(requests[pod] * fallback, 100)
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
    new_replicas = _ceil_int32(new_ratio * float(len(metrics)))
    if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
        return current, utilization, raw
    return new_replicas, utilization, raw


def _plain_replicas(ctx: _Ctx, metrics: dict[str, int], target: int, resource: str) -> tuple[int, int]:
    """``calcPlainMetricReplicas`` (Resource AverageValue and Pods metrics): (replicas, average)."""
    current = ctx.spec_replicas
    tol = ctx.tolerances
    if not ctx.pods:
        raise _no_pods()
    groups = _group_pods(ctx, metrics, resource)
    for pod in groups.ignored | groups.unready:
        metrics.pop(pod, None)
    if not metrics:
        raise _MetricError("did not receive metrics for targeted pods (pods might be unready)")
    ratio, usage = _usage_ratio(metrics, target)

    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tol.is_within(ratio):
            return current, usage
        return _ceil_int32(ratio * float(groups.ready_count)), usage

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
    new_replicas = _ceil_int32(new_ratio * float(len(metrics)))
    # The current code applies the final n-vs-current check in the Pods path too (reference 1.5).
    if (new_ratio < 1.0 and new_replicas > current) or (new_ratio > 1.0 and new_replicas < current):
        return current, usage
    return new_replicas, usage


def _ready_running_pods(ctx: _Ctx) -> int:
    # HPA: replica_calculator.go getReadyPodsCount -- phase Running and Ready=True.
    if not ctx.pods:
        raise _MetricError(f"unable to calculate ready pods: {_no_pods()}")
    return sum(1 for p in ctx.pods if p.phase == "Running" and p.ready)


def _usage_ratio_replica_count(ctx: _Ctx, ratio: float) -> int:
    """``getUsageRatioReplicaCount`` for Object/External ``Value`` targets (reference 1.2)."""
    current = ctx.spec_replicas
    if current != 0:
        if ctx.tolerances.is_within(ratio):
            return current
        return _ceil_int32(ratio * float(_ready_running_pods(ctx)))
    # Scale-to-zero (HPAScaleToZero): ceil(ratio), no tolerance.
    return _ceil_int32(ratio)


def _series(ctx: _Ctx, name: str, api: str) -> Mapping[str | None, float]:
    values = ctx.inputs.series.get(name)
    if not values:
        raise _MetricError(f"unable to get metric {name}: no metrics returned from {api} API")
    return values


def _object_value(ctx: _Ctx, spec: MetricSpec) -> int:
    values = _series(ctx, spec.name, "custom metrics")
    obj_name = (spec.described_object or {}).get("name")
    if None in values:
        raw = values[None]
    elif isinstance(obj_name, str) and obj_name in values:
        raw = values[obj_name]
    else:
        raise _MetricError(f"unable to get metric {spec.name}: no value for the described object")
    return _milli_of_number(raw, 1000)


def _per_pod_ratio(ctx: _Ctx, usage: int, target_per_pod: int) -> tuple[int, int]:
    """Object/External ``AverageValue``: ratio against ``status.replicas`` (reference 1.2)."""
    status = ctx.status_replicas
    replicas = status
    denominator = float(target_per_pod) * float(status)
    if denominator != 0:
        ratio = float(usage) / denominator
    else:
        ratio = math.inf if usage > 0 else (-math.inf if usage < 0 else math.nan)
    if not ctx.tolerances.is_within(ratio):
        replicas = _ceil_int32(float(usage) / float(target_per_pod))
    if status == 0:
        # Go would convert +Inf/NaN to an undefined int64 here; report the total instead.
        average = usage
    elif float(usage) >= float(_MAX_INT64):
        average = _MAX_INT64
    else:
        average = math.ceil(float(usage) / float(status))
    return replicas, average


@dataclass(frozen=True)
class _Proposal:
    replicas: int
    status: dict[str, Any]


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


def _compute_metric(ctx: _Ctx, spec: MetricSpec) -> _Proposal:
    """One metric's proposal (``computeReplicasForMetric``), raising ``_MetricError`` if invalid."""
    if spec.type in ("Resource", "ContainerResource"):
        field_name = "resource" if spec.type == "Resource" else "containerResource"
        head: dict[str, Any] = {"name": spec.name}
        if spec.container:
            head["container"] = spec.container
        # HPA: computeStatusForResourceMetricGeneric -- an averageValue target wins over utilization.
        if spec.average_value is not None:
            metrics = _resource_pod_metrics(ctx, spec.name, spec.container)
            replicas, usage = _plain_replicas(ctx, metrics, spec.average_value, spec.name)
            current = _current(averageValue=usage)
        else:
            replicas, utilization, raw = _resource_utilization_replicas(ctx, spec)
            current = _current(averageUtilization=utilization, averageValue=raw)
        return _Proposal(replicas, {"type": spec.type, field_name: {**head, "current": current}})
    if spec.type == "Pods":
        assert spec.average_value is not None
        values = _series(ctx, spec.name, "custom metrics")
        # Per-workload (None-keyed) samples are not pod metrics; unknown pods stay, as upstream.
        metrics = {pod: _milli_of_number(v, 1000) for pod, v in values.items() if pod is not None}
        if not metrics:
            raise _MetricError(f"unable to get metric {spec.name}: no metrics returned from custom metrics API")
        replicas, usage = _plain_replicas(ctx, metrics, spec.average_value, "")
        status = {"metric": _metric_id(spec), "current": _current(averageValue=usage)}
        return _Proposal(replicas, {"type": "Pods", "pods": status})
    if spec.type == "Object":
        value = _object_value(ctx, spec)
        described = dict(spec.described_object or {})
        # HPA: computeStatusForObjectMetric -- Value if type Value and set, else AverageValue.
        if spec.target_type == "Value" and spec.value is not None:
            replicas = _usage_ratio_replica_count(ctx, float(value) / float(spec.value))
            current = _current(value=value)
        elif spec.target_type == "AverageValue" and spec.average_value is not None:
            replicas, average = _per_pod_ratio(ctx, value, spec.average_value)
            current = _current(averageValue=average)
        else:  # pragma: no cover - parse_metrics guarantees the field of the declared type
            raise _MetricError(
                "invalid object metric source: neither a value target nor an average value target was set"
            )
        status = {"describedObject": described, "metric": _metric_id(spec), "current": current}
        return _Proposal(replicas, {"type": "Object", "object": status})
    # External: HPA computeStatusForExternalMetric -- an averageValue target wins over value.
    values = _series(ctx, spec.name, "external metrics")
    samples = [_milli_of_number(v, 1000) for v in values.values()]
    if spec.average_value is not None:
        usage = 0
        for v in samples:
            # GetExternalPerPodMetricReplicas: int64 sum, a negative total taken as overflow.
            usage = _wrap_int64(usage + v)
            if usage < 0:
                usage = _MAX_INT64
                break
        replicas, average = _per_pod_ratio(ctx, usage, spec.average_value)
        current = _current(averageValue=average)
    else:
        assert spec.value is not None
        usage = 0
        for v in samples:
            # GetExternalMetricReplicas: sum capped at MaxInt64 on positive overflow.
            if v > 0 and usage > _MAX_INT64 - v:
                usage = _MAX_INT64
                break
            usage = _wrap_int64(usage + v)
        replicas = _usage_ratio_replica_count(ctx, float(usage) / float(spec.value))
        current = _current(value=usage)
    return _Proposal(replicas, {"type": "External", "external": {"metric": _metric_id(spec), "current": current}})


_FAILED_REASON = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


# --------------------------------------------------------------------------------------------------
# Normalization: legacy (reference 1.8) and behavior (reference 1.9)
# --------------------------------------------------------------------------------------------------


def stabilize_legacy(
    history: Sequence[tuple[int, float]], proposal: int, now: float, window: float
) -> tuple[int, list[tuple[int, float]]]:
    """Legacy stabilization (``stabilizeRecommendation``, reference 1.8 step 1).

    Returns the maximum of ``proposal`` and the recommendations younger than ``window`` (so
    scale-downs wait, scale-ups do not), and the new history: the raw proposal overwrites the last
    entry older than the window, or is appended.  An entry aged exactly ``window`` is neither
    counted nor reused ("age < period", reference 5).
    """
    cutoff = now - window
    stabilized = proposal
    old_index: int | None = None
    for i, (rec, ts) in enumerate(history):
        if ts < cutoff:
            old_index = i
        elif ts > cutoff and rec > stabilized:
            stabilized = rec
    new_history = list(history)
    if old_index is not None:
        new_history[old_index] = (proposal, now)
    else:
        new_history.append((proposal, now))
    return stabilized, new_history


def limit_legacy(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithRules`` (reference 1.8 step 2): (replicas, reason, message).

    The scale-up limit ``max(2 x current, 4)`` re-applies every sync: without behavior there is no
    scale-event memory.
    """
    scale_up_limit = int(max(_SCALE_UP_LIMIT_FACTOR * float(current), _SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > scale_up_limit:
        upper = scale_up_limit
        reason, message = "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
    else:
        upper = max_replicas
        reason, message = "TooManyReplicas", "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > upper:
        return upper, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def stabilize_with_behavior(
    history: Sequence[tuple[int, float]],
    current: int,
    proposal: int,
    now: float,
    up_window: float,
    down_window: float,
) -> tuple[int, str, str, list[tuple[int, float]]]:
    """``stabilizeRecommendationWithBehaviors`` (reference 1.9.1).

    Scale up only to the lowest proposal of the up-window, down only to the highest of the
    down-window, never against the direction of ``proposal``.  The raw proposal is stored over the
    last entry older than *both* windows, or appended.  Returns (stabilized, reason, message,
    new history); the reason is what ``AbleToScale`` shows when stabilization changed the value.
    """
    up_cutoff = now - up_window
    down_cutoff = now - down_window
    up_rec = proposal
    down_rec = proposal
    old_index: int | None = None
    for i, (rec, ts) in enumerate(history):
        if ts > up_cutoff:
            up_rec = min(rec, up_rec)
        if ts > down_cutoff:
            down_rec = max(rec, down_rec)
        if ts < up_cutoff and ts < down_cutoff:
            old_index = i
    result = current
    if result < up_rec:
        result = up_rec
    if result > down_rec:
        result = down_rec
    new_history = list(history)
    if old_index is not None:
        new_history[old_index] = (proposal, now)
    else:
        new_history.append((proposal, now))
    if proposal >= current:
        reason = "ScaleUpStabilized"
        message = "recent recommendations were lower than current one, applying the lowest recent recommendation"
    else:
        reason = "ScaleDownStabilized"
        message = "recent recommendations were higher than current one, applying the highest recent recommendation"
    return result, reason, message, new_history


def replicas_changed_in_period(events: Sequence[tuple[int, float]], period: float, now: float) -> int:
    """``getReplicasChangePerPeriod``: sum of the changes younger than ``period`` (age < period)."""
    cutoff = now - period
    return sum(change for change, ts in events if ts > cutoff)


def _replicas_at_period_start(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], period: float, now: float
) -> int:
    """Replicas before the changes of the last ``period``: both limits measure a policy from there."""
    return current - replicas_changed_in_period(up, period, now) + replicas_changed_in_period(down, period, now)


def _scale_up_limit(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], rules: ScalingRules, now: float
) -> int:
    # HPA: horizontal.go calculateScaleUpLimitWithScalingRules (reference 1.9.2).
    if rules.select_policy == "Disabled":
        return current
    pick_min = rules.select_policy == "Min"
    result = _MAX_INT32 if pick_min else _MIN_INT32
    for policy in rules.policies:
        period_start = _replicas_at_period_start(current, up, down, policy.period_seconds, now)
        if policy.type == "Pods":
            proposed = period_start + policy.value
        else:
            # Rounded up so that a small percentage still adds a pod.
            proposed = math.ceil(float(period_start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def _scale_down_limit(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], rules: ScalingRules, now: float
) -> int:
    # HPA: horizontal.go calculateScaleDownLimitWithBehaviors (reference 1.9.2): "Max" selects the
    # biggest change, i.e. the smallest replica count.
    if rules.select_policy == "Disabled":
        return current
    pick_min_change = rules.select_policy == "Min"
    result = _MIN_INT32 if pick_min_change else _MAX_INT32
    for policy in rules.policies:
        period_start = _replicas_at_period_start(current, up, down, policy.period_seconds, now)
        if policy.type == "Pods":
            proposed = period_start - policy.value
        else:
            # int32(float64 x (1 - v/100)): truncation toward zero.
            proposed = int(float(period_start) * (1 - float(policy.value) / 100))
        result = max(result, proposed) if pick_min_change else min(result, proposed)
    return result


def limit_with_behavior(
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    scale_up_events: Sequence[tuple[int, float]],
    scale_down_events: Sequence[tuple[int, float]],
    behavior: Behavior,
    now: float,
) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithBehaviorRate`` (reference 1.9.2): (replicas, reason, message).

    ``desired`` is the stabilized value.  The scale-up branch never looks at ``min_replicas`` and
    the scale-down branch never at ``max_replicas``, as upstream.
    """
    if desired > current:
        limit = _scale_up_limit(current, scale_up_events, scale_down_events, behavior.scale_up, now)
        if limit < current:
            limit = current
        if max_replicas > limit:
            upper = limit
            reason, message = (
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            upper = max_replicas
            reason, message = "TooManyReplicas", "the desired replica count is more than the maximum replica count"
        if desired > upper:
            return upper, reason, message
    elif desired < current:
        limit = _scale_down_limit(current, scale_up_events, scale_down_events, behavior.scale_down, now)
        if limit > current:
            limit = current
        if min_replicas < limit:
            lower = limit
            reason, message = (
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            lower = min_replicas
            reason, message = "TooFewReplicas", "the desired replica count is less than the minimum replica count"
        if desired < lower:
            return lower, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def store_scale_event(
    events: Sequence[tuple[int, float]], change: int, now: float, longest_period: float
) -> list[tuple[int, float]]:
    """``storeScaleEvent`` for one direction (reference 1.9.4).

    Events older than the direction's longest policy period are outdated; the new ``(|change|,
    now)`` overwrites the last outdated one, or is appended.  (Upstream keeps a sticky "outdated"
    flag set at each store; recomputing it from the timestamps is the same unless the HPA's longest
    period grows between two stores, and then only changes which dead slot is reused.)
    """
    cutoff = now - longest_period
    old_index: int | None = None
    for i, (_, ts) in enumerate(events):
        if ts < cutoff:
            old_index = i
    out = list(events)
    if old_index is not None:
        out[old_index] = (change, now)
    else:
        out.append((change, now))
    return out


# --------------------------------------------------------------------------------------------------
# The reconcile
# --------------------------------------------------------------------------------------------------


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
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or value > _MAX_INT32:
        raise ValueError(f"{name}: must be an integer in [{lo}, {_MAX_INT32}], got {value!r}")
    return value


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
    _check_int(min_replicas, "min_replicas", 0)
    _check_int(max_replicas, "max_replicas", 1)
    _check_int(current_replicas, "current_replicas", 0)
    _check_int(status_replicas, "status_replicas", 0)
    if min_replicas > max_replicas:
        raise ValueError(f"min_replicas: {min_replicas} is greater than max_replicas {max_replicas}")
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise ValueError(f"now: must be a finite time, got {now!r}")
    metric_specs = parse_metrics(spec_metrics)
    rules = parse_behavior(behavior)

    new_state = state.copy()
    # HPA: recordInitialRecommendation -- the first sight of an HPA seeds its history.
    if not new_state.recommendations:
        new_state.recommendations.append((current_replicas, float(now)))

    conditions = _Conditions()
    conditions.set(
        "AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale"
    )
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
        conditions.set(
            "ScalingActive",
            "False",
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
        )
    elif current_replicas > max_replicas:
        reason = "Current number of replicas above Spec.MaxReplicas"
        desired = max_replicas
    elif current_replicas < min_replicas:
        reason = "Current number of replicas below Spec.MinReplicas"
        desired = min_replicas
    else:
        ctx = _Ctx(
            pods=pods,
            inputs=inputs,
            now=float(now),
            cfg=cfg,
            tolerances=Tolerances.for_hpa(rules, cfg),
            spec_replicas=current_replicas,
            status_replicas=status_replicas,
        )
        replicas, metric_name, invalid = _compute_for_metrics(ctx, metric_specs, per_metric, statuses, conditions)
        if invalid:
            # All metrics invalid, or some invalid and the rest would scale down: no scaling
            # this round and no stabilization either (reference 1.6).
            result = HpaResult(current_replicas, conditions.as_list(), per_metric, statuses, None, None, "")
            return result, new_state
        metric_replicas = replicas
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
                new_state, conditions, current_replicas, desired, min_replicas, max_replicas, float(now), cfg
            )
        else:
            desired, stabilized = _normalize_with_behavior(
                new_state, conditions, rules, current_replicas, desired, min_replicas, max_replicas, float(now), cfg
            )
        rescale = desired != current_replicas

    if rescale:
        conditions.set(
            "AbleToScale",
            "True",
            "SucceededRescale",
            f"the HPA controller was able to update the target scale to {desired}",
        )
        # HPA: storeScaleEvent -- only with behavior, only after an actual rescale (reference 1.9.4).
        if rules is not None:
            if desired > current_replicas:
                new_state.scale_up_events = store_scale_event(
                    new_state.scale_up_events, desired - current_replicas, float(now), rules.scale_up.longest_period
                )
            else:
                new_state.scale_down_events = store_scale_event(
                    new_state.scale_down_events, current_replicas - desired, float(now), rules.scale_down.longest_period
                )
    else:
        desired = current_replicas
        reason = ""

    result = HpaResult(desired, conditions.as_list(), per_metric, statuses, metric_replicas, stabilized, reason)
    return result, new_state


def _compute_for_metrics(
    ctx: _Ctx,
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
                raise _MetricError(f"unknown metric source type {spec.type!r}")
            proposal = _compute_metric(ctx, spec)
        except (_MetricError, ValueError) as exc:
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
