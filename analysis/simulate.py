"""``tandem simulate``: recorded demand through policies in closed loop, compared on cost and risk.

No autoscaler answers "what would this policy have done to last month's traffic, and what would
it have cost?".  The simulator derives each workload's *demand* from a recorded stream (total CPU
cores and memory bytes across its pods, per container, at each sample time), then, for each
policy file, drives the very same decision core (``scaling.engine.Engine``) in closed loop:

* a simulated workload starts from the first recorded spec (replicas, requests, limits);
* at each sample time its per-pod usage is demand divided over the *simulated* replicas (with
  ``--memory-at-rest``, each pod's memory at rest plus its share of the rest), sent to
  the core as ``metric`` samples, so tandem's own HPA and VPA recommenders see the simulated usage
  (recorded ``hpa``/``vpa`` events are not passed on: they describe the recorded cluster);
  memory above the simulated limit is an OOM kill (``"oom": true``);
* every decision is applied after ``--delay`` seconds (pod start-up), and the simulated workload
  reports its new spec as a ``workload`` event, as a collector would;
* named series (custom metrics) are replayed as recorded, but per-pod samples (with ``pod``), which
  are summed over the recorded pods and divided over the simulated ones, like the usage.

Outcomes per policy and workload: requested CPU core-hours and memory GiB-hours (cost), hours with
usage above requests and above limits, samples at max replicas with CPU demand above capacity
(replicas × request), rolling updates (decisions that change requests or limits) and replica
changes (disruption).  The simulator is a driver like the replay: it adds no decision rule.

This module derives the demand, spreads the (policy, workload) runs over processes and writes the
comparison; a run is :func:`analysis.closed_loop.simulate_one` (tandem's kinds) or
:func:`analysis.upstream.simulate_upstream` (upstream HPA and VPA manifests).
"""

from __future__ import annotations

import gc
import html
import io
import multiprocessing
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import IO, Any

import orjson

from analysis.closed_loop import simulate_one
from analysis.outcomes import Demand, Outcome
from analysis.report import build
from analysis.upstream import UpstreamArm, is_upstream, simulate_upstream
from scaling.engine import policy_event
from scaling.events import ContainerSample, MetricEvent, WorkloadEvent, WorkloadRef
from scaling.settings import Settings
from streams.inputs import load_manifests
from streams.runner import Progress, ReplayStats, gc_paused, read_reduced

__all__ = ["Demand", "Outcome", "derive_demand", "simulate", "simulate_one", "table", "write_report"]


def derive_demand(events: Sequence[tuple[float, int, Any, Any]], memory_at_rest: float = 0.0) -> dict[str, Demand]:
    """Per workload key: the first recorded spec and the demand at every sample time.

    ``memory_at_rest``: bytes each pod holds per container at rest (:class:`Demand`); the recorded
    pods' are taken out of the memory totals here."""
    parts = ((ts, _demand_part(raw, event, memory_at_rest=memory_at_rest)) for ts, _, (_, _, raw), event in events)
    return _demands([(ts, part) for ts, part in parts if part is not None], memory_at_rest)


#: What one input line gives the demand: for a workload event ``(ref, replicas, requests, limits)``,
#: for a metric event ``(key, container totals, raw series samples)``.
_Part = (
    tuple[WorkloadRef, int, dict[str, dict[str, int]], dict[str, dict[str, int]]]
    | tuple[str, dict[str, tuple[float, float]], list[dict[str, Any]]]
)


def _demand_part(
    raw: Any, event: Any, wanted: frozenset[str] | None = None, memory_at_rest: float = 0.0
) -> _Part | None:
    """The little of a decoded line that the demand needs (``streams.runner.read_reduced``'s
    ``reduce``): the typed event and its JSON are dropped at once, or sent back by a decoding
    process as a few numbers.  ``wanted``: the keys of the workloads the policies name (``None``:
    all); the lines of the others are decoded and checked all the same, but nothing is kept.
    ``memory_at_rest``: the bytes at rest of each pod that reported a container's memory in this
    line are taken out of that container's memory total, floored at 0 (:class:`Demand`)."""
    if isinstance(event, MetricEvent):
        key = event.workload.key
        if wanted is not None and key not in wanted:
            return None
        totals: dict[str, tuple[float, float]] = {}
        for s in event.samples:
            cpu, mem = totals.get(s.container, (0.0, 0.0))
            totals[s.container] = (cpu + (s.cpu or 0.0), mem + (s.memory or 0))
        if memory_at_rest and totals:
            totals = _above_rest(event.samples, totals, memory_at_rest)
        # A raw sample with a "series" is a series sample or the line is refused: none without them.
        series = (
            [s for s in (raw.get("samples") or [raw]) if isinstance(s, dict) and "series" in s] if event.series else []
        )
        return (key, totals, series) if totals or series else None
    if isinstance(event, WorkloadEvent):
        if wanted is not None and event.workload.key not in wanted:
            return None
        return (
            event.workload,
            max(event.replicas, 1),
            {c: {r: q.milli for r, q in res.requests.items()} for c, res in event.containers.items()},
            {c: {r: q.milli for r, q in res.limits.items()} for c, res in event.containers.items()},
        )
    return None


