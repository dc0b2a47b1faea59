"""``tandem apply`` against the real kube-apiserver and the real Kafka broker (no mocks).

Decisions go into ``<prefix>actuator``; the applier (in-process, its consumer loop in a thread,
running as the ``tandem-applier`` service account of deploy/rbac/applier.yaml through
impersonation, so the RBAC manifest is exercised too) applies them; its results are read back from
``<prefix>audit``.  Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from edge.applier import Applier, ApplierConfig, run
from edge.checks import LAST_DECISION, LAST_TICK, MANAGED
from edge.kube import DEPLOYMENTS, HPAS, POLICY_RESOURCES, STATEFULSETS, KubeError, Resource, request
from scaling.cloudevents import APPLIED, APPLY_FAILED, DECISION, cloudevent
from streams.settings import KafkaSettings
from streams.topics import ensure_topics, topic_name
from tests.fixtures.kafka import run_sync, wait_for
from tests.fixtures.kube import wait_for_crd_established
from tests.integration.test_metrics_worker import free_port, get, scrape

pytestmark = [pytest.mark.kube, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "c1"
TICK = 1_762_250_430.0
HVPA_V1 = POLICY_RESOURCES[0]
TORTOISE = POLICY_RESOURCES[2]
CUSTOM_HPA = POLICY_RESOURCES[3]


# --- cluster set-up (shared with test_collector_kube) ---------------------------------------------


def _kind_path(doc: dict[str, Any]) -> str:
    api_version, kind = doc["apiVersion"], doc["kind"]
    ns = (doc.get("metadata") or {}).get("namespace")
    plural = {
        "Namespace": "namespaces",
        "ServiceAccount": "serviceaccounts",
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "CustomResourceDefinition": "customresourcedefinitions",
    }[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"


def create_or_replace(api: Any, doc: dict[str, Any]) -> None:
    """Create ``doc``; if it exists, replace it (the manifests are the truth)."""
    path = _kind_path(doc)
    try:
        request(api, "POST", path, body=doc)
    except KubeError as exc:
        if exc.status != 409:
            raise
        name = doc["metadata"]["name"]
        current = request(api, "GET", f"{path}/{name}")
        doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        request(api, "PUT", f"{path}/{name}", body=doc)


def wait_served(api: Any, res: Resource, namespace: str) -> None:
    def listed() -> bool:
        try:
            request(api, "GET", res.path(namespace))
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(listed, 30, interval=0.1, message=f"{res.plural}.{res.group} served")


def install_crds(api: Any, namespace: str, extra: list[dict[str, Any]] | None = None) -> None:
    """deploy/crds/*.yaml (and ``extra`` CRDs), established and served."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "deploy" / "crds").glob("*.yaml"))]
    docs += extra or []
    for doc in docs:
        create_or_replace(api, doc)
    for doc in docs:
        wait_for_crd_established(api, doc["metadata"]["name"])
        spec = doc["spec"]
        res = Resource(spec["group"], spec["versions"][0]["name"], spec["names"]["plural"], spec["names"]["kind"])
        wait_served(api, res, namespace)


def install_rbac(raw_api: Any) -> None:
    for p in sorted((REPO / "deploy" / "rbac").glob("*.yaml")):
        for doc in yaml.safe_load_all(p.read_text()):
            if doc:
                create_or_replace(raw_api, doc)


def impersonating(kube_apiserver: str, service_account: str) -> Any:
    """An ApiClient that acts as ``system:serviceaccount:tandem-system:<service_account>``."""
    from edge.kube import api_client

    api = api_client(kube_apiserver)
    api.set_default_header("Impersonate-User", f"system:serviceaccount:tandem-system:{service_account}")
    api.set_default_header("Impersonate-Group", "system:serviceaccounts")
    return api


def deployment(
    name: str,
    *,
    replicas: int = 2,
    managed: bool = True,
    kind: str = "Deployment",
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {
                            "requests": requests or {"cpu": "100m", "memory": "200M"},
                            "limits": limits or {"cpu": "1", "memory": "1G"},
                        },
                    },
                    {
                        "name": "sidecar",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m"}},
                    },
                ]
            },
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": {MANAGED: "true"} if managed else {}},
        "spec": spec,
    }


def hvpa(name: str, target: str, *, min_replicas: int = 1, max_replicas: int = 5, weight: int = 40) -> dict[str, Any]:
    def scale(**extra: Any) -> dict[str, Any]:
        return {"updatePolicy": {"updateMode": "Auto"}, "stabilizationDuration": "3m", **extra}

    min_change = {"cpu": {"value": "100m", "percentage": 80}, "memory": {"value": "100M", "percentage": 80}}
    policies = [
        {
            "containerName": "app",
            "minAllowed": {"cpu": "50m", "memory": "100M"},
            "maxAllowed": {"cpu": "2", "memory": "4G"},
        }
    ]
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": name, "annotations": {"hpa-controller": "hvpa"}},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "hpa": {
                "deploy": True,
                "scaleUp": scale(),
                "scaleDown": scale(),
                "template": {"spec": {"minReplicas": min_replicas, "maxReplicas": max_replicas}},
            },
            "vpa": {
                "deploy": True,
                "scaleUp": scale(minChange=min_change),
                "scaleDown": scale(minChange=min_change),
                "template": {"spec": {"resourcePolicy": {"containerPolicies": policies}}},
            },
            "weightBasedScalingIntervals": [
                {"vpaWeight": weight, "startReplicaCount": min_replicas, "lastReplicaCount": max_replicas}
            ],
        },
    }


def create(api: Any, res: Resource, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    def attempt() -> dict[str, Any] | None:
        try:
            created: dict[str, Any] = request(api, "POST", res.path(namespace), body=body)
            return created
        except KubeError as exc:  # a CRD that was just established may not serve for a moment
            if exc.status == 404:
                return None
            raise

    result: dict[str, Any] = wait_for(attempt, 30, interval=0.1, message=f"creating {res.kind}")
    return result


def read(api: Any, res: Resource, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = request(api, "GET", res.path(namespace, name))
    return obj


def container(obj: dict[str, Any], name: str = "app") -> dict[str, Any]:
    return next(c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == name)


# --- Kafka side -----------------------------------------------------------------------------------


def decision(namespace: str, name: str, *, cluster: str = CLUSTER, kind: str = "Deployment", **data: Any) -> dict:
    body: dict[str, Any] = {
        "workload": {"cluster": cluster, "namespace": namespace, "kind": kind, "name": name},
        "tick": data.pop("tick", TICK),
        "policy": data.pop("policy", {"kind": "Hvpa", "name": name, "mode": "Auto"}),
        "dry_run": data.pop("dry_run", False),
        **data,
        "blocked": [],
        "reasons": ["test"],
        "inputs": {},
    }
    return cloudevent(DECISION, cluster, f"{cluster}/{namespace}/{kind}/{name}", body["tick"], body)


def send_decisions(settings: KafkaSettings, *events: dict[str, Any]) -> None:
    """Publish ``events`` to ``<prefix>actuator``, keyed by their subject."""
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
        await producer.start()
        try:
            for ev in events:
                await producer.send_and_wait(
                    topic_name(settings.prefix, "actuator"), orjson.dumps(ev), key=ev["subject"].encode()
                )
        finally:
            await producer.stop()

    run_sync(go())


class Harness:
    """An applier consuming its own topics in a thread, and a reader of its audit topic."""

    def __init__(self, broker: str, api: Any, config: ApplierConfig, prefix: str | None = None) -> None:
        self.settings = KafkaSettings(broker=broker, prefix=prefix or f"t{uuid.uuid4().hex[:8]}.", partitions=1)
        self.applier = Applier(api, config)
        self.config = config
        self.audit: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        run_sync(ensure_topics(self.settings))
        self.thread = threading.Thread(target=self._main, name="applier", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            asyncio.run(self._both())
        except BaseException as exc:  # surfaced by the tests
            self.errors.append(exc)

    async def _both(self) -> None:
        await asyncio.gather(
            run(
                self.settings,
                self.config,
                None,
                group_id=f"tandem-applier-{self.config.cluster}-{uuid.uuid4().hex[:6]}",
                offset_reset="earliest",
                stop=self.stop,
                applier=self.applier,
                ensure=False,
            ),
            self._read_audit(),
        )

    async def _read_audit(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            topic_name(self.settings.prefix, "audit"),
            bootstrap_servers=self.settings.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            while not self.stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for messages in batches.values():
                    self.audit.extend(orjson.loads(m.value) for m in messages)
        finally:
            await consumer.stop()

    def send(self, *events: dict[str, Any]) -> None:
        send_decisions(self.settings, *events)

    def results(self, decision_id: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        def found() -> list[dict[str, Any]] | None:
            if self.errors:
                raise self.errors[0]
            got = [e for e in list(self.audit) if e["data"].get("decision") == decision_id]
            return got if len(got) >= count else None

        result: list[dict[str, Any]] = wait_for(found, timeout, message=f"{count} audit result(s) for {decision_id}")
        return result

    def result(self, decision_id: str) -> dict[str, Any]:
        return self.results(decision_id)[0]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


@pytest.fixture(scope="module")
def cluster_setup(kube_apiserver: str, kafka_broker: str) -> Iterator[dict[str, Any]]:
    """CRDs and RBAC installed once; the applier's API acts as the tandem-applier service account."""
    from edge.kube import api_client

    admin = api_client(kube_apiserver)
    ns = f"tandem-setup-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    install_crds(admin, ns)
    install_rbac(admin)
    yield {"admin": admin, "applier_api": impersonating(kube_apiserver, "tandem-applier"), "broker": kafka_broker}


@pytest.fixture(scope="module")
def applier(cluster_setup: dict[str, Any]) -> Iterator[Harness]:
    h = Harness(cluster_setup["broker"], cluster_setup["applier_api"], ApplierConfig(CLUSTER, backoff_base=0.05))
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def admin(cluster_setup: dict[str, Any]) -> Any:
    return cluster_setup["admin"]


# --- tests ------------------------------------------------------------------------------------------


def test_a_decision_is_applied_once_and_other_clusters_are_ignored(
    applier: Harness, admin: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    d1 = decision(
        ns,
        "web",
        replicas={"from": 2, "to": 4},
        containers={
            "app": {
                "requests": {"cpu": {"from": "100m", "to": "260m"}, "memory": {"from": "200M", "to": "1320000k"}},
                "limits": {"cpu": {"from": "1", "to": "2600m"}, "memory": {"from": "1G", "to": "6600000k"}},
            }
        },
    )
    applier.send(d1)
    result = applier.result(d1["id"])
    assert result["type"] == APPLIED, result
    assert result["source"] == f"/tandem/{CLUSTER}" and result["subject"] == f"{CLUSTER}/{ns}/Deployment/web"
    data = result["data"]
    assert data["patched"] == ["replicas", "containers"] and data["dry_run"] is False
    assert data["changes"]["replicas"] == {"from": 2, "to": 4}
    assert data["changes"]["containers"]["app"]["requests"]["memory"] == {"from": "200M", "to": "1320000k"}

    got = read(admin, DEPLOYMENTS, ns, "web")
    assert got["spec"]["replicas"] == 4
    app = container(got)
    assert app["resources"] == {
        "requests": {"cpu": "260m", "memory": "1320M"},
        "limits": {"cpu": "2600m", "memory": "6600M"},
    }
    assert app["image"] == "registry.k8s.io/pause:3.10"  # not in the apply configuration: untouched
    assert container(got, "sidecar")["resources"] == {"requests": {"cpu": "10m"}}
    annotations = got["metadata"]["annotations"]
    assert annotations[LAST_DECISION] == d1["id"] and float(annotations[LAST_TICK]) == TICK
    assert annotations[MANAGED] == "true"
    managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
    assert ("tandem-applier", "Apply") in managers
    rv = got["metadata"]["resourceVersion"]

    # The same decision again (a redelivery, a replay), with another cluster's decision between.
    other = decision(ns, "web", cluster="c2", replicas={"from": 4, "to": 5})
    applier.send(other, d1)
    again = applier.results(d1["id"], 2)[1]
    assert again["type"] == APPLIED and again["data"]["repeat"] is True
    assert again["data"]["changes"] == {} and "nothing written" in again["data"]["note"]
    assert read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"] == rv  # no write at all
    assert not [e for e in applier.audit if e["data"].get("decision") == other["id"]]

    # A later decision is applied; an older one redelivered afterwards is refused as stale.
    d2 = decision(ns, "web", tick=TICK + 15, replicas={"from": 4, "to": 3})
    applier.send(d2)
    assert applier.result(d2["id"])["type"] == APPLIED
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 3
    d0 = decision(ns, "web", tick=TICK - 15, replicas={"from": 2, "to": 5})
    applier.send(d0)
    stale = applier.result(d0["id"])
    assert stale["type"] == APPLY_FAILED and "stale decision" in stale["data"]["error"], stale
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 3


def test_refusals_and_api_errors_are_audited_and_change_nothing(
    applier: Harness, admin: Any, kube_namespace: str
) -> None:
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, DEPLOYMENTS, ns, deployment("free", managed=False))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    rv = read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"]

    def req(cpu: str = "100m", memory: str = "200M", name: str = "app") -> dict[str, Any]:
        return {name: {"requests": {"cpu": {"from": "100m", "to": cpu}, "memory": {"from": "200M", "to": memory}}}}

    cases: list[tuple[dict[str, Any], str]] = [
        (decision(ns, "web", replicas={"from": 2, "to": 30}), "replicas 30 is above the policy's maxReplicas 5"),
        (
            decision(ns, "web", containers=req(memory="5G")),
            "requests.memory 5G is above the policy's maxAllowed.memory",
        ),
        (decision(ns, "web", containers=req(cpu="10m")), "requests.cpu 10m is below the policy's minAllowed.cpu 50m"),
        (decision(ns, "free", replicas={"from": 2, "to": 3}), "skipped: Deployment {ns}/free has not opted in"),
        (
            decision(
                ns, "web", policy={"kind": "Tortoise", "name": "web", "mode": "Auto"}, replicas={"from": 2, "to": 3}
            ),
            "the decision comes from Tortoise web, but no such policy",
        ),
        (decision(ns, "web", containers=req(name="ghost")), "container 'ghost' is not in the pod template"),
        (decision(ns, "web", containers=req(memory="1.5.5Gi")), "'1.5.5Gi' is not a quantity"),
        (decision(ns, "gone", replicas={"from": 2, "to": 3}), f"Deployment {ns}/gone does not exist"),
        # Within the policy, but the API refuses it: requests above the (unchanged) limit of 1 cpu.
        (decision(ns, "web", containers=req(cpu="1500m")), "422 Invalid"),
    ]
    applier.send(*(ev for ev, _ in cases))
    for ev, needle in cases:
        result = applier.result(ev["id"])
        assert result["type"] == APPLY_FAILED, result
        assert needle.format(ns=ns) in result["data"]["error"], result["data"]["error"]
        assert result["data"]["changes"] == {}
    api_error = applier.result(cases[-1][0]["id"])["data"]["error"]
    assert api_error.startswith("API error (failed at attempt 1): 422 Invalid")
    assert "must be less than or equal to cpu limit" in api_error
    assert read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"] == rv


def test_a_conflicting_write_is_retried(applier: Harness, admin: Any, kube_namespace: str) -> None:
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    reads: list[str] = []

    def meddle(obj: dict[str, Any]) -> None:
        # Someone else changes the Deployment between the applier's read and its write, twice.
        reads.append(obj["metadata"]["resourceVersion"])
        if len(reads) <= 2:
            patch = {"metadata": {"labels": {"meddled": str(len(reads))}}}
            request(
                admin, "PATCH", DEPLOYMENTS.path(ns, "web"), body=patch, content_type="application/merge-patch+json"
            )

    applier.applier.after_read = meddle
    try:
        d = decision(ns, "web", containers={"app": {"requests": {"cpu": {"from": "100m", "to": "300m"}}}})
        applier.send(d)
        result = applier.result(d["id"])
    finally:
        applier.applier.after_read = None
    assert result["type"] == APPLIED, result
    assert result["data"]["attempts"] == 3 and len(reads) == 3
    got = read(admin, DEPLOYMENTS, ns, "web")
    assert got["metadata"]["labels"]["meddled"] == "2"  # the other writer's change is kept
    assert container(got)["resources"]["requests"]["cpu"] == "300m"

    # A conflict that never ends: bounded retries, then apply_failed with the API's 409.
    def always(obj: dict[str, Any]) -> None:
        patch = {"metadata": {"labels": {"meddled": obj["metadata"]["resourceVersion"]}}}
        request(admin, "PATCH", DEPLOYMENTS.path(ns, "web"), body=patch, content_type="application/merge-patch+json")

    applier.applier.after_read = always
    try:
        d = decision(ns, "web", tick=TICK + 15, replicas={"from": 2, "to": 3})
        applier.send(d)
        failed = applier.result(d["id"])
    finally:
        applier.applier.after_read = None
    assert failed["type"] == APPLY_FAILED, failed
    assert failed["data"]["attempts"] == applier.config.max_attempts
    assert failed["data"]["error"].startswith(f"API error (gave up after attempt {applier.config.max_attempts}): 409")
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 2


def test_statefulsets_and_hpa_changes(applier: Harness, admin: Any, kube_namespace: str) -> None:
    ns = kube_namespace
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
    d = decision(
        ns,
        "db",
        kind="StatefulSet",
        policy={"kind": "CustomHpa", "name": "db", "mode": "Auto"},
        replicas={"from": 1, "to": 3},
    )
    applier.send(d)
    assert applier.result(d["id"])["type"] == APPLIED
    assert read(admin, STATEFULSETS, ns, "db")["spec"]["replicas"] == 3

    # Tortoise: the HPA's min/max replicas and a container's target utilization.
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(
        admin,
        TORTOISE,
        ns,
        {
            "apiVersion": "autoscaling.mercari.com/v1beta3",
            "kind": "Tortoise",
            "metadata": {"name": "web"},
            "spec": {
                "updateMode": "Auto",
                "targetRefs": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
                "maxReplicas": 20,
            },
        },
    )
    hpa_body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-hpa"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
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
                }
            ],
        },
    }
    create(admin, HPAS, ns, hpa_body)
    d = decision(
        ns,
        "web",
        policy={"kind": "Tortoise", "name": "web", "mode": "Auto"},
        hpa={
            "min_replicas": {"from": 3, "to": 5},
            "max_replicas": {"from": 10, "to": 20},
            "target_utilization": {"app/cpu": {"from": 70, "to": 75}},
        },
    )
    too_far = decision(
        ns,
        "web",
        tick=TICK + 15,
        policy={"kind": "Tortoise", "name": "web", "mode": "Auto"},
        hpa={"max_replicas": {"from": 20, "to": 21}},
    )
    applier.send(d, too_far)
    result = applier.result(d["id"])
    assert result["type"] == APPLIED, result
    assert result["data"]["patched"] == ["hpa"]
    hpa = read(admin, HPAS, ns, "web-hpa")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (5, 20)
    assert hpa["spec"]["metrics"][0]["containerResource"]["target"]["averageUtilization"] == 75
    refused = applier.result(too_far["id"])
    assert refused["type"] == APPLY_FAILED
    assert "hpa maxReplicas 21 is above the policy's maxReplicas 20 (Tortoise web)" in refused["data"]["error"]


def test_dry_run_writes_nothing(cluster_setup: dict[str, Any], admin: Any, kube_namespace: str) -> None:
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    rv = read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"]
    h = Harness(cluster_setup["broker"], cluster_setup["applier_api"], ApplierConfig(CLUSTER, dry_run=True))
    try:
        ok = decision(
            ns,
            "web",
            replicas={"from": 2, "to": 4},
            containers={"app": {"requests": {"cpu": {"from": "100m", "to": "200m"}}}},
        )
        invalid = decision(ns, "web", containers={"app": {"requests": {"cpu": {"from": "100m", "to": "1500m"}}}})
        h.send(ok, invalid)
        result = h.result(ok["id"])
        assert result["type"] == APPLIED and result["data"]["dry_run"] is True, result
        assert result["data"]["changes"]["replicas"] == {"from": 2, "to": 4}
        assert result["data"]["changes"]["containers"]["app"]["requests"]["cpu"] == {"from": "100m", "to": "200m"}
        # dryRun=All: the API server still validates what would be written.
        bad = h.result(invalid["id"])
        assert bad["type"] == APPLY_FAILED and "422 Invalid" in bad["data"]["error"]
    finally:
        h.close()
    got = read(admin, DEPLOYMENTS, ns, "web")
    assert got["metadata"]["resourceVersion"] == rv
    assert got["spec"]["replicas"] == 2 and LAST_DECISION not in got["metadata"]["annotations"]


def test_a_decision_marked_dry_run_is_not_written(applier: Harness, admin: Any, kube_namespace: str) -> None:
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    rv = read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"]
    d = decision(ns, "web", dry_run=True, replicas={"from": 2, "to": 4})
    applier.send(d)
    result = applier.result(d["id"])
    assert result["type"] == APPLIED and result["data"]["dry_run"] is True
    assert read(admin, DEPLOYMENTS, ns, "web")["metadata"]["resourceVersion"] == rv


def test_the_command_line_serves_metrics_health_and_readiness(
    cluster_setup: dict[str, Any], admin: Any, kube_namespace: str, kube_apiserver: str, tmp_path: Path
) -> None:
    """``tandem apply`` in a subprocess (options by environment, as the chart sets them) counts its
    results by kind, times its API calls and reports its lag on ``TANDEM_METRICS_PORT``."""
    ns = kube_namespace
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    settings = KafkaSettings(broker=cluster_setup["broker"], prefix=f"t{uuid.uuid4().hex[:8]}.", partitions=1)
    run_sync(ensure_topics(settings))
    port = free_port()
    env = {
        **os.environ,
        "TANDEM_BROKER": cluster_setup["broker"],
        "TANDEM_TOPIC_PREFIX": settings.prefix,
        "TANDEM_PARTITIONS": "1",
        "TANDEM_CLUSTER": CLUSTER,
        "TANDEM_OFFSET_RESET": "earliest",
        "TANDEM_METRICS_PORT": str(port),
        "TANDEM_MAX_DECISION_AGE": "0",  # its decisions' tick is of 2025: no age limit here
    }
    log = tmp_path / "applier.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "apply", "--kubeconfig", kube_apiserver],
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: get(port, "/healthz")[0] == 200 or proc.poll() is not None,
            30,
            interval=0.1,
            message="/healthz 200",
        )
        assert proc.poll() is None, log.read_text()
        applied = decision(ns, "web", replicas={"from": 2, "to": 4})
        too_many = decision(ns, "web", replicas={"from": 4, "to": 30})
        send_decisions(settings, applied, applied, too_many)  # applied, then a repeat, then refused

        def results() -> dict[str, float] | None:
            got = {
                dict(labels)["result"]: v
                for (name, labels), v in scrape(port).items()
                if name == "tandem_applier_results_total"
            }
            return got if sum(got.values()) >= 3 else None

        got = wait_for(results, 30, interval=0.1, message=lambda: f"3 results counted ({log.read_text()[-2000:]})")
        assert got == {"applied": 1, "duplicate": 1, "refused": 1}, got
        assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 4
        samples = scrape(port)
        calls = {
            dict(labels)["operation"]: v
            for (name, labels), v in samples.items()
            if name == "tandem_kube_api_latency_seconds_count"
        }
        assert calls["get_workload"] == 3 and calls["list_hvpas"] >= 2, calls
        assert calls["patch_scale"] == 1 and calls["apply_workload"] == 1, calls
        key = f"{CLUSTER}/{ns}/Deployment/web"
        assert samples[("tandem_workload_replicas", (("source", "applied"), ("workload", key)))] == 4
        assert samples[("tandem_last_processed_event_timestamp_seconds", ())] == TICK
        wait_for(lambda: scrape(port).get(("tandem_consumer_lag_messages", ())) == 0, 10, interval=0.1, message="lag 0")
        # Decisions from a tick long ago: ready all the same (the event-age check is off by default).
        assert get(port, "/readyz") == (200, "ok\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise
    text = log.read_text()
    assert code == 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
