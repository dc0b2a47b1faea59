"""The report's PNGs per workload: matplotlib when installed, else screenshots by headless Chromium."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

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
    WIDTH,
    Axis,
    axis_label,
    bucket_points,
    forecasts,
    reason_color,
    replica_range,
    replica_wanted,
    resource_marks,
    resource_range,
    resource_wanted,
    step_words,
    usage_band,
)
from analysis.report.collect import ReportData, ResourceData, WorkloadData
from analysis.report.page import render_html
from analysis.report.scales import WantedRange, blocked_buckets, main_reason, wanted_ranges


def _slug(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in key)


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell")


def find_chromium() -> str | None:
    """The first Chromium-like binary on the PATH, for ``--screenshot``."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _page_height(w: WorkloadData) -> int:
    """Enough window height for one workload's page (the screenshot is of the window)."""
    n_res = sum(len(c) for c in w.containers.values())
    return 250 + 70 + 180 + n_res * 190 + len(w.series) * 160


def screenshot(chromium: str, html_path: Path, png_path: Path, width: int, height: int, timeout: float = 90.0) -> None:
    """A PNG of a local HTML file by headless Chromium (no network, a throwaway profile)."""
    with tempfile.TemporaryDirectory(prefix="tandem-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png_path}",
            f"--window-size={width},{height}",
            html_path.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        if proc.returncode != 0 or not png_path.is_file():
            raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-400:]}")


def _pngs_chromium(data: ReportData, title: str, out: Path, chromium: str) -> list[Path]:
    made = []
    with tempfile.TemporaryDirectory(prefix="tandem-report-") as tmp:
        for key in sorted(data.workloads):
            page = Path(tmp) / f"{_slug(key)}.html"
            page.write_text(render_html(data, f"{title}: {key}", [key]), encoding="utf-8")
            png = out / f"{_slug(key)}.png"
            screenshot(chromium, page, png, WIDTH + 80, _page_height(data.workloads[key]))
            made.append(png)
    return made


