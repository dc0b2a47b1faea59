"""Tandem's VPA recommender: the kubernetes/autoscaler VPA recommender's arithmetic, as a pure module.

Why a re-implementation: tandem recomputes, from the raw metric stream and in event time, the same
recommendation that the upstream ``vpa-recommender`` would write into a VPA's status, so that a
replay is deterministic and a workload without a VPA still gets vertical recommendations.  Nothing
here reads a clock, talks to Kubernetes or Kafka, or needs anything beyond the standard library.

Sources: reference ``hpa-vpa-customhpa.md`` section 2 (paraphrasing kubernetes/autoscaler
``vertical-pod-autoscaler/pkg/recommender/{util,model,logic,routines}`` and ``pkg/utils/vpa``).
Every rule below cites the upstream file it reproduces.

State model (reference 2.2).  Upstream keeps, per *container instance*, a ``ContainerState`` (last
CPU sample time, the open memory window) and, per *aggregate* (namespace + container name + pod
labels), an ``AggregateContainerState`` (two decaying histograms, first/last CPU sample time, CPU
sample count).  Tandem folds both into one :class:`ContainerState` per aggregate key, because the
collector sends one batch of CPU samples per container name and timestamp (several pods at once):

* CPU samples are de-duplicated per aggregate: a batch is accepted only if its ``ts`` is strictly
  after the previous accepted batch (upstream does the same per pod; all pods' samples of one
  scrape must therefore arrive in one batch).
* Memory peaks are kept per pod window; pass ``pod=`` (ideally the pod UID, since upstream starts a
  fresh window for a re-created pod) to get upstream's one-peak-per-pod-per-interval behaviour.
  Without ``pod`` all samples share one window, i.e. one peak per interval for the whole aggregate.

Units: CPU samples are float cores, memory samples integer bytes; every recommendation is an
``int`` (millicores for ``cpu``, bytes for ``memory``), computed with upstream's truncations
(``ResourceAmount`` is an int64; float -> amount truncates and clamps to [0, 1e14]).

Serialised size (measured by ``tests/unit/test_vpa_recommender.py::
test_week_of_state_serialises_compactly`` and ``bench/bench_vpa_histogram.py``): one aggregate fed
one CPU and one memory sample per minute for a week of a daily curve serialises with
``json.dumps(state.to_dict(), separators=(",", ":"))`` to about 1 KB (964 bytes: 34 non-zero CPU
buckets, 1 memory bucket, one memory window); five pods with per-pod memory windows, 1.3 KB.
Only non-zero buckets are stored; a weight is a full-precision float so the round trip is exact.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from ..errors import InvalidPolicy
from ..quantity import bytes_of, parse_duration, parse_quantity

__all__ = [
    "BUCKET_RATIO",
    "CPU_HISTOGRAM_OPTIONS",
    "EPSILON",
    "MAX_RESOURCE_AMOUNT",
    "MEMORY_HISTOGRAM_OPTIONS",
    "ContainerPolicy",
    "ContainerState",
    "DecayingHistogram",
    "ExponentialHistogramOptions",
    "HistogramOptions",
    "LinearHistogramOptions",
    "Recommendation",
    "VpaConfig",
    "cap_to_container_limits",
    "confidence_multiplier",
    "get_confidence",
    "merge_states",
    "policies_from_resource_policy",
    "recommend",
    "with_margin",
]

# --------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------

#: VPA: pkg/recommender/model/types.go, MaxResourceAmount = 1e14 (reference 2.7 step 1).
MAX_RESOURCE_AMOUNT: Final = 10**14
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
_RESOURCES: Final[tuple[str, ...]] = ("cpu", "memory")

# --------------------------------------------------------------------------------------------------
# Go arithmetic that the integer results depend on
# --------------------------------------------------------------------------------------------------


def _amount(value: float) -> int:
    """``resourceAmountFromFloat`` (VPA: model/types.go): clamp to [0, 1e14], then truncate.

    Go converts NaN to an implementation-defined int64 (MinInt64 on amd64, 0 on arm64); it only
    arises as 0 x Inf in the confidence multiplier and is then raised to the pod minimum, so tandem
    uses 0.
    """
    if value > MAX_RESOURCE_AMOUNT:
        return MAX_RESOURCE_AMOUNT
    if value < 0:
        return 0
    if value != value:
        return 0
    return int(value)


def _scale(amount: int, factor: float) -> int:
    """``ScaleResource`` (VPA: model/types.go): amount x factor through ``resourceAmountFromFloat``."""
    return _amount(float(amount) * factor)


def _go_div(a: float, b: float) -> float:
    """IEEE division as Go does it: x/0 is +-Inf (NaN for 0/0) instead of an exception."""
    if b != 0.0:
        return a / b
    if a == 0.0 or a != a:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _go_pow(x: float, y: float) -> float:
    """Go's ``math.Pow``, which is *not* correctly rounded: integer powers by repeated squaring.

    It matters for integers: with libm's pow, memory bucket 4 would start at 43101250 bytes; Go's
    algorithm gives 43101249.99999996 -> 43101249 after truncation (VPA: util/histogram_options.go
    GetBucketStart uses math.Pow; logic/estimator.go confidence multiplier too).
    """
    if y == 0 or x == 1:
        return 1.0
    if y == 1:
        return x
    if x != x or y != y:
        return math.nan
    if x == 0:
        odd = float(y).is_integer() and int(y) % 2 == 1
        if y < 0:
            return math.copysign(math.inf, x) if odd else math.inf
        return x if odd else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    if math.isinf(x):
        if x < 0:
            return _go_pow(-0.0, -y)
        return 0.0 if y < 0 else math.inf
    if y == 0.5:
        return math.sqrt(x)
    if y == -0.5:
        return 1 / math.sqrt(x)
    yf, yi = math.modf(abs(y))
    if yf != 0 and x < 0:
        return math.nan
    if yi >= 2.0**63:
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    a1 = 1.0
    ae = 0
    if yf != 0:
        if yf > 0.5:
            yf -= 1
            yi += 1
        a1 = math.exp(yf * math.log(x))
    x1, xe = math.frexp(x)
    i = int(yi)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    try:
        return math.ldexp(a1, ae)
    except OverflowError:
        return math.copysign(math.inf, a1)


def _go_log(base: float, x: float) -> float:
    """``log(base, x) = math.Log(x) / math.Log(base)`` (VPA: util/histogram_options.go)."""
    return math.log(x) / math.log(base)


def _round_to_half_life(ts: float, half_life: float) -> float:
    """``time.Time.Round(halfLife)``: nearest multiple since Go's zero time, halfway rounds up."""
    x = ts + _GO_ZERO_TIME_TO_UNIX
    q = math.floor(x / half_life)
    r = x - q * half_life
    if r + r >= half_life:
        q += 1
    return q * half_life - _GO_ZERO_TIME_TO_UNIX


