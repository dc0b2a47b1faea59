"""Bucket layouts and the decaying histogram the VPA recommender keeps per resource.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/util/{histogram,histogram_options,
decaying_histogram}.go`` and the layouts and weights of ``pkg/recommender/model/aggregations_config.go``
(docs/recommenders.md 2.6).  Percentiles, decay and the checkpoint form follow upstream exactly,
because the recommendation is read off the bucket boundaries.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping
from itertools import accumulate, compress
from typing import Any, Final

from .arithmetic import MAX_RESOURCE_AMOUNT, go_exp2, go_log, go_pow

__all__ = [
    "BUCKET_RATIO",
    "CPU_HISTOGRAM_OPTIONS",
    "EPSILON",
    "MEMORY_HISTOGRAM_OPTIONS",
    "DecayingHistogram",
    "ExponentialHistogramOptions",
    "HistogramOptions",
    "LinearHistogramOptions",
]

#: VPA: pkg/recommender/model/aggregations_config.go, minSampleWeight (reference 2.3: weight 0.1).
MIN_SAMPLE_WEIGHT: Final = 0.1
#: VPA: aggregations_config.go, epsilon = 0.001 * minSampleWeight (reference 2.6).
EPSILON: Final = 0.001 * MIN_SAMPLE_WEIGHT
#: VPA: aggregations_config.go, DefaultHistogramBucketSizeGrowth = 0.05 (reference 2.1 "ratio 1.05").
BUCKET_RATIO: Final = 1.0 + 0.05
#: VPA: pkg/recommender/util/decaying_histogram.go, maxDecayExponent (reference 2.6).
MAX_DECAY_EXPONENT: Final = 100
#: Seconds from Go's zero time (0001-01-01 UTC) to the Unix epoch.  ``time.Time.Round`` rounds to
#: multiples of the duration *since the zero time*; for 24 h the two agree, for other half-lives not.
_GO_ZERO_TIME_TO_UNIX: Final = 62135596800.0


def _round_to_half_life(ts: float, half_life: float) -> float:
    """``time.Time.Round(halfLife)``: nearest multiple since Go's zero time, halfway rounds up."""
    x = ts + _GO_ZERO_TIME_TO_UNIX
    q = math.floor(x / half_life)
    r = x - q * half_life
    if r + r >= half_life:
        q += 1
    return q * half_life - _GO_ZERO_TIME_TO_UNIX


class HistogramOptions:
    """A bucket layout: how many buckets, where each starts, which bucket a value falls in."""

    __slots__ = ("epsilon", "num_buckets")

    num_buckets: int
    epsilon: float

    def find_bucket(self, value: float) -> int:
        raise NotImplementedError

    def bucket_start(self, bucket: int) -> float:
        raise NotImplementedError


class ExponentialHistogramOptions(HistogramOptions):
    """Exponential buckets (reference 2.6; VPA: util/histogram_options.go NewExponentialHistogramOptions).

    Bucket 0 is [0, first); bucket n >= 1 starts at first x (ratio^n - 1)/(ratio - 1); there are
    ceil(log_ratio(max x (ratio - 1)/first + 1)) + 1 buckets; values beyond the range land in the
    last bucket and values below ``first`` (negatives too) in bucket 0.
    """

    __slots__ = ("_starts", "first_bucket_size", "ratio")

    def __init__(self, max_value: float, first_bucket_size: float, ratio: float, epsilon: float) -> None:
        if max_value <= 0.0 or first_bucket_size <= 0.0 or ratio <= 1.0 or epsilon <= 0.0:
            raise ValueError("maxValue, firstBucketSize and epsilon must be > 0.0, ratio must be > 1.0")
        self.num_buckets = math.ceil(go_log(ratio, max_value * (ratio - 1) / first_bucket_size + 1)) + 1
        self.first_bucket_size = first_bucket_size
        self.ratio = ratio
        self.epsilon = epsilon
        # GetBucketStart: firstBucketSize * (math.Pow(ratio, bucket) - 1) / (ratio - 1), bucket 0 -> 0.
        self._starts = [0.0] + [
            first_bucket_size * (go_pow(ratio, float(b)) - 1) / (ratio - 1) for b in range(1, self.num_buckets)
        ]

    def find_bucket(self, value: float) -> int:
        # FindBucket: floor(log(value/first*(ratio-1)+1) / log(ratio)), in Go's evaluation order.
        if value < self.first_bucket_size:
            return 0
        bucket = int(go_log(self.ratio, value * (self.ratio - 1) / self.first_bucket_size + 1))
        if bucket >= self.num_buckets:
            return self.num_buckets - 1
        return bucket

    def bucket_start(self, bucket: int) -> float:
        if bucket < 0 or bucket >= self.num_buckets:
            raise IndexError(f"index {bucket} out of range [0..{self.num_buckets - 1}]")
        return self._starts[bucket]


