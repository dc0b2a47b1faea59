"""The Helm chart ``deploy/helm/tandem``: rendered by the real ``helm``, accepted by a real kube-apiserver.

``helm`` is looked up as ``$TANDEM_HELM``, on the PATH, then in ``$(go env GOPATH)/bin`` (where
``go install helm.sh/helm/v3/cmd/helm@v3.16.4`` puts it); the tests skip, saying so, without it.
The rendered manifests go to the API server with server-side apply and ``dryRun=All``: validated
and defaulted as if created (admission included), and nothing is stored.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tandem"
RBAC = ROOT / "deploy" / "rbac"
INSTALL = "go install helm.sh/helm/v3/cmd/helm@v3.16.4"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
#: The Prometheus Operator's CRDs (tests/fixtures/crds/README.md) for the monitoring objects.
MONITORING_CRDS = sorted((ROOT / "tests" / "fixtures" / "crds").glob("monitoring.coreos.com_*.yaml"))
#: Every monitoring object of the chart on (values metrics.*).
MONITORING = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.podMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
)


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
    monitored = [arg for s in MONITORING for arg in ("--set", s)]
    out = run_helm("lint", str(CHART), "--strict", "--set", "edge.cluster=eu-1", *monitored)
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


def dry_run_apply(kube_api: Any, namespace: str, docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Server-side apply of every document with dryRun=All: validated, defaulted and admitted, not stored."""
    from kubernetes import dynamic

    client = dynamic.DynamicClient(kube_api)
    applied: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in docs:
        resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        ns = namespace if resource.namespaced else None
        # force: cluster-scoped RBAC objects may already exist from the edge tests of this session,
        # owned by another field manager; a dry run checks the manifests, not who owns the fields.
        result = client.server_side_apply(
            resource, body=doc, namespace=ns, field_manager="tandem-test", dry_run="All", force_conflicts=True
        ).to_dict()
        applied[(doc["kind"], doc["metadata"]["name"])] = result
    return applied


@pytest.fixture
def crds_namespace(kube_api: Any, kube_namespace: str) -> str:
    """A fresh namespace on an API server with deploy/crds/ and the Prometheus Operator's CRDs installed."""
    from tests.integration.test_applier_kube import install_crds

    install_crds(kube_api, kube_namespace, [yaml.safe_load(p.read_text()) for p in MONITORING_CRDS])
    return kube_namespace


@needs_helm
def test_rendered_manifests_pass_server_side_dry_run_on_a_real_apiserver(kube_api: Any, crds_namespace: str) -> None:
    kube_namespace = crds_namespace
    docs = render(kube_namespace, "edge.cluster=eu-1", "config.sync_period=30", "collector.namespaces={shop}")
    applied = dry_run_apply(kube_api, kube_namespace, docs)
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


#: The chart as installed centrally and per cluster, every monitoring object on (docs/operating.md).
VARIANTS = {
    # ConfigMap, Service, StatefulSet, PDB, ServiceMonitor, PrometheusRule, the dashboard's ConfigMap.
    "central": (("edge.enabled=false", "config.sync_period=30", *MONITORING), 7),
    # 2 ServiceAccounts, 2 ClusterRoles, 2 bindings, 2 Deployments, PodMonitor, PrometheusRule, dashboard.
    "edge": (("worker.enabled=false", "edge.cluster=eu-1", "collector.namespaces={shop}", *MONITORING), 11),
}


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_central_and_edge_with_monitoring_pass_server_side_dry_run(
    kube_api: Any, crds_namespace: str, variant: str
) -> None:
    sets, count = VARIANTS[variant]
    docs = render(crds_namespace, *sets)
    applied = dry_run_apply(kube_api, crds_namespace, docs)
    assert sorted(applied) == sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert len(docs) == count
    kinds = {kind for kind, _ in applied}
    monitor = "ServiceMonitor" if variant == "central" else "PodMonitor"
    assert {monitor, "PrometheusRule", "ConfigMap"} <= kinds
    assert applied[(monitor, f"tandem-{'worker' if variant == 'central' else 'edge'}")]["metadata"]["namespace"] == (
        crds_namespace
    )
    # The rules went through the PrometheusRule CRD's schema (no admission webhook here).
    (rule,) = [v for (k, _), v in applied.items() if k == "PrometheusRule"]
    assert len(rule["spec"]["groups"][0]["rules"]) == 5


