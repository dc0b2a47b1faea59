"""``tandem import prometheus --publish`` sends history envelopes as the windows are read
(cli.importer._Publisher): the same envelopes as :func:`streams.history.envelopes` of the whole
history, and never more than two waiting per workload, so a month is never in memory."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import pytest

from cli import importer
from streams.history import envelopes
from streams.prometheus_api import QuerySet
from streams.settings import KafkaSettings
from tests.replaying import WL, ev

END = 1_767_225_600.0 + 50 * 60
NOW = END + 3600


def _windows(log: list[int]) -> Iterator[list[dict[str, Any]]]:
    """Fifty one-minute windows of three workloads' metric events; ``log`` counts those read."""
    for m in range(50):
        ts = 1_767_225_600.0 + 60 * m
        log.append(m)
        sample = {"container": "app", "cpu": 0.5}
        yield [
            ev("metric", ts, workload={**WL, "name": name}, samples=[{"pod": f"{name}-a", **sample}])
            for name in ("api", "db", "web")
        ]


def test_envelopes_go_as_windows_are_read_and_are_those_of_the_whole_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict[str, Any]] = []
    read: list[int] = []
    waiting_at_rounds: list[int] = []

    async def ensure_topics(settings: KafkaSettings) -> None:
        return None

    async def publish(settings: KafkaSettings, plan: Any) -> int:
        import orjson

        waiting_at_rounds.append(max(len(q) for q in publisher.waiting.values()) + 1)  # + the one sent now
        sent.extend(orjson.loads(value) for _, _, value, _ in plan.items)
        return len(plan.items)

    monkeypatch.setattr("streams.topics.ensure_topics", ensure_topics)
    monkeypatch.setattr("streams.publish.publish", publish)
    args = argparse.Namespace(now="pinned")
    o = importer._Options(NOW, 0, round(END * 1000), 60_000, importer.Auth(), QuerySet())
    publisher = importer._Publisher(args, o, KafkaSettings(broker="kafka:9092"), max_bytes=1024)
    assert publisher.run(_windows(read)) == 0

    everything = [e for window in _windows([]) for e in window]
    whole = envelopes(everything, NOW, END, max_bytes=1024)
    by_workload = sorted(sent, key=lambda e: e["workload"]["name"])  # stable: each one's in its order
    assert by_workload == whole
    assert len(whole) == 3 * 13  # 50 events of a workload, 4 to an envelope of 1 KiB
    assert max(waiting_at_rounds) <= 2  # reading waited: a workload never had more than two waiting
    assert publisher.said().startswith("published 39 history envelope(s) (150 past metric and workload event(s) of 3")
