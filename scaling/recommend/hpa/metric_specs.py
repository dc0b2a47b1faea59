"""HPA metric specs (``spec.metrics``), autoscaling/v2 and v2beta1, parsed strictly into :class:`MetricSpec`.

Upstream: the ``MetricSpec`` types of ``k8s.io/api/autoscaling/v2`` and the v2beta1 conversion of
``pkg/apis/autoscaling/v2beta1/conversion.go``; validation follows
``pkg/apis/autoscaling/validation``.  A bad spec is an error naming the field, never ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ...quantity import parse_quantity

__all__ = ["MetricSpec", "parse_metrics"]


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

    @cached_property
    def description(self) -> str:
        """The controller's name for the metric (``metricNameProposal`` in ``horizontal.go``);
        computed once per parsed spec (a policy's specs are parsed once and read every tick)."""
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


def as_mapping(value: Any, where: str) -> Mapping[str, Any]:
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
    spec = as_mapping(raw, where)
    type_ = spec.get("type")
    if not isinstance(type_, str) or not type_:
        raise ValueError(f"{where}.type: must be a non-empty string")
    if type_ not in _SOURCE_FIELD:
        # HPA: horizontal.go computeReplicasForMetric, unknown type -> InvalidMetricSourceType
        # (an invalid metric, not a broken HPA; reference 1.10 multi_metric_one_invalid_blocks_scale_down).
        return MetricSpec(index, type_, known=False)
    fname = _SOURCE_FIELD[type_]
    src = as_mapping(spec.get(fname), f"{where}.{fname}")
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
    metric = as_mapping(src.get("metric"), f"{loc}.metric")
    return _name(metric.get("name"), f"{loc}.metric.name"), metric.get("selector")


def _parse_v2(index: int, type_: str, src: Mapping[str, Any], loc: str) -> MetricSpec:
    target = as_mapping(src.get("target"), f"{loc}.target")
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
        described = as_mapping(src.get("describedObject"), f"{loc}.describedObject")
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
        described = as_mapping(src.get("target"), f"{loc}.target")
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
