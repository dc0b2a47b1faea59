"""``tandem audit``: filter and print the audit stream; ``tandem audit explain KEY``: tell its story.

    tandem audit [FILE|-] [--broker B] [--topic-prefix P | --topic T] [--cluster C] [--namespace N]
                 [--workload NAME|KEY] [--type decision|blocked|applied|apply_failed]...
                 [--since TIME] [--until TIME] [--format json|text]
    tandem audit explain KEY [FILE|-] [--broker B] [--topic T] [--since TIME] [--until TIME]

What is read and how it is told is :mod:`analysis.audit`.  Exit codes: 0 success (also when nothing
matched), 1 the broker cannot be read or explain found no event of the workload, 2 a usage error or
a missing file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from analysis.audit import (
    TYPES,
    AuditEvent,
    Filter,
    NotAnAuditFile,
    explain,
    parse_time,
    read_file,
    read_topic,
    resolve_key,
    text_line,
)
from cli.options import add_security_options, env, security_from_args
from ops.errors import describe
from streams.inputs import UsageError, check_stream
from streams.settings import DEFAULT_BROKER, DEFAULT_PREFIX

NAME = "audit"
HELP = "filter and print the audit stream; 'audit explain KEY' tells its story"


def _add_source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default=env("broker"), help=f"read the audit topic here (default {DEFAULT_BROKER})")
    p.add_argument("--topic-prefix", default=env("topic_prefix", DEFAULT_PREFIX), help="topic prefix (default tandem.)")
    p.add_argument("--topic", default=env("topic"), help="audit topic (default <prefix>audit)")
    p.add_argument("--since", default=env("since"), help="only events at or after TIME")
    p.add_argument("--until", default=env("until"), help="only events before TIME")
    add_security_options(p)


def _read(args: argparse.Namespace, prog: str) -> list[AuditEvent] | int:
    if args.file is not None and args.broker:
        print(f"{prog}: give a FILE or --broker, not both", file=sys.stderr)
        return 2
    if args.file is not None:
        try:
            if check_stream(args.file):
                # Not an error (nothing is wrong in it), but silence would look like "no match".
                print(f"{prog}: warning: {args.file}: empty file, no audit event to read", file=sys.stderr)
            return read_file(args.file)
        except (UsageError, NotAnAuditFile) as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
    broker = args.broker or DEFAULT_BROKER
    topic = args.topic or f"{args.topic_prefix}audit"
    try:
        return read_topic(broker, topic, security=security_from_args(args))
    except Exception as exc:
        print(f"{prog}: cannot read {topic} on {broker}: {describe(exc)}", file=sys.stderr)
        return 1


def _times(args: argparse.Namespace, prog: str) -> tuple[float | None, float | None] | int:
    try:
        since = parse_time(args.since) if args.since else None
        until = parse_time(args.until) if args.until else None
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return since, until


def list_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tandem audit",
        description="filter and print the audit stream",
        epilog="tandem audit explain KEY [FILE] tells one workload's story, tick by tick (--help for its options). "
        "TIME: Unix seconds, RFC 3339 (2025-11-04T07:00:00Z) or a duration before now (2h).",
    )
    p.add_argument("file", nargs="?", help="audit JSON Lines file (.jsonl, .jsonl.gz, - for stdin); none: Kafka")
    _add_source_options(p)
    p.add_argument("--cluster", default=env("cluster"), help="only this cluster")
    p.add_argument("--namespace", default=env("namespace"), help="only this namespace")
    p.add_argument("--workload", default=env("workload"), help="only this workload: a name or a whole key")
    p.add_argument(
        "--type",
        action="append",
        choices=sorted(TYPES),
        default=[t for t in str(env("type", "")).split(",") if t],
        help="only this event type (repeatable)",
    )
    p.add_argument("--format", choices=("json", "text"), default=env("format", "json"), help="output format")
    return p


def _main_list(argv: Sequence[str]) -> int:
    prog = "tandem audit"
    p = list_parser()
    args = p.parse_args(list(argv))
    bad = [t for t in args.type if t not in TYPES]
    if bad:
        p.error(f"--type {bad[0]!r}: expected one of {', '.join(sorted(TYPES))}")
    times = _times(args, prog)
    if isinstance(times, int):
        return times
    events = _read(args, prog)
    if isinstance(events, int):
        return events
    keep = Filter(args.cluster, args.namespace, args.workload, frozenset(args.type), *times)
    out = sys.stdout.buffer
    try:
        for e in events:
            if not keep(e):
                continue
            if args.format == "json":
                out.write(e.raw + b"\n")
            else:
                out.write(text_line(e).encode() + b"\n")
        out.flush()
    except BrokenPipeError:  # `tandem audit ... | head`
        sys.stderr.close()
    return 0


def explain_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tandem audit explain", description="tell, tick by tick, what tandem did to one workload and why"
    )
    p.add_argument("key", help="workload key cluster/namespace/kind/name (or a name unique in the stream)")
    p.add_argument("file", nargs="?", help="audit JSON Lines file (- for stdin); none: Kafka")
    _add_source_options(p)
    return p


def _main_explain(argv: Sequence[str]) -> int:
    prog = "tandem audit explain"
    args = explain_parser().parse_args(list(argv))
    times = _times(args, prog)
    if isinstance(times, int):
        return times
    events = _read(args, prog)
    if isinstance(events, int):
        return events
    key, candidates = resolve_key(args.key, events)
    if key is None:
        some = ", ".join(candidates[:10]) or "none"
        print(f"{prog}: no workload {args.key!r} in the audit stream (workloads: {some})", file=sys.stderr)
        return 1
    keep = Filter(since=times[0], until=times[1])
    paragraphs = list(explain(key, [e for e in events if keep(e)]))
    out = sys.stdout
    try:
        out.write("\n\n".join(paragraphs) + "\n")
        out.flush()
    except BrokenPipeError:
        sys.stderr.close()
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    # No prefix chars and no help of its own: every argument, options first included, goes to
    # :func:`run` untouched, which picks the listing or the explain parser (argparse cannot have
    # an optional FILE and an ``explain`` subcommand at the same place).
    p = sub.add_parser(NAME, help=HELP, add_help=False, prefix_chars="\x00")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "explain":
        return _main_explain(argv[1:])
    return _main_list(argv)
