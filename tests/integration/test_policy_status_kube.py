"""Policy status, printer columns and Events, written by the applier on the real kube-apiserver.

The applier runs in-process as the ``tandem-applier`` service account of deploy/rbac/applier.yaml
(impersonation), so the status and events rights are exercised too.  Decisions are handed to
:meth:`Applier.apply` and audit events to :meth:`Reporter.audit` directly, as the consumer loop does
(the Kafka side of that loop is covered by test_applier_kube.py); :meth:`Reporter.flush` is the end
of one consumer batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from edge.applier import Applier, ApplierConfig
from edge.kube import DEPLOYMENTS, STATEFULSETS, Resource, request
from edge.reporter import EVENTS, Reporter
from edge.status import rfc3339
from scaling.cloudevents import APPLIED, APPLY_FAILED, BLOCKED, DECISION, cloudevent
from scaling.events import WorkloadRef
from tests.integration.test_applier_kube import (
    CUSTOM_HPA,
    HVPA_V1,
    TORTOISE,
    create,
    deployment,
    hvpa,
    impersonating,
    install_crds,
    install_rbac,
    read,
)

pytestmark = [pytest.mark.kube]

CLUSTER = "c1"
TICK = 1_762_250_430.0  # 2025-11-04T10:00:30Z
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture(scope="module")
def setup(kube_apiserver: str) -> Iterator[dict[str, Any]]:
    from edge.kube import api_client

    admin = api_client(kube_apiserver)
    ns = f"tandem-status-setup-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    install_crds(admin, ns)
    install_rbac(admin)
    yield {"admin": admin, "api": impersonating(kube_apiserver, "tandem-applier")}


def make(api: Any, *, dry_run: bool = False) -> tuple[Applier, Reporter]:
    reporter = Reporter(api, CLUSTER, dry_run=dry_run, clock=lambda: TICK + 5)
    return Applier(api, ApplierConfig(CLUSTER, dry_run=dry_run, backoff_base=0.05), reporter=reporter), reporter


def event(type_: str, ns: str, name: str, *, kind: str = "Deployment", **data: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "workload": {"cluster": CLUSTER, "namespace": ns, "kind": kind, "name": name},
        "tick": data.pop("tick", TICK),
        "policy": data.pop("policy", {"kind": "Hvpa", "name": name, "mode": "Auto"}),
        "dry_run": data.pop("dry_run", False),
        "blocked": data.pop("blocked", []),
        "reasons": data.pop("reasons", ["test"]),
        "inputs": data.pop("inputs", {}),
        **data,
    }
    return cloudevent(type_, CLUSTER, f"{CLUSTER}/{ns}/{kind}/{name}", body["tick"], body)


def apply(applier: Applier, ev: dict[str, Any]) -> dict[str, Any]:
    w = ev["data"]["workload"]
    return applier.apply(ev, WorkloadRef(w["cluster"], w["namespace"], w["kind"], w["name"]))


def events_of(admin: Any, ns: str, kind: str, name: str) -> list[dict[str, Any]]:
    doc = request(
        admin,
        "GET",
        EVENTS.path(ns),
        query={"fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}"},
    )
    return sorted(doc["items"], key=lambda e: (e["reason"], e["message"]))


def table(admin: Any, res: Resource, ns: str) -> list[list[Any]]:
    """``kubectl get``'s rows: the header, then one row per object (its printer columns)."""
    doc = request(admin, "GET", res.path(ns), accept=TABLE)
    assert doc["kind"] == "Table"
    return [[c["name"] for c in doc["columnDefinitions"]]] + [r["cells"] for r in doc["rows"]]


def rv(admin: Any, res: Resource, ns: str, name: str) -> str:
    return str(read(admin, res, ns, name)["metadata"]["resourceVersion"])


# --- Hvpa ---------------------------------------------------------------------------------------


