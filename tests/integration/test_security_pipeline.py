"""Nobody in where they don't belong (issue 16), on the real secure broker and the real kube-apiserver.

One installation for the module: topics of its own prefix with one actuator topic per cluster
(``--actuator-clusters a,b``), the ACLs of ``scripts/kafka-acls.sh`` (worker, collector-a/b,
applier-a/b, an auditor), per-cluster input keys and a worker Ed25519 key.  Every client speaks
TLS + SCRAM as its own principal; nothing is mocked and every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from scaling.cloudevents import BLOCKED, DECISION
from streams.security import KafkaSecurity, Secret
from streams.settings import KafkaSettings
from streams.signing import DECISION_HEADER, INPUT_HEADER, DecisionVerifier, InputKey, header, sign_input
from streams.topics import TOPIC_OF_TYPE
from tests.fixtures.kafka import REPO_ROOT, run_sync, wait_for
from tests.fixtures.kafka_secure import SecureBroker
from tests.generated import generated_stream

pytestmark = pytest.mark.kafka

CLUSTERS = ("a", "b")
KEY_SECRETS = {"a": "input-key-of-cluster-a-" + uuid.uuid4().hex, "b": "input-key-of-cluster-b-" + uuid.uuid4().hex}


@dataclass
class Install:
    broker: SecureBroker
    prefix: str
    tmp: Path
    worker_key: Ed25519PrivateKey

    def security(self, user: str) -> KafkaSecurity:
        return KafkaSecurity(
            protocol="SASL_SSL",
            ca_file=str(self.broker.ca_file),
            mechanism="SCRAM-SHA-512",
            username=user,
            password=Secret(self.broker.passwords[user]),
        )

    def settings(self, user: str, **kw: Any) -> KafkaSettings:
        return KafkaSettings(
            broker=self.broker.bootstrap,
            prefix=self.prefix,
            partitions=1,
            security=self.security(user),
            actuator_clusters=CLUSTERS,
            **kw,
        )

    def env(self, user: str, **extra: str) -> dict[str, str]:
        """The environment of a tandem command running as ``user`` (password from a file)."""
        return {
            "TANDEM_BROKER": self.broker.bootstrap,
            "TANDEM_TOPIC_PREFIX": self.prefix,
            "TANDEM_PARTITIONS": "1",
            "TANDEM_RETENTION_MS": "-1",
            "TANDEM_ACTUATOR_CLUSTERS": ",".join(CLUSTERS),
            "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
            "TANDEM_SSL_CAFILE": str(self.broker.ca_file),
            "TANDEM_SASL_MECHANISM": "SCRAM-SHA-256",
            "TANDEM_SASL_USERNAME": user,
            "TANDEM_SASL_PASSWORD_FILE": str(self.broker.password_file(user)),
            **extra,
        }

    def input_key(self, cluster: str) -> InputKey:
        return InputKey(f"{cluster}-1", cluster, Secret(KEY_SECRETS[cluster]))

    def keys_file(self, *clusters: str) -> Path:
        path = self.tmp / f"input-keys-{'-'.join(clusters)}"
        path.write_text("".join(f"{c}-1 {c} {KEY_SECRETS[c]}\n" for c in clusters))
        path.chmod(0o600)
        return path

    @property
    def public_pem(self) -> Path:
        path = self.tmp / "worker.pub.pem"
        path.write_bytes(self.worker_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
        return path

    @property
    def private_pem(self) -> Path:
        path = self.tmp / "worker.key.pem"
        path.write_bytes(self.worker_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        path.chmod(0o600)
        return path


def admin_command_config(broker: SecureBroker, path: Path) -> Path:
    pw = broker.passwords["admin"]
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{pw}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={broker.ca_file}\n"
    )
    path.chmod(0o600)
    return path


def kafka_acls(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "kafka-acls.sh"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def tandem(argv: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TANDEM_")}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *argv],
        env={**clean, **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def _records(settings: KafkaSettings, topic: str) -> list[Any]:
    """Every record of ``topic`` (partition 0) up to its current end, read as ``settings``' principal."""
    consumer = AIOKafkaConsumer(**settings.client_kwargs(), enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        got: list[Any] = []
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(tp, timeout_ms=300)).values():
                got.extend(records)
        return got
    finally:
        await consumer.stop()


def records(settings: KafkaSettings, topic: str) -> list[Any]:
    return run_sync(_records(settings, topic))


