"""tandem's own VPA side by side with upstream's recommender: streams, both drivers, the comparison.

The upstream side is ``tests/oracle/vpa`` (a Go program over k8s.io/autoscaler/vertical-pod-autoscaler
v1.8.1, built by ``scripts/oracle.sh fetch``); the tandem side feeds the same stream through
``scaling.own.observe`` and ``scaling.own.own_vpa``, the functions the engine calls for every metric
event and at every reconcile tick.  A stream is a list of JSON objects (the Go program's input,
described in ``vpa/main.go``): the VPA's resource policy, the workload's pod lists, metric events
and recommender runs.  :func:`random_stream` makes one from a seed; :data:`EDGE_CASES` are the
shapes issue 30 found tandem to differ on.  Times are whole seconds (upstream keeps nanoseconds,
tandem float seconds: both are exact there).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaling.events import ContainerSample, MetricEvent, PodStatus, WorkloadEvent, WorkloadRef
from scaling.own import observe, own_vpa
from scaling.policies.templates import VpaTemplate
from scaling.recommend.vpa import policies_from_resource_policy
from scaling.settings import Settings
from scaling.state import WorkloadState

ROOT = Path(__file__).resolve().parents[2]
GO_MODULE = ROOT / "tests" / "oracle" / "vpa"
#: 2024-01-01T00:00:00Z: streams lie in the past of the wall clock, so that upstream's wall-clock
#: ``CreationTime`` never ages an aggregate without CPU samples (docs/recommenders.md 2.2).
T0 = 1_704_067_200
DAY = 86_400
MIB = 1024 * 1024
PARTS = ("target", "lower", "upper", "uncapped")
Stream = list[dict[str, Any]]


# ------------------------------------------------------------------------------------------------
# The upstream side
# ------------------------------------------------------------------------------------------------


def oracle_digest(name: str = "vpa") -> str:
    """An oracle build's cache key, as ``scripts/oracle.sh`` computes it: its module's sources."""
    h = hashlib.sha256()
    for file in ("go.mod", "go.sum", "main.go"):
        h.update((GO_MODULE.parent / name / file).read_bytes())
    return h.hexdigest()[:16]


def oracle_binary() -> Path:
    """Where ``scripts/oracle.sh fetch`` puts the upstream recommender (``TANDEM_VPA_ORACLE`` wins)."""
    given = os.environ.get("TANDEM_VPA_ORACLE")
    if given:
        return Path(given)
    cache = Path(os.environ.get("TANDEM_CACHE") or Path.home() / ".cache" / "tandem")
    return cache / "oracle" / f"vpa-{oracle_digest()}" / "vpa-oracle"


def run_upstream(streams: Sequence[Stream], binary: Path | None = None) -> list[list[dict[str, Any]]]:
    """Each stream's runs as upstream's recommender gives them (one process per stream)."""
    exe = str(binary or oracle_binary())
    out = []
    for stream in streams:
        text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in stream)
        done = subprocess.run([exe], input=text.encode(), capture_output=True, check=False, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"vpa-oracle failed (exit {done.returncode}): {done.stderr.decode()[-2000:]}")
        out.append([json.loads(line) for line in done.stdout.splitlines()])
    return out


# ------------------------------------------------------------------------------------------------
# The tandem side
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _VpaPolicy:
    """The part of a policy that ``own_vpa`` reads: the VPA it would create."""

    template: VpaTemplate

    def vpa_template(self) -> VpaTemplate:
        return self.template


REF = WorkloadRef("oracle", "shop", "Deployment", "web")


def run_tandem(stream: Stream, settings: Settings | None = None) -> list[dict[str, Any]]:
    """The stream through tandem's own VPA: ``observe`` per metric event, ``own_vpa`` per run."""
    settings = settings or Settings()
    state = WorkloadState(key=REF.key)
    head = stream[0]["vpa"]
    policy = _VpaPolicy(VpaTemplate(policies_from_resource_policy(head.get("resourcePolicy"))))
    spec = WorkloadEvent(float(T0), REF, 0, {}, pods=())
    out: list[dict[str, Any]] = []
    for e in stream[1:]:
        ts = float(e["ts"])
        if "pods" in e:
            pods = tuple(PodStatus(p["name"], True, "Running", None) for p in e["pods"])
            spec = WorkloadEvent(ts, REF, len(pods), {}, pods=pods)
        elif "samples" in e:
            samples = tuple(
                ContainerSample(s["pod"], s["container"], s.get("cpu"), s.get("memory"), True, bool(s.get("oom")))
                for s in e["samples"]
            )
            observe(state, MetricEvent(ts, REF, samples), settings)
        elif e.get("run"):
            event, _ = own_vpa(state, policy, spec, ts, settings)  # type: ignore[arg-type]
            recs: dict[str, dict[str, list[int]]] = {}
            if event is not None:
                for name, r in event.containers.items():
                    parts = (r.target, r.lower_bound, r.upper_bound, r.uncapped_target)
                    recs[name] = {
                        part: [
                            values["cpu"].milli if "cpu" in values else -1,
                            values["memory"].milli // 1000 if "memory" in values else -1,
                        ]
                        for part, values in zip(PARTS, parts, strict=True)
                    }
            out.append({"ts": e["ts"], "recs": recs})
    return out


