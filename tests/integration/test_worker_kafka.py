"""``tandem worker`` over a real Kafka broker gives what ``tandem replay`` gives (issue 5).

Every test publishes a stream with ``tandem publish`` into topics of its own prefix, runs the worker
as a subprocess (``python -m cli.main worker``), reads the output topics back with aiokafka and
compares them with ``tandem replay`` of the same files.  Nothing is mocked and nothing waits by
sleeping: every wait polls with a deadline.

The streams are published *before* a worker reads them: a worker reading while a publish is still
writing may see one input topic caught up while another is not written yet, and then apply the
latter's events late (docs/worker.md explains this liveness trade-off).
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from cli.main import main as tandem
from tests.fixtures.kafka import REPO_ROOT, wait_for
from tests.generated import T0, generated_stream

pytestmark = pytest.mark.kafka

PARTITIONS = 4
EXAMPLE = REPO_ROOT / "examples" / "stream.jsonl.gz"
EXAMPLE_POLICIES = REPO_ROOT / "examples" / "policies.yaml"
INPUTS = ("metrics", "workloads", "hpa", "vpa", "policies")


# --------------------------------------------------------------------------------------- streams


def write_stream(
    tmp: Path, events: Iterable[Mapping[str, Any]], policies: Sequence[Mapping[str, Any]]
) -> tuple[Path, list[Path]]:
    stream = tmp / "stream.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    paths = []
    for i, manifest in enumerate(policies):
        p = tmp / f"policy-{i}.yaml"
        p.write_text(yaml.safe_dump(dict(manifest)))
        paths.append(p)
    return stream, paths


def halves_after_a_tick(tmp: Path, events: Sequence[Mapping[str, Any]]) -> tuple[Path, Path]:
    """A generated stream (5 s steps) written as two files, split right after the tick at T0 + 150 s.

    Its events are in the first half, which so ends with a complete tick window: the idle flush
    that may run in the quiet spell between the halves decides exactly what replay decides.  Split
    one step earlier, the quiet spell falls inside tick T0 + 150's window and, when it outlasts
    --idle-flush, that tick is decided before the rest of its window arrives (docs/worker.md,
    "Idle flush"): 2 of 15 runs of bench/chaos.py did that (ticks 550 and 565 differed).
    """
    half = T0 + 31 * 5.0
    (tmp / "first").mkdir()
    (tmp / "second").mkdir()
    first, _ = write_stream(tmp / "first", [e for e in events if e["ts"] < half], [])
    second, _ = write_stream(tmp / "second", [e for e in events if e["ts"] >= half], [])
    return first, second


def _policy_args(policies: Sequence[Path]) -> list[str]:
    return [a for p in policies for a in ("--policy", str(p))]


def replay(tmp: Path, stream: Path, policies: Sequence[Path]) -> list[dict[str, Any]]:
    """``tandem replay --include-recommendations``: the audit events and tandem's own hpa/vpa events."""
    out = tmp / f"replay-{uuid.uuid4().hex[:6]}.jsonl"
    err = io.StringIO()
    with redirect_stderr(err):
        code = tandem(["replay", str(stream), *_policy_args(policies), "--out", str(out), "--include-recommendations"])
    assert code == 0, err.getvalue()
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def publish(env: Mapping[str, str], stream: Path, policies: Sequence[Path]) -> str:
    """``tandem publish`` in a subprocess (the real command line); returns its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "publish", str(stream), *_policy_args(policies)],
        env={**os.environ, **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    return done.stderr


def audit_of(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type", "").startswith("dev.tandem.")]


def by_workload(events: Iterable[Mapping[str, Any]]) -> dict[str, list[bytes]]:
    """Each workload's events, in order, as the bytes the worker writes (orjson, insertion order)."""
    out: dict[str, list[bytes]] = defaultdict(list)
    for e in events:
        key = (
            e["subject"]
            if "subject" in e
            else "/".join(e["workload"][f] for f in ("cluster", "namespace", "kind", "name"))
        )
        out[key].append(orjson.dumps(e))
    return dict(out)


def assert_audit_is_replay(got: Iterable[Mapping[str, Any]], expected: Sequence[Mapping[str, Any]]) -> None:
    """The audit topic's events ``got`` are ``tandem replay``'s ``expected``, byte for byte.

    At least once (docs/worker.md): a worker that takes over decides again what its predecessor
    decided and did not commit, so ``got`` is deduplicated by id, and a repeated event must be
    byte-identical to the first (ids are content hashes: a repeat that differs is a bug, not a
    duplicate).  What is left must be, per workload, exactly replay's events in replay's order
    (the bytes the worker writes); across workloads the topic's order is the partitions'.
    """
    first_seen: dict[str, Mapping[str, Any]] = {}
    for e in got:
        seen = first_seen.setdefault(e["id"], e)
        assert orjson.dumps(seen) == orjson.dumps(e), f"a repeated event differs: {seen} then {e}"
    differ = sorted({str(e.get("data", {}).get("tick")) for e in expected if e["id"] not in first_seen})
    assert by_workload(first_seen.values()) == by_workload(expected), f"ticks decided differently: {differ}"


