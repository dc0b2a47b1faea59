"""``spec.predictive`` through Kafka: the worker's audit equals the embedded replay's, byte for byte
(issue 36: the forecaster's state lives in the checkpointed policy memory)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.fixtures.kafka import wait_for
from tests.integration.test_worker_kafka import (
    EXAMPLE,
    EXAMPLE_POLICIES,
    Worker,
    _assert_no_tracebacks,
    _prefix,
    audit_of,
    by_workload,
    env_for,
    publish,
    read_events,
    replay,
    wait_caught_up,
    workers,
)


def predictive_policies(tmp: Path) -> Path:
    """The bundled example's policies, each with ``predictive: {}`` (every default)."""
    docs = list(yaml.safe_load_all(EXAMPLE_POLICIES.read_text()))
    for d in docs:
        d["spec"]["predictive"] = {}
    path = tmp / "predictive.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_worker_output_with_predictive_equals_replay_byte_for_byte(kafka_broker: str, tmp_path: Path) -> None:
    policies = [predictive_policies(tmp_path)]
    expected = audit_of(replay(tmp_path, EXAMPLE, policies))
    prescaled = [e for e in expected if any("pre-scaled to" in r for r in e["data"]["reasons"])]
    assert len(prescaled) > 0  # the forecaster acts on the example's daily curves (days 2 and 3)

    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    publish(env, EXAMPLE, policies)
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: len(read_events(kafka_broker, prefix + "audit")) >= len(expected),
            180,
            interval=0.5,
            message=lambda: f"{len(expected)} audit events ({ws[0].text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)
    got = read_events(kafka_broker, prefix + "audit")
    assert by_workload(got) == by_workload(expected)