# ------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """Runs, checkpoints (a container at a run) and values compared, and the checkpoints that differ."""

    runs: int = 0
    checkpoints: int = 0
    values: int = 0
    differing: int = 0
    first: str | None = None

    def add(self, other: Comparison) -> None:
        self.runs += other.runs
        self.checkpoints += other.checkpoints
        self.values += other.values
        self.differing += other.differing
        self.first = self.first or other.first


def compare(name: str, tandem: list[dict[str, Any]], upstream: list[dict[str, Any]]) -> Comparison:
    """Every value of every container at every run; a run missing on one side differs whole."""
    c = Comparison()
    if len(tandem) != len(upstream):
        c.differing += 1
        c.first = f"{name}: {len(tandem)} runs from tandem, {len(upstream)} from upstream"
        return c
    for ours, theirs in zip(tandem, upstream, strict=True):
        c.runs += 1
        for container in sorted(set(ours["recs"]) | set(theirs["recs"])):
            c.checkpoints += 1
            c.values += 2 * len(PARTS)
            a, b = ours["recs"].get(container), theirs["recs"].get(container)
            if a != b:
                c.differing += 1
                if c.first is None:
                    c.first = f"{name} at ts {ours['ts']} container {container}: tandem {a}, upstream {b}"
    return c


# ------------------------------------------------------------------------------------------------
# Streams
# ------------------------------------------------------------------------------------------------


@dataclass
class Shape:
    """What a stream does; :func:`random_stream` draws one, the edge cases fix some fields."""

    days: float = 2.0
    pods: int = 5
    containers: tuple[str, ...] = ("app",)
    memory_only: frozenset[str] = frozenset()
    split: bool = False  # every pod's samples of a scrape as its own event, one timestamp
    jitter: int = 0  # whole seconds added to a scrape's minute
    p_drop: float = 0.0
    p_oom: float = 0.0
    p_churn: float = 0.0  # per hour: one pod replaced by a new one
    p_spike: float = 0.0
    p_resend: float = 0.0  # a scrape sent again (upstream drops it as a duplicate)
    gaps: tuple[tuple[float, float], ...] = ()  # (start in days, length in seconds): no samples
    new_pod_after_gap: bool = False  # a new pod reports first after each gap
    resource_policy: Mapping[str, Any] | None = None
    gap_run_every: int = 600