def test_an_applied_hvpa_decision_shows_in_its_status_and_as_an_event(
    setup: dict[str, Any], kube_namespace: str
) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    applier, reporter = make(setup["api"])
    d = event(
        DECISION,
        ns,
        "web",
        replicas={"from": 2, "to": 4},
        containers={"app": {"requests": {"memory": {"from": "200M", "to": "800M"}}}},
        blocked=[{"target": "app/cpu", "reason": "MinChange", "wanted": "150m"}],
        reasons=["hvpa: vpaWeight 40 at 2 replicas (hpaWeight 60)", "hvpa: replicas 2 -> 4 from HPA desired 4"],
        inputs={"replicas": 2, "hpa_desired_replicas": 4},
    )
    result = apply(applier, d)
    assert result["type"] == APPLIED, result["data"].get("error")
    reporter.flush()
    status = read(admin, HVPA_V1, ns, "web")["status"]
    assert status == {
        "replicas": 4,
        "vpaWeight": 40,
        "hpaWeight": 60,
        "hpaScaleUpUpdatePolicy": {"updateMode": "Auto"},
        "hpaScaleDownUpdatePolicy": {"updateMode": "Auto"},
        "vpaScaleUpUpdatePolicy": {"updateMode": "Auto"},
        "vpaScaleDownUpdatePolicy": {"updateMode": "Auto"},
        "lastScaling": {
            "lastScaleTime": "2025-11-04T10:00:30Z",
            "hpaStatus": {"currentReplicas": 2, "desiredReplicas": 4},
            "vpaStatus": {
                "recommendation": {"containerRecommendations": [{"containerName": "app", "target": {"memory": "800M"}}]}
            },
        },
        "lastBlockedScaling": [
            {
                "reason": "MinChange",
                "scalingStatus": {
                    "vpaStatus": {
                        "recommendation": {
                            "containerRecommendations": [{"containerName": "app", "target": {"cpu": "150m"}}]
                        }
                    }
                },
            }
        ],
    }
    uid = read(admin, DEPLOYMENTS, ns, "web")["metadata"]["uid"]
    [ev] = events_of(admin, ns, "Deployment", "web")
    assert (ev["type"], ev["reason"], ev["count"]) == ("Normal", "Applied", 1)
    assert ev["message"] == (
        "Hvpa web (Auto): Decision: replicas from 2 to 4 and the memory request of app from 191 MiB to 763 MiB. "
        "Held back: app/cpu (to 150m), because the change is smaller than the policy's minimum change (MinChange)."
    )
    assert ev["involvedObject"]["uid"] == uid and ev["source"] == {"component": "tandem-applier"}

    # The same decision redelivered: a repeat writes nothing, neither the status nor an Event.
    before = rv(admin, HVPA_V1, ns, "web")
    result = apply(applier, d)
    assert result["type"] == APPLIED and result["data"]["repeat"] is True
    reporter.flush()
    assert rv(admin, HVPA_V1, ns, "web") == before
    assert [e["count"] for e in events_of(admin, ns, "Deployment", "web")] == [1]

    # A change held back twice: the status changes once, the Event is counted (HPA-style).
    blocked = [{"target": "app/cpu", "reason": "StabilizationWindow", "wanted": "300m"}]
    b1 = event(BLOCKED, ns, "web", tick=TICK + 15, blocked=blocked, inputs={"replicas": 4})
    b2 = event(BLOCKED, ns, "web", tick=TICK + 30, blocked=blocked, inputs={"replicas": 4})
    reporter.audit(b1)
    reporter.flush()
    after_b1 = read(admin, HVPA_V1, ns, "web")
    assert after_b1["status"]["lastBlockedScaling"] == [
        {
            "reason": "StabilizationWindow",
            "scalingStatus": {
                "vpaStatus": {
                    "recommendation": {
                        "containerRecommendations": [{"containerName": "app", "target": {"cpu": "300m"}}]
                    }
                }
            },
        }
    ]
    assert after_b1["status"]["lastScaling"] == status["lastScaling"]
    reporter.audit(b2)
    reporter.flush()
    assert rv(admin, HVPA_V1, ns, "web") == after_b1["metadata"]["resourceVersion"]  # nothing new: no write
    held = [e for e in events_of(admin, ns, "Deployment", "web") if e["reason"] == "HeldBack"]
    assert [(e["count"], e["message"]) for e in held] == [
        (
            2,
            "Hvpa web (Auto): Nothing changed. Held back: app/cpu (to 300m), because the previous change is "
            "still within the stabilization window (StabilizationWindow).",
        )
    ]
    rows = table(admin, HVPA_V1, ns)
    assert rows[0] == ["Name", "Replicas", "VPA Weight", "Last Scaling", "Blocked", "Age"]
    assert [rows[1][i] for i in (0, 1, 2, 4)] == ["web", 4, 40, "StabilizationWindow"]
    # Other clusters' audit events are none of this applier's business.
    reporter.audit(
        cloudevent(
            BLOCKED,
            "c2",
            "c2/x/Deployment/web",
            TICK,
            {**b1["data"], "workload": {"cluster": "c2", "namespace": ns, "kind": "Deployment", "name": "web"}},
        )
    )
    assert reporter.pending == {} and reporter.events == []


