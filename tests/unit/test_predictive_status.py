"""``spec.predictive`` where users look: ``status.predictive`` on every kind (folded once for all
kinds, scaling/policies/status.py via edge/status.py), the audit's sentence for a tick it did not
pre-scale, and the one delegation both wrappers share (scaling/policies/delegating.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.holt_winters import HoltWinters
from edge.status import Observation, fold_status
from scaling.cloudevents import APPLIED
from scaling.events import WorkloadRef
from scaling.outcome import Outcome, View
from scaling.policies.bounds import Bounds
from scaling.policies.delegating import DelegatingPolicy
from scaling.policies.predictive import Predictive, PredictiveSpec
from scaling.policies.templates import HpaTemplate
from schemas.words import describe_inputs

TICK = 1_762_851_540.0  # 2025-11-11T08:59:00Z
TORTOISE = {
    "apiVersion": "autoscaling.mercari.com/v1beta3",
    "kind": "Tortoise",
    "metadata": {"name": "web"},
    "spec": {"predictive": {}},
}
CUSTOM = {"apiVersion": "autoscaling.tandem.dev/v1alpha1", "kind": "CustomHpa", "metadata": {"name": "web"}}


def decision(tick: float, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "workload": {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"},
        "tick": tick,
        "policy": {"kind": kind, "name": "web", "mode": "Auto"},
        "dry_run": False,
        "blocked": [],
        "reasons": [],
        "inputs": {},
        **extra,
    }


PRESCALED = decision(
    TICK,
    "CustomHpa",
    replicas={"from": 2, "to": 4},
    reasons=[
        "custom-hpa: factor 1/1 = 1, clamped 1 (down)",
        "pre-scaled to 4 for the forecast of 10.0 at 09:00:15 (same time of day, 1 day, recent error 0 %)",
    ],
    inputs={
        "replicas": 2,
        "forecast": {
            "load": 10.0,
            "at": TICK + 75,
            "horizon": 75.0,
            "basis": "daily",
            "periods": 1,
            "error_percent": 0.0,
            "reactive_replicas": 2,
            "versus_naive": None,
            "history_hours": 32.9,
            "replicas": 4,
        },
    },
)
HELD = decision(
    TICK + 3600,
    "CustomHpa",
    replicas={"from": 4, "to": 3},
    inputs={
        "replicas": 4,
        "predictive": {
            "reason": "ErrorTooLarge",
            "message": "recent error 31.2 % is above maxErrorPercent 25 %",
            "history_hours": 33.9,
            "error_percent": 31.2,
            "versus_naive": 0.8,
        },
    },
)


def applied() -> dict[str, Any]:
    return {"type": APPLIED, "data": {"patched": ["replicas"], "dry_run": False}}


def test_the_status_shows_the_last_pre_scale_and_then_why_it_does_not_act() -> None:
    status = fold_status(CUSTOM, [Observation("decision", PRESCALED, applied())])
    assert status is not None
    assert status["predictive"] == {
        "lastPreScale": {
            "time": "2025-11-11T08:59:00Z",
            "replicas": 4,
            "forecast": "10",
            "forecastTime": "2025-11-11T09:00:15Z",
        },
        "reason": "PreScaled",
        "message": "pre-scaled to 4 for the forecast of 10.0 at 09:00:15 (same time of day, 1 day, recent error 0 %)",
        "historyHours": "32.9",
        "recentErrorPercent": "0",
        "lastUpdateTime": "2025-11-11T08:59:00Z",
    }
    later = fold_status({**CUSTOM, "status": status}, [Observation("decision", HELD, applied())])
    assert later is not None
    assert later["predictive"] == {
        "lastPreScale": status["predictive"]["lastPreScale"],  # kept
        "reason": "ErrorTooLarge",
        "message": "recent error 31.2 % is above maxErrorPercent 25 %",
        "historyHours": "33.9",
        "recentErrorPercent": "31.2",
        "versusNaive": "0.8",
        "lastUpdateTime": "2025-11-11T09:59:00Z",
    }
    # Older than what the status shows: nothing goes back in time; the same again: no change.
    assert fold_status({**CUSTOM, "status": later}, [Observation("decision", PRESCALED, applied())]) == later
    assert fold_status({**CUSTOM, "status": later}, [Observation("decision", HELD, applied())]) == later


def test_every_kind_gets_the_same_part_and_a_policy_without_predictive_none() -> None:
    held = {**HELD, "policy": {"kind": "Tortoise", "name": "web", "mode": "Auto"}}
    status = fold_status(TORTOISE, [Observation("decision", held, applied())])
    assert status is not None and status["predictive"]["reason"] == "ErrorTooLarge"
    plain = decision(TICK, "CustomHpa", replicas={"from": 2, "to": 3}, inputs={"replicas": 2})
    status = fold_status(CUSTOM, [Observation("decision", plain, applied())])
    assert status is not None and "predictive" not in status


def test_audit_explain_says_why_a_tick_was_not_pre_scaled() -> None:
    assert describe_inputs(HELD["inputs"]) == [
        "4 replicas running",
        "a forecaster that did not pre-scale (recent error 31.2 % is above maxErrorPercent 25 %)",
    ]


class Toy:
    """A kind: every member of the Policy protocol answers something of its own."""

    kind = "Toy"
    name = "web"
    workload = WorkloadRef("c", "ns", "Deployment", "web")

    def decide(self, view: View, memory: dict[str, Any]) -> Outcome:
        memory["seen"] = view.tick
        return Outcome(replicas=3)

    def bounds(self) -> Bounds:
        return Bounds("Toy", "web", 1, 7)

    def hpa_template(self, memory: Mapping[str, Any]) -> HpaTemplate | None:
        return HpaTemplate((), None, 1, 7)

    def vpa_template(self) -> None:
        return None


def test_both_wrappers_are_one_delegation_that_forwards_all_but_decide() -> None:
    toy = Toy()
    for wrapper in (DelegatingPolicy(toy), Predictive(toy, PredictiveSpec()), HoltWinters(toy)):
        assert isinstance(wrapper, DelegatingPolicy)
        assert (wrapper.kind, wrapper.name, wrapper.workload) == ("Toy", "web", toy.workload)
        assert wrapper.bounds() == Bounds("Toy", "web", 1, 7)
        assert wrapper.hpa_template({}) == HpaTemplate((), None, 1, 7)
        assert wrapper.vpa_template() is None
        assert wrapper.inner is toy
