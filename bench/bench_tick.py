"""Per-workload tick cost and replay rate, old and new side by side (issue 17).

    python bench/bench_tick.py --base <git ref> [--new <git ref>] [--rounds 5] [--ticks 1500] [--core interpreted]
    python bench/bench_tick.py --compare-cores [--rounds 5]   # this tree: interpreted (old), compiled (new)

Why side by side: the machine is shared and noisy, so a figure measured today cannot be compared
with one measured yesterday.  This script extracts the tree at ``--base`` (``git archive``) into a
temporary directory (``--new`` likewise, else this working tree is the new one) and, round after
round, runs the same measurement in a fresh subprocess on the old tree and on the new one,
alternating which goes first; each case reports the median of the per-round new/old ratios (a pair
shares the machine's state of the moment) and the median figures.  Times are CPU time, the best of
three runs inside each subprocess.
Each child also hashes what the core emitted, so the table says whether old and new produced the
same bytes.

The core (``scaling/__init__.py``): ``--core`` is the ``TANDEM_CORE`` of every child (default
``interpreted``, so that two trees compare like with like whether or not a compiled build of one
exists); ``--compare-cores`` measures this tree interpreted (old) against its compiled build (new,
``scripts/build_core.py``).  The header says which core each side ran.

Cases (the core only: events are decoded before the clock starts, as ``tandem simulate`` hands
them over):

* ``simulate``: tandem's own HPA and VPA on one workload of 10 pods with one container, an HVPA
  policy (``examples/simulate/hvpa.yaml``, ``web``); per tick one ``metric`` event with 10 samples
  (one a minute, as the simulator feeds them), then the tick's reconcile;
* ``recorded``: the same HVPA workload fed recorded recommendations: per tick (15 s) one ``hpa``
  and one ``vpa`` event from the cluster, then the reconcile;
* ``replay``: ``streams.replay.replay`` of the bundled example (``examples/stream.jsonl.gz`` with
  ``examples/policies.yaml``), reading and decoding included: events per second;
* ``fleet``: the same on a generated fleet (``bench/bench_pipeline.py``'s stream: 50 HVPA
  workloads of 10 pods, 2 hours, one metric event a minute, an hpa event every 30 s, a vpa event
  every 5 minutes), written once by the driver and replayed by both trees.

For the two replay cases each child also times ``json.loads`` of the same lines (best of three),
and the table's last lines give CPU per replayed event as a multiple of it (issue 17: at most 7).

Prints the machine, the command and the table; figures go to ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
REF = {"cluster": "eu-1", "namespace": "shop", "kind": "Deployment", "name": "web"}
T0 = 1_762_214_400.0  # a multiple of 60 s (and of the 15 s sync period)


# --- the measurements (run in a child, against the tree given by --tree) -----------------------


def _digest(items: list[Any]) -> str:
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _hvpa_manifest(tree: Path) -> dict[str, Any]:
    from streams.inputs import load_manifests

    docs = load_manifests(str(tree / "examples" / "simulate" / "hvpa.yaml"))
    return next(d for d in docs if d["metadata"]["name"] == "web")


def _workload(ts: float, replicas: int) -> dict[str, Any]:
    return {
        "type": "workload",
        "ts": ts,
        "workload": REF,
        "replicas": replicas,
        "containers": {
            "web": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
        },
    }


def _wave(i: int, period: int) -> float:
    """A daily-like curve with a deterministic jitter, in [0, 1]."""
    return 0.5 + 0.4 * math.sin(2 * math.pi * i / period) + ((i * 7919) % 101 - 50) / 1000


def _run_ticks(tree: Path, per_tick: list[list[dict[str, Any]]]) -> tuple[float, str]:
    from scaling.engine import Engine, policy_event
    from scaling.events import decode_event
    from scaling.settings import Settings

    engine = Engine(Settings())
    policy = policy_event(_hvpa_manifest(tree), "default", T0 - 60)
    policy["workload"] = REF
    emitted: list[Any] = []
    emitted.extend(engine.process(policy))
    emitted.extend(engine.process(_workload(T0 - 60, 10)))
    typed = [[(raw, decode_event(raw)) for raw in raws] for raws in per_tick]
    process, flush = engine.process, engine.flush
    start = time.process_time()
    for events in typed:
        for raw, event in events:
            emitted.extend(process(raw, event))
        emitted.extend(flush())
    elapsed = time.process_time() - start
    return elapsed / len(typed) * 1e6, _digest(emitted)


def case_simulate(tree: Path, ticks: int) -> dict[str, Any]:
    per_tick = []
    for i in range(ticks):
        ts = T0 + 60.0 * i
        load = _wave(i, 1440)
        samples = [
            {
                "pod": f"web-{p}",
                "container": "web",
                "cpu": round(0.05 + 0.5 * load + p / 200, 4),
                "memory": int((200 + 150 * load + p) * 2**20),
            }
            for p in range(10)
        ]
        per_tick.append([{"type": "metric", "ts": ts, "workload": REF, "samples": samples}])
    us, digest = _run_ticks(tree, per_tick)
    return {"us_per_tick": us, "digest": digest}


def case_recorded(tree: Path, ticks: int) -> dict[str, Any]:
    per_tick = []
    for i in range(ticks):
        ts = T0 + 15.0 * i
        load = _wave(i, 5760)
        desired = max(1, round(2 + 6 * load))
        hpa = {
            "type": "hpa",
            "ts": ts + 0.5,
            "workload": REF,
            "desired_replicas": desired,
            "current_replicas": 10,
            "min_replicas": 1,
            "max_replicas": 12,
            "conditions": [{"type": "AbleToScale", "status": "True"}, {"type": "ScalingLimited", "status": "False"}],
            "name": "web",
        }
        vpa = {
            "type": "vpa",
            "ts": ts + 0.75,
            "workload": REF,
            "containers": {
                "web": {"target": {"cpu": f"{int(100 + 600 * load)}m", "memory": f"{int(200 + 300 * load)}M"}}
            },
            "conditions": [{"type": "RecommendationProvided", "status": "True"}],
        }
        per_tick.append([hpa, vpa])
    us, digest = _run_ticks(tree, per_tick)
    return {"us_per_tick": us, "digest": digest}


def case_replay(tree: Path, _ticks: int) -> dict[str, Any]:
    return _replay_file(tree, tree / "examples" / "stream.jsonl.gz", tree / "examples" / "policies.yaml")


def _replay_file(tree: Path, stream: Path, policy_file: Path) -> dict[str, Any]:
    from scaling.settings import Settings
    from streams.inputs import iter_lines, load_manifests
    from streams.replay import replay

    policies = load_manifests(str(policy_file))
    out = io.BytesIO()
    start = time.process_time()
    stats = replay([str(stream)], out, settings=Settings(), policies=policies, err=io.StringIO())
    elapsed = time.process_time() - start
    lines = [line for _, line in iter_lines(str(stream))]
    loads = json.loads
    start = time.process_time()
    for line in lines:
        loads(line)
    json_s = time.process_time() - start
    return {
        "events_per_s": stats.read / elapsed,
        "events": stats.read,
        "json_loads_us": json_s / len(lines) * 1e6,
        "digest": hashlib.sha256(out.getvalue()).hexdigest()[:16],
    }


def case_fleet(tree: Path, _ticks: int) -> dict[str, Any]:
    fleet = Path(os.environ["TANDEM_BENCH_FLEET"])
    return _replay_file(tree, fleet / "stream.jsonl", fleet / "policies.yaml")


def write_fleet(into: Path, workloads: int = 50, minutes: int = 120, pods: int = 10) -> None:
    """The fleet stream and its policies (``bench_pipeline``'s generator), for the ``fleet`` case."""
    import yaml

    sys.path.insert(0, str(HERE.parent))
    from bench_pipeline import generate, policy

    into.mkdir(parents=True, exist_ok=True)
    generate(into / "stream.jsonl", workloads, minutes, pods)
    (into / "policies.yaml").write_text(yaml.safe_dump_all([policy(f"app-{w:03d}") for w in range(workloads)]))


CASES = {"simulate": case_simulate, "recorded": case_recorded, "replay": case_replay, "fleet": case_fleet}
REPLAYS = ("replay", "fleet")


def child(case: str, tree: Path, ticks: int) -> None:
    sys.path.insert(0, str(tree))
    import scaling

    where = Path(scaling.__file__).resolve()
    if tree.resolve() not in where.parents:
        raise SystemExit(f"imported {where}, not from {tree}")
    core = getattr(scaling, "CORE", "interpreted")  # a tree from before the compiled core
    # The best of three in one process: what is left of the noise is the machine's, not ours.
    runs = [CASES[case](tree, ticks) for _ in range(3)]
    assert len({r["digest"] for r in runs}) == 1, runs
    key = "events_per_s" if case in REPLAYS else "us_per_tick"
    best = (max if case in REPLAYS else min)(runs, key=lambda r: r[key])
    if case in REPLAYS:
        best["json_loads_us"] = min(r["json_loads_us"] for r in runs)
    best["core"] = core
    print(json.dumps(best))


# --- the driver --------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def extract(ref: str, into: Path) -> str:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def run_child(case: str, tree: Path, ticks: int, core: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED="0", TANDEM_CORE=core)
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", case, "--tree", str(tree), "--ticks", str(ticks)],
        check=True,
        capture_output=True,
        text=True,
        cwd=str(tree),
        env=env,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="git ref of the old tree (default: main)")
    ap.add_argument("--new", help="git ref of the new tree (default: this working tree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ticks", type=int, default=1500, help="ticks per measurement (simulate, recorded)")
    ap.add_argument("--cases", default="simulate,recorded,replay,fleet")
    ap.add_argument("--core", default="interpreted", help="TANDEM_CORE of both trees (default: interpreted)")
    ap.add_argument("--compare-cores", action="store_true", help="this tree interpreted (old) against compiled (new)")
    ap.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.tree, args.ticks)
        return
    cases = args.cases.split(",")
    new_commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], check=True, capture_output=True, text=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-tick-") as tmp:
        old_tree = Path(tmp) / "old"
        new_tree = ROOT
        cores = {"old": args.core, "new": args.core}
        if args.compare_cores:
            old_tree, old_commit, args.base = ROOT, new_commit, "this tree"
            cores = {"old": "interpreted", "new": "compiled"}
        else:
            old_commit = extract(args.base, old_tree)
        if args.new:
            new_tree = Path(tmp) / "new"
            new_commit = extract(args.new, new_tree)
        if "fleet" in cases:
            write_fleet(Path(tmp) / "fleet")
            os.environ["TANDEM_BENCH_FLEET"] = str(Path(tmp) / "fleet")
        results: dict[str, dict[str, list[dict[str, Any]]]] = {c: {"old": [], "new": []} for c in cases}
        for r in range(args.rounds):
            for case in cases:
                order = [("old", old_tree), ("new", new_tree)]
                if r % 2:
                    order.reverse()
                for side, tree in order:
                    results[case][side].append(run_child(case, tree, args.ticks, cores[side]))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    print(
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} cpus (shared, not pinned), Python {sys.version.split()[0]}"
    )
    print(f"command: python bench/bench_tick.py {' '.join(sys.argv[1:])}")
    new_name = args.new or "this tree"
    ran = {side: sorted({r["core"] for c in cases for r in results[c][side]}) for side in ("old", "new")}
    print(
        f"old: {args.base} ({old_commit}, {'/'.join(ran['old'])} core); new: {new_name} ({new_commit}, "
        f"{'/'.join(ran['new'])} core); {args.rounds} rounds, pairs alternated"
    )
    print()
    print("| case | old | new | new/old (median of pairs) | same output |")
    print("|---|---|---|---|---|")
    for case in cases:
        old, new = results[case]["old"], results[case]["new"]
        same = all(o["digest"] == n["digest"] for o, n in zip(old, new, strict=True))
        if case in REPLAYS:
            key, unit, fmt = "events_per_s", "events/s", "{:,.0f}"
        else:
            key, unit, fmt = "us_per_tick", "µs/tick", "{:.0f}"
        ratio = statistics.median(n[key] / o[key] for o, n in zip(old, new, strict=True))
        o_med = statistics.median(o[key] for o in old)
        n_med = statistics.median(n[key] for n in new)
        print(
            f"| {case} | {fmt.format(o_med)} {unit} | {fmt.format(n_med)} {unit} | {ratio:.2f} | "
            f"{'yes' if same else 'NO'} ({new[0]['digest']}) |"
        )
    for case in (c for c in cases if c in REPLAYS):
        # CPU per replayed event over json.loads per line, per child (same process, same moment).
        old, new = results[case]["old"], results[case]["new"]
        o_x = statistics.median(1e6 / o["events_per_s"] / o["json_loads_us"] for o in old)
        n_x = statistics.median(1e6 / n["events_per_s"] / n["json_loads_us"] for n in new)
        print(f"{case}: CPU per event = {o_x:.1f} (old) and {n_x:.1f} (new) x json.loads of its line (median)")


if __name__ == "__main__":
    main()