# --------------------------------------------------------------------------------------------------
# Histogram layouts (VPA: pkg/recommender/util/histogram_options.go)
# --------------------------------------------------------------------------------------------------


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
        self.num_buckets = math.ceil(_go_log(ratio, max_value * (ratio - 1) / first_bucket_size + 1)) + 1
        self.first_bucket_size = first_bucket_size
        self.ratio = ratio
        self.epsilon = epsilon
        # GetBucketStart: firstBucketSize * (math.Pow(ratio, bucket) - 1) / (ratio - 1), bucket 0 -> 0.
        self._starts = [0.0] + [
            first_bucket_size * (_go_pow(ratio, float(b)) - 1) / (ratio - 1) for b in range(1, self.num_buckets)
        ]

    def find_bucket(self, value: float) -> int:
        # FindBucket: floor(log(value/first*(ratio-1)+1) / log(ratio)), in Go's evaluation order.
        if value < self.first_bucket_size:
            return 0
        bucket = int(_go_log(self.ratio, value * (self.ratio - 1) / self.first_bucket_size + 1))
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


_CPU_THRESHOLDS: Final = _millicore_thresholds(CPU_HISTOGRAM_OPTIONS)


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
    """

    __slots__ = ("max_bucket", "min_bucket", "options", "ref", "total", "weights")

    def __init__(self, options: HistogramOptions) -> None:
        self.options = options
        self.weights: list[float] = [0.0] * options.num_buckets
        self.total = 0.0
        self.min_bucket = options.num_buckets - 1
        self.max_bucket = 0
        self.ref: float | None = None

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
        return math.pow(2.0, (ts - ref) / half_life)  # math.Exp2

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

    # -- copies and serialisation ---------------------------------------------------------------

    def copy(self) -> DecayingHistogram:
        h = DecayingHistogram(self.options)
        h.weights = list(self.weights)
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
        buckets = [b for b, v in enumerate(self.weights) if v != 0.0]
        return {"ref": self.ref, "tot": self.total, "b": buckets, "w": [self.weights[b] for b in buckets]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], options: HistogramOptions) -> DecayingHistogram:
        h = cls(options)
        ref = data.get("ref")
        h.ref = None if ref is None else _finite(ref, "ref")
        h.total = _finite(data.get("tot", 0.0), "tot")
        buckets = data.get("b", [])
        weights = data.get("w", [])
        if not isinstance(buckets, list) or not isinstance(weights, list) or len(buckets) != len(weights):
            raise ValueError("histogram: 'b' and 'w' must be lists of equal length")
        for b, v in zip(buckets, weights, strict=True):
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < options.num_buckets:
                raise ValueError(f"histogram: bucket {b!r} out of range")
            weight = _finite(v, "w")
            if weight < 0.0:
                raise ValueError("histogram: negative weight")
            h.weights[b] = weight
        eps = options.epsilon
        heavy = [b for b in buckets if h.weights[b] >= eps]
        if heavy:
            h.min_bucket, h.max_bucket = min(heavy), max(heavy)
        return h


def _finite(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------------
# Configuration (VPA: pkg/recommender/config/config.go flags, logic/recommender.go flags)
# --------------------------------------------------------------------------------------------------

_DURATIONS: Final = frozenset(
    {
        "recommender_interval",
        "memory_aggregation_interval",
        "cpu_histogram_decay_half_life",
        "memory_histogram_decay_half_life",
        "confidence_interval_cpu",
        "confidence_interval_memory",
    }
)
_INTS: Final = frozenset({"memory_aggregation_interval_count", "round_cpu_millicores", "round_memory_bytes"})
_PERCENTILES: Final = frozenset(
    {
        "target_cpu_percentile",
        "target_memory_percentile",
        "recommendation_lower_bound_cpu_percentile",
        "recommendation_lower_bound_memory_percentile",
        "recommendation_upper_bound_cpu_percentile",
        "recommendation_upper_bound_memory_percentile",
    }
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@dataclass(frozen=True, slots=True)
class VpaConfig:
    """The recommender's flags, upstream names in snake_case, upstream defaults (reference 2.1).

    Durations are seconds.  ``container_recommendation_max_allowed_cpu`` is in millicores and
    ``..._memory`` in bytes (``None``: no global cap).  The histogram bucket layouts are not flags
    upstream and are fixed here too (:data:`CPU_HISTOGRAM_OPTIONS`, :data:`MEMORY_HISTOGRAM_OPTIONS`).
    """

    #: ``--recommender-interval``; informational here (tandem's caller decides when to recommend).
    recommender_interval: float = 60.0
    target_cpu_percentile: float = 0.9
    target_memory_percentile: float = 0.9
    recommendation_lower_bound_cpu_percentile: float = 0.5
    recommendation_lower_bound_memory_percentile: float = 0.5
    recommendation_upper_bound_cpu_percentile: float = 0.95
    recommendation_upper_bound_memory_percentile: float = 0.95
    recommendation_margin_fraction: float = 0.15
    pod_recommendation_min_cpu_millicores: float = 25.0
    pod_recommendation_min_memory_mb: float = 250.0
    memory_aggregation_interval: float = 86400.0
    memory_aggregation_interval_count: int = 8
    cpu_histogram_decay_half_life: float = 86400.0
    memory_histogram_decay_half_life: float = 86400.0
    confidence_interval_cpu: float = 86400.0
    confidence_interval_memory: float = 86400.0
    oom_bump_up_ratio: float = 1.2
    oom_min_bump_up_bytes: float = 100.0 * 1024 * 1024
    round_cpu_millicores: int = 1
    round_memory_bytes: int = 1
    container_recommendation_max_allowed_cpu: int | None = None
    container_recommendation_max_allowed_memory: int | None = None

    @property
    def memory_aggregation_window_length(self) -> float:
        """interval x count (8 days by default): the history the recommender keeps per aggregate."""
        return self.memory_aggregation_interval * self.memory_aggregation_interval_count

    @classmethod
    def from_mapping(cls, m: Mapping[str, object] | None) -> VpaConfig:
        """Build from tandem's ``vpa:`` settings section.

        Keys are upstream flag names in kebab-case (``target-cpu-percentile``), camelCase
        (``targetCPUPercentile``) or snake_case; durations take Go duration strings (``"24h"``) or
        seconds; the global caps take quantities (``"4"``, ``"500m"``, ``"8Gi"``).  An unknown key
        or a bad value raises :class:`~scaling.errors.InvalidPolicy` (a ``ValueError``) naming it.
        """
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for raw_key, value in (m or {}).items():
            if not isinstance(raw_key, str):
                raise InvalidPolicy(f"vpa.{raw_key!r}", "setting names are strings")
            key = _CAMEL.sub("_", raw_key.strip()).replace("-", "_").lower()
            if key not in known:
                raise InvalidPolicy(f"vpa.{raw_key}", "unknown VPA recommender setting")
            if key in values:
                raise InvalidPolicy(f"vpa.{raw_key}", "set twice (under different spellings)")
            try:
                values[key] = _parse_setting(key, value)
            except ValueError as exc:
                raise InvalidPolicy(f"vpa.{raw_key}", str(exc)) from None
        return cls(**values)


def _parse_setting(key: str, value: object) -> object:
    if key in ("container_recommendation_max_allowed_cpu", "container_recommendation_max_allowed_memory"):
        if value is None:
            return None
        milli = parse_quantity(value)
        return milli if key.endswith("cpu") else bytes_of(milli)
    if key in _DURATIONS:
        seconds = parse_duration(value)
        if seconds <= 0:
            raise ValueError("must be a duration > 0")
        return seconds
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    if key in _INTS:
        if not float(value).is_integer() or value < 1:
            raise ValueError(f"expected an integer >= 1, got {value!r}")
        return int(value)
    if key in _PERCENTILES and not 0.0 <= value <= 1.0:
        raise ValueError(f"expected a percentile in [0, 1], got {value!r}")
    if value < 0:
        raise ValueError(f"must be >= 0, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------------------------------
# Per-aggregate state
# --------------------------------------------------------------------------------------------------


class _MemoryWindow:
    """One pod's open memory aggregation interval (VPA: model/container.go ContainerState)."""

    __slots__ = ("end", "last_ts", "memory_peak", "oom_peak")

    def __init__(self) -> None:
        self.end: float | None = None  # WindowEnd (exclusive); None = Go zero time
        self.memory_peak = 0
        self.oom_peak = 0
        self.last_ts: float | None = None  # lastMemorySampleStart

    def to_list(self) -> list[Any]:
        return [self.end, self.memory_peak, self.oom_peak, self.last_ts]

    @classmethod
    def from_list(cls, data: object) -> _MemoryWindow:
        if not isinstance(data, list) or len(data) != 4:
            raise ValueError("memory window: expected [end, peak, oom_peak, last_ts]")
        w = cls()
        end, peak, oom, last = data
        w.end = None if end is None else _finite(end, "window end")
        w.last_ts = None if last is None else _finite(last, "window last_ts")
        for name, v in (("peak", peak), ("oom_peak", oom)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"memory window: {name} must be an int >= 0")
        w.memory_peak, w.oom_peak = peak, oom
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

    def add_cpu_samples(self, ts: float, cores: Sequence[float], cfg: VpaConfig) -> int:
        """Add one scrape's CPU samples (average cores, one per pod) taken at ``ts``.

        Reference 2.3: each sample is truncated to integer millicores (``CPUAmountFromCores``) and
        added with constant weight 0.1 x decay; a batch whose ``ts`` is not strictly after the last
        accepted one is a duplicate and is dropped; negative (and NaN) samples are rejected.
        Returns the number of samples accepted.  The hot path: the decay factor is computed once
        per batch, buckets come from a bisection over precomputed millicore thresholds, and the
        weights are still added one by one so that float sums match upstream's bit for bit.
        """
        last = self.last_sample_ts
        if last is not None and not ts > last:
            return 0
        if not cores:
            return 0
        lo = min(cores)
        hi = max(cores)
        total_in = sum(cores)
        if lo >= 0.0 and total_in == total_in:
            values: Sequence[float] = cores
        else:
            values = [c for c in cores if c >= 0.0]
            if not values:
                return 0
            lo = min(values)
            hi = max(values)
        h = self.cpu
        ts = float(ts)
        w = MIN_SAMPLE_WEIGHT * h.decay_factor(ts, cfg.cpu_histogram_decay_half_life)
        thresholds = _CPU_THRESHOLDS
        bucket_of = bisect_right
        weights = h.weights
        total = h.total
        for c in values:
            b = bucket_of(thresholds, c * 1000.0)
            weights[b] += w
            total += w
        h.total = total
        # VPA: histogram.go AddSample moves min/max only to buckets holding >= epsilon; buckets
        # only grow within a batch and bucketing is monotone, so the batch's extremes decide.
        eps = EPSILON
        if w >= eps:
            bmin = bucket_of(thresholds, lo * 1000.0)
            bmax = bucket_of(thresholds, hi * 1000.0)
            if bmin < h.min_bucket:
                h.min_bucket = bmin
            if bmax > h.max_bucket:
                h.max_bucket = bmax
        else:
            for b in {bucket_of(thresholds, c * 1000.0) for c in values}:
                if weights[b] >= eps:
                    if b < h.min_bucket:
                        h.min_bucket = b
                    if b > h.max_bucket:
                        h.max_bucket = b
        n = len(values)
        self.total_samples_count += n
        self.last_sample_ts = ts
        if self.first_sample_ts is None or ts < self.first_sample_ts:
            self.first_sample_ts = ts
        return n

    # -- memory ----------------------------------------------------------------------------------

    def add_memory_sample(self, ts: float, bytes_: int, cfg: VpaConfig, *, pod: str = "") -> bool:
        """Add a memory usage sample (bytes) of ``pod`` taken at ``ts``; True if accepted.

        Reference 2.4: one peak per pod per memory aggregation interval, stored in the histogram
        at the window's end; a sample older than the pod's last accepted one is dropped.
        """
        if not bytes_ >= 0:
            return False
        window = self._window(pod, float(ts), cfg)
        return self._add_memory_peak(window, float(ts), _amount(float(bytes_)), False, cfg)

    def record_oom(self, ts: float, memory_bytes: int, cfg: VpaConfig, *, pod: str = "", max_memory: int = 0) -> bool:
        """Record an OOM kill at ``ts``; ``memory_bytes`` is the container's memory request then.

        (Upstream's OOM observer passes the request for OOMKilled container statuses and the
        reported usage for kubelet eviction events; either goes in ``memory_bytes``.)

        Reference 2.5 / VPA: model/container.go RecordOOM.  Dropped if ``ts`` is before the start
        of the pod's open window (WindowEnd - interval).  memoryUsed = max(request, the window's
        usage peak) (not the OOM peak, to avoid runaway growth); the artificial sample is
        max(memoryUsed + oom_min_bump_up_bytes, memoryUsed x oom_bump_up_ratio), fed into the peak
        logic as an OOM sample.  ``max_memory`` (> 0) is upstream's newer per-container cap on
        memoryUsed and the bump (0: no cap).  Returns True if the OOM was recorded.
        """
        ts = float(ts)
        window = self._window(pod, ts, cfg)
        interval = cfg.memory_aggregation_interval
        if window.end is not None and ts < window.end - interval:
            return False
        request = _amount(float(memory_bytes))
        memory_used = max(request, window.memory_peak)
        if max_memory > 0 and memory_used > max_memory:
            memory_used = max_memory
        memory_needed = max(
            memory_used + _amount(cfg.oom_min_bump_up_bytes), _scale(memory_used, cfg.oom_bump_up_ratio)
        )
        if max_memory > 0 and memory_needed > max_memory:
            memory_needed = max_memory
        return self._add_memory_peak(window, ts, memory_needed, True, cfg)

    def _window(self, pod: str, ts: float, cfg: VpaConfig) -> _MemoryWindow:
        window = self.windows.get(pod)
        if window is None:
            # Pods come and go; upstream forgets a pod's ContainerState when the pod is deleted.
            # Tandem cannot see deletions, so it forgets windows that ended more than one interval
            # before this sample without being extended (the pod has been silent since).
            horizon = ts - cfg.memory_aggregation_interval
            stale = [p for p, w in self.windows.items() if w.end is not None and w.end <= horizon]
            for p in stale:
                del self.windows[p]
            window = self.windows[pod] = _MemoryWindow()
        return window

    def _add_memory_peak(self, window: _MemoryWindow, ts: float, usage: int, is_oom: bool, cfg: VpaConfig) -> bool:
        # VPA: model/container.go addMemorySample.  OOM samples are always processed.
        if not is_oom and window.last_ts is not None and ts < window.last_ts:
            return False
        window.last_ts = ts
        if window.end is None:  # the first sample opens the window
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
            window.memory_peak = 0
            window.oom_peak = 0
            add_new_peak = True
        if add_new_peak:
            self.memory.add_sample(float(usage), 1.0, window.end, half_life)
            if is_oom:
                window.oom_peak = usage
            else:
                window.memory_peak = usage
        return True

    # -- lifecycle ------------------------------------------------------------------------------

    def is_expired(self, now: float, cfg: VpaConfig) -> bool:
        """VPA: model/aggregate_container_state.go isExpired - no CPU sample for a whole window.

        Upstream garbage-collects such aggregates (hourly); :func:`recommend` skips them and the
        caller may drop them from its table.  An aggregate without samples never expires here
        (upstream ages those from their creation time, which tandem does not track).
        """
        last = self.last_sample_ts
        return last is not None and now - last >= cfg.memory_aggregation_window_length

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
        s.first_sample_ts = None if first is None else _finite(first, "first")
        s.last_sample_ts = None if last is None else _finite(last, "last")
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