class LinearHistogramOptions(HistogramOptions):
    """Fixed-size buckets (VPA: util/histogram_options.go NewLinearHistogramOptions); used by tests."""

    __slots__ = ("bucket_size",)

    def __init__(self, max_value: float, bucket_size: float, epsilon: float) -> None:
        if max_value <= 0.0 or bucket_size <= 0.0 or epsilon <= 0.0:
            raise ValueError("maxValue and bucketSize must both be positive")
        self.num_buckets = math.ceil(max_value / bucket_size) + 1
        self.bucket_size = bucket_size
        self.epsilon = epsilon

    def find_bucket(self, value: float) -> int:
        bucket = int(value / self.bucket_size)
        if bucket < 0:
            return 0
        if bucket >= self.num_buckets:
            return self.num_buckets - 1
        return bucket

    def bucket_start(self, bucket: int) -> float:
        if bucket < 0 or bucket >= self.num_buckets:
            raise IndexError(f"index {bucket} out of range [0..{self.num_buckets - 1}]")
        return float(bucket) * self.bucket_size


#: VPA: model/aggregations_config.go cpuHistogramOptions - first bucket 0.01 cores, ratio 1.05, max
#: 1000 cores -> 176 buckets (reference 2.6, taken literally; an open upstream PR moves to 0.001).
CPU_HISTOGRAM_OPTIONS: Final = ExponentialHistogramOptions(1000.0, 0.01, BUCKET_RATIO, EPSILON)
#: VPA: aggregations_config.go memoryHistogramOptions - first bucket 1e7 bytes, ratio 1.05, max 1e12.
MEMORY_HISTOGRAM_OPTIONS: Final = ExponentialHistogramOptions(1e12, 1e7, BUCKET_RATIO, EPSILON)


def _millicore_thresholds(options: ExponentialHistogramOptions) -> list[float]:
    """For n = 1..N-1, the smallest integer millicore amount m with find_bucket(m/1000) >= n.

    Why: upstream truncates every CPU sample to integer millicores (``CPUAmountFromCores``) before
    bucketing ``m/1000`` cores, and find_bucket is monotone, so a bisection over these thresholds
    gives exactly upstream's bucket for a sample of ``c`` cores straight from ``c * 1000.0``
    (``t <= x`` iff ``t <= int(x)`` for integer ``t``) - one C call instead of ``math.log``.
    """
    out: list[float] = []
    lo = 0
    for n in range(1, options.num_buckets):
        hi = MAX_RESOURCE_AMOUNT
        if options.find_bucket(hi / 1000.0) < n:  # pragma: no cover - the layout always reaches N-1
            break
        while lo < hi:
            mid = (lo + hi) // 2
            if options.find_bucket(mid / 1000.0) >= n:
                hi = mid
            else:
                lo = mid + 1
        out.append(float(lo))
    return out


CPU_THRESHOLDS: Final = _millicore_thresholds(CPU_HISTOGRAM_OPTIONS)


# --------------------------------------------------------------------------------------------------
# Decaying histogram (VPA: pkg/recommender/util/histogram.go + decaying_histogram.go)
# --------------------------------------------------------------------------------------------------


