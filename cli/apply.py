"""``tandem apply``: apply decisions to one cluster (:mod:`edge.applier`; see docs/edge.md).

Exit codes: 2 bad options, a kubeconfig that cannot be loaded or a taken metrics port; 1 the
applier failed; otherwise it runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from cli.options import (
    add_decision_trust_options,
    add_edge_metrics_options,
    add_edge_options,
    add_kafka_options,
    add_loglevel,
    decision_verifier,
    env,
    flag,
    kafka_settings,
)
from cli.running import log_to_stderr, prepared, run_until_signal
from edge.applier import ApplierConfig
from edge.applier import run as run_applier
from edge.kube import api_client

NAME = "apply"
HELP = "apply decisions to one cluster"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    add_edge_options(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        default=flag("dry_run"),
        help="write nothing (the API server still validates every write with dryRun=All)",
    )
    p.add_argument("--group-id", default=env("group_id"), help="consumer group (default tandem-applier-<cluster>)")
    p.add_argument(
        "--offset-reset",
        choices=("latest", "earliest"),
        default=env("offset_reset", "latest"),
        help="where a new consumer group starts (default latest: old decisions are not replayed)",
    )
    p.add_argument("--max-attempts", type=int, default=env("max_attempts", "6"), help="tries per decision")
    p.add_argument(
        "--max-decision-age",
        default=env("max_decision_age", "10m"),
        help="refuse a decision whose tick is older than this by the applier's clock (history, a backlog); "
        "60s, 10m, 1h; 0: no limit (default 10m)",
    )
    add_loglevel(p, "info")
    add_kafka_options(p)
    add_decision_trust_options(p)
    add_edge_metrics_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    if not args.cluster:
        print("tandem apply: --cluster NAME is required (or TANDEM_CLUSTER)", file=sys.stderr)
        return 2
    if args.max_attempts < 1:
        print("tandem apply: --max-attempts must be >= 1", file=sys.stderr)
        return 2
    from cli.importer import parse_duration

    try:
        max_age = parse_duration(args.max_decision_age, "--max-decision-age")
    except ValueError as exc:
        print(f"tandem apply: {exc}", file=sys.stderr)
        return 2
    if max_age < 0:
        print("tandem apply: --max-decision-age: expected a duration >= 0 (0: no limit)", file=sys.stderr)
        return 2
    log_to_stderr(args.loglevel)
    ready = prepared(
        NAME,
        lambda: (
            kafka_settings(args),
            decision_verifier(args),  # the worker keys whose decisions it applies (None: any)
            api_client(args.kubeconfig),  # imports the kubernetes client, only here
        ),
    )
    if ready is None:
        return 2
    settings, verifier, api = ready
    config = ApplierConfig(args.cluster, args.dry_run, max_attempts=args.max_attempts, max_decision_age=max_age or None)

    async def main(stop: threading.Event, metrics: Any) -> None:
        await run_applier(
            settings,
            config,
            api,
            group_id=args.group_id,
            offset_reset=args.offset_reset,
            stop=stop,
            metrics=metrics,
            verifier=verifier,
        )

    return run_until_signal(NAME, args, main)
