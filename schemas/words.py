"""The plain words of the audit vocabulary: what ``tandem audit explain`` says about a decision.

Pure text functions over the ``data`` of decision, blocked and learned CloudEvents (docs/contract.md
§4), shared by the audit command (:mod:`analysis.audit`) and the edge, which writes the same sentences
as Kubernetes Events on the scaled workload (docs/edge.md): one wording, wherever people read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from scaling.quantity import parse_quantity

__all__ = [
    "REASON_WORDS",
    "describe_blocked",
    "describe_change",
    "describe_inputs",
    "fmt_time",
    "held_back",
    "held_back_counts",
    "human_quantity",
    "learned_sentence",
    "learned_summary",
    "outcome_sentences",
    "policy_phrase",
    "sentence",
]

#: What each blocked reason (docs/contract.md §4) means, completing "... because ...".
REASON_WORDS = {
    "Weight": "the policy's weights give this axis no share at this replica count",
    "UpdatePolicy": "the update policy of this direction is Off",
    "StabilizationWindow": "the previous change is still within the stabilization window",
    "MaintenanceWindow": "it is outside the maintenance time window",
    "MinChange": "the change is smaller than the policy's minimum change",
    "ParadoxicalScaling": "it would resize against the direction the replicas move (paradoxical scaling)",
    "Cooldown": "the cooldown since the last scaling has not passed",
    "MinFactor": "the change factor is below the policy's minimum factor",
    "Bounds": "it would leave the policy's bounds",
    "DryRun": "the policy runs as a dry run",
    "GatheringData": "the policy is still gathering data",
    "AmbiguousPolicy": "more than one policy targets the workload, and none acts while more than one does",
}


def fmt_time(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if dt.microsecond else "")) + " UTC"


def human_quantity(resource: str, value: Any) -> str:
    """``"419430400"`` memory as ``400 MiB``, ``"1"`` CPU as ``1 core``; counts as they are."""
    if isinstance(value, bool) or value is None:
        return str(value)
    res = resource.rsplit("/", 1)[-1]
    if res not in ("cpu", "memory"):
        return str(value)
    try:
        milli = parse_quantity(value)
    except Exception:
        return str(value)
    if res == "cpu":
        if milli % 1000 == 0:
            cores = milli // 1000
            return f"{cores} core" + ("" if cores == 1 else "s")
        return f"{milli}m" if milli < 1000 else f"{milli / 1000:g} cores"
    b = milli / 1000
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit}" if b / size < 100 else f"{b / size:.0f} {unit}"
    return f"{b:.0f} B"


def describe_change(data: Mapping[str, Any], *, prose: bool = False) -> list[str]:
    """Each change of a decision's ``data`` as a phrase: ``replicas 2 -> 3`` (``replicas from 2 to 3``)."""

    def ch(before: Any, after: Any) -> str:
        return f"from {before} to {after}" if prose else f"{before} -> {after}"

    out: list[str] = []
    r = data.get("replicas")
    if isinstance(r, Mapping):
        out.append(f"replicas {ch(r.get('from'), r.get('to'))}")
    for cname, sections in sorted((data.get("containers") or {}).items()):
        for section in ("requests", "limits"):
            for res, c in sorted((sections.get(section) or {}).items()):
                word = "request" if section == "requests" else "limit"
                before = "none" if c.get("from") is None else human_quantity(res, c.get("from"))
                out.append(f"the {res} {word} of {cname} {ch(before, human_quantity(res, c.get('to')))}")
    for fld, c in sorted((data.get("hpa") or {}).items()):
        if fld == "target_utilization" and isinstance(c, Mapping):
            for target, tc in sorted(c.items()):
                out.append(f"the HPA's target utilization of {target} {ch(tc.get('from'), tc.get('to'))} %")
        elif fld == "metrics" and isinstance(c, Mapping):
            for ref in c.get("removed") or ():
                what = "/".join(str(ref[k]) for k in ("container", "name") if k in ref)
                out.append(f"the HPA's {ref.get('type')} metric {what} is removed")
        elif isinstance(c, Mapping) and "to" in c:
            out.append(f"the HPA's {fld.replace('_', ' ')} {ch(c.get('from'), c.get('to'))}")
    return out