def _pngs_matplotlib(data: ReportData, title: str, out: Path) -> list[Path]:
    """One PNG per workload, the same charts as the page from the same data (:mod:`analysis.report.scales`).

    Legends sit above their axes (never over the data); the lines are layered as on the page: held-back
    ranges at the back, then band, usage, VPA target, limit, request, replicas, the HPA recommendation
    over the replicas, decision marks on top.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    draw = _Mpl(data)
    made = []
    for key in sorted(data.workloads):
        w = data.workloads[key]
        resources = [(c, r, rd) for c in sorted(w.containers) for r, rd in sorted(w.containers[c].items())]
        n = 2 + len(resources) + len(w.series)
        ratios = [0.45] + [1.0] * (n - 1)
        fig, axes = plt.subplots(n, 1, figsize=(14, 0.9 + 2.7 * (n - 0.55)), sharex=True, squeeze=False,
                                 gridspec_kw={"height_ratios": ratios})  # fmt: skip
        draw.blocked(axes[0][0], w)
        draw.replicas(axes[1][0], w)
        for i, (cname, res, rd) in enumerate(resources, 2):
            draw.resource(axes[i][0], w, cname, res, rd)
        for j, name in enumerate(sorted(w.series), 2 + len(resources)):
            draw.series(axes[j][0], w, name)
        axes[-1][0].xaxis.set_major_formatter(mdates.DateFormatter("%b %d %H:%M"))
        axes[-1][0].set_xlim(draw.dt([data.t0])[0], draw.dt([data.t1])[0])
        fig.suptitle(f"{title}: {key}")
        fig.tight_layout()
        png = out / f"{_slug(key)}.png"
        fig.savefig(png, dpi=80)
        plt.close(fig)
        made.append(png)
    return made


class _Mpl:
    """The matplotlib axes of one workload's PNG, one method per chart, as the page draws them."""

    def __init__(self, data: ReportData) -> None:
        self.data = data
        self.axis = Axis(data.t0, data.t1)
        self.step = self.axis.bucket()

    def dt(self, ts: Sequence[float]) -> list[datetime]:
        return [datetime.fromtimestamp(max(t, self.data.t0), UTC) for t in ts]

    def steps(self, ax: Any, series: Sequence[tuple[float, float | None]], **kw: Any) -> None:
        pts = [(t, v) for t, v in series if v is not None]
        if pts:
            ax.step(self.dt([t for t, _ in pts] + [self.data.t1]), [v for _, v in pts] + [pts[-1][1]], where="post",
                    **kw)  # fmt: skip

    def ranges(self, ax: Any, rs: Sequence[WantedRange], top: float, div: float = 1.0) -> None:
        """Held-back ranges as faint bars, at least 3 % of the axis tall (as the page's 4 px); the legend
        entry on the first bar of the reason of most of them (the page's swatch colour)."""
        least = top * 0.03
        labelled = main_reason(rs)
        for r in rs:
            lo, hi = r.low / div, r.high / div
            if hi - lo < least:
                lo, hi = (lo + hi - least) / 2, (lo + hi + least) / 2
            ax.bar(self.dt([r.start])[0], hi - lo, bottom=lo, width=(r.end - r.start) / 86400 * 0.9, align="edge",
                   color=reason_color(r.reason), alpha=WANTED_OPACITY, lw=0, zorder=1,
                   label="held back (range wanted)" if r.reason == labelled else None)  # fmt: skip
            if r.reason == labelled:
                labelled = None

    @staticmethod
    def legend(ax: Any) -> None:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=6, fontsize=8, frameon=False)

    def blocked(self, ax: Any, w: WorkloadData) -> None:
        """Blocked reports per bucket, stacked by reason, and the decisions as ticks on top."""
        step, dt = self.step, self.dt
        buckets = blocked_buckets(w.events, step)
        bottoms = [0.0] * len(buckets)
        for reason in sorted({r for b in buckets for r, _ in b.reasons}):
            heights = [dict(b.reasons).get(reason, 0) for b in buckets]
            ax.bar(dt([b.start for b in buckets]), heights, bottom=bottoms, width=step / 86400 * 0.85, align="edge",
                   color=reason_color(reason), label=f"blocked: {reason}")  # fmt: skip
            bottoms = [a + h for a, h in zip(bottoms, heights, strict=True)]
        peak = max(bottoms, default=0.0)
        decisions = [e.ts for e in w.events if e.type == "decision"]
        if decisions:
            ax.plot(dt(decisions), [peak * 1.25 + 1] * len(decisions), ls="", marker="|", ms=10, mew=2,
                    color=DECISION_COLOR, label="decision")  # fmt: skip
        ax.set_ylim(0, peak * 1.25 + 2)
        ax.set_ylabel(f"blocked\nper {step_words(step)}")
        self.legend(ax)

    def replicas(self, ax: Any, w: WorkloadData) -> None:
        """Replicas, the policy's bounds, the HPA's recommendation, held-back ranges and the decisions."""
        rep_ranges = wanted_ranges(w.events, self.step, replica_wanted(w))
        rep_top = replica_range(w, rep_ranges)[1]
        self.ranges(ax, rep_ranges, rep_top)
        for _, lo, hi in w.bounds[-1:]:
            for v in (lo, hi):
                if v is not None:
                    ax.axhline(v, color=BOUND, ls="--", lw=1, zorder=2, label="policy min / max" if v == hi else None)
        self.steps(ax, w.replicas, color=REPLICAS, lw=2.6, zorder=3, label="replicas")
        if w.hpa_desired:
            self.steps(ax, w.hpa_desired, color=HPA, lw=1.6, ls=(0, (5, 4)), zorder=4, label="HPA recommendation")
        fc = forecasts(w)
        if fc:
            ax.plot(self.dt([at for _, at, _ in fc]), [load for _, _, load in fc], marker="o", ls="", ms=4,
                    mfc="none", color=FORECAST, mew=1.0, zorder=4, label="forecast (predictive)")  # fmt: skip
        ups: list[tuple[float, int]] = []
        downs: list[tuple[float, int]] = []
        for e in w.events:
            r = e.data.get("replicas")
            if e.type == "decision" and isinstance(r, Mapping) and isinstance(r.get("to"), int):
                down = isinstance(r.get("from"), int) and r["to"] < r["from"]
                (downs if down else ups).append((e.ts, r["to"]))
        for pts, marker in ((ups, "^"), (downs, "v")):
            if pts:
                ax.plot(self.dt([t for t, _ in pts]), [v for _, v in pts], marker=marker, ls="", ms=7,
                        color=DECISION_COLOR, mec="white", mew=0.6, zorder=5,
                        label="decision" if marker == "^" or not ups else None)  # fmt: skip
        ax.set_ylim(0, rep_top)
        ax.set_ylabel("replicas")
        self.legend(ax)

    def resource(self, ax: Any, w: WorkloadData, cname: str, res: str, rd: ResourceData) -> None:
        """One container resource: usage (band and mean), VPA target, limit, request, held-back ranges, decisions."""
        dt, steps = self.dt, self.steps
        marks = resource_marks(w, cname, res)
        res_ranges = wanted_ranges(w.events, self.step, resource_wanted(cname, res))
        vr = resource_range(rd, res, marks, res_ranges)
        div = vr.unit.div
        self.ranges(ax, res_ranges, vr.high / div, div)
        # Bucketed to the page's pixel columns, as the page draws it (mean, lowest, highest).
        pts = [(t, a / div, lo / div, hi / div) for t, a, lo, hi in bucket_points(rd.usage.points, self.axis)]
        if pts:
            band, usage_text = usage_band(rd, vr)
            if band:
                ax.fill_between(dt([p[0] for p in pts]), [p[2] for p in pts], [p[3] for p in pts], color=BAND,
                                alpha=BAND_OPACITY, lw=0, zorder=2, label="lowest to highest pod")  # fmt: skip
            ax.plot(dt([p[0] for p in pts]), [p[1] for p in pts], color=USAGE, lw=1, zorder=3,
                    label=usage_text)  # fmt: skip
        if rd.vpa:
            steps(ax, [(t, v / div) for t, v in rd.vpa], color=VPA, lw=1.4, ls=(0, (3, 3)), zorder=4,
                  label="VPA target")  # fmt: skip
        limits = [(t, v / div if v is not None else None) for t, v in rd.limits]
        if any(v is not None for _, v in limits):
            label = "limit (\u2191 above the chart)" if vr.above else "limit"
            steps(ax, limits, color=LIMIT, lw=1.8, ls="--", zorder=4, label=label)
        reqs = [(t, v / div if v is not None else None) for t, v in rd.requests]
        if any(v is not None for _, v in reqs):
            steps(ax, reqs, color=REQUEST, lw=2.0, zorder=4, label="request")
        for e, v, _kind, color, up in marks:
            ax.plot(dt([e.ts]), [v / div], marker="^" if up else "v", ls="", ms=6, color=color, mec="white",
                    mew=0.6, zorder=5)  # fmt: skip
        top = vr.high / div
        ax.set_ylim(vr.low / div, top)
        if vr.above:
            ax.annotate(f"limit \u2191 {axis_label(vr.above[-1], div, vr.unit.suffix)}", xy=(1.0, 1.0),
                        xycoords="axes fraction", xytext=(4, -10), textcoords="offset points", fontsize=8,
                        color=LIMIT)  # fmt: skip
        ax.set_ylabel(f"{cname} {vr.unit.name}")
        self.legend(ax)

    def series(self, ax: Any, w: WorkloadData, name: str) -> None:
        """A named series and the policy's target for it."""
        ax.plot(self.dt([t for t, _ in w.series[name]]), [v for _, v in w.series[name]], color=USAGE, lw=1,
                label="value (mean over the samples of an event)")  # fmt: skip
        if name in w.series_target:
            ax.axhline(w.series_target[name], color=BOUND, ls="--", lw=1, label="policy target")
        ax.set_ylim(bottom=0)
        ax.set_ylabel(name)
        self.legend(ax)


