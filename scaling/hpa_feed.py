"""tandem's own HPA fed incrementally: its inputs kept up to date per sample, not rebuilt per tick.

The own HPA (``scaling.own.own_hpa``) reads the latest usage of every pod in the shapes of
``scaling.recommend.hpa.MetricInputs`` (pod -> container -> resource -> value, and when each pod's
sample was taken), the pod template's requests and the pod list.  Rebuilding them from the usage
table (``WorkloadState.recommender["usage"]``) on every tick was a third of the own HPA's cost, and
most of it rebuilt what had not changed: the same pods, the same requests.  :class:`HpaFeed` keeps
them live instead: ``own.observe`` hands it each sample as it writes the usage table, and the tick
reads the shapes as they are when every sample is fresh (the common case).

It is a cache, never serialised: after a restore it is rebuilt from the usage table, which stays
the one state that is written to the changelog.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .events import WorkloadEvent
from .quantity import bytes_of
from .recommend.hpa import MetricInputs, PodInfo

__all__ = ["HpaFeed"]

#: Pods without pod status in the stream start "long ago": the HPA counts them running, ready and
#: past the CPU initialization period.  (Any start an hour or more before the tick classifies them
#: the same way for a fresh sample, which is the only kind the HPA sees: ``groupPods`` then finds
#: them Ready, and inside a longer initialization period the sample lies after the readiness.)
_LONG_AGO = float("-inf")


class HpaFeed:
    """The latest usage per pod and container in the HPA's shapes, and what the last tick derived.

    * ``usage``: pod -> container -> ``{"cpu": millicores, "memory": bytes}`` (a resource without a
      sample is absent), pods and containers in the order of the usage table;
    * ``stamps``: pod -> container -> time of that sample; ``sample_ts`` reads, per pod, the newest
      of its containers' times (the HPA's ``sample_ts``) from them when asked;
    * ``pods_version`` counts changes of the pod set, which the cached pod list is keyed on;
    * ``floor`` is at most every stamp (``inf`` without any): a write lowers it to its time when
      that is earlier, and :meth:`fresh` raises it to the oldest stamp when it has to look, so a
      tick whose samples are all newer than the floor needs no pass over the stamps.

    ``own.observe`` writes a sample that replaces both resources of an entry that has both in
    place (``usage[pod][container]`` and ``stamps[pod][container]``, without a call, then lowers
    ``floor`` once per event); every other change goes through :meth:`note`.
    """

    __slots__ = ("_copy", "_inputs", "_pods", "_requests", "floor", "pods_version", "sample_ts", "stamps", "usage")

    def __init__(self) -> None:
        self.usage: dict[str, dict[str, dict[str, int]]] = {}
        self.stamps: dict[str, dict[str, float]] = {}
        self.sample_ts: Mapping[str, float] = _Latest(self.stamps)
        self.pods_version = 0
        self.floor = math.inf
        self._pods: tuple[object, tuple[PodInfo, ...]] | None = None
        self._requests: tuple[WorkloadEvent, dict[str, dict[str, int]]] | None = None
        self._inputs: MetricInputs | None = None
        #: The last filtered copy (``fresh``): the (pod, container) entries it holds, its usage and
        #: its sample times; dropped by every write that replaces an entry's mapping.
        self._copy: tuple[list[tuple[str, str]], dict[str, dict[str, dict[str, int]]], _Latest] | None = None

    @classmethod
    def from_table(cls, table: Mapping[str, Mapping[str, Sequence[Any]]]) -> HpaFeed:
        """From the usage table (pod -> container -> ``[ts, millicores | None, bytes | None]``)."""
        feed = cls()
        for pod, containers in table.items():
            for container, (ts, cpu, mem) in containers.items():
                feed.note(pod, container, ts, cpu, mem)
        return feed

    def note(self, pod: str, container: str, ts: float, cpu: int | None, mem: int | None) -> None:
        """The usage table's entry of ``pod``/``container`` is now ``[ts, cpu, mem]``."""
        values: dict[str, int] = {}
        if cpu is not None:
            values["cpu"] = cpu
        if mem is not None:
            values["memory"] = mem
        containers = self.usage.get(pod)
        if containers is None:
            containers = self.usage[pod] = {}
            self.stamps[pod] = {}
            self.pods_version += 1
        containers[container] = values
        self.stamps[pod][container] = ts
        if ts < self.floor:
            self.floor = ts
        self._copy = None  # a copy would hold the mapping ``values`` replaced

    def forget(self, pod: str) -> None:
        """The usage table dropped ``pod``."""
        del self.usage[pod], self.stamps[pod]
        self.pods_version += 1
        self._copy = None

    def fresh(self, oldest: float) -> tuple[Mapping[str, Mapping[str, Mapping[str, int]]], Mapping[str, float]]:
        """The samples taken at ``oldest`` or later: (usage, per-pod sample time), HPA-shaped.

        When every sample is fresh these are the live mappings themselves (read them, do not keep
        them); else filtered copies, a pod kept with its fresh containers if it has any.  The copy
        is made again only when the entries it holds change: pods that stopped reporting (a
        scale-down) stay in the usage table, old, tick after tick, and the same copy (whose
        values are the live entries, written in place by ``own.observe``) then also gives the
        same ``MetricInputs`` (:meth:`inputs`).
        """
        if self.floor < oldest:
            # Some stamp may be too old: find the oldest (forgotten pods may have held the floor),
            # and in the same pass the entries a copy would hold.
            floor = math.inf
            held: list[tuple[str, str]] = []
            for pod, stamps in self.stamps.items():
                for c, ts in stamps.items():
                    if ts < floor:
                        floor = ts
                    if ts >= oldest:
                        held.append((pod, c))
            self.floor = floor
            if floor < oldest:
                return self._fresh_copy(held)
        return self.usage, self.sample_ts

    def _fresh_copy(self, held: list[tuple[str, str]]) -> tuple[dict[str, dict[str, dict[str, int]]], _Latest]:
        copy = self._copy
        if copy is not None and copy[0] == held:
            return copy[1], copy[2]
        usage: dict[str, dict[str, dict[str, int]]] = {}
        for pod, c in held:
            per_pod = usage.get(pod)
            if per_pod is None:
                per_pod = usage[pod] = {}
            per_pod[c] = self.usage[pod][c]
        # A pod's newest stamp is one of its fresh containers' (an old one is older than ``oldest``).
        sample_ts = _Latest(self.stamps, usage)
        self._copy = (held, usage, sample_ts)
        return usage, sample_ts

    def requests(self, spec: WorkloadEvent) -> dict[str, dict[str, int]]:
        """The pod template's requests in the HPA's units (millicores, bytes), per workload spec."""
        cached = self._requests
        if cached is not None and cached[0] is spec:
            return cached[1]
        requests = {
            c: {r: (q.milli if r == "cpu" else bytes_of(q.milli)) for r, q in res.requests.items()}
            for c, res in spec.containers.items()
        }
        self._requests = (spec, requests)
        return requests

    def pods(self, spec: WorkloadEvent, usage: Mapping[str, object]) -> tuple[PodInfo, ...]:
        """The pods the HPA lists: from the spec's pod status, else every pod with a fresh sample."""
        if spec.pods is not None:
            key: object = spec.pods
        elif usage is self.usage:
            key = self.pods_version
        else:
            key = tuple(sorted(usage))
        cached = self._pods
        if cached is not None and (cached[0] is key or cached[0] == key):
            return cached[1]
        # A tuple: immutable, so the recommender may remember what it derives from it (by identity).
        if spec.pods is not None:
            pods = tuple([PodInfo(p.name, p.ready, p.phase, p.started) for p in spec.pods])
        else:
            # Without pod status in the stream every pod with samples counts as running, ready and old.
            pods = tuple([PodInfo(p, True, "Running", _LONG_AGO) for p in sorted(usage)])
        self._pods = (key, pods)
        return pods

    def inputs(
        self,
        usage: Mapping[str, Mapping[str, Mapping[str, int]]],
        requests: Mapping[str, Mapping[str, int]],
        series: Mapping[str, Mapping[str | None, float]],
        sample_ts: Mapping[str, float],
    ) -> MetricInputs:
        """The tick's ``MetricInputs``: the last one again when it holds the same mappings."""
        last = self._inputs
        if (
            last is not None
            and last.pod_usage is usage
            and last.container_requests is requests
            and last.series is series
            and last.sample_ts is sample_ts
        ):
            return last
        self._inputs = MetricInputs(pod_usage=usage, container_requests=requests, series=series, sample_ts=sample_ts)
        return self._inputs


class _Latest(Mapping[str, float]):
    """Per pod, the newest of its containers' sample times, read from the stamps when asked.

    The HPA reads a pod's sample time only for a pod inside its CPU initialization period
    (``groupPods``), so it is not kept up to date per sample; this view is the same object on
    every tick, which lets ``inputs`` hand the same ``MetricInputs`` back.  ``pods`` (default: every
    pod of the stamps) limits it to the pods of a filtered copy (``HpaFeed.fresh``).
    """

    __slots__ = ("_pods", "_stamps")

    def __init__(self, stamps: dict[str, dict[str, float]], pods: Mapping[str, object] | None = None) -> None:
        self._stamps = stamps
        self._pods: Mapping[str, object] = stamps if pods is None else pods

    def __getitem__(self, pod: str) -> float:
        if pod not in self._pods:
            raise KeyError(pod)
        return max(self._stamps[pod].values())

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def __len__(self) -> int:
        return len(self._pods)
