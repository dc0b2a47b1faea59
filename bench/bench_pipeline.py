#!/usr/bin/env python3
"""Throughput of ``tandem worker`` (the whole pipeline) against raw aiokafka consumption, same messages.

    python bench/bench_pipeline.py [--broker HOST:PORT] [--workloads 16] [--minutes 1440] [--pods 20]
                                   [--partitions 8] [--store memory://|rocksdb://] [--batch-size 2000]

1. Starts a real Kafka broker with ``scripts/kafka.sh`` (unless ``--broker`` is given).
2. Generates a recorded stream: per workload and minute one batched ``metric`` event carrying one
   sample per pod (what a collector sends per scrape), two ``hpa`` events, a ``vpa`` event every 5
   minutes, a ``workload`` event every hour; one HVPA policy per workload.
3. Publishes it with ``tandem publish`` (timed too).
4. Reads all input topics from the start with a bare ``AIOKafkaConsumer`` (no decoding): the raw
   consumption rate of these messages on this broker, in this run.
5. For scale: the same consumer also decoding/validating every message (``schemas.codec``, no
   Faust); the decision core embedded, as ``tandem replay`` runs it (no Kafka); and a Faust worker
   whose agent only counts the messages (``take_events``): Faust's own ceiling on this machine.
6. Runs ``tandem worker`` (a subprocess, fresh consumer group) over the same topics until its group
   has committed every message, stops it and reads its own measurement: messages processed between
   the start of its first batch and the end of its last (so start-up and the final idle flush are
   not counted).  That is decoding, validation, the event-time merge, the decision core, publishing
   the audit/actuator events and writing the table's changelog.

Prints the machine, the command, both figures in messages/s and samples/s, and their ratio.

A backlog rate is not a fleet size: ``bench/capacity.py`` offers one worker a live fleet at the
collector's 15 s cadence and reports the largest it keeps up with (issue #17).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

T0 = 1_762_214_400.0  # 2025-11-04T00:00:00Z
INPUTS = ("metrics", "workloads", "hpa", "vpa", "policies")


def policy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"},
        },
        "spec": {
            "targetRef": {"kind": "Deployment", "name": name},
            "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 2, "maxReplicas": 40}}},
            "vpa": {"deploy": True},
            "weightBasedScalingIntervals": [{"vpaWeight": 40, "startReplicaCount": 0, "lastReplicaCount": 0}],
        },
    }


def generate(path: Path, workloads: int, minutes: int, pods: int) -> dict[str, int]:
    """Write the stream (ts order) and return counts: messages per type and container samples."""
    import math

    counts = {"metric": 0, "workload": 0, "hpa": 0, "vpa": 0, "samples": 0}
    with path.open("wb") as fh:
        for m in range(minutes):
            for w in range(workloads):
                name = f"app-{w:03d}"
                wl = {"cluster": "c1", "namespace": "bench", "kind": "Deployment", "name": name}
                ts = T0 + m * 60.0 + w * 0.01
                load = 0.5 + 0.4 * math.sin(2 * math.pi * (m / 1440.0 + w / workloads))
                replicas = max(2, round(load * 20))
                lines = []
                if m % 60 == 0:
                    containers = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}
                    lines.append(
                        {"type": "workload", "ts": ts, "workload": wl, "replicas": replicas, "containers": containers}
                    )
                    counts["workload"] += 1
                samples = [
                    {
                        "pod": f"{name}-{p:02d}",
                        "container": "app",
                        "cpu": round(load * (0.3 + 0.01 * p), 4),
                        "memory": 300_000_000 + p * 1_000_000,
                    }
                    for p in range(pods)
                ]
                lines.append({"type": "metric", "ts": ts, "workload": wl, "samples": samples})
                counts["metric"] += 1
                counts["samples"] += pods
                for half in (0.0, 30.0):
                    lines.append(
                        {"type": "hpa", "ts": ts + half, "workload": wl, "desired_replicas": max(2, round(load * 24))}
                    )
                    counts["hpa"] += 1
                if m % 5 == 0:
                    target = {"cpu": f"{round(load * 400) + 100}m", "memory": "400Mi"}
                    lines.append({"type": "vpa", "ts": ts, "workload": wl, "containers": {"app": {"target": target}}})
                    counts["vpa"] += 1
                fh.write(b"".join(orjson.dumps(e) + b"\n" for e in lines))
    return counts


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    import aiokafka
    import faust

    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} CPUs, {mem} RAM, "
        f"load {', '.join(f'{x:.2f}' for x in load)}; Python {platform.python_version()}, "
        f"faust-streaming {faust.__version__}, aiokafka {aiokafka.__version__}"
    )


async def raw_consume(broker: str, prefix: str, partitions: int, expected: int) -> tuple[int, float]:
    """Read every input message with a bare consumer; (messages, seconds from first to last fetch)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(prefix + t, p) for t in INPUTS for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        n = 0
        started = None
        while n < expected:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.perf_counter()
            for records in batch.values():
                n += len(records)
        return n, time.perf_counter() - (started or time.perf_counter())
    finally:
        await consumer.stop()


