"""``tandem collect`` and a policy object tandem's parser refuses, on the real kube-apiserver and
the real Kafka broker (docs/edge.md, "Invalid policies").

The collector runs as the ``tandem-collector`` service account of deploy/rbac/collector.yaml
(impersonation), so the manifest's ``events`` rule (create, get, patch) is exercised too.  The CRD's
schema refuses an unknown field and the out-of-range values its bounds declare (a duration that is
no duration, ``minReplicas`` above ``maxReplicas``: tests/integration/test_crd_bounds_kube.py), so
the objects here carry what the schema allows and only tandem's parser refuses: a fractional
released ``vpaWeight``, then an interval whose start is above its end.  Each refused version gets
one Warning Event ``InvalidPolicy`` on the object, naming the field, and one dead letter; a relist
of the same version adds neither.
"""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pytest

from edge.kube import request
from edge.reporter import EVENTS
from tests.fixtures.kafka import wait_for
from tests.integration.test_applier_kube import CLUSTER, create, hvpa, read
from tests.integration.test_collector_kube import HVPA_V1, Running, cluster_setup, read_topic, running

__all__ = ["cluster_setup", "running"]  # the fixtures, imported for this module's tests

pytestmark = [pytest.mark.kube, pytest.mark.kafka]

WEIGHT = (
    "field 'spec.weightBasedScalingIntervals[0].vpaWeight': 40.5 is not an integer percentage (0-100); "
    "0-1 fractions are the seed form"
)
INTERVAL = "field 'spec.weightBasedScalingIntervals[0]': startReplicaCount 5 is above lastReplicaCount 2"
LEAD = "not a valid policy, not used (the workload keeps its last valid policy, if any): "


def warnings_on(admin: Any, ns: str, name: str) -> list[dict[str, Any]]:
    doc = request(
        admin,
        "GET",
        EVENTS.path(ns),
        query={"fieldSelector": f"involvedObject.kind=Hvpa,involvedObject.name={name},reason=InvalidPolicy"},
    )
    # In the order of the versions they refuse: two Events created in one second would otherwise
    # be ordered by their messages (seen in CI, the second version's Warning listed first).
    return sorted(
        doc["items"],
        key=lambda e: (int(e["involvedObject"].get("resourceVersion") or 0), e["metadata"]["creationTimestamp"]),
    )


def dead_letters(r: Running) -> list[dict[str, Any]]:
    return read_topic(r.settings.bootstrap, r.settings.prefix + "deadletter")


def relist(r: Running, api: Any) -> None:
    """Stop the collector and run it again on the same state: every resource is listed anew, as
    after a ``410 Gone``, and the collector remembers what it refused."""
    r.stop_collecting()
    lists = dict(r.state.lists)
    r.stop = threading.Event()
    r.collector = threading.Thread(target=r._collect, args=(api,), daemon=True)
    r.collector.start()
    r.wait(lambda r: r.state.lists.get("hvpas.autoscaling.k8s.io", 0) > lists["hvpas.autoscaling.k8s.io"], "relist")


def test_an_invalid_policy_gets_one_warning_event_per_version_and_a_dead_letter(
    cluster_setup: dict[str, Any], kube_namespace: str, running: list[Running]
) -> None:
    admin, ns, api = cluster_setup["admin"], kube_namespace, cluster_setup["collector_api"]
    bad = hvpa("web", "web")
    bad["spec"]["weightBasedScalingIntervals"][0]["vpaWeight"] = 40.5
    created = create(admin, HVPA_V1, ns, bad)
    r = Running(api, cluster_setup["broker"], ns)
    running.append(r)

    [warning] = wait_for(lambda: warnings_on(admin, ns, "web") or None, 30, message="the InvalidPolicy Warning")
    meta = created["metadata"]
    assert warning["involvedObject"] == {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "name": "web",
        "namespace": ns,
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
    }
    assert (warning["type"], warning["reason"], warning["count"]) == ("Warning", "InvalidPolicy", 1)
    assert warning["message"] == LEAD + WEIGHT
    assert warning["source"] == {"component": "tandem-collector"}
    assert warning["reportingComponent"] == "tandem-collector"
    assert warning["reportingInstance"] == f"tandem-collector-{CLUSTER}"

    # The refused policy is on the dead-letter topic, in the worker's record shape; not on the policies topic.
    [letter] = wait_for(lambda: dead_letters(r) or None, 30, message="the dead letter")
    assert letter["topic"] == r.settings.prefix + "policies"
    assert (letter["partition"], letter["offset"]) == (None, None)
    assert letter["key"] == f"{CLUSTER}/{ns}/Deployment/web"
    assert letter["error"] == WEIGHT.replace("field 'spec.", "field 'policy.spec.")
    event = orjson.loads(letter["value"])
    assert (event["type"], event["workload"]["name"]) == ("policy", "web")
    assert event["policy"]["spec"]["weightBasedScalingIntervals"][0]["vpaWeight"] == 40.5
    assert r.events("policy") == []

    # A relist shows the same version again: no new Event, no count + 1, no second dead letter.
    relist(r, api)
    # A new version that is still invalid (another refusal): a second Event, reported after anything
    # the relist could have queued (the collector reports one refusal at a time, in order).
    changed = read(admin, HVPA_V1, ns, "web")
    changed["spec"]["weightBasedScalingIntervals"][0].update(vpaWeight=40, startReplicaCount=5, lastReplicaCount=2)
    changed = request(admin, "PUT", HVPA_V1.path(ns, "web"), body=changed)
    first, second = wait_for(
        lambda: warnings_on(admin, ns, "web") if len(warnings_on(admin, ns, "web")) == 2 else None,
        30,
        message="the second Warning",
    )
    assert first["metadata"]["name"] == warning["metadata"]["name"]
    assert (first["count"], first["message"]) == (1, LEAD + WEIGHT)
    assert (second["count"], second["message"]) == (1, LEAD + INTERVAL)
    assert second["involvedObject"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    letters = wait_for(lambda: dead_letters(r) if len(dead_letters(r)) >= 2 else None, 30, message="2 letters")
    assert [d["error"] for d in letters] == [
        WEIGHT.replace("field 'spec.", "field 'policy.spec."),
        INTERVAL.replace("field 'spec.", "field 'policy.spec."),
    ]

    # Any edit is a new version: the same refusal again is counted on the same Event.
    request(
        admin,
        "PATCH",
        HVPA_V1.path(ns, "web"),
        body={"metadata": {"labels": {"team": "shop"}}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: [e["count"] for e in warnings_on(admin, ns, "web")] == [1, 2] or None,
        30,
        message="the second Warning counted twice",
    )
    wait_for(lambda: len(dead_letters(r)) == 3 or None, 30, message="a third dead letter")

    # Made valid: the policy is sent, and no Event or dead letter follows.
    fixed = read(admin, HVPA_V1, ns, "web")
    fixed["spec"]["weightBasedScalingIntervals"][0].update(startReplicaCount=1, lastReplicaCount=5)
    request(admin, "PUT", HVPA_V1.path(ns, "web"), body=fixed)
    r.wait(lambda r: len(r.events("policy", "web")) == 1, "the valid policy event")
    assert [e["count"] for e in warnings_on(admin, ns, "web")] == [1, 2]
    assert len(dead_letters(r)) == 3
    assert r.state.refused == {}
