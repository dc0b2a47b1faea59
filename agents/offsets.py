"""The broker's offsets of the owned inputs: high watermarks, where consumption started, the ends.

The merge needs to tell an input that had nothing to deliver (caught up) from one not read yet:
the consumer's high watermarks (:meth:`Offsets.highwaters`) and where each input resumed after an
assignment (:meth:`Offsets.learn_starts`).  The stall watch needs the broker's end offsets too
(:meth:`Offsets.learn_ends`): an input paused before its first fetch has no high watermark in the
consumer, and that is exactly the paused-after-rebalance shape of a stall.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from faust.types import TP

from agents.fence import committed_offsets
from agents.shared import Assignment, Topics
from streams.merge import Merger

__all__ = ["STARTS_GRACE", "Offsets"]

log = logging.getLogger("tandem.worker")

#: Seconds after an assignment during which a missing committed offset is asked for again rather
#: than taken for "never committed" (see :meth:`Offsets.learn_starts`).
STARTS_GRACE = 5.0


class Offsets:
    """What the consumer and the broker say of the owned input topic-partitions."""

    def __init__(self, app: Any, topics: Topics, merger: Merger, assignment: Assignment, lock: asyncio.Lock) -> None:
        self.app = app
        self.kind_of_topic = topics.kind_of_topic
        self.topic_of_kind = topics.topic_of_kind
        self.merger = merger
        self.assignment = assignment
        self.lock = lock
        #: The broker's end offsets of the assigned inputs, asked every ``stall_timeout / 3`` s.
        self.ends: dict[tuple[str, int], int] = {}
        self._ends_task: asyncio.Future[None] | None = None
        self._ends_at = 0.0
        self._starts_task: asyncio.Future[None] | None = None

    def forget(self) -> None:
        """A rebalance: the end offsets asked before it are of someone else's partitions."""
        self.ends = {}

    def highwaters(self, partition: int) -> dict[str, int | None]:
        """The consumer's high watermark of each input of ``partition`` (None: not known)."""
        highwater = self.app.consumer.highwater
        out: dict[str, int | None] = {}
        for kind, topic in self.topic_of_kind.items():
            try:
                out[kind] = highwater(TP(topic, partition))
            except (AssertionError, KeyError, AttributeError):  # not (or no longer) assigned
                out[kind] = None
        return out

    def lag(self) -> int:
        """Messages between what the agent has seen and the high watermarks of the owned inputs."""
        lag = 0
        for p in self.assignment.partitions:
            clock = self.merger.clocks.get(p)
            if clock is None:
                continue
            for kind, hw in self.highwaters(p).items():
                pos = clock.sources[kind].position
                if hw is not None and pos is not None and hw > pos:
                    lag += hw - pos
        return lag

    def ask_starts(self) -> None:
        """Learn where the owned inputs resumed, once per assignment (in the background: asking the
        broker for log start offsets can take a second)."""
        a = self.assignment
        if not a.starts_known and not a.need_reload and self._starts_task is None:
            self._starts_task = asyncio.ensure_future(self.learn_starts(a.generation))

    def ask_ends(self, now: float, every: float) -> None:
        """Ask the broker for the end offsets, at most ``every`` seconds (in the background)."""
        if self._ends_task is None and now - self._ends_at >= every:
            self._ends_at = now
            self._ends_task = asyncio.ensure_future(self.learn_ends(self.assignment.generation))

    async def learn_starts(self, generation: int) -> None:
        try:
            # Right after an assignment Faust may not have recorded the committed offsets yet; a
            # topic-partition taken for "never committed" would then be waited on forever (it was
            # read to its end by the previous owner and delivers nothing).  So offsets missing from
            # Faust's record are retried for a grace period before they count as never committed.
            grace_over = time.monotonic() - self.assignment.reloaded_at >= STARTS_GRACE
            starts, unknown = await self.start_offsets(use_log_start=grace_over)
            async with self.lock:
                a = self.assignment
                if generation == a.generation and not a.need_reload:
                    now = time.monotonic()
                    for tp, off in starts.items():
                        self.merger.clock(tp.partition, now).set_start(self.kind_of_topic[tp.topic], off)
                    if not unknown:
                        self._log_resumes(starts)
                    a.starts_known = not unknown
        except Exception as exc:  # retried by the next timer round
            log.warning("tandem worker: cannot read start offsets: %r", exc)
        finally:
            self._starts_task = None

    def _log_resumes(self, starts: dict[TP, int]) -> None:
        """Where each owned partition resumed, said once per assignment (issue #28): matched with
        the previous owner's commits, it tells what is read again."""
        topic_of_kind = self.topic_of_kind
        for p in sorted(self.assignment.partitions):
            where = " ".join(
                f"{k}={starts[TP(topic_of_kind[k], p)]}" for k in topic_of_kind if TP(topic_of_kind[k], p) in starts
            )
            log.info("tandem worker: partition %d resumes at %s; %s", p, where, self.merger.story(p))

    async def learn_ends(self, generation: int) -> None:
        """Ask the broker for the end offsets of the assigned inputs (for the stall watch only)."""
        try:
            tps = [TP(t, p) for p in self.assignment.partitions for t in self.kind_of_topic]
            ends = await self.app.consumer.highwaters(*tps) if tps else {}
            if generation == self.assignment.generation:
                self.ends = {(tp.topic, tp.partition): off for tp, off in ends.items() if off is not None}
        except Exception as exc:  # asked again by a later timer round
            log.warning("tandem worker: cannot read end offsets: %r", exc)
        finally:
            self._ends_task = None

    async def start_offsets(self, *, use_log_start: bool = True) -> tuple[dict[TP, int], list[TP]]:
        """Where consumption of each input topic-partition started: its committed offset, else its start.

        Needed to tell an input that had nothing to deliver (caught up) from one not read yet.  Faust
        seeks to the committed offsets right before it resumes the stream (and records them in
        ``Consumer._committed_offset``, which has no public accessor); without a commit the consumer
        starts at the log start (``consumer_auto_offset_reset="earliest"``).
        """
        consumer = self.app.consumer
        committed = committed_offsets(consumer)
        tps = [TP(t, p) for p in self.assignment.partitions for t in self.kind_of_topic]
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
