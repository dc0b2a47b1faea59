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
   instead, that minimum) to ``ceil(forecast)``, never above its ``maxReplicas`` and, when
   ``maxPreScalePercent`` is set, at most that much above what the kind asked.  By default only
   ``maxReplicas`` bounds it: the gates decide whether the forecast is trusted, and a service
   nearly idle before a steep daily ramp (a night's 1 pod before a morning's 11) is exactly where
   a bound relative to the kind's count would keep the pre-scale from helping
   (docs/evaluation.md, "The cap on a pre-scale").

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
from typing import Any

from ..errors import InvalidPolicy
from ..forecast import Forecast, LoadProfile, load_of
from ..outcome import Outcome, View
from .base import Policy, duration_field, get_path, int_field
from .bounds import Bounds
from .delegating import DelegatingPolicy
from .fields import PREDICTIVE
from .predictive_words import (
    audit_ratio,
    clock,
    explain,
    explain_min_taken_back,
    explain_requests,
    explain_taken_back,
    forecast_inputs,
    hours,
)

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

#: A raise of the requests that holds: ``{container: {resource: (before, raised to)}}`` (milli-units).
Raised = dict[str, dict[str, tuple[int, int]]]

#: Why a tick is not pre-scaled (``inputs.predictive.reason``, the status's ``predictive.reason``).
TOO_LITTLE_HISTORY = "TooLittleHistory"
NO_PROFILE = "NoProfile"
ERROR_NOT_MEASURED = "ErrorNotMeasured"
ERROR_TOO_LARGE = "ErrorTooLarge"
NO_BETTER_THAN_NAIVE = "NoBetterThanNaive"
WITHIN_REACTIVE = "WithinReactive"
CAPPED = "Capped"


#: The fields of ``spec.predictive``, the same for every kind (declared in ``fields.py``, which adds
#: them to each kind's ``spec``: the unknown-field check, the policy schema and the CRDs know them).
PREDICTIVE_FIELDS = PREDICTIVE


@dataclass(frozen=True, slots=True)
class PredictiveSpec:
    """``spec.predictive`` parsed; every field has its default."""

    #: Seconds ahead; ``None``: observed start-up time plus one sync period.
    horizon: float | None = None
    #: The most a pre-scale adds, in percent of what the kind asks; ``None``: no bound but
    #: ``maxReplicas`` (and, for requests, ``maxAllowed`` and the limit).
    max_prescale_percent: int | None = None
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
        int_field(manifest, where + "maxPreScalePercent", None),
        history,
        int_field(manifest, where + "maxErrorPercent", 25, maximum=100) or 0,
    )


def with_predictive(policy: Policy, manifest: Mapping[str, Any]) -> Policy:
    """``policy`` wrapped in :class:`Predictive` when its manifest has ``spec.predictive``."""
    spec = parse_predictive(manifest)
    return policy if spec is None else Predictive(policy, spec)


