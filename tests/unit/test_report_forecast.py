"""The report draws ``spec.predictive``'s forecasts beside the replicas and the HPA's
recommendation: a hollow circle per pre-scale at the time and load it forecast (issue 36)."""

from __future__ import annotations

from typing import Any

import orjson

from analysis.audit import AuditEvent
from analysis.report.charts import FORECAST, Axis, forecasts, replica_range, replicas_chart
from analysis.report.collect import WorkloadData

TICK = 1_762_851_540.0  # 2025-11-11T08:59:00Z


def decision(ts: float, n: int, inputs: dict[str, Any]) -> AuditEvent:
    data = {"tick": ts, "blocked": [], "replicas": {"from": 2, "to": 4}, "inputs": inputs}
    event = {"id": f"e{n}", "type": "dev.tandem.decision.v1", "data": data}
    return AuditEvent(orjson.dumps(event), event, ts, n)


def test_each_pre_scale_draws_its_forecast_on_the_replicas_chart() -> None:
    forecast = {"load": 10.0, "at": TICK + 75, "horizon": 75.0, "reactive_replicas": 2, "replicas": 4}
    pre = decision(TICK, 1, {"replicas": 2, "forecast": forecast})
    plain = decision(TICK + 600, 2, {"replicas": 4})
    w = WorkloadData("eu-1/shop/Deployment/web", replicas=[(TICK - 60, 2), (TICK + 60, 4)], events=[pre, plain])
    assert forecasts(w) == [(pre, TICK + 75, 10.0)]
    assert replica_range(w, [])[1] == 10.0 * 1.08  # the axis reaches the forecast
    svg = replicas_chart(w, Axis(TICK - 3600, TICK + 3600))
    assert svg is not None
    assert svg.count(f'stroke="{FORECAST}"') == 1
    assert "forecast of 10 replicas&#x27; load for 2025-11-11 09:00, made 2025-11-11 08:59 (spec.predictive)" in svg
