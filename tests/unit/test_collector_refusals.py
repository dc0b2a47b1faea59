"""The collector's refusals of invalid policy objects (docs/edge.md, "Invalid policies"), without a
cluster: what :class:`edge.translate.Collector` queues (once per resourceVersion), the dead-letter
record the collector writes for one, and that reporting a refusal never raises.  The Event itself,
on a real kube-apiserver, is tests/integration/test_collector_invalid_policy.py's."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import orjson
import pytest

import edge.collector as collector_module
from edge.collector import COLLECTOR_COMPONENT, _report_refusal, deadletter_value
from edge.kube import POLICY_RESOURCES
from edge.status import event_name
from edge.translate import Collector, Refusal
from scaling.events import decode_event

HVPA = POLICY_RESOURCES[0]  # autoscaling.k8s.io/v1alpha1
MISSPELLED = "field 'spec.hpa.template.spec.maxReplica': unknown field (did you mean maxReplicas?)"


def hvpa(rv: str, **spec_changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "0b8a6c5e-uid",
            "resourceVersion": rv,
            "annotations": {"hpa-controller": "hvpa"},
        },
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 1, "maxReplicas": 5}}},
            "vpa": {"deploy": True},
            "weightBasedScalingIntervals": [{"vpaWeight": 40, "startReplicaCount": 1, "lastReplicaCount": 5}],
        },
    }
    obj["spec"].update(spec_changes)
    return obj


def misspelled(rv: str) -> dict[str, Any]:
    obj = hvpa(rv)
    obj["spec"]["hpa"]["template"]["spec"]["maxReplica"] = 3  # where the CRD keeps unknown fields
    return obj


def test_a_refused_policy_is_queued_once_per_resource_version_and_not_sent() -> None:
    c = Collector("eu-1")
    assert c.observe("ADDED", HVPA, misspelled("10"), 100.0) == []
    [refusal] = c.take_refusals()
    assert refusal.involved == {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "name": "web",
        "namespace": "shop",
        "uid": "0b8a6c5e-uid",
        "resourceVersion": "10",
    }
    assert refusal.message == (
        f"not a valid policy, not used (the workload keeps its last valid policy, if any): {MISSPELLED}"
    )
    assert refusal.key == "eu-1/shop/Deployment/web"
    assert refusal.error == MISSPELLED.replace("field 'spec.", "field 'policy.spec.")
    assert refusal.event["type"] == "policy" and refusal.event["ts"] == 100.0
    assert refusal.event["workload"] == {"cluster": "eu-1", "namespace": "shop", "kind": "Deployment", "name": "web"}
    assert refusal.event["policy"]["spec"]["hpa"]["template"]["spec"]["maxReplica"] == 3
    assert c.rejected == 1

    # The same version again (a relist after 410, a watch replaying it): nothing new.
    assert c.observe("SYNC", HVPA, ("shop", [misspelled("10")]), 101.0) == []
    assert c.observe("MODIFIED", HVPA, misspelled("10"), 102.0) == []
    assert c.take_refusals() == []
    # A new version, still invalid (here only its labels changed): reported again.
    relabelled = misspelled("11")
    relabelled["metadata"]["labels"] = {"team": "shop"}
    c.observe("MODIFIED", HVPA, relabelled, 103.0)
    [again] = c.take_refusals()
    assert again.involved["resourceVersion"] == "11" and again.message == refusal.message


def test_a_valid_version_or_a_deletion_clears_the_memory() -> None:
    c = Collector("eu-1")
    c.observe("ADDED", HVPA, hvpa("1", vpa={"deploy": True, "scaleUp": {"stabilizationDuration": "3 minutes"}}), 1.0)
    [bad] = c.take_refusals()
    assert "field 'spec.vpa.scaleUp.stabilizationDuration': '3 minutes' is not a duration" in bad.message
    sent = c.observe("MODIFIED", HVPA, hvpa("2"), 2.0)
    assert [e["type"] for e in sent] == ["policy"] and c.refused == {}
    c.observe("MODIFIED", HVPA, misspelled("3"), 3.0)
    assert len(c.take_refusals()) == 1
    c.observe("DELETED", HVPA, misspelled("3"), 4.0)
    assert c.refused == {}
    c.observe("ADDED", HVPA, misspelled("3"), 5.0)  # recreated (a new object)
    assert len(c.take_refusals()) == 1


def test_a_policy_without_a_readable_target_is_keyed_by_itself() -> None:
    c = Collector("eu-1")
    obj = hvpa("7")
    del obj["spec"]["targetRef"]
    c.observe("ADDED", HVPA, obj, 1.0)
    [refusal] = c.take_refusals()
    assert refusal.key == "eu-1/shop/Hvpa/web"
    assert refusal.event["workload"] is None
    assert refusal.error.startswith("field 'policy.")


def test_the_dead_letter_has_the_workers_record_shape() -> None:
    c = Collector("eu-1")
    c.observe("ADDED", HVPA, misspelled("10"), 100.0)
    [refusal] = c.take_refusals()
    record = orjson.loads(deadletter_value(refusal, "tandem.policies"))
    assert list(record) == ["topic", "partition", "offset", "key", "value", "error"]
    assert record["topic"] == "tandem.policies"
    assert (record["partition"], record["offset"]) == (None, None)
    assert record["key"] == "eu-1/shop/Deployment/web"
    assert (
        record["error"] == "field 'policy.spec.hpa.template.spec.maxReplica': unknown field (did you mean maxReplicas?)"
    )
    event = orjson.loads(record["value"])
    assert event == refusal.event
    decode_event(event)  # a well-formed policy event: only its manifest is refused


class FakeSink:
    def __init__(self, fail: bool = False) -> None:
        self.letters: list[bytes] = []
        self.fail = fail

    async def dead_letter(self, refusal: Refusal) -> bool:
        if self.fail:
            raise RuntimeError("TopicAuthorizationFailedError")
        self.letters.append(deadletter_value(refusal, "t.policies"))
        return True


def test_reporting_records_the_warning_then_the_dead_letter_and_never_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c = Collector("eu-1")
    c.observe("ADDED", HVPA, misspelled("10"), 100.0)
    [refusal] = c.take_refusals()
    recorded: list[tuple[Any, ...]] = []

    def record_event(api: Any, type_: str, reason: str, message: str, involved: Any, **kw: Any) -> str:
        recorded.append((api, type_, reason, message, copy.deepcopy(involved), kw["component"], kw["instance"]))
        return "created"

    monkeypatch.setattr(collector_module, "record_event", record_event)
    sink = FakeSink()
    asyncio.run(_report_refusal("api", "eu-1", sink, refusal, None))
    assert recorded == [
        (
            "api",
            "Warning",
            "InvalidPolicy",
            refusal.message,
            refusal.involved,
            COLLECTOR_COMPONENT,
            f"{COLLECTOR_COMPONENT}-eu-1",
        )
    ]
    assert [orjson.loads(v)["error"] for v in sink.letters] == [refusal.error]

    def refuse(*args: Any, **kw: Any) -> str:
        raise PermissionError("events is forbidden")

    monkeypatch.setattr(collector_module, "record_event", refuse)
    with caplog.at_level(logging.WARNING, "tandem.collector"):
        asyncio.run(_report_refusal("api", "eu-1", FakeSink(fail=True), refusal, None))
    assert "event InvalidPolicy on Hvpa shop/web not recorded" in caplog.text
    assert "the refused Hvpa shop/web is not on the dead-letter topic" in caplog.text


def test_the_same_refusal_names_the_same_event() -> None:
    """Two versions refused alike are one Event, counted (the name is fixed by what it says)."""
    c = Collector("eu-1")
    c.observe("ADDED", HVPA, misspelled("10"), 1.0)
    c.observe("MODIFIED", HVPA, misspelled("11"), 2.0)
    first, second = c.take_refusals()
    names = {
        event_name(r.involved["kind"], r.involved["name"], "Warning", "InvalidPolicy", r.message)
        for r in (first, second)
    }
    assert len(names) == 1 and next(iter(names)).startswith("web.tandem-")
