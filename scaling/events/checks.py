"""The field checks every event decoder shares (docs/contract.md §3): known fields, typed values.

Each check raises :class:`~scaling.errors.InvalidEvent` naming the field.  An unknown field is an
error with the closest known name (``ready_replica: unknown field (did you mean ready_replicas?)``):
a misspelled optional field that was silently ignored would change decisions without a word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

from ..errors import InvalidEvent
from ..spelling import did_you_mean, unknown_fields
from .model import Qty, WorkloadRef

#: Event time beyond this (year 5138) is a unit mistake (milliseconds), not a timestamp.
MAX_TS = 1e11

# The fields each object of docs/contract.md §3 may carry; anything else is refused by name.
COMMON = frozenset({"type", "ts", "workload"})
REF_FIELDS = frozenset({"cluster", "namespace", "kind", "name"})
CONTAINER_SAMPLE = frozenset({"pod", "container", "cpu", "memory", "ready", "oom"})
USAGE_SAMPLE = frozenset({"pod", "container", "cpu", "memory"})
SERIES_SAMPLE = frozenset({"series", "value", "pod"})
DELETED_FIELDS = frozenset({"apiVersion", "kind", "namespace", "name"})
EVENT_FIELDS: dict[str, frozenset[str]] = {
    "metric": COMMON | {"samples"} | CONTAINER_SAMPLE | SERIES_SAMPLE,
    "workload": COMMON | {"replicas", "containers", "ready_replicas", "pods"},
    "hpa": COMMON
    | {
        "desired_replicas",
        "current_replicas",
        "min_replicas",
        "max_replicas",
        "conditions",
        "metrics",
        "current_metrics",
        "behavior",
        "name",
        "source",
    },
    "vpa": COMMON | {"containers", "conditions", "source"},
    "policy": COMMON | {"policy", "deleted"},
}
BATCH = COMMON | {"samples"}
SINGLE_SERIES = COMMON | SERIES_SAMPLE
SINGLE_CONTAINER = COMMON | CONTAINER_SAMPLE
RESOURCES_FIELDS = frozenset({"requests", "limits"})
POD_FIELDS = frozenset({"name", "ready", "phase", "started"})
RECOMMENDATION_FIELDS = frozenset({"target", "lower_bound", "upper_bound", "uncapped_target"})


def only(obj: Mapping[str, Any], known: frozenset[str], where: str = "") -> None:
    """Refuse the first field of ``obj`` that is not in ``known``, naming the closest known one."""
    if obj.keys() <= known:
        return
    name = unknown_fields(obj.keys(), known)[0]
    raise InvalidEvent(f"{where}.{name}" if where else name, "unknown field" + did_you_mean(name, known))


def string(obj: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required string is missing")
        return None
    if not isinstance(value, str) or not value:
        raise InvalidEvent(name, f"expected a non-empty string, got {show(value)}")
    return value


def integer(obj: Mapping[str, Any], name: str, *, required: bool = True, maximum: int = 1_000_000) -> int | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required integer is missing")
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(name, f"expected an integer, got {show(value)}")
    if value < 0:
        raise InvalidEvent(name, f"must be >= 0, got {value}")
    if value > maximum:
        raise InvalidEvent(name, f"{value} is absurd (more than {maximum})")
    return value


def boolean(obj: Mapping[str, Any], name: str, default: bool) -> bool:
    value = obj.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidEvent(name, f"expected true or false, got {show(value)}")
    return value


def number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidEvent(name, f"expected a number, got {show(value)}")
    if not math.isfinite(value):
        raise InvalidEvent(name, f"{value} is not finite")
    return float(value)


def show(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ``type(value) is not dict`` before ``isinstance(value, Mapping)`` (here and below): JSON gives
# dicts, and an isinstance against the ``Mapping`` ABC runs abc's Python ``__instancecheck__``, an
# interpreted frame per call even in the compiled core.
def json_object(obj: Mapping[str, Any], name: str, *, required: bool = True) -> Mapping[str, Any] | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required object is missing")
        return None
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidEvent(name, f"expected an object, got {show(value)}")
    return value


def json_list(obj: Mapping[str, Any], name: str) -> list[Any] | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidEvent(name, f"expected a list, got {show(value)}")
    return value


def event_time(obj: Mapping[str, Any]) -> float:
    if "ts" not in obj:
        raise InvalidEvent("ts", "required event time is missing")
    ts = number(obj["ts"], "ts")
    if ts < 0 or ts > MAX_TS:
        raise InvalidEvent("ts", f"{ts} is not Unix epoch seconds")
    return ts


#: Workload references decoded lately, by their four values: every event carries one and a stream
#: repeats a few thousand at most, so checking the same four strings again was a fifth of decoding.
#: Only an exact 4-field dict is looked up, and a hit equals four validated strings, so a hit is a
#: reference that passes every check below.
_REFS: dict[tuple[object, object, object, object], WorkloadRef] = {}
_REFS_MAX = 65536
_ref_values = itemgetter("cluster", "namespace", "kind", "name")


def decode_workload_ref(value: object, name: str = "workload") -> WorkloadRef:
    if type(value) is dict and len(value) == 4:
        try:
            key = _ref_values(value)  # the four values in one call, not four get()s
            ref = _REFS.get(key)
        except (KeyError, TypeError):  # a field missing, an unhashable value: the full check names it
            return _decode_workload_ref(value, name)
        if ref is None:
            ref = _decode_workload_ref(value, name)
            if len(_REFS) >= _REFS_MAX:
                _REFS.clear()
            _REFS[key] = ref
        return ref
    return _decode_workload_ref(value, name)


def _decode_workload_ref(value: object, name: str) -> WorkloadRef:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidEvent(name, f"expected an object with cluster, namespace, kind, name; got {show(value)}")
    only(value, REF_FIELDS, name)
    try:
        parts = [string(value, k) for k in ("cluster", "namespace", "kind", "name")]
    except InvalidEvent as exc:
        raise exc.within(name) from None
    for k, part in zip(("cluster", "namespace", "kind", "name"), parts, strict=True):
        assert part is not None
        if "/" in part:
            raise InvalidEvent(f"{name}.{k}", f"{part!r} must not contain '/'")
    return WorkloadRef(*(p for p in parts if p is not None))


def quantities(value: object, name: str, *, cpu_max: int, mem_max: int) -> dict[str, Qty]:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidEvent(name, f"expected an object of resource quantities, got {show(value)}")
    out: dict[str, Qty] = {}
    for res, raw in value.items():
        if not isinstance(res, str):  # pragma: no cover - JSON keys are strings
            raise InvalidEvent(name, "resource names must be strings")
        try:
            q = Qty.of(raw)
        except ValueError as exc:
            raise InvalidEvent(f"{name}.{res}", str(exc)) from None
        limit = cpu_max if res == "cpu" else mem_max
        if q.milli > limit:
            raise InvalidEvent(f"{name}.{res}", f"{q.text} is absurd for {res}")
        out[res] = q
    return out


# A request beyond these is a unit mistake rather than a real container: 100k cores, 1 PiB.
CPU_MAX_MILLI = 100_000 * 1000
MEM_MAX_MILLI = 2**50 * 1000


def resources(value: object, name: str) -> dict[str, Qty]:
    return quantities(value, name, cpu_max=CPU_MAX_MILLI, mem_max=MEM_MAX_MILLI)