def _above_rest(
    samples: Sequence[ContainerSample], totals: dict[str, tuple[float, float]], memory_at_rest: float
) -> dict[str, tuple[float, float]]:
    """``totals`` with each container's memory less ``memory_at_rest`` × the recorded pods that
    reported it (a sample without memory holds no rest in the total), floored at 0."""
    reported: dict[str, int] = {}
    for s in samples:
        if s.memory is not None:
            reported[s.container] = reported.get(s.container, 0) + 1
    return {c: (cpu, max(mem - reported.get(c, 0) * memory_at_rest, 0.0)) for c, (cpu, mem) in totals.items()}


def _demands(parts: Sequence[tuple[float, _Part]], memory_at_rest: float = 0.0) -> dict[str, Demand]:
    """The demands from the parts of the lines, in event-time order: a workload's first spec
    starts it, its metric events (before that spec too) give its points and series.
    ``memory_at_rest``: what each simulated pod holds at rest, which :func:`_demand_part` took
    out of the parts' memory for the recorded pods (:class:`Demand`)."""
    demands: dict[str, Demand] = {}
    pending: dict[str, list[tuple[float, dict[str, tuple[float, float]], list[dict[str, Any]]]]] = {}
    for ts, part in parts:
        if len(part) == 4:
            ref = part[0]
            if ref.key not in demands:
                demands[ref.key] = Demand(ref, part[1], part[2], part[3], memory_at_rest=memory_at_rest)
        else:
            key, totals, series = part
            points = pending.get(key)
            if points is None:
                points = pending[key] = []
            points.append((ts, totals, series))
    for key, points in pending.items():
        d = demands.get(key)
        if d is None:
            continue  # no recorded spec: nothing to start the simulation from
        for ts, totals, series in points:
            if totals:
                d.points.append((ts, totals))
            if series:
                d.series.append((ts, series))
    return demands


def simulate(
    paths: Sequence[str],
    policy_files: Sequence[str],
    settings: Settings,
    delay: float,
    err: IO[str],
    recordings: dict[str, list[dict[str, Any]]] | None = None,
    jobs: int = 1,
    progress: bool | None = None,
    checked: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    upstream: Mapping[str, Sequence[UpstreamArm]] | None = None,
    memory_at_rest: float = 0.0,
) -> list[Outcome]:
    """Run every policy file over every workload it names; ``recordings`` (if given) receives, per
    policy file name, the simulated stream (inputs in closed loop) for the report.

    ``checked``: per policy file, its manifests that can run, as
    :func:`streams.inputs.load_command_inputs` sorted them (the command said why it refused the
    others, so they are left out here, not refused again); without it every manifest of every file
    must parse.

    With ``jobs`` > 1 the (policy, workload) runs are spread over that many processes.  Each run
    is independent (its own engine, its own demand), and results are gathered in the order of the
    runs, so the outcomes and recordings are the same, byte for byte, as with one process.
    ``progress`` (default: ``err`` is a terminal) draws a bar of the runs done.

    ``upstream``: per policy file of upstream HPA/VPA manifests, its arms
    (:func:`analysis.upstream.parse_upstream`), run by :func:`analysis.upstream.simulate_upstream`.

    ``memory_at_rest``: bytes of memory each pod holds per container at rest, its own in every
    simulated pod and taken out of the recorded pods' totals (:class:`analysis.outcomes.Demand`);
    0 divides the whole memory demand evenly over the ready pods.
    """
    stats = ReplayStats()
    upstream = upstream or {}
    tandem_files = [p for p in policy_files if p not in upstream]
    manifests = _manifests(tandem_files, settings, checked)
    wanted = (
        None
        if manifests is None
        else frozenset(
            [key for docs in manifests for key, _ in docs]
            + [arm.workload.key for arms in upstream.values() for arm in arms]
        )
    )
    # Only the demand is kept of the stream, line by line (the typed events would be a heap that
    # the collector walks again and again, here and in every process forked below), and only of
    # the workloads the policies name.
    reduce = partial(_demand_part, wanted=wanted, memory_at_rest=memory_at_rest)
    with gc_paused():  # the demand only grows, as the read (streams.runner.gc_paused)
        parts = read_reduced(paths, lambda msg: err.write(msg + "\n"), stats, reduce, jobs=jobs)
        demands = _demands(parts, memory_at_rest)
    runs = _runs(policy_files, demands, manifests, settings, err, checked, upstream)
    record = recordings is not None
    bar = Progress(err, len(runs), err.isatty() if progress is None else progress)
    results: list[tuple[Outcome, list[dict[str, Any]] | None]] = []
    # What is in memory now (tandem's modules, the demands) lives until the runs end: frozen, the
    # collector's full collections during the runs walk only what the runs make, in this process
    # and in the processes forked below (which then also leave the inherited pages unwritten).
    # Only when nothing else froze the heap: ``gc.unfreeze`` would thaw that too.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        _run_all(runs, settings, delay, record, jobs, bar, results)
    finally:
        if freeze:
            gc.unfreeze()
    bar.done()
    outcomes: list[Outcome] = []
    for (_, _, name), (outcome, recorded) in zip(runs, results, strict=True):
        outcomes.append(outcome)
        if recordings is not None and recorded is not None:
            recordings.setdefault(name, []).extend(recorded)
    return outcomes


