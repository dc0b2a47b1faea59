#!/usr/bin/env python3
"""Generate ``examples/stream.jsonl.gz``: three days of a daily load curve, 3 workloads, 2 clusters.

The stream is what tandem's collectors would have recorded in clusters where tandem was running:
container usage batches every minute, the HPA's desired replicas (computed the way the upstream
HPA does: ceil(replicas x utilization / target) outside a 10 % tolerance, clamped to min/max,
``ScalingLimited`` at max), VPA targets every five minutes (a percentile of the last hours of
per-pod usage plus VPA's 15 % margin), a queue-load series for the custom-HPA workload, and a
``workload`` event whenever the spec changes.  The spec changes because the generator closes the
loop: it runs the same decision core on what it emits and applies each decision 30 s later,
as an applier would.  Replaying the file therefore reproduces the decisions it was recorded with.

Deterministic (seeded): ``python examples/generate.py`` rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from scaling.engine import Engine
from scaling.quantity import format_quantity, parse_quantity
from scaling.settings import Settings
from scaling.vocabulary import DECISION
from streams.inputs import load_manifests

HERE = Path(__file__).resolve().parent
START = 1_762_214_400  # 2025-11-04T00:00:00Z, a Tuesday
MINUTE = 60
APPLY_DELAY = 30  # seconds between a decision and the workload event that shows it applied


@dataclass
class Model:
    """A simulated workload: its spec, its demand curve, and its HPA/VPA stand-ins."""

    cluster: str
    namespace: str
    name: str
    container: str
    peak_cores: float
    base_cores: float
    peak_hour: float
    replicas: int
    requests: dict[str, int]
    limits: dict[str, int]
    min_replicas: int
    max_replicas: int
    target_util: int
    series: str | None = None
    history: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=240))
    recommendations: deque[tuple[float, int]] = field(default_factory=deque)

    @property
    def ref(self) -> dict[str, str]:
        return {"cluster": self.cluster, "namespace": self.namespace, "kind": "Deployment", "name": self.name}

    def demand(self, t: float, rng: random.Random) -> float:
        """Total CPU cores wanted: a daily curve peaking at ``peak_hour``, quieter on weekends."""
        hour = (t - START) / 3600 % 24
        day = int((t - START) // 86400)
        shape = 0.5 + 0.5 * math.cos((hour - self.peak_hour) / 24 * 2 * math.pi)
        weekend = 0.6 if (day + 1) % 7 in (5, 6) else 1.0  # START is a Tuesday
        noise = rng.gauss(1.0, 0.04)
        return max(0.05, (self.base_cores + (self.peak_cores - self.base_cores) * shape**2) * weekend * noise)

    def workload_event(self, ts: float) -> dict[str, Any]:
        return {
            "type": "workload",
            "ts": ts,
            "workload": self.ref,
            "replicas": self.replicas,
            "containers": {
                self.container: {
                    "requests": {r: format_quantity(r, v) for r, v in sorted(self.requests.items())},
                    "limits": {r: format_quantity(r, v) for r, v in sorted(self.limits.items())},
                }
            },
            "ready_replicas": self.replicas,
        }


def models() -> list[Model]:
    mi = 2**20 * 1000
    return [
        Model(
            "eu-1",
            "shop",
            "web",
            "web",
            5.0,
            0.4,
            14.0,
            2,
            {"cpu": 500, "memory": 512 * mi},
            {"cpu": 1000, "memory": 1024 * mi},
            1,
            10,
            50,
        ),
        Model(
            "eu-1",
            "shop",
            "api",
            "api",
            3.5,
            0.6,
            11.0,
            2,
            {"cpu": 400, "memory": 256 * mi},
            {"cpu": 1000, "memory": 512 * mi},
            2,
            6,
            70,
        ),
        Model(
            "us-2",
            "media",
            "encoder",
            "encoder",
            12.0,
            1.0,
            20.0,
            4,
            {"cpu": 1000, "memory": 1024 * mi},
            {"cpu": 2000, "memory": 2048 * mi},
            2,
            24,
            100,
            series="encode_queue_per_replica",
        ),
    ]


def hpa_event(m: Model, ts: float, per_pod_cpu: float) -> dict[str, Any]:
    # HPA: utilization rounded down; keep current inside the 0.1 tolerance; ceil(ratio x replicas).
    util = math.floor(100 * per_pod_cpu * 1000 / m.requests["cpu"])
    ratio = util / m.target_util
    raw = m.replicas if abs(ratio - 1) <= 0.1 else math.ceil(ratio * m.replicas)
    # HPA legacy normalization: the maximum recommendation of the last 300 s delays scale-downs.
    m.recommendations.append((ts, raw))
    while m.recommendations[0][0] <= ts - 300:
        m.recommendations.popleft()
    desired = max(r for _, r in m.recommendations)
    limited = desired > m.max_replicas
    desired = min(max(desired, m.min_replicas), m.max_replicas)
    return {
        "type": "hpa",
        "ts": ts,
        "workload": m.ref,
        "desired_replicas": desired,
        "current_replicas": m.replicas,
        "min_replicas": m.min_replicas,
        "max_replicas": m.max_replicas,
        "conditions": [
            {"type": "AbleToScale", "status": "True"},
            {"type": "ScalingLimited", "status": "True" if limited else "False"},
        ],
        "name": m.name,
    }


def vpa_event(m: Model, ts: float) -> dict[str, Any]:
    # VPA: a high percentile of recent per-pod CPU, the peak of memory, then the 15 % margin.
    cpus = sorted(cpu for _, cpu in m.history)
    p90 = cpus[min(len(cpus) - 1, int(0.9 * len(cpus)))]
    memory = max(mem for mem, _ in m.history)
    return {
        "type": "vpa",
        "ts": ts,
        "workload": m.ref,
        "containers": {
            m.container: {
                "target": {"cpu": f"{max(25, math.ceil(p90 * 1150))}m", "memory": f"{math.ceil(memory * 1.15 / 1e6)}M"},
            }
        },
        "conditions": [{"type": "RecommendationProvided", "status": "True"}],
    }


def generate(days: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    ms = models()
    by_key = {f"{m.cluster}/{m.namespace}/Deployment/{m.name}": m for m in ms}
    engine = Engine(Settings())
    for manifest in load_manifests(str(HERE / "policies.yaml")):
        engine.add_policy(manifest)
    events: list[dict[str, Any]] = []
    pending: list[tuple[float, Model, dict[str, Any]]] = []

    def emit(e: dict[str, Any]) -> None:
        events.append(e)
        for kind, out in engine.process(e):
            if kind == "audit" and out["type"] == DECISION and not out["data"]["dry_run"]:
                pending.append((out["data"]["tick"] + APPLY_DELAY, by_key[out["subject"]], out["data"]))

    for m in ms:
        emit(m.workload_event(float(START)))
    for minute in range(1, days * 24 * 60 + 1):
        t = START + minute * MINUTE
        # an applier writes decisions; the collector sees the new spec
        for due, m, data in sorted((p for p in pending if p[0] <= t), key=lambda p: (p[0], p[1].name)):
            pending.remove((due, m, data))
            if "replicas" in data:
                m.replicas = data["replicas"]["to"]
            for section in ("requests", "limits"):
                for res, ch in data.get("containers", {}).get(m.container, {}).get(section, {}).items():
                    getattr(m, section)[res] = parse_quantity(ch["to"])
            emit(m.workload_event(float(due)))
        for i, m in enumerate(ms):
            demand = m.demand(t, rng)
            per_pod = demand / m.replicas
            mem_per_pod = (180 + 120 * min(per_pod, 4) / 4) * 2**20 * rng.gauss(1.0, 0.02)
            m.history.append((mem_per_pod, per_pod))
            samples: list[dict[str, Any]] = [
                {
                    "pod": f"{m.name}-{p}",
                    "container": m.container,
                    "cpu": round(per_pod * rng.gauss(1.0, 0.03), 4),
                    "memory": int(mem_per_pod),
                }
                for p in range(m.replicas)
            ]
            if m.series:
                samples.append({"series": m.series, "value": round(100 * per_pod / (m.requests["cpu"] / 1000), 2)})
            emit({"type": "metric", "ts": float(t + i), "workload": m.ref, "samples": samples})
            if not m.series:
                emit(hpa_event(m, float(t + i) + 0.5, per_pod))
                if minute % 5 == 0:
                    emit(vpa_event(m, float(t + i) + 0.75))
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "stream.jsonl.gz")
    args = parser.parse_args()
    events = generate(args.days, args.seed)
    events.sort(key=lambda e: e["ts"])
    data = b"".join(orjson.dumps(e) + b"\n" for e in events)
    with gzip.GzipFile(filename="", mode="wb", fileobj=args.out.open("wb"), mtime=0) as fh:
        fh.write(data)
    print(f"wrote {len(events)} events to {args.out}")


if __name__ == "__main__":
    main()
