"""The state's HPA overlay: a decision's HPA changes are what the next ticks see until an ``hpa``
event newer than the decision says what the HPA is (the same mechanism as the workload overlay,
which a newer ``workload`` event ends)."""

from __future__ import annotations

import json
from typing import Any

from scaling.events import decode_event
from scaling.state import WorkloadState
from tests.replaying import ev


def cr(container: str, resource: str, target: int) -> dict[str, Any]:
    return {
        "type": "ContainerResource",
        "containerResource": {
            "name": resource,
            "container": container,
            "target": {"type": "Utilization", "averageUtilization": target},
        },
    }


EXTERNAL = {"type": "External", "external": {"metric": {"name": "q-exclude-metric"}, "target": {"type": "Value"}}}
DECISION = {
    "min_replicas": {"from": 1, "to": 5},
    "target_utilization": {"app/cpu": {"from": 50, "to": 75}, "app/memory": {"from": None, "to": 70}},
    "metrics": {"removed": [{"type": "External", "name": "q-exclude-metric"}]},
}


def state_with(*events: dict[str, Any]) -> WorkloadState:
    state = WorkloadState("c1/shop/Deployment/web")
    for raw in events:
        state.remember(raw, decode_event(raw))  # type: ignore[arg-type]
    return state


def workload(ts: float) -> dict[str, Any]:
    return ev("workload", ts, replicas=4, containers={"app": {"requests": {"cpu": "1", "memory": "1Gi"}}})


def hpa(ts: float, min_r: int = 1) -> dict[str, Any]:
    return ev(
        "hpa", ts, desired_replicas=4, min_replicas=min_r, max_replicas=10, metrics=[cr("app", "cpu", 50), EXTERNAL]
    )


def test_the_next_ticks_see_the_decided_hpa_fields() -> None:
    state = state_with(workload(0), hpa(0))
    state.assume_hpa(60, DECISION)
    seen = state.hpa_view(state.hpa_event, state.spec)  # type: ignore[arg-type]
    assert seen is not None
    assert (seen.ts, seen.min_replicas, seen.max_replicas) == (0, 5, 10)
    assert [dict(m) for m in seen.metrics or ()] == [cr("app", "cpu", 75), cr("app", "memory", 70)]


def test_a_workload_event_keeps_the_hpa_overlay_and_a_newer_hpa_event_ends_it() -> None:
    state = state_with(workload(0), hpa(0))
    state.assume_applied(60, 5, {}, {})
    state.assume_hpa(60, DECISION)
    state.remember(workload(90), decode_event(workload(90)))  # type: ignore[arg-type]
    assert state.spec is not None and state.spec.replicas == 4  # the workload overlay is gone
    assert state.hpa_view(state.hpa_event, state.spec).min_replicas == 5  # type: ignore[union-attr]
    state.remember(hpa(60, 2), decode_event(hpa(60, 2)))  # type: ignore[arg-type]
    assert state.hpa_view(state.hpa_event, state.spec).min_replicas == 5  # type: ignore[union-attr]
    state.remember(hpa(61, 2), decode_event(hpa(61, 2)))  # type: ignore[arg-type]
    assert "hpa" not in state.overlay
    assert state.hpa_view(state.hpa_event, state.spec).min_replicas == 2  # type: ignore[union-attr]


def test_an_hpa_tandem_created_is_the_decided_fields_alone() -> None:
    state = state_with(workload(0))
    state.assume_hpa(
        60,
        {
            "min_replicas": {"from": None, "to": 3},
            "max_replicas": {"from": None, "to": 100},
            "target_utilization": {"app/cpu": {"from": None, "to": 70}},
        },
    )
    seen = state.hpa_view(None, state.spec)  # type: ignore[arg-type]
    assert seen is not None
    assert (seen.ts, seen.min_replicas, seen.max_replicas, seen.conditions) == (60, 3, 100, ())
    assert [dict(m) for m in seen.metrics or ()] == [cr("app", "cpu", 70)]


def test_a_later_decision_that_adds_a_removed_metric_back_wins() -> None:
    state = state_with(workload(0), hpa(0))
    state.assume_hpa(60, {"metrics": {"removed": [{"type": "ContainerResource", "container": "app", "name": "cpu"}]}})
    assert [m["type"] for m in state.hpa_view(state.hpa_event, state.spec).metrics or ()] == ["External"]  # type: ignore[union-attr]
    state.assume_hpa(120, {"target_utilization": {"app/cpu": {"from": None, "to": 70}}})
    assert state.overlay["hpa"]["removed"] == []
    seen = state.hpa_view(state.hpa_event, state.spec)  # type: ignore[arg-type]
    assert [dict(m) for m in seen.metrics or ()] == [cr("app", "cpu", 70), EXTERNAL]  # type: ignore[union-attr]


def test_the_hpa_overlay_round_trips_through_json() -> None:
    state = state_with(workload(0), hpa(0))
    state.assume_hpa(60, DECISION)
    back = WorkloadState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back.overlay == state.overlay
    assert back.hpa_view(back.hpa_event, back.spec) == state.hpa_view(state.hpa_event, state.spec)  # type: ignore[arg-type]