#: Secrets by name only: the chart never sees their content, only the names it mounts.
SECURE_SETS = (
    "edge.cluster=eu-1",
    "broker=kafka://kafka-0.kafka:9093",
    "kafkaSecurity.protocol=SASL_SSL",
    "kafkaSecurity.saslMechanism=SCRAM-SHA-512",
    "kafkaSecurity.caSecret=kafka-ca",
    r"kafkaSecurity.actuatorClusters={eu-1,us-1}",
    r"kafkaSecurity.inputClusters={eu-1,us-1}",
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
    "TANDEM_INPUT_CLUSTERS": "eu-1,us-1",
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


#: The Secrets SECURE_SETS names, as docs/operating.md ("With Helm") says to create them: name -> (type, keys).
SECURE_SECRETS = {
    "kafka-ca": ("Opaque", ("ca.crt",)),
    **{f"{c}-tls": ("kubernetes.io/tls", ("tls.crt", "tls.key")) for c in ("worker", "collector", "applier")},
    **{f"{c}-kafka": ("Opaque", ("password",)) for c in ("worker", "collector", "applier")},
    "tandem-input-keys": ("Opaque", ("keys",)),
    "tandem-decision-key": ("Opaque", ("decision.key",)),
    "tandem-input-key": ("Opaque", ("keys",)),
    "tandem-decision-pub": ("Opaque", ("decision.pub",)),
}


def secret_doc(name: str) -> dict[str, Any]:
    type_, keys = SECURE_SECRETS[name]
    data = {k: base64.b64encode(f"placeholder {k}\n".encode()).decode() for k in keys}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": type_, "data": data}


@needs_helm
def test_secure_variant_with_every_secret_passes_server_side_dry_run(kube_api: Any, crds_namespace: str) -> None:
    docs = render(crds_namespace, *SECURE_SETS, *MONITORING)
    secrets = [secret_doc(name) for name in sorted(SECURE_SECRETS)]
    applied = dry_run_apply(kube_api, crds_namespace, secrets + docs)
    assert sorted(applied) == sorted((d["kind"], d["metadata"]["name"]) for d in secrets + docs)
    assert len(docs) == 15  # the 11 of a default install without config, and 4 monitoring objects
    # Every Secret the pods mount is one of these, and every file a TANDEM_* variable names is a key of
    # the Secret mounted at its directory: the chart and the documented Secrets agree.
    mounted: set[str] = set()
    for kind, name in (
        ("StatefulSet", "tandem-worker"),
        ("Deployment", "tandem-collector"),
        ("Deployment", "tandem-applier"),
    ):
        pod = applied[(kind, name)]["spec"]["template"]["spec"]
        mounts = secret_mounts(pod)
        mounted |= {secret for secret, _ in mounts.values()}
        for e in pod["containers"][0]["env"]:
            directory, _, key = e["value"].rpartition("/")
            if directory in mounts:
                assert key in SECURE_SECRETS[mounts[directory][0]][1], (name, e)
    assert mounted == set(SECURE_SECRETS)


@needs_helm
def test_app_version_is_the_package_version_and_the_default_image_tag_follows_it() -> None:
    assert yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"] == VERSION  # tests/unit/test_release.py too
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["tag"] == ""

    def images(*sets: str) -> set[str]:
        docs = render("tandem-system", "edge.cluster=eu-1", *sets)
        return {
            c["image"]
            for d in docs
            if d["kind"] in ("Deployment", "StatefulSet")
            for c in d["spec"]["template"]["spec"]["containers"]
        }

    assert images() == {f"ghcr.io/tandem-dev/tandem:{VERSION}"}
    assert images("image.tag=0.2.0-rc.1", "image.repository=registry.example/tandem") == {
        "registry.example/tandem:0.2.0-rc.1"
    }


@needs_helm
@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("imagee.tag=x", "- (root): Additional property imagee is not allowed"),
        ("worker.replicass=3", "- worker: Additional property replicass is not allowed"),
        (
            "kafkaSecurity.worker.passwordSecrets=x",
            "- kafkaSecurity.worker: Additional property passwordSecrets is not allowed",
        ),
        ("metrics.serviceMonitor.enable=true", "- metrics.serviceMonitor: Additional property enable is not allowed"),
        ("worker.replicas=two", "- worker.replicas: Invalid type. Expected: integer, given: string"),
        ("applier.dryRun=yes", "- applier.dryRun: Invalid type. Expected: boolean, given: string"),
        ("kafkaSecurity.protocol=TLS", "- kafkaSecurity.protocol: kafkaSecurity.protocol must be one of the following"),
        ("broker=kafka-0:9092", "- broker: Does not match pattern '^kafka://'"),
        ("metrics.serviceMonitor.interval=30", "- metrics.serviceMonitor.interval: Invalid type. Expected: string"),
    ],
)
def test_a_misspelled_or_mistyped_value_fails_naming_it(value: str, says: str) -> None:
    for command in ("template", "lint"):
        args = ["tandem", str(CHART)] if command == "template" else [str(CHART)]
        out = run_helm(command, *args, "--set", "edge.cluster=eu-1", "--set", value)
        assert out.returncode != 0, (command, value)
        assert says in out.stdout + out.stderr, (command, out.stdout + out.stderr)


