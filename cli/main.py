"""The ``tandem`` command line (docs/contract.md section 7): one module per subcommand.

Each module of :data:`COMMANDS` owns its parser (``add_parser``, options shared through
:mod:`cli.options`) and its ``run(args) -> int``; the libraries it calls take typed arguments.
Every option is also an environment variable ``TANDEM_<OPTION>`` (``--sync-period`` is
``TANDEM_SYNC_PERIOD``); a flag on the command line wins.  Exit codes: 0 success, 1 a bad input
under ``--strict`` (or a failed run), 2 a usage error or a missing file.

Faust, the kubernetes client, aiokafka and matplotlib are imported only inside the functions that
use them, so ``tandem replay`` (or ``--help``) starts without loading them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import scaling
from cli import apply, audit, collect, publish, replay, report, simulate, topics, worker

__all__ = ["COMMANDS", "build_parser", "main"]

#: The subcommands, in the order ``tandem --help`` lists them.
COMMANDS = (replay, worker, publish, topics, apply, collect, audit, report, simulate)


def _version() -> str:
    try:
        return version("tandem")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tandem", description="Scale Kubernetes workloads horizontally and vertically in tandem."
    )
    parser.add_argument("--version", action="version", version=f"tandem {_version()} ({scaling.CORE} core)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
