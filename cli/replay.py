"""``tandem replay``: recorded streams through the decision core, embedded, no Kafka (:mod:`streams.replay`)."""

from __future__ import annotations

import argparse
import sys

from cli.options import add_core_options, add_files, add_policy, add_strict, env, flag
from streams.inputs import UsageError, WatchedErr, check_output_file, load_command_inputs
from streams.replay import StrictError, replay, summary

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
    refused: list[str] = []
    try:
        if args.out:
            check_output_file(args.out)  # before the run, not after it
        settings, manifests = load_command_inputs(
            args.files, args.policy, args.config, args.cluster, args.sync_period, strict=args.strict, refused=refused
        )
    except UsageError as exc:
        print(f"tandem replay: {exc}", file=sys.stderr)
        return exc.status
    try:
        out = open(args.out, "wb") if args.out and args.out != "-" else sys.stdout.buffer  # noqa: SIM115
    except OSError as exc:
        print(f"tandem replay: --out {args.out}: cannot be written ({exc.strerror or exc})", file=sys.stderr)
        return 2
    err = WatchedErr(sys.stderr)
    try:
        try:
            stats = replay(
                args.files,
                out,
                settings=settings,
                policies=manifests,
                strict=args.strict,
                include_recommendations=args.include_recommendations,
                refused_policies=refused,
                err=err,
            )
        except StrictError as exc:
            print(str(exc), file=sys.stderr)
            return 1
    finally:
        if out is not sys.stdout.buffer:
            out.close()
        else:
            out.flush()
    print(summary(stats), file=sys.stderr)
    if err.broken:
        # The run went on with what could be read, but a file was lost from its break on.
        print(
            f"tandem replay: {err.broken} file(s) could not be read to the end (see above); "
            "the audit stream holds what came before the break",
            file=sys.stderr,
        )
        return 1
    return 0