# --------------------------------------------------------------------------------------- kafka


def env_for(broker: str, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "TANDEM_BROKER": broker,
        "TANDEM_TOPIC_PREFIX": prefix,
        "TANDEM_PARTITIONS": str(PARTITIONS),
        "TANDEM_RETENTION_MS": "-1",  # the streams are from 2025: keep them (see streams/topics.py)
        "TANDEM_STORE": "memory://",
        "TANDEM_WITHOUT_WEB": "1",
        "TANDEM_IDLE_FLUSH": "1",
        "TANDEM_REBALANCE_TIMEOUT": "10",
        "TANDEM_SESSION_TIMEOUT": "10",
        "TANDEM_COMMIT_INTERVAL": "0.5",
        "TANDEM_STANDBY_REPLICAS": "0",
        "TANDEM_LOGLEVEL": "info",
        "TANDEM_METRICS_PORT": "0",  # several workers on one machine: no metrics server unless asked
        **extra,
    }


def _prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}."


async def _read_topic(broker: str, topic: str) -> list[tuple[int, int, bytes | None, bytes]]:
    """Every record of ``topic`` up to its current end: (partition, offset, key, value)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        got: list[tuple[int, int, bytes | None, bytes]] = []
        while True:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= end[tp] for pos, tp in zip(positions, tps, strict=True)):
                return got
            for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                got.extend((tp.partition, r.offset, r.key, r.value) for r in records)
    finally:
        await consumer.stop()


def read_topic(broker: str, topic: str) -> list[tuple[int, int, bytes | None, bytes]]:
    return asyncio.run(_read_topic(broker, topic))


def read_events(broker: str, topic: str) -> list[dict[str, Any]]:
    """The JSON values of ``topic``, each partition in offset order (one workload's are in one partition)."""
    records = sorted(read_topic(broker, topic), key=lambda r: (r[0], r[1]))
    return [orjson.loads(r[3]) for r in records]


async def _lags(broker: str, group: str, prefix: str, clusters: Sequence[str] = ()) -> dict[str, int]:
    """Uncommitted messages of the worker group, per input topic-partition that has any (the
    shared input topics and those of the ``--input-clusters`` ``clusters``)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
    await consumer.start()
    try:
        topics = [prefix + t for t in INPUTS] + [f"{prefix}{t}.{c}" for c in clusters for t in INPUTS]
        tps = [TopicPartition(topic, p) for topic in topics for p in range(PARTITIONS)]
        end = await consumer.end_offsets(tps)
        committed = await admin.list_consumer_group_offsets(group)
        lags = {f"{tp.topic}/{tp.partition}": end[tp] - (committed[tp].offset if tp in committed else 0) for tp in tps}
        return {k: v for k, v in lags.items() if v > 0}
    finally:
        await consumer.stop()
        await admin.close()


async def _lag(broker: str, group: str, prefix: str, clusters: Sequence[str] = ()) -> int:
    """The group's total lag, or -1 ("not yet") while the broker answers with a retriable error:
    a group coordinator still loading its offsets on a busy machine says so with
    ``GroupCoordinatorNotAvailableError`` for a moment after the group first commits."""
    try:
        return sum((await _lags(broker, group, prefix, clusters)).values())
    except KafkaError as exc:
        if not exc.retriable:
            raise
        return -1


def wait_caught_up(
    broker: str, prefix: str, timeout: float = 60.0, workers: Sequence[Any] = (), clusters: Sequence[str] = ()
) -> None:
    """The worker group has committed every input message (on failure: what lags, and the logs);
    ``clusters``: the worker's ``--input-clusters``, whose own input topics count too."""
    group = prefix + "worker"

    def diagnose() -> str:
        lags = asyncio.run(_lags(broker, group, prefix, clusters))
        logs = "\n".join(w.story(2000) for w in workers)
        return f"lag 0 (still lagging: {lags}){chr(10) + logs if logs else ''}"

    wait_for(lambda: asyncio.run(_lag(broker, group, prefix, clusters)) == 0, timeout, interval=0.3, message=diagnose)


def _missing(expected: Sequence[Mapping[str, Any]], broker: str, prefix: str) -> str:
    """Which expected audit events are not on the audit topic, and what stands in their place."""
    got = read_events(broker, prefix + "audit")
    ids = {e["id"] for e in got}
    missing = [e for e in expected if e["id"] not in ids]
    lines = [f"{len(missing)} of {len(expected)} missing"]
    for e in missing[:5]:
        tick = e["data"].get("tick")
        instead = [g for g in got if g["subject"] == e["subject"] and g["data"].get("tick") == tick]
        lines.append(f"want {orjson.dumps(e).decode()[:600]}")
        lines.extend(f"got  {orjson.dumps(g).decode()[:600]}" for g in instead)
    return "\n".join(lines)


def _end_offsets(broker: str, topic: str) -> int:
    """The sum of ``topic``'s end offsets over its partitions."""

    async def run() -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            return sum((await consumer.end_offsets(tps)).values())
        finally:
            await consumer.stop()

    return asyncio.run(run())


def produce(broker: str, records: Iterable[tuple[str, bytes | None, bytes | None]]) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker, acks="all")
        await producer.start()
        try:
            for topic, key, value in records:
                await producer.send_and_wait(topic, value=value, key=key)
        finally:
            await producer.stop()

    asyncio.run(run())


