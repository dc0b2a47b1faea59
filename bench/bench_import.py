"""Benchmark: ``tandem import prometheus`` from a real Prometheus, then ``tandem replay`` of the result.

    python bench/bench_import.py [--workloads 100] [--pods 10] [--hours 24] [--step 60] [--keep DIR]
                                 [--chunk-hours 2] [--print-url]

With ``--keep DIR`` the loaded TSDB stays in DIR and a later run with the same DIR (and fleet)
skips generating and loading it (DIR/fleet says so, written once the TSDB is loaded and
compacted).  ``--print-url`` starts Prometheus on it, prints the URL and the import's arguments,
and leaves it running (``scripts/prometheus.sh stop DIR/prometheus``): what times one import
against another (``--vs``-style tools, or ``/usr/bin/time -v`` twice).

A fleet of ``--workloads`` Deployments of ``--pods`` pods (one container each) over ``--hours``,
scraped every ``--step`` seconds: cAdvisor's CPU counter and working set, kube-state-metrics' pod
owner, readiness, requests and the Deployment's replicas, generated as OpenMetrics text, loaded by
``promtool tsdb create-blocks-from openmetrics`` and served by Debian's Prometheus
(scripts/prometheus.sh) with a lookback delta just under the step.  Prints, for each step (load,
import, replay): the wall time, series/s or events/s, and the peak memory (max RSS) of its process.
The issue's target is four weeks of 100 workloads of 10 pods at 60 s (``--hours 672``): import and
replay together within 10 minutes on a 2-core machine.  Not a test: figures go to docs/performance.md.

Loading.  promtool (2.42) reads its whole file into memory and parses all of it once per 2 h block
it writes, so one file of the history costs time quadratic in its length (24 h: 97 s) and four
weeks would be a ~29 GB file.  The fleet is therefore written ``--chunk-hours`` at a time (every
series, from a 2 h block boundary: the same samples as one file, ``--chunk-hours 0``), each chunk
loaded by its own promtool while the generator writes the next, then deleted.  Measured on 24 h of
the default fleet (generate + load, load average 3 to 5; promtool's CPU; its peak RSS): 2 h chunks
34.4, 34.0, 25.9 s, 20-23 s, 170 MiB; 4 h 27.4, 47.2, 34.4 s, 26-29 s, 270 MiB; 6 h 40.0 s, 29 s,
369 MiB; 12 h 56.2 s, 44 s, 624 MiB; one file 97 s, 1,119 MiB.  2 h is the default: the least
CPU and memory, the wall time as good as any within the noise.  Prometheus then compacts the 2 h
blocks on its first start; that start happens here (``settle``), not in the timed import.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024
CHUNK_HOURS = 2  #: measured: see the module docstring

#: Runs one ``tandem`` command in this process and prints its peak memory last on stderr.
_MEASURED = (
    "import resource, sys\n"
    "from cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print(f'maxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


class Fleet:
    """The fleet's samples, written as OpenMetrics text one time window at a time.

    Every window holds every series, series by series, each in time order; the CPU counters carry
    over from one window to the next, so the windows together are exactly the samples of one file
    written over the whole history (``--chunk-hours 0``).
    """

    def __init__(self, workloads: int, pods: int, hours: float, step: int) -> None:
        self.workloads, self.pods, self.step = workloads, pods, step
        self.times = range(T0, T0 + int(hours * 3600) + 1, step)
        self.counters = [0.0] * (workloads * pods)

    def index(self, t: int) -> int:
        """How many scrape times come before ``t``."""
        return min(len(self.times), max(0, -(-(t - T0) // self.step)))

    def write(self, path: Path, first: int, last: int) -> int:
        """Scrapes ``first`` to ``last - 1`` (indexes into the history) to ``path``; returns the samples."""
        step, pods = self.step, self.pods
        times = self.times[first:last]
        n = 0
        with path.open("w") as out:
            for w in range(self.workloads):
                ns, deploy = f"ns{w % 10}", f"app{w}"
                rs = f"{deploy}-5d8f"
                out.writelines(
                    f'kube_deployment_spec_replicas{{deployment="{deploy}",namespace="{ns}"}} {pods} {t}\n'
                    for t in times
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
                    counter = self.counters[w * pods + p]
                    lines = []
                    for k, t in enumerate(times, first):
                        counter += (0.1 + ((w * 7 + p * 3 + k) % 17) / 20) * step
                        lines.append(f"container_cpu_usage_seconds_total{{{ctr}}} {counter:.3f} {t}\n")
                    self.counters[w * pods + p] = counter
                    out.writelines(lines)
                    out.writelines(
                        f"container_memory_working_set_bytes{{{ctr}}} {(200 + (w + p + k) % 50) * MIB} {t}\n"
                        for k, t in enumerate(times, first)
                    )
                    out.writelines(
                        f'kube_pod_owner{{{base},owner_kind="ReplicaSet",owner_name="{rs}"}} 1 {t}\n' for t in times
                    )
                    out.writelines(f'kube_pod_status_ready{{{base},condition="true"}} 1 {t}\n' for t in times)
                    out.writelines(
                        f'kube_pod_container_resource_requests{{{ctr},resource="cpu",unit="core"}} 0.5 {t}\n'
                        for t in times
                    )
                    out.writelines(
                        f'kube_pod_container_resource_requests{{{ctr},resource="memory",unit="byte"}} {512 * MIB} {t}\n'
                        for t in times
                    )
                    n += 6 * len(times)
            out.write("# EOF\n")
        return n


def load(fleet: Fleet, state: Path, chunk_hours: int) -> tuple[int, float]:
    """Generate and load the fleet into ``state/prometheus/data`` chunk by chunk; returns the samples.

    Each chunk (``chunk_hours`` of every series, from a 2 h block boundary; 0: the whole history)
    is loaded by ``promtool`` into a directory of its own, its blocks then moved into the TSDB:
    promtool would otherwise open every block already there for each one it writes.  The next
    chunk is generated while promtool loads this one.  Returns the samples and the seconds the
    generator waited for promtool.
    """
    data = state / "prometheus" / "data"
    data.mkdir(parents=True)
    span = fleet.times[-1] - T0
    width = chunk_hours * 3600 or span + 1
    bounds = [fleet.index(T0 + j * width) for j in range(span // width + 2)]
    chunks = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
    samples, waited = 0, 0.0
    pending: tuple[subprocess.Popen[bytes], Path, Path] | None = None

    def finish(proc: subprocess.Popen[bytes], om: Path, staging: Path) -> None:
        nonlocal waited
        t = time.monotonic()
        _, err = proc.communicate()
        waited += time.monotonic() - t
        if proc.returncode != 0:
            sys.exit(f"{err.decode()}promtool could not load {om} (kept, with {staging}/promtool.log)")
        for block in (staging / "data").iterdir():
            if re.fullmatch(r"[0-9A-Z]{26}", block.name):
                block.rename(data / block.name)
        shutil.rmtree(staging)
        om.unlink()

    for i, (first, last) in enumerate(chunks):
        om, staging = state / f"chunk-{i:04d}.om", state / f"chunk-{i:04d}"
        samples += fleet.write(om, first, last)
        if pending:
            finish(*pending)
        loader = ["bash", str(ROOT / "scripts/prometheus.sh"), "load", str(staging), str(om)]
        pending = (subprocess.Popen(loader, stderr=subprocess.PIPE), om, staging)
    if pending:
        finish(*pending)
    return samples, waited


def _metrics(url: str) -> dict[str, float]:
    """Prometheus's own TSDB counters (``/metrics``) that say whether it is still compacting."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    names = {
        "prometheus_tsdb_compactions_total",
        "prometheus_tsdb_compactions_triggered_total",
        "prometheus_tsdb_blocks_loaded",
    }
    return {name: float(v) for name, v in re.findall(r"^(\w+) (\S+)$", text, re.M) if name in names}


