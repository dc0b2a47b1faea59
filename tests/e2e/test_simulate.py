"""``tandem simulate``: closed-loop policy comparison, checked by hand on a tiny stream."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from analysis.simulate import simulate
from cli.main import main as tandem
from scaling.settings import Settings

T0 = 1_762_250_400.0  # a multiple of 15 s
ROOT = Path(__file__).resolve().parents[2]
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def hvpa(weight: int, *, hpa: bool, vpa: bool) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"},
        },
        "spec": {
            "targetRef": {"kind": "Deployment", "name": "web"},
            "hpa": {
                "deploy": hpa,
                "scaleUp": {"stabilizationDuration": "1m"},
                "template": {
                    "spec": {
                        "minReplicas": 1,
                        "maxReplicas": 12,
                        "metrics": [
                            {
                                "type": "Resource",
                                "resource": {
                                    "name": "cpu",
                                    "target": {"type": "Utilization", "averageUtilization": 50},
                                },
                            }
                        ],
                    }
                },
            },
            "vpa": {"deploy": vpa},
            "weightBasedScalingIntervals": [{"vpaWeight": weight, "startReplicaCount": 0, "lastReplicaCount": 0}],
        },
    }


def tiny_stream(path: Path) -> Path:
    """2 replicas of 500m / 100Mi; a constant demand of 1.2 cores and 100 MiB, sampled 4 times."""
    events: list[dict[str, Any]] = [
        {
            "type": "workload",
            "ts": T0,
            "workload": WL,
            "replicas": 2,
            "containers": {
                "app": {"requests": {"cpu": "500m", "memory": "100Mi"}, "limits": {"cpu": "1", "memory": "200Mi"}}
            },
        },
    ]
    for i in range(4):
        events.append(
            {
                "type": "metric",
                "ts": T0 + 60 * i,
                "workload": WL,
                "samples": [
                    {"pod": f"web-{p}", "container": "app", "cpu": 0.6, "memory": 50 * 2**20} for p in range(2)
                ],
            }
        )
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def policy_file(tmp_path: Path, name: str, manifest: dict[str, Any]) -> str:
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(manifest))
    return str(p)


def run(tmp_path: Path, **policies: dict[str, Any]) -> dict[str, Any]:
    stream = tiny_stream(tmp_path / "s.jsonl")
    files = [policy_file(tmp_path, n, m) for n, m in policies.items()]
    return {o.policy: o for o in simulate([str(stream)], files, Settings(), 30.0, io.StringIO())}


def test_a_policy_that_never_acts_costs_its_requests_times_the_duration(tmp_path: Path) -> None:
    static = run(tmp_path, static=hvpa(0, hpa=False, vpa=False))["static"]
    # 3 intervals of 60 s at 2 replicas: 2 x 0.5 core x 180 s = 0.05 core-h; 2 x 100 MiB x 180 s
    assert static.cpu_core_hours == pytest.approx(0.05)
    assert static.memory_gib_hours == pytest.approx(2 * 100 / 1024 * 0.05)
    # 1.2 cores over 2 pods = 600m each, above the 500m request the whole time, below the 1-core limit
    assert static.hours_over_requests == pytest.approx(0.05)
    assert static.hours_over_limits == 0
    assert (static.decisions, static.replica_changes, static.rolling_updates) == (0, 0, 0)


def test_pure_horizontal_policy_follows_the_hpa_and_is_costed_piecewise(tmp_path: Path) -> None:
    h = run(tmp_path, horizontal=hvpa(0, hpa=True, vpa=False))["horizontal"]
    # T0: utilization floor(100 x 1200/1000) = 120 %, ratio 2.4, ceil(2.4 x 2) = 5, legacy limit
    #     max(2 x 2, 4) = 4 -> 2 -> 4, applied at T0+30.
    # T0+60: 4 pods x 300m = 60 %, ratio 1.2, ceil(4.8) = 5 -> 4 -> 5 (1m stabilization passed), at T0+90.
    # T0+120: 5 pods x 240m = 48 %, ratio 0.96, inside the 0.1 tolerance: stays 5.
    assert [(t - T0, n) for t, n, _ in h.timeline] == [(30.0, 4), (90.0, 5)]
    # 0.5 core x (2 x 30 s + 4 x 60 s + 5 x 90 s) = 0.5 x 750 s
    assert h.cpu_core_hours == pytest.approx(0.5 * 750 / 3600)
    assert h.hours_over_requests == pytest.approx(30 / 3600)  # only the first 30 s at 600m per pod
    assert (h.decisions, h.replica_changes, h.rolling_updates) == (2, 2, 0)


def test_pure_vertical_policy_never_changes_replicas(tmp_path: Path) -> None:
    v = run(tmp_path, vertical=hvpa(100, hpa=False, vpa=True))["vertical"]
    assert v.replica_changes == 0
    assert v.rolling_updates >= 1  # VPA's 250 MB pod minimum alone raises the 100Mi request
    # the cost integrates the simulated requests over time, exactly as the timeline says
    expected = 0.0
    cursor, mem = T0, 100 * 2**20
    for due, _, requests in v.timeline:
        expected += 2 * mem / 2**30 * (due - cursor) / 3600
        cursor, mem = due, requests["app"]["memory"] / 1000
    expected += 2 * mem / 2**30 * (T0 + 180 - cursor) / 3600
    assert v.memory_gib_hours == pytest.approx(expected)


def test_the_bundled_example_gives_the_same_bytes_on_one_process_or_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(ROOT / "examples" / "stream.jsonl.gz")]
    for name in ("horizontal", "vertical", "hvpa"):
        args += ["--policy", str(ROOT / "examples" / "simulate" / f"{name}.yaml")]
    outs, tables = [], []
    for jobs in (1, 2):
        report, out = tmp_path / f"rep{jobs}", tmp_path / f"o{jobs}.json"
        assert tandem(["simulate", *args, "--jobs", str(jobs), "--json", str(out), "--report", str(report)]) == 0
        outs.append(out.read_bytes())
        tables.append(capsys.readouterr().out)
        pages = sorted(p.relative_to(report) for p in report.rglob("*") if p.is_file())
        outs.append(b"".join(str(p).encode() + (report / p).read_bytes() for p in pages))
    assert outs[0] == outs[2] and outs[1] == outs[3] and tables[0] == tables[1]
    rows = json.loads(outs[0])
    cost = {}
    for r in rows:
        cost[r["policy"]] = cost.get(r["policy"], 0.0) + r["cpu_core_hours"]
    ranking = sorted(cost, key=cost.get)
    assert ranking[-1] == "vertical"  # requests sized for the daily peak all day cost the most CPU
    assert tables[0].splitlines()[0].split()[:4] == ["policy", "workload", "CPU", "core-h"]


def test_progress_bar_of_the_runs_on_a_terminal_and_not_in_a_pipe(tmp_path: Path) -> None:
    import os
    import pty
    import shutil
    import subprocess
    import sys

    stream = tiny_stream(tmp_path / "s.jsonl")
    files = [policy_file(tmp_path, n, hvpa(0, hpa=True, vpa=False)) for n in ("a", "b")]
    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    args = [exe, "simulate", str(stream), "--policy", files[0], "--policy", files[1], "--jobs", "2"]
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
    assert proc.returncode == 0
    assert "\rsimulating [" in b"".join(chunks).decode()
    piped = subprocess.run(args, capture_output=True, timeout=120)
    assert piped.returncode == 0 and b"\r" not in piped.stderr


def test_html_report_puts_each_policys_plots_side_by_side_and_replays_its_decisions(tmp_path: Path) -> None:
    stream = tiny_stream(tmp_path / "s.jsonl")
    files = [
        policy_file(tmp_path, "horizontal", hvpa(0, hpa=True, vpa=False)),
        policy_file(tmp_path, "static", hvpa(0, hpa=False, vpa=False)),
    ]
    args = [str(stream), "--report", str(tmp_path / "rep"), "--json", str(tmp_path / "o.json")]
    for f in files:
        args += ["--policy", f]
    assert tandem(["simulate", *args]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert 'src="horizontal/index.html#c1/shop/Deployment/web"' in page
    assert 'src="static/index.html#c1/shop/Deployment/web"' in page
    rows = {r["policy"]: r for r in json.loads((tmp_path / "o.json").read_text())}
    for name in ("horizontal", "static"):
        audit = (tmp_path / "rep" / name / "audit.jsonl").read_bytes().splitlines()
        decisions = [line for line in audit if b'"dev.tandem.decision.v1"' in line]
        # the report replays the simulated stream through the same core: the same decisions
        assert len(decisions) == rows[name]["decisions"]
    assert rows["horizontal"]["decisions"] == 2


def test_the_runs_see_the_heap_frozen_and_simulate_thaws_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modules and demands, in memory before the runs, are out of the collector's full
    collections while the runs go on (gc.freeze), and given back to it after."""
    import gc

    import analysis.simulate as sim

    seen: list[int] = []
    run_one = sim.simulate_one

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_freeze_count())
        return run_one(*args, **kwargs)

    monkeypatch.setattr(sim, "simulate_one", spy)
    before = gc.get_freeze_count()
    run(tmp_path, a=hvpa(0, hpa=True, vpa=False), b=hvpa(100, hpa=False, vpa=True))
    assert len(seen) == 2 and all(n > before for n in seen)
    assert gc.get_freeze_count() == before


