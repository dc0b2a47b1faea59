"""The generated CRDs on a real kube-apiserver: a misspelled field is refused, upstream-style manifests pass.

``deploy/crds`` carry structural schemas generated from ``scaling/policies/fields.py``.  Objects
are created with ``fieldValidation=Strict`` (what ``kubectl apply --validate=strict`` sends): the
API server must refuse an unknown field naming its path, and accept manifests written as the
upstream projects document them (gardener/hvpa-controller's sample, Tortoise's README and
v1beta3 types, the HVPA proposal's seed form that tandem's examples use).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.test_applier_kube import install_crds

ROOT = Path(__file__).resolve().parents[2]

#: gardener/hvpa-controller config/samples/autoscaling_v1alpha1_hvpa.yaml, in full (released API, v2beta1 metrics).
HVPA_SAMPLE = yaml.safe_load(
    """
apiVersion: autoscaling.k8s.io/v1alpha1
kind: Hvpa
metadata:
  annotations: {hpa-controller: hvpa}
  name: hvpa-sample
spec:
  replicas: 1
  maintenanceTimeWindow: {begin: "220000-0000", end: "230000-0000"}
  hpa:
    selector: {matchLabels: {key1: value1}}
    deploy: true
    scaleUp: {updatePolicy: {updateMode: "Auto"}, stabilizationDuration: "3m"}
    scaleDown: {updatePolicy: {updateMode: "Auto"}, stabilizationDuration: "3m"}
    template:
      metadata: {labels: {key1: value1}}
      spec:
        maxReplicas: 3
        minReplicas: 1
        metrics:
        - {resource: {name: memory, targetAverageUtilization: 70}, type: Resource}
        - {resource: {name: cpu, targetAverageUtilization: 60}, type: Resource}
  vpa:
    selector: {matchLabels: {key2: value2}}
    deploy: true
    scaleUp:
      updatePolicy: {updateMode: "Auto"}
      stabilizationDuration: "3m"
      minChange: {cpu: {value: "3", percentage: 80}, memory: {value: "3", percentage: 80}}
    scaleDown:
      updatePolicy: {updateMode: "MaintenanceWindow"}
      stabilizationDuration: "3m"
      minChange: {cpu: {value: "3", percentage: 80}, memory: {value: "3", percentage: 80}}
    limitsRequestsGapScaleParams:
      cpu: {percentage: 80, value: "2"}
      memory: {percentage: 80, value: 3G}
    template:
      metadata: {labels: {key2: value2}}
      spec:
        resourcePolicy:
          containerPolicies:
          - {containerName: resource-consumer, maxAllowed: {memory: 3000Mi}, minAllowed: {memory: 400Mi}}
  weightBasedScalingIntervals:
  - {vpaWeight: 0, startReplicaCount: 1, lastReplicaCount: 1}
  - {vpaWeight: 100, startReplicaCount: 2, lastReplicaCount: 3}
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: resource-consumer}
"""
)

#: Tortoise v1beta3 as its README shows it, with every spec field of api/v1beta3/tortoise_types.go.
TORTOISE = yaml.safe_load(
    """
apiVersion: autoscaling.mercari.com/v1beta3
kind: Tortoise
metadata: {name: lovely-tortoise}
spec:
  updateMode: Auto
  deletionPolicy: NoDelete
  maxReplicas: 50
  targetRefs:
    horizontalPodAutoscalerName: sample-hpa
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: sample}
  autoscalingPolicy:
  - containerName: sample
    policy: {cpu: Horizontal, memory: Vertical}
  resourcePolicy:
  - containerName: sample
    minAllocatedResources: {cpu: 100m, memory: 100Mi}
    maxAllocatedResources: {cpu: "4", memory: 8Gi}
  horizontalPodAutoscalerBehavior:
    scaleDown:
      stabilizationWindowSeconds: 300
      selectPolicy: Max
      policies: [{type: Percent, value: 10, periodSeconds: 60}]
"""
)


def _policy_examples() -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "policies.yaml").read_text()) if d]
    for name in ("policy-hvpa-seed", "policy-hvpa-scale-intervals", "policy-custom-hpa", "policy-tortoise"):
        docs.append(json.loads((ROOT / "schemas" / "examples" / f"{name}.json").read_text())["policy"])
    return [HVPA_SAMPLE, TORTOISE, *docs]


PLURALS = {"Hvpa": "hvpas", "Tortoise": "tortoises", "CustomHpa": "customhpas"}


def create(api: client.ApiClient, namespace: str, manifest: dict[str, Any], name: str) -> None:
    body = copy.deepcopy(manifest)
    body["metadata"] = {**body.get("metadata", {}), "name": name, "namespace": namespace}
    group, version = body["apiVersion"].split("/")
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, namespace, PLURALS[body["kind"]], body, field_validation="Strict"
    )


@pytest.fixture
def crds(kube_api: client.ApiClient, kube_namespace: str) -> str:
    install_crds(kube_api, kube_namespace)
    return kube_namespace


def test_manifests_in_the_upstream_projects_style_are_accepted(kube_api: client.ApiClient, crds: str) -> None:
    manifests = _policy_examples()
    for i, manifest in enumerate(manifests):
        create(kube_api, crds, manifest, f"ok-{i}")
    names = {(m["kind"], m["apiVersion"].split("/")[0]) for m in manifests}
    assert names == {
        ("Hvpa", "autoscaling.k8s.io"),
        ("Hvpa", "autoscaling.gardener.cloud"),
        ("Tortoise", "autoscaling.mercari.com"),
        ("CustomHpa", "autoscaling.tandem.dev"),
    }


@pytest.mark.parametrize(
    ("manifest", "path", "typo"),
    [
        (HVPA_SAMPLE, "spec.vpa.scaleUp.stabilizationDuration", "stabilizationDuraton"),
        (HVPA_SAMPLE, "spec.hpa.template.spec.maxReplicas", "maxReplica"),
        (TORTOISE, "spec.targetRefs.scaleTargetRef", "scaleTargetRf"),
    ],
    ids=["hvpa-deep", "hvpa-template", "tortoise"],
)
def test_a_misspelled_field_is_refused_under_strict_validation_with_its_path(
    kube_api: client.ApiClient, crds: str, manifest: dict[str, Any], path: str, typo: str
) -> None:
    bad = copy.deepcopy(manifest)
    cur: Any = bad
    *parents, last = path.split(".")
    for p in parents:
        cur = cur[p]
    cur[typo] = cur.pop(last)
    with pytest.raises(ApiException) as caught:
        create(kube_api, crds, bad, "typo")
    # 400 "strict decoding error: unknown field ..." (kube-apiserver 1.36)
    assert caught.value.status == 400, caught.value.body
    wrong = ".".join([*parents, typo])
    assert f'strict decoding error: unknown field \\"{wrong}\\"' in caught.value.body, caught.value.body
