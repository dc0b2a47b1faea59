"""``tandem import prometheus`` against a real Prometheus (Debian's package, scripts/prometheus.sh)
whose TSDB holds a generated fleet of known usage (tests/prometheus_fleet.py)."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from cli.main import main
from edge.applier import ApplierConfig
from edge.kube import DEPLOYMENTS
from scaling.cloudevents import APPLIED, APPLY_FAILED
from scaling.engine import Engine
from scaling.settings import Settings
from scaling.vocabulary import LEARNED
from streams.history import envelopes
from tests import prometheus_fleet as fleet
from tests.fixtures.kafka import wait_for
from tests.integration.test_applier_kube import (
    CLUSTER,
    HVPA_V1,
    Harness,
    create,
    decision,
    deployment,
    hvpa,
    impersonating,
    install_crds,
    install_rbac,
    read,
)
from tests.integration.test_worker_kafka import (
    PARTITIONS,
    Worker,
    _assert_no_tracebacks,
    assert_audit_is_replay,
    env_for,
    publish,
    read_events,
    read_topic,
    replay,
    wait_caught_up,
    workers,
    write_stream,
)

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "prometheus.sh"
START = "2026-01-01T00:00:00Z"
END = "2026-01-01T00:40:00Z"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{' and '.join(missing)} not installed (Debian's prometheus package; scripts/test.sh installs it as root)"
        )
    state = tmp_path_factory.mktemp("prometheus")
    om = state / "fleet.om"
    om.write_text(fleet.openmetrics())
    env = {**os.environ, "TANDEM_PROMETHEUS_LOOKBACK": "55s", "TANDEM_PROMETHEUS_WATCH_PID": str(os.getpid())}
    run = dict(cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    loaded = subprocess.run(["bash", str(SCRIPT), "load", str(state), str(om)], **run)  # type: ignore[call-overload]
    assert loaded.returncode == 0, loaded.stderr
    started = subprocess.run(["bash", str(SCRIPT), "start", str(state)], **run)  # type: ignore[call-overload]
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(state)], **run)  # type: ignore[call-overload]


def _import(url: str, *extra: str, out: Path | None = None) -> int:
    args = ["import", "prometheus", url, "--start", START, "--end", END, "--cluster", "c1", "--attempts", "1"]
    return main([*args, *(["--out", str(out)] if out is not None else []), *extra])


def _read(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f]


def _key(event: dict[str, Any]) -> tuple[str, str, str]:
    w = event["workload"]
    return (w["namespace"], w["kind"], w["name"])


def test_the_imported_stream_is_the_fleet_usage_step_by_step(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "history.jsonl.gz"
    assert _import(prometheus, out=out) == 0
    err = capsys.readouterr().err
    events = _read(out)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert {e["workload"]["cluster"] for e in events} == {"c1"}

    metrics = {(e["ts"], _key(e)): e["samples"] for e in events if e["type"] == "metric"}
    for t in range(fleet.T0, fleet.END + 1, fleet.STEP):
        expected: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for pod in sorted(fleet.pods_at(t), key=lambda p: p.name):
            for c in sorted(pod.containers):
                sample = fleet.truth(t, pod, c)
                if sample is not None:
                    expected.setdefault(pod.workload, []).append(sample)
        got = {key: samples for (ts, key), samples in metrics.items() if ts == t}
        assert sorted(got) == sorted(expected), t
        for key, samples in expected.items():
            imported = got[key]
            # memory exact; CPU is a rate over the step, exact here up to float rounding
            assert [{k: v for k, v in s.items() if k != "cpu"} for s in imported] == [
                {k: v for k, v in s.items() if k != "cpu"} for s in samples
            ], (t, key)
            assert [s.get("cpu") for s in imported] == [
                pytest.approx(s.get("cpu"), abs=1e-9) if "cpu" in s else None for s in samples
            ], (t, key)

    web = [(e["ts"] - fleet.T0, e["replicas"], e["ready_replicas"], [(p["name"], p["phase"]) for p in e["pods"]])
           for e in events if e["type"] == "workload" and _key(e) == ("shop", "Deployment", "web")]  # fmt: skip
    a, b = ("web-5d8f-a", "Running"), ("web-5d8f-b", "Running")
    c_pending, c = ("web-5d8f-c", "Pending"), ("web-5d8f-c", "Running")
    assert web == [
        (0, 2, 2, [a, b]),
        (600, 3, 2, [a, b, c_pending]),  # kube_pod_status_phase
        (660, 3, 2, [a, b, c]),
        (720, 3, 3, [a, b, c]),
        (1560, 2, 2, [a, b]),
    ]
    started = {p["name"]: p["started"] for e in events if e["type"] == "workload" for p in e["pods"]}
    assert started == {p.name: fleet.started(p) for p in fleet.PODS}  # kube_pod_start_time
    first_web = next(e for e in events if e["type"] == "workload" and _key(e) == ("shop", "Deployment", "web"))
    assert first_web["containers"] == {
        "app": {"requests": {"cpu": 0.25, "memory": 256 * fleet.MIB}, "limits": {"memory": 512 * fleet.MIB}},
        "sidecar": {"requests": {"cpu": 0.05}},
    }
    hpa = [
        (e["ts"] - fleet.T0, _key(e)[2], e["desired_replicas"], e["min_replicas"], e["max_replicas"])
        for e in events
        if e["type"] == "hpa"
    ]
    assert hpa == [(0, "batch", 1, 1, 4), (0, "web", 2, 2, 10), (600, "web", 3, 2, 10), (1560, "web", 2, 2, 10)]
    # kube_horizontalpodautoscaler_spec_target_metric: cpu and memory are Resource metrics; a custom
    # metric's source type is not exported, so that HPA's events carry none, and a warning says so
    assert {e["workload"]["name"]: e.get("metrics") for e in events if e["type"] == "hpa"} == {
        "web": [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
            },
            {
                "type": "Resource",
                "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "419430400"}},
            },
        ],
        "batch": None,
    }
    assert (
        "tandem import prometheus: warning: HPA other/batch: metric 'queue_depth' (average) may be a Pods, Object "
        "or External metric (kube-state-metrics does not say); its hpa events carry no metrics\n"
    ) in err
    # the missing kube-state-metrics series is named; the StatefulSet's replicas come from its pods
    assert (
        "tandem import prometheus: warning: no series for statefulset_replicas "
        '(kube_statefulset_replicas{namespace=~".*"}): '
        "a StatefulSet's replicas are counted from its pods\n"
    ) in err
    db = [e for e in events if e["type"] == "workload" and _key(e) == ("shop", "StatefulSet", "db")]
    assert [(e["ts"], e["replicas"]) for e in db] == [(fleet.T0, 2)]
    assert (
        "121 metric, 7 workload, 4 hpa) for 3 workload(s) over 41 step(s) of 60 s, 2 workload-step(s) without metrics"
        in err
    )


def test_the_stream_replays(prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "history.jsonl"
    assert _import(prometheus, out=out) == 0
    capsys.readouterr()
    assert main(["replay", str(out), "--strict", "--out", str(tmp_path / "audit.jsonl")]) == 0
    assert "read 132 events from 1 file(s)" in capsys.readouterr().err


def test_range_queries_split_under_the_point_limit_give_the_same_stream(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole, split = tmp_path / "whole.jsonl", tmp_path / "split.jsonl"
    assert _import(prometheus, out=whole) == 0
    assert " in 20 request(s);" in capsys.readouterr().err  # one per query
    # 41 steps in parts of at most 7 points: 6 requests per query
    assert _import(prometheus, "--max-points", "7", "--parallel", "2", out=split) == 0
    assert " in 120 request(s);" in capsys.readouterr().err
    assert split.read_bytes() == whole.read_bytes()
    # read a window of 10 steps at a time (5 windows): what one window hands the next (owners, the
    # last workload and hpa events) keeps the stream the same
    windowed = tmp_path / "windowed.jsonl"
    assert _import(prometheus, "--window", "10", out=windowed) == 0
    assert " in 100 request(s);" in capsys.readouterr().err
    assert windowed.read_bytes() == whole.read_bytes()


def test_a_reader_process_gives_the_reader_threads_bytes_and_its_errors(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tandem import`` alone in its process reads the next window in a forked process
    (streams.prometheus._reader); within a process that runs other threads, in a thread.  Both
    give the same bytes (three windows of 15 steps), and the process's query error is the same
    one line, nothing written."""
    threaded, forked = tmp_path / "threaded.jsonl.gz", tmp_path / "forked.jsonl.gz"
    monkeypatch.setattr("threading.active_count", lambda: 2)  # as if another thread ran: the thread
    assert _import(prometheus, "--window", "15", out=threaded) == 0
    argv = [sys.executable, "-m", "cli", "import", "prometheus", prometheus, "--start", START, "--end", END]
    argv += ["--cluster", "c1", "--attempts", "1", "--window", "15"]
    done = subprocess.run([*argv, "--out", str(forked)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert " in 60 request(s);" in done.stderr  # counted by the reader process, per window
    assert gzip.decompress(forked.read_bytes()) == gzip.decompress(threaded.read_bytes())
    queries = tmp_path / "queries.yaml"
    queries.write_text("queries:\n  memory: 'sum(rate(container_memory_working_set_bytes[1m]'\n")
    bad = tmp_path / "bad.jsonl"
    done = subprocess.run([*argv, "--queries", str(queries), "--out", str(bad)], cwd=ROOT, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith(f"tandem import prometheus: {prometheus}: query 'sum(rate(container_memory")
    assert done.stderr.count("\n") == 1
    assert not bad.exists()


def test_namespace_keeps_only_that_namespace(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "other.jsonl"
    assert _import(prometheus, "--namespace", "other", out=out) == 0
    assert {_key(e) for e in _read(out)} == {("other", "Deployment", "batch")}


def test_a_query_error_names_the_url_and_query_and_writes_nothing(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.yaml"
    queries.write_text("queries:\n  memory: 'sum(rate(container_memory_working_set_bytes[1m]'\n")
    out = tmp_path / "history.jsonl"
    out.write_text("the earlier import\n")
    assert _import(prometheus, "--queries", str(queries), out=out) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"tandem import prometheus: {prometheus}: query 'sum(rate(container_memory_working_set_bytes[1m]': "
        "query error (HTTP 400): "
    )
    assert err.count("\n") == 1
    assert out.read_text() == "the earlier import\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl", "queries.yaml"]


def test_a_misspelled_query_name_is_refused_with_a_did_you_mean(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.yaml"
    queries.write_text("queries:\n  memroy: container_memory_working_set_bytes\n")
    assert _import(prometheus, "--queries", str(queries), out=tmp_path / "h.jsonl") == 2
    err = capsys.readouterr().err
    assert (
        err == f"tandem import prometheus: --queries: {queries}: field 'queries.memroy': unknown name "
        "(did you mean memory?)\n"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    out = tmp_path / "history.jsonl"
    assert _import(url, "--attempts", "2", out=out) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tandem import prometheus: {url}: query 'rate(container_cpu_usage_seconds_total{{")
    assert err.endswith("after 2 attempt(s)\n") and "unreachable (" in err
    assert err.count("\n") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


class _Stub(http.server.BaseHTTPRequestHandler):
    status = 500
    body = b"{}"
    seen: ClassVar[list[str | None]] = []

    def do_POST(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Handler", (_Stub,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_bad_credentials_are_one_line_naming_the_url_and_query(
    stub: tuple[str, type[_Stub]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, handler = stub
    handler.status, handler.body = 401, b"Unauthorized\n"
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    assert (
        _import(url, "--attempts", "3", "--parallel", "1", "--bearer-token-file", str(token), out=tmp_path / "h.jsonl")
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith(f"tandem import prometheus: {url}: query 'rate(container_cpu_usage_seconds_total{{")
    assert err.endswith("': HTTP 401 Unauthorized (check --bearer-token-file / --basic-auth-file)\n")
    assert handler.seen == ["Bearer s3cret"]  # a 4xx is not retried
    assert not (tmp_path / "h.jsonl").exists()


def test_a_server_error_is_retried_then_reported(
    stub: tuple[str, type[_Stub]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, handler = stub
    handler.status, handler.body = 503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}'
    auth = tmp_path / "auth"
    auth.write_text("me:pw\n")
    assert (
        _import(url, "--attempts", "2", "--parallel", "1", "--basic-auth-file", str(auth), out=tmp_path / "h.jsonl")
        == 1
    )
    err = capsys.readouterr().err
    assert err.endswith("': HTTP 503 Service Unavailable: overloaded\n")
    assert handler.seen == ["Basic bWU6cHc="] * 2
    assert not (tmp_path / "h.jsonl").exists()


def _read_partition(broker: str, topic: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            out: list[dict[str, Any]] = []
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=1000)
                out.extend(json.loads(r.value) for r in batch.get(tp, []) if r.value is not None)
            return out
        finally:
            await consumer.stop()

    return asyncio.run(go())


@pytest.mark.kafka
def test_publish_writes_history_envelopes_to_the_metrics_topic_and_out_the_plain_events(
    prometheus: str, kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "history.jsonl"
    prefix = f"imp{uuid.uuid4().hex[:6]}."
    kafka = ["--broker", kafka_broker, "--topic-prefix", prefix, "--partitions", "1", "--retention-ms", "-1"]
    now = fleet.END + 3600
    assert _import(prometheus, "--publish", "--now", _rfc3339(now), *kafka, out=out) == 0
    assert (
        "tandem import prometheus: published 3 history envelope(s) (128 past metric and workload event(s) of 3 "
        f"workload(s)) to {prefix}metrics on {kafka_broker}: a worker learns from them and decides none of their "
        "ticks\n"
    ) in capsys.readouterr().err
    events = _read(out)  # --out: the plain events, for replay, report and simulate
    assert {e["type"] for e in events} == {"metric", "workload", "hpa"}
    assert _read_partition(kafka_broker, prefix + "metrics") == envelopes(events, now, fleet.END)
    for topic in ("workloads", "hpa", "vpa", "policies"):
        assert _read_partition(kafka_broker, prefix + topic) == [], topic  # no watermark either


def _own_vpa_at(events: list[dict[str, Any]], tick: float) -> dict[str, Any]:
    """tandem's own VPA recommendation for shop/web's app in force at ``tick`` (the last one made
    at or before it) from an Hvpa replay of ``events``."""
    manifest = hvpa("web", "web", max_replicas=10)
    manifest["metadata"]["namespace"] = "shop"
    engine = Engine(Settings(cluster="c1"))
    engine.add_policy(manifest)
    own = [e for kind, e in engine.run(events) if kind == "vpa" and e["ts"] <= tick]
    app: dict[str, Any] = own[-1]["containers"]["app"]
    return app


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.kafka
def test_history_published_after_live_events_warms_the_own_vpa_and_no_past_tick_is_decided(
    prometheus: str, kafka_broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker runs the live stream of shop/web; the history comes while it does (a second
    import is taken as well, not refused): at the first recommendation after it, tandem's own VPA
    is the warmed one, the one `tandem replay` gives for what the topics hold, and no decision of
    a past tick reaches the actuator topic."""
    out = tmp_path / "all.jsonl"
    assert _import(prometheus, out=out) == 0
    events = _read(out)
    live_from = fleet.END - 600
    first_live = min(e["ts"] for e in events if e["ts"] > live_from)
    restart = [
        {
            **[e for e in events if e["type"] == kind and e["ts"] <= live_from and _key(e)[2] == "web"][-1],
            "ts": first_live,
        }
        for kind in ("workload", "hpa")
    ]
    live = [*restart, *(e for e in events if e["ts"] > live_from)]
    envelope_ts = first_live + 130  # after the live events of the first two minutes and their last watermark
    before = [e for e in live if e["ts"] <= first_live + 120]
    after = [e for e in live if e["ts"] > envelope_ts]
    manifest = hvpa("web", "web", max_replicas=10)
    manifest["metadata"]["namespace"] = "shop"
    manifest["metadata"].setdefault("annotations", {})["tandem.dev/cluster"] = "c1"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, policies = write_stream(tmp_path / "a", before, [manifest])
    second, _ = write_stream(tmp_path / "b", after, [])

    prefix = f"imp{uuid.uuid4().hex[:6]}."
    env = env_for(kafka_broker, prefix)
    kafka = [
        "--broker",
        kafka_broker,
        "--topic-prefix",
        prefix,
        "--partitions",
        str(PARTITIONS),
        "--retention-ms",
        "-1",
    ]
    history = ["--end", _rfc3339(live_from), "--now", _rfc3339(envelope_ts), "--publish", *kafka]
    capsys.readouterr()
    with workers() as ws:
        publish(env, first, policies)
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: any(e.get("source") == "tandem" for e in read_events(kafka_broker, prefix + "vpa")),
            120,
            interval=0.5,
            message=lambda: f"the live stream's own VPA ({ws[0].text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix)
        for _ in range(2):  # the history, then the same again: learned twice, never refused
            args = ["import", "prometheus", prometheus, "--start", START, "--cluster", "c1", "--attempts", "1"]
            assert main([*args, *history]) == 0, capsys.readouterr().err
        assert "published 3 history envelope(s)" in capsys.readouterr().err
        publish(env, second, [])
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)
    assert read_topic(kafka_broker, prefix + "deadletter") == []

    own = [e for e in read_events(kafka_broker, prefix + "vpa") if e.get("source") == "tandem"]
    warm = next(e for e in own if e["ts"] > envelope_ts and _key(e)[2] == "web")
    assert warm["ts"] == first_live + 180
    assert warm["containers"]["app"] == _own_vpa_at(events, warm["ts"])  # the uninterrupted stream's
    assert (warm["containers"]["app"]["target"], warm["containers"]["app"]["lower_bound"]) == (
        {"cpu": "977m", "memory": "511772986"},
        {"cpu": "538m", "memory": "437440860"},
    )
    cold = [e for e in own if e["ts"] <= envelope_ts and _key(e)[2] == "web"][-1]
    assert cold["containers"]["app"]["target"] == {"cpu": "1038m", "memory": "351198544"}  # the live input alone
    # what the topics hold, replayed: the same own recommendations and audit
    recorded = tmp_path / "recorded.jsonl"
    inputs = [e for t in ("metrics", "workloads", "hpa") for e in read_events(kafka_broker, prefix + t)]
    inputs = [e for e in inputs if e.get("type") != "watermark" and e.get("source") != "tandem"]
    recorded.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in sorted(inputs, key=lambda e: e["ts"])))
    assert sum(e["type"] == "history" for e in inputs) == 6
    expected = replay(tmp_path, recorded, policies)
    assert [e for e in expected if e.get("source") == "tandem" and e["type"] == "vpa"] == own
    audit = read_events(kafka_broker, prefix + "audit")
    assert_audit_is_replay(audit, [e for e in expected if "specversion" in e])
    decisions = read_events(kafka_broker, prefix + "actuator")
    ticked = [e for e in audit if e["type"] != LEARNED]
    assert ticked and all(d["data"]["tick"] >= first_live for d in [*decisions, *ticked])  # nothing of the past
    # Each envelope said once: the first import's learned, the second's known already (issue 31).
    learned = sorted(
        (d["workload"]["name"], d["envelopes"], d["samples"], d["replica_slots"], d["skipped"])
        for d in (e["data"] for e in audit if e["type"] == LEARNED)
    )
    assert learned == [
        ("batch", 1, 31, 3, {"live": 0, "taught": 0}),
        ("batch", 2, 0, 0, {"live": 0, "taught": 31}),
        ("db", 1, 62, 3, {"live": 0, "taught": 0}),
        ("db", 2, 0, 0, {"live": 0, "taught": 62}),
        ("web", 1, 156, 3, {"live": 0, "taught": 0}),
        ("web", 2, 0, 0, {"live": 0, "taught": 156}),
    ]


def _own_vpa(events: list[dict[str, Any]], tick: float) -> dict[str, Any]:
    """tandem's own VPA recommendation for shop/web at ``tick`` from an Hvpa replay of ``events``."""
    manifest = hvpa("web", "web", max_replicas=10)
    manifest["metadata"]["namespace"] = "shop"
    engine = Engine(Settings(cluster="c1"))
    engine.add_policy(manifest)
    own = [e for kind, e in engine.run(events) if kind == "vpa" and e["ts"] == tick]
    assert len(own) == 1, own
    containers: dict[str, Any] = own[0]["containers"]
    return containers


@pytest.fixture(scope="module")
def kube(kube_apiserver: str, kafka_broker: str) -> dict[str, Any]:
    """The CRDs and RBAC installed; the applier's API acts as the tandem-applier service account."""
    from edge.kube import api_client, request

    admin = api_client(kube_apiserver)
    ns = f"tandem-setup-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    install_crds(admin, ns)
    install_rbac(admin)
    return {"admin": admin, "applier_api": impersonating(kube_apiserver, "tandem-applier"), "broker": kafka_broker}


@pytest.mark.kafka
@pytest.mark.kube
def test_history_warms_the_recommenders_and_no_decision_of_its_ticks_is_applied(
    prometheus: str,
    kube: dict[str, Any],
    kube_namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    out = tmp_path / "history.jsonl"
    assert _import(prometheus, out=out) == 0
    capsys.readouterr()
    events = _read(out)
    # Warm: the last ten minutes taken as live input, which starts as a collector does, with the
    # workload's spec and HPA. After the history before them, tandem's own VPA recommendation at the
    # first live tick is the one of the uninterrupted stream (30 minutes of samples); from the live
    # input alone, that of one minute.
    live_from = fleet.END - 600
    first_live = min(e["ts"] for e in events if e["ts"] > live_from)
    spec = [
        {
            **[e for e in events if e["type"] == kind and e["ts"] <= live_from and _key(e)[2] == "web"][-1],
            "ts": first_live,
        }
        for kind in ("workload", "hpa")
    ]
    live = spec + [e for e in events if e["ts"] > live_from]
    history = [e for e in events if e["ts"] <= live_from]
    warm, cold = _own_vpa(history + live, first_live)["app"], _own_vpa(live, first_live)["app"]
    assert warm == _own_vpa(events, first_live)["app"]
    assert (warm["target"], warm["lower_bound"]) == (
        {"cpu": "977m", "memory": "511772986"},
        {"cpu": "534m", "memory": "433805633"},
    )
    assert (cold["target"], cold["lower_bound"]) == (
        {"cpu": "271m", "memory": "297164212"},
        {"cpu": "50m", "memory": "131072k"},
    )

    # Safe: a worker that reads this history decides its past ticks; an applier with its default
    # maximum age refuses every such decision unread, on the real broker and API server, and
    # applies the fresh one that follows.
    ns, admin = kube_namespace, kube["admin"]
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    before = read(admin, DEPLOYMENTS, ns, "web")
    ticks = sorted({e["ts"] for e in events})
    old = [decision(ns, "web", tick=t, replicas={"from": 2, "to": 2 + i % 3}) for i, t in enumerate(ticks)]
    fresh = decision(ns, "web", tick=float(int(time.time())), replicas={"from": 2, "to": 4})
    caplog.set_level(logging.INFO, logger="tandem.applier")
    h = Harness(kube["broker"], kube["applier_api"], ApplierConfig(CLUSTER, max_decision_age=600))
    try:
        h.send(*old, fresh)
        assert h.result(fresh["id"])["type"] == APPLIED
        refused = [h.result(d["id"]) for d in old]
    finally:
        h.close()
    assert {r["type"] for r in refused} == {APPLY_FAILED}
    assert all(r["data"]["error"].startswith("refused: too old: its tick 2026-01-01T00:") for r in refused)
    assert len(refused) == 41 and h.applier.too_old == 0  # the fresh decision ended the run
    after = read(admin, DEPLOYMENTS, ns, "web")
    assert after["spec"]["replicas"] == 4  # the fresh decision's, and only its, write
    assert after["metadata"]["annotations"]["tandem.dev/last-decision"] == fresh["id"]
    assert before["spec"]["replicas"] == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "tandem.applier"]
    said = [line for line in lines if "too old" in line or "older than" in line]
    assert len(said) == 1, said  # one line for the 41, none per decision
    assert said[0].startswith(
        "refusing decisions older than --max-decision-age 600 s by this applier's clock (history or a backlog; "
        f"docs/edge.md), the first {CLUSTER}/{ns}/Deployment/web of tick 2026-01-01T00:00:00Z, "
    )
    assert said[0].endswith(
        ' s old; each is audited as refused and counted in tandem_applier_results_total{result="refused"}; '
        "this line comes again only after a fresh decision"
    )


def test_the_readme_section_runs_as_typed(prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """README "Try tandem on your cluster's history": its four commands, with the test's Prometheus
    and the fleet's time range for the URL and `-28d`, and the policy files made as it says."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Try tandem on your cluster's history", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [
        ["tandem", "import"],
        ["tandem", "replay"],
        ["tandem", "report"],
        ["tandem", "simulate"],
    ]
    for name, example in (("policy.yaml", "hvpa.yaml"), ("vertical.yaml", "vertical.yaml")):
        text = (ROOT / "examples" / "simulate" / example).read_text()
        (tmp_path / name).write_text(text.replace("tandem.dev/cluster: eu-1", "tandem.dev/cluster: prod"))
    os.chdir(tmp_path)  # the README's relative file names (pytest's monkeypatch is not needed: tmp_path)
    try:
        for argv in commands:
            argv = [prometheus if a == "http://prometheus.monitoring:9090" else a for a in argv[1:]]
            if argv[0] == "import":
                i = argv.index("--start")
                argv[i + 1 : i + 2] = [START, "--end", END]
            assert main(argv) == 0, (argv, capsys.readouterr().err[-2000:])
    finally:
        os.chdir(ROOT)
    capsys.readouterr()
    decisions = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert {d["subject"] for d in decisions} == {"prod/shop/Deployment/web"}
    assert (tmp_path / "report" / "index.html").is_file()
