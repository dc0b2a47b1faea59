"""What the edge shows where Kubernetes users look (docs/edge.md, "Status and Events"): pure.

From the decision and blocked CloudEvents of its cluster (docs/contract.md §4) and the applier's
own results, this module computes

* the ``status`` of the policy object, in the shape users of the upstream project already read
  (:data:`STATUS_SHAPES`, one fold per kind and API group):

  - Tortoise ``autoscaling.mercari.com/v1beta3`` (mercari/tortoise ``api/v1beta3/tortoise_types.go``):
    ``tortoisePhase``, ``conditions.tortoiseConditions`` (``HPATargetUtilizationUpdated``,
    ``VerticalRecommendationUpdated``, ``FailedToReconcile``), ``recommendations.horizontal``
    (``targetUtilizations``, ``minReplicas``/``maxReplicas`` per hourly time slot) and
    ``recommendations.vertical.containerResourceRecommendation``, ``targets``;
  - Hvpa ``autoscaling.k8s.io/v1alpha1`` (gardener/hvpa-controller ``api/v1alpha1/hvpa_types.go``,
    the released API): ``replicas``, ``hpaWeight``/``vpaWeight``, the four update-policy copies,
    ``lastScaling`` {``lastScaleTime``, ``hpaStatus``, ``vpaStatus``}, ``lastBlockedScaling``
    [{``reason``, ``scalingStatus``}], ``lastError``;
  - Hvpa ``autoscaling.gardener.cloud/v1alpha1`` (the scale-interval design): the same, with
    ``lastScaling.lastUpdated``, ``vpaStatus`` as a list of {containerName, resources} and
    ``scaleUpUpdatePolicy``/``scaleDownUpdatePolicy``;
  - CustomHpa ``autoscaling.tandem.dev/v1alpha1`` (tandem's CRD; the shape of an HPA's status):
    ``currentReplicas``, ``desiredReplicas``, ``lastScaleTime``, ``conditions``;

* on every kind, the HPA's ``ScalingActive`` condition False with reason ``AmbiguousPolicy`` while
  other policies target the workload too (:func:`ambiguity_message` names them), True again at the
  policy's next other report;

* the Kubernetes Event of each applied decision and of each change held back (:func:`event_for`),
  whose message is the sentence of ``tandem audit explain`` (:mod:`schemas.words`), and the
  message of the collector's Warning on a policy object the parser refuses
  (:func:`invalid_policy_message`).

Every time written is the tick's (event time, RFC 3339 to the second, like ``metav1.Time``), never
the wall clock, so folding the same observation twice gives the same status: the writer compares
and writes nothing when nothing changed.  A status never goes back in time: an observation older
than what the status already shows changes only what it alone can tell (nothing, mostly).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scaling.cloudevents import APPLIED, APPLY_FAILED
from scaling.policies import custom_hpa, hvpa, hvpa_v2, tortoise
from scaling.policies.registry import PolicyKind, kinds
from scaling.reconcile import AMBIGUOUS_POLICY
from schemas.words import held_back, outcome_sentences, policy_phrase, sentence

__all__ = [
    "SCALING_ACTIVE",
    "STATUS_SHAPES",
    "Observation",
    "ambiguity_message",
    "event_for",
    "event_name",
    "fold_status",
    "invalid_policy_message",
    "merge_patch",
    "rfc3339",
]


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
            return _int(change[1])
        return _int(self.inputs.get("replicas"))

    def requests_to(self) -> dict[str, dict[str, Any]]:
        """``{container: {resource: to}}`` of the decided requests."""
        out: dict[str, dict[str, Any]] = {}
        for cname, change in (self.data.get("containers") or {}).items():
            for res, ch in ((change or {}).get("requests") or {}).items():
                if isinstance(ch, Mapping) and "to" in ch:
                    out.setdefault(str(cname), {})[str(res)] = ch["to"]
        return out

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


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


_TIME_KEYS = ("lastScaleTime", "lastUpdated", "lastUpdateTime", "lastTransitionTime", "updatedAt")


def _newest(doc: object) -> str:
    """The latest time written anywhere in a status (``""`` when none)."""
    best = ""
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            best = max(best, v) if k in _TIME_KEYS and isinstance(v, str) else max(best, _newest(v))
    elif isinstance(doc, list):
        for v in doc:
            best = max(best, _newest(v))
    return best


def _set_condition(
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


def _upsert(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    for item in items:
        if item.get(key) == value:
            return item
    item = {key: value}
    items.append(item)
    items.sort(key=lambda i: str(i.get(key)))
    return item


def _dig(doc: Mapping[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(p)  # type: ignore[assignment]
    return doc


# --- Tortoise ----------------------------------------------------------------------------------


def _tortoise(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation) -> None:
    """mercari/tortoise v1beta3 ``TortoiseStatus`` from what tandem's Tortoise decided."""
    spec = obj.get("spec") or {}
    refs = spec.get("targetRefs") or {}
    name = str((obj.get("metadata") or {}).get("name") or "")
    when, newest = obs.time, _newest(status)
    # Tortoise names the HPA it creates tortoise-hpa-<name>; tandem's Tortoise reads the same one.
    status["targets"] = {
        "horizontalPodAutoscaler": refs.get("horizontalPodAutoscalerName") or f"tortoise-hpa-{name}",
        "scaleTargetRef": refs.get("scaleTargetRef") or {},
        "verticalPodAutoscalers": [],
    }
    phase = obs.inputs.get("phase")
    if isinstance(phase, str) and phase and when >= newest:
        status["tortoisePhase"] = phase
    recs = status.setdefault("recommendations", {})
    horizontal = recs.setdefault("horizontal", {})
    rec = obs.inputs.get("recommended_replicas")
    if isinstance(rec, Mapping):
        hour = datetime.fromtimestamp(int(obs.tick), UTC).hour
        for key, field_ in (("min", "minReplicas"), ("max", "maxReplicas")):
            value = _int(rec.get(key))
            if value is None:
                continue
            slots = horizontal.setdefault(field_, [])
            slot = next((s for s in slots if s.get("from") == hour and "weekday" not in s), None)
            if slot is None:
                slot = {"from": hour, "to": hour + 1, "timezone": "UTC", "value": value, "updatedAt": when}
                slots.append(slot)
                slots.sort(key=lambda s: int(s.get("from") or 0))
            elif slot.get("value") != value and when >= str(slot.get("updatedAt") or ""):
                slot.update({"value": value, "updatedAt": when})
    targets = (obs.data.get("hpa") or {}).get("target_utilization") or {}
    if targets:
        per = horizontal.setdefault("targetUtilizations", [])
        for key, ch in sorted(targets.items()):
            cname, res = str(key).split("/", 1)
            to = ch.get("to") if isinstance(ch, Mapping) else None
            if isinstance(to, int | float) and not isinstance(to, bool):
                item = _upsert(per, "containerName", cname)
                item.setdefault("targetUtilization", {})[res] = int(to)
    requests = obs.requests_to()
    if requests:
        vertical = recs.setdefault("vertical", {}).setdefault("containerResourceRecommendation", [])
        for cname, res in sorted(requests.items()):
            item = _upsert(vertical, "containerName", cname)
            item.setdefault("RecommendedResource", {}).update(res)  # upstream's JSON key is capitalised
    conditions = status.setdefault("conditions", {}).setdefault("tortoiseConditions", [])
    if obs.type == "decision" and targets and obs.applied:
        _set_condition(
            conditions,
            "HPATargetUtilizationUpdated",
            "True",
            "HPATargetUtilizationUpdated",
            "HPA target utilization is updated",
            when,
        )
    if obs.type == "decision" and requests:
        if obs.applied:
            _set_condition(
                conditions,
                "VerticalRecommendationUpdated",
                "True",
                "VerticalRecommendationUpdated",
                "The recommendation is provided",
                when,
            )
        elif obs.dry_run:
            _set_condition(
                conditions,
                "VerticalRecommendationUpdated",
                "False",
                "TortoiseOff",
                "The recommendation is not applied: updateMode is Off",
                when,
            )
    error = obs.failed
    if error is not None:
        _set_condition(conditions, "FailedToReconcile", "True", "ApplyFailed", error, when)
    elif obs.applied and any(c.get("type") == "FailedToReconcile" for c in conditions):
        _set_condition(conditions, "FailedToReconcile", "False", "Applied", "", when)


