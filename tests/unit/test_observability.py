"""``ops.observability``: the metrics a scraper sees, and what /healthz and /readyz answer."""

from __future__ import annotations

import argparse
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cli.options import add_metrics_options, metrics_from_args
from ops.observability import Metrics, MetricsServer, MetricsSettings, decision_action

WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
KEY = "c1/shop/Deployment/web"


def decision(
    tick: float, *, replicas: tuple[int, int] | None = None, containers: bool = False, **extra: object
) -> dict:
    data: dict = {
        "workload": WL,
        "tick": tick,
        "policy": {"kind": "Hvpa", "name": "web", "mode": "Auto"},
        "dry_run": False,
        "blocked": [],
        "reasons": [],
        "inputs": {},
        **extra,
    }
    if replicas is not None:
        data["replicas"] = {"from": replicas[0], "to": replicas[1]}
    if containers:
        data["containers"] = {"app": {"requests": {"cpu": {"from": "100m", "to": "200m"}}}}
    return {"type": "dev.tandem.decision.v1", "subject": KEY, "data": data}


def blocked(tick: float, *reasons: str) -> dict:
    return {
        "type": "dev.tandem.blocked.v1",
        "subject": KEY,
        "data": {
            "workload": WL,
            "tick": tick,
            "policy": {"kind": "CustomHpa", "name": "web", "mode": "Auto"},
            "dry_run": False,
            "blocked": [{"target": "replicas", "reason": r} for r in reasons],
            "reasons": [],
            "inputs": {},
        },
    }


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def served() -> Iterator[tuple[Metrics, MetricsServer, Clock]]:
    clock = Clock(1_000_000.0)
    metrics = Metrics(max_lag=100, max_event_age=60, workload_series=2, clock=clock)
    server = metrics.serve(0, "127.0.0.1")
    try:
        yield metrics, server, clock
    finally:
        server.close()


