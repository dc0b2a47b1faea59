"""``tandem replay`` as a user runs it: the installed console script, bad input, exit codes."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.replaying import ev, replay
from tests.vectors.test_hvpa_vectors import T0, fixture_a, hpa, vpa, workload

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"


def tandem(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    return subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=120)


def good_events() -> list[dict]:
    return [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G")]


def test_readme_first_command_replays_the_bundled_example() -> None:
    result = tandem("replay", str(EXAMPLE), "--policy", str(POLICIES))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.splitlines()
    events = [orjson.loads(line) for line in lines]
    assert {e["subject"] for e in events} == {
        "eu-1/shop/Deployment/web",
        "eu-1/shop/Deployment/api",
        "us-2/media/Deployment/encoder",
    }
    decisions = [e for e in events if e["type"] == "dev.tandem.decision.v1"]
    assert len(decisions) > 50
    summary = result.stderr.decode().strip().splitlines()[-1]
    assert summary.startswith("tandem replay: read ")
    assert f"{len(decisions)} decision(s)" in summary
    assert "rejected 0" in summary


def test_replay_reads_gzip_plain_and_stdin_alike(tmp_path: Path) -> None:
    data = b"".join(orjson.dumps(e) + b"\n" for e in good_events())
    (tmp_path / "s.jsonl").write_bytes(data)
    (tmp_path / "s.jsonl.gz").write_bytes(gzip.compress(data))
    policy = tmp_path / "p.yaml"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    plain = tandem("replay", str(tmp_path / "s.jsonl"), "--policy", str(policy))
    gz = tandem("replay", str(tmp_path / "s.jsonl.gz"), "--policy", str(policy))
    stdin = tandem("replay", "-", "--policy", str(policy), stdin=data)
    assert plain.returncode == gz.returncode == stdin.returncode == 0
    assert plain.stdout == gz.stdout == stdin.stdout
    assert len(plain.stdout.splitlines()) == 1


BAD_LINES = [
    (b'{"type": "workload", "ts": 1762250401, "workload": {"cluster": "c1"', "not valid JSON"),
    (b'{"type": "workload", "ts": "yesterday", "workload": {}}', "field 'ts': expected a number"),
    (b'{"type": "gauge", "ts": 1762250401}', "field 'type': unknown event type"),
    (
        orjson.dumps(ev("workload", T0 + 1, replicas="two", containers={})),
        "field 'replicas': expected an integer",
    ),
    (
        orjson.dumps(ev("vpa", T0 + 1, containers={"deployment": {"target": {"cpu": "-5"}}})),
        "field 'containers.deployment.target.cpu': '-5' is negative",
    ),
    (
        orjson.dumps(ev("vpa", T0 + 1, containers={"deployment": {"target": {"memory": "2Pi"}}})),
        "field 'containers.deployment.target.memory': 2Pi is absurd for memory",
    ),
    (
        orjson.dumps(ev("metric", T0 + 1, samples=[{"pod": "p", "container": "c", "cpu": "lots"}])),
        "field 'samples[0].cpu': 'lots' is not a Kubernetes quantity",
    ),
    (
        orjson.dumps(
            ev(
                "policy",
                T0 + 1,
                policy={
                    **fixture_a(40),
                    "spec": {**fixture_a(40)["spec"], "vpa": {"scaleUp": {"stabilizationDuration": "soon"}}},
                },
            )
        ),
        "field 'policy.spec.vpa.scaleUp.stabilizationDuration': 'soon' is not a duration",
    ),
    (
        orjson.dumps(
            ev(
                "policy",
                T0 + 1,
                policy={
                    **fixture_a(40),
                    "spec": {**fixture_a(40)["spec"], "weightBasedScalingIntervals": [{"vpaWeight": 140}]},
                },
            )
        ),
        "field 'policy.spec.weightBasedScalingIntervals[0].vpaWeight': 140 is outside 0..100",
    ),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES, ids=[m.split(":")[0][:40] for _, m in BAD_LINES])
def test_a_bad_line_is_reported_with_file_line_and_field_and_the_replay_goes_on(
    tmp_path: Path, line: bytes, message: str
) -> None:
    good = [orjson.dumps(e) for e in good_events()]
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b"\n".join([good[0], line, *good[1:]]) + b"\n")
    policy = tmp_path / "p.yaml"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    result = tandem("replay", str(stream), "--policy", str(policy))
    assert result.returncode == 0
    err = result.stderr.decode().splitlines()
    assert err[0].startswith(f"{stream}:2: ")
    assert message in err[0], err[0]
    assert "rejected 1;" in err[-1]
    assert len(result.stdout.splitlines()) == 1  # the good events still decide


def test_strict_makes_a_bad_line_fatal(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b'{"type": "nope"}\n')
    result = tandem("replay", str(stream), "--strict")
    assert result.returncode == 1
    assert result.stderr.decode().startswith(f"{stream}:1: field 'type': unknown event type")


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = tandem("replay", str(tmp_path / "absent.jsonl"))
    assert result.returncode == 2
    assert "no such file" in result.stderr.decode()


def test_invalid_policy_is_refused_naming_document_and_field_and_strict_exits_1(tmp_path: Path) -> None:
    manifest = fixture_a(40)
    manifest["spec"]["maintenanceTimeWindow"] = {"begin": "25:00", "end": "010000+0000"}
    policy = tmp_path / "p.yaml"
    policy.write_bytes(orjson.dumps(manifest))
    stream = tmp_path / "s.jsonl"
    stream.write_bytes(b"")
    result = tandem("replay", str(stream), "--policy", str(policy))
    assert result.returncode == 0
    assert (
        f"{policy}: document 1 (Hvpa shop/web): spec.maintenanceTimeWindow.begin: '25:00' is not HHMMSS+HHMM"
        in result.stderr.decode()
    )
    assert tandem("replay", str(stream), "--policy", str(policy), "--strict").returncode == 1


def test_every_option_is_also_an_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_SYNC_PERIOD", "60")
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, True)]
    out, _ = replay(tmp_path, events, [fixture_a(40)])
    assert out[0]["data"]["tick"] == T0 + 60


def test_bundled_example_is_what_its_generator_writes(tmp_path: Path) -> None:
    # The example is recorded in closed loop through the core: when decision rules change, the
    # generator must be re-run (python examples/generate.py) so the file stays a true recording.
    out = tmp_path / "stream.jsonl.gz"
    subprocess.run([sys.executable, str(ROOT / "examples" / "generate.py"), "--out", str(out)], check=True, timeout=300)
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(EXAMPLE.read_bytes())


def test_progress_bar_shows_on_a_terminal_and_not_in_a_pipe(tmp_path: Path) -> None:
    import os
    import pty

    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    args = [exe, "replay", str(EXAMPLE), "--policy", str(POLICIES), "--out", str(tmp_path / "a.jsonl")]
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(args, stderr=secondary, stdout=subprocess.DEVNULL, timeout=120)
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(primary)
    on_terminal = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "\rreading" in on_terminal
    assert "tandem replay: read " in on_terminal  # the summary follows the cleared bar
    in_pipe = tandem("replay", str(EXAMPLE), "--policy", str(POLICIES), "--out", str(tmp_path / "b.jsonl"))
    assert "\r" not in in_pipe.stderr.decode()