#: One run: the demand, a tandem manifest or an upstream arm, and the policy file's name.
_Run = tuple[Demand, dict[str, Any] | UpstreamArm, str]


def _runs(
    policy_files: Sequence[str],
    demands: Mapping[str, Demand],
    manifests: list[list[tuple[str, dict[str, Any]]]] | None,
    settings: Settings,
    err: IO[str],
    checked: Mapping[str, Sequence[dict[str, Any]]] | None,
    upstream: Mapping[str, Sequence[UpstreamArm]],
) -> list[_Run]:
    """The (policy, workload) runs, in the order of the files and their manifests; a workload
    without recorded demand is said on ``err`` and left out."""
    runs: list[_Run] = []
    i = -1
    for path in policy_files:
        name = Path(path).stem
        if path in upstream:
            for arm in upstream[path]:
                demand = demands.get(arm.workload.key)
                if demand is None:
                    err.write(f"tandem simulate: {path}: no recorded demand for {arm.workload.key}\n")
                    continue
                runs.append((demand, arm, name))
            continue
        i += 1
        docs = checked.get(path, ()) if checked is not None else load_manifests(path)
        for manifest in docs if manifests is None else [m for _, m in manifests[i]]:
            key = policy_event(manifest, settings.cluster)["workload"]
            ref = WorkloadRef(**key)
            demand = demands.get(ref.key)
            if demand is None:
                err.write(f"tandem simulate: {path}: no recorded demand for {ref.key}\n")
                continue
            runs.append((demand, manifest, name))
    return runs


def _run_all(
    runs: Sequence[tuple[Demand, dict[str, Any] | UpstreamArm, str]],
    settings: Settings,
    delay: float,
    record: bool,
    jobs: int,
    bar: Progress,
    results: list[tuple[Outcome, list[dict[str, Any]] | None]],
) -> None:
    """The runs, in this process or spread over ``jobs`` processes; their results, in order, to ``results``."""
    if jobs <= 1 or len(runs) <= 1:
        for demand, manifest, name in runs:
            results.append(_run((demand, manifest, name, settings, delay, record)))
            bar.update(len(results), "simulating")
    else:
        # "fork" where there is one: the children inherit the demands instead of unpickling them
        # (and skip importing tandem again); simulate runs no threads that a fork could break.
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        tasks = [(demand, manifest, name, settings, delay, record) for demand, manifest, name in runs]
        _TASKS[:] = tasks
        try:
            with ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=context) as pool:
                work: Any = range(len(tasks)) if context.get_start_method() == "fork" else tasks
                for result in pool.map(_run_inherited if work is not tasks else _run, work):
                    results.append(result)
                    bar.update(len(results), "simulating")
        finally:
            _TASKS.clear()


def _manifests(
    policy_files: Sequence[str], settings: Settings, checked: Mapping[str, Sequence[dict[str, Any]]] | None = None
) -> list[list[tuple[str, dict[str, Any]]]] | None:
    """Per policy file, its manifests with the key of the workload each targets, read before the
    stream so that the demand of the other workloads is not kept; ``None`` if a file or manifest
    is refused: ``simulate`` then reads them after the stream as before, so the same messages
    come in the same order."""
    try:
        return [
            [
                (WorkloadRef(**policy_event(m, settings.cluster)["workload"]).key, m)
                for m in (checked.get(path, ()) if checked is not None else load_manifests(path))
            ]
            for path in policy_files
        ]
    except Exception:  # refused again below, after the stream, where simulate always refused it
        return None


#: The runs of the current ``simulate`` call, inherited by forked pool processes.
_TASKS: list[tuple[Demand, dict[str, Any] | UpstreamArm, str, Settings, float, bool]] = []


def _run_inherited(index: int) -> tuple[Outcome, list[dict[str, Any]] | None]:
    return _run(_TASKS[index])


