"""The watermark bookkeeping of the worker's merge (:mod:`streams.merge`): per partition number, what
is known of each input topic-partition (the largest ``ts`` read, where consumption stands against
the high watermark) and the producers' watermarks, and the bounds below which no event can still
come (:meth:`PartitionClock.bound`, :meth:`PartitionClock.cluster_bound`).  Pure; no Faust.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scaling.vocabulary import TIE_ORDER

__all__ = ["INF", "KINDS", "PartitionClock", "ReleaseBounds", "SourceClock", "cluster_of", "source_of"]

INF = math.inf
#: Input event types; a type's rank orders events with the same ``ts`` (any fixed order would do).
KINDS = TIE_ORDER


def source_of(kind: str, cluster: str | None = None) -> str:
    """The merge's name of an input topic: its event type for a shared topic, ``type/cluster`` for a
    cluster's own (``--input-clusters``; no cluster name holds a ``/``).  The shared topics keep the
    names that slots and watermarks were persisted under before clusters had topics of their own."""
    return kind if cluster is None else f"{kind}/{cluster}"


@dataclass(slots=True)
class SourceClock:
    """What is known of one input topic-partition ``(topic, p)``."""

    #: Largest event time read from it (a watermark: it never goes back).
    last_ts: float | None = None
    #: The offset after the last message read from it, None before the first one.
    next_offset: int | None = None
    #: Where consumption started after the last assignment (committed offset, or the log start).
    start_offset: int | None = None

    @property
    def position(self) -> int | None:
        return self.next_offset if self.next_offset is not None else self.start_offset

    def caught_up(self, highwater: int | None) -> bool:
        """Everything up to the high watermark has been read (unknown -> not caught up)."""
        pos = self.position
        return highwater is not None and pos is not None and pos >= highwater


class PartitionClock:
    """The watermarks of one partition number across the input topics (sources, :func:`source_of`).

    ``clusters`` are the clusters with input topics of their own: each is a group of five sources
    whose events and watermarks are its alone; every other cluster's are on the shared group.

    ``grace`` (processing-time seconds, Kafka Streams' ``max.task.idle.ms``): a caught-up input is
    judged so from the consumer's latest fetch, and one producer's records of one instant reach the
    broker's topics in separate batches, in any order.  So a caught-up input counts as ``+inf`` only
    for events that arrived ``grace`` seconds ago or earlier; for newer ones it counts as its own
    largest ``ts`` (or, if larger, the largest ``ts`` of those older arrivals: by then every record
    its producer wrote before them has landed and been fetched).  Producers write in event-time
    order, so nothing is released ahead of a record of the same partition that was merely late.
    """

    __slots__ = (
        "_recent",
        "advanced",
        "grace",
        "groups",
        "last_arrival",
        "mark_offsets",
        "marks",
        "restored",
        "settled",
        "sources",
    )

    def __init__(
        self, now: float, kinds: Iterable[str] = KINDS, grace: float = 0.0, clusters: Iterable[str] = ()
    ) -> None:
        kinds = tuple(kinds)
        #: Cluster (None: every cluster without topics of its own) -> the sources its events are on.
        self.groups: dict[str | None, tuple[str, ...]] = {None: kinds}
        for c in clusters:
            self.groups[c] = tuple(source_of(k, c) for k in kinds)
        self.sources: dict[str, SourceClock] = {s: SourceClock() for group in self.groups.values() for s in group}
        #: Processing time (monotonic) of the last input that may change a decision.
        self.last_arrival = now
        self.grace = grace
        #: (arrival, largest ts) per arrival time within the last ``grace`` seconds, oldest first.
        self._recent: deque[tuple[float, float]] = deque()
        #: The largest ``ts`` of an input that arrived ``grace`` seconds ago or earlier.
        self.settled = -INF
        #: Producers' watermarks: cluster -> source -> the largest watermark read from that
        #: topic-partition (every event of the cluster with ``ts <=`` it was written before it).
        self.marks: dict[str, dict[str, float]] = {}
        #: Where each of those watermarks was read: cluster -> source -> offset.
        self.mark_offsets: dict[str, dict[str, int]] = {}
        #: Watermarks persisted by a previous owner, (ts, offset) per cluster and source: in
        #: force once this worker's position on that input has passed the offset it was read at.
        self.restored: dict[str, dict[str, tuple[float, int]]] = {}
        #: Clusters whose :meth:`cluster_bound` may have risen since the merger last looked.
        self.advanced: set[str] = set()

    def observe(self, kind: str, offset: int, ts: float | None, now: float | None = None) -> None:
        """A message at ``offset`` was read from ``(kind's topic, p)`` (``kind`` a source,
        :func:`source_of`); ``ts`` None for a rejected one.

        ``now`` (processing time) marks an arrival for the idle detector; pass None for messages
        that cannot change a decision (rejected input, tandem's own recommendations).
        """
        src = self.sources[kind]
        if src.next_offset is None or offset >= src.next_offset:
            src.next_offset = offset + 1
            if self.restored:
                self.promote(kind)
        if ts is not None and (src.last_ts is None or ts > src.last_ts):
            src.last_ts = ts
        if now is not None:
            self.last_arrival = now
            if ts is not None and self.grace > 0:
                recent = self._recent
                # A batch's messages share one ``now``: one entry per arrival time, its largest ts.
                if recent and recent[-1][0] == now:
                    if ts > recent[-1][1]:
                        recent[-1] = (now, ts)
                else:
                    recent.append((now, ts))

    def mark(self, kind: str, offset: int, cluster: str, ts: float) -> None:
        """A watermark of ``cluster`` at ``offset`` of ``(kind's topic, p)``: its events there up to ``ts`` are read."""
        src = self.sources[kind]
        if src.next_offset is None or offset >= src.next_offset:
            src.next_offset = offset + 1
        self._set_mark(cluster, kind, ts, offset)
        if self.restored:
            self.promote(kind)

    def _set_mark(self, cluster: str, kind: str, ts: float, offset: int) -> None:
        marks = self.marks.get(cluster)
        if marks is None:
            marks = self.marks[cluster] = {}
        last = marks.get(kind)
        if last is None or ts > last:
            marks[kind] = ts
            self.mark_offsets.setdefault(cluster, {})[kind] = offset
            self.advanced.add(cluster)

    def restore(self, cluster: str, kind: str, ts: float, offset: int) -> None:
        """A watermark a previous owner read at ``offset`` (:meth:`Merger.load_marks`).

        Not in force at once: the previous owner may have read past the group's committed offset
        before it died, and this worker reads again from there.  Until its own position passes
        ``offset``, events written before the watermark may still be on their way to it (issue
        #28's frozen-publisher runs: a restored watermark released an hpa event before the metric
        of an earlier instant was read again, which then came late).  One of a source this
        worker does not read (the topic layout changed since) is forgotten."""
        self.marks.setdefault(cluster, {})
        if kind not in self.sources:
            return
        have = self.restored.setdefault(cluster, {}).get(kind)
        if have is None or ts > have[0]:
            self.restored[cluster][kind] = (ts, offset)
        self.promote(kind)

    def promote(self, kind: str) -> None:
        """Put in force the restored watermarks of ``kind``'s input that this worker has read past."""
        pos = self.sources[kind].position
        if pos is None:
            return
        for cluster in [c for c, kinds in self.restored.items() if kind in kinds]:
            ts, offset = self.restored[cluster][kind]
            if pos > offset:
                del self.restored[cluster][kind]
                if not self.restored[cluster]:
                    del self.restored[cluster]
                self._set_mark(cluster, kind, ts, offset)

    def cluster_bound(self, cluster: str) -> float | None:
        """No event of ``cluster`` read from now on in this partition is older than this; None
        for a cluster whose producer writes no watermarks (its events follow :meth:`bound`).

        The minimum over the cluster's input topics (its own five, or the shared ones) of its
        watermark in each: Kafka keeps a topic-partition in the order its producer wrote it, so
        once a watermark has been read from every topic-partition, every event of the cluster up
        to the smallest of them has been read too.  No processing time and no high watermark is
        involved: the bound is a function of the records read, so a worker starved of CPU, or one
        that took the partition over, releases exactly what a calm one releases (issue #28).
        """
        marks = self.marks.get(cluster)
        if marks is None:
            return None
        group = self.groups.get(cluster)
        if group is None:
            group = self.groups[None]
        low = INF
        for source in group:
            ts = marks.get(source)
            if ts is None:
                return -INF
            if ts < low:
                low = ts
        return low

    def set_start(self, kind: str, offset: int | None) -> None:
        self.sources[kind].start_offset = offset
        if self.restored:
            self.promote(kind)

    def bound(
        self, highwaters: Mapping[str, int | None], now: float | None = None, sources: Iterable[str] | None = None
    ) -> float:
        """No event read from now on from ``sources`` (default: every input of this partition) has
        a ``ts`` below this.

        With ``now`` the grace applies to caught-up inputs (see the class); without it, the bound
        is the structural one, which backpressure uses (a grace ends by itself and must not pause
        the inputs that run ahead of it).
        """
        caught = INF
        if now is not None and self.grace > 0:
            recent = self._recent
            cutoff = now - self.grace
            while recent and recent[0][0] <= cutoff:
                ts = recent.popleft()[1]
                if ts > self.settled:
                    self.settled = ts
            if recent:
                caught = self.settled
        b = INF
        every = self.sources
        for kind in every if sources is None else sources:
            src = every[kind]
            if src.caught_up(highwaters.get(kind)):
                if caught != INF:
                    last = src.last_ts
                    limit = caught if last is None or last < caught else last
                    if limit < b:
                        b = limit
                continue
            if src.last_ts is None:
                return -INF
            if src.last_ts < b:
                b = src.last_ts
        return b

    def idle(self, now: float, highwaters: Mapping[str, int | None], after: float) -> bool:
        """Every input is caught up and nothing arrived for ``after`` seconds (and the grace)."""
        return now - self.last_arrival >= max(after, self.grace) and self.bound(highwaters) == INF


def cluster_of(key: str) -> str:
    """The cluster of a workload key ``cluster/namespace/kind/name``."""
    return key[: key.index("/")]


class ReleaseBounds:
    """The bounds of one release of a partition (:meth:`streams.merge.Merger.release`), each worked
    out once per release (a fleet is few clusters): a workload of a cluster that writes watermarks
    follows its cluster's bound (:meth:`PartitionClock.cluster_bound`); the others the partition's
    bound over their cluster's own topics, or over the shared ones, where ``now`` (processing time)
    applies the grace of caught-up inputs."""

    __slots__ = ("clock", "highwaters", "legacies", "legacy", "marked", "now")

    def __init__(self, clock: PartitionClock, highwaters: Mapping[str, int | None], now: float | None) -> None:
        self.clock = clock
        self.highwaters = highwaters
        self.now = now
        #: The partition's bound over the shared topics.
        self.legacy: float | None = None
        #: Per cluster with topics of its own, the partition's bound over those.
        self.legacies: dict[str, float] = {}
        #: Per cluster, its watermark bound (None: its producer writes none).
        self.marked: dict[str, float | None] = {}

    def of(self, key: str) -> tuple[float | None, float]:
        """``(the cluster's watermark bound or None, the bound)`` of the workload ``key``."""
        clock = self.clock
        cbound = None
        if clock.marks:
            cluster = cluster_of(key)
            if cluster in self.marked:
                cbound = self.marked[cluster]
            else:
                cbound = self.marked[cluster] = clock.cluster_bound(cluster)
        if cbound is not None:
            return cbound, cbound
        groups = clock.groups
        if len(groups) > 1 and (own := cluster_of(key)) in groups:
            if own not in self.legacies:
                self.legacies[own] = clock.bound(self.highwaters, self.now, groups[own])
            return None, self.legacies[own]
        if self.legacy is None:
            self.legacy = clock.bound(self.highwaters, self.now, groups[None] if len(groups) > 1 else None)
        return None, self.legacy
