"""The metric events of an imported window: a container's several cAdvisor series merged as
``max by (namespace, pod, container)`` would, and the once-a-window check that lets the import skip
decoding each metric event, never looser than the decoder."""

from __future__ import annotations

from typing import Any

import pytest

from scaling.errors import InvalidEvent
from scaling.events import decode_event
from streams.prometheus import BuildState, Fetched, QuerySet, build_events
from streams.prometheus_api import DEFAULT_LABELS
from streams.prometheus_samples import usage

STEP = 60_000
STEPS = (0, STEP, 2 * STEP)


def test_two_series_of_one_container_merge_to_their_maximum_as_max_by_would() -> None:
    labels = {"namespace": "shop", "pod": "web-1", "container": "app"}
    series = {
        "memory": [
            ({**labels, "id": "/old"}, {0: 5.0, STEP: 7.0}),
            ({**labels, "id": "/new"}, {STEP: 9.0, 2 * STEP: 3.0}),
        ],
        "cpu": [({**labels, "id": "/old"}, {STEP: 0.5}), ({**labels, "id": "/new"}, {STEP: 0.25})],
    }
    assert usage(series, DEFAULT_LABELS) == {
        ("shop", "web-1"): [("app", {STEP: 0.5}, {0: 5.0, STEP: 9.0, 2 * STEP: 3.0}, None)]
    }


def _window(cpu: float = 0.25, memory: float = 2.0**27, container: str = "app", owner: str = "web") -> Fetched:
    """Two pods of Deployment ``owner`` over three steps, every value plain but the one given."""
    series: dict[str, list[tuple[dict[str, str], dict[int, float]]]] = {
        "replicaset_owner": [
            (
                {"namespace": "shop", "replicaset": "web-5d4", "owner_kind": "Deployment", "owner_name": owner},
                dict.fromkeys(STEPS, 1.0),
            )
        ],
        "pod_owner": [],
        "cpu": [],
        "memory": [],
    }
    for i, pod in enumerate(("web-5d4-a", "web-5d4-b")):
        series["pod_owner"].append(
            (
                {"namespace": "shop", "pod": pod, "owner_kind": "ReplicaSet", "owner_name": "web-5d4"},
                dict.fromkeys(STEPS, 1.0),
            )
        )
        ctr = container if i == 1 else "app"
        series["cpu"].append(({"namespace": "shop", "pod": pod, "container": ctr}, {STEP: 0.5, 2 * STEP: cpu}))
        series["memory"].append(({"namespace": "shop", "pod": pod, "container": ctr}, dict.fromkeys(STEPS, memory)))
    return Fetched(series, [])  # type: ignore[arg-type]


def _metrics(built: Any) -> list[dict[str, Any]]:
    return [e for e in built.events if e["type"] == "metric"]


def test_a_window_of_plain_usage_is_known_in_contract_and_every_metric_event_decodes() -> None:
    built = build_events(_window(), QuerySet(), "prod", 0, 2 * STEP, STEP, BuildState())
    assert built.metrics_checked is True
    metrics = _metrics(built)
    assert [e["ts"] for e in metrics] == [0.0, 60.0, 120.0]
    assert metrics[2]["samples"] == [
        {"pod": "web-5d4-a", "container": "app", "cpu": 0.25, "memory": 134217728},
        {"pod": "web-5d4-b", "container": "app", "cpu": 0.25, "memory": 134217728},
    ]
    for event in metrics:
        decode_event(event)


@pytest.mark.parametrize(
    ("window", "field"),
    [
        (_window(cpu=-0.5), "samples[0].cpu"),  # a rate an overridden query made negative
        (_window(cpu=1e9), "samples[0].cpu"),
        (_window(memory=2.0**51), "samples[0].memory"),
        (_window(container=""), "samples[1].container"),
        (_window(owner="web/v2"), "workload.name"),
    ],
)
def test_a_window_with_a_value_out_of_the_contract_is_left_to_the_decoder(window: Fetched, field: str) -> None:
    built = build_events(window, QuerySet(), "prod", 0, 2 * STEP, STEP, BuildState())
    assert built.metrics_checked is False
    with pytest.raises(InvalidEvent) as caught:
        for event in _metrics(built):
            decode_event(event)
    assert caught.value.field == field