# --------------------------------------------------------------------------------------------------
# Policies and results
# --------------------------------------------------------------------------------------------------

ScalingMode = Literal["Auto", "Off"]
ControlledValues = Literal["RequestsAndLimits", "RequestsOnly"]


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    """A VPA ``containerPolicies`` entry (``"*"`` is the default for unnamed containers).

    ``min_allowed``/``max_allowed``: ``{"cpu": millicores, "memory": bytes}``; a 0 bound means no
    bound (upstream ``IsZero``).  ``controlled_values`` only matters at actuation
    (:func:`cap_to_container_limits`); the recommender itself ignores it, as upstream does.
    """

    min_allowed: Mapping[str, int] = field(default_factory=dict)
    max_allowed: Mapping[str, int] = field(default_factory=dict)
    mode: ScalingMode = "Auto"
    controlled_resources: tuple[str, ...] = _RESOURCES
    controlled_values: ControlledValues = "RequestsAndLimits"

    def __post_init__(self) -> None:
        if self.mode not in ("Auto", "Off"):
            raise ValueError(f"mode: expected Auto or Off, got {self.mode!r}")
        if self.controlled_values not in ("RequestsAndLimits", "RequestsOnly"):
            raise ValueError(
                f"controlled_values: expected RequestsAndLimits or RequestsOnly, got {self.controlled_values!r}"
            )
        for r in self.controlled_resources:
            if r not in _RESOURCES:
                raise ValueError(f"controlled_resources: {r!r} is not cpu or memory")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> ContainerPolicy:
        """From a VPA ``containerPolicies`` item (``minAllowed``, ``maxAllowed`` as quantities,
        ``mode``, ``controlledResources``, ``controlledValues``); ``containerName`` is ignored."""
        allowed = {"containerName", "mode", "minAllowed", "maxAllowed", "controlledResources", "controlledValues"}
        for key in m:
            if key not in allowed:
                raise InvalidPolicy(str(key), "unknown container policy field")

        def amounts(name: str) -> dict[str, int]:
            raw = m.get(name) or {}
            if not isinstance(raw, Mapping):
                raise InvalidPolicy(name, "expected a mapping of resource quantities")
            out: dict[str, int] = {}
            for res, q in raw.items():
                if res not in _RESOURCES:
                    continue  # upstream ignores resources it does not recommend
                try:
                    milli = parse_quantity(q)
                except ValueError as exc:
                    raise InvalidPolicy(f"{name}.{res}", str(exc)) from None
                out[res] = milli if res == "cpu" else bytes_of(milli)
            return out

        resources = m.get("controlledResources")
        try:
            return cls(
                min_allowed=amounts("minAllowed"),
                max_allowed=amounts("maxAllowed"),
                mode=m.get("mode") or "Auto",
                controlled_resources=_RESOURCES if resources is None else tuple(resources),
                controlled_values=m.get("controlledValues") or "RequestsAndLimits",
            )
        except ValueError as exc:
            if isinstance(exc, InvalidPolicy):
                raise
            field_name, _, why = str(exc).partition(": ")
            raise InvalidPolicy(field_name, why) from None


