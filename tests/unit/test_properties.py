"""Properties of the whole core (hypothesis): determinism, bounds, and what weights 0 and 100 mean."""

from __future__ import annotations

import io
import itertools
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.engine import Engine
from scaling.quantity import parse_quantity
from scaling.settings import Settings
from scaling.state import WorkloadState
from streams.replay import replay

T0 = 1_762_250_400.0
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
MI = 2**20


def manifest(weights: list[int], min_r: int, max_r: int, min_cpu: int, max_cpu: int, seed_form: bool) -> dict[str, Any]:
    n = len(weights)
    span = max_r - min_r + 1
    intervals = []
    for i, w in enumerate(weights):
        start = min_r + i * span // n
        last = min_r + (i + 1) * span // n - 1 if i < n - 1 else max_r
        last = max(start, last)
        intervals.append(
            {"vpaWeight": w / 100 if seed_form else w, "startReplicaCount": start, "lastReplicaCount": last}
        )
    policy = {
        "containerPolicies": [
            {
                "containerName": "app",
                "minAllowed": {"cpu": f"{min_cpu}m", "memory": "64Mi"},
                "maxAllowed": {"cpu": f"{max_cpu}m", "memory": "4Gi"},
            }
        ]
    }
    meta = {"name": "web", "namespace": "shop", "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"}}
    target = {"kind": "Deployment", "name": "web"}
    if seed_form:
        spec = {
            "targetRef": target,
            "hpaTemplate": {"minReplicas": min_r, "maxReplicas": max_r},
            "vpaTemplate": {"resourcePolicy": policy},
            "minCpuChange": {"value": "10m"},
            "weightBasedScalingIntervals": intervals,
        }
    else:
        spec = {
            "targetRef": target,
            "hpa": {
                "deploy": True,
                "template": {"spec": {"minReplicas": min_r, "maxReplicas": max_r}},
                "scaleUp": {"stabilizationDuration": "1m"},
                "scaleDown": {"stabilizationDuration": "2m"},
            },
            "vpa": {
                "deploy": True,
                "template": {"spec": {"resourcePolicy": policy}},
                "scaleUp": {"minChange": {"cpu": {"value": "10m"}, "memory": {"percentage": 5}}},
            },
            "weightBasedScalingIntervals": intervals,
        }
    return {"apiVersion": "autoscaling.k8s.io/v1alpha1", "kind": "Hvpa", "metadata": meta, "spec": spec}


@st.composite
def streams_(draw: st.DrawFn, *, oom: bool = True) -> list[dict[str, Any]]:
    ts = T0
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 25))):
        ts += draw(st.sampled_from([0.0, 0.5, 1.0, 7.0, 15.0, 40.0, 200.0]))
        kind = draw(st.sampled_from(["workload", "hpa", "vpa", "vpa", "metric"] if oom else ["workload", "hpa", "vpa"]))
        if kind == "workload":
            cpu = draw(st.integers(20, 5000))
            mem = draw(st.integers(32, 6000))
            limits = draw(st.sampled_from([{}, {"cpu": f"{2 * cpu}m"}, {"cpu": f"{cpu}m", "memory": f"{4 * mem}Mi"}]))
            events.append(
                {
                    "type": "workload",
                    "ts": ts,
                    "workload": WL,
                    "replicas": draw(st.integers(0, 14)),
                    "containers": {"app": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}, "limits": limits}},
                }
            )
        elif kind == "hpa":
            events.append(
                {
                    "type": "hpa",
                    "ts": ts,
                    "workload": WL,
                    "desired_replicas": draw(st.integers(0, 16)),
                    "max_replicas": draw(st.integers(1, 16)),
                    "conditions": [{"type": "ScalingLimited", "status": draw(st.sampled_from(["True", "False"]))}],
                }
            )
        elif kind == "vpa":
            events.append(
                {
                    "type": "vpa",
                    "ts": ts,
                    "workload": WL,
                    "containers": {
                        "app": {
                            "target": {
                                "cpu": f"{draw(st.integers(1, 9000))}m",
                                "memory": f"{draw(st.integers(1, 9000))}Mi",
                            }
                        }
                    },
                }
            )
        else:
            events.append(
                {
                    "type": "metric",
                    "ts": ts,
                    "workload": WL,
                    "pod": "web-0",
                    "container": "app",
                    "memory": 10 * MI,
                    "oom": True,
                }
            )
    return events


