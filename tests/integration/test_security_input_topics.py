"""One cluster's collector cannot erase another's state (issue 29 item 1), on the real secure broker.

An installation of its own prefix with input topics per cluster (``--input-clusters a,b``) and the
ACLs of ``scripts/kafka-acls.sh --input-clusters a,b``: collector-a may write cluster a's five
input topics and the dead-letter topic, nothing else.  Signed streams of clusters a and b are
published; then collector-a tries every way to make cluster b's policy or workload disappear:
tombstones on b's topics and on the shared ones (refused by the broker), b's events through the
collector's own sink (refused, counted and dead-lettered by the collector), and a tombstone of b's
policy on its own topic (refused, counted and dead-lettered by the worker).  A worker decides; a
fresh one (new consumer group, empty store) rebuilds both clusters and decides what replay decides.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError

from edge.collector import _KafkaSink
from ops.observability import Metrics
from scaling.cloudevents import BLOCKED, DECISION
from streams.security import KafkaSecurity, Secret
from streams.settings import KafkaSettings
from streams.signing import InputKey
from streams.topics import TOPIC_OF_TYPE
from tests.fixtures.kafka import run_sync, wait_for
from tests.fixtures.kafka_secure import SecureBroker
from tests.integration.test_security_pipeline import admin_command_config, kafka_acls, records, stream_for, tandem

pytestmark = pytest.mark.kafka

CLUSTERS = ("a", "b")
KEYS = {c: f"input-key-of-{c}-" + uuid.uuid4().hex for c in CLUSTERS}
INPUTS = tuple(TOPIC_OF_TYPE.values())


@dataclass
class Install:
    broker: SecureBroker
    prefix: str
    tmp: Path

    def settings(self, user: str, **kw: Any) -> KafkaSettings:
        security = KafkaSecurity(
            protocol="SASL_SSL",
            ca_file=str(self.broker.ca_file),
            mechanism="SCRAM-SHA-512",
            username=user,
            password=Secret(self.broker.passwords[user]),
        )
        return KafkaSettings(
            broker=self.broker.bootstrap,
            prefix=self.prefix,
            partitions=1,
            security=security,
            actuator_clusters=CLUSTERS,
            input_clusters=CLUSTERS,
            **kw,
        )

    def env(self, user: str, **extra: str) -> dict[str, str]:
        return {
            "TANDEM_BROKER": self.broker.bootstrap,
            "TANDEM_TOPIC_PREFIX": self.prefix,
            "TANDEM_PARTITIONS": "1",
            "TANDEM_RETENTION_MS": "-1",
            "TANDEM_ACTUATOR_CLUSTERS": ",".join(CLUSTERS),
            "TANDEM_INPUT_CLUSTERS": ",".join(CLUSTERS),
            "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
            "TANDEM_SSL_CAFILE": str(self.broker.ca_file),
            "TANDEM_SASL_MECHANISM": "SCRAM-SHA-512",
            "TANDEM_SASL_USERNAME": user,
            "TANDEM_SASL_PASSWORD_FILE": str(self.broker.password_file(user)),
            **extra,
        }

    def keys_file(self) -> Path:
        path = self.tmp / "input-keys"
        path.write_text("".join(f"{c}-1 {c} {KEYS[c]}\n" for c in CLUSTERS))
        path.chmod(0o600)
        return path

    def topic(self, suffix: str, cluster: str | None = None) -> str:
        return f"{self.prefix}{suffix}" + (f".{cluster}" if cluster else "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_worker(inst: Install, app_id: str, done: Callable[[], bool], what: str) -> tuple[str, str]:
    """A worker in consumer group ``<prefix><app_id>`` (granted by the ACLs) with an empty (memory)
    store, until ``done``; its log and its /metrics, read just before it is stopped."""
    port = _free_port()
    log = inst.tmp / f"{app_id}.log"
    env = inst.env(
        "worker",
        TANDEM_APP_ID=f"{inst.prefix}{app_id}",
        TANDEM_STORE="memory://",
        TANDEM_WITHOUT_WEB="1",
        TANDEM_IDLE_FLUSH="1",
        TANDEM_REBALANCE_TIMEOUT="10",
        TANDEM_SESSION_TIMEOUT="10",
        TANDEM_COMMIT_INTERVAL="0.5",
        TANDEM_STANDBY_REPLICAS="0",
        TANDEM_LOGLEVEL="info",
        TANDEM_METRICS_PORT=str(port),
        TANDEM_INPUT_KEYS=str(inst.keys_file()),
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TANDEM_")}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"],
            env={**clean, **env},
            cwd=inst.tmp,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
        try:

            def finished() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"worker exited {proc.returncode}: {log.read_text()[-4000:]}")
                return done()

            wait_for(finished, 300, interval=1.0, message=lambda: f"{what} ({log.read_text()[-3000:]})")
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
    return log.read_text(errors="replace"), metrics


def _sample(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


@pytest.fixture(scope="module")
def install(secure_kafka: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> Install:
    tmp = tmp_path_factory.mktemp("input-topics")
    inst = Install(secure_kafka, f"i{uuid.uuid4().hex[:8]}.", tmp)
    config = admin_command_config(secure_kafka, tmp / "admin.properties")
    acls = kafka_acls(
        "--bootstrap-server", secure_kafka.bootstrap, "--command-config", str(config), "--prefix", inst.prefix,
        "--clusters", ",".join(CLUSTERS), "--input-clusters", ",".join(CLUSTERS), "--publisher", "publisher",
    )  # fmt: skip
    assert acls.returncode == 0, acls.stderr
    # The fresh worker's consumer group (a new group is what an operator would start).
    fresh = kafka_acls(
        "--bootstrap-server", secure_kafka.bootstrap, "--command-config", str(config), "--prefix", inst.prefix,
        "--app-id", f"{inst.prefix}worker-fresh",
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    created = tandem(["topics", "create"], inst.env("worker"))
    assert created.returncode == 0, created.stderr
    for c in CLUSTERS:
        for s in INPUTS:
            assert f"created {inst.topic(s, c)}\n" in created.stdout
    return inst


def test_acl_script_grants_a_cluster_with_its_own_input_topics_those_alone_by_literal_acls() -> None:
    done = kafka_acls(
        "--bootstrap-server", "k:9093", "--prefix", "p.", "--clusters", "eu-1", "--input-clusters", "eu-1",
        "--publisher", "pub", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    own = " ".join(f"--topic p.{s}.eu-1" for s in INPUTS)
    assert (
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:collector-eu-1 --operation Write "
        f"--operation Describe {own} --topic p.deadletter"
    ) in lines
    shared = " ".join(f"--topic p.{s}" for s in INPUTS)
    assert lines[-1] == (
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:pub --operation Write "
        f"--operation Describe {shared} {own}"
    )
    # Literal ACLs only (the default pattern type): a prefix p.metrics.eu-1 would grant p.metrics.eu-10 too.
    assert all("prefixed" not in ln for ln in lines if "collector" in ln or "pub" in ln)
    bad = kafka_acls("--bootstrap-server", "k:9093", "--input-clusters", "eu/1", "--dry-run")
    assert bad.returncode == 2 and "eu/1 cannot be part of a Kafka topic name" in bad.stderr


@pytest.fixture(scope="module")
def attacked(install: Install) -> dict[str, Any]:
    """Both clusters' streams published; collector-a's attempts on cluster b; a first worker's run."""
    inst, tmp = install, install.tmp
    events: list[dict[str, Any]] = []
    policy_files: dict[str, list[str]] = {}
    streams: dict[str, Path] = {}
    for cluster in CLUSTERS:
        evs, pols = stream_for(cluster, "web", 60)
        events += evs
        policy_files[cluster] = []
        for i, pol in enumerate(pols):
            path = tmp / f"policy-{cluster}-{i}.yaml"
            path.write_text(yaml.safe_dump(pol))
            policy_files[cluster] += ["--policy", str(path)]
        streams[cluster] = tmp / f"stream-{cluster}.jsonl"
        streams[cluster].write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in sorted(evs, key=lambda e: e["ts"])))
    both = tmp / "stream.jsonl"
    both.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in sorted(events, key=lambda e: e["ts"])))
    published = tandem(
        ["publish", str(both), *policy_files["a"], *policy_files["b"]],
        inst.env("publisher", TANDEM_INPUT_SIGNING_KEYS=str(inst.keys_file())),
    )
    assert published.returncode == 0, published.stderr
    assert "tandem_events_dropped_total{topic,reason}" in published.stderr  # where late and refused records are told

    admin = inst.settings("admin")
    b_policies = records(admin, inst.topic("policies", "b"))
    b_policy_key = next(r.key for r in b_policies if b"#" in r.key)  # the first records are watermarks
    assert b"#" in b_policy_key and b_policy_key.startswith(b"b/")
    b_workload_key = b"b/shop/Deployment/web"
    a_workload_key = b"a/shop/Deployment/web"
    forged_own = orjson.dumps(
        {
            "type": "hpa",
            "ts": events[0]["ts"],
            "workload": {"cluster": "a", "namespace": "shop", "kind": "Deployment", "name": "web"},
            "desired_replicas": 9,
            "source": "tandem",
        }
    )

    # 1. Tombstones of b's policy and workload, straight to b's topics and to the shared ones: the broker refuses.
    refused: list[tuple[str, BaseException | None]] = []

    async def tombstones() -> None:
        producer = AIOKafkaProducer(
            **inst.settings("collector-a").client_kwargs(), acks="all", request_timeout_ms=10000
        )
        await producer.start()
        try:
            for topic, key in (
                (inst.topic("policies", "b"), b_policy_key),
                (inst.topic("workloads", "b"), b_workload_key),
                (inst.topic("policies"), b_policy_key),
                (inst.topic("workloads"), b_workload_key),
            ):
                try:
                    await producer.send_and_wait(topic, None, key=key)
                    refused.append((topic, None))
                except TopicAuthorizationFailedError as exc:
                    refused.append((topic, exc))
            # 2. ... and one on its own policies topic, which it may write: the worker refuses it.
            await producer.send_and_wait(inst.topic("policies", "a"), None, key=b_policy_key)
            # 4. A recommendation posing as the worker's own, unsigned, which the core would ignore:
            # refused and dead-lettered all the same, never dropped in silence.
            await producer.send_and_wait(inst.topic("hpa", "a"), forged_own, key=a_workload_key)
        finally:
            await producer.stop()

    run_sync(tombstones())

    # 3. Cluster b's events through the collector's own sink (a collector of a told it is b's): refused
    # by the broker, counted by the collector, dead-lettered with the refusal.
    collector_metrics = Metrics()
    b_workload = next(e for e in events if e["type"] == "workload" and e["workload"]["cluster"] == "b")

    a_extra = {**b_workload, "workload": {**b_workload["workload"], "cluster": "a", "name": "extra"}}

    async def collect() -> None:
        # Its own cluster's event, signed: to cluster a's own topic.
        signed = inst.settings("collector-a", input_signing={"a": InputKey("a-1", "a", Secret(KEYS["a"]))})
        own = _KafkaSink(signed, collector_metrics)
        await own.start()
        try:
            await own.send([a_extra])
        finally:
            await own.stop()
        sink = _KafkaSink(inst.settings("collector-a"), collector_metrics)
        await sink.start()
        try:
            await sink.send([{**b_workload, "replicas": 0}])
            await sink.watermark("b", b_workload["ts"] + 3600)
        finally:
            await sink.stop()

    run_sync(collect())

    def decided() -> bool:
        return all(records(admin, inst.topic("actuator", c)) for c in CLUSTERS) and any(
            b"on cluster 'a'" in r.value for r in records(admin, inst.topic("deadletter"))
        )

    log, metrics = run_worker(inst, "worker", decided, "decisions for a and b, the refused tombstone dead-lettered")
    replayed: dict[str, set[str]] = {}
    for cluster in CLUSTERS:
        out = tmp / f"replay-{cluster}.jsonl"
        done = tandem(["replay", str(streams[cluster]), *policy_files[cluster], "--out", str(out)], {})
        assert done.returncode == 0, done.stderr
        replayed[cluster] = {
            e["id"] for e in map(orjson.loads, out.read_bytes().splitlines()) if e["type"] in (DECISION, BLOCKED)
        }
    return {
        "refused": refused,
        "collector_metrics": collector_metrics.exposition().decode(),
        "log": log,
        "metrics": metrics,
        "replayed": replayed,
        "b_policy_key": b_policy_key,
    }


