"""``tandem report``: a self-contained HTML report of a stream or an audit file (:mod:`analysis.report`).

Exit codes: 0, 1 a bad line under ``--strict``, 2 a usage error or a missing file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.report import build
from cli.options import add_core_options, add_files, add_policy, add_strict, env
from streams.inputs import UsageError, WatchedErr, check_output_dir, load_command_inputs
from streams.runner import StrictError

NAME = "report"
HELP = "write an HTML report (charts per workload) of a stream or an audit file"
PROG = "tandem report"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description="write a self-contained HTML report of a stream or an audit file")
    add_files(p, "recorded streams and/or audit files (.jsonl, .jsonl.gz, - for stdin)")
    add_policy(p, "policy manifest file, in force from the start of the replayed streams (repeatable)")
    p.add_argument("--out", default=env("out", "tandem-report"), help="output directory (default tandem-report)")
    p.add_argument("--workload", action="append", default=[], help="only this workload (a name or a key; repeatable)")
    p.add_argument(
        "--png",
        choices=("auto", "chromium", "matplotlib", "none"),
        default=env("png", "auto"),
        help="how to draw a PNG per workload: auto (matplotlib if installed, else headless Chromium), "
        "chromium, matplotlib, or none (default auto)",
    )
    p.add_argument("--title", default=env("title", "tandem report"), help="page title (default 'tandem report')")
    add_strict(p)
    add_core_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    refused: list[str] = []
    try:
        check_output_dir(args.out)  # before the run, not after it
        settings, manifests = load_command_inputs(
            args.files, args.policy, args.config, args.cluster, args.sync_period, strict=args.strict, refused=refused
        )
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.status
    out = Path(args.out)
    err = WatchedErr(sys.stderr)
    try:
        data, pngs = build(
            args.files,
            out,
            settings=settings,
            policies=manifests,
            workloads=args.workload,
            png=args.png,
            title=args.title,
            strict=args.strict,
            err=err,
            refused_policies=refused,
        )
    except StrictError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    n_dec = sum(e.type == "decision" for e in data.audit)
    n_blk = sum(e.type == "blocked" for e in data.audit)
    # Without PNGs build() has said why on stderr, unless none were asked for.
    made = f" and {len(pngs)} PNG(s)" if pngs else " (no PNGs)" if args.png == "none" else " (no PNGs: see above)"
    print(
        f"{PROG}: {len(data.workloads)} workload(s), {n_dec} decision(s), {n_blk} blocked report(s); "
        f"wrote {out / 'index.html'}, {out / 'audit.jsonl'}{made}",
        file=sys.stderr,
    )
    if err.broken:
        print(
            f"{PROG}: {err.broken} file(s) could not be read to the end (see above); "
            "the report shows what came before the break",
            file=sys.stderr,
        )
        return 1
    return 0
