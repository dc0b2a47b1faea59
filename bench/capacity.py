#!/usr/bin/env python3
"""Capacity of one ``tandem worker``: the fleet it keeps up with at the collector's live cadence.

    python bench/capacity.py [--workloads 5000,10000,20000] [--ticks 12] [--pods 10] [--partitions 8]
                             [--shape collector|every-scrape] [--broker HOST:PORT] [--store memory://|rocksdb://]
                             [--trace] [--keep]

Why this and not a backlog rate: a worker reading a backlog holds many events per workload in its
inboxes (the sparse topics run ahead in event time), while a live worker sees each scrape once,
moments after it was made; the two cost differently.  Issue #17 asks for the largest fleet one
worker process keeps up with at a 15 s cadence without growing lag, so this script offers exactly
that load and watches the lag.

For each fleet size N:

1. publishes N HVPA policies and one ``workload`` event per workload (``tandem publish``) and
   starts one worker (its own consumer group) that reads them;
2. then, every 15 s of wall time, produces one scrape of the whole fleet at the collector's shape
   (``--shape collector``, issue #17's "one record per workload per scrape"): per workload one
   ``metric`` event with one sample per pod, and the ``hpa`` event (every scrape) and ``vpa`` event
   (every fourth) only when their content changed since the last one sent, as ``tandem collect``
   sends them; ``--shape every-scrape`` sends both every time (2.25 records per workload and
   scrape, the heavier shape the earlier passes measured).  Each scrape's event time is 15 s
   after the last one's;
3. samples the group's lag every 0.5 s.  A scrape is *drained* when the lag is back to 0 (every
   input committed; the worker commits every 2.8 s, which the figure includes).  The worker keeps
   up when every scrape after the warm-up (the first third) drains before the next one starts.

Prints per N: messages/s offered, the median and largest drain time, the worker's CPU use over the
steady scrapes (user + system, from ``/proc``; 100 % is one core), the same as CPU milliseconds per
message offered (comparable between trees on a busy machine, as long as the worker kept up), its
RSS, this script's own CPU (the producer) and how busy the whole machine was (all cores; the
broker's share is what is left after the worker and the producer), and the verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shlex
import shutil
import statistics
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
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import group_lag, machine, policy  # noqa: E402  (the bench directory is not a package)

T0 = 1_762_214_400.0  # 2025-11-04T00:00:00Z
CADENCE = 15.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
HEADER = (
    "| workloads | messages/s offered | drain median (s) | drain max (s) | worker CPU | CPU ms/message | RSS (MiB) "
    "| producer CPU | machine busy | keeps up |"
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU time of the whole machine so far, in clock ticks (``/proc/stat``'s first line).

    The worker shares the machine with this script's producer and the broker: over the steady
    scrapes, ``busy / total`` says how much of all the cores was used, so a worker short of CPU
    because the machine is full shows as such (idle and I/O wait count as not busy).
    """
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return float(sum(ticks) - idle), float(sum(ticks))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ref(w: int) -> dict[str, str]:
    return {"cluster": "c1", "namespace": "bench", "kind": "Deployment", "name": f"app-{w:05d}"}


def key(w: int) -> bytes:
    return f"c1/bench/Deployment/app-{w:05d}".encode()


def scrape(w: int, step: int, n: int, pods: int) -> list[tuple[str, bytes]]:
    """One workload's events of scrape ``step``: (topic suffix, value)."""
    wl = ref(w)
    ts = T0 + CADENCE * (step + 1) + (w % 1000) * 0.001
    load = 0.5 + 0.4 * math.sin(2 * math.pi * (step * CADENCE / 86_400 + w / n))
    name = wl["name"]
    samples = [
        {"pod": f"{name}-{p:02d}", "container": "app", "cpu": round(load * (0.3 + 0.01 * p), 4), "memory": 300_000_000}
        for p in range(pods)
    ]
    out = [
        ("metrics", orjson.dumps({"type": "metric", "ts": ts, "workload": wl, "samples": samples})),
        ("hpa", orjson.dumps({"type": "hpa", "ts": ts, "workload": wl, "desired_replicas": max(2, round(load * 24))})),
    ]
    if step % 4 == 0:
        target = {"cpu": f"{round(load * 400) + 100}m", "memory": "400Mi"}
        vpa = {"type": "vpa", "ts": ts, "workload": wl, "containers": {"app": {"target": target}}}
        out.append(("vpa", orjson.dumps(vpa)))
    return out


