"""The Tortoise policy: one reconcile (reference 2.0) over the phase machine, the recommender and
the HPA it manages, with what Tortoise's status holds kept in the policy memory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...events import WorkloadRef
from ...outcome import Outcome, View
from ...quantity import bytes_of, format_quantity
from ...recommend.vpa import ContainerPolicy as VpaContainerPolicy
from ..bounds import Bounds
from ..bounds import ContainerBounds as AllowedBounds
from ..templates import HpaTemplate, VpaTemplate
from .history import ReplicaHistory
from .hpa import (
    DEFAULT_HPA_BEHAVIOR,
    NEW_METRIC_TARGET,
    apply_hpa,
    assume_hpa,
    disable_hpa,
    exclude_external_metrics,
    hpa_state,
    initial_hpa,
    sync_metrics,
)
from .phases import block_gathering, hpa_broken, initialize, phase_step, sync_resource_phases, vpa_unready
from .recommendation import apply_requests, target_recommendations, update_vpa_max, vertical_recommendations
from .settings import TortoiseSettings
from .spec import RESOURCES, Pair, TortoiseSpec, pair_key, parse_spec, split_key
from .tick import HpaState, Tick

__all__ = ["TortoisePolicy", "parse_tortoise"]


def parse_tortoise(manifest: Mapping[str, Any], workload: WorkloadRef) -> TortoisePolicy:
    """Parse a ``Tortoise`` manifest, or raise :class:`InvalidPolicy` naming the field."""
    return TortoisePolicy(parse_spec(manifest, workload))


class TortoisePolicy:
    """Mercari Tortoise: the reconcile (:meth:`decide`) drives the phase machine
    (:mod:`.phases`), the recommender (:mod:`.recommendation`) and the HPA it manages (:mod:`.hpa`)."""

    kind = "Tortoise"

    def __init__(self, spec: TortoiseSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.workload = spec.workload
        self._settings_cache: tuple[Mapping[str, Any] | None, TortoiseSettings] | None = None
        #: (the ``memory["hist"]`` value last written, its decoded history): saves decoding per tick.
        self._live: tuple[Any, ReplicaHistory] | None = None

    def bounds(self) -> Bounds:
        """maxReplicas (no floor: Tortoise decides the HPA's minReplicas itself) and each container's
        minAllocatedResources/maxAllocatedResources; the HPA named by horizontalPodAutoscalerName."""
        containers = {
            c: AllowedBounds(b.min_allocated, b.max_allocated, None, f"resourcePolicy[{c}]")
            for c, b in self.spec.resource_policy.items()
        }
        return Bounds(
            self.kind,
            self.name,
            None,
            self.spec.max_replicas,
            True,
            containers,
            "minAllocatedResources",
            "maxAllocatedResources",
            self.spec.hpa_name,
        )

    def vpa_template(self) -> VpaTemplate | None:
        """The monitor VPA Tortoise creates (``updateMode: Off``, ``minAllowed`` = ``minAllocatedResources``,
        reference 2.g): tandem recommends it from ``metric`` samples when no cluster sends ``vpa`` events."""
        policies = {
            b.container: VpaContainerPolicy(
                {r: v if r == "cpu" else bytes_of(v) for r, v in b.min_allocated.items() if r in RESOURCES}
            )
            for b in self.spec.resource_policy.values()
        }
        return VpaTemplate(policies)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        """The HPA Tortoise would have created by now (reference 2.g), from the policy's memory.

        tandem recommends it from ``metric`` samples when no cluster sends ``hpa`` events: one
        ContainerResource Utilization metric per Horizontal pair of the last reconcile
        (``memory["pol"]``) at the target tandem last decided (``memory["hpa"]``), else 70; min/max
        replicas as decided, else the initial ``MinimumMinReplicas``/``MaximumMaxReplicas``
        (``memory["hpa0"]``, kept by dry runs, which never decide an HPA); Tortoise's built-in
        behavior.  ``None`` before the first reconcile, with ``horizontalPodAutoscalerName`` (the
        user's HPA, which tandem cannot know) and without a Horizontal pair.
        """
        pol = memory.get("pol")
        if self.spec.hpa_name is not None or not isinstance(pol, Mapping):
            return None
        horizontal = sorted(split_key(k) for k, kind in pol.items() if kind == "Horizontal")
        if not horizontal:
            return None
        decided = memory.get("hpa")
        state = HpaState.of_memory(decided) if isinstance(decided, Mapping) else HpaState(None, None, None)
        initial = memory.get("hpa0")
        d = TortoiseSettings()
        lo, hi = initial if isinstance(initial, list) else (d.minimum_min_replicas, d.maximum_max_replicas)
        max_r = state.max_replicas if state.max_replicas is not None else int(hi)
        min_r = state.min_replicas if state.min_replicas is not None else int(lo)
        max_r = max(max_r, 1)
        min_r = min(max(min_r, 0), max_r)  # an HPA cannot hold min > max (tandem never decides one)
        targets = state.targets or {}
        metrics = tuple(
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": r,
                    "container": c,
                    "target": {"type": "Utilization", "averageUtilization": targets.get((c, r), NEW_METRIC_TARGET)},
                },
            }
            for c, r in horizontal
        )
        return HpaTemplate(metrics, DEFAULT_HPA_BEHAVIOR, min_r, max_r)

    def settings(self, settings: Mapping[str, Any]) -> TortoiseSettings:
        raw = settings.get("tortoise")
        cached = self._settings_cache
        if cached is not None and cached[0] is raw:
            return cached[1]
        parsed = TortoiseSettings.from_mapping(raw)
        self._settings_cache = (raw, parsed)
        return parsed

    # -- reconcile (reference 2.0) -------------------------------------------------------------

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        """One reconcile: its interval, the replica history, the tick's working values; a new
        Tortoise is initialized, any other takes the steps of :meth:`_reconcile`."""
        st = self.settings(view.settings)
        spec = self.spec
        now = view.tick
        out = Outcome(mode=spec.update_mode)
        off_reason = self._off_reason(st)
        out.dry_run = off_reason is not None
        phase = str(memory.get("phase", ""))

        # TortoiseUpdateInterval: at most one reconcile per interval, except an unhandled Emergency.
        last = memory.get("last")
        urgent = spec.update_mode == "Emergency" and phase != "Emergency"
        if isinstance(last, int | float) and now - last < st.update_interval and not urgent:
            return out
        memory["last"] = now
        if out.dry_run:
            # The initial HPA bounds, for ``hpa_template`` (a dry run never decides an HPA).
            initial = [st.minimum_min_replicas, st.maximum_max_replicas]
            if memory.get("hpa0") != initial:
                memory["hpa0"] = initial

        hist = self._history(memory, st)
        # Replica history: fed at every tick, frozen in Emergency and BackToNormal (reference 2.f).
        unfed = memory.get("hist")  # the history before this tick's replicas, see _unfeed
        fed = phase not in ("Emergency", "BackToNormal") and hist.observe(now, view.spec.replicas)
        if fed:
            memory["hist"] = hist.to_dict()
            self._live = (memory["hist"], hist)

        hpa = hpa_state(view, memory)
        policies = self._policies(view, hpa)
        has_h = any(t == "Horizontal" for t in policies.values())
        hpa_math = hpa.copy() if hpa is not None else None
        if hpa_math is None and has_h and spec.hpa_name is None:
            hpa_math = initial_hpa(st, policies)
        rphases: dict[str, list[Any]] = memory.setdefault("rp", {})
        t = Tick(view, st, memory, out, now, phase, policies, hist, hpa, hpa_math, rphases)
        out.inputs = {"replicas": view.spec.replicas}
        if off_reason is not None:
            out.reasons.append(f"tortoise: dry run ({off_reason})")

        if phase == "":
            initialize(t, spec, has_h)
            return self._finish(t)
        return self._reconcile(t, has_h, fed, unfed)

    def _reconcile(self, t: Tick, has_h: bool, fed: bool, unfed: Any) -> Outcome:
        """Tortoise's ``Reconcile`` (internal/controller/tortoise_controller.go) past initialization,
        step by step (reference 2.0): phases, the HPA's metrics, the VPA, the recommendations, then
        what is applied.  ``fed``: this tick's replicas went into the history (``unfed`` is the
        history before them)."""
        spec, view, memory, out, now = self.spec, t.view, t.memory, t.out, t.now
        policies, rphases = t.policies, t.rphases
        sync_resource_phases(t)
        broken = hpa_broken(view.hpa, memory, now, t.st)
        phase_step(t, spec.update_mode, has_h, broken)
        if fed and t.phase == "Emergency":
            self._unfeed(t, unfed)
            fed = False
        # Step 5: the HPA's metric list follows the policies; without a Horizontal pair the user's
        # HPA is disabled (``UpdateHPASpecFromTortoiseAutoscalingPolicy``).
        if has_h:
            sync_metrics(t)
        elif spec.hpa_name is not None:
            disable_hpa(t, spec)

        # Step 6: the monitor VPA must be ready.
        why = vpa_unready(view.vpa, policies)
        if why:
            out.reasons.append(f"tortoise: waiting for the VPA recommendation ({why})")
            return self._finish(t)

        # Step 7: Vertical resources work as soon as the VPA is ready.
        vertical = [p for p, kind in policies.items() if kind == "Vertical"]
        for p in vertical:
            if rphases[pair_key(p)][0] != "Working":
                rphases[pair_key(p)] = ["Working", now]
        if t.phase == "GatheringData" and vertical:
            t.phase = "PartlyWorking"

        # Step 9: automatic Emergency when the HPA cannot get its metrics (reference 2.f).
        if spec.update_mode == "Auto" and t.phase == "Working" and has_h and broken:
            t.phase = "Emergency"
            memory["auto"] = True
            out.reasons.append("tortoise: the HPA cannot get its metrics: automatic Emergency")
            if fed:
                self._unfeed(t, unfed)

        # Step 10: the sticky VPA maximum (reference 2.e).
        assert view.vpa is not None
        vmax = update_vpa_max(view.vpa, policies, memory)
        out.inputs["vpa_max"] = {k: format_quantity(split_key(k)[1], v) for k, v in sorted(vmax.items())}

        # Step 11: the recommendations (frozen in Emergency and BackToNormal).
        frozen = t.phase in ("Emergency", "BackToNormal")
        trec, vrec = self._recommendations(t, vmax, frozen)

        # Step 12: nothing is applied while gathering data.
        if t.phase == "GatheringData":
            block_gathering(t, has_h)
            return self._finish(t)
        self._apply(t, has_h, trec, vrec, frozen)
        return self._finish(t)

    def _recommendations(
        self, t: Tick, vmax: Mapping[str, int], frozen: bool
    ) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """Step 11: the target utilizations and the vertical recommendation, frozen in Emergency and
        BackToNormal: Tortoise's ``UpdateRecommendations`` (pkg/recommender/recommender.go) returns
        at once in those phases, so the replicas raised by the Emergency break neither the min/max
        nor the target utilizations nor the vertical recommendation.  The sticky VPA maximum
        (``UpdateContainerRecommendationFromVPA``, step 10) is still updated, as upstream."""
        spec, memory = self.spec, t.memory
        trec: dict[str, int] = dict(memory.get("trec") or {})
        vrec: dict[str, dict[str, int]] = _stored_vrec(memory.get("vrec"))
        if frozen:
            return trec, vrec
        if t.view.spec.replicas == t.st.maximum_max_replicas:
            t.out.reasons.append("tortoise: replicas at MaximumMaxReplicas: target utilization not recomputed")
        else:
            trec = target_recommendations(t, vmax, off=spec.update_mode == "Off")
            memory["trec"] = trec
        vrec = vertical_recommendations(t, spec, vmax)
        if memory.get("vrec") != vrec:
            memory["vrec"] = vrec
        return trec, vrec

    def _apply(self, t: Tick, has_h: bool, trec: dict[str, int], vrec: dict[str, dict[str, int]], frozen: bool) -> None:
        """Step 13: the HPA's min/max replicas and targets (reference 2.b, 2.c, 2.f), then the requests."""
        spec, policies, rphases = self.spec, t.policies, t.rphases
        if has_h:
            exclude_external_metrics(t)
            working = [
                p for p, kind in policies.items() if kind == "Horizontal" and rphases[pair_key(p)][0] == "Working"
            ]
            if working or frozen:
                apply_hpa(
                    t, spec, trec, working if not frozen else [p for p, k in policies.items() if k == "Horizontal"]
                )
            else:
                block_gathering(t, has_h)
        # ``UpdateResourceRequest`` runs in every phase past GatheringData: in Emergency and
        # BackToNormal it writes the frozen vertical recommendation (controller testdata
        # reconcile-for-the-single-container-pod-emergency-started: memory 4Gi -> 3Gi).
        apply_requests(t, vrec)

    # -- helpers: state ------------------------------------------------------------------------

    def _off_reason(self, st: TortoiseSettings) -> str | None:
        if self.spec.update_mode == "Off":
            return "updateMode Off"
        if st.global_disable:
            return "EffectiveModeOverridden: GlobalDisableMode"
        if self.workload.namespace in st.excluded_namespaces:
            return "EffectiveModeOverridden: NamespaceExclusion"
        return None

    def _unfeed(self, t: Tick, unfed: Any) -> None:
        """Take this tick's replicas back out of the history: the tick entered Emergency.

        Tortoise records the replica count in ``UpdateRecommendations``
        (pkg/recommender/recommender.go ``updateHPAMinMaxReplicasRecommendations``), which the
        controller calls after ``UpdateTortoisePhase`` and ``UpdateTortoisePhaseIfHPAIsUnhealthy``
        (internal/controller/tortoise_controller.go ``Reconcile``) and which returns at once in
        Emergency: the replicas of the reconcile that enters Emergency are never recorded, and the
        min is pinned to the recommended max as it stood before (reference 2.f).
        """
        if unfed is None:
            t.memory.pop("hist", None)
        else:
            t.memory["hist"] = unfed
        self._live = None
        t.hist = self._history(t.memory, t.st)

    def _history(self, memory: dict[str, Any], st: TortoiseSettings) -> ReplicaHistory:
        """The replica history of ``memory``; the decoded object is kept between ticks as long as
        ``memory["hist"]`` is the very value this policy wrote last (a reloaded state decodes again)."""
        raw = memory.get("hist")
        live = self._live
        h: ReplicaHistory | None = None
        if live is not None and raw is live[0]:
            h = live[1]
        elif isinstance(raw, Mapping):
            try:
                h = ReplicaHistory.from_dict(raw)
            except ValueError:
                h = None
        # A changed TimeZone or slot width cannot be mapped onto the old slots: start again.
        if h is None or h.timezone != st.timezone or h.width != st.slot_hours:
            h = ReplicaHistory(st.timezone, st.slot_hours)
            memory["hist"] = h.to_dict()
        self._live = (memory["hist"], h)
        return h

    def _policies(self, view: View, hpa: HpaState | None) -> dict[Pair, str]:
        """``status.autoscalingPolicy`` (reference 1.3)."""
        containers = sorted(view.spec.containers)
        out: dict[Pair, str] = {}
        explicit = self.spec.autoscaling_policy
        for c in containers:
            if explicit:
                # The webhook adds every container of the Deployment, missing resources as Off.
                pol = explicit.get(c, {})
                for r in RESOURCES:
                    out[(c, r)] = pol.get(r, "Off")
            else:
                out[(c, "cpu")] = "Horizontal"
                out[(c, "memory")] = "Vertical"
                if self.spec.hpa_name is not None and hpa is not None and hpa.targets is not None:
                    for r in RESOURCES:
                        out[(c, r)] = "Horizontal" if (c, r) in hpa.targets else "Vertical"
            for r in RESOURCES:
                q = view.spec.containers[c].requests.get(r)
                if q is None or q.milli == 0:
                    out[(c, r)] = "Off"
        return out

    def _finish(self, t: Tick) -> Outcome:
        """Store the phase; report a dry run's proposal once; remember the HPA as decided."""
        out, memory = t.out, t.memory
        memory["phase"] = t.phase
        out.inputs["phase"] = t.phase
        out.reasons.insert(0, f"tortoise: phase {t.phase}")
        new_hpa = memory.pop("_new_hpa", False)
        if out.dry_run:
            fingerprint = json.dumps(
                [
                    {k: v for k, v in sorted(out.hpa.items())},
                    out.requests,
                    out.limits,
                    [b.as_dict() for b in out.blocked],
                ],
                sort_keys=True,
                default=str,
            )
            if fingerprint == memory.get("dry"):
                # The same proposal as last time: a dry run reports a proposal once, not every tick.
                return Outcome(mode=out.mode, dry_run=True)
            memory["dry"] = fingerprint
            return out
        memory.pop("dry", None)
        if out.hpa:
            assume_hpa(t, new_hpa)
        return out


def _stored_vrec(raw: object) -> dict[str, dict[str, int]]:
    """The vertical recommendation kept in the memory (``status.recommendations.vertical``)."""
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, dict[str, int]] = {}
    for c, res in raw.items():
        if isinstance(res, Mapping):
            out[str(c)] = {str(r): int(v) for r, v in res.items() if isinstance(v, int)}
    return out