def test_simulate_leaves_a_heap_frozen_by_its_caller_as_it_was(tmp_path: Path) -> None:
    import gc

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        run(tmp_path, a=hvpa(0, hpa=True, vpa=False))
        # not thawed by simulate (frozen objects freed meanwhile may leave the count a little lower)
        assert frozen - 100 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def _other_workload_lines() -> list[bytes]:
    other = dict(WL, name="db")
    spec = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {}}
    return [
        orjson.dumps({"type": "workload", "ts": T0, "workload": other, "replicas": 1, "containers": {"db": spec}}),
        orjson.dumps({"type": "metric", "ts": T0, "workload": other, "samples": [{"pod": "db-0", "cpu": 0.5}]}),
        orjson.dumps(
            {"type": "metric", "ts": T0, "workload": other, "samples": [{"pod": "db-0", "container": "db", "cpu": 2.0}]}
        ),
    ]


def test_a_workload_no_policy_names_is_checked_line_by_line_but_no_demand_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import analysis.simulate as sim

    stream = tiny_stream(tmp_path / "s.jsonl")
    stream.write_bytes(stream.read_bytes() + b"\n".join(_other_workload_lines()) + b"\n")
    kept: list[list[str]] = []
    demands_of = sim._demands
    monkeypatch.setattr(sim, "_demands", lambda parts, *rest: kept.append(sorted(d := demands_of(parts, *rest))) or d)
    err = io.StringIO()
    files = [policy_file(tmp_path, "h", hvpa(0, hpa=True, vpa=False))]
    outcomes = simulate([str(stream)], files, Settings(), 30.0, err)
    assert kept == [["c1/shop/Deployment/web"]]  # db's workload and metric lines: not kept
    assert [o.workload for o in outcomes] == ["c1/shop/Deployment/web"]
    # db's sample without a container is refused as tandem replay refuses it
    assert err.getvalue() == f"{stream}:7: field 'samples[0].container': required string is missing\n"


def test_a_refused_policy_file_is_still_refused_after_the_streams_messages(tmp_path: Path) -> None:
    stream = tiny_stream(tmp_path / "s.jsonl")
    stream.write_bytes(stream.read_bytes() + _other_workload_lines()[1] + b"\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- 1\n")
    err = io.StringIO()
    files = [policy_file(tmp_path, "h", hvpa(0, hpa=True, vpa=False)), str(bad)]
    with pytest.raises(ValueError, match="document 1 is not a manifest object"):
        simulate([str(stream)], files, Settings(), 30.0, err)
    assert err.getvalue() == f"{stream}:6: field 'samples[0].container': required string is missing\n"
