"""From a container's histograms to resource amounts: percentile, margin, confidence.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/logic/estimator.go`` (``percentileEstimator``,
``marginEstimator``, ``confidenceMultiplier``, ``minResourcesEstimator``) and ``getConfidence``
(docs/recommenders.md 2.7 steps 1-4).
"""

from __future__ import annotations

from collections.abc import Mapping

from .arithmetic import MAX_RESOURCE_AMOUNT, TWO_TO_500, go_div, go_pow, resource_amount, scale_resource
from .config import VpaConfig
from .model import ContainerState

__all__ = ["confidence_multiplier", "get_confidence", "with_margin"]


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
    return scale_resource(amount, go_pow(1.0 + go_div(multiplier, confidence), exponent))


def with_margin(amount: int, fraction: float) -> int:
    """amount + trunc(amount x fraction) (VPA: logic/estimator.go marginEstimator; reference 2.7 step 2)."""
    return amount + scale_resource(amount, fraction)


#: ``resourceAmountFromFloat``'s upper clamp as a float (1e14 is exact), for the inline fast path.
_MAX_AMOUNT_F = float(MAX_RESOURCE_AMOUNT)


def estimate_container(
    s: ContainerState, cfg: VpaConfig, minimum: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Target, lower and upper bound before filtering, rounding and capping.

    VPA: logic/recommender.go CreatePodResourceRecommender - percentile, then margin, then the
    confidence multiplier (bounds only); GetRecommendedPodResources wraps each in the minimum.
    Each histogram's three percentiles come from one walk, remembered while it is unchanged
    (:meth:`DecayingHistogram.percentiles`); the memory histogram changes about once a day per pod.

    The same arithmetic as :func:`with_margin` and :func:`confidence_multiplier`, with fewer calls
    (this runs once per container and recommender run): the multipliers depend on the confidence
    alone, so they are computed once per confidence (once per run when both resources share the
    confidence interval, the default), and :func:`resource_amount`'s in-range case is inline (``_bounds``).
    """
    margin = cfg.recommendation_margin_fraction
    cpu = s.cpu.percentiles(
        (
            cfg.target_cpu_percentile,
            cfg.recommendation_lower_bound_cpu_percentile,
            cfg.recommendation_upper_bound_cpu_percentile,
        )
    )
    memory = s.memory.percentiles(
        (
            cfg.target_memory_percentile,
            cfg.recommendation_lower_bound_memory_percentile,
            cfg.recommendation_upper_bound_memory_percentile,
        )
    )
    interval = cfg.confidence_interval_cpu
    # get_confidence, inline (once per container and run)
    first, last = s.first_sample_ts, s.last_sample_ts
    lifespan = 0.0 if first is None or last is None else (last - first) / interval
    confidence = min(lifespan, s.total_samples_count / (interval / 60.0))
    # VPA: estimator.go confidenceMultiplier: (1 + multiplier/confidence)^exponent, lower bound
    # (0.001, -2), upper bound (1, 1); Pow(x, 1) is x.
    if confidence > 0.0:
        # The divisions cannot meet a zero, and 1 <= x: go_pow's own case for y = -2 (x == 1
        # gives 1.0 either way), unless x is too large for it.
        x = 1.0 + 0.001 / confidence
        lo_factor = 1.0 / (x * x) if x < TWO_TO_500 else go_pow(x, -2.0)
        hi_factor = 1.0 + 1.0 / confidence
    else:
        lo_factor = go_pow(1.0 + go_div(0.001, confidence), -2.0)
        hi_factor = 1.0 + go_div(1.0, confidence)
    # CPUAmountFromCores (millicores), MemoryAmountFromBytes
    cpu_t, cpu_l, cpu_u = _bounds(cpu, 1000.0, margin, lo_factor, hi_factor, minimum["cpu"])
    if cfg.confidence_interval_memory != interval:
        confidence = get_confidence(s, cfg.confidence_interval_memory)
        lo_factor = go_pow(1.0 + go_div(0.001, confidence), -2.0)
        hi_factor = 1.0 + go_div(1.0, confidence)
    mem_t, mem_l, mem_u = _bounds(memory, 1.0, margin, lo_factor, hi_factor, minimum["memory"])
    return {"cpu": cpu_t, "memory": mem_t}, {"cpu": cpu_l, "memory": mem_l}, {"cpu": cpu_u, "memory": mem_u}


def _bounds(
    percentiles: tuple[float, ...], unit: float, margin: float, lo_factor: float, hi_factor: float, least: int
) -> tuple[int, int, int]:
    """One resource's (target, lower, upper) from its (target, lower, upper) percentiles.

    Each is ``max(with_margin(resource_amount(p x unit), margin), least)``, the bounds through their
    confidence multiplier (``scale_resource(amount, factor)``) before the ``max``.  ``resource_amount`` (clamp to
    [0, 1e14], truncate) is taken inline when the value is in range, else called (NaN, +-Inf,
    out of range): the same integers.
    """
    # Unrolled (one call per resource and run): ``a * f`` for an int ``a`` is ``float(a) * f``,
    # Python converting the int exactly as ``float`` does.
    top = _MAX_AMOUNT_F
    target_p, lower_p, upper_p = percentiles
    x = target_p * unit
    a = int(x) if 0.0 <= x <= top else resource_amount(x)
    # VPA: estimator.go marginEstimator: amount + ScaleResource(amount, fraction).
    x = a * margin
    target = a + (int(x) if 0.0 <= x <= top else resource_amount(x))
    x = lower_p * unit
    a = int(x) if 0.0 <= x <= top else resource_amount(x)
    x = a * margin
    a += int(x) if 0.0 <= x <= top else resource_amount(x)
    x = a * lo_factor
    lower = int(x) if 0.0 <= x <= top else resource_amount(x)
    x = upper_p * unit
    a = int(x) if 0.0 <= x <= top else resource_amount(x)
    x = a * margin
    a += int(x) if 0.0 <= x <= top else resource_amount(x)
    x = a * hi_factor
    upper = int(x) if 0.0 <= x <= top else resource_amount(x)
    return (
        target if target > least else least,
        lower if lower > least else least,
        upper if upper > least else least,
    )
