"""``tandem replay``: recorded streams through the decision core, embedded, no Kafka (:mod:`streams.replay`)."""

from __future__ import annotations

import argparse
import sys

from cli.options import add_core_options, add_files, add_policy, add_strict, env, flag
from streams.inputs import UsageError, load_command_inputs
from streams.replay import StrictError, replay

NAME = "replay"
HELP = "replay recorded streams through the decision core (no Kafka)"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    add_files(p)
    add_policy(p)
    p.add_argument("--out", default=env("out"), help="write the audit stream here instead of stdout")
    add_strict(p)
    p.add_argument(
        "--include-recommendations",
        action="store_true",
        default=flag("include_recommendations"),
        help="also write tandem's own hpa/vpa recommendation events",
    )
    add_core_options(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    try:
        settings, manifests = load_command_inputs(
            args.files, args.policy, args.config, args.cluster, args.sync_period, strict=args.strict
        )
    except UsageError as exc:
        print(f"tandem replay: {exc}", file=sys.stderr)
        return exc.status
    out = open(args.out, "wb") if args.out and args.out != "-" else sys.stdout.buffer  # noqa: SIM115
    try:
        try:
            stats = replay(
                args.files,
                out,
                settings=settings,
                policies=manifests,
                strict=args.strict,
                include_recommendations=args.include_recommendations,
            )
        except StrictError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    finally:
        if out is not sys.stdout.buffer:
            out.close()
        else:
            out.flush()
    print(stats.summary(), file=sys.stderr)
    return 0
