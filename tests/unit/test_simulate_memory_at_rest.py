"""``tandem simulate --memory-at-rest``: every simulated pod holds its own memory at rest and shares
the rest of the recorded memory demand, in tandem's closed loop and in the upstream arms."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from analysis.simulate import simulate
from analysis.upstream import is_upstream, parse_upstream
from cli.main import main as tandem
from scaling.settings import Settings
from streams.inputs import load_manifests

MI = 2**20
T0 = 1_762_250_400.0
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
META = {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}}

#: tandem's Hvpa held at 4 replicas, never resizing: what the simulated pods use, unchanged.
STATIC_HVPA: dict[str, Any] = {
    "apiVersion": "autoscaling.k8s.io/v1alpha1",
    "kind": "Hvpa",
    "metadata": META,
    "spec": {
        "targetRef": {"kind": "Deployment", "name": "web"},
        "hpa": {"deploy": False, "template": {"spec": {"minReplicas": 4, "maxReplicas": 4}}},
        "vpa": {"deploy": False},
        "weightBasedScalingIntervals": [{"vpaWeight": 0, "startReplicaCount": 0, "lastReplicaCount": 0}],
    },
}
#: An upstream HPA on CPU held at 4 replicas.
STATIC_HPA: dict[str, Any] = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": META,
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "maxReplicas": 4,
        "minReplicas": 4,
    },
}
#: An upstream VPA (Auto) on memory only.
MEMORY_VPA: dict[str, Any] = {
    "apiVersion": "autoscaling.k8s.io/v1",
    "kind": "VerticalPodAutoscaler",
    "metadata": META,
    "spec": {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "updatePolicy": {"updateMode": "Auto"},
        "resourcePolicy": {"containerPolicies": [{"containerName": "*", "controlledResources": ["memory"]}]},
    },
}


def stream(
    path: Path, memory: dict[str, str], pods: list[dict[str, Any]] | None = None, replicas: int = 4, samples: int = 3
) -> str:
    """``replicas`` of 500m CPU (limit 1) and ``memory`` requests/limits; ``samples`` a minute apart of
    ``pods`` (default: one recorded pod, as the converted traces write it, with 0.4 core and 356Mi)."""
    limits = {"cpu": "1", **({"memory": memory["limit"]} if "limit" in memory else {})}
    events: list[dict[str, Any]] = [
        {
            "type": "workload",
            "ts": T0,
            "workload": WL,
            "replicas": replicas,
            "containers": {"web": {"requests": {"cpu": "500m", "memory": memory["request"]}, "limits": limits}},
        }
    ]
    recorded = pods or [{"pod": "trace", "container": "web", "cpu": 0.4, "memory": 356 * MI}]
    events += [{"type": "metric", "ts": T0 + 60 * i, "workload": WL, "samples": recorded} for i in range(samples)]
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return str(path)


def policy(tmp_path: Path, name: str, *docs: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def run(
    path: str, policies: list[str], memory_at_rest: float
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The outcomes (per policy file name) and the simulated streams of one ``simulate``."""
    recordings: dict[str, list[dict[str, Any]]] = {}
    docs = {p: load_manifests(p) for p in policies}
    upstream = {p: parse_upstream(d, "c1") for p, d in docs.items() if is_upstream(d[0])}
    outcomes = simulate(
        [path],
        policies,
        Settings(cluster="c1"),
        30.0,
        io.StringIO(),
        recordings,
        upstream=upstream,
        memory_at_rest=memory_at_rest,
    )
    return {o.policy: o for o in outcomes}, recordings


def memory_samples(recorded: list[dict[str, Any]]) -> list[list[tuple[str, int]]]:
    """Per simulated sample, each pod's memory of container web."""
    return [
        [(s["pod"], s["memory"]) for s in e["samples"] if s.get("container") == "web"]
        for e in recorded
        if e["type"] == "metric" and any("memory" in s for s in e["samples"])
    ]


