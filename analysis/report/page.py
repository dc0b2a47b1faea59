"""The report's page: one self-contained HTML file (inline SVG and CSS, no script, no network)."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from datetime import UTC, datetime

from analysis.audit import AuditEvent
from analysis.report.charts import (
    BAND,
    BAND_OPACITY,
    BOUND,
    DECISION_COLOR,
    FORECAST,
    HPA,
    LIMIT,
    REPLICAS,
    REQUEST,
    USAGE,
    VPA,
    WANTED_OPACITY,
    Axis,
    decision_strip,
    forecasts,
    reason_color,
    replica_wanted,
    replicas_chart,
    resource_chart,
    resource_marks,
    resource_range,
    resource_wanted,
    series_chart,
    step_words,
    usage_band,
)
from analysis.report.collect import ReportData, ResourceData, WorkloadData
from analysis.report.scales import WantedRange, main_reason, wanted_ranges
from schemas.words import held_back_counts, learned_summary

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#0f172a;
margin:24px;background:#f8fafc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0}
.sub{color:#475569;margin:0 0 12px}
section{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:14px 16px 8px;margin:0 0 18px;width:1240px}
.head{display:flex;gap:14px;align-items:baseline;flex-wrap:wrap;margin-bottom:2px}
.pol{color:#334155}.counts{color:#475569;font-size:13px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12.5px;color:#334155;margin:10px 0 2px 78px}
.legend b{font-weight:600;color:#0f172a;margin-right:4px}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:22px;height:0;border-top:3px solid}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;border:2px solid;background:#fff}
.tri{display:inline-block;width:0;height:0;border-left:6px solid transparent;border-right:6px solid transparent;
border-bottom:11px solid}
.box{display:inline-block;width:16px;height:10px}
svg{display:block}svg text{font-family:inherit}
.tl{font-size:11px;fill:#64748b}.tl.strong{fill:#0f172a;font-weight:600}
.yl{font-size:11px;fill:#64748b}.yt{font-size:11.5px;fill:#334155}.bl{font-size:10.5px;fill:#475569}
table{border-collapse:collapse;margin:6px 0 16px;background:#fff}
td,th{border:1px solid #e2e8f0;padding:4px 9px;text-align:left;font-size:13px}th{background:#f1f5f9}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#92400e;background:#fffbeb;border:1px solid #fde68a;border-radius:6px;padding:6px 10px;margin:0 0 12px;
width:1216px}
"""


def _legend(items: Sequence[tuple[str, str]], title: str = "") -> str:
    head = f"<b>{html.escape(title)}</b>" if title else ""
    body = "".join(f"<span>{sw}{html.escape(label)}</span>" for sw, label in items)
    return f'<div class="legend">{head}{body}</div>'


def _sw(color: str, dash: bool = False, width: int = 3) -> str:
    style = f"border-top:{width}px {'dashed' if dash else 'solid'} {color}"
    return f'<i class="sw" style="{style}"></i>'


def _held_box(ranges: Sequence[WantedRange]) -> str:
    """The swatch of a chart's held-back ranges: the colour of the reason of most of them
    (:func:`scales.main_reason`), as faint as drawn."""
    reason = main_reason(ranges)
    color = reason_color(reason) if reason is not None else "#6b7280"
    return f'<i class="box" style="background:{color};opacity:{WANTED_OPACITY}"></i>'


