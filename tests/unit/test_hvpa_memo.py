"""HVPA ``decide`` hands back the previous tick's outcome when its inputs repeat: never a different one.

``HvpaPolicy.decide`` keeps the last outcome that changed nothing with the inputs it was decided
from (``HvpaPolicy._inputs``: the event time only as the maintenance-window and stabilization
answers).  These tests drive a memoizing policy and a fresh computation (``_decide``, no memo) with
the same random ticks, crossing a maintenance window's edges, stabilization windows, OOM kills
and changing recommendations, and require the same outcome and the same memory on every tick; and
they replay the bundled example with every repeated tick computed again and compared.
"""

from __future__ import annotations

import copy
import io
import random
from pathlib import Path
from typing import Any

import pytest

from scaling.events import HpaEvent, VpaEvent, WorkloadEvent, WorkloadRef, decode_event
from scaling.outcome import Outcome, View
from scaling.policies import parse_policy
from scaling.policies.hvpa.policy import HvpaPolicy
from scaling.settings import Settings
from streams.inputs import load_manifests
from streams.replay import replay

ROOT = Path(__file__).resolve().parents[2]
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
REF = WorkloadRef(**WL)
T0 = 1_762_249_500.0  # 2025-11-04T09:45:00Z: the ticks cross the 10:00-10:10 window below


def released(weight: int, *, window: bool) -> dict[str, Any]:
    def scale(mode: str = "Auto") -> dict[str, Any]:
        return {
            "updatePolicy": {"updateMode": mode},
            "stabilizationDuration": "3m",
            "minChange": {"cpu": {"value": "100m", "percentage": 30}, "memory": {"value": "100M", "percentage": 30}},
        }

    spec: dict[str, Any] = {
        "targetRef": {"kind": "Deployment", "name": "web"},
        "hpa": {
            "deploy": True,
            "scaleUp": scale(),
            "scaleDown": scale("MaintenanceWindow" if window else "Auto"),
            "template": {"spec": {"minReplicas": 1, "maxReplicas": 6}},
        },
        "vpa": {"deploy": True, "scaleUp": scale("MaintenanceWindow" if window else "Auto"), "scaleDown": scale()},
        "weightBasedScalingIntervals": [
            {"vpaWeight": weight, "startReplicaCount": 1, "lastReplicaCount": 3},
            {"vpaWeight": 100 - weight, "startReplicaCount": 4, "lastReplicaCount": 6},
        ],
    }
    if window:
        spec["maintenanceTimeWindow"] = {"begin": "100000+0000", "end": "101000+0000"}
    return _manifest(spec, {"hpa-controller": "hvpa"})


def seed(mode: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"kind": "Deployment", "name": "web"},
        "mode": mode,
        "scaleUpStabilizationWindow": "2m",
        "scaleDownStabilizationWindow": "5m",
        "hpaTemplate": {"minReplicas": 1, "maxReplicas": 6},
        "minCpuChange": {"value": "100m"},
        "minMemChange": {"value": "100M"},
        "weightBasedScalingIntervals": [{"vpaWeight": 0.5, "startReplicaCount": 1, "lastReplicaCount": 6}],
    }
    return _manifest(spec, {})


def _manifest(spec: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {**annotations, "tandem.dev/cluster": "c1"}},
        "spec": spec,
    }


MANIFESTS = [
    pytest.param(released(40, window=True), id="released-window"),
    pytest.param(released(0, window=False), id="released-weight-0"),
    *(pytest.param(seed(mode), id=f"seed-{mode}") for mode in ("WeightBased", "HpaPreferred", "Mixed")),
]


def _workload(ts: float, replicas: int, cpu: int, mem: int) -> WorkloadEvent:
    raw = {
        "type": "workload",
        "ts": ts,
        "workload": WL,
        "replicas": replicas,
        "containers": {"web": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}M"}, "limits": {"memory": "4G"}}},
    }
    event = decode_event(raw)
    assert isinstance(event, WorkloadEvent)
    return event


def _hpa(ts: float, desired: int, limited: bool) -> HpaEvent:
    conditions = [{"type": "ScalingLimited", "status": "True" if limited else "False"}]
    raw = {"type": "hpa", "ts": ts, "workload": WL, "desired_replicas": desired, "conditions": conditions}
    event = decode_event(raw)
    assert isinstance(event, HpaEvent)
    return event


