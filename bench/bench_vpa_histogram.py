"""Benchmark: CPU samples per second through tandem's VPA histogram update, on one core.

Why: the collector sends, per container name and scrape, one batch of CPU samples (one per pod)
sharing a timestamp; ``ContainerState.add_cpu_samples`` is the per-sample hot path of the VPA
recommender and must sustain well over the collector's rate (target: >= 500,000 samples/s).

Run:  python bench/bench_vpa_histogram.py [--samples N] [--batch B ...] [--repeat R]

Prints the machine, the command, samples/s per batch size (best of R runs, pinned to one CPU
when the OS allows it), the memory-sample rate, and the serialised size of a week of state.
This is a script, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time

from scaling.recommend.vpa import ContainerState, VpaConfig


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def pin_to_one_cpu() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def cpu_rate(samples: int, batch: int, repeat: int, seed: int) -> float:
    """Best samples/s over ``repeat`` runs of ``samples`` samples in batches of ``batch``."""
    cfg = VpaConfig()
    rnd = random.Random(seed)
    batches = [[rnd.uniform(0.01, 4.0) for _ in range(batch)] for _ in range(max(1, samples // batch))]
    total = len(batches) * batch
    best = math.inf
    for _ in range(repeat):
        state = ContainerState()
        ts = 1_700_000_000.0
        add = state.add_cpu_samples
        start = time.perf_counter()
        for values in batches:
            ts += 15.0
            add(ts, values, cfg)
        best = min(best, time.perf_counter() - start)
        assert state.total_samples_count == total
    return total / best


def memory_rate(samples: int, repeat: int, seed: int) -> float:
    cfg = VpaConfig()
    rnd = random.Random(seed)
    values = [rnd.randrange(100 * 2**20, 4 * 2**30) for _ in range(samples)]
    best = math.inf
    for _ in range(repeat):
        state = ContainerState()
        ts = 1_700_000_000.0
        start = time.perf_counter()
        for v in values:
            ts += 15.0
            state.add_memory_sample(ts, v, cfg)
        best = min(best, time.perf_counter() - start)
    return samples / best


def week_state_size(seed: int) -> tuple[int, int]:
    """Serialised bytes of one aggregate after a week of 1 sample/min (1 pod, then 5 pods)."""
    cfg = VpaConfig()
    sizes = []
    for pods in (1, 5):
        rnd = random.Random(seed)
        state = ContainerState()
        for i in range(7 * 1440):
            ts = 1_699_920_000.0 + 60 * i
            phase = 2 * math.pi * i / 1440
            cores = max(0.0, 0.6 + 0.35 * math.sin(phase) + rnd.gauss(0, 0.06))
            memory = int(1.5e9 + 4e8 * math.sin(phase - 1.0) + rnd.gauss(0, 2e7))
            state.add_cpu_samples(ts, [cores * (0.8 + 0.1 * k) for k in range(pods)], cfg)
            for k in range(pods):
                state.add_memory_sample(ts, int(memory * (0.8 + 0.1 * k)), cfg, pod=f"web-5d8f7c9b6-{k:05d}")
        sizes.append(len(json.dumps(state.to_dict(), separators=(",", ":"))))
    return sizes[0], sizes[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2_000_000, help="CPU samples per run (default 2,000,000)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 5, 10, 50], help="batch sizes to measure")
    parser.add_argument("--repeat", type=int, default=3, help="runs per batch size; the best is reported")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    pinned = pin_to_one_cpu()
    print(f"machine:  {platform.platform()}; {platform.machine()}; CPU {cpu_model()}; {os.cpu_count()} CPUs, {pinned}")
    print(f"python:   {platform.python_implementation()} {platform.python_version()}")
    print(f"command:  {sys.executable} {' '.join(sys.argv)}")
    print(f"workload: {args.samples:,} CPU samples per run, best of {args.repeat}, 15 s between batches")
    for batch in args.batch:
        rate = cpu_rate(args.samples, batch, args.repeat, args.seed)
        print(f"add_cpu_samples  batch {batch:>4}: {rate:>12,.0f} samples/s")
    mem = memory_rate(min(args.samples, 500_000), args.repeat, args.seed)
    print(f"add_memory_sample          : {mem:>12,.0f} samples/s")
    one, five = week_state_size(args.seed)
    print(f"state after a week at 1 sample/min: {one:,} bytes (1 pod), {five:,} bytes (5 pods, per-pod windows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
