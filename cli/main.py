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
import os
import re
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

import scaling
from cli import apply, audit, collect, importer, publish, replay, report, simulate, topics, worker

__all__ = ["COMMANDS", "build_parser", "main"]

#: The subcommands, in the order ``tandem --help`` lists them.
COMMANDS = (replay, worker, publish, topics, apply, collect, audit, report, simulate, importer)


def _version() -> str:
    try:
        return version("tandem")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


_ARGUMENT = re.compile(r"argument (?:-\w/)?--(?P<option>[\w-]+)")


class _Parser(argparse.ArgumentParser):
    """argparse, naming the environment variable when a bad value came from one.

    An option's default is its ``TANDEM_<OPTION>`` variable (:func:`streams.settings.env`) and
    argparse checks a string default as if typed, so ``TANDEM_SYNC_PERIOD=abc`` was refused as
    ``argument --sync-period: invalid float value: 'abc'``: about an option nobody typed.
    Subcommand parsers are made of this class too (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        match = _ARGUMENT.match(message)
        if match:
            name = "TANDEM_" + match["option"].upper().replace("-", "_")
            value = os.environ.get(name)
            if value and repr(value) in message:
                message = f"{message} (from the environment variable {name}; fix or unset it)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tandem", description="Scale Kubernetes workloads horizontally and vertically in tandem.")
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
