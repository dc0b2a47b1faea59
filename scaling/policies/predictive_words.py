"""The sentences and audit fields of ``spec.predictive`` (:mod:`scaling.policies.predictive`).

Apart from the rule so that what a pre-scale says is read in one place: ``tandem audit explain``,
the status and the tests quote these sentences, and ``docs/evaluation.md`` counts the raises of the
requests by wrapping :func:`explain_requests`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..forecast import Forecast
from ..quantity import format_quantity

__all__ = [
    "audit_ratio",
    "clock",
    "explain",
    "explain_min_taken_back",
    "explain_requests",
    "explain_taken_back",
    "forecast_inputs",
    "hours",
]


def audit_ratio(value: float | None) -> float | None:
    """A ratio for the audit, two decimals; ``None`` unmeasured or infinite (the naive forecast
    never erred: JSON has no infinity)."""
    return None if value is None or not math.isfinite(value) else round(value, 2)


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def clock(ts: float) -> str:
    at = datetime.fromtimestamp(ts, UTC)
    return at.strftime("%H:%M") if at.second == 0 else at.strftime("%H:%M:%S")


def explain(replicas: int, forecast: Forecast) -> str:
    """``pre-scaled to 8 for the forecast of 7.4 at 09:00 (same weekday, 4 weeks, recent error 6 %)``."""
    return (
        f"pre-scaled to {replicas} for the forecast of {forecast.load:.1f} at {clock(forecast.at)} "
        f"({forecast.describe()})"
    )


def explain_requests(requests: Mapping[str, Mapping[str, int]], forecast: Forecast, top: int) -> str:
    """``raised the cpu request of web to 750m for the forecast of 15.0 at 09:00 (replicas capped at
    10; same weekday, 4 weeks, recent error 6 %)``."""
    what = ", ".join(
        f"the {r} request of {c} to {format_quantity(r, milli)}"
        for c, res in sorted(requests.items())
        for r, milli in sorted(res.items())
    )
    return (
        f"raised {what} for the forecast of {forecast.load:.1f} at {clock(forecast.at)} "
        f"(replicas capped at {top}; {forecast.describe()})"
    )


def explain_taken_back(cname: str, resource: str, milli: int) -> str:
    """``took the cpu request of web back to 500m (the forecast no longer asks for more)``."""
    back = format_quantity(resource, milli)
    return f"took the {resource} request of {cname} back to {back} (the forecast no longer asks for more)"


def explain_min_taken_back(replicas: int) -> str:
    """``took minReplicas back to 10 (the forecast no longer asks for more)``."""
    return f"took minReplicas back to {replicas} (the forecast no longer asks for more)"


def forecast_inputs(forecast: Forecast, reactive: int, horizon: float, history: float) -> dict[str, Any]:
    """What a pre-scaled decision records of its forecast (``inputs.forecast``, docs/contract.md §4)."""
    return {
        "load": round(forecast.load, 2),
        "at": forecast.at,
        "horizon": horizon,
        "basis": forecast.basis,
        "periods": forecast.periods,
        "error_percent": forecast.error,
        "reactive_replicas": reactive,
        "versus_naive": audit_ratio(forecast.versus_naive),
        "history_hours": round(history / 3600, 1),
    }
