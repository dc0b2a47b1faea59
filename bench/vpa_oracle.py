"""tandem's own VPA against upstream's recommender on fresh random streams: a table, one row a stream.

Why: the suite compares a fixed seed set (tests/oracle/test_vpa_oracle.py); this runs any number of
seeds never run before, up to 14 days each (issue 30's random streams: 3-10 pods, 1-2 containers,
OOM kills, churn, dropped and re-sent samples, jitter, spikes, gaps of up to a day and a half,
scrapes split into one event per pod), and counts every value at every recommender run.

Run:  scripts/oracle.sh fetch && python bench/vpa_oracle.py [--seeds N] [--first S] [--max-days D]

Without ``--first`` the seeds start at a random number (printed, so a row can be run again).
Exits 1 if any checkpoint differs.  This is a script, not a test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.oracle import vpa_streams as v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seeds", type=int, default=20, help="how many streams (default 20)")
    ap.add_argument("--first", type=int, default=None, help="the first seed (default: a random one)")
    ap.add_argument("--max-days", type=float, default=14.0, help="longest stream in days (default 14)")
    ap.add_argument("--edge-cases", action="store_true", help="also run issue 30's edge cases")
    args = ap.parse_args(argv)
    binary = v.oracle_binary()
    if not binary.exists():
        print(f"no VPA oracle at {binary}: run scripts/oracle.sh fetch", file=sys.stderr)
        return 2
    first = args.first if args.first is not None else random.SystemRandom().randrange(1_000_000, 1_000_000_000)
    print(f"command: python bench/vpa_oracle.py --seeds {args.seeds} --first {first} --max-days {args.max_days}")
    print(f"oracle: {binary}")
    header = (
        f"{'stream':>32} {'days':>5} {'pods':>4} {'ctrs':>4} {'split':>5}"
        f" {'runs':>7} {'checkpoints':>11} {'differ':>6} {'s':>5}"
    )
    print(header)
    print("-" * len(header))
    named: list[tuple[str, v.Shape, int]] = [
        (str(s), v.random_shape(s, args.max_days), s) for s in range(first, first + args.seeds)
    ]
    if args.edge_cases:
        named += [(name, shape, seed) for name, (seed, shape) in sorted(v.EDGE_CASES.items())]
    total = v.Comparison()
    firsts: list[str] = []
    started = time.perf_counter()
    for name, shape, seed in named:
        t0 = time.perf_counter()
        one = v.compare_streams([(name, v.make_stream(seed, shape))], binary)
        total.add(one)
        if one.first:
            firsts.append(one.first)
        print(
            f"{name:>32} {shape.days:>5.1f} {shape.pods:>4} {len(shape.containers):>4}"
            f" {'yes' if shape.split else 'no':>5}"
            f" {one.runs:>7,} {one.checkpoints:>11,} {one.differing:>6,} {time.perf_counter() - t0:>5.1f}",
            flush=True,
        )
    print("-" * len(header))
    print(
        f"{len(named)} streams, {total.runs:,} runs, {total.checkpoints:,} checkpoints ({total.values:,} values): "
        f"{total.differing:,} differ ({time.perf_counter() - started:.0f} s)"
    )
    for line in firsts[:10]:
        print("first difference:", line)
    return 1 if total.differing else 0


if __name__ == "__main__":
    sys.exit(main())
