"""Benchmark: ``tandem simulate`` of 1,000 workload-days of a real trace against six policy sets.

    python bench/bench_traces.py [--trace bikeshare] [--workloads 36] [--days 28] [--jobs 2]

The trace (analysis/traces.py; fetched from the package registry once) is cut into ``--workloads``
consecutive pieces of ``--days`` days that run side by side as workloads ``web-000``... (36 x 28 =
1,008 workload-days); each policy file of examples/simulate (the six below) is copied once per
workload with its ``web`` documents renamed.  One ``tandem simulate`` per policy set (a figure per
set as soon as it is done); the figures are workload-days x policy sets per wall second and per
CPU second of the simulate processes (the CPU figure is what a shared machine changes least).

Prints the machine, the command and the figures.  Not a test: figures go to docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis.traces import CACHE, convert, fetch  # noqa: E402

POLICY_SETS = ("hvpa", "tortoise", "upstream-hpa", "upstream-hpa-vpa-memory", "upstream-both", "upstream-vpa")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def rename(doc: dict, name: str) -> dict:
    """A copy of a policy document for workload ``web`` that targets ``name`` instead."""
    text = yaml.safe_dump(doc)
    return yaml.safe_load(text.replace("name: web\n", f"name: {name}\n"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default="bikeshare")
    p.add_argument("--workloads", type=int, default=36)
    p.add_argument("--days", type=float, default=28.0)
    p.add_argument("--start", default="2010-10-01")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    stream = CACHE / f"{args.trace}-{args.workloads}x{args.days:g}d-{args.start}.jsonl.gz"
    if not stream.exists():
        t = time.perf_counter()
        convert(args.trace, fetch(args.trace, CACHE), stream, args.days, args.workloads, args.start)
        print(f"converted {stream} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    names = [f"web-{i:03d}" for i in range(args.workloads)]
    wd = args.workloads * args.days
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"command: python bench/bench_traces.py --trace {args.trace} --workloads {args.workloads} "
        f"--days {args.days:g} --start {args.start} --jobs {args.jobs}"
    )
    print(f"{wd:g} workload-days, one tandem simulate per policy set (each reads the stream)", flush=True)
    walls: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in POLICY_SETS:
            docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "simulate" / f"{label}.yaml").read_text()) if d]
            web = [d for d in docs if d["metadata"]["name"] == "web"]
            policy = Path(tmp) / f"{label}.yaml"
            policy.write_text(yaml.safe_dump_all([rename(d, n) for n in names for d in web]))
            cmd = [str(ROOT / ".venv" / "bin" / "tandem"), "simulate", str(stream), "--jobs", str(args.jobs)]
            cmd += ["--policy", str(policy)]
            t = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            walls.append(wall)
            cpus.append(cpu)
            [total] = [line for line in proc.stdout.splitlines() if "(all)" in line]
            print(
                f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU: {wd / wall:.2f} workload-days/s wall, "
                f"{wd / cpu:.2f} per CPU-second (load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            print(f"  {total}", flush=True)
    n = len(POLICY_SETS)
    print(
        f"all {n} policy sets: {sum(walls):.1f} s wall, {sum(cpus):.1f} s CPU: {wd * n / sum(walls):.2f} "
        f"workload-days/s wall, {wd * n / sum(cpus):.2f} per CPU-second"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