def test_a_dry_run_hvpa_still_gets_its_status(setup: dict[str, Any], kube_namespace: str) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    off = hvpa("web", "web")
    for direction in ("scaleUp", "scaleDown"):
        off["spec"]["vpa"][direction]["updatePolicy"] = {"updateMode": "Off"}
        off["spec"]["hpa"][direction]["updatePolicy"] = {"updateMode": "Off"}
    create(admin, HVPA_V1, ns, off)
    _, reporter = make(setup["api"])
    blocked = [
        {"target": "app/cpu", "reason": "UpdatePolicy", "wanted": "500m"},
        {"target": "replicas", "reason": "UpdatePolicy", "wanted": 3},
    ]
    reporter.audit(
        event(
            BLOCKED,
            ns,
            "web",
            blocked=blocked,
            inputs={"replicas": 2},
            policy={"kind": "Hvpa", "name": "web", "mode": "Off"},
        )
    )
    reporter.flush()
    status = read(admin, HVPA_V1, ns, "web")["status"]
    assert status["replicas"] == 2 and "lastScaling" not in status
    assert status["vpaScaleUpUpdatePolicy"] == {"updateMode": "Off"}
    assert status["lastBlockedScaling"] == [
        {
            "reason": "UpdatePolicy",
            "scalingStatus": {
                "hpaStatus": {"currentReplicas": 2, "desiredReplicas": 3},
                "vpaStatus": {
                    "recommendation": {
                        "containerRecommendations": [{"containerName": "app", "target": {"cpu": "500m"}}]
                    }
                },
            },
        }
    ]
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 2
    rows = table(admin, HVPA_V1, ns)
    assert rows[0] == ["Name", "Replicas", "VPA Weight", "Last Scaling", "Blocked", "Age"]
    assert rows[1][:5] == ["web", 2, None, None, "UpdatePolicy"]


def test_an_invalid_policy_gets_a_warning_event(setup: dict[str, Any], kube_namespace: str) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    invalid = hvpa("web", "web")
    invalid["spec"]["weightBasedScalingIntervals"][0]["vpaWeight"] = 40.5  # the CRD takes it, tandem does not
    create(admin, HVPA_V1, ns, invalid)
    applier, reporter = make(setup["api"])
    result = apply(applier, event(DECISION, ns, "web", replicas={"from": 2, "to": 3}))
    assert result["type"] == APPLY_FAILED
    error = result["data"]["error"]
    assert error.startswith("refused: the policy Hvpa in this cluster is invalid: ")
    reporter.flush()
    [warning] = events_of(admin, ns, "Hvpa", "web")
    assert (warning["type"], warning["reason"], warning["message"]) == ("Warning", "InvalidPolicy", error)
    assert warning["involvedObject"]["uid"] == read(admin, HVPA_V1, ns, "web")["metadata"]["uid"]
    [failed] = events_of(admin, ns, "Deployment", "web")
    assert (failed["type"], failed["reason"]) == ("Warning", "FailedApply")
    assert failed["message"] == f"Hvpa web (Auto): the applier failed: {error}"
    # The policy's status says so too (HVPA's lastError, declared upstream and never written there).
    assert read(admin, HVPA_V1, ns, "web")["status"]["lastError"] == {
        "description": error,
        "lastUpdateTime": "2025-11-04T10:00:30Z",
        "lastOperation": "Apply",
    }


# --- Tortoise -----------------------------------------------------------------------------------


def tortoise(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": name},
        "spec": {
            "updateMode": mode,
            "targetRefs": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}},
            "maxReplicas": 20,
        },
    }