def describe_blocked(b: Mapping[str, Any]) -> str:
    """``api/cpu to 350m (MinChange)``."""
    target = str(b.get("target", "?"))
    wanted = b.get("wanted")
    what = target if wanted is None else f"{target} to {human_quantity(target, wanted)}"
    return f"{what} ({b.get('reason', '?')})"


def held_back(blocked: Sequence[Mapping[str, Any]]) -> str:
    """Blocked changes grouped by reason, in words: ``api/cpu (to 350m) and ... because ... (MinChange)``."""
    by_reason: dict[str, list[str]] = {}
    for b in blocked:
        target = str(b.get("target", "?"))
        wanted = b.get("wanted")
        what = target if wanted is None else f"{target} (to {human_quantity(target, wanted)})"
        by_reason.setdefault(str(b.get("reason", "?")), []).append(what)
    parts = []
    for reason, whats in by_reason.items():
        why = REASON_WORDS.get(reason)
        parts.append(f"{sentence(whats)}, because {why} ({reason})" if why else f"{sentence(whats)} ({reason})")
    return "; ".join(parts)


def held_back_counts(counts: Mapping[str, int]) -> str:
    """``in them 200 change(s) held back, one per target (166 MinChange, 34 UpdatePolicy)``.

    One count per entry of the ``blocked`` lists of decisions and blocked reports alike (an entry
    is one target: a container resource, the replicas, an HPA field), so the numbers add up to the
    total said first, not to the number of reports: a report often holds several.  The replay's
    summary and the HTML report say it in these words.
    """
    total = sum(counts.values())
    per = ", ".join(f"{n} {r}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"in them {total} change(s) held back, one per target ({per})"


def describe_inputs(inputs: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in inputs.items():
        if key == "replicas":
            out.append(f"{value} replicas running")
        elif key == "hpa_desired_replicas":
            out.append(f"the HPA recommendation of {value} replicas")
        elif key == "vpa_target" and isinstance(value, Mapping):
            for cname, res in sorted(value.items()):
                if isinstance(res, Mapping):
                    parts = ", ".join(f"{r} {human_quantity(r, q)}" for r, q in sorted(res.items()))
                    out.append(f"the VPA target for {cname} ({parts})")
        elif key == "metric" and isinstance(value, Mapping) and "series" in value:
            target = f" against a target of {value['target']:g}" if isinstance(value.get("target"), int | float) else ""
            out.append(f"series {value['series']} at {value.get('value')}{target}")
        elif key == "recommended_replicas" and isinstance(value, Mapping):
            out.append(f"recommended replicas {value.get('min')}..{value.get('max')}")
        elif key == "forecast" and isinstance(value, Mapping) and "load" in value:
            # spec.predictive (scaling/policies/predictive.py): what the pre-scale rested on.
            out.append(
                f"a forecast load of {value['load']} replicas {value.get('horizon')} s ahead "
                f"(the policy alone asked {value.get('reactive_replicas')})"
            )
        elif key == "predictive" and isinstance(value, Mapping) and "message" in value:
            # spec.predictive on a tick it did not pre-scale: why not.
            out.append(f"a forecaster that did not pre-scale ({value['message']})")
        else:
            shown = value if isinstance(value, str | int | float) else orjson.dumps(value).decode()
            out.append(f"{key.replace('_', ' ')} {shown}")
    return out


def policy_phrase(data: Mapping[str, Any]) -> str:
    p = data.get("policy") or {}
    return f"{p.get('kind', '?')} {p.get('name', '?')} ({p.get('mode', '?')})"


def sentence(items: Sequence[str]) -> str:
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def outcome_sentences(type_: str, data: Mapping[str, Any]) -> list[str]:
    """What a tick did, as ``tandem audit explain`` says it: ``Decision: ...`` (or the dry run, or
    ``Nothing changed.``), then ``Held back: ...`` when a change was blocked.  ``type_`` is
    ``decision`` or ``blocked``."""
    out: list[str] = []
    if type_ == "decision":
        change = sentence(describe_change(data, prose=True))
        if data.get("dry_run"):
            out.append(f"Dry run, so nothing is applied: it would change {change}.")
        else:
            out.append(f"Decision: {change}.")
    else:
        out.append("Nothing changed.")
    blocked = data.get("blocked") or []
    if blocked:
        out.append(f"Held back: {held_back(blocked)}.")
    return out


def learned_sentence(data: Mapping[str, Any]) -> str:
    """What a ``dev.tandem.learned.v1`` event says (one history envelope, docs/contract.md §4):
    ``Learned 2 days of history up to 2026-01-05 00:00:00 UTC (history envelope 1 of the
    workload): 1,152 samples into the VPA histograms, 0 skipped, 193 replica slots.``"""
    until = data.get("until")
    first = data.get("from")
    upto = f"up to {fmt_time(until)}" if _number(until) else "up to ?"
    which = f"(history envelope {data.get('envelopes', '?')} of the workload)"
    if not _number(first) or not _number(until):
        return f"Learned nothing from an empty history envelope {upto} {which}: it carried no event."
    span = f"{_span(float(until) - float(first))} of history {upto} {which}"
    samples, slots = _int(data.get("samples")), _int(data.get("replica_slots"))
    skipped = data.get("skipped") if isinstance(data.get("skipped"), Mapping) else {}
    live, taught = _int(skipped.get("live")), _int(skipped.get("taught"))
    why = []
    if live:
        at = data.get("live_from")
        when = f" at {fmt_time(at)}" if _number(at) else ""
        why.append(f"{live:,} at or after the first live sample{when}")
    if taught:
        at = data.get("taught_through")
        when = f" through {fmt_time(at)}" if _number(at) else ""
        why.append(f"{taught:,} taught by earlier envelopes{when}")
    because = f" ({sentence(why)})" if why else ""
    if not samples and not slots:
        known = f"its {live + taught:,} samples were known already{because}" if live + taught else "it held no sample"
        return f"Learned nothing new from {span}: {known}, and it raised no replica slot."
    return (
        f"Learned {span}: {samples:,} samples into the VPA histograms, {live + taught:,} skipped{because}, "
        f"{slots:,} replica slot" + ("" if slots == 1 else "s") + "."
    )


def learned_summary(datas: Sequence[Mapping[str, Any]]) -> str:
    """What several ``dev.tandem.learned.v1`` events of one workload say together (the HTML
    report's line): one envelope in :func:`learned_sentence`'s words, more as their sums."""
    if len(datas) == 1:
        return learned_sentence(datas[0])
    firsts = [float(d["from"]) for d in datas if _number(d.get("from"))]
    untils = [float(d["until"]) for d in datas if _number(d.get("until"))]
    samples = sum(_int(d.get("samples")) for d in datas)
    slots = sum(_int(d.get("replica_slots")) for d in datas)
    skipped = sum(
        _int(sk.get("live")) + _int(sk.get("taught")) for d in datas if isinstance(sk := d.get("skipped"), Mapping)
    )
    span = f"{_span(max(untils) - min(firsts))} of history up to {fmt_time(max(untils))}" if firsts else "no history"
    return (
        f"Learned {len(datas)} history envelopes, {span}: {samples:,} samples into the VPA histograms, "
        f"{skipped:,} skipped as known already, {slots:,} replica slot" + ("" if slots == 1 else "s") + "."
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _span(seconds: float) -> str:
    """``2 days``, ``8 hours``, ``45 minutes``: the length of a history, to a tenth of its unit."""
    for unit, size in (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0)):
        if seconds >= size:
            n = round(seconds / size, 1)
            return f"{n:g} {unit}" + ("" if n == 1 else "s")
    n = round(max(seconds, 0.0), 1)
    return f"{n:g} second" + ("" if n == 1 else "s")
