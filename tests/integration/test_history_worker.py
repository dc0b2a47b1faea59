"""History envelopes through Kafka (docs/contract.md §3 ``history``): a stream whose envelopes come
before and after live events, published to a real broker, gives the worker's audit and own
recommendations byte for byte what ``tandem replay`` gives, and no decision of a past tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from scaling.cloudevents import rfc3339
from scaling.vocabulary import LEARNED
from streams.history import envelopes
from tests.fixtures.kafka import wait_for
from tests.integration.test_worker_kafka import (
    Worker,
    _assert_no_tracebacks,
    _prefix,
    assert_audit_is_replay,
    audit_of,
    by_workload,
    env_for,
    publish,
    read_events,
    read_topic,
    replay,
    wait_caught_up,
    workers,
    write_stream,
)
from tests.unit.test_history_envelope import hvpa, tortoise

H = 3600.0
DAY = 24 * H
#: Monday 2026-01-05T00:00:00Z: live from here, history before.
LIVE = 1_767_571_200.0


def workload(name: str) -> dict[str, str]:
    return {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": name}


def spec(name: str, ts: float, replicas: int) -> dict[str, Any]:
    return {"type": "workload", "ts": ts, "workload": workload(name), "replicas": replicas,
            "containers": {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}}}}  # fmt: skip


def usage(name: str, ts: float) -> dict[str, Any]:
    hour = int(ts // H) % 24
    samples = [
        {
            "pod": f"{name}-{p}",
            "container": "app",
            "cpu": 0.1 + 0.05 * ((hour + i) % 12),
            "memory": (200 + 10 * hour) << 20,
        }
        for i, p in enumerate("ab")
    ]
    return {"type": "metric", "ts": ts, "workload": workload(name), "samples": samples}


def past(name: str, days: int, step: float) -> list[dict[str, Any]]:
    out = []
    ts = LIVE - days * DAY
    while ts < LIVE:
        if ts % H == 0:
            out.append(spec(name, ts, 4 if 8 <= int(ts // H) % 24 < 20 else 2))
        out.append(usage(name, ts))
        ts += step
    return out


def live(name: str, minutes: int) -> list[dict[str, Any]]:
    return [spec(name, LIVE, 2), *(usage(name, LIVE + 60.0 * m) for m in range(minutes))]


def stream() -> list[dict[str, Any]]:
    """web (Hvpa, tandem's own VPA): two days of history in envelopes before its live events; api
    (Tortoise): a week of history in envelopes ten minutes after its live events began."""
    web = envelopes(past("web", 2, 300.0), LIVE, LIVE, max_bytes=64 * 1024)
    api = envelopes(past("api", 7, 900.0), LIVE + 600, LIVE, max_bytes=64 * 1024)
    events = [*web, *live("web", 90), *live("api", 90), *api]
    return sorted(events, key=lambda e: e["ts"])  # stable: web's envelopes before its live events at LIVE


def test_envelopes_interleaved_with_live_events_give_the_worker_replays_bytes(
    kafka_broker: str, tmp_path: Path
) -> None:
    events = stream()
    assert sum(e["type"] == "history" for e in events) >= 4
    web, api = hvpa(), tortoise()
    api["metadata"]["name"] = "api"
    api["spec"]["targetRefs"]["scaleTargetRef"]["name"] = "api"
    path, policies = write_stream(tmp_path, events, [web, api])
    expected = replay(tmp_path, path, policies)
    expected_audit = audit_of(expected)
    own = [e for e in expected if e not in expected_audit]
    learned = [e for e in expected_audit if e["type"] == LEARNED]
    ticked = [e for e in expected_audit if e["type"] != LEARNED]
    assert len(ticked) > 3 and len(own) > 10
    assert min(e["data"]["tick"] for e in ticked) >= LIVE  # no tick of the past
    # Each envelope said once, at its ts, every sample it carried learned or skipped as known.
    histories = [e for e in events if e["type"] == "history"]
    assert [(e["subject"].rsplit("/", 1)[1], e["time"], e["data"]["until"]) for e in learned] == [
        (h["workload"]["name"], rfc3339(h["ts"]), h["until"]) for h in histories
    ]
    carried = [sum(len(x.get("samples", ())) for x in h["events"]) for h in histories]
    assert [e["data"]["samples"] + e["data"]["skipped"]["taught"] for e in learned] == carried
    web = [e["data"] for e in learned if e["subject"].endswith("/web")]
    assert [d["envelopes"] for d in web] == [1, 2, 3] and sum(d["samples"] for d in web) == 2 * 576

    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    publish(env, path, policies)
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected_audit),
            180,
            interval=0.5,
            message=lambda: f"{len(expected_audit)} audit events ({ws[0].text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)
    got = read_events(kafka_broker, prefix + "audit")
    assert_audit_is_replay(got, expected_audit)
    got_own = [e for t in ("hpa", "vpa") for e in read_events(kafka_broker, prefix + t) if e.get("source") == "tandem"]
    assert sorted(map(orjson.dumps, got_own)) == sorted(map(orjson.dumps, own))
    decisions = read_events(kafka_broker, prefix + "actuator")
    assert decisions and min(d["data"]["tick"] for d in decisions) >= LIVE
    assert by_workload(decisions) == by_workload(
        e for e in expected_audit if e["type"] == "dev.tandem.decision.v1" and not e["data"]["dry_run"]
    )
    assert read_topic(kafka_broker, prefix + "deadletter") == []
    # the envelopes went to the metrics topic, nowhere else
    histories = [e for e in read_events(kafka_broker, prefix + "metrics") if e.get("type") == "history"]
    assert sorted(map(orjson.dumps, histories)) == sorted(orjson.dumps(e) for e in events if e["type"] == "history")
