#!/usr/bin/env python3
"""What a checkpoint pays per slot: ``Slot.to_bytes`` over a whole fleet, in turn, as the worker does.

    python bench/bench_slot.py [--workloads 20000] [--scrapes 8] [--rounds 3]

Why this and not one slot in a loop: a live worker writes every slot of its fleet once a scrape,
each far from the last time its objects were touched, so a slot serialised in a tight loop (its
objects in the cache) costs about half of what it costs in the worker.  This builds the state of
``--workloads`` workloads of ``bench/capacity.py`` (an HVPA policy, 10 pods, its scrapes for
``--scrapes`` scrapes through the core), then serialises every slot in turn, ``--rounds`` times,
and prints the best round in µs per slot, the bytes per slot, and the resident memory the
serialisation leaves behind (what the slots keep between writes, e.g. cached JSON).

Run it in two trees (copy this file into the old one) for an old/new comparison; the figures of
issue 17 are in docs/performance.md, "The worker".
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_pipeline import machine, policy  # noqa: E402  (the bench directory is not a package)
from capacity import T0, ref, scrape  # noqa: E402

from scaling.engine import Engine  # noqa: E402
from scaling.settings import Settings  # noqa: E402
from streams.merge import Slot  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fleet(n: int, scrapes: int) -> list[Slot]:
    engine = Engine(Settings())
    containers = {"app": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}
    for w in range(n):
        engine.add_policy(policy(f"app-{w:05d}"))
        engine.process({"type": "workload", "ts": T0, "workload": ref(w), "replicas": 10, "containers": containers})
    for step in range(scrapes):
        for w in range(n):
            for _, value in scrape(w, step, n, 10):
                engine.process(orjson.loads(value))
    engine.flush()
    return [Slot(st.key, 0, st) for st in engine.states.values()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", type=int, default=20000)
    p.add_argument("--scrapes", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    print(f"machine: {machine()}")
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    slots = fleet(args.workloads, args.scrapes)
    gc.collect()
    gc.disable()  # the worker's full collections come from its timer (agents/heap.py), not here
    before = rss_mib()
    best = float("inf")
    size = 0
    for _ in range(args.rounds):
        start = time.perf_counter()
        for slot in slots:
            size += len(slot.to_bytes())
        best = min(best, (time.perf_counter() - start) / len(slots))
    kept = rss_mib() - before
    print(
        f"{len(slots):,} slots: {best * 1e6:.1f} µs per slot (best of {args.rounds} rounds), "
        f"{size / len(slots) / args.rounds:,.0f} bytes per slot, {kept:.0f} MiB kept after the writes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