def test_four_pods_each_hold_256mi_at_rest_and_a_quarter_of_the_remaining_100mi(tmp_path: Path) -> None:
    # One recorded pod used 356Mi: 256Mi of it at rest, 100Mi for the load.  Each of the 4
    # simulated pods holds its own 256Mi and serves a quarter of the load: 256Mi + 25Mi = 281Mi.
    # That is above the 270Mi request and the 280Mi limit: every pod is OOM-killed at each of
    # the 3 samples (12), and the 2 minutes between the samples are over requests and limits.
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi", "limit": "280Mi"})
    files = [policy(tmp_path, "static", STATIC_HVPA), policy(tmp_path, "today", STATIC_HPA)]
    out, recorded = run(path, files, 256 * MI)
    for name in ("static", "today"):
        o = out[name]
        assert (o.oom_kills, o.hours_over_requests, o.hours_over_limits) == (12, 2 / 60, 2 / 60), name
        assert (o.replica_changes, o.evictions, o.samples) == (0, 0, 3), name
        assert o.memory_gib_hours == pytest.approx(4 * 270 / 1024 * 2 / 60), name  # the requests: unchanged
    assert memory_samples(recorded["static"]) == [[(f"sim-{i}", 281 * MI) for i in range(4)]] * 3
    assert memory_samples(recorded["today"]) == [[(f"up-{i}", 281 * MI) for i in range(1, 5)]] * 3


def test_without_memory_at_rest_the_356mi_are_split_over_the_4_pods_as_before(tmp_path: Path) -> None:
    # 356Mi / 4 = 89Mi a pod: below the 270Mi request, no OOM kill.
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi", "limit": "280Mi"})
    files = [policy(tmp_path, "static", STATIC_HVPA), policy(tmp_path, "today", STATIC_HPA)]
    out, recorded = run(path, files, 0.0)
    for name in ("static", "today"):
        assert (out[name].oom_kills, out[name].hours_over_requests, out[name].hours_over_limits) == (0, 0.0, 0.0)
    assert memory_samples(recorded["static"]) == [[(f"sim-{i}", 89 * MI) for i in range(4)]] * 3
    assert memory_samples(recorded["today"]) == [[(f"up-{i}", 89 * MI) for i in range(1, 5)]] * 3


def test_each_recorded_pod_that_reported_memory_gives_back_its_rest_and_the_remainder_is_floored_at_0(
    tmp_path: Path,
) -> None:
    # Two recorded pods with 300Mi each and one that reported CPU only (no rest in the total):
    # 600Mi - 2 x 256Mi = 88Mi over the 4 simulated pods, 256Mi + 22Mi = 278Mi each.  At 512Mi
    # at rest the two pods' 600Mi are all at rest: max(600Mi - 1024Mi, 0) = 0, 512Mi each.
    pods = [
        {"pod": "a", "container": "web", "cpu": 0.2, "memory": 300 * MI},
        {"pod": "b", "container": "web", "cpu": 0.2, "memory": 300 * MI},
        {"pod": "c", "container": "web", "cpu": 0.2},
    ]
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi"}, pods)
    files = [policy(tmp_path, "static", STATIC_HVPA)]
    _, recorded = run(path, files, 256 * MI)
    assert memory_samples(recorded["static"])[0] == [(f"sim-{i}", 278 * MI) for i in range(4)]
    _, recorded = run(path, files, 512 * MI)
    assert memory_samples(recorded["static"])[0] == [(f"sim-{i}", 512 * MI) for i in range(4)]


def test_a_scale_up_between_samples_judges_the_new_pods_on_their_rest_too(tmp_path: Path) -> None:
    # Nanit's custom HPA at 20 requests/s a pod; 100 recorded on one pod: at 2 pods 50 a pod,
    # x2 at most: 4 pods from T0 + 30 (--delay).  With 256Mi at rest a pod uses 256Mi + 100Mi / 2
    # = 306Mi at 2 pods, 281Mi at 4: above the 270Mi request before the change and after it, so
    # the whole minute to the next sample is over requests.  Without: 178Mi, then 89Mi.
    custom = {
        "apiVersion": "autoscaling.tandem.dev/v1alpha1",
        "kind": "CustomHpa",
        "metadata": META,
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "target": {"value": 20},
            "metric": {"series": "rps"},
            "minReplicas": 1,
            "maxReplicas": 4,
        },
    }
    pods = [
        {"pod": "trace", "container": "web", "cpu": 0.4, "memory": 356 * MI},
        {"pod": "trace", "series": "rps", "value": 100.0},
    ]
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi"}, pods, replicas=2, samples=2)
    files = [policy(tmp_path, "custom", custom)]
    for at_rest, hours in ((256 * MI, 1 / 60), (0.0, 0.0)):
        out, _ = run(path, files, at_rest)
        assert [n for _, n, _ in out["custom"].timeline] == [4]
        assert out["custom"].hours_over_requests == hours


