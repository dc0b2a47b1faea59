"""``tandem report``: a self-contained HTML page whose marks sit at the audit's ticks."""

from __future__ import annotations

import importlib.util
import shutil
import struct
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest

from analysis.report import LEFT, RIGHT, WIDTH, Painters, find_chromium
from analysis.report import png as report_png
from analysis.report.charts import BAND, REASON_COLORS
from cli.main import main
from tests.replaying import ev
from tests.vectors.test_hvpa_vectors import T0, fixture_a, hpa, vpa, workload

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "stream.jsonl.gz"
POLICIES = ROOT / "examples" / "policies.yaml"
KEYS = {"eu-1/shop/Deployment/web", "eu-1/shop/Deployment/api", "us-2/media/Deployment/encoder"}


def tandem(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("tandem") or str(Path(sys.executable).parent / "tandem")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300)


class Marks(HTMLParser):
    """Every element with a ``data-tick``: (section id, tag, class, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.svg_class: str | None = None
        self.marks: list[dict[str, Any]] = []
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str]] = []
        self.svgs: list[dict[str, str]] = []
        self.buckets: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags[tag] += 1
        self.attrs.extend((k, a[k]) for k in a)
        if tag == "section":
            self.section = a.get("id")
        elif tag == "svg":
            self.svg_class = a.get("class")
            self.svgs.append(a)
        if a.get("class") == "bucket":
            self.buckets.append({"section": self.section, "svg": self.svg_class, **a})
        if "data-tick" in a:
            self.marks.append({"section": self.section, "svg": self.svg_class, "tag": tag, **a})


def parse(path: Path) -> Marks:
    m = Marks()
    m.feed(path.read_text(encoding="utf-8"))
    return m


@pytest.fixture(scope="module")
def example_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("report")
    result = tandem("report", str(EXAMPLE), "--policy", str(POLICIES), "--out", str(out), "--png", "none")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("tandem report: 3 workload(s), ")
    replayed = tandem("replay", str(EXAMPLE), "--policy", str(POLICIES))
    assert replayed.returncode == 0, replayed.stderr
    return out, [orjson.loads(line) for line in replayed.stdout.splitlines()]


def test_report_writes_the_audit_it_shows_byte_for_byte_as_tandem_replay(example_report) -> None:
    out, audit = example_report
    assert (out / "audit.jsonl").read_bytes() == b"".join(orjson.dumps(e) + b"\n" for e in audit)


def _hour_counts(audit: list[dict[str, Any]], subject: str | None = None) -> Counter[tuple[str, float]]:
    """Blocked reports per (workload, hour): what the strips must show for the example (1 h buckets)."""
    return Counter(
        (e["subject"], e["data"]["tick"] // 3600 * 3600)
        for e in audit
        if e["type"] == "dev.tandem.blocked.v1" and subject in (None, e["subject"])
    )


def test_every_decision_has_one_mark_and_blocked_reports_are_counted_per_hour(example_report) -> None:
    out, audit = example_report
    parsed = parse(out / "index.html")
    marks = [m for m in parsed.marks if m["svg"] == "strip"]
    shown = Counter((m["section"], float(m["data-tick"]), m["data-type"], m["data-id"]) for m in marks)
    expected = Counter(
        (e["subject"], e["data"]["tick"], "decision", e["id"]) for e in audit if e["type"] == "dev.tandem.decision.v1"
    )
    assert shown == expected
    # Blocked reports: one bar per hour that has any (72 h over 1102 px: 1 h is the smallest round
    # bucket at least 8 px wide), its count the reports whose tick falls in the hour.
    buckets = {(b["section"], float(b["data-start"])): int(b["data-count"]) for b in parsed.buckets}
    assert all(float(b["data-end"]) - float(b["data-start"]) == 3600 for b in parsed.buckets)
    assert buckets == dict(_hour_counts(audit))
    assert sum(buckets.values()) == 598
    encoder = [n for (section, _), n in buckets.items() if section == "us-2/media/Deployment/encoder"]
    assert (sum(encoder), max(encoder)) == (435, 19)
    assert ">max 19<" in (out / "index.html").read_text(encoding="utf-8")
    # One time axis for the whole page, from the first event to the last tick: x is the same
    # linear function of the tick in every chart (coordinates are written to 0.1 px).
    axes = {(a["data-t0"], a["data-t1"], a["data-x0"], a["data-scale"]) for a in parsed.svgs}
    assert len(axes) == 1
    t0, t1, x0, scale = map(float, axes.pop())
    assert t0 == 1762214400.0  # the example's first event
    assert t1 == max(e["data"]["tick"] for e in audit)
    assert (x0, scale) == (LEFT, (WIDTH - LEFT - RIGHT) / (t1 - t0))
    for m in marks:
        x = float(m["x"]) + float(m["width"]) / 2
        assert abs(x - (x0 + (float(m["data-tick"]) - t0) * scale)) <= 0.051, m
    for b in parsed.buckets:
        assert abs(float(b["data-x"]) - (x0 + (float(b["data-start"]) - t0) * scale)) <= 0.051, b


def test_value_charts_mark_each_decision_and_blocked_change_at_an_audit_tick(example_report) -> None:
    out, audit = example_report
    by_id = {e["id"]: e for e in audit}
    marks = [m for m in parse(out / "index.html").marks if m["svg"] == "chart"]
    assert marks
    for m in marks:
        e = by_id[m["data-id"]]
        assert (e["subject"], e["data"]["tick"]) == (m["section"], float(m["data-tick"]))
    replica_decisions = {e["id"] for e in audit if e["type"] == "dev.tandem.decision.v1" and "replicas" in e["data"]}
    triangles = {m["data-id"] for m in marks if m["tag"] == "polygon"}
    assert replica_decisions <= triangles


def test_each_workload_has_replicas_and_per_container_usage_charts(example_report) -> None:
    out, _ = example_report
    page = (out / "index.html").read_text(encoding="utf-8")
    parsed = parse(out / "index.html")
    assert {v for k, v in parsed.attrs if k == "id"} == KEYS
    for container in ("web", "api", "encoder"):
        for res in ("cpu", "memory"):
            assert f"<b>{container} {res}</b>" in page
    assert page.count("<b>replicas</b>") == 3
    # Every pod of the example reports the same memory: no band there (nothing to see), and the
    # usage line says so; the CPU charts have their band and list it.
    assert page.count("usage (per-pod average)") == 3
    assert page.count("usage (per-pod average; no spread between pods)") == 3
    for container in ("web", "api", "encoder"):
        cpu, memory = _chart_html(page, f"{container} cpu"), _chart_html(page, f"{container} memory")
        assert "lowest to highest pod" in cpu and f'fill="{BAND}"' in cpu
        assert "lowest to highest pod" not in memory and f'fill="{BAND}"' not in memory
    # The held-back swatch is the colour of most of that chart's held-back changes: web's replicas
    # were held back by the stabilization window only, its memory mostly by the minimum change.
    web, encoder = "eu-1/shop/Deployment/web", "us-2/media/Deployment/encoder"
    assert _held_swatch(_chart_html(page, "replicas", web)) == REASON_COLORS["StabilizationWindow"]
    assert _held_swatch(_chart_html(page, "web memory")) == REASON_COLORS["MinChange"]
    assert _held_swatch(_chart_html(page, "replicas", encoder)) == REASON_COLORS["MinFactor"]
    assert "<b>series encode_queue_per_replica</b>" in page
    assert page.count("policy min / max") == 3
    assert ">max 6<" in page and ">min 2<" in page  # api's HVPA bounds
    assert ">max 24<" in page  # encoder's CustomHpa bounds
    assert ">target 100<" in page


def _chart_html(page: str, title: str, section: str | None = None) -> str:
    """A chart's legend and SVG: from its legend title to the end of its SVG (in ``section`` if given)."""
    if section is not None:
        page = page[page.index(f'<section id="{section}">') :]
    start = page.index(f"<b>{title}</b>")
    return page[start : page.index("</svg>", start)]


