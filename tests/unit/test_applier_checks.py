"""The applier's pure parts: the bounds re-check, the policy/HPA lookup and the patches it writes.

The Kubernetes side (reads, writes, conflicts, retries) is exercised against a real kube-apiserver
in tests/integration/test_applier_kube.py.
"""

from __future__ import annotations

import argparse
from typing import Any

import orjson
import pytest

from cli.options import add_edge_metrics_options
from edge.applier import Applier, ApplierConfig
from edge.checks import (
    FIELD_MANAGER,
    LAST_DECISION,
    LAST_TICK,
    MANAGED,
    Refusal,
    apply_patch,
    check_decision,
    check_marks,
    find_hpa,
    find_policy,
    hpa_patch,
    owned_containers,
    plan_containers,
    policy_bounds,
    result_label,
)
from edge.intake import is_status_only
from scaling.cloudevents import APPLIED, APPLY_FAILED, DECISION, cloudevent
from scaling.events import WorkloadRef
from scaling.policies import parse_policy

WL = WorkloadRef("c1", "shop", "Deployment", "web")


def hvpa(**container_policy: Any) -> dict[str, Any]:
    policies = [
        {
            "containerName": "app",
            "minAllowed": {"cpu": "50m", "memory": "64Mi"},
            "maxAllowed": {"cpu": "2", "memory": "4Gi"},
            **container_policy,
        },
        {"containerName": "*", "maxAllowed": {"cpu": "500m"}},
    ]
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"hpa-controller": "hvpa"}},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 2, "maxReplicas": 6}}},
            "vpa": {"deploy": True, "template": {"spec": {"resourcePolicy": {"containerPolicies": policies}}}},
            "weightBasedScalingIntervals": [{"vpaWeight": 40, "startReplicaCount": 2, "lastReplicaCount": 6}],
        },
    }


def custom_hpa() -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": {"name": "web-chpa", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "target": {"value": 100},
            "metric": {"series": "queue"},
            "minReplicas": 3,
            "maxReplicas": 12,
        },
    }


def tortoise() -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "updateMode": "Auto",
            "targetRefs": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
            "resourcePolicy": [
                {
                    "containerName": "app",
                    "minAllocatedResources": {"cpu": "100m"},
                    "maxAllocatedResources": {"memory": "1Gi"},
                }
            ],
            "maxReplicas": 20,
        },
    }


def bounds_of(manifest: dict[str, Any]) -> Any:
    return policy_bounds(parse_policy(manifest, WL))


def change(frm: Any, to: Any) -> dict[str, Any]:
    return {"from": frm, "to": to}


# --- bounds ---------------------------------------------------------------------------------------


def test_hvpa_bounds_come_from_the_manifest() -> None:
    b = bounds_of(hvpa())
    assert (b.kind, b.name, b.min_replicas, b.max_replicas) == ("Hvpa", "web", 2, 6)
    app = b.container("app")
    assert app is not None and app.minimum["cpu"] == 50 and app.maximum["memory"] == 4 * 2**30 * 1000
    # A container without its own policy falls back to "*".
    other = b.container("sidecar")
    assert other is not None and other.maximum == {"cpu": 500}


def test_a_decision_within_the_bounds_passes() -> None:
    data = {
        "replicas": change(2, 6),
        "containers": {
            "app": {
                "requests": {"cpu": change("100m", "2"), "memory": change("64Mi", "4Gi")},
                "limits": {"memory": change("5G", "9Gi")},  # limits are not bounded by VPA bounds
            }
        },
    }
    assert check_decision(data, bounds_of(hvpa())) == []


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"replicas": change(2, 7)}, "replicas 7 is above the policy's maxReplicas 6 (Hvpa web)"),
        ({"replicas": change(2, 1)}, "replicas 1 is below the policy's minReplicas 2 (Hvpa web)"),
        (
            {"containers": {"app": {"requests": {"memory": change("64Mi", "5Gi")}}}},
            "container app requests.memory 5Gi is above the policy's maxAllowed.memory 4294967296",
        ),
        (
            {"containers": {"app": {"requests": {"cpu": change("100m", "10m")}}}},
            "container app requests.cpu 10m is below the policy's minAllowed.cpu 50m",
        ),
        (
            {"containers": {"sidecar": {"requests": {"cpu": 0.75}}}},
            "malformed",  # a bare number is not a {from, to} change
        ),
        (
            {"containers": {"sidecar": {"requests": {"cpu": change(None, 0.75)}}}},
            "container sidecar requests.cpu 750m is above the policy's maxAllowed.cpu 500m "
            "(Hvpa web containerPolicies[*])",
        ),
    ],
)
def test_a_decision_outside_the_bounds_names_the_bound(data: dict[str, Any], needle: str) -> None:
    if needle == "malformed":
        with pytest.raises(Refusal, match="must be an object with 'from' and 'to'"):
            check_decision(data, bounds_of(hvpa()))
        return
    errors = check_decision(data, bounds_of(hvpa()))
    assert any(needle in e for e in errors), errors


