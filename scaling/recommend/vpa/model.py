"""What the recommender keeps per aggregate: histograms, sample times and the open memory windows.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/model/{aggregate_container_state,container}.go``
(``AggregateContainerState``, ``ContainerState.AddSample`` / ``RecordOOM``; docs/recommenders.md
2.2-2.5).  Tandem folds both into one :class:`ContainerState` per aggregate key (see the package
docstring for why), serialisable with an exact round trip.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any, Final

from .arithmetic import MAX_RESOURCE_AMOUNT, millicores_up, resource_amount, scale_resource
from .config import VpaConfig
from .histogram import (
    CPU_HISTOGRAM_OPTIONS,
    CPU_THRESHOLDS,
    EPSILON,
    MEMORY_HISTOGRAM_OPTIONS,
    MIN_SAMPLE_WEIGHT,
    DecayingHistogram,
    finite_number,
)

__all__ = ["GC_INTERVAL", "ContainerState", "collect_garbage", "merge_states"]


#: ``_MemoryWindow``'s "no time yet" (Go's zero ``time.Time``), below every sample time: a window
#: that has none compares as upstream's zero time does (nothing is before it, nothing inside it).
_NEVER: Final = -math.inf


class _MemoryWindow:
    """One pod's per-container state (VPA: model/container.go ContainerState): its open memory
    aggregation interval and the time of its last accepted CPU sample (``LastCPUSampleStart``).

    ``end`` and ``last_ts`` are ``_NEVER`` until set (``None`` in :meth:`to_list`), so that the hot
    path of :meth:`ContainerState.add_memory_samples` compares them without a test for ``None``;
    ``top`` is what a sample must not exceed to leave the window's peak alone: the larger peak, or
    ``MAX_RESOURCE_AMOUNT`` while both are 0 (upstream adds no peak then).  Set through
    :meth:`set_peaks`.
    """

    __slots__ = ("cpu_ts", "end", "last_ts", "memory_peak", "oom_peak", "top")

    def __init__(self) -> None:
        self.end: float = _NEVER  # WindowEnd (exclusive)
        self.memory_peak = 0
        self.oom_peak = 0
        self.top = MAX_RESOURCE_AMOUNT
        self.last_ts: float = _NEVER  # lastMemorySampleStart
        self.cpu_ts: float = _NEVER  # LastCPUSampleStart

    def set_peaks(self, memory_peak: int, oom_peak: int) -> None:
        self.memory_peak = memory_peak
        self.oom_peak = oom_peak
        top = memory_peak if memory_peak >= oom_peak else oom_peak
        self.top = top if top != 0 else MAX_RESOURCE_AMOUNT

    def last_seen(self) -> float:
        """The pod's last accepted sample time of either resource (``_NEVER`` if none)."""
        return self.last_ts if self.last_ts >= self.cpu_ts else self.cpu_ts

    def to_list(self) -> list[Any]:
        out: list[Any] = [
            None if self.end == _NEVER else self.end,
            self.memory_peak,
            self.oom_peak,
            None if self.last_ts == _NEVER else self.last_ts,
        ]
        if self.cpu_ts != _NEVER:
            out.append(self.cpu_ts)
        return out

    @classmethod
    def from_list(cls, data: object) -> _MemoryWindow:
        # Four items: a state written before the per-pod CPU time was kept (no CPU sample yet).
        if not isinstance(data, list) or len(data) not in (4, 5):
            raise ValueError("memory window: expected [end, peak, oom_peak, last_ts(, cpu_ts)]")
        w = cls()
        end, peak, oom, last = data[:4]
        w.end = _NEVER if end is None else finite_number(end, "window end")
        w.last_ts = _NEVER if last is None else finite_number(last, "window last_ts")
        if len(data) == 5:
            w.cpu_ts = finite_number(data[4], "window cpu_ts")
        for name, v in (("peak", peak), ("oom_peak", oom)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"memory window: {name} must be an int >= 0")
        w.set_peaks(peak, oom)
        return w


