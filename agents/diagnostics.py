"""Diagnostics of the worker: its counters, their log line, the metrics, the full collections.

The counters (``stats``) are shared by the pipeline's parts; :class:`Diagnostics` logs them at most
every 5 s, tells the metrics (``ops.observability.Metrics``) what each batch or timer round did,
reports the scheduled full garbage collection (:mod:`agents.heap`) and says the throughput at the
end.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agents.admission import Reject
from agents.heap import PATIENCE, HeapPolicy
from agents.shared import Topics
from streams.merge import Output, Rejected

__all__ = ["Diagnostics", "core_reason", "quiet_own_timers"]

log = logging.getLogger("tandem.worker")

#: The filter :func:`quiet_own_timers` put on mode's timer logger (one per process).
_timer_filter: Any = None


def quiet_own_timers(stats: defaultdict[str, int]) -> None:
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


def core_reason(r: Rejected) -> str:
    """The ``reason`` of an input the core refused when it was released."""
    return "internal_error" if r.error.startswith("internal error: ") else "invalid"


class Diagnostics:
    """The counters, the busy span and the metrics of one worker."""

    def __init__(self, topics: Topics, metrics: Any = None) -> None:
        self.topics = topics
        #: A ``ops.observability.Metrics`` (or None): counters, latency, lag and readiness.
        self.metrics = metrics
        self.stats: defaultdict[str, int] = defaultdict(int)
        self._stats_logged: dict[str, int] = {}
        self._stats_at = 0.0
        #: Processing time of the first batch's start and the last batch's end (throughput).
        self.busy_from: float | None = None
        self.busy_until = 0.0

    def log_stats(self, force: bool = False) -> None:
        """One INFO line with the counters, at most every 5 s and only when they changed."""
        now = time.monotonic()
        if not force and (now - self._stats_at < 5.0 or self.stats == self._stats_logged):
            return
        self._stats_at = now
        self._stats_logged = dict(self.stats)
        log.info("tandem worker: stats %s", " ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) or "-")

    def summary(self) -> None:
        """The last stats line and the throughput from the first batch to the last (at shutdown)."""
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

    def collect_garbage(self, heap: HeapPolicy, now: float, idle: bool) -> None:
        """The scheduled full collection, if due (agents/heap.py), said where it can be matched
        with a late scrape: a pause of the whole worker (2 s at 20,000 workloads)."""
        if heap.tick(now, idle):
            self.stats["gc_full"] = heap.collections
            self.stats["gc_full_ms"] = round(1000 * heap.seconds)
            log.info(
                "tandem worker: full garbage collection took %.0f ms (%s, %s)",
                1000 * heap.last,
                "complete" if heap.complete else "objects since the last one",
                "idle" if idle else f"not idle for {PATIENCE:.0f} periods: ran anyway",
            )

    def report(
        self,
        accepted: dict[str, list[float]],
        rejects: Sequence[Reject],
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
            metrics.observe_dropped(self.topics.input_topic(r.kind, r.key), core_reason(r))
        for late in out.late:
            metrics.observe_late(late.kind)
            metrics.observe_dropped(self.topics.input_topic(late.kind, late.key), "late")
        for _, kind, ev in out.emitted:
            if kind == "audit":
                metrics.observe_emitted(ev, arrived)
        if newest is not None:
            metrics.record_processed(newest)