# --- Hvpa --------------------------------------------------------------------------------------

#: ``hvpa: vpaWeight 40 at 2 replicas (hpaWeight 60)``: the weights are only in the reasons' text.
_WEIGHTS = re.compile(r"^hvpa: vpaWeight (\S+) at \d+ replicas \(hpaWeight (\S+)\)")


def _vpa_status(requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    recs = [{"containerName": c, "target": dict(sorted(r.items()))} for c, r in sorted(requests.items())]
    return {"recommendation": {"containerRecommendations": recs}}


def _vpa_list(requests: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"containerName": c, "resources": {"requests": dict(sorted(r.items()))}} for c, r in sorted(requests.items())
    ]


def _blocked_scaling(obs: Observation, released: bool) -> list[dict[str, Any]]:
    """``lastBlockedScaling``: one entry per blocking reason, with what was wanted (HVPA keeps the
    would-be scaling in ``scalingStatus``)."""
    by_reason: dict[str, dict[str, Any]] = {}
    current = _int(obs.inputs.get("replicas"))
    for b in obs.blocked():
        reason = str(b.get("reason") or "")
        target = str(b.get("target") or "")
        entry = by_reason.setdefault(reason, {"reason": reason, "scalingStatus": {}})
        st = entry["scalingStatus"]
        if target == "replicas":
            hpa = {"desiredReplicas": b.get("wanted")}
            if current is not None:
                hpa = {"currentReplicas": current, **hpa}
            st["hpaStatus"] = hpa
        elif "/" in target and not target.startswith("hpa/"):
            cname, res = target.split("/", 1)
            st.setdefault("_requests", {}).setdefault(cname, {})[res] = b.get("wanted")
    out = []
    for entry in by_reason.values():
        st = entry["scalingStatus"]
        requests = st.pop("_requests", None)
        if requests:
            st["vpaStatus"] = _vpa_status(requests) if released else _vpa_list(requests)
        out.append(entry)
    return out