# --------------------------------------------------------------------------------------- workers


class Worker:
    """``python -m cli.main worker`` in a subprocess, its output in files under ``tmp``."""

    def __init__(self, tmp: Path, name: str, env: Mapping[str, str]) -> None:
        self.log = tmp / f"worker-{name}.log"
        self._fh = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"],
            env={**os.environ, **env},
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def story(self, tail: int = 3000) -> str:
        """For a failure message: tandem's own warnings and errors and the group's rebalances (the
        first 80: stall reports, what was ended or restarted, where inputs were sought to), then
        the end of the log.  A stall report comes once, and a minute of stats lines pushes it out
        of any tail of the log (CI, stop 27, showed the tail only); aiokafka's connection errors
        during an outage are thousands and left out."""
        text = self.text()
        levels = ("[WARNING] tandem worker:", "[ERROR] tandem worker:", "[CRITICAL] tandem worker:")
        # The group's story too: a rebalance after a broker restart re-reads from the committed
        # offsets, and what the worker then commits is what a lag failure is about.
        group = (
            "tandem worker: assigned partitions",
            "sought to their log start",
            "Joined group",
            "Revoking previously",
            "session expired",
            "member_id was not recognized",
            "Seek stream partitions",
        )
        lines = [
            ln
            for ln in text.splitlines()
            if any(m in ln for m in levels) or any(m in ln for m in group) or ln.startswith("Traceback")
        ]
        return "\n".join(
            ["-- tandem's warnings and errors, the group --", *lines[:80], "-- end of the log --", text[-tail:]]
        )

    def assigned(self) -> list[list[int]]:
        return [orjson.loads(m) for m in re.findall(r"tandem worker: assigned partitions (\[[0-9, ]*\])", self.text())]

    def loaded(self) -> list[int]:
        return [int(n) for n in re.findall(r"tandem worker: (\d+) workload\(s\) loaded", self.text())]

    def stats(self) -> dict[str, int]:
        lines = re.findall(r"tandem worker: stats (.*)", self.text())
        if not lines or lines[-1].strip() == "-":
            return {}
        return {k: int(v) for k, v in (kv.split("=") for kv in lines[-1].split())}

    def stop(self) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=30)
        self._fh.close()
        return code

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        self._fh.close()


@contextmanager
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    try:
        yield started
    finally:
        for w in started:
            if w.alive():
                w.stop()


def _assert_no_tracebacks(*ws: Worker) -> None:
    for w in ws:
        assert "Traceback" not in w.text(), w.text()[-4000:]


# --------------------------------------------------------------------------------------- tests


def _example_or_generated(tmp: Path) -> tuple[Path, list[Path]]:
    if EXAMPLE.exists() and EXAMPLE_POLICIES.exists():
        return EXAMPLE, [EXAMPLE_POLICIES]
    return write_stream(tmp, *generated_stream(("web", "api", "db"), 400))


def test_worker_output_equals_replay_byte_for_byte(kafka_broker: str, tmp_path: Path) -> None:
    """Same ids, same content, same order per workload; decisions also on the actuator topic."""
    stream, policies = _example_or_generated(tmp_path)
    expected = replay(tmp_path, stream, policies)
    expected_audit = audit_of(expected)
    expected_recommendations = [e for e in expected if e not in expected_audit]
    assert len(expected_audit) > 50

    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    publish(env, stream, policies)
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected_audit),
            120,
            interval=0.5,
            message=lambda: f"{len(expected_audit)} audit events ({ws[0].text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)

    got_audit = read_events(kafka_broker, prefix + "audit")
    assert by_workload(got_audit) == by_workload(expected_audit)
    assert len(got_audit) == len(expected_audit)

    decisions = [e for e in expected_audit if e["type"] == "dev.tandem.decision.v1" and not e["data"]["dry_run"]]
    assert by_workload(read_events(kafka_broker, prefix + "actuator")) == by_workload(decisions)

    own = [e for t in ("hpa", "vpa") for e in read_events(kafka_broker, prefix + t) if e.get("source") == "tandem"]
    assert sorted(map(orjson.dumps, own)) == sorted(map(orjson.dumps, expected_recommendations))
    assert read_topic(kafka_broker, prefix + "deadletter") == []