def _held_swatch(chart: str) -> str:
    head = chart[: chart.index("held back (range wanted)")]
    return head[head.rindex("background:") + len("background:") :].split(";")[0]


def test_the_page_is_self_contained(example_report) -> None:
    out, _ = example_report
    page = (out / "index.html").read_text(encoding="utf-8")
    parsed = parse(out / "index.html")
    assert parsed.tags["script"] == parsed.tags["link"] == parsed.tags["img"] == parsed.tags["iframe"] == 0
    assert not [v for k, v in parsed.attrs if k in ("src", "href") and not v.startswith("#")]
    for needle in ("http://", "https://", "url(", "@import"):
        assert needle not in page


def test_report_from_an_audit_file_alone_draws_replicas_from_the_decisions(tmp_path: Path, example_report) -> None:
    out, audit = example_report
    result = tandem("report", str(out / "audit.jsonl"), "--out", str(tmp_path), "--png", "none", "--workload", "api")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "from the audit stream alone (no usage samples)" in page
    assert "replicas (from the decisions)" in page
    assert "usage (per-pod average)" not in page
    parsed = parse(tmp_path / "index.html")
    api = "eu-1/shop/Deployment/api"
    marks = [m for m in parsed.marks if m["svg"] == "strip"]
    assert {m["data-id"] for m in marks} == {
        e["id"] for e in audit if e["subject"] == api and e["type"] == "dev.tandem.decision.v1"
    }
    buckets = Counter({(api, float(b["data-start"])): int(b["data-count"]) for b in parsed.buckets})
    assert buckets == _hour_counts(audit, api)