def _cpu(rng: random.Random, base: float, t: int, phase: float, spike: bool) -> float:
    v = base * (1.0 + 0.5 * math.sin(2 * math.pi * t / DAY + phase)) * rng.lognormvariate(0.0, 0.25)
    if spike:
        v *= rng.uniform(3.0, 8.0)
    return round(v, 9)  # whole nanocores, as metrics-server reports them


def make_stream(seed: int, shape: Shape) -> Stream:
    """The stream of ``shape``, its random draws from ``seed``."""
    rng = random.Random(seed)
    start = T0 + rng.randrange(0, DAY)
    end = start + int(shape.days * DAY)
    stream: Stream = [{"vpa": {"resourcePolicy": dict(shape.resource_policy or {})}}]
    base_cpu = {c: math.exp(rng.uniform(math.log(0.005), math.log(4.0))) for c in shape.containers}
    base_mem = {c: int(math.exp(rng.uniform(math.log(30 * MIB), math.log(4096 * MIB)))) for c in shape.containers}
    phase = {c: rng.uniform(0, 2 * math.pi) for c in shape.containers}
    serial = 0
    factors: dict[str, float] = {}

    def new_pod() -> str:
        nonlocal serial
        serial += 1
        name = f"web-{seed % 100000:05d}-{serial}"
        factors[name] = rng.uniform(0.7, 1.3)
        return name

    pods = [new_pod() for _ in range(shape.pods)]

    def pods_event(ts: int) -> dict[str, Any]:
        return {"ts": ts, "pods": [{"name": p, "containers": list(shape.containers)} for p in pods]}

    stream.append(pods_event(start))
    gaps = [(start + int(g * DAY), start + int(g * DAY) + int(n)) for g, n in shape.gaps]
    last_scrape: list[dict[str, Any]] = []
    t = start
    after_gap = False
    while t < end:
        in_gap = any(a <= t < b for a, b in gaps)
        if in_gap:
            after_gap = shape.new_pod_after_gap
            stream.append({"ts": t + 59, "run": True})
            t += shape.gap_run_every
            continue
        if (t - start) % 3600 == 0 and t > start and rng.random() < shape.p_churn:
            pods.remove(rng.choice(pods))
            pods.append(new_pod())
            stream.append(pods_event(t))
        order = list(pods)
        if after_gap:
            after_gap = False
            pods.append(new_pod())
            stream.append(pods_event(t))
            order = [pods[-1], *pods[:-1]]  # the new pod's samples first
        ts = t + (rng.randint(0, shape.jitter) if shape.jitter else 0)
        per_pod: list[list[dict[str, Any]]] = []
        for p in order:
            samples = []
            for c in shape.containers:
                if rng.random() < shape.p_drop:
                    continue
                s: dict[str, Any] = {"pod": p, "container": c}
                if c not in shape.memory_only and rng.random() >= shape.p_drop:
                    s["cpu"] = _cpu(rng, base_cpu[c] * factors[p], ts, phase[c], rng.random() < shape.p_spike)
                if rng.random() >= shape.p_drop:
                    if rng.random() < shape.p_oom:
                        s["memory"] = int(base_mem[c] * 1.1)  # the container's request
                        s["oom"] = True
                    else:
                        s["memory"] = int(base_mem[c] * factors[p] * rng.lognormvariate(0.0, 0.1))
                samples.append(s)
            if samples:
                per_pod.append(samples)
        if shape.split:
            events = [{"ts": ts, "samples": s} for s in per_pod]
        else:
            events = [{"ts": ts, "samples": [s for group in per_pod for s in group]}] if per_pod else []
        stream.extend(events)
        if last_scrape and rng.random() < shape.p_resend:
            stream.extend(last_scrape)
        last_scrape = events
        stream.append({"ts": t + 59, "run": True})
        t += 60
    return stream