def test_worker_killed_mid_stream_resumes_without_losing_decisions(kafka_broker: str, tmp_path: Path) -> None:
    """SIGKILL after part of the audit is out; the restarted worker (same RocksDB dir) completes it."""
    stream, policies = _example_or_generated(tmp_path)
    expected = audit_of(replay(tmp_path, stream, policies))
    expected_ids = [e["id"] for e in expected]

    prefix = _prefix()
    env = env_for(
        kafka_broker,
        prefix,
        TANDEM_STORE="rocksdb://",
        TANDEM_DATA_DIR=str(tmp_path / "state-store"),  # not "rocksdb": python -m puts the cwd on sys.path
        TANDEM_BATCH_SIZE="100",
        TANDEM_BATCH_WITHIN="0.05",
        # Checkpoints while the backlog is read, so that the kill comes after some state was
        # written (the worker reads the example's backlog in a few seconds, and with the default
        # 5 s it could reach a quarter of the audit before its first checkpoint: nothing to resume).
        TANDEM_PERSIST_INTERVAL="0.5",
        # the killed member holds its partitions until its session times out (6 s is Kafka's minimum)
        TANDEM_SESSION_TIMEOUT="6",
        TANDEM_REBALANCE_TIMEOUT="6",
    )
    publish(env, stream, policies)
    with workers() as ws:
        first = Worker(tmp_path, "first", env)
        ws.append(first)
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected) // 4,
            120,
            interval=0.2,
            message=lambda: f"a quarter of the audit ({first.text()[-3000:]})",
        )
        first.kill()
        before = len(read_topic(kafka_broker, prefix + "audit"))
        assert before < len(expected), "the worker finished before the kill: nothing was tested"

        second = Worker(tmp_path, "second", env)
        ws.append(second)
        wait_for(
            lambda: set(expected_ids) <= {e["id"] for e in read_events(kafka_broker, prefix + "audit")},
            180,
            interval=0.5,
            message=lambda: f"every decision after the restart ({second.text()[-3000:]})",
        )
        # Every input committed too (issue #18: Faust's recovery order once left a partition's
        # commit stuck below records it had dropped; agents/fence).
        wait_caught_up(kafka_broker, prefix, timeout=120.0, workers=(second,))
        assert second.stop() == 0
    _assert_no_tracebacks(second)
    assert max(second.loaded()) > 0  # it resumed from the persisted slots, not from scratch

    assert_audit_is_replay(read_events(kafka_broker, prefix + "audit"), expected)


def test_two_workers_split_partitions_and_a_rebalance_loses_nothing(kafka_broker: str, tmp_path: Path) -> None:
    """The second worker joins mid-stream; every workload's decisions are complete after dedup."""
    names = ["web", "api", "db", "cache", "queue", "auth", "search", "mail"]
    stream, policies = write_stream(tmp_path, *generated_stream(names, 800))
    expected = audit_of(replay(tmp_path, stream, policies))
    assert {e["subject"] for e in expected} == {f"c1/shop/Deployment/{n}" for n in names}

    # The stream in two parts split at a tick boundary (ticks at multiples of the 15 s sync period):
    # the second is published only once the newcomer owns its partitions, so there is work in
    # progress to take over however fast the first worker is.  Nothing of the second part is
    # older than the tick the first worker may have flushed at the end of the first.
    cut = T0 + 1800.0
    lines = stream.read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"".join(line for line in lines if orjson.loads(line)["ts"] <= cut))
    second.write_bytes(b"".join(line for line in lines if orjson.loads(line)["ts"] > cut))

    prefix = _prefix()
    env = env_for(kafka_broker, prefix, TANDEM_BATCH_SIZE="20", TANDEM_BATCH_WITHIN="0.02")
    publish(env, first, policies)
    with workers() as ws:
        a = Worker(tmp_path, "a", env)
        ws.append(a)
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= 20,
            120,
            interval=0.2,
            message=lambda: f"first audit events ({a.text()[-3000:]})",
        )
        b = Worker(tmp_path, "b", env)
        ws.append(b)
        wait_for(lambda: b.assigned() and b.assigned()[-1], 60, interval=0.2, message=lambda: b.text()[-3000:])
        publish(env, second, [])
        wait_for(
            lambda: {e["id"] for e in expected} <= {e["id"] for e in read_events(kafka_broker, prefix + "audit")},
            180,
            interval=0.5,
            message="every decision",
        )
        # Every input committed (issue #18: Faust's recovery order dropped records after the
        # rebalance and the partition's commit never passed them; agents/fence).
        wait_caught_up(kafka_broker, prefix, timeout=120.0, workers=(a, b))
        # the two workers split the partitions (stopping one hands all of them to the other)
        split_a, split_b = set(a.assigned()[-1]), set(b.assigned()[-1])
        assert b.stop() == 0
        assert a.stop() == 0
    _assert_no_tracebacks(a, b)
    assert split_a and split_b and not split_a & split_b and split_a | split_b == set(range(PARTITIONS))
    # the newcomer took over work in progress: it recovered slots written by the first worker and
    # carried on with them
    assert max(b.loaded()) > 0, b.text()[-3000:]
    assert b.stats().get("audit", 0) > 0, b.text()[-3000:]

    assert_audit_is_replay(read_events(kafka_broker, prefix + "audit"), expected)