def policies_from_resource_policy(resource_policy: Mapping[str, Any] | None) -> dict[str, ContainerPolicy]:
    """``{containerName: ContainerPolicy}`` from a VPA ``spec.resourcePolicy`` mapping."""
    out: dict[str, ContainerPolicy] = {}
    items = (resource_policy or {}).get("containerPolicies") or []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("containerName"), str):
            raise InvalidPolicy(f"containerPolicies[{i}].containerName", "expected a container name")
        try:
            out[item["containerName"]] = ContainerPolicy.from_mapping(item)
        except InvalidPolicy as exc:
            raise exc.within(f"containerPolicies[{i}]") from None
    return out


def _policy_for(name: str, policies: Mapping[str, ContainerPolicy] | None) -> ContainerPolicy | None:
    # VPA: utils/vpa/api.go GetContainerResourcePolicy - exact name, else the "*" policy.
    if not policies:
        return None
    return policies.get(name) or policies.get("*")


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One container's recommendation, each a ``{"cpu": millicores, "memory": bytes}`` dict.

    Resources outside the policy's controlled resources are absent.  ``uncapped_target`` is the
    target before minAllowed/maxAllowed capping (after rounding), as in the VPA status.
    """

    target: dict[str, int]
    lower_bound: dict[str, int]
    upper_bound: dict[str, int]
    uncapped_target: dict[str, int]

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {
            "target": dict(self.target),
            "lower_bound": dict(self.lower_bound),
            "upper_bound": dict(self.upper_bound),
            "uncapped_target": dict(self.uncapped_target),
        }


# --------------------------------------------------------------------------------------------------
# Estimation (VPA: pkg/recommender/logic/estimator.go, recommender.go; routines; utils/vpa)
# --------------------------------------------------------------------------------------------------


def get_confidence(state: ContainerState, confidence_interval: float = 86400.0) -> float:
    """min(lifespan, samples) in confidence intervals (days by default) - reference 2.7 step 3.

    VPA: logic/estimator.go getConfidence: lifespan = (last - first CPU sample) / interval; samples
    = CPU sample count / interval-in-minutes, i.e. N for one sample a minute over N days.
    """
    if state.first_sample_ts is None or state.last_sample_ts is None:
        lifespan = 0.0
    else:
        lifespan = (state.last_sample_ts - state.first_sample_ts) / confidence_interval
    samples = state.total_samples_count / (confidence_interval / 60.0)
    return min(lifespan, samples)


def confidence_multiplier(amount: int, multiplier: float, exponent: float, confidence: float) -> int:
    """amount x (1 + multiplier/confidence)^exponent, truncated (VPA: estimator.go confidenceMultiplier).

    Upper bound uses (1, +1) -> x Inf (1e14) with no history, x2 at one day; lower bound uses
    (0.001, -2) -> x0 with no history, ~x0.95 after an hour.
    """
    return _scale(amount, _go_pow(1.0 + _go_div(multiplier, confidence), exponent))


def with_margin(amount: int, fraction: float) -> int:
    """amount + trunc(amount x fraction) (VPA: logic/estimator.go marginEstimator; reference 2.7 step 2)."""
    return amount + _scale(amount, fraction)


def _round_up(value: int, scale: int) -> int:
    # VPA: model/types.go RoundUpToScale, applied in ResourcesAsResourceList when the flag != 1
    # and the quantity is not zero.
    if scale == 1 or value == 0:
        return value
    return math.ceil(float(value) / float(scale)) * scale


def _cap(values: dict[str, int], min_allowed: Mapping[str, int], max_allowed: Mapping[str, int]) -> dict[str, int]:
    # VPA: utils/vpa/capping.go applyVPAPolicyForContainer: maybeCapToMin then maybeCapToMax,
    # a missing or zero bound is no bound.
    out: dict[str, int] = {}
    for res, v in values.items():
        lo = min_allowed.get(res, 0)
        if lo and v < lo:
            v = lo
        hi = max_allowed.get(res, 0)
        if hi and v > hi:
            v = hi
        out[res] = v
    return out


def _estimate(
    s: ContainerState, cfg: VpaConfig, minimum: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Target, lower and upper bound before filtering, rounding and capping.

    VPA: logic/recommender.go CreatePodResourceRecommender - percentile, then margin, then the
    confidence multiplier (bounds only); GetRecommendedPodResources wraps each in the minimum.
    """
    margin = cfg.recommendation_margin_fraction
    confidence = {
        "cpu": get_confidence(s, cfg.confidence_interval_cpu),
        "memory": get_confidence(s, cfg.confidence_interval_memory),
    }

    def base(resource: str, p: float) -> int:
        if resource == "cpu":
            return with_margin(_amount(s.cpu.percentile(p) * 1000.0), margin)  # CPUAmountFromCores
        return with_margin(_amount(s.memory.percentile(p)), margin)  # MemoryAmountFromBytes

    percentiles = {
        "cpu": (
            cfg.target_cpu_percentile,
            cfg.recommendation_lower_bound_cpu_percentile,
            cfg.recommendation_upper_bound_cpu_percentile,
        ),
        "memory": (
            cfg.target_memory_percentile,
            cfg.recommendation_lower_bound_memory_percentile,
            cfg.recommendation_upper_bound_memory_percentile,
        ),
    }
    target: dict[str, int] = {}
    lower: dict[str, int] = {}
    upper: dict[str, int] = {}
    for r in _RESOURCES:
        p_target, p_lower, p_upper = percentiles[r]
        target[r] = max(base(r, p_target), minimum[r])
        lower[r] = max(confidence_multiplier(base(r, p_lower), 0.001, -2.0, confidence[r]), minimum[r])
        upper[r] = max(confidence_multiplier(base(r, p_upper), 1.0, 1.0, confidence[r]), minimum[r])
    return target, lower, upper


