"""Fuzzing the event decoder and the core behind it: broken events raise InvalidEvent, nothing else.

Every valid input example of the contract (``schemas/examples``, every event type, every policy
kind) is mutated (:mod:`tests.mutate`) and fed as JSON text to ``schemas.codec.decode`` and, when
it decodes, to an :class:`~scaling.engine.Engine` that already holds a policy and the example's
workload, so that the reconcile loop and the recommenders see it too.  Mutated *policies* go
through the core in ``test_fuzz_policies.py``, which checks every kind's parser.  Anything but
:class:`~scaling.errors.InvalidEvent` (a ``KeyError``, a ``TypeError``, a ``RecursionError``, an
orjson encode error on the way out) fails the test with the example that raised it.

``TANDEM_FUZZ_EXAMPLES`` sets the examples per test (default 200, derandomized so the suite is
stable); ``TANDEM_FUZZ_RANDOM=1`` draws new ones each run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import WorkloadRef, decode_event
from scaling.events import decode as decoders
from scaling.settings import Settings
from schemas.codec import decode, encode
from tests.mutate import RUNS, mangled_bytes, mutated, to_json

EXAMPLES = Path(__file__).resolve().parents[2] / "schemas" / "examples"
INPUTS = {
    p.stem: json.loads(p.read_text())
    for p in sorted(EXAMPLES.glob("*.json"))
    if p.stem.split("-")[0] in ("metric", "workload", "hpa", "vpa", "policy")
}
N = int(os.environ.get("TANDEM_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=N,
    deadline=None,
    derandomize=os.environ.get("TANDEM_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True, scope="module")
def _deep_enough() -> Any:
    """Room for the deep documents the mutations build (Python's own limit, not the decoder's)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    yield
    sys.setrecursionlimit(old)


def _context(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Valid events for the example's workload, so the mutated one meets a state with a policy."""
    wl = doc["workload"] if isinstance(doc.get("workload"), dict) else INPUTS["workload-basic"]["workload"]
    ts = float(doc.get("ts") or 1_762_214_400.0) if isinstance(doc.get("ts"), int | float) else 1_762_214_400.0
    policy = dict(INPUTS["policy-hvpa-released"], workload=wl, ts=ts - 60)
    policy["policy"] = json.loads(json.dumps(policy["policy"]))
    target = policy["policy"]["spec"]["targetRef"]
    target["kind"], target["name"] = wl.get("kind", "Deployment"), wl.get("name", "web")
    policy["policy"]["metadata"]["namespace"] = wl.get("namespace", "default")
    work = dict(INPUTS["workload-basic"], workload=wl, ts=ts - 30)
    return [policy, work]


def _text(doc: Any) -> bytes:
    try:
        return to_json(doc)
    except RecursionError:  # deeper than this test's own writer goes: not an input to judge
        reject()


def _through_the_core(text: bytes, name: str) -> None:
    RUNS[name] += 1
    try:
        raw, event = decode(text)
    except InvalidEvent:
        return
    if event.type == "policy":
        return  # decoded is all this file checks of a policy: test_fuzz_policies.py runs them
    engine = Engine(Settings(cluster="c1"))
    for ctx in _context(raw):
        with contextlib.suppress(InvalidEvent):
            engine.process(ctx)
    try:
        out = engine.process(raw)
    except InvalidEvent:
        return
    out += engine.flush()
    for _, ev in out:
        encode(ev)  # what replay and the worker write must be writable


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_example_is_valid_to_start_with(name: str) -> None:
    decode_event(INPUTS[name])


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(INPUTS)))
def test_a_mutated_event_is_invalid_event_or_accepted_never_another_error(data: st.DataObject, name: str) -> None:
    doc = data.draw(mutated(INPUTS[name]), label="mutated")
    _through_the_core(_text(doc), "event: mutated document")


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(INPUTS)))
def test_mangled_json_text_is_invalid_event_never_another_error(data: st.DataObject, name: str) -> None:
    text = data.draw(mangled_bytes(to_json(INPUTS[name])), label="bytes")
    _through_the_core(text, "event: mangled bytes")


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(INPUTS)))
def test_decode_event_on_python_values_raises_only_invalid_event(data: st.DataObject, name: str) -> None:
    # YAML and Python callers hand decode_event values JSON cannot carry: NaN, huge ints, deep lists.
    doc = data.draw(mutated(INPUTS[name], pairs=False), label="mutated")
    RUNS["event: decode_event on values"] += 1
    with contextlib.suppress(InvalidEvent):
        decode_event(doc)


def _outcome(decoder: Any, doc: Any) -> Any:
    try:
        return ("event", repr(decoder(doc)))
    except InvalidEvent as exc:
        return ("invalid", str(exc))


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(INPUTS)))
def test_the_inline_fast_paths_decide_as_the_checked_decoder(data: st.DataObject, name: str) -> None:
    # decode_event and the hpa decoder take the common event inline and hand the rest to the
    # field-by-field checks: on any document both give the same event, or the same error.
    doc = data.draw(mutated(INPUTS[name], pairs=False), label="mutated")
    RUNS["event: fast path against checked decoder"] += 1
    assert _outcome(decode_event, doc) == _outcome(decoders._decode_event_checked, doc)
    if isinstance(doc, dict) and isinstance(doc.get("ts"), float):
        ref = WorkloadRef("c", "n", "Deployment", "w")
        fast = _outcome(lambda d: decoders._decode_hpa(d, doc["ts"], ref), doc)
        assert fast == _outcome(lambda d: decoders._decode_hpa_fields(d, doc["ts"], ref), doc)
    if isinstance(doc, dict) and isinstance(doc.get("samples"), list):
        # Samples that are not plain dicts skip the metric decoder's inline checks.
        slow = dict(doc, samples=[MappingProxyType(x) if isinstance(x, dict) else x for x in doc["samples"]])
        assert _outcome(decode_event, doc) == _outcome(decode_event, slow)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pod", ""),
        ("pod", 7),
        ("container", ""),
        ("container", None),
        ("cpu", -0.001),
        ("cpu", 1e5 + 0.5),
        ("cpu", float("nan")),
        ("cpu", float("inf")),
        ("cpu", 2),
        ("cpu", True),
        ("cpu", None),
        ("cpu", "250m"),
        ("memory", -1),
        ("memory", 2**50 + 1),
        ("memory", 2**50),
        ("memory", 1.5),
        ("memory", False),
        ("memory", None),
        ("memory", "1Gi"),
    ],
)
def test_the_collectors_sample_shape_decides_as_the_checked_decoder(field: str, value: Any) -> None:
    # A sample of exactly pod/container/cpu/memory is read by key on the metric decoder's fastest
    # path; at and beyond every bound it must give what the full sample decoder gives.
    sample = {"pod": "web-0", "container": "app", "cpu": 0.25, "memory": 300_000_000, field: value}
    doc = {"type": "metric", "ts": 1_762_214_400.0, "workload": INPUTS["metric-batch"]["workload"]}
    fast = dict(doc, samples=[sample])
    slow = dict(doc, samples=[MappingProxyType(sample)])
    assert _outcome(decode_event, fast) == _outcome(decode_event, slow)


def test_zz_the_fuzzers_ran() -> None:
    """The counts above, so a report can quote them (pytest -s prints them)."""
    ran = {k: v for k, v in RUNS.items() if k.startswith("event:")}
    print(f"\nfuzz examples run: {ran}")
    assert all(v >= min(N, 50) for v in ran.values()), ran