class DecayingHistogram:
    """Bucket weights that halve every half-life, kept relative to a reference time.

    A sample at time t is added with weight x 2^((t - ref)/halfLife).  When t passes ref + 100
    half-lives the reference moves to t (rounded to a half-life multiple) and every weight is
    rescaled by the matching power of two; only relative weights matter, so percentiles do not
    change (reference 2.6).  Weights live in a dense list in memory (the hot path indexes it) and
    are serialised sparsely.  ``ref`` ``None`` stands for Go's zero ``time.Time``.

    ``min_bucket``/``max_bucket`` follow upstream exactly (first/last bucket holding at least
    epsilon; ``N-1``/``0`` when empty) because the percentile walk and ``scale`` depend on them.

    Every method that changes the weights clears ``memo``, the last :meth:`percentiles` answer:
    a recommender run asks for three percentiles per histogram, and the memory histogram (one
    peak per pod per day) is unchanged between most runs.  Code that writes ``weights`` directly
    (the CPU hot path in ``model.py``) clears it too.
    """

    __slots__ = ("max_bucket", "memo", "min_bucket", "options", "ref", "saved", "total", "weights")

    def __init__(self, options: HistogramOptions) -> None:
        self.options = options
        self.weights: list[float] = [0.0] * options.num_buckets
        self.total = 0.0
        self.min_bucket = options.num_buckets - 1
        self.max_bucket = 0
        self.ref: float | None = None
        #: (percentiles asked, their values) of the last :meth:`percentiles` since a change.
        self.memo: tuple[tuple[float, ...], tuple[float, ...]] | None = None
        #: The last :meth:`to_dict` since a change (cleared with ``memo``): a live worker writes
        #: each slot once a scrape, and the memory histogram changes about once a day.
        self.saved: dict[str, Any] | None = None

    # -- decay ---------------------------------------------------------------------------------

    def decay_factor(self, ts: float, half_life: float) -> float:
        """2^((ts - ref)/halfLife), first renormalising if ts is past ref + 100 half-lives.

        VPA: decaying_histogram.go decayFactor (``timestamp.After(maxAllowedTimestamp)``).
        """
        ref = self.ref
        if ref is None or ts > ref + half_life * MAX_DECAY_EXPONENT:
            self.shift_reference(ts, half_life)
            ref = self.ref
            assert ref is not None
        return go_exp2((ts - ref) / half_life)  # math.Exp2, bit for bit

    def shift_reference(self, new_ref: float, half_life: float) -> None:
        """VPA: decaying_histogram.go shiftReferenceTimestamp - round, then scale by 2^exponent."""
        new_ref = _round_to_half_life(new_ref, half_life)
        if self.ref is None:
            # From Go's zero time the Duration saturates: Ldexp(1, hugely negative) == 0.
            factor = 0.0
        else:
            exponent = math.floor((self.ref - new_ref) / half_life + 0.5)
            factor = math.ldexp(1.0, exponent) if exponent < 1024 else math.inf
        self._scale(factor)
        self.ref = new_ref

    def _scale(self, factor: float) -> None:
        # VPA: histogram.go scale - only [minBucket, maxBucket] is rescaled.
        self.memo = None
        self.saved = None
        w = self.weights
        for b in range(self.min_bucket, self.max_bucket + 1):
            w[b] *= factor
        self.total *= factor
        self._update_min_max()

    # -- updates ------------------------------------------------------------------------------

    def add_sample(self, value: float, weight: float, ts: float, half_life: float) -> None:
        """VPA: decaying_histogram.go AddSample -> histogram.go AddSample."""
        self._add(self.options.find_bucket(value), weight * self.decay_factor(ts, half_life))

    def _add(self, bucket: int, weight: float) -> None:
        if weight < 0.0:
            raise ValueError("sample weight must be non-negative")
        self.memo = None
        self.saved = None
        w = self.weights
        w[bucket] += weight
        self.total += weight
        eps = self.options.epsilon
        if bucket < self.min_bucket and w[bucket] >= eps:
            self.min_bucket = bucket
        if bucket > self.max_bucket and w[bucket] >= eps:
            self.max_bucket = bucket

    def subtract_sample(self, value: float, weight: float, ts: float, half_life: float) -> None:
        """VPA: histogram.go SubtractSample with safeSubtract (results below epsilon become 0)."""
        weight *= self.decay_factor(ts, half_life)
        if weight < 0.0:
            raise ValueError("sample weight must be non-negative")
        bucket = self.options.find_bucket(value)
        self.memo = None
        self.saved = None
        eps = self.options.epsilon
        total = self.total - weight
        self.total = 0.0 if total < eps else total
        bw = self.weights[bucket] - weight
        self.weights[bucket] = 0.0 if bw < eps else bw
        self._update_min_max()

    def _update_min_max(self) -> None:
        # VPA: histogram.go updateMinAndMaxBucket.
        w = self.weights
        eps = self.options.epsilon
        last = self.options.num_buckets - 1
        lo = self.min_bucket
        while w[lo] < eps and lo < last:
            lo += 1
        hi = self.max_bucket
        while w[hi] < eps and hi > 0:
            hi -= 1
        self.min_bucket = lo
        self.max_bucket = hi

    def merge(self, other: DecayingHistogram, half_life: float) -> None:
        """VPA: decaying_histogram.go Merge - align the older reference with the younger one.

        ``other`` is not modified (upstream shifts it in place; tandem works on a copy).
        """
        if other.options is not self.options and (
            other.options.num_buckets != self.options.num_buckets
            or any(
                other.options.bucket_start(b) != self.options.bucket_start(b) for b in range(self.options.num_buckets)
            )
        ):
            raise ValueError("can't merge histograms with different options")
        o = other.copy()
        self.memo = None
        self.saved = None
        if o.ref is not None and (self.ref is None or self.ref < o.ref):
            self.shift_reference(o.ref, half_life)
        elif self.ref is not None and (o.ref is None or o.ref < self.ref):
            o.shift_reference(self.ref, half_life)
        w = self.weights
        for b in range(o.min_bucket, o.max_bucket + 1):
            w[b] += o.weights[b]
        self.total += o.total
        self.min_bucket = min(self.min_bucket, o.min_bucket)
        self.max_bucket = max(self.max_bucket, o.max_bucket)

    # -- queries ------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return self.weights[self.min_bucket] < self.options.epsilon

    def percentile(self, percentile: float) -> float:
        """End of the bucket where the cumulative weight reaches ``percentile`` x total.

        VPA: histogram.go Percentile - walk [minBucket, maxBucket) summing weights until the sum is
        >= the threshold; return the start of the next bucket, or the start of the last bucket if
        that is where the walk ended; 0 for an empty histogram (reference 2.6).
        """
        if self.is_empty():
            return 0.0
        threshold = percentile * self.total
        w = self.weights
        partial = 0.0
        bucket = self.min_bucket
        hi = self.max_bucket
        while bucket < hi:
            partial += w[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.options.num_buckets - 1:
            return self.options.bucket_start(bucket + 1)
        return self.options.bucket_start(bucket)

    def percentiles(self, percentiles: tuple[float, ...]) -> tuple[float, ...]:
        """:meth:`percentile` of each of ``percentiles``, from one pass, remembered until a change.

        The walk of :meth:`percentile` stops at the first bucket whose running sum reaches the
        threshold; the running sums are the same for every percentile, so they are summed once
        (``accumulate`` adds left to right, as the walk does: the same floats) and each threshold
        is found by bisection (the sums of non-negative weights never decrease).  A NaN threshold
        never stops the walk, so it ends where the walk would.
        """
        memo = self.memo
        if memo is not None and memo[0] == percentiles:
            return memo[1]
        if self.is_empty():
            values = tuple(0.0 for _ in percentiles)
        else:
            lo = self.min_bucket
            hi = self.max_bucket
            sums = list(accumulate(self.weights[lo:hi]))
            total = self.total
            options = self.options
            last = options.num_buckets - 1
            # The exponential layouts' starts read directly (bucket_start's range test cannot
            # fail here: lo <= bucket <= last); other layouts through bucket_start.
            start: Callable[[int], float] = options.bucket_start
            if type(options) is ExponentialHistogramOptions:
                start = options._starts.__getitem__
            out: list[float] = []
            for p in percentiles:
                threshold = p * total
                bucket = lo + bisect_left(sums, threshold) if threshold == threshold else max(lo, hi)
                out.append(start(bucket + 1) if bucket < last else start(bucket))
            values = tuple(out)
        self.memo = (percentiles, values)
        return values

    # -- copies and serialisation ---------------------------------------------------------------

    def copy(self) -> DecayingHistogram:
        h = DecayingHistogram(self.options)
        h.weights = list(self.weights)
        h.memo = self.memo
        h.saved = None
        h.total = self.total
        h.min_bucket = self.min_bucket
        h.max_bucket = self.max_bucket
        h.ref = self.ref
        return h

    def to_dict(self) -> dict[str, Any]:
        """``{"ref", "tot", "b": [bucket...], "w": [weight...]}``, non-zero buckets only.

        min/max bucket are not stored: they are the first/last bucket holding at least epsilon
        (or N-1/0), an invariant upstream's operations keep.
        """
        # ``compress`` keeps the items whose weight is truthy, i.e. ``!= 0.0`` (weights are finite;
        # -0.0 is falsy like 0.0): the same lists as a comprehension over all 176 buckets, in C.
        # A live worker writes a slot (two histograms per container) once a scrape; the result is
        # kept until the next change (``saved``), and the memory histogram rarely changes.
        saved = self.saved
        if saved is None:
            weights = self.weights
            saved = self.saved = {
                "ref": self.ref,
                "tot": self.total,
                "b": list(compress(range(len(weights)), weights)),
                "w": list(compress(weights, weights)),
            }
        return saved

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], options: HistogramOptions) -> DecayingHistogram:
        h = cls(options)
        ref = data.get("ref")
        h.ref = None if ref is None else finite_number(ref, "ref")
        h.total = finite_number(data.get("tot", 0.0), "tot")
        buckets = data.get("b", [])
        weights = data.get("w", [])
        if not isinstance(buckets, list) or not isinstance(weights, list) or len(buckets) != len(weights):
            raise ValueError("histogram: 'b' and 'w' must be lists of equal length")
        for b, v in zip(buckets, weights, strict=True):
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < options.num_buckets:
                raise ValueError(f"histogram: bucket {b!r} out of range")
            weight = finite_number(v, "w")
            if weight < 0.0:
                raise ValueError("histogram: negative weight")
            h.weights[b] = weight
        eps = options.epsilon
        heavy = [b for b in buckets if h.weights[b] >= eps]
        if heavy:
            h.min_bucket, h.max_bucket = min(heavy), max(heavy)
        return h


def finite_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)
