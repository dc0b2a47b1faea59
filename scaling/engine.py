"""An in-process engine: many workloads' states and the reconcile loop, for embedded drivers.

``tandem replay`` (and later ``tandem simulate``) feed it events in order; the Faust worker does
not use it (it keeps states in tables) but calls the same ``ingest``/``flush``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .events import Event, PolicyEvent, WorkloadRef, decode_event
from .policies import parse_policy, policy_target
from .reconcile import Emitted, flush, ingest
from .settings import Settings
from .state import WorkloadState

__all__ = ["Engine", "policy_event"]


def policy_event(manifest: Mapping[str, Any], cluster: str, ts: float = 0.0) -> dict[str, Any]:
    """A ``policy`` event for a manifest given on the command line (``--policy FILE``)."""
    ref = policy_target(manifest, cluster)
    parse_policy(manifest, ref)  # validate now: a bad policy file is the user's first error
    return {"type": "policy", "ts": ts, "workload": ref.as_dict(), "policy": dict(manifest)}


@dataclass
class Engine:
    settings: Settings = field(default_factory=Settings)
    #: Policies from ``--policy`` files, by workload key and policy identity: in force before the
    #: first event (two for one workload: neither acts, as two policy events would).
    default_policies: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    states: dict[str, WorkloadState] = field(default_factory=dict)

    def add_policy(self, manifest: Mapping[str, Any]) -> WorkloadRef:
        ev = policy_event(manifest, self.settings.cluster)
        ref = WorkloadRef(**ev["workload"])
        event = decode_event(ev)
        assert isinstance(event, PolicyEvent) and event.identity is not None
        self.default_policies.setdefault(ref.key, {})[event.identity] = ev
        return ref

    def state_for(self, key: str) -> WorkloadState:
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = WorkloadState(key)
            default = self.default_policies.get(key)
            if default is not None:
                st.raw["policy"] = dict(default)
        return st

    def process(self, raw: Mapping[str, Any], event: Event | None = None) -> list[Emitted]:
        """Decode (unless given) and ingest one event.  Raises :class:`InvalidEvent` for bad input."""
        if event is None:
            event = decode_event(raw)
        key = event.workload.key
        state = self.states.get(key)  # state_for's common case, without its call
        if state is None:
            state = self.state_for(key)
        return ingest(state, event, raw, self.settings)

    def flush(self) -> list[Emitted]:
        out: list[Emitted] = []
        for key in sorted(self.states):
            out.extend(flush(self.states[key], self.settings))
        return out

    def run(self, events: Iterable[Mapping[str, Any]]) -> list[Emitted]:
        """Process already ordered raw events and flush; bad events raise."""
        out: list[Emitted] = []
        for raw in events:
            out.extend(self.process(raw))
        out.extend(self.flush())
        return out
