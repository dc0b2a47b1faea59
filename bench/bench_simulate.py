"""Benchmark: simulated workload-days per second, 3 policies on the bundled example, one core.

    python bench/bench_simulate.py

Prints the machine, the command and the figure.  Not a test: figures go to the README.
"""

from __future__ import annotations

import io
import os
import platform
import sys
import time
from pathlib import Path

from analysis.simulate import simulate
from scaling.settings import Settings


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    stream = str(root / "examples" / "stream.jsonl.gz")
    policies = [str(root / "examples" / "simulate" / f"{n}.yaml") for n in ("horizontal", "vertical", "hvpa")]
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    best = float("inf")
    days = 0.0
    for _ in range(3):
        start = time.perf_counter()
        outcomes = simulate([stream], policies, Settings(), 30.0, io.StringIO())
        best = min(best, time.perf_counter() - start)
        days = sum(o.samples for o in outcomes) / 1440  # one sample a minute
    print(
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} cpus (pinned to one), Python {sys.version.split()[0]}"
    )
    print(f"command: python {' '.join(sys.argv)}")
    print(
        f"simulated {days:.1f} workload-days (3 policies x 2 workloads x 3 days) in {best:.2f} s (best of 3, "
        f"including reading the stream): {days / best:.1f} workload-days/s"
    )


if __name__ == "__main__":
    main()