def test_values_yaml_is_valid_against_its_schema_and_the_schema_knows_every_value() -> None:
    """values.schema.json closes every object of values.yaml (additionalProperties false) except the
    Kubernetes fields passed through as they are, so a misspelling anywhere is caught."""
    import jsonschema

    schema = json_load(CHART / "values.schema.json")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)
    free = {"config", "podSecurityContext", "containerSecurityContext", "resources", "nodeSelector", "affinity"}
    free |= {"podAnnotations", "labels", "annotations"}

    def walk(node: dict[str, Any], value: Any, path: str) -> None:
        if isinstance(value, dict) and path.rsplit(".", 1)[-1] not in free:
            assert node.get("additionalProperties") is False, f"{path or '(root)'} is open in values.schema.json"
            for key, sub in value.items():
                assert key in node["properties"], f"{path}.{key} is not in values.schema.json"
                walk(node["properties"][key], sub, f"{path}.{key}" if path else key)

    walk(schema, values, "")


def json_load(path: Path) -> Any:
    import json

    return json.loads(path.read_text())


@needs_helm
def test_helm_install_on_the_apiserver_refuses_a_misspelled_value_and_takes_the_chart(
    kube_apiserver: str, crds_namespace: str
) -> None:
    """`helm install --dry-run=server` against the real API server (the CRDs installed): the install a
    user runs, refused at once for a misspelled value, accepted with every part and monitor on."""

    def install(*sets: str) -> subprocess.CompletedProcess[str]:
        # A release name of its own: cluster-scoped objects another test applied from deploy/rbac
        # (ClusterRole tandem-collector) belong to no release, and helm refuses to adopt them.
        release = f"tandem-{crds_namespace.rsplit('-', 1)[-1][:8]}"
        args = ["install", release, str(CHART), "-n", crds_namespace, "--kubeconfig", kube_apiserver]
        args += ["--dry-run=server", "--set", "edge.cluster=eu-1"]
        for s in (*MONITORING, *sets):
            args += ["--set", s]
        return run_helm(*args)

    refused = install("worker.persistence.storageClas=fast")
    assert refused.returncode != 0
    assert "- worker.persistence: Additional property storageClas is not allowed" in refused.stderr
    taken = install()
    assert taken.returncode == 0, taken.stderr
    assert "STATUS: pending-install" in taken.stdout
    kinds = [d["kind"] for d in yaml.safe_load_all(taken.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]) if d]
    assert {"StatefulSet", "Deployment", "ServiceMonitor", "PodMonitor", "PrometheusRule"} <= set(kinds)
