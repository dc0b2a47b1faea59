"""``spec.predictive``: any policy kind scales up ahead of a forecast ramp (issue 36).

Every kind tandem runs is reactive: replicas follow utilization after it rose, and new pods serve
only after their start-up time.  ``spec.predictive`` (the same section for every kind, declared
once in ``fields.py``: :data:`PREDICTIVE_FIELDS`) wraps the kind's parsed policy in :class:`Predictive`, which
lets the kind decide as always and then:

1. folds the tick's HPA load (:func:`scaling.forecast.load_of`: the HPA's unrounded desired
   replicas; its desired replicas when the event carries no metrics) into the workload's
   :class:`~scaling.forecast.LoadProfile`, kept in the policy memory (so in the state the worker
   checkpoints: replay and live see the same profile);
2. forecasts the load ``horizon`` ahead (default: the workload's observed start-up time, the
   longest of the last starts seen in its pods' status, plus one sync period: a pod asked for now
   must serve before the next tick can ask again);
3. when the history is long enough (``minHistory``), the forecaster's recent error small enough
   (``maxErrorPercent``) and its profile no worse than "as the slot before" over the last day
   (:data:`NAIVE_MARGIN`), raises the replicas (for a kind that sets its HPA's ``minReplicas``
   instead, that minimum) to ``ceil(forecast)``, at most ``maxPreScalePercent`` above what the
   kind asked and never above its ``maxReplicas``.

It never lowers what the kind asks: the result is ``max(reactive, forecast)``.  It holds nothing of
its own between ticks but the profile, so when the forecast falls (or was wrong), the next tick's
decision is the kind's again: the reactive rule takes back what the forecast got wrong.  A tick it
does not act on returns the kind's outcome unchanged, so a workload whose forecast never clears
the gates decides byte for byte as without ``predictive``.

Forecasting the load rather than the replicas is what PHPA does differently: it runs Holt-Winters
over the replica counts the HPA computed (https://predictive-horizontal-pod-autoscaler.readthedocs.io/en/latest/);
tandem's simulator has that as a baseline (``analysis/holt_winters.py``, docs/evaluation.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidPolicy
from ..events import WorkloadRef
from ..forecast import Forecast, LoadProfile, load_of
from ..outcome import Outcome, View
from .base import Policy, duration_field, get_path, int_field
from .bounds import Bounds
from .fields import PREDICTIVE
from .templates import HpaTemplate, VpaTemplate

__all__ = ["KEY", "PREDICTIVE_FIELDS", "Predictive", "PredictiveSpec", "parse_predictive", "with_predictive"]

#: Where the predictive state lives in the kind's memory (``memory[KEY]``).
KEY = "predictive"
#: The start-up time assumed before any pod start was observed (seconds).
DEFAULT_STARTUP = 60.0
#: The HPA controller's default tolerance (``--horizontal-pod-autoscaler-tolerance`` 0.1,
#: https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#algorithm-details): a
#: forecast within it of the replicas the kind asks changes nothing, as a metric within it would not.
TOLERANCE = 0.1
#: Start-ups remembered (the horizon is the longest of them).
_STARTUPS = 8
#: Pods followed from their start to their readiness, at most.
_UNREADY = 64
#: It acts only while the profile's error over the last day is at most this many times the naive
#: forecast's ("as the slot before"): on a load without a pattern the two are close or the naive
#: one wins (scaling/forecast.py), and a pre-scale would only add cost.
NAIVE_MARGIN = 1.0

#: The fields of ``spec.predictive``, the same for every kind (declared in ``fields.py``, which adds
#: them to each kind's ``spec``: the unknown-field check, the policy schema and the CRDs know them).
PREDICTIVE_FIELDS = PREDICTIVE


@dataclass(frozen=True, slots=True)
class PredictiveSpec:
    """``spec.predictive`` parsed; every field has its default."""

    #: Seconds ahead; ``None``: observed start-up time plus one sync period.
    horizon: float | None = None
    max_prescale_percent: int = 100
    min_history: float = 86400.0
    max_error_percent: int = 25


def parse_predictive(manifest: Mapping[str, Any]) -> PredictiveSpec | None:
    """``spec.predictive`` of ``manifest``, ``None`` without one; :class:`InvalidPolicy` naming the field."""
    section = get_path(manifest, "spec.predictive")
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise InvalidPolicy("spec.predictive", f"expected an object, got {type(section).__name__}")
    where = "spec.predictive."
    horizon = duration_field(manifest, where + "horizon", -1.0)
    if horizon != -1.0 and not 0 < horizon <= 86400:
        raise InvalidPolicy(where + "horizon", f"{horizon:g} s is outside (0, 24h]")
    history = duration_field(manifest, where + "minHistory", 86400.0)
    if not 0 <= history <= 28 * 86400:
        raise InvalidPolicy(where + "minHistory", f"{history:g} s is outside 0..672h (the four weeks kept)")
    return PredictiveSpec(
        None if horizon == -1.0 else horizon,
        int_field(manifest, where + "maxPreScalePercent", 100) or 0,
        history,
        int_field(manifest, where + "maxErrorPercent", 25, maximum=100) or 0,
    )


def with_predictive(policy: Policy, manifest: Mapping[str, Any]) -> Policy:
    """``policy`` wrapped in :class:`Predictive` when its manifest has ``spec.predictive``."""
    spec = parse_predictive(manifest)
    return policy if spec is None else Predictive(policy, spec)


class Predictive:
    """A policy of any kind, scaled up ahead of its forecast load (module docstring)."""

    __slots__ = ("_live", "inner", "spec")

    def __init__(self, inner: Policy, spec: PredictiveSpec) -> None:
        self.inner = inner
        self.spec = spec
        #: (the ``memory[KEY]["profile"]`` value written last, its decoded profile): saves decoding per tick.
        self._live: tuple[object, LoadProfile] | None = None

    # --- the Policy protocol, delegated -----------------------------------------------------

    @property
    def kind(self) -> str:
        return self.inner.kind

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def workload(self) -> WorkloadRef:
        return self.inner.workload

    def bounds(self) -> Bounds:
        return self.inner.bounds()

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        return self.inner.hpa_template(memory)

    def vpa_template(self) -> VpaTemplate | None:
        return self.inner.vpa_template()

    # --- the decision -------------------------------------------------------------------------

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        out = self.inner.decide(view, memory)
        mine = memory.get(KEY)
        if not isinstance(mine, dict):
            mine = {}
        profile = self._profile(mine.get("profile"))
        startups, unready = _startups(view, mine)
        hpa = view.hpa
        if hpa is not None:
            current = hpa.current_replicas if hpa.current_replicas is not None else view.spec.replicas
            load = load_of(current, hpa.metrics, hpa.current_metrics)
            if load is None:  # an HPA event without its metrics: its desired replicas, rounded already
                load = float(hpa.desired_replicas)
            profile.observe(view.tick, load)
        written = profile.to_dict()
        memory[KEY] = {"profile": written, "startups": startups, "unready": unready}
        self._live = (written, profile)
        horizon = self.spec.horizon
        if horizon is None:
            horizon = (max(startups) if startups else DEFAULT_STARTUP) + float(view.settings.get("sync_period", 15.0))
        return self._prescale(view, out, profile, horizon)

    def _profile(self, stored: object) -> LoadProfile:
        live = self._live
        if live is not None and live[0] is stored:
            return live[1]
        if isinstance(stored, Mapping):
            try:
                return LoadProfile.from_dict(stored)
            except ValueError:
                pass  # a state from another version: start again
        return LoadProfile()

    def _prescale(self, view: View, out: Outcome, profile: LoadProfile, horizon: float) -> Outcome:
        spec = self.spec
        if profile.history(view.tick) < spec.min_history:
            return out
        forecast = profile.forecast(view.tick + horizon)
        if forecast is None or forecast.error is None or forecast.error > spec.max_error_percent:
            return out
        if forecast.versus_naive is not None and forecast.versus_naive > NAIVE_MARGIN:
            return out  # no pattern the profile knows: the reactive rule alone
        want = math.ceil(round(forecast.load, 2))
        min_pair = out.hpa.get("min_replicas")
        if isinstance(min_pair, tuple) and min_pair[1] is not None:
            reactive = int(min_pair[1])
        elif out.replicas is not None:
            reactive = out.replicas
        else:
            reactive = view.spec.replicas
        if forecast.load <= reactive * (1 + TOLERANCE):
            return out  # within the HPA's tolerance of what the kind asks: no change, as the HPA
        cap = math.ceil(reactive * (100 + spec.max_prescale_percent) / 100)
        top = self.inner.bounds().max_replicas
        want = min(want, cap, top) if top is not None else min(want, cap)
        if want <= reactive:
            return out
        if isinstance(min_pair, tuple):
            hpa = {**out.hpa, "min_replicas": (min_pair[0], want)}
            replicas = out.replicas
            if replicas is not None and replicas < want:
                replicas = want
        else:
            hpa, replicas = out.hpa, want
            if want == view.spec.replicas:
                replicas = None if out.replicas is None else want
        return Outcome(
            replicas,
            out.requests,
            out.limits,
            hpa,
            list(out.blocked),
            [*out.reasons, explain(want, forecast)],
            {**out.inputs, "forecast": forecast_inputs(forecast, reactive, horizon)},
            out.dry_run,
            out.mode,
        )


def explain(replicas: int, forecast: Forecast) -> str:
    """``pre-scaled to 8 for the forecast of 7.4 at 09:00 (same weekday, 4 weeks, recent error 6 %)``."""
    at = datetime.fromtimestamp(forecast.at, UTC)
    when = at.strftime("%H:%M") if at.second == 0 else at.strftime("%H:%M:%S")
    return f"pre-scaled to {replicas} for the forecast of {forecast.load:.1f} at {when} ({forecast.describe()})"


def forecast_inputs(forecast: Forecast, reactive: int, horizon: float) -> dict[str, Any]:
    """What a pre-scaled decision records of its forecast (``inputs.forecast``, docs/contract.md §4)."""
    return {
        "load": round(forecast.load, 2),
        "at": forecast.at,
        "horizon": horizon,
        "basis": forecast.basis,
        "periods": forecast.periods,
        "error_percent": forecast.error,
        "reactive_replicas": reactive,
        "versus_naive": None if forecast.versus_naive is None else round(forecast.versus_naive, 2),
    }


def _startups(view: View, mine: Mapping[str, Any]) -> tuple[list[int], dict[str, float]]:
    """The start-up times seen so far (seconds, the last :data:`_STARTUPS`) and the pods followed:
    a pod seen not ready with a start time, until it is seen ready (then its start-up is the tick
    minus its start) or gone."""
    startups = [int(v) for v in mine.get("startups") or () if isinstance(v, int) and not isinstance(v, bool)]
    followed = mine.get("unready")
    unready = dict(followed) if isinstance(followed, Mapping) else {}
    pods = view.spec.pods or ()
    if not pods and not unready:
        return startups, unready
    seen = set()
    for pod in pods:
        seen.add(pod.name)
        if pod.started is None:
            continue
        if not pod.ready:
            if pod.name not in unready and len(unready) < _UNREADY:
                unready[pod.name] = pod.started
        elif pod.name in unready:
            startups = [*startups, max(0, round(view.tick - float(unready.pop(pod.name))))][-_STARTUPS:]
    for gone in [name for name in unready if name not in seen]:
        del unready[gone]
    return startups, unready
