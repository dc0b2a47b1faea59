"""Fetch control: the input topic-partitions that run ahead in event time are paused in aiokafka.

While a partition's inboxes are full the inputs ahead of its slowest one are paused (the merge
decides which: :meth:`streams.merge.Merger.throttle`), so the inboxes, and the table records that
hold them, stay small; every timer round also resumes what aiokafka has paused behind the merge's
back (issue #18).  The tests' fault hooks (:mod:`agents.faults`) set :attr:`FlowControl.freeze`
and :attr:`FlowControl.hang_fetch`; a worker that serves real traffic leaves them ``None``.
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka.structs import TopicPartition
from faust.types import TP

from agents.fence import hang_one_fetch, in_consumer_thread
from agents.shared import Assignment, Topics
from streams.merge import Merger

__all__ = ["FlowControl"]

log = logging.getLogger("tandem.worker")


class FlowControl:
    """Pauses and resumes the owned inputs in aiokafka, as the merge asks."""

    def __init__(
        self,
        app: Any,
        topics: Topics,
        merger: Merger,
        assignment: Assignment,
        highwaters: Callable[[int], dict[str, int | None]],
        stats: defaultdict[str, int],
    ) -> None:
        self.app = app
        self.inputs = topics.inputs
        self.kind_of_topic = topics.kind_of_topic
        self.topic_of_kind = topics.topic_of_kind
        self.merger = merger
        self.assignment = assignment
        self.highwaters = highwaters
        self.stats = stats
        #: Fault injection for the stall tests only (agents.faults): the input type kept paused in
        #: aiokafka behind the merge's back, the shape of the stall issue #18 describes.
        self.freeze: str | None = None
        self._freeze_logged = False
        #: Fault injection for the tests only (agents.faults): once this file exists, aiokafka's
        #: next fetch request never returns (the stall the fetch watch ends).
        self.hang_fetch: str | None = None

    async def throttle(self, partitions: Iterable[int]) -> None:
        """Pause the input topic-partitions that run ahead in event time; resume them (see ordering)."""
        pause: list[TP] = []
        resume: list[TP] = []
        for p in partitions:
            to_pause, to_resume = self.merger.throttle(p, self.highwaters(p))
            pause.extend(TP(self.topic_of_kind[k], p) for k in to_pause)
            resume.extend(TP(self.topic_of_kind[k], p) for k in to_resume)
        if self.freeze is not None:
            frozen = [
                TP(t, p) for t, (k, _) in self.inputs.items() if k == self.freeze for p in self.assignment.partitions
            ]
            resume = [tp for tp in resume if tp not in frozen]
            pause.extend(frozen)
            if frozen and not self._freeze_logged:
                self._freeze_logged = True
                log.warning("tandem worker: fault injection: %s paused", sorted(tp.partition for tp in frozen))
        if pause or resume:
            self.stats["paused"] += len(pause)
            await self.fetch_control(pause, resume)

    async def fetch_control(self, pause: Sequence[TP], resume: Sequence[TP]) -> None:
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

    async def reconcile_paused(self) -> None:
        """Resume what aiokafka has paused but the merge does not know it paused (issue #18).

        The merge's ``paused`` sets are its view; aiokafka's own paused set is the truth that decides
        what is fetched.  If they ever disagree (the known stall: an input paused by backpressure and
        never resumed across a rebalance or a restart), the input would stay silent for good; here
        the disagreement is logged and repaired on every timer round, before it can become a stall.
        """
        if self.hang_fetch is not None:
            trigger, self.hang_fetch = self.hang_fetch, None
            await in_consumer_thread(self.app, lambda c: hang_one_fetch(c, trigger))
        frozen = {t for t, (k, _) in self.inputs.items() if k == self.freeze}

        def paused(consumer: Any) -> set[tuple[str, int]]:
            return {(tp.topic, tp.partition) for tp in consumer.paused()}

        actual = await in_consumer_thread(self.app, paused)
        known = {(self.topic_of_kind[k], p) for p, kinds in self.merger.paused.items() for k in kinds}
        stray = sorted(tp for tp in actual - known if tp[0] in self.kind_of_topic and tp[0] not in frozen)
        if stray:
            log.warning("tandem worker: inputs paused in aiokafka behind the merge's back, resumed: %s", stray)
            self.stats["stray_pauses"] += len(stray)
            await self.fetch_control([], [TP(t, p) for t, p in stray])
