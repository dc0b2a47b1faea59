"""``spec.predictive`` through the whole core, embedded: the same bytes across runs and across a
state saved and restored mid-stream (what a worker does after a restart), and a pre-scale that the
audit explains (issue 36)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from analysis.audit import explain, read_file
from scaling.engine import Engine
from scaling.errors import InvalidPolicy
from scaling.events import WorkloadRef
from scaling.policies import parse_policy
from scaling.settings import Settings
from scaling.state import WorkloadState
from tests.fixtures.kafka import REPO_ROOT

MONDAY = 1_762_732_800  # 2025-11-10T00:00:00Z
WL = {"cluster": "eu-1", "namespace": "shop", "kind": "Deployment", "name": "web"}


def policy() -> dict[str, Any]:
    docs = yaml.safe_load_all((REPO_ROOT / "examples/simulate/horizontal.yaml").read_text())
    web: dict[str, Any] = next(d for d in docs if d["metadata"]["name"] == "web")
    web["spec"]["predictive"] = {}
    return web


def cores(t: float) -> float:
    """0.6 cores, 3 from 09:00 to 18:00 UTC every day."""
    return 3.0 if 9 * 3600 <= t % 86400 < 18 * 3600 else 0.6


def stream(days: int = 3) -> list[dict[str, Any]]:
    """A recorded cluster that stayed at 2 replicas: its spec and its two pods' usage every minute."""
    events: list[dict[str, Any]] = []
    for i in range(1, days * 1440):
        ts = MONDAY + 60 * i
        events.append(
            {
                "type": "workload",
                "ts": ts,
                "workload": WL,
                "replicas": 2,
                "containers": {"web": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "1"}}},
            }
        )
        events.append(
            {
                "type": "metric",
                "ts": ts,
                "workload": WL,
                "samples": [
                    {"pod": f"web-{p}", "container": "web", "cpu": cores(ts) / 2, "memory": 300 * 2**20}
                    for p in range(2)
                ],
            }
        )
    return events


def run(events: list[dict[str, Any]], restore_at: int | None = None) -> list[bytes]:
    engine = Engine(Settings())
    engine.add_policy(policy())
    out: list[bytes] = []
    for i, e in enumerate(events):
        if i == restore_at:
            engine.states = {
                k: WorkloadState.from_dict(orjson.loads(orjson.dumps(s.to_dict()))) for k, s in engine.states.items()
            }
        out.extend(orjson.dumps(ev) for kind, ev in engine.process(e) if kind == "audit")
    out.extend(orjson.dumps(ev) for kind, ev in engine.flush() if kind == "audit")
    return out


def test_predictive_output_is_byte_identical_across_runs_and_state_restores() -> None:
    events = stream()
    first = run(events)
    prescaled = [e for e in first if b"pre-scaled to" in e]
    # Days 2 and 3 (day 1 is the history): the recorded cluster stayed at 2 replicas, so each minute
    # before and in the ramp decides again.
    assert len(prescaled) == 1104
    assert run(events) == first
    for cut in (1440 + 538, 2 * 1440 + 538, 2 * 1440 + 600):  # around day 2's and day 3's 09:00
        assert run(events, restore_at=cut) == first


def test_audit_explain_says_why_it_pre_scaled(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_bytes(b"".join(e + b"\n" for e in run(stream())))
    story = "\n".join(explain("eu-1/shop/Deployment/web", read_file(str(audit))))
    # At 08:59 on Tuesday, from Monday's profile: to the forecast, 5 times the 2 replicas the policy
    # asks (maxPreScalePercent unset: only maxReplicas bounds it).
    assert (
        "2025-11-11 08:59:00 UTC (tick 1762851540). Hvpa web (Auto) saw 2 replicas running, the HPA "
        "recommendation of 2 replicas and a forecast load of 10.0 replicas 75.0 s ahead (the policy alone "
        "asked 2). Rule: hvpa: vpaWeight 0 at 2 replicas (hpaWeight 100); pre-scaled to 10 for the forecast "
        "of 10.0 at 09:00:15 (same time of day, 1 day, recent error 0 %). Decision: replicas from 2 to 10."
    ) in story.split("\n")


def test_an_unknown_field_in_predictive_is_refused_with_a_did_you_mean() -> None:
    manifest = policy()
    manifest["spec"]["predictive"] = {"horizn": "2m"}
    with pytest.raises(InvalidPolicy) as err:
        parse_policy(manifest, WorkloadRef("eu-1", "shop", "Deployment", "web"))
    assert str(err.value) == "field 'spec.predictive.horizn': unknown field (did you mean horizon?)"
