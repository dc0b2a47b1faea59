"""Decoding metric events (docs/contract.md §3): one scrape's container and series samples.

The most numerous events (a worker decodes hundreds of thousands of samples a second), so the
common shapes are checked inline first; anything else takes :func:`_decode_sample`, which accepts
the same samples and names what is wrong with the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidEvent
from ..quantity import parse_quantity
from .checks import (
    BATCH,
    COMMON,
    CONTAINER_SAMPLE,
    CPU_MAX_MILLI,
    MEM_MAX_MILLI,
    SERIES_SAMPLE,
    SINGLE_CONTAINER,
    SINGLE_SERIES,
    USAGE_SAMPLE,
    boolean,
    number,
    only,
    show,
    string,
)
from .model import ContainerSample, MetricEvent, SeriesSample, WorkloadRef

__all__ = ["decode_metric"]


def _decode_sample(raw: object, name: str) -> ContainerSample | SeriesSample:
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidEvent(name, f"expected a sample object, got {show(raw)}")
    try:
        only(raw, SERIES_SAMPLE if "series" in raw else CONTAINER_SAMPLE)
        if "series" in raw:
            series = string(raw, "series")
            assert series is not None
            if "value" not in raw:
                raise InvalidEvent("value", "required number is missing")
            return SeriesSample(series, number(raw["value"], "value"), string(raw, "pod", required=False))
        pod = string(raw, "pod")
        container = string(raw, "container")
        assert pod is not None and container is not None
        cpu = _usage(raw, "cpu", cores=True)
        mem = _usage(raw, "memory", cores=False)
        if cpu is None and mem is None and not raw.get("oom"):
            raise InvalidEvent("cpu", "a container sample needs cpu or memory")
        return ContainerSample(
            pod,
            container,
            cpu,
            None if mem is None else int(mem),
            boolean(raw, "ready", True),
            boolean(raw, "oom", False),
        )
    except InvalidEvent as exc:
        raise exc.within(name) if name else exc from None


def _usage(raw: Mapping[str, Any], name: str, *, cores: bool) -> float | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        v = number(value, name)
        if v < 0:
            raise InvalidEvent(name, f"usage must be >= 0, got {value}")
    else:
        try:
            milli = parse_quantity(value)
        except ValueError as exc:
            raise InvalidEvent(name, str(exc)) from None
        v = milli / 1000
    if v > (CPU_MAX_MILLI if cores else MEM_MAX_MILLI) / 1000:
        raise InvalidEvent(name, f"{value} is absurd for {name}")
    return v


_CPU_MAX_CORES = CPU_MAX_MILLI / 1000
_INF = math.inf
_MEM_MAX_BYTES = MEM_MAX_MILLI // 1000


#: ``tuple.__new__``: a named tuple built from its complete field tuple, in the decoders' hot paths.
_new_tuple = tuple.__new__


def _fast_sample(raw: object) -> ContainerSample | None:
    """The common container sample, checked inline; ``None`` sends it to the full decoder.

    The hot path of the worker: plain ``pod``/``container`` strings, ``cpu`` a finite number of
    cores, ``memory`` an integer of bytes, optional boolean ``ready``/``oom``.  Anything else
    (quantity strings, series, a bad value) takes :func:`_decode_sample`, which accepts the same
    samples and says precisely what is wrong with the others.
    """
    if type(raw) is not dict or "series" in raw or not raw.keys() <= CONTAINER_SAMPLE:
        return None
    pod = raw.get("pod")
    container = raw.get("container")
    cpu = raw.get("cpu")
    mem = raw.get("memory")
    ready = raw.get("ready", True)
    oom = raw.get("oom", False)
    if type(pod) is not str or not pod or type(container) is not str or not container:
        return None
    if cpu is not None:
        tc = type(cpu)
        if tc is float:
            if not 0.0 <= cpu <= _CPU_MAX_CORES:  # NaN fails too
                return None
        elif tc is int:
            if not 0 <= cpu <= _CPU_MAX_CORES:
                return None
            cpu = float(cpu)
        else:
            return None
    if mem is not None and (type(mem) is not int or not 0 <= mem <= _MEM_MAX_BYTES):
        return None
    if (cpu is None and mem is None) or (ready is not True and ready is not False and ready is not None):
        return None
    if oom is not True and oom is not False and oom is not None:
        return None
    return ContainerSample(pod, container, cpu, mem, ready is not False, oom is True)


def decode_metric(obj: Mapping[str, Any], ts: float, ref: WorkloadRef) -> MetricEvent:
    batch = obj.get("samples")
    if batch is None:
        only(obj, SINGLE_SERIES if "series" in obj else SINGLE_CONTAINER)
        s = _decode_sample({k: v for k, v in obj.items() if k not in COMMON}, "")
        if isinstance(s, SeriesSample):
            return _new_tuple(MetricEvent, (ts, ref, (), (s,), "metric"))  # MetricEvent(...)
        return _new_tuple(MetricEvent, (ts, ref, (s,), (), "metric"))
    if not obj.keys() <= BATCH:
        only(obj, BATCH)
    if not isinstance(batch, list):
        raise InvalidEvent("samples", f"expected a list, got {show(batch)}")
    samples: list[ContainerSample] = []
    append = samples.append
    new = tuple.__new__
    # The collector's batch: every sample exactly pod, container, cpu, memory, read by key and
    # checked with local names (a global or builtin costs more than a local, per sample).
    # The first other sample leaves this loop for :func:`_decode_rest`, which takes any sample.
    dict_, str_, float_, int_, type_ = dict, str, float, int, type
    usage, cpu_max, mem_max = USAGE_SAMPLE, _CPU_MAX_CORES, _MEM_MAX_BYTES
    for raw in batch:
        if type_(raw) is dict_ and raw.keys() == usage:
            pod = raw["pod"]
            container = raw["container"]
            cpu = raw["cpu"]
            mem = raw["memory"]
            if (
                type_(pod) is str_
                and pod
                and type_(container) is str_
                and container
                and type_(cpu) is float_
                and 0.0 <= cpu <= cpu_max
                and type_(mem) is int_
                and 0 <= mem <= mem_max
            ):
                append(new(ContainerSample, (pod, container, cpu, mem, True, False)))
                continue
        break
    else:
        return _new_tuple(MetricEvent, (ts, ref, tuple(samples), (), "metric"))  # every sample taken
    return _decode_rest(batch, samples, ts, ref)


def _decode_rest(batch: list[Any], samples: list[ContainerSample], ts: float, ref: WorkloadRef) -> MetricEvent:
    """The samples of ``batch`` from ``len(samples)`` on (those before were all taken by the plain
    loop of :func:`decode_metric`), any kind of sample, each checked."""
    series: list[SeriesSample] = []
    append = samples.append
    new = tuple.__new__
    known = CONTAINER_SAMPLE
    for i in range(len(samples), len(batch)):
        raw = batch[i]
        # The plain sample the loop above takes is a case of the general one here (same
        # tuple: ready True, oom False), so a batch that left that loop needs no second copy.
        if type(raw) is dict and raw.keys() <= known:
            pod = raw.get("pod")
            container = raw.get("container")
            cpu = raw.get("cpu")
            mem = raw.get("memory")
            ready = raw.get("ready", True)
            oom = raw.get("oom", False)
            if (
                type(pod) is str
                and pod
                and type(container) is str
                and container
                and (cpu is None or (type(cpu) is float and 0.0 <= cpu <= _CPU_MAX_CORES))
                and (mem is None or (type(mem) is int and 0 <= mem <= _MEM_MAX_BYTES))
                and (cpu is not None or mem is not None)
                and (ready is True or ready is False or ready is None)
                and (oom is True or oom is False or oom is None)
            ):
                append(new(ContainerSample, (pod, container, cpu, mem, ready is not False, oom is True)))
                continue
        elif type(raw) is dict and raw.keys() <= SERIES_SAMPLE:
            # A series sample, likewise: a name, a finite float, an optional pod.
            name = raw.get("series")
            value = raw.get("value")
            pod = raw.get("pod")
            if (
                type(name) is str
                and name
                and type(value) is float
                and -_INF < value < _INF
                and (pod is None or (type(pod) is str and pod))
            ):
                series.append(SeriesSample(name, value, pod))
                continue
        fast = _fast_sample(raw)
        if fast is not None:
            append(fast)
            continue
        s = _decode_sample(raw, f"samples[{i}]")
        if isinstance(s, SeriesSample):
            series.append(s)
        else:
            append(s)
    return _new_tuple(MetricEvent, (ts, ref, tuple(samples), tuple(series), "metric"))  # MetricEvent(...)
