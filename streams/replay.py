"""``tandem replay``: recorded streams through the decision core, embedded, no Kafka.

Events from all files are ordered by event time, file order kept for equal ``ts`` (CONTRACT.md
section 6), then fed to :class:`scaling.engine.Engine`, exactly the functions the Faust agents
call.  A bad line is reported as ``FILE:LINE: field 'x': why`` and skipped (``--strict`` makes it
fatal); it never stops the replay.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from scaling.cloudevents import BLOCKED, DECISION
from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import Event
from scaling.reconcile import Emitted
from scaling.settings import Settings
from schemas.codec import decode, encode
from streams.inputs import BrokenStream, iter_lines

__all__ = ["ReplayStats", "StrictError", "no_policy_warning", "read_events", "replay"]


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


class _Progress:
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


def read_events(
    paths: Sequence[str],
    report: Callable[[str], None],
    stats: ReplayStats,
    *,
    strict: bool = False,
    progress: _Progress | None = None,
) -> list[tuple[float, int, Any, Event]]:
    """Decode every line of every file; return ``(ts, seq, raw, event)`` in arrival order."""
    events: list[tuple[float, int, Any, Event]] = []
    seq = 0
    for path in paths:
        stats.files += 1
        try:
            for lineno, line in iter_lines(path):
                stats.read += 1
                try:
                    raw, event = decode(line)
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


def replay(
    paths: Sequence[str],
    out: IO[bytes],
    *,
    settings: Settings,
    policies: Iterable[dict[str, Any]] = (),
    strict: bool = False,
    include_recommendations: bool = False,
    err: IO[str] | None = None,
    progress: bool | None = None,
) -> ReplayStats:
    """Run the replay; write audit CloudEvents (and recommendations if asked) as JSON Lines."""
    err = err if err is not None else sys.stderr
    stats = ReplayStats()
    engine = Engine(settings)
    for manifest in policies:
        engine.add_policy(manifest)

    def report(msg: str) -> None:
        err.write(msg + "\n")

    if progress is None:
        progress = err.isatty()
    bar = _Progress(err, None, progress)
    events = read_events(paths, report, stats, strict=strict, progress=bar)
    # Section 6: order by event time, keeping file order for equal ts (sorted() is stable).
    events.sort(key=lambda e: e[0])
    bar.total = len(events) if len(events) >= 50_000 else None
    bar.enabled = progress and len(events) >= 50_000
    if events:
        stats.first_ts, stats.last_ts = events[0][0], events[-1][0]

    write = out.write

    def emit(items: list[Emitted]) -> None:
        for kind, ev in items:
            if kind == "audit":
                if ev["type"] == DECISION:
                    stats.decisions += 1
                    stats.dry_run += bool(ev["data"].get("dry_run"))
                elif ev["type"] == BLOCKED:
                    stats.blocked += 1
                for b in ev["data"].get("blocked", ()):
                    stats.by_reason[b["reason"]] = stats.by_reason.get(b["reason"], 0) + 1
            else:
                if not include_recommendations:
                    continue
                stats.recommendations += 1
            write(encode(ev))
            write(b"\n")

    for i, (_, _, (path, lineno, raw), event) in enumerate(events):
        try:
            emit(engine.process(raw, event))
        except InvalidEvent as exc:
            stats.rejected += 1
            msg = f"{path}:{lineno}: {exc}"
            if strict:
                raise StrictError(msg) from None
            report(msg)
        if i % 4096 == 0:
            bar.update(i, "replaying")
    emit(engine.flush())
    bar.done()
    stats.workloads = len(engine.states)
    warning = no_policy_warning(engine)
    if warning is not None:
        report(f"tandem replay: {warning}")
    return stats
