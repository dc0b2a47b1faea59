"""Fuzzing the policy parser of every kind: a broken manifest is an InvalidPolicy, never another error.

Every policy example (``schemas/examples/policy-*.json``: HVPA released, seed and line B, Tortoise,
CustomHpa; ``examples/policies.yaml``) is mutated (:mod:`tests.mutate`) and given to
:func:`scaling.policies.parse_policy`; a manifest that parses is then run through an
:class:`~scaling.engine.Engine` with a workload, HPA, VPA and metric events and a flush, so that a
value the parser let through cannot blow up a later tick (the worker must never die on one
policy).  ``TANDEM_FUZZ_EXAMPLES`` sets the examples per test.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.policies import parse_policy, policy_target
from scaling.settings import Settings
from schemas.codec import encode
from tests.mutate import RUNS, mutated

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text())["policy"]
    for p in sorted((ROOT / "schemas" / "examples").glob("policy-*.json"))
    if json.loads(p.read_text())["policy"]
}
for i, doc in enumerate(d for d in yaml.safe_load_all((ROOT / "examples" / "policies.yaml").read_text()) if d):
    MANIFESTS[f"examples-{i}"] = doc
INPUTS = {p.stem: json.loads(p.read_text()) for p in (ROOT / "schemas" / "examples").glob("*.json")}
N = int(os.environ.get("TANDEM_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=N,
    deadline=None,
    derandomize=os.environ.get("TANDEM_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(autouse=True, scope="module")
def _deep_enough() -> Any:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    yield
    sys.setrecursionlimit(old)


def _inputs(wl: dict[str, str], ts: float) -> list[dict[str, Any]]:
    out = []
    for name, dt in (("workload-pods", 0), ("hpa-full", 1), ("vpa-bounds-conditions", 2), ("metric-batch", 3)):
        ev = json.loads(json.dumps(INPUTS[name]))
        ev.update(workload=wl, ts=ts + dt)
        out.append(ev)
    return out


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(MANIFESTS)))
def test_a_mutated_policy_is_invalid_policy_or_runs_never_another_error(data: st.DataObject, name: str) -> None:
    manifest = data.draw(mutated(MANIFESTS[name], pairs=False), label="manifest")
    RUNS["policy: mutated manifest"] += 1
    try:
        ref = policy_target(manifest, "c1")
        parse_policy(manifest, ref)
    except InvalidEvent:
        return
    RUNS["policy: parsed, then run"] += 1
    engine = Engine(Settings(cluster="c1"))
    ts = 1_762_250_400.0
    out = engine.process({"type": "policy", "ts": ts - 1, "workload": ref.as_dict(), "policy": manifest})
    for ev in _inputs(ref.as_dict(), ts):
        out += engine.process(ev)
    out += engine.process({**_inputs(ref.as_dict(), ts + 600)[3]})
    out += engine.flush()
    for _, ev in out:
        encode(ev)


def test_zz_the_fuzzers_ran() -> None:
    ran = {k: v for k, v in RUNS.items() if k.startswith("policy:")}
    print(f"\nfuzz examples run: {ran}")
    assert ran.get("policy: mutated manifest", 0) >= min(N, 50), ran
