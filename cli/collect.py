"""``tandem collect``: feed the input topics from one cluster (:mod:`edge.collector`; see docs/edge.md).

Exit codes: 2 bad options, a kubeconfig that cannot be loaded or a taken metrics port; 1 the
collector failed; otherwise it runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from cli.options import (
    add_edge_metrics_options,
    add_edge_options,
    add_input_signing_options,
    add_kafka_options,
    add_loglevel,
    env,
    env_list,
    kafka_settings,
)
from cli.running import log_to_stderr, prepared, run_until_signal
from edge.collector import CollectorConfig
from edge.collector import run as run_collector
from edge.kube import api_client

NAME = "collect"
HELP = "feed the input topics from one cluster"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    add_edge_options(p)
    p.add_argument(
        "--namespace",
        action="append",
        default=env_list("namespace"),
        help="namespace to watch (repeatable; default all)",
    )
    p.add_argument("--interval", type=float, default=env("interval", "30"), help="pod metrics period (s)")
    p.add_argument("--watch-timeout", type=int, default=env("watch_timeout", "300"), help="one watch's length (s)")
    p.add_argument("--out", default=env("out"), help="write JSON Lines here instead of publishing to Kafka")
    add_loglevel(p, "info")
    add_kafka_options(p)
    add_input_signing_options(p)
    add_edge_metrics_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    if not args.cluster:
        print("tandem collect: --cluster NAME is required (or TANDEM_CLUSTER)", file=sys.stderr)
        return 2
    if "/" in args.cluster:
        print("tandem collect: --cluster must not contain '/'", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.watch_timeout < 1:
        print("tandem collect: --interval and --watch-timeout must be positive", file=sys.stderr)
        return 2
    log_to_stderr(args.loglevel)

    def build() -> tuple[Any, Any]:
        settings = None if args.out else kafka_settings(args)
        if settings is not None and settings.input_signing is not None and args.cluster not in settings.input_signing:
            raise ValueError(f"--input-signing-keys has no key for cluster {args.cluster!r}")
        return settings, api_client(args.kubeconfig)  # imports the kubernetes client, only here

    ready = prepared(NAME, build)
    if ready is None:
        return 2
    settings, api = ready
    config = CollectorConfig(args.cluster, tuple(dict.fromkeys(args.namespace)), args.interval, args.watch_timeout)

    async def main(stop: threading.Event, metrics: Any) -> None:
        await run_collector(config, api, settings=settings, out=args.out, stop=stop, metrics=metrics)

    return run_until_signal(NAME, args, main)
