"""Event-time order across topics: the timestamp-aligned merge behind the worker (pure; no Faust).

A workload's events arrive on up to five co-partitioned topics (``metrics``, ``workloads``,
``hpa``, ``vpa``, ``policies``), and Kafka orders nothing across topics.  The core reconciles tick
``T`` when the first event of the workload with ``ts > T`` is ingested (docs/contract.md §6) and
events of different types at the same ``ts`` commute, so the worker must ingest each workload's
events in non-decreasing ``ts``, every event with ``ts <= T`` before any with ``ts > T``.

This module does it the way Kafka Streams aligns the partitions of a task by timestamp.  For each
partition *number* ``p`` a :class:`PartitionClock` tracks, per input topic (a *source*: the event
type of a shared topic, ``type/cluster`` for a cluster's own topic, ``--input-clusters``), the
largest ``ts`` read from ``(topic, p)`` and where consumption stands against the partition's high
watermark.  A cluster's events are all on one group of five topics, the shared ones or its own, and
its bounds below are taken over that group.  A message
read later from ``(topic, p)`` carries a ``ts`` no smaller than what was read before (producers
write in event-time order: ``tandem publish`` does, collectors do), so no future event of partition
``p`` can be older than

    bound(p) = min over the input topics of (largest ts read, or +inf when caught up)

and every buffered event with ``ts <= bound(p)`` can be ingested now.  Events wait in a
per-workload *inbox* (:class:`Slot`), released in ``(ts, type, offset)`` order: ``ts`` first, the
type only to make ties deterministic (equal-``ts`` events of different types commute), the offset
for file order within one topic, exactly as ``tandem replay`` orders a file.  A topic-partition
that has not been read at all and is not known to be caught up holds everything back (bound
``-inf``): waiting is always safe, guessing is not.

The inbox is part of the persisted slot (state, inbox, and the highest offset taken per topic), so
events acknowledged to Kafka but not yet released survive a crash, and a message delivered twice
(at-least-once) is recognised by its offset and taken once.

Backpressure: topics differ in event-time density (a ``workload`` event every few hours, a
``metric`` batch every minute), and a consumer reads them at similar *message* rates, so with a
backlog the sparse topics run hours ahead in event time and their events pile up in the inboxes.
As Kafka Streams pauses a partition whose buffer is full, :meth:`Merger.throttle` names the
topic-partitions to pause (those ahead of the bound, once a partition buffers ``high`` events)
and to resume (once they are no longer ahead, or the buffer is down to ``low``).  The topic that
sets the bound is never paused, so the bound keeps moving.

Liveness: a caught-up topic-partition counts as ``+inf`` (after a short grace for what arrived
just now: :class:`PartitionClock`).  When every input of partition ``p`` is
caught up and nothing arrived for a while, :meth:`Merger.flush_idle` runs the pending tick of each
workload of ``p`` (what ``tandem replay`` does when its input ends) whose time the worker's wall
clock has passed by the idle time (live input can be quiet inside a tick's window).  Processing
time and the wall clock only decide
*when* that happens, never *what* a decision says: its content is pure event time.  The price is
that an event arriving later with ``ts <=`` an already reconciled tick (a late event) is applied to
the state without a retroactive decision, as the core does for any late event.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import orjson

from scaling.cloudevents import cloudevent, rfc3339
from scaling.errors import InvalidEvent
from scaling.events import Event, PolicyEvent, WorkloadRef, decode_event
from scaling.reconcile import flush, ingest, tick_of
from scaling.settings import Settings
from scaling.spelling import did_you_mean
from scaling.state import WorkloadState
from scaling.vocabulary import LATE, TIE_ORDER, TOPIC_OF, WATERMARK

__all__ = [
    "INF",
    "KINDS",
    "LIVE_LAG",
    "RANK",
    "Late",
    "Merger",
    "Misrouted",
    "Output",
    "PartitionClock",
    "Rejected",
    "Slot",
    "SourceClock",
    "check_routing",
    "decode_watermark",
    "partition_key",
    "policy_key",
    "source_of",
    "tombstone",
    "watermark",
]

INF = math.inf
#: Seconds behind the worker's wall clock within which a cluster's watermark counts as live
#: (a collector writes one per scrape): see :meth:`Merger.flush_idle`.
LIVE_LAG = 300.0
#: Input event types; a type's rank orders events with the same ``ts`` (any fixed order would do).
KINDS = TIE_ORDER
RANK = {kind: i for i, kind in enumerate(KINDS)}


def source_of(kind: str, cluster: str | None = None) -> str:
    """The merge's name of an input topic: its event type for a shared topic, ``type/cluster`` for a
    cluster's own (``--input-clusters``; no cluster name holds a ``/``).  The shared topics keep the
    names that slots and watermarks were persisted under before clusters had topics of their own."""
    return kind if cluster is None else f"{kind}/{cluster}"


#: An inbox entry: (ts, type rank, offset, raw JSON value, decoded event or None after a reload).
Entry = tuple[float, int, int, Any, Event | None]
_entry_order = itemgetter(0, 1, 2)
_entry_ts = itemgetter(0)


# ---------------------------------------------------------------------------------------- clocks


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


# ---------------------------------------------------------------------------------------- slots


@dataclass(slots=True)
class Slot:
    """One workload as the worker persists it: core state, unreleased inputs, offsets taken."""

    key: str
    partition: int
    state: WorkloadState
    inbox: list[Entry] = field(default_factory=list)
    #: Highest offset taken per source (:func:`source_of`; its topic-partition is the key's partition).
    seen: dict[str, int] = field(default_factory=dict)
    #: The workload's cluster writes watermarks: its events wait for them, after a rebalance too.
    marked: bool = False
    #: ``state.raw``'s values as last serialised, per input type: (that dict, its JSON).
    _raw_json: dict[str, tuple[Any, orjson.Fragment]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def new(cls, key: str, partition: int) -> Slot:
        return cls(key, partition, WorkloadState(key))

    def accept(self, kind: str, offset: int) -> bool:
        """Take ``offset`` of source ``kind`` once: False when it was taken before (a redelivery)."""
        last = self.seen.get(kind)
        if last is not None and offset <= last:
            return False
        self.seen[kind] = offset
        return True

    def ready(self, bound: float) -> list[Entry]:
        """Remove and return, in release order, the inbox entries with ``ts <= bound``."""
        inbox = self.inbox
        if not inbox:
            return inbox
        if len(inbox) > 1:
            inbox.sort(key=_entry_order)
        if inbox[-1][0] <= bound:
            self.inbox = []
            return inbox
        i = bisect_right(inbox, bound, key=_entry_ts)
        out = inbox[:i]
        del inbox[:i]
        return out

    def to_bytes(self) -> bytes:
        """The slot as the ``state`` table stores it (:meth:`from_bytes` reads it back).

        The latest input of each type (``state.raw``: the policy manifest, the workload spec, ...)
        is most of a slot and rarely changes (a policy or a workload event is seldom sent again),
        yet a live worker writes each slot once a scrape.  Its JSON is kept per type, for as long
        as ``state.raw`` holds the same dict (the core stores a new one for every input and never
        changes one in place), and spliced in as an ``orjson.Fragment``: the same bytes, without
        walking the manifest again (docs/performance.md, "The worker, eighth pass").
        """
        state = self.state.to_dict()
        raw = state["raw"]
        if raw:
            cache = self._raw_json
            spliced: dict[str, Any] = {}
            for kind, value in raw.items():
                hit = cache.get(kind)
                if hit is None or hit[0] is not value:
                    # A copy: the bytes orjson returns keep the 4 KB buffer it wrote them in (16 KB
                    # a slot, 320 MB at 20,000 workloads, measured), a copy only what it holds.
                    hit = cache[kind] = (value, orjson.Fragment(bytes(memoryview(orjson.dumps(value)))))
                spliced[kind] = hit[1]
            if len(cache) > len(spliced):
                for kind in [k for k in cache if k not in spliced]:
                    del cache[kind]
            state["raw"] = spliced
        out = {
            "v": 1,
            "partition": self.partition,
            "state": state,
            "inbox": [[e[0], e[1], e[2], e[3]] for e in self.inbox],
            "seen": self.seen,
        }
        if self.marked:
            out["marked"] = True
        return orjson.dumps(out)

    @classmethod
    def from_bytes(cls, data: bytes | str) -> Slot:
        d = orjson.loads(data)
        if d.get("v") != 1:
            raise ValueError(f"unknown slot version {d.get('v')!r}")
        state = WorkloadState.from_dict(d["state"])
        inbox: list[Entry] = [(float(e[0]), int(e[1]), int(e[2]), e[3], None) for e in d.get("inbox") or ()]
        seen = {k: int(v) for k, v in (d.get("seen") or {}).items()}
        return cls(state.key, int(d["partition"]), state, inbox, seen, bool(d.get("marked")))


# ---------------------------------------------------------------------------------------- routing


class Misrouted(InvalidEvent):
    """A valid record on a topic, key or partition it does not belong on (dead-lettered as
    ``misrouted``): the wrong type's topic, another cluster's own topic, or a key that is not its
    workload's."""


