"""The worker's garbage-collection policy: full collections on the worker's schedule, not the allocator's.

A worker keeps every owned workload's slot in memory (decision state, VPA histograms, inbox):
hundreds of thousands of tracked objects for a few thousand workloads, and the state it replaces
on every tick keeps promoting new objects to CPython's oldest generation.  CPython collects that
generation whenever the objects promoted since the last full collection exceed a quarter of those
that survived it, and each such collection walks the whole heap.  In ``bench/capacity.py`` at
5,000 workloads that came every 10-15 s and cost 0.5 s of CPU each time: with the young
generations (which find the short-lived cycles) left as they are and the full collection run here
once a minute instead, the worker's CPU per message fell from 0.51-0.55 ms to 0.37-0.40 ms, the
same heap size (docs/performance.md, "The worker").

Nothing is leaked by it: cycles among young objects are still collected by the young
generations; only garbage that reached the oldest generation waits for the next scheduled full
collection.  That collection runs from the worker's timer (between batches, never inside one) at
least ``interval`` seconds after the last, and never sooner than a hundred times its own last
duration after it, so that it stays under 1 % of the worker's time however large the heap grows.

It also waits for a moment when the worker is idle (no batch for half a second: between two
scrapes, a worker that keeps up always has one): at 20,000 workloads the collection walks 1.9 M
objects in about 2 s, and one that fell into a scrape's drain delayed that scrape by as much
(``bench/capacity.py``, docs/performance.md, "The worker").  A worker that is never idle
collects anyway once ``PATIENCE`` periods have passed, so the oldest generation's garbage always
has a bound.

And it walks only what is new: the survivors of each scheduled collection are frozen
(``gc.freeze()``: CPython's permanent generation, which no collection walks), so the next one
looks only at the objects that survived since.  The slots of 20,000 workloads held 2.1 M tracked
objects, walked in 2.6 s; 13 scrapes later the objects not frozen were 0.7 M, collected in 1.1 s
(docs/performance.md, "The worker").  A frozen object is still freed when its last
reference goes; only a reference cycle that became garbage after it was frozen is not found, so
every ``COMPLETE_EVERY``-th scheduled collection unfreezes everything first and walks it all (in
that measurement the complete walk found no such cycle).
"""

from __future__ import annotations

import gc
import time

__all__ = ["COMPLETE_EVERY", "PATIENCE", "HeapPolicy"]

#: A due collection waits for an idle moment at most this many periods (then runs regardless).
PATIENCE = 3.0
#: Every this many scheduled collections (the first included), one walks the frozen objects too.
COMPLETE_EVERY = 10

#: Full collections never start by themselves: the oldest generation's threshold is the number of
#: young collections before one may, which this never reaches.
_NEVER = 2**31 - 1


class HeapPolicy:
    """Young generations as CPython has them; the full collection by :meth:`tick`."""

    def __init__(self, interval: float = 60.0, now: float | None = None) -> None:
        """``now`` is the monotonic clock's reading at start (tests pass one exactly representable,
        so that ``start + 180.0 + 600.0`` minus ``start + 180.0`` is 600.0, not 599.9999999999)."""
        self.interval = interval
        self.collections = 0
        self.seconds = 0.0
        self._last = time.monotonic() if now is None else now
        self._took = 0.0
        self._saved: tuple[int, int, int] | None = None
        #: Whether the last scheduled collection walked the frozen objects too.
        self.complete = False

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
            gc.unfreeze()
            self._saved = None

    @property
    def last(self) -> float:
        """Seconds the last full collection took."""
        return self._took

    def period(self) -> float:
        """Seconds between two full collections: ``interval``, or a hundred times the last one's."""
        return max(self.interval, 100.0 * self._took)

    def due(self, now: float) -> bool:
        return now - self._last >= self.period()

    def tick(self, now: float, idle: bool = True) -> bool:
        """Run the full collection if it is due and the worker ``idle`` (or it waited
        ``PATIENCE`` periods for that); returns whether it ran."""
        if self._saved is None or not self.due(now):
            return False
        if not idle and now - self._last < PATIENCE * self.period():
            return False
        self.complete = self.collections % COMPLETE_EVERY == 0
        start = time.perf_counter()
        if self.complete:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._took = time.perf_counter() - start
        self._last = now
        self.collections += 1
        self.seconds += self._took
        return True
