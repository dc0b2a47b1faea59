"""``tandem report``: a self-contained HTML report of what tandem did, per workload, to look at.

    tandem report FILE... [--policy F]... [--config F] [--cluster C] [--sync-period S]
                  [--out DIR] [--workload NAME|KEY]... [--png auto|chromium|matplotlib|none] [--title T]

FILE is a recorded input stream (what ``tandem replay`` reads: the report runs the replay itself,
embedded, through :class:`scaling.engine.Engine`, the very code ``tandem replay`` runs) or an audit
file (CloudEvents, what ``tandem replay --out`` writes; applier results in it are shown too).  Each
file is classified by its first line.  ``DIR`` (default ``tandem-report``) receives:

* ``index.html``: one page, no script, no network: inline SVG charts and CSS.  Per workload, a strip
  with one mark per decision and, below it, the blocked reports counted per time bucket (a bar per
  bucket, stacked by reason; :mod:`~analysis.report.scales` picks the bucket), the replicas over
  time with the policy's min/max and the HPA recommendation (drawn over the replicas), and per
  container and resource the usage against requests and limits (and the VPA target), units and
  range chosen per axis from its data; the values held back show as faint ranges per bucket.  Usage is the **per-pod
  average** of the container's samples at each metric event (the shaded band is the lowest to the
  highest pod), the unit requests and limits are set in.  Every mark sits at its event's tick on one
  time axis shared by all charts; hovering it shows the event.
* ``audit.jsonl``: the audit stream the report shows (``tandem audit explain KEY DIR/audit.jsonl``).
* ``<cluster>_<namespace>_<kind>_<name>.png`` per workload: drawn with matplotlib when it is
  installed, otherwise screenshots of the HTML by headless Chromium when a ``chromium`` binary is on
  the PATH, otherwise none: stderr and ``index.html`` say which piece is missing and how to install
  it.  ``--png none`` skips them.

From an audit file alone there are no usage samples: replicas, requests and limits are then drawn
from the decisions' ``from``/``to`` values.  Exit codes: 0, 1 a bad line under ``--strict``, 2 a
usage error or a missing file (the command line is :mod:`cli.report`).

The package: :mod:`~analysis.report.collect` gathers the data (the embedded replay of
:mod:`streams.runner` and the audit files), :mod:`~analysis.report.scales` the buckets, units
and ranges both painters use, :mod:`~analysis.report.charts` draws the SVG charts,
:mod:`~analysis.report.page` writes the HTML page, :mod:`~analysis.report.png` the PNGs, and
:func:`build` here runs them in that order.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from analysis.report.charts import LEFT, RIGHT, WIDTH
from analysis.report.collect import ReportData, WorkloadData, collect, is_audit_file
from analysis.report.page import render_html
from analysis.report.png import Painters, detect_painters, find_chromium, make_pngs

__all__ = [
    "LEFT",
    "RIGHT",
    "WIDTH",
    "Painters",
    "ReportData",
    "WorkloadData",
    "build",
    "collect",
    "detect_painters",
    "find_chromium",
    "make_pngs",
    "render_html",
]


def build(
    files: Sequence[str],
    out: Path,
    *,
    settings: Any,
    policies: Sequence[Mapping[str, Any]] = (),
    workloads: Sequence[str] = (),
    png: str = "auto",
    title: str = "tandem report",
    strict: bool = False,
    err: IO[str] | None = None,
    painters: Painters | None = None,
    refused_policies: Sequence[str] = (),
) -> tuple[ReportData, list[Path]]:
    """Everything ``tandem report`` does after parsing its options; returns the data and the PNGs."""
    err = err if err is not None else sys.stderr
    audit_paths = [p for p in files if p != "-" and is_audit_file(p)]
    stream_paths = [p for p in files if p not in audit_paths]
    data = collect(
        stream_paths,
        audit_paths,
        settings=settings,
        policies=policies,
        strict=strict,
        err=err,
        refused_policies=refused_policies,
    )
    if workloads:
        keep = {k for k in data.workloads if any(k == w or k.endswith("/" + w) for w in workloads)}
        data.workloads = {k: v for k, v in data.workloads.items() if k in keep}
        data.audit = [e for e in data.audit if "/".join(e.workload) in keep]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "audit.jsonl", "wb") as fh:
        for e in data.audit:
            fh.write(e.raw + b"\n")
    pngs, note = make_pngs(data, title, out, png, err, painters)
    (out / "index.html").write_text(render_html(data, title, notes=[note] if note else ()), encoding="utf-8")
    return data, pngs
