"""``tandem replay``: recorded streams through the decision core, embedded, no Kafka.

Events from all files are ordered by event time, file order kept for equal ``ts`` (docs/contract.md
section 6), then fed to :class:`scaling.engine.Engine`, exactly the functions the Faust agents
call, by the one embedded runner (:mod:`streams.runner`).  A bad line is reported as
``FILE:LINE: field 'x': why`` and skipped (``--strict`` makes it fatal); it never stops the replay.

Files that are each already in event-time order are streamed (:func:`streams.runner.read_ordered`:
a pre-scan of every file, then a lazy merge), others read whole and sorted; the audit stream and
the summary are the same either way.  Only stderr's order differs: streamed, each bad line is
reported when the merge reaches it, among the engine's refusals in event-time order; sorted, every
line that does not decode is reported first.  ``--strict`` is checked in the pre-scan, so a bad
line still ends the run before anything is decided.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

from scaling.engine import Engine
from scaling.reconcile import Emitted
from scaling.settings import Settings
from scaling.vocabulary import BLOCKED, DECISION
from schemas.codec import encode
from schemas.words import held_back_counts
from streams.runner import Progress, ReplayStats, StrictError, no_policy_warning, read_ordered, run

__all__ = ["ReplayStats", "StrictError", "policy_warning", "replay", "summary"]


def summary(stats: ReplayStats) -> str:
    """The replay's one-paragraph summary on stderr: what was read, decided and held back.

    The held-back counts are per target (:func:`schemas.words.held_back_counts`): they add up to
    their own total, not to the number of blocked reports, and the HTML report words them alike.
    """
    span = ""
    if stats.first_ts is not None and stats.last_ts is not None:
        span = f" covering {(stats.last_ts - stats.first_ts) / 3600:.1f} h of event time"
    dry = f" ({stats.dry_run} dry-run)" if stats.dry_run else ""
    held = f"; {held_back_counts(stats.by_reason)}" if stats.by_reason else ""
    recs = f"; {stats.recommendations} recommendation event(s)" if stats.recommendations else ""
    return (
        f"tandem replay: read {stats.read} events from {stats.files} file(s){span}; "
        f"rejected {stats.rejected}; {stats.workloads} workload(s); "
        f"{stats.decisions} decision(s){dry}, {stats.blocked} blocked change report(s){held}{recs}."
    )


def policy_warning(engine: Engine, refused: Sequence[str] = ()) -> str | None:
    """:func:`streams.runner.no_policy_warning`, except when every policy passed was refused:
    then "pass one with --policy FILE" would be wrong (one was passed), so say that it was refused."""
    warning = no_policy_warning(engine)
    if warning is None or not refused or engine.default_policies:
        return warning
    names = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
    return (
        f"warning: no decision can be made: the --policy manifest(s) passed were refused ({names}: see the "
        f"line(s) above), so none of the {len(engine.states)} workload(s) has a policy; fix the field named "
        "there and run again"
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
    refused_policies: Sequence[str] = (),
) -> ReplayStats:
    """Run the replay; write audit CloudEvents (and recommendations if asked) as JSON Lines.

    ``refused_policies`` (``kind namespace/name`` of each manifest refused before the run) words
    the "no policy" warning.
    """
    err = err if err is not None else sys.stderr
    stats = ReplayStats()
    engine = Engine(settings)
    for manifest in policies:
        engine.add_policy(manifest)

    def report(msg: str) -> None:
        err.write(msg + "\n")

    if progress is None:
        progress = err.isatty()
    bar = Progress(err, None, progress)
    events, total = read_ordered(paths, report, stats, strict=strict, progress=bar)
    bar.total = total if total >= 50_000 else None
    bar.enabled = progress and total >= 50_000

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

    run(engine, events, emit, report, stats=stats, strict=strict, progress=bar)
    bar.done()
    stats.workloads = len(engine.states)
    warning = policy_warning(engine, refused_policies)
    if warning is not None:
        report(f"tandem replay: {warning}")
    return stats
