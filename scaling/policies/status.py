"""A policy object's ``status`` in its upstream's shape: what a kind's fold is given (pure).

The applier (``edge.status.fold_status``) folds the decision and blocked CloudEvents of a policy's
workload, with its own apply results, into the policy object's ``status``; how is the kind's own
(:class:`StatusShape`, carried by its registry descriptor, written beside the kind).  This module
holds what every fold shares: the :class:`Observation` of one tick and the Kubernetes conventions
(``metav1.Time`` text, conditions whose ``lastTransitionTime`` moves only with their status).

Every time written is the tick's (event time), never the wall clock, so folding the same
observation twice gives the same status; a status never goes back in time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..cloudevents import APPLIED, APPLY_FAILED
from ..outcome import AMBIGUOUS_POLICY
from ..quantity import format_quantity

__all__ = [
    "TIME_KEYS",
    "Fold",
    "Observation",
    "StatusShape",
    "as_int",
    "dig",
    "fold_predictive",
    "newest",
    "number",
    "rfc3339",
    "set_condition",
    "upsert",
]


def _plain(blocked: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(f"{b.get('target', '?')} ({b.get('reason', '?')})" for b in blocked)


@dataclass(frozen=True, slots=True)
class Observation:
    """What the applier learned about one workload at one tick.

    ``type`` is ``decision`` or ``blocked``; ``data`` the CloudEvent's data; ``result`` the
    applier's own result CloudEvent for a decision it applied (``None`` for a blocked report and
    for a dry run read from the audit topic).
    """

    type: str
    data: Mapping[str, Any]
    result: Mapping[str, Any] | None = None
    #: How held-back changes are said: plainly here (``replicas (Cooldown)``); the applier's
    #: ``edge.status.fold_status`` says them as ``tandem audit explain`` does (``schemas.words``,
    #: a layer above this one).
    words: Callable[[Sequence[Mapping[str, Any]]], str] = field(default=_plain, compare=False)

    @property
    def tick(self) -> float:
        tick = self.data.get("tick")
        return float(tick) if isinstance(tick, int | float) and not isinstance(tick, bool) else 0.0

    @property
    def time(self) -> str:
        return rfc3339(self.tick)

    @property
    def dry_run(self) -> bool:
        return bool(self.data.get("dry_run")) or bool((self.result or {}).get("data", {}).get("dry_run"))

    @property
    def applied(self) -> bool:
        """A decision that this applier wrote (or found already written): not a dry run."""
        return self.type == "decision" and (self.result or {}).get("type") == APPLIED and not self.dry_run

    @property
    def failed(self) -> str | None:
        """The error of a decision the applier could not apply."""
        r = self.result or {}
        return str((r.get("data") or {}).get("error") or "") if r.get("type") == APPLY_FAILED else None

    @property
    def ambiguous(self) -> list[Mapping[str, Any]]:
        """The policies that all target the workload, when this is a report that none acts
        because of it (reason ``AmbiguousPolicy``); else empty."""
        if self.type != "blocked" or not any(
            isinstance(b, Mapping) and b.get("reason") == AMBIGUOUS_POLICY for b in self.data.get("blocked") or ()
        ):
            return []
        return [p for p in self.data.get("ambiguous") or () if isinstance(p, Mapping)]

    @property
    def inputs(self) -> Mapping[str, Any]:
        inputs = self.data.get("inputs")
        return inputs if isinstance(inputs, Mapping) else {}

    def replicas_change(self) -> tuple[Any, Any] | None:
        r = self.data.get("replicas")
        return (r.get("from"), r.get("to")) if isinstance(r, Mapping) else None

    def replicas_after(self) -> int | None:
        """The workload's replicas once this tick is done (as far as the observation tells)."""
        change = self.replicas_change()
        if change is not None and self.applied:
            return as_int(change[1])
        return as_int(self.inputs.get("replicas"))

    def requests_to(self) -> dict[str, dict[str, Any]]:
        """``{container: {resource: to}}`` of the decided requests."""
        out: dict[str, dict[str, Any]] = {}
        for cname, change in (self.data.get("containers") or {}).items():
            for res, ch in ((change or {}).get("requests") or {}).items():
                if isinstance(ch, Mapping) and "to" in ch:
                    out.setdefault(str(cname), {})[str(res)] = ch["to"]
        return out

    def held_back(self, blocked: Sequence[Mapping[str, Any]]) -> str:
        """Held-back changes in words, for a condition's message (:attr:`words`)."""
        return self.words(blocked)

    def blocked(self) -> list[Mapping[str, Any]]:
        """The held-back changes; a dry run's whole decision is held back by ``DryRun``."""
        out = [b for b in self.data.get("blocked") or [] if isinstance(b, Mapping)]
        if self.type == "decision" and self.dry_run:
            change = self.replicas_change()
            if change is not None:
                out.append({"target": "replicas", "reason": "DryRun", "wanted": change[1]})
            for cname, res in self.requests_to().items():
                out.extend({"target": f"{cname}/{r}", "reason": "DryRun", "wanted": q} for r, q in sorted(res.items()))
        return out


def rfc3339(ts: float) -> str:
    """``metav1.Time`` text: UTC, to the second."""
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


