"""The one embedded runner: recorded files through the decision core, no Kafka.

``tandem replay``, ``tandem report`` (its embedded replay), ``tandem publish`` and ``tandem
simulate`` read their input the same way, here: every line of every file decoded
(:func:`read_events`; a bad line is ``FILE:LINE: field 'x': why``, skipped, or fatal under
``--strict``), then ordered by event time with file order kept for equal ``ts`` (docs/contract.md
section 6: a stable sort, :func:`read_sorted`); :func:`run` then feeds them to
:class:`scaling.engine.Engine`, exactly the functions the Faust agents call, and flushes it at the
end, handing everything emitted to one sink.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import Event, PolicyEvent
from scaling.policies import parse_policy
from scaling.reconcile import Emitted
from schemas.codec import decode
from streams.inputs import BrokenStream, iter_lines

__all__ = [
    "Line",
    "Progress",
    "ReplayStats",
    "StrictError",
    "no_policy_warning",
    "read_events",
    "read_sorted",
    "run",
]

#: One decoded input line: ``(ts, seq, (path, line number, raw JSON), event)``; ``seq`` is the
#: arrival order over all files.
Line = tuple[float, int, Any, Event]


class StrictError(Exception):
    """A bad line under ``--strict``."""


@dataclass
class ReplayStats:
    files: int = 0
    read: int = 0
    rejected: int = 0
    decisions: int = 0
    dry_run: int = 0
    blocked: int = 0
    recommendations: int = 0
    workloads: int = 0
    first_ts: float | None = None
    last_ts: float | None = None
    by_reason: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        span = ""
        if self.first_ts is not None and self.last_ts is not None:
            hours = (self.last_ts - self.first_ts) / 3600
            span = f" covering {hours:.1f} h of event time"
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self.by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
        return (
            f"tandem replay: read {self.read} events from {self.files} file(s){span}; "
            f"rejected {self.rejected}; {self.workloads} workload(s); "
            f"{self.decisions} decision(s){f' ({self.dry_run} dry-run)' if self.dry_run else ''}, "
            f"{self.blocked} blocked change report(s){f' ({reasons})' if reasons else ''}"
            f"{f'; {self.recommendations} recommendation event(s)' if self.recommendations else ''}."
        )


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal and the input is large."""

    def __init__(self, stream: IO[str], total: int | None, enabled: bool) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        self.last = 0.0

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        if self.total:
            frac = min(done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r{label} [{bar:<30}] {frac:6.1%} {done}/{self.total}")
        else:
            self.stream.write(f"\r{label} {done}")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 72 + "\r")
            self.stream.flush()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the input is read, back as it was after.

    Reading only grows: every line becomes a few acyclic objects (the JSON value, the typed event)
    that are kept until the run ends, so a collection finds nothing to free, yet one ran every 700
    of them and the older generations walked the whole growing list again and again: about 40 %
    of the CPU time of reading the bundled example.  Whatever garbage reading does leave (a
    rejected line's exception) is collected once the collector is back.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_events(
    paths: Sequence[str],
    report: Callable[[str], None],
    stats: ReplayStats,
    *,
    strict: bool = False,
    progress: Progress | None = None,
    check_policies: bool = False,
) -> list[Line]:
    """Decode every line of every file; return ``(ts, seq, raw, event)`` in arrival order.

    ``check_policies`` also parses each policy event's manifest now (``tandem publish``: a policy
    the worker would refuse is a bad line here, before anything is published).
    """
    events: list[Line] = []
    seq = 0
    with _gc_paused():
        for path in paths:
            stats.files += 1
            try:
                for lineno, line in iter_lines(path):
                    stats.read += 1
                    try:
                        raw, event = decode(line)
                        if check_policies and isinstance(event, PolicyEvent) and event.manifest is not None:
                            try:
                                parse_policy(event.manifest, event.workload)
                            except InvalidEvent as bad:
                                raise bad.within("policy") from None
                    except InvalidEvent as exc:
                        stats.rejected += 1
                        msg = f"{path}:{lineno}: {exc}"
                        if strict:
                            raise StrictError(msg) from None
                        report(msg)
                        continue
                    events.append((event.ts, seq, (path, lineno, raw), event))
                    seq += 1
                    if progress is not None and seq % 4096 == 0:
                        progress.update(seq, "reading")
            except BrokenStream as exc:
                # A truncated or corrupt file: the lines before stand, the break is one bad line.
                stats.rejected += 1
                msg = f"{path}:{exc.lineno}: {exc}"
                if strict:
                    raise StrictError(msg) from None
                report(msg)
    return events


def no_policy_warning(engine: Engine) -> str | None:
    """The warning when no workload has a policy: nothing can be decided, so say why and how to fix it.

    When ``--policy`` manifests were given but all target workloads that are not in the stream,
    the warning names both sides (a wrong cluster or namespace is the usual cause).
    """
    if not engine.states or any("policy" in st.raw for st in engine.states.values()):
        return None
    seen = sorted(engine.states)
    shown = ", ".join(seen[:5]) + (f" and {len(seen) - 5} more" if len(seen) > 5 else "")
    if engine.default_policies:
        targets = sorted(engine.default_policies)
        aimed = ", ".join(targets[:5]) + (f" and {len(targets) - 5} more" if len(targets) > 5 else "")
        return (
            f"warning: no decision can be made: the --policy manifests target {aimed}, "
            f"none of which is in the stream (its workloads: {shown}); check their namespace, target "
            "and cluster (annotation tandem.dev/cluster, or --cluster)"
        )
    return (
        f"warning: no decision can be made: none of the {len(seen)} workload(s) has a policy ({shown}); "
        "pass one with --policy FILE (Hvpa, Tortoise or CustomHpa manifests, see examples/policies.yaml) "
        "or put policy events in the stream"
    )


def _ts(line: Line) -> float:
    return line[0]


def read_sorted(
    paths: Sequence[str],
    report: Callable[[str], None],
    stats: ReplayStats,
    *,
    strict: bool = False,
    progress: Progress | None = None,
    check_policies: bool = False,
) -> list[Line]:
    """:func:`read_events`, ordered by event time, file order kept for equal ``ts`` (section 6)."""
    events = read_events(paths, report, stats, strict=strict, progress=progress, check_policies=check_policies)
    events.sort(key=_ts)  # stable: equal ts keep their arrival order
    return events


def run(
    engine: Engine,
    events: Sequence[Line],
    sink: Callable[[list[Emitted]], None],
    report: Callable[[str], None],
    *,
    stats: ReplayStats | None = None,
    strict: bool = False,
    each: Callable[[Event], None] | None = None,
    progress: Progress | None = None,
) -> None:
    """Feed ``events`` (sorted) to ``engine``, then flush it; everything emitted goes to ``sink``.

    An event the engine refuses (``InvalidEvent``: a policy that does not parse, say) is reported
    as ``FILE:LINE: why`` and counted in ``stats.rejected``, or raises :class:`StrictError` when
    ``strict``; ``each`` is called with every event the engine took, after it took it.
    """
    for i, (_, _, (path, lineno, raw), event) in enumerate(events):
        try:
            sink(engine.process(raw, event))
        except InvalidEvent as exc:
            if stats is not None:
                stats.rejected += 1
            msg = f"{path}:{lineno}: {exc}"
            if strict:
                raise StrictError(msg) from None
            report(msg)
        else:
            if each is not None:
                each(event)
        if progress is not None and i % 4096 == 0:
            progress.update(i, "replaying")
    sink(engine.flush())
