"""The one embedded runner: recorded files through the decision core, no Kafka.

``tandem replay``, ``tandem report`` (its embedded replay), ``tandem publish`` and ``tandem
simulate`` read their input the same way, here: every line of every file decoded
(:func:`read_events`; a bad line is ``FILE:LINE: field 'x': why``, skipped, or fatal under
``--strict``), then ordered by event time with file order kept for equal ``ts`` (docs/contract.md
section 6: a stable sort, :func:`read_sorted`); :func:`run` then feeds them to
:class:`scaling.engine.Engine`, exactly the functions the Faust agents call, and flushes it at the
end, handing everything emitted to one sink.

Replay and report take :func:`read_ordered` instead: files that are each already in event-time
order (recordings, ``tandem import prometheus --out``) are merged one line at a time
(:func:`stream_events`), in the stable sort's order, so that a month of a fleet replays in the
engine's memory rather than in that of every event at once.  Publish needs the whole plan before
its first message (the policies are stamped with the first ``ts``) and keeps the list; simulate
keeps little of each line and reads with :func:`read_reduced`.
"""

from __future__ import annotations

import gc
import heapq
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TypeVar

import orjson

from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import Event, PolicyEvent
from scaling.policies import parse_policy
from scaling.reconcile import Emitted
from schemas.codec import decode
from streams.inputs import BrokenStream, iter_lines

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = [
    "InputChanged",
    "Line",
    "Progress",
    "ReplayStats",
    "StrictError",
    "gc_paused",
    "no_policy_warning",
    "read_events",
    "read_ordered",
    "read_reduced",
    "read_sorted",
    "run",
    "scan_order",
    "stream_events",
]

#: One decoded input line: ``(ts, seq, (path, line number, raw JSON), event)``; ``seq`` is the
#: arrival order over all files (:func:`stream_events`: over the line's own file).
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
def gc_paused() -> Iterator[None]:
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
    with gc_paused():
        for path in paths:
            for lineno, raw, event in _decoded(path, report, stats, strict, check_policies):
                events.append((event.ts, seq, (path, lineno, raw), event))
                seq += 1
                if progress is not None and seq % 4096 == 0:
                    progress.update(seq, "reading")
    return events


def _decoded(
    path: str, report: Callable[[str], None], stats: ReplayStats, strict: bool, check_policies: bool = False
) -> Iterator[tuple[int, Any, Event]]:
    """``(line number, raw, event)`` of every line of ``path`` that decodes; the others reported
    as ``FILE:LINE: why`` and counted (or :class:`StrictError` when ``strict``), the one reader of
    both paths (:func:`read_events`, :func:`stream_events`), so both say the same of every line."""

    def refuse(lineno: int, why: Exception) -> None:
        stats.rejected += 1
        msg = f"{path}:{lineno}: {why}"
        if strict:
            raise StrictError(msg) from None
        report(msg)

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
                refuse(lineno, exc)
                continue
            yield lineno, raw, event
    except BrokenStream as exc:
        # A truncated or corrupt file: the lines before stand, the break is one bad line.
        refuse(exc.lineno, exc)


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


def scan_order(paths: Sequence[str], *, strict: bool = False, progress: Progress | None = None) -> int | None:
    """The lines of ``paths`` if every file is already in event-time order, else ``None``.

    The pre-scan of :func:`read_ordered`: each file read once, before anything is decided, and of
    each line only its top-level numeric ``ts`` (``orjson.loads``; a line that does not parse or
    has no numeric ``ts`` is left out of the check: the real pass refuses it).  A file whose ``ts``
    goes back even once, stdin or a pipe (it cannot be read twice) answer ``None`` at once.  A
    file that breaks part-way is in order if the lines before the break are (the real pass reports
    the break).  Under ``strict`` every line is decoded as the real pass would and the first bad
    one raises :class:`StrictError` with the message :func:`read_events` gives it: ``--strict``
    still decides nothing when a line is bad.
    """
    total = 0
    for path in paths:
        if path == "-" or not os.path.isfile(path):
            return None
        last = -math.inf
        try:
            for lineno, line in iter_lines(path):
                total += 1
                if progress is not None and total % 4096 == 0:
                    progress.update(total, "reading")
                if strict:
                    try:
                        ts: float | None = decode(line)[1].ts
                    except InvalidEvent as exc:
                        raise StrictError(f"{path}:{lineno}: {exc}") from None
                else:
                    ts = _top_ts(line)
                    if ts is None:
                        continue
                if ts < last:
                    return None
                last = ts
        except BrokenStream as exc:
            if strict:
                raise StrictError(f"{path}:{exc.lineno}: {exc}") from None
    return total


