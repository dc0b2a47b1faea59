"""The typed input events of docs/contract.md §3: what a decoded event is.

Read-only values, built once per input event by the decoders beside this module (``decode``,
``metric``, ``checks``); the hot ones are named tuples or have written-out constructors, for the
reasons their docstrings give.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from ..errors import InvalidEvent
from ..quantity import parse_quantity

__all__ = [
    "ContainerResources",
    "ContainerSample",
    "Event",
    "HistoryEvent",
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
    "policy_identity",
]


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


class HistoryEvent(NamedTuple):
    """Past ``metric`` and ``workload`` events of ``workload``, learned at ``ts`` (the present)."""

    ts: float
    workload: WorkloadRef
    #: The end of the past the envelope covers: the replicas of its last ``workload`` event (or of
    #: an earlier envelope's) held until then.
    until: float
    events: tuple[MetricEvent | WorkloadEvent, ...]
    type: Literal["history"] = "history"


Event = MetricEvent | WorkloadEvent | HpaEvent | VpaEvent | PolicyEvent | HistoryEvent
