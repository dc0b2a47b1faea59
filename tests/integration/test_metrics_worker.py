"""``tandem worker`` serves Prometheus metrics, /healthz and /readyz (ops.observability) over a real broker."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.kafka import wait_for

pytestmark = pytest.mark.kafka


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = get(port, "/metrics")
    if status != 200:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def test_worker_metrics_count_the_published_events_and_its_decisions(kafka_broker: str, tmp_path: Path) -> None:
    from tests.integration.test_worker_kafka import (
        Worker,
        _prefix,
        env_for,
        generated_stream,
        publish,
        replay,
        wait_caught_up,
        workers,
        write_stream,
    )

    events, policies = generated_stream(("web", "api"), 120)
    stream, policy_paths = write_stream(tmp_path, events, policies)
    expected = [e for e in replay(tmp_path, stream, policy_paths) if e["type"] == "dev.tandem.decision.v1"]
    port = free_port()
    prefix = _prefix()
    env = env_for(kafka_broker, prefix, TANDEM_METRICS_PORT=str(port), TANDEM_READY_MAX_EVENT_AGE="0")
    publish(env, stream, policy_paths)
    with workers() as ws:
        ws.append(Worker(tmp_path, "metrics", env))
        assert wait_for(lambda: get(port, "/healthz")[0] == 200, 60, interval=0.2, message="/healthz 200")
        wait_caught_up(kafka_broker, prefix)
        # Every published input event is counted, by type (policies are published as events too).
        by_type = {"metric": 0, "workload": 0, "hpa": 0, "vpa": 0}
        for e in events:
            by_type[e["type"]] += 1
        wait_for(
            lambda: total(scrape(port), "tandem_decisions_total") >= len(expected),
            60,
            interval=0.2,
            message=lambda: f"{len(expected)} decisions counted ({ws[0].text()[-2000:]})",
        )
        samples = scrape(port)
        for type_, n in by_type.items():
            assert samples[("tandem_events_total", (("type", type_),))] == n
        assert samples[("tandem_events_total", (("type", "policy"),))] == len(policies)
        assert total(samples, "tandem_decisions_total") == len(expected)
        assert total(samples, "tandem_events_rejected_total") == 0
        assert samples[("tandem_decision_latency_seconds_count", ())] >= len(expected)
        assert get(port, "/readyz") == (200, "ok\n")
        assert ws[0].stop() == 0