def _vpa(ts: float, cpu: int, mem: int, provided: bool) -> VpaEvent:
    raw = {
        "type": "vpa",
        "ts": ts,
        "workload": WL,
        "containers": {"web": {"target": {"cpu": f"{cpu}m", "memory": f"{mem}M"}}},
        "conditions": [{"type": "RecommendationProvided", "status": "True" if provided else "False"}],
    }
    event = decode_event(raw)
    assert isinstance(event, VpaEvent)
    return event


def _changes(outcome: Outcome) -> bool:
    return outcome.replicas is not None or bool(outcome.requests) or bool(outcome.limits)


@pytest.mark.parametrize("manifest", MANIFESTS)
@pytest.mark.parametrize("seed_", [1, 2, 3])
def test_a_repeated_tick_gets_the_outcome_a_fresh_decide_computes(manifest: dict[str, Any], seed_: int) -> None:
    rng = random.Random(seed_)
    memo = parse_policy(manifest, REF)
    fresh = parse_policy(manifest, REF)
    assert isinstance(memo, HvpaPolicy) and isinstance(fresh, HvpaPolicy)
    memo_memory: dict[str, Any] = {}
    fresh_memory: dict[str, Any] = {}
    tick = T0
    replicas, cpu, mem = 3, 500, 800
    spec = _workload(tick - 60, replicas, cpu, mem)
    hpa: HpaEvent | None = _hpa(tick - 30, 3, False)
    vpa: VpaEvent | None = _vpa(tick - 30, 500, 800, True)
    oom: dict[str, float] = {}
    hits = 0
    previous: Outcome | None = None
    for _ in range(1500):
        tick += rng.choice((15.0, 15.0, 15.0, 15.0, 45.0, 300.0))
        roll = rng.random()
        if roll < 0.08:
            hpa = _hpa(tick - 1, rng.randint(1, 7), rng.random() < 0.5)
        elif roll < 0.14:
            vpa = _vpa(tick - 1, rng.choice((200, 500, 900, 1500)), rng.choice((300, 800, 2000)), rng.random() < 0.9)
        elif roll < 0.16:
            oom = {"web": tick - 2}
        elif roll < 0.18:
            spec = _workload(tick - 1, rng.randint(1, 6), rng.choice((300, 500, 900)), rng.choice((500, 800)))
        elif roll < 0.19:
            hpa, vpa = (None, vpa) if rng.random() < 0.5 else (hpa, None)
        elif roll < 0.20:
            # The same values again in a new event: new objects compare by value.
            hpa = None if hpa is None else _hpa(hpa.ts, hpa.desired_replicas, rng.random() < 0.5)
        view = View(tick, REF, spec, hpa, vpa, {}, dict(oom), {})
        got = memo.decide(view, memo_memory)
        want = fresh._decide(view, fresh_memory)
        assert got == want, tick
        assert memo_memory == fresh_memory, tick
        if got is previous:
            hits += 1
        previous = got
        if _changes(want):
            # What the loop assumes applied (reconcile: state.assume_applied), as a new spec.
            replicas = want.replicas if want.replicas is not None else spec.replicas
            req = want.requests.get("web", {})
            cpu = req.get("cpu", spec.containers["web"].requests["cpu"].milli)
            mem = req.get("memory", spec.containers["web"].requests["memory"].milli) // 1_000_000_000
            spec = _workload(tick, replicas, cpu, mem)
    assert hits > 300  # the memo was exercised, not only missed


def test_the_example_replays_the_same_with_every_repeated_tick_decided_again(monkeypatch: pytest.MonkeyPatch) -> None:
    hits = 0

    def checked(self: HvpaPolicy, view: View, memory: dict[str, Any]) -> Outcome:
        nonlocal hits
        before = copy.deepcopy(memory)
        out = memoized(self, view, memory)
        if self._last is not None and out is self._last[1]:
            hits += 1
            again = copy.deepcopy(before)
            assert HvpaPolicy._decide(self, view, again) == out
            assert again == memory == before
        return out

    memoized = HvpaPolicy.decide
    monkeypatch.setattr(HvpaPolicy, "decide", checked)
    out = io.BytesIO()
    policies = load_manifests(str(ROOT / "examples" / "policies.yaml"))
    replay([str(ROOT / "examples" / "stream.jsonl.gz")], out, settings=Settings(), policies=policies, err=io.StringIO())
    assert hits > 10_000
    assert out.getvalue().count(b"\n") == 758  # 160 decisions and 598 blocked reports, as without the memo