def check_routing(kind: str, key: bytes | None, event: Event) -> None:
    """An input must sit on its type's topic, keyed by its workload (docs/contract.md §1-2); a
    policy record may be keyed by its workload and policy (:func:`policy_key`)."""
    if TOPIC_OF[event.type] != kind:  # a history envelope travels on the metrics topic
        raise Misrouted("type", f"a {event.type!r} event on the topic of {kind!r} events")
    expected = event.workload.key
    if key is None:
        raise Misrouted("key", f"the message has no key; expected the workload key {expected!r}")
    if key == expected.encode():
        return
    if isinstance(event, PolicyEvent) and event.identity is not None and key == policy_key(event):
        return
    shown = key.decode("utf-8", "backslashreplace")
    if isinstance(event, PolicyEvent) and event.identity is not None:
        raise Misrouted(
            "key", f"message key {shown!r} is neither {policy_key(event).decode()!r} nor the workload key {expected!r}"
        )
    raise Misrouted("key", f"message key {shown!r} is not the event's workload key {expected!r}")


def policy_key(event: PolicyEvent) -> bytes:
    """``<workload key>#<policy identity>``: the key of a policy record on the compacted policies
    topic, one per policy, so that compaction keeps every policy of a workload and not only the
    latest one (docs/contract.md §2).  It is partitioned by :func:`partition_key`."""
    return f"{event.workload.key}#{event.identity}".encode()


