"""The Helm chart ``deploy/helm/tandem``: rendered by the real ``helm``, accepted by a real kube-apiserver.

``helm`` is looked up as ``$TANDEM_HELM``, on the PATH, then in ``$(go env GOPATH)/bin`` (where
``go install helm.sh/helm/v3/cmd/helm@v3.16.4`` puts it); the tests skip, saying so, without it.
The rendered manifests go to the API server with server-side apply and ``dryRun=All``: validated
and defaulted as if created (admission included), and nothing is stored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tandem"
RBAC = ROOT / "deploy" / "rbac"
INSTALL = "go install helm.sh/helm/v3/cmd/helm@v3.16.4"


@cache
def helm() -> str | None:
    explicit = os.environ.get("TANDEM_HELM")
    if explicit:
        return explicit
    found = shutil.which("helm")
    if found:
        return found
    gopath = ""
    if shutil.which("go"):
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True, check=False).stdout.strip()
    for candidate in (Path(gopath) / "bin" / "helm" if gopath else None, Path.home() / "go" / "bin" / "helm"):
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


needs_helm = pytest.mark.skipif(
    helm() is None,
    reason=f"helm is not installed (not $TANDEM_HELM, on the PATH or in $(go env GOPATH)/bin): {INSTALL}",
)


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    exe = helm()
    assert exe is not None
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, check=False)


def render(namespace: str = "tandem-system", *sets: str) -> list[dict[str, Any]]:
    args = ["template", "tandem", str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    out = run_helm(*args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def rbac_rules(path: Path) -> list[dict[str, Any]]:
    (role,) = [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ClusterRole"]
    return role["rules"]


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


@needs_helm
def test_chart_lints_clean() -> None:
    out = run_helm("lint", str(CHART), "--strict", "--set", "edge.cluster=eu-1")
    assert out.returncode == 0, out.stdout + out.stderr


@needs_helm
def test_worker_is_a_statefulset_with_a_rocksdb_volume_probes_and_the_broker() -> None:
    docs = render(
        "tandem-system", "edge.cluster=eu-1", r"broker=kafka://k1:9092\,kafka://k2:9092", "config.sync_period=30"
    )
    sts = by_kind(docs, "StatefulSet")["tandem-worker"]
    spec = sts["spec"]
    assert spec["replicas"] == 2
    assert spec["serviceName"] == "tandem-worker"
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    (c,) = spec["template"]["spec"]["containers"]
    assert c["args"] == ["worker"]
    assert {"name": "data", "mountPath": "/var/lib/tandem"} in c["volumeMounts"]
    env = env_of(c)
    assert env["TANDEM_BROKER"] == "kafka://k1:9092,kafka://k2:9092"
    assert env["TANDEM_STORE"] == "rocksdb://"
    assert env["TANDEM_DATA_DIR"] == "/var/lib/tandem"
    assert env["TANDEM_METRICS_PORT"] == "9464"
    assert env["TANDEM_CONFIG"] == "/etc/tandem/config.yaml"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 9464, "web": 6066}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert yaml.safe_load(by_kind(docs, "ConfigMap")["tandem-config"]["data"]["config.yaml"]) == {"sync_period": 30}
    assert by_kind(docs, "Service")["tandem-worker"]["spec"]["clusterIP"] == "None"


@needs_helm
def test_edge_rbac_is_deploy_rbac_collector_reads_and_records_events_applier_patch_only() -> None:
    docs = render("tandem-system", "edge.cluster=eu-1")
    roles = by_kind(docs, "ClusterRole")
    assert roles["tandem-collector"]["rules"] == rbac_rules(RBAC / "collector.yaml")
    assert roles["tandem-applier"]["rules"] == rbac_rules(RBAC / "applier.yaml")
    # The collector reads; its one write is the InvalidPolicy Warning Event (created, then counted).
    collector_writes = [
        rule for rule in roles["tandem-collector"]["rules"] if set(rule["verbs"]) - {"get", "list", "watch"}
    ]
    assert collector_writes == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]}]
    writes = {
        (group, res)
        for rule in roles["tandem-applier"]["rules"]
        if set(rule["verbs"]) - {"get", "list", "watch"}
        for group in rule["apiGroups"]
        for res in rule["resources"]
    }
    assert writes == {
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "deployments/scale"),
        ("apps", "statefulsets/scale"),
        ("autoscaling", "horizontalpodautoscalers"),
        # the policies' status and the Events (docs/edge.md, "Status and Events")
        ("autoscaling.k8s.io", "hvpas/status"),
        ("autoscaling.gardener.cloud", "hvpas/status"),
        ("autoscaling.mercari.com", "tortoises/status"),
        ("autoscaling.tandem.dev", "customhpas/status"),
        ("", "events"),
    }
    for rule in roles["tandem-applier"]["rules"]:
        creates = rule["resources"] == ["events"]  # the only thing it creates
        assert set(rule["verbs"]) <= {"get", "list", "watch", "patch"} | ({"create"} if creates else set())
    deployments = by_kind(docs, "Deployment")
    collector, applier = deployments["tandem-collector"], deployments["tandem-applier"]
    assert collector["spec"]["template"]["spec"]["serviceAccountName"] == "tandem-collector"
    assert applier["spec"]["template"]["spec"]["serviceAccountName"] == "tandem-applier"
    assert collector["spec"]["template"]["spec"]["containers"][0]["args"] == ["collect"]
    assert applier["spec"]["template"]["spec"]["containers"][0]["args"] == ["apply"]
    assert env_of(applier["spec"]["template"]["spec"]["containers"][0])["TANDEM_CLUSTER"] == "eu-1"
    bindings = by_kind(docs, "ClusterRoleBinding")
    assert bindings["tandem-applier"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "tandem-applier", "namespace": "tandem-system"}
    ]


@needs_helm
def test_namespaced_edge_rbac_binds_the_roles_only_in_the_listed_namespaces() -> None:
    docs = render("tandem-system", "edge.cluster=eu-1", "edge.rbac.namespaces={shop,media}", "worker.enabled=false")
    assert by_kind(docs, "ClusterRoleBinding") == {}
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted((b["metadata"]["namespace"], b["roleRef"]["name"]) for b in bindings) == [
        ("media", "tandem-applier"),
        ("media", "tandem-collector"),
        ("shop", "tandem-applier"),
        ("shop", "tandem-collector"),
    ]
    assert by_kind(docs, "StatefulSet") == {}


@needs_helm
def test_rendering_refuses_an_edge_without_cluster_and_more_workers_than_partitions() -> None:
    out = run_helm("template", "tandem", str(CHART))
    assert out.returncode != 0
    assert "edge.cluster is required when edge.enabled is true" in out.stderr
    out = run_helm("template", "tandem", str(CHART), "--set", "edge.enabled=false", "--set", "worker.replicas=9")
    assert out.returncode != 0
    assert "worker.replicas (9) must not exceed partitions (8)" in out.stderr


@needs_helm
def test_rendered_manifests_pass_server_side_dry_run_on_a_real_apiserver(kube_api: Any, kube_namespace: str) -> None:
    from kubernetes import dynamic

    docs = render(kube_namespace, "edge.cluster=eu-1", "config.sync_period=30", "collector.namespaces={shop}")
    client = dynamic.DynamicClient(kube_api)
    applied: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = kube_namespace if resource.namespaced else None
        # force: cluster-scoped RBAC objects may already exist from the edge tests of this session,
        # owned by another field manager; a dry run checks the manifests, not who owns the fields.
        result = client.server_side_apply(
            resource, body=doc, namespace=namespace, field_manager="tandem-test", dry_run="All", force_conflicts=True
        ).to_dict()
        applied[(doc["kind"], doc["metadata"]["name"])] = result
    assert sorted(applied) == sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    # 2 ServiceAccounts, 2 ClusterRoles, 2 bindings, ConfigMap, Service, StatefulSet, PDB, 2 Deployments.
    assert len(docs) == 12
    sts = applied[("StatefulSet", "tandem-worker")]
    assert sts["metadata"]["namespace"] == kube_namespace
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTP"  # defaulted by the server
    # Dry run: nothing was stored.
    from kubernetes import client as k8s

    assert k8s.AppsV1Api(kube_api).list_namespaced_stateful_set(kube_namespace).items == []
    assert k8s.AppsV1Api(kube_api).list_namespaced_deployment(kube_namespace).items == []


#: Secrets by name only: the chart never sees their content, only the names it mounts.
SECURE_SETS = (
    "edge.cluster=eu-1",
    "broker=kafka://kafka-0.kafka:9093",
    "kafkaSecurity.protocol=SASL_SSL",
    "kafkaSecurity.saslMechanism=SCRAM-SHA-512",
    "kafkaSecurity.caSecret=kafka-ca",
    r"kafkaSecurity.actuatorClusters={eu-1,us-1}",
    "kafkaSecurity.worker.passwordSecret=worker-kafka",
    "kafkaSecurity.worker.certSecret=worker-tls",
    "kafkaSecurity.collector.passwordSecret=collector-kafka",
    "kafkaSecurity.collector.certSecret=collector-tls",
    "kafkaSecurity.applier.passwordSecret=applier-kafka",
    "kafkaSecurity.applier.certSecret=applier-tls",
    "signing.inputKeysSecret=tandem-input-keys",
    "signing.decisionKeySecret=tandem-decision-key",
    "signing.decisionTtl=600",
    "signing.inputSigningKeySecret=tandem-input-key",
    "signing.trustedDecisionKeysSecret=tandem-decision-pub",
)
#: The Kafka client settings every component gets with SASL_SSL, a CA and its own mTLS certificate.
KAFKA_TLS_ENV = {
    "TANDEM_BROKER": "kafka://kafka-0.kafka:9093",
    "TANDEM_TOPIC_PREFIX": "tandem.",
    "TANDEM_PARTITIONS": "8",
    "TANDEM_REPLICATION": "3",
    "TANDEM_METRICS_PORT": "9464",
    "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
    "TANDEM_SSL_CAFILE": "/etc/tandem/kafka-ca/ca.crt",
    "TANDEM_SSL_CERTFILE": "/etc/tandem/kafka-client/tls.crt",
    "TANDEM_SSL_KEYFILE": "/etc/tandem/kafka-client/tls.key",
    "TANDEM_SASL_MECHANISM": "SCRAM-SHA-512",
    "TANDEM_SASL_PASSWORD_FILE": "/etc/tandem/kafka-user/password",
    "TANDEM_ACTUATOR_CLUSTERS": "eu-1,us-1",
}


def pod_of(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return by_kind(docs, kind)[name]["spec"]["template"]["spec"]


def secret_mounts(pod: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """mount path -> (Secret name, file mode) of every Secret volume the pod's container mounts."""
    (c,) = pod["containers"]
    secrets = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    out = {}
    for m in c["volumeMounts"]:
        if m["name"] in secrets:
            assert m["readOnly"] is True
            out[m["mountPath"]] = (secrets[m["name"]]["secretName"], oct(secrets[m["name"]]["defaultMode"]))
    return out


