"""Integration tests against a real kube-apiserver + etcd (scripts/kube.sh, tests/fixtures/kube.py).

These exercise exactly the API paths tandem's actuator relies on: Deployments, the ``scale`` subresource,
server-side apply of container resources under the ``tandem`` field manager, and CustomResourceDefinitions.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.fixtures.kube import wait_for_crd_established, wait_until

pytestmark = pytest.mark.kube

APP = "web"
CONTAINER = "app"


def _deployment(name: str) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=2,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[
                        client.V1Container(
                            name=CONTAINER,
                            image="registry.k8s.io/pause:3.10",
                            resources=client.V1ResourceRequirements(
                                requests={"cpu": "100m", "memory": "64Mi"},
                                limits={"cpu": "200m", "memory": "128Mi"},
                            ),
                        )
                    ]
                ),
            ),
        ),
    )


def _resources_apply(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, object]:
    """The smallest apply configuration that owns one container's resources (and nothing else)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": CONTAINER, "resources": {"requests": requests, "limits": limits}}]}
            }
        },
    }


def test_deployment_scale_and_server_side_apply(kube_api: client.ApiClient, kube_namespace: str) -> None:
    apps = client.AppsV1Api(kube_api)
    ns = kube_namespace

    created = apps.create_namespaced_deployment(ns, _deployment(APP), field_manager="tandem-test")
    assert created.spec.replicas == 2
    res = created.spec.template.spec.containers[0].resources
    assert res.requests == {"cpu": "100m", "memory": "64Mi"}
    assert res.limits == {"cpu": "200m", "memory": "128Mi"}

    # Horizontal: the scale subresource (what an HPA-style actuator writes).
    scale = apps.read_namespaced_deployment_scale(APP, ns)
    assert scale.spec.replicas == 2
    patched = apps.patch_namespaced_deployment_scale(APP, ns, {"spec": {"replicas": 5}})
    assert patched.spec.replicas == 5
    assert apps.read_namespaced_deployment_scale(APP, ns).spec.replicas == 5
    assert apps.read_namespaced_deployment(APP, ns).spec.replicas == 5

    # Vertical: server-side apply of the container's resources under the `tandem` field manager.
    requests = {"cpu": "250m", "memory": "96Mi"}
    limits = {"cpu": "500m", "memory": "192Mi"}
    apply_cfg = _resources_apply(APP, requests, limits)

    # 1) As raw YAML text through the low-level client, without force: the fields are owned by the
    #    creator ("tandem-test"), so the apiserver must answer 409 Conflict and change nothing.
    method, url, headers, _body, _post_params = kube_api.param_serialize(
        method="PATCH",
        resource_path="/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
        path_params={"namespace": ns, "name": APP},
        query_params=[("fieldManager", "tandem")],
        header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    response = kube_api.call_api(method, url, header_params=headers, body=yaml.safe_dump(apply_cfg))
    response.read()
    assert response.status == 409, response.data
    status = json.loads(response.data)
    assert status["reason"] == "Conflict"
    assert "tandem-test" in status["message"]
    unchanged = apps.read_namespaced_deployment(APP, ns).spec.template.spec.containers[0].resources
    assert unchanged.requests == {"cpu": "100m", "memory": "64Mi"}

    # 2) Forced apply through the typed client: tandem takes ownership of the resources fields.
    applied = apps.patch_namespaced_deployment(
        APP,
        ns,
        apply_cfg,
        field_manager="tandem",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    assert applied.spec.template.spec.containers[0].resources.requests == requests

    got = apps.read_namespaced_deployment(APP, ns)
    container = got.spec.template.spec.containers[0]
    assert container.name == CONTAINER
    assert container.image == "registry.k8s.io/pause:3.10"  # untouched: not in the apply configuration
    assert container.resources.requests == requests
    assert container.resources.limits == limits
    assert got.spec.replicas == 5  # the apply did not touch replicas
    managers = {(m.manager, m.operation) for m in got.metadata.managed_fields}
    assert ("tandem", "Apply") in managers
    tandem_fields = next(m for m in got.metadata.managed_fields if m.manager == "tandem").fields_v1
    assert "f:resources" in json.dumps(tandem_fields)

    # Re-applying the same configuration is a no-op (no new generation).
    again = apps.patch_namespaced_deployment(
        APP, ns, apply_cfg, field_manager="tandem", _content_type="application/apply-patch+yaml"
    )
    assert again.metadata.generation == got.metadata.generation


def test_custom_resource_definition(kube_api: client.ApiClient, kube_namespace: str) -> None:
    ext = client.ApiextensionsV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    group = f"t{uuid.uuid4().hex[:8]}.tandem.test"
    plural = "widgets"
    crd_name = f"{plural}.{group}"
    crd = client.V1CustomResourceDefinition(
        api_version="apiextensions.k8s.io/v1",
        kind="CustomResourceDefinition",
        metadata=client.V1ObjectMeta(name=crd_name),
        spec=client.V1CustomResourceDefinitionSpec(
            group=group,
            scope="Namespaced",
            names=client.V1CustomResourceDefinitionNames(
                plural=plural, singular="widget", kind="Widget", list_kind="WidgetList"
            ),
            versions=[
                client.V1CustomResourceDefinitionVersion(
                    name="v1",
                    served=True,
                    storage=True,
                    schema=client.V1CustomResourceValidation(
                        open_apiv3_schema=client.V1JSONSchemaProps(
                            type="object",
                            properties={
                                "spec": client.V1JSONSchemaProps(
                                    type="object",
                                    required=["size"],
                                    properties={
                                        "size": client.V1JSONSchemaProps(type="integer", minimum=1),
                                    },
                                )
                            },
                        )
                    ),
                )
            ],
        ),
    )
    ext.create_custom_resource_definition(crd)
    try:
        wait_for_crd_established(kube_api, crd_name, timeout=30)

        body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}

        def create() -> bool:
            # Established can precede the serving handler by a moment: retry 404 within the deadline.
            try:
                custom.create_namespaced_custom_object(group, "v1", kube_namespace, plural, body)
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        wait_until(create, 30, message=f"creating a {crd_name} object")
        got = custom.get_namespaced_custom_object(group, "v1", kube_namespace, plural, "w1")
        assert got["spec"] == {"size": 3}
        assert got["kind"] == "Widget"

        # The structural schema is enforced by the apiserver.
        bad = {**body, "metadata": {"name": "w2"}, "spec": {"size": 0}}
        with pytest.raises(ApiException) as info:
            custom.create_namespaced_custom_object(group, "v1", kube_namespace, plural, bad)
        assert info.value.status == 422
    finally:
        ext.delete_custom_resource_definition(crd_name)