def test_container_policy_mode_off_refuses_container_changes() -> None:
    errors = check_decision(
        {"containers": {"app": {"requests": {"cpu": change("100m", "200m")}}}}, bounds_of(hvpa(mode="Off"))
    )
    assert errors == ["container app: the policy's containerPolicies[app] has mode Off (Hvpa web)"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"replicas": {"to": "three"}}, "replicas.to must be a count"),
        ({"replicas": 3}, "replicas must be an object"),
        ({"containers": {"app": {"requests": {"cpu": change("1", "1.5.5")}}}}, "is not a quantity"),
        ({"containers": {"app": {"requests": {"cpu": change("1", "-1")}}}}, "is negative"),
        ({"containers": ["app"]}, "containers must be an object"),
        ({"hpa": {"target_utilization": {"cpu": change(70, 80)}}}, "is not <container>/<resource>"),
        ({"hpa": {"metrics": {"removed": [{"type": "Custom", "name": "x"}]}}}, "hpa.metrics.removed must be a list"),
        ({"hpa": {"metrics": {"removed": "Resource/cpu"}}}, "hpa.metrics.removed must be a list"),
    ],
)
def test_a_malformed_decision_is_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(Refusal, match=message):
        check_decision(data, bounds_of(hvpa()))


def test_custom_hpa_bounds_replicas_and_refuses_resources() -> None:
    b = bounds_of(custom_hpa())
    assert (b.min_replicas, b.max_replicas, b.vertical) == (3, 12, False)
    assert check_decision({"replicas": change(3, 12)}, b) == []
    errors = check_decision({"containers": {"app": {"requests": {"cpu": change("1", "2")}}}}, b)
    assert errors == ["CustomHpa web-chpa does not change container resources, but the decision changes app"]


def test_tortoise_bounds_use_tortoise_names() -> None:
    b = bounds_of(tortoise())
    assert (b.min_replicas, b.max_replicas) == (None, 20)
    errors = check_decision(
        {
            "containers": {"app": {"requests": {"cpu": change("200m", "50m"), "memory": change("1Gi", "2Gi")}}},
            "hpa": {"max_replicas": change(10, 30), "target_utilization": {"app/cpu": change(70, 120)}},
        },
        b,
    )
    assert any("minAllocatedResources.cpu 100m (Tortoise web resourcePolicy[app])" in e for e in errors), errors
    assert any("maxAllocatedResources.memory" in e for e in errors), errors
    assert any("hpa maxReplicas 30 is above the policy's maxReplicas 20" in e for e in errors), errors
    assert any("hpa target utilization of app/cpu 120 is outside 1..100" in e for e in errors), errors


def test_scaling_to_zero_is_refused_even_without_a_minimum() -> None:
    errors = check_decision({"replicas": change(1, 0)}, bounds_of(tortoise()))
    assert errors == ["replicas 0: tandem never scales a workload to zero"]


# --- finding the policy and the HPA ---------------------------------------------------------------


def test_find_policy_takes_the_one_the_decision_names() -> None:
    other = {**hvpa(), "metadata": {"name": "api", "namespace": "shop"}}
    other["spec"] = {**other["spec"], "targetRef": {"kind": "Deployment", "name": "api"}}
    found = find_policy([other, custom_hpa(), hvpa()], WL, "Hvpa", "web")
    assert found["kind"] == "Hvpa" and found["metadata"]["name"] == "web"


def test_find_policy_refuses_a_policy_this_cluster_does_not_have() -> None:
    with pytest.raises(Refusal, match=r"comes from Hvpa web, but no such policy .* \(found: CustomHpa web-chpa\)"):
        find_policy([custom_hpa()], WL, "Hvpa", "web")
    with pytest.raises(Refusal, match="no Hvpa, Tortoise or CustomHpa in this cluster targets Deployment shop/web"):
        find_policy([], WL, None, None)


def test_find_policy_refuses_ambiguity_when_the_decision_names_none() -> None:
    with pytest.raises(Refusal, match="more than one policy targets"):
        find_policy([hvpa(), custom_hpa()], WL, None, None)
    assert find_policy([hvpa()], WL, None, None)["kind"] == "Hvpa"