def vpa_target(memory: int) -> int:
    """The memory target of upstream's VPA recommender for a constant per-pod ``memory`` (bytes):
    the end of the histogram bucket it falls in (first bucket 1e7 bytes, ratio 1.05, Percentile
    returns the next bucket's start), plus the 15% margin, at least the pod minimum of 250Mi
    (kubernetes/autoscaler vertical-pod-autoscaler/pkg/recommender/model/aggregations_config.go,
    logic/recommender.go)."""
    bucket = math.floor(math.log(memory * 0.05 / 1e7 + 1) / math.log(1.05))
    end = 1e7 * (1.05 ** (bucket + 1) - 1) / 0.05
    return max(int(end * 1.15), 250 * MI)


def test_an_upstream_vpa_recommends_memory_from_the_per_pod_usage_with_its_rest(tmp_path: Path) -> None:
    # 100Mi requested, below the recommender's lower bound (at least 250Mi): the updater evicts
    # 2 of the 4 pods at T0 (tolerance int(4 x 0.5) = 2) and the other 2 at T0 + 60, each
    # re-admitted with the target.  At 281Mi a pod (bucket 18, whose end is 305,390,039 bytes)
    # the target is 1.15 x that: 351,198,544 bytes; at 89Mi a pod it is the 250Mi minimum.
    assert (vpa_target(281 * MI), vpa_target(89 * MI)) == (351_198_544, 250 * MI)
    path = stream(tmp_path / "s.jsonl", {"request": "100Mi"})
    files = [policy(tmp_path, "vpa", MEMORY_VPA)]
    for at_rest, per_pod in ((256 * MI, 281 * MI), (0.0, 89 * MI)):
        out, recorded = run(path, files, at_rest)
        o = out["vpa"]
        assert (o.evictions, o.pod_restarts, o.resizes) == (4, 4, 1)
        assert o.timeline[-1][2]["web"]["memory"] == vpa_target(per_pod) * 1000  # milli-bytes
        assert {m for sample in memory_samples(recorded["vpa"]) for _, m in sample} == {per_pod}


def test_the_flag_reaches_the_simulation_and_its_default_keeps_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi", "limit": "280Mi"})
    hvpa = policy(tmp_path, "static", STATIC_HVPA)
    rows: list[int] = []
    for extra in ([], ["--memory-at-rest", "0"], ["--memory-at-rest", "256Mi"]):
        out = tmp_path / "out.json"
        assert tandem(["simulate", path, "--policy", hvpa, "--jobs", "1", "--json", str(out), *extra]) == 0
        rows.append(orjson.loads(out.read_bytes())[0]["oom_kills"])
    monkeypatch.setenv("TANDEM_MEMORY_AT_REST", "256Mi")
    assert tandem(["simulate", path, "--policy", hvpa, "--jobs", "1", "--json", str(out)]) == 0
    rows.append(orjson.loads(out.read_bytes())[0]["oom_kills"])
    assert rows == [0, 0, 12, 12]
    capsys.readouterr()


@pytest.mark.parametrize("value", ["-256Mi", "256MB", "lots", ""])
def test_a_memory_at_rest_that_is_no_quantity_or_negative_is_one_usage_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stream(tmp_path / "s.jsonl", {"request": "270Mi"})
    with pytest.raises(SystemExit) as done:
        tandem(["simulate", path, "--policy", policy(tmp_path, "static", STATIC_HVPA), f"--memory-at-rest={value}"])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"tandem simulate: error: argument --memory-at-rest: expected a memory quantity >= 0 such as 256Mi, "
        f"got {value!r}"
    )
