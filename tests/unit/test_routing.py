"""streams/routing.py: where the worker sends each output, and what an applier only reports.

The worker's publisher and the applier read the same rule; these tests pin it on the three
layouts: shared topics, a cluster with its own actuator topic, a cluster with its own input topics.
"""

from __future__ import annotations

from typing import Any

from streams.routing import ACTUATOR, AUDIT, INPUT, Destination, Layout, applier_sources, route, status_only

SHARED = Layout("t.")
OWN = Layout("t.", actuator_clusters=("c1",), input_clusters=("c1",))


def _audit(type_: str, **data: Any) -> dict[str, Any]:
    return {"type": f"dev.tandem.{type_}.v1", "data": data}


def test_a_decision_goes_to_the_audit_and_its_clusters_actuator_topic() -> None:
    decision = _audit("decision", replicas=3)
    assert route(SHARED, "c1/shop/Deployment/web", "audit", decision) == (
        Destination(AUDIT, "t.audit"),
        Destination(ACTUATOR, "t.actuator"),
    )
    assert route(OWN, "c1/shop/Deployment/web", "audit", decision) == (
        Destination(AUDIT, "t.audit"),
        Destination(ACTUATOR, "t.actuator.c1"),
    )
    assert route(OWN, "c2/shop/Deployment/web", "audit", decision)[1] == Destination(ACTUATOR, "t.actuator")


def test_status_only_events_reach_an_actuator_topic_only_when_the_cluster_has_its_own() -> None:
    for ev in (_audit("blocked"), _audit("decision", dry_run=True)):
        assert status_only(ev)
        assert route(SHARED, "c1/shop/Deployment/web", "audit", ev) == (Destination(AUDIT, "t.audit"),)
        assert route(OWN, "c1/shop/Deployment/web", "audit", ev) == (
            Destination(AUDIT, "t.audit"),
            Destination(ACTUATOR, "t.actuator.c1"),
        )
        assert route(OWN, "c2/shop/Deployment/web", "audit", ev) == (Destination(AUDIT, "t.audit"),)
    assert not status_only(_audit("decision", dry_run=False))
    assert not status_only(_audit("decision"))
    assert not status_only("not an event")
    assert route(OWN, "c1/shop/Deployment/web", "audit", _audit("skipped")) == (Destination(AUDIT, "t.audit"),)


def test_own_recommendations_go_back_to_their_clusters_input_topic() -> None:
    rec = {"type": "hpa", "source": "tandem"}
    assert route(SHARED, "c1/shop/Deployment/web", "hpa", rec) == (Destination(INPUT, "t.hpa"),)
    assert route(OWN, "c1/shop/Deployment/web", "vpa", rec) == (Destination(INPUT, "t.vpa.c1"),)
    assert route(SHARED, "c1/shop/Deployment/web", "metric", rec) == ()


def test_an_applier_reads_the_audit_topic_unless_its_actuator_topic_is_its_own() -> None:
    assert applier_sources(SHARED, "c1") == ("t.actuator", "t.audit")
    assert applier_sources(OWN, "c1") == ("t.actuator.c1",)
    assert applier_sources(OWN, "c2") == ("t.actuator", "t.audit")
