"""``tandem collect`` against the real kube-apiserver and the real Kafka broker (no mocks).

The collector runs in-process (its loop in a thread) as the ``tandem-collector`` service account of
deploy/rbac/collector.yaml (impersonation), so the RBAC manifest is exercised too.  The test
apiserver has no controllers: HPA and VPA statuses and pod statuses are written by the tests through
the status subresources, as the controllers would.  The round trip: the collector's events, read
back from Kafka, give the same decisions through ``tandem replay`` (a JSON Lines file), through an
in-process :class:`scaling.engine.Engine` and through ``tandem worker`` reading the same topics;
the worker's decision then goes through ``tandem apply`` back into the cluster.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cli.main import main as tandem
from edge.applier import ApplierConfig
from edge.collector import CollectorConfig, run
from edge.kube import DEPLOYMENTS, HPAS, PODS, POLICY_RESOURCES, VPAS, request
from edge.translate import Collector
from ops.observability import Metrics
from scaling.cloudevents import APPLIED, DECISION
from scaling.engine import Engine
from scaling.events import PolicyEvent, decode_event
from scaling.vocabulary import EVENT_TYPES
from streams.merge import decode_watermark, partition_key, policy_key
from streams.settings import KafkaSettings
from streams.topics import INPUT_TOPICS, ensure_topics, topic_name
from tests.fixtures.kafka import run_sync, wait_for
from tests.integration.test_applier_kube import (
    CLUSTER,
    REPO,
    Harness,
    create,
    deployment,
    hvpa,
    impersonating,
    install_crds,
    install_rbac,
    read,
)
from tests.integration.test_metrics_worker import free_port, get, scrape

HVPA_V1 = POLICY_RESOURCES[0]
VPA_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "verticalpodautoscalers.autoscaling.k8s.io",
        "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/63797"},
    },
    "spec": {
        "group": "autoscaling.k8s.io",
        "scope": "Namespaced",
        "names": {
            "kind": "VerticalPodAutoscaler",
            "listKind": "VerticalPodAutoscalerList",
            "plural": "verticalpodautoscalers",
            "singular": "verticalpodautoscaler",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


# --- set-up ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster_setup(kube_apiserver: str, kafka_broker: str) -> dict[str, Any]:
    from edge.kube import api_client

    admin = api_client(kube_apiserver)
    ns = f"tandem-setup-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    install_crds(admin, ns, [VPA_CRD])
    install_rbac(admin)
    return {
        "admin": admin,
        "kubeconfig": kube_apiserver,
        "collector_api": impersonating(kube_apiserver, "tandem-collector"),
        "applier_api": impersonating(kube_apiserver, "tandem-applier"),
        "broker": kafka_broker,
    }


def write_status(api: Any, res: Any, ns: str, name: str, status: dict[str, Any]) -> None:
    obj = request(api, "GET", res.path(ns, name))
    obj["status"] = status
    request(api, "PUT", res.path(ns, name, "status"), body=obj)


def pod(name: str, app: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app, "pod-template-hash": "abc"}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }


def pod_status(ready: bool, started: str = "2025-11-04T10:00:00Z") -> dict[str, Any]:
    return {
        "phase": "Running",
        "startTime": started,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }


def hpa(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
                }
            ],
        },
    }


def hpa_status(desired: int, current: int = 2, limited: bool = True) -> dict[str, Any]:
    return {
        "currentReplicas": current,
        "desiredReplicas": desired,
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"},
            {"type": "ScalingLimited", "status": "True" if limited else "False", "reason": "TooManyReplicas"},
        ],
    }


def vpa(name: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "updatePolicy": {"updateMode": "Off"},
        },
    }


def vpa_status(cpu: str, memory: str) -> dict[str, Any]:
    rec = {"cpu": cpu, "memory": memory}
    return {
        "recommendation": {
            "containerRecommendations": [
                {"containerName": "app", "target": rec, "lowerBound": rec, "upperBound": rec, "uncappedTarget": rec}
            ]
        },
        "conditions": [{"type": "RecommendationProvided", "status": "True"}],
    }


def build_workload(api: Any, ns: str, name: str = "web") -> None:
    """A managed Deployment with one ready pod, an HPA at its max (limited), a VPA above its
    requests and an Hvpa: enough for HVPA to scale both ways at the first tick."""
    create(api, DEPLOYMENTS, ns, deployment(name))
    create(api, PODS, ns, pod(f"{name}-0", name))
    write_status(api, PODS, ns, f"{name}-0", pod_status(True))
    create(api, PODS, ns, pod("stranger", "other"))  # matched by no selector
    create(api, HPAS, ns, hpa(name, name))
    write_status(api, HPAS, ns, name, hpa_status(5))
    create(api, VPAS, ns, vpa(name, name))
    write_status(api, VPAS, ns, name, vpa_status("500m", "3G"))
    create(api, HVPA_V1, ns, hvpa(name, name))


# --- the collector and the topics -----------------------------------------------------------------


class Running:
    """The collector in a thread, and a reader of the input topics in another."""

    def __init__(self, api: Any, broker: str, namespace: str, watch_timeout: int = 5) -> None:
        self.settings = KafkaSettings(broker=broker, prefix=f"t{uuid.uuid4().hex[:8]}.", partitions=1)
        run_sync(ensure_topics(self.settings))
        self.config = CollectorConfig(CLUSTER, (namespace,), interval=1.0, watch_timeout=watch_timeout)
        self.metrics = Metrics()
        self.state = Collector(CLUSTER, self.metrics)
        self.stop = threading.Event()
        self.records: list[tuple[str, int, bytes, dict[str, Any]]] = []  # topic, kafka ts, key, event
        self.marks: list[tuple[str, int, bytes, dict[str, Any]]] = []  # topic, partition, key, watermark
        self.order: list[tuple[str, int, bool, float]] = []  # topic, partition, is a watermark, ts
        self.errors: list[BaseException] = []
        self._reader_stop = threading.Event()
        self.collector = threading.Thread(target=self._collect, args=(api,), daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.collector.start()

    def _collect(self, api: Any) -> None:
        try:
            asyncio.run(run(self.config, api, settings=self.settings, stop=self.stop, collector=self.state))
        except BaseException as exc:
            self.errors.append(exc)

    def _read(self) -> None:
        async def go() -> None:
            from aiokafka import AIOKafkaConsumer

            consumer = AIOKafkaConsumer(
                *(topic_name(self.settings.prefix, t) for t in INPUT_TOPICS),
                bootstrap_servers=self.settings.bootstrap,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
            )
            await consumer.start()
            try:
                while not self._reader_stop.is_set():
                    for tp, messages in (await consumer.getmany(timeout_ms=200)).items():
                        for m in messages:
                            value = orjson.loads(m.value)
                            # The collector's watermarks (docs/contract.md §3a) apart from its events,
                            # in read order per topic-partition with the events' ts before them.
                            self.order.append((tp.topic, tp.partition, value["type"] == "watermark", value["ts"]))
                            if value["type"] == "watermark":
                                self.marks.append((tp.topic, tp.partition, m.key, value))
                            else:
                                self.records.append((tp.topic, m.timestamp, m.key, value))
            finally:
                await consumer.stop()

        try:
            asyncio.run(go())
        except BaseException as exc:
            self.errors.append(exc)

    def events(self, kind: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        if self.errors:
            raise self.errors[0]
        return [
            ev
            for _, _, _, ev in list(self.records)
            if (kind is None or ev["type"] == kind) and (name is None or ev["workload"]["name"] == name)
        ]

    def wait(self, predicate: Any, message: str, timeout: float = 30.0) -> Any:
        return wait_for(lambda: predicate(self), timeout, interval=0.1, message=message)

    def stop_collecting(self) -> None:
        self.stop.set()
        self.collector.join(30)

    def close(self) -> None:
        self.stop_collecting()
        self._reader_stop.set()
        self.reader.join(30)


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    try:
        yield started
    finally:
        for r in started:
            r.close()


def initial_state_seen(r: Running) -> bool:
    workloads = [e for e in r.events("workload", "web") if [p["name"] for p in e.get("pods", [])] == ["web-0"]]
    return bool(workloads and r.events("hpa", "web") and r.events("vpa", "web") and r.events("policy", "web"))


# --- the worker -----------------------------------------------------------------------------------


class Worker:
    """``tandem worker`` in a subprocess (options by environment: docs/contract.md §7)."""

    def __init__(self, tmp: Path, broker: str, prefix: str) -> None:
        self.log = tmp / "worker.log"
        self._fh = self.log.open("wb")
        env = {
            **os.environ,
            "TANDEM_BROKER": broker,
            "TANDEM_TOPIC_PREFIX": prefix,
            "TANDEM_PARTITIONS": "1",
            "TANDEM_STORE": "memory://",
            "TANDEM_WITHOUT_WEB": "1",
            "TANDEM_IDLE_FLUSH": "1",
            "TANDEM_STANDBY_REPLICAS": "0",
            "TANDEM_COMMIT_INTERVAL": "0.5",
            "TANDEM_CLUSTER": CLUSTER,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"],
            env=env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._fh.close()


def read_topic(broker: str, topic: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            out: list[dict[str, Any]] = []
            while await consumer.position(tp) < end:
                for messages in (await consumer.getmany(timeout_ms=200)).values():
                    out.extend(orjson.loads(m.value) for m in messages)
            return out
        finally:
            await consumer.stop()

    return run_sync(go())


# --- tests ------------------------------------------------------------------------------------------


@pytest.mark.kube
@pytest.mark.kafka
def test_collected_events_round_trip_to_the_workers_decision_and_back_into_the_cluster(
    cluster_setup: dict[str, Any], kube_namespace: str, tmp_path: Path, running: list[Running]
) -> None:
    admin, ns, broker = cluster_setup["admin"], kube_namespace, cluster_setup["broker"]
    build_workload(admin, ns)
    r = Running(cluster_setup["collector_api"], broker, ns)
    running.append(r)
    r.wait(initial_state_seen, "workload (with its pod), hpa, vpa and policy events")
    r.stop_collecting()  # the input topics are now fixed: the worker and the replay see the same

    def by_type(events: list[dict[str, Any]]) -> dict[str, float]:
        return {t: float(sum(1 for e in events if e["type"] == t)) for t in {e["type"] for e in events}}

    def counted() -> dict[str, float]:
        return {
            t: v for t in EVENT_TYPES if (v := r.metrics.registry.get_sample_value("tandem_events_total", {"type": t}))
        }

    # Every event the broker acknowledged is counted once, by type.
    r.wait(lambda r: by_type(r.events()) == counted(), lambda: f"{by_type(r.events())} == {counted()}", 10)

    events = r.events()
    # Watermarks: a round on every input topic-partition, keyed by the cluster, and each after
    # every event of its topic-partition stamped at or before it (what the worker relies on).
    assert r.marks and {(t, p) for t, p, _, _ in r.marks} == {
        (topic_name(r.settings.prefix, t), p) for t in INPUT_TOPICS for p in range(r.settings.partitions)
    }
    for _t, _p, key, mark in r.marks:
        assert key == CLUSTER.encode() and decode_watermark(key, mark) == (CLUSTER, mark["ts"])
    for t, p in {(t, p) for t, p, _, _ in r.order}:
        seen = [(is_mark, ts) for tt, pp, is_mark, ts in r.order if (tt, pp) == (t, p)]
        for i, (is_mark, ts) in enumerate(seen):
            if is_mark:
                assert all(later > ts for m, later in seen[i + 1 :] if not m), (t, p, ts)
    for topic, kafka_ts, key, ev in r.records:
        decoded = decode_event(ev)  # every event is one the contract accepts
        workload_key = f"{CLUSTER}/{ns}/Deployment/web".encode()
        # A policy is keyed by its workload and itself: one compacted record per policy.
        assert key == (policy_key(decoded) if isinstance(decoded, PolicyEvent) else workload_key)
        assert partition_key(key) == workload_key
        assert kafka_ts == round(ev["ts"] * 1000)
        assert topic == topic_name(
            r.settings.prefix, {"workload": "workloads", "policy": "policies"}.get(ev["type"], ev["type"])
        )
    assert not r.events(name="other") and not any(ev["workload"]["name"] == "stranger" for ev in events)
    workload = r.events("workload")[-1]
    assert workload["replicas"] == 2 and workload["ready_replicas"] == 0
    assert workload["containers"]["app"] == {
        "requests": {"cpu": "100m", "memory": "200M"},
        "limits": {"cpu": "1", "memory": "1G"},
    }
    assert workload["pods"] == [{"name": "web-0", "ready": True, "phase": "Running", "started": 1762250400.0}]
    h = r.events("hpa")[-1]
    assert (h["name"], h["desired_replicas"], h["current_replicas"], h["min_replicas"], h["max_replicas"]) == (
        "web",
        5,
        2,
        1,
        5,
    )
    assert h["metrics"][0]["resource"]["name"] == "cpu" and h["conditions"][1]["type"] == "ScalingLimited"
    v = r.events("vpa")[-1]
    assert v["containers"]["app"]["target"] == {"cpu": "500m", "memory": "3G"}
    assert v["containers"]["app"]["uncapped_target"] == {"cpu": "500m", "memory": "3G"}
    p = r.events("policy")[-1]["policy"]
    assert p["kind"] == "Hvpa" and p["metadata"] == {
        "name": "web",
        "namespace": ns,
        "annotations": {"hpa-controller": "hvpa"},
    }
    assert not r.events("metric")  # metrics.k8s.io is not served by the test apiserver

    # 1. tandem replay of the same events, from a JSON Lines file.
    stream = tmp_path / "collected.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in events))
    out = tmp_path / "audit.jsonl"
    assert tandem(["replay", str(stream), "--out", str(out), "--cluster", CLUSTER]) == 0
    replayed = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    decisions = [e for e in replayed if e["type"] == DECISION]
    assert len(decisions) == 1, replayed
    d = decisions[0]["data"]
    assert d["replicas"] == {"from": 2, "to": 4}
    assert d["containers"]["app"]["requests"]["memory"] == {"from": "200M", "to": "1320000k"}

    # 2. The in-process engine, fed in event-time order, agrees.
    engine_audit = [ev for kind, ev in Engine().run(sorted(events, key=lambda e: e["ts"])) if kind == "audit"]
    assert [orjson.dumps(e) for e in engine_audit] == [orjson.dumps(e) for e in replayed]

    # 3. tandem worker reading the topics the collector wrote gives the same bytes.
    worker = Worker(tmp_path, broker, r.settings.prefix)
    try:
        audit_topic = topic_name(r.settings.prefix, "audit")
        got = wait_for(
            lambda: (lambda a: a if len(a) >= len(replayed) else None)(read_topic(broker, audit_topic)),
            90,
            interval=0.5,
            message=lambda: f"the worker's audit ({worker.text()[-2000:]})",
        )
        assert [orjson.dumps(e) for e in got] == [orjson.dumps(e) for e in replayed]
        actuator = read_topic(broker, topic_name(r.settings.prefix, "actuator"))
        assert [e["id"] for e in actuator] == [decisions[0]["id"]]
    finally:
        worker.stop()
    assert "Traceback" not in worker.text(), worker.text()[-4000:]

    # 4. The worker's decision, through tandem apply, changes the Deployment.
    applier = Harness(broker, cluster_setup["applier_api"], ApplierConfig(CLUSTER), prefix=r.settings.prefix)
    try:
        result = applier.result(decisions[0]["id"])
    finally:
        applier.close()
    assert result["type"] == APPLIED, result
    dep = read(admin, DEPLOYMENTS, ns, "web")
    assert dep["spec"]["replicas"] == 4
    app = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "app")
    assert app["resources"]["requests"] == {"cpu": "260m", "memory": "1320M"}


@pytest.mark.kube
@pytest.mark.kafka
def test_the_collector_follows_changes_and_deletions(
    cluster_setup: dict[str, Any], kube_namespace: str, running: list[Running]
) -> None:
    admin, ns = cluster_setup["admin"], kube_namespace
    build_workload(admin, ns)
    # One-second watches: each ends and is resumed from its resourceVersion many times below.
    r = Running(cluster_setup["collector_api"], cluster_setup["broker"], ns, watch_timeout=1)
    running.append(r)
    r.wait(initial_state_seen, "the initial events")
    n_workload = len(r.events("workload"))

    # Scaling the Deployment and a pod turning unready: new workload events.
    request(
        admin,
        "PATCH",
        DEPLOYMENTS.path(ns, "web", "scale"),
        body={"spec": {"replicas": 3}},
        content_type="application/merge-patch+json",
    )
    r.wait(lambda r: r.events("workload")[-1]["replicas"] == 3, "a workload event with 3 replicas")
    write_status(admin, PODS, ns, "web-0", pod_status(False))
    r.wait(lambda r: r.events("workload")[-1]["pods"][0]["ready"] is False, "the pod unready")
    # A pod being deleted no longer counts (the HPA controller ignores it).
    create(
        admin,
        PODS,
        ns,
        {**pod("web-1", "web"), "metadata": {**pod("web-1", "web")["metadata"], "finalizers": ["tandem.dev/test"]}},
    )
    r.wait(lambda r: [p["name"] for p in r.events("workload")[-1]["pods"]] == ["web-0", "web-1"], "web-1 listed")
    request(admin, "DELETE", PODS.path(ns, "web-1"))
    r.wait(lambda r: [p["name"] for p in r.events("workload")[-1]["pods"]] == ["web-0"], "web-1 dropped")
    request(
        admin,
        "PATCH",
        PODS.path(ns, "web-1"),
        body={"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    # A new HPA status and a new VPA recommendation.
    write_status(admin, HPAS, ns, "web", hpa_status(3, current=3, limited=False))
    r.wait(lambda r: r.events("hpa")[-1]["desired_replicas"] == 3, "the new hpa event")
    write_status(admin, VPAS, ns, "web", vpa_status("700m", "2G"))
    r.wait(lambda r: r.events("vpa")[-1]["containers"]["app"]["target"]["cpu"] == "700m", "the new vpa event")

    # An invalid policy edit is not sent (the last valid one stays); a deletion sends null.
    n_policy = len(r.events("policy"))
    bad = read(admin, HVPA_V1, ns, "web")
    bad["spec"]["weightBasedScalingIntervals"][0]["vpaWeight"] = 40.5  # the CRD takes it, tandem does not
    request(admin, "PUT", HVPA_V1.path(ns, "web"), body=bad)
    request(admin, "DELETE", HVPA_V1.path(ns, "web"))
    r.wait(lambda r: r.events("policy")[-1]["policy"] is None, "the policy deletion")
    assert len(r.events("policy")) == n_policy + 1
    assert r.metrics.registry.get_sample_value("tandem_events_rejected_total", {"type": "policy"}) == 1

    # Unchanged state is not sent again: a label on the Deployment changes nothing tandem reads.
    count = len(r.events("workload"))
    request(
        admin,
        "PATCH",
        DEPLOYMENTS.path(ns, "web"),
        body={"metadata": {"labels": {"touched": "yes"}}},
        content_type="application/merge-patch+json",
    )
    request(
        admin,
        "PATCH",
        DEPLOYMENTS.path(ns, "web", "scale"),
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    r.wait(lambda r: r.events("workload")[-1]["replicas"] == 4, "replicas 4")
    assert len(r.events("workload")) == count + 1
    assert len(r.events("workload")) > n_workload

    # Event time: never backwards within a topic (one workload, one partition); Kafka timestamp = ts.
    for topic in {t for t, _, _, _ in r.records}:
        ts = [ev["ts"] for t, _, _, ev in r.records if t == topic]
        assert ts == sorted(ts), topic
    assert all(k == round(ev["ts"] * 1000) for _, k, _, ev in r.records)
    for _, _, _, ev in r.records:
        decode_event(ev)
    # The watches ended and resumed from their resourceVersion (one list each, no relist).
    wait_for(lambda: r.state.resumes.get("deployments.apps", 0) >= 2, 10, message="two watch resumptions")
    assert r.state.lists and set(r.state.lists.values()) == {1}, r.state.lists


def test_relist_turns_vanished_objects_into_deletions_and_metrics_batch_per_workload() -> None:
    """The collector's bookkeeping, without a cluster: what a relist after ``410 Gone`` does, and
    how ``metrics.k8s.io`` PodMetrics become one batch per workload."""
    from edge.kube import STATEFULSETS

    c = Collector("c1")
    hv = {**hvpa("web", "web"), "metadata": {"name": "web", "namespace": "shop"}}
    assert [e["policy"]["kind"] for e in c.observe("SYNC", HVPA_V1, ("shop", [hv]), 100.0)] == ["Hvpa"]
    # The watch was down while the policy was deleted; the relist finds it gone.
    gone = c.observe("SYNC", HVPA_V1, ("shop", []), 101.0)
    assert gone == [
        {
            "type": "policy",
            "ts": 101.0,
            "workload": {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"},
            "policy": None,
            "deleted": {
                "apiVersion": "autoscaling.k8s.io/v1alpha1",
                "kind": "Hvpa",
                "namespace": "shop",
                "name": "web",
            },
        }
    ]
    assert c.observe("SYNC", HVPA_V1, ("shop", []), 102.0) == []  # nothing twice

    sts = {**deployment("db", kind="StatefulSet"), "metadata": {"name": "db", "namespace": "shop"}}
    dep = {**deployment("web"), "metadata": {"name": "web", "namespace": "shop"}}
    c.observe("ADDED", STATEFULSETS, sts, 103.0)
    c.observe("ADDED", DEPLOYMENTS, dep, 103.0)
    for name, app in (("web-0", "web"), ("web-1", "web"), ("db-0", "db")):
        p = {
            **pod(name, app),
            "metadata": {**pod(name, app)["metadata"], "namespace": "shop"},
            "status": pod_status(True),
        }
        c.observe("ADDED", PODS, p, 104.0)
    pm = [
        {
            "metadata": {"name": n, "namespace": "shop"},
            "containers": [{"name": "app", "usage": {"cpu": "25m", "memory": "30Mi"}}],
        }
        for n in ("web-0", "web-1", "db-0", "unknown-0")
    ]
    batches = c.metric_events(pm, 90.0)  # a clock behind the workload's last event: ts does not go back
    assert [(b["workload"]["kind"], b["workload"]["name"], len(b["samples"])) for b in batches] == [
        ("Deployment", "web", 2),
        ("StatefulSet", "db", 1),
    ]
    assert all(b["ts"] >= 104.0 for b in batches)
    assert batches[0]["samples"][0] == {
        "pod": "web-0",
        "container": "app",
        "ready": True,
        "cpu": "25m",
        "memory": "30Mi",
    }
    for b in batches:
        decode_event(b)

    # An OOM kill seen in a pod's status is reported once per restart.
    oom = {
        **pod("web-0", "web"),
        "metadata": {**pod("web-0", "web")["metadata"], "namespace": "shop", "uid": "u1"},
        "status": {
            **pod_status(True),
            "containerStatuses": [
                {"name": "app", "restartCount": 1, "lastState": {"terminated": {"reason": "OOMKilled"}}}
            ],
        },
    }
    first = [e for e in c.observe("MODIFIED", PODS, oom, 105.0) if e["type"] == "metric"]
    assert [(e["pod"], e["container"], e["oom"]) for e in first] == [("web-0", "app", True)]
    assert not [e for e in c.observe("MODIFIED", PODS, oom, 106.0) if e["type"] == "metric"]


@pytest.mark.kube
def test_the_command_line_writes_json_lines(cluster_setup: dict[str, Any], kube_namespace: str, tmp_path: Path) -> None:
    """``tandem collect ... --out FILE`` (no Kafka) in a subprocess; SIGTERM ends it cleanly.  Its
    metrics count what it wrote, by type, and time its lists."""
    admin, ns = cluster_setup["admin"], kube_namespace
    build_workload(admin, ns)
    out = tmp_path / "collected.jsonl"
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "collect",
            "--cluster",
            CLUSTER,
            "--kubeconfig",
            cluster_setup["kubeconfig"],
            "--namespace",
            ns,
            "--out",
            str(out),
            "--watch-timeout",
            "5",
            "--metrics-port",
            str(port),
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def types() -> set[str]:
            if not out.exists():
                return set()
            return {orjson.loads(line)["type"] for line in out.read_bytes().splitlines() if line.endswith(b"}")}

        wait_for(
            lambda: types() >= {"workload", "hpa", "vpa", "policy"}, 30, interval=0.2, message="events in the file"
        )

        def counted() -> dict[str, float]:
            return {
                dict(labels)["type"]: v for (name, labels), v in scrape(port).items() if name == "tandem_events_total"
            }

        def written() -> dict[str, float]:
            lines = [orjson.loads(line) for line in out.read_bytes().splitlines() if line.endswith(b"}")]
            return {t: float(sum(1 for e in lines if e["type"] == t)) for t in {e["type"] for e in lines}}

        wait_for(lambda: counted() == written(), 10, interval=0.1, message=lambda: f"{counted()} == {written()}")
        assert counted()["workload"] > 0

        def calls() -> dict[str, float]:
            return {
                dict(labels)["operation"]: v
                for (name, labels), v in scrape(port).items()
                if name == "tandem_kube_api_latency_seconds_count"
            }

        timed = {"list_pods", "list_deployments", "list_hvpas", "discover_pod_metrics"}
        wait_for(lambda: timed <= set(calls()), 10, interval=0.1, message=lambda: f"{timed} timed: {calls()}")
        samples = scrape(port)
        assert sum(v for (name, _), v in samples.items() if name == "tandem_events_rejected_total") == 0
        assert get(port, "/healthz") == (200, "ok\n") and get(port, "/readyz") == (200, "ok\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = out.read_bytes().splitlines()
    assert all(decode_event(orjson.loads(line)) for line in lines)
    assert time.time() - orjson.loads(lines[0])["ts"] < 120