policies = st.builds(
    manifest,
    weights=st.lists(st.integers(0, 100), min_size=1, max_size=3),
    min_r=st.integers(1, 3),
    max_r=st.integers(3, 12),
    min_cpu=st.integers(10, 200),
    max_cpu=st.integers(300, 6000),
    seed_form=st.booleans(),
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_engine(events: list[dict[str, Any]], policy: dict[str, Any], *, restore_at: int | None = None) -> bytes:
    engine = Engine(Settings())
    engine.add_policy(policy)
    out: list[bytes] = []
    for i, e in enumerate(events):
        if restore_at is not None and i == restore_at:
            # what a Faust worker does after a restart: states come back from the changelog
            engine.states = {
                k: WorkloadState.from_dict(orjson.loads(orjson.dumps(s.to_dict()))) for k, s in engine.states.items()
            }
        out.extend(orjson.dumps(ev) for _, ev in engine.process(e))
    out.extend(orjson.dumps(ev) for _, ev in engine.flush())
    return b"\n".join(out)


@FAST
@given(events=streams_(), policy=policies, cut=st.integers(0, 25))
def test_output_is_byte_identical_across_runs_and_state_restores(
    events: list[dict[str, Any]], policy: dict[str, Any], cut: int
) -> None:
    first = run_engine(events, policy)
    assert run_engine(events, policy) == first
    assert run_engine(events, policy, restore_at=min(cut, len(events))) == first


@FAST
@given(events=streams_(), policy=policies, cuts=st.lists(st.integers(0, 25), max_size=4))
def test_replay_output_is_byte_identical_across_input_chunkings(
    events: list[dict[str, Any]], policy: dict[str, Any], cuts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bounds = sorted({0, len(events), *(min(c, len(events)) for c in cuts)})
        files = []
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            p = Path(tmp) / f"chunk-{i}.jsonl"
            p.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events[a:b]))
            files.append(str(p))
        whole = Path(tmp) / "whole.jsonl"
        whole.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
        outs = []
        for paths in ([str(whole)], files):
            buf = io.BytesIO()
            replay(paths, buf, settings=Settings(), policies=[policy], err=io.StringIO(), progress=False)
            outs.append(buf.getvalue())
        assert outs[0] == outs[1]


@FAST
@given(events=streams_(), policy=policies)
def test_decisions_never_leave_replica_bounds_or_min_max_allowed(
    events: list[dict[str, Any]], policy: dict[str, Any]
) -> None:
    spec = policy["spec"]
    tmpl = spec["hpaTemplate"] if "hpaTemplate" in spec else spec["hpa"]["template"]["spec"]
    cpol = (
        spec["vpaTemplate"]["resourcePolicy"]
        if "vpaTemplate" in spec
        else spec["vpa"]["template"]["spec"]["resourcePolicy"]
    )["containerPolicies"][0]
    for line in run_engine(events, policy).splitlines():
        out = orjson.loads(line)
        if out.get("source") == "tandem":
            continue  # tandem's own HPA/VPA recommendation (an hpa/vpa event), not a decision
        data = out["data"]
        if "replicas" in data:
            assert tmpl["minReplicas"] <= data["replicas"]["to"] <= tmpl["maxReplicas"]
        for res, ch in data.get("containers", {}).get("app", {}).get("requests", {}).items():
            value = parse_quantity(ch["to"])
            assert parse_quantity(cpol["minAllowed"][res]) <= value <= parse_quantity(cpol["maxAllowed"][res])


@FAST
@given(events=streams_(oom=False), policy=policies)
def test_weight_zero_never_changes_requests(events: list[dict[str, Any]], policy: dict[str, Any]) -> None:
    # Documented exceptions: an OOM kill (weight 0 counts as 1), and the seed form's vertical
    # scale-up at maxReplicas.  This stream has no OOM kill and the seed case is excluded.
    for iv in policy["spec"]["weightBasedScalingIntervals"]:
        iv["vpaWeight"] = 0
    seed = "hpaTemplate" in policy["spec"]
    max_r = policy["spec"]["hpaTemplate"]["maxReplicas"] if seed else None
    for line in run_engine(events, policy).splitlines():
        out = orjson.loads(line)
        if out.get("source") == "tandem":
            continue  # tandem's own HPA/VPA recommendation (an hpa/vpa event), not a decision
        data = out["data"]
        if seed and data["inputs"]["replicas"] >= max_r:
            continue
        assert "containers" not in data


@FAST
@given(events=streams_(), policy=policies)
def test_weight_hundred_never_changes_replicas(events: list[dict[str, Any]], policy: dict[str, Any]) -> None:
    # Every interval at 100 %: no fractional weight to borrow, so HPA's share is always 0.
    for iv in policy["spec"]["weightBasedScalingIntervals"]:
        iv["vpaWeight"] = 1 if "hpaTemplate" in policy["spec"] else 100
    for line in run_engine(events, policy).splitlines():
        out = orjson.loads(line)
        if out.get("source") == "tandem":
            continue  # tandem's own HPA/VPA recommendation (an hpa/vpa event), not a decision
        data = out["data"]
        if "replicas" in data:
            # only the tandem invariant may move replicas: back inside the policy's bounds
            spec = policy["spec"]
            tmpl = spec["hpaTemplate"] if "hpaTemplate" in spec else spec["hpa"]["template"]["spec"]
            assert not tmpl["minReplicas"] <= data["replicas"]["from"] <= tmpl["maxReplicas"]


_sample_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 2**51),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["250m", "1Gi", "", "web-0"]),
)


@settings(max_examples=400, deadline=None)
@given(
    raw=st.dictionaries(
        st.sampled_from(["pod", "container", "cpu", "memory", "ready", "oom", "series"]), _sample_values
    )
)
def test_fast_sample_decoding_agrees_with_the_full_decoder(raw: dict[str, Any]) -> None:
    from scaling.errors import InvalidEvent
    from scaling.events.metric import _decode_sample, _fast_sample

    fast = _fast_sample(raw)
    if fast is None:
        return  # the full decoder decides, with its precise error
    try:
        slow = _decode_sample(raw, "s")
    except InvalidEvent as exc:  # pragma: no cover - a failure here is the bug this test looks for
        raise AssertionError(f"fast path accepted what the decoder rejects: {exc}") from None
    assert slow == fast
