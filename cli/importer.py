"""``tandem import prometheus``: a cluster's history from Prometheus as contract events (docs/import.md).

    tandem import prometheus URL --start T --end T --cluster NAME [--step 60s] [--namespace NS]...
                  [--out FILE] [--publish] [--queries FILE] [--bearer-token-file F]
                  [--basic-auth-file F] [--ca-file F]

An unreachable server, an HTTP error, bad credentials or a query error print one line naming the
URL and the query and exit 1; ``--out`` is written to a temporary file renamed into place only when
complete, standard output only once everything was read.  ``--publish`` sends envelopes as the
windows are read (a month is never in memory), and says how many went before an error.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import logging
import os
import re
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

import orjson

from cli.options import add_input_signing_options, add_kafka_options, env, kafka_settings
from cli.running import kafka_failed
from ops.errors import describe
from scaling.errors import InvalidEvent
from scaling.events import Event, decode_event
from scaling.vocabulary import EVENT_TYPES
from streams.inputs import SettingsError, load_yaml_file
from streams.prometheus import (
    MAX_POINTS,
    WINDOW_POINTS,
    Auth,
    Client,
    ImportStats,
    PrometheusError,
    QuerySet,
    import_history,
    load_queries,
)
from streams.runner import gc_paused
from streams.settings import KafkaSettings

NAME = "import"
HELP = "read a cluster's history from Prometheus into contract events"
_PROG = "tandem import prometheus"

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str, option: str) -> float:
    """``60s``, ``5m``, ``1h30m``, ``28d``, or plain seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{option}: {text!r} is not a duration (e.g. 60s, 5m, 28d)")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_time(text: str, option: str, now: float) -> float:
    """An RFC 3339 time, ``now``, or a duration before now (``-28d``)."""
    if text == "now":
        return now
    if text.startswith("-"):
        return now - parse_duration(text[1:], option)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not an RFC 3339 time, 'now' or a duration before now (-28d)") from None
    if moment.tzinfo is None:
        raise ValueError(f"{option}: {text!r} has no time zone (add Z or +00:00)")
    return moment.timestamp()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description="import a cluster's history as contract events")
    sources = p.add_subparsers(dest="source", required=True, help="where the history comes from")
    q = sources.add_parser("prometheus", help="a Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics)")
    # `--start -28d`: argparse takes a value that starts with a dash for an option unless it looks
    # like a negative number; a duration before now is one here (no option of this command looks so).
    q._negative_number_matcher = re.compile(r"^-\d[\d.smhdw]*$")
    q.add_argument("url", help="the server's base URL, e.g. http://prometheus:9090")
    q.add_argument("--start", required=True, help="RFC 3339 time, or a duration before now (-28d)")
    q.add_argument(
        "--end", default=env("end", "now"), help="RFC 3339 time, now, or a duration before now (default now)"
    )
    q.add_argument("--step", default=env("step", "60s"), help="resolution of the history (default 60s)")
    q.add_argument("--cluster", default=env("cluster"), required=env("cluster") is None, help="the cluster's name")
    q.add_argument("--namespace", action="append", default=[], help="only this namespace (repeatable; default all)")
    q.add_argument("--out", default=env("out"), help="JSON Lines file (.gz: gzip); default stdout unless --publish")
    q.add_argument(
        "--publish",
        action="store_true",
        help="write the history as history envelopes to the metrics topic (learn only)",
    )
    q.add_argument("--queries", default=env("queries"), help="YAML file overriding queries and label names")
    q.add_argument("--bearer-token-file", default=env("bearer_token_file"), help="file holding a bearer token")
    q.add_argument("--basic-auth-file", default=env("basic_auth_file"), help="file holding USER:PASSWORD")
    q.add_argument("--ca-file", default=env("ca_file"), help="PEM CA bundle to verify the server's certificate")
    q.add_argument("--parallel", type=int, default=env("parallel", 4), help="range queries at once (default 4)")
    q.add_argument(
        "--attempts", type=int, default=env("attempts", 4), help="tries of a request before giving up (default 4)"
    )
    q.add_argument("--max-points", type=int, default=MAX_POINTS, help=argparse.SUPPRESS)
    q.add_argument(
        "--window",
        type=int,
        default=env("window", WINDOW_POINTS),
        help=f"steps read and turned into events at once: bounds the memory (default {WINDOW_POINTS})",
    )
    # The importer's clock, pinned (RFC 3339): relative times and the envelopes' ts (tests).
    q.add_argument("--now", default=None, help=argparse.SUPPRESS)
    add_kafka_options(q)
    add_input_signing_options(q)
    q.set_defaults(run=run)
    return p


