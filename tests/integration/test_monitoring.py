"""The chart's monitoring objects (issue 33): the alerts checked and exercised by ``promtool``, the
Grafana dashboard's queries checked against the metrics tandem exports, the ServiceMonitor and PodMonitor
aimed at the pods that serve ``/metrics``.

``promtool`` is Debian's ``prometheus`` package (``scripts/test.sh`` installs it with apt-get as root);
``helm`` as in test_deploy_manifests.py.  Both skip, saying so, where missing.  The objects are applied
to a real kube-apiserver with the Prometheus Operator's CRDs in test_deploy_manifests.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_deploy_manifests import CHART, MONITORING, by_kind, needs_helm, render

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed: Debian's prometheus package (apt-get install prometheus)"
)
NS = "tandem-system"


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def rules_file(tmp_path: Path, *sets: str) -> Path:
    (rule,) = by_kind(
        render(NS, "edge.cluster=eu-1", "metrics.prometheusRule.enabled=true", *sets), "PrometheusRule"
    ).values()
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return path


def exported_metrics() -> set[str]:
    """Every series name a tandem process exports (histograms with their _bucket, _sum, _count)."""
    from ops.observability import Metrics

    names = set()
    for line in Metrics().exposition().decode().splitlines():
        match = re.fullmatch(r"# TYPE (tandem_\w+) (counter|gauge|histogram)", line)
        if match and not match[1].endswith("_created"):
            names.add(match[1])
            if match[2] == "histogram":
                names |= {f"{match[1]}_bucket", f"{match[1]}_sum", f"{match[1]}_count"}
    return names


@needs_helm
def test_monitoring_objects_are_off_by_default() -> None:
    kinds = {d["kind"] for d in render(NS, "edge.cluster=eu-1")}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert set(by_kind(render(NS, "edge.cluster=eu-1"), "ConfigMap")) == set()


@needs_helm
def test_service_monitor_selects_the_worker_service_and_pod_monitor_the_edge_pods() -> None:
    docs = render(NS, "edge.cluster=eu-1", "metrics.serviceMonitor.labels.release=kube-prometheus-stack", *MONITORING)
    (sm,) = by_kind(docs, "ServiceMonitor").values()
    (pm,) = by_kind(docs, "PodMonitor").values()
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = by_kind(docs, "Service")["tandem-worker"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    assert [p["name"] for p in service["spec"]["ports"]].count("metrics") == 1
    assert sm["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]

    def selects(labels: dict[str, str]) -> bool:
        sel = pm["spec"]["selector"]
        return sel["matchLabels"].items() <= labels.items() and all(
            labels.get(e["key"]) in e["values"] for e in sel["matchExpressions"]
        )

    templates = {
        name: d["spec"]["template"]
        for name, d in {**by_kind(docs, "Deployment"), **by_kind(docs, "StatefulSet")}.items()
    }
    assert {name for name, t in templates.items() if selects(t["metadata"]["labels"])} == {
        "tandem-collector",
        "tandem-applier",
    }
    for name in ("tandem-collector", "tandem-applier"):
        (c,) = templates[name]["spec"]["containers"]
        assert [p["name"] for p in c["ports"]] == ["metrics"]
    assert pm["spec"]["podMetricsEndpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    # Only the part that is installed gets its monitor.
    central = {d["kind"] for d in render(NS, "edge.enabled=false", *MONITORING)}
    edge = {d["kind"] for d in render(NS, "edge.cluster=eu-1", "worker.enabled=false", *MONITORING)}
    assert "ServiceMonitor" in central and "PodMonitor" not in central
    assert "PodMonitor" in edge and "ServiceMonitor" not in edge


@needs_helm
@needs_promtool
def test_alert_rules_pass_promtool_check_rules(tmp_path: Path) -> None:
    path = rules_file(tmp_path)
    out = promtool("check", "rules", str(path), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 5 rules found" in out.stdout
    alerts = [r["alert"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]]
    assert alerts == [
        "TandemInputsRejected",
        "TandemConsumerLagHigh",
        "TandemInputStalled",
        "TandemApplyFailed",
        "TandemDecisionsSlow",
    ]
    exprs = {r["expr"] for g in yaml.safe_load(path.read_text())["groups"] for r in g["rules"]}
    names = set(re.findall(r"\btandem_\w+", " ".join(exprs)))
    assert names <= exported_metrics(), names - exported_metrics()


def alert(name: str, labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", **labels},
        "exp_annotations": {"summary": summary, "description": description},
    }


W0 = {"namespace": NS, "pod": "tandem-worker-0"}
APPLIER = {"namespace": NS, "pod": "tandem-applier-7d9f-x2"}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


#: Each alert: series that make it fire and series beside them that must not (another pod, another label
#: value, a value under the threshold), and a time before its `for:` has passed.
PROMTOOL_TESTS: list[dict[str, Any]] = [
    {
        "interval": "1m",
        "input_series": [
            series("tandem_events_rejected_total", {**W0, "type": "metric"}, "0+1x30"),  # rejecting
            series("tandem_events_rejected_total", {**W0, "type": "hpa"}, "7+0x30"),  # rejected once, long ago
        ],
        "alert_rule_test": [
            {"eval_time": "4m", "alertname": "TandemInputsRejected", "exp_alerts": []},  # pending (for: 5m)
            {
                "eval_time": "12m",
                "alertname": "TandemInputsRejected",
                "exp_alerts": [
                    alert(
                        "TandemInputsRejected",
                        {**W0, "type": "metric"},
                        "tandem rejects metric input events",
                        f"{NS}/tandem-worker-0 sends metric events that fail validation to the dead-letter topic "
                        "tandem.deadletter.",
                    )
                ],
            },
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("tandem_consumer_lag_messages", W0, "0+1000x30"),  # above 10000 from 11m
            series("tandem_consumer_lag_messages", {**W0, "pod": "tandem-worker-1"}, "9999+0x30"),
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "TandemConsumerLagHigh", "exp_alerts": []},  # pending since 11m
            {
                "eval_time": "25m",
                "alertname": "TandemConsumerLagHigh",
                "exp_alerts": [
                    alert(
                        "TandemConsumerLagHigh",
                        W0,
                        "tandem tandem-worker-0 falls behind its input",
                        f"{NS}/tandem-worker-0 is 25000 messages behind the ends of its partitions "
                        "(alert above 10000).",
                    )
                ],
            },
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("tandem_input_stalled", {**W0, "topic": "tandem.metrics", "partition": "3"}, "0x5 1x20"),
            series("tandem_input_stalled", {**W0, "topic": "tandem.metrics", "partition": "4"}, "0x26"),
        ],
        "alert_rule_test": [
            {"eval_time": "9m", "alertname": "TandemInputStalled", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "TandemInputStalled",
                "exp_alerts": [
                    alert(
                        "TandemInputStalled",
                        {**W0, "topic": "tandem.metrics", "partition": "3"},
                        "tandem tandem-worker-0 makes no progress on tandem.metrics[3]",
                        f"{NS}/tandem-worker-0 has lag on tandem.metrics partition 3 and has processed nothing from it "
                        "(worker --stall-timeout).",
                    )
                ],
            },
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("tandem_applier_results_total", {**APPLIER, "result": "apply_failed"}, "0x10 1+0x20"),
            series("tandem_applier_results_total", {**APPLIER, "result": "applied"}, "0+5x30"),
            series("tandem_applier_results_total", {**APPLIER, "result": "refused"}, "0+1x30"),
        ],
        "alert_rule_test": [
            {"eval_time": "8m", "alertname": "TandemApplyFailed", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "TandemApplyFailed",
                "exp_alerts": [
                    alert(
                        "TandemApplyFailed",
                        APPLIER,
                        "tandem tandem-applier-7d9f-x2 fails to apply decisions",
                        f"{NS}/tandem-applier-7d9f-x2: the API server refused decisions or kept failing after the "
                        "retries; the audit topic tandem.audit has the apply_failed events.",
                    )
                ],
            },
            {"eval_time": "29m", "alertname": "TandemApplyFailed", "exp_alerts": []},  # 15m after the failure
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            # tandem-system: every decision between 1 s and 30 s (p99 29.7 s); fast: all under 1 s.
            series("tandem_decision_latency_seconds_bucket", {"namespace": NS, "le": "1"}, "0x30"),
            series("tandem_decision_latency_seconds_bucket", {"namespace": NS, "le": "30"}, "0+10x30"),
            series("tandem_decision_latency_seconds_bucket", {"namespace": NS, "le": "+Inf"}, "0+10x30"),
            series("tandem_decision_latency_seconds_bucket", {"namespace": "fast", "le": "1"}, "0+10x30"),
            series("tandem_decision_latency_seconds_bucket", {"namespace": "fast", "le": "30"}, "0+10x30"),
            series("tandem_decision_latency_seconds_bucket", {"namespace": "fast", "le": "+Inf"}, "0+10x30"),
        ],
        "alert_rule_test": [
            {"eval_time": "8m", "alertname": "TandemDecisionsSlow", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "TandemDecisionsSlow",
                "exp_alerts": [
                    alert(
                        "TandemDecisionsSlow",
                        {"namespace": NS},
                        f"tandem decisions in {NS} are slow",
                        "The 99th percentile of the time from an input's arrival to its decision "
                        "(tandem_decision_latency_seconds) has been above 10 s for 10 minutes.",
                    )
                ],
            },
        ],
    },
]


@needs_helm
@needs_promtool
def test_each_alert_fires_on_its_series_and_not_on_the_healthy_ones(tmp_path: Path) -> None:
    rules_file(tmp_path)
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": PROMTOOL_TESTS})
    )
    out = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    tested = {t["alertname"] for case in PROMTOOL_TESTS for t in case["alert_rule_test"]}
    rules = yaml.safe_load((tmp_path / "rules.yaml").read_text())["groups"][0]["rules"]
    assert tested == {r["alert"] for r in rules}


@needs_helm
@needs_promtool
def test_thresholds_follow_the_values(tmp_path: Path) -> None:
    path = rules_file(
        tmp_path,
        "metrics.prometheusRule.maxConsumerLag=2500000",
        "metrics.prometheusRule.maxDecisionLatencySeconds=3",
    )
    exprs = {r["alert"]: r["expr"] for r in yaml.safe_load(path.read_text())["groups"][0]["rules"]}
    assert exprs["TandemConsumerLagHigh"] == "max by (namespace, pod) (tandem_consumer_lag_messages) > 2500000"
    assert exprs["TandemDecisionsSlow"].endswith(") > 3")
    assert promtool("check", "rules", str(path), cwd=tmp_path).returncode == 0


@needs_helm
@needs_promtool
def test_dashboard_queries_are_valid_promql_over_exported_metrics_only(tmp_path: Path) -> None:
    docs = render(
        NS, "edge.cluster=eu-1", "metrics.dashboard.enabled=true", "metrics.dashboard.annotations.grafana_folder=tandem"
    )
    cm = by_kind(docs, "ConfigMap")["tandem-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the Grafana sidecar's default label
    assert cm["metadata"]["annotations"] == {"grafana_folder": "tandem"}
    shipped = (CHART / "files" / "dashboard.json").read_text()
    assert cm["data"]["tandem.json"] == shipped.rstrip("\n")
    dashboard = json.loads(cm["data"]["tandem.json"])
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) == 15
    # Grafana's variables as Prometheus would see them once substituted.
    concrete = [e.replace("$__rate_interval", "5m").replace("$namespace", ".*") for e in exprs]
    groups = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"panel:{i}", "expr": e} for i, e in enumerate(concrete)]}
        ]
    }
    (tmp_path / "dashboard-rules.yaml").write_text(yaml.safe_dump(groups))
    out = promtool("check", "rules", "dashboard-rules.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    used = set(re.findall(r"\btandem_\w+", " ".join(exprs)))
    assert used <= exported_metrics(), used - exported_metrics()
    # What the issue asks to see: decisions, held-back (blocked) changes, lag, stalls, applier results, refusals.
    assert {
        "tandem_decisions_total",
        "tandem_blocked_changes_total",
        "tandem_consumer_lag_messages",
        "tandem_tick_lag_seconds",
        "tandem_input_stalled",
        "tandem_applier_results_total",
        "tandem_events_rejected_total",
    } <= used
    assert any('result="refused"' in e for e in exprs)