def test_a_dry_run_tortoise_gets_its_status_and_kubectl_get_shows_mode_and_phase(
    setup: dict[str, Any], kube_namespace: str
) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, TORTOISE, ns, tortoise("web", "Off"))
    _, reporter = make(setup["api"])
    d = event(
        DECISION,
        ns,
        "web",
        dry_run=True,
        policy={"kind": "Tortoise", "name": "web", "mode": "Off"},
        containers={"app": {"requests": {"memory": {"from": "200M", "to": "300M"}}}},
        hpa={"target_utilization": {"app/cpu": {"from": 70, "to": 75}}},
        reasons=["tortoise: phase Working", "tortoise: dry run (updateMode Off)"],
        inputs={"replicas": 2, "phase": "Working", "recommended_replicas": {"min": 3, "max": 12}},
    )
    reporter.audit(d)
    reporter.flush()
    status = read(admin, TORTOISE, ns, "web")["status"]
    when = rfc3339(TICK)
    assert status == {
        "tortoisePhase": "Working",
        "targets": {
            "horizontalPodAutoscaler": "tortoise-hpa-web",
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "verticalPodAutoscalers": [],
        },
        "recommendations": {
            "horizontal": {
                "minReplicas": [{"from": 10, "to": 11, "timezone": "UTC", "value": 3, "updatedAt": when}],
                "maxReplicas": [{"from": 10, "to": 11, "timezone": "UTC", "value": 12, "updatedAt": when}],
                "targetUtilizations": [{"containerName": "app", "targetUtilization": {"cpu": 75}}],
            },
            "vertical": {
                "containerResourceRecommendation": [{"containerName": "app", "RecommendedResource": {"memory": "300M"}}]
            },
        },
        "conditions": {
            "tortoiseConditions": [
                {
                    "type": "VerticalRecommendationUpdated",
                    "status": "False",
                    "reason": "TortoiseOff",
                    "message": "The recommendation is not applied: updateMode is Off",
                    "lastUpdateTime": when,
                    "lastTransitionTime": when,
                }
            ]
        },
    }
    [ev] = events_of(admin, ns, "Deployment", "web")
    assert (ev["reason"], ev["message"]) == (
        "DryRun",
        "Tortoise web (Off): Dry run, so nothing is applied: it would change the memory request of app from "
        "191 MiB to 286 MiB and the HPA's target utilization of app/cpu from 70 to 75 %.",
    )
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["template"]["spec"]["containers"][0]["resources"][
        "requests"
    ] == {"cpu": "100m", "memory": "200M"}
    # The same dry run again (the worker repeats it when its outcome changes): no second write.
    before = rv(admin, TORTOISE, ns, "web")
    reporter.audit(d)
    reporter.flush()
    assert rv(admin, TORTOISE, ns, "web") == before
    rows = table(admin, TORTOISE, ns)
    assert rows[0] == ["Name", "Mode", "Phase", "Age"]
    assert rows[1][:3] == ["web", "Off", "Working"]


def test_an_applied_tortoise_decision_sets_its_conditions_and_a_failed_one_says_failed_to_reconcile(
    setup: dict[str, Any], kube_namespace: str
) -> None:
    """Tortoise ``Auto``: an applied vertical change is ``VerticalRecommendationUpdated=True`` with
    upstream's reason and message; a decision the API refuses adds ``FailedToReconcile=True`` with
    the error, and the next applied one turns it ``False``."""
    admin, ns = setup["admin"], kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, TORTOISE, ns, tortoise("web", "Auto"))
    applier, reporter = make(setup["api"])
    policy = {"kind": "Tortoise", "name": "web", "mode": "Auto"}

    def decision(memory_to: str, tick: float) -> dict[str, Any]:
        return event(
            DECISION,
            ns,
            "web",
            tick=tick,
            policy=policy,
            containers={"app": {"requests": {"memory": {"from": "200M", "to": memory_to}}}},
            reasons=["tortoise: phase Working"],
            inputs={"replicas": 2, "phase": "Working", "recommended_replicas": {"min": 3, "max": 12}},
        )

    result = apply(applier, decision("300M", TICK))
    assert result["type"] == APPLIED, result["data"].get("error")
    reporter.flush()
    status = read(admin, TORTOISE, ns, "web")["status"]
    when = rfc3339(TICK)
    assert status["tortoisePhase"] == "Working"
    assert status["recommendations"]["vertical"] == {
        "containerResourceRecommendation": [{"containerName": "app", "RecommendedResource": {"memory": "300M"}}]
    }
    assert status["conditions"]["tortoiseConditions"] == [
        {
            "type": "VerticalRecommendationUpdated",
            "status": "True",
            "reason": "VerticalRecommendationUpdated",
            "message": "The recommendation is provided",
            "lastUpdateTime": when,
            "lastTransitionTime": when,
        }
    ]
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["template"]["spec"]["containers"][0]["resources"][
        "requests"
    ] == {"cpu": "100m", "memory": "300M"}

    # The API refuses the next one (a request the container's limit is below): FailedToReconcile.
    later = TICK + 15
    bad = decision("2G", later)
    failed = apply(applier, bad)
    assert failed["type"] == APPLY_FAILED, failed
    reporter.flush()
    conditions = {c["type"]: c for c in read(admin, TORTOISE, ns, "web")["status"]["conditions"]["tortoiseConditions"]}
    assert conditions["FailedToReconcile"]["status"] == "True"
    assert conditions["FailedToReconcile"]["reason"] == "ApplyFailed"
    assert conditions["FailedToReconcile"]["message"] == failed["data"]["error"]

    ok = apply(applier, decision("350M", later + 15))
    assert ok["type"] == APPLIED, ok["data"].get("error")
    reporter.flush()
    conditions = {c["type"]: c for c in read(admin, TORTOISE, ns, "web")["status"]["conditions"]["tortoiseConditions"]}
    assert conditions["FailedToReconcile"]["status"] == "False"
    # an unchanged condition is not stamped again (edge/status.py: no write when nothing changed)
    assert conditions["VerticalRecommendationUpdated"]["lastUpdateTime"] == when
    assert conditions["FailedToReconcile"]["lastTransitionTime"] == rfc3339(later + 15)


