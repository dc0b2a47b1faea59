"""Kafka security on the project's real broker: a SASL_SSL listener, SCRAM users, the KRaft StandardAuthorizer.

The broker (``tests.fixtures.kafka_secure``) has certificates the fixture made with openssl; clients
verify its certificate against that CA and authenticate with SCRAM.  These tests pin that tandem's
commands reach it through :mod:`streams.security` and that the broker turns away a wrong password and
a plaintext client.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError, KafkaError

from analysis.audit import read_topic
from streams.security import KafkaSecurity, Secret
from streams.settings import KafkaSettings
from streams.topics import ensure_topics, list_topics
from tests.fixtures.kafka_secure import SecureBroker

pytestmark = pytest.mark.kafka


def security(broker: SecureBroker, user: str, *, mechanism: str = "SCRAM-SHA-512", password: str | None = None):
    return KafkaSecurity(
        protocol="SASL_SSL",
        ca_file=str(broker.ca_file),
        mechanism=mechanism,
        username=user,
        password=Secret(password if password is not None else broker.passwords[user]),
    )


def settings_for(broker: SecureBroker, user: str, prefix: str, **kw) -> KafkaSettings:
    return KafkaSettings(broker=broker.bootstrap, prefix=prefix, partitions=1, security=security(broker, user, **kw))


def test_topics_create_and_list_over_tls_and_scram(secure_kafka: SecureBroker) -> None:
    prefix = f"s{uuid.uuid4().hex[:6]}."
    settings = settings_for(secure_kafka, "admin", prefix)
    report = asyncio.run(ensure_topics(settings))
    assert sorted(report.created) == sorted(
        f"{prefix}{s}" for s in ("metrics", "workloads", "hpa", "vpa", "policies", "actuator", "audit", "deadletter")
    )
    rows = asyncio.run(list_topics(settings))
    assert {r["topic"]: r["partitions"] for r in rows} == {f"{prefix}{s}": 1 for s in (
        "metrics", "workloads", "hpa", "vpa", "policies", "actuator", "audit", "deadletter")}  # fmt: skip


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_both_scram_mechanisms_authenticate(secure_kafka: SecureBroker, mechanism: str) -> None:
    async def go() -> list[str]:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=secure_kafka.bootstrap,
            **security(secure_kafka, "admin", mechanism=mechanism).aiokafka_kwargs(),
        )
        await admin.start()
        try:
            return [t["topic"] for t in await admin.describe_topics()]
        finally:
            await admin.close()

    assert isinstance(asyncio.run(go()), list)


def test_wrong_password_is_refused(secure_kafka: SecureBroker) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=secure_kafka.bootstrap,
            request_timeout_ms=5000,
            **security(secure_kafka, "worker", password="not-the-password").aiokafka_kwargs(),
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(KafkaError) as caught:
        asyncio.run(go())
    assert "not-the-password" not in str(caught.value)


def test_plaintext_client_is_refused(secure_kafka: SecureBroker) -> None:
    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=secure_kafka.bootstrap, request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises((KafkaConnectionError, KafkaError)):
        asyncio.run(go())


def test_client_that_does_not_trust_the_ca_is_refused(secure_kafka: SecureBroker) -> None:
    """Without the test CA the client refuses the broker's certificate (it is verified, not just used)."""
    sec = KafkaSecurity(
        protocol="SASL_SSL",
        mechanism="SCRAM-SHA-512",
        username="admin",
        password=Secret(secure_kafka.passwords["admin"]),
    )

    async def go() -> None:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=secure_kafka.bootstrap, request_timeout_ms=5000, **sec.aiokafka_kwargs()
        )
        try:
            await admin.start()
        finally:
            await admin.close()

    with pytest.raises((KafkaConnectionError, KafkaError)):
        asyncio.run(go())


def test_mutual_tls_client_certificate_is_accepted(secure_kafka: SecureBroker) -> None:
    cert, key = secure_kafka.client_cert("worker")
    sec = KafkaSecurity(
        protocol="SASL_SSL",
        ca_file=str(secure_kafka.ca_file),
        cert_file=str(cert),
        key_file=str(key),
        mechanism="SCRAM-SHA-512",
        username="admin",
        password=Secret(secure_kafka.passwords["admin"]),
    )

    async def go() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=secure_kafka.bootstrap, **sec.aiokafka_kwargs())
        await admin.start()
        try:
            return len(await admin.describe_topics())
        finally:
            await admin.close()

    assert asyncio.run(go()) >= 0


def test_publish_and_audit_read_over_tls_and_scram(secure_kafka: SecureBroker, tmp_path: Path) -> None:
    """``tandem publish`` and ``tandem audit --broker`` take the security options and the password file."""
    from cli.main import main as tandem

    prefix = f"s{uuid.uuid4().hex[:6]}."
    admin = settings_for(secure_kafka, "admin", prefix)
    asyncio.run(ensure_topics(admin))
    stream = tmp_path / "in.jsonl"
    stream.write_text(
        '{"type":"metric","ts":1000,"workload":{"cluster":"a","namespace":"ns","kind":"Deployment","name":"web"},'
        '"pod":"web-1","container":"app","cpu":0.1}\n'
    )
    argv = [
        "publish", str(stream), "--strict",
        "--broker", secure_kafka.bootstrap, "--topic-prefix", prefix, "--partitions", "1",
        "--security-protocol", "SASL_SSL", "--ssl-cafile", str(secure_kafka.ca_file),
        "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "admin",
        "--sasl-password-file", str(secure_kafka.password_file("admin")),
    ]  # fmt: skip
    assert tandem(argv) == 0
    # The audit topic is empty but readable: the reader authenticated and found its end offsets.
    err = io.StringIO()
    assert read_topic(secure_kafka.bootstrap, f"{prefix}audit", err, 30.0, security(secure_kafka, "admin")) == []
    # Nothing in the broker's log shows a password.
    log = secure_kafka.log_text()
    for pw in secure_kafka.passwords.values():
        assert pw not in log