def stream_for(cluster: str, name: str, steps: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events, policies = generated_stream((name,), steps)
    text = orjson.dumps([events, policies]).replace(b'"c1"', orjson.dumps(cluster))
    out: list[list[dict[str, Any]]] = orjson.loads(text)
    return out[0], out[1]


@pytest.fixture(scope="module")
def install(secure_kafka: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> Install:
    tmp = tmp_path_factory.mktemp("secure-install")
    inst = Install(secure_kafka, f"s{uuid.uuid4().hex[:8]}.", tmp, Ed25519PrivateKey.generate())
    config = admin_command_config(secure_kafka, tmp / "admin.properties")
    acls = kafka_acls(
        "--bootstrap-server", secure_kafka.bootstrap, "--command-config", str(config), "--prefix", inst.prefix,
        "--clusters", ",".join(CLUSTERS), "--publisher", "publisher", "--auditor", "auditor",
    )  # fmt: skip
    assert acls.returncode == 0, acls.stderr
    # The rogue may write cluster a's actuator topic, but holds no worker key.
    rogue = kafka_acls(
        "--bootstrap-server", secure_kafka.bootstrap, "--command-config", str(config), "--prefix", inst.prefix,
        "--worker", "rogue", "--app-id", f"{inst.prefix}rogue-group",
    )  # fmt: skip
    assert rogue.returncode == 0, rogue.stderr
    # `tandem topics create` as the worker principal (Create on the prefix), with the per-cluster topics.
    created = tandem(["topics", "create"], inst.env("worker"))
    assert created.returncode == 0, created.stderr
    assert f"created {inst.prefix}actuator.a" in created.stdout and f"created {inst.prefix}actuator.b" in created.stdout
    return inst


def test_acl_script_prints_the_exact_commands() -> None:
    done = kafka_acls("--bootstrap-server", "k:9093", "--prefix", "p.", "--clusters", "eu", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:worker --operation Read "
        "--operation Write --operation Create --operation Describe --operation DescribeConfigs --topic p. "
        "--resource-pattern-type prefixed",
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:worker --operation Read "
        "--operation Describe --group p.worker",
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:collector-eu --operation Write "
        "--operation Describe --topic p.metrics --topic p.workloads --topic p.hpa --topic p.vpa --topic p.policies "
        "--topic p.deadletter",
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:applier-eu --operation Read "
        "--operation Describe --topic p.actuator.eu",
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:applier-eu --operation Read "
        "--operation Describe --group tandem-applier-eu",
        "kafka-acls.sh --bootstrap-server k:9093 --add --force --allow-principal User:applier-eu --operation Write "
        "--operation Describe --topic p.audit",
    ]


@pytest.fixture(scope="module")
def worker_run(install: Install) -> Iterator[dict[str, Any]]:
    """Streams for clusters a and b published (signed), attacks by collector-a, one worker run over them."""
    inst, tmp = install, install.tmp
    events: list[dict[str, Any]] = []
    policy_files: list[str] = []
    for cluster in CLUSTERS:
        evs, pols = stream_for(cluster, "web", 60)
        events += evs
        for i, pol in enumerate(pols):
            path = tmp / f"policy-{cluster}-{i}.yaml"
            path.write_text(yaml.safe_dump(pol))
            policy_files += ["--policy", str(path)]
    stream = tmp / "stream.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in sorted(events, key=lambda e: e["ts"])))
    published = tandem(
        ["publish", str(stream), *policy_files],
        inst.env("publisher", TANDEM_INPUT_SIGNING_KEYS=str(inst.keys_file("a", "b"))),
    )
    assert published.returncode == 0, published.stderr

    # Cluster a's collector, through the collector's own Kafka sink: one event of its own cluster...
    from edge.collector import _KafkaSink

    own = {**events[0], "workload": {**events[0]["workload"], "name": "extra"}}
    assert own["workload"]["cluster"] == "a"
    sink_settings = inst.settings("collector-a", input_signing={"a": inst.input_key("a")})

    async def collect() -> None:
        sink = _KafkaSink(sink_settings)
        await sink.start()
        try:
            await sink.send([own])
        finally:
            await sink.stop()

    run_sync(collect())

    # ... and two attempts to speak for cluster b: signed with its own key, and not signed at all.
    evil = {**events[0], "workload": {"cluster": "b", "namespace": "shop", "kind": "Deployment", "name": "evil"}}
    evil_key = b"b/shop/Deployment/evil"
    evil_value = orjson.dumps(evil)
    topic = f"{inst.prefix}{TOPIC_OF_TYPE[evil['type']]}"
    forged_own = orjson.dumps(
        {"type": "hpa", "ts": evil["ts"], "workload": evil["workload"], "desired_replicas": 9, "source": "tandem"}
    )

    async def attack() -> None:
        producer = AIOKafkaProducer(**inst.settings("collector-a").client_kwargs(), acks="all")
        await producer.start()
        try:
            mac = sign_input(inst.input_key("a"), evil["type"], evil_key, evil_value)
            await producer.send_and_wait(topic, evil_value, key=evil_key, headers=[mac])
            await producer.send_and_wait(topic, evil_value, key=evil_key)
            # ... and a recommendation posing as the worker's own, which the core would ignore:
            # refused and dead-lettered all the same, never dropped in silence (issue #29).
            await producer.send_and_wait(f"{inst.prefix}{TOPIC_OF_TYPE['hpa']}", forged_own, key=evil_key)
        finally:
            await producer.stop()

    run_sync(attack())

    log = tmp / "worker.log"
    env = inst.env(
        "worker",
        TANDEM_STORE="memory://",
        TANDEM_WITHOUT_WEB="1",
        TANDEM_IDLE_FLUSH="1",
        TANDEM_REBALANCE_TIMEOUT="10",
        TANDEM_SESSION_TIMEOUT="10",
        TANDEM_COMMIT_INTERVAL="0.5",
        TANDEM_STANDBY_REPLICAS="0",
        TANDEM_LOGLEVEL="info",
        TANDEM_METRICS_PORT="0",
        TANDEM_INPUT_KEYS=str(inst.keys_file("a", "b")),
        TANDEM_DECISION_SIGNING_KEY=str(inst.private_pem),
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TANDEM_")}
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"],
            env={**clean, **env},
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
        try:
            admin = inst.settings("admin")

            def done() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"worker exited {proc.returncode}: {log.read_text()[-4000:]}")
                return all(records(admin, f"{inst.prefix}actuator.{c}") for c in CLUSTERS) and (
                    len(records(admin, f"{inst.prefix}deadletter")) >= 2
                )

            wait_for(done, 240, interval=1.0, message=lambda: f"decisions for a and b ({log.read_text()[-3000:]})")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
    yield {"log": log.read_text(errors="replace"), "events": events}


def test_worker_decides_per_cluster_topic_signs_and_dead_letters_what_collector_a_says_for_b(
    install: Install, worker_run: dict[str, Any]
) -> None:
    inst = install
    admin = inst.settings("admin")
    verifier = DecisionVerifier([inst.worker_key.public_key()])
    audited = [orjson.loads(r.value) for r in records(admin, f"{inst.prefix}audit")]
    for cluster in CLUSTERS:
        decisions = records(admin, f"{inst.prefix}actuator.{cluster}")
        assert decisions
        for r in decisions:
            ev = orjson.loads(r.value)
            assert ev["data"]["workload"]["cluster"] == cluster
            verifier.verify(r.key, r.value, r.headers)  # raises unless signed by the worker and not expired
        # The cluster's topic carries exactly its applied decisions, blocked reports and dry runs
        # (what its applier acts on or shows in the status), so the applier needs no audit right.
        expected = sorted(
            e["id"] for e in audited if e["type"] in (DECISION, BLOCKED) and e["subject"].startswith(f"{cluster}/")
        )
        assert sorted(orjson.loads(r.value)["id"] for r in decisions) == expected
    assert records(admin, f"{inst.prefix}actuator") == []  # nothing on the shared topic

    dead = [orjson.loads(r.value) for r in records(admin, f"{inst.prefix}deadletter")]
    assert sorted(d["error"] for d in dead) == [
        "not authenticated: key 'a-1' speaks for cluster 'a', not for 'b'",
        "not authenticated: no tandem-mac header (input authentication is on)",
        "not authenticated: no tandem-mac header (input authentication is on)",
    ]
    evil_topic = f"{inst.prefix}{TOPIC_OF_TYPE[worker_run['events'][0]['type']]}"
    assert sorted(d["topic"] for d in dead) == sorted([evil_topic, evil_topic, f"{inst.prefix}{TOPIC_OF_TYPE['hpa']}"])
    assert {d["key"] for d in dead} == {"b/shop/Deployment/evil"}
    audit = [orjson.loads(r.value) for r in records(admin, f"{inst.prefix}audit")]
    assert audit and not [e for e in audit if "evil" in e["subject"]]
    # The record collector-a wrote through the collector's sink carries cluster a's MAC and was accepted.
    own_topic = f"{inst.prefix}{TOPIC_OF_TYPE[worker_run['events'][0]['type']]}"
    extra = [r for r in records(admin, own_topic) if r.key == b"a/shop/Deployment/extra"]
    assert len(extra) == 1 and header(extra[0].headers, INPUT_HEADER).startswith(b"v1 a-1 ")
    # Nothing secret in the worker's log, the audit or the dead letters.
    blob = worker_run["log"].encode() + b"".join(r.value for r in records(admin, f"{inst.prefix}audit"))
    blob += b"".join(r.value for r in records(admin, f"{inst.prefix}deadletter"))
    for secret in (*inst.broker.passwords.values(), *KEY_SECRETS.values()):
        assert secret.encode() not in blob
    assert "Traceback" not in worker_run["log"]


async def _subscribe_error(settings: KafkaSettings, topic: str, group: str) -> BaseException | int:
    """Consume ``topic`` in ``group`` as the applier does; the error the broker answers, or the count read."""
    consumer = AIOKafkaConsumer(
        topic, **settings.client_kwargs(), group_id=group, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        await consumer.start()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        count = 0
        while loop.time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            count += sum(len(v) for v in batches.values())
            if count:
                return count
        return count
    except KafkaError as exc:
        return exc
    finally:
        await consumer.stop()


async def _topic_errors(settings: KafkaSettings, topic: str) -> int:
    admin = AIOKafkaAdminClient(**settings.client_kwargs())
    await admin.start()
    try:
        return int((await admin.describe_topics([topic]))[0]["error_code"])
    finally:
        await admin.close()


def test_applier_a_reads_its_own_decisions_and_not_cluster_bs(install: Install, worker_run: dict[str, Any]) -> None:
    inst = install
    applier_a = inst.settings("applier-a")
    # Its own topic, in its own group, as `tandem apply --cluster a` reads it.
    assert run_sync(_subscribe_error(applier_a, f"{inst.prefix}actuator.a", "tandem-applier-a")) > 0
    assert run_sync(_topic_errors(applier_a, f"{inst.prefix}actuator.b")) == TopicAuthorizationFailedError.errno
    got = run_sync(_subscribe_error(applier_a, f"{inst.prefix}actuator.b", "tandem-applier-a"))
    assert isinstance(got, TopicAuthorizationFailedError), got
    # Nor the audit topic, which holds every cluster's explanations: its status feed is its own topic.
    got = run_sync(_subscribe_error(applier_a, f"{inst.prefix}audit", "tandem-applier-a"))
    assert isinstance(got, TopicAuthorizationFailedError), got


def test_collector_a_cannot_read_anything_nor_write_decisions(install: Install) -> None:
    inst = install
    collector = inst.settings("collector-a")
    assert run_sync(_topic_errors(collector, f"{inst.prefix}audit")) == TopicAuthorizationFailedError.errno
    got = run_sync(_subscribe_error(collector, f"{inst.prefix}audit", "tandem-applier-a"))
    assert isinstance(got, KafkaError), got

    async def write_decision() -> None:
        producer = AIOKafkaProducer(**collector.client_kwargs(), acks="all", request_timeout_ms=10000)
        await producer.start()
        try:
            await producer.send_and_wait(f"{inst.prefix}actuator.a", b"{}", key=b"a/shop/Deployment/web")
        finally:
            await producer.stop()

    with pytest.raises(KafkaError):
        run_sync(write_decision())


def test_auditor_reads_the_audit_topic_with_tandem_audit(install: Install, worker_run: dict[str, Any]) -> None:
    done = tandem(["audit", "--broker", install.broker.bootstrap], install.env("auditor"))
    assert done.returncode == 0, done.stderr
    assert "a/shop/Deployment/web" in done.stdout and "b/shop/Deployment/web" in done.stdout


def test_decisions_keep_their_bytes_whatever_the_signature(install: Install, worker_run: dict[str, Any]) -> None:
    """Signing is a header: the decision values are the ones replay makes (the same ids)."""
    admin = install.settings("admin")
    ids = {orjson.loads(r.value)["id"] for c in CLUSTERS for r in records(admin, f"{install.prefix}actuator.{c}")}
    audit_ids = {
        e["id"]
        for e in (orjson.loads(r.value) for r in records(admin, f"{install.prefix}audit"))
        if e["type"] in (DECISION, BLOCKED)
    }
    assert ids and ids <= audit_ids
    assert all(header(r.headers, DECISION_HEADER) for r in records(admin, f"{install.prefix}actuator.a"))


@pytest.mark.kube
def test_applier_refuses_decisions_without_the_workers_signature_and_nothing_changes(
    install: Install, kube_apiserver: str, kube_namespace: str
) -> None:
    """A principal that may write cluster a's actuator topic but holds no worker key cannot make the
    applier act: unsigned, rogue-signed and expired decisions are refused and audited, no write reaches
    the real kube-apiserver; the same change signed by the worker is applied."""
    import threading
    import time

    from edge.applier import ApplierConfig, run
    from edge.kube import DEPLOYMENTS, api_client
    from scaling.cloudevents import APPLIED, APPLY_FAILED
    from streams.signing import DecisionSigner
    from tests.integration.test_applier_kube import (
        HVPA_V1,
        create,
        decision,
        deployment,
        hvpa,
        impersonating,
        install_crds,
        install_rbac,
        read,
    )

    inst, ns = install, kube_namespace
    admin_api = api_client(kube_apiserver)
    install_crds(admin_api, ns)
    install_rbac(admin_api)
    create(admin_api, DEPLOYMENTS, ns, deployment("web"))
    create(admin_api, HVPA_V1, ns, hvpa("web", "web"))
    before = read(admin_api, DEPLOYMENTS, ns, "web")

    change = decision(ns, "web", cluster="a", replicas={"from": 2, "to": 4})  # a well-formed decision (id = hash)
    rogue_signer = DecisionSigner(Ed25519PrivateKey.generate(), 600)
    stale_signer = DecisionSigner(inst.worker_key, 60, clock=lambda: time.time() - 3600)
    value, key = orjson.dumps(change), change["subject"].encode()
    topic = f"{inst.prefix}actuator.a"

    async def write(user: str, headers: list[tuple[str, bytes]] | None) -> None:
        producer = AIOKafkaProducer(**inst.settings(user).client_kwargs(), acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, value, key=key, headers=headers)
        finally:
            await producer.stop()

    run_sync(write("rogue", None))
    run_sync(write("rogue", [rogue_signer.sign(key, value)]))
    run_sync(write("rogue", [stale_signer.sign(key, value)]))  # a worker-signed decision replayed too late

    stop = threading.Event()
    errors: list[BaseException] = []

    def applier() -> None:
        try:
            asyncio.run(
                run(
                    inst.settings("applier-a"),
                    ApplierConfig("a", backoff_base=0.05),
                    impersonating(kube_apiserver, "tandem-applier"),
                    group_id="tandem-applier-a",
                    offset_reset="earliest",
                    stop=stop,
                    ensure=False,
                    verifier=DecisionVerifier([inst.worker_key.public_key()]),
                )
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=applier, name="applier-a", daemon=True)
    thread.start()
    auditor = inst.settings("auditor")
    try:

        def results(n: int) -> list[dict[str, Any]] | None:
            if errors:
                raise errors[0]
            got = [orjson.loads(r.value) for r in records(auditor, f"{inst.prefix}audit")]
            mine = [e for e in got if e["data"].get("decision") == change["id"]]
            return mine if len(mine) >= n else None

        refused = wait_for(lambda: results(3), 120, interval=0.5, message="3 refusals audited")
        assert [e["type"] for e in refused] == [APPLY_FAILED] * 3
        errors_seen = [e["data"]["error"] for e in refused]
        assert errors_seen[0] == (
            "refused: decision signature: no tandem-signature header (the applier accepts signed decisions only)"
        )
        assert errors_seen[1] == (
            f"refused: decision signature: signed by key '{rogue_signer.key_id}', which this applier does not trust"
        )
        assert errors_seen[2].startswith("refused: decision signature: the signature expired ")
        assert all(e["data"]["patched"] == [] for e in refused)
        after = read(admin_api, DEPLOYMENTS, ns, "web")
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]  # not one write
        assert after["spec"]["replicas"] == 2

        # The same change, signed by the worker's key now: applied.
        run_sync(write("worker", [DecisionSigner(inst.worker_key, 600).sign(key, value)]))
        applied = wait_for(lambda: results(4), 120, interval=0.5, message="the signed decision's result")[3]
        assert applied["type"] == APPLIED, applied
        assert read(admin_api, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 4
    finally:
        stop.set()
        thread.join(30)
