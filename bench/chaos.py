"""Run the fault scenarios of issue #18 N times each and print a table of passes.

    python bench/chaos.py [--runs 20] [--parallel 1] [--scenario NAME]... [--outage 30] [--logs DIR]
                          [--hogs N] [--without-watermarks]

Each scenario is one real-broker test (``tests/integration/test_worker_kafka.py``,
``tests/integration/test_chaos.py`` and ``tests/integration/test_worker_stall.py``): it publishes
a stream, runs ``tandem worker`` subprocesses, injects the fault and compares the audit topic with
``tandem replay`` of the same input (same ids, same content, a repeated event byte-identical) and
checks that every input is committed.  CI runs each scenario once as part of the suite; this
script repeats them, round-robin so that a noisy moment of the machine does not hit one scenario
only; ``--parallel 2`` runs two at once (a harder test: each run then shares the machine with
another one's broker and workers).  A run's outcome is pytest's: passed, xfailed (a known,
documented limit the test reports as such) or failed (its output is kept under ``--logs``).  The
worker scenarios share one broker started here (``scripts/kafka.sh``); the broker scenarios start
and stop their own.

``--hogs N`` runs N busy loops (one CPU each) beside every run for the whole bench, so the
broker, the publisher and the workers compete for CPU (issue #28); the ``takeover-hogs``,
``frozen-publisher`` and ``takeover-clusters`` scenarios start their own two unless ``--hogs`` is
given.  ``--without-watermarks`` has ``tandem publish`` write none (``TANDEM_WATERMARK_EVERY=0``):
the merge's caught-up rule alone, to show what the watermarks prevent.

The table goes to docs/operating.md ("Faults") with the machine and the command.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = "tests/integration/test_worker_kafka.py::"
CHAOS = "tests/integration/test_chaos.py::"
STALL = "tests/integration/test_worker_stall.py::"
LOAD = "tests/integration/test_under_load.py::"

#: name -> (what the issue calls it, pytest node id)
SCENARIOS: dict[str, tuple[str, str]] = {
    "rebalance": (
        "1. two workers, a rebalance mid-stream",
        WORKER + "test_two_workers_split_partitions_and_a_rebalance_loses_nothing",
    ),
    "worker-sigkill": (
        "2. SIGKILL of a worker and restart (RocksDB store), calm",
        WORKER + "test_worker_killed_mid_stream_resumes_without_losing_decisions",
    ),
    "worker-sigkill-buffer-full": (
        "2. SIGKILL while the state's changelog lags (producer buffer full)",
        WORKER + "test_offsets_are_committed_only_after_the_state_is_in_the_changelog",
    ),
    "broker-sigterm": (
        "3. the broker stopped (SIGTERM) for 30 s mid-stream",
        CHAOS + "test_the_broker_stopped_mid_stream_and_started_again_loses_nothing[sigterm]",
    ),
    "broker-sigkill": (
        "4. the broker SIGKILLed and restarted",
        CHAOS + "test_the_broker_stopped_mid_stream_and_started_again_loses_nothing[sigkill]",
    ),
    "worker-before-broker": (
        "5. a worker started before the broker is up",
        CHAOS + "test_a_worker_started_before_the_broker_waits_for_it_unready_then_decides",
    ),
    "takeover": (
        "6. one worker of two SIGKILLed while input arrives, the other takes over",
        WORKER + "test_one_worker_of_two_killed_while_input_arrives_the_other_takes_over_losing_nothing",
    ),
    "fetch-hang": (
        "7. a fetch that never returns (the worker ends it)",
        STALL + "test_a_fetch_that_never_returns_is_ended_and_the_worker_catches_up",
    ),
    "takeover-hogs": (
        "8. the takeover of 6 beside two CPU hogs, the first half read while published",
        LOAD + "test_a_takeover_beside_cpu_hogs_decides_exactly_what_replay_decides",
    ),
    "frozen-publisher": (
        "9. scenario 8 with the publisher stopped for 3 s every 0.5-1 s",
        LOAD + "test_a_publisher_frozen_for_longer_than_the_grace_mid_stream_changes_no_decision",
    ),
    "takeover-clusters": (
        "10. scenario 8 with input topics per cluster (`--input-clusters a,b`; c1 on the shared ones)",
        LOAD + "test_a_takeover_with_input_topics_per_cluster_decides_exactly_what_replay_decides",
    ),
}

HOG = "x = 0\nwhile True:\n    x = (x * 7 + 3) % 1000003\n"


def _outcome(code: int, output: str) -> str:
    if code == 0 and re.search(r"\b1 xfailed\b", output):
        return "xfailed"
    if code == 0 and re.search(r"\b1 passed\b", output):
        return "passed"
    return "failed"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs per scenario (default 20)")
    p.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="only these (repeatable)")
    p.add_argument("--outage", type=float, default=30.0, help="seconds the broker stays away under SIGTERM")
    p.add_argument("--logs", type=Path, default=Path("chaos-logs"), help="where failed runs' output goes")
    p.add_argument("--parallel", type=int, default=1, help="runs at once (default 1; each run is several processes)")
    p.add_argument("--hogs", type=int, default=0, help="busy loops beside every run, one CPU each (default 0)")
    p.add_argument("--without-watermarks", action="store_true", help="tandem publish writes no watermarks")
    args = p.parse_args(argv)
    chosen = args.scenario or list(SCENARIOS)
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]

    broker_dir = Path(tempfile.mkdtemp(prefix="tandem-chaos-broker."))
    env = {**os.environ, "TANDEM_KAFKA_WATCH_PID": str(os.getpid())}
    started = subprocess.run(
        ["bash", "scripts/kafka.sh", "start", str(broker_dir)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if started.returncode != 0:
        print(started.stderr, file=sys.stderr)
        return 1
    bootstrap = started.stdout.strip().splitlines()[-1]
    results: dict[str, list[tuple[str, float]]] = {name: [] for name in chosen}
    begun = time.monotonic()
    # SIGTERM (or ^C) ends the runs early; the table then shows the runs that completed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    todo = [(run, name) for run in range(1, args.runs + 1) for name in chosen]
    running: list[tuple[int, str, float, subprocess.Popen[str], Path]] = []
    logs = Path(tempfile.mkdtemp(prefix="tandem-chaos-runs."))
    try:
        while todo or running:
            while todo and len(running) < args.parallel:
                run, name = todo.pop(0)
                out = logs / f"{name}-{run}.log"
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEx", SCENARIOS[name][1]],
                    cwd=ROOT,
                    env={
                        **env,
                        "TANDEM_TEST_BROKER": bootstrap,
                        "TANDEM_CHAOS_OUTAGE": str(args.outage),
                        **({"TANDEM_HOGS": "0"} if args.hogs else {}),
                        **({"TANDEM_WATERMARK_EVERY": "0"} if args.without_watermarks else {}),
                    },
                    stdout=out.open("w"),
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                running.append((run, name, time.monotonic(), proc, out))
            time.sleep(0.5)
            for item in [r for r in running if r[3].poll() is not None]:
                running.remove(item)
                run, name, t0, proc, out = item
                seconds = time.monotonic() - t0
                text = out.read_text(errors="replace")
                outcome = _outcome(proc.returncode, text)
                results[name].append((outcome, seconds))
                if outcome != "passed":
                    args.logs.mkdir(parents=True, exist_ok=True)
                    (args.logs / out.name).write_text(text)
                print(f"run {run}/{args.runs} {name}: {outcome} in {seconds:.0f} s", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("stopped early: the table shows the runs that completed", file=sys.stderr)
        for _run, _name, _t0, proc, _out in running:
            proc.terminate()
            proc.wait()
    finally:
        for hog in hogs:
            hog.kill()
        subprocess.run(["bash", "scripts/kafka.sh", "stop", str(broker_dir)], cwd=ROOT, capture_output=True)

    print(
        f"{platform.node()}: {platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; {time.monotonic() - begun:.0f} s in all"
    )
    only = "".join(f" --scenario {n}" for n in args.scenario or ())
    only += f" --hogs {args.hogs}" if args.hogs else ""
    only += " --without-watermarks" if args.without_watermarks else ""
    print(f"command: python bench/chaos.py --runs {args.runs} --parallel {args.parallel}{only}")
    print()
    print("| scenario | runs | passed | xfailed | failed | median s |")
    print("|---|---|---|---|---|---|")
    for name in chosen:
        outcomes = [o for o, _ in results[name]]
        if not outcomes:
            continue
        median = statistics.median(s for _, s in results[name]) if results[name] else 0.0
        print(
            f"| {SCENARIOS[name][0]} (`{name}`) | {len(outcomes)} | {outcomes.count('passed')} | "
            f"{outcomes.count('xfailed')} | {outcomes.count('failed')} | {median:.0f} |"
        )
    return 0 if all(o == "passed" for rs in results.values() for o, _ in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