def faust_noop(broker: str, prefix: str, partitions: int, expected: int, out: str) -> None:
    """Child process: a Faust worker whose agent only counts messages (``take_events``, as the pipeline
    reads them); writes messages/s from its first to its last batch to ``out``."""
    import faust

    app = faust.App(
        f"bench-noop-{uuid.uuid4().hex[:6]}",
        broker=f"kafka://{broker}",
        store="memory://",
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        topic_partitions=partitions,
    )
    topic = app.topic(*[prefix + t for t in INPUTS], key_type=bytes, value_type=bytes)
    state: dict[str, Any] = {"n": 0, "t0": None}

    @app.agent(topic)
    async def count(stream: Any) -> None:
        async for events in stream.take_events(2000, within=0.2):
            now = time.perf_counter()
            if state["t0"] is None:
                state["t0"] = now
            state["n"] += len(events)
            if state["n"] >= expected:
                Path(out).write_text(f"{state['n']} {now - state['t0']}")

    faust.Worker(app, loglevel="warning").execute_from_commandline()


def core_only(stream: Path, policies: list[str]) -> tuple[int, float]:
    """The decision core embedded (what ``tandem replay`` runs): decode + validate + ingest, no Kafka."""
    from scaling.engine import Engine
    from scaling.settings import Settings
    from schemas.codec import decode
    from streams.inputs import load_manifests

    engine = Engine(Settings())
    for path in policies[1::2]:
        for manifest in load_manifests(path):
            engine.add_policy(manifest)
    lines = stream.read_bytes().splitlines()
    t = time.perf_counter()
    for line in lines:
        raw, event = decode(line)
        engine.process(raw, event)
    engine.flush()
    return len(lines), time.perf_counter() - t


