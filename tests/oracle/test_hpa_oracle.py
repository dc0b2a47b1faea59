"""tandem's HPA replica calculation against the controller's own code (k8s.io/kubernetes v1.36.3).

``ReplicaCalculator.GetResourceReplicas`` with its real resource-metrics client over a fake metrics
clientset (``tests/oracle/hpa``, built by ``scripts/oracle.sh fetch``), against
``scaling.recommend.hpa``'s Resource/ContainerResource Utilization path, on 20,000 random reconciles
of seed 30 (``tests/oracle/hpa_cases.py``): replicas, utilization and raw value equal, or both an
error.  ``bench/hpa_oracle.py`` runs fresh seeds (docs/recommenders.md 1.11).
"""

from __future__ import annotations

import pytest

from tests.oracle import hpa_cases as h

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(
        not h.oracle_binary().exists(), reason=f"no HPA oracle at {h.oracle_binary()}: scripts/oracle.sh fetch"
    ),
]

SEED = 30
CASES = 20_000


def test_random_reconciles_give_upstreams_replicas_utilization_and_raw_value() -> None:
    cases = h.random_cases(SEED, CASES)
    upstream = h.run_upstream(cases)
    assert len(upstream) == CASES
    differing = [
        (i, ours, theirs)
        for i, (case, theirs) in enumerate(zip(cases, upstream, strict=True))
        if not h.same(ours := h.run_tandem(case), theirs)
    ]
    errors = sum("error" in u for u in upstream)
    scaled = sum("error" not in u and u["replicas"] != c["current"] for c, u in zip(cases, upstream, strict=True))
    # the cases reach both outcomes and errors, so the comparison can fail
    assert 0 < errors < CASES // 2 and scaled > CASES // 4
    assert not differing, f"{len(differing)} of {CASES} differ; first: {differing[0]}"