def _hvpa(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation, *, released: bool) -> None:
    spec = obj.get("spec") or {}
    when, newest = obs.time, _newest(status)
    stamp = "lastScaleTime" if released else "lastUpdated"
    if when >= newest:
        replicas = obs.replicas_after()
        if replicas is not None:
            status["replicas"] = replicas
        if released:
            for reason in obs.data.get("reasons") or ():
                m = _WEIGHTS.match(str(reason))
                if m:
                    status["vpaWeight"], status["hpaWeight"] = _number(m.group(1)), _number(m.group(2))
            copies = (
                ("hpaScaleUpUpdatePolicy", ("hpa", "scaleUp", "updatePolicy")),
                ("hpaScaleDownUpdatePolicy", ("hpa", "scaleDown", "updatePolicy")),
                ("vpaScaleUpUpdatePolicy", ("vpa", "scaleUp", "updatePolicy")),
                ("vpaScaleDownUpdatePolicy", ("vpa", "scaleDown", "updatePolicy")),
            )
        else:
            copies = (
                ("scaleUpUpdatePolicy", ("scaleUp", "updatePolicy")),
                ("scaleDownUpdatePolicy", ("scaleDown", "updatePolicy")),
            )
        for field_, path in copies:
            value = _dig(spec, *path)
            if isinstance(value, Mapping):
                status[field_] = dict(value)
        blocked = _blocked_scaling(obs, released)
        if blocked:
            status["lastBlockedScaling"] = blocked
        else:
            status.pop("lastBlockedScaling", None)
    last = status.get("lastScaling") or {}
    if obs.applied and when >= str(last.get(stamp) or ""):
        scaling: dict[str, Any] = {stamp: when}
        change = obs.replicas_change()
        if change is not None:
            scaling["hpaStatus"] = {"currentReplicas": change[0], "desiredReplicas": change[1]}
        requests = obs.requests_to()
        if requests:
            scaling["vpaStatus"] = _vpa_status(requests) if released else _vpa_list(requests)
        status["lastScaling"] = scaling
    error = obs.failed
    if error is not None:
        status["lastError"] = {"description": error, "lastUpdateTime": when, "lastOperation": "Apply"}
    elif obs.applied:
        status.pop("lastError", None)


# --- CustomHpa ---------------------------------------------------------------------------------