class Predictive(DelegatingPolicy):
    """A policy of any kind, scaled up ahead of its forecast load (module docstring); everything
    but :meth:`decide` is the inner policy's (:class:`~scaling.policies.delegating.DelegatingPolicy`)."""

    def __init__(self, inner: Policy, spec: PredictiveSpec) -> None:
        super().__init__(inner)
        self.spec = spec
        #: (the ``memory[KEY]["profile"]`` value written last, its decoded profile): saves decoding per tick.
        self._live: tuple[object, LoadProfile] | None = None

    # --- the decision -------------------------------------------------------------------------

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        out = self.inner.decide(view, memory)
        mine = memory.get(KEY)
        if not isinstance(mine, dict):
            mine = {}
        profile = self._profile(mine.get("profile"))
        startups, unready = _startups(view, mine)
        raised = _raised(view, mine.get("raised"))
        hpa = view.hpa
        if hpa is not None:
            current = hpa.current_replicas if hpa.current_replicas is not None else view.spec.replicas
            load = load_of(current, hpa.metrics, hpa.current_metrics)
            if load is None:  # an HPA event without its metrics: its desired replicas, rounded already
                load = float(hpa.desired_replicas)
            # While its own raise of the requests holds, the pods are larger than those the profile
            # learnt from: the load in pods of the size before the raise.
            profile.observe(view.tick, load * _size_after_raise(view, raised))
        else:
            load = _own_metric_load(out.inputs)
            if load is not None:
                profile.observe(view.tick, load)
        written = profile.to_dict()
        self._live = (written, profile)
        horizon = self.spec.horizon
        if horizon is None:
            horizon = (max(startups) if startups else DEFAULT_STARTUP) + float(view.settings.get("sync_period", 15.0))
        kind = out
        out, raised = self._prescale(view, out, profile, horizon, raised)
        out, min_raised = _min_replicas(view, kind, out, mine.get("min_raised") is True)
        mine = {"profile": written, "startups": startups, "unready": unready}
        if min_raised:
            mine["min_raised"] = True
        if raised:  # JSON-safe: lists, not tuples
            mine["raised"] = {c: {r: [b, t] for r, (b, t) in res.items()} for c, res in raised.items()}
        memory[KEY] = mine
        return out

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

    def _prescale(
        self, view: View, out: Outcome, profile: LoadProfile, horizon: float, raised: Raised
    ) -> tuple[Outcome, Raised]:
        """The kind's outcome raised ahead of the forecast, and the requests raise that holds after
        it; or the kind's outcome, with why nothing was raised (:func:`_held`)."""
        spec = self.spec
        history = profile.history(view.tick)
        forecast, held = self._gate(view, profile, horizon, history)
        if forecast is None:
            reason, why = held
            return _held(view, out, profile, history, reason, why, raised)
        min_pair = out.hpa.get("min_replicas")
        reactive = _reactive_replicas(view, out)
        if forecast.load <= reactive * (1 + TOLERANCE):
            # within the HPA's tolerance of what the kind asks: no change, as the HPA
            why = f"the forecast of {forecast.load:.1f} at {clock(forecast.at)} is within the {reactive} replicas asked"
            return _held(view, out, profile, history, WITHIN_REACTIVE, why, raised)
        bounds = self.inner.bounds()
        top = bounds.max_replicas
        want = math.ceil(round(forecast.load, 2))
        if spec.max_prescale_percent is not None:
            want = min(want, math.ceil(reactive * (100 + spec.max_prescale_percent) / 100))
        # A raised minReplicas stays within the HPA's maxReplicas too: the API server refuses an
        # HPA whose maxReplicas is below its minReplicas (Kubernetes, pkg/apis/autoscaling/
        # validation/validation.go, validateHorizontalPodAutoscalerSpec: "must be greater than or
        # equal to `minReplicas`"), and the kind's HPA would never scale past it anyway.
        hpa_top = _hpa_max_replicas(view, out) if isinstance(min_pair, tuple) else None
        ceiling = min((c for c in (top, hpa_top) if c is not None), default=None)
        if ceiling is not None:
            want = min(want, ceiling)
        requests: dict[str, dict[str, int]] = {}
        if top is not None and forecast.load > top * (1 + TOLERANCE):
            requests = _requests_ahead(view, out, bounds, forecast.load / top, spec.max_prescale_percent, raised)
        if want <= reactive and not requests:
            why = f"replicas are capped at maxReplicas {ceiling} and no request can be raised"
            return _held(view, out, profile, history, CAPPED, why, raised)
        replicas, hpa = out.replicas, out.hpa
        reasons = list(out.reasons)
        if want > reactive:
            if isinstance(min_pair, tuple):
                hpa = {**out.hpa, "min_replicas": (min_pair[0], want)}
                if replicas is not None and replicas < want:
                    replicas = want
            else:
                replicas = want
                if want == view.spec.replicas:
                    replicas = None if out.replicas is None else want
            reasons.append(explain(want, forecast))
        out_requests, now_raised, taken_back = _requests_with_raise(view, out, requests, raised)
        if requests:
            reasons.append(explain_requests(requests, forecast, top or 0))
        reasons.extend(taken_back)
        inputs = forecast_inputs(forecast, reactive, horizon, history)
        inputs["replicas"] = want if want > reactive else None
        if requests:
            inputs["requests"] = requests
        return (
            Outcome(
                replicas,
                out_requests,
                out.limits,
                hpa,
                list(out.blocked),
                reasons,
                {**out.inputs, "forecast": inputs},
                out.dry_run,
                out.mode,
            ),
            now_raised,
        )

    def _gate(
        self, view: View, profile: LoadProfile, horizon: float, history: float
    ) -> tuple[Forecast | None, tuple[str, str]]:
        """The forecast at ``horizon`` ahead when the spec's gates let it act; else ``None`` and
        the status reason with its sentence (too little history, no profile at that time of day,
        an error not measured or too large, no better than "as the slot before")."""
        spec = self.spec
        if history < spec.min_history:
            return None, (TOO_LITTLE_HISTORY, f"{hours(history)} of history, minHistory is {hours(spec.min_history)}")
        forecast = profile.forecast(view.tick + horizon)
        if forecast is None:
            return None, (NO_PROFILE, "no history yet at the time of day it would forecast")
        if forecast.error is None:
            why = "its recent error is not measured yet (a 15-minute slot it forecast has to end first)"
            return None, (ERROR_NOT_MEASURED, why)
        if forecast.error > spec.max_error_percent:
            why = f"recent error {forecast.error:g} % is above maxErrorPercent {spec.max_error_percent} %"
            return None, (ERROR_TOO_LARGE, why)
        if forecast.versus_naive is not None and forecast.versus_naive > NAIVE_MARGIN:
            why = (
                f"over the last day its error is {forecast.versus_naive:.2f} times that of "
                '"as the slot before": no pattern it knows'
            )
            return None, (NO_BETTER_THAN_NAIVE, why)
        return forecast, ("", "")


