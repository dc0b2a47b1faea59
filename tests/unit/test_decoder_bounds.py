"""What the decoder calls absurd: applied values, not VPA's (legitimately huge) bounds."""

from __future__ import annotations

import pytest

from scaling.errors import InvalidEvent
from scaling.events import VpaEvent, decode_event

WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def test_a_huge_vpa_upper_bound_from_little_history_is_accepted() -> None:
    # VPA: upper = base x (1 + 1/confidence); with minutes of history that is 1e11 millicores.
    ev = decode_event(
        {
            "type": "vpa",
            "ts": 1.0,
            "workload": WL,
            "source": "tandem",
            "containers": {"app": {"target": {"cpu": "25m"}, "upper_bound": {"cpu": "100000000000", "memory": "1e14"}}},
        }
    )
    assert isinstance(ev, VpaEvent)
    assert ev.containers["app"].upper_bound["cpu"].milli == 10**14


def test_the_same_value_as_a_target_is_refused() -> None:
    with pytest.raises(InvalidEvent) as exc:
        decode_event(
            {"type": "vpa", "ts": 1.0, "workload": WL, "containers": {"app": {"target": {"cpu": "100000000000"}}}}
        )
    assert exc.value.field == "containers.app.target.cpu"
    assert "absurd" in exc.value.reason
