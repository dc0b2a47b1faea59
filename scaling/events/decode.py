"""Strict decoding of one contract event (docs/contract.md §3) from a JSON value.

Decoding is separate from parsing bytes (``schemas.codec`` does ``orjson.loads``) so that the core
stays free of I/O and the worker, the replay and the tests share one set of rules.  Every check
raises :class:`~scaling.errors.InvalidEvent` naming the field (``checks``); metric events, the
most numerous, have their own module (``metric``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import InvalidEvent
from ..quantity import MAX_MILLI
from ..vocabulary import EVENT_TYPES, HISTORY
from .checks import (
    DELETED_FIELDS,
    EVENT_FIELDS,
    MAX_TS,
    POD_FIELDS,
    RECOMMENDATION_FIELDS,
    RESOURCES_FIELDS,
    boolean,
    decode_workload_ref,
    event_time,
    integer,
    json_list,
    json_object,
    number,
    only,
    quantities,
    resources,
    show,
    string,
)
from .history import HISTORY_FIELDS, HistoryEvent, decode_history
from .metric import decode_metric
from .model import (
    ContainerResources,
    Event,
    HpaEvent,
    PodStatus,
    PolicyEvent,
    VpaEvent,
    VpaRecommendation,
    WorkloadEvent,
    WorkloadRef,
)

__all__ = ["decode_event"]

#: ``tuple.__new__``: a named tuple built from its complete field tuple, in the decoders' hot paths.
_new_tuple = tuple.__new__


def _decode_workload(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> WorkloadEvent:
    replicas = integer(obj, "replicas")
    assert replicas is not None
    raw_containers = json_object(obj, "containers")
    assert raw_containers is not None
    containers: dict[str, ContainerResources] = {}
    for cname, spec in raw_containers.items():
        where = f"containers.{cname}"
        if type(spec) is not dict and not isinstance(spec, Mapping):
            raise InvalidEvent(where, f"expected an object with requests and limits, got {show(spec)}")
        only(spec, RESOURCES_FIELDS, where)
        requests = resources(spec.get("requests") if spec.get("requests") is not None else {}, f"{where}.requests")
        limits = resources(spec.get("limits") if spec.get("limits") is not None else {}, f"{where}.limits")
        containers[cname] = ContainerResources(requests, limits)
    pods: tuple[PodStatus, ...] | None = None
    raw_pods = json_list(obj, "pods")
    if raw_pods is not None:
        decoded = []
        for i, p in enumerate(raw_pods):
            where = f"pods[{i}]"
            if type(p) is not dict and not isinstance(p, Mapping):
                raise InvalidEvent(where, f"expected a pod object, got {show(p)}")
            try:
                only(p, POD_FIELDS)
                name = string(p, "name")
                assert name is not None
                phase = string(p, "phase", required=False) or "Running"
                started = None if p.get("started") is None else number(p["started"], "started")
                decoded.append(PodStatus(name, boolean(p, "ready", True), phase, started))
            except InvalidEvent as exc:
                raise exc.within(where) from None
        pods = tuple(decoded)
    return WorkloadEvent(ts, ref, replicas, containers, integer(obj, "ready_replicas", required=False), pods)


def _conditions(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    raw = json_list(obj, "conditions")
    if raw is None:
        return None
    for i, c in enumerate(raw):
        if (type(c) is not dict and not isinstance(c, Mapping)) or not isinstance(c.get("type"), str):
            raise InvalidEvent(f"conditions[{i}]", "expected an object with a string 'type'")
        status = c.get("status", "True")
        if status not in ("True", "False", "Unknown"):
            raise InvalidEvent(f"conditions[{i}].status", f"expected True, False or Unknown, got {show(status)}")
    return tuple(raw)


def _maps(obj: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], ...] | None:
    raw = json_list(obj, name)
    if raw is None:
        return None
    for i, m in enumerate(raw):
        if type(m) is not dict and not isinstance(m, Mapping):
            raise InvalidEvent(f"{name}[{i}]", f"expected an object, got {show(m)}")
    return tuple(raw)


_MAX_COUNT = 1_000_000  # ``integer``'s default maximum
_STATUSES = ("True", "False", "Unknown")


def _plain_list(value: object) -> bool:
    """A list of JSON objects (``None`` too): what ``_maps`` accepts as it is."""
    if value is None:
        return True
    if type(value) is not list:
        return False
    return all(type(m) is dict for m in value)


def _plain_conditions(value: object) -> bool:
    """Conditions ``_conditions`` accepts as they are (``None`` too), checked without a call each."""
    if value is None:
        return True
    if type(value) is not list:
        return False
    for c in value:
        if type(c) is not dict or type(c.get("type")) is not str or c.get("status", "True") not in _STATUSES:
            return False
    return True


def _decode_hpa(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> HpaEvent:
    # The common event, checked inline (a cluster's HPA every sync period); anything else takes
    # the field-by-field decoder below, which accepts the same events and names what is wrong.
    desired = obj.get("desired_replicas")
    current = obj.get("current_replicas")
    min_r = obj.get("min_replicas")
    max_r = obj.get("max_replicas")
    conditions = obj.get("conditions")
    metrics = obj.get("metrics")
    current_metrics = obj.get("current_metrics")
    behavior = obj.get("behavior")
    name = obj.get("name")
    source = obj.get("source")
    if (
        type(desired) is int
        and 0 <= desired <= _MAX_COUNT
        and (current is None or (type(current) is int and 0 <= current <= _MAX_COUNT))
        and (min_r is None or (type(min_r) is int and 0 <= min_r <= _MAX_COUNT))
        and (max_r is None or (type(max_r) is int and 0 <= max_r <= _MAX_COUNT))
        and (min_r is None or max_r is None or min_r <= max_r)
        and (name is None or (type(name) is str and name))
        and (source is None or (type(source) is str and source))
        and (behavior is None or type(behavior) is dict)
        # None (the common case) checked here, not by a call each.
        and (conditions is None or _plain_conditions(conditions))
        and (metrics is None or _plain_list(metrics))
        and (current_metrics is None or _plain_list(current_metrics))
    ):
        # HpaEvent(...), without the keyword handling of the named tuple's __new__ (same fields).
        return _new_tuple(
            HpaEvent,
            (
                ts,
                ref,
                desired,
                current,
                min_r,
                max_r,
                tuple(conditions) if conditions else (),
                None if metrics is None else tuple(metrics),
                None if current_metrics is None else tuple(current_metrics),
                behavior,
                name,
                source,
                "hpa",
            ),
        )
    return _decode_hpa_fields(obj, ts, ref)


def _decode_hpa_fields(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> HpaEvent:
    desired = integer(obj, "desired_replicas")
    assert desired is not None
    min_r = integer(obj, "min_replicas", required=False)
    max_r = integer(obj, "max_replicas", required=False)
    if min_r is not None and max_r is not None and min_r > max_r:
        raise InvalidEvent("min_replicas", f"{min_r} is above max_replicas {max_r}")
    return HpaEvent(
        ts,
        ref,
        desired,
        integer(obj, "current_replicas", required=False),
        min_r,
        max_r,
        _conditions(obj) or (),
        _maps(obj, "metrics"),
        _maps(obj, "current_metrics"),
        json_object(obj, "behavior", required=False),
        string(obj, "name", required=False),
        string(obj, "source", required=False),
    )


def _decode_vpa(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> VpaEvent:
    raw = json_object(obj, "containers")
    assert raw is not None
    containers: dict[str, VpaRecommendation] = {}
    for cname, rec in raw.items():
        where = f"containers.{cname}"
        if type(rec) is not dict and not isinstance(rec, Mapping):
            raise InvalidEvent(where, f"expected an object with a target, got {show(rec)}")
        only(rec, RECOMMENDATION_FIELDS, where)
        if rec.get("target") is None:
            raise InvalidEvent(f"{where}.target", "required object is missing")
        # Targets are what gets applied, so absurd ones are refused; bounds are not: VPA's upper
        # bound of a container with little history is legitimately huge (confidence 1 + 1/c).
        parts = {
            k: (
                resources(rec[k], f"{where}.{k}")
                if k == "target"
                else quantities(rec[k], f"{where}.{k}", cpu_max=MAX_MILLI, mem_max=MAX_MILLI)
            )
            if rec.get(k) is not None
            else {}
            for k in ("target", "lower_bound", "upper_bound", "uncapped_target")
        }
        containers[cname] = VpaRecommendation(**parts)
    return VpaEvent(ts, ref, containers, _conditions(obj), string(obj, "source", required=False))


def _decode_policy(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> PolicyEvent:
    if "policy" not in obj:
        raise InvalidEvent("policy", "required manifest is missing (use null to delete)")
    manifest = obj["policy"]
    if manifest is not None and (type(manifest) is not dict and not isinstance(manifest, Mapping)):
        raise InvalidEvent("policy", f"expected a manifest object or null, got {show(manifest)}")
    deleted = obj.get("deleted")
    if deleted is None:
        return PolicyEvent(ts, ref, manifest)
    if manifest is not None:
        raise InvalidEvent("deleted", 'names the policy a deletion removes: only with "policy": null')
    if type(deleted) is not dict and not isinstance(deleted, Mapping):
        raise InvalidEvent("deleted", f"expected an object (apiVersion, kind, namespace, name), got {show(deleted)}")
    only(deleted, DELETED_FIELDS, "deleted")
    for name in ("apiVersion", "kind", "namespace", "name"):
        value = deleted.get(name)
        if (value is not None or name != "namespace") and (not isinstance(value, str) or not value):
            raise InvalidEvent(f"deleted.{name}", f"expected a non-empty string, got {show(value)}")
    return PolicyEvent(ts, ref, None, deleted)


def _decode_history(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> HistoryEvent:
    return decode_history(obj, ts, ref, decode_event)


_DECODERS: dict[str, Callable[[Mapping[str, Any], float, WorkloadRef], Event]] = {
    "metric": decode_metric,
    "workload": _decode_workload,
    "hpa": _decode_hpa,
    "vpa": _decode_vpa,
    "policy": _decode_policy,
    HISTORY: _decode_history,
}


def decode_event(obj: object) -> Event:
    """Decode one contract event from a JSON value, or raise :class:`InvalidEvent`."""
    if type(obj) is dict:
        # The common event, checked inline: a known type with known fields, a float time in
        # range.  Anything else takes the checks below, which name what is wrong.
        kind = obj.get("type")
        if type(kind) is str:
            fields = EVENT_FIELDS.get(kind)
            ts = obj.get("ts")
            # fields.issuperset(obj): obj.keys() <= fields, without the keys view (a third cheaper).
            if fields is not None and fields.issuperset(obj) and type(ts) is float and 0.0 <= ts <= MAX_TS:
                return _DECODERS[kind](obj, ts, decode_workload_ref(obj.get("workload")))
    return _decode_event_checked(obj)


def _decode_event_checked(obj: object) -> Event:
    """:func:`decode_event` check by check, in the order the errors are reported."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidEvent("", f"an event must be a JSON object, got {show(obj)}")
    kind = obj.get("type")
    decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise InvalidEvent(
            "type", f"unknown event type {show(kind)}; expected one of {', '.join((*EVENT_TYPES, HISTORY))}"
        )
    only(obj, EVENT_FIELDS[str(kind)] if kind != HISTORY else HISTORY_FIELDS)
    ts = event_time(obj)
    ref = decode_workload_ref(obj.get("workload"))
    event: Event = decoder(obj, ts, ref)
    return event