def test_bad_input_goes_to_the_dead_letter_topic_and_good_input_is_unaffected(
    kafka_broker: str, tmp_path: Path
) -> None:
    events, policy_docs = generated_stream(("web", "api"), 60)
    stream, policies = write_stream(tmp_path, events, policy_docs)
    expected = audit_of(replay(tmp_path, stream, policies))

    prefix = _prefix()
    env = env_for(kafka_broker, prefix)
    web = b"c1/shop/Deployment/web"
    bad_schema = orjson.dumps({"type": "metric", "ts": "soon", "workload": {"cluster": "c1"}, "samples": []})
    wrong_topic = orjson.dumps(
        {
            "type": "hpa",
            "ts": T0,
            "workload": orjson.loads(b'{"cluster":"c1","namespace":"shop","kind":"Deployment","name":"web"}'),
            "desired_replicas": 3,
        }
    )
    bad = [
        (prefix + "metrics", web, b"\xff\xfe\x00 garbage"),
        (prefix + "metrics", web, b'{"type": "metric", "ts": 1762250400.0,'),
        (prefix + "metrics", web, bad_schema),
        (prefix + "metrics", web, wrong_topic),
        (prefix + "hpa", b"c1/shop/Deployment/other", wrong_topic),
    ]
    publish(env, stream, policies)
    produce(kafka_broker, bad)
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: (
                len(read_topic(kafka_broker, prefix + "deadletter")) >= len(bad)
                and len(read_topic(kafka_broker, prefix + "audit")) >= len(expected)
            ),
            120,
            interval=0.3,
            message=lambda: ws[0].text()[-3000:],
        )
        wait_caught_up(kafka_broker, prefix)
        assert ws[0].stop() == 0
        assert ws[0].stats()["deadletter"] == len(bad)
    _assert_no_tracebacks(*ws)

    assert by_workload(read_events(kafka_broker, prefix + "audit")) == by_workload(expected)
    letters = {(d["topic"], d["offset"]): d for d in read_events(kafka_broker, prefix + "deadletter")}
    assert len(letters) == len(bad)
    by_value = {d.get("value"): d for d in letters.values()}
    garbage = next(d for d in letters.values() if d.get("value_base64"))
    assert garbage["topic"] == prefix + "metrics" and garbage["key"] == web.decode()
    assert "not valid JSON" in garbage["error"]
    assert "not valid JSON" in by_value['{"type": "metric", "ts": 1762250400.0,']["error"]
    assert by_value[bad_schema.decode()]["error"].startswith("field 'ts': ")
    wrong = [d for d in letters.values() if d["value"] == wrong_topic.decode()]
    assert sorted(d["error"] for d in wrong) == [
        "field 'key': message key 'c1/shop/Deployment/other' is not the event's workload key 'c1/shop/Deployment/web'",
        "field 'type': a 'hpa' event on the topic of 'metric' events",
    ]
    for d in letters.values():
        assert isinstance(d["partition"], int) and isinstance(d["offset"], int)


