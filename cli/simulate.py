"""``tandem simulate``: compare policies on recorded demand in closed loop (:mod:`analysis.simulate`).

Prints the comparison table on stdout.  Exit codes: 0, 1 every policy refused or an input file
that could not be read to its end, 2 a usage error or a missing file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from analysis.holt_winters import baseline_horizon
from analysis.simulate import simulate, table, write_report
from analysis.upstream import UpstreamArm, is_upstream, parse_upstream
from cli.options import add_core_options, add_files, add_policy, env
from scaling.errors import InvalidPolicy
from scaling.quantity import parse_quantity
from streams.inputs import (
    UsageError,
    WatchedErr,
    check_output_dir,
    check_output_file,
    load_command_inputs,
    load_manifests,
)

NAME = "simulate"
HELP = "compare policies on recorded demand in closed loop"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        NAME, help=HELP, description="recorded demand through policies in closed loop, compared on cost and risk"
    )
    add_files(p, "recorded streams (JSON Lines, .gz, - for stdin)")
    add_policy(
        p,
        "a policy file to compare (repeatable): tandem's kinds, or upstream HorizontalPodAutoscaler "
        "(autoscaling/v2) and VerticalPodAutoscaler (autoscaling.k8s.io/v1) manifests run as their "
        "controllers would (docs/evaluation.md)",
    )
    p.add_argument(
        "--delay",
        type=float,
        default=env("delay", "30"),
        help="seconds from a decision to its effect: a new or re-created pod's start-up time",
    )
    p.add_argument(
        "--memory-at-rest",
        type=memory_at_rest,
        default=env("memory_at_rest", "0"),
        metavar="QTY",
        help="memory every pod holds per container at rest, whatever its share of the load (a quantity "
        "such as 256Mi): each simulated pod uses it plus its share of the recorded memory less the "
        "recorded pods' at rest (default 0: the memory demand divided evenly over the ready pods)",
    )
    add_core_options(p)
    p.add_argument("--json", dest="json_out", default=env("json"), help="also write the outcomes as JSON here")
    p.add_argument(
        "--report", default=env("report"), help="write the HTML comparison (plots side by side) to this directory"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=env("jobs", str(os.cpu_count() or 1)),
        help="processes to spread the (policy, workload) runs over (default: every core); "
        "the results are the same as with 1",
    )
    p.set_defaults(run=run, parser=p)
    return p


def run(args: argparse.Namespace) -> int:
    if not args.policy:
        args.parser.error("at least one --policy FILE (or TANDEM_POLICY) is required")
    if args.jobs < 1:
        args.parser.error(f"--jobs must be at least 1, got {args.jobs}")
    checked: dict[str, list[dict[str, Any]]] = {}
    upstream: dict[str, list[UpstreamArm]] = {}
    try:
        # The outputs first: a typo in a path must not cost a whole simulation.
        if args.json_out:
            check_output_file(args.json_out, "--json")
        if args.report:
            check_output_dir(args.report, "--report")
        upstream_docs = _upstream_files(args.policy)
        settings, _ = load_command_inputs(
            args.files,
            [p for p in args.policy if p not in upstream_docs],
            args.config,
            args.cluster,
            args.sync_period,
            accepted=checked,
        )
        for path, docs in upstream_docs.items():
            try:
                upstream[path] = parse_upstream(docs, settings.cluster)
            except InvalidPolicy as exc:
                raise UsageError(f"{path}: {exc.field}: {exc.reason}") from None
        for path, docs in checked.items():  # refused here, not in a pool process mid-simulation
            for doc in docs:
                try:
                    baseline_horizon(doc)
                except ValueError as exc:
                    raise UsageError(f"{path}: {exc}") from None
    except UsageError as exc:
        print(f"tandem simulate: {exc}", file=sys.stderr)
        return exc.status
    if not any(checked.values()) and not any(upstream.values()):
        print("tandem simulate: every --policy manifest was refused (see above): nothing to simulate", file=sys.stderr)
        return 1
    recordings: dict[str, list[dict[str, Any]]] | None = {} if args.report else None
    err = WatchedErr(sys.stderr)
    outcomes = simulate(
        args.files,
        args.policy,
        settings,
        args.delay,
        err,
        recordings,
        jobs=args.jobs,
        checked=checked,
        upstream=upstream,
        memory_at_rest=args.memory_at_rest,
    )
    print(table(outcomes))
    try:
        if args.report and recordings is not None:
            index = write_report(Path(args.report), outcomes, args.policy, recordings, settings, err)
            print(f"tandem simulate: report written to {index}", file=sys.stderr)
        if args.json_out:
            Path(args.json_out).write_bytes(orjson.dumps([o.row() for o in outcomes], option=orjson.OPT_INDENT_2))
    except OSError as exc:
        print(f"tandem simulate: {exc.filename}: cannot be written ({exc.strerror or exc})", file=sys.stderr)
        return 2
    if err.broken:
        print(
            f"tandem simulate: {err.broken} file(s) could not be read to the end (see above); "
            "the table covers what came before the break",
            file=sys.stderr,
        )
        return 1
    return 0


def memory_at_rest(value: str) -> float:
    """An argparse type: a Kubernetes quantity >= 0 (``256Mi``), in bytes."""
    try:
        return parse_quantity(value) / 1000
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a memory quantity >= 0 such as 256Mi, got {value!r}") from None


def _upstream_files(paths: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The policy files that hold upstream HPA/VPA manifests, with their documents (the others
    are tandem's kinds, read by ``load_command_inputs``; a file it cannot read is left to it)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        try:
            docs = load_manifests(path)
        except Exception:  # load_command_inputs says why, in its words
            continue
        if any(is_upstream(d) for d in docs):
            found[path] = docs
    return found
