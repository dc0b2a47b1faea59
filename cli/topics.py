"""``tandem topics create|list``: create or list tandem's Kafka topics (:mod:`streams.topics`)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from cli.options import add_kafka_options, kafka_settings
from ops.errors import describe
from streams.topics import DAY_MS, ensure_topics, list_topics

NAME = "topics"
HELP = "manage tandem's Kafka topics"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description=HELP)
    p.add_argument("action", choices=("create", "list"), help="create the missing topics, or list them all")
    add_kafka_options(p)
    p.set_defaults(run=run)
    return p


def _retention(ms: str | None) -> str:
    if ms is None:
        return "-"
    n = int(ms)
    if n < 0:
        return "forever"
    if n % DAY_MS == 0:
        return f"{n // DAY_MS}d"
    return f"{n / 3_600_000:g}h"


def run(args: argparse.Namespace) -> int:
    try:
        settings = kafka_settings(args)
    except ValueError as exc:
        print(f"tandem topics: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "create":
            report = asyncio.run(ensure_topics(settings, strict=False))
            for name in report.created:
                print(f"created {name}")
            for name in report.existing:
                print(f"exists  {name}")
            rows = asyncio.run(list_topics(settings))
            bad = [r for r in rows if r["partitions"] != settings.partitions]
            for r in bad:
                print(
                    f"tandem topics: {r['topic']} has {r['partitions']} partitions, expected {settings.partitions}",
                    file=sys.stderr,
                )
            return 1 if bad else 0
        rows = asyncio.run(list_topics(settings))
        width = max(len(r["topic"]) for r in rows)
        print(f"{'TOPIC':<{width}}  PARTITIONS  CLEANUP  RETENTION")
        status = 0
        user = settings.security.username
        who = f"user {user}" if user else "this client"
        hidden = 0
        for r in rows:
            if r["partitions"] is None and not r["visible"]:
                # No Describe ACL: it may well exist (Kafka does not say, to a user who may not see it).
                print(f"{r['topic']:<{width}}  not visible to {who}")
                hidden += 1
                continue
            if r["partitions"] is None:
                print(f"{r['topic']:<{width}}  {'missing':>10}")
                status = 1
                continue
            flag = "" if r["partitions"] == settings.partitions else f"  (expected {settings.partitions})"
            print(
                f"{r['topic']:<{width}}  {r['partitions']:>10}  {r['cleanup.policy'] or '-':<7}  "
                f"{_retention(r['retention.ms']) if r['cleanup.policy'] != 'compact' else '-'}{flag}"
            )
        if hidden:
            print(
                f"tandem topics: {hidden} topic(s) not visible to {who} (no Describe ACL on them); "
                "they may exist: list them as a user that may describe them",
                file=sys.stderr,
            )
        return status
    except Exception as exc:  # a broker that cannot be reached, a refused creation...
        print(f"tandem topics: {describe(exc)}", file=sys.stderr)
        return 1
