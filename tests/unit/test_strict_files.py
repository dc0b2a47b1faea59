"""Bad files at every door: one clear line and an exit status, never a traceback (issue #12).

Each command is run in-process through its ``main`` (the same code the console script runs), so
the exit status and the exact stderr lines are pinned without a subprocess per case.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from analysis import audit, simulate
from cli.main import main as tandem
from streams.inputs import BrokenStream, UsageError, check_stream, iter_lines, load_core_settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def events(n: int) -> bytes:
    return b"".join(
        orjson.dumps({"type": "hpa", "ts": 1_762_250_400.0 + i, "workload": WL, "desired_replicas": 2}) + b"\n"
        for i in range(n)
    )


@pytest.fixture
def truncated(tmp_path: Path) -> Path:
    """A gzip stream cut in the middle: its first lines are readable, the rest is lost."""
    data = gzip.compress(events(20_000), mtime=0)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    return path


def run(capsys: pytest.CaptureFixture[str], command: Callable[[list[str]], int], *argv: str) -> tuple[int, list[str]]:
    code = command(list(argv))
    return code, capsys.readouterr().err.splitlines()


def test_iter_lines_yields_what_a_truncated_gzip_holds_then_raises_for_the_break(truncated: Path) -> None:
    got: list[int] = []
    size = 0
    with pytest.raises(BrokenStream) as caught:
        for n, line in iter_lines(str(truncated)):
            got.append(n)
            size += len(line) + 1  # its newline
    assert got == list(range(1, len(got) + 1)) and 0 < len(got) < 20_000
    assert caught.value.lineno == len(got) + 1
    assert str(caught.value) == (
        f"the gzip data ends early (a truncated file?); {len(got)} line(s) ({size} bytes) were read before it, "
        "nothing from here on could be read"
    )


@pytest.mark.parametrize("cmd", ["replay", "report", "simulate"])
def test_truncated_gzip_is_one_bad_line_the_run_goes_on_and_exits_1(
    cmd: str, truncated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The lines before the break stand (the run goes on with them), but a file lost from its
    # break on is an error exit whatever --strict says, and the last line says so.
    extra = {
        "replay": ["--out", str(tmp_path / "a.jsonl")],
        "report": ["--out", str(tmp_path / "r"), "--png", "none"],
        "simulate": ["--policy", str(POLICIES)],
    }[cmd]
    code, err = run(capsys, tandem, cmd, str(truncated), *extra)
    assert code == 1
    broken = [line for line in err if "gzip data" in line]
    assert len(broken) == 1
    assert broken[0].startswith(f"{truncated}:")
    assert re.fullmatch(
        r".*: the gzip data ends early \(a truncated file\?\); \d+ line\(s\) \(\d+ bytes\) were read before it, "
        r"nothing from here on could be read",
        broken[0],
    )
    what = {"replay": "the audit stream", "report": "the report shows", "simulate": "the table covers"}[cmd]
    assert err[-1].startswith(f"tandem {cmd}: 1 file(s) could not be read to the end (see above); {what}")
    assert not any("Traceback" in line for line in err)


@pytest.mark.parametrize("cmd", ["replay", "report"])
def test_truncated_gzip_under_strict_exits_1(
    cmd: str, truncated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, tandem, cmd, str(truncated), "--strict", "--out", str(tmp_path / "o"))
    assert code == 1
    assert len(err) == 1 and "the gzip data ends early" in err[0]


def bad_files(tmp_path: Path) -> list[tuple[Path, str]]:
    head = tmp_path / "head.jsonl.gz"
    head.write_bytes(gzip.compress(events(10))[:25])  # breaks before its first line
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    corrupt = tmp_path / "bad.jsonl.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 40)
    return [
        (tmp_path, "is a directory, not a file"),
        (tmp_path / "absent.jsonl", "no such file"),
        (head, "the gzip data ends early (a truncated file?)"),
        (binary, "binary data, not JSON Lines (a NUL byte near the start)"),
        (corrupt, "corrupt gzip data"),
    ]


@pytest.mark.parametrize("case", range(5), ids=["directory", "missing", "gzip-head", "binary", "corrupt-gzip"])
@pytest.mark.parametrize("cmd", ["replay", "report", "simulate", "audit"])
def test_an_unreadable_stream_is_one_line_and_exit_2(
    cmd: str, case: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, why = bad_files(tmp_path)[case]
    extra = {"simulate": ["--policy", str(POLICIES)], "report": ["--out", str(tmp_path / "r")]}.get(cmd, [])
    code, err = run(capsys, tandem, cmd, str(path), *extra)
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith(f"tandem {cmd}: {path}: {why}"), err[0]


def test_gzip_is_known_by_its_magic_bytes_not_its_name(tmp_path: Path) -> None:
    data = events(3)
    unnamed = tmp_path / "s.jsonl"
    unnamed.write_bytes(gzip.compress(data))
    misnamed = tmp_path / "t.jsonl.gz"
    misnamed.write_bytes(data)
    assert [line for _, line in iter_lines(str(unnamed))] == data.splitlines()
    assert [line for _, line in iter_lines(str(misnamed))] == data.splitlines()


def test_a_pipe_is_not_looked_into_before_it_is_read(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    check_stream(str(fifo))  # would block forever if it read the pipe


def test_no_policy_at_all_warns_that_no_decision_can_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--out", str(tmp_path / "a.jsonl"))
    assert code == 0
    assert err[0] == (
        "tandem replay: warning: no decision can be made: none of the 3 workload(s) has a policy "
        "(eu-1/shop/Deployment/api, eu-1/shop/Deployment/web, us-2/media/Deployment/encoder); pass one with "
        "--policy FILE (Hvpa, Tortoise or CustomHpa manifests, see examples/policies.yaml) or put policy events "
        "in the stream"
    )


def test_policies_for_other_workloads_warn_with_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(events(2))
    code, err = run(capsys, tandem, "replay", str(stream), "--policy", str(POLICIES), "--out", str(tmp_path / "a"))
    assert code == 0
    assert err[0] == (
        "tandem replay: warning: no decision can be made: the --policy manifests target eu-1/shop/Deployment/api, "
        "eu-1/shop/Deployment/web, us-2/media/Deployment/encoder, none of which is in the stream (its workloads: "
        "c1/shop/Deployment/web); check their namespace, target and cluster (annotation tandem.dev/cluster, or "
        "--cluster)"
    )


def test_report_warns_too_when_no_workload_has_a_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(events(2))
    code, err = run(capsys, tandem, "report", str(stream), "--out", str(tmp_path / "r"), "--png", "none")
    assert code == 0
    assert err[0].startswith("tandem report: warning: no decision can be made: none of the 1 workload(s)")


def test_no_warning_when_a_policy_is_in_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--policy", str(POLICIES), "--out", str(tmp_path / "a"))
    assert code == 0
    assert len(err) == 1 and err[0].startswith("tandem replay: read 23491 events")


@pytest.mark.parametrize("content", [b"", b"---\n", b"# nothing here\n"])
def test_an_empty_policy_file_exits_2_saying_so(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_bytes(content)
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--policy", str(policy))
    assert code == 2
    assert err == [f"tandem replay: {policy}: no policy manifest in this file (expected Hvpa, Tortoise or CustomHpa)"]


def test_audit_on_an_input_stream_is_one_line_saying_how_to_make_an_audit_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["explain", "eu-1/shop/Deployment/web", str(EXAMPLE)], [str(EXAMPLE)]):
        code, err = run(capsys, tandem, "audit", *argv)
        prog = "tandem audit explain" if argv[0] == "explain" else "tandem audit"
        assert code == 2
        assert err == [
            f"{prog}: {EXAMPLE}: no CloudEvent in 23491 line(s), so not an audit file; make one with "
            "`tandem replay STREAM --policy FILE --out audit.jsonl` (or read the audit topic with --broker)"
        ]


def test_audit_still_reports_bad_lines_before_the_first_cloudevent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"specversion": "1.0", "type": "dev.tandem.decision.v1", "id": "x", "time": "2025-11-04T10:00:00Z"}
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"not json\n" + orjson.dumps(good) + b"\n")
    err = io.StringIO()
    assert [e.event["id"] for e in audit.read_file(str(path), err)] == ["x"]
    assert err.getvalue().startswith(f"{path}:1: not valid JSON")


def test_settings_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("sync_period: -5\n")
    with pytest.raises(ValueError) as caught:
        load_core_settings(str(config), None, None)
    assert str(caught.value) == f"{config}: field 'sync_period': expected a number of seconds > 0, got -5"
    config.write_text("sync_perod: 30\n")
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--config", str(config))
    assert code == 2
    assert err == [
        f"tandem replay: {config}: field 'sync_perod': unknown setting (did you mean sync_period?); expected one of "
        "sync_period, cluster, hpa, vpa, tortoise"
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("clustr: eu-1\n", "field 'clustr': unknown setting (did you mean cluster?); expected one of "
         "sync_period, cluster, hpa, vpa, tortoise"),
        ("paint: blue\n", "field 'paint': unknown setting; expected one of sync_period, cluster, hpa, vpa, tortoise"),
        # hpa: upstream's flag spelling gets a flag back; the short names get the short name.
        ("hpa:\n  horizontal-pod-autoscaler-tolerence: 0.2\n",
         "field 'hpa.horizontal-pod-autoscaler-tolerence': unknown setting "
         "(did you mean horizontal-pod-autoscaler-tolerance?)"),
        ("hpa:\n  downscaleStabilisation: 5m\n",
         "field 'hpa.downscaleStabilisation': unknown setting (did you mean downscale_stabilization?)"),
        ("hpa:\n  horizontal-pod-autoscaler-upscale-delay: 3m\n",
         "field 'hpa.horizontal-pod-autoscaler-upscale-delay': unknown setting"),  # removed upstream: no guess
        ("vpa:\n  target-cpu-percentil: 0.9\n",
         "field 'vpa.target-cpu-percentil': unknown VPA recommender setting (did you mean target-cpu-percentile?)"),
        ("vpa:\n  targetCPUPercentil: 0.9\n",
         "field 'vpa.targetCPUPercentil': unknown VPA recommender setting (did you mean target_cpu_percentile?)"),
        ("tortoise:\n  TimeZon: UTC\n",
         "field 'tortoise.TimeZon': unknown Tortoise setting (did you mean TimeZone?)"),
    ],
)  # fmt: skip
def test_an_unknown_setting_names_the_closest_known_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, why: str
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text(content)
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--config", str(config))
    assert code == 2
    assert err == [f"tandem replay: {config}: {why}"]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"a: [1\n", "not valid YAML: line 2 column 1: expected ',' or ']', but got '<stream end>'"),
        (b"\xff\xfe\x00", "not UTF-8 text (byte 0: invalid start byte); is it a binary file?"),
        (b"- 1\n- 2\n", "expected one mapping of settings"),
    ],
)
def test_an_unusable_settings_file_is_one_line_naming_it(
    content: bytes, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "settings.yaml"
    config.write_bytes(content)
    code, err = run(capsys, tandem, "replay", str(EXAMPLE), "--config", str(config))
    assert code == 2
    assert err == [f"tandem replay: {config}: {why}"]


def test_a_bad_option_is_blamed_on_the_option_not_the_file(tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("cluster: eu-1\n")
    with pytest.raises(ValueError) as caught:
        load_core_settings(str(config), None, -1)
    assert str(caught.value) == "--sync-period: expected a number of seconds > 0, got -1.0"


def test_a_directory_as_settings_or_policy_is_named_as_such(tmp_path: Path) -> None:
    from streams.inputs import load_command_inputs

    with pytest.raises(UsageError) as caught:
        load_command_inputs([str(EXAMPLE)], [str(tmp_path)], None, None, None)
    assert str(caught.value) == f"{tmp_path}: is a directory, not a file"
    with pytest.raises(UsageError) as caught:
        load_command_inputs([str(EXAMPLE)], [], str(tmp_path), None, None)
    assert str(caught.value) == f"{tmp_path}: is a directory, not a file"


def test_simulate_reads_truncated_input_like_replay(truncated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = io.StringIO()
    from scaling.settings import Settings

    simulate.simulate([str(truncated)], [], Settings(), 30.0, err)
    assert err.getvalue().count("the gzip data ends early") == 1