def test_find_hpa_matches_the_scale_target() -> None:
    h1 = {"metadata": {"name": "h1"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}}
    h2 = {"metadata": {"name": "h2"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "api"}}}
    assert find_hpa([h2, h1], WL) is h1
    with pytest.raises(Refusal, match="no HorizontalPodAutoscaler targets Deployment shop/web"):
        find_hpa([h2], WL)
    with pytest.raises(Refusal, match="no HorizontalPodAutoscaler"):
        find_hpa([h1], WL, name="other")


# --- patches --------------------------------------------------------------------------------------


def deployment(managed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42", "managedFields": managed or []},
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "resources": {"requests": {"cpu": "100m", "memory": "200M"}, "limits": {"memory": "1G"}},
                        },
                        {"name": "sidecar", "resources": {"requests": {"cpu": "10m"}}},
                        {"name": "log", "resources": {}},
                    ]
                }
            },
        },
    }


def applied_fields(*names: str) -> dict[str, Any]:
    containers = {f'k:{{"name":"{n}"}}': {".": {}, "f:name": {}, "f:resources": {"f:requests": {}}} for n in names}
    return {
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": containers}}}},
    }


def test_owned_containers_reads_managed_fields() -> None:
    managed = [
        applied_fields("sidecar", "log"),
        {**applied_fields("app"), "manager": "kubectl"},  # someone else's
        {**applied_fields("app"), "operation": "Update"},  # not an apply
    ]
    assert owned_containers(managed, FIELD_MANAGER) == {"sidecar", "log"}
    assert owned_containers(None, FIELD_MANAGER) == set()


def test_plan_keeps_current_values_and_records_only_real_changes() -> None:
    plan = plan_containers(
        deployment(),
        {
            "app": {
                "requests": {"cpu": change("100m", "0.1"), "memory": change("200M", 300_000_000)},
                "limits": {"cpu": change(None, "2")},
            }
        },
    )
    assert plan.resources == {
        "app": {"requests": {"cpu": "100m", "memory": "300000k"}, "limits": {"memory": "1G", "cpu": "2"}}
    }
    # 0.1 == 100m: not a change; the number became a quantity string.
    assert plan.changes == {
        "app": {
            "requests": {"memory": {"from": "200M", "to": "300000k"}},
            "limits": {"cpu": {"from": None, "to": "2"}},
        }
    }


def test_plan_repeats_the_resources_the_applier_already_owns() -> None:
    # An apply that left out sidecar's resources would remove them (they are the applier's alone).
    plan = plan_containers(
        deployment([applied_fields("sidecar")]), {"app": {"requests": {"cpu": change("100m", "100m")}}}
    )
    assert set(plan.resources) == {"app", "sidecar"}
    assert plan.resources["sidecar"] == {"requests": {"cpu": "10m"}, "limits": {}}
    assert plan.changes == {}


def test_plan_refuses_a_container_the_pod_template_lacks() -> None:
    with pytest.raises(Refusal, match=r"container 'ghost' is not in the pod template of Deployment shop/web"):
        plan_containers(deployment(), {"ghost": {"requests": {"cpu": change(None, "1")}}})


def test_apply_patch_is_minimal() -> None:
    obj = deployment()
    body = apply_patch(
        obj,
        {"sidecar": {"requests": {"cpu": "20m"}, "limits": {}}, "app": {"requests": {"cpu": "1"}, "limits": {}}},
        {"tandem.dev/last-decision": "abc"},
        "42",
    )
    assert body == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "resourceVersion": "42",
            "annotations": {"tandem.dev/last-decision": "abc"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "resources": {"requests": {"cpu": "1"}}},
                        {"name": "sidecar", "resources": {"requests": {"cpu": "20m"}}},
                    ]
                }
            }
        },
    }
    # Nothing but the annotation: no spec at all, and no precondition when none is asked for.
    assert apply_patch(obj, {}, {"a": "b"}) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"a": "b"}},
    }


def hpa_obj() -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "resourceVersion": "7"},
        "spec": {
            "minReplicas": 3,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "ContainerResource",
                    "containerResource": {
                        "name": "cpu",
                        "container": "app",
                        "target": {"type": "Utilization", "averageUtilization": 70},
                    },
                },
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization"}}},
            ],
        },
    }


