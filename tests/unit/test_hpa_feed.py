"""The own HPA's live inputs (scaling.hpa_feed) give what a rebuild from the usage table gives.

``own.observe`` keeps ``HpaFeed`` in step with ``recommender["usage"]`` sample by sample, and
the tick reads it instead of rebuilding the HPA's inputs; a restored state rebuilds it from the
table.  These tests pin that the two routes agree: on the fresh samples of any table, on the
decisions of a workload replayed with and without a restore in the middle.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.engine import Engine, policy_event
from scaling.events import decode_event
from scaling.hpa_feed import HpaFeed
from scaling.recommend.hpa import HpaConfig, HpaState
from scaling.recommend.hpa import recommend as hpa_recommend
from scaling.recommend.hpa.model import MetricInputs, PodInfo
from scaling.settings import Settings
from scaling.state import WorkloadState

T0 = 1_762_214_400.0
REF = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}

_entry = st.tuples(
    st.sampled_from([T0 - 300.0, T0 - 121.0, T0 - 120.0, T0 - 60.0, T0]),
    st.one_of(st.none(), st.integers(0, 4000)),
    st.one_of(st.none(), st.integers(0, 2**31)),
)
_table = st.dictionaries(
    st.sampled_from([f"web-{i}" for i in range(6)]),
    st.dictionaries(st.sampled_from(["app", "side"]), _entry, min_size=1, max_size=2),
    max_size=6,
)


def rebuilt(
    table: dict[str, dict[str, tuple[float, Any, Any]]], oldest: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The HPA's inputs as ``own_hpa`` built them from the table on every tick before the feed."""
    usage: dict[str, Any] = {}
    sample_ts: dict[str, float] = {}
    for pod, containers in table.items():
        per_pod: dict[str, dict[str, int]] = {}
        latest = None
        for c, (ts, cpu, mem) in containers.items():
            if ts < oldest:
                continue
            values = per_pod[c] = {}
            if cpu is not None:
                values["cpu"] = cpu
            if mem is not None:
                values["memory"] = mem
            latest = ts if latest is None or ts > latest else latest
        if per_pod:
            usage[pod] = per_pod
            sample_ts[pod] = latest  # type: ignore[assignment]
    return usage, sample_ts


@settings(max_examples=200, deadline=None)
@given(_table, _table)
def test_the_feed_gives_the_fresh_samples_of_the_table_in_its_order(first: Any, then: Any) -> None:
    feed = HpaFeed.from_table(first)
    table = {pod: dict(containers) for pod, containers in first.items()}
    for pod, containers in then.items():  # later samples, as observe hands them over
        for c, (ts, cpu, mem) in containers.items():
            table.setdefault(pod, {})[c] = (ts, cpu, mem)
            feed.note(pod, c, ts, cpu, mem)
    usage, sample_ts = feed.fresh(T0 - 120.0)
    want_usage, want_ts = rebuilt(table, T0 - 120.0)
    assert usage == want_usage and list(usage) == list(want_usage)
    assert dict(sample_ts) == want_ts


def test_pods_without_status_are_ready_and_old_for_the_hpa_whatever_the_initialization_period() -> None:
    # _LONG_AGO stands for "an hour before the tick": with fresh samples both classify every pod
    # ready, even when the CPU initialization period is longer than that hour.
    metrics = (
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
    )
    usage = {f"p{i}": {"app": {"cpu": 400 + 100 * i}} for i in range(4)}
    inputs = MetricInputs(usage, {"app": {"cpu": 500}}, sample_ts={p: T0 - 30 for p in usage})
    feed = HpaFeed.from_table({p: {"app": [T0 - 30, c["app"]["cpu"], None]} for p, c in usage.items()})
    for period in (300.0, 7200.0):
        cfg = HpaConfig(cpu_initialization_period=period)
        hour_ago = [PodInfo(p, True, "Running", T0 - 3600.0) for p in sorted(usage)]
        spec = decode_event(
            {
                "type": "workload",
                "ts": T0,
                "workload": REF,
                "replicas": 4,
                "containers": {"app": {"requests": {"cpu": "500m"}}},
            }
        )
        assert spec.type == "workload"
        pods = feed.pods(spec, feed.fresh(T0 - 120.0)[0])
        a, _ = hpa_recommend(metrics, None, 1, 10, 4, 4, hour_ago, inputs, HpaState(), T0, cfg)
        b, _ = hpa_recommend(metrics, None, 1, 10, 4, 4, pods, inputs, HpaState(), T0, cfg)
        assert (a.desired_replicas, a.conditions, a.current_metrics) == (
            b.desired_replicas,
            b.conditions,
            b.current_metrics,
        )
        # 550m of 500m is 110 % of a 50 % target: ceil(2.2 x 4) = 9, held to 2 x 4 by the legacy rate limit.
        assert (b.metric_replicas, b.desired_replicas) == (9, 8)


