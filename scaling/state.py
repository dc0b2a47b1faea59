"""Per-workload state: a plain value of bounded size (ARCHITECTURE invariant 4).

It holds the latest input of each kind (as the validated JSON it arrived as, so that it
serialises without a second encoder), the latest custom-metric sample per series and pod, the
latest OOM kill per container, the tick bookkeeping of CONTRACT.md section 6, the policy's
*memory* (what HVPA keeps in its status, Nanit in process memory...), and the values tandem
assumes applied since its last decision.  ``to_dict``/``from_dict`` round-trip it through
JSON-safe types for Faust tables and changelogs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .events import (
    ContainerResources,
    HpaEvent,
    PolicyEvent,
    Qty,
    SeriesSample,
    VpaEvent,
    WorkloadEvent,
    decode_event,
)
from .quantity import format_quantity

__all__ = ["MAX_SERIES", "WorkloadState"]

#: Bound on the (series, pod) pairs kept per workload; the oldest are dropped first.
MAX_SERIES = 512


@dataclass(slots=True)
class WorkloadState:
    key: str
    raw: dict[str, Any] = field(default_factory=dict)  # type -> latest raw event (JSON value)
    series: dict[tuple[str, str | None], tuple[float, float]] = field(default_factory=dict)
    oom: dict[str, float] = field(default_factory=dict)
    pending_tick: float | None = None
    last_tick: float | None = None
    last_ts: float | None = None
    memory: dict[str, Any] = field(default_factory=dict)
    #: Values tandem decided at ``overlay["tick"]`` and assumes applied until the next workload event.
    overlay: dict[str, Any] = field(default_factory=dict)
    last_blocked: str | None = None
    #: Own recommenders' state (HPA history, VPA histograms), owned by ``scaling.recommend``.
    recommender: dict[str, Any] = field(default_factory=dict)
    # typed caches, rebuilt from ``raw`` on load; never serialised
    _typed: dict[str, Any] = field(default_factory=dict)

    # --- inputs ---------------------------------------------------------------------------

    def typed(self, kind: str) -> Any:
        if kind not in self._typed and kind in self.raw and self.raw[kind] is not None:
            self._typed[kind] = decode_event(self.raw[kind])
        return self._typed.get(kind)

    def remember(self, raw: Mapping[str, Any], event: WorkloadEvent | HpaEvent | VpaEvent | PolicyEvent) -> None:
        self.raw[event.type] = dict(raw)
        self._typed[event.type] = event
        if event.type == "workload" and self.overlay and event.ts > self.overlay.get("tick", 0):
            self.overlay = {}  # the cluster has spoken: its spec replaces what tandem assumed

    def forget(self, kind: str) -> None:
        self.raw.pop(kind, None)
        self._typed.pop(kind, None)

    def note_series(self, ts: float, sample: SeriesSample) -> None:
        k = (sample.series, sample.pod)
        self.series.pop(k, None)
        self.series[k] = (ts, sample.value)
        while len(self.series) > MAX_SERIES:
            del self.series[next(iter(self.series))]

    @property
    def spec(self) -> WorkloadEvent | None:
        """The workload as tandem believes it is now: observed spec plus assumed-applied changes."""
        ev: WorkloadEvent | None = self.typed("workload")
        if ev is None or not self.overlay:
            return ev
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
        return replace(ev, replicas=replicas, containers=containers)

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
        }

    def _recommender_snapshot(self) -> dict[str, Any]:
        # The VPA histograms live as objects while the worker runs; they serialise on the way out.
        live = self._typed.get("vpa_live")
        hpa = self._typed.get("hpa_live")
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
        return cls(
            key=d["key"],
            raw=dict(d.get("raw") or {}),
            series={(s[0], s[1]): (s[2], s[3]) for s in d.get("series") or []},
            oom=dict(d.get("oom") or {}),
            pending_tick=d.get("pending_tick"),
            last_tick=d.get("last_tick"),
            last_ts=d.get("last_ts"),
            memory=dict(d.get("memory") or {}),
            overlay=_plain(d.get("overlay") or {}),
            last_blocked=d.get("last_blocked"),
            recommender=dict(d.get("recommender") or {}),
        )


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
