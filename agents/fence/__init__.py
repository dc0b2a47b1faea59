"""Every private Faust and aiokafka API the worker touches, in one package, one module per job.

pyproject.toml pins ``faust-streaming>=0.15,<0.16``; everything here was read against
faust-streaming 0.15.3 with aiokafka 0.14.0, and :mod:`agents.fence.upstream` stops the worker at
start when the installed versions or any method this package wraps, recognises or re-implements
differ from those (one line naming them).  When either is upgraded, this package is the one to
re-read: each function says which private name it reaches and why no public one does the job.

* :mod:`~agents.fence.patches`: process-wide fixes of Faust, installed once before the app
  starts (issue #18, the rebalance stall and the lost inputs: the recovery order, the fetch
  snapshot, the failed commit's bookkeeping, :class:`ConfirmedTable`; issue 17, eager delivery),
  the hook before ``wait_empty`` and the producer buffer's limit;
* :mod:`~agents.fence.inspection`: read-only views of their private state (offsets, fetch state,
  await chains) for the pipeline's checks and stall reports;
* :mod:`~agents.fence.watch`: the fetch watch, which ends an aiokafka fetch that never ends;
* :mod:`~agents.fence.faults`: fault hooks for the tests, installed by :mod:`agents.faults`
  (``tandem worker``) only under ``TANDEM_FAULT_*``;
* :mod:`~agents.fence.batches`: ``take_batches``, Faust's stream loop re-implemented for the
  pipeline's batches.

aiokafka's own classes are imported only to recognise their methods' code, never subclassed or
patched outside the tests' fault hooks.
"""

from __future__ import annotations

from .batches import take_batches
from .faults import delay_changelog_sends, delay_seek_after_recovery, hang_one_fetch
from .inspection import (
    aiokafka_fetch_state,
    await_chain,
    committed_offsets,
    current_event,
    faust_fetch_state,
    fetcher_state,
    in_consumer_thread,
    take_parked_error,
)
from .patches import (
    ConfirmedTable,
    install_eager_delivery,
    install_failed_commit_fix,
    install_fetch_snapshot_fix,
    install_recovery_order_fix,
    on_wait_empty,
    set_producer_buffer,
)
from .upstream import UpstreamChanged, check_upstream
from .watch import FetchWatch

__all__ = [
    "ConfirmedTable",
    "FetchWatch",
    "UpstreamChanged",
    "aiokafka_fetch_state",
    "await_chain",
    "check_upstream",
    "committed_offsets",
    "current_event",
    "delay_changelog_sends",
    "delay_seek_after_recovery",
    "faust_fetch_state",
    "fetcher_state",
    "hang_one_fetch",
    "in_consumer_thread",
    "install_eager_delivery",
    "install_failed_commit_fix",
    "install_fetch_snapshot_fix",
    "install_recovery_order_fix",
    "on_wait_empty",
    "set_producer_buffer",
    "take_batches",
    "take_parked_error",
]