def _min_replicas(view: View, kind: Outcome, out: Outcome, was_raised: bool) -> tuple[Outcome, bool]:
    """The HPA ``minReplicas`` pair of a kind that sets it (Tortoise), from what the HPA has now;
    and whether a pre-scale's raise of it holds after this tick.

    The kind writes its pair from its own memory of the HPA, which a pre-scale does not change:
    while a raise holds it asks "10 to 10", which changes nothing, and the raised 20 would stay
    until the kind itself next moved the minimum (for hours on a flat history).  So the tick after
    the forecast falls takes the minimum back to what the kind asks, and a raise that holds is
    written from the HPA's minimum (a decision when it changes, not on every tick)."""
    pair = out.hpa.get("min_replicas")
    now = view.hpa.min_replicas if view.hpa is not None else None
    if not isinstance(pair, tuple) or now is None:
        return out, was_raised
    raising = pair != kind.hpa.get("min_replicas")
    if raising:
        if pair[0] == now:
            return out, True
        reasons = out.reasons
    elif was_raised and pair[1] != now:
        reasons = [*out.reasons, explain_min_taken_back(pair[1])]
    else:
        return out, False
    hpa = {**out.hpa, "min_replicas": (now, pair[1])}
    fields = (out.replicas, out.requests, out.limits, hpa, out.blocked, reasons, out.inputs, out.dry_run, out.mode)
    return Outcome(*fields), raising


def _hpa_max_replicas(view: View, out: Outcome) -> int | None:
    """The maxReplicas of the HPA whose minReplicas the kind sets: as the kind sets it this tick,
    else as the HPA has it (``None``: not known)."""
    max_pair = out.hpa.get("max_replicas")
    if isinstance(max_pair, tuple) and max_pair[1] is not None:
        return int(max_pair[1])
    if view.hpa is not None and view.hpa.max_replicas is not None:
        return view.hpa.max_replicas
    return None


def _reactive_replicas(view: View, out: Outcome) -> int:
    """What the kind asks: its minimum replicas when it sets an HPA's, else its replicas, else
    the current ones (the forecast only ever raises above this)."""
    min_pair = out.hpa.get("min_replicas")
    if isinstance(min_pair, tuple) and min_pair[1] is not None:
        return int(min_pair[1])
    if out.replicas is not None:
        return out.replicas
    return view.spec.replicas