def recommend(
    containers: Mapping[str, ContainerState],
    now: float,
    cfg: VpaConfig,
    policies: Mapping[str, ContainerPolicy] | None = None,
) -> dict[str, Recommendation]:
    """Recommendations for one VPA's containers, keyed by container name.

    ``containers`` holds one (merged, see :func:`merge_states`) aggregate per container name.
    Pipeline (reference 2.7), per container and resource:

    1. containers with scaling mode ``Off``, without CPU samples, or expired at ``now`` are left
       out (VPA: routines GetContainerNameToAggregateStateMap; model isExpired);
    2. percentile of the histogram -> integer amount (target 0.9, lower 0.5, upper 0.95);
    3. + trunc(amount x margin fraction);
    4. lower x (1 + 0.001/confidence)^-2, upper x (1 + 1/confidence);
    5. max(amount, pod minimum / number of containers left after step 1);
    6. keep the controlled resources; round up to ``round_cpu_millicores``/``round_memory_bytes``;
       ``uncapped_target`` = target;
    7. cap target/lower/upper to the policy's minAllowed/maxAllowed, the global max flags filling
       resources missing from maxAllowed (VPA: routines/capping_post_processor.go).
    """
    active: list[tuple[str, ContainerState, ContainerPolicy | None]] = []
    for name in sorted(containers):
        state = containers[name]
        policy = _policy_for(name, policies)
        if policy is not None and policy.mode == "Off":
            continue
        if state.total_samples_count <= 0 or state.is_expired(now, cfg):
            continue
        active.append((name, state, policy))
    if not active:
        return {}

    # VPA: logic/recommender.go GetRecommendedPodResources - the pod minimum is split evenly.
    fraction = 1.0 / float(len(active))
    min_cpu = _scale(_amount(cfg.pod_recommendation_min_cpu_millicores * 0.001 * 1000.0), fraction)
    min_memory = _scale(_amount(cfg.pod_recommendation_min_memory_mb * 1024 * 1024), fraction)

    global_max: dict[str, int] = {}
    if cfg.container_recommendation_max_allowed_cpu is not None:
        global_max["cpu"] = cfg.container_recommendation_max_allowed_cpu
    if cfg.container_recommendation_max_allowed_memory is not None:
        global_max["memory"] = cfg.container_recommendation_max_allowed_memory

    out: dict[str, Recommendation] = {}
    rounding = {"cpu": cfg.round_cpu_millicores, "memory": cfg.round_memory_bytes}
    for name, state, policy in active:
        target, lower, upper = _estimate(state, cfg, {"cpu": min_cpu, "memory": min_memory})
        controlled = policy.controlled_resources if policy is not None else _RESOURCES
        # VPA: logic/recommender.go FilterControlledResources, then model/types.go
        # ResourcesAsResourceList rounding (uncappedTarget is the same rounded target).
        t, lb, ub = (
            {r: _round_up(v[r], rounding[r]) for r in _RESOURCES if r in controlled} for v in (target, lower, upper)
        )
        min_allowed = dict(policy.min_allowed) if policy is not None else {}
        max_allowed = dict(policy.max_allowed) if policy is not None else {}
        for res, q in global_max.items():
            max_allowed.setdefault(res, q)
        out[name] = Recommendation(
            target=_cap(t, min_allowed, max_allowed),
            lower_bound=_cap(lb, min_allowed, max_allowed),
            upper_bound=_cap(ub, min_allowed, max_allowed),
            uncapped_target=dict(t),
        )
    return out


def cap_to_container_limits(
    rec: Recommendation, limits: Mapping[str, int], policy: ContainerPolicy | None
) -> tuple[Recommendation, list[str]]:
    """Actuation-time cap for ``controlledValues: RequestsOnly`` (reference 2.8).

    VPA: utils/vpa/capping.go capRecommendationToContainerLimit - with RequestsOnly, target, lower
    and upper bound are lowered to the container's current limit (``limits``: millicores/bytes;
    limits themselves are never changed).  With RequestsAndLimits nothing changes here.  Returns
    the capped recommendation and upstream's annotations for the target (e.g. ``"memory capped to
    container limit"``).
    """
    if policy is None or policy.controlled_values != "RequestsOnly":
        return rec, []

    def cap(values: dict[str, int]) -> tuple[dict[str, int], list[str]]:
        out = dict(values)
        notes: list[str] = []
        for res, limit in limits.items():
            if res in out and out[res] > limit:
                out[res] = limit
                notes.append(f"{res} capped to container limit")
        return out, notes

    target, notes = cap(rec.target)
    lower, _ = cap(rec.lower_bound)
    upper, _ = cap(rec.upper_bound)
    return Recommendation(target, lower, upper, dict(rec.uncapped_target)), notes
