"""The ``tandem`` command line (CONTRACT.md section 7).

Every option is also an environment variable ``TANDEM_<OPTION>`` (``--sync-period`` is
``TANDEM_SYNC_PERIOD``); a flag on the command line wins.  Exit codes: 0 success, 1 a bad input
under ``--strict`` (or a failed run), 2 a usage error or a missing file.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["main"]


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get("TANDEM_" + name.upper().replace("-", "_"), default)


def _env_list(name: str) -> list[str]:
    value = _env(name)
    return [p for p in value.split(os.pathsep) if p] if value else []


def _env_flag(name: str) -> bool:
    return str(_env(name, "")).lower() in ("1", "true", "yes", "on")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=_env("config"), help="settings YAML file (env TANDEM_CONFIG)")
    p.add_argument("--cluster", default=_env("cluster"), help="cluster of manifests without tandem.dev/cluster")
    p.add_argument("--sync-period", type=float, default=_env("sync_period"), help="tick period in seconds (default 15)")


def _cmd_replay(args: argparse.Namespace) -> int:
    from streams.inputs import UsageError, load_command_inputs
    from streams.replay import StrictError, replay

    try:
        settings, manifests = load_command_inputs(args.files, args.policy, args.config, args.cluster, args.sync_period)
    except UsageError as exc:
        print(f"tandem replay: {exc}", file=sys.stderr)
        return 2
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tandem", description="Scale Kubernetes workloads horizontally and vertically in tandem."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("replay", help="replay recorded streams through the decision core (no Kafka)")
    p.add_argument("files", nargs="+", help="JSON Lines files (.jsonl, .jsonl.gz, - for stdin)")
    p.add_argument("--policy", action="append", default=_env_list("policy"), help="policy manifest file (repeatable)")
    p.add_argument("--out", default=_env("out"), help="write the audit stream here instead of stdout")
    p.add_argument("--strict", action="store_true", default=_env_flag("strict"), help="a bad line is fatal (exit 1)")
    p.add_argument(
        "--include-recommendations",
        action="store_true",
        default=_env_flag("include_recommendations"),
        help="also write tandem's own hpa/vpa recommendation events",
    )
    _common(p)
    p.set_defaults(func=_cmd_replay)

    for name, module, help_ in (
        ("worker", "agents.worker", "run the Faust worker"),
        ("publish", "streams.publish", "write a recorded stream into the input topics"),
        ("topics", "streams.topics", "manage tandem's Kafka topics"),
        ("apply", "edge.applier", "apply decisions to one cluster"),
        ("collect", "edge.collector", "feed the input topics from one cluster"),
        ("audit", "analysis.audit", "filter and print the audit stream; 'audit explain KEY' tells its story"),
        ("report", "analysis.report", "write an HTML report (charts per workload) of a stream or an audit file"),
        ("simulate", "analysis.simulate", "compare policies on recorded demand in closed loop"),
    ):
        # No prefix chars: every argument, options first included, goes to the delegate untouched
        # (argparse's REMAINDER otherwise rejects a leading option: `tandem worker --broker B`).
        p = sub.add_parser(name, help=help_, add_help=False, prefix_chars="\x00")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=_delegate(module, name))
    return parser


def _delegate(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                print(f"tandem {name}: not available in this build", file=sys.stderr)
                return 2
            raise
        result: int = mod.main(args.rest)
        return result

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
