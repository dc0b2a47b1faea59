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
   :mod:`agents.checkpoint`) to the ``state`` table and waits until the broker has acknowledged those
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

Topic-partitions that run ahead in event time are paused (in aiokafka, see :mod:`agents.flow`)
while their partition's inboxes are full, so the inboxes, and the table records that hold them, stay small.

Workload slots live in a process-local cache (the :class:`~streams.merge.Merger`), loaded from the
table after every rebalance once Faust has recovered it.

The pipeline is the order of these steps; each job is a part of its own, as the VPA recommender's
``RunOnce`` reads (load, update, checkpoint, garbage-collect: one call each over separate parts;
https://github.com/kubernetes/autoscaler/blob/master/vertical-pod-autoscaler/pkg/recommender/routines/recommender.go):
:mod:`agents.admission` (step 1), :mod:`agents.publisher` (step 3, where :mod:`streams.routing`
says), :mod:`agents.checkpoint` (step 4 and the load after a rebalance), :mod:`agents.offsets`
(high watermarks, start and end offsets), :mod:`agents.flow` (pausing inputs that run ahead),
:mod:`agents.watchdog` (the stall watch), :mod:`agents.diagnostics` (counters, metrics, the full
collections); :mod:`agents.shared` holds what they share.  The tests' fault hooks
(:mod:`agents.faults`) are installed by ``tandem worker`` alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from faust.types import TP

from agents.admission import Admission
from agents.checkpoint import DECIDED_WAIT, Checkpointer
from agents.diagnostics import Diagnostics, quiet_own_timers
from agents.fence import ConfirmedTable, on_wait_empty, take_batches
from agents.flow import FlowControl
from agents.heap import HeapPolicy
from agents.offsets import Offsets
from agents.publisher import Publisher
from agents.settings import MAX_SLOT_BYTES, STATE_TABLE, WorkerSettings
from agents.shared import Assignment, Topics, die
from agents.watchdog import Watchdog
from streams.merge import Merger, Output

__all__ = ["MAX_SLOT_BYTES", "Pipeline", "install"]

log = logging.getLogger("tandem.worker")

#: How often the timer looks for releasable inboxes and idle partitions (seconds).
TIMER_INTERVAL = 0.25
#: No batch for this long (and no timer round): the worker is idle, a moment for the full
#: garbage collection (agents/heap.py).
IDLE_GC_AFTER = 0.5


class Pipeline:
    """The agent, the timers and the rebalance hooks of one worker, over its parts (see above)."""

    def __init__(self, app: Any, settings: WorkerSettings, metrics: Any = None) -> None:
        self.app = app
        self.settings = settings
        self.topics = topics = Topics.of(settings)
        self.merger = merger = Merger(settings.core, grace=settings.merge_grace, clusters=settings.input_clusters)
        self.lock = asyncio.Lock()
        self.assignment = assignment = Assignment()
        self.diagnostics = diagnostics = Diagnostics(topics, metrics)
        stats = diagnostics.stats
        self.admission = Admission(topics, merger, settings.input_keyring, stats)
        self.publisher = Publisher(app, topics, settings.input_keyring, settings.decision_signer, stats)
        self.offsets = offsets = Offsets(app, topics, merger, assignment, self.lock)
        self.flow = FlowControl(app, topics, merger, assignment, offsets.highwaters, stats)
        #: No silent stall (issue #18): inputs with lag and no progress are logged, gauged, unready.
        self.watchdog = Watchdog(
            app,
            settings,
            topics,
            merger,
            assignment,
            highwaters=offsets.highwaters,
            ends=lambda: offsets.ends,
            read_from=self.admission.read_from,
            stats=stats,
            metrics=metrics,
        )
        #: Full garbage collections from the timer, not whenever CPython's allocator decides
        #: (agents/heap.py); ``serve`` installs it, so that tests building an app in-process do not.
        self.heap = HeapPolicy()
        self.source = app.topic(
            *topics.kind_of_topic,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )
        # What ``app.Table`` does, with the class that lets the checkpoint wait for its writes.
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
        self.checkpoints = Checkpointer(
            app, self.table, merger, topics.topic_of_kind["metric"], settings.persist_interval, stats, assignment
        )

    # --- Faust wiring ---------------------------------------------------------------------

    def install(self) -> None:
        app, settings = self.app, self.settings

        async def pipeline(stream: Any) -> None:
            # Batches from the channel's queue, below Faust's stream (agents/fence): their
            # messages are acknowledged by the checkpoint that writes the state they made
            # (agents/checkpoint.py), not when the batch is done.
            async for events in take_batches(app, stream, settings.batch_size, settings.batch_within):
                try:
                    await self.process(events)
                except Exception as exc:
                    die("processing a batch", exc)

        app.agent(self.source, name="tandem.pipeline")(pipeline)

        async def idle_timer() -> None:
            try:
                await self.on_timer()
            except Exception as exc:
                die("the idle timer", exc)

        app.timer(TIMER_INTERVAL, name="tandem.idle")(idle_timer)

        async def watch_timer() -> None:
            try:
                self.on_watch()
            except Exception as exc:
                die("the stall watch", exc)

        app.timer(TIMER_INTERVAL, name="tandem.watch")(watch_timer)
        quiet_own_timers(self.diagnostics.stats)
        app.on_partitions_revoked.connect(self.on_revoked)
        app.on_partitions_assigned.connect(self.on_assigned)
        app.on_before_shutdown.connect(self.on_shutdown)
        on_wait_empty(app, self.before_wait_empty)

    async def before_wait_empty(self) -> None:
        """A checkpoint before Faust waits for every message to be acknowledged (rebalance, stop).

        Without it that wait never ends: the messages since the last checkpoint are acknowledged
        only by the next one (:meth:`agents.checkpoint.Checkpointer.before_release`).
        """
        async with self.lock:
            await self.checkpoints.before_release()

    async def on_shutdown(self, sender: Any, **kwargs: Any) -> None:
        self.diagnostics.summary()

    async def on_revoked(self, sender: Any, revoked: Iterable[TP], **kwargs: Any) -> None:
        # Faust has drained the agent; wait for a timer round in flight, then make its writes land
        # before the partitions change hands (Faust flushed the producer before this signal).
        async with self.lock:
            # The last checkpoint came before Faust's wait for acknowledgements (before_wait_empty);
            # whatever is not in it is dropped here and read again by the next owner.
            self.checkpoints.held = []
            a = self.assignment
            a.generation += 1
            a.need_reload = True
            self.offsets.forget()
            self.merger.reset()
            gone = sorted({tp.partition for tp in revoked if tp.topic in self.topics.kind_of_topic})
            log.info("tandem worker: revoked partitions %s", gone)
            a.partitions = set()
            await self.app.producer.flush()

    async def on_assigned(self, sender: Any, assigned: Iterable[TP], **kwargs: Any) -> None:
        a = self.assignment
        a.generation += 1
        a.need_reload = True
        self.offsets.forget()
        self.admission.forget()
        parts = sorted({tp.partition for tp in assigned if tp.topic in self.topics.kind_of_topic})
        log.info("tandem worker: assigned partitions %s", parts)

    # --- the agent ------------------------------------------------------------------------

    async def process(self, events: Sequence[Any]) -> None:
        """One batch: admission, the merge's release, publishing, the checkpoint, fetch control."""
        async with self.lock:
            if self.assignment.need_reload:
                # The agent only gets messages once Faust has recovered the table.
                self._reload()
            now = time.monotonic()
            diagnostics = self.diagnostics
            if diagnostics.busy_from is None:
                diagnostics.busy_from = now
            arrived = time.time()
            admitted = self.admission.admit(events, now, arrived)
            out = Output()
            for p in admitted.touched:
                out.extend(self.merger.release(p, self.offsets.highwaters(p), now))
            await self.publisher.publish(out, admitted.rejects)
            checkpoints = self.checkpoints
            checkpoints.held.extend(events)
            app = self.app
            # While Faust waits for acknowledgements (a rebalance, a stop), the batches its take
            # buffer still hands out are checkpointed at once: nothing else would acknowledge them.
            if app.rebalancing or app.should_stop:
                await checkpoints.checkpoint(settle=True)
            elif checkpoints.due(time.monotonic()):
                await checkpoints.checkpoint()
            await self.flow.throttle(admitted.touched)
            diagnostics.busy_until = time.monotonic()
            if diagnostics.metrics is not None:
                diagnostics.report(admitted.accepted, admitted.rejects, out, arrived)

    # --- the timers -----------------------------------------------------------------------

    def on_watch(self) -> None:
        """The stall watch, the statistics and the heap, on a timer of their own that never waits.

        Not in :meth:`on_timer`: that one publishes and checkpoints, so it waits for the broker,
        and a watch that waits with it is silent exactly when the broker is gone (the idle
        timer in a checkpoint when the broker stopped: no stall would be reported).  The broker is
        only asked from background tasks started here.
        """
        app = self.app
        self.diagnostics.log_stats()
        if app.rebalancing or getattr(app, "in_recovery", False) or app.should_stop:
            return
        self.offsets.ask_starts()
        now = time.monotonic()
        self.offsets.ask_ends(now, self.watchdog.stalls.stall_timeout / 3)
        # Whatever the agent and the idle timer are doing: one stuck on the broker is the stall to report.
        self.watchdog.check(now)
        # Between batches, not inside one, and preferably in the gap between two scrapes.
        idle = now - self.diagnostics.busy_until >= IDLE_GC_AFTER and not self.lock.locked()
        self.diagnostics.collect_garbage(self.heap, now, idle)

    async def on_timer(self) -> None:
        """Release what became releasable without new input, run the idle flush, checkpoint."""
        app = self.app
        if app.rebalancing or getattr(app, "in_recovery", False) or app.should_stop:
            return
        if self.lock.locked():
            return  # the agent is busy: it releases what it can itself, and nothing is idle
        async with self.lock:
            if self.assignment.need_reload:
                self._reload()
            now = time.monotonic()
            wall = time.time()  # the idle flush's watermark: when a live tick may run, never what it decides
            idle_after = self.settings.idle_flush
            out = Output()
            per_partition: list[tuple[int, Output]] = []
            for p in sorted(self.assignment.partitions):
                hw = self.offsets.highwaters(p)
                part = self.merger.release(p, hw, now)
                part.extend(self.merger.flush_idle(p, hw, now, idle_after, wall))
                if part:
                    out.extend(part)
                    per_partition.append((p, part))
            if out:
                await self.publisher.publish(out, [])
            merger, checkpoints = self.merger, self.checkpoints
            aged = merger.decided_since is not None and now - merger.decided_since >= DECIDED_WAIT
            if aged or ((checkpoints.held or merger.dirty) and checkpoints.due(now)):
                await checkpoints.checkpoint(everything=aged)
            await self.flow.throttle(self.assignment.partitions)
            await self.flow.reconcile_paused()
            diagnostics = self.diagnostics
            if diagnostics.metrics is not None:
                for p, part in per_partition:
                    diagnostics.report({}, [], part, self.admission.arrived.get(p))
                if self.assignment.starts_known:
                    diagnostics.metrics.record_lag(self.offsets.lag())

    # --- load -----------------------------------------------------------------------------

    def _assigned_partitions(self) -> set[int]:
        try:
            assignment = self.app.consumer.assignment()
        except Exception:  # consumer not started yet
            return set()
        return {tp.partition for tp in assignment if tp.topic in self.topics.kind_of_topic}

    def _reload(self) -> None:
        """Rebuild the cache from the (recovered) table for the partitions this worker owns."""
        self.checkpoints.drop_held()
        self.merger.reset()
        a = self.assignment
        a.partitions = self._assigned_partitions()
        loaded = self.checkpoints.load(a.partitions)
        now = time.monotonic()
        for p in a.partitions:
            self.merger.clock(p, now)
        a.need_reload = False
        a.starts_known = False
        a.reloaded_at = now
        log.info("tandem worker: %d workload(s) loaded for partitions %s", loaded, sorted(a.partitions))


def install(app: Any, settings: WorkerSettings, metrics: Any = None) -> Pipeline:
    """Define the agent, table and timer of ``settings`` on ``app`` (reporting to ``metrics`` if given)."""
    pipeline = Pipeline(app, settings, metrics)
    pipeline.install()
    return pipeline