class ContainerState:
    """Everything the recommender keeps for one aggregate key (namespace, container, labels).

    Upstream's AggregateContainerState (CPU histogram, memory-peak histogram, first/last CPU sample
    time, CPU sample count - reference 2.2) plus the open memory window(s) of its ContainerState.
    Serialise with :meth:`to_dict` (plain JSON types, exact round trip).
    """

    __slots__ = ("cpu", "first_sample_ts", "last_sample_ts", "memory", "total_samples_count", "windows")

    def __init__(self) -> None:
        self.cpu = DecayingHistogram(CPU_HISTOGRAM_OPTIONS)
        self.memory = DecayingHistogram(MEMORY_HISTOGRAM_OPTIONS)
        # Note (reference 2.2): first/last sample time and the count come only from CPU samples.
        self.first_sample_ts: float | None = None
        self.last_sample_ts: float | None = None
        self.total_samples_count = 0
        self.windows: dict[str, _MemoryWindow] = {}

    # -- CPU -------------------------------------------------------------------------------------

    def add_cpu_samples(
        self, ts: float, cores: Sequence[float], cfg: VpaConfig, pods: Sequence[str] | None = None
    ) -> int:
        """Add one scrape's CPU samples (average cores) taken at ``ts``; ``pods[i]`` took ``cores[i]``.

        Reference 2.3.  De-duplication follows upstream's per-container rule (VPA:
        model/container.go addCPUSample): a pod's sample is accepted only if ``ts`` is strictly
        after that pod's last accepted CPU sample, so the pods of one scrape may arrive in one
        batch or in several with the same ``ts``.  Without ``pods`` the batch is one unit: accepted
        only if ``ts`` is after the aggregate's last sample.  Negative (and NaN) samples are
        rejected before the time check, and leave the pod's last time alone (``isValid`` first).

        Each sample is taken to integer millicores as the live path does (:func:`millicores_up`:
        metrics-server's nanocore quantity, ``Quantity.MilliValue()``, which rounds up) and added
        with constant weight 0.1 x decay.  Returns the number of samples accepted.  The hot path:
        the decay factor is computed once per batch, buckets come from a bisection over
        precomputed millicore thresholds, and the weights are still added one by one so that
        float sums match upstream's bit for bit.
        """
        ts = float(ts)
        values = self._accepted_cpu(ts, cores, cfg, pods)
        if not values:
            return 0
        self._add_to_cpu_histogram(ts, values, cfg)
        n = len(values)
        self.total_samples_count += n
        # VPA: aggregate_container_state.go addCPUSample: last = latest, first = earliest.
        if self.last_sample_ts is None or ts > self.last_sample_ts:
            self.last_sample_ts = ts
        if self.first_sample_ts is None or ts < self.first_sample_ts:
            self.first_sample_ts = ts
        return n

    def _accepted_cpu(self, ts: float, cores: Sequence[float], cfg: VpaConfig, pods: Sequence[str] | None) -> list[int]:
        """The samples :meth:`add_cpu_samples` accepts, in integer millicores (VPA: container.go
        addCPUSample's de-duplication, per pod, or per batch without ``pods``)."""
        values: list[int] = []
        if pods is None:
            last = self.last_sample_ts
            if last is not None and not ts > last:
                return values
            for c in cores:
                if c >= 0.0:  # NaN fails
                    values.append(millicores_up(c))
            return values
        windows = self.windows
        for pod, c in zip(pods, cores, strict=True):
            if not c >= 0.0:
                continue
            w = windows.get(pod)
            if w is None:
                w = self._window(pod, ts, cfg)
            if not ts > w.cpu_ts:  # VPA: container.go addCPUSample, MeasureStart.After(LastCPUSampleStart)
                continue
            w.cpu_ts = ts
            values.append(millicores_up(c))
        return values

    def _add_to_cpu_histogram(self, ts: float, values: list[int], cfg: VpaConfig) -> None:
        """VPA: histogram.go AddSample for each of ``values`` (millicores) at weight 0.1 x decay,
        batched (see :meth:`add_cpu_samples`)."""
        lo = float(min(values))
        hi = float(max(values))
        h = self.cpu
        w_ = MIN_SAMPLE_WEIGHT * h.decay_factor(ts, cfg.cpu_histogram_decay_half_life)
        thresholds = CPU_THRESHOLDS
        bucket_of = bisect_right
        h.memo = None  # the weights change below, behind DecayingHistogram's back
        h.saved = None
        weights = h.weights
        total = h.total
        for m in values:
            b = bucket_of(thresholds, float(m))
            weights[b] += w_
            total += w_
        h.total = total
        # VPA: histogram.go AddSample moves min/max only to buckets holding >= epsilon; buckets
        # only grow within a batch and bucketing is monotone, so the batch's extremes decide.
        eps = EPSILON
        if w_ >= eps:
            bmin = bucket_of(thresholds, lo)
            bmax = bucket_of(thresholds, hi)
            if bmin < h.min_bucket:
                h.min_bucket = bmin
            if bmax > h.max_bucket:
                h.max_bucket = bmax
        else:
            for b in {bucket_of(thresholds, float(m)) for m in values}:
                if weights[b] >= eps:
                    if b < h.min_bucket:
                        h.min_bucket = b
                    if b > h.max_bucket:
                        h.max_bucket = b

    # -- memory ----------------------------------------------------------------------------------

    def add_memory_sample(self, ts: float, bytes_: int, cfg: VpaConfig, *, pod: str = "") -> bool:
        """Add a memory usage sample (bytes) of ``pod`` taken at ``ts``; True if accepted.

        Reference 2.4: one peak per pod per memory aggregation interval, stored in the histogram
        at the window's end; a sample older than the pod's last accepted one is dropped.
        """
        if not bytes_ >= 0:
            return False
        window = self._window(pod, float(ts), cfg)
        return self._add_memory_peak(window, float(ts), resource_amount(float(bytes_)), False, cfg)

    def add_memory_samples(self, ts: float, samples: Iterable[tuple[str, int]], cfg: VpaConfig) -> None:
        """:meth:`add_memory_sample` for each ``(pod, bytes)`` of one scrape, in order.

        The hot path: most samples fall inside their pod's open window without beating its peak,
        and then only the window's last sample time moves (``addMemorySample`` returns early);
        those are handled here without the general path's calls.  One chained comparison each:
        not before the last sample, inside the window (never inside an unopened one), and between
        0 and the window's ``top``, which is at most ``MAX_RESOURCE_AMOUNT`` (a float sample there
        truncates to an amount that beats no peak either: the general path would only move the
        last sample time too).
        """
        ts = float(ts)
        windows = self.windows
        for pod, bytes_ in samples:
            window = windows.get(pod)
            if window is not None and window.last_ts <= ts < window.end and 0 <= bytes_ <= window.top:
                window.last_ts = ts
                continue
            self.add_memory_sample(ts, bytes_, cfg, pod=pod)

    def record_oom(self, ts: float, memory_bytes: int, cfg: VpaConfig, *, pod: str = "", max_memory: int = 0) -> bool:
        """Record an OOM kill at ``ts``; ``memory_bytes`` is the container's memory request then.

        (Upstream's OOM observer passes the request for OOMKilled container statuses and the
        reported usage for kubelet eviction events; either goes in ``memory_bytes``.)

        Reference 2.5 / VPA: model/container.go RecordOOM.  Dropped if ``ts`` is more than one
        interval before the pod's last memory sample (1.8.1's rule, kubernetes/autoscaler#8548:
        not WindowEnd, which can sit up to an interval ahead of the last sample).
        memoryUsed = max(request, the window's usage peak) (not the OOM peak, to avoid runaway
        growth); the artificial sample is
        max(memoryUsed + oom_min_bump_up_bytes, memoryUsed x oom_bump_up_ratio), fed into the peak
        logic as an OOM sample.  ``max_memory`` (> 0) is upstream's newer per-container cap on
        memoryUsed and the bump (0: no cap).  Returns True if the OOM was recorded.
        """
        ts = float(ts)
        window = self._window(pod, ts, cfg)
        interval = cfg.memory_aggregation_interval
        if ts < window.last_ts - interval:  # no memory sample yet (_NEVER): nothing is before it
            return False
        request = resource_amount(float(memory_bytes))
        memory_used = max(request, window.memory_peak)
        if max_memory > 0 and memory_used > max_memory:
            memory_used = max_memory
        memory_needed = max(
            memory_used + resource_amount(cfg.oom_min_bump_up_bytes), scale_resource(memory_used, cfg.oom_bump_up_ratio)
        )
        if max_memory > 0 and memory_needed > max_memory:
            memory_needed = max_memory
        return self._add_memory_peak(window, ts, memory_needed, True, cfg)

    def _window(self, pod: str, ts: float, cfg: VpaConfig) -> _MemoryWindow:
        window = self.windows.get(pod)
        if window is None:
            # Upstream forgets a pod's ContainerState when the pod is deleted (model/cluster.go
            # DeletePod); tandem's caller does so with :meth:`forget_pods` when it knows the pods.
            # Without that, a pod silent for a whole aggregation window (8 days: nothing of it is
            # left in the histograms' horizon) is forgotten here.  A shorter horizon would drop
            # the windows of pods that stay alive through a long metrics gap, and their resumed
            # peaks would no longer be aligned to their old window ends as upstream's are.
            horizon = ts - cfg.memory_aggregation_window_length
            stale = [p for p, w in self.windows.items() if w.last_seen() <= horizon]
            for p in stale:
                del self.windows[p]
            window = self.windows[pod] = _MemoryWindow()
        return window

    def forget_pods(self, live: Container[str]) -> None:
        """Forget the per-pod state of every pod not in ``live`` (VPA: model/cluster.go DeletePod,
        run for the pods gone from the cluster by the feeder's DeleteRemovedPods each run)."""
        gone = [p for p in self.windows if p not in live]
        for p in gone:
            del self.windows[p]

    def _add_memory_peak(self, window: _MemoryWindow, ts: float, usage: int, is_oom: bool, cfg: VpaConfig) -> bool:
        # VPA: model/container.go addMemorySample.  OOM samples are always processed.
        if not is_oom and ts < window.last_ts:  # never before _NEVER
            return False
        window.last_ts = ts
        if window.end == _NEVER:  # the first sample opens the window
            window.end = ts
        half_life = cfg.memory_histogram_decay_half_life
        add_new_peak = False
        if ts < window.end:
            old_peak = max(window.memory_peak, window.oom_peak)
            if old_peak != 0 and usage > old_peak:
                self.memory.subtract_sample(float(old_peak), 1.0, window.end, half_life)
                add_new_peak = True
        else:
            # Shift by whole intervals so that the window passes ts:
            # shift = (ts - WindowEnd).Truncate(interval) + interval.
            interval = cfg.memory_aggregation_interval
            window.end += math.floor((ts - window.end) / interval) * interval + interval
            window.set_peaks(0, 0)
            add_new_peak = True
        if add_new_peak:
            self.memory.add_sample(float(usage), 1.0, window.end, half_life)
            if is_oom:
                window.set_peaks(window.memory_peak, usage)
            else:
                window.set_peaks(usage, window.oom_peak)
        return True

    # -- lifecycle ------------------------------------------------------------------------------

    def is_expired(self, now: float, cfg: VpaConfig) -> bool:
        """VPA: model/aggregate_container_state.go isExpired - no CPU sample for a whole window.

        Upstream drops such aggregates at its hourly garbage collection, not at once
        (:func:`collect_garbage`); until then they are still recommended.  An aggregate without
        CPU samples never expires here: upstream ages those from their creation in wall-clock
        time (``CreationTime = time.Now()``), which has no event-time counterpart.
        """
        last = self.last_sample_ts
        return self.total_samples_count > 0 and last is not None and now - last >= cfg.memory_aggregation_window_length

    def merge(self, other: ContainerState, cfg: VpaConfig) -> None:
        """Add ``other`` into this aggregate (VPA: aggregate_container_state.go MergeContainerState).

        Histograms are added after aligning reference times; first = earliest, last = latest,
        counts summed.  Memory windows are per-pod state and are not merged.
        """
        self.cpu.merge(other.cpu, cfg.cpu_histogram_decay_half_life)
        self.memory.merge(other.memory, cfg.memory_histogram_decay_half_life)
        if self.first_sample_ts is None or (
            other.first_sample_ts is not None and other.first_sample_ts < self.first_sample_ts
        ):
            self.first_sample_ts = other.first_sample_ts
        if other.last_sample_ts is not None and (
            self.last_sample_ts is None or other.last_sample_ts > self.last_sample_ts
        ):
            self.last_sample_ts = other.last_sample_ts
        self.total_samples_count += other.total_samples_count

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: ``{"v": 1, "cpu": {...}, "mem": {...}, "first", "last", "n", "win": {pod: [...]}}``."""
        out: dict[str, Any] = {
            "v": 1,
            "cpu": self.cpu.to_dict(),
            "mem": self.memory.to_dict(),
            "first": self.first_sample_ts,
            "last": self.last_sample_ts,
            "n": self.total_samples_count,
        }
        if self.windows:
            out["win"] = {pod: w.to_list() for pod, w in self.windows.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContainerState:
        if not isinstance(data, Mapping) or data.get("v") != 1:
            raise ValueError("container state: expected a mapping with format version 'v': 1")
        s = cls()
        s.cpu = DecayingHistogram.from_dict(data.get("cpu") or {}, CPU_HISTOGRAM_OPTIONS)
        s.memory = DecayingHistogram.from_dict(data.get("mem") or {}, MEMORY_HISTOGRAM_OPTIONS)
        first, last = data.get("first"), data.get("last")
        s.first_sample_ts = None if first is None else finite_number(first, "first")
        s.last_sample_ts = None if last is None else finite_number(last, "last")
        n = data.get("n", 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError("container state: 'n' must be an int >= 0")
        s.total_samples_count = n
        windows = data.get("win") or {}
        if not isinstance(windows, Mapping):
            raise ValueError("container state: 'win' must be a mapping")
        s.windows = {str(pod): _MemoryWindow.from_list(w) for pod, w in windows.items()}
        return s

    def copy(self) -> ContainerState:
        return ContainerState.from_dict(self.to_dict())


def merge_states(states: Iterable[ContainerState], cfg: VpaConfig) -> ContainerState:
    """One aggregate from several (VPA: AggregateStateByContainerName): e.g. all label sets of a
    container name matched by one VPA.  The inputs are not modified."""
    merged = ContainerState()
    for s in states:
        merged.merge(s, cfg)
    return merged


#: VPA: routines/recommender_controller.go aggregateContainerStateGCInterval (a constant, not a flag).
GC_INTERVAL: Final = 3600.0


def collect_garbage(
    states: dict[str, ContainerState], now: float, last_gc: float | None, cfg: VpaConfig
) -> float | None:
    """Drop the expired aggregates of ``states`` if a GC interval has passed since ``last_gc``.

    VPA: model/cluster.go RateLimitedGarbageCollectAggregateCollectionStates, called at the end of
    every recommender run (routines/recommender.go RunOnce, after UpdateVPAs): the first run
    collects (``last_gc`` None, Go's zero time), then one run an hour or more after the last
    collection.  An expired aggregate is thus still recommended until the collection after it
    expired.  (Upstream also drops empty aggregates of pods that are gone and whose controller
    is gone; tandem recommends for a live workload, whose controller exists, so never here.)
    Returns the new ``last_gc``.
    """
    if last_gc is not None and now - last_gc < GC_INTERVAL:
        return last_gc
    for name in [n for n, s in states.items() if s.is_expired(now, cfg)]:
        del states[name]
    return now