class _Usage(Exception):
    pass


def _read_secret(path: str, option: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise _Usage(f"{option}: {path}: cannot be read ({exc.strerror or exc})") from None


def _auth(args: argparse.Namespace) -> Auth:
    if args.bearer_token_file and args.basic_auth_file:
        raise _Usage("--bearer-token-file and --basic-auth-file: give one")
    token = _read_secret(args.bearer_token_file, "--bearer-token-file") if args.bearer_token_file else None
    basic = None
    if args.basic_auth_file:
        text = _read_secret(args.basic_auth_file, "--basic-auth-file")
        if ":" not in text:
            raise _Usage(f"--basic-auth-file: {args.basic_auth_file}: expected USER:PASSWORD")
        user, password = text.split(":", 1)
        basic = (user, password)
    if args.ca_file and not Path(args.ca_file).is_file():
        raise _Usage(f"--ca-file: {args.ca_file}: no such file")
    return Auth(token, basic, args.ca_file)


def _queries(path: str | None) -> QuerySet:
    if not path:
        return QuerySet()
    try:
        docs = load_yaml_file(path)
    except Exception as exc:
        raise _Usage(f"--queries: {path}: {describe(exc)}") from None
    if len(docs) != 1:
        raise _Usage(f"--queries: {path}: expected one YAML document")
    try:
        return load_queries(docs[0], path)
    except ValueError as exc:
        raise _Usage(f"--queries: {exc}") from None


class _Options(NamedTuple):
    """What ``run`` reads from the command line, checked."""

    now: float
    start_ms: int
    end_ms: int
    step_ms: int
    auth: Auth
    queries: QuerySet


def _options(args: argparse.Namespace) -> _Options:
    """The checked options; ``ValueError`` or ``_Usage`` naming the first bad one."""
    now = parse_time(args.now, "--now", time.time()) if args.now else time.time()
    start = parse_time(args.start, "--start", now)
    end = parse_time(args.end, "--end", now)
    step = parse_duration(args.step, "--step")
    if step <= 0:
        raise ValueError("--step: expected a duration above 0")
    if end < start:
        raise ValueError("--end: before --start")
    if not args.cluster or "/" in args.cluster:
        raise ValueError(f"--cluster: {args.cluster!r} is not a cluster name")
    for option in ("max_points", "parallel", "attempts", "window"):
        if getattr(args, option) < 1:
            raise ValueError(f"--{option.replace('_', '-')}: expected a count >= 1")
    auth = _auth(args)
    queries = _queries(args.queries)
    if args.out and args.out != "-":
        parent = Path(args.out).parent
        if not parent.is_dir():
            raise ValueError(f"--out: {parent}: no such directory")
    step_ms = round(step * 1000)
    # the grid: multiples of the step, so that two imports of overlapping ranges agree
    start_ms = -(-round(start * 1000) // step_ms) * step_ms
    end_ms = round(end * 1000) // step_ms * step_ms
    return _Options(now, start_ms, end_ms, step_ms, auth, queries)


class _Tally:
    """What the summary line counts, event by event."""

    def __init__(self) -> None:
        self.stats = ImportStats()
        self.counts = dict.fromkeys(EVENT_TYPES, 0)
        self.workloads: set[tuple[str, str, str]] = set()
        self.metric_steps = 0

    def add(self, raw: dict[str, Any]) -> None:
        self.counts[raw["type"]] += 1
        w = raw["workload"]
        self.workloads.add((w["namespace"], w["kind"], w["name"]))
        self.metric_steps += raw["type"] == "metric"

    def summary(self, o: _Options, seconds: float) -> str:
        by_type = ", ".join(f"{self.counts[t]} {t}" for t in EVENT_TYPES if self.counts[t]) or "none"
        steps = (o.end_ms - o.start_ms) // o.step_ms + 1
        gaps = len(self.workloads) * steps - self.metric_steps
        return (
            f"{_PROG}: {len(self.stats.series)} series, {self.stats.samples} samples in {self.stats.requests} "
            f"request(s); {sum(self.counts.values())} event(s) ({by_type}) for {len(self.workloads)} workload(s) "
            f"over {steps} step(s) of {o.step_ms / 1000:g} s, {gaps} workload-step(s) without metrics; {seconds:.1f} s"
        )


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        o = _options(args)
    except (ValueError, _Usage) as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()
    tally = _Tally()
    publisher: _Publisher | None = None
    if args.publish:  # the broker's settings before a minute of reading, not after
        made = _Publisher.of(args, o)
        if isinstance(made, int):
            return made
        publisher = made
    keep: list[dict[str, Any]] = []  # standard output: written once everything was read
    sink = _Sink(args.out) if args.out and args.out != "-" else None
    windows = _windows(args, o, tally, sink, tty)
    try:
        # The collector off while reading, as for a replay's input (streams.runner.gc_paused): an
        # import only builds acyclic values (the answers, the events) and drops each window's by
        # reference count, yet every 700 allocations started a collection whose older generations
        # walked everything held; with it off a day of bench/bench_import.py's fleet took 15 s of
        # CPU instead of 27, and a full collection at its end found 2,241 unreachable objects (about
        # 16 per request, urllib's), collected when it comes back on.
        with gc_paused():
            if publisher is not None:
                code = publisher.run(windows)
                if code:
                    if sink is not None:
                        sink.discard()
                    return code
            else:
                for window in windows:
                    if sink is None:
                        keep.extend(window)
    except (PrometheusError, OSError) as exc:
        if sink is not None:
            sink.discard()
        where = str(exc) if isinstance(exc, PrometheusError) else f"--out: {args.out}: {exc.strerror or exc}"
        sent = f" ({publisher.said()})" if publisher is not None and publisher.sent else ""
        print(("\n" if tty and isinstance(exc, PrometheusError) else "") + f"{_PROG}: {where}{sent}", file=sys.stderr)
        return 1
    if tty:
        sys.stderr.write("\r" + " " * 60 + "\r")
    for warning in tally.stats.warnings:
        print(f"{_PROG}: warning: {warning}", file=sys.stderr)
    if publisher is not None:
        print(f"{_PROG}: {publisher.said()}", file=sys.stderr)
    if sink is not None:
        try:
            sink.commit()
        except OSError as exc:
            sink.discard()
            print(f"{_PROG}: --out: {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return 1
    elif publisher is None:
        for raw in keep:
            sys.stdout.write(orjson.dumps(raw, option=orjson.OPT_APPEND_NEWLINE).decode())
        sys.stdout.flush()
    print(tally.summary(o, time.monotonic() - started), file=sys.stderr)
    return 0


def _windows(
    args: argparse.Namespace, o: _Options, tally: _Tally, sink: _Sink | None, tty: bool
) -> Iterator[list[dict[str, Any]]]:
    """Every window of the history: each event checked against the contract, counted and written
    to ``sink``; the window's checked events handed on."""

    def progress(done: int, total: int) -> None:
        if tty:
            sys.stderr.write(f"\r{_PROG}: {done}/{total} window(s) of {args.window} step(s)")
            sys.stderr.flush()

    client = Client(args.url, o.auth, attempts=args.attempts)
    for window in import_history(
        client, o.queries, args.cluster, o.start_ms, o.end_ms, o.step_ms, args.namespace, stats=tally.stats,
        max_points=args.max_points, parallel=args.parallel, window_points=args.window, progress=progress,
    ):  # fmt: skip
        checked: list[dict[str, Any]] = []
        known = window.metrics_checked  # metric events within the contract by construction
        for raw in window.events:
            if known and raw["type"] == "metric":
                tally.add(raw)
                checked.append(raw)
                continue
            try:
                decode_event(raw)
            except InvalidEvent as exc:
                print(f"{_PROG}: warning: a {raw['type']} event of {raw['workload']} left out: {exc}", file=sys.stderr)
                continue
            tally.add(raw)
            checked.append(raw)
        if sink is not None:
            sink.write(checked)
        yield checked


#: One event as :func:`streams.publish.messages` takes it: ``(ts, seq, (source, line, raw), event)``.
Line = tuple[float, int, Any, Event]


class _Sink:
    """JSON Lines into a temporary file next to ``path`` (gzip for ``.gz``), renamed into place by
    :meth:`commit`: a failed import leaves no file, and an earlier one in place.

    gzip at level 1: two days of bench/bench_import.py's fleet (247 MB of JSON) took 0.9 s of CPU
    to 24.3 MB, against 2.8 s to 18.5 MB at level 6, in the process that also builds the events."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.tmp = Path(tmp)
        self.raw = os.fdopen(fd, "wb")
        self.stream: IO[bytes] = (
            cast(IO[bytes], gzip.GzipFile(fileobj=self.raw, mode="wb", compresslevel=1, mtime=0))
            if path.endswith(".gz")
            else self.raw
        )

    def write(self, events: list[dict[str, Any]]) -> None:
        """A window's events in one write: gzip's per-call work (a CRC, a compressor call) once a
        window rather than once an event, which halved the time spent writing."""
        dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        self.stream.write(b"".join([dumps(event, option=newline) for event in events]))

    def commit(self) -> None:
        if self.stream is not self.raw:
            self.stream.close()
        self.raw.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        try:
            self.raw.close()
        finally:
            self.tmp.unlink(missing_ok=True)


#: Seconds between two rounds of ``--publish`` (one envelope of each workload a round): an
#: envelope waits in the worker's slot of its workload until the cluster's next watermark, so
#: a slot holds the envelopes of a scrape interval or so, not a month of them.
ROUND_SECONDS = 5.0


class _Publisher:
    """The history as ``history`` envelopes on the metrics topic (docs/contract.md §3), stamped with
    the present, sent as the windows are read: a worker learns from them, whether or not the
    cluster's live events reached it first, and decides none of their ticks (docs/import.md, "warm
    start").  A month of a fleet is never in memory: an envelope goes once full
    (:class:`streams.history.Envelopes`), and reading waits while any workload has two waiting."""

    def __init__(self, args: argparse.Namespace, o: _Options, settings: KafkaSettings, max_bytes: int = 0) -> None:
        from streams.history import MAX_BYTES, Envelopes

        self.args, self.o, self.settings = args, o, settings
        self.builder = Envelopes(max_bytes or MAX_BYTES)
        self.waiting: dict[str, deque[dict[str, Any]]] = {}
        self.sent = self.carried = 0
        self.ts = o.end_ms / 1000
        self.last_round: float | None = None

    @classmethod
    def of(cls, args: argparse.Namespace, o: _Options) -> _Publisher | int:
        """The publisher, or the exit status of settings that cannot work (said on stderr)."""
        logging.getLogger("aiokafka").setLevel(logging.ERROR)
        try:
            settings = kafka_settings(args)
        except (OSError, ValueError, SettingsError) as exc:
            print(f"{_PROG}: {exc}", file=sys.stderr)
            return 2
        if settings.input_signing is not None and args.cluster not in settings.input_signing:
            print(f"{_PROG}: no input signing key for cluster {args.cluster}", file=sys.stderr)
            return 2
        return cls(args, o, settings)

    def said(self) -> str:
        return (
            f"published {self.sent} history envelope(s) ({self.carried} past metric and workload event(s) of "
            f"{len(self.waiting)} workload(s)) to {self.settings.prefix}metrics on {self.settings.bootstrap}: "
            "a worker learns from them and decides none of their ticks"
        )

    def run(self, windows: Iterator[list[dict[str, Any]]]) -> int:
        try:
            asyncio.run(self._go(windows))
        except (PrometheusError, OSError):
            raise  # the reading's: the caller says it
        except Exception as exc:
            return kafka_failed(_PROG, self.settings.bootstrap, exc)
        return 0

    async def _go(self, windows: Iterator[list[dict[str, Any]]]) -> None:
        from streams.topics import ensure_topics

        await ensure_topics(self.settings)
        while (window := await asyncio.to_thread(next, windows, None)) is not None:
            self._hold(self.builder.add(raw) for raw in window)
            while any(len(q) > 1 for q in self.waiting.values()):
                await self._round()
        self._hold(self.builder.finish(self.o.end_ms / 1000))
        while any(self.waiting.values()):
            await self._round()

    def _hold(self, envelopes: Iterable[dict[str, Any] | None]) -> None:
        for envelope in envelopes:
            if envelope is not None:
                w = envelope["workload"]
                key = "/".join(w[f] for f in ("cluster", "namespace", "kind", "name"))
                self.waiting.setdefault(key, deque()).append(envelope)

    async def _round(self) -> None:
        """The next envelope of each workload that has one, by workload key, ``ROUND_SECONDS``
        after the last round (not with ``--now``)."""
        from streams.publish import messages, publish

        if self.last_round is not None and not self.args.now:
            await asyncio.sleep(max(0.0, ROUND_SECONDS - (time.monotonic() - self.last_round)))
        # The present (the clock, or --now), never before the history's end nor the last round.
        self.ts = max(self.o.now if self.args.now else time.time(), self.ts)
        lines: list[Line] = []
        for key in sorted(self.waiting):
            if self.waiting[key]:
                envelope = self.waiting[key].popleft()
                envelope["ts"] = self.ts
                self.carried += len(envelope["events"])
                lines.append((self.ts, len(lines), ("prometheus", len(lines) + 1, envelope), decode_event(envelope)))
        # no watermarks: they would promise what the cluster's collector writes, not this command
        plan = messages(self.settings.prefix, [], lines, self.ts, self.settings.input_clusters)
        self.sent += await publish(self.settings, plan)
        self.last_round = time.monotonic()