def get(server: MetricsServer, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def scrape(server: MetricsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, ctype, body = get(server, "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_scraped_counters_count_events_rejections_decisions_and_blocked_reasons(served) -> None:
    metrics, server, clock = served
    metrics.observe_event("metric", ts=1000.0, n=3)
    metrics.observe_event("workload", ts=1010.0)
    metrics.observe_rejected("metric")
    metrics.observe_rejected(None)
    metrics.observe_emitted(decision(990.0, replicas=(2, 3), containers=True), arrival=clock.now - 0.2)
    metrics.observe_emitted(decision(1005.0, replicas=(3, 2)), arrival=clock.now - 0.02)
    metrics.observe_emitted(blocked(1005.0, "Cooldown", "Bounds"))
    s = scrape(server)
    assert s[("tandem_events_total", (("type", "metric"),))] == 3
    assert s[("tandem_events_total", (("type", "workload"),))] == 1
    assert s[("tandem_events_rejected_total", (("type", "metric"),))] == 1
    assert s[("tandem_events_rejected_total", (("type", "unknown"),))] == 1
    assert s[("tandem_decisions_total", (("action", "scale_out+resize"), ("kind", "Hvpa")))] == 1
    assert s[("tandem_decisions_total", (("action", "scale_in"), ("kind", "Hvpa")))] == 1
    assert s[("tandem_blocked_changes_total", (("reason", "Cooldown"),))] == 1
    assert s[("tandem_blocked_changes_total", (("reason", "Bounds"),))] == 1
    # Newest event time 1010, last emitted tick 1005.
    assert s[("tandem_tick_lag_seconds", ())] == 5.0
    assert s[("tandem_decision_latency_seconds_count", ())] == 2
    assert s[("tandem_decision_latency_seconds_sum", ())] == pytest.approx(0.22)
    assert s[("tandem_decision_latency_seconds_bucket", (("le", "0.025"),))] == 1
    assert s[("tandem_decision_latency_seconds_bucket", (("le", "0.25"),))] == 2
    assert s[("tandem_workload_replicas", (("source", "recommended"), ("workload", KEY)))] == 2


def test_applier_results_and_kube_api_latency_are_exported(served) -> None:
    metrics, server, _ = served
    metrics.observe_applier_result({"type": "dev.tandem.applied.v1", "subject": KEY}, replicas=4)
    metrics.observe_applier_result({"type": "dev.tandem.apply_failed.v1", "subject": KEY})
    metrics.observe_applier_result("refused")
    with metrics.kube_api("patch_scale"):
        pass
    with pytest.raises(RuntimeError), metrics.kube_api("apply"):
        raise RuntimeError("conflict")
    metrics.observe_kube_api("apply", 0.3)
    s = scrape(server)
    assert s[("tandem_applier_results_total", (("result", "applied"),))] == 1
    assert s[("tandem_applier_results_total", (("result", "apply_failed"),))] == 1
    assert s[("tandem_applier_results_total", (("result", "refused"),))] == 1
    assert s[("tandem_kube_api_latency_seconds_count", (("operation", "patch_scale"),))] == 1
    assert s[("tandem_kube_api_latency_seconds_count", (("operation", "apply"),))] == 2
    assert s[("tandem_kube_api_latency_seconds_bucket", (("le", "0.5"), ("operation", "apply")))] == 2
    assert s[("tandem_workload_replicas", (("source", "applied"), ("workload", KEY)))] == 4


def test_workload_replica_gauges_stop_at_the_cap_and_count_what_they_drop(served) -> None:
    metrics, server, _ = served
    assert metrics.set_workload_replicas("c/n/Deployment/a", "recommended", 1)
    assert metrics.set_workload_replicas("c/n/Deployment/b", "recommended", 2)
    assert metrics.set_workload_replicas("c/n/Deployment/a", "applied", 3)  # known workload: still exported
    assert not metrics.set_workload_replicas("c/n/Deployment/c", "recommended", 4)
    s = scrape(server)
    workloads = {dict(labels)["workload"] for (name, labels) in s if name == "tandem_workload_replicas"}
    assert workloads == {"c/n/Deployment/a", "c/n/Deployment/b"}
    assert s[("tandem_workload_series_dropped_total", ())] == 1


def test_dry_run_decisions_count_as_dry_run_and_set_no_recommendation() -> None:
    assert decision_action(decision(0, replicas=(2, 3), dry_run=True)["data"]) == "dry_run"
    assert decision_action(decision(0, containers=True, hpa={"min_replicas": {"from": 1, "to": 2}})["data"]) == (
        "resize+hpa"
    )
    metrics = Metrics()
    metrics.observe_emitted(decision(0, replicas=(2, 3), dry_run=True))
    names = {s.name for f in text_string_to_metric_families(metrics.exposition().decode()) for s in f.samples}
    assert "tandem_workload_replicas" not in names


def test_two_metrics_objects_in_one_process_do_not_share_counters() -> None:
    a, b = Metrics(), Metrics()
    a.observe_event("metric")
    assert b"tandem_events_total{" not in b.exposition()
    assert b'tandem_events_total{type="metric"} 1.0' in a.exposition()


def test_healthz_is_ok_until_the_process_declares_itself_dead(served) -> None:
    metrics, server, _ = served
    assert get(server, "/healthz")[::2] == (200, "ok\n")
    metrics.set_alive(False, "event loop stalled")
    assert get(server, "/healthz")[::2] == (503, "event loop stalled\n")
    assert get(server, "/nope")[0] == 404


def test_readyz_fails_when_the_lag_passes_its_threshold_and_recovers(served) -> None:
    metrics, server, _ = served
    assert get(server, "/readyz")[::2] == (200, "ok\n")  # nothing processed yet: no age to be late about
    metrics.record_lag(100)
    assert get(server, "/readyz")[0] == 200
    metrics.record_lag(101)
    assert get(server, "/readyz")[::2] == (503, "consumer lag 101 messages > 100\n")
    metrics.record_lag(0)
    assert get(server, "/readyz")[0] == 200
    assert scrape(server)[("tandem_consumer_lag_messages", ())] == 0


def test_readyz_fails_when_the_last_processed_event_gets_too_old(served) -> None:
    metrics, server, clock = served
    metrics.record_processed(clock.now - 60, clock.now)
    assert get(server, "/readyz")[0] == 200
    clock.now += 1
    assert get(server, "/readyz")[::2] == (503, "last processed event is 61 s old > 60 s\n")
    metrics.record_processed(clock.now - 5)
    assert get(server, "/readyz")[0] == 200
    metrics.record_processed(clock.now - 500)  # an older event does not make the worker look late
    assert get(server, "/readyz")[0] == 200
    assert scrape(server)[("tandem_last_processed_event_timestamp_seconds", ())] == clock.now - 5


def test_zero_thresholds_disable_the_readiness_checks() -> None:
    metrics = Metrics(max_lag=0, max_event_age=0, clock=lambda: 1e9)
    metrics.record_lag(10**9)
    metrics.record_processed(0.0)
    assert metrics.readiness().ready


def test_options_come_from_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_READY_MAX_LAG", "7")
    monkeypatch.setenv("TANDEM_METRICS_PORT", "0")
    p = argparse.ArgumentParser()
    add_metrics_options(p)
    args = p.parse_args(["--ready-max-event-age", "30"])
    metrics, server = metrics_from_args(args)
    assert server is None  # port 0 on the command line or in the environment: no server
    assert (metrics.max_lag, metrics.max_event_age) == (7, 30.0)
    args = p.parse_args(["--metrics-port", "0"])
    assert args.metrics_port == 0


def test_metrics_settings_come_from_a_mapping_of_option_values() -> None:
    settings = MetricsSettings.from_mapping({"metrics_port": "0", "ready_max_lag": 7, "ready_max_event_age": "30"})
    assert settings == MetricsSettings(port=0, addr="0.0.0.0", max_lag=7, max_event_age=30.0, workload_series=200)
    assert MetricsSettings.from_mapping({}) == MetricsSettings()
