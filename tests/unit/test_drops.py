"""The worker drops nothing in silence (issue 29 item 3): offsets its consumer skipped.

The other drops are pinned on the real broker (tests/integration: late inputs in test_worker_kafka,
misrouted, forged own recommendations and the collector's refused writes in
test_security_input_topics); a gap in a topic without gaps cannot be provoked there, so the agent's
batch handling runs here on a real Faust app, with the broker side left out.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from agents.app import create_app
from cli.worker import parse_worker_settings
from ops.observability import Metrics
from streams.merge import Output


class _Message:
    def __init__(self, topic: str, offset: int, value: bytes) -> None:
        self.topic = topic
        self.partition = 0
        self.offset = offset
        self.key = b"c1/shop/Deployment/web"
        self.value = value
        self.headers: list[Any] = []
        self.timestamp = 0.0


class _Event:
    def __init__(self, message: _Message) -> None:
        self.message = message


def _dropped(metrics: Metrics) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            if s.name == "tandem_events_dropped_total":
                out[(s.labels["topic"], s.labels["reason"])] = s.value
    return out


def test_offsets_the_consumer_skipped_are_counted_and_dead_lettered() -> None:
    loop = asyncio.new_event_loop()
    try:
        settings = parse_worker_settings(["--store", "memory://", "--without-web", "--topic-prefix", "p."])
        app = create_app(settings, loop=loop)
        pipeline = app.tandem_pipeline
        metrics = Metrics()
        pipeline.diagnostics.metrics = metrics
        pipeline.assignment.need_reload = False
        published: list[tuple[Output, list[Any]]] = []

        async def publish(out: Output, rejects: list[Any]) -> None:
            published.append((out, list(rejects)))

        async def nothing(*_: Any, **__: Any) -> None:
            return None

        pipeline.publisher.publish = publish  # type: ignore[method-assign]
        pipeline.flow.throttle = nothing  # type: ignore[method-assign]
        pipeline.checkpoints.due = lambda now: False  # type: ignore[method-assign]
        pipeline.offsets.highwaters = lambda p: {}  # type: ignore[method-assign]
        hpa = {
            "type": "hpa",
            "ts": 100.0,
            "workload": {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"},
            "desired_replicas": 2,
        }
        batch = [
            _Event(_Message("p.hpa", 3, orjson.dumps(hpa))),
            _Event(_Message("p.hpa", 7, orjson.dumps({**hpa, "ts": 101.0}))),  # 4, 5 and 6 never came
        ]
        loop.run_until_complete(pipeline.process(batch))
    finally:
        loop.close()
    [(_, rejects)] = published
    assert [(kind, key, topic, reason, n) for kind, key, _, topic, reason, n in rejects] == [
        ("hpa", None, "p.hpa", "not_delivered", 3)
    ]
    assert orjson.loads(rejects[0][2]) == {
        "topic": "p.hpa",
        "partition": 0,
        "offset": 4,
        "key": None,
        "value": None,
        "error": "not delivered: offsets 4..6 skipped by the consumer",
    }
    assert _dropped(metrics) == {("p.hpa", "not_delivered"): 3.0}