def _custom_hpa(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation) -> None:
    """An HPA's status shape (``currentReplicas``, ``desiredReplicas``, ``lastScaleTime``,
    ``conditions`` with the HPA's condition types)."""
    when, newest = obs.time, _newest(status)
    conditions = status.setdefault("conditions", [])
    if when >= newest:
        current = obs.replicas_after()
        if current is not None:
            status["currentReplicas"] = current
        change = obs.replicas_change()
        wanted = next((b.get("wanted") for b in obs.blocked() if b.get("target") == "replicas"), None)
        if change is not None:
            status["desiredReplicas"] = change[1]
        elif _int(wanted) is not None:
            status["desiredReplicas"] = _int(wanted)
        elif current is not None:
            status["desiredReplicas"] = current
        metric = obs.inputs.get("metric")
        if isinstance(metric, Mapping) and metric.get("series"):
            _set_condition(
                conditions,
                "ScalingActive",
                "True",
                "ValidMetricFound",
                f"the replica count is computed from the series {metric['series']}",
                when,
            )
        held = [b for b in obs.blocked() if b.get("target") == "replicas"]
        if held:
            reason = str(held[0].get("reason") or "HeldBack")
            _set_condition(conditions, "AbleToScale", "True", reason, f"held back: {held_back(held)}", when)
    error = obs.failed
    if error is not None:
        _set_condition(conditions, "AbleToScale", "False", "FailedUpdateScale", error, when)
    elif obs.applied and obs.replicas_change() is not None and when >= str(status.get("lastScaleTime") or ""):
        status["lastScaleTime"] = when
        to = obs.replicas_change()[1]  # type: ignore[index]
        _set_condition(conditions, "AbleToScale", "True", "SucceededRescale", f"the applier set replicas to {to}", when)
    if not conditions:
        status.pop("conditions")


#: The status fold of each registered policy kind (keyed by its descriptor, so that no code here
#: branches on a kind's name; a kind without a fold, e.g. one registered by a test, gets no status).
STATUS_SHAPES: dict[PolicyKind, Callable[[Mapping[str, Any], dict[str, Any], Observation], None]] = {
    tortoise.KIND: _tortoise,
    hvpa.KIND: lambda o, s, ob: _hvpa(o, s, ob, released=True),
    hvpa_v2.KIND: lambda o, s, ob: _hvpa(o, s, ob, released=False),
    custom_hpa.KIND: _custom_hpa,
}


#: Where each kind keeps its conditions: Tortoise in ``conditions.tortoiseConditions``, the others
#: (the HPA's shape; Hvpa has none upstream) in ``conditions``.
_CONDITION_PATHS: dict[PolicyKind, tuple[str, ...]] = {tortoise.KIND: ("conditions", "tortoiseConditions")}
#: The condition that says whether the policy acts: the HPA's own (``ScalingActive``, which the HPA
#: controller sets False with reason ``AmbiguousSelector`` when several HPAs select the same pods).
SCALING_ACTIVE = "ScalingActive"


def _conditions(status: dict[str, Any], path: tuple[str, ...], create: bool) -> list[dict[str, Any]] | None:
    doc: Any = status
    for part in path[:-1]:
        if not isinstance(doc.get(part), dict):
            if not create:
                return None
            doc[part] = {}
        doc = doc[part]
    if not isinstance(doc.get(path[-1]), list):
        if not create:
            return None
        doc[path[-1]] = []
    conditions: list[dict[str, Any]] = doc[path[-1]]
    return conditions


def ambiguity_message(obj: Mapping[str, Any], ambiguous: list[Mapping[str, Any]]) -> str:
    """What the condition and the Warning on policy ``obj`` say: the other policies, by name."""
    me = (_group(obj.get("apiVersion")), obj.get("kind"), (obj.get("metadata") or {}).get("name"))
    others = [p for p in ambiguous if (_group(p.get("apiVersion")), p.get("kind"), p.get("name")) != me]
    named = [f"{p.get('kind')} {p.get('namespace')}/{p.get('name')} ({p.get('apiVersion')})" for p in others]
    verb = "targets" if len(named) == 1 else "target"
    return f"{sentence(named)} {verb} the same workload: no policy acts while more than one does (delete all but one)"


