"""Benchmark: simulated workload-days per second, 3 policies on the bundled example.

    python bench/bench_simulate.py [--jobs N]

Without ``--jobs``: one process pinned to one core.  With ``--jobs N``: ``--jobs 1`` and
``--jobs N`` (``tandem simulate --jobs``, a process per run) measured alternately in the same run,
not pinned, and the outputs compared.

Prints the machine, the command and the figure.  Not a test: figures go to the README.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import time
from pathlib import Path

import scaling
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


def _measure(stream: str, policies: list[str], jobs: int) -> tuple[float, float, list[object]]:
    start = time.perf_counter()
    outcomes = simulate([stream], policies, Settings(), 30.0, io.StringIO(), jobs=jobs, progress=False)
    seconds = time.perf_counter() - start
    return seconds, sum(o.samples for o in outcomes) / 1440, [o.row() for o in outcomes]  # one sample a minute


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=None, help="also measure tandem simulate --jobs N")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    stream = str(root / "examples" / "stream.jsonl.gz")
    policies = [str(root / "examples" / "simulate" / f"{n}.yaml") for n in ("horizontal", "vertical", "hvpa")]
    print(
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}, "
        f"{scaling.CORE} core (TANDEM_CORE)"
    )
    print(f"command: python {' '.join(sys.argv)}")
    if args.jobs is None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})
        best, days = float("inf"), 0.0
        for _ in range(3):
            seconds, days, _rows = _measure(stream, policies, 1)
            best = min(best, seconds)
        print(
            f"simulated {days:.1f} workload-days (3 policies x 2 workloads x 3 days) in {best:.2f} s (best of 3, "
            f"one core, including reading the stream): {days / best:.1f} workload-days/s"
        )
        return
    best = {1: float("inf"), args.jobs: float("inf")}
    rows: dict[int, list[object]] = {}
    days = 0.0
    for _ in range(3):
        for jobs in (1, args.jobs):
            seconds, days, rows[jobs] = _measure(stream, policies, jobs)
            best[jobs] = min(best[jobs], seconds)
    for jobs, seconds in best.items():
        rate = days / seconds
        print(f"--jobs {jobs}: {days:.1f} workload-days in {seconds:.2f} s (best of 3): {rate:.1f} workload-days/s")
    print(f"same outcomes: {'yes' if rows[1] == rows[args.jobs] else 'NO'}; speed-up {best[1] / best[args.jobs]:.2f}x")


if __name__ == "__main__":
    main()