TIME_KEYS = ("lastScaleTime", "lastUpdated", "lastUpdateTime", "lastTransitionTime", "updatedAt")


def newest(doc: object) -> str:
    """The latest time written anywhere in a status (``""`` when none)."""
    best = ""
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            best = max(best, v) if k in TIME_KEYS and isinstance(v, str) else max(best, newest(v))
    elif isinstance(doc, list):
        for v in doc:
            best = max(best, newest(v))
    return best


def set_condition(
    conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, when: str
) -> None:
    """Set one condition the Kubernetes way: ``lastTransitionTime`` moves only when ``status``
    changes (upstream Tortoise stamps it every time; tandem keeps the convention, so that an
    unchanged condition is no write)."""
    for c in conditions:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["lastTransitionTime"] = when
            if (c.get("status"), c.get("reason"), c.get("message")) != (status, reason, message):
                c["lastUpdateTime"] = when
            c.update({"status": status, "reason": reason, "message": message})
            return
    conditions.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": when,
            "lastTransitionTime": when,
        }
    )


def upsert(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    for item in items:
        if item.get(key) == value:
            return item
    item = {key: value}
    items.append(item)
    items.sort(key=lambda i: str(i.get(key)))
    return item


def dig(doc: Mapping[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(p)  # type: ignore[assignment]
    return doc


#: A kind's fold: the policy object, its status so far (changed in place), one observation.
Fold = Callable[[Mapping[str, Any], dict[str, Any], Observation], None]


@dataclass(frozen=True, slots=True)
class StatusShape:
    """How the applier writes one kind's ``status``: its fold, and where its conditions live
    (the HPA's shape, ``conditions``, unless the upstream type nests them: Tortoise's
    ``conditions.tortoiseConditions``), so that the ``ScalingActive`` condition every kind gets
    (``edge.status``) lands beside the kind's own."""

    fold: Fold
    conditions: tuple[str, ...] = ("conditions",)


def fold_predictive(status: dict[str, Any], obs: Observation) -> None:
    """``status.predictive``, the same on every kind that carries ``spec.predictive`` (the applier
    folds it after the kind's own fold, ``edge.status``): what the forecaster rested on at the
    policy's latest decision or report, and its latest pre-scale.

    From a pre-scaled decision's ``inputs.forecast``: ``lastPreScale`` {``time`` (the tick),
    ``replicas`` (to N; absent when only requests were raised), ``requests``
    (``{container: {resource: quantity}}``, when replicas were capped), ``forecast`` (the load F),
    ``forecastTime`` (T)}, ``reason: PreScaled`` and its sentence as ``message``.  From any other
    decision or report of the policy, ``inputs.predictive``: why it did not pre-scale (``reason``:
    ``TooLittleHistory``, ``NoProfile``, ``ErrorNotMeasured``, ``ErrorTooLarge``,
    ``NoBetterThanNaive``, ``WithinReactive``, ``Capped``; ``message`` in words).  Both give
    ``historyHours``, ``recentErrorPercent`` and ``versusNaive`` (absent while not measured) and
    ``lastUpdateTime``.  Decimals are written as text ("7.4"), as the Kubernetes API conventions
    ask of status fields ("Primitive types", avoid floating-point values,
    https://github.com/kubernetes/community/blob/master/contributors/devel/sig-architecture/api-conventions.md#primitive-types).
    An observation older than ``lastUpdateTime`` changes nothing."""
    inputs = obs.inputs
    forecast, note = inputs.get("forecast"), inputs.get("predictive")
    if isinstance(forecast, Mapping) and "load" in forecast:
        source: Mapping[str, Any] = forecast
    elif isinstance(note, Mapping) and "reason" in note:
        source = note
    else:
        return
    part = status.get("predictive")
    if not isinstance(part, dict):
        part = status["predictive"] = {}
    when = obs.time
    if str(part.get("lastUpdateTime") or "") > when:
        return
    if source is forecast:
        last: dict[str, Any] = {"time": when}
        if as_int(forecast.get("replicas")) is not None:
            last["replicas"] = as_int(forecast.get("replicas"))
        requests = forecast.get("requests")
        if isinstance(requests, Mapping) and requests:
            last["requests"] = {
                str(c): {str(r): format_quantity(str(r), int(m)) for r, m in sorted(res.items())}
                for c, res in sorted(requests.items())
                if isinstance(res, Mapping)
            }
        load = forecast.get("load")
        if isinstance(load, int | float) and not isinstance(load, bool):
            last["forecast"] = f"{load:g}"
        at = forecast.get("at")
        if isinstance(at, int | float) and not isinstance(at, bool):
            last["forecastTime"] = rfc3339(at)
        part["lastPreScale"] = last
        part["reason"] = "PreScaled"
        words = [str(r) for r in obs.data.get("reasons") or () if str(r).startswith(("pre-scaled", "raised"))]
        part["message"] = "; ".join(words)
    else:
        part["reason"] = str(source.get("reason"))
        part["message"] = str(source.get("message") or "")
    for key, name in (
        ("history_hours", "historyHours"),
        ("error_percent", "recentErrorPercent"),
        ("versus_naive", "versusNaive"),
    ):
        value = source.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            part[name] = f"{value:g}"
        else:
            part.pop(name, None)
    part["lastUpdateTime"] = when
