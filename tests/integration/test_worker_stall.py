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
    _prefix,
    env_for,
    generated_stream,
    publish,
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
