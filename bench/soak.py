#!/usr/bin/env python3
"""Soak: a fleet's worth of input through two ``tandem worker`` processes, with a forced rebalance.

    python bench/soak.py [--broker HOST:PORT] [--workloads 2000] [--pods 10] [--hours 2]
                         [--partitions 8] [--store memory://|rocksdb://] [--workers 2|1] [--check] [--keep]

Why a benchmark and not a test: what it measures (decisions per second, the largest consumer lag,
each worker's memory over the run) depends on the machine, and "memory is flat after warm-up" is a
reading of figures, not an assertion one run on a shared machine can make honestly (issue #18,
"Load and memory").

1. Starts a real Kafka broker with ``scripts/kafka.sh`` (unless ``--broker`` is given).
2. Generates ``--hours`` of event time for ``--workloads`` workloads at the collector's cadence:
   every 15 s one ``metric`` event with one sample per pod (``--pods``) and one ``hpa`` event;
   a ``vpa`` event every minute; a ``workload`` event every hour; one HVPA policy per workload.
3. Publishes it with ``tandem publish`` before the workers start, so they read as fast as the
   broker gives (the worst case for lag and memory, not a live cadence).
4. Starts workers A and B in one consumer group; at half of the input committed, B is stopped
   (SIGTERM) and started again: two rebalances while input is pending.
5. Samples every second until every input offset is committed: the group's lag, the audit topic's
   size, and each worker's RSS (``/proc/<pid>/status``).  Prints decisions per second (audit
   events over the span from the first to the last sample with progress), the largest lag, and
   each worker's RSS at 25/50/75/100 % of the input committed.
6. With ``--check``, compares the audit topic with ``tandem replay`` of the same input once the
   workers' last idle flush has landed: the same event ids, the same content, repeats identical.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import IO, Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import group_lag, machine, policy  # noqa: E402  (the bench directory is not a package)

T0 = 1_762_214_400.0  # 2025-11-04T00:00:00Z
CADENCE = 15.0


def generate(path: Path, workloads: int, hours: float, pods: int) -> int:
    """Write the stream in event-time order; return the number of events."""
    n = 0
    steps = int(hours * 3600 / CADENCE)
    with path.open("wb") as fh:
        for step in range(steps):
            lines: list[dict[str, Any]] = []
            for w in range(workloads):
                name = f"app-{w:04d}"
                wl = {"cluster": "c1", "namespace": "bench", "kind": "Deployment", "name": name}
                ts = T0 + step * CADENCE + (w % 1000) * 0.001
                load = 0.5 + 0.4 * math.sin(2 * math.pi * (step * CADENCE / 86_400 + w / workloads))
                if step % 240 == 0:
                    containers = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}
                    replicas = max(2, round(load * 20))
                    lines.append(
                        {"type": "workload", "ts": ts, "workload": wl, "replicas": replicas, "containers": containers}
                    )
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
                lines.append({"type": "hpa", "ts": ts, "workload": wl, "desired_replicas": max(2, round(load * 24))})
                if step % 4 == 0:
                    target = {"cpu": f"{round(load * 400) + 100}m", "memory": "400Mi"}
                    lines.append({"type": "vpa", "ts": ts, "workload": wl, "containers": {"app": {"target": target}}})
            fh.write(b"".join(orjson.dumps(e) + b"\n" for e in lines))
            n += len(lines)
    return n


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def topic_size(broker: str, topic: str, partitions: int) -> int:
    """Messages in ``topic`` (sum of its end offsets; tandem creates every topic with the same
    partition count)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
    await consumer.start()
    try:
        end = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return sum(end.values())
    finally:
        await consumer.stop()