#: A line that begins ``{"type":"...","ts":NUMBER`` followed by ``,`` or ``}``, as tandem writes them.
_TS_PREFIX = re.compile(rb'\{"type":"[a-z_]{1,32}","ts":(-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,17})?)[,}]')


def _top_ts(line: bytes) -> float | None:
    """The top-level numeric ``ts`` of a line as :func:`schemas.codec.decode` would read it, if any.

    A line tandem wrote (a recording, an import) starts with its type and ``ts``: when that prefix
    holds the line's only ``"ts":`` (a key, since a string holds its quotes escaped), it is the
    top-level one, read without parsing the line (parsing was half the pre-scan's CPU: a day of
    bench/bench_import.py's fleet 1.27 -> 0.63 s).  A line
    that is not JSON after such a prefix counts in the check here, and is refused by the real pass
    either way; any other line is parsed."""
    found = _TS_PREFIX.match(line)
    if found is not None and line.count(b'"ts":') == 1:
        return float(found.group(1))
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    ts = obj.get("ts") if type(obj) is dict else None
    return float(ts) if type(ts) is float or type(ts) is int else None


class InputChanged(StrictError):
    """A streamed file whose ``ts`` goes back in time although the pre-scan found it in order."""


def stream_events(
    paths: Sequence[str], report: Callable[[str], None], stats: ReplayStats, *, strict: bool = False
) -> Iterator[Line]:
    """:func:`read_sorted`'s events, one at a time, for files each already in event-time order.

    ``heapq.merge`` of one lazy decoder per file keyed by ``ts``: it breaks ties by the order of
    the files, then by each file's line order, which is exactly the stable sort's order (section 6),
    and it holds one decoded line per file.  Each line is decoded, refused and counted as
    :func:`read_events` does it, but when the merge reaches it: a refused line's message comes
    between the engine's own refusals in event-time order, not before them all.  ``seq`` is the
    line's place among its file's events.  A file that is not in order after all (it changed since
    :func:`scan_order` read it) raises :class:`InputChanged` at its first line out of order.
    """

    def lines(path: str) -> Iterator[Line]:
        last = -math.inf
        for seq, (lineno, raw, event) in enumerate(_decoded(path, report, stats, strict)):
            ts = event.ts
            if ts < last:
                raise InputChanged(
                    f"{path}:{lineno}: ts {ts} is before the line above it, yet the file was in event-time "
                    "order when first read: was it changed during the run? Nothing after this line was read"
                )
            last = ts
            yield ts, seq, (path, lineno, raw), event

    return heapq.merge(*(lines(path) for path in paths), key=_ts)


