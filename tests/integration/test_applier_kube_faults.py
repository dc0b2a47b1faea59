"""The Kubernetes API server goes away while the applier holds decisions (issue #18).

The applier talks to the real kube-apiserver through a TCP proxy; closing the proxy refuses new
connections and cuts the open ones, which is what a restarting API server does to its clients.  A
decision taken meanwhile is neither failed nor lost: it waits (``/readyz`` says why), is applied
once when the server is back, and a stop request while it waits leaves it uncommitted for the next
applier.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from edge.applier import Applier, ApplierConfig, Interrupted
from edge.kube import DEPLOYMENTS, api_client, request
from ops.observability import Metrics
from scaling.cloudevents import APPLIED
from scaling.events import WorkloadRef
from tests.fixtures.kafka import wait_for
from tests.integration.test_applier_kube import HVPA_V1, create, decision, deployment, hvpa, install_crds, read
from tests.integration.test_edge_kafka_faults import Proxy
from tests.integration.test_metrics_worker import free_port

pytestmark = [pytest.mark.kube]

TICK = 1_762_250_430.0


class Call:
    """``applier.apply`` in a thread, with its result or exception."""

    def __init__(self, applier: Applier, ev: dict[str, Any]) -> None:
        w = ev["data"]["workload"]
        self.ref = WorkloadRef(w["cluster"], w["namespace"], w["kind"], w["name"])
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, args=(applier, ev), daemon=True)
        self.thread.start()

    def _main(self, applier: Applier, ev: dict[str, Any]) -> None:
        try:
            self.result = applier.apply(ev, self.ref)
        except BaseException as exc:
            self.error = exc


def unreachable(metrics: Metrics) -> bool:
    return any(r.startswith("Kubernetes API not reachable") for r in metrics.readiness().reasons)


def test_a_decision_held_while_the_api_server_is_away_is_applied_once_when_it_returns(
    kube_apiserver: str, kube_namespace: str, tmp_path: Path
) -> None:
    admin = api_client(kube_apiserver)
    ns = kube_namespace
    setup_ns = f"tandem-faults-{uuid.uuid4().hex[:6]}"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": setup_ns}})
    install_crds(admin, setup_ns)
    create(admin, DEPLOYMENTS, ns, deployment("web"))
    create(admin, HVPA_V1, ns, hvpa("web", "web"))

    target = admin.configuration.host.removeprefix("https://")
    port = free_port()
    config = Path(kube_apiserver).read_text().replace(target, f"127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in config
    (tmp_path / "kubeconfig").write_text(config)
    api = api_client(str(tmp_path / "kubeconfig"))  # through the proxy, where nothing listens yet
    metrics = Metrics(max_event_age=0)  # as the edge runs it: old ticks are no reason to be unready
    applier = Applier(api, ApplierConfig("c1", backoff_base=0.05, backoff_cap=0.2), metrics=metrics)
    applier.stop = threading.Event()

    d1 = decision(ns, "web", replicas={"from": 2, "to": 4})
    call = Call(applier, d1)
    wait_for(
        lambda: unreachable(metrics),
        30,
        interval=0.05,
        message=lambda: f"unready: API server not reachable ({call.result}, {call.error!r})",
    )
    assert call.thread.is_alive() and call.result is None and metrics.liveness().ready
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 2

    proxy = Proxy(port, target)  # the server is back
    try:
        call.thread.join(30)
        assert call.error is None and call.result is not None
        assert call.result["type"] == APPLIED and call.result["data"]["attempts"] == 1, call.result
        assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 4
        assert metrics.readiness().ready, metrics.readiness()
        # Redelivered (its offset was not committed before the crash, say): a repeat, nothing written.
        again = Call(applier, d1)
        again.thread.join(30)
        assert again.result is not None and again.result["data"].get("repeat") is True
    finally:
        proxy.close()  # away again, cutting the open connections too

    d2 = decision(ns, "web", tick=TICK + 15, replicas={"from": 4, "to": 3})
    held = Call(applier, d2)
    wait_for(
        lambda: unreachable(metrics),
        30,
        interval=0.05,
        message=lambda: f"unready again ({held.result}, {held.error!r})",
    )
    applier.stop.set()  # the applier is stopped (SIGTERM) while it waits
    held.thread.join(30)
    assert isinstance(held.error, Interrupted) and held.result is None
    assert read(admin, DEPLOYMENTS, ns, "web")["spec"]["replicas"] == 4