def test_hpa_patch_retargets_and_adds_container_metrics() -> None:
    patch, summary = hpa_patch(
        hpa_obj(),
        {
            "min_replicas": change(3, 5),
            "max_replicas": change(10, 10),
            "target_utilization": {"app/cpu": change(70, 75), "istio-proxy/cpu": change(None, 80)},
        },
    )
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert patch["spec"]["minReplicas"] == 5 and "maxReplicas" not in patch["spec"]
    metrics = patch["spec"]["metrics"]
    assert metrics[0]["containerResource"]["target"] == {"type": "Utilization", "averageUtilization": 75}
    assert metrics[1] == hpa_obj()["spec"]["metrics"][1]  # untouched, but sent: lists are replaced whole
    assert metrics[2]["containerResource"] == {
        "name": "cpu",
        "container": "istio-proxy",
        "target": {"type": "Utilization", "averageUtilization": 80},
    }
    assert summary == {
        "min_replicas": {"from": 3, "to": 5},
        "target_utilization": {"app/cpu": {"from": 70, "to": 75}, "istio-proxy/cpu": {"from": None, "to": 80}},
    }
    assert hpa_patch(hpa_obj(), {"min_replicas": change(3, 3)}) == ({}, {})


# --- what the applier does before it touches the API ----------------------------------------------


def decision(cluster: str = "c1", **data: Any) -> dict[str, Any]:
    body = {
        "workload": {"cluster": cluster, "namespace": "shop", "kind": "Deployment", "name": "web"},
        "tick": 1_762_250_430.0,
        "policy": {"kind": "Hvpa", "name": "web", "mode": "Auto"},
        "dry_run": False,
        "blocked": [],
        "reasons": [],
        "inputs": {},
        **data,
    }
    return cloudevent(DECISION, cluster, "x/shop/Deployment/web", body["tick"], body)


def test_messages_that_are_not_this_clusters_decisions_are_ignored() -> None:
    applier = Applier(None, ApplierConfig("c1"))  # no API: nothing here may reach it
    assert applier.handle(b"not json") is None
    assert applier.handle(orjson.dumps({"type": "dev.tandem.blocked.v1", "data": {}})) is None
    assert applier.handle(orjson.dumps({"type": DECISION, "data": {"workload": "c1/shop/Deployment/web"}})) is None
    assert applier.handle(orjson.dumps(decision("c2", replicas=change(2, 3)))) is None


def test_a_forged_id_is_refused_and_audited() -> None:
    ev = decision(replicas=change(2, 3))
    ev["data"]["replicas"]["to"] = 30  # the id no longer matches the data
    result = Applier(None, ApplierConfig("c1"), clock=lambda: 1_762_250_431.0).handle(orjson.dumps(ev))
    assert result is not None
    assert result["type"] == APPLY_FAILED
    assert result["subject"] == "c1/shop/Deployment/web" and result["source"] == "/tandem/c1"
    assert result["data"]["decision"] == ev["id"]
    assert "is not the hash of its data" in result["data"]["error"]
    assert result["data"]["changes"] == {} and result["data"]["dry_run"] is False
    assert APPLIED != APPLY_FAILED


def test_results_validate_against_the_decision_schema() -> None:
    pytest.importorskip("jsonschema")
    from schemas import validator

    ev = decision(replicas=change(2, 3))
    ev["id"] = "forged"
    result = Applier(None, ApplierConfig("c1"), clock=lambda: 1_762_250_431.0).handle(orjson.dumps(ev))
    validator("decision").validate(result)


def test_results_and_rejected_messages_are_counted() -> None:
    from ops.observability import Metrics

    metrics = Metrics()
    applier = Applier(None, ApplierConfig("c1"), metrics=metrics)
    applier.handle(b"not json")
    applier.handle(orjson.dumps({"type": DECISION, "data": {"workload": "c1/shop/Deployment/web"}}))
    applier.handle(orjson.dumps(decision("c2", replicas=change(2, 3))))  # not ours: not counted at all
    forged = decision(replicas=change(2, 3), tick=1_762_250_445.0)
    forged["id"] = "forged"
    applier.handle(orjson.dumps(forged))

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert value("tandem_events_rejected_total", type="unknown") == 1
    assert value("tandem_events_rejected_total", type="decision") == 1
    assert value("tandem_applier_results_total", result="refused") == 1
    assert value("tandem_last_processed_event_timestamp_seconds") == 1_762_250_445.0


def test_result_labels() -> None:
    def result(type_: str, **data: Any) -> dict[str, Any]:
        return {"type": type_, "data": data}

    assert result_label(result(APPLIED)) == "applied"
    assert result_label(result(APPLIED, dry_run=True)) == "applied"
    assert result_label(result(APPLIED, repeat=True)) == "duplicate"
    assert result_label(result(APPLY_FAILED, error="skipped: Deployment shop/web has not opted in")) == "skipped"
    assert result_label(result(APPLY_FAILED, error="refused: replicas 30 is above ...")) == "refused"
    assert result_label(result(APPLY_FAILED, error="API error (failed at attempt 1): 422 Invalid")) == "apply_failed"
    assert result_label(result(APPLY_FAILED, error="TypeError: boom")) == "apply_failed"


