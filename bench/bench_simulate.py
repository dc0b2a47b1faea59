"""Benchmark: simulated workload-days per second, 3 policies on the bundled example.

    python bench/bench_simulate.py [--jobs N] [--base REF [--rounds R]]

Without ``--jobs``: one process pinned to one core.  With ``--jobs N``: ``--jobs 1`` and
``--jobs N`` (``tandem simulate --jobs``, a process per run) measured alternately in the same run,
not pinned, and the outputs compared.  With ``--base REF``: the tree at ``REF`` (``git archive``)
against this working tree, each run in a fresh process, old and new alternating (which goes
first too) for ``--rounds`` rounds, at ``--jobs N`` (default 1): the median of each and the
median of the per-round new/old ratios (a pair shares the machine's state of the moment).

Prints the machine, the command and the figure.  Not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _measure(stream: str, policies: list[str], jobs: int) -> tuple[float, float, list[object]]:
    from analysis.simulate import simulate
    from scaling.settings import Settings

    start = time.perf_counter()
    outcomes = simulate([stream], policies, Settings(), 30.0, io.StringIO(), jobs=jobs, progress=False)
    seconds = time.perf_counter() - start
    return seconds, sum(o.samples for o in outcomes) / 1440, [o.row() for o in outcomes]  # one sample a minute


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=None, help="also measure tandem simulate --jobs N")
    parser.add_argument("--base", help="git ref of an old tree to measure against this one, alternately")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of old and new (with --base)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, args.jobs or 1)
        return
    import scaling  # here, not at the top: a --child must import the core of its own tree

    root = ROOT
    stream = str(root / "examples" / "stream.jsonl.gz")
    policies = [str(root / "examples" / "simulate" / f"{n}.yaml") for n in ("horizontal", "vertical", "hvpa")]
    print(
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, {cpu_model()}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}, Python {sys.version.split()[0]}, "
        f"{scaling.CORE} core (TANDEM_CORE)"
    )
    print(f"command: python {' '.join(sys.argv)}")
    if args.base is not None:
        _against(args.base, args.jobs or 1, args.rounds)
        return
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


def _child(tree: Path, jobs: int) -> None:
    """One measurement on ``tree`` (imported from there), as a JSON line."""
    sys.path.insert(0, str(tree))
    import analysis
    import scaling

    # scaling/__init__.py is the tree's own (its compiled build, if any, is that of its sources).
    for module in (analysis, scaling):
        if tree.resolve() not in Path(str(module.__file__)).resolve().parents:
            raise SystemExit(f"imported {module.__file__}, not from {tree}")
    policies = [str(tree / "examples" / "simulate" / f"{n}.yaml") for n in ("horizontal", "vertical", "hvpa")]
    seconds, days, rows = _measure(str(tree / "examples" / "stream.jsonl.gz"), policies, jobs)
    print(json.dumps({"seconds": seconds, "days": days, "rows": rows, "core": scaling.CORE}))


def _against(base: str, jobs: int, rounds: int) -> None:
    """Old (``base``) and new (this tree) alternately, a fresh process each."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PYTHONPATH", None)

    def run(tree: Path) -> dict[str, object]:
        cmd = [sys.executable, str(HERE), "--child", str(tree), "--jobs", str(jobs)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=str(tree), env=env).stdout
        result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
        return result

    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        old_tree = Path(tmp) / "old"
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", base], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(old_tree, filter="data")
        results: dict[str, list[dict[str, object]]] = {"old": [], "new": []}
        for r in range(rounds):
            order = [("old", old_tree), ("new", ROOT)]
            for side, tree in order if r % 2 == 0 else reversed(order):
                results[side].append(run(tree))
    rate = {side: [float(m["days"]) / float(m["seconds"]) for m in ms] for side, ms in results.items()}
    same = all(o["rows"] == n["rows"] for o, n in zip(results["old"], results["new"], strict=True))
    ratio = statistics.median(n / o for o, n in zip(rate["old"], rate["new"], strict=True))
    print(f"old: {base}; new: this tree; --jobs {jobs}; {rounds} rounds, old and new alternating")
    # Which core each side ran: an old tree without its compiled build runs interpreted, which
    # would be compared with a compiled new one without a word (``scripts/build_core.py`` in it).
    cores = {side: sorted({str(m.get("core", "?")) for m in ms}) for side, ms in results.items()}
    print(f"cores: old {'/'.join(cores['old'])}, new {'/'.join(cores['new'])}")
    for side in ("old", "new"):
        print(f"{side}: median {statistics.median(rate[side]):.1f} workload-days/s, best {max(rate[side]):.1f}")
    print(
        "per round (old, new): "
        + ", ".join(f"({o:.1f}, {n:.1f})" for o, n in zip(rate["old"], rate["new"], strict=True))
    )
    print(
        f"new/old (median of pairs): {ratio:.2f}x; same outcomes: {'yes' if same else 'NO'}; "
        f"load after {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
