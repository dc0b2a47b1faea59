"""Real demand traces (analysis.traces) on the slices in tests/data, hand-checked against the raw rows."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from analysis.traces import TRACES, Mapping, convert, demand_lines, read_rates
from cli.main import main as tandem

DATA = Path(__file__).resolve().parents[1] / "data"
RETAIL = DATA / "online_retail-2010-12-01-morning.csv.xz"
BIKES = DATA / "hourly_bikesharing-2018-06-04.csv"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "simulate"


def at(*hm: int, day: tuple[int, int, int] = (2010, 12, 1)) -> float:
    return datetime(*day, *hm, tzinfo=UTC).timestamp()


def test_online_retail_counts_order_lines_per_minute_as_a_trailing_30_minute_mean() -> None:
    # The slice's first rows: 14 lines at 8:26, 4 at 8:28, 32 at 8:34, 2 at 8:35, 40 at 8:45.
    rates = dict(read_rates("online-retail", RETAIL))
    first = min(rates)
    assert first == at(8, 26)
    assert rates[at(8, 26)] == pytest.approx(14 / 30)
    assert rates[at(8, 27)] == pytest.approx(14 / 30)  # a minute without an order is 0, not missing
    assert rates[at(8, 28)] == pytest.approx(18 / 30)
    assert rates[at(8, 55)] == pytest.approx(92 / 30)  # 8:26..8:55: all five minutes
    assert rates[at(8, 56)] == pytest.approx(78 / 30)  # 8:26 has left the window
    assert max(rates) == at(10, 53)
    assert len(rates) == (at(10, 53) - first) / 60 + 1


def test_bikeshare_interpolates_the_hourly_counts_linearly_to_a_rate_per_minute() -> None:
    rates = dict(read_rates("bikeshare", BIKES))
    day = (2018, 6, 4)
    assert rates[at(0, 0, day=day)] == pytest.approx(64 / 60)
    assert rates[at(0, 30, day=day)] == pytest.approx(54 / 60)  # halfway from 64 to 44 rentals an hour
    assert rates[at(1, 0, day=day)] == pytest.approx(44 / 60)
    assert rates[at(23, 0, day=(2018, 6, 5))] == pytest.approx(248 / 60)
    assert len(rates) == 71 * 60 + 1  # three days of hours, the last hour's rate alone


def test_a_rate_maps_to_cpu_and_memory_by_the_documented_mapping() -> None:
    # 2.6 lines/min at the reference 28.93 -> 200 req/s: 17.97 req/s, x 15 ms + 0.1 core,
    # 256 MiB + 1 MiB per req/s.
    ref = TRACES["online-retail"].reference_rate
    piece = [(at(8, 56), 2.6)]
    workload, metric = demand_lines([piece], Mapping(), ["web"], scale_to=ref)
    assert workload["type"] == "workload" and workload["replicas"] == 2
    assert metric["ts"] == at(8, 57)
    assert metric["samples"] == [
        {"pod": "trace", "container": "web", "cpu": 0.3696, "memory": 287_280_831},
        {"pod": "trace", "series": "http_requests_per_second", "value": 17.972},
    ]


def test_convert_refuses_more_days_than_the_slice_holds(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="only 0 whole piece"):
        convert("bikeshare", BIKES, tmp_path / "s.jsonl", days=3)


def test_a_converted_slice_runs_through_simulate_against_the_upstream_hpa(tmp_path: Path) -> None:
    stream = tmp_path / "bikes.jsonl"
    assert convert("bikeshare", BIKES, stream, days=1, workloads=2) == 2 + 2 * 1440
    lines = [orjson.loads(x) for x in stream.read_bytes().splitlines()]
    # The second day runs beside the first, shifted to its start.
    assert {x["workload"]["name"] for x in lines} == {"web-000", "web-001"}
    assert lines[-1]["ts"] == at(0, 0, day=(2018, 6, 5))  # 1,440 minutes of each, reported at their end
    hpa = tmp_path / "hpa.yaml"
    hpa.write_text(
        (EXAMPLES / "upstream-hpa.yaml").read_text().split("\n---\n")[0].replace("name: web", "name: web-000")
    )
    out = tmp_path / "out.json"
    assert tandem(["simulate", str(stream), "--policy", str(hpa), "--json", str(out), "--jobs", "1"]) == 0
    rows = orjson.loads(out.read_bytes())
    row = next(r for r in rows if r["workload"].endswith("web-000"))
    assert (row["policy"], row["evictions"], row["pod_restarts"], row["oom_kills"]) == ("hpa", 0, 0, 0)
    assert row["replica_changes"] > 0  # the evening peak (248 rentals an hour) needs more than 2 pods


def bank_rows(tmp_path: Path) -> Path:
    """Rows in bank_calls.csv's own format (``DateTime,Calls``, one per 5 minutes from 07:00): made
    up here, because the real file's licence (GPL-3, via fpp3) keeps it out of this tree."""
    path = tmp_path / "bank_calls.csv"
    path.write_text(
        "DateTime,Calls\n"
        "2003-03-03T07:00:00Z,111\n"
        "2003-03-03T07:05:00Z,113\n"
        "2003-03-03T07:10:00Z,76\n"
        "2003-03-04T07:00:00Z,95\n"
    )
    return path


def test_bank_calls_spreads_each_5_minute_count_over_its_5_minutes_and_is_0_while_closed(tmp_path: Path) -> None:
    rates = dict(read_rates("bank-calls", bank_rows(tmp_path)))
    day = (2003, 3, 3)
    assert min(rates) == at(0, 0, day=day)  # from the first day's midnight: the night before opening
    assert rates[at(6, 59, day=day)] == 0.0
    assert rates[at(7, 0, day=day)] == pytest.approx(111 / 5)
    assert rates[at(7, 4, day=day)] == pytest.approx(111 / 5)
    assert rates[at(7, 5, day=day)] == pytest.approx(113 / 5)
    assert rates[at(7, 14, day=day)] == pytest.approx(76 / 5)
    assert rates[at(7, 15, day=day)] == 0.0  # no row: closed
    assert rates[at(7, 0, day=(2003, 3, 4))] == pytest.approx(95 / 5)
    assert max(rates) == at(23, 59, day=(2003, 3, 4))  # to the last day's end
    assert len(rates) == 2 * 1440


def test_bank_calls_maps_its_reference_rate_of_75_calls_a_minute_to_200_requests_a_second(tmp_path: Path) -> None:
    stream = tmp_path / "bank.jsonl"
    assert convert("bank-calls", bank_rows(tmp_path), stream, days=1) == 1 + 1440
    lines = [orjson.loads(x) for x in stream.read_bytes().splitlines()]
    opening = next(x for x in lines if x.get("ts") == at(7, 1, day=(2003, 3, 3)))  # 07:00's minute, at its end
    # 111 calls in 5 minutes: 22.2 a minute, x 200 / 75 = 59.2 req/s; 0.1 + 0.015 x 59.2 = 0.988 cores.
    assert opening["samples"][1]["value"] == 59.2
    assert opening["samples"][0]["cpu"] == 0.988
    assert lines[1]["samples"][0]["cpu"] == 0.1  # midnight: closed, the workload at rest
