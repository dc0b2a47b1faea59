"""Fault injection for the tests: the ``TANDEM_FAULT_*`` settings, installed by ``tandem worker``.

Only :func:`agents.worker.serve` (the command the integration tests run) calls
:func:`install_faults`; a pipeline built any other way (tests in-process, benchmarks) has none, and
a worker that serves real traffic without those variables set gets none either.  Each one makes
Faust or aiokafka misbehave the way a production incident did (the hooks themselves are in
:mod:`agents.fence.faults`):

* ``TANDEM_FAULT_FREEZE_INPUT=hpa``: that input type stays paused in aiokafka behind the merge's
  back, the shape of the stall issue #18 describes (``tests/integration/test_worker_stall.py``);
* ``TANDEM_FAULT_HANG_FETCH=FILE``: once FILE exists, aiokafka's next fetch request never returns
  (the stall the fetch watch ends);
* ``TANDEM_FAULT_SLOW_STATE=SECONDS``: each changelog record of the state table is sent that late
  (a broker slow to take writes, issue #18);
* ``TANDEM_FAULT_SLOW_SEEK=SECONDS``: Faust's seek at the end of each recovery takes that much
  longer (the window of faust-streaming/faust#596).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agents.fence import delay_changelog_sends, delay_seek_after_recovery

if TYPE_CHECKING:
    from agents.pipeline import Pipeline

__all__ = ["install_faults"]

log = logging.getLogger("tandem.worker")


def install_faults(pipeline: Pipeline, environ: Mapping[str, str] = os.environ) -> None:
    """Install the fault hooks ``environ`` asks for on ``pipeline`` (before the app starts)."""
    freeze = environ.get("TANDEM_FAULT_FREEZE_INPUT") or None
    if freeze:
        log.warning("tandem worker: fault injection: input %s will stay paused", freeze)
    pipeline.flow.freeze = freeze
    pipeline.flow.hang_fetch = environ.get("TANDEM_FAULT_HANG_FETCH") or None
    slow_state = float(environ.get("TANDEM_FAULT_SLOW_STATE") or 0.0)
    if slow_state:
        delay_changelog_sends(pipeline.table, slow_state)
    slow_seek = float(environ.get("TANDEM_FAULT_SLOW_SEEK") or 0.0)
    if slow_seek:
        delay_seek_after_recovery(pipeline.app, slow_seek)
