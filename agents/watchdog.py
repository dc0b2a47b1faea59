"""The worker's stall watch: no silent stall (issue #18).

Inputs with lag and no progress, and commits that stay behind, are logged, gauged and make the
worker unready (:class:`agents.stall.StallWatch` decides, purely); what aiokafka knows of a newly
stalled input is logged from its own thread; aiokafka fetcher tasks pending for half the stall
timeout are ended (:class:`agents.fence.FetchWatch`); and an input stuck for ``--stall-exit`` ends
the process with status 75, so that it is restarted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from faust.types import TP

from agents.fence import (
    FetchWatch,
    aiokafka_fetch_state,
    committed_offsets,
    faust_fetch_state,
    fetcher_state,
    in_consumer_thread,
)
from agents.settings import WorkerSettings
from agents.shared import Assignment, Topics
from agents.stall import Stall, StallWatch
from streams.merge import Merger

__all__ = ["Watchdog"]

log = logging.getLogger("tandem.worker")

#: (position, high watermark) per input topic-partition; (committed, read) for the commit watch.
Positions = dict[tuple[str, int], tuple[int | None, int | None]]


class Watchdog:
    """The stall watch of one worker's inputs and commits."""

    def __init__(
        self,
        app: Any,
        settings: WorkerSettings,
        topics: Topics,
        merger: Merger,
        assignment: Assignment,
        *,
        highwaters: Callable[[int], dict[str, int | None]],
        ends: Callable[[], Mapping[tuple[str, int], int]],
        read_from: Mapping[tuple[str, int], int],
        stats: defaultdict[str, int],
        metrics: Any = None,
    ) -> None:
        self.app = app
        self.topic_of_kind = topics.topic_of_kind
        self.merger = merger
        self.assignment = assignment
        self.highwaters = highwaters
        #: The broker's end offsets (agents.offsets), as last asked.
        self.ends = ends
        self.read_from = read_from
        self.stats = stats
        self.metrics = metrics
        self.stalls = StallWatch(settings.stall_timeout, settings.stall_exit)
        # Offsets are committed up to a checkpoint interval plus a commit interval after the read,
        # by design; only a commit that stays behind for longer than both may be a stall.
        commit_timeout = max(settings.stall_timeout, 2 * (settings.persist_interval + settings.commit_interval))
        self.commit_stalls = StallWatch(commit_timeout, max(settings.stall_exit, commit_timeout), what="commit")
        self._stalled_logged: set[tuple[str, int]] = set()
        self._detail_task: asyncio.Future[None] | None = None
        #: While an input stalls, aiokafka fetcher tasks pending for half the stall timeout are
        #: ended (agents/fence, FetchWatch); asked every sixth of it, in the background.
        self.fetch_watch = FetchWatch()
        self._hung_task: asyncio.Future[None] | None = None
        self._hung_at = 0.0

    def check(self, now: float) -> None:
        """Report inputs with lag and no progress; exit (75) once one has been stuck for --stall-exit."""
        inputs, commits = self._positions()
        stalled, must_exit = self.stalls.check(now, inputs)
        not_committed, must_exit_commit = self.commit_stalls.check(now, commits)
        must_exit = must_exit or must_exit_commit
        current = {(s.topic, s.partition): s for s in not_committed}
        current.update({(s.topic, s.partition): s for s in stalled})
        self._report(now, current, bool(stalled))
        if must_exit:
            log.critical(
                "tandem worker: an input has been stalled for %.0f s (--stall-exit); exiting with status 75 "
                "so that the worker is restarted",
                self.stalls.stall_exit,
            )
            logging.shutdown()
            os._exit(75)

    def _positions(self) -> tuple[Positions, Positions]:
        """Each owned input's (position, high watermark) and (committed, read) offsets."""
        inputs: Positions = {}
        commits: Positions = {}
        committed = committed_offsets(self.app.consumer)
        ends = self.ends()
        for p in self.assignment.partitions:
            clock = self.merger.clocks.get(p)
            held = self.merger.paused.get(p, ())
            for kind, hw in self.highwaters(p).items():
                tp = (self.topic_of_kind[kind], p)
                pos = clock.sources[kind].position if clock is not None else None
                end = ends.get(tp)
                if end is not None and (hw is None or end > hw):
                    hw = end  # the consumer's is older, or unknown (never fetched since assigned)
                # An input the merge paused (backpressure: it runs ahead in event time) waits by
                # design until the partition's slowest input catches up, which can take minutes
                # in a large backlog; that input is never paused and is the one watched (counting
                # the paused one as stalled would stop a worker that is only catching up).  A pause
                # behind the merge's back still counts.
                inputs[tp] = (pos, pos if kind in held else hw)
                read = clock.sources[kind].next_offset if clock is not None else None
                done = committed.get(TP(*tp))
                if done is None and clock is not None:
                    # Never committed by the group: nothing is committed past where reading began
                    # (the log start).  Without this, a new group that read its whole input and then
                    # lost the broker before its first commit would have no stall to report.
                    done = clock.sources[kind].start_offset
                    if done is None:  # the log start not learned yet: the first offset read
                        done = self.read_from.get(tp)
                commits[tp] = (done, read)
        return inputs, commits

    def _report(self, now: float, current: dict[tuple[str, int], Stall], stalled: bool) -> None:
        """Log what newly stalls and what moves again, gauge it, and start the background checks."""
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
