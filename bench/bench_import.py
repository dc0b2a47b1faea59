"""Benchmark: ``tandem import prometheus`` from a real Prometheus, then ``tandem replay`` of the result.

    python bench/bench_import.py [--workloads 100] [--pods 10] [--hours 24] [--step 60] [--keep DIR]
                                 [--print-url]

With ``--keep DIR`` the loaded TSDB stays in DIR and a later run with the same DIR (and fleet)
skips generating and loading it.  ``--print-url`` starts Prometheus on it, prints the URL and
the import's arguments, and leaves it running (``scripts/prometheus.sh stop DIR/prometheus``):
what times one import against another (``--vs``-style tools, or ``/usr/bin/time -v`` twice).

A fleet of ``--workloads`` Deployments of ``--pods`` pods (one container each) over ``--hours``,
scraped every ``--step`` seconds: cAdvisor's CPU counter and working set, kube-state-metrics' pod
owner, readiness, requests and the Deployment's replicas, generated as OpenMetrics text, loaded by
``promtool tsdb create-blocks-from openmetrics`` and served by Debian's Prometheus
(scripts/prometheus.sh) with a lookback delta just under the step.  Prints, for each step (load,
import, replay): the wall time, series/s or events/s, and the peak memory (max RSS) of its process.
The issue's target is four weeks of 100 workloads of 10 pods at 60 s (``--hours 672``): import and
replay together within 10 minutes on a 2-core machine.  Not a test: figures go to docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024

#: Runs one ``tandem`` command in this process and prints its peak memory last on stderr.
_MEASURED = (
    "import resource, sys\n"
    "from cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print(f'maxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def generate(path: Path, workloads: int, pods: int, hours: float, step: int) -> int:
    """The fleet as OpenMetrics text, series by series; returns the number of samples."""
    end = T0 + int(hours * 3600)
    times = range(T0, end + 1, step)
    n = 0
    with path.open("w") as out:
        for w in range(workloads):
            ns, deploy = f"ns{w % 10}", f"app{w}"
            rs = f"{deploy}-5d8f"
            out.writelines(
                f'kube_deployment_spec_replicas{{deployment="{deploy}",namespace="{ns}"}} {pods} {t}\n' for t in times
            )
            out.writelines(
                f'kube_replicaset_owner{{namespace="{ns}",owner_kind="Deployment",owner_name="{deploy}",'
                f'replicaset="{rs}"}} 1 {t}\n'
                for t in times
            )
            n += 2 * len(times)
            for p in range(pods):
                pod = f"{rs}-{p:03d}"
                base = f'namespace="{ns}",pod="{pod}"'
                ctr = f'container="app",{base}'
                counter = 0.0
                lines = []
                for k, t in enumerate(times):
                    counter += (0.1 + ((w * 7 + p * 3 + k) % 17) / 20) * step
                    lines.append(f"container_cpu_usage_seconds_total{{{ctr}}} {counter:.3f} {t}\n")
                out.writelines(lines)
                out.writelines(
                    f"container_memory_working_set_bytes{{{ctr}}} {(200 + (w + p + k) % 50) * MIB} {t}\n"
                    for k, t in enumerate(times)
                )
                out.writelines(
                    f'kube_pod_owner{{{base},owner_kind="ReplicaSet",owner_name="{rs}"}} 1 {t}\n' for t in times
                )
                out.writelines(f'kube_pod_status_ready{{{base},condition="true"}} 1 {t}\n' for t in times)
                out.writelines(
                    f'kube_pod_container_resource_requests{{{ctr},resource="cpu",unit="core"}} 0.5 {t}\n' for t in times
                )
                out.writelines(
                    f'kube_pod_container_resource_requests{{{ctr},resource="memory",unit="byte"}} {512 * MIB} {t}\n'
                    for t in times
                )
                n += 6 * len(times)
        out.write("# EOF\n")
    return n


def measured(argv: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stderr of ``tandem ARGV`` in a fresh process."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"tandem {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    match = re.search(r"maxrss_kib=(\d+)", done.stderr)
    return elapsed, int(match[1]) if match else 0, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=100, help="Deployments (default 100)")
    parser.add_argument("--pods", type=int, default=10, help="pods per Deployment (default 10)")
    parser.add_argument("--hours", type=float, default=24.0, help="history in hours (default 24; 672 is four weeks)")
    parser.add_argument("--step", type=int, default=60, help="scrape interval and import step, seconds (default 60)")
    parser.add_argument(
        "--keep", help="state directory to keep, and reuse when it holds this fleet (default: a temporary one)"
    )
    parser.add_argument("--print-url", action="store_true", help="serve the loaded fleet, print its URL, exit")
    args = parser.parse_args()
    if args.print_url and not args.keep:
        parser.error("--print-url needs --keep DIR (the fleet stays there, served)")

    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    state = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tandem-bench-import-"))
    state.mkdir(parents=True, exist_ok=True)
    prom = state / "prometheus"
    fleet = f"{args.workloads} {args.pods} {args.hours:g} {args.step}\n"
    marker = state / "fleet"
    if marker.exists() and marker.read_text() == fleet:
        print(f"reusing the fleet loaded in {prom}")
    else:
        om = state / "fleet.om"
        t = time.monotonic()
        samples = generate(om, args.workloads, args.pods, args.hours, args.step)
        print(f"generate: {samples:,} samples, {om.stat().st_size / 1e6:.0f} MB in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        shutil.rmtree(prom, ignore_errors=True)
        subprocess.run(["bash", str(ROOT / "scripts/prometheus.sh"), "load", str(prom), str(om)], check=True)
        loaded = time.monotonic() - t
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"load (promtool): {loaded:.1f} s, {samples / loaded:,.0f} samples/s, max RSS {before / 1024:.0f} MiB")
        om.unlink()
        marker.write_text(fleet)
    env = {**os.environ, "TANDEM_PROMETHEUS_LOOKBACK": f"{args.step - 5}s"}
    if not args.print_url:
        env["TANDEM_PROMETHEUS_WATCH_PID"] = str(os.getpid())
    url = subprocess.run(
        ["bash", str(ROOT / "scripts/prometheus.sh"), "start", str(prom)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + int(args.hours * 3600)))
    argv = ["import", "prometheus", url, "--start", "2026-01-01T00:00:00Z", "--end", end, "--cluster", "bench"]
    argv += ["--step", f"{args.step}s"]
    if args.print_url:
        print(url)
        print("tandem " + " ".join(argv))
        return 0
    try:
        history = state / "history.jsonl.gz"
        argv += ["--out", str(history)]
        took, rss, err = measured(argv)
        summary = err.strip().splitlines()[-2]
        series = int(re.search(r": (\d+) series", summary)[1])  # type: ignore[index]
        events = int(re.search(r"; (\d+) event", summary)[1])  # type: ignore[index]
        print(
            f"import: {took:.1f} s, {series / took:,.0f} series/s, {events / took:,.0f} events/s, "
            f"max RSS {rss / 1024:.0f} MiB"
        )
        print(f"  {summary}")
        took2, rss2, _ = measured(["replay", str(history), "--out", str(state / "audit.jsonl")])
        print(f"replay: {took2:.1f} s, {events / took2:,.0f} events/s, max RSS {rss2 / 1024:.0f} MiB")
        print(
            f"import + replay: {took + took2:.1f} s "
            f"({args.workloads} workloads x {args.pods} pods, {args.hours:g} h at {args.step} s)"
        )
    finally:
        subprocess.run(["bash", str(ROOT / "scripts/prometheus.sh"), "stop", str(prom)], check=False)
        if not args.keep:
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
