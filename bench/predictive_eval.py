#!/usr/bin/env python3
"""``spec.predictive`` evaluated with ``tandem simulate`` (issue 36; docs/evaluation.md, "Predictive").

Writes the traces and the policy files into ``--out`` (default ``/tmp/tandem-predictive``), runs
``tandem simulate`` once per trace with every policy file, and prints the table of
docs/evaluation.md: per trace and policy, the CPU cost and shortfall of the reactive policy, with
``spec.predictive: {}`` and with the Holt-Winters baseline (analysis/holt_winters.py).

Traces: the real ones of analysis/traces.py (converted by ``bench/traces.py``: online-retail and
bikeshare, 14 days each) and three generated here, 14 days of one minute each, through the same
mapping from a rate to CPU and memory (``analysis.traces.demand_lines``):

* ``daily``: a steep business-hours step every day (a base of 2 units/min, 20 from 09:00 in one
  minute, a lunch dip, down at 18:00), ±5 % noise;
* ``weekly``: the same on weekdays, a quarter of it on Saturdays and Sundays;
* ``patternless``: a mean-reverting random walk with bursts at random times: nothing repeats.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from analysis.traces import STEP, Mapping, demand_lines, write_lines

ROOT = Path(__file__).resolve().parents[1]
MONDAY = 1_762_732_800  # 2025-11-10T00:00:00Z
DAYS = 14
POLICIES = ("horizontal", "hvpa")


def daily(t: float, rng: random.Random) -> float:
    h = (t % 86400) / 3600
    if h < 9 or h >= 18:
        base = 2.0
    elif 12.5 <= h < 13.5:
        base = 14.0
    else:
        base = 20.0
    return base * (1 + rng.uniform(-0.05, 0.05))


def weekly(t: float, rng: random.Random) -> float:
    weekend = ((t - MONDAY) // 86400) % 7 >= 5
    return daily(t, rng) * (0.25 if weekend else 1.0)


def patternless(seed: int) -> Callable[[float, random.Random], float]:
    state = {"x": 8.0, "burst": 0.0}

    def rate(t: float, rng: random.Random) -> float:
        state["x"] += 0.02 * (8.0 - state["x"]) + rng.gauss(0, 0.4)
        state["x"] = max(1.0, state["x"])
        if state["burst"] <= 0 and rng.random() < 1 / 720:  # about two bursts a day, at random times
            state["burst"] = rng.uniform(20, 90)
        if state["burst"] > 0:
            state["burst"] -= 1
            return state["x"] + 10.0
        return state["x"]

    return rate


def generate(path: Path, rate: Callable[[float, random.Random], float], seed: int) -> None:
    rng = random.Random(seed)
    piece = [(MONDAY + i * STEP, rate(MONDAY + i * STEP, rng)) for i in range(int(DAYS * 86400 / STEP))]
    write_lines(path, demand_lines([piece], Mapping(), ["web"], 20.0))


def policy_files(out: Path) -> list[Path]:
    files = []
    for name in POLICIES:
        docs = [d for d in yaml.safe_load_all((ROOT / "examples/simulate" / f"{name}.yaml").read_text())]
        docs = [d for d in docs if d["metadata"]["name"] == "web"]
        for variant in ("", "-predictive", "-holt-winters"):
            vd = copy.deepcopy(docs)
            for d in vd:
                if variant == "-predictive":
                    d["spec"]["predictive"] = {}
                elif variant == "-holt-winters":
                    d["metadata"].setdefault("annotations", {})["tandem.dev/simulate-baseline"] = "holt-winters"
            path = out / f"{name}{variant}.yaml"
            path.write_text(yaml.safe_dump_all(vd))
            files.append(path)
    return files


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("/tmp/tandem-predictive"))
    p.add_argument("--delay", type=float, default=30.0, help="pod start-up seconds (tandem simulate --delay)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--traces", default="daily,weekly,patternless,online-retail,bikeshare")
    args = p.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    streams: dict[str, Path] = {}
    for name in args.traces.split(","):
        path = out / f"{name}.jsonl.gz"
        if not path.exists():
            if name == "daily":
                generate(path, daily, 1)
            elif name == "weekly":
                generate(path, weekly, 2)
            elif name == "patternless":
                generate(path, patternless(3), 3)
            else:
                start = {"online-retail": "2010-11-01", "bikeshare": "2018-06-04"}[name]
                cmd = [sys.executable, "bench/traces.py", "convert", name, str(path), "--days", str(DAYS)]
                subprocess.run([*cmd, "--start", start], check=True, cwd=ROOT)
        streams[name] = path
    files = policy_files(out)
    print("| trace | policy | CPU core-h | CPU short core-h | h > requests | replica chg | cost | shortfall |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, stream in streams.items():
        result = out / f"{name}.json"
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "cli.main", "simulate", str(stream), "--jobs", str(args.jobs)]
        cmd += ["--delay", str(args.delay), "--json", str(result)]
        for f in files:
            cmd += ["--policy", str(f)]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - t0
        rows = {r["policy"]: r for r in json.loads(result.read_text()) if r["workload"] != "(all)"}
        for policy in POLICIES:
            base = rows[policy]
            for variant in ("", "-predictive", "-holt-winters"):
                r = rows[policy + variant]
                cost = _delta(r["cpu_core_hours"], base["cpu_core_hours"])
                short = _delta(r["cpu_shortfall_core_hours"], base["cpu_shortfall_core_hours"])
                print(
                    f"| {name} | {policy}{variant} | {r['cpu_core_hours']:.1f} | {r['cpu_shortfall_core_hours']:.3f} "
                    f"| {r['hours_over_requests']:.2f} | {r['replica_changes']} | {cost} | {short} |"
                )
        print(f"<!-- {name}: {took:.0f} s -->", file=sys.stderr)
    return 0


def _delta(value: float, base: float) -> str:
    if base == 0:
        return "0 %" if value == 0 else "+inf"
    d = (value - base) / base * 100
    return f"{d:+.1f} %" if not math.isclose(d, 0.0, abs_tol=0.05) else "0 %"


if __name__ == "__main__":
    sys.exit(main())
