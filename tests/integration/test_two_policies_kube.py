"""Two policies on one workload, as the applier shows it on the real kube-apiserver (issue 29, item 2).

An Hvpa (``Auto``) and a Tortoise (``Off``) target one Deployment.  The decision core (replay's
engine, the worker's loop) reports each blocked with reason ``AmbiguousPolicy``; the applier's
:class:`~edge.reporter.Reporter`, run as the ``tandem-applier`` service account, sets each
policy's ``ScalingActive`` condition False and records a Warning Event on each policy naming the
other, as the HPA controller does with ``AmbiguousSelector``.  Once one is deleted, the other's next
report makes its scaling active again.
"""

from __future__ import annotations

from typing import Any

import pytest

from edge.kube import DEPLOYMENTS
from scaling.cloudevents import BLOCKED
from scaling.engine import Engine
from scaling.settings import Settings
from tests.integration.test_applier_kube import HVPA_V1, TORTOISE, create, deployment, hvpa, read
from tests.integration.test_policy_status_kube import CLUSTER, TICK, event, events_of, make, setup, tortoise

pytestmark = [pytest.mark.kube]

__all__ = ["setup"]  # the module fixture, shared


def test_two_policies_on_one_workload_each_say_why_neither_acts_and_the_one_left_recovers(
    setup: dict[str, Any], kube_namespace: str
) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    hv = create(admin, HVPA_V1, ns, hvpa("web", "web"))
    to = create(admin, TORTOISE, ns, tortoise("web", "Off"))
    # What the collector would send for them, through the core.
    wl = {"cluster": CLUSTER, "namespace": ns, "kind": "Deployment", "name": "web"}
    engine = Engine(Settings(sync_period=15.0, cluster=CLUSTER))
    inputs: list[dict[str, Any]] = [
        {
            "type": "policy",
            "ts": TICK - 10,
            "workload": wl,
            "policy": {k: obj[k] for k in ("apiVersion", "kind", "spec")}
            | {"metadata": {"name": "web", "namespace": ns}},
        }
        for obj in (hv, to)
    ]
    inputs.append({"type": "workload", "ts": TICK - 10, "workload": wl, "replicas": 2, "containers": {"app": {}}})
    reports = [e for kind, e in engine.run(inputs) if kind == "audit"]
    assert [(e["type"], e["data"]["policy"]["kind"], e["data"]["blocked"]) for e in reports] == [
        (BLOCKED, "Hvpa", [{"target": "policy", "reason": "AmbiguousPolicy"}]),
        (BLOCKED, "Tortoise", [{"target": "policy", "reason": "AmbiguousPolicy"}]),
    ]

    _, reporter = make(setup["api"])
    for e in reports:
        reporter.audit(e)
    reporter.flush()

    when = "2025-11-04T10:00:30Z"
    hv_status = read(admin, HVPA_V1, ns, "web")["status"]
    assert hv_status["conditions"] == [
        {
            "type": "ScalingActive",
            "status": "False",
            "reason": "AmbiguousPolicy",
            "message": f"Tortoise {ns}/web (autoscaling.mercari.com/v1beta3) targets the same workload: "
            "no policy acts while more than one does (delete all but one)",
            "lastUpdateTime": when,
            "lastTransitionTime": when,
        }
    ]
    assert hv_status["lastBlockedScaling"] == [{"reason": "AmbiguousPolicy", "scalingStatus": {}}]
    to_status = read(admin, TORTOISE, ns, "web")["status"]
    assert to_status["conditions"]["tortoiseConditions"] == [
        {
            "type": "ScalingActive",
            "status": "False",
            "reason": "AmbiguousPolicy",
            "message": f"Hvpa {ns}/web (autoscaling.k8s.io/v1alpha1) targets the same workload: "
            "no policy acts while more than one does (delete all but one)",
            "lastUpdateTime": when,
            "lastTransitionTime": when,
        }
    ]

    [hv_event] = events_of(admin, ns, "Hvpa", "web")
    assert (hv_event["type"], hv_event["reason"], hv_event["message"]) == (
        "Warning",
        "AmbiguousPolicy",
        hv_status["conditions"][0]["message"],
    )
    assert hv_event["involvedObject"]["uid"] == hv["metadata"]["uid"]
    assert hv_event["involvedObject"]["apiVersion"] == "autoscaling.k8s.io/v1alpha1"
    [to_event] = events_of(admin, ns, "Tortoise", "web")
    assert (to_event["type"], to_event["reason"]) == ("Warning", "AmbiguousPolicy")
    assert to_event["involvedObject"]["uid"] == to["metadata"]["uid"]
    assert events_of(admin, ns, "Deployment", "web") == []  # said on the policies, not the workload

    # The Tortoise is deleted; the Hvpa's next report (here a blocked change) makes it active again.
    held = event(
        BLOCKED,
        ns,
        "web",
        tick=TICK + 15,
        blocked=[{"target": "app/cpu", "reason": "MinChange", "wanted": "150m"}],
        inputs={"replicas": 2},
    )
    reporter.audit(held)
    reporter.flush()
    [condition] = read(admin, HVPA_V1, ns, "web")["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["lastTransitionTime"]) == (
        "ScalingActive",
        "True",
        "SinglePolicy",
        "2025-11-04T10:00:45Z",
    )