def _run(
    task: tuple[Demand, dict[str, Any] | UpstreamArm, str, Settings, float, bool],
) -> tuple[Outcome, list[dict[str, Any]] | None]:
    """One (policy, workload) run, in this process or a pool's (module level: picklable)."""
    demand, manifest, name, settings, delay, record = task
    recorded: list[dict[str, Any]] | None = [] if record else None
    if isinstance(manifest, UpstreamArm):
        return simulate_upstream(demand, manifest, name, settings, delay, recorded), recorded
    return simulate_one(demand, manifest, name, settings, delay, recorded), recorded


COLUMNS = (
    ("policy", "policy", "{}"),
    ("workload", "workload", "{}"),
    ("cpu_core_hours", "CPU core-h", "{:.1f}"),
    ("memory_gib_hours", "mem GiB-h", "{:.1f}"),
    ("hours_over_requests", "h > requests", "{:.2f}"),
    ("hours_over_limits", "h > limits", "{:.2f}"),
    ("saturated_samples", "saturated", "{}"),
    ("rolling_updates", "rollouts", "{}"),
    ("replica_changes", "replica chg", "{}"),
    ("cpu_shortfall_core_hours", "CPU short core-h", "{:.2f}"),
    ("oom_kills", "OOM kills", "{}"),
    ("evictions", "evictions", "{}"),
    ("pod_restarts", "restarts", "{}"),
    ("resizes", "resizes", "{}"),
)


def table(outcomes: Sequence[Outcome]) -> str:
    """The comparison table, one row per policy and workload, then one total per policy."""
    rows = [[fmt.format(getattr(o, attr)) for attr, _, fmt in COLUMNS] for o in outcomes]
    totals: dict[str, Outcome] = {}
    for o in outcomes:
        t = totals.setdefault(o.policy, Outcome(o.policy, "(all)"))
        for attr, _, _ in COLUMNS[2:]:
            setattr(t, attr, getattr(t, attr) + getattr(o, attr))
    rows += [[fmt.format(getattr(t, attr)) for attr, _, fmt in COLUMNS] for t in totals.values()]
    header = [title for _, title, _ in COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [
        "  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))
    ]
    for r in rows:
        lines.append(
            "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
        )
    return "\n".join(lines)


def write_report(
    out: Path,
    outcomes: Sequence[Outcome],
    policy_files: Sequence[str],
    recordings: dict[str, list[dict[str, Any]]],
    settings: Settings,
    err: IO[str],
) -> Path:
    """The comparison as HTML: the table, then per workload the report plots of each policy side by side.

    Each policy's simulated stream is written next to the page and rendered by ``tandem report``'s
    own code (``analysis.report.build``), which replays it through the same core with that policy:
    the markers are that policy's decisions on the simulated workload.
    """
    out.mkdir(parents=True, exist_ok=True)
    names = [Path(p).stem for p in policy_files]
    for path, name in zip(policy_files, names, strict=True):
        events = sorted(recordings.get(name, []), key=lambda e: e["ts"])
        stream = out / name / "stream.jsonl"
        stream.parent.mkdir(parents=True, exist_ok=True)
        stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
        docs = load_manifests(path)
        upstream = any(is_upstream(d) for d in docs)
        build(
            [str(stream)],
            out / name,
            settings=settings,
            policies=[] if upstream else docs,
            png="none",
            title=f"tandem simulate: {name}",
            # An upstream file's stream has no tandem policy to replay: the report's warning
            # that no decision can be made is expected there, not news.
            err=io.StringIO() if upstream else err,
        )
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=n' if i >= 2 else ''}>{html.escape(fmt.format(getattr(o, attr)))}</td>"
            for i, (attr, _, fmt) in enumerate(COLUMNS)
        )
        + "</tr>"
        for o in outcomes
    )
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in COLUMNS)
    workloads = sorted({o.workload for o in outcomes})
    sections = []
    for key in workloads:
        frames = "".join(
            f'<div class="col"><h3>{html.escape(n)}</h3><iframe src="{html.escape(n)}/index.html#{html.escape(key)}">'
            "</iframe></div>"
            for n in names
            if any(o.workload == key and o.policy == n for o in outcomes)
        )
        sections.append(f'<h2 id="{html.escape(key)}">{html.escape(key)}</h2><div class="row">{frames}</div>')
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tandem simulate</title><style>'
        "body{font-family:sans-serif;margin:20px;color:#1b2733}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccd;padding:3px 8px;font-size:13px}td.n{text-align:right}"
        ".row{display:flex;gap:12px}.col{flex:1;min-width:0}iframe{width:100%;height:1100px;border:1px solid #ccd}"
        "</style></head><body><h1>tandem simulate: policies compared in closed loop</h1>"
        f"<table><tr>{head}</tr>{rows}</table>{''.join(sections)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
