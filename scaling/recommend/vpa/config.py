"""The VPA recommender's flags, with upstream defaults, parsed strictly from tandem's ``vpa:`` settings.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/config/config.go`` and the flags of
``pkg/recommender/logic/recommender.go`` and ``estimator.go`` (docs/recommenders.md 2.1).  An unknown
key or a bad value is an error naming it, because a mistyped knob must not fall back to its default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from ...errors import InvalidPolicy
from ...quantity import bytes_of, parse_duration, parse_quantity
from ...spelling import closest

__all__ = ["VpaConfig"]


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
                match = closest(key, known)
                # Suggested in the user's spelling: upstream's kebab-case flags, else snake_case.
                hint = f" (did you mean {match.replace('_', '-') if '-' in raw_key else match}?)" if match else ""
                raise InvalidPolicy(f"vpa.{raw_key}", "unknown VPA recommender setting" + hint)
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
