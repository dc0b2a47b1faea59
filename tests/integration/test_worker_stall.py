"""A stalled input is loud (issue #18): logged, gauged, /readyz fails, and the worker exits to be restarted.

The stall is provoked on purpose on the real broker: ``TANDEM_FAULT_FREEZE_INPUT`` keeps one input
topic-partition paused in aiokafka behind the merge's back, which is the shape of the known
paused-after-rebalance defect.  The input is paused before its first fetch, so the consumer never
learns its high watermark: the worker must ask the broker for end offsets to see the stall at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.kafka import wait_for
from tests.integration.test_metrics_worker import free_port, get, scrape
from tests.integration.test_worker_kafka import (
    Worker,
    _assert_no_tracebacks,
    _prefix,
    audit_of,
    by_workload,
    env_for,
    generated_stream,
    halves_after_a_tick,
    publish,
    read_events,
    read_topic,
    replay,
    wait_caught_up,
    workers,
    write_stream,
)

pytestmark = pytest.mark.kafka


def test_a_stalled_input_is_reported_fails_readiness_and_ends_the_worker(kafka_broker: str, tmp_path: Path) -> None:
    events, policies = generated_stream(("web", "api", "db", "jobs"), 60)
    stream, policy_paths = write_stream(tmp_path, events, policies)
    port = free_port()
    prefix = _prefix()
    env = env_for(
        kafka_broker,
        prefix,
        TANDEM_METRICS_PORT=str(port),
        TANDEM_READY_MAX_EVENT_AGE="0",
        TANDEM_READY_MAX_LAG="0",
        TANDEM_STALL_TIMEOUT="3",
        TANDEM_STALL_EXIT="20",
        TANDEM_FAULT_FREEZE_INPUT="hpa",
    )
    with workers() as ws:
        w = Worker(tmp_path, "stall", env)
        ws.append(w)
        topic = f"{prefix}hpa"
        # Input published once the worker owns its partitions (and so has frozen the hpa input).
        assert wait_for(lambda: "fault injection: [" in w.text(), 120, interval=0.2, message="the freeze applied")
        publish(env, stream, policy_paths)

        def stalled() -> list[tuple[str, str]]:
            try:
                samples = scrape(port)
            except OSError:
                return []
            return sorted(
                (dict(labels)["topic"], dict(labels)["partition"])
                for (name, labels), v in samples.items()
                if name == "tandem_input_stalled" and v == 1.0
            )

        def stalled_now() -> bool:
            return bool(stalled())

        assert wait_for(stalled_now, 120, interval=0.5, message=lambda: f"stall gauged ({w.text()[-3000:]})")
        # The frozen input is stalled; inputs of its partitions that the merge then holds back stop too
        # (no decision can be made past the frozen one), and each is named in /readyz and in the log.
        now = stalled()
        assert topic in {t for t, _ in now}
        assert {t for t, _ in now} <= {
            f"{prefix}{k}" for k in ("metric", "metrics", "workloads", "hpa", "vpa", "policies")
        }
        code, body = get(port, "/readyz")
        assert code == 503
        for t, partition in now:
            assert f"input {t}[{partition}] stalled: " in body
            assert f"input {t}[{partition}] stalled: " in w.text()
        assert wait_for(lambda: not w.alive(), 120, interval=0.5, message="the worker exits after --stall-exit")
        assert w.proc.returncode == 75
        assert "exiting with status 75" in w.text()


def test_a_fetch_that_never_returns_is_ended_and_the_worker_catches_up(kafka_broker: str, tmp_path: Path) -> None:
    """aiokafka sends one fetch per broker at a time, so one that never returns stops every input
    of a one-broker cluster (CI, stop 27: four minutes after a broker restart, until the test gave
    up).  The worker reads the first half of a stream; then its next fetch hangs
    (``TANDEM_FAULT_HANG_FETCH``) and the second half is published.  The worker reports the inputs
    as stalled, ends the fetch half a stall timeout later, and carries on: the audit equals the
    replay of the whole stream."""
    events, policy_docs = generated_stream(tuple(f"w{i:02d}" for i in range(8)), 60)
    stream, policies = write_stream(tmp_path, events, policy_docs)
    expected = audit_of(replay(tmp_path, stream, policies))
    first, second = halves_after_a_tick(tmp_path, events)
    trigger = tmp_path / "hang"
    prefix = _prefix()
    env = env_for(kafka_broker, prefix, TANDEM_STALL_TIMEOUT="3", TANDEM_FAULT_HANG_FETCH=str(trigger))
    publish(env, first, policies)
    with workers() as ws:
        w = Worker(tmp_path, "hang", env)
        ws.append(w)
        wait_for(lambda: read_topic(kafka_broker, prefix + "audit"), 120, interval=0.2, message=w.text)
        wait_caught_up(kafka_broker, prefix, workers=(w,))
        trigger.touch()
        wait_for(lambda: "fault injection: a fetch request" in w.text(), 30, interval=0.1, message=w.text)
        publish(env, second, [])
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected),
            120,
            interval=0.5,
            message=lambda: f"{len(expected)} audit events ({w.text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix, workers=(w,))
        text = w.text()
        assert "stalled: " in text
        # Where it waited is named: the fault's coroutine inside aiokafka's fetch task.
        assert "an aiokafka fetch task hung while inputs stall, ended: proc:" in text
        assert w.alive()
        assert w.stop() == 0
    _assert_no_tracebacks(w)
    got = read_events(kafka_broker, prefix + "audit")
    assert by_workload(got) == by_workload(expected)