@needs_helm
def test_kafka_security_mtls_scram_and_signing_mount_secrets_as_files_per_component() -> None:
    docs = render("tandem-system", *SECURE_SETS)
    assert "Secret" not in {d["kind"] for d in docs}  # the chart refers to Secrets, never holds one
    worker = pod_of(docs, "StatefulSet", "tandem-worker")
    collector = pod_of(docs, "Deployment", "tandem-collector")
    applier = pod_of(docs, "Deployment", "tandem-applier")

    assert env_of(worker["containers"][0]) == {
        **KAFKA_TLS_ENV,
        "TANDEM_SASL_USERNAME": "worker",
        "TANDEM_INPUT_KEYS": "/etc/tandem/input-keys/keys",
        "TANDEM_DECISION_SIGNING_KEY": "/etc/tandem/decision-key/decision.key",
        "TANDEM_DECISION_TTL": "600",
        "TANDEM_STORE": "rocksdb://",
        "TANDEM_DATA_DIR": "/var/lib/tandem",
        "TANDEM_WEB_PORT": "6066",
        "TANDEM_STANDBY_REPLICAS": "1",
        "TANDEM_IDLE_FLUSH": "2",
        "TANDEM_READY_MAX_LAG": "10000",
        "TANDEM_READY_MAX_EVENT_AGE": "600",
    }
    assert env_of(collector["containers"][0]) == {
        **KAFKA_TLS_ENV,
        "TANDEM_SASL_USERNAME": "collector-eu-1",
        "TANDEM_INPUT_SIGNING_KEYS": "/etc/tandem/input-keys/keys",
        "TANDEM_CLUSTER": "eu-1",
        "TANDEM_INTERVAL": "30",
    }
    assert env_of(applier["containers"][0]) == {
        **KAFKA_TLS_ENV,
        "TANDEM_SASL_USERNAME": "applier-eu-1",
        "TANDEM_TRUSTED_DECISION_KEYS": "/etc/tandem/decision-key/decision.pub",
        "TANDEM_CLUSTER": "eu-1",
        "TANDEM_DRY_RUN": "false",
        "TANDEM_OFFSET_RESET": "latest",
    }

    # Each component mounts its own client certificate and password, read-only, mode 0400, and
    # only the signing key it needs: the worker's private key never reaches an edge pod.
    kafka = {"/etc/tandem/kafka-ca": ("kafka-ca", "0o400")}
    assert secret_mounts(worker) == {
        **kafka,
        "/etc/tandem/kafka-client": ("worker-tls", "0o400"),
        "/etc/tandem/kafka-user": ("worker-kafka", "0o400"),
        "/etc/tandem/input-keys": ("tandem-input-keys", "0o400"),
        "/etc/tandem/decision-key": ("tandem-decision-key", "0o400"),
    }
    assert secret_mounts(collector) == {
        **kafka,
        "/etc/tandem/kafka-client": ("collector-tls", "0o400"),
        "/etc/tandem/kafka-user": ("collector-kafka", "0o400"),
        "/etc/tandem/input-keys": ("tandem-input-key", "0o400"),
    }
    assert secret_mounts(applier) == {
        **kafka,
        "/etc/tandem/kafka-client": ("applier-tls", "0o400"),
        "/etc/tandem/kafka-user": ("applier-kafka", "0o400"),
        "/etc/tandem/decision-key": ("tandem-decision-pub", "0o400"),
    }
    assert worker["containers"][0]["volumeMounts"][:2] == [
        {"name": "data", "mountPath": "/var/lib/tandem"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]

    # Nothing secret in args or the environment: plain values, and every file variable names a
    # file inside a mounted Secret; no env entry reads a Secret (valueFrom) either.
    secret_names = {s for pod in (worker, collector, applier) for s, _ in secret_mounts(pod).values()}
    for pod in (worker, collector, applier):
        (c,) = pod["containers"]
        assert c["args"] in (["worker"], ["collect"], ["apply"])
        assert all(set(e) == {"name", "value"} for e in c["env"])
        assert not secret_names & {e["value"] for e in c["env"]}
        assert not [e for e in c["env"] if "PASSWORD" in e["name"] and not e["name"].endswith("_FILE")]
        mounted = secret_mounts(pod)
        for e in c["env"]:
            if e["value"].startswith("/etc/tandem/") and e["name"] != "TANDEM_CONFIG":
                assert e["value"].rsplit("/", 1)[0] in mounted, e


@needs_helm
def test_mtls_without_sasl_mounts_the_certificate_and_no_password() -> None:
    docs = render(
        "tandem-system",
        "edge.cluster=eu-1",
        "worker.enabled=false",
        "kafkaSecurity.protocol=SSL",
        "kafkaSecurity.caSecret=kafka-ca",
        "kafkaSecurity.collector.certSecret=collector-tls",
        "kafkaSecurity.applier.certSecret=applier-tls",
    )
    for name, cert in (("tandem-collector", "collector-tls"), ("tandem-applier", "applier-tls")):
        pod = pod_of(docs, "Deployment", name)
        env = env_of(pod["containers"][0])
        assert {k: v for k, v in env.items() if k.startswith(("TANDEM_SSL", "TANDEM_SASL", "TANDEM_SECURITY"))} == {
            "TANDEM_SECURITY_PROTOCOL": "SSL",
            "TANDEM_SSL_CAFILE": "/etc/tandem/kafka-ca/ca.crt",
            "TANDEM_SSL_CERTFILE": "/etc/tandem/kafka-client/tls.crt",
            "TANDEM_SSL_KEYFILE": "/etc/tandem/kafka-client/tls.key",
        }
        assert secret_mounts(pod) == {
            "/etc/tandem/kafka-ca": ("kafka-ca", "0o400"),
            "/etc/tandem/kafka-client": (cert, "0o400"),
        }


@needs_helm
def test_client_certificate_refused_without_tls() -> None:
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        out = run_helm(
            "template",
            "tandem",
            str(CHART),
            "--set",
            "edge.enabled=false",
            "--set",
            f"kafkaSecurity.protocol={protocol}",
            "--set",
            "kafkaSecurity.worker.passwordSecret=worker-kafka",
            "--set",
            "kafkaSecurity.worker.certSecret=worker-tls",
        )
        assert out.returncode != 0
        assert (
            f"kafkaSecurity.worker.certSecret needs kafkaSecurity.protocol SSL or SASL_SSL (mutual TLS), not {protocol}"
            in out.stderr
        )