def _ids(values: list[bytes], cluster: str) -> set[str]:
    return {
        e["id"]
        for e in map(orjson.loads, values)
        if e["type"] in (DECISION, BLOCKED) and e["subject"].startswith(f"{cluster}/")
    }


def test_collector_a_cannot_write_cluster_bs_input_topics_nor_the_shared_ones(
    install: Install, attacked: dict[str, Any]
) -> None:
    inst = install
    assert [(t, type(e).__name__) for t, e in attacked["refused"]] == [
        (inst.topic("policies", "b"), "TopicAuthorizationFailedError"),
        (inst.topic("workloads", "b"), "TopicAuthorizationFailedError"),
        (inst.topic("policies"), "TopicAuthorizationFailedError"),
        (inst.topic("workloads"), "TopicAuthorizationFailedError"),
    ]
    admin = inst.settings("admin")
    # What a rebuild reads of b: b's records only, its policy's last record the published policy.
    for s in INPUTS:
        got = records(admin, inst.topic(s, "b"))
        assert got and all(r.key.startswith(b"b") for r in got), s
    last = [r for r in records(admin, inst.topic("policies", "b")) if r.key == attacked["b_policy_key"]][-1]
    assert last.value is not None and orjson.loads(last.value)["policy"]["kind"]
    assert all(records(admin, inst.topic(s)) == [] for s in INPUTS)  # nothing on the shared topics
    # The collector's sink writes its own cluster's events to the cluster's own topic.
    extra = [r for r in records(admin, inst.topic("workloads", "a")) if r.key == b"a/shop/Deployment/extra"]
    assert len(extra) == 1