def _group(api_version: object) -> str:
    return str(api_version or "").partition("/")[0]


def _scaling_active(obj: Mapping[str, Any], status: dict[str, Any], obs: Observation, path: tuple[str, ...]) -> None:
    """``ScalingActive`` False (``AmbiguousPolicy``) while other policies target the workload too;
    True again at the policy's first other report after that."""
    ambiguous = obs.ambiguous
    if ambiguous:
        conditions = _conditions(status, path, create=True)
        assert conditions is not None
        _set_condition(
            conditions, SCALING_ACTIVE, "False", AMBIGUOUS_POLICY, ambiguity_message(obj, ambiguous), obs.time
        )
        return
    conditions = _conditions(status, path, create=False)
    held = next((c for c in conditions or () if c.get("type") == SCALING_ACTIVE), None)
    if conditions is not None and held is not None and held.get("reason") == AMBIGUOUS_POLICY:
        _set_condition(
            conditions, SCALING_ACTIVE, "True", "SinglePolicy", "the only policy of its workload: it acts", obs.time
        )


def fold_status(obj: Mapping[str, Any], observations: list[Observation]) -> dict[str, Any] | None:
    """The status of policy object ``obj`` once ``observations`` (oldest first) are taken in;
    ``None`` when its kind has no status shape."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    desc = next((k for k in kinds() if k.kind == kind and k.accepts(api_version)), None)
    shape = STATUS_SHAPES.get(desc) if desc is not None else None
    if shape is None or desc is None:
        return None
    path = _CONDITION_PATHS.get(desc, ("conditions",))
    status = copy.deepcopy(dict(obj.get("status") or {}))
    for obs in sorted(observations, key=lambda o: o.tick):
        shape(obj, status, obs)
        _scaling_active(obj, status, obs, path)
    return status


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: changed keys, ``None``
    for removed ones, lists whole; ``{}`` when they are equal."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    patch: dict[str, Any] = {}
    for k, v in new.items():
        if k not in old:
            patch[k] = v
        elif old[k] != v:
            patch[k] = merge_patch(old[k], v) if isinstance(old[k], Mapping) and isinstance(v, Mapping) else v
    for k in old:
        if k not in new:
            patch[k] = None
    return patch


# --- Events ------------------------------------------------------------------------------------


def event_for(obs: Observation) -> tuple[str, str, str] | None:
    """``(type, reason, message)`` of the Event on the scale target, or ``None`` (a repeat, or a
    decision that found nothing to change, is no news).  The message is ``tandem audit explain``'s
    sentence for the tick without its time, so that the same outcome deduplicates (count + 1), as
    the HPA's ``SuccessfulRescale`` does."""
    who = policy_phrase(obs.data)
    error = obs.failed
    if error is not None:
        return "Warning", "FailedApply", f"{who}: the applier failed: {error}"
    rdata = (obs.result or {}).get("data") or {}
    if obs.type == "decision" and obs.applied:
        if rdata.get("repeat") or not rdata.get("patched"):
            return None
        return "Normal", "Applied", f"{who}: " + " ".join(outcome_sentences("decision", obs.data))
    if obs.type == "decision" and obs.dry_run:
        return "Normal", "DryRun", f"{who}: " + " ".join(outcome_sentences("decision", obs.data))
    if obs.type == "blocked":
        return "Normal", "HeldBack", f"{who}: " + " ".join(outcome_sentences("blocked", obs.data))
    return None


def invalid_policy_message(error: str) -> str:
    """The message of the collector's ``InvalidPolicy`` Warning on a policy object: the parser's
    refusal (``field 'spec.hpa.template.spec.maxReplica': unknown field (did you mean
    maxReplicas?)``) and what follows from it."""
    return f"not a valid policy, not used (the workload keeps its last valid policy, if any): {error}"


def event_name(kind: str, object_name: str, type_: str, reason: str, message: str) -> str:
    """A name fixed by what the Event says, so that the same Event (also after a restart) is found
    again and counted instead of created anew (client-go's EventCorrelator keeps the same key)."""
    digest = hashlib.sha256(f"{kind}\0{type_}\0{reason}\0{message}".encode()).hexdigest()[:16]
    return f"{object_name[:200]}.tandem-{digest}"
