"""What an operator reads from tandem against the SASL_SSL broker with ACLs (issue 29, items 4 and 5).

* No SCRAM material (nonces, salt, iteration count, client proof) and no password in the log, even
  at debug level, where aiokafka logs every request and response (streams/kafkalog.py).
* A wrong password is one line of tandem's own: authentication failed, for which user and mechanism
  (aiokafka's ``Unable to bootstrap`` alone does not say why).
* ``tandem topics list`` as a user without Describe on the topics says they are not visible to that
  user, not that they are missing; a topic that really is missing is still "missing".
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import subprocess
import sys
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from cli.main import main
from streams.topics import ensure_topics
from tests.fixtures.kafka import wait_for
from tests.fixtures.kafka_secure import SecureBroker
from tests.integration.test_kafka_security import security, settings_for

pytestmark = pytest.mark.kafka

TOPICS = ("metrics", "workloads", "hpa", "vpa", "policies", "actuator", "audit", "deadletter")


def topics_list(broker: SecureBroker, user: str, prefix: str, password_file: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "topics", "list", "--broker", broker.bootstrap, "--topic-prefix", prefix, "--partitions", "1",
        "--security-protocol", "SASL_SSL", "--ssl-cafile", str(broker.ca_file),
        "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", user, "--sasl-password-file", str(password_file),
    ]  # fmt: skip
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_the_debug_log_of_a_scram_login_holds_no_scram_material(
    secure_kafka: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=secure_kafka.bootstrap, **security(secure_kafka, "admin").aiokafka_kwargs()
        )
        await admin.start()
        try:
            await admin.describe_topics()
        finally:
            await admin.close()

    # aiokafka's own logger too: a command run in-process before (tandem publish) leaves it at ERROR.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="aiokafka"):
        asyncio.run(go())
    text = "\n".join(r.getMessage() for r in caplog.records)
    # The exchange was logged (so this test can fail), its payload never.
    assert text.count("SaslAuthenticateRequest_v1(<redacted>)") >= 2, text[-3000:]
    assert text.count("SaslAuthenticateResponse_v1(<redacted>)") >= 2, text[-3000:]
    assert "sasl_auth_bytes" not in text
    for marker in ("c=biws", ",p=", ",s=", ",i=4096", "r=", secure_kafka.passwords["admin"]):
        assert marker not in text, marker
    assert "Authenticated as admin via SCRAM-SHA-512" in text


def test_a_wrong_password_is_one_line_naming_the_user_and_the_mechanism(
    secure_kafka: SecureBroker, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    code, out, err = topics_list(secure_kafka, "worker", "t.", wrong)
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    host, port = secure_kafka.bootstrap.rsplit(":", 1)
    assert line.startswith(
        f"tandem topics: Kafka authentication failed for user 'worker' with SCRAM-SHA-512 at {host}:{port}: "
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
        "(KafkaConnectionError: Unable to bootstrap from "
    ), line
    assert "not-the-password" not in err


def test_topics_list_says_topics_are_not_visible_to_a_user_without_describe(secure_kafka: SecureBroker) -> None:
    prefix = f"v{uuid.uuid4().hex[:6]}."
    asyncio.run(ensure_topics(settings_for(secure_kafka, "admin", prefix)))
    code, out, err = topics_list(secure_kafka, "rogue", prefix, secure_kafka.password_file("rogue"))
    assert code == 0, err  # nothing is wrong with the topics: this user may not see them
    rows = out.splitlines()
    assert rows[1:] == [f"{prefix}{t:<{len('deadletter')}}  not visible to user rogue" for t in TOPICS]
    assert err == (
        "tandem topics: 8 topic(s) not visible to user rogue (no Describe ACL on them); "
        "they may exist: list them as a user that may describe them\n"
    )


def test_topics_list_still_says_missing_for_a_topic_that_is_missing(secure_kafka: SecureBroker) -> None:
    prefix = f"m{uuid.uuid4().hex[:6]}."
    code, out, err = topics_list(secure_kafka, "admin", prefix, secure_kafka.password_file("admin"))
    assert code == 1
    assert [line.split()[-1] for line in out.splitlines()[1:]] == ["missing"] * len(TOPICS)
    assert "not visible" not in out + err


def test_the_worker_says_the_same_line_for_a_wrong_password(secure_kafka: SecureBroker, tmp_path: Path) -> None:
    """The worker (Faust) waits for Kafka, saying at each attempt why it cannot start."""
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    env = {
        **os.environ,
        "TANDEM_BROKER": secure_kafka.bootstrap,
        "TANDEM_TOPIC_PREFIX": "w.",
        "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
        "TANDEM_SSL_CAFILE": str(secure_kafka.ca_file),
        "TANDEM_SASL_USERNAME": "worker",
        "TANDEM_SASL_PASSWORD_FILE": str(wrong),
        "TANDEM_STORE": "memory://",
        "TANDEM_WITHOUT_WEB": "1",
        "TANDEM_METRICS_PORT": "0",
    }
    log = tmp_path / "worker.log"
    host, port = secure_kafka.bootstrap.rsplit(":", 1)
    said = (
        f"Kafka authentication failed for user 'worker' with SCRAM-SHA-512 at {host}:{port}: Authentication "
        "failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
        "(KafkaConnectionError: Unable to bootstrap from "
    )
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"], env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path
        )
        try:
            wait_for(lambda: said in log.read_text(errors="replace") or None, 60, interval=0.5, message=said)
        finally:
            proc.terminate()
            proc.wait(30)
    assert "not-the-password" not in log.read_text(errors="replace")


def test_the_worker_at_debug_level_logs_the_sasl_exchange_redacted(secure_kafka: SecureBroker, tmp_path: Path) -> None:
    """The issue's case: ``tandem worker --loglevel debug`` (Faust's aiokafka clients) over SCRAM."""
    env = {
        **os.environ,
        "TANDEM_BROKER": secure_kafka.bootstrap,
        "TANDEM_TOPIC_PREFIX": f"d{uuid.uuid4().hex[:6]}.",
        "TANDEM_PARTITIONS": "1",
        "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
        "TANDEM_SSL_CAFILE": str(secure_kafka.ca_file),
        "TANDEM_SASL_USERNAME": "admin",
        "TANDEM_SASL_PASSWORD_FILE": str(secure_kafka.password_file("admin")),
        "TANDEM_STORE": "memory://",
        "TANDEM_WITHOUT_WEB": "1",
        "TANDEM_METRICS_PORT": "0",
        "TANDEM_LOGLEVEL": "debug",
    }
    log = tmp_path / "worker.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"], env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path
        )
        try:
            # Several clients log in (the topic check, Faust's consumer, producer, admin): wait for
            # the worker's own start and a few redacted exchanges.
            wait_for(
                lambda: log.read_text(errors="replace").count("SaslAuthenticateResponse_v1(<redacted>)") >= 4 or None,
                90,
                interval=0.5,
                message=lambda: log.read_text(errors="replace")[-3000:],
            )
        finally:
            proc.terminate()
            proc.wait(30)
    text = log.read_text(errors="replace")
    assert "Request to" in text and "Response from" in text  # debug level: the protocol is logged
    assert "sasl_auth_bytes" not in text
    for marker in ("c=biws", secure_kafka.passwords["admin"]):
        assert marker not in text, marker