def test_the_collectors_refused_writes_are_counted_and_dead_lettered(
    install: Install, attacked: dict[str, Any]
) -> None:
    inst = install
    text = attacked["collector_metrics"]
    name = "tandem_events_dropped_total"
    for s in INPUTS:  # the watermark round for b: one record per topic, each refused
        assert _sample(text, name, topic=inst.topic(s, "b"), reason="not_authorized") == (
            2.0 if s == "workloads" else 1.0
        )
    dead = [orjson.loads(r.value) for r in records(inst.settings("admin"), inst.topic("deadletter"))]
    refused = [d for d in dead if d["error"].startswith("not authorized: ")]
    assert sorted(d["topic"] for d in refused) == sorted(
        [*(inst.topic(s, "b") for s in INPUTS), inst.topic("workloads", "b")]
    )
    assert all(d["partition"] is None and d["offset"] is None for d in refused)
    assert refused[0]["error"].startswith(f"not authorized: the broker refused the write to {refused[0]['topic']} (")


def test_the_worker_refuses_counts_and_dead_letters_bs_tombstone_on_as_topic(
    install: Install, attacked: dict[str, Any]
) -> None:
    inst = install
    dead = [orjson.loads(r.value) for r in records(inst.settings("admin"), inst.topic("deadletter"))]
    misrouted = [d for d in dead if d["topic"] == inst.topic("policies", "a")]
    assert [(d["key"], d["value"], d["error"]) for d in misrouted] == [
        (
            attacked["b_policy_key"].decode(),
            None,
            f"field 'workload.cluster': a record of cluster 'b' on cluster 'a''s topic {inst.topic('policies', 'a')}",
        )
    ]
    topic = inst.topic("policies", "a")
    assert _sample(attacked["metrics"], "tandem_events_dropped_total", topic=topic, reason="misrouted") == 1.0