def _stream() -> list[dict[str, Any]]:
    manifest = {
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
                "deploy": True,
                "template": {
                    "spec": {
                        "minReplicas": 1,
                        "maxReplicas": 12,
                        "metrics": [
                            {
                                "type": "Resource",
                                "resource": {
                                    "name": "cpu",
                                    "target": {"type": "Utilization", "averageUtilization": 60},
                                },
                            }
                        ],
                    }
                },
            },
            "vpa": {"deploy": False},
            "weightBasedScalingIntervals": [{"vpaWeight": 0, "startReplicaCount": 0, "lastReplicaCount": 0}],
        },
    }
    events: list[dict[str, Any]] = [policy_event(manifest, "c1", T0 - 60)]
    events.append(
        {
            "type": "workload",
            "ts": T0 - 60,
            "workload": REF,
            "replicas": 3,
            "containers": {"app": {"requests": {"cpu": "500m"}}},
        }
    )
    for i in range(120):
        pods = range(3 + (i // 20) % 3)  # pods come and go
        if i % 37 == 36:
            continue  # a gap: every sample goes stale
        samples = [
            {"pod": f"web-{p}", "container": "app", "cpu": 0.2 + 0.1 * ((i + p) % 9)} for p in pods if (i + p) % 11
        ]
        events.append({"type": "metric", "ts": T0 + 60.0 * i + (i % 3) * 200.0, "workload": REF, "samples": samples})
    events.sort(key=lambda e: e["ts"])
    return events


def test_a_restored_state_rebuilds_the_feed_and_decides_as_the_running_one() -> None:
    events = _stream()
    straight = Engine(Settings())
    out_straight = [straight.process(e) for e in events] + [straight.flush()]
    restored = Engine(Settings())
    out_restored = []
    for i, e in enumerate(events):
        out_restored.append(restored.process(e))
        if i % 25 == 24:  # a worker restarts from its changelog: no live caches
            restored.states = {
                k: WorkloadState.from_dict(json.loads(json.dumps(s.to_dict()))) for k, s in restored.states.items()
            }
    out_restored.append(restored.flush())
    assert out_restored == out_straight
    hpa_events = [ev for out in out_straight for kind, ev in out if kind == "hpa"]
    assert len({ev["desired_replicas"] for ev in hpa_events}) > 2  # the HPA really moved


def test_a_scale_downs_silent_pods_give_the_same_fresh_copy_until_the_pods_it_holds_change() -> None:
    """Pods that stopped reporting stay in the table, old, tick after tick (a scale-down): the
    filtered copy is made once and handed out again (its values the live entries that
    ``own.observe`` writes in place), so the tick's ``MetricInputs`` is the same object too."""
    feed = HpaFeed()
    for pod in ("a", "b", "c"):
        feed.note(pod, "app", T0, 100, 1000)
    requests: dict[str, dict[str, int]] = {"app": {"cpu": 200}}
    series: dict[str, dict[str | None, float]] = {}
    seen = []
    for tick in (3, 4, 5):  # "c" is silent from T0 on: older than two scrape periods from tick 3
        ts = T0 + 60 * tick
        for pod in ("a", "b"):  # written in place, as own.observe writes a full sample
            feed.usage[pod]["app"]["cpu"] = 100 + tick
            feed.stamps[pod]["app"] = ts
        usage, sample_ts = feed.fresh(ts - 120.0)
        assert usage == {
            "a": {"app": {"cpu": 100 + tick, "memory": 1000}},
            "b": {"app": {"cpu": 100 + tick, "memory": 1000}},
        }
        assert dict(sample_ts) == {"a": ts, "b": ts} and "c" not in sample_ts
        assert sample_ts.get("c", -1.0) == -1.0
        seen.append((usage, sample_ts, feed.inputs(usage, requests, series, sample_ts)))
    assert all(s[0] is seen[0][0] and s[1] is seen[0][1] and s[2] is seen[0][2] for s in seen)
    feed.note("c", "app", T0 + 360, 300, 3000)  # "c" reports again: a new copy that holds it
    usage, sample_ts = feed.fresh(T0 + 240.0)
    assert usage is not seen[0][0] and list(usage) == ["a", "b", "c"]
    assert dict(sample_ts) == {"a": T0 + 300, "b": T0 + 300, "c": T0 + 360}
