"""tandem's HPA replica calculation side by side with the controller's own code: cases, both sides.

The upstream side is ``tests/oracle/hpa`` (a Go program over ``ReplicaCalculator.GetResourceReplicas``
of k8s.io/kubernetes v1.36.3 with its real resource-metrics client over a fake metrics clientset,
built by ``scripts/oracle.sh fetch``); the tandem side is
``scaling.recommend.hpa.replica_calculator.resource_utilization_replicas``, what tandem's HPA runs
for a Resource or ContainerResource metric with a Utilization target.  A case is one reconcile's
pods (ready, unready, pending, failed, being deleted; with and without metrics, with containers
missing from the metrics or lacking the resource), their requests (the template's or per pod) and
usage, the target, the tolerances and the controller's CPU initialization flags.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

from scaling.recommend.hpa.config import HpaConfig
from scaling.recommend.hpa.metric_specs import MetricSpec
from scaling.recommend.hpa.model import MetricInputs, PodInfo
from scaling.recommend.hpa.replica_calculator import Ctx, MetricError, Tolerances, resource_utilization_replicas

from .vpa_streams import oracle_digest

ROOT = Path(__file__).resolve().parents[2]
#: tandem's "now" for a case; upstream's is the wall clock (ages are whole seconds before it).
NOW = 1_700_000_000.0
Case = dict[str, Any]


def oracle_binary() -> Path:
    """Where ``scripts/oracle.sh fetch`` puts the HPA oracle (``TANDEM_HPA_ORACLE`` wins)."""
    given = os.environ.get("TANDEM_HPA_ORACLE")
    if given:
        return Path(given)
    cache = Path(os.environ.get("TANDEM_CACHE") or Path.home() / ".cache" / "tandem")
    return cache / "oracle" / f"hpa-{oracle_digest('hpa')}" / "hpa-oracle"


def run_upstream(cases: list[Case], binary: Path | None = None) -> list[dict[str, Any]]:
    text = "".join(json.dumps(c, separators=(",", ":")) + "\n" for c in cases)
    done = subprocess.run(
        [str(binary or oracle_binary())], input=text.encode(), capture_output=True, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"hpa-oracle failed (exit {done.returncode}): {done.stderr.decode()[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def run_tandem(case: Case) -> dict[str, Any]:
    pods = tuple(
        PodInfo(p["name"], p["ready"], p["phase"], NOW - p["startAge"], NOW - p["readyAge"], p["deleting"])
        for p in case["pods"]
    )
    resource = case["resource"]
    usage: dict[str, dict[str, dict[str, int]]] = {}
    sample_ts: dict[str, float] = {}
    for p in case["pods"] + case.get("unlisted", []):
        if p["usage"] is not None:
            usage[p["name"]] = {c: ({resource: v} if v >= 0 else {}) for c, v in sorted(p["usage"].items())}
            sample_ts[p["name"]] = NOW - p["metricAge"]
    per_pod = {
        p["name"]: {c: ({resource: p["requests"][c]} if c in p["requests"] else {}) for c in p["containers"]}
        for p in case["pods"]
    }
    template = case.get("template")
    inputs = MetricInputs(
        pod_usage=usage,
        container_requests=per_pod[case["pods"][0]["name"]] if template and case["pods"] else {},
        pod_requests={} if template else per_pod,
        sample_ts=sample_ts,
        sample_window=float(case["window"]),
    )
    cfg = HpaConfig(
        tolerance=case["tolerance"][0],
        cpu_initialization_period=float(case["cpuInit"]),
        initial_readiness_delay=float(case["readinessDelay"]),
    )
    ctx = Ctx(pods, inputs, NOW, cfg, Tolerances(*case["tolerance"]), case["current"], case["current"])
    spec = MetricSpec(
        index=0,
        type="ContainerResource" if case["container"] else "Resource",
        name=resource,
        container=case["container"],
        target_type="Utilization",
        average_utilization=case["target"],
    )
    try:
        replicas, utilization, raw = resource_utilization_replicas(ctx, spec)
    except MetricError as exc:
        return {"error": str(exc)}
    return {"replicas": replicas, "utilization": utilization, "raw": raw}


def same(tandem: dict[str, Any], upstream: dict[str, Any]) -> bool:
    """Equal results, or both an error (the texts are not compared)."""
    if "error" in tandem or "error" in upstream:
        return "error" in tandem and "error" in upstream
    return tandem == upstream


def random_case(rng: random.Random) -> Case:
    """One reconcile: 1-12 pods of 1-2 containers, a mix of states, metrics and requests."""
    resource = rng.choice(["cpu", "cpu", "memory"])
    containers = ["app"] if rng.random() < 0.6 else ["app", "sidecar"]
    container = rng.choice(containers) if rng.random() < 0.3 else ""
    template = rng.random() < 0.5
    base_req = {
        c: (rng.choice([100, 250, 500, 1000, 1500]) if resource == "cpu" else rng.choice([64, 256, 512, 1024]) << 20)
        for c in containers
    }
    cpu_init = rng.choice([0, 30, 120, 300])
    delay = rng.choice([0, 10, 30])
    window = rng.choice([15, 30, 60])
    level = rng.uniform(0.2, 2.5)  # usage / request around which the pods are drawn
    pods: list[dict[str, Any]] = []
    for i in range(rng.randint(1, 12)):
        start = rng.choice([5, 20, 60, 119, 120, 121, 299, 300, 301, 600, 3600, 86400])
        ready_age = rng.randint(0, start) if rng.random() < 0.8 else start + rng.choice([0, 5])
        requests = dict(base_req) if template else {c: int(v * rng.choice([0.5, 1, 1, 2])) for c, v in base_req.items()}
        if not template and rng.random() < 0.005:
            requests.pop(rng.choice(containers))  # a container without a request: an error
        usage: dict[str, int] | None = {c: max(0, int(v * level * rng.uniform(0.6, 1.4))) for c, v in requests.items()}
        for c in containers:
            if usage is not None and c not in usage:
                usage[c] = int(base_req[c] * level)
        r = rng.random()
        if r < 0.1:
            usage = None  # no metrics for the pod
        elif r < 0.13 and usage is not None:
            usage[rng.choice(containers)] = -1  # a container without a value for the resource
        elif r < 0.15 and usage is not None and len(containers) == 2:
            usage.pop(rng.choice(containers))  # a container missing from the metrics
        phase = rng.choices(["Running", "Pending", "Failed", "Succeeded"], [0.85, 0.07, 0.05, 0.03])[0]
        pods.append(
            {
                "name": f"web-{i}",
                "phase": phase,
                "ready": rng.random() < 0.85,
                "startAge": start,
                "readyAge": ready_age,
                "deleting": rng.random() < 0.04,
                "containers": containers,
                "requests": requests,
                "usage": usage,
                "metricAge": rng.choice([0, 5, 15, 30, 60]),
            }
        )
    if template:
        first = pods[0]["requests"]
        for p in pods:
            p["requests"] = dict(first)
    unlisted = []
    if rng.random() < 0.05:  # metrics of a pod the lister does not return
        unlisted.append({"name": "gone-0", "usage": {c: int(v * level) for c, v in base_req.items()}, "metricAge": 0})
    tol = rng.choice([0.1, 0.1, 0.0, 0.05, 0.2])
    return {
        "resource": resource,
        "container": container,
        "target": rng.choice([10, 50, 70, 80, 100, 150]),
        "current": max(1, len(pods) + rng.choice([-2, -1, 0, 0, 0, 1, 3])),
        "tolerance": [tol, rng.choice([tol, tol, 0.0, 0.3])],
        "cpuInit": cpu_init,
        "readinessDelay": delay,
        "window": window,
        "template": template,
        "pods": pods,
        "unlisted": unlisted,
    }


def random_cases(seed: int, n: int) -> list[Case]:
    rng = random.Random(seed)
    return [random_case(rng) for _ in range(n)]
