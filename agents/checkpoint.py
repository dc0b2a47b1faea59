"""Checkpoints: the workload slots written to the ``state`` table, then the messages acknowledged.

At a *checkpoint* each workload slot an input changed since the last one (state, inbox, offsets
taken) is written to the ``state`` table, and once the broker has acknowledged those changelog
records the messages taken so far are acknowledged to Faust and their offsets committed.  So a
crash anywhere repeats work but loses nothing (at-least-once): outputs are published before the
state that records them (:mod:`agents.publisher`), and the state before the offsets.

Why checkpoints and not a write per batch: a workload's scrape arrives on two or three topics, in
different batches, and its tick is then released and run by timer rounds, so writing after every
batch and round wrote each slot about three times per scrape, and those writes (a few KB each,
serialised, sent and acknowledged) were the larger part of a live worker's CPU
(docs/performance.md, "the worker").  A checkpoint writes each slot once however often it changed;
the messages wait unacknowledged meanwhile, so nothing is committed that a written state does not
cover.  The cache is loaded back from the table after every rebalance (:meth:`Checkpointer.load`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import defaultdict
from typing import Any

import orjson

from agents.fence import ConfirmedTable, current_event
from agents.settings import MAX_SLOT_BYTES
from agents.shared import Assignment, die
from streams.merge import Merger, Slot

__all__ = ["CHECKPOINT_WAIT", "DECIDED_WAIT", "MARKS_KEY", "WRITE_CHUNK", "Checkpointer"]

log = logging.getLogger("tandem.worker")

#: The state table's key of a partition's watermarks (``MARKS_KEY + b"3"``); no workload key starts with "~".
MARKS_KEY = b"~watermarks/"
#: Seconds the checkpoint before a rebalance or a stop may take before it is given up.
CHECKPOINT_WAIT = 30.0
#: Seconds a slot changed only by an idle flush may wait for its next input before it is written
#: by itself (see :meth:`Checkpointer.checkpoint`); four scrapes at the collector's 15 s cadence.
DECIDED_WAIT = 60.0
#: Slots serialised between two yields to the event loop in a checkpoint's write (see
#: :meth:`Checkpointer.write_slots`).
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


class Checkpointer:
    """The checkpoints of one worker: the messages held, the write in flight, the commit after it."""

    def __init__(
        self,
        app: Any,
        table: ConfirmedTable,
        merger: Merger,
        anchor_topic: str,
        persist_interval: float,
        stats: defaultdict[str, int],
        assignment: Assignment,
    ) -> None:
        self.app = app
        self.table = table
        self.merger = merger
        #: The topic whose partition names a slot's changelog partition (all topics are co-partitioned).
        self.anchor_topic = anchor_topic
        self.persist_interval = persist_interval
        self.stats = stats
        self.assignment = assignment
        #: Events processed but not acknowledged: they are acknowledged by the next checkpoint.
        self.held: list[Any] = []
        #: The checkpoint whose state the broker has not acknowledged yet (see :meth:`checkpoint`).
        self.confirming: asyncio.Future[None] | None = None
        #: The commit asked for after the last checkpoint (see :meth:`_commit`).
        self.committing: asyncio.Future[None] | None = None
        self.at = time.monotonic()

    def due(self, now: float) -> bool:
        """Time for a checkpoint: the interval is over, or every event taken has left the inboxes.

        A scrape's events reach a slot in two or three batches and are released together once the
        merge allows (after the grace, for the last ones); writing the slots then, rather than
        after each batch, writes each once for its scrape's events and commits their offsets
        without waiting for the interval.  The tick's decision at the idle flush is the next
        write.  (Waiting for the flush too saved no more CPU in ``bench/capacity.py`` and held the
        commit back by the idle time.)
        """
        return now - self.at >= self.persist_interval or self.merger.released()

    def pending(self) -> bool:
        """Anything held, changed or in flight that a checkpoint would settle."""
        merger = self.merger
        return bool(self.held or merger.dirty or merger.decided or self.confirming is not None)

    async def before_release(self) -> None:
        """A checkpoint before the partitions are released (a rebalance, a stop), with the lock held.

        A checkpoint that does not finish in ``CHECKPOINT_WAIT`` seconds (a broker that does not
        answer) is given up: its messages are dropped unacknowledged, so whoever owns their
        partitions next reads them again (at-least-once, as after a crash).
        """
        if not self.pending():
            return
        try:
            await asyncio.wait_for(self.checkpoint(settle=True), timeout=CHECKPOINT_WAIT)
        except Exception as exc:
            log.warning(
                "tandem worker: no checkpoint before the partitions are released (%r); "
                "%d message(s) will be read again",
                exc,
                len(self.held),
            )
            self.held = []

    async def checkpoint(self, settle: bool = False, everything: bool = False) -> None:
        """Write the touched slots; once the broker has them, acknowledge the messages taken so far.

        Called with the lock held.  The outputs of those messages were published (and acknowledged
        by the broker) when they were processed, so the order is outputs, state, offsets.  The
        wait for the broker's acknowledgement of the state runs in the background (one checkpoint
        at a time: the next one first waits for it), so that the agent goes on with the next
        batches meanwhile; the messages are acknowledged only after it, so nothing is committed
        that the changelog does not hold.  In ``bench/capacity.py`` at 12,500 workloads that wait
        held the agent for 18 % of the wall time, a core idle while the inputs queued
        (docs/performance.md, "The worker").  ``settle`` waits for it here too: a
        rebalance or a stop needs the acknowledgements before Faust's wait for them.

        Which slots: those an input changed since they were last written (``Merger.dirty``).  A
        slot that only an idle flush changed (``Merger.decided``) waits for its next input, at
        most ``DECIDED_WAIT`` seconds (``everything``), or for a rebalance or a stop (``settle``):
        its inputs are acknowledged already and the written state holds them, so a crash in
        between decides the same ticks again from it, with the same ids, which consumers dedupe
        (docs/worker.md).  Written at once, it was a second write per workload and scrape, half
        of the slot writes of a saturated worker (docs/performance.md, "The worker").
        """
        await self.settle()
        futures = await self.write_slots(everything or settle)
        self.at = time.monotonic()
        held, self.held = self.held, []
        if futures:
            self.confirming = asyncio.ensure_future(self._confirm_then_ack(futures, held, self.assignment.generation))
            if settle:
                await self.settle()
        else:  # nothing written: their state is in the changelog already (confirmed before)
            for event in held:
                event.ack()

    async def settle(self) -> None:
        """Wait for the checkpoint in flight: its state acknowledged by the broker, its messages by us.

        ``asyncio.wait``, not ``await``: a caller given up (the rebalance's checkpoint timed out)
        leaves the checkpoint to finish or fail by itself, and one that was cancelled (a stop)
        is not an error of the caller's.
        """
        task = self.confirming
        if task is None:
            return
        if not task.done():
            await asyncio.wait((task,))
        if self.confirming is task:
            self.confirming = None

    async def _confirm_then_ack(self, futures: list[Any], held: list[Any], generation: int) -> None:
        try:
            await self.table.wait_confirmed(futures)
        except asyncio.CancelledError:
            raise  # given up (a stop, or a rebalance's checkpoint that timed out): read again
        except Exception as exc:
            die("writing the state's changelog", exc)
        if generation != self.assignment.generation:
            # Never expected (a rebalance first waits for this checkpoint); if it happens, the
            # partitions may be someone else's now: not acknowledged, read again.
            log.warning("tandem worker: %d message(s) of a checkpoint before a rebalance not acknowledged", len(held))
            return
        for event in held:
            event.ack()
        if self.committing is None or self.committing.done():
            self.committing = asyncio.ensure_future(self._commit())

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

    async def write_slots(self, everything: bool) -> list[Any]:
        """Write the touched slots to the table; the changelog records to wait for.

        A live scrape touches every slot, so a checkpoint may serialise tens of thousands (about
        1.5 s at 20,000 workloads).  It yields to the event loop every ``WRITE_CHUNK`` slots, so
        that the producer sends the first records while the rest are serialised (the broker's
        acknowledgement, which the commit waits for, comes that much sooner) and the fetcher
        keeps reading.  The lock stays held: nothing else changes a slot meanwhile.
        """
        merger = self.merger
        keys = merger.take_writes(everything)
        self._write_marks()
        if not keys:
            return self.table.take_unconfirmed()
        by_partition: dict[int, list[Slot]] = defaultdict(list)
        for key in keys:
            slot = merger.slots.get(key)
            if slot is not None:
                by_partition[slot.partition].append(slot)
        self.stats["state_writes"] += sum(len(slots) for slots in by_partition.values())
        table = self.table
        since_yield = 0
        for partition, slots in by_partition.items():
            anchor = _PartitionEvent(self.anchor_topic, partition)
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

    def _write_marks(self) -> None:
        """A partition's producers' watermarks, before the records that carried them are
        acknowledged: their successor reads them again from here, not from the topics."""
        marks = self.merger.take_marks()
        table = self.table
        for partition, by_cluster in marks.items():
            anchor = _PartitionEvent(self.anchor_topic, partition)  # held: the context keeps a weak reference
            token = current_event.set(weakref.ref(anchor))  # type: ignore[arg-type]
            try:
                table[MARKS_KEY + str(partition).encode()] = orjson.dumps(
                    {"v": 1, "partition": partition, "watermarks": by_cluster}
                )
            finally:
                current_event.reset(token)

    def drop_held(self) -> None:
        """Messages taken before a rebalance that no checkpoint covered: never acknowledged with a
        state that no longer holds them; dropped unacknowledged, they are read again after the seek."""
        if self.held:
            # Never expected (a rebalance waits for every acknowledgement, and on_revoked
            # checkpoints), but it must not go unseen.
            log.warning(
                "tandem worker: %d message(s) taken before the rebalance were not checkpointed; read again",
                len(self.held),
            )
            self.held = []

    def load(self, partitions: set[int]) -> int:
        """Fill the merge's cache from the (recovered) table for ``partitions``; the slots loaded."""
        loaded = 0
        for key, value in self.table.items():
            if value is None:
                continue
            if isinstance(key, str):
                key = key.encode()
            if key.startswith(MARKS_KEY):
                partition = int(key[len(MARKS_KEY) :])
                if partition in partitions:
                    self.merger.load_marks(partition, orjson.loads(value)["watermarks"])
                continue
            slot = Slot.from_bytes(value)
            if slot.partition in partitions:
                self.merger.load(slot)
                loaded += 1
        return loaded
