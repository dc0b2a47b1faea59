"""``tandem audit``: read the audit stream, filter it, print it; ``tandem audit explain``: tell a story.

    tandem audit [FILE|-] [--broker B] [--topic-prefix P | --topic T] [--cluster C] [--namespace N]
                 [--workload NAME|KEY] [--type decision|blocked|applied|apply_failed|late|learned]...
                 [--since TIME] [--until TIME] [--format json|text]
    tandem audit explain KEY [FILE|-] [--broker B] [--topic T] [--since TIME] [--until TIME]

The audit stream is what ``tandem replay --out`` writes (CloudEvents, one JSON object per line;
``.gz`` and ``-`` for stdin work too) or, without FILE, the ``<prefix>audit`` topic, read from the
start of every partition up to the end offsets it had when the command started (no consumer group,
nothing committed).  A line that is not a CloudEvent is reported on stderr and skipped.

TIME is Unix seconds, an RFC 3339 / ISO 8601 time (``2025-11-04T07:00:00Z``; UTC when no offset is
given; a bare date is its midnight), or a duration (``90s``, ``30m``, ``2h``, ``7d``) meaning that
long before now.  An event's time is its ``data.tick`` (decisions and blocked reports) or its
``time`` (applier results, late inputs, learned history); ``--since`` is inclusive, ``--until``
exclusive.

Exit codes: 0 success (also when nothing matched), 1 the broker cannot be read or explain found no
event of the workload, 2 a usage error or a missing file.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from scaling.vocabulary import CLOUDEVENT_TYPES
from schemas.words import (
    REASON_WORDS,
    describe_blocked,
    describe_change,
    describe_inputs,
    fmt_time,
    held_back,
    human_quantity,
    learned_sentence,
    outcome_sentences,
    policy_phrase,
    sentence,
)
from streams.inputs import BrokenStream, iter_lines
from streams.security import KafkaSecurity
from streams.settings import bootstrap_servers

__all__ = [
    "REASON_WORDS",
    "AuditEvent",
    "Filter",
    "describe_change",
    "explain",
    "held_back",
    "human_quantity",
    "parse_time",
    "read_file",
    "read_topic",
    "resolve_key",
    "text_line",
]

#: ``--type`` name -> CloudEvent type.
TYPES = CLOUDEVENT_TYPES
SHORT = {v: k for k, v in TYPES.items()}


@dataclass
class AuditEvent:
    """One CloudEvent of the audit stream, with what filters and stories need pulled out."""

    raw: bytes
    event: dict[str, Any]
    ts: float
    seq: int

    @property
    def type(self) -> str:
        return SHORT.get(str(self.event.get("type")), str(self.event.get("type")))

    @property
    def subject(self) -> str:
        return str(self.event.get("subject", ""))

    @property
    def data(self) -> dict[str, Any]:
        d = self.event.get("data")
        return d if isinstance(d, dict) else {}

    @property
    def workload(self) -> tuple[str, str, str, str]:
        wl = self.data.get("workload")
        if isinstance(wl, Mapping) and all(
            isinstance(wl.get(k), str) for k in ("cluster", "namespace", "kind", "name")
        ):
            return (wl["cluster"], wl["namespace"], wl["kind"], wl["name"])
        parts = [*self.subject.split("/", 3), "", "", ""]
        return (parts[0], parts[1], parts[2], parts[3])


# ----------------------------------------------------------------------------------- time


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds from a TIME option (see the module docstring); ValueError when it is none."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    m = _DURATION.match(text)
    if m:
        base = datetime.now(UTC).timestamp() if now is None else now
        return base - float(m.group(1)) * _UNITS[m.group(2)]
    iso = text.replace("z", "Z")
    if iso.endswith("Z"):
        iso = iso[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give Unix seconds, RFC 3339 (2025-11-04T07:00:00Z) or a duration (2h)"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def event_ts(ev: Mapping[str, Any]) -> float | None:
    data = ev.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("tick"), int | float) and not isinstance(data["tick"], bool):
        return float(data["tick"])
    t = ev.get("time")
    if isinstance(t, str):
        try:
            return parse_time(t)
        except ValueError:
            return None
    return None


# ----------------------------------------------------------------------------------- reading


def _decode(raw: bytes, seq: int) -> AuditEvent:
    try:
        ev = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(ev, dict) or ev.get("specversion") != "1.0" or not isinstance(ev.get("type"), str):
        raise ValueError("not a CloudEvent (no specversion 1.0 and type)")
    ts = event_ts(ev)
    if ts is None:
        raise ValueError("field 'time': missing or not an RFC 3339 time")
    return AuditEvent(raw, ev, ts, seq)


def read_file(path: str, err: IO[str] | None = None) -> list[AuditEvent]:
    """The CloudEvents of an audit file in file order; bad lines are reported on ``err`` and skipped."""
    err = err if err is not None else sys.stderr
    out: list[AuditEvent] = []
    held: list[str] = []  # bad lines before the first CloudEvent: told only if the file is an audit file
    try:
        for lineno, line in iter_lines(path):
            try:
                out.append(_decode(line, len(out)))
            except ValueError as exc:
                (held.append if not out else err.write)(f"{path}:{lineno}: {exc}\n")
                continue
            if held:
                err.write("".join(held))
                held.clear()
    except BrokenStream as exc:
        (held.append if not out else err.write)(f"{path}:{exc.lineno}: {exc}\n")
    if held and not out:
        raise NotAnAuditFile(
            f"{path}: no CloudEvent in {len(held)} line(s), so not an audit file; make one with "
            "`tandem replay STREAM --policy FILE --out audit.jsonl` (or read the audit topic with --broker)"
        )
    err.write("".join(held))
    return out


class NotAnAuditFile(ValueError):
    """A file with lines but not one CloudEvent (an input stream, say): one line, not one per line."""


async def _partitions(bootstrap: str, topic: str, timeout: float, auth: Mapping[str, Any] | None = None) -> list[int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), **(auth or {}))
    await admin.start()
    try:
        # All topics (no names): a metadata request naming a missing topic may auto-create it.
        described = {t["topic"]: t for t in await admin.describe_topics()}
    finally:
        await admin.close()
    found = described.get(topic)
    if found is None or found["error_code"] != 0 or not found["partitions"]:
        raise LookupError(f"topic {topic!r} does not exist")
    return sorted(p["partition"] for p in found["partitions"])


async def _read_topic(
    bootstrap: str, topic: str, timeout: float, auth: Mapping[str, Any] | None = None
) -> list[tuple[int, int, bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    ids = await _partitions(bootstrap, topic, timeout, auth)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        request_timeout_ms=int(timeout * 1000),
        **(auth or {}),
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(ids)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: list[tuple[int, int, bytes]] = []
        remaining = {tp for tp in tps if ends[tp] > await consumer.position(tp)}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while remaining:
            if loop.time() > deadline:
                raise TimeoutError(f"reading {topic} did not reach the end offsets within {timeout:g} s")
            batch = await consumer.getmany(*remaining, timeout_ms=500)
            for tp, records in batch.items():
                for rec in records:
                    if rec.offset < ends[tp] and rec.value is not None:
                        out.append((tp.partition, rec.offset, rec.value))
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()


def read_topic(
    broker: str,
    topic: str,
    err: IO[str] | None = None,
    timeout: float = 60.0,
    security: KafkaSecurity | None = None,
) -> list[AuditEvent]:
    """The audit topic from the start up to its current end offsets, merged by event time.

    ``security`` (TLS, SASL: :mod:`streams.security`) is how the consumer reaches the broker.
    """
    err = err if err is not None else sys.stderr
    auth = security.aiokafka_kwargs() if security is not None else None
    records = asyncio.run(_read_topic(bootstrap_servers(broker), topic, timeout, auth))
    out: list[AuditEvent] = []
    for partition, offset, value in records:
        try:
            out.append(_decode(value, len(out)))
        except ValueError as exc:
            err.write(f"{topic}[{partition}]@{offset}: {exc}\n")
    out.sort(key=lambda e: (e.ts, e.seq))
    return out


# ----------------------------------------------------------------------------------- filtering


@dataclass
class Filter:
    cluster: str | None = None
    namespace: str | None = None
    workload: str | None = None
    types: frozenset[str] = field(default_factory=frozenset)
    since: float | None = None
    until: float | None = None

    def __call__(self, e: AuditEvent) -> bool:
        cluster, namespace, kind, name = e.workload
        if self.cluster is not None and cluster != self.cluster:
            return False
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.workload is not None:
            if "/" in self.workload:
                if f"{cluster}/{namespace}/{kind}/{name}" != self.workload and e.subject != self.workload:
                    return False
            elif name != self.workload:
                return False
        if self.types and e.type not in self.types:
            return False
        if self.since is not None and e.ts < self.since:
            return False
        return not (self.until is not None and e.ts >= self.until)


# ----------------------------------------------------------------------------------- words


def text_line(e: AuditEvent) -> str:
    """One readable line per event for ``--format text``."""
    ts = datetime.fromtimestamp(e.ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    head = f"{ts}  {e.type:<12}  {e.subject}"
    d = e.data
    if e.type in ("decision", "blocked"):
        parts = describe_change(d) if e.type == "decision" else []
        body = "; ".join(parts)
        if d.get("dry_run"):
            body = "dry run: " + body
        blocked = d.get("blocked") or []
        if blocked:
            body += ("; " if body else "") + "blocked " + ", ".join(describe_blocked(b) for b in blocked)
        return f"{head}  {policy_phrase(d)}  {body}"
    if e.type == "applied":
        extra = f" (patched {', '.join(map(str, d['patched']))})" if isinstance(d.get("patched"), list) else ""
        return f"{head}  decision {d.get('decision', '?')} applied by {e.event.get('source', '?')}{extra}"
    if e.type == "apply_failed":
        return (
            f"{head}  decision {d.get('decision', '?')} failed at {e.event.get('source', '?')}: {d.get('error', '?')}"
        )
    if e.type == "late":
        return f"{head}  {late_sentence(d)}"
    if e.type == "learned":
        return f"{head}  {learned_sentence(d)}"
    return f"{head}  {e.event.get('type')}"


def late_sentence(d: Mapping[str, Any]) -> str:
    """What a ``dev.tandem.late.v1`` report says, in words (docs/worker.md, "Late inputs")."""
    inp = d.get("input") if isinstance(d.get("input"), Mapping) else {}
    tick, done = d.get("tick"), d.get("decided_through")
    when = fmt_time(tick) if isinstance(tick, int | float) else "?"
    through = fmt_time(done) if isinstance(done, int | float) else "?"
    return (
        f"Late input: a {inp.get('type', '?')} event of tick {when} came after the ticks through {through} "
        f"had been decided (partition {inp.get('partition', '?')}, offset {inp.get('offset', '?')}); it was "
        "applied to the state without a new decision for its tick."
    )


# ----------------------------------------------------------------------------------- explain


def resolve_key(key: str, events: Sequence[AuditEvent]) -> tuple[str | None, list[str]]:
    """The workload key ``key`` names: a whole key, or a name (or ns/name) that is unique in the stream."""
    keys = sorted({"/".join(e.workload) for e in events})
    if key in keys:
        return key, keys
    matches = [k for k in keys if k.endswith("/" + key)]
    if len(matches) == 1:
        return matches[0], keys
    return None, matches or keys


def explain(key: str, events: Sequence[AuditEvent]) -> Iterator[str]:
    """Paragraphs telling what happened to one workload, one per tick, oldest first.

    The first paragraph is a summary; then one per tick with a decision or a blocked change:
    inputs, rule (the decision's ``reasons``), result, what was held back and why, and who applied
    it and when (applied/apply_failed events whose ``data.decision`` is the decision's id).
    """
    results: dict[str, list[AuditEvent]] = {}
    mine = [e for e in events if "/".join(e.workload) == key]
    for e in mine:
        if e.type in ("applied", "apply_failed"):
            results.setdefault(str(e.data.get("decision", "")), []).append(e)
    ticks = sorted((e for e in mine if e.type in ("decision", "blocked")), key=lambda e: (e.ts, e.seq))
    late = sorted((e for e in mine if e.type == "late"), key=lambda e: (e.ts, e.seq))
    learned = sorted((e for e in mine if e.type == "learned"), key=lambda e: (e.ts, e.seq))
    n_dec = sum(e.type == "decision" for e in ticks)
    summary = f"{key}: {_count(ticks, 'tick')} with news, {_count(range(n_dec), 'decision')}"
    summary += f" and {_count(range(len(ticks) - n_dec), 'tick')} where every wanted change was held back."
    if not results:
        summary += " This stream holds no applier results, so it does not say whether the decisions were applied."
    if late:
        summary += f" {_count(late, 'input')} came late (after its tick was decided): not replay's order."
    if learned:
        samples = sum(n for e in learned if isinstance(n := e.data.get("samples"), int))
        summary += (
            f" {_count(learned, 'history envelope')} learned ({samples:,} samples into the VPA histograms),"
            " none of whose past ticks was decided."
        )
    yield summary
    seen: set[str] = set()
    for e in sorted([*ticks, *late, *learned], key=lambda e: (e.ts, e.seq)):
        if e.type == "late":
            yield f"{fmt_time(e.ts)}. {late_sentence(e.data)}"
            continue
        if e.type == "learned":
            yield f"{fmt_time(e.ts)}. {learned_sentence(e.data)}"
            continue
        d = e.data
        lines = [f"{fmt_time(e.ts)} (tick {e.ts:.0f}). {policy_phrase(d)}"]
        inputs = describe_inputs(d.get("inputs") or {})
        lines.append(f" saw {sentence(inputs)}." if inputs else " had no inputs recorded.")
        reasons = [str(r) for r in d.get("reasons") or ()]
        if reasons:
            lines.append(" Rule: " + "; ".join(r.rstrip(".") for r in reasons) + ".")
        lines.extend(" " + o for o in outcome_sentences(e.type, d))
        eid = str(e.event.get("id", ""))
        seen.add(eid)
        if e.type == "decision" and not d.get("dry_run") and results:
            applied = results.get(eid, [])
            for r in applied:
                lines.append(" " + _appliersentence(r))
            if not applied:
                lines.append(" No applier reported on it.")
        yield "".join(lines)
    orphans = [r for rid, rs in results.items() if rid not in seen for r in rs]
    for r in sorted(orphans, key=lambda r: (r.ts, r.seq)):
        yield (
            f"{fmt_time(r.ts)}. " + _appliersentence(r)[:-1] + f" for decision {r.data.get('decision')}, "
            "which is not in this stream (before --since, or from another run)."
        )


def _appliersentence(r: AuditEvent) -> str:
    rd = r.data
    who = r.event.get("source", "an applier")
    by = f" ({rd['applier']})" if isinstance(rd.get("applier"), str) else ""
    if r.type == "applied":
        patched = rd.get("patched")
        what = f", patching {sentence([str(p) for p in patched])}" if isinstance(patched, list) and patched else ""
        return f"Applied by {who}{by} at {fmt_time(r.ts)}{what}."
    return f"The applier {who}{by} failed at {fmt_time(r.ts)}: {rd.get('error', 'no error given')}."


def _count(items: Iterable[object], word: str) -> str:
    n = len(list(items))
    return f"{n} {word}" + ("" if n == 1 else "s")
