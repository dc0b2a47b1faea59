#!/usr/bin/env python3
"""``spec.predictive`` evaluated with ``tandem simulate`` (issue 36; docs/evaluation.md, "Predictive").

Writes the traces and the policy files into ``--out`` (default ``/tmp/tandem-predictive``), runs
``tandem simulate`` once per trace with every policy file, and prints the table of
docs/evaluation.md: per trace and policy, the CPU cost and shortfall of the reactive policy, with
``spec.predictive: {}`` and with the Holt-Winters baseline (analysis/holt_winters.py).

Traces: the real ones of analysis/traces.py (``bench/traces.py``: online-retail, bikeshare and
bank-calls, 14 days each) and three generated here, 14 days of one minute each, through the same
mapping from a rate to CPU and memory (``analysis.traces.demand_lines``):

* ``daily``: a steep business-hours step every day (a base of 2 units/min, 20 from 09:00 in one
  minute, a lunch dip, down at 18:00), ±5 % noise;
* ``weekly``: the same on weekdays, a quarter of it on Saturdays and Sundays;
* ``patternless``: a mean-reverting random walk with bursts at random times: nothing repeats.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from analysis.traces import STEP, Mapping, demand_lines, write_lines

ROOT = Path(__file__).resolve().parents[1]
MONDAY = 1_762_732_800  # 2025-11-10T00:00:00Z
DAYS = 14
#: The bundled example's ``web`` policies (examples/simulate/<name>.yaml) evaluated by default;
#: ``--policies`` adds ``tortoise`` and ``custom-hpa``.
POLICIES = ("horizontal", "hvpa")
#: Each policy as it is, with ``spec.predictive: {}`` and with the Holt-Winters baseline.
VARIANTS = ("", "-predictive", "-holt-winters")


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


def policy_files(
    out: Path,
    policies: tuple[str, ...] = POLICIES,
    variants: tuple[str, ...] = VARIANTS,
    horizon: str | None = None,
    cap: int | None = None,
) -> list[Path]:
    files = []
    for name in policies:
        docs = [d for d in yaml.safe_load_all((ROOT / "examples/simulate" / f"{name}.yaml").read_text())]
        docs = [d for d in docs if d["metadata"]["name"] == "web"]
        for variant in variants:
            vd = copy.deepcopy(docs)
            for d in vd:
                if variant == "-predictive":
                    section: dict[str, Any] = {} if horizon is None else {"horizon": horizon}
                    if cap is not None:
                        section["maxPreScalePercent"] = cap
                    d["spec"]["predictive"] = section
                elif variant == "-holt-winters":
                    notes = d["metadata"].setdefault("annotations", {})
                    notes["tandem.dev/simulate-baseline"] = "holt-winters"
                    if horizon is not None:  # the baseline looks as far ahead as the forecaster
                        notes["tandem.dev/simulate-baseline-horizon"] = horizon
            path = out / f"{name}{variant}.yaml"
            path.write_text(yaml.safe_dump_all(vd))
            files.append(path)
    return files


def gates(stream: Path, per_pod: float = 0.3, horizon: float = 75.0) -> dict[str, Any]:
    """Why ``spec.predictive`` does (not) act on a trace, without the closed loop: the trace's CPU
    demand as the HPA's load (cores / ``per_pod``: the example's 500m request at 60 %) through the
    forecaster minute by minute, with the default gates; per gate the share of minutes, and the
    forecast's error ``horizon`` ahead where the load rises by 10 % or more within it."""
    from scaling.forecast import LoadProfile

    demand: list[tuple[float, float]] = []
    with gzip.open(stream, "rt") as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "metric":
                cpu = sum(s.get("cpu", 0.0) for s in e["samples"] if "container" in s)
                demand.append((float(e["ts"]), cpu / per_pod))
    profile = LoadProfile()
    counts: dict[str, int] = {}
    ramps: list[float] = []
    at = {ts: load for ts, load in demand}
    for ts, load in demand:
        profile.observe(ts, load)
        f = profile.forecast(ts + horizon) if profile.history(ts) >= 86400 else None
        if profile.history(ts) < 86400:
            gate = "TooLittleHistory"
        elif f is None:
            gate = "NoProfile"
        elif f.error is None:
            gate = "ErrorNotMeasured"
        elif f.error > 25:
            gate = "ErrorTooLarge"
        elif f.versus_naive is not None and f.versus_naive > 1.0:
            gate = "NoBetterThanNaive"
        else:
            gate = "Open"
        counts[gate] = counts.get(gate, 0) + 1
        ahead = at.get(ts + 60 * math.ceil(horizon / 60))
        if f is not None and ahead is not None and ahead >= 1.1 * load and ahead > 0 and gate != "TooLittleHistory":
            ramps.append((f.load - ahead) / ahead)
    total = sum(counts.values())
    ramps.sort()
    return {
        "minutes": total,
        "gates": {k: round(v / total * 100, 1) for k, v in sorted(counts.items())},
        "rises": len(ramps),
        "rise_error_median_percent": round(ramps[len(ramps) // 2] * 100, 1) if ramps else None,
        "rises_foreseen_percent": round(sum(1 for r in ramps if r >= -0.05) / len(ramps) * 100, 1) if ramps else None,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("/tmp/tandem-predictive"))
    p.add_argument("--delay", type=float, default=30.0, help="pod start-up seconds (tandem simulate --delay)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--traces", default="daily,weekly,patternless,online-retail,bikeshare,bank-calls")
    p.add_argument("--policies", default=",".join(POLICIES), help="of horizontal, hvpa, tortoise, custom-hpa")
    p.add_argument("--variants", default=",".join(v.lstrip("-") or "reactive" for v in VARIANTS))
    p.add_argument("--gates", action="store_true", help="only print, per trace, why the forecaster acts or not")
    p.add_argument(
        "--horizon",
        help="spec.predictive.horizon of the predictive variant and the Holt-Winters baseline's horizon "
        "(default: none, the observed start-up, and 75 s)",
    )
    p.add_argument("--max-pre-scale", type=int, help="spec.predictive.maxPreScalePercent of the predictive variant")
    args = p.parse_args()
    policies = tuple(args.policies.split(","))
    variants = tuple("" if v == "reactive" else f"-{v}" for v in args.variants.split(","))
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
                start = {"online-retail": "2010-11-01", "bikeshare": "2018-06-04", "bank-calls": "2003-03-03"}[name]
                cmd = [sys.executable, "bench/traces.py", "convert", name, str(path), "--days", str(DAYS)]
                subprocess.run([*cmd, "--start", start], check=True, cwd=ROOT)
        streams[name] = path
    if args.gates:
        for name, stream in streams.items():
            print(name, json.dumps(gates(stream)))
        return 0
    files = policy_files(out, policies, variants, args.horizon, args.max_pre_scale)
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
        for policy in policies:
            base = rows[policy]
            for variant in variants:
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