@dataclass(frozen=True)
class Painters:
    """What can draw the PNGs on this machine: matplotlib importable, and a Chromium binary."""

    matplotlib: bool
    chromium: str | None


def detect_painters() -> Painters:
    """The one place that looks: tests replace it to play a machine without one or the other."""
    return Painters(matplotlib=importlib.util.find_spec("matplotlib") is not None, chromium=find_chromium())


def _missing_matplotlib() -> str:
    # This interpreter's pip: the one whose site-packages the report imports from.
    return (
        f"matplotlib is not installed in this Python ({sys.executable}); install it with "
        f"'{sys.executable} -m pip install matplotlib' (in a tandem checkout: pip install -e '.[report]')"
    )


def _missing_chromium() -> str:
    return (
        f"no headless Chromium on the PATH (looked for {', '.join(CHROMIUM_NAMES)}); install one, "
        "e.g. 'apt-get install chromium' on Debian or Ubuntu, or put a Chrome/Chromium binary on the PATH"
    )


def make_pngs(
    data: ReportData, title: str, out: Path, how: str, err: IO[str], painters: Painters | None = None
) -> tuple[list[Path], str | None]:
    """PNGs per workload; returns them and a note for the page when none could be made.

    When none can be made, ``err`` gets one line per missing piece that ``how`` would have used,
    saying what is missing and how to get it (``--png none`` asks for none and gets no such line).
    """
    if how == "none":
        return [], None
    found = painters if painters is not None else detect_painters()
    missing: list[str] = []
    if how in ("auto", "matplotlib"):
        if found.matplotlib:
            return _pngs_matplotlib(data, title, out), None
        missing.append(_missing_matplotlib())
    if how in ("auto", "chromium"):
        if found.chromium is not None:
            try:
                return _pngs_chromium(data, title, out, found.chromium), None
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                err.write(f"tandem report: PNG screenshots failed: {exc}\n")
                return [], f"No PNGs: headless Chromium failed ({str(exc)[:200]})."
        missing.append(_missing_chromium())
    for why in missing:
        err.write(f"tandem report: no PNGs: {why}\n")
    if how == "auto":
        err.write("tandem report: either one draws the PNGs; --png none skips them without this message\n")
    return [], "No PNGs: " + "; ".join(missing) + "."
