"""Per-workload state: a plain value of bounded size (docs/architecture.md invariant 4).

It holds the latest input of each kind (as the validated JSON it arrived as, so that it
serialises without a second encoder), the latest custom-metric sample per series and pod, the
latest OOM kill per container, the tick bookkeeping of docs/contract.md §6, the policy's
*memory* (what HVPA keeps in its status, Nanit in process memory...), and the values tandem
assumes applied since its last decision.  ``to_dict``/``from_dict`` round-trip it through
JSON-safe types for Faust tables and changelogs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .events import (
    ContainerResources,
    Event,
    HpaEvent,
    PolicyEvent,
    Qty,
    SeriesSample,
    VpaEvent,
    WorkloadEvent,
    decode_event,
)
from .hpa_feed import HpaFeed
from .hpa_metrics import apply_changes, ref_key
from .policies.base import Policy
from .policies.templates import VpaTemplate
from .quantity import format_quantity
from .recommend.hpa import HpaState
from .recommend.vpa import ContainerState

__all__ = ["MAX_SERIES", "WorkloadState"]

#: Bound on the (series, pod) pairs kept per workload; the oldest are dropped first.
MAX_SERIES = 512

_E = TypeVar("_E", bound=Event)


@dataclass(slots=True)
class WorkloadState:
    key: str
    #: Input type -> its latest raw event (JSON value); for ``policy``, the policies targeting the
    #: workload: identity (``scaling.events.policy_identity``) -> its latest raw policy event.  A
    #: changed entry is a new dict, never one changed in place (the worker's slot writer keeps the
    #: JSON of each entry for as long as it is the same object).
    raw: dict[str, Any] = field(default_factory=dict)
    series: dict[tuple[str, str | None], tuple[float, float]] = field(default_factory=dict)
    oom: dict[str, float] = field(default_factory=dict)
    pending_tick: float | None = None
    last_tick: float | None = None
    last_ts: float | None = None
    memory: dict[str, Any] = field(default_factory=dict)
    #: Values tandem decided at ``overlay["tick"]`` and assumes applied until the next workload event;
    #: ``overlay["hpa"]`` holds the HPA fields decided at its own ``tick``, assumed applied until the
    #: next ``hpa`` event (see :meth:`assume_hpa`).
    overlay: dict[str, Any] = field(default_factory=dict)
    last_blocked: str | None = None
    #: Own recommenders' state (HPA history, VPA histograms), owned by ``scaling.recommend``.
    recommender: dict[str, Any] = field(default_factory=dict)
    #: What history envelopes taught (``scaling.learn``), empty without any: ``n`` envelopes
    #: learned, ``through`` the time of the last past event taught, ``live_from`` the first live
    #: sample's time, ``replicas`` the past replicas per 15-minute slot (a bounded ring) for the
    #: policy kinds that keep a replica history.
    learned: dict[str, Any] = field(default_factory=dict)

    # --- caches: rebuilt from the fields above after a restore, never serialised --------------
    # The latest inputs decoded (from ``raw``, lazily after a restore).
    _workload: WorkloadEvent | None = field(default=None, repr=False, compare=False)
    _hpa: HpaEvent | None = field(default=None, repr=False, compare=False)
    _vpa: VpaEvent | None = field(default=None, repr=False, compare=False)
    #: The parsed policy of the one policy in ``raw["policy"]`` (``None`` with none, or with
    #: several: then none acts); set by the reconcile loop, which parses it (again after a restore).
    policy: Policy | None = field(default=None, repr=False, compare=False)
    #: The own recommenders' live state (VPA histograms per container, the HPA's history): kept as
    #: objects while the worker runs, serialised into ``recommender`` by :meth:`to_dict`.
    vpa_live: dict[str, ContainerState] | None = field(default=None, repr=False, compare=False)
    hpa_live: HpaState | None = field(default=None, repr=False, compare=False)
    #: The own HPA's inputs kept up to date sample by sample (built from ``recommender["usage"]``
    #: at the own HPA's first tick; ``own.observe`` keeps both in step).
    hpa_feed: HpaFeed | None = field(default=None, repr=False, compare=False)
    #: Whether the own recommendations are published (``hpa``/``vpa`` events emitted when they
    #: change).  A driver that drops them all (``tandem simulate``: its simulated cluster reads
    #: only decisions) sets it false, and the own HPA and VPA then skip building and comparing
    #: them; what they recommend, and so every decision, is the same.
    publish_own: bool = field(default=True, repr=False, compare=False)
    #: The VPA template of :attr:`policy` as the own VPA last asked for it: (that policy, its template).
    own_vpa_template: tuple[Policy, VpaTemplate | None] | None = field(default=None, repr=False, compare=False)
    #: The own VPA's last recommendation as built: a ``scaling.own.OwnVpa`` (typed there: ``own``
    #: imports this module, so naming the class here would be an import cycle).
    vpa_own: Any = field(default=None, repr=False, compare=False)
    #: :attr:`spec` as last built: (the observed event, a copy of the overlay then, the view).
    _spec_view: tuple[WorkloadEvent, dict[str, Any], WorkloadEvent] | None = field(
        default=None, repr=False, compare=False
    )

    # --- inputs ---------------------------------------------------------------------------

    # The properties below test ``kind in raw`` before calling ``_decoded``: a workload run by the
    # own recommenders has no ``hpa`` or ``vpa`` event, and the reconcile asks for both every tick.
    def _decoded(self, kind: str, cls: type[_E]) -> _E | None:
        value = self.raw.get(kind)
        if value is None:
            return None
        event = decode_event(value)
        if not isinstance(event, cls):
            raise TypeError(f"state {self.key}: raw[{kind!r}] decodes to {type(event).__name__}")
        return event

    @property
    def workload_event(self) -> WorkloadEvent | None:
        """The latest ``workload`` event as observed (:attr:`spec` adds what tandem assumes applied)."""
        if self._workload is None and "workload" in self.raw:
            self._workload = self._decoded("workload", WorkloadEvent)
        return self._workload

    @property
    def hpa_event(self) -> HpaEvent | None:
        """The latest ``hpa`` event from a cluster (tandem's own are never stored)."""
        if self._hpa is None and "hpa" in self.raw:
            self._hpa = self._decoded("hpa", HpaEvent)
        return self._hpa

    @property
    def vpa_event(self) -> VpaEvent | None:
        """The latest ``vpa`` event from a cluster (tandem's own are never stored)."""
        if self._vpa is None and "vpa" in self.raw:
            self._vpa = self._decoded("vpa", VpaEvent)
        return self._vpa

    @property
    def policy_ids(self) -> list[str]:
        """The identities of the policies targeting the workload, sorted."""
        return sorted(self.raw.get("policy") or ())

    @property
    def policy_event(self) -> PolicyEvent | None:
        """The ``policy`` event of the workload's one policy (``None`` with none or several)."""
        policies = self.raw.get("policy")
        if not policies or len(policies) != 1:
            return None
        event = decode_event(next(iter(policies.values())))
        if not isinstance(event, PolicyEvent):
            raise TypeError(f"state {self.key}: raw['policy'] holds a {type(event).__name__}")
        return event

    def remember(self, raw: Mapping[str, Any], event: WorkloadEvent | HpaEvent | VpaEvent) -> None:
        self.raw[event.type] = dict(raw)
        if isinstance(event, WorkloadEvent):
            self._workload = event
            if "tick" in self.overlay and event.ts > self.overlay["tick"]:
                # The cluster has spoken: its spec replaces what tandem assumed (the HPA part stays:
                # only an hpa event says what the HPA is).
                self.overlay = {k: v for k, v in self.overlay.items() if k == "hpa"}
        elif isinstance(event, HpaEvent):
            self._hpa = event
            self.hpa_feed = None  # a cluster's HPA speaks from now on: the own HPA's inputs are unused
            if "hpa" in self.overlay and event.ts > self.overlay["hpa"]["tick"]:
                # The HPA as the cluster reports it after the decision; a new dict, since the spec
                # view's memo compares the overlay by value.
                self.overlay = {k: v for k, v in self.overlay.items() if k != "hpa"}
        else:
            self._vpa = event

    def remember_policy(self, raw: Mapping[str, Any], event: PolicyEvent, policy: Policy) -> None:
        """Keep a policy event (replacing the earlier one of the same policy) and the policy parsed
        from it; with another policy already there, neither is in force (:attr:`policy` is None)."""
        identity = event.identity
        assert identity is not None  # an event with a manifest has one
        policies = dict(self.raw.get("policy") or {})
        policies[identity] = dict(raw)
        self.raw["policy"] = policies
        self.policy = policy if len(policies) == 1 else None

    def forget_policy(self, identity: str | None = None) -> None:
        """A policy was deleted (``identity``; ``None``: every policy of the workload).  The one
        left, if only one is, is in force again (parsed at the next tick)."""
        policies = self.raw.get("policy") or {}
        rest = {k: v for k, v in policies.items() if k != identity} if identity is not None else {}
        if rest:
            self.raw["policy"] = rest
        else:
            self.raw.pop("policy", None)
        self.policy = None

    def note_series(self, ts: float, sample: SeriesSample) -> None:
        k = (sample.series, sample.pod)
        self.series.pop(k, None)
        self.series[k] = (ts, sample.value)
        while len(self.series) > MAX_SERIES:
            del self.series[next(iter(self.series))]

    @property
    def spec(self) -> WorkloadEvent | None:
        """The workload as tandem believes it is now: observed spec plus assumed-applied changes."""
        ev = self.workload_event
        if ev is None or "tick" not in self.overlay:
            return ev
        # Rebuilt only when the observed spec or the overlay changed: between decisions every
        # tick asks for the same view (it was a tenth of a tick fed recorded recommendations).
        cached = self._spec_view
        if cached is not None and cached[0] is ev and cached[1] == self.overlay:
            return cached[2]
        containers = dict(ev.containers)
        for section in ("requests", "limits"):
            for cname, values in self.overlay.get(section, {}).items():
                if cname not in containers:
                    continue
                c = containers[cname]
                current = dict(getattr(c, section))
                for res, milli in values.items():
                    current[res] = Qty(milli, format_quantity(res, milli))
                containers[cname] = (
                    ContainerResources(current, c.limits)
                    if section == "requests"
                    else ContainerResources(c.requests, current)
                )
        replicas = self.overlay.get("replicas", ev.replicas)
        spec = replace(ev, replicas=replicas, containers=containers)
        snapshot = {
            k: copy.deepcopy(v) if k == "hpa" else {c: dict(r) for c, r in v.items()} if isinstance(v, dict) else v
            for k, v in self.overlay.items()
        }
        self._spec_view = (ev, snapshot, spec)
        return spec

    def assume_applied(
        self,
        tick: float,
        replicas: int | None,
        requests: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, Mapping[str, int]],
    ) -> None:
        ov = self.overlay
        ov["tick"] = tick
        if replicas is not None:
            ov["replicas"] = replicas
        for section, values in (("requests", requests), ("limits", limits)):
            for cname, res_map in values.items():
                ov.setdefault(section, {}).setdefault(cname, {}).update(res_map)

    def assume_hpa(self, tick: float, changes: Mapping[str, Any]) -> None:
        """Remember the HPA changes of a decision (its ``hpa`` data: ``min_replicas``,
        ``max_replicas``, ``target_utilization``, ``metrics.removed``) until an ``hpa`` event newer
        than ``tick`` arrives, so that the next ticks see the HPA as decided."""
        ov = self.overlay.setdefault("hpa", {})
        ov["tick"] = tick
        for name in ("min_replicas", "max_replicas"):
            if name in changes:
                ov[name] = changes[name]["to"]
        targets: dict[str, Any] = ov.setdefault("target_utilization", {})
        removed: list[dict[str, Any]] = ov.setdefault("removed", [])
        for ref in (changes.get("metrics") or {}).get("removed") or ():
            key = ref_key(ref)
            if key[0] == "ContainerResource":
                targets.pop(f"{key[1]}/{key[2]}", None)
            if all(ref_key(r) != key for r in removed):
                removed.append(dict(ref))
        for pair, change in (changes.get("target_utilization") or {}).items():
            targets[pair] = change["to"]
            container, _, resource = str(pair).partition("/")
            removed[:] = [r for r in removed if ref_key(r) != ("ContainerResource", container, resource)]

    def hpa_view(self, observed: HpaEvent | None, spec: WorkloadEvent) -> HpaEvent | None:
        """The HPA as tandem believes it is now: ``observed`` (a cluster's or tandem's own) with
        the decided fields of :meth:`assume_hpa`.  Without any HPA event, an HPA tandem decided
        (created) is the decided fields alone, stamped with the decision's tick."""
        ov = self.overlay.get("hpa")
        if not ov:
            return observed
        targets = ov.get("target_utilization") or {}
        removed = ov.get("removed") or []
        if observed is None:
            return HpaEvent(
                ts=ov["tick"],
                workload=spec.workload,
                desired_replicas=spec.replicas,
                current_replicas=spec.replicas,
                min_replicas=ov.get("min_replicas"),
                max_replicas=ov.get("max_replicas"),
                metrics=tuple(apply_changes((), removed, targets)) if targets else None,
            )
        metrics = observed.metrics
        if metrics is not None and (targets or removed):
            metrics = tuple(apply_changes(metrics, removed, targets))
        return observed._replace(
            min_replicas=ov.get("min_replicas", observed.min_replicas),
            max_replicas=ov.get("max_replicas", observed.max_replicas),
            metrics=metrics,
        )

    # --- serialisation ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "raw": self.raw,
            "series": [[name, pod, ts, value] for (name, pod), (ts, value) in self.series.items()],
            "oom": self.oom,
            "pending_tick": self.pending_tick,
            "last_tick": self.last_tick,
            "last_ts": self.last_ts,
            "memory": self.memory,
            "overlay": self.overlay,
            "last_blocked": self.last_blocked,
            "recommender": self._recommender_snapshot(),
            **({"learned": self.learned} if self.learned else {}),
        }

    def _recommender_snapshot(self) -> dict[str, Any]:
        # The VPA histograms live as objects while the worker runs; they serialise on the way out.
        live = self.vpa_live
        hpa = self.hpa_live
        if live is None and hpa is None:
            return self.recommender
        out = dict(self.recommender)
        if live is not None:
            out["vpa"] = {c: s.to_dict() for c, s in sorted(live.items())}
        if hpa is not None:
            out["hpa"] = hpa.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WorkloadState:
        raw = dict(d.get("raw") or {})
        policy = raw.get("policy")
        if isinstance(policy, Mapping) and policy.get("type") == "policy":
            # A state saved when a workload had one policy event, not one per policy: the same
            # policy under its identity (a deletion was never kept).
            raw["policy"] = {_identity_of_raw(policy): policy}
        return cls(
            key=d["key"],
            raw=raw,
            series={(s[0], s[1]): (s[2], s[3]) for s in d.get("series") or []},
            oom=dict(d.get("oom") or {}),
            pending_tick=d.get("pending_tick"),
            last_tick=d.get("last_tick"),
            last_ts=d.get("last_ts"),
            memory=dict(d.get("memory") or {}),
            overlay=_plain(d.get("overlay") or {}),
            last_blocked=d.get("last_blocked"),
            recommender=dict(d.get("recommender") or {}),
            learned=_plain(d.get("learned") or {}),
        )


def _identity_of_raw(raw: Mapping[str, Any]) -> str:
    event = decode_event(raw)
    identity = event.identity if isinstance(event, PolicyEvent) else None
    if identity is None:
        raise TypeError(f"raw policy event without a manifest: {raw!r}")
    return identity


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
