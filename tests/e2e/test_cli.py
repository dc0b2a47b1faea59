"""The ``tandem`` command itself: one parser per subcommand, every option explained, light to start."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import scaling
from cli import audit
from cli.main import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_command_module_is_registered_once_in_order() -> None:
    names = [c.NAME for c in COMMANDS]
    assert names == [
        "replay",
        "worker",
        "publish",
        "topics",
        "apply",
        "collect",
        "audit",
        "report",
        "simulate",
        "import",
    ]
    assert list(_subparsers(build_parser())) == names


def test_every_option_of_every_subcommand_has_a_help_text() -> None:
    parsers = _subparsers(build_parser())
    # `tandem audit` hands its arguments to its own two parsers (an optional FILE and `explain KEY`).
    parsers["audit"] = audit.list_parser()
    parsers["audit explain"] = audit.explain_parser()
    missing = [
        f"tandem {name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in parsers.items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"tandem {version('tandem')} ({scaling.CORE} core)\n"


def test_python_dash_m_cli_runs_the_command_without_loading_the_heavy_clients() -> None:
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['tandem', '--version']\n"
        "try:\n"
        "    runpy.run_module('cli', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    heavy = ('faust', 'kubernetes', 'aiokafka', 'matplotlib')\n"
        "    print(exc.code, sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout == f"tandem {version('tandem')} ({scaling.CORE} core)\n0 []\n"


def test_a_bad_variable_of_one_command_does_not_break_another(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("TANDEM_METRICS_PORT", "TANDEM_INTERVAL", "TANDEM_MAX_ATTEMPTS"):
        monkeypatch.setenv(name, "abc")
    assert main(["replay", str(EXAMPLE), "--policy", str(POLICIES), "--out", str(tmp_path / "a.jsonl")]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["worker"])
    assert done.value.code == 2
    assert (
        capsys.readouterr().err.splitlines()[-1]
        == "tandem worker: error: argument --metrics-port: invalid int value: 'abc' "
        "(from the environment variable TANDEM_METRICS_PORT; fix or unset it)"
    )


def test_an_unreachable_broker_is_named_once_on_stderr() -> None:
    # Port 1 on the loopback refuses at once; aiokafka raises KafkaConnectionError, whose own
    # __str__ already starts with its class name (the doubled "KafkaConnectionError: KafkaConnectionError:").
    done = subprocess.run(
        [sys.executable, "-m", "cli", "topics", "list", "--broker", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "tandem topics: KafkaConnectionError: Unable to bootstrap from [('127.0.0.1', 1, <AddressFamily.AF_INET: 2>)]"
    )
