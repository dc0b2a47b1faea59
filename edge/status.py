"""What the edge shows where Kubernetes users look (docs/edge.md, "Status and Events"): pure.

From the decision and blocked CloudEvents of its cluster (docs/contract.md §4) and the applier's
own results, this module computes

* the ``status`` of the policy object, in the shape users of the upstream project already read:
  the fold of the kind's registry descriptor (``PolicyKind.status``, written beside the kind:
  ``scaling/policies/<kind>/status.py``); a kind without one gets no status;

* on every kind with ``spec.predictive``, ``status.predictive``: the forecaster's latest pre-scale
  and why it does not act otherwise (:func:`scaling.policies.status.fold_predictive`);

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
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scaling.outcome import AMBIGUOUS_POLICY
from scaling.policies.registry import find
from scaling.policies.status import Observation, fold_predictive, rfc3339, set_condition
from schemas.words import held_back, outcome_sentences, policy_phrase, sentence

__all__ = [
    "SCALING_ACTIVE",
    "Observation",
    "ambiguity_message",
    "event_for",
    "event_name",
    "fold_status",
    "invalid_policy_message",
    "merge_patch",
    "rfc3339",
]


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
        set_condition(
            conditions, SCALING_ACTIVE, "False", AMBIGUOUS_POLICY, ambiguity_message(obj, ambiguous), obs.time
        )
        return
    conditions = _conditions(status, path, create=False)
    held = next((c for c in conditions or () if c.get("type") == SCALING_ACTIVE), None)
    if conditions is not None and held is not None and held.get("reason") == AMBIGUOUS_POLICY:
        set_condition(
            conditions, SCALING_ACTIVE, "True", "SinglePolicy", "the only policy of its workload: it acts", obs.time
        )


def fold_status(obj: Mapping[str, Any], observations: list[Observation]) -> dict[str, Any] | None:
    """The status of policy object ``obj`` once ``observations`` (oldest first) are taken in;
    ``None`` when its kind has no status shape."""
    desc = find(obj.get("apiVersion"), obj.get("kind"))
    shape = desc.status if desc is not None else None
    if shape is None:
        return None
    status = copy.deepcopy(dict(obj.get("status") or {}))
    for obs in sorted(observations, key=lambda o: o.tick):
        shape.fold(obj, status, replace(obs, words=held_back))  # held-back changes in tandem's words
        _scaling_active(obj, status, obs, shape.conditions)
        fold_predictive(status, obs)  # status.predictive, every kind alike (spec.predictive)
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
