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

Four modules, one job each: :mod:`streams.watermarks` (the clocks and their bounds),
:mod:`streams.inbox` (the slots and their release order), :mod:`streams.records` (what an input
record must be) and this one (the merge: offer, release, flush, backpressure).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaling.cloudevents import cloudevent, rfc3339
from scaling.errors import InvalidEvent
from scaling.events import Event, WorkloadRef, decode_event
from scaling.reconcile import flush, ingest, tick_of
from scaling.settings import Settings
from scaling.state import WorkloadState
from scaling.vocabulary import LATE, TOPIC_OF
from streams.inbox import Entry, Slot
from streams.records import (
    Misrouted,
    check_routing,
    decode_watermark,
    partition_key,
    policy_key,
    tombstone,
    watermark,
)
from streams.watermarks import INF, KINDS, PartitionClock, ReleaseBounds, SourceClock, cluster_of, source_of

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

#: Seconds behind the worker's wall clock within which a cluster's watermark counts as live
#: (a collector writes one per scrape): see :meth:`Merger.flush_idle`.
LIVE_LAG = 300.0
#: The rank of an input type: it orders events with the same ``ts`` (:data:`streams.watermarks.KINDS`).
RANK = {kind: i for i, kind in enumerate(KINDS)}


def _when(ts: float | None) -> str:
    if ts is None or ts == -INF:
        return "not yet known on every topic"
    return rfc3339(ts)


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
            self.load_marks(slot.partition, {cluster_of(slot.key): {}})

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
            keys.update(k for k in pending if cluster_of(k) in advanced)
            keys = sorted(keys)
        else:
            keys = sorted(waiting) if waiting else ()
        drained = []
        bounds = ReleaseBounds(clock, highwaters, now)
        for key in keys:
            slot = self.slots[key]
            cbound, bound = bounds.of(key)
            if cbound is not None:
                slot.marked = True
            if bound == -INF:
                continue
            state = slot.state
            entries = slot.ready(bound)
            if entries:
                self._buffered[partition] -= len(entries)
                self.dirty.add(key)
                self._ingest(out, partition, key, state, entries)
                if not slot.inbox:
                    drained.append(key)
            tick = state.pending_tick
            if cbound is not None and tick is not None and tick <= cbound:
                # Every event of the tick's window is in: decide it now, as replay does at the end
                # of its input.  Written before the watermark that allowed it is acknowledged
                # (dirty, not ``decided``): a successor may never read that watermark again.
                for kind, ev in flush(state, self.settings):
                    out.emitted.append((key, kind, ev))
                self.dirty.add(key)
            if state.pending_tick is not None:
                pending.add(key)
            else:
                pending.discard(key)
        if waiting and drained:
            waiting.difference_update(drained)
        return out

    def _ingest(self, out: Output, partition: int, key: str, state: WorkloadState, entries: list[Entry]) -> None:
        """Ingest released ``entries`` of workload ``key`` in order: what the core emits, what it
        refuses (:class:`Rejected`), what came after its tick was decided (:class:`Late`)."""
        settings = self.settings
        emitted = out.emitted
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
                    Rejected(KINDS[rank], partition, offset, key, raw, f"internal error: {type(exc).__name__}: {exc}")
                )
                continue
            if decided is not None and ts <= decided:
                # Applied after its tick was decided (a refused one is dead-lettered instead).
                late = Late(KINDS[rank], partition, offset, key, ts, tick_of(ts, settings.sync_period), decided, raw)
                self._late(out, late)
            for kind, ev in produced:
                emitted.append((key, kind, ev))

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
            if marks and cluster_of(key) in marks:
                # Its ticks run by its watermarks (release).  Only a *live* producer whose
                # watermarks stopped (a collector that stopped or died) lets the wall clock decide
                # its last tick: its watermarks followed the wall clock, and whatever it sends
                # again is stamped later than the gate below.  A recording's watermarks are in the
                # past: its last tick waits for ``tandem publish``'s last round, never for a guess.
                mark = clock.cluster_bound(cluster_of(key))
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