def test_report_shows_applier_results_from_an_audit_file_beside_the_replay(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    events = [workload(T0 + 1, 2), hpa(T0 + 2, 3, True), vpa(T0 + 3, "500m", "3G"), workload(T0 + 20, 3)]
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    policy = tmp_path / "p.json"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    replayed = [
        orjson.loads(line) for line in tandem("replay", str(stream), "--policy", str(policy)).stdout.splitlines()
    ]
    decision = replayed[0]
    assert decision["type"] == "dev.tandem.decision.v1"
    applied = {
        "specversion": "1.0",
        "id": "a1",
        "source": "/tandem/c1",
        "subject": decision["subject"],
        "time": "2025-11-04T10:00:16Z",
        "type": "dev.tandem.applied.v1",
        "datacontenttype": "application/json",
        "data": {"decision": decision["id"], "workload": decision["data"]["workload"]},
    }
    (tmp_path / "applied.jsonl").write_bytes(orjson.dumps(applied) + b"\n")
    result = tandem(
        "report", str(stream), str(tmp_path / "applied.jsonl"), "--policy", str(policy), "--out", str(tmp_path / "r"),
        "--png", "none",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    marks = parse(tmp_path / "r" / "index.html").marks
    shown = [(m["data-type"], float(m["data-tick"])) for m in marks if m["svg"] == "strip"]
    expected = [("decision", decision["data"]["tick"]), ("applied", T0 + 16)]
    assert shown == expected
    blocked = [e for e in replayed if e["type"] == "dev.tandem.blocked.v1"]
    assert len(blocked) == 1
    # 20 s of events: buckets of a minute, the one blocked report in the minute of its tick.
    (bucket,) = parse(tmp_path / "r" / "index.html").buckets
    assert (float(bucket["data-start"]), bucket["data-count"]) == (blocked[0]["data"]["tick"] // 60 * 60, "1")
    assert "1 decision(s), 1 blocked report(s), 1 applied, 0 apply failure(s)" in (
        tmp_path / "r" / "index.html"
    ).read_text(encoding="utf-8")


def test_report_says_what_the_history_envelopes_taught_once_beside_the_same_audit_file(tmp_path: Path) -> None:
    """Issue 31: a workload's learned history is one line under its counts, the replay's events and
    the same events in an audit file counted once (same ids)."""
    sample = {"pod": "p1", "container": "deployment", "cpu": 0.25, "memory": 150_000_000}
    past = [workload(T0 - 3600, 2), *(ev("metric", T0 - 3600 + 60.0 * m, samples=[sample]) for m in range(60))]
    envelopes = [
        ev("history", T0 + 10, until=past[30]["ts"], events=past[:31]),
        ev("history", T0 + 10, until=T0, events=past[31:]),
    ]
    stream = tmp_path / "s.jsonl"
    events = [workload(T0 + 1, 2), hpa(T0 + 6, 3, True), vpa(T0 + 7, "500m", "3G"), *envelopes, workload(T0 + 20, 3)]
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    policy = tmp_path / "p.json"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    replayed = tandem("replay", str(stream), "--policy", str(policy), "--out", str(tmp_path / "audit.jsonl"))
    assert replayed.returncode == 0, replayed.stderr
    learned = [e for e in map(orjson.loads, (tmp_path / "audit.jsonl").read_bytes().splitlines())
               if e["type"] == "dev.tandem.learned.v1"]  # fmt: skip
    assert [(e["data"]["samples"], e["data"]["replica_slots"]) for e in learned] == [(30, 2), (30, 3)]
    result = tandem(
        "report", str(stream), str(tmp_path / "audit.jsonl"), "--policy", str(policy), "--out", str(tmp_path / "r"),
        "--png", "none",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    line = (
        "Learned 2 history envelopes, 1 hour of history up to 2025-11-04 10:00:00 UTC: 60 samples into the VPA "
        "histograms, 0 skipped as known already, 5 replica slots."
    )
    assert page.count(line) == 1
    assert "1 decision(s), 1 blocked report(s)" in page


def test_report_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = tandem("report", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r"))
    assert result.returncode == 2
    assert "nope.jsonl: no such file" in result.stderr


@pytest.mark.skipif(find_chromium() is None, reason="no chromium on the PATH (apt-get install chromium)")
def test_report_screenshots_each_workload_to_a_png_with_headless_chromium(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    events = [
        workload(T0 + 1, 2),
        ev("metric", T0 + 5, samples=[{"pod": "p1", "container": "deployment", "cpu": 0.25, "memory": 150_000_000}]),
        hpa(T0 + 6, 3, True),
        vpa(T0 + 7, "500m", "3G"),
        workload(T0 + 20, 3),
    ]
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    policy = tmp_path / "p.json"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    result = tandem("report", str(stream), "--policy", str(policy), "--out", str(tmp_path / "r"), "--png", "chromium")
    assert result.returncode == 0, result.stderr
    png = tmp_path / "r" / "c1_shop_Deployment_web.png"
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width == WIDTH + 80
    assert height > 600
    assert "and 1 PNG(s)" in result.stderr


def _small_stream(tmp_path: Path) -> tuple[Path, Path]:
    stream = tmp_path / "s.jsonl"
    events = [workload(T0 + 1, 2), hpa(T0 + 6, 3, True), vpa(T0 + 7, "500m", "3G"), workload(T0 + 20, 3)]
    stream.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    policy = tmp_path / "p.json"
    policy.write_bytes(orjson.dumps(fixture_a(40)))
    return stream, policy


_NO_MATPLOTLIB = (
    f"tandem report: no PNGs: matplotlib is not installed in this Python ({sys.executable}); install it with "
    f"'{sys.executable} -m pip install matplotlib' (in a tandem checkout: pip install -e '.[report]')"
)
_NO_CHROMIUM = (
    "tandem report: no PNGs: no headless Chromium on the PATH (looked for chromium, chromium-browser, "
    "google-chrome, google-chrome-stable, chrome, headless_shell); install one, e.g. 'apt-get install chromium' "
    "on Debian or Ubuntu, or put a Chrome/Chromium binary on the PATH"
)


def _report_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], painters: Painters, png: str
) -> tuple[int, list[str], Path]:
    """``tandem report`` in this process on a machine that has only ``painters`` (the module's detection seam)."""
    monkeypatch.setattr(report_png, "detect_painters", lambda: painters)
    stream, policy = _small_stream(tmp_path)
    out = tmp_path / "r"
    status = main(["report", str(stream), "--policy", str(policy), "--out", str(out), "--png", png])
    return status, capsys.readouterr().err.splitlines(), out


def test_report_without_matplotlib_or_chromium_says_why_and_how_per_missing_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err, out = _report_without(tmp_path, monkeypatch, capsys, Painters(matplotlib=False, chromium=None), "auto")
    assert status == 0
    assert err[:3] == [
        _NO_MATPLOTLIB,
        _NO_CHROMIUM,
        "tandem report: either one draws the PNGs; --png none skips them without this message",
    ]
    assert err[3].endswith("(no PNGs: see above)")
    assert len(err) == 4
    assert list(out.glob("*.png")) == []
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "No PNGs: matplotlib is not installed in this Python" in page
    assert "no headless Chromium on the PATH" in page


def test_report_png_matplotlib_without_matplotlib_names_only_matplotlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Chromium that is never run: --png matplotlib does not fall back to it.
    painters = Painters(matplotlib=False, chromium="/nonexistent/chromium")
    status, err, out = _report_without(tmp_path, monkeypatch, capsys, painters, "matplotlib")
    assert status == 0
    assert err[0] == _NO_MATPLOTLIB
    assert err[1].endswith("(no PNGs: see above)")
    assert len(err) == 2
    assert list(out.glob("*.png")) == []


def test_report_png_chromium_without_chromium_names_only_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    painters = Painters(matplotlib=True, chromium=None)  # --png chromium does not fall back to matplotlib
    status, err, out = _report_without(tmp_path, monkeypatch, capsys, painters, "chromium")
    assert status == 0
    assert err[0] == _NO_CHROMIUM
    assert len(err) == 2
    assert list(out.glob("*.png")) == []


def test_report_png_none_says_nothing_about_missing_painters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err, _ = _report_without(tmp_path, monkeypatch, capsys, Painters(matplotlib=False, chromium=None), "none")
    assert status == 0
    assert len(err) == 1 and err[0].endswith("(no PNGs)")


def test_the_detection_seam_sees_this_machine() -> None:
    found = report_png.detect_painters()
    assert found.chromium == find_chromium()
    assert found.matplotlib == (importlib.util.find_spec("matplotlib") is not None)


def test_report_draws_pngs_with_matplotlib_when_it_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is optional and not installed")
    stream, policy = _small_stream(tmp_path)
    out = str(tmp_path / "r")
    cmd = ["report", str(stream), "--policy", str(policy), "--out", out, "--png", "matplotlib"]
    # This interpreter: the one with matplotlib.
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", *cmd], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert "and 1 PNG(s)" in result.stderr
    assert (tmp_path / "r" / "c1_shop_Deployment_web.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
