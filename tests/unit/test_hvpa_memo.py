"""HVPA ``decide`` hands back the previous tick's outcome when its inputs repeat: never a different one.

``HvpaPolicy.decide`` keeps the last outcome that changed nothing with the view it was decided
from, and compares the next tick's view with it (the event time only as the maintenance-window
and stabilization answers of ``HvpaPolicy._answers``).  These tests drive a memoizing policy and
a fresh computation (``_decide``, no memo) with the same ticks, random ones crossing a
maintenance window's edges, stabilization windows, OOM kills and changing recommendations, and
require the same outcome and the same memory on every tick; and they replay the bundled example
with every repeated tick computed again and compared.  Weakening any one comparison of the memo
(the VPA's targets or conditions, the HPA's desired or max replicas or whether its conditions say
ScalingLimited, the spec, any of the time answers) makes one of them fail; a condition HVPA does
not read (AbleToScale's reason) changes on ticks that still hit.
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


def _hpa(
    ts: float, desired: int, limited: bool, max_replicas: int | None = None, reason: str = "ReadyForNewScale"
) -> HpaEvent:
    conditions = [
        {"type": "ScalingLimited", "status": "True" if limited else "False"},
        {"type": "AbleToScale", "status": "True", "reason": reason},  # not read by HVPA
    ]
    raw: dict[str, Any] = {"type": "hpa", "ts": ts, "workload": WL, "desired_replicas": desired}
    raw["conditions"] = conditions
    if max_replicas is not None:
        raw["max_replicas"] = max_replicas
    event = decode_event(raw)
    assert isinstance(event, HpaEvent)
    return event


def _vpa(ts: float, cpu: int, mem: int, provided: bool, lower_cpu: int | None = None) -> VpaEvent:
    recommendation: dict[str, Any] = {"target": {"cpu": f"{cpu}m", "memory": f"{mem}M"}}
    if lower_cpu is not None:
        recommendation["lower_bound"] = {"cpu": f"{lower_cpu}m"}
    raw = {
        "type": "vpa",
        "ts": ts,
        "workload": WL,
        "containers": {"web": recommendation},
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
            hpa = _hpa(tick - 1, rng.randint(1, 7), rng.random() < 0.5, rng.choice((None, None, 4, 7)))
        elif roll < 0.14:
            vpa = _vpa(tick - 1, rng.choice((200, 500, 900, 1500)), rng.choice((300, 800, 2000)), rng.random() < 0.9)
        elif roll < 0.16:
            oom = {"web": tick - 2}
        elif roll < 0.18:
            spec = _workload(tick - 1, rng.randint(1, 6), rng.choice((300, 500, 900)), rng.choice((500, 800)))
        elif roll < 0.19:
            hpa, vpa = (None, vpa) if rng.random() < 0.5 else (hpa, None)
        elif roll < 0.20 and hpa is not None:
            # The same values again in a new event: new objects compare by value.  Or only the
            # HPA's maxReplicas moves (HVPA 2.2 reads it: vertical scale-up once desired reaches it).
            # Or only a condition HVPA does not read (a new AbleToScale reason): still a hit.
            limited = hpa.conditions[0]["status"] == "True"
            roll = rng.random()
            if roll < 0.4:
                hpa = _hpa(hpa.ts, hpa.desired_replicas, rng.random() < 0.5, hpa.max_replicas)
            elif roll < 0.7:
                hpa = _hpa(hpa.ts, hpa.desired_replicas, limited, rng.choice((None, 4, 7)))
            else:
                reason = rng.choice(("ReadyForNewScale", "ScaleDownStabilized", "SucceededRescale"))
                hpa = _hpa(hpa.ts, hpa.desired_replicas, limited, hpa.max_replicas, reason)
        elif roll < 0.22 and vpa is not None:
            # The same targets in a new event, with other bounds (HVPA reads the targets only)
            # or other conditions.
            target = vpa.containers["web"].target
            cpu_m, mem_m = target["cpu"].milli, target["memory"].milli // 1_000_000_000
            provided = vpa.conditions is not None and vpa.conditions[0]["status"] == "True"
            if rng.random() < 0.5:
                provided = not provided
            vpa = _vpa(vpa.ts, cpu_m, mem_m, provided, rng.choice((None, 100, 150)))
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


def test_a_tick_entering_the_maintenance_window_is_decided_again() -> None:
    """Nothing but the time moves, across the window's start: the blocked scale-up must go."""
    memo = parse_policy(released(40, window=True), REF)
    fresh = parse_policy(released(40, window=True), REF)
    assert isinstance(memo, HvpaPolicy) and isinstance(fresh, HvpaPolicy)
    memo_memory: dict[str, Any] = {}
    fresh_memory: dict[str, Any] = {}
    spec = _workload(T0 - 600, 3, 500, 800)
    hpa = _hpa(T0 - 600, 3, True, 3)  # at its max and limited: VPA may scale up (HVPA 2.2)
    vpa = _vpa(T0 - 600, 1500, 2000, True)
    decided = []
    for i in range(80):  # 09:45 to 10:04:45, a tick every 15 s
        view = View(T0 + 15.0 * i, REF, spec, hpa, vpa, {}, {}, {})
        got = memo.decide(view, memo_memory)
        assert got == fresh._decide(view, fresh_memory), view.tick
        assert memo_memory == fresh_memory, view.tick
        decided.append(bool(got.requests))
    assert decided.index(True) == 60  # 10:00:00: the window includes its first second


def test_after_many_misses_the_memo_pauses_then_hits_again() -> None:
    """Targets that move every tick (bench_tick's recorded case): the memo stops trying for a while
    (misses cost more than they save), decides the same meanwhile, and hits again once they settle."""
    memo = parse_policy(released(0, window=False), REF)
    fresh = parse_policy(released(0, window=False), REF)
    assert isinstance(memo, HvpaPolicy) and isinstance(fresh, HvpaPolicy)
    memo_memory: dict[str, Any] = {}
    fresh_memory: dict[str, Any] = {}
    spec = _workload(T0 - 600, 3, 500, 800)
    hpa = _hpa(T0 - 600, 3, False)
    tried = 0
    answers = memo._answers

    def counted(view: View, last_scale: float | None) -> tuple[Any, ...]:
        nonlocal tried
        tried += 1  # asked once per outcome kept for the next tick
        return answers(view, last_scale)

    memo._answers = counted  # type: ignore[method-assign]
    hits = []
    previous: Outcome | None = None
    for i in range(300):
        if i == 150:
            assert tried < 20  # not 150: kept 8 times, then once after each pause of 8, 16, 32, 64
        if i < 150 or i == 200:
            vpa = _vpa(T0 + 15.0 * i - 1, 500 + 10 * (i % 7), 800, True)  # moves, unchanged by weight 0
        view = View(T0 + 15.0 * i, REF, spec, hpa, vpa, {}, {}, {})
        got = memo.decide(view, memo_memory)
        assert got == fresh._decide(view, fresh_memory), i
        assert memo_memory == fresh_memory, i
        hits.append(got is previous)
        previous = got
    assert not any(hits[:150])
    assert all(hits[150 + 66 : 200]) and all(hits[202:])  # at most 64 ticks paused, then one stored


def test_the_example_replays_the_same_with_every_repeated_tick_decided_again(monkeypatch: pytest.MonkeyPatch) -> None:
    hits = 0

    def checked(self: HvpaPolicy, view: View, memory: dict[str, Any]) -> Outcome:
        nonlocal hits
        before = copy.deepcopy(memory)
        out = memoized(self, view, memory)
        if self._last is not None and out is self._last.outcome:
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
