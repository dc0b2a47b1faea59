"""The Faust worker of ``tandem worker`` (see docs/worker.md; the command line is :mod:`cli.worker`).

Before Faust starts, the missing topics of docs/contract.md §2 are created with ``--partitions``
partitions (:func:`streams.topics.ensure_topics`, called by the command): Faust would otherwise let
Kafka auto-create an input topic with the broker's default partition count, and then crash on a
table whose changelog does not match its source.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.settings import WorkerSettings

__all__ = ["serve"]


def serve(settings: WorkerSettings, *, loop: asyncio.AbstractEventLoop, metrics: Any = None) -> None:
    """Run the Faust worker on ``loop`` until SIGTERM/SIGINT; Faust ends it by ``SystemExit``."""
    import faust  # heavy: only the worker needs Faust

    from agents.app import create_app  # imports Faust
    from agents.faults import install_faults
    from agents.groupwatch import GroupWatch

    if settings.store.startswith("rocksdb"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    app = create_app(settings, loop=loop, metrics=metrics)
    # The tests' fault hooks (TANDEM_FAULT_*), only on this path: the command the tests run.
    install_faults(app.tandem_pipeline)
    worker = faust.Worker(app, loglevel=settings.loglevel, loop=loop)
    app.tandem_pipeline.heap.install()
    # A consumer group Kafka refuses (no Read ACL) is said, not a silent hang (agents/groupwatch.py).
    # A future of the app's, not a Faust timer: those start only once partitions are assigned.
    app.add_future(GroupWatch(app, settings.group_id, settings.security.username, metrics).run())
    worker.execute_from_commandline()  # returns only by SystemExit
