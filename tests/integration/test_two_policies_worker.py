"""Two policies on one workload through Kafka: the worker says what replay says (issue 29, item 2).

A CustomHpa and a Tortoise (``Off``) target one Deployment, published to the policies topic as the
collector sends them; the Tortoise is deleted later by a deletion naming it.  The worker must write
the same audit as ``tandem replay`` of the same stream: the two ``AmbiguousPolicy`` reports, then
the CustomHpa's decisions once it is alone (the rule lives in the core: tests/unit/test_two_policies.py).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.fixtures.kafka import wait_for
from tests.integration.test_worker_kafka import (
    Worker,
    _assert_no_tracebacks,
    _prefix,
    audit_of,
    by_workload,
    env_for,
    publish,
    read_events,
    read_topic,
    replay,
    wait_caught_up,
    workers,
)
from tests.unit.test_two_policies import T0, custom_hpa, policy, sample, tortoise_off, workload

pytestmark = pytest.mark.kafka

TORTOISE = {"apiVersion": "autoscaling.mercari.com/v1beta3", "kind": "Tortoise", "namespace": "shop", "name": "web"}


def test_the_worker_holds_both_policies_as_replay_does_and_the_one_left_acts(kafka_broker: str, tmp_path: Path) -> None:
    hpa = {
        **custom_hpa("web"),
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
    }
    off = {
        **tortoise_off("web"),
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
    }
    events = [
        policy(T0 + 1, hpa),
        policy(T0 + 1, off),
        workload(T0 + 1, 10),
        sample(T0 + 2, 150.0),
        sample(T0 + 20, 150.0),
        policy(T0 + 40, None, deleted=TORTOISE),
        sample(T0 + 41, 150.0),
        workload(T0 + 60, 12),
        sample(T0 + 61, 150.0),
        sample(T0 + 200, 150.0),
    ]
    stream = tmp_path / "stream.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    expected = audit_of(replay(tmp_path, stream, []))
    assert [(e["type"].split(".")[2], e["data"]["policy"]["kind"], e["data"]["blocked"][:1]) for e in expected[:2]] == [
        ("blocked", "Tortoise", [{"target": "policy", "reason": "AmbiguousPolicy"}]),
        ("blocked", "CustomHpa", [{"target": "policy", "reason": "AmbiguousPolicy"}]),
    ]
    assert [e["type"] for e in expected[2:]] == ["dev.tandem.decision.v1"] * (len(expected) - 2)
    assert len(expected) >= 3

    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    publish(env, stream, [])
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected),
            120,
            interval=0.5,
            message=lambda: f"{len(expected)} audit events ({ws[0].story()})",
        )
        wait_caught_up(kafka_broker, prefix, workers=ws)
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)
    got = read_events(kafka_broker, prefix + "audit")
    assert by_workload(got) == by_workload(expected)
    assert read_topic(kafka_broker, prefix + "deadletter") == []
