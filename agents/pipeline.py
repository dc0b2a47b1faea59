"""The worker's agent: Kafka input topics -> decision core -> audit, actuator, hpa/vpa, dead letters.

One agent reads the five input topics (docs/contract.md §2) in batches.  Per batch it

1. decodes and validates each message (``schemas.codec``); a bad one goes to ``<prefix>deadletter``
   as ``{"topic", "partition", "offset", "key", "value", "error"}`` and the worker carries on;
2. buffers the good ones in their workload's inbox and releases, in event-time order, what the
   timestamp-aligned merge of :mod:`streams.merge` allows, through ``scaling.reconcile.ingest``;
3. publishes what the core emitted (audit CloudEvents to ``audit``, decisions that are not dry runs
   also to ``actuator``, tandem's own recommendations to ``hpa``/``vpa``), keyed by workload, and
   **waits for the broker's acknowledgement**;
4. at the next *checkpoint* writes each workload slot an input changed since the last one (state,
   inbox, offsets taken; a slot only a tick's decision changed waits for its next input, see
   :meth:`Pipeline._checkpoint`) to the ``state`` table and waits until the broker has acknowledged those
   changelog records; only then are the batches' messages acknowledged to Faust, and their
   offsets committed.  A checkpoint comes as soon as everything taken has been released from
   the inboxes (the end of a scrape's burst), and at the latest ``persist_interval`` seconds after
   the last one, from the agent or the timer.

So a crash anywhere repeats work but loses nothing (at-least-once): outputs are published before the
state that records them, and the state before the offsets.  Why checkpoints and not a write per
batch: a workload's scrape arrives on two or three topics, in different batches, and its tick is
then released and run by timer rounds, so writing after every batch and round wrote each slot
about three times per scrape, and those writes (a few KB each, serialised, sent and acknowledged)
were the larger part of a live worker's CPU (docs/performance.md, "the worker").  A checkpoint
writes each slot once however often it changed; the messages wait unacknowledged meanwhile, so
nothing is committed that a written state does not cover.  Repeated decisions carry the same id
(a content hash), so consumers dedupe by id; repeated inputs are recognised by their offsets.  Faust's
exactly-once mode is deliberately not used (see docs/worker.md).

A timer releases what became releasable without new input (a partition caught up) and runs the
*idle flush*: when every input topic-partition of a partition is caught up and nothing arrived for
``idle_flush`` seconds of processing time, each of its workloads with a pending tick is reconciled
(``scaling.reconcile.flush``), as ``tandem replay`` does at the end of its input, once the wall
clock has passed the tick by ``idle_flush`` seconds (live input may be quiet inside a tick's window;
:meth:`streams.merge.Merger.flush_idle`).  Processing time
only decides when this happens; what a decision says is pure event time.  An event that arrives
later with ``ts <=`` an already reconciled tick is a late event: applied to the state, without a
retroactive decision.

Topic-partitions that run ahead in event time are paused (in aiokafka, see :meth:`Pipeline._fetch_control`)
while their partition's inboxes are full, so the inboxes, and the table records that hold them, stay small.

Workload slots live in a process-local cache (the :class:`~streams.merge.Merger`), loaded from the
table after every rebalance once Faust has recovered it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from aiokafka.structs import TopicPartition
from faust.types import TP

from agents.fence import (
    ConfirmedTable,
    FetchWatch,
    aiokafka_fetch_state,
    committed_offsets,
    current_event,
    delay_changelog_sends,
    delay_seek_after_recovery,
    faust_fetch_state,
    fetcher_state,
    hang_one_fetch,
    in_consumer_thread,
    on_wait_empty,
    take_batches,
)
from agents.heap import PATIENCE, HeapPolicy
from agents.settings import MAX_SLOT_BYTES, STATE_TABLE, WorkerSettings
from agents.stall import StallWatch
from scaling.cloudevents import BLOCKED, DECISION, rfc3339
from scaling.errors import InvalidEvent
from scaling.events import decode_event
from scaling.vocabulary import WATERMARK
from schemas.codec import encode, loads
from streams.deadletter import deadletter_record
from streams.merge import (
    Merger,
    Misrouted,
    Output,
    Rejected,
    Slot,
    check_routing,
    decode_watermark,
    source_of,
    tombstone,
)
from streams.signing import InputRefused, sign_input
from streams.topics import actuator_topic, input_topic, input_topics, topic_name

__all__ = ["MAX_SLOT_BYTES", "Pipeline", "install"]

#: Audit event types an applier only reports (policy status, Events), never applies; a dry-run
#: decision is one too (its ``dry_run`` flag says so).
STATUS_ONLY = frozenset({BLOCKED, DECISION})
#: The state table's key of a partition's watermarks (``MARKS_KEY + b"3"``); no workload key starts with "~".
MARKS_KEY = b"~watermarks/"

#: Input types whose topics have no offset gaps (time retention, non-transactional producers);
#: workloads and policies are compacted, so gaps there are normal.
_GAPLESS = frozenset({"metric", "hpa", "vpa"})

#: Seconds after an assignment during which a missing committed offset is asked for again rather
#: than taken for "never committed" (see :meth:`Pipeline._learn_starts`).
STARTS_GRACE = 5.0

log = logging.getLogger("tandem.worker")

#: Input types that tandem also produces (its own recommendations, ``"source": "tandem"``).
_OWN = frozenset({"hpa", "vpa"})
#: How often the timer looks for releasable inboxes and idle partitions (seconds).
TIMER_INTERVAL = 0.25
#: Seconds the checkpoint before a rebalance or a stop may take before it is given up.
CHECKPOINT_WAIT = 30.0
#: Seconds a slot changed only by an idle flush may wait for its next input before it is written
#: by itself (see :meth:`Pipeline._checkpoint`); four scrapes at the collector's 15 s cadence.
DECIDED_WAIT = 60.0
#: No batch for this long (and no timer round): the worker is idle, a moment for the full
#: garbage collection (agents/heap.py).
IDLE_GC_AFTER = 0.5
#: Slots serialised between two yields to the event loop in a checkpoint's write (see
#: :meth:`Pipeline._write_slots`).
WRITE_CHUNK = 500


class _PartitionEvent:
    """Stands in for "the event being processed" while the slots of one partition are written.

    Faust's tables take the changelog partition (and RocksDB the local database) from the current
    event (``faust.streams.current_event``).  A batched agent (``take_batches``) has no current
    event, and a timer even less (faust-streaming/faust#497), so writes name their partition this way.
    """

    __slots__ = ("__weakref__", "message")

    class _Message:
        __slots__ = ("partition", "topic")

        def __init__(self, topic: str, partition: int) -> None:
            self.topic = topic
            self.partition = partition

    def __init__(self, topic: str, partition: int) -> None:
        self.message = self._Message(topic, partition)


#: The filter :func:`_quiet_own_timers` put on mode's timer logger (one per process).
_timer_filter: Any = None


def _quiet_own_timers(stats: defaultdict[str, int]) -> None:
    """Count, instead of logging at WARNING, mode's "Timer tandem.* is overlapping".

    mode warns whenever a timer's callback outlasts its interval.  tandem's two timers run every
    ``TIMER_INTERVAL`` (0.25 s) so that a scrape's release and checkpoint start at once, and their
    work takes longer by design when there is much of it (a checkpoint of 20,000 slots 1-3 s, a
    full collection about 1 s): about 100 such warnings in 9 minutes of ``bench/capacity.py`` at
    20,000 workloads, none of them a fault, in the log operators read for faults.  What would be
    one has a report of its own (the stall watch, the collection's log line, the lag metrics).
    The count goes to the stats line (``timer_overlaps``); other timers' warnings are untouched.
    """
    global _timer_filter

    def own_timer_overlap(record: logging.LogRecord) -> bool:
        if record.msg == "Timer %s is overlapping (interval=%r runtime=%r)" and str(
            (record.args or ("",))[0]  # type: ignore[index]
        ).startswith("tandem."):
            stats["timer_overlaps"] += 1
            return False
        return True

    timers = logging.getLogger("mode.timers")
    if _timer_filter is not None:
        timers.removeFilter(_timer_filter)
    _timer_filter = own_timer_overlap
    timers.addFilter(own_timer_overlap)


class Pipeline:
    """The agent, the timer and the rebalance hooks of one worker, around a :class:`Merger`."""

    def __init__(self, app: Any, settings: WorkerSettings, metrics: Any = None) -> None:
        self.app = app
        self.settings = settings
        #: A ``ops.observability.Metrics`` (or None): counters, latency, lag and readiness.
        self.metrics = metrics
        #: Wall time of the last input that arrived per partition (for the idle flush's latency).
        self._arrived: dict[int, float] = {}
        prefix = settings.prefix
        #: Input topic -> (event type, the cluster whose own topic it is, or None for a shared one):
        #: the shared topics and, with ``--input-clusters``, five topics per listed cluster.
        self.inputs = input_topics(prefix, settings.input_clusters)
        #: Input topic -> its source in the merge (streams.merge.source_of: the event type of a
        #: shared topic, ``type/cluster`` of a cluster's own), and back.
        self.kind_of_topic = {t: source_of(k, c) for t, (k, c) in self.inputs.items()}
        self.topic_of_kind = {k: t for t, k in self.kind_of_topic.items()}
        self.t_audit = topic_name(prefix, "audit")
        self.t_actuator = topic_name(prefix, "actuator")
        #: streams.signing: input authentication and decision signatures (None: off).
        self.keyring = settings.input_keyring
        self.signer = settings.decision_signer
        self.t_deadletter = topic_name(prefix, "deadletter")
        self.merger = Merger(settings.core, grace=settings.merge_grace, clusters=settings.input_clusters)
        self.lock = asyncio.Lock()
        #: No silent stall (issue #18): inputs with lag and no progress are logged, gauged, unready.
        self.stalls = StallWatch(settings.stall_timeout, settings.stall_exit)
        # Offsets are committed up to a checkpoint interval plus a commit interval after the read,
        # by design; only a commit that stays behind for longer than both may be a stall.
        commit_timeout = max(settings.stall_timeout, 2 * (settings.persist_interval + settings.commit_interval))
        self.commit_stalls = StallWatch(commit_timeout, max(settings.stall_exit, commit_timeout), what="commit")
        self._stalled_logged: set[tuple[str, int]] = set()
        #: The broker's end offsets of the assigned inputs, asked every ``stall_timeout / 3`` s: an
        #: input paused before its first fetch has no high watermark in the consumer, and that is
        #: exactly the paused-after-rebalance shape of a stall; without these it would go unseen.
        self._ends: dict[tuple[str, int], int] = {}
        self._ends_task: asyncio.Future[None] | None = None
        self._ends_at = 0.0
        #: Fault injection for the stall tests only: ``TANDEM_FAULT_FREEZE_INPUT=hpa`` keeps that input
        #: type paused in aiokafka behind the merge's back, the shape of the stall issue #18 describes.
        self._freeze = os.environ.get("TANDEM_FAULT_FREEZE_INPUT") or None
        self._freeze_logged = False
        if self._freeze:
            log.warning("tandem worker: fault injection: input %s will stay paused", self._freeze)
        self.need_reload = True
        #: The last offset handed over per input topic-partition since the assignment: a jump on a
        #: topic without gaps means inputs the consumer dropped (see agents/fence).
        self._read_to: dict[tuple[str, int], int] = {}
        #: The first offset handed over per input topic-partition since the assignment (the commit
        #: watch's start for an input never committed, before its log start is known).
        self._read_from: dict[tuple[str, int], int] = {}
        self.starts_known = False
        self._detail_task: asyncio.Future[None] | None = None
        #: While an input stalls, aiokafka fetcher tasks pending for half the stall timeout are
        #: ended (agents/fence, FetchWatch); asked every sixth of it, in the background.
        self.fetch_watch = FetchWatch()
        self._hung_task: asyncio.Future[None] | None = None
        self._hung_at = 0.0
        #: Fault injection for the tests only: ``TANDEM_FAULT_HANG_FETCH=FILE``: once FILE exists,
        #: aiokafka's next fetch request never returns (the stall FetchWatch ends).
        self._hang_fetch = os.environ.get("TANDEM_FAULT_HANG_FETCH") or None
        self._reloaded_at = 0.0
        #: Counts rebalances, so that work begun before one is not applied after it.
        self.generation = 0
        self._starts_task: asyncio.Future[None] | None = None
        self.assigned: set[int] = set()
        self.stats: defaultdict[str, int] = defaultdict(int)
        self._stats_logged: dict[str, int] = {}
        self._stats_at = 0.0
        #: Processing time of the first batch's start and the last batch's end (throughput).
        self.busy_from: float | None = None
        self.busy_until = 0.0
        #: Events processed but not acknowledged: they are acknowledged by the next checkpoint.
        self._held: list[Any] = []
        #: The checkpoint whose state the broker has not acknowledged yet (see :meth:`_checkpoint`).
        self._confirming: asyncio.Future[None] | None = None
        #: The commit asked for after the last checkpoint (see :meth:`_commit`).
        self._committing: asyncio.Future[None] | None = None
        #: Full garbage collections from the timer, not whenever CPython's allocator decides
        #: (agents/heap.py); ``serve`` installs it, so that tests building an app in-process do not.
        self.heap = HeapPolicy()
        self._checkpoint_at = time.monotonic()
        self.source = app.topic(
            *self.kind_of_topic,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )
        # What ``app.Table`` does, with the class that lets :meth:`_persist` wait for its writes.
        self.table: ConfirmedTable = app.tables.add(
            ConfirmedTable(
                app,
                name=STATE_TABLE,
                beacon=app.tables.beacon,
                partitions=settings.partitions,
                key_type=bytes,  # bytes -> the "raw" codec
                value_type=bytes,
                help="per-workload slot: decision state, unreleased inputs, offsets taken",
                # A slot is a few KB; its inbox may briefly hold thousands of events before
                # backpressure bites, so allow more than Kafka's default 1 MB per record.
                extra_topic_configs={"max.message.bytes": str(MAX_SLOT_BYTES)},
            )
        )
        # Fault injection for the tests only (issue #18): a slow broker for the state's changelog,
        # a slow seek at the end of each recovery.
        slow_state = float(os.environ.get("TANDEM_FAULT_SLOW_STATE") or 0.0)
        if slow_state:
            delay_changelog_sends(self.table, slow_state)
        slow_seek = float(os.environ.get("TANDEM_FAULT_SLOW_SEEK") or 0.0)
        if slow_seek:
            delay_seek_after_recovery(app, slow_seek)

    # --- Faust wiring ---------------------------------------------------------------------

    def install(self) -> None:
        app, settings = self.app, self.settings

        async def pipeline(stream: Any) -> None:
            # Batches from the channel's queue, below Faust's stream (agents/fence): their
            # messages are acknowledged by the checkpoint that writes the state they made
            # (:meth:`_checkpoint`), not when the batch is done.
            async for events in take_batches(app, stream, settings.batch_size, settings.batch_within):
                try:
                    await self.process(events)
                except Exception as exc:
                    _die("processing a batch", exc)

        app.agent(self.source, name="tandem.pipeline")(pipeline)

        async def idle_timer() -> None:
            try:
                await self.on_timer()
            except Exception as exc:
                _die("the idle timer", exc)

        app.timer(TIMER_INTERVAL, name="tandem.idle")(idle_timer)

        async def watch_timer() -> None:
            try:
                self.on_watch()
            except Exception as exc:
                _die("the stall watch", exc)

        app.timer(TIMER_INTERVAL, name="tandem.watch")(watch_timer)
        _quiet_own_timers(self.stats)
        app.on_partitions_revoked.connect(self.on_revoked)
        app.on_partitions_assigned.connect(self.on_assigned)
        app.on_before_shutdown.connect(self.on_shutdown)
        on_wait_empty(app, self.before_wait_empty)

    async def before_wait_empty(self) -> None:
        """A checkpoint before Faust waits for every message to be acknowledged (rebalance, stop).

        Without it that wait never ends: the messages since the last checkpoint are acknowledged
        only by the next one.  A checkpoint that does not finish in ``CHECKPOINT_WAIT`` seconds (a
        broker that does not answer) is given up: its messages are dropped unacknowledged, so
        whoever owns their partitions next reads them again (at-least-once, as after a crash).
        """
        async with self.lock:
            merger = self.merger
            if not self._held and not merger.dirty and not merger.decided and self._confirming is None:
                return
            try:
                await asyncio.wait_for(self._checkpoint(settle=True), timeout=CHECKPOINT_WAIT)
            except Exception as exc:
                log.warning(
                    "tandem worker: no checkpoint before the partitions are released (%r); "
                    "%d message(s) will be read again",
                    exc,
                    len(self._held),
                )
                self._held = []

    async def on_shutdown(self, sender: Any, **kwargs: Any) -> None:
        self.log_stats(force=True)
        if self.busy_from is not None:
            span = self.busy_until - self.busy_from
            rate = self.stats["messages"] / span if span > 0 else 0.0
            log.info(
                "tandem worker: processed %d messages in %.3f s (first to last batch): %.0f messages/s",
                self.stats["messages"],
                span,
                rate,
            )

    def log_stats(self, force: bool = False) -> None:
        """One INFO line with the counters, at most every 5 s and only when they changed."""
        now = time.monotonic()
        if not force and (now - self._stats_at < 5.0 or self.stats == self._stats_logged):
            return
        self._stats_at = now
        self._stats_logged = dict(self.stats)
        log.info("tandem worker: stats %s", " ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) or "-")

    async def on_revoked(self, sender: Any, revoked: Iterable[TP], **kwargs: Any) -> None:
        # Faust has drained the agent; wait for a timer round in flight, then make its writes land
        # before the partitions change hands (Faust flushed the producer before this signal).
        async with self.lock:
            # The last checkpoint came before Faust's wait for acknowledgements (before_wait_empty);
            # whatever is not in it is dropped here and read again by the next owner.
            self._held = []
            self.generation += 1
            self.need_reload = True
            self._ends = {}
            self.merger.reset()
            gone = sorted({tp.partition for tp in revoked if tp.topic in self.kind_of_topic})
            log.info("tandem worker: revoked partitions %s", gone)
            self.assigned = set()
            await self.app.producer.flush()

    async def on_assigned(self, sender: Any, assigned: Iterable[TP], **kwargs: Any) -> None:
        self.generation += 1
        self.need_reload = True
        self._ends = {}
        self._read_to = {}
        self._read_from = {}
        parts = sorted({tp.partition for tp in assigned if tp.topic in self.kind_of_topic})
        log.info("tandem worker: assigned partitions %s", parts)

    # --- the agent ------------------------------------------------------------------------

    async def process(self, events: Sequence[Any]) -> None:
        async with self.lock:
            if self.need_reload:
                # The agent only gets messages once Faust has recovered the table.
                self._reload()
            now = time.monotonic()
            if self.busy_from is None:
                self.busy_from = now
            arrived = time.time()
            merger = self.merger
            kind_of = self.kind_of_topic
            inputs = self.inputs
            offer = merger.offer
            #: (event type, key, dead letter, topic, reason, records) of each drop here
            rejects: list[tuple[str, bytes | None, bytes, str, str, int]] = []
            accepted: dict[str, list[float]] = {}  # type -> [count, newest ts]
            touched: set[int] = set()
            read_to = self._read_to
            for ev in events:
                msg = ev.message
                kind = kind_of[msg.topic]  # the merge's source
                etype, owner = inputs[msg.topic]
                partition = msg.partition
                tp = (msg.topic, partition)
                last = read_to.get(tp)
                if last is not None and msg.offset > last + 1 and etype in _GAPLESS:
                    # Inputs the consumer never handed over (issue #18): never silent.
                    log.error(
                        "tandem worker: input %s[%d] skipped offsets %d..%d: %d message(s) not delivered",
                        msg.topic,
                        partition,
                        last + 1,
                        msg.offset - 1,
                        msg.offset - last - 1,
                    )
                    self.stats["skipped"] += msg.offset - last - 1
                    gap = f"not delivered: offsets {last + 1}..{msg.offset - 1} skipped by the consumer"
                    record = deadletter_record(msg.topic, partition, last + 1, None, None, gap)
                    rejects.append((etype, None, record, msg.topic, "not_delivered", msg.offset - last - 1))
                if last is None:
                    self._read_from.setdefault(tp, msg.offset)
                if last is None or msg.offset > last:
                    read_to[tp] = msg.offset
                value = msg.value
                try:
                    if value is None:
                        if etype != "policy":
                            raise InvalidEvent("", "a null message (only the policies topic takes deletions)")
                        raw = tombstone(msg.key, msg.timestamp)
                        event = decode_event(raw)
                    else:
                        raw = loads(value)
                        if type(raw) is dict and raw.get("type") == WATERMARK:
                            # A producer's promise about its cluster's events here (docs/worker.md).
                            cluster, mark_ts = decode_watermark(msg.key, raw)
                            self._check_owner(msg.topic, owner, cluster)
                            if self.keyring is not None:  # a forged mark would release events early
                                self.keyring.verify(etype, msg.key, value, msg.headers, cluster)
                            merger.mark(partition, kind, msg.offset, cluster, mark_ts, now)
                            self.stats["watermarks"] += 1
                            touched.add(partition)
                            continue
                        if etype in _OWN and type(raw) is dict and raw.get("source") == "tandem":
                            # tandem's own recommendation coming back: the core ignores it (section
                            # 6), and its ts (the tick it was made at) must not hold the merge back.
                            self._check_owner(msg.topic, owner, _cluster_of(msg.key))
                            if self.keyring is not None:
                                # Only a worker writes these, signed (issue #29): one it did not
                                # sign is refused and dead-lettered, never dropped in silence.
                                self.keyring.verify(etype, msg.key, value, msg.headers, _cluster_of(msg.key))
                            merger.observe(partition, kind, msg.offset, None, now)
                            self.stats["own"] += 1
                            continue
                        event = decode_event(raw)
                    check_routing(etype, msg.key, event)
                    self._check_owner(msg.topic, owner, event.workload.cluster)
                    if self.keyring is not None:  # may the writer speak for this cluster? (InvalidEvent if not)
                        self.keyring.verify(etype, msg.key, value, msg.headers, event.workload.cluster)
                    if offer(partition, kind, msg.offset, raw, event, now):
                        acc = accepted.get(etype)
                        if acc is None:
                            accepted[etype] = [1, event.ts]
                        else:
                            acc[0] += 1
                            if event.ts > acc[1]:
                                acc[1] = event.ts
                    else:
                        self.stats["redelivered"] += 1
                except InvalidEvent as exc:
                    merger.observe(partition, kind, msg.offset, None, now)
                    record = deadletter_record(msg.topic, partition, msg.offset, msg.key, value, str(exc))
                    rejects.append((etype, msg.key, record, msg.topic, drop_reason(exc), 1))
                    continue
                touched.add(partition)
                self._arrived[partition] = arrived
            self.stats["messages"] += len(events)
            out = Output()
            for p in touched:
                out.extend(merger.release(p, self._highwaters(p), now))
            await self._publish(out, rejects)
            self._held.extend(events)
            app = self.app
            # While Faust waits for acknowledgements (a rebalance, a stop), the batches its take
            # buffer still hands out are checkpointed at once: nothing else would acknowledge them.
            if app.rebalancing or app.should_stop:
                await self._checkpoint(settle=True)
            elif self._checkpoint_due(time.monotonic()):
                await self._checkpoint()
            await self._throttle(touched)
            self.busy_until = time.monotonic()
            if self.metrics is not None:
                self._report(accepted, rejects, out, arrived)

    # --- the timer ------------------------------------------------------------------------

    def on_watch(self) -> None:
        """The stall watch, the statistics and the heap, on a timer of their own that never waits.

        Not in :meth:`on_timer`: that one publishes and checkpoints, so it waits for the broker,
        and a watch that waits with it is silent exactly when the broker is gone (seen in
        ``test_chaos``: the idle timer in a checkpoint when the broker stopped, and no stall
        reported in 30 s).  The broker is only asked from background tasks started here.
        """
        app = self.app
        self.log_stats()
        if app.rebalancing or getattr(app, "in_recovery", False) or app.should_stop:
            return
        if not self.starts_known and not self.need_reload and self._starts_task is None:
            # In the background: asking the broker for log start offsets can take a second.
            self._starts_task = asyncio.ensure_future(self._learn_starts(self.generation))
        now = time.monotonic()
        if self._ends_task is None and now - self._ends_at >= self.stalls.stall_timeout / 3:
            self._ends_at = now
            self._ends_task = asyncio.ensure_future(self._learn_ends(self.generation))
        # Whatever the agent and the idle timer are doing: one stuck on the broker is the stall to report.
        self._watch_stalls(now)
        # Between batches, not inside one, and preferably in the gap between two scrapes.
        idle = now - self.busy_until >= IDLE_GC_AFTER and not self.lock.locked()
        if self.heap.tick(now, idle):
            self.stats["gc_full"] = self.heap.collections
            self.stats["gc_full_ms"] = round(1000 * self.heap.seconds)
            # A pause of the whole worker (2 s at 20,000 workloads): said where it can be matched
            # with a late scrape.
            log.info(
                "tandem worker: full garbage collection took %.0f ms (%s, %s)",
                1000 * self.heap.last,
                "complete" if self.heap.complete else "objects since the last one",
                "idle" if idle else f"not idle for {PATIENCE:.0f} periods: ran anyway",
            )

    async def on_timer(self) -> None:
        app = self.app
        if app.rebalancing or getattr(app, "in_recovery", False) or app.should_stop:
            return
        if self.lock.locked():
            return  # the agent is busy: it releases what it can itself, and nothing is idle
        async with self.lock:
            if self.need_reload:
                self._reload()
            now = time.monotonic()
            wall = time.time()  # the idle flush's watermark: when a live tick may run, never what it decides
            idle_after = self.settings.idle_flush
            out = Output()
            per_partition: list[tuple[int, Output]] = []
            for p in sorted(self.assigned):
                hw = self._highwaters(p)
                part = self.merger.release(p, hw, now)
                part.extend(self.merger.flush_idle(p, hw, now, idle_after, wall))
                if part:
                    out.extend(part)
                    per_partition.append((p, part))
            if out:
                await self._publish(out, [])
            merger = self.merger
            aged = merger.decided_since is not None and now - merger.decided_since >= DECIDED_WAIT
            if aged or ((self._held or merger.dirty) and self._checkpoint_due(now)):
                await self._checkpoint(everything=aged)
            await self._throttle(self.assigned)
            await self._reconcile_paused()
            if self.metrics is not None:
                for p, part in per_partition:
                    self._report({}, [], part, self._arrived.get(p))
                if self.starts_known:
                    self.metrics.record_lag(self._lag())

    # --- helpers --------------------------------------------------------------------------

    def _watch_stalls(self, now: float) -> None:
        """Report inputs with lag and no progress; exit (75) once one has been stuck for --stall-exit."""
        inputs: dict[tuple[str, int], tuple[int | None, int | None]] = {}
        commits: dict[tuple[str, int], tuple[int | None, int | None]] = {}
        committed = committed_offsets(self.app.consumer)
        for p in self.assigned:
            clock = self.merger.clocks.get(p)
            held = self.merger.paused.get(p, ())
            for kind, hw in self._highwaters(p).items():
                tp = (self.topic_of_kind[kind], p)
                pos = clock.sources[kind].position if clock is not None else None
                end = self._ends.get(tp)
                if end is not None and (hw is None or end > hw):
                    hw = end  # the consumer's is older, or unknown (never fetched since assigned)
                # An input the merge paused (backpressure: it runs ahead in event time) waits by
                # design until the partition's slowest input catches up, which can take minutes
                # in a large backlog; that input is never paused and is the one watched.  Counting
                # the paused one as stalled made a worker catching up on 1,000 workloads exit 75
                # (bench/soak.py --workers 1).  A pause behind the merge's back still counts.
                inputs[tp] = (pos, pos if kind in held else hw)
                read = clock.sources[kind].next_offset if clock is not None else None
                done = committed.get(TP(*tp))
                if done is None and clock is not None:
                    # Never committed by the group: nothing is committed past where reading began
                    # (the log start).  Without this, a new group that read its whole input and then
                    # lost the broker before its first commit had no stall to report (test_chaos).
                    done = clock.sources[kind].start_offset
                    if done is None:  # the log start not learned yet: the first offset read
                        done = self._read_from.get(tp)
                commits[tp] = (done, read)
        stalled, must_exit = self.stalls.check(now, inputs)
        not_committed, must_exit_commit = self.commit_stalls.check(now, commits)
        must_exit = must_exit or must_exit_commit
        current = {(s.topic, s.partition): s for s in not_committed}
        current.update({(s.topic, s.partition): s for s in stalled})
        for tp, s in current.items():
            if tp not in self._stalled_logged:
                log.error(
                    "tandem worker: %s; paused by the merge: %s; merge inbox: %d buffered; %s",
                    s.describe(),
                    sorted(self.merger.paused.get(s.partition, ())),
                    self.merger.buffered(s.partition),
                    faust_fetch_state(self.app.consumer, TP(*tp)),
                )
        fresh = [TP(*tp) for tp in current if tp not in self._stalled_logged]
        if fresh and self._detail_task is None:
            self._detail_task = asyncio.ensure_future(self._log_fetch_detail(fresh))
        every = self.stalls.stall_timeout / 6
        if stalled and self._hung_task is None and now - self._hung_at >= every:
            self._hung_at = now
            self._hung_task = asyncio.ensure_future(self._end_hung_fetches())
        for tp in self._stalled_logged - current.keys():
            log.warning("tandem worker: input %s[%d] moves again", *tp)
        self._stalled_logged = set(current)
        if self.metrics is not None:
            self.metrics.record_stalled({tp: s.describe() for tp, s in current.items()})
        if must_exit:
            log.critical(
                "tandem worker: an input has been stalled for %.0f s (--stall-exit); exiting with status 75 "
                "so that the worker is restarted",
                self.stalls.stall_exit,
            )
            logging.shutdown()
            os._exit(75)

    async def _log_fetch_detail(self, tps: Sequence[TP]) -> None:
        """What aiokafka knows of newly stalled inputs (asked on its own thread)."""
        try:
            details, fetcher = await in_consumer_thread(
                self.app, lambda c: ([aiokafka_fetch_state(c, tp) for tp in tps], fetcher_state(c))
            )
            for tp, detail in zip(tps, details, strict=True):
                log.error("tandem worker: input %s[%d] stalled: %s", tp.topic, tp.partition, detail)
            log.error("tandem worker: inputs stalled; %s", fetcher)
        except Exception as exc:
            log.warning("tandem worker: cannot read aiokafka's fetch state: %r", exc)
        finally:
            self._detail_task = None

    async def _end_hung_fetches(self) -> None:
        """End aiokafka fetcher tasks pending for half the stall timeout while inputs stall (on
        aiokafka's thread; see agents/fence, FetchWatch): fetching then resumes by itself."""
        limit = self.stalls.stall_timeout / 2
        try:
            ended = await in_consumer_thread(self.app, lambda c: self.fetch_watch.end_hung(c, time.monotonic(), limit))
            for what in ended:
                if what.startswith("restarted: "):
                    self.stats["fetch_restarts"] += 1
                    log.error("tandem worker: inputs stall; %s", what)
                    continue
                if what.startswith("ended: "):
                    self.stats["fetches_ended"] += 1
                log.error("tandem worker: an aiokafka fetch task hung while inputs stall, %s", what)
        except Exception as exc:
            log.warning("tandem worker: cannot check aiokafka's fetch tasks: %r", exc)
        finally:
            self._hung_task = None

    def _assigned_partitions(self) -> set[int]:
        try:
            assignment = self.app.consumer.assignment()
        except Exception:  # consumer not started yet
            return set()
        return {tp.partition for tp in assignment if tp.topic in self.kind_of_topic}

    def _reload(self) -> None:
        """Rebuild the cache from the (recovered) table for the partitions this worker owns."""
        if self._held:
            # Never expected (a rebalance waits for every acknowledgement, and on_revoked
            # checkpoints), but if it happens they must not be acknowledged with a state that no
            # longer holds them: dropped unacknowledged, they are read again after the seek.
            log.warning(
                "tandem worker: %d message(s) taken before the rebalance were not checkpointed; read again",
                len(self._held),
            )
            self._held = []
        self.merger.reset()
        self.assigned = self._assigned_partitions()
        loaded = 0
        for key, value in self.table.items():
            if value is None:
                continue
            if isinstance(key, str):
                key = key.encode()
            if key.startswith(MARKS_KEY):
                partition = int(key[len(MARKS_KEY) :])
                if partition in self.assigned:
                    self.merger.load_marks(partition, orjson.loads(value)["watermarks"])
                continue
            slot = Slot.from_bytes(value)
            if slot.partition in self.assigned:
                self.merger.load(slot)
                loaded += 1
        now = time.monotonic()
        for p in self.assigned:
            self.merger.clock(p, now)
        self.need_reload = False
        self.starts_known = False
        self._reloaded_at = now
        log.info("tandem worker: %d workload(s) loaded for partitions %s", loaded, sorted(self.assigned))

    async def _learn_starts(self, generation: int) -> None:
        try:
            # Right after an assignment Faust may not have recorded the committed offsets yet; a
            # topic-partition taken for "never committed" would then be waited on forever (it was
            # read to its end by the previous owner and delivers nothing).  So offsets missing from
            # Faust's record are retried for a grace period before they count as never committed.
            grace_over = time.monotonic() - self._reloaded_at >= STARTS_GRACE
            starts, unknown = await self._start_offsets(use_log_start=grace_over)
            async with self.lock:
                if generation == self.generation and not self.need_reload:
                    now = time.monotonic()
                    for tp, off in starts.items():
                        self.merger.clock(tp.partition, now).set_start(self.kind_of_topic[tp.topic], off)
                    if not unknown:
                        # Where each owned partition resumed, said once per assignment (issue #28):
                        # matched with the previous owner's commits, it tells what is read again.
                        for p in sorted(self.assigned):
                            where = " ".join(
                                f"{k}={starts[TP(self.topic_of_kind[k], p)]}"
                                for k in self.topic_of_kind
                                if TP(self.topic_of_kind[k], p) in starts
                            )
                            log.info("tandem worker: partition %d resumes at %s; %s", p, where, self.merger.story(p))
                    self.starts_known = not unknown
        except Exception as exc:  # retried by the next timer round
            log.warning("tandem worker: cannot read start offsets: %r", exc)
        finally:
            self._starts_task = None

    async def _learn_ends(self, generation: int) -> None:
        """Ask the broker for the end offsets of the assigned inputs (for the stall watch only)."""
        try:
            tps = [TP(t, p) for p in self.assigned for t in self.kind_of_topic]
            ends = await self.app.consumer.highwaters(*tps) if tps else {}
            if generation == self.generation:
                self._ends = {(tp.topic, tp.partition): off for tp, off in ends.items() if off is not None}
        except Exception as exc:  # asked again by a later timer round
            log.warning("tandem worker: cannot read end offsets: %r", exc)
        finally:
            self._ends_task = None

    async def _start_offsets(self, *, use_log_start: bool = True) -> tuple[dict[TP, int], list[TP]]:
        """Where consumption of each input topic-partition started: its committed offset, else its start.

        Needed to tell an input that had nothing to deliver (caught up) from one not read yet.  Faust
        seeks to the committed offsets right before it resumes the stream (and records them in
        ``Consumer._committed_offset``, which has no public accessor); without a commit the consumer
        starts at the log start (``consumer_auto_offset_reset="earliest"``).
        """
        consumer = self.app.consumer
        committed = committed_offsets(consumer)
        tps = [TP(t, p) for p in self.assigned for t in self.kind_of_topic]
        unknown = []
        starts: dict[TP, int] = {}
        for tp in tps:
            off = committed.get(tp)
            if off is None or off < 0:
                unknown.append(tp)
            else:
                starts[tp] = off
        if unknown and use_log_start:
            earliest = await consumer.earliest_offsets(*unknown)
            for tp in unknown:
                off = earliest.get(tp)
                if off is not None:
                    starts[tp] = off
            unknown = [tp for tp in unknown if tp not in starts]
        return starts, unknown

    async def _throttle(self, partitions: Iterable[int]) -> None:
        """Pause the input topic-partitions that run ahead in event time; resume them (see ordering)."""
        pause: list[TP] = []
        resume: list[TP] = []
        for p in partitions:
            to_pause, to_resume = self.merger.throttle(p, self._highwaters(p))
            pause.extend(TP(self.topic_of_kind[k], p) for k in to_pause)
            resume.extend(TP(self.topic_of_kind[k], p) for k in to_resume)
        if self._freeze is not None:
            frozen = [TP(t, p) for t, (k, _) in self.inputs.items() if k == self._freeze for p in self.assigned]
            resume = [tp for tp in resume if tp not in frozen]
            pause.extend(frozen)
            if frozen and not self._freeze_logged:
                self._freeze_logged = True
                log.warning("tandem worker: fault injection: %s paused", sorted(tp.partition for tp in frozen))
        if pause or resume:
            self.stats["paused"] += len(pause)
            await self._fetch_control(pause, resume)

    async def _fetch_control(self, pause: Sequence[TP], resume: Sequence[TP]) -> None:
        """Pause/resume fetching in aiokafka itself, in the consumer's own thread.

        Not ``Consumer.pause_partitions``: Faust's pause only filters which partitions' records it
        hands to the streams, and drops the records of a newly paused partition that it already
        fetched (their offsets consumed); after a resume it takes the offset jump for a compaction
        gap and commits past them.  aiokafka's pause keeps the position where delivery stopped and
        discards what it had prefetched, so nothing is skipped.  It must run on the loop of the
        thread that owns the aiokafka consumer (pausing creates a future of that loop).
        """

        def apply(consumer: Any) -> None:
            for tp in pause:
                with contextlib.suppress(Exception):  # no longer assigned: nothing to pause
                    consumer.pause(TopicPartition(tp.topic, tp.partition))
            for tp in resume:
                with contextlib.suppress(Exception):
                    consumer.resume(TopicPartition(tp.topic, tp.partition))

        await in_consumer_thread(self.app, apply)

    async def _reconcile_paused(self) -> None:
        """Resume what aiokafka has paused but the merge does not know it paused (issue #18).

        The merge's ``paused`` sets are its view; aiokafka's own paused set is the truth that decides
        what is fetched.  If they ever disagree (the known stall: an input paused by backpressure and
        never resumed across a rebalance or a restart), the input would stay silent for good; here
        the disagreement is logged and repaired on every timer round, before it can become a stall.
        """
        if self._hang_fetch is not None:
            trigger, self._hang_fetch = self._hang_fetch, None
            await in_consumer_thread(self.app, lambda c: hang_one_fetch(c, trigger))
        frozen = {t for t, (k, _) in self.inputs.items() if k == self._freeze}

        def paused(consumer: Any) -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in consumer.paused()}

        actual = await in_consumer_thread(self.app, paused)
        known = {(self.topic_of_kind[k], p) for p, kinds in self.merger.paused.items() for k in kinds}
        stray = sorted(tp for tp in actual - known if tp[0] in self.kind_of_topic and tp[0] not in frozen)
        if stray:
            log.warning("tandem worker: inputs paused in aiokafka behind the merge's back, resumed: %s", stray)
            self.stats["stray_pauses"] += len(stray)
            await self._fetch_control([], [TP(t, p) for t, p in stray])

    def _highwaters(self, partition: int) -> dict[str, int | None]:
        highwater = self.app.consumer.highwater
        out: dict[str, int | None] = {}
        for kind, topic in self.topic_of_kind.items():
            try:
                out[kind] = highwater(TP(topic, partition))
            except (AssertionError, KeyError, AttributeError):  # not (or no longer) assigned
                out[kind] = None
        return out

    async def _publish(self, out: Output, rejects: Sequence[tuple[str, bytes | None, bytes, str, str, int]]) -> None:
        """Send outputs and dead letters, and wait until the broker has them all.

        Their Kafka timestamp is processing time (the producer's default): the event time is in the
        CloudEvent (``time``, ``data.tick``), and time retention must count from when a decision
        was made, not from its tick, or the decisions of a replayed recording would be deleted by
        the topic's retention as soon as they are written.
        """
        if not out and not rejects:
            return
        for late in out.late:
            # Never silent (issue #28): the audit has its report, the metrics count it, and the log
            # says where it came from, for the operator matching it with a rebalance or a stall.
            self.stats["late"] += 1
            log.info(
                "tandem worker: late input %s[%d]@%d for %s: ts %s belongs to tick %s, already decided through %s",
                self._input_topic(late.kind, late.key),
                late.partition,
                late.offset,
                late.key,
                rfc3339(late.ts),
                rfc3339(late.tick),
                rfc3339(late.decided),
            )
        send = self.app.producer.send
        futures = []
        for key, kind, ev in out.emitted:
            k = key.encode()
            value = encode(ev)
            if kind == "audit":
                futures.append(await send(self.t_audit, k, value, None, None, None))
                applied = ev["type"] == DECISION and not ev["data"].get("dry_run")
                cluster = key.split("/", 1)[0]
                # A cluster with its own actuator topic also gets there what its applier shows in the
                # policy status (blocked reports, dry-run decisions), so that its principal needs no
                # right on the audit topic, which carries every cluster's explanations (docs/operating.md).
                if applied or (cluster in self.settings.actuator_clusters and ev["type"] in STATUS_ONLY):
                    actuator = actuator_topic(self.settings.prefix, cluster, self.settings.actuator_clusters)
                    signed = [self.signer.sign(k, value)] if self.signer is not None else None
                    futures.append(await send(actuator, k, value, None, None, signed))
                    if applied:
                        self.stats["decisions"] += 1
                self.stats["audit"] += 1
            elif kind in _OWN:
                headers = self._own_headers(kind, key, k, value) if self.keyring is not None else None
                futures.append(await send(self._input_topic(kind, key), k, value, None, None, headers))
                self.stats["recommendations"] += 1
            else:  # pragma: no cover - the core emits only these kinds
                log.error("tandem worker: unknown output kind %r dropped", kind)
        for r in out.rejected:
            futures.append(await send(self.t_deadletter, r.key.encode(), self._rejected_record(r), None, None, None))
        for late in out.late:
            # Dead-lettered with its reason like every drop (issue #29): applied, but its tick was
            # decided without it, and a dead-letter reader sees every input not taken as it came.
            record = deadletter_record(
                self._input_topic(late.kind, late.key),
                late.partition,
                late.offset,
                late.key.encode(),
                encode(late.raw),
                late.error,
            )
            futures.append(await send(self.t_deadletter, late.key.encode(), record, None, None, None))
        for _kind, key, value, *_ in rejects:
            futures.append(await send(self.t_deadletter, key, value, None, None, None))
        self.stats["deadletter"] += len(out.rejected) + len(rejects) + len(out.late)
        if futures:
            await asyncio.gather(*futures)

    def _own_headers(self, kind: str, key: str, k: bytes, value: bytes) -> list[tuple[str, bytes]] | None:
        """The ``tandem-mac`` of an own recommendation, with a key of its workload's cluster (the
        worker verifies its cluster's inputs with the same HMAC keys), so that it is told from a
        forged one when it comes back (issue #29)."""
        assert self.keyring is not None
        cluster = key.split("/", 1)[0]
        mine = [ik for ik in self.keyring.keys.values() if ik.cluster == cluster]
        signing = min(mine, key=lambda ik: ik.key_id) if mine else None
        return [sign_input(signing, kind, k, value)] if signing is not None else None

    def _input_topic(self, kind: str, key: str) -> str:
        """The input topic of ``kind`` events of the workload ``key`` (its cluster's own, or the shared one)."""
        return input_topic(self.settings.prefix, kind, key.split("/", 1)[0], self.settings.input_clusters)

    def _check_owner(self, topic: str, owner: str | None, cluster: str) -> None:
        """A record of ``cluster`` read from ``topic`` (owned by the cluster ``owner``, None: shared)
        belongs there: a cluster with input topics of its own is read from those alone, so that the
        principals that may write elsewhere cannot speak for it (issue #29; Kafka's ACLs keep the
        other clusters' collectors off its topics)."""
        if owner is None:
            if cluster in self.settings.input_clusters:
                raise Misrouted(
                    "workload.cluster",
                    f"cluster {cluster!r} has input topics of its own (--input-clusters): "
                    f"its records on the shared topic {topic} are refused",
                )
        elif cluster != owner:
            raise Misrouted("workload.cluster", f"a record of cluster {cluster!r} on cluster {owner!r}'s topic {topic}")

    def _report(
        self,
        accepted: dict[str, list[float]],
        rejects: Sequence[tuple[str, bytes | None, bytes, str, str, int]],
        out: Output,
        arrived: float | None,
    ) -> None:
        """Tell the metrics what a batch (or a timer round) did, once its outputs are delivered."""
        metrics = self.metrics
        newest = None
        for kind, (count, ts) in accepted.items():
            metrics.observe_event(kind, ts, int(count))
            newest = ts if newest is None or ts > newest else newest
        for kind, _, _, topic, reason, n in rejects:
            if reason != "not_delivered":
                metrics.observe_rejected(kind)
            metrics.observe_dropped(topic, reason, n)
        for r in out.rejected:
            metrics.observe_rejected(r.kind)
            metrics.observe_dropped(self._input_topic(r.kind, r.key), _core_reason(r))
        for late in out.late:
            metrics.observe_late(late.kind)
            metrics.observe_dropped(self._input_topic(late.kind, late.key), "late")
        for _, kind, ev in out.emitted:
            if kind == "audit":
                metrics.observe_emitted(ev, arrived)
        if newest is not None:
            metrics.record_processed(newest)

    def _lag(self) -> int:
        """Messages between what the agent has seen and the high watermarks of the owned inputs."""
        lag = 0
        for p in self.assigned:
            clock = self.merger.clocks.get(p)
            if clock is None:
                continue
            for kind, hw in self._highwaters(p).items():
                pos = clock.sources[kind].position
                if hw is not None and pos is not None and hw > pos:
                    lag += hw - pos
        return lag

    def _rejected_record(self, r: Rejected) -> bytes:
        log.warning("tandem worker: rejected %s[%d]@%d: %s", r.kind, r.partition, r.offset, r.error)
        return deadletter_record(
            self._input_topic(r.kind, r.key), r.partition, r.offset, r.key.encode(), encode(r.raw), r.error
        )

    def _checkpoint_due(self, now: float) -> bool:
        """Time for a checkpoint: the interval is over, or every event taken has left the inboxes.

        A scrape's events reach a slot in two or three batches and are released together once the
        merge allows (after the grace, for the last ones); writing the slots then, rather than
        after each batch, writes each once for its scrape's events and commits their offsets
        without waiting for the interval.  The tick's decision at the idle flush is the next
        write.  (Waiting for the flush too saved no more CPU in ``bench/capacity.py`` and held the
        commit back by the idle time.)
        """
        return now - self._checkpoint_at >= self.settings.persist_interval or self.merger.released()

    async def _checkpoint(self, settle: bool = False, everything: bool = False) -> None:
        """Write the touched slots; once the broker has them, acknowledge the messages taken so far.

        Called with the lock held.  The outputs of those messages were published (and acknowledged
        by the broker) when they were processed, so the order is outputs, state, offsets.  The
        wait for the broker's acknowledgement of the state runs in the background (one checkpoint
        at a time: the next one first waits for it), so that the agent goes on with the next
        batches meanwhile; the messages are acknowledged only after it, so nothing is committed
        that the changelog does not hold.  In ``bench/capacity.py`` at 12,500 workloads that wait
        held the agent for 18 % of the wall time, a core idle while the inputs queued
        (docs/performance.md, "The worker, seventh pass").  ``settle`` waits for it here too: a
        rebalance or a stop needs the acknowledgements before Faust's wait for them.

        Which slots: those an input changed since they were last written (``Merger.dirty``).  A
        slot that only an idle flush changed (``Merger.decided``) waits for its next input, at
        most ``DECIDED_WAIT`` seconds (``everything``), or for a rebalance or a stop (``settle``):
        its inputs are acknowledged already and the written state holds them, so a crash in
        between decides the same ticks again from it, with the same ids, which consumers dedupe
        (docs/worker.md).  Written at once, it was a second write per workload and scrape, half
        of the slot writes of a saturated worker (docs/performance.md, "The worker, eighth pass").
        """
        await self._settle()
        futures = await self._write_slots(everything or settle)
        self._checkpoint_at = time.monotonic()
        held, self._held = self._held, []
        if futures:
            self._confirming = asyncio.ensure_future(self._confirm_then_ack(futures, held, self.generation))
            if settle:
                await self._settle()
        else:  # nothing written: their state is in the changelog already (confirmed before)
            for event in held:
                event.ack()

    async def _settle(self) -> None:
        """Wait for the checkpoint in flight: its state acknowledged by the broker, its messages by us.

        ``asyncio.wait``, not ``await``: a caller given up (the rebalance's checkpoint timed out)
        leaves the checkpoint to finish or fail by itself, and one that was cancelled (a stop)
        is not an error of the caller's.
        """
        task = self._confirming
        if task is None:
            return
        if not task.done():
            await asyncio.wait((task,))
        if self._confirming is task:
            self._confirming = None

    async def _confirm_then_ack(self, futures: list[Any], held: list[Any], generation: int) -> None:
        try:
            await self.table.wait_confirmed(futures)
        except asyncio.CancelledError:
            raise  # given up (a stop, or a rebalance's checkpoint that timed out): read again
        except Exception as exc:
            _die("writing the state's changelog", exc)
        if generation != self.generation:
            # Never expected (a rebalance first waits for this checkpoint); if it happens, the
            # partitions may be someone else's now: not acknowledged, read again.
            log.warning("tandem worker: %d message(s) of a checkpoint before a rebalance not acknowledged", len(held))
            return
        for event in held:
            event.ack()
        if self._committing is None or self._committing.done():
            self._committing = asyncio.ensure_future(self._commit())

    async def _commit(self) -> None:
        """Commit the offsets just acknowledged, rather than at Faust's next commit interval.

        Their state is in the changelog already, so nothing waits for anything but Faust's timer
        (``commit_interval``, 2.8 s): committing now takes that wait off the lag a live scrape
        leaves behind.  A task of its own, not part of the checkpoint: the next checkpoint, a
        rebalance or a stop waits for the state, never for a commit (one slow because the group
        rebalances would hold them).  One at a time (what one in flight misses, the next
        checkpoint's or Faust's timer commits); one that fails is only logged.
        """
        app = self.app
        if app.rebalancing or app.should_stop:
            return  # Faust commits what it may itself around a rebalance or a stop
        try:
            await app.consumer.commit()
        except Exception as exc:
            log.warning("tandem worker: commit after a checkpoint failed (%r); the next one retries", exc)

    async def _write_slots(self, everything: bool) -> list[Any]:
        """Write the touched slots to the table; the changelog records to wait for.

        A live scrape touches every slot, so a checkpoint may serialise tens of thousands (about
        1.5 s at 20,000 workloads).  It yields to the event loop every ``WRITE_CHUNK`` slots, so
        that the producer sends the first records while the rest are serialised (the broker's
        acknowledgement, which the commit waits for, comes that much sooner) and the fetcher
        keeps reading.  The lock stays held: nothing else changes a slot meanwhile.
        """
        merger = self.merger
        keys = merger.take_writes(everything)
        marks = merger.take_marks()
        if marks:
            # A partition's producers' watermarks, before the records that carried them are
            # acknowledged: their successor reads them again from here, not from the topics.
            table = self.table
            anchor_topic = self.topic_of_kind["metric"]
            for partition, by_cluster in marks.items():
                anchor = _PartitionEvent(anchor_topic, partition)  # held: the context keeps a weak reference
                token = current_event.set(weakref.ref(anchor))  # type: ignore[arg-type]
                try:
                    table[MARKS_KEY + str(partition).encode()] = orjson.dumps(
                        {"v": 1, "partition": partition, "watermarks": by_cluster}
                    )
                finally:
                    current_event.reset(token)
        if not keys:
            return self.table.take_unconfirmed()
        by_partition: dict[int, list[Slot]] = defaultdict(list)
        for key in keys:
            slot = merger.slots.get(key)
            if slot is not None:
                by_partition[slot.partition].append(slot)
        self.stats["state_writes"] += sum(len(slots) for slots in by_partition.values())
        table = self.table
        anchor_topic = self.topic_of_kind["metric"]
        since_yield = 0
        for partition, slots in by_partition.items():
            anchor = _PartitionEvent(anchor_topic, partition)
            # The task's own context: other tasks, run at the yields below, do not see it.
            token = current_event.set(weakref.ref(anchor))  # type: ignore[arg-type]
            try:
                for slot in slots:
                    since_yield += 1
                    if since_yield >= WRITE_CHUNK:
                        since_yield = 0
                        await asyncio.sleep(0)
                    data = slot.to_bytes()
                    self.stats["state_bytes"] += len(data)
                    if len(data) > MAX_SLOT_BYTES // 4:
                        log.warning(
                            "tandem worker: slot of %s is %d bytes (%d events waiting)",
                            slot.key,
                            len(data),
                            len(slot.inbox),
                        )
                    table[slot.key.encode()] = data
            finally:
                current_event.reset(token)
        # Outputs acknowledged, then state, then offsets: the caller waits for the broker, not for
        # Faust's flush before a commit, which gives up under load (agents/fence, ConfirmedTable).
        return table.take_unconfirmed()


def drop_reason(exc: InvalidEvent) -> str:
    """The ``reason`` label of ``tandem_events_dropped_total`` for an input refused as it was read."""
    if isinstance(exc, InputRefused):
        return "not_authenticated"
    if isinstance(exc, Misrouted):
        return "misrouted"
    return "invalid"


def _core_reason(r: Rejected) -> str:
    """The ``reason`` of an input the core refused when it was released."""
    return "internal_error" if r.error.startswith("internal error: ") else "invalid"


def _cluster_of(key: bytes | None) -> str:
    """The cluster of a record keyed by a workload key (``cluster/namespace/kind/name``)."""
    return (key or b"").split(b"/", 1)[0].decode("utf-8", "replace")


def _die(where: str, exc: BaseException) -> None:
    """Stop the process at once, without committing anything.

    Per-message problems never get here (they are dead-lettered); this is for failures of Kafka
    itself, e.g. outputs the broker would not take.  Letting the exception unwind would end the
    agent and leave a worker that holds its partitions and reads nothing (and with
    ``take_events``, which acknowledges in a ``finally``, it committed the batch and lost its
    decisions); exiting now means everything since the last checkpoint is read again by whoever
    takes over.
    """
    log.critical("tandem worker: fatal error in %s; exiting without commit", where, exc_info=exc)
    logging.shutdown()
    os._exit(70)


def install(app: Any, settings: WorkerSettings, metrics: Any = None) -> Pipeline:
    """Define the agent, table and timer of ``settings`` on ``app`` (reporting to ``metrics`` if given)."""
    pipeline = Pipeline(app, settings, metrics)
    pipeline.install()
    return pipeline