async def read_values(broker: str, topic: str, partitions: int) -> list[bytes]:
    """Every value of ``topic`` up to its current end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        got: list[bytes] = []
        while True:
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= end[tp] for pos, tp in zip(positions, tps, strict=True)):
                return got
            for records in (await consumer.getmany(timeout_ms=200, max_records=20_000)).values():
                got.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()


def compare_with_replay(values: list[bytes], expected: dict[str, bytes]) -> str | None:
    """None when the audit topic holds exactly the replay's events (repeats byte-identical), else why not."""
    seen: dict[str, bytes] = {}
    for v in values:
        event_id = orjson.loads(v)["id"]
        if seen.setdefault(event_id, v) != v:
            return f"event {event_id} repeated with other content"
    missing = expected.keys() - seen.keys()
    extra = seen.keys() - expected.keys()
    differ = [i for i in expected.keys() & seen.keys() if orjson.loads(expected[i]) != orjson.loads(seen[i])]
    if missing or extra or differ:
        return f"{len(missing)} missing, {len(extra)} not in the replay, {len(differ)} with other content"
    return None


class Worker:
    """One ``tandem worker`` subprocess; its log goes to a file."""

    def __init__(self, name: str, env: dict[str, str], tmp: Path) -> None:
        self.name, self.env, self.tmp = name, env, tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log = (self.tmp / f"worker-{self.name}-{self.starts}.log").open("wb")
        env = {**self.env, "TANDEM_DATA_DIR": str(self.tmp / f"data-{self.name}"), "TANDEM_METRICS_PORT": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker"], env=env, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        if self.log is not None:
            self.log.close()

    def rss(self) -> float | None:
        return rss_mib(self.proc.pid) if self.proc is not None and self.proc.poll() is None else None


def check(broker: str, prefix: str, partitions: int, stream: Path, policies: list[str], tmp: Path) -> int:
    """The audit topic against ``tandem replay`` (after the workers' last idle flush has landed)."""
    out = tmp / "replay.jsonl"
    subprocess.run(
        [sys.executable, "-m", "cli.main", "replay", str(stream), *policies, "--out", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    expected = {orjson.loads(line)["id"]: line for line in out.read_bytes().splitlines() if line}
    deadline = time.monotonic() + 120.0
    while True:
        values = asyncio.run(read_values(broker, prefix + "audit", partitions))
        why = compare_with_replay(values, expected)
        if why is None:
            print(f"check: the audit topic equals tandem replay ({len(expected)} events, {len(values)} records)")
            return 0
        if time.monotonic() > deadline:
            print(f"check: the audit topic differs from tandem replay: {why}")
            return 1
        time.sleep(2.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--broker", help="use this broker (HOST:PORT) instead of starting one")
    p.add_argument("--workloads", type=int, default=2000)
    p.add_argument("--pods", type=int, default=10, help="samples per metric event")
    p.add_argument("--hours", type=float, default=2.0, help="hours of event time")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--store", default="memory://")
    p.add_argument("--timeout", type=float, default=7200.0, help="give up after this many seconds")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument(
        "--workers",
        type=int,
        choices=(1, 2),
        default=2,
        help="2 (default): two workers and a forced rebalance; 1: one worker, no rebalance, and the "
        "fleet it keeps up with at the collector's cadence (its capacity)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="at the end, compare the audit topic with tandem replay of the same input (same ids, same bytes)",
    )
    args = p.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tandem-soak-"))
    broker_dir = None
    workers: list[Worker] = []
    try:
        print(f"machine: {machine()}")
        print(f"command: {shlex.join([sys.executable, *sys.argv])}")
        if args.broker:
            broker = args.broker
        else:
            broker_dir = tmp / "kafka"
            out = subprocess.run(
                ["bash", str(REPO / "scripts" / "kafka.sh"), "start", str(broker_dir)],
                env={**os.environ, "PYTHON": sys.executable, "TANDEM_KAFKA_WATCH_PID": str(os.getpid())},
                capture_output=True,
                text=True,
                check=True,
            )
            broker = out.stdout.strip().splitlines()[-1]
        stream = tmp / "stream.jsonl"
        n_events = generate(stream, args.workloads, args.hours, args.pods)
        policies: list[str] = []
        for w in range(args.workloads):
            path = tmp / f"policy-{w}.yaml"
            path.write_text(yaml.safe_dump(policy(f"app-{w:04d}")))
            policies += ["--policy", str(path)]
        total = n_events + args.workloads
        print(
            f"stream: {args.workloads} workloads x {args.hours:g} h at {CADENCE:g} s, {args.pods} pods each: "
            f"{total} messages, {stream.stat().st_size / 1e6:.0f} MB"
        )
        prefix = f"soak{uuid.uuid4().hex[:6]}."
        env = {
            **os.environ,
            "TANDEM_BROKER": broker,
            "TANDEM_TOPIC_PREFIX": prefix,
            "TANDEM_PARTITIONS": str(args.partitions),
            "TANDEM_RETENTION_MS": "-1",
        }
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "cli.main", "publish", str(stream), *policies], env=env, cwd=REPO, check=True
        )
        print(f"publish: {time.perf_counter() - t:.0f} s")

        group = f"soak-{uuid.uuid4().hex[:6]}"
        wenv = {
            **env,
            "TANDEM_APP_ID": group,
            "TANDEM_STORE": args.store,
            "TANDEM_WITHOUT_WEB": "1",
            "TANDEM_LOGLEVEL": "info",
            "TANDEM_STANDBY_REPLICAS": "0",
        }
        workers = [Worker("a", wenv, tmp), Worker("b", wenv, tmp)][: args.workers]
        for w in workers:
            w.start()
        start = time.monotonic()
        samples: list[tuple[float, int, int, float | None, float | None]] = []  # t, lag, audit, rss a, rss b
        restarted = False
        first_progress: float | None = None
        while True:
            try:
                lag = asyncio.run(group_lag(broker, group, prefix, args.partitions))
            except Exception as exc:  # the group's coordinator is not there before the first join
                print(f"lag unknown yet: {type(exc).__name__}")
                time.sleep(1.0)
                continue
            audit = asyncio.run(topic_size(broker, prefix + "audit", args.partitions))
            now = time.monotonic() - start
            samples.append((now, lag, audit, workers[0].rss(), workers[-1].rss() if len(workers) > 1 else None))
            if first_progress is None and lag < total:
                first_progress = now
            if lag == 0:
                break
            if not restarted and len(workers) > 1 and lag <= total / 2:
                print(f"{now:.0f} s: half the input committed: restarting worker b (rebalance)")
                workers[1].stop()
                workers[1].start()
                restarted = True
            if any(w.proc is not None and w.proc.poll() is not None for w in workers):
                args.keep = True
                raise SystemExit(f"a worker exited; logs in {tmp}")
            if now > args.timeout:
                args.keep = True
                raise SystemExit(f"not done after {args.timeout:.0f} s; logs in {tmp}")
            time.sleep(1.0)
        end = samples[-1][0]
        decisions = samples[-1][2]
        span = end - (first_progress or 0.0)
        if span <= 0:  # all committed between two samples (a tiny input): count from the start
            span = end
        print(f"done in {end:.0f} s ({span:.0f} s from the first committed input)")
        print(f"input: {total / span:,.0f} messages/s; audit events: {decisions} ({decisions / span:,.1f}/s)")
        if len(workers) == 1:
            # A worker keeps up with a live fleet as long as it reads faster than the fleet writes:
            # at the collector's cadence each workload writes this many messages per CADENCE s.
            per_workload = total / (args.workloads * args.hours * 3600.0 / CADENCE)
            capacity = (total / span) * CADENCE / per_workload
            print(
                f"capacity: one worker reads {total / span:,.0f} messages/s; at {per_workload:.2f} messages per "
                f"workload per {CADENCE:g} s that is {capacity:,.0f} workloads kept up with"
            )
        # The input is published before the workers start: the lag is the backlog, largest at the start.
        print(f"largest lag: {max(s[1] for s in samples)} messages (the whole input, published beforehand)")
        print("| input committed | t (s) | lag | worker a RSS (MiB) | worker b RSS (MiB) |")
        print("|---|---|---|---|---|")
        for share in (0.25, 0.5, 0.75, 1.0):
            row = next(s for s in samples if total - s[1] >= share * total)
            a = f"{row[3]:.0f}" if row[3] is not None else "-"
            b = f"{row[4]:.0f}" if row[4] is not None else "-"
            print(f"| {share:.0%} | {row[0]:.0f} | {row[1]} | {a} | {b} |")
        if args.check:
            return check(broker, prefix, args.partitions, stream, policies, tmp)
        return 0
    finally:
        for w in workers:
            w.stop()
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
