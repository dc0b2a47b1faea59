"""A worker whose consumer group Kafka refuses says so, and joins once the ACL is granted.

On the SASL_SSL broker with ACLs enforced: the ``worker`` user holds every topic ACL of
``scripts/kafka-acls.sh`` for its prefix but none on its consumer group (granted to another group
id).  aiokafka parks ``GroupAuthorizationFailedError`` for a ``getmany`` Faust never makes, so the
worker used to hang after ``Subscribed to topic(s):`` without a word (agents/groupwatch.py).  It
must say, in one line per attempt, which group, which user and what to grant, fail ``/readyz`` with
that line while ``/healthz`` stays ok, keep running, and join the group by itself once the ACL is
granted, as it does for a refused login.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.fixtures.kafka import wait_for
from tests.fixtures.kafka_secure import SecureBroker
from tests.integration.test_metrics_worker import free_port, get
from tests.integration.test_security_pipeline import admin_command_config, kafka_acls

pytestmark = pytest.mark.kafka


def test_a_worker_refused_its_consumer_group_says_so_and_joins_once_granted(
    secure_kafka: SecureBroker, tmp_path: Path
) -> None:
    prefix = f"g{uuid.uuid4().hex[:6]}."
    group = f"{prefix}worker"
    config = admin_command_config(secure_kafka, tmp_path / "admin.properties")
    acls = ("--bootstrap-server", secure_kafka.bootstrap, "--command-config", str(config), "--prefix", prefix)
    # The topics, but the group ACL on another group id: the operator's slip (a wrong --app-id).
    done = kafka_acls(*acls, "--worker", "worker", "--app-id", f"{prefix}elsewhere")
    assert done.returncode == 0, done.stderr

    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TANDEM_")}
    env = {
        **clean,
        "TANDEM_BROKER": secure_kafka.bootstrap,
        "TANDEM_TOPIC_PREFIX": prefix,
        "TANDEM_PARTITIONS": "1",
        "TANDEM_SECURITY_PROTOCOL": "SASL_SSL",
        "TANDEM_SSL_CAFILE": str(secure_kafka.ca_file),
        "TANDEM_SASL_USERNAME": "worker",
        "TANDEM_SASL_PASSWORD_FILE": str(secure_kafka.password_file("worker")),
        "TANDEM_STORE": "memory://",
        "TANDEM_WITHOUT_WEB": "1",
        "TANDEM_METRICS_PORT": str(port),
    }
    said = (
        f"tandem worker: Kafka refuses user 'worker' the consumer group '{group}' (GroupAuthorizationFailedError, "
        f"attempt 1): grant User:worker Read and Describe on group {group} "
        f"(scripts/kafka-acls.sh --worker worker --app-id {group} grants them); retrying in 0.5 s"
    )
    log = tmp_path / "worker.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"], env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path
        )
        try:
            text = lambda: log.read_text(errors="replace")  # noqa: E731
            wait_for(lambda: said in text() or None, 120, interval=0.5, message=lambda: text()[-3000:])
            lines = [line for line in text().splitlines() if "GroupAuthorizationFailedError" in line]
            assert lines[0].rstrip().endswith(said), lines  # tandem's own line (after Faust's log prefix)
            # Not ready, with that line as the reason; alive all the same (the pod is not restarted).
            _, body = wait_for(
                lambda: (r := get(port, "/readyz"))[0] == 503 and "GroupAuthorizationFailedError" in r[1] and r,
                30,
                interval=0.5,
                message=lambda: repr(get(port, "/readyz")),
            )
            assert f"Kafka refuses user 'worker' the consumer group '{group}'" in body
            assert get(port, "/healthz")[0] == 200
            # It keeps trying: a second attempt is said (backoff 0.5 s, then 1 s).
            wait_for(lambda: "GroupAuthorizationFailedError, attempt 2)" in text() or None, 60, interval=0.5)
            assert proc.poll() is None

            granted = kafka_acls(*acls, "--worker", "worker", "--app-id", group)
            assert granted.returncode == 0, granted.stderr
            joined = f"tandem worker: joined the consumer group '{group}' after "
            wait_for(lambda: joined in text() or None, 120, interval=0.5, message=lambda: text()[-3000:])
            ready = lambda: get(port, "/readyz")  # noqa: E731
            wait_for(lambda: ready()[0] == 200 or None, 60, interval=0.5, message=lambda: repr(ready()))
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(60)
