"""What the decoder calls absurd: applied values, not VPA's (legitimately huge) bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling.errors import InvalidEvent
from scaling.events import MetricEvent, VpaEvent, decode_event
from scaling.events.metric import _decode_sample, _fast_sample

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


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2**51),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "p", "250m", "1Gi"]),
)
_sample = st.dictionaries(
    st.sampled_from(["pod", "container", "cpu", "memory", "ready", "oom", "series", "value", "extra"]),
    _values,
    max_size=6,
) | st.fixed_dictionaries(
    {"pod": st.sampled_from(["web-0", "web-1"]), "container": st.just("app")},
    optional={"cpu": _values, "memory": _values, "ready": _values, "oom": _values},
)


@settings(max_examples=400, deadline=None)
@given(_sample)
def test_a_batched_sample_decodes_as_the_sample_decoder_says(raw: dict[str, object]) -> None:
    # The metric decoder checks the common sample inline; it must accept exactly what the sample
    # decoders accept, with the same values, and leave every refusal to them.
    try:
        want: object = _fast_sample(raw) or _decode_sample(raw, "samples[0]")
    except InvalidEvent as exc:
        want = str(exc)
    try:
        ev = decode_event({"type": "metric", "ts": 1.0, "workload": WL, "samples": [raw]})
        assert isinstance(ev, MetricEvent)
        got: object = (ev.samples + ev.series)[0]  # type: ignore[operator]
    except InvalidEvent as exc:
        got = str(exc)
    assert got == want and type(got) is type(want)


def test_a_plain_sample_after_another_kind_decodes_as_it_does_alone() -> None:
    """A batch leaves the plain-sample loop at its first other sample; the rest take the general path."""
    plain = {"pod": "web-1", "container": "app", "cpu": 0.25, "memory": 300_000_000}
    other = {"pod": "web-0", "container": "app", "cpu": 0.5, "ready": False}
    alone = decode_event({"type": "metric", "ts": 1.0, "workload": WL, "samples": [plain]})
    mixed = decode_event({"type": "metric", "ts": 1.0, "workload": WL, "samples": [other, plain, dict(plain)]})
    assert isinstance(alone, MetricEvent) and isinstance(mixed, MetricEvent)
    assert tuple(mixed.samples[1]) == tuple(alone.samples[0]) == ("web-1", "app", 0.25, 300_000_000, True, False)
    assert tuple(mixed.samples[2]) == tuple(alone.samples[0])
    assert tuple(mixed.samples[0]) == ("web-0", "app", 0.5, None, False, False)
