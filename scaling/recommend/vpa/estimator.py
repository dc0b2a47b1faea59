"""From a container's histograms to resource amounts: percentile, margin, confidence.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/logic/estimator.go`` (``percentileEstimator``,
``marginEstimator``, ``confidenceMultiplier``, ``minResourcesEstimator``) and ``getConfidence``
(docs/recommenders.md 2.7 steps 1-4).
"""

from __future__ import annotations

from collections.abc import Mapping

from .arithmetic import _RESOURCES, _amount, _go_div, _go_pow, _scale
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