def _requests_with_raise(
    view: View, out: Outcome, requests: dict[str, dict[str, int]], raised: Raised
) -> tuple[dict[str, dict[str, int]], Raised, list[str]]:
    """The outcome's requests with this tick's raise, the raise that holds after it (each with
    the request it started from), and the sentences of every earlier raise taken back: a raise no
    longer asked for goes back to the kind's value before it, unless the kind set one since."""
    now_raised: Raised = {}
    out_requests = out.requests
    if requests:
        out_requests = {c: dict(r) for c, r in out.requests.items()}
        for cname, res in requests.items():
            for r, milli in res.items():
                out_requests.setdefault(cname, {})[r] = milli
                base = raised.get(cname, {}).get(r, (_request(view, cname, r), 0))[0]
                now_raised.setdefault(cname, {})[r] = (base, milli)
    taken_back: list[str] = []
    for cname, res2 in raised.items():
        for r, (base, _to) in res2.items():
            if (
                r not in now_raised.get(cname, {})
                and r not in out.requests.get(cname, {})
                and _request(view, cname, r) != base
            ):
                if out_requests is out.requests:
                    out_requests = {c: dict(v) for c, v in out.requests.items()}
                out_requests.setdefault(cname, {})[r] = base
                taken_back.append(explain_taken_back(cname, r, base))
    return out_requests, now_raised, taken_back


def _held(
    view: View, out: Outcome, profile: LoadProfile, history: float, reason: str, why: str, raised: Raised
) -> tuple[Outcome, Raised]:
    """The kind's outcome on a tick it does not pre-scale: the very object when it changes
    nothing (no audit event, no status to tell); else with ``inputs.predictive`` saying why not,
    and any raise of the requests taken back (what the pods had before it), unless the kind
    decided those requests itself."""
    back: dict[str, dict[str, int]] = {}
    for cname, res in raised.items():
        for r, (base, _to) in res.items():
            if r not in out.requests.get(cname, {}) and _request(view, cname, r) != base:
                back.setdefault(cname, {})[r] = base
    if not back and out.proposes_nothing and not out.blocked:
        return out, {}
    error, versus = profile.quality()
    note: dict[str, Any] = {
        "reason": reason,
        "message": why,
        "history_hours": round(history / 3600, 1),
        "error_percent": error,
        "versus_naive": audit_ratio(versus),
    }
    requests = out.requests
    reasons = out.reasons
    if back:
        requests = {c: dict(v) for c, v in out.requests.items()}
        reasons = list(out.reasons)
        for cname, res2 in back.items():
            for r, base in res2.items():
                requests.setdefault(cname, {})[r] = base
                reasons.append(explain_taken_back(cname, r, base))
    return (
        Outcome(
            out.replicas,
            requests,
            out.limits,
            out.hpa,
            list(out.blocked),
            list(reasons),
            {**out.inputs, "predictive": note},
            out.dry_run,
            out.mode,
        ),
        {},
    )


def _raised(view: View, stored: object) -> Raised:
    """The raise of the requests that still holds: the stored one, for each container and resource
    whose request is what it was raised to, or still what it was before (the raise not applied
    yet); one the kind or anyone set to another value since is theirs."""
    out: Raised = {}
    if not isinstance(stored, Mapping):
        return out
    for cname, res in stored.items():
        if not isinstance(res, Mapping):
            continue
        for r, pair in res.items():
            if (
                isinstance(pair, list | tuple)
                and len(pair) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
                and _request(view, str(cname), str(r)) in (pair[0], pair[1])
            ):
                out.setdefault(str(cname), {})[str(r)] = (int(pair[0]), int(pair[1]))
    return out


