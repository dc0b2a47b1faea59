"""Typed input events (docs/contract.md §3) and their strict decoding from JSON values.

Decoding is separate from parsing bytes (``schemas.codec`` does ``orjson.loads``) so that the core
stays free of I/O and the worker, the replay and the tests share one set of rules.  Every check
raises :class:`~scaling.errors.InvalidEvent` naming the field.  An unknown field is an error with the
closest known name (``ready_replica: unknown field (did you mean ready_replicas?)``): a misspelled
optional field that was silently ignored would change decisions without a word.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from .errors import InvalidEvent
from .quantity import MAX_MILLI, parse_quantity
from .spelling import did_you_mean, unknown_fields
from .vocabulary import EVENT_TYPES

__all__ = [
    "EVENT_TYPES",
    "ContainerResources",
    "ContainerSample",
    "Event",
    "HpaEvent",
    "MetricEvent",
    "PodStatus",
    "PolicyEvent",
    "Qty",
    "SeriesSample",
    "VpaEvent",
    "VpaRecommendation",
    "WorkloadEvent",
    "WorkloadRef",
    "decode_event",
    "decode_workload_ref",
    "policy_identity",
]

#: Event time beyond this (year 5138) is a unit mistake (milliseconds), not a timestamp.
_MAX_TS = 1e11


@dataclass(frozen=True, slots=True, order=True)
class WorkloadRef:
    """A scaled target; its ``key`` keys every topic (docs/contract.md §1)."""

    cluster: str
    namespace: str
    kind: str
    name: str
    #: ``cluster/namespace/kind/name``: built once with the reference (every event asks for it,
    #: and references are few and kept, see :func:`decode_workload_ref`), not on each read.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.cluster}/{self.namespace}/{self.kind}/{self.name}")

    def as_dict(self) -> dict[str, str]:
        return {"cluster": self.cluster, "namespace": self.namespace, "kind": self.kind, "name": self.name}

    def __reduce__(self) -> tuple[type[WorkloadRef], tuple[str, str, str, str]]:
        # Pickled by ``tandem simulate --jobs`` (the parts of a split read come back from the
        # pool).  Rebuilt through the constructor: a compiled (mypyc) frozen dataclass refuses
        # the attribute-by-attribute restore pickle does by default.
        return (WorkloadRef, (self.cluster, self.namespace, self.kind, self.name))

    @classmethod
    def from_key(cls, key: str) -> WorkloadRef:
        parts = key.split("/")
        if len(parts) != 4 or not all(parts):
            raise InvalidEvent("workload", f"key {key!r} is not cluster/namespace/kind/name")
        return cls(*parts)


@dataclass(frozen=True, slots=True)
class Qty:
    """An exact quantity (milli-units) that remembers how it was written, for ``from`` values."""

    milli: int
    text: str

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(self, milli: int, text: str) -> None:
        object.__setattr__(self, "milli", milli)
        object.__setattr__(self, "text", text)

    def __reduce__(self) -> tuple[type[Qty], tuple[int, str]]:
        # As WorkloadRef's: a compiled frozen dataclass refuses pickle's attribute-by-attribute restore.
        return (Qty, (self.milli, self.text))

    @classmethod
    def of(cls, value: object) -> Qty:
        if type(value) is str:
            return _qty_of_text(value)
        milli = parse_quantity(value)
        return cls(milli, value if isinstance(value, str) else _number_text(value))


@lru_cache(maxsize=4096)
def _qty_of_text(text: str) -> Qty:
    """``Qty.of`` a string, remembered: every workload event repeats the same few request and limit
    strings, and a ``Qty`` is frozen, so one instance serves them all."""
    return Qty(parse_quantity(text), text)


def _number_text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class ContainerSample(NamedTuple):
    """One container's usage at the event's ``ts``: CPU in cores, memory working set in bytes.

    A named tuple rather than a dataclass: a worker builds hundreds of thousands of these a second.
    """

    pod: str
    container: str
    cpu: float | None
    memory: int | None
    ready: bool = True
    oom: bool = False


@dataclass(frozen=True, slots=True)
class SeriesSample:
    """A named custom-metric sample (Nanit custom HPA, HPA Pods/Object/External metrics)."""

    series: str
    value: float
    pod: str | None = None

    # Written out, not left to ``dataclasses``: the one it generates is Python source even in the
    # compiled core (an interpreted frame per object); this one compiles to native stores.
    def __init__(self, series: str, value: float, pod: str | None = None) -> None:
        object.__setattr__(self, "series", series)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "pod", pod)

    def __reduce__(self) -> tuple[type[SeriesSample], tuple[str, float, str | None]]:
        return (SeriesSample, (self.series, self.value, self.pod))  # see Qty.__reduce__


class MetricEvent(NamedTuple):
    """Samples of one scrape.  A named tuple, like :class:`ContainerSample` and :class:`HpaEvent`:
    read-only, and built once per input event (see :class:`HpaEvent`)."""

    ts: float
    workload: WorkloadRef
    samples: tuple[ContainerSample, ...] = ()
    series: tuple[SeriesSample, ...] = ()
    type: Literal["metric"] = "metric"


@dataclass(frozen=True, slots=True)
class ContainerResources:
    requests: Mapping[str, Qty]
    limits: Mapping[str, Qty]


@dataclass(frozen=True, slots=True)
class PodStatus:
    name: str
    ready: bool
    phase: str
    started: float | None


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    ts: float
    workload: WorkloadRef
    replicas: int
    containers: Mapping[str, ContainerResources]
    ready_replicas: int | None = None
    pods: tuple[PodStatus, ...] | None = None
    type: Literal["workload"] = "workload"


class HpaEvent(NamedTuple):
    """An HPA's state.  A named tuple rather than a frozen dataclass: a cluster sends one per HPA
    and sync period, and a frozen dataclass sets each of its 13 fields through
    ``object.__setattr__`` (about 19,000 instructions per event, cachegrind; a tuple about 2,000).
    Read-only all the same; ``_replace`` makes a changed copy."""

    ts: float
    workload: WorkloadRef
    desired_replicas: int
    current_replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    conditions: tuple[Mapping[str, Any], ...] = ()
    metrics: tuple[Mapping[str, Any], ...] | None = None
    current_metrics: tuple[Mapping[str, Any], ...] | None = None
    behavior: Mapping[str, Any] | None = None
    name: str | None = None
    source: str | None = None
    type: Literal["hpa"] = "hpa"


#: A recommendation's part that was not given (shared, read-only).
_NO_QUANTITIES: Mapping[str, Qty] = MappingProxyType({})


class VpaRecommendation(NamedTuple):
    """One container's recommendation.  A named tuple, like :class:`HpaEvent`: tandem's own VPA
    builds one per container on every recommender run, and a frozen dataclass sets each field
    through ``object.__setattr__``."""

    target: Mapping[str, Qty]
    lower_bound: Mapping[str, Qty] = _NO_QUANTITIES
    upper_bound: Mapping[str, Qty] = _NO_QUANTITIES
    uncapped_target: Mapping[str, Qty] = _NO_QUANTITIES


class VpaEvent(NamedTuple):
    """A VPA's recommendation (a named tuple: see :class:`VpaRecommendation`; ``_replace`` makes a
    changed copy)."""

    ts: float
    workload: WorkloadRef
    containers: Mapping[str, VpaRecommendation]
    conditions: tuple[Mapping[str, Any], ...] | None = None
    source: str | None = None
    type: Literal["vpa"] = "vpa"


def policy_identity(api_version: object, kind: object, namespace: object, name: object) -> str:
    """Which policy object a manifest or a deletion is: ``<group>/<kind>/<namespace>/<name>``.

    Several policies may target one workload (an Hvpa and a Tortoise, say); the state keeps each
    by this identity, so that none silently replaces another (docs/contract.md §5).  The API group
    is part of it: Hvpa exists in two groups, and two objects of one name in them are two policies.
    """
    group = str(api_version or "").rpartition("/")[0] if "/" in str(api_version or "") else str(api_version or "")
    return f"{group}/{kind or ''}/{namespace or 'default'}/{name or ''}"


@dataclass(frozen=True, slots=True)
class PolicyEvent:
    """A policy manifest for a workload; ``manifest`` ``None`` deletes a policy: the one named by
    ``deleted`` (``apiVersion``, ``kind``, ``namespace``, ``name``), or, without it, every policy
    of the workload (a Kafka tombstone, a recording made before policies had identities)."""

    ts: float
    workload: WorkloadRef
    manifest: Mapping[str, Any] | None
    deleted: Mapping[str, Any] | None = None
    type: Literal["policy"] = "policy"

    @property
    def identity(self) -> str | None:
        """The policy this event is about (:func:`policy_identity`), or ``None`` for a deletion of
        every policy of the workload."""
        source = self.manifest if self.manifest is not None else self.deleted
        if source is None:
            return None
        meta = source.get("metadata") if self.manifest is not None else source
        if not isinstance(meta, Mapping):
            meta = {}
        return policy_identity(source.get("apiVersion"), source.get("kind"), meta.get("namespace"), meta.get("name"))


Event = MetricEvent | WorkloadEvent | HpaEvent | VpaEvent | PolicyEvent


# --- decoding ---------------------------------------------------------------------------------

# The fields each object of docs/contract.md §3 may carry; anything else is refused by name.
_COMMON = frozenset({"type", "ts", "workload"})
_REF_FIELDS = frozenset({"cluster", "namespace", "kind", "name"})
_CONTAINER_SAMPLE = frozenset({"pod", "container", "cpu", "memory", "ready", "oom"})
_USAGE_SAMPLE = frozenset({"pod", "container", "cpu", "memory"})
_SERIES_SAMPLE = frozenset({"series", "value", "pod"})
_DELETED_FIELDS = frozenset({"apiVersion", "kind", "namespace", "name"})
_EVENT_FIELDS: dict[str, frozenset[str]] = {
    "metric": _COMMON | {"samples"} | _CONTAINER_SAMPLE | _SERIES_SAMPLE,
    "workload": _COMMON | {"replicas", "containers", "ready_replicas", "pods"},
    "hpa": _COMMON
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
    "vpa": _COMMON | {"containers", "conditions", "source"},
    "policy": _COMMON | {"policy", "deleted"},
}
_BATCH = _COMMON | {"samples"}
_SINGLE_SERIES = _COMMON | _SERIES_SAMPLE
_SINGLE_CONTAINER = _COMMON | _CONTAINER_SAMPLE
_RESOURCES_FIELDS = frozenset({"requests", "limits"})
_POD_FIELDS = frozenset({"name", "ready", "phase", "started"})
_RECOMMENDATION_FIELDS = frozenset({"target", "lower_bound", "upper_bound", "uncapped_target"})


def _only(obj: Mapping[str, Any], known: frozenset[str], where: str = "") -> None:
    """Refuse the first field of ``obj`` that is not in ``known``, naming the closest known one."""
    if obj.keys() <= known:
        return
    name = unknown_fields(obj.keys(), known)[0]
    raise InvalidEvent(f"{where}.{name}" if where else name, "unknown field" + did_you_mean(name, known))


def _str(obj: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required string is missing")
        return None
    if not isinstance(value, str) or not value:
        raise InvalidEvent(name, f"expected a non-empty string, got {_show(value)}")
    return value


def _int(obj: Mapping[str, Any], name: str, *, required: bool = True, maximum: int = 1_000_000) -> int | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required integer is missing")
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(name, f"expected an integer, got {_show(value)}")
    if value < 0:
        raise InvalidEvent(name, f"must be >= 0, got {value}")
    if value > maximum:
        raise InvalidEvent(name, f"{value} is absurd (more than {maximum})")
    return value


def _bool(obj: Mapping[str, Any], name: str, default: bool) -> bool:
    value = obj.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidEvent(name, f"expected true or false, got {_show(value)}")
    return value


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidEvent(name, f"expected a number, got {_show(value)}")
    if not math.isfinite(value):
        raise InvalidEvent(name, f"{value} is not finite")
    return float(value)


def _show(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


# ``type(value) is not dict`` before ``isinstance(value, Mapping)`` (here and below): JSON gives
# dicts, and an isinstance against the ``Mapping`` ABC runs abc's Python ``__instancecheck__``, an
# interpreted frame per call even in the compiled core.
def _mapping(obj: Mapping[str, Any], name: str, *, required: bool = True) -> Mapping[str, Any] | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidEvent(name, "required object is missing")
        return None
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidEvent(name, f"expected an object, got {_show(value)}")
    return value


def _list(obj: Mapping[str, Any], name: str) -> list[Any] | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidEvent(name, f"expected a list, got {_show(value)}")
    return value


def _ts(obj: Mapping[str, Any]) -> float:
    if "ts" not in obj:
        raise InvalidEvent("ts", "required event time is missing")
    ts = _number(obj["ts"], "ts")
    if ts < 0 or ts > _MAX_TS:
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
        raise InvalidEvent(name, f"expected an object with cluster, namespace, kind, name; got {_show(value)}")
    _only(value, _REF_FIELDS, name)
    try:
        parts = [_str(value, k) for k in ("cluster", "namespace", "kind", "name")]
    except InvalidEvent as exc:
        raise exc.within(name) from None
    for k, part in zip(("cluster", "namespace", "kind", "name"), parts, strict=True):
        assert part is not None
        if "/" in part:
            raise InvalidEvent(f"{name}.{k}", f"{part!r} must not contain '/'")
    return WorkloadRef(*(p for p in parts if p is not None))


def _quantities(value: object, name: str, *, cpu_max: int, mem_max: int) -> dict[str, Qty]:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidEvent(name, f"expected an object of resource quantities, got {_show(value)}")
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
_CPU_MAX_MILLI = 100_000 * 1000
_MEM_MAX_MILLI = 2**50 * 1000


def _resources(value: object, name: str) -> dict[str, Qty]:
    return _quantities(value, name, cpu_max=_CPU_MAX_MILLI, mem_max=_MEM_MAX_MILLI)


def _decode_sample(raw: object, name: str) -> ContainerSample | SeriesSample:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidEvent(name, f"expected a sample object, got {_show(raw)}")
    try:
        _only(raw, _SERIES_SAMPLE if "series" in raw else _CONTAINER_SAMPLE)
        if "series" in raw:
            series = _str(raw, "series")
            assert series is not None
            if "value" not in raw:
                raise InvalidEvent("value", "required number is missing")
            return SeriesSample(series, _number(raw["value"], "value"), _str(raw, "pod", required=False))
        pod = _str(raw, "pod")
        container = _str(raw, "container")
        assert pod is not None and container is not None
        cpu = _usage(raw, "cpu", cores=True)
        mem = _usage(raw, "memory", cores=False)
        if cpu is None and mem is None and not raw.get("oom"):
            raise InvalidEvent("cpu", "a container sample needs cpu or memory")
        return ContainerSample(
            pod,
            container,
            cpu,
            None if mem is None else int(mem),
            _bool(raw, "ready", True),
            _bool(raw, "oom", False),
        )
    except InvalidEvent as exc:
        raise exc.within(name) if name else exc from None


def _usage(raw: Mapping[str, Any], name: str, *, cores: bool) -> float | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        v = _number(value, name)
        if v < 0:
            raise InvalidEvent(name, f"usage must be >= 0, got {value}")
    else:
        try:
            milli = parse_quantity(value)
        except ValueError as exc:
            raise InvalidEvent(name, str(exc)) from None
        v = milli / 1000
    if v > (_CPU_MAX_MILLI if cores else _MEM_MAX_MILLI) / 1000:
        raise InvalidEvent(name, f"{value} is absurd for {name}")
    return v


_CPU_MAX_CORES = _CPU_MAX_MILLI / 1000
_INF = math.inf
_MEM_MAX_BYTES = _MEM_MAX_MILLI // 1000


#: ``tuple.__new__``: a named tuple built from its complete field tuple, in the decoders' hot paths.
_new_tuple = tuple.__new__


def _fast_sample(raw: object) -> ContainerSample | None:
    """The common container sample, checked inline; ``None`` sends it to the full decoder.

    The hot path of the worker: plain ``pod``/``container`` strings, ``cpu`` a finite number of
    cores, ``memory`` an integer of bytes, optional boolean ``ready``/``oom``.  Anything else
    (quantity strings, series, a bad value) takes :func:`_decode_sample`, which accepts the same
    samples and says precisely what is wrong with the others.
    """
    if type(raw) is not dict or "series" in raw or not raw.keys() <= _CONTAINER_SAMPLE:
        return None
    pod = raw.get("pod")
    container = raw.get("container")
    cpu = raw.get("cpu")
    mem = raw.get("memory")
    ready = raw.get("ready", True)
    oom = raw.get("oom", False)
    if type(pod) is not str or not pod or type(container) is not str or not container:
        return None
    if cpu is not None:
        tc = type(cpu)
        if tc is float:
            if not 0.0 <= cpu <= _CPU_MAX_CORES:  # NaN fails too
                return None
        elif tc is int:
            if not 0 <= cpu <= _CPU_MAX_CORES:
                return None
            cpu = float(cpu)
        else:
            return None
    if mem is not None and (type(mem) is not int or not 0 <= mem <= _MEM_MAX_BYTES):
        return None
    if (cpu is None and mem is None) or (ready is not True and ready is not False and ready is not None):
        return None
    if oom is not True and oom is not False and oom is not None:
        return None
    return ContainerSample(pod, container, cpu, mem, ready is not False, oom is True)


def _decode_metric(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> MetricEvent:
    samples: list[ContainerSample] = []
    series: list[SeriesSample] = []
    batch = obj.get("samples")
    if batch is not None:
        if not obj.keys() <= _BATCH:
            _only(obj, _BATCH)
        if not isinstance(batch, list):
            raise InvalidEvent("samples", f"expected a list, got {_show(batch)}")
        append = samples.append
        known = _CONTAINER_SAMPLE
        new = tuple.__new__
        # The collector's batch: every sample exactly pod, container, cpu, memory, read by key and
        # checked with local names (a global or builtin costs more than a local, per sample).
        # The first other sample leaves this loop for the one below, which takes any sample.
        dict_, str_, float_, int_, type_ = dict, str, float, int, type
        usage, cpu_max, mem_max = _USAGE_SAMPLE, _CPU_MAX_CORES, _MEM_MAX_BYTES
        for raw in batch:
            if type_(raw) is dict_ and raw.keys() == usage:
                pod = raw["pod"]
                container = raw["container"]
                cpu = raw["cpu"]
                mem = raw["memory"]
                if (
                    type_(pod) is str_
                    and pod
                    and type_(container) is str_
                    and container
                    and type_(cpu) is float_
                    and 0.0 <= cpu <= cpu_max
                    and type_(mem) is int_
                    and 0 <= mem <= mem_max
                ):
                    append(new(ContainerSample, (pod, container, cpu, mem, True, False)))
                    continue
            break
        else:
            return _new_tuple(MetricEvent, (ts, ref, tuple(samples), (), "metric"))  # every sample taken
        for i in range(len(samples), len(batch)):  # those before i were all taken above
            raw = batch[i]
            # The plain sample the loop above takes is a case of the general one here (same
            # tuple: ready True, oom False), so a batch that left that loop needs no second copy.
            if type(raw) is dict and raw.keys() <= known:
                pod = raw.get("pod")
                container = raw.get("container")
                cpu = raw.get("cpu")
                mem = raw.get("memory")
                ready = raw.get("ready", True)
                oom = raw.get("oom", False)
                if (
                    type(pod) is str
                    and pod
                    and type(container) is str
                    and container
                    and (cpu is None or (type(cpu) is float and 0.0 <= cpu <= _CPU_MAX_CORES))
                    and (mem is None or (type(mem) is int and 0 <= mem <= _MEM_MAX_BYTES))
                    and (cpu is not None or mem is not None)
                    and (ready is True or ready is False or ready is None)
                    and (oom is True or oom is False or oom is None)
                ):
                    append(new(ContainerSample, (pod, container, cpu, mem, ready is not False, oom is True)))
                    continue
            elif type(raw) is dict and raw.keys() <= _SERIES_SAMPLE:
                # A series sample, likewise: a name, a finite float, an optional pod.
                name = raw.get("series")
                value = raw.get("value")
                pod = raw.get("pod")
                if (
                    type(name) is str
                    and name
                    and type(value) is float
                    and -_INF < value < _INF
                    and (pod is None or (type(pod) is str and pod))
                ):
                    series.append(SeriesSample(name, value, pod))
                    continue
            fast = _fast_sample(raw)
            if fast is not None:
                append(fast)
                continue
            s = _decode_sample(raw, f"samples[{i}]")
            (series if isinstance(s, SeriesSample) else samples).append(s)  # type: ignore[arg-type]
    else:
        _only(obj, _SINGLE_SERIES if "series" in obj else _SINGLE_CONTAINER)
        s = _decode_sample({k: v for k, v in obj.items() if k not in _COMMON}, "")
        (series if isinstance(s, SeriesSample) else samples).append(s)  # type: ignore[arg-type]
    return _new_tuple(MetricEvent, (ts, ref, tuple(samples), tuple(series), "metric"))  # MetricEvent(...)


def _decode_workload(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> WorkloadEvent:
    replicas = _int(obj, "replicas")
    assert replicas is not None
    raw_containers = _mapping(obj, "containers")
    assert raw_containers is not None
    containers: dict[str, ContainerResources] = {}
    for cname, spec in raw_containers.items():
        where = f"containers.{cname}"
        if type(spec) is not dict and not isinstance(spec, Mapping):
            raise InvalidEvent(where, f"expected an object with requests and limits, got {_show(spec)}")
        _only(spec, _RESOURCES_FIELDS, where)
        requests = _resources(spec.get("requests") if spec.get("requests") is not None else {}, f"{where}.requests")
        limits = _resources(spec.get("limits") if spec.get("limits") is not None else {}, f"{where}.limits")
        containers[cname] = ContainerResources(requests, limits)
    pods: tuple[PodStatus, ...] | None = None
    raw_pods = _list(obj, "pods")
    if raw_pods is not None:
        decoded = []
        for i, p in enumerate(raw_pods):
            where = f"pods[{i}]"
            if type(p) is not dict and not isinstance(p, Mapping):
                raise InvalidEvent(where, f"expected a pod object, got {_show(p)}")
            try:
                _only(p, _POD_FIELDS)
                name = _str(p, "name")
                assert name is not None
                phase = _str(p, "phase", required=False) or "Running"
                started = None if p.get("started") is None else _number(p["started"], "started")
                decoded.append(PodStatus(name, _bool(p, "ready", True), phase, started))
            except InvalidEvent as exc:
                raise exc.within(where) from None
        pods = tuple(decoded)
    return WorkloadEvent(ts, ref, replicas, containers, _int(obj, "ready_replicas", required=False), pods)


def _conditions(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    raw = _list(obj, "conditions")
    if raw is None:
        return None
    for i, c in enumerate(raw):
        if (type(c) is not dict and not isinstance(c, Mapping)) or not isinstance(c.get("type"), str):
            raise InvalidEvent(f"conditions[{i}]", "expected an object with a string 'type'")
        status = c.get("status", "True")
        if status not in ("True", "False", "Unknown"):
            raise InvalidEvent(f"conditions[{i}].status", f"expected True, False or Unknown, got {_show(status)}")
    return tuple(raw)


def _maps(obj: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], ...] | None:
    raw = _list(obj, name)
    if raw is None:
        return None
    for i, m in enumerate(raw):
        if type(m) is not dict and not isinstance(m, Mapping):
            raise InvalidEvent(f"{name}[{i}]", f"expected an object, got {_show(m)}")
    return tuple(raw)


_MAX_COUNT = 1_000_000  # ``_int``'s default maximum
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
    desired = _int(obj, "desired_replicas")
    assert desired is not None
    min_r = _int(obj, "min_replicas", required=False)
    max_r = _int(obj, "max_replicas", required=False)
    if min_r is not None and max_r is not None and min_r > max_r:
        raise InvalidEvent("min_replicas", f"{min_r} is above max_replicas {max_r}")
    return HpaEvent(
        ts,
        ref,
        desired,
        _int(obj, "current_replicas", required=False),
        min_r,
        max_r,
        _conditions(obj) or (),
        _maps(obj, "metrics"),
        _maps(obj, "current_metrics"),
        _mapping(obj, "behavior", required=False),
        _str(obj, "name", required=False),
        _str(obj, "source", required=False),
    )


def _decode_vpa(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> VpaEvent:
    raw = _mapping(obj, "containers")
    assert raw is not None
    containers: dict[str, VpaRecommendation] = {}
    for cname, rec in raw.items():
        where = f"containers.{cname}"
        if type(rec) is not dict and not isinstance(rec, Mapping):
            raise InvalidEvent(where, f"expected an object with a target, got {_show(rec)}")
        _only(rec, _RECOMMENDATION_FIELDS, where)
        if rec.get("target") is None:
            raise InvalidEvent(f"{where}.target", "required object is missing")
        # Targets are what gets applied, so absurd ones are refused; bounds are not: VPA's upper
        # bound of a container with little history is legitimately huge (confidence 1 + 1/c).
        parts = {
            k: (
                _resources(rec[k], f"{where}.{k}")
                if k == "target"
                else _quantities(rec[k], f"{where}.{k}", cpu_max=MAX_MILLI, mem_max=MAX_MILLI)
            )
            if rec.get(k) is not None
            else {}
            for k in ("target", "lower_bound", "upper_bound", "uncapped_target")
        }
        containers[cname] = VpaRecommendation(**parts)
    return VpaEvent(ts, ref, containers, _conditions(obj), _str(obj, "source", required=False))


def _decode_policy(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> PolicyEvent:
    if "policy" not in obj:
        raise InvalidEvent("policy", "required manifest is missing (use null to delete)")
    manifest = obj["policy"]
    if manifest is not None and (type(manifest) is not dict and not isinstance(manifest, Mapping)):
        raise InvalidEvent("policy", f"expected a manifest object or null, got {_show(manifest)}")
    deleted = obj.get("deleted")
    if deleted is None:
        return PolicyEvent(ts, ref, manifest)
    if manifest is not None:
        raise InvalidEvent("deleted", 'names the policy a deletion removes: only with "policy": null')
    if type(deleted) is not dict and not isinstance(deleted, Mapping):
        raise InvalidEvent("deleted", f"expected an object (apiVersion, kind, namespace, name), got {_show(deleted)}")
    _only(deleted, _DELETED_FIELDS, "deleted")
    for name in ("apiVersion", "kind", "namespace", "name"):
        value = deleted.get(name)
        if (value is not None or name != "namespace") and (not isinstance(value, str) or not value):
            raise InvalidEvent(f"deleted.{name}", f"expected a non-empty string, got {_show(value)}")
    return PolicyEvent(ts, ref, None, deleted)


_DECODERS: dict[str, Callable[[Mapping[str, Any], float, WorkloadRef], Event]] = {
    "metric": _decode_metric,
    "workload": _decode_workload,
    "hpa": _decode_hpa,
    "vpa": _decode_vpa,
    "policy": _decode_policy,
}


def decode_event(obj: object) -> Event:
    """Decode one contract event from a JSON value, or raise :class:`InvalidEvent`."""
    if type(obj) is dict:
        # The common event, checked inline: a known type with known fields, a float time in
        # range.  Anything else takes the checks below, which name what is wrong.
        kind = obj.get("type")
        if type(kind) is str:
            fields = _EVENT_FIELDS.get(kind)
            ts = obj.get("ts")
            # fields.issuperset(obj): obj.keys() <= fields, without the keys view (a third cheaper).
            if fields is not None and fields.issuperset(obj) and type(ts) is float and 0.0 <= ts <= _MAX_TS:
                return _DECODERS[kind](obj, ts, decode_workload_ref(obj.get("workload")))
    return _decode_event_checked(obj)


def _decode_event_checked(obj: object) -> Event:
    """:func:`decode_event` check by check, in the order the errors are reported."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise InvalidEvent("", f"an event must be a JSON object, got {_show(obj)}")
    kind = obj.get("type")
    decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise InvalidEvent("type", f"unknown event type {_show(kind)}; expected one of {', '.join(EVENT_TYPES)}")
    _only(obj, _EVENT_FIELDS[str(kind)])
    ts = _ts(obj)
    ref = decode_workload_ref(obj.get("workload"))
    event: Event = decoder(obj, ts, ref)
    return event
