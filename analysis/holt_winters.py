"""A Holt-Winters baseline for ``tandem simulate``: what ``spec.predictive`` is compared with.

The Predictive Horizontal Pod Autoscaler (PHPA; "Predictive Horizontal Pod Autoscaler",
https://predictive-horizontal-pod-autoscaler.readthedocs.io/en/latest/) computes the replica count
the HPA would, stores that count once per interval in a replica history, and runs a statistical
model over the history (Holt-Winters smoothing or linear regression); the model's prediction, and
with ``decisionType: maximum`` the largest of the predictions, becomes the replica count.  So it
forecasts *replica counts*, where ``spec.predictive`` forecasts the load (scaling/forecast.py).

:class:`HoltWinters` wraps a tandem policy the same way in the simulator only (it decides nothing in
the worker): once a minute the HPA's computed replica count (its desired replicas) is the
observation ``y``; additive Holt-Winters with fixed smoothing (level ``alpha``, trend ``beta``,
season ``gamma``, a season of one day) predicts ``y`` ``horizon`` ahead, and the replicas are the
larger of the prediction (rounded up, capped at the policy's ``maxReplicas``) and the policy's own
count.  The recursions
are the textbook ones (Hyndman & Athanasopoulos, "Forecasting: Principles and Practice", 8.3
"Holt-Winters' additive method", https://otexts.com/fpp3/holt-winters.html), run incrementally;
PHPA fits them afresh over its stored seasons each time (statsmodels ``ExponentialSmoothing``),
which with fixed parameters gives the same smoothing.  The first season only initialises the model
(level: its mean, trend 0, season: each value minus the mean): no prediction before a full day.

A policy file selects it with the annotation ``tandem.dev/simulate-baseline: holt-winters`` on a
manifest (read by the simulator only; the worker ignores annotations it does not know), and may set
its horizon with ``tandem.dev/simulate-baseline-horizon`` (a duration, default :data:`HORIZON`), so
that it looks as far ahead as a ``spec.predictive.horizon`` it is compared with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scaling.outcome import Outcome, View
from scaling.policies import Policy
from scaling.policies.delegating import DelegatingPolicy
from scaling.quantity import parse_duration

__all__ = ["ANNOTATION", "HORIZON_ANNOTATION", "HoltWinters", "baseline_horizon", "baseline_of"]

#: The manifest annotation that runs a policy with the Holt-Winters baseline in ``tandem simulate``.
ANNOTATION = "tandem.dev/simulate-baseline"
#: The annotation that sets the baseline's horizon (a duration such as ``135s``).
HORIZON_ANNOTATION = "tandem.dev/simulate-baseline-horizon"
#: Smoothing of level, trend and season (fixed, not fitted; docs/evaluation.md gives the figures).
ALPHA, BETA, GAMMA = 0.5, 0.01, 0.5
#: One observation per interval (PHPA stores one replica count per run of its own interval).
INTERVAL = 60.0
#: The horizon when none is given: a 60 s start-up plus one 15 s sync period, as ``spec.predictive``'s default.
HORIZON = 75.0


def _annotation(manifest: Mapping[str, Any], key: str) -> object:
    meta = manifest.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations.get(key) if isinstance(annotations, Mapping) else None


def baseline_of(manifest: Mapping[str, Any]) -> str | None:
    """The simulator baseline a manifest asks for (``holt-winters``), ``None`` for none."""
    value = _annotation(manifest, ANNOTATION)
    return value if isinstance(value, str) else None


def baseline_horizon(manifest: Mapping[str, Any]) -> float:
    """The baseline's horizon in seconds: the manifest's :data:`HORIZON_ANNOTATION`, else :data:`HORIZON`.
    A value that is not a positive duration is refused with the annotation's name."""
    value = _annotation(manifest, HORIZON_ANNOTATION)
    if value is None:
        return HORIZON
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"annotation {HORIZON_ANNOTATION}: {exc}") from None
    if not 0 < seconds <= 86400:
        raise ValueError(f"annotation {HORIZON_ANNOTATION}: {seconds:g} s is outside (0, 24h]")
    return seconds


class HoltWinters(DelegatingPolicy):
    """``inner``'s replicas raised to a Holt-Winters prediction of them (module docstring); everything
    but :meth:`decide` is the inner policy's (:class:`~scaling.policies.delegating.DelegatingPolicy`)."""

    def __init__(self, inner: Policy, period: float = 86400.0, horizon: float = HORIZON) -> None:
        super().__init__(inner)
        self.horizon = horizon
        #: Slots of a season (one observation a :data:`INTERVAL`, PHPA's interval).
        self.m = max(1, round(period / INTERVAL))
        self.start: int | None = None  # the first slot seen
        self.last: int | None = None  # the last slot folded
        self.first: dict[int, float] = {}  # the first season's observations, by slot of the season
        self.season: list[float] = []
        self.level = 0.0
        self.trend = 0.0

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        out = self.inner.decide(view, memory)
        reactive = out.replicas if out.replicas is not None else view.spec.replicas
        # PHPA's observation is the count the HPA computed from the metrics, not the replicas the
        # workload has: those include the model's own earlier raises, a loop that only climbs.
        computed = view.hpa.desired_replicas if view.hpa is not None else reactive
        predicted = self._observe(view.tick, float(computed))
        if predicted is None:
            return out
        want = math.ceil(round(predicted, 2))
        top = self.inner.bounds().max_replicas
        if top is not None:
            want = min(want, top)
        if want <= reactive:
            return out
        return Outcome(
            want if want != view.spec.replicas or out.replicas is not None else None,
            out.requests,
            out.limits,
            out.hpa,
            list(out.blocked),
            [*out.reasons, f"Holt-Winters baseline: {predicted:.1f} replicas predicted"],
            out.inputs,
            out.dry_run,
            out.mode,
        )

    def _observe(self, tick: float, y: float) -> float | None:
        """Fold ``y`` seen at ``tick`` (the first tick of each interval only); the prediction
        ``horizon`` ahead once a season is known."""
        slot = int(tick // INTERVAL)
        m = self.m
        if self.last != slot:
            self.last = slot
            if self.start is None:
                self.start = slot
            if not self.season:
                self.first[slot % m] = y
                if slot - self.start + 1 < m:
                    return None
                self.level = sum(self.first.values()) / len(self.first)
                self.season = [self.first.get(i, self.level) - self.level for i in range(m)]
                return None
            i = slot % m
            s = self.season[i]
            level = ALPHA * (y - s) + (1 - ALPHA) * (self.level + self.trend)
            self.trend = BETA * (level - self.level) + (1 - BETA) * self.trend
            self.season[i] = GAMMA * (y - level) + (1 - GAMMA) * s
            self.level = level
        if not self.season:
            return None
        h = max(1, math.ceil(self.horizon / INTERVAL))
        return self.level + h * self.trend + self.season[(slot + h) % m]