def test_edge_metrics_options_default_to_the_charts_port_and_no_event_age_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TANDEM_METRICS_PORT", "TANDEM_READY_MAX_EVENT_AGE", "TANDEM_READY_MAX_LAG"):
        monkeypatch.delenv(name, raising=False)
    p = argparse.ArgumentParser()
    add_edge_metrics_options(p)
    args = p.parse_args([])
    assert (args.metrics_port, args.ready_max_event_age, args.ready_max_lag) == (9464, 0.0, 10_000)
    assert p.parse_args(["--ready-max-event-age", "60"]).ready_max_event_age == 60.0
    monkeypatch.setenv("TANDEM_READY_MAX_EVENT_AGE", "900")
    p = argparse.ArgumentParser()
    add_edge_metrics_options(p)
    assert p.parse_args([]).ready_max_event_age == 900.0


# --- opt-in and idempotency bookkeeping ---------------------------------------------------------


def test_check_marks_skips_a_workload_that_has_not_opted_in() -> None:
    with pytest.raises(
        Refusal,
        match=r'^skipped: Deployment shop/web has not opted in \(annotation tandem.dev/managed: "true" is missing\)$',
    ):
        check_marks("Deployment shop/web", {MANAGED: "false"}, "d1", 10.0)


def test_check_marks_calls_the_recorded_decision_a_repeat() -> None:
    assert check_marks("Deployment shop/web", {MANAGED: "true", LAST_DECISION: "d1", LAST_TICK: "10.0"}, "d1", 10.0)


def test_check_marks_refuses_a_decision_older_than_the_last_applied_one() -> None:
    marks = {MANAGED: "true", LAST_DECISION: "d2", LAST_TICK: "20.0"}
    with pytest.raises(
        Refusal, match=r"^refused: stale decision: its tick 10.0 is older than the last applied decision's 20.0 \(d2\)$"
    ):
        check_marks("Deployment shop/web", marks, "d1", 10.0)


def test_check_marks_lets_a_new_decision_through() -> None:
    marks = {MANAGED: "true", LAST_DECISION: "d1", LAST_TICK: "10.0"}
    assert check_marks("Deployment shop/web", marks, "d2", 20.0) is False
    assert check_marks("Deployment shop/web", {MANAGED: "true", LAST_TICK: "junk"}, "d2", 5.0) is False


def test_blocked_reports_and_dry_runs_on_a_clusters_own_topic_are_status_only() -> None:
    """On ``<prefix>actuator.<cluster>`` the worker also puts what the applier only shows in the status."""
    assert is_status_only(orjson.dumps({"type": "dev.tandem.blocked.v1", "data": {}}))
    assert is_status_only(orjson.dumps({"type": "dev.tandem.decision.v1", "data": {"dry_run": True}}))
    assert not is_status_only(orjson.dumps({"type": "dev.tandem.decision.v1", "data": {"dry_run": False}}))
    assert not is_status_only(orjson.dumps({"type": "dev.tandem.decision.v1", "data": {}}))
    assert not is_status_only(b"not json")  # refused and audited by the applier's own handling
    assert not is_status_only(None)


def test_hpa_patch_removes_the_metrics_a_decision_names() -> None:
    # Tortoise's sync removes the Resource metric and the ContainerResource metric of a pair that is
    # no longer Horizontal (pkg/hpa/service.go syncHPAMetricsWithTortoiseAutoscalingPolicy).
    patch, summary = hpa_patch(
        hpa_obj(),
        {
            "target_utilization": {"app/memory": change(None, 70)},
            "metrics": {
                "removed": [
                    {"type": "ContainerResource", "container": "app", "name": "cpu"},
                    {"type": "Resource", "name": "memory"},
                    {"type": "External", "name": "gone-already"},
                ]
            },
        },
    )
    assert patch["spec"]["metrics"] == [
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "memory",
                "container": "app",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    assert summary == {
        "metrics": {
            "removed": [
                {"type": "ContainerResource", "container": "app", "name": "cpu"},
                {"type": "Resource", "name": "memory"},
            ]
        },
        "target_utilization": {"app/memory": {"from": None, "to": 70}},
    }
    # Removing what the HPA does not have changes nothing.
    assert hpa_patch(hpa_obj(), {"metrics": {"removed": [{"type": "External", "name": "x"}]}}) == ({}, {})
