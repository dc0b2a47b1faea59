"""The ``metric`` events of a window of Prometheus series: each container's cpu, memory and oom
points (:func:`usage`), read once a window into each workload's roster (:func:`roster`), then one
batch of samples a step (:func:`samples`).

These are nearly all of an import's events (a day of a thousand pods is 1.4 million samples), so
what :func:`streams.prometheus_events.build_events` can say of them once a window, it says here:
:func:`in_contract` tells whether every sample of the window is within the contract's bounds
(docs/contract.md §3) by construction, and the import then need not decode them one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from scaling.errors import InvalidEvent
from scaling.events import decode_workload_ref
from scaling.events.checks import CPU_MAX_MILLI, MAX_TS, MEM_MAX_MILLI
from streams.prometheus_api import Series

__all__ = ["Container", "Member", "in_contract", "roster", "samples", "usage"]

#: (namespace, pod)
_PodKey = tuple[str, str]
#: A pod's container: its name and its cpu, memory and oom points.
Container = tuple[str, dict[int, float] | None, dict[int, float] | None, dict[int, float] | None]
#: A pod as :func:`samples` reads it: its name, its steps in the workload, its ready steps (``None``:
#: readiness unknown, so ready) and, per container, its name and its cpu, memory and oom points' ``get``.
Member = tuple[str, Any, "set[int] | frozenset[int] | None", list[tuple[str, Any, Any, Any]]]
_NO_POINTS = {}.get  # the ``get`` of a container without such points


def usage(s: Mapping[str, list[Series]], lb: Mapping[str, str]) -> dict[_PodKey, list[Container]]:
    """Per pod, its containers in order with their cpu, memory and oom points."""
    ns_l, pod_l, ctr_l = lb["namespace"], lb["pod"], lb["container"]
    # Series are read where they lie, a dict of points per series, and never transposed into
    # step -> pod -> container tables: a month of a thousand pods is 40 million pod-steps.
    found: dict[_PodKey, dict[str, list[dict[int, float] | None]]] = {}  # pod -> container -> [cpu, mem, oom]
    for slot, name in enumerate(("cpu", "memory", "oom")):
        for labels, points in s.get(name, []):
            by_ctr = found.setdefault((labels.get(ns_l, ""), labels.get(pod_l, "")), {})
            entry = by_ctr.setdefault(labels.get(ctr_l, ""), [None, None, None])
            known = entry[slot]
            entry[slot] = points if known is None else _highest(known, points)
    return {pk: [(ctr, e[0], e[1], e[2]) for ctr, e in sorted(by_ctr.items())] for pk, by_ctr in found.items()}


def _highest(a: dict[int, float], b: dict[int, float]) -> dict[int, float]:
    """Two series of one container merged as PromQL's ``max by (namespace, pod, container)`` would:
    the higher value where both have a point.  cAdvisor exports a container under more labels than
    these three (``id``, ``image``, ``name``, the scrape's ``instance``), so a restarted container or
    a kubelet scraped twice is two series for one step."""
    merged = {**a, **b}
    for t in a.keys() & b.keys():
        merged[t] = max(a[t], b[t])
    return merged


def roster(
    containers_of: Mapping[_PodKey, list[Container]],
    ready_at: Mapping[_PodKey, set[int]] | None,
    ns: str,
    listed: list[tuple[str, Any]],
) -> list[Member]:
    """``listed`` (a workload's pods and their steps) with what :func:`samples` needs, once a window;
    ``ready_at`` is ``None`` where no readiness series was read (every pod ready)."""
    nowhere: frozenset[int] = frozenset()
    out: list[Member] = []
    for pod, steps in listed:
        ready = ready_at.get((ns, pod), nowhere) if ready_at is not None else None
        ctrs = [
            (
                ctr,
                cp.get if cp is not None else _NO_POINTS,
                mp.get if mp is not None else _NO_POINTS,
                op.get if op is not None else None,
            )
            for ctr, cp, mp, op in containers_of.get((ns, pod), ())
        ]
        out.append((pod, steps, ready, ctrs))
    return out


def samples(present: list[Member], t: int) -> list[dict[str, Any]]:
    """The samples of one workload's ``metric`` event at step ``t``: every container of its pods
    (``present``) with a cpu or memory point there.  A day of a thousand pods is 1.4 million samples:
    the common one is one dict literal, and what does not depend on the step was looked up once a
    window (:func:`roster`)."""
    out: list[dict[str, Any]] = []
    for pod, _, ready, ctrs in present:
        unready = ready is not None and t not in ready
        for ctr, cpu_at, memory_at, oom_at in ctrs:
            cv, mv = cpu_at(t), memory_at(t)
            if mv is not None:
                memory = int(mv) if mv.is_integer() else mv
                if cv is not None:
                    sample: dict[str, Any] = {"pod": pod, "container": ctr, "cpu": cv, "memory": memory}
                else:
                    sample = {"pod": pod, "container": ctr, "memory": memory}
            elif cv is not None:
                sample = {"pod": pod, "container": ctr, "cpu": cv}
            else:
                continue
            if unready:
                sample["ready"] = False
            if oom_at is not None and oom_at(t, 0) > 0:
                sample["oom"] = True
            out.append(sample)
    return out


_CPU_MAX_CORES = CPU_MAX_MILLI / 1000
_MEM_MAX_BYTES = MEM_MAX_MILLI // 1000


def in_contract(
    containers_of: Mapping[_PodKey, list[Container]],
    workloads: Iterable[tuple[str, str, str]],
    cluster: str,
    start_ms: int,
    end_ms: int,
) -> bool:
    """Whether every ``metric`` event a window can make from these containers passes the contract's
    checks (``scaling.events.decode_event``): a valid workload reference, a time in range, and per
    sample a pod and a container name, cpu a float of cores and memory bytes within the bounds.

    The builder makes the rest true by construction (the fields, the types: a point is a finite float,
    memory an int where it is whole).  The check is per series, a ``min`` and ``max`` over its values,
    where decoding is per sample; ``False`` (a negative rate from an overridden query, an empty label)
    sends the window's metric events to the decoder, which names what is wrong with each.
    """
    if not (start_ms >= 0 and end_ms / 1000 <= MAX_TS):
        return False
    try:
        for ns, kind, name in workloads:
            decode_workload_ref({"cluster": cluster, "namespace": ns, "kind": kind, "name": name})
    except InvalidEvent:
        return False
    for (_, pod), ctrs in containers_of.items():
        if type(pod) is not str or not pod:
            return False
        for ctr, cpu, memory, _ in ctrs:
            if type(ctr) is not str or not ctr:
                return False
            if cpu and not _within(cpu.values(), _CPU_MAX_CORES):
                return False
            if memory and not _within(memory.values(), _MEM_MAX_BYTES):
                return False
    return True


def _within(values: Any, most: float) -> bool:
    """Every value a float in ``[0, most]`` (a NaN or an infinity makes the sum non-finite, and
    ``min``/``max`` alone could step over a NaN)."""
    total = sum(values)
    return total - total == 0.0 and min(values) >= 0 and max(values) <= most and set(map(type, values)) == {float}
