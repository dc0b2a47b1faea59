"""``tandem collect``: feed the input topics from one cluster (:mod:`edge.collector`; see docs/edge.md).

Exit codes: 2 bad options, a kubeconfig that cannot be loaded or a taken metrics port; 1 the
collector failed; otherwise it runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading

from cli.options import add_edge_metrics_options, add_edge_options, add_loglevel, env, env_list
from edge.collector import CollectorConfig
from edge.collector import run as run_collector
from edge.kube import KubeconfigError, api_client
from ops.errors import describe
from ops.observability import metrics_from_args
from streams.settings import add_input_signing_options, add_kafka_options, kafka_settings

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
    logging.basicConfig(level=args.loglevel.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        settings = None if args.out else kafka_settings(args)
        if settings is not None and settings.input_signing is not None and args.cluster not in settings.input_signing:
            raise ValueError(f"--input-signing-keys has no key for cluster {args.cluster!r}")
        api = api_client(args.kubeconfig)  # imports the kubernetes client, only here
    except KubeconfigError as exc:  # its text names the file and the fix: no class name
        print(f"tandem collect: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"tandem collect: {describe(exc)}", file=sys.stderr)
        return 2
    config = CollectorConfig(args.cluster, tuple(dict.fromkeys(args.namespace)), args.interval, args.watch_timeout)
    try:
        metrics, server = metrics_from_args(args)  # /metrics, /healthz, /readyz on --metrics-port
    except OSError as exc:
        print(f"tandem collect: metrics port {args.metrics_port}: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_collector(config, api, settings=settings, out=args.out, stop=stop, metrics=metrics)

    try:
        asyncio.run(go())
    except Exception as exc:
        print(f"tandem collect: {describe(exc)}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.close()
    return 0