def partition_key(key: bytes) -> bytes:
    """The part of a record key that chooses its partition: the workload key."""
    return key.partition(b"#")[0]


_WATERMARK_FIELDS = ("type", "cluster", "ts")


def decode_watermark(key: bytes | None, raw: Any) -> tuple[str, float]:
    """``(cluster, ts)`` of a watermark record (docs/contract.md §3a), or :class:`InvalidEvent`.

    ``{"type": "watermark", "cluster": C, "ts": T}``, keyed by the cluster's name: every event of
    cluster ``C`` with ``ts <= T`` was written to this topic-partition before this record.
    """
    if not isinstance(raw, dict):
        raise InvalidEvent("", "a watermark must be a JSON object")
    for name in raw:
        if name not in _WATERMARK_FIELDS:
            raise InvalidEvent(str(name), f"unknown field of a watermark{did_you_mean(str(name), _WATERMARK_FIELDS)}")
    cluster = raw.get("cluster")
    if not isinstance(cluster, str) or not cluster or "/" in cluster:
        raise InvalidEvent("cluster", f"expected a cluster name, got {cluster!r}")
    ts = raw.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise InvalidEvent("ts", f"expected a finite number of seconds, got {ts!r}")
    if key != cluster.encode():
        shown = "no key" if key is None else repr(key.decode("utf-8", "backslashreplace"))
        raise InvalidEvent("key", f"a watermark is keyed by its cluster {cluster!r}, got {shown}")
    return cluster, float(ts)


def watermark(cluster: str, ts: float) -> dict[str, Any]:
    """The watermark record a producer writes (:func:`decode_watermark` reads it)."""
    return {"type": WATERMARK, "cluster": cluster, "ts": ts}