def _metrics_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sample(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def test_a_late_input_is_applied_reported_counted_by_topic_and_reason_and_dead_lettered(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Issue #29 item 3: an input older than a tick already decided (a recording published after the
    worker went on) is never dropped in silence: the audit's dev.tandem.late.v1, the dead letter
    with its reason, and ``tandem_events_dropped_total{topic,reason="late"}``."""
    import urllib.request

    events, policy_docs = generated_stream(("web",), 40)
    stream, policies = write_stream(tmp_path, events, policy_docs)
    expected = audit_of(replay(tmp_path, stream, policies))
    prefix = _prefix()
    port = _metrics_port()
    env = env_for(kafka_broker, prefix, TANDEM_METRICS_PORT=str(port))
    publish(env, stream, policies)
    first_hpa = next(e for e in events if e["type"] == "hpa")
    late = orjson.dumps({**first_hpa, "desired_replicas": first_hpa["desired_replicas"] + 1})
    web = b"c1/shop/Deployment/web"
    with workers() as ws:
        ws.append(Worker(tmp_path, "a", env))
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected),
            120,
            interval=0.3,
            message=lambda: ws[0].story(),
        )
        produce(kafka_broker, [(prefix + "hpa", web, late)])
        letters = wait_for(
            lambda: [d for d in read_events(kafka_broker, prefix + "deadletter") if d["error"].startswith("late: ")],
            60,
            interval=0.3,
            message=lambda: ws[0].story(),
        )

        def scraped() -> str | None:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            return text if _sample(text, "tandem_events_dropped_total", topic=prefix + "hpa", reason="late") else None

        metrics = wait_for(scraped, 30, interval=0.3, message="the late input counted")
        assert ws[0].stop() == 0
    _assert_no_tracebacks(*ws)
    assert _sample(metrics, "tandem_events_dropped_total", topic=prefix + "hpa", reason="late") == 1.0
    assert _sample(metrics, "tandem_events_late_total", type="hpa") == 1.0
    [letter] = letters
    assert (letter["topic"], letter["key"], letter["value"]) == (prefix + "hpa", web.decode(), late.decode())
    assert re.fullmatch(
        r"late: ts \S+ belongs to tick \S+, already decided through \S+; applied without a retroactive decision",
        letter["error"],
    ), letter["error"]
    reports = [e for e in read_events(kafka_broker, prefix + "audit") if e["type"] == "dev.tandem.late.v1"]
    assert [(r["data"]["input"]["partition"], r["data"]["input"]["offset"]) for r in reports] == [
        (letter["partition"], letter["offset"])
    ]


def test_topics_cli_creates_the_contract_topics_and_the_worker_refuses_other_partition_counts(
    kafka_broker: str, tmp_path: Path
) -> None:
    prefix = _prefix()
    env = {**os.environ, **env_for(kafka_broker, prefix)}
    env.pop("TANDEM_RETENTION_MS")

    def cli(*args: str, extra: Mapping[str, str] = {}) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env={**env, **extra},
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert cli("topics", "list").returncode == 1  # nothing there yet
    created = cli("topics", "create")
    assert created.returncode == 0, created.stderr
    listed = cli("topics", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    assert rows == {
        prefix + "metrics": [str(PARTITIONS), "delete", "7d"],
        prefix + "workloads": [str(PARTITIONS), "compact", "-"],
        prefix + "hpa": [str(PARTITIONS), "delete", "7d"],
        prefix + "vpa": [str(PARTITIONS), "delete", "7d"],
        prefix + "policies": [str(PARTITIONS), "compact", "-"],
        prefix + "actuator": [str(PARTITIONS), "delete", "7d"],
        prefix + "audit": [str(PARTITIONS), "delete", "90d"],
        prefix + "deadletter": [str(PARTITIONS), "delete", "14d"],
    }

    # Publishing a recording older than the topics' retention warns: Kafka would delete it.
    stream, policies = write_stream(tmp_path, *generated_stream(("web",), 3))
    published = cli("publish", str(stream), *_policy_args(policies))
    assert published.returncode == 0, published.stderr
    assert f"warning: {prefix}metrics keeps 7 day(s)" in published.stderr

    refused = cli("worker", extra={"TANDEM_PARTITIONS": str(PARTITIONS + 1)})
    assert refused.returncode == 2
    assert f"{prefix}metrics has {PARTITIONS} partitions, expected {PARTITIONS + 1}" in refused.stderr


def test_one_worker_of_two_killed_while_input_arrives_the_other_takes_over_losing_nothing(
    kafka_broker: str, tmp_path: Path
) -> None:
    """Issue #18, "inputs lost when a worker dies while input is arriving": 120 workloads on four
    partitions; worker a consumes, b joins, the second half of the input is published at full
    speed and a is SIGKILLed 1.5 s into it.  b takes over every partition and the audit equals the
    replay of the whole input: the same ids and content per workload, in order, after dedup by id
    (a repeated event is byte-identical), and the group commits every input."""
    names = [f"w{i:03d}" for i in range(120)]
    events, policy_docs = generated_stream(names, 60)
    stream, policies = write_stream(tmp_path, events, policy_docs)
    expected = audit_of(replay(tmp_path, stream, policies))
    first, second = halves_after_a_tick(tmp_path, events)

    prefix = _prefix()
    env = env_for(
        kafka_broker,
        prefix,
        TANDEM_BATCH_SIZE="100",
        TANDEM_BATCH_WITHIN="0.05",
        TANDEM_SESSION_TIMEOUT="6",
        TANDEM_REBALANCE_TIMEOUT="6",
    )
    publish(env, first, policies)
    published = _end_offsets(kafka_broker, prefix + "metrics")
    with workers() as ws:
        a = Worker(tmp_path, "a", env)
        ws.append(a)
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= 50,
            120,
            interval=0.2,
            message=lambda: f"first audit events ({a.text()[-3000:]})",
        )
        b = Worker(tmp_path, "b", env)
        ws.append(b)
        wait_for(lambda: b.assigned() and b.assigned()[-1], 60, interval=0.2, message=lambda: b.text()[-3000:])
        publisher = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "publish", str(second)],
            env={**os.environ, **env},
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for(
                lambda: publisher.poll() is not None or _end_offsets(kafka_broker, prefix + "metrics") > published,
                60,
                interval=0.05,
                message="the second half arriving",
            )
            time.sleep(1.5)  # the scenario's moment (processing time), not a wait for Kafka
            a.kill()
        finally:
            _, err = publisher.communicate(timeout=120)
        assert publisher.returncode == 0, err
        # Every input read and committed (nothing dropped, nothing stuck), and as many decisions
        # and blocked reports per workload as the replay makes.
        wait_caught_up(kafka_broker, prefix, timeout=180.0, workers=(b,))
        wait_for(
            lambda: (
                {(e["subject"], e["data"]["tick"]) for e in expected}
                <= {(e["subject"], e["data"]["tick"]) for e in read_events(kafka_broker, prefix + "audit")}
            ),
            180,
            interval=0.5,
            message=lambda: f"every tick decided after the takeover: {_missing(expected, kafka_broker, prefix)}",
        )
        # b takes every partition once a's session expires (a may have read its part to the end
        # before it died, so being caught up does not mean the takeover happened yet: CI saw [0, 1]).
        wait_for(
            lambda: b.assigned() and b.assigned()[-1] == list(range(PARTITIONS)),
            60,
            interval=0.2,
            message=lambda: f"b takes every partition ({b.story()})",
        )
        assert b.stop() == 0
    _assert_no_tracebacks(b)
    assert "skipped offsets" not in b.text()

    # Input resuming after a quiet spell reaches the topics in another order than it was produced;
    # the merge's grace (docs/worker.md, "Order across topics") waits for the records of the same
    # instant, so even the first ticks of the burst are replay's.
    assert_audit_is_replay(read_events(kafka_broker, prefix + "audit"), expected)


def test_inputs_fetched_while_faust_seeks_after_recovery_are_processed_and_committed(
    kafka_broker: str, tmp_path: Path
) -> None:
    """faust-streaming/faust#596, made certain instead of one run in eight (issue #18).

    At the end of a recovery that read the changelog, Faust resumes the input partitions, awaits
    its seek to the committed offsets and then clears the agent's queue; records fetched during the
    seek were cleared without an ack and later dropped as already read, so the partition's commits
    stopped for good.  ``TANDEM_FAULT_SLOW_SEEK`` widens that window to 5 s.  A worker is stopped
    after a quarter of the audit and a second one recovers its table and carries on; Faust's recovery
    resumes its inputs only after the seek (agents/fence), so every input is processed (the
    audit equals replay) and committed (no lag).
    """
    # a backlog the worker cannot read in the 5 s window, so records are still queued when it ends
    names = [f"w{i:03d}" for i in range(60)]
    stream, policies = write_stream(tmp_path, *generated_stream(names, 240))
    expected = audit_of(replay(tmp_path, stream, policies))

    prefix = _prefix()
    # small batches: the agent is slower than the fetcher, so its queue is full when Faust clears it
    env = env_for(kafka_broker, prefix, TANDEM_FAULT_SLOW_SEEK="5", TANDEM_BATCH_SIZE="20", TANDEM_BATCH_WITHIN="0.02")
    publish(env, stream, policies)
    with workers() as ws:
        first = Worker(tmp_path, "first", env)
        ws.append(first)
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected) // 4,
            120,
            interval=0.2,
            message=lambda: f"a quarter of the audit ({first.text()[-3000:]})",
        )
        assert first.stop() == 0
        assert len(read_topic(kafka_broker, prefix + "audit")) < len(expected), "nothing left to test"
        second = Worker(tmp_path, "second", env)
        ws.append(second)
        wait_for(
            lambda: {e["id"] for e in expected} <= {e["id"] for e in read_events(kafka_broker, prefix + "audit")},
            180,
            interval=0.5,
            message=lambda: f"every decision ({second.text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix, timeout=60.0, workers=(second,))
        assert second.stop() == 0
    _assert_no_tracebacks(first, second)
    assert "fault injection: Faust's seek after recovery takes 5.0 s longer" in second.text()
    assert max(second.loaded()) > 0  # it recovered the first worker's slots from the changelog
    assert_audit_is_replay(read_events(kafka_broker, prefix + "audit"), expected)


def test_offsets_are_committed_only_after_the_state_is_in_the_changelog(kafka_broker: str, tmp_path: Path) -> None:
    """Outputs acknowledged, then state, then offsets, also when the broker is slow to take the state.

    ``TANDEM_FAULT_SLOW_STATE`` sends each changelog record of the ``state`` table 0.3 s late.
    Faust flushes its producer buffer before it commits offsets, but that flush gives up after
    0.1 s without a record sent, so Faust committed offsets of inputs whose slots were still
    waiting (issue #18).  The worker is SIGKILLed mid-stream and a second one (memory store: the
    state can only come from the changelog) completes the audit exactly as replay has it.
    """
    names = ["web", "api", "db", "cache"]
    stream, policies = write_stream(tmp_path, *generated_stream(names, 400))
    expected = audit_of(replay(tmp_path, stream, policies))

    prefix = _prefix()
    env = env_for(
        kafka_broker,
        prefix,
        TANDEM_BATCH_SIZE="200",
        TANDEM_SESSION_TIMEOUT="6",  # the killed member holds its partitions until its session ends
        TANDEM_REBALANCE_TIMEOUT="6",
    )
    publish(env, stream, policies)
    with workers() as ws:
        first = Worker(tmp_path, "first", {**env, "TANDEM_FAULT_SLOW_STATE": "0.3"})
        ws.append(first)
        wait_for(
            lambda: len(read_topic(kafka_broker, prefix + "audit")) >= len(expected) // 3,
            120,
            interval=0.2,
            message=lambda: f"a third of the audit ({first.text()[-3000:]})",
        )
        first.kill()
        assert len(read_topic(kafka_broker, prefix + "audit")) < len(expected), "nothing left to test"
        second = Worker(tmp_path, "second", env)
        ws.append(second)
        wait_for(
            lambda: {e["id"] for e in expected} <= {e["id"] for e in read_events(kafka_broker, prefix + "audit")},
            120,
            interval=0.5,
            message=lambda: f"every decision after the kill ({second.text()[-3000:]})",
        )
        wait_caught_up(kafka_broker, prefix, timeout=60.0, workers=(second,))
        assert second.stop() == 0
    _assert_no_tracebacks(second)
    assert "fault injection: each state changelog record is sent 0.30 s late" in first.text()
    assert_audit_is_replay(read_events(kafka_broker, prefix + "audit"), expected)


def test_worker_creates_its_state_changelog_with_its_inputs_before_faust_starts(kafka_broker: str) -> None:
    """Left to Faust, the changelog was created as the app started, and a first table write could
    read metadata without it (0 partitions), which Faust takes for a mismatch and dies of
    (``PartitionsMismatch``, found by bench/chaos.py, issue #18).  The worker now makes it with
    its input topics and waits for its leaders, as it does for theirs."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from agents.settings import MAX_SLOT_BYTES
    from cli.worker import _prepare_topics, parse_worker_settings

    prefix = _prefix()
    settings = parse_worker_settings(["--broker", kafka_broker, "--topic-prefix", prefix, "--partitions", "3"])
    changelog = f"{prefix}worker-state-changelog"
    assert settings.state_changelog().name == changelog

    loop = asyncio.new_event_loop()
    try:
        report = loop.run_until_complete(_prepare_topics(settings, None, loop))
    finally:
        loop.close()
    assert report is not None and not isinstance(report, Exception)
    assert changelog in report.created

    async def describe() -> tuple[list[Any], dict[str, str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker)
        await admin.start()
        try:
            topic = (await admin.describe_topics([changelog]))[0]
            (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, changelog)])
        finally:
            await admin.close()
        return topic["partitions"], {e[0]: e[1] for e in response.resources[0][4]}

    partitions, configs = asyncio.run(describe())
    assert sorted(p["partition"] for p in partitions) == [0, 1, 2]
    assert all(p["leader"] >= 0 for p in partitions)
    assert configs["cleanup.policy"] == "compact"
    assert configs["max.message.bytes"] == str(MAX_SLOT_BYTES)