_POLICIES: tuple[Mapping[str, Any], ...] = (
    {"containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "50m"}, "maxAllowed": {"memory": "2Gi"}}]},
    {"containerPolicies": [{"containerName": "*", "controlledResources": ["cpu"]}]},
    {"containerPolicies": [{"containerName": "sidecar", "mode": "Off"}]},
    {"containerPolicies": [{"containerName": "app", "maxAllowed": {"cpu": "1", "memory": "1Gi"}}]},
)


def random_shape(seed: int, max_days: float = 14.0) -> Shape:
    """Issue 30's random streams: 1 to ``max_days`` days, 3-10 pods, 1-2 containers, OOMs, churn,
    dropped and re-sent samples, jitter, spikes, gaps up to a day and a half, split scrapes."""
    rng = random.Random(seed * 7919 + 1)
    days = rng.uniform(1.0, max_days)
    containers = ("app",) if rng.random() < 0.6 else ("app", "sidecar")
    gaps = tuple(
        sorted(
            (rng.uniform(0.1, max(0.2, days - 0.2)), rng.choice([600.0, 3 * 3600.0, 26 * 3600.0, 36 * 3600.0]))
            for _ in range(rng.choice([0, 0, 1, 2]))
        )
    )
    return Shape(
        days=days,
        pods=rng.randint(3, 10),
        containers=containers,
        memory_only=frozenset({"sidecar"}) if len(containers) == 2 and rng.random() < 0.3 else frozenset(),
        split=rng.random() < 0.3,
        jitter=rng.choice([0, 5, 20]),
        p_drop=rng.choice([0.0, 0.01, 0.05]),
        p_oom=rng.choice([0.0, 0.0005, 0.002]),
        p_churn=rng.choice([0.0, 0.1, 0.5]),
        p_spike=rng.choice([0.0, 0.01]),
        p_resend=rng.choice([0.0, 0.01]),
        gaps=gaps,
        new_pod_after_gap=rng.random() < 0.5,
        resource_policy=rng.choice(_POLICIES) if rng.random() < 0.3 else None,
    )


def random_stream(seed: int, max_days: float = 14.0) -> Stream:
    return make_stream(seed, random_shape(seed, max_days))


#: Issue 30's differences, one stream each: name -> (seed, shape).
EDGE_CASES: dict[str, tuple[int, Shape]] = {
    "split-scrape": (1, Shape(days=1.5, pods=6, split=True, jitter=5)),
    "split-scrape-two-containers": (2, Shape(days=1.0, pods=4, containers=("app", "sidecar"), split=True)),
    "long-gap-new-pod-first": (3, Shape(days=3.0, pods=4, gaps=((1.0, 30 * 3600.0),), new_pod_after_gap=True)),
    "memory-only-container": (
        4,
        Shape(days=1.5, pods=3, containers=("app", "sidecar"), memory_only=frozenset({"sidecar"})),
    ),
    "memory-only-workload": (5, Shape(days=1.0, pods=3, memory_only=frozenset({"app"}))),
    "expiry-after-eight-silent-days": (6, Shape(days=10.0, pods=3, gaps=((1.0, 8.6 * DAY),))),
    "ooms-and-resends": (7, Shape(days=2.5, pods=5, p_oom=0.01, p_resend=0.05, jitter=20)),
    "churn-and-drops": (8, Shape(days=2.0, pods=8, p_churn=0.8, p_drop=0.05, p_spike=0.02)),
}


def edge_streams() -> dict[str, Stream]:
    return {name: make_stream(seed, shape) for name, (seed, shape) in EDGE_CASES.items()}


def compare_streams(
    named: Iterable[tuple[str, Stream]],
    binary: Path | None = None,
    progress: Callable[[str, Comparison], None] | None = None,
) -> Comparison:
    """Run both sides over every stream and add up the comparisons."""
    total = Comparison()
    for name, stream in named:
        [theirs] = run_upstream([stream], binary)
        one = compare(name, run_tandem(stream), theirs)
        if progress is not None:
            progress(name, one)
        total.add(one)
    return total
