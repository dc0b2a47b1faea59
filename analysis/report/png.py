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
from typing import IO

from analysis.report.charts import (
    BAND,
    BOUND,
    DECISION_COLOR,
    HPA,
    LIMIT,
    REPLICAS,
    REQUEST,
    USAGE,
    WIDTH,
    _reason_color,
    _resource_marks,
    _unit,
)
from analysis.report.collect import ReportData, WorkloadData
from analysis.report.page import render_html


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


def _pngs_matplotlib(data: ReportData, title: str, out: Path) -> list[Path]:  # pragma: no cover - optional
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    def dt(ts: Sequence[float]) -> list[datetime]:
        return [datetime.fromtimestamp(max(t, data.t0), UTC) for t in ts]

    made = []
    for key in sorted(data.workloads):
        w = data.workloads[key]
        resources = [(c, r, rd) for c in sorted(w.containers) for r, rd in sorted(w.containers[c].items())]
        n = 1 + len(resources) + len(w.series)
        fig, axes = plt.subplots(n, 1, figsize=(14, 2.6 * n), sharex=True, squeeze=False)
        ax = axes[0][0]
        if w.replicas:
            ax.step(
                dt([t for t, _ in w.replicas] + [data.t1]),
                [v for _, v in w.replicas] + [w.replicas[-1][1]],
                where="post",
                color=REPLICAS,
                label="replicas",
            )
        if w.hpa_desired:
            ax.step(
                dt([t for t, _ in w.hpa_desired]),
                [v for _, v in w.hpa_desired],
                where="post",
                color=HPA,
                ls=":",
                label="HPA recommendation",
            )
        for _, lo, hi in w.bounds[-1:]:
            for v in (lo, hi):
                if v is not None:
                    ax.axhline(v, color=BOUND, ls="--", lw=1)
        for e in w.events:
            r = e.data.get("replicas")
            if e.type == "decision" and isinstance(r, Mapping):
                ax.plot(dt([e.ts]), [r["to"]], marker="^", color=DECISION_COLOR, ls="")
            for b in e.data.get("blocked") or []:
                if b.get("target") == "replicas" and isinstance(b.get("wanted"), int):
                    ax.plot(dt([e.ts]), [b["wanted"]], marker="o", mfc="none", ls="", ms=4,
                            color=_reason_color(str(b.get("reason"))))  # fmt: skip
        ax.set_ylabel("replicas")
        ax.legend(loc="upper left", fontsize=8)
        for i, (cname, res, rd) in enumerate(resources, 1):
            ax = axes[i][0]
            values = [p[3] for p in rd.usage.points] + [v for _, v in rd.requests + rd.limits if v is not None]
            div, _, unit = _unit(res, max(values or [1.0]))
            pts = [(t, a / div, lo / div, hi / div) for t, a, lo, hi in rd.usage.points]
            if pts:
                ax.fill_between(
                    dt([p[0] for p in pts]), [p[2] for p in pts], [p[3] for p in pts], color=BAND, alpha=0.35
                )
                ax.plot(
                    dt([p[0] for p in pts]), [p[1] for p in pts], color=USAGE, lw=1, label="usage (per-pod average)"
                )
            for series, color, ls, label in ((rd.requests, REQUEST, "-", "request"), (rd.limits, LIMIT, "--", "limit")):
                s = [(t, v / div) for t, v in series if v is not None]
                if s:
                    ax.step(
                        dt([t for t, _ in s] + [data.t1]),
                        [v for _, v in s] + [s[-1][1]],
                        where="post",
                        color=color,
                        ls=ls,
                        label=label,
                    )
            for e, v, kind, color, up in _resource_marks(w, cname, res):
                marker = ("^" if up else "v") if kind == "decision" else "o"
                ax.plot(dt([e.ts]), [v / div], marker=marker, ls="", ms=5 if kind == "decision" else 4, color=color,
                        mfc=color if kind == "decision" else "none")  # fmt: skip
            ax.set_ylabel(f"{cname} {unit}")
            ax.legend(loc="upper left", fontsize=8)
        for j, name in enumerate(sorted(w.series), 1 + len(resources)):
            ax = axes[j][0]
            ax.plot(dt([t for t, _ in w.series[name]]), [v for _, v in w.series[name]], color=USAGE, lw=1)
            if name in w.series_target:
                ax.axhline(w.series_target[name], color=BOUND, ls="--", lw=1)
            ax.set_ylabel(name)
        axes[-1][0].xaxis.set_major_formatter(mdates.DateFormatter("%b %d %H:%M"))
        fig.suptitle(f"{title}: {key}")
        fig.tight_layout()
        png = out / f"{_slug(key)}.png"
        fig.savefig(png, dpi=80)
        plt.close(fig)
        made.append(png)
    return made


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
