"""The applier's maximum decision age (``tandem apply --max-decision-age``, edge/applier.py): a
decision from history or a backlog is refused before any API call, audited, counted, and said in
one log line per run of such decisions."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from cli.main import main
from edge.applier import Applier, ApplierConfig
from ops.observability import Metrics
from scaling.cloudevents import APPLY_FAILED, DECISION, cloudevent

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z, the applier's clock


class NoApi:
    """An API client that counts what reached it and answers nothing (a refused decision is refused
    unread; one that passes the age check fails at its first call, audited as the applier does a bug)."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        self.calls += 1
        raise RuntimeError("no API in this test")


def decision(tick: float, name: str = "web", cluster: str = "c1") -> bytes:
    data = {
        "workload": {"cluster": cluster, "namespace": "shop", "kind": "Deployment", "name": name},
        "tick": tick,
        "policy": {"kind": "Hvpa", "name": name, "mode": "Auto"},
        "dry_run": False,
        "replicas": {"from": 2, "to": 3},
        "blocked": [],
        "reasons": ["test"],
        "inputs": {},
    }
    return orjson.dumps(cloudevent(DECISION, cluster, f"{cluster}/shop/Deployment/{name}", tick, data))


def applier(max_age: float | None, metrics: Metrics | None = None) -> Applier:
    return Applier(NoApi(), ApplierConfig("c1", max_decision_age=max_age), clock=lambda: NOW, metrics=metrics)


def api_calls(a: Applier) -> int:
    calls: int = a.api.calls
    return calls


def results(metrics: Metrics) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in metrics.registry.collect():
        if family.name == "tandem_applier_results":
            for s in family.samples:
                if s.name.endswith("_total"):
                    out[s.labels["result"]] = s.value
    return out


def test_a_decision_older_than_the_max_age_is_refused_unread_and_audited() -> None:
    metrics = Metrics(clock=lambda: NOW)
    a = applier(600, metrics)
    result = a.handle(decision(NOW - 3600))
    assert result is not None
    assert api_calls(a) == 0
    assert result["type"] == APPLY_FAILED
    assert result["subject"] == "c1/shop/Deployment/web"
    assert result["data"]["error"] == (
        "refused: too old: its tick 2025-12-31T23:00:00Z is 3600 s before this applier's clock "
        "2026-01-01T00:00:00Z, more than --max-decision-age 600 s (a decision from history or a backlog "
        "is never applied)"
    )
    assert result["data"]["attempts"] == 0 and result["data"]["patched"] == []
    assert results(metrics) == {"refused": 1.0}


def test_a_decision_at_the_max_age_is_not_refused_for_its_age() -> None:
    # exactly 600 s old: past the age check, so the next step reads the workload
    a = applier(600)
    a.handle(decision(NOW - 600))
    assert api_calls(a) > 0 and not a.last_too_old


def test_without_a_max_age_an_old_decision_goes_on_to_the_api() -> None:
    a = applier(None)
    a.handle(decision(NOW - 30 * 86400))
    assert api_calls(a) > 0 and not a.last_too_old


def test_another_clusters_old_decision_is_not_its_business() -> None:
    assert applier(600).handle(decision(NOW - 3600, cluster="c2")) is None


def test_a_run_of_old_decisions_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    a = applier(600)
    caplog.set_level(logging.WARNING, logger="tandem.applier")
    for minutes in range(100, 10, -10):  # nine decisions of history, ticks 100 .. 20 minutes ago
        assert a.handle(decision(NOW - minutes * 60)) is not None
        assert a.last_too_old

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("refusing")]

    assert [r.getMessage() for r in caplog.records] == [
        "refusing decisions older than --max-decision-age 600 s by this applier's clock (history or a backlog; "
        "docs/edge.md), the first c1/shop/Deployment/web of tick 2025-12-31T22:20:00Z, 6000 s old; each is "
        'audited as refused and counted in tandem_applier_results_total{result="refused"}; this line comes '
        "again only after a fresh decision"
    ]
    assert a.too_old == 9 and api_calls(a) == 0
    # a fresh decision ends the run (it goes on to the API); the next old one logs again
    a.handle(decision(NOW - 15))
    assert a.too_old == 0 and not a.last_too_old and api_calls(a) > 0
    a.handle(decision(NOW - 7200, name="db"))
    assert len(lines()) == 2
    assert "the first c1/shop/Deployment/db of tick 2025-12-31T22:00:00Z, 7200 s old" in lines()[1]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "tandem apply: --max-decision-age: 'soon' is not a duration (e.g. 60s, 5m, 28d)\n"),
        ("-5", "tandem apply: --max-decision-age: expected a duration >= 0 (0: no limit)\n"),
    ],
)
def test_a_bad_max_decision_age_is_one_line_and_exit_2(
    value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["apply", "--cluster", "c1", "--max-decision-age", value]) == 2
    assert capsys.readouterr().err == message
