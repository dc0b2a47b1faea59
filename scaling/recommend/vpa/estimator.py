"""From a container's histograms to resource amounts: percentile, margin, confidence.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/logic/estimator.go`` (``percentileEstimator``,
``marginEstimator``, ``confidenceMultiplier``, ``minResourcesEstimator``) and ``getConfidence``
(docs/recommenders.md 2.7 steps 1-4).
"""

from __future__ import annotations

from collections.abc import Mapping

from .arithmetic import _amount, _go_div, _go_pow, _scale
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
    return _scale(amount, _go_pow(1.0 + _go_div(multiplier, confidence), exponent))


def with_margin(amount: int, fraction: float) -> int:
    """amount + trunc(amount x fraction) (VPA: logic/estimator.go marginEstimator; reference 2.7 step 2)."""
    return amount + _scale(amount, fraction)


def _estimate(
    s: ContainerState, cfg: VpaConfig, minimum: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Target, lower and upper bound before filtering, rounding and capping.

    VPA: logic/recommender.go CreatePodResourceRecommender - percentile, then margin, then the
    confidence multiplier (bounds only); GetRecommendedPodResources wraps each in the minimum.
    Each histogram's three percentiles come from one walk, remembered while it is unchanged
    (:meth:`DecayingHistogram.percentiles`); the memory histogram changes about once a day per pod.
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
    target: dict[str, int] = {}
    lower: dict[str, int] = {}
    upper: dict[str, int] = {}
    for r, (p_target, p_lower, p_upper), interval in (
        ("cpu", cpu, cfg.confidence_interval_cpu),
        ("memory", memory, cfg.confidence_interval_memory),
    ):
        confidence = get_confidence(s, interval)
        unit = 1000.0 if r == "cpu" else 1.0  # CPUAmountFromCores (millicores), MemoryAmountFromBytes
        least = minimum[r]
        target[r] = max(with_margin(_amount(p_target * unit), margin), least)
        lower[r] = max(
            confidence_multiplier(with_margin(_amount(p_lower * unit), margin), 0.001, -2.0, confidence), least
        )
        upper[r] = max(confidence_multiplier(with_margin(_amount(p_upper * unit), margin), 1.0, 1.0, confidence), least)
    return target, lower, upper