def settle(prom: Path, env: dict[str, str], timeout: float = 7200) -> None:
    """Start Prometheus once on the loaded TSDB and wait until it has compacted it; then stop it.

    Prometheus compacts the 2 h blocks promtool wrote into larger ones (2 h, 6 h, 18 h, ... up to a
    tenth of the retention or 31 days) in its TSDB's run loop: once a minute it reloads the blocks
    and triggers a compaction, which plans and compacts until nothing is left to plan
    (prometheus/tsdb/db.go, ``DB.run`` and ``DB.Compact``).  So the work is done once a second
    trigger has come (``prometheus_tsdb_compactions_triggered_total`` >= 2: the loop is sequential,
    the first compaction returned), no block is being written (no ``*.tmp-for-creation`` directory)
    and the compactions and blocks counted stay put for 15 s.  Without this the first start in a
    timed import would compact under it.
    """
    script = str(ROOT / "scripts/prometheus.sh")
    t = time.monotonic()
    before = sum(1 for _ in (prom / "data").glob("[0-9A-Z]" * 26))
    url = subprocess.run(
        ["bash", script, "start", str(prom)], env=env, capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    try:
        seen: list[tuple[float, dict[str, float]]] = []
        while True:
            now, m = time.monotonic(), _metrics(url)
            busy = any((prom / "data").glob("*.tmp-for-creation"))
            seen = [(at, old) for at, old in seen if old == m] + [(now, m)]
            if m.get("prometheus_tsdb_compactions_triggered_total", 0) >= 2 and not busy and now - seen[0][0] >= 15:
                break
            if now - t > timeout:
                sys.exit(f"Prometheus on {prom} still compacting after {timeout:.0f} s: {m}")
            time.sleep(2)
    finally:
        subprocess.run(["bash", script, "stop", str(prom)], check=False)
    size = sum(f.stat().st_size for f in (prom / "data").rglob("*") if f.is_file())
    print(
        f"compact (Prometheus's first start): {time.monotonic() - t:.1f} s, {before} blocks -> "
        f"{m.get('prometheus_tsdb_blocks_loaded', 0):.0f} in "
        f"{m.get('prometheus_tsdb_compactions_total', 0):.0f} compactions; TSDB {size / 1e6:,.0f} MB"
    )


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
    parser.add_argument(
        "--chunk-hours",
        type=int,
        default=CHUNK_HOURS,
        help=f"hours of every series per OpenMetrics file, a multiple of 2 (default {CHUNK_HOURS}; 0: one file)",
    )
    parser.add_argument("--print-url", action="store_true", help="serve the loaded fleet, print its URL, exit")
    args = parser.parse_args()
    if args.print_url and not args.keep:
        parser.error("--print-url needs --keep DIR (the fleet stays there, served)")
    if args.chunk_hours < 0 or args.chunk_hours % 2:
        parser.error("--chunk-hours must be 0 or a positive multiple of 2 (Prometheus's 2 h blocks)")

    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    state = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tandem-bench-import-"))
    state.mkdir(parents=True, exist_ok=True)
    prom = state / "prometheus"
    fleet = f"{args.workloads} {args.pods} {args.hours:g} {args.step}\n"
    marker = state / "fleet"
    if marker.exists() and marker.read_text() == fleet:
        print(f"reusing the fleet loaded in {prom}")
    else:
        t = time.monotonic()
        shutil.rmtree(prom, ignore_errors=True)
        samples, waited = load(Fleet(args.workloads, args.pods, args.hours, args.step), state, args.chunk_hours)
        loaded = time.monotonic() - t
        print(
            f"generate + load ({args.chunk_hours or args.hours:g} h chunks): {samples:,} samples in {loaded:.1f} s, "
            f"{samples / loaded:,.0f} samples/s, {waited:.1f} s of it waiting for promtool; max RSS generator "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB, "
            f"promtool {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MiB"
        )
        settle(prom, {**os.environ, "TANDEM_PROMETHEUS_WATCH_PID": str(os.getpid())})
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