def tombstone(key: bytes | None, ts: float) -> dict[str, Any]:
    """The ``policy`` event of a ``null`` message on the compacted policies topic (a deletion): of
    the policy its key names (:func:`policy_key`), or of every policy of the workload."""
    if key is None:
        raise InvalidEvent("key", "a null policy message needs the workload key")
    try:
        text = key.decode()
    except UnicodeDecodeError:
        raise InvalidEvent("key", "the key is not UTF-8") from None
    workload, _, identity = text.partition("#")
    ref = WorkloadRef.from_key(workload)
    event: dict[str, Any] = {"type": "policy", "ts": ts, "workload": ref.as_dict(), "policy": None}
    if identity:
        parts = identity.split("/")
        if len(parts) != 4 or not all(parts[:2]) or not parts[3]:
            raise InvalidEvent("key", f"{identity!r} after '#' is not a policy (group/Kind/namespace/name)")
        group, kind, namespace, name = parts
        event["deleted"] = {"apiVersion": group, "kind": kind, "namespace": namespace or "default", "name": name}
    return event


# ---------------------------------------------------------------------------------------- merger


def _when(ts: float | None) -> str:
    if ts is None or ts == -INF:
        return "not yet known on every topic"
    return rfc3339(ts)


def _cluster(key: str) -> str:
    """The cluster of a workload key ``cluster/namespace/kind/name``."""
    return key[: key.index("/")]


@dataclass(frozen=True, slots=True)
class Rejected:
    """An input the core refused when it was released (e.g. a policy that cannot run)."""

    kind: str
    partition: int
    offset: int
    key: str
    raw: Any
    error: str


@dataclass(frozen=True, slots=True)
class Late:
    """An input ingested after the tick it belongs to had been decided (its report is in the audit)."""

    kind: str
    partition: int
    offset: int
    key: str
    ts: float
    #: The tick the input belonged to, and the last tick decided when it came.
    tick: float
    decided: float
    #: The input's JSON value (for its dead letter).
    raw: Any = None

    @property
    def error(self) -> str:
        """Why it is dead-lettered (docs/contract.md §2)."""
        return (
            f"late: ts {rfc3339(self.ts)} belongs to tick {rfc3339(self.tick)}, already decided through "
            f"{rfc3339(self.decided)}; applied without a retroactive decision"
        )


@dataclass(slots=True)
class Output:
    """What a release or a flush produced: (workload key, emitted kind, event), rejections, late inputs."""

    emitted: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    late: list[Late] = field(default_factory=list)

    def extend(self, other: Output) -> None:
        self.emitted.extend(other.emitted)
        self.rejected.extend(other.rejected)
        self.late.extend(other.late)

    def __bool__(self) -> bool:
        return bool(self.emitted or self.rejected)