def _own_metric_load(inputs: Mapping[str, Any]) -> float | None:
    """The load of a kind that is its own HPA (CustomHpa: no HPA, a metric it scales on): as the
    HPA's, ``replicas × value / target`` of the ``replicas`` and ``metric`` its outcome's inputs
    record (docs/contract.md §4); ``None`` on a tick without them (between its control loops)."""
    metric, replicas = inputs.get("metric"), inputs.get("replicas")
    if not isinstance(metric, Mapping) or not isinstance(replicas, int) or isinstance(replicas, bool):
        return None
    value, target = metric.get("value"), metric.get("target")
    if not isinstance(value, int | float) or not isinstance(target, int | float) or isinstance(value, bool):
        return None
    return replicas * float(value) / float(target) if target > 0 and not isinstance(target, bool) else None


def _request(view: View, cname: str, resource: str) -> int:
    """The request (milli-units) the workload's spec has for ``cname``'s ``resource``; 0 for none."""
    c = view.spec.containers.get(cname)
    q = c.requests.get(resource) if c is not None else None
    return q.milli if q is not None else 0


def _scaled_resources(view: View) -> tuple[tuple[str, str | None], ...]:
    """The resources whose utilization the HPA scales on, each with the one container a
    ``ContainerResource`` metric names (``None``: a ``Resource`` metric, every container), for the
    metrics with a ``Utilization`` target: raising those requests lowers the utilization it sees.
    ``cpu`` for an HPA without metrics in the event: the HPA's default metric (80 % CPU utilization,
    https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#support-for-resource-metrics)."""
    hpa = view.hpa
    if hpa is None or not hpa.metrics:
        return (("cpu", None),)
    out: list[tuple[str, str | None]] = []
    for m in hpa.metrics:
        mtype = m.get("type")
        key = "resource" if mtype == "Resource" else "containerResource" if mtype == "ContainerResource" else None
        source = m.get(key) if key is not None else None
        if isinstance(source, Mapping) and (source.get("target") or {}).get("type") == "Utilization":
            name, container = source.get("name"), source.get("container")
            pair = (name, container if isinstance(container, str) and key == "containerResource" else None)
            if isinstance(name, str) and pair not in out:
                out.append((name, pair[1]))
    return tuple(out)


def _requests_ahead(
    view: View, out: Outcome, bounds: Bounds, factor: float, max_percent: int | None, raised: Raised
) -> dict[str, dict[str, int]]:
    """The vertical counterpart: the replicas are capped at ``maxReplicas`` and the forecast needs
    ``factor`` times those pods, so each container's request of a resource the HPA scales on (of
    the container a ``ContainerResource`` metric names) goes
    to ``factor`` times what it was before any raise, at most ``max_percent`` % above it (``None``: no
    such bound), within the
    kind's ``maxAllowed`` and the container's limit; never below what the kind asks.  Only where the
    kind may set requests (``Bounds.vertical``, a container not ``Off``); empty where nothing rises."""
    if not bounds.vertical:
        return {}
    out_requests: dict[str, dict[str, int]] = {}
    for resource, only in _scaled_resources(view):
        for cname, spec in view.spec.containers.items():
            if only is not None and cname != only:
                continue
            cb = bounds.container(cname)
            if cb is not None and cb.mode == "Off":
                continue
            now = _request(view, cname, resource)
            base = raised.get(cname, {}).get(resource, (now, 0))[0]
            if base <= 0:
                continue
            want = math.ceil(base * factor)
            if max_percent is not None:
                want = min(want, base * (100 + max_percent) // 100)
            top = cb.maximum.get(resource) if cb is not None else None
            if top is not None:
                want = min(want, top)
            limit = spec.limits.get(resource)
            if limit is not None:
                want = min(want, limit.milli)
            want = max(want, out.requests.get(cname, {}).get(resource, 0))
            if want > now or resource in raised.get(cname, {}):  # a raise that holds follows the forecast
                out_requests.setdefault(cname, {})[resource] = want
    return out_requests


def _size_after_raise(view: View, raised: Raised) -> float:
    """How much larger the pods are than before the raise of the requests that holds: the
    largest ratio of a raised request now to before (1 without one, or before it is applied)."""
    ratio = 1.0
    for cname, res in raised.items():
        for r, (base, _to) in res.items():
            if base > 0:
                ratio = max(ratio, _request(view, cname, r) / base)
    return ratio


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
