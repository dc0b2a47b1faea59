"""A real ``410 Gone`` for the collector's watch (issue #18, "the edge under faults").

The collector resumes each watch from the last resourceVersion it saw.  When etcd has compacted
that version away, the API server answers the resumed watch with ``410 Gone``; the collector must
relist and turn what vanished meanwhile into events, losing nothing.  To provoke it for real this
module starts its own etcd and kube-apiserver with ``--watch-cache=false`` (with the watch cache the
server would replay recent events from memory and never say 410 for a short outage), cuts the
collector off through a TCP proxy, deletes a policy and a pod, compacts etcd at its current
revision through etcd's own API, and lets the collector back in.
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3

from edge.kube import DEPLOYMENTS, PODS, api_client, request
from tests.integration.test_applier_kube import REPO, create, deployment, hvpa, install_crds
from tests.integration.test_collector_kube import HVPA_V1, Running, pod, pod_status, running, write_status
from tests.integration.test_edge_kafka_faults import Proxy
from tests.integration.test_metrics_worker import free_port

pytestmark = [pytest.mark.kube]

__all__ = ["running"]  # the fixture, imported for this module's tests


@pytest.fixture(scope="module")
def uncached_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(kubeconfig, etcd client port) of a private etcd + kube-apiserver without the watch cache."""
    state = tmp_path_factory.mktemp("kube-nocache")
    env = {**os.environ, "TANDEM_KUBE_APISERVER_ARGS": "--watch-cache=false"}
    script = str(REPO / "scripts" / "kube.sh")
    started = subprocess.run([script, "start", str(state)], env=env, capture_output=True, text=True, timeout=600)
    try:
        assert started.returncode == 0, started.stderr[-4000:]
        yield started.stdout.strip().splitlines()[-1], int((state / "etcd.port").read_text())
    finally:
        subprocess.run([script, "stop", str(state)], capture_output=True, timeout=120)


def compact_etcd(port: int) -> int:
    """Compact etcd at its current revision (etcd's JSON gateway, ``/v3/kv/compaction``)."""
    http = urllib3.PoolManager()
    base = f"http://127.0.0.1:{port}/v3/kv"
    probe = http.request("POST", f"{base}/range", body=orjson.dumps({"key": base64.b64encode(b"/").decode()}))
    revision = int(orjson.loads(probe.data)["header"]["revision"])
    done = http.request("POST", f"{base}/compaction", body=orjson.dumps({"revision": str(revision), "physical": True}))
    assert done.status == 200, done.data
    return revision


def pods_of_last_workload(r: Running, name: str) -> list[str]:
    events = r.events("workload", name)
    return [p["name"] for p in events[-1].get("pods", [])] if events else []


def test_a_watch_resumed_past_compaction_gets_410_relists_and_reports_what_vanished(
    uncached_apiserver: tuple[str, int],
    kafka_broker: str,
    running: list[Running],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kubeconfig, etcd_port = uncached_apiserver
    admin = api_client(kubeconfig)
    ns = f"tandem-gone-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    install_crds(admin, ns)
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))
    for name in ("web-0", "web-1"):
        create(admin, PODS, ns, pod(name, "web"))
        write_status(admin, PODS, ns, name, pod_status(True))

    # The collector reaches the API server only through the proxy.
    target = admin.configuration.host.removeprefix("https://")
    port = free_port()
    config = Path(kubeconfig).read_text().replace(target, f"127.0.0.1:{port}")
    (tmp_path / "kubeconfig").write_text(config)
    proxy = Proxy(port, target)
    caplog.set_level(logging.INFO, logger="tandem.collector")
    r = Running(api_client(str(tmp_path / "kubeconfig")), kafka_broker, ns, watch_timeout=300)
    running.append(r)
    r.wait(
        lambda r: r.events("policy", "web") and pods_of_last_workload(r, "web") == ["web-0", "web-1"],
        "the policy and both pods",
    )
    lists: dict[str, Any] = dict(r.state.lists)
    n_policy = len(r.events("policy", "web"))

    proxy.close()  # the collector loses the API server; its watches keep their resourceVersions
    try:
        request(admin, "DELETE", HVPA_V1.path(ns, "web"))
        request(admin, "DELETE", PODS.path(ns, "web-1"))
        compact_etcd(etcd_port)  # every version the collector holds is gone now
    finally:
        proxy = Proxy(port, target)
    try:
        r.wait(
            lambda r: r.events("policy", "web")[-1]["policy"] is None and pods_of_last_workload(r, "web") == ["web-0"],
            "the vanished policy and pod reported after the relist",
            timeout=90,
        )
        assert "resourceVersion" in caplog.text and "expired; relisting" in caplog.text
        # One relist each for the watches that got 410; the deletion is reported once.
        for bucket in (f"{PODS.plural}.{PODS.group}", f"{HVPA_V1.plural}.{HVPA_V1.group}"):
            assert r.state.lists[bucket] == lists[bucket] + 1, (bucket, r.state.lists, lists)
        assert [e["policy"] for e in r.events("policy", "web")[n_policy:]] == [None]
    finally:
        proxy.close()