# --- CustomHpa ----------------------------------------------------------------------------------


def test_a_custom_hpa_shows_its_replicas_and_last_scaling(setup: dict[str, Any], kube_namespace: str) -> None:
    admin, ns = setup["admin"], kube_namespace
    create(admin, STATEFULSETS, ns, deployment("db", kind="StatefulSet", replicas=1))
    create(
        admin,
        CUSTOM_HPA,
        ns,
        {
            "apiVersion": "autoscaling.tandem.dev/v1alpha1",
            "kind": "CustomHpa",
            "metadata": {"name": "db"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
                "target": {"value": 10},
                "metric": {"series": "queue"},
                "minReplicas": 1,
                "maxReplicas": 4,
            },
        },
    )
    applier, reporter = make(setup["api"])
    policy = {"kind": "CustomHpa", "name": "db", "mode": "Auto"}
    metric = {"series": "queue", "value": 25.0, "target": 10.0}
    d = event(
        DECISION,
        ns,
        "db",
        kind="StatefulSet",
        policy=policy,
        replicas={"from": 1, "to": 3},
        inputs={"replicas": 1, "metric": metric},
    )
    assert apply(applier, d)["type"] == APPLIED
    reporter.flush()
    when = rfc3339(TICK)
    status = read(admin, CUSTOM_HPA, ns, "db")["status"]
    assert status == {
        "currentReplicas": 3,
        "desiredReplicas": 3,
        "lastScaleTime": when,
        "conditions": [
            {
                "type": "ScalingActive",
                "status": "True",
                "reason": "ValidMetricFound",
                "message": "the replica count is computed from the series queue",
                "lastUpdateTime": when,
                "lastTransitionTime": when,
            },
            {
                "type": "AbleToScale",
                "status": "True",
                "reason": "SucceededRescale",
                "message": "the applier set replicas to 3",
                "lastUpdateTime": when,
                "lastTransitionTime": when,
            },
        ],
    }
    cooldown = event(
        BLOCKED,
        ns,
        "db",
        kind="StatefulSet",
        tick=TICK + 15,
        policy=policy,
        blocked=[{"target": "replicas", "reason": "Cooldown", "wanted": 4}],
        inputs={"replicas": 3, "metric": metric},
    )
    reporter.audit(cooldown)
    reporter.flush()
    status = read(admin, CUSTOM_HPA, ns, "db")["status"]
    assert (status["currentReplicas"], status["desiredReplicas"], status["lastScaleTime"]) == (3, 4, when)
    able = next(c for c in status["conditions"] if c["type"] == "AbleToScale")
    assert (able["reason"], able["message"], able["lastTransitionTime"]) == (
        "Cooldown",
        "held back: replicas (to 4), because the cooldown since the last scaling has not passed (Cooldown)",
        when,
    )
    rows = table(admin, CUSTOM_HPA, ns)
    assert rows[0] == ["Name", "Replicas", "Desired", "Last Scaling", "Age"]
    assert rows[1][:3] == ["db", 3, 4]