async def decode_consume(broker: str, prefix: str, partitions: int, expected: int) -> tuple[int, float]:
    """A bare consumer that also decodes and validates every message (schemas.codec), no Faust."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from schemas.codec import decode

    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(prefix + t, p) for t in INPUTS for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        n = 0
        started = None
        while n < expected:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if started is None and batch:
                started = time.perf_counter()
            for records in batch.values():
                for r in records:
                    decode(r.value)
                n += len(records)
        return n, time.perf_counter() - (started or time.perf_counter())
    finally:
        await consumer.stop()


async def group_lag(broker: str, group: str, prefix: str, partitions: int) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
    await admin.start()
    await consumer.start()
    try:
        tps = [TopicPartition(prefix + t, p) for t in INPUTS for p in range(partitions)]
        end = await consumer.end_offsets(tps)
        committed = await admin.list_consumer_group_offsets(group)
        return sum(max(0, end[tp] - (committed[tp].offset if tp in committed else 0)) for tp in tps)
    finally:
        await consumer.stop()
        await admin.close()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--faust-noop":  # child process of step 6
        broker, prefix, partitions, expected, out = sys.argv[2:7]
        faust_noop(broker, prefix, int(partitions), int(expected), out)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--broker", help="use this broker (HOST:PORT) instead of starting one")
    p.add_argument("--workloads", type=int, default=16)
    p.add_argument("--minutes", type=int, default=1440, help="minutes of event time per workload")
    p.add_argument("--pods", type=int, default=20, help="samples per metric message")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--store", default="memory://")
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tandem-bench-"))
    python = sys.executable
    broker_dir = None
    try:
        print(f"machine: {machine()}")
        print(f"command: {shlex.join([python, *sys.argv])}")
        if args.broker:
            broker = args.broker
        else:
            broker_dir = tmp / "kafka"
            out = subprocess.run(
                ["bash", str(REPO / "scripts" / "kafka.sh"), "start", str(broker_dir)],
                env={**os.environ, "PYTHON": python, "TANDEM_KAFKA_WATCH_PID": str(os.getpid())},
                capture_output=True,
                text=True,
                check=True,
            )
            broker = out.stdout.strip().splitlines()[-1]
        print(f"broker: {broker} (Kafka {os.environ.get('TANDEM_KAFKA_VERSION', '3.9.2')}, single node)")

        stream = tmp / "stream.jsonl"
        counts = generate(stream, args.workloads, args.minutes, args.pods)
        policies = []
        for w in range(args.workloads):
            path = tmp / f"policy-{w}.yaml"
            path.write_text(yaml.safe_dump(policy(f"app-{w:03d}")))
            policies += ["--policy", str(path)]
        total = counts["metric"] + counts["workload"] + counts["hpa"] + counts["vpa"] + args.workloads
        print(
            f"stream: {args.workloads} workloads x {args.minutes} min: {total} messages "
            f"({counts['metric']} metric with {args.pods} samples each = {counts['samples']} samples, "
            f"{counts['hpa']} hpa, {counts['vpa']} vpa, {counts['workload']} workload, {args.workloads} policy), "
            f"{stream.stat().st_size / 1e6:.1f} MB"
        )

        prefix = f"bench{uuid.uuid4().hex[:6]}."
        env = {
            **os.environ,
            "TANDEM_BROKER": broker,
            "TANDEM_TOPIC_PREFIX": prefix,
            "TANDEM_PARTITIONS": str(args.partitions),
            "TANDEM_RETENTION_MS": "-1",
        }
        t = time.perf_counter()
        subprocess.run([python, "-m", "cli.main", "publish", str(stream), *policies], env=env, cwd=REPO, check=True)
        published = time.perf_counter() - t
        print(f"publish: {total} messages in {published:.1f} s ({total / published:,.0f} messages/s, tandem publish)")

        def line(label: str, n: int, seconds: float) -> float:
            samples = counts["samples"] * n / total / seconds
            print(f"{label}: {n} messages in {seconds:.2f} s: {n / seconds:,.0f} messages/s, {samples:,.0f} samples/s")
            return samples

        n, raw_s = asyncio.run(raw_consume(broker, prefix, args.partitions, total))
        raw_samples = line("raw aiokafka consume (bytes only)", n, raw_s)
        n, s = asyncio.run(decode_consume(broker, prefix, args.partitions, total))
        line("aiokafka + schemas.codec.decode (validation, no Faust)", n, s)
        n, s = core_only(stream, policies)
        core_samples = line("decision core embedded (decode + ingest, no Kafka)", n, s)
        noop_out = tmp / "noop.txt"
        noop = subprocess.Popen(
            [python, __file__, "--faust-noop", broker, prefix, str(args.partitions), str(total), str(noop_out)],
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 600
            while not noop_out.exists() and noop.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            noop.send_signal(signal.SIGTERM)
            noop.wait(timeout=120)
        n_s = noop_out.read_text().split() if noop_out.exists() else None
        faust_samples = (
            line("Faust worker, agent that only counts (take_events)", int(n_s[0]), float(n_s[1])) if n_s else 0.0
        )

        group = f"bench-{uuid.uuid4().hex[:6]}"
        wenv = {
            **env,
            "TANDEM_APP_ID": group,
            "TANDEM_STORE": args.store,
            "TANDEM_DATA_DIR": str(tmp / "worker-data"),
            "TANDEM_WITHOUT_WEB": "1",
            "TANDEM_LOGLEVEL": "info",
            "TANDEM_BATCH_SIZE": str(args.batch_size),
            "TANDEM_STANDBY_REPLICAS": "0",
            "TANDEM_COMMIT_INTERVAL": "0.5",
        }
        log = tmp / "worker.log"
        with log.open("wb") as fh:
            worker = subprocess.Popen(
                [python, "-m", "cli.main", "worker"], env=wenv, cwd=tmp, stdout=fh, stderr=subprocess.STDOUT
            )
            try:
                deadline = time.monotonic() + 1800
                while asyncio.run(group_lag(broker, group, prefix, args.partitions)) > 0:
                    if worker.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"worker stopped or too slow; see {log}")
                    time.sleep(0.5)
            finally:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=120)
        text = log.read_text(errors="replace")
        m = re.search(r"processed (\d+) messages in ([0-9.]+) s", text)
        stats = re.findall(r"tandem worker: stats (.*)", text)
        if not m:
            raise SystemExit(f"no throughput line in {log}")
        done, span = int(m.group(1)), float(m.group(2))
        print(f"worker stats: {stats[-1] if stats else '-'}")
        samples_rate = line(f"tandem worker ({args.store}, batch {args.batch_size}, full pipeline)", done, span)
        print(f"ratio tandem worker / raw aiokafka consume: {samples_rate / raw_samples:.3f} (target >= 0.5)")
        if faust_samples:
            print(f"ratio Faust counting agent / raw aiokafka consume: {faust_samples / raw_samples:.3f}")
        bound = 1 / (1 / faust_samples + 1 / core_samples) if faust_samples else core_samples
        print(
            f"ratio tandem worker / (Faust alone then core alone, one thread): {samples_rate / bound:.3f}; "
            f"worker / core embedded: {samples_rate / core_samples:.3f}"
        )
        return 0
    finally:
        if broker_dir is not None:
            subprocess.run(
                ["bash", str(REPO / "scripts" / "kafka.sh"), "stop", str(broker_dir)], capture_output=True, check=False
            )
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
