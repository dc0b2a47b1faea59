"""Instructions per tick of ``bench_tick``'s timed loop, counted by cachegrind (issue 17).

    python bench/tick_instructions.py [--cases simulate,recorded] [--ticks 300] [--cores interpreted,compiled]

Why instructions: the machine is shared, and an instruction count is not disturbed by the other
jobs.  Each case runs twice under ``valgrind --tool=cachegrind --cache-sim=no`` with
``PYTHONHASHSEED=0``: both runs build and decode the events of ``2 * ticks`` ticks, one then
processes ``ticks`` of them and the other all ``2 * ticks``; the difference over ``ticks`` is what
one tick of the loop ``bench_tick`` times costs, ticks ``N+1..2N`` (start-up, imports, building and
decoding the events cancel out).  ``--cores`` runs the same with each ``TANDEM_CORE`` (``scaling/__init__.py``).

Prints the machine, the command and a table; figures go to ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]


def child(case: str, ticks: int, loop: int) -> None:
    """Build and decode ``ticks`` ticks of ``case`` as ``bench_tick`` does, process the first ``loop``.

    ``bench_tick._run_ticks`` with the loop cut short and no digest of what was emitted (hashing it
    grows with the ticks, so it would not cancel out).
    """
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE.parent))
    import bench_tick

    def run_ticks(tree: Path, per_tick: list[list[dict[str, Any]]]) -> tuple[float, str]:
        from scaling.engine import Engine, policy_event
        from scaling.events import decode_event
        from scaling.settings import Settings

        engine = Engine(Settings())
        policy = policy_event(bench_tick._hvpa_manifest(tree), "default", bench_tick.T0 - 60)
        policy["workload"] = bench_tick.REF
        emitted: list[Any] = []
        emitted.extend(engine.process(policy))
        emitted.extend(engine.process(bench_tick._workload(bench_tick.T0 - 60, 10)))
        typed = [[(raw, decode_event(raw)) for raw in raws] for raws in per_tick]
        process, flush = engine.process, engine.flush
        for events in typed[:loop]:  # the loop bench_tick times
            for raw, event in events:
                emitted.extend(process(raw, event))
            emitted.extend(flush())
        return 0.0, ""

    bench_tick._run_ticks = run_ticks
    bench_tick.CASES[case](ROOT, ticks)


def count(case: str, ticks: int, loop: int, core: str) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0", TANDEM_CORE=core, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="tick-ir-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={out}",
                sys.executable,
                str(HERE),
                "--child",
                case,
                "--ticks",
                str(ticks),
                "--loop",
                str(loop),
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=str(ROOT),
        )
        summary = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if summary is None:
            raise SystemExit(f"no summary in {out}")
        return int(summary.group(1))


def core_of(core: str) -> str:
    env = dict(os.environ, TANDEM_CORE=core, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", "import scaling; print(scaling.CORE)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
    ).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="simulate,recorded")
    ap.add_argument("--ticks", type=int, default=300, help="N: the difference of 2N and N ticks, over N")
    ap.add_argument("--cores", default="interpreted,compiled", help="TANDEM_CORE values to count")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--loop", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.ticks, args.loop)
        return
    cores = args.cores.split(",")
    ran = {core: core_of(core) for core in cores}
    print(
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, Python {sys.version.split()[0]}, "
        f"core: {', '.join(f'TANDEM_CORE={k} runs {v}' for k, v in ran.items())}"
    )
    print(f"command: python bench/tick_instructions.py {' '.join(sys.argv[1:])}")
    print()
    print(f"| case | {' | '.join(cores)} |")
    print(f"|---|{'---|' * len(cores)}")
    n = args.ticks
    for case in args.cases.split(","):
        cells = []
        for core in cores:
            per_tick = (count(case, 2 * n, 2 * n, core) - count(case, 2 * n, n, core)) / n
            cells.append(f"{per_tick / 1000:,.1f}k instructions/tick")
        print(f"| {case} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
