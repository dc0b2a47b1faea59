"""The HPA Tortoise manages (reference 2.b, 2.c, 2.f, 2.g): min/max replicas from the replica
history, rate-limited target utilizations, the metric list, and the HPA as last decided."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...hpa_metrics import metric_ref, ref_key
from ...outcome import View
from .history import replica_bounds
from .settings import TortoiseSettings, go_regexp
from .spec import Pair, TortoiseSpec, pair_key, split_key
from .tick import HpaState, Tick

__all__ = [
    "DEFAULT_HPA_BEHAVIOR",
    "NEW_METRIC_TARGET",
    "apply_hpa",
    "assume_hpa",
    "disable_hpa",
    "exclude_external_metrics",
    "hpa_state",
    "initial_hpa",
    "sync_metrics",
]

#: Target utilization of a ContainerResource metric Tortoise adds to an HPA (reference 2.c, 2.g).
NEW_METRIC_TARGET = 70
#: ``globalRecommendedHPABehavior``: the behavior Tortoise writes to its HPA (reference 1.1, 2.g).
DEFAULT_HPA_BEHAVIOR: Mapping[str, Any] = {
    "scaleUp": {"policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}]},
    "scaleDown": {"policies": [{"type": "Percent", "value": 2, "periodSeconds": 90}]},
}


def hpa_state(view: View, memory: dict[str, Any]) -> HpaState | None:
    """The HPA as tandem last decided it, unless an ``hpa`` event newer than that decision came.

    tandem's own HPA (``source: tandem``) is built from that decision (``hpa_template``): it
    never replaces it."""
    assumed = memory.get("hpa")
    ev = view.hpa
    if isinstance(assumed, Mapping) and (ev is None or ev.source == "tandem" or ev.ts <= float(assumed.get("tick", 0))):
        return HpaState.of_memory(assumed)
    memory.pop("hpa", None)
    return HpaState.of_event(ev) if ev is not None else None


def initial_hpa(st: TortoiseSettings, policies: Mapping[Pair, str]) -> HpaState:
    # Reference 2.g: min MinimumMinReplicas, max MaximumMaxReplicas, ContainerResource 70 per Horizontal pair.
    targets = {p: NEW_METRIC_TARGET for p, kind in policies.items() if kind == "Horizontal"}
    return HpaState(st.minimum_min_replicas, st.maximum_max_replicas, targets)


def sync_metrics(t: Tick) -> None:
    """The HPA's metric list follows the autoscaling policies (reference 2.c;
    ``syncHPAMetricsWithTortoiseAutoscalingPolicy`` in pkg/hpa/service.go).

    Every Horizontal pair gets a ContainerResource metric at 70; the ContainerResource metrics of
    pairs that are not Horizontal and every ``Resource`` metric are removed
    (``hpa.metrics.removed``).  Other metric types (External, Pods, Object) are kept.
    """
    hpa = t.hpa_math
    if hpa is None or hpa.targets is None:
        return
    changes: dict[str, tuple[int | None, int | None]] = t.out.hpa.setdefault("target_utilization", {})
    for p, kind in t.policies.items():
        if kind == "Horizontal" and p not in hpa.targets:
            changes[pair_key(p)] = (None, NEW_METRIC_TARGET)
            hpa.targets[p] = NEW_METRIC_TARGET
    if not changes:
        del t.out.hpa["target_utilization"]
    horizontal = {p for p, kind in t.policies.items() if kind == "Horizontal"}
    gone: list[dict[str, str]] = []
    for ref in _metric_refs(t):
        if ref["type"] == "Resource" or (
            ref["type"] == "ContainerResource" and (ref["container"], ref["name"]) not in horizontal
        ):
            gone.append(ref)
            if ref["type"] == "ContainerResource":
                hpa.targets.pop((ref["container"], ref["name"]), None)
    _remove(t, gone)


def disable_hpa(t: Tick, spec: TortoiseSpec) -> None:
    """No Horizontal pair left and the HPA is the user's (``horizontalPodAutoscalerName``): Tortoise
    disables it without deleting it (``UpdateHPASpecFromTortoiseAutoscalingPolicy`` calls
    ``disableHPA`` in pkg/hpa/service.go at every reconcile past Initializing, updateMode not Off):
    ``hpa.Spec.Metrics = nil``, ``MaxReplicas = MinReplicas = replicaNum`` (the Deployment's
    replicas).  Controller testdata ``mutable-autoscalingpolicy-remove-horizontal-2``.

    Every metric the HPA has is removed (``hpa.metrics.removed``), except the one the API server
    writes back into an HPA left without metrics (autoscaling/v2 defaulting,
    ``SetDefaults_HorizontalPodAutoscaler``: ``Resource`` cpu at ``averageUtilization`` 80; that
    is the fixture's after/hpa.yaml): removing it would only bring it back, so an HPA holding
    that metric alone counts as disabled.  tandem invariant: the replicas are capped at the
    Tortoise's ``spec.maxReplicas`` (a decision never leaves the policy's bounds; Tortoise does
    not check), and an HPA cannot be pinned to 0 replicas (the API rejects ``maxReplicas`` 0).
    """
    hpa = t.hpa
    if hpa is None:
        t.out.reasons.append(f"tortoise: waiting for HPA {spec.hpa_name!r} (no hpa event yet)")
        return
    replicas = t.view.spec.replicas
    if spec.max_replicas is not None and replicas > spec.max_replicas:
        replicas = spec.max_replicas
    if replicas < 1:
        t.out.reasons.append("tortoise: no Horizontal policy, but 0 replicas: the HPA is left as it is")
        return
    ev = t.view.hpa
    metrics = list(ev.metrics) if ev is not None and ev.metrics is not None else []
    if not _api_default_metrics(metrics):
        _remove(t, _metric_refs(t))
    t.out.hpa["min_replicas"] = (hpa.min_replicas, replicas)
    t.out.hpa["max_replicas"] = (hpa.max_replicas, replicas)
    if t.out.hpa.get("metrics") or hpa.min_replicas != replicas or hpa.max_replicas != replicas:
        t.out.reasons.append(
            f"tortoise: no Horizontal policy: HPA {spec.hpa_name!r} disabled "
            f"(no metrics, min and max replicas {replicas})"
        )


def _api_default_metrics(metrics: list[Any]) -> bool:
    """``metrics`` is what the API server gives an autoscaling/v2 HPA created or updated without
    metrics: one ``Resource`` cpu metric, ``Utilization`` 80."""
    if len(metrics) != 1 or not isinstance(metrics[0], Mapping) or metrics[0].get("type") != "Resource":
        return False
    resource = metrics[0].get("resource")
    target = resource.get("target") if isinstance(resource, Mapping) else None
    return (
        isinstance(resource, Mapping)
        and resource.get("name") == "cpu"
        and isinstance(target, Mapping)
        and target.get("type") == "Utilization"
        and target.get("averageUtilization") == 80
    )


def exclude_external_metrics(t: Tick) -> None:
    """``excludeExternalMetric`` (pkg/hpa/service.go): External metrics whose name matches
    ``HPAExternalMetricExclusionRegex`` are removed whenever Tortoise writes its recommendation to
    the HPA (past GatheringData).  Go's ``MatchString`` finds the pattern anywhere in the name
    (``search``), with RE2's syntax and semantics (:func:`.settings.go_regexp`); an empty setting
    removes nothing."""
    pattern = t.st.external_exclusion
    if not pattern:
        return
    rx = go_regexp(pattern)
    _remove(t, [ref for ref in _metric_refs(t) if ref["type"] == "External" and rx.search(ref["name"])])


def _metric_refs(t: Tick) -> list[dict[str, str]]:
    """References of the metrics the HPA has now (the observed HPA with tandem's decisions on top)."""
    ev = t.view.hpa
    if ev is None or ev.metrics is None:
        return []
    refs: dict[tuple[str, str, str], dict[str, str]] = {}
    for m in ev.metrics:
        ref = metric_ref(m) if isinstance(m, Mapping) else None
        if ref is not None:
            refs.setdefault(ref_key(ref), ref)
    return list(refs.values())


def _remove(t: Tick, refs: list[dict[str, str]]) -> None:
    if not refs:
        return
    removed: list[dict[str, str]] = t.out.hpa.setdefault("metrics", {}).setdefault("removed", [])
    known = {ref_key(r) for r in removed}
    removed.extend(r for r in refs if ref_key(r) not in known)


def apply_hpa(t: Tick, spec: TortoiseSpec, trec: Mapping[str, int], pairs: list[Pair]) -> None:
    """min/max replicas (reference 2.b, 2.f) and rate-limited targets (reference 2.c)."""
    st, out, hpa = t.st, t.out, t.hpa_math
    if hpa is None:
        out.reasons.append(f"tortoise: waiting for HPA {spec.hpa_name!r} (no hpa event yet)")
        return
    before = t.hpa
    peak = t.hist.peak(t.now, st.period)
    out.inputs["slot_peak_replicas"] = peak
    if peak is None:
        out.reasons.append("tortoise: no replica history for this slot: min/max replicas unchanged")
    else:
        rec_min, rec_max = replica_bounds(
            peak,
            min_multiplier=st.min_multiplier,
            max_multiplier=st.max_multiplier,
            minimum_min_replicas=st.minimum_min_replicas,
        )
        out.inputs["recommended_replicas"] = {"min": rec_min, "max": rec_max}
        new_max = rec_max
        if spec.max_replicas is not None and new_max > spec.max_replicas:
            new_max = spec.max_replicas
        if new_max > st.maximum_max_replicas:
            new_max = st.maximum_max_replicas
        new_min = min(rec_min, st.maximum_min_replicas)
        stepped: int | None = None
        if t.phase == "Emergency":
            new_min = new_max
        elif t.phase == "BackToNormal":
            current = hpa.min_replicas if hpa.min_replicas is not None else 1
            reduced = int(float(current) * st.reduction_factor)
            if new_min > reduced:
                t.phase = "Working"
                out.reasons.append(f"tortoise: BackToNormal finished at minReplicas {min(new_min, new_max)}")
            else:
                stepped = current
                new_min = reduced
        # tandem invariant: never write minReplicas above maxReplicas (Tortoise PR #451, open).
        new_min = min(new_min, new_max)
        if stepped is not None:
            out.reasons.append(f"tortoise: BackToNormal: minReplicas {stepped} -> {new_min}")
        out.hpa["min_replicas"] = (before.min_replicas if before else None, new_min)
        out.hpa["max_replicas"] = (before.max_replicas if before else None, new_max)
    if hpa.targets is None:
        return
    last = t.memory.get("tgt_at")
    allowed = last is None or t.now - float(last) > st.target_update_interval
    changes: dict[str, tuple[int | None, int | None]] = out.hpa.setdefault("target_utilization", {})
    applied = False
    for p in pairs:
        key = pair_key(p)
        target_now = hpa.targets.get(p)
        proposed = trec.get(key)
        if target_now is None or proposed is None:
            continue
        current = target_now
        if not allowed:
            if proposed != current:
                out.block("hpa/target_utilization", "Cooldown", f"{key}={proposed}")
            continue
        applied = True
        new = current + st.target_max_increase if proposed - current > st.target_max_increase else proposed
        if new != current:
            if key in changes:  # added by the metric sync on this tick
                before_t = changes[key][0]
            else:
                before_t = before.targets.get(p) if before is not None and before.targets is not None else None
            changes[key] = (before_t, new)
    if applied and not out.dry_run:
        t.memory["tgt_at"] = t.now
    if not changes:
        del out.hpa["target_utilization"]


def assume_hpa(t: Tick, created: bool) -> None:
    """Remember the HPA as decided: ``hpa`` events older than this tick do not undo it."""
    base = t.hpa if t.hpa is not None else (t.hpa_math if created else None)
    if base is None:
        return
    state = HpaState(base.min_replicas, base.max_replicas, None if base.targets is None else dict(base.targets))
    changed = False
    for name, attr in (("min_replicas", "min_replicas"), ("max_replicas", "max_replicas")):
        pair = t.out.hpa.get(name)
        if pair is not None:
            changed = changed or pair[0] != pair[1]
            setattr(state, attr, pair[1])
    for key, (old, new) in (t.out.hpa.get("target_utilization") or {}).items():
        changed = changed or old != new
        if state.targets is None:
            state.targets = {}
        state.targets[split_key(key)] = new
    for ref in (t.out.hpa.get("metrics") or {}).get("removed") or ():
        if ref.get("type") == "ContainerResource" and state.targets is not None:
            changed = state.targets.pop((ref["container"], ref["name"]), None) is not None or changed
    if changed or created:
        t.memory["hpa"] = state.to_memory(t.now)
