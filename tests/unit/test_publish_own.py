"""``WorkloadState.publish_own``: a driver that drops the own recommendations need not have them built.

``tandem simulate`` reads only decisions of its simulated workload, so it turns publishing off;
the own HPA and VPA must then recommend, and the policy decide, exactly as when they publish.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scaling.engine import Engine
from scaling.settings import Settings
from scaling.vocabulary import DECISION
from streams.inputs import load_manifests
from streams.runner import ReplayStats, read_sorted

ROOT = Path(__file__).resolve().parents[2]


def _replay(publish: bool, events: list[Any]) -> list[tuple[str, Any]]:
    engine = Engine(Settings())
    for manifest in load_manifests(str(ROOT / "examples" / "simulate" / "hvpa.yaml")):
        ref = engine.add_policy(manifest)
        engine.state_for(ref.key).publish_own = publish
    emitted: list[tuple[str, Any]] = []
    for _, _, (_, _, raw), event in events:
        if event.type in ("hpa", "vpa"):
            continue  # the recorded cluster's: the own recommenders run instead
        emitted.extend(engine.process(raw, event))
    emitted.extend(engine.flush())
    return emitted


def test_a_state_that_does_not_publish_decides_the_same_and_emits_no_own_recommendation() -> None:
    stream = str(ROOT / "examples" / "stream.jsonl.gz")
    events = read_sorted([stream], print, ReplayStats())[:6000]  # about 13 h of the example
    published = _replay(True, events)
    quiet = _replay(False, events)
    kinds = {kind for kind, _ in published}
    assert {"hpa", "vpa", "audit"} <= kinds  # both recommenders ran and published, and decided
    assert not any(kind in ("hpa", "vpa") for kind, _ in quiet)
    assert quiet == [(kind, ev) for kind, ev in published if kind not in ("hpa", "vpa")]
    assert sum(1 for kind, ev in quiet if kind == "audit" and ev["type"] == DECISION) > 0
