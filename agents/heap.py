"""The worker's garbage-collection policy: full collections on the worker's schedule, not the allocator's.

A worker keeps every owned workload's slot in memory (decision state, VPA histograms, inbox):
hundreds of thousands of tracked objects for a few thousand workloads, and the state it replaces
on every tick keeps promoting new objects to CPython's oldest generation.  CPython collects that
generation whenever the objects promoted since the last full collection exceed a quarter of those
that survived it, and each such collection walks the whole heap.  In ``bench/capacity.py`` at
5,000 workloads that came every 10-15 s and cost 0.5 s of CPU each time: with the young
generations (which find the short-lived cycles) left as they are and the full collection run here
once a minute instead, the worker's CPU per message fell from 0.51-0.55 ms to 0.37-0.40 ms, the
same heap size (docs/performance.md, "the worker, sixth pass").

Nothing is leaked by it: cycles among young objects are still collected by the young
generations; only garbage that reached the oldest generation waits for the next scheduled full
collection.  That collection runs from the worker's timer (between batches, never inside one) at
least ``interval`` seconds after the last, and never sooner than a hundred times its own last
duration after it, so that it stays under 1 % of the worker's time however large the heap grows.
"""

from __future__ import annotations

import gc
import time

__all__ = ["HeapPolicy"]

#: Full collections never start by themselves: the oldest generation's threshold is the number of
#: young collections before one may, which this never reaches.
_NEVER = 2**31 - 1


class HeapPolicy:
    """Young generations as CPython has them; the full collection by :meth:`tick`."""

    def __init__(self, interval: float = 60.0) -> None:
        self.interval = interval
        self.collections = 0
        self.seconds = 0.0
        self._last = time.monotonic()
        self._took = 0.0
        self._saved: tuple[int, int, int] | None = None

    def install(self) -> None:
        """Stop the automatic full collections (the young generations keep their thresholds)."""
        if self._saved is None:
            self._saved = gc.get_threshold()
            young, middle, _ = self._saved
            gc.set_threshold(young, middle, _NEVER)

    def uninstall(self) -> None:
        """Give CPython its own thresholds back (tests; a worker keeps the policy until it exits)."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    def due(self, now: float) -> bool:
        return now - self._last >= max(self.interval, 100.0 * self._took)

    def tick(self, now: float) -> bool:
        """Run the full collection if it is due; returns whether it ran."""
        if self._saved is None or not self.due(now):
            return False
        start = time.perf_counter()
        gc.collect()
        self._took = time.perf_counter() - start
        self._last = now
        self.collections += 1
        self.seconds += self._took
        return True