class Merger:
    """The slots and clocks of the partitions one worker owns, and the release/flush rules.

    Drivers call :meth:`offer` for every accepted message (and :meth:`observe` for the others),
    then :meth:`release` for each partition they touched, and :meth:`flush_idle` from a timer; they
    persist the slots :meth:`take_writes` names and publish what was returned.
    """

    def __init__(
        self,
        settings: Settings,
        kinds: Iterable[str] = KINDS,
        *,
        high: int = 1000,
        low: int = 250,
        grace: float = 0.0,
        clusters: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self.kinds = tuple(kinds)
        #: Clusters with input topics of their own (``--input-clusters``; :class:`PartitionClock`).
        self.clusters = tuple(clusters)
        self.grace = grace
        self.high = high
        self.low = low
        self.slots: dict[str, Slot] = {}
        self.clocks: dict[int, PartitionClock] = {}
        #: Slots changed by an input (offered or ingested) since they were last written: the
        #: messages that made those changes may be acknowledged only once these are written.
        self.dirty: set[str] = set()
        #: Slots changed only by an idle flush since they were last written.  Their inputs are in
        #: the written state already, so after a crash the same ticks are decided again from it,
        #: with the same ids (event time only); drivers may write them with the slot's next input
        #: rather than at once, one write per scrape instead of two (docs/performance.md).
        self.decided: set[str] = set()
        #: Processing time at which :attr:`decided` last went from empty to non-empty.
        self.decided_since: float | None = None
        #: Input types paused per partition by :meth:`throttle`.
        self.paused: dict[int, set[str]] = defaultdict(set)
        self._waiting: dict[int, set[str]] = defaultdict(set)  # keys with a non-empty inbox
        self._pending: dict[int, set[str]] = defaultdict(set)  # keys with a pending tick
        self._buffered: dict[int, int] = defaultdict(int)  # inbox entries per partition
        #: Watermarks reloaded for partitions whose clock does not exist yet: cluster -> type -> (ts, offset).
        self._marked: dict[int, dict[str, dict[str, tuple[float, int]]]] = defaultdict(dict)
        #: Partitions whose watermarks changed since :meth:`take_marks` last returned them.
        self.marks_dirty: set[int] = set()

    # --- lifecycle --------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything (after a rebalance; the slots are reloaded from the table)."""
        self.slots.clear()
        self.clocks.clear()
        self.dirty.clear()
        self.decided.clear()
        self.decided_since = None
        self.paused.clear()
        self._waiting.clear()
        self._pending.clear()
        self._buffered.clear()
        self._marked.clear()
        self.marks_dirty.clear()

    def clock(self, partition: int, now: float) -> PartitionClock:
        c = self.clocks.get(partition)
        if c is None:
            c = self.clocks[partition] = PartitionClock(now, self.kinds, self.grace, self.clusters)
            for cluster, marks in self._marked.pop(partition, {}).items():
                c.marks.setdefault(cluster, {})
                for kind, (ts, offset) in marks.items():
                    c.restore(cluster, kind, ts, offset)
        return c

    def load_marks(self, partition: int, marks: Mapping[str, Mapping[str, Any]]) -> None:
        """Adopt a partition's watermarks as :meth:`take_marks` wrote them (after a rebalance):
        cluster -> input type -> ``[ts, offset]``; an empty mapping only says the cluster writes
        watermarks (a reloaded slot's ``marked``).

        The watermark records themselves may be behind the committed offsets and not read again:
        without them a cluster whose producer had finished would wait for ever.  Each is in force
        once this worker has read past the offset it came from (:meth:`PartitionClock.restore`).
        """
        clock = self.clocks.get(partition)
        for cluster, kinds in marks.items():
            if clock is None:
                seeds = self._marked[partition].setdefault(cluster, {})
                for kind, (ts, offset) in kinds.items():
                    if kind not in seeds or ts > seeds[kind][0]:
                        seeds[kind] = (float(ts), int(offset))
                continue
            clock.marks.setdefault(cluster, {})
            for kind, (ts, offset) in kinds.items():
                clock.restore(cluster, kind, float(ts), int(offset))

    def story(self, partition: int) -> str:
        """Where ``partition``'s ordering stands, in words, for the log after an assignment."""
        clock = self.clocks.get(partition)
        keys = sum(1 for s in self.slots.values() if s.partition == partition)
        head = f"{keys} workload(s), {self.buffered(partition)} event(s) waiting"
        if clock is None or not clock.marks:
            return head + ", no watermarks yet"
        bounds = ", ".join(f"{c} {_when(clock.cluster_bound(c))}" for c in sorted(clock.marks))
        return f"{head}, watermark bound {bounds}"

    def take_marks(self) -> dict[int, dict[str, dict[str, list[float]]]]:
        """The watermarks of the partitions where they changed, ``[ts, offset]`` per cluster and
        input type, to persist before acknowledging the records that carried them; no longer
        changed afterwards."""
        out: dict[int, dict[str, dict[str, list[float]]]] = {}
        for p in sorted(self.marks_dirty):
            clock = self.clocks.get(p)
            if clock is None or not clock.marks:
                continue
            snapshot: dict[str, dict[str, list[float]]] = {}
            for c, kinds in clock.marks.items():
                offsets = clock.mark_offsets.get(c, {})
                entry = {k: [ts, offsets[k]] for k, ts in kinds.items() if k in offsets}
                for k, (ts, offset) in clock.restored.get(c, {}).items():
                    entry.setdefault(k, [ts, offset])  # not in force here yet: kept for the next owner
                snapshot[c] = entry
            out[p] = snapshot
        self.marks_dirty.clear()
        return out

    def load(self, slot: Slot) -> None:
        """Adopt a slot recovered from the table."""
        self.slots[slot.key] = slot
        if slot.inbox:
            self._waiting[slot.partition].add(slot.key)
            self._buffered[slot.partition] += len(slot.inbox)
        if slot.state.pending_tick is not None:
            self._pending[slot.partition].add(slot.key)
        if slot.marked:
            # Its cluster writes watermarks: until the new owner has read one on every topic, the
            # cluster's events wait (bound -inf), rather than being released by the caught-up guess.
            self.load_marks(slot.partition, {_cluster(slot.key): {}})

    def partition_keys(self, partition: int) -> Iterator[str]:
        return (k for k, s in self.slots.items() if s.partition == partition)

    # --- input ------------------------------------------------------------------------------

    def observe(self, partition: int, kind: str, offset: int, ts: float | None, now: float) -> None:
        """A message that is not offered (rejected, or tandem's own recommendation): offsets only."""
        self.clock(partition, now).observe(kind, offset, ts)

    def mark(self, partition: int, kind: str, offset: int, cluster: str, ts: float, now: float) -> None:
        """A producer's watermark read from ``(kind's topic, partition)`` (:func:`decode_watermark`)."""
        clock = self.clock(partition, now)
        clock.mark(kind, offset, cluster, ts)
        if clock.advanced:
            self.marks_dirty.add(partition)

    def offer(self, partition: int, kind: str, offset: int, raw: Any, event: Event, now: float) -> bool:
        """Buffer a validated input read from source ``kind`` (:func:`source_of`: its event type on a
        shared topic); False for a redelivered one (already taken)."""
        self.clock(partition, now).observe(kind, offset, event.ts, now)
        key = event.workload.key
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = Slot.new(key, partition)
        elif slot.partition != partition:
            raise Misrouted(
                "key",
                f"workload {key!r} lives on partition {slot.partition} but arrived on partition {partition}: "
                "every producer must partition by the workload key with Kafka's default partitioner",
            )
        if not slot.accept(kind, offset):
            return False
        slot.inbox.append((event.ts, RANK[TOPIC_OF[event.type]], offset, raw, event))
        self._waiting[partition].add(key)
        self._buffered[partition] += 1
        self.dirty.add(key)
        return True

    def buffered(self, partition: int) -> int:
        """Inbox entries of ``partition`` waiting for the bound."""
        return self._buffered.get(partition, 0)

    # --- output -----------------------------------------------------------------------------

    def release(self, partition: int, highwaters: Mapping[str, int | None], now: float | None = None) -> Output:
        """Ingest, per workload in order, the buffered events of ``partition`` below its bound.

        A workload of a cluster that writes watermarks follows its cluster's bound
        (:meth:`PartitionClock.cluster_bound`), and its pending tick runs as soon as that bound
        reaches it, as replay runs it when the input ends; the others follow the partition's
        bound, where ``now`` (processing time) applies the grace of caught-up inputs.
        An input older than a tick already decided is ingested all the same and reported
        (:class:`Late`, and a ``dev.tandem.late.v1`` CloudEvent in the audit).
        """
        out = Output()
        clock = self.clocks.get(partition)
        if clock is None:
            return out
        waiting = self._waiting.get(partition)
        advanced = clock.advanced
        if not waiting and not advanced:
            return out
        pending = self._pending[partition]
        keys: Iterable[str]
        if advanced:
            clock.advanced = set()
            keys = set(waiting) if waiting else set()
            keys.update(k for k in pending if _cluster(k) in advanced)
            keys = sorted(keys)
        else:
            keys = sorted(waiting) if waiting else ()
        settings = self.settings
        emitted = out.emitted
        drained = []
        legacy: float | None = None
        groups = clock.groups
        # The partition's bound over the shared topics, per cluster with its own topics over those.
        legacies: dict[str, float] = {}
        marks = clock.marks
        bounds: dict[str, float | None] = {}  # per cluster, once per release (a fleet is few clusters)
        for key in keys:
            slot = self.slots[key]
            cbound = None
            if marks:
                cluster = _cluster(key)
                if cluster in bounds:
                    cbound = bounds[cluster]
                else:
                    cbound = bounds[cluster] = clock.cluster_bound(cluster)
            if cbound is None:
                if len(groups) > 1 and (own := _cluster(key)) in groups:
                    if own not in legacies:
                        legacies[own] = clock.bound(highwaters, now, groups[own])
                    bound = legacies[own]
                else:
                    if legacy is None:
                        legacy = clock.bound(highwaters, now, groups[None] if len(groups) > 1 else None)
                    bound = legacy
            else:
                bound = cbound
                slot.marked = True
            if bound == -INF:
                continue
            state = slot.state
            entries = slot.ready(bound)
            if entries:
                self._buffered[partition] -= len(entries)
                self.dirty.add(key)
                for ts, rank, offset, raw, event in entries:
                    decided = state.last_tick
                    try:
                        if event is None:
                            event = decode_event(raw)
                        produced = ingest(state, event, raw, settings)
                    except InvalidEvent as exc:
                        out.rejected.append(Rejected(KINDS[rank], partition, offset, key, raw, str(exc)))
                        continue
                    except Exception as exc:  # a bug must not stop the worker (docs/architecture.md invariant 5)
                        out.rejected.append(
                            Rejected(
                                KINDS[rank], partition, offset, key, raw, f"internal error: {type(exc).__name__}: {exc}"
                            )
                        )
                        continue
                    if decided is not None and ts <= decided:
                        # Applied after its tick was decided (a refused one is dead-lettered instead).
                        late = Late(
                            KINDS[rank], partition, offset, key, ts, tick_of(ts, settings.sync_period), decided, raw
                        )
                        self._late(out, late)
                    for kind, ev in produced:
                        emitted.append((key, kind, ev))
                if not slot.inbox:
                    drained.append(key)
            tick = state.pending_tick
            if cbound is not None and tick is not None and tick <= cbound:
                # Every event of the tick's window is in: decide it now, as replay does at the end
                # of its input.  Written before the watermark that allowed it is acknowledged
                # (dirty, not ``decided``): a successor may never read that watermark again.
                for kind, ev in flush(state, settings):
                    emitted.append((key, kind, ev))
                self.dirty.add(key)
            if state.pending_tick is not None:
                pending.add(key)
            else:
                pending.discard(key)
        if waiting and drained:
            waiting.difference_update(drained)
        return out

    def _late(self, out: Output, late: Late) -> None:
        out.late.append(late)
        ref = WorkloadRef.from_key(late.key)
        data = {
            "tick": late.tick,
            "decided_through": late.decided,
            "input": {"type": late.kind, "ts": late.ts, "partition": late.partition, "offset": late.offset},
            "workload": ref.as_dict(),
        }
        out.emitted.append((late.key, "audit", cloudevent(LATE, ref.cluster, late.key, late.ts, data)))

    def flush_idle(
        self,
        partition: int,
        highwaters: Mapping[str, int | None],
        now: float,
        after: float,
        wall: float | None = None,
    ) -> Output:
        """Run the pending ticks of ``partition`` once it is caught up and idle (see the module doc).

        ``wall`` (the worker's wall clock, epoch seconds) is a watermark with an allowed lateness
        of ``after``: a pending tick ``T`` runs only once ``wall >= T + after``.  Live input is
        stamped with the collector's clock, so before that instant the rest of ``T``'s window may
        still be on its way (a scrape every 5 s inside a 15 s tick is quiet for longer than the
        idle flush waits), and flushing would decide ``T`` from part of its window, unlike replay.
        A recorded stream's ticks are all in the past, so the gate never holds it back.  Like the
        idle detector, the wall clock decides only *when* a tick runs, never *what* it decides.
        ``None`` (tests, embedded drivers) flushes every pending tick.
        """
        clock = self.clocks.get(partition)
        if clock is None or not clock.idle(now, highwaters, after):
            return Output()
        out = self.release(partition, highwaters, now)
        pending = self._pending.get(partition)
        if not pending:
            return out
        held = []
        marks = clock.marks
        for key in sorted(pending):
            slot = self.slots[key]
            tick = slot.state.pending_tick
            if marks and _cluster(key) in marks:
                # Its ticks run by its watermarks (release).  Only a *live* producer whose
                # watermarks stopped (a collector that stopped or died) lets the wall clock decide
                # its last tick: its watermarks followed the wall clock, and whatever it sends
                # again is stamped later than the gate below.  A recording's watermarks are in the
                # past: its last tick waits for ``tandem publish``'s last round, never for a guess.
                mark = clock.cluster_bound(_cluster(key))
                if wall is None or mark is None or mark < wall - LIVE_LAG:
                    held.append(key)
                    continue
            if wall is not None and tick is not None and wall < tick + after:
                held.append(key)
                continue
            for kind, ev in flush(slot.state, self.settings):
                out.emitted.append((key, kind, ev))
            if not self.decided:
                self.decided_since = now
            self.decided.add(key)
        pending.clear()
        pending.update(held)
        return out

    def throttle(self, partition: int, highwaters: Mapping[str, int | None]) -> tuple[list[str], list[str]]:
        """Backpressure (see the module doc): the input types of ``partition`` to pause and to resume.

        Where clusters write watermarks, an input's progress is the smallest of the watermarks
        read from it of the clusters whose events it carries (an input without one holds them all
        back), and the bound of a group of inputs (the shared topics, or a cluster's own) the
        smallest progress in it: the input a watermark is awaited from is never paused, or nothing
        would move.  A group no cluster with watermarks writes to bounds nothing.
        """
        clock = self.clocks.get(partition)
        if clock is None:
            return [], []
        paused = self.paused[partition]
        buffered = self._buffered.get(partition, 0)
        groups = clock.groups
        progress: dict[str, float | None]
        #: source -> the bound of its group
        bound_of: dict[str, float] = {}
        if clock.marks:
            progress = {}
            for group, sources in groups.items():
                writers = [m for c, m in clock.marks.items() if c == group or (group is None and c not in groups)]
                if not writers:
                    for source in sources:
                        progress[source] = None
                        bound_of[source] = INF
                    continue
                for source in sources:
                    progress[source] = min(m.get(source, -INF) for m in writers)
                low = min(p for p in (progress[source] for source in sources) if p is not None)
                for source in sources:
                    bound_of[source] = low
        else:
            progress = {kind: src.last_ts for kind, src in clock.sources.items()}
            structural = clock.bound(highwaters)
            bound_of = dict.fromkeys(clock.sources, structural)
        resume = []
        for kind in sorted(paused):
            last = progress.get(kind)
            if buffered <= self.low or last is None or last <= bound_of.get(kind, INF):
                resume.append(kind)
        paused.difference_update(resume)
        pause = []
        if buffered >= self.high:
            for kind, src in clock.sources.items():
                last = progress[kind]
                bound = bound_of[kind]
                if bound == INF or kind in paused or last is None or last <= bound:
                    continue
                if src.caught_up(highwaters.get(kind)):
                    continue
                pause.append(kind)
            paused.update(pause)
        return pause, resume

    def has_pending(self, partition: int) -> bool:
        return bool(self._pending.get(partition) or self._waiting.get(partition))

    def take_writes(self, everything: bool) -> set[str]:
        """The slots to write now, no longer dirty afterwards: :attr:`dirty`, and :attr:`decided` if ``everything``.

        A decided slot that is also dirty is written either way (its next input came first).
        """
        keys = self.dirty
        self.dirty = set()
        if everything:
            keys |= self.decided
            self.decided.clear()
        else:
            self.decided -= keys
        if not self.decided:
            self.decided_since = None
        return keys

    def released(self) -> bool:
        """No partition holds an event in an inbox: everything offered has been ingested."""
        return not any(self._waiting.values())
