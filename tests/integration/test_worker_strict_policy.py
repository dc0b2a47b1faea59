"""A misspelled policy field in the worker (issue 12): a policy event on the policies topic whose
manifest has an unknown field goes to the dead-letter topic with the field's full path and the
closest known name, as ``tandem replay`` prints it, and the good input around it is unaffected
(the audit stream equals the replay's of the good input, byte for byte per workload).  A real broker
(the ``kafka_broker`` fixture) and ``tandem worker`` in a subprocess."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from tests.fixtures.kafka import wait_for
from tests.generated import POLICY, T0, generated_stream
from tests.integration.test_worker_kafka import (
    Worker,
    _assert_no_tracebacks,
    _prefix,
    audit_of,
    by_workload,
    env_for,
    produce,
    publish,
    read_events,
    read_topic,
    replay,
    wait_caught_up,
    workers,
    write_stream,
)

pytestmark = pytest.mark.kafka

WEB = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def custom_hpa_with_max_replica() -> dict[str, object]:
    """Nanit's custom HPA for ``web`` with ``maxReplica`` for ``maxReplicas``."""
    return {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "target": {"value": 100},
            "metric": {"series": "queue_per_replica"},
            "minReplicas": 1,
            "maxReplica": 6,
        },
    }


def test_a_misspelled_policy_field_is_dead_lettered_with_its_path_and_good_input_is_unaffected(
    kafka_broker: str, tmp_path: Path
) -> None:
    events, policy_docs = generated_stream(("web", "api"), 60)
    stream, policies = write_stream(tmp_path, events, policy_docs)
    expected = audit_of(replay(tmp_path, stream, policies))
    assert expected, "the good input makes decisions"

    nested = copy.deepcopy(POLICY)  # web's own Hvpa, one level deeper
    nested["spec"]["hpa"]["template"]["spec"]["maxReplica"] = 6
    bad_policies = [
        orjson.dumps({"type": "policy", "ts": T0 + 7, "workload": WEB, "policy": custom_hpa_with_max_replica()}),
        orjson.dumps({"type": "policy", "ts": T0 + 12, "workload": WEB, "policy": nested}),
    ]
    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    publish(env, stream, policies)
    produce(kafka_broker, [(prefix + "policies", b"c1/shop/Deployment/web", value) for value in bad_policies])
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: (
                len(read_topic(kafka_broker, prefix + "deadletter")) >= len(bad_policies)
                and len(read_topic(kafka_broker, prefix + "audit")) >= len(expected)
            ),
            120,
            interval=0.3,
            message=lambda: ws[0].text()[-3000:],
        )
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
        assert ws[0].stats()["deadletter"] == len(bad_policies)
    _assert_no_tracebacks(*ws)

    assert by_workload(read_events(kafka_broker, prefix + "audit")) == by_workload(expected)
    letters = read_events(kafka_broker, prefix + "deadletter")
    assert sorted((d["value"], d["error"]) for d in letters) == sorted(
        [
            (
                bad_policies[0].decode(),
                "field 'policy.spec.maxReplica': unknown field (did you mean maxReplicas?)",
            ),
            (
                bad_policies[1].decode(),
                "field 'policy.spec.hpa.template.spec.maxReplica': unknown field (did you mean maxReplicas?)",
            ),
        ]
    )
    for d in letters:
        assert d["topic"] == prefix + "policies" and d["key"] == "c1/shop/Deployment/web"
        assert isinstance(d["partition"], int) and isinstance(d["offset"], int)
