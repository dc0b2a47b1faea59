"""A small generated stream whose inputs change over time, shared by the worker's tests.

The unit tests of the merge (``tests/unit/test_ordering.py``) and the real-broker tests
(``tests/integration/test_worker_kafka.py``) both need workloads whose replicas, HPA, VPA and usage
change so that decisions come at many ticks; they use this one generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

T0 = 1762250400.0
POLICY = {
    "apiVersion": "autoscaling.k8s.io/v1alpha1",
    "kind": "Hvpa",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "annotations": {"hpa-controller": "hvpa", "tandem.dev/cluster": "c1"},
    },
    "spec": {
        "targetRef": {"kind": "Deployment", "name": "web"},
        "hpa": {"deploy": True, "template": {"spec": {"minReplicas": 1, "maxReplicas": 6}}},
        "vpa": {"deploy": True},
        "weightBasedScalingIntervals": [{"vpaWeight": 40, "startReplicaCount": 0, "lastReplicaCount": 0}],
    },
}


def generated_stream(names: Sequence[str], steps: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Workloads whose replicas, hpa, vpa and usage change over time, so decisions come at many ticks."""
    events: list[dict[str, Any]] = []
    for i in range(steps):
        ts = T0 + i * 5.0
        for j, name in enumerate(names):
            wl = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": name}
            phase = (i // 12 + j) % 4
            if i % 6 == 0:
                requests = {"cpu": "250m", "memory": "200M"}
                containers = {"app": {"requests": requests, "limits": {"memory": "1G"}}}
                events.append({"type": "workload", "ts": ts, "workload": wl, "replicas": 2, "containers": containers})
            if i % 3 == 1:
                events.append({"type": "hpa", "ts": ts, "workload": wl, "desired_replicas": 1 + phase})
            if i % 4 == 2:
                target = {"cpu": f"{200 + 100 * phase}m", "memory": f"{200 + 50 * phase}M"}
                events.append({"type": "vpa", "ts": ts, "workload": wl, "containers": {"app": {"target": target}}})
            samples = [
                {"pod": f"{name}-{k}", "container": "app", "cpu": 0.1 * (1 + phase) + 0.01 * k, "memory": 10**8 + k}
                for k in range(3)
            ]
            events.append({"type": "metric", "ts": ts, "workload": wl, "samples": samples})
    policies = []
    for name in names:
        policy = orjson.loads(orjson.dumps(POLICY))
        policy["metadata"]["name"] = name
        policy["spec"]["targetRef"]["name"] = name
        policies.append(policy)
    return events, policies
