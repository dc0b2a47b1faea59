"""Replica history (``scaling.policies.tortoise.history``): memory per workload and update cost.

Run: ``python bench/bench_history.py [--workloads N] [--samples N]``.  Prints the machine, the
command and the figures; the target is < 20 KB per workload for four weeks of hourly slots.

* memory: one history after four full weeks of hourly samples (values up to 500 replicas, so the
  stored ints are real objects rather than CPython's cached small ints): serialised (compact JSON,
  what the policy memory and the Faust table hold) and in memory (the object: int32 arrays plus
  its cached row strings; the JSON value in the policy memory), by ``sys.getsizeof`` recursion and
  by ``tracemalloc`` over many histories;
* update cost: ``observe`` per sample, the policy's per-tick work on the history it keeps live
  (``observe`` + ``peak`` + ``covered``, ``to_dict`` when something changed), and ``from_dict``
  (paid once after a state is reloaded), in ns.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scaling.policies.tortoise.history import ReplicaHistory

H = 3600
SUNDAY = 1_762_009_200.0  # 2025-11-02T00:00:00+09:00


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """``sys.getsizeof`` of ``obj`` and everything it references (slots, lists, dicts), once each."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple | set | frozenset):
        size += sum(deep_size(v, seen) for v in obj)
    elif hasattr(obj, "__slots__"):
        for name in obj.__slots__:
            if name == "_zone":
                continue  # ZoneInfo objects are shared per time zone (zoneinfo's cache)
            if hasattr(obj, name):
                size += deep_size(getattr(obj, name), seen)
    return size


def filled(rng: random.Random) -> ReplicaHistory:
    h = ReplicaHistory("Asia/Tokyo", 1)
    for k in range(4 * 7 * 24):
        h.observe(SUNDAY + k * H, rng.randint(3, 500))
    return h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=2000, help="histories kept alive for tracemalloc")
    ap.add_argument("--samples", type=int, default=200_000, help="observe() calls timed")
    args = ap.parse_args()
    rng = random.Random(1)

    print(f"machine: {platform.platform()}; {cpu_model()}; Python {platform.python_version()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")

    h = filled(rng)
    d = h.to_dict()
    compact = json.dumps(d, separators=(",", ":")).encode()
    try:
        import orjson

        orjson_bytes = len(orjson.dumps(d))
    except ImportError:  # pragma: no cover
        orjson_bytes = len(compact)
    slots = len(h.rows) * len(h.rows[0])
    print(f"history: {len(h.rows)} weeks x {len(h.rows[0])} slots = {slots} peaks (1 h slots)")
    print(f"serialised (compact JSON): {len(compact)} B (orjson {orjson_bytes} B)")
    print(f"in memory (getsizeof recursion): {deep_size(h)} B; as the JSON value in policy memory: {deep_size(d)} B")

    gc.collect()
    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    keep = [filled(rng) for _ in range(args.workloads)]
    snap = tracemalloc.take_snapshot()
    tracemalloc.stop()
    total = sum(s.size_diff for s in snap.compare_to(base, "filename"))
    print(f"in memory (tracemalloc, {len(keep)} histories): {total / len(keep):.0f} B per workload")

    target = 20 * 1024
    worst = max(len(compact), deep_size(h), deep_size(d), total / len(keep))
    print(f"target < {target} B per workload: {'met' if worst < target else 'MISSED'} (largest figure {worst:.0f} B)")

    # update cost
    ts = [SUNDAY + 4 * 7 * 24 * H + i * 15.0 for i in range(args.samples)]
    values = [rng.randint(3, 500) for _ in range(args.samples)]
    t0 = time.perf_counter_ns()
    for t, v in zip(ts, values, strict=True):
        h.observe(t, v)
    per_sample = (time.perf_counter_ns() - t0) / args.samples
    print(f"observe: {per_sample:.0f} ns per sample ({args.samples} samples, 15 s apart)")

    ticks = min(args.samples, 20_000)
    state = h.to_dict()
    t0 = time.perf_counter_ns()
    for t, v in zip(ts[:ticks], values[:ticks], strict=True):
        # What TortoisePolicy.decide does with the live history it keeps between ticks.
        if h.observe(t, v):
            state = h.to_dict()
        h.peak(t)
        h.covered(t)
    per_tick = (time.perf_counter_ns() - t0) / ticks
    print(f"policy tick (observe + peak + covered, to_dict when changed): {per_tick:.0f} ns per tick")
    t0 = time.perf_counter_ns()
    for _ in range(1000):
        ReplicaHistory.from_dict(state)
    print(f"decode after a state reload (from_dict): {(time.perf_counter_ns() - t0) / 1000:.0f} ns")


if __name__ == "__main__":
    main()