def test_an_unsigned_recommendation_posing_as_the_workers_own_is_counted_and_dead_lettered(
    install: Install, attacked: dict[str, Any]
) -> None:
    inst = install
    topic = inst.topic("hpa", "a")
    dead = [orjson.loads(r.value) for r in records(inst.settings("admin"), inst.topic("deadletter"))]
    forged = [d for d in dead if d["topic"] == topic]
    assert [(d["key"], d["error"]) for d in forged] == [
        ("a/shop/Deployment/web", "not authenticated: no tandem-mac header (input authentication is on)")
    ]
    assert orjson.loads(forged[0]["value"])["source"] == "tandem"
    assert _sample(attacked["metrics"], "tandem_events_dropped_total", topic=topic, reason="not_authenticated") == 1.0


def test_a_fresh_worker_rebuilds_both_clusters_and_decides_what_replay_decides(
    install: Install, attacked: dict[str, Any]
) -> None:
    """A new consumer group with an empty store reads every input topic from the start: cluster b's
    policy and workload are there, whatever collector-a did, and the decisions are replay's."""
    inst = install
    admin = inst.settings("admin")
    first = [r.value for r in records(admin, inst.topic("audit"))]
    for cluster in CLUSTERS:
        assert _ids(first, cluster) == attacked["replayed"][cluster] != set()

    def rebuilt() -> bool:
        later = [r.value for r in records(admin, inst.topic("audit"))][len(first) :]
        return all(_ids(later, c) == attacked["replayed"][c] for c in CLUSTERS)

    log, _ = run_worker(inst, "worker-fresh", rebuilt, "a fresh worker's decisions equal to replay's")
    assert "Traceback" not in log + attacked["log"]
    assert KEYS["a"] not in log and KEYS["b"] not in log
