"""tandem's HPA replica calculation against the controller's own code on fresh random reconciles.

Why: the suite compares 20,000 cases of one seed (tests/oracle/test_hpa_oracle.py); this runs any
number of seeds never run before and prints a row per seed.

Run:  scripts/oracle.sh fetch && python bench/hpa_oracle.py [--seeds N] [--first S] [--cases C]

Without ``--first`` the seeds start at a random number (printed).  Exits 1 if any case differs.
This is a script, not a test.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.oracle import hpa_cases as h


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seeds", type=int, default=5, help="how many seeds (default 5)")
    ap.add_argument("--first", type=int, default=None, help="the first seed (default: a random one)")
    ap.add_argument("--cases", type=int, default=10_000, help="cases per seed (default 10,000)")
    args = ap.parse_args(argv)
    binary = h.oracle_binary()
    if not binary.exists():
        print(f"no HPA oracle at {binary}: run scripts/oracle.sh fetch", file=sys.stderr)
        return 2
    first = args.first if args.first is not None else random.SystemRandom().randrange(1_000_000, 1_000_000_000)
    print(f"command: python bench/hpa_oracle.py --seeds {args.seeds} --first {first} --cases {args.cases}")
    header = f"{'seed':>12} {'cases':>8} {'errors':>7} {'scaled':>7} {'differ':>7} {'s':>6}"
    print(header)
    print("-" * len(header))
    total = differ = 0
    firsts: list[str] = []
    started = time.perf_counter()
    for seed in range(first, first + args.seeds):
        t0 = time.perf_counter()
        cases = h.random_cases(seed, args.cases)
        upstream = h.run_upstream(cases, binary)
        bad = 0
        for case, theirs in zip(cases, upstream, strict=True):
            ours = h.run_tandem(case)
            if not h.same(ours, theirs):
                bad += 1
                if len(firsts) < 5:
                    firsts.append(f"seed {seed}: tandem {ours}, upstream {theirs}, case {case}")
        errors = sum("error" in u for u in upstream)
        scaled = sum("error" not in u and u["replicas"] != c["current"] for c, u in zip(cases, upstream, strict=True))
        total += len(cases)
        differ += bad
        print(f"{seed:>12} {len(cases):>8,} {errors:>7,} {scaled:>7,} {bad:>7,} {time.perf_counter() - t0:>6.1f}")
    print("-" * len(header))
    print(f"{total:,} cases: {differ:,} differ ({time.perf_counter() - started:.0f} s)")
    for line in firsts:
        print("first difference:", line)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