def _reason_counts(events: Sequence[AuditEvent]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in events:
        for b in e.data.get("blocked") or []:
            counts[str(b.get("reason"))] = counts.get(str(b.get("reason")), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _limit_decisions(w: WorkloadData, cname: str, res: str) -> bool:
    return any(
        e.type == "decision" and res in (((e.data.get("containers") or {}).get(cname) or {}).get("limits") or {})
        for e in w.events
    )


def _section(w: WorkloadData, axis: Axis, from_stream: bool) -> str:
    pol = w.policy or {}
    decisions = [e for e in w.events if e.type == "decision"]
    blocked = [e for e in w.events if e.type == "blocked"]
    applied = [e for e in w.events if e.type == "applied"]
    failed = [e for e in w.events if e.type == "apply_failed"]
    reasons = _reason_counts(w.events)
    counts = f"{len(decisions)} decision(s), {len(blocked)} blocked report(s)"
    if applied or failed:
        counts += f", {len(applied)} applied, {len(failed)} apply failure(s)"
    if reasons:
        counts += " · " + held_back_counts(reasons)
    out = [f'<section id="{html.escape(w.key)}">']
    out.append(
        f'<div class="head"><h2>{html.escape(w.key)}</h2>'
        f'<span class="pol">{html.escape(str(pol.get("kind", "no policy")))} '
        f"{html.escape(str(pol.get('name', '')))} · mode {html.escape(str(pol.get('mode', '-')))}</span></div>"
    )
    out.append(f'<div class="counts">{html.escape(counts)}</div>')
    learned = [e.data for e in w.events if e.type == "learned"]
    if learned:  # history envelopes (docs/import.md, "warm start"): what they taught, not silent
        out.append(f'<div class="counts">{html.escape(learned_summary(learned))}</div>')
    step = axis.bucket()
    legend: list[tuple[str, str]] = [
        (f'<i class="tri" style="border-bottom-color:{DECISION_COLOR}"></i>', "decision (at the new value)")
    ]
    for r in reasons:
        legend.append((f'<i class="box" style="background:{reason_color(r)}"></i>', f"blocked: {r}"))
    if reasons:
        legend.append(("", f"(blocked: counted per {step_words(step)}; in the charts, the values held back)"))
    out.append(_legend(legend))
    out.append(decision_strip(w, axis))
    rep = replicas_chart(w, axis)
    if rep:
        items = [(_sw(REPLICAS), "replicas" + (" (observed)" if from_stream else " (from the decisions)"))]
        if w.hpa_desired:
            items.append((_sw(HPA, True, 2), "HPA recommendation"))
        if forecasts(w):
            items.append((f'<i class="dot" style="border-color:{FORECAST}"></i>', "forecast load (spec.predictive)"))
        if w.bounds:
            items.append((_sw(BOUND, True, 2), "policy min / max"))
        rep_ranges = wanted_ranges(w.events, step, replica_wanted(w))
        if rep_ranges:
            items.append((_held_box(rep_ranges), "held back (range wanted)"))
        out.append(_legend(items, "replicas") + rep)
    for cname in sorted(w.containers):
        for res in ("cpu", "memory", *sorted(set(w.containers[cname]) - {"cpu", "memory"})):
            rd = w.containers[cname].get(res)
            if rd is not None:
                out.append(_resource_section(w, cname, res, rd, axis, step))
    for name in sorted(w.series):
        items = [(_sw(USAGE), "value (mean over the samples of an event)")]
        if name in w.series_target:
            items.append((_sw(BOUND, True, 2), "policy target"))
        out.append(_legend(items, f"series {name}"))
        out.append(series_chart(w, name, w.series[name], axis))
    out.append("</section>")
    return "".join(out)


def _resource_section(w: WorkloadData, cname: str, res: str, rd: ResourceData, axis: Axis, step: int) -> str:
    """One container resource's chart with its legend ("" when there is nothing to draw)."""
    svg = resource_chart(w, cname, res, rd, axis)
    if not svg:
        return ""
    # Only what the chart draws: a legend entry with nothing behind it is noise.
    items = []
    ranges = wanted_ranges(w.events, step, resource_wanted(cname, res))
    marks = resource_marks(w, cname, res)
    vr = resource_range(rd, res, marks, ranges)
    above = vr.above
    if rd.usage.points:
        band, usage_text = usage_band(rd, vr)
        items.append((_sw(USAGE), usage_text))
        if band:
            items.append(
                (
                    f'<i class="box" style="background:{BAND};opacity:{BAND_OPACITY}"></i>',
                    "lowest to highest pod",
                )
            )
    if any(v is not None for _, v in rd.requests):
        items.append((_sw(REQUEST), "request"))
    if any(v is not None for _, v in rd.limits):
        items.append((_sw(LIMIT, True), "limit (\u2191 above the chart)" if above else "limit"))
    if rd.vpa:
        items.append((_sw(VPA, True, 2), "VPA target"))
    if _limit_decisions(w, cname, res):
        items.append((f'<i class="tri" style="border-bottom-color:{LIMIT}"></i>', "decision on the limit"))
    if ranges:
        items.append((_held_box(ranges), "held back (range wanted)"))
    return _legend(items, f"{cname} {res}") + svg


def render_html(data: ReportData, title: str, keys: Sequence[str] | None = None, notes: Sequence[str] = ()) -> str:
    """The whole page (or only the sections of ``keys``), self-contained."""
    axis = Axis(data.t0, data.t1)
    keys = sorted(data.workloads) if keys is None else list(keys)
    span_h = (data.t1 - data.t0) / 3600
    when = (
        f"{datetime.fromtimestamp(data.t0, UTC):%Y-%m-%d %H:%M} to "
        f"{datetime.fromtimestamp(data.t1, UTC):%Y-%m-%d %H:%M} UTC"
        f" ({span_h:.1f} h of event time)"
    )
    src = ", ".join(os.path.basename(p) for p in data.inputs)
    how = "replayed through the decision core" if data.from_stream else "from the audit stream alone (no usage samples)"
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(src)}, {how}: {when}.</p>',
    ]
    for n in [*data.notes, *notes]:
        out.append(f'<div class="note">{html.escape(n)}</div>')
    if len(keys) > 1:
        out.append(
            "<table><tr><th>workload</th><th>policy</th><th>decisions</th><th>blocked reports</th>"
            "<th>replicas</th></tr>"
        )
        for k in keys:
            w = data.workloads[k]
            pol = w.policy or {}
            reps = [v for _, v in w.replicas]
            rng = f"{min(reps)}..{max(reps)}" if reps else "-"
            out.append(
                f'<tr><td><a href="#{html.escape(k)}">{html.escape(k)}</a></td>'
                f"<td>{html.escape(str(pol.get('kind', '-')))} "
                f"{html.escape(str(pol.get('name', '')))}</td>"
                f'<td class="n">{sum(e.type == "decision" for e in w.events)}</td>'
                f'<td class="n">{sum(e.type == "blocked" for e in w.events)}</td><td class="n">{rng}</td></tr>'
            )
        out.append("</table>")
    for k in keys:
        out.append(_section(data.workloads[k], axis, data.from_stream))
    out.append("</body></html>")
    return "".join(out)
