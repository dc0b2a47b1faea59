"""``tandem publish``: write a recorded stream into the input topics (:mod:`streams.publish`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time

from cli.options import (
    add_core_options,
    add_files,
    add_input_signing_options,
    add_kafka_options,
    add_policy,
    add_strict,
    env,
    kafka_settings,
)
from cli.running import kafka_failed
from scaling.engine import policy_event
from scaling.errors import InvalidEvent
from scaling.vocabulary import EVENT_TYPES
from streams.inputs import UsageError, load_command_inputs
from streams.publish import WATERMARK_EVERY, Messages, messages, publish, warn_retention
from streams.runner import ReplayStats, StrictError, read_sorted
from streams.settings import KafkaSettings
from streams.topics import ensure_topics, list_topics

NAME = "publish"
HELP = "write a recorded stream into the input topics"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(NAME, help=HELP, description="write recorded streams into the input topics")
    add_files(p)
    add_policy(p, "policy manifest file, published first (repeatable)")
    add_strict(p)
    add_kafka_options(p)
    add_input_signing_options(p)
    add_core_options(p)
    p.add_argument(
        "--watermark-every",
        type=int,
        default=env("watermark_every", WATERMARK_EVERY),
        metavar="N",
        help="a round of watermarks (docs/contract.md 3a) every N messages, first and last; 0 writes none "
        f"(a worker then orders the clusters' events by a processing-time guess). Default {WATERMARK_EVERY}",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    # The producer logs retries (e.g. NotLeaderForPartition just after topics are created) as
    # warnings; they are handled, and a real failure raises.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)

    try:
        settings = kafka_settings(args)
    except (OSError, ValueError) as exc:
        print(f"tandem publish: {exc}", file=sys.stderr)
        return 2
    try:
        core, manifests = load_command_inputs(
            args.files, args.policy, args.config, args.cluster, args.sync_period, strict=args.strict
        )
    except UsageError as exc:
        print(f"tandem publish: {exc}", file=sys.stderr)
        return exc.status

    started = time.monotonic()
    stats = ReplayStats()
    try:
        # by ts, file order kept for equal ts, as replay does
        events = read_sorted(
            args.files, lambda msg: print(msg, file=sys.stderr), stats, strict=args.strict, check_policies=True
        )
    except StrictError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    first_ts = events[0][0] if events else 0.0
    try:
        policies = [policy_event(m, core.cluster, first_ts) for m in manifests]
    except InvalidEvent as exc:
        print(f"tandem publish: policy: {exc}", file=sys.stderr)
        return 2

    plan = messages(settings.prefix, policies, events, first_ts, settings.input_clusters)
    if settings.input_signing is not None:
        unsigned = sorted({k.split("/", 1)[0] for k in plan.workloads} - set(settings.input_signing))
        if unsigned:
            print(f"tandem publish: no input signing key for cluster(s) {', '.join(unsigned)}", file=sys.stderr)
            return 2

    if args.watermark_every < 0:
        print("tandem publish: --watermark-every: expected a count >= 0", file=sys.stderr)
        return 2
    every = args.watermark_every
    try:
        sent = asyncio.run(_publish(settings, plan, core.sync_period if every > 0 else None, max(every, 1)))
    except Exception as exc:
        return kafka_failed("tandem publish", settings.bootstrap, exc)
    _summary(settings, plan, stats, sent, time.monotonic() - started)
    return 0


async def _publish(settings: KafkaSettings, plan: Messages, period: float | None, every: int) -> int:
    """The topics checked (created when missing), then the plan sent: how many records were."""
    from aiokafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    try:
        await ensure_topics(settings)
        warn_retention(await list_topics(settings), plan.oldest)
    except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError) as exc:
        # A publisher whose ACLs allow writing the inputs only: the topics must exist already.
        print(f"tandem publish: cannot check or create topics ({type(exc).__name__}); writing", file=sys.stderr)
    return await publish(settings, plan, period=period, every=every)


def _summary(settings: KafkaSettings, plan: Messages, stats: ReplayStats, sent: int, elapsed: float) -> None:
    """What was sent, how fast, from how many lines; and where the worker reports what it refuses."""
    counts = plan.counts
    by_type = ", ".join(f"{counts[t]} {t}" for t in EVENT_TYPES if counts[t])
    rate = sent / elapsed if elapsed > 0 else 0.0
    marks = sent - len(plan.items)
    by_type += f", {marks} watermark(s)" if marks else ""
    print(
        f"tandem publish: {sent} message(s) ({by_type or 'none'}) for {len(plan.workloads)} workload(s) "
        f"to {settings.prefix}* on {settings.bootstrap} in {elapsed:.1f} s ({rate:.0f}/s); "
        f"read {stats.read} line(s) from {stats.files} file(s), rejected {stats.rejected}.",
        file=sys.stderr,
    )
    # Late or refused is the worker's judgement as it reads them, which a producer cannot see.
    print(
        "tandem publish: the worker dead-letters each record it finds late or refuses, with its reason, on "
        f"{settings.prefix}deadletter and counts it in tandem_events_dropped_total{{topic,reason}}.",
        file=sys.stderr,
    )