async def produce_scrape(
    producer: Any, prefix: str, step: int, n: int, pods: int, last: dict[tuple[int, str], bytes] | None = None
) -> int:
    """Send scrape ``step`` of the fleet; with ``last`` (the collector's shape), an ``hpa`` or ``vpa``
    event only when its content (all but ``ts``) differs from the last one sent for the workload,
    as ``tandem collect`` does (edge/collector.py); ``metric`` events are new samples every scrape."""
    sent = 0
    futures = []
    for w in range(n):
        for suffix, value in scrape(w, step, n, pods):
            if last is not None and suffix != "metrics":
                content = {k: v for k, v in orjson.loads(value).items() if k != "ts"}
                seen = orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
                if last.get((w, suffix)) == seen:
                    continue
                last[(w, suffix)] = seen
            futures.append(await producer.send(prefix + suffix, value, key=key(w)))
            sent += 1
    await producer.flush()
    for f in futures:
        await f
    return sent


def run_fleet(broker: str, n: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    prefix = f"cap{uuid.uuid4().hex[:6]}."
    group = f"cap-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "TANDEM_BROKER": broker,
        "TANDEM_TOPIC_PREFIX": prefix,
        "TANDEM_PARTITIONS": str(args.partitions),
        "TANDEM_RETENTION_MS": "-1",
    }
    policies = tmp / f"policies-{n}.yaml"
    policies.write_text(yaml.safe_dump_all(policy(f"app-{w:05d}") for w in range(n)))
    head = tmp / f"head-{n}.jsonl"
    containers = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}
    head.write_bytes(
        b"".join(
            orjson.dumps({"type": "workload", "ts": T0, "workload": ref(w), "replicas": 10, "containers": containers})
            + b"\n"
            for w in range(n)
        )
    )
    subprocess.run(
        [sys.executable, "-m", "cli.main", "publish", str(head), "--policy", str(policies)],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    log = (tmp / f"worker-{n}.log").open("wb")
    wenv = {
        **env,
        "TANDEM_APP_ID": group,
        "TANDEM_STORE": args.store,
        "TANDEM_WITHOUT_WEB": "1",
        "TANDEM_LOGLEVEL": "info",
        "TANDEM_STANDBY_REPLICAS": "0",
        "TANDEM_METRICS_PORT": "0",
    }
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "worker"], env=wenv, cwd=REPO, stdout=log, stderr=log)
    try:
        return asyncio.run(live(broker, prefix, group, n, args, proc))
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def live(broker: str, prefix: str, group: str, n: int, args: argparse.Namespace, proc: Any) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    async def lag() -> int | None:
        try:
            return await group_lag(broker, group, prefix, args.partitions)
        except Exception:  # the group's coordinator is not there before the first join
            return None

    deadline = time.monotonic() + 180
    while (await lag()) != 0:  # the policies and workload events read: the worker is up
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start (exit {proc.poll()})")
        await asyncio.sleep(0.5)

    producer = AIOKafkaProducer(bootstrap_servers=broker, linger_ms=5, max_batch_size=512 * 1024)
    await producer.start()
    drains: list[float | None] = []
    offered = 0
    steady_sent = 0
    cpu_from = cpu_to = own_from = own_to = 0.0
    wall_from = wall_to = 0.0
    busy_from = busy_to = (0.0, 0.0)
    warm = max(1, args.ticks // 3)
    last: dict[tuple[int, str], bytes] | None = {} if args.shape == "collector" else None
    start = time.monotonic()
    try:
        for step in range(args.ticks):
            at = start + step * CADENCE
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            if step == warm:
                cpu_from, wall_from = cpu_seconds(proc.pid), time.monotonic()
                own_from, busy_from = time.process_time(), machine_busy()
            sent = await produce_scrape(producer, prefix, step, n, args.pods, last)
            produced = time.monotonic() - at
            trace: list[str] = []
            offered += sent
            if step >= warm:
                steady_sent += sent
            drained = None
            while time.monotonic() < at + CADENCE - 0.25:
                current = await lag()
                if args.trace:
                    trace.append(f"{time.monotonic() - at:.1f}:{current}")
                if current == 0:
                    drained = time.monotonic() - at
                    break
                if proc.poll() is not None:
                    raise SystemExit(f"the worker exited ({proc.returncode})")
                await asyncio.sleep(0.5)
            drains.append(drained)
            shown = f"{drained:.1f} s" if drained is not None else "not within the cadence"
            print(f"  {n} workloads, scrape {step + 1}/{args.ticks}: drained {shown}", flush=True)
            if args.trace:
                print(f"    produced in {produced:.1f} s; lag (s:messages) {' '.join(trace)}", flush=True)
        cpu_to, wall_to = cpu_seconds(proc.pid), time.monotonic()
        own_to, busy_to = time.process_time(), machine_busy()
        rss = rss_mib(proc.pid)
    finally:
        await producer.stop()
    steady = drains[warm:]
    done = [d for d in steady if d is not None]
    per_scrape = offered / args.ticks
    return {
        "workloads": n,
        "rate": per_scrape / CADENCE,
        "median": statistics.median(done) if done else None,
        "max": max(done) if len(done) == len(steady) else None,
        "cpu": 100.0 * (cpu_to - cpu_from) / (wall_to - wall_from) if wall_to > wall_from else 0.0,
        # CPU per message offered after the warm-up: comparable between trees even on a busy
        # machine (where the percentage also measures what the other jobs left), as long as the
        # worker kept up (else it did not do all of that work inside the window).
        "cpu_ms": 1000.0 * (cpu_to - cpu_from) / steady_sent if steady_sent else 0.0,
        "rss": rss,
        # This script's own CPU (it produces the scrapes; 100 % is one core) and the share of the
        # machine's cores in use, over the same window as the worker's.
        "producer_cpu": 100.0 * (own_to - own_from) / (wall_to - wall_from) if wall_to > wall_from else 0.0,
        "busy": 100.0 * (busy_to[0] - busy_from[0]) / (busy_to[1] - busy_from[1]) if busy_to[1] > busy_from[1] else 0.0,
        "keeps_up": len(done) == len(steady),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="5000,10000,20000", help="fleet sizes to try, comma-separated")
    p.add_argument("--ticks", type=int, default=12, help="scrapes per fleet size (the first third warms up)")
    p.add_argument("--pods", type=int, default=10, help="samples per metric event")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--store", default="memory://")
    p.add_argument("--broker", help="use this broker (HOST:PORT) instead of starting one")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (worker logs)")
    p.add_argument(
        "--shape",
        choices=("collector", "every-scrape"),
        default="collector",
        help="collector (default): per workload and scrape one metric record, hpa and vpa events only when "
        "their content changed, as tandem collect sends them; every-scrape: an hpa event every scrape and a "
        "vpa event every fourth too (2.25 records per workload and scrape, the shape of the earlier passes)",
    )
    p.add_argument("--trace", action="store_true", help="print per scrape how long producing took and the lag")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.workloads.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="tandem-capacity-"))
    broker_dir = None
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
        rows = [run_fleet(broker, n, args, tmp) for n in sizes]
        print(HEADER)
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            median = f"{r['median']:.1f}" if r["median"] is not None else "-"
            worst = f"{r['max']:.1f}" if r["max"] is not None else "> 15"
            print(
                f"| {r['workloads']:,} | {r['rate']:,.0f} | {median} | {worst} | {r['cpu']:.0f} % | "
                f"{r['cpu_ms']:.2f} | {r['rss']:.0f} | {r['producer_cpu']:.0f} % | {r['busy']:.0f} % | "
                f"{'yes' if r['keeps_up'] else 'no'} |"
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
