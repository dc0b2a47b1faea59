"""tandem's own VPA against upstream's recommender (vertical-pod-autoscaler v1.8.1), value by value.

Every stream goes through both (``tests/oracle/vpa_streams.py``): upstream's Go code driven as
``routines/recommender.go`` drives it, and tandem's ``scaling.own.observe``/``own_vpa``; at every
recommender run every container's target, lower bound, upper bound and uncapped target, CPU and
memory, must be equal.  The fixed set: seeds 1-32 of the random streams (up to 3 days each, to keep
CI near a minute) and every edge case of issue 30.  ``bench/vpa_oracle.py`` runs fresh seeds, up to
14 days (docs/recommenders.md 2.10).  The oracle is built by ``scripts/oracle.sh fetch`` (run by
``scripts/test.sh``).
"""

from __future__ import annotations

import copy

import pytest

from tests.oracle import vpa_streams as v

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(
        not v.oracle_binary().exists(), reason=f"no VPA oracle at {v.oracle_binary()}: scripts/oracle.sh fetch"
    ),
]

#: The fixed seed set (docs/recommenders.md 2.10) and the streams' longest span in days.
SEEDS = range(1, 33)
MAX_DAYS = 3.0


def _check(name: str, stream: v.Stream) -> v.Comparison:
    [upstream] = v.run_upstream([stream])
    result = v.compare(name, v.run_tandem(stream), upstream)
    assert result.checkpoints > 0
    assert result.differing == 0, (
        f"{result.differing} of {result.checkpoints} checkpoints differ; first: {result.first}"
    )
    return result


@pytest.mark.parametrize("seed", SEEDS)
def test_random_stream_recommendations_equal_upstream_at_every_run(seed: int) -> None:
    _check(f"seed {seed}", v.random_stream(seed, MAX_DAYS))


@pytest.mark.parametrize("name", sorted(v.EDGE_CASES))
def test_edge_case_recommendations_equal_upstream_at_every_run(name: str) -> None:
    seed, shape = v.EDGE_CASES[name]
    _check(name, v.make_stream(seed, shape))


def test_edge_cases_have_the_shapes_they_are_named_for() -> None:
    streams = v.edge_streams()
    # one scrape as one event per pod, all with one timestamp
    split = [e for e in streams["split-scrape"] if "samples" in e]
    assert len(split) > 1 and len({len(e["samples"]) for e in split}) == 1 and split[0]["ts"] == split[5]["ts"]
    # memory samples only: upstream and tandem recommend CPU at the pod minimum (25m)
    [runs] = v.run_upstream([streams["memory-only-workload"]])
    assert {r["recs"]["app"]["target"][0] for r in runs} == {25}
    # eight silent days: the aggregate expires and is dropped at a GC run; recommendations stop
    [runs] = v.run_upstream([streams["expiry-after-eight-silent-days"]])
    assert any(r["recs"] for r in runs) and any(not r["recs"] for r in runs)


def test_a_single_differing_value_is_counted_and_named() -> None:
    stream = v.make_stream(9, v.Shape(days=0.05, pods=3))
    ours = v.run_tandem(stream)
    theirs = copy.deepcopy(ours)
    theirs[7]["recs"]["app"]["lower"][1] += 1
    result = v.compare("mutated", ours, theirs)
    assert (result.runs, result.checkpoints, result.differing) == (len(ours), len(ours), 1)
    assert result.first is not None and result.first.startswith(f"mutated at ts {ours[7]['ts']} container app")