def read_ordered(
    paths: Sequence[str],
    report: Callable[[str], None],
    stats: ReplayStats,
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> tuple[Iterable[Line], int]:
    """The events in :func:`read_sorted`'s order, and how many lines to expect (the progress bar).

    When every file is already in event-time order (:func:`scan_order`; recordings and ``tandem
    import prometheus --out`` files are written so) they are streamed (:func:`stream_events`):
    memory stays that of the engine, not of the input.  Otherwise :func:`read_sorted`'s list, as
    before.  ``strict`` is checked in the pre-scan: a bad line raises :class:`StrictError` before
    anything is decided, either way.
    """
    total = scan_order(paths, strict=strict, progress=progress)
    if total is None:
        events = read_sorted(paths, report, stats, strict=strict, progress=progress)
        return events, len(events)
    return stream_events(paths, report, stats, strict=strict), total


T = TypeVar("T")


def read_reduced(
    paths: Sequence[str],
    report: Callable[[str], None],
    stats: ReplayStats,
    reduce: Callable[[Any, Event], T | None],
    *,
    jobs: int = 1,
) -> list[tuple[float, T]]:
    """:func:`read_sorted` for a reader that keeps little of each event: ``reduce(raw, event)`` of
    every accepted line (``None``: nothing kept), with its ``ts``, in :func:`read_sorted`'s order.

    Lines are decoded and refused exactly as :func:`read_events` does (the same messages, in the
    same order, the same counts), but no decoded event outlives its line, and with ``jobs`` > 1 a
    file's lines are decoded in that many parts at once, this process taking the first and a pool
    the others: decoding is most of the time a reader like ``tandem simulate`` spends before any
    work can be spread.  ``reduce`` must then be picklable (a module-level function), and so must
    what it returns.
    """
    kept: list[tuple[float, T]] = []
    # The collector stays off until every part is back: decoding, the parts' results arriving
    # from the pool (unpickled in this process: a few objects per line, all kept) and merging them
    # only grow the heap, as in :func:`read_events` (the unpickling alone took 3 to 6 times as
    # long with the collector on).
    with gc_paused():
        for path in paths:
            stats.files += 1
            lines: list[tuple[int, bytes]] = []
            broken: BrokenStream | None = None
            try:
                lines.extend(iter_lines(path))
            except BrokenStream as exc:
                broken = exc  # the lines before stand; the break is reported after them
            stats.read += len(lines)
            parts = max(1, min(jobs, len(lines) // _MIN_PART_LINES))
            size = -(-len(lines) // parts)
            chunks = [lines[i : i + size] for i in range(0, len(lines), size)] or [lines]
            # Imported here, not with the module: replay, report and publish read through this
            # module and never spread their reading; the two imports cost them about 65 M instructions.
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            if len(chunks) > 1 and "fork" in multiprocessing.get_all_start_methods():
                context = multiprocessing.get_context("fork")  # no re-import of tandem in each decoder
                # The decoders inherit their lines with the fork (``_CHUNKS``) instead of receiving
                # them pickled: a file's bytes copied twice before a decoder could start.
                _CHUNKS[:] = chunks
                try:
                    with ProcessPoolExecutor(max_workers=len(chunks) - 1, mp_context=context) as pool:
                        futures: list[Future[_Decoded[T]]] = [
                            pool.submit(_decode_inherited, path, i, reduce) for i in range(1, len(chunks))
                        ]
                        results = [_decode_part(path, chunks[0], reduce)] + [f.result() for f in futures]
                finally:
                    _CHUNKS.clear()
            else:
                results = [_decode_part(path, chunk, reduce) for chunk in chunks]
            for part_kept, refused in results:
                kept.extend(part_kept)
                stats.rejected += len(refused)
                for msg in refused:
                    report(msg)
            if broken is not None:
                stats.rejected += 1
                report(f"{path}:{broken.lineno}: {broken}")
    kept.sort(key=_ts_of)  # stable: equal ts keep their arrival order
    return kept


#: Fewer lines than this per part are decoded here: a pool would cost more than it saves.
_MIN_PART_LINES = 2000
#: The parts of the file being read, inherited by the forked decoders (``read_reduced``).
_CHUNKS: list[list[tuple[int, bytes]]] = []


def _decode_inherited(path: str, index: int, reduce: Callable[[Any, Event], T | None]) -> _Decoded[T]:
    """:func:`_decode_part` of the part a forked decoder inherited (``_CHUNKS``)."""
    return _decode_part(path, _CHUNKS[index], reduce)


def _ts_of(item: tuple[float, Any]) -> float:
    return item[0]


#: A part of a file, decoded: what was kept of its lines, and the messages of those refused.
_Decoded = tuple[list[tuple[float, T]], list[str]]


def _decode_part(
    path: str, lines: Sequence[tuple[int, bytes]], reduce: Callable[[Any, Event], T | None]
) -> _Decoded[T]:
    """Decode ``lines`` of ``path`` as :func:`read_events` does: ``(ts, reduce(raw, event))`` of
    the accepted ones that reduce to something, and the messages of the refused ones, in order."""
    kept: list[tuple[float, T]] = []
    refused: list[str] = []
    with gc_paused():
        for lineno, line in lines:
            try:
                raw, event = decode(line)
            except InvalidEvent as exc:
                refused.append(f"{path}:{lineno}: {exc}")
                continue
            value = reduce(raw, event)
            if value is not None:
                kept.append((event.ts, value))
    return kept, refused


def run(
    engine: Engine,
    events: Iterable[Line],
    sink: Callable[[list[Emitted]], None],
    report: Callable[[str], None],
    *,
    stats: ReplayStats | None = None,
    strict: bool = False,
    each: Callable[[Event], None] | None = None,
    progress: Progress | None = None,
) -> None:
    """Feed ``events`` (in order: a list or :func:`read_ordered`'s stream) to ``engine``, then
    flush it; everything emitted goes to ``sink``.

    An event the engine refuses (``InvalidEvent``: a policy that does not parse, say) is reported
    as ``FILE:LINE: why`` and counted in ``stats.rejected``, or raises :class:`StrictError` when
    ``strict``; ``each`` is called with every event the engine took, after it took it.
    ``stats.first_ts`` and ``last_ts`` are those of the first and last event (taken or not).
    """
    ts: float | None = None
    for i, (ts, _, (path, lineno, raw), event) in enumerate(events):
        if i == 0 and stats is not None:
            stats.first_ts = ts
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
    if stats is not None and ts is not None:
        stats.last_ts = ts
    sink(engine.flush())
