"""History envelopes (docs/contract.md §3 ``history``, ``scaling.learn``): past events learned at the
present, never reconciled; tandem's own VPA and Tortoise's replica slots warm whether the history
comes before or after the live events, and the output stays byte-identical across runs and
state restores."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import decode_event
from scaling.learn import SLOT, replica_peaks
from scaling.policies.tortoise.history import ReplicaHistory
from scaling.reconcile import Emitted
from scaling.settings import Settings
from scaling.state import WorkloadState
from scaling.vocabulary import LEARNED
from streams.history import envelopes
from tests.replaying import WL, ev

H = 3600.0
DAY = 24 * H
#: Monday 2026-01-05T00:00:00Z: the live stream starts here, the history is the days before.
LIVE = 1_767_571_200.0
KEY = "c1/shop/Deployment/web"


def hvpa() -> dict[str, Any]:
    scale = {"updatePolicy": {"updateMode": "Auto"}, "stabilizationDuration": "3m"}
    return {
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "Hvpa",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "hpa": {"deploy": True, "scaleUp": scale, "scaleDown": scale,
                    "template": {"spec": {"minReplicas": 1, "maxReplicas": 5}}},
            "vpa": {"deploy": True, "scaleUp": scale, "scaleDown": scale,
                    "template": {"spec": {"resourcePolicy": {"containerPolicies": [
                        {"containerName": "app", "minAllowed": {"cpu": "50m", "memory": "100M"},
                         "maxAllowed": {"cpu": "4", "memory": "8G"}}]}}}},
            "weightBasedScalingIntervals": [{"vpaWeight": 40, "startReplicaCount": 1, "lastReplicaCount": 5}],
        },
    }  # fmt: skip


def tortoise() -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.mercari.com/v1beta3",
        "kind": "Tortoise",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {"tandem.dev/cluster": "c1"}},
        "spec": {"updateMode": "Auto", "targetRefs": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}}},
    }


def spec(ts: float, replicas: int) -> dict[str, Any]:
    return ev("workload", ts, replicas=replicas, containers={"app": {"requests": {"cpu": "500m", "memory": "512Mi"}}})


def usage(ts: float) -> dict[str, Any]:
    """Two pods whose CPU and memory follow the hour of the day (a known, varied load)."""
    hour = int(ts // H) % 24
    return ev(
        "metric",
        ts,
        samples=[
            {"pod": pod, "container": "app", "cpu": 0.1 + 0.05 * ((hour + i) % 12), "memory": (200 + 10 * hour) << 20}
            for i, pod in enumerate(("web-a", "web-b"))
        ],
    )


def history(days: float, step: float = 300.0) -> list[dict[str, Any]]:
    """``days`` of the past before LIVE: the spec once, then 2 replicas at night and 4 by day, and a
    sample every ``step``."""
    out = [spec(LIVE - days * DAY, 2)]
    ts = LIVE - days * DAY
    while ts < LIVE:
        hour = int(ts // H) % 24
        if ts % H == 0:
            out.append(spec(ts, 4 if 8 <= hour < 20 else 2))
        out.append(usage(ts))
        ts += step
    return out


def live(start: float, minutes: int) -> list[dict[str, Any]]:
    """The live stream: the spec again, then a sample a minute."""
    return [spec(start, 2), *(usage(start + 60.0 * m) for m in range(minutes))]


def envelope(past: list[dict[str, Any]], ts: float, end: float = LIVE) -> list[dict[str, Any]]:
    return envelopes(past, ts, end)


def run(events: list[dict[str, Any]], policy: dict[str, Any]) -> tuple[Engine, list[Emitted]]:
    engine = Engine(Settings(cluster="c1"))
    engine.add_policy(policy)
    return engine, engine.run(events)


def own_vpa(emitted: list[Emitted], tick: float) -> dict[str, Any]:
    found = [e for kind, e in emitted if kind == "vpa" and e["ts"] == tick]
    assert len(found) == 1, [e["ts"] for kind, e in emitted if kind == "vpa"]
    return dict(found[0]["containers"]["app"])


def ticks(emitted: list[Emitted]) -> list[float]:
    """The ticks of the decisions, blocked reports and own recommendations (a learned event has none)."""
    return [e["data"]["tick"] if kind == "audit" else e["ts"] for kind, e in emitted if e.get("type") != LEARNED]


def learned(emitted: list[Emitted]) -> list[dict[str, Any]]:
    """The data of the ``dev.tandem.learned.v1`` events among ``emitted``."""
    return [e["data"] for kind, e in emitted if kind == "audit" and e["type"] == LEARNED]


# --- the envelope ----------------------------------------------------------------------------


def test_an_envelope_decodes_with_its_past_events_and_refuses_what_is_not_the_past() -> None:
    past = [spec(LIVE - DAY, 3), usage(LIVE - DAY + 60)]
    raw = {"type": "history", "ts": LIVE, "workload": dict(WL), "until": LIVE - 60, "events": past}
    event = decode_event(raw)
    assert (event.type, event.ts, event.until, [e.type for e in event.events]) == (  # type: ignore[union-attr]
        "history",
        LIVE,
        LIVE - 60,
        ["workload", "metric"],
    )
    cases = [
        ({"until": LIVE + 1}, f"field 'until': {LIVE + 1} is after the envelope's ts {LIVE}: history is the past"),
        ({"events": [past[1], past[0]]}, f"field 'events[1].ts': {LIVE - DAY} is before the event ahead of it "
                                         f"({LIVE - DAY + 60}): not in time order"),
        ({"events": [ev("hpa", LIVE - 5, desired_replicas=2)]},
         "field 'events[0].type': an envelope carries metric and workload events, not 'hpa'"),
        ({"events": [ev("metric", LIVE - 5, workload={**WL, "name": "db"}, series="q", value=1.0)]},
         "field 'events[0].workload': c1/shop/Deployment/db is not the envelope's c1/shop/Deployment/web"),
        ({"events": [{**past[1], "samples": [{"pod": "p", "container": "app", "cpu": -1}]}]},
         "field 'events[0].samples[0].cpu': usage must be >= 0, got -1"),
        ({"until": None}, "field 'until': expected a number, got NoneType None"),
        ({"event": []}, "field 'event': unknown field (did you mean events?)"),
    ]  # fmt: skip
    for change, error in cases:
        with pytest.raises(InvalidEvent) as exc:
            decode_event({**raw, **change})
        assert str(exc.value) == error


def test_envelopes_are_cut_per_workload_under_the_size_limit_and_cover_the_history_in_order() -> None:
    past = history(1)
    db = [ev("metric", e["ts"], workload={**WL, "name": "db"}, series="q", value=1.0) for e in past[:5]]
    out = envelopes(sorted([*past, *db, ev("hpa", LIVE - 60, desired_replicas=2)], key=lambda e: e["ts"]), LIVE, LIVE,
                    max_bytes=16 * 1024)  # fmt: skip
    assert [e["workload"]["name"] for e in out] == ["db"] + ["web"] * 5
    assert all(len(orjson.dumps(e)) <= 16 * 1024 for e in out)
    web = [e for e in out if e["workload"]["name"] == "web"]
    assert [x for e in web for x in e["events"]] == past  # the hpa event is not carried
    assert [e["until"] for e in web] == [*(e["events"][-1]["ts"] for e in web[:-1]), LIVE]
    assert all(e["events"][0]["ts"] > prev["until"] for prev, e in itertools.pairwise(web))  # one ts, one envelope
    assert {e["ts"] for e in out} == {LIVE}


def test_events_of_one_ts_share_an_envelope_so_none_is_skipped_as_already_taught() -> None:
    """A spec and a sample at the same hour straddled a cut: the next envelope's sample was then
    skipped as no later than what the first taught."""
    past = history(1, step=600.0)
    samples = sum(len(e["samples"]) for e in past if e["type"] == "metric")
    for kib in range(4, 12):  # cuts at many places: by size alone, some fall inside an hour's pair
        out = envelopes(past, LIVE, LIVE, max_bytes=kib * 1024)
        for prev, nxt in itertools.pairwise(out):
            assert nxt["events"][0]["ts"] > prev["events"][-1]["ts"], kib
        _, emitted = run([*out, *live(LIVE, 2)], hvpa())
        said = learned(emitted)
        assert len(said) == len(out)
        assert (sum(d["skipped"]["taught"] for d in said), sum(d["samples"] for d in said)) == (0, samples), kib


# --- learn, never reconcile --------------------------------------------------------------------


def test_an_envelope_learns_without_reconciling_a_past_tick_or_touching_the_present() -> None:
    engine = Engine(Settings(cluster="c1"))
    engine.add_policy(hvpa())
    emitted = [x for e in live(LIVE, 10) for x in engine.process(e)]
    state = engine.states[KEY]
    before = copy.deepcopy(state.to_dict())
    pending, last_tick = state.pending_tick, state.last_tick
    assert (pending, last_tick) == (LIVE + 540, LIVE + 480)
    counts = {c: s.total_samples_count for c, s in state.vpa_live.items()}  # type: ignore[union-attr]
    past = history(2)
    (env,) = envelope(past, LIVE + 540)
    # No tick of the two days is decided, nor the pending one: the one output says what it taught.
    ((kind, said),) = engine.process(env)
    cpu = sum(len(e["samples"]) for e in past if e["type"] == "metric")
    data = {
        "workload": dict(WL),
        "from": LIVE - 2 * DAY,
        "until": LIVE,
        "samples": cpu,
        "replica_slots": 2 * 96 + 1,  # two days of quarter hours, and the slot of ``until``
        "skipped": {"live": 0, "taught": 0},
        "live_from": LIVE,
        "taught_through": None,
        "envelopes": 1,
    }
    assert (cpu, kind, said["type"], said["time"], said["subject"], said["data"]) == (
        1152, "audit", LEARNED, "2026-01-05T00:09:00Z", KEY, data
    )  # fmt: skip
    assert (state.pending_tick, state.last_tick) == (pending, last_tick)
    after = state.to_dict()
    for part in ("raw", "series", "oom", "overlay", "memory", "last_blocked", "pending_tick", "last_tick"):
        assert after[part] == before[part], part
    assert after["recommender"]["usage"] == before["recommender"]["usage"]  # the own HPA's present
    assert {c: s.total_samples_count for c, s in state.vpa_live.items()} == {  # type: ignore[union-attr]
        c: n + cpu for c, n in counts.items()
    }
    assert after["learned"]["n"] == 1 and after["learned"]["live_from"] == LIVE
    # The same envelope again teaches nothing, and says so: every sample known from the first.
    ((_, again),) = engine.process(env)
    assert again["data"] == {
        **data,
        "samples": 0,
        "replica_slots": 0,
        "skipped": {"live": 0, "taught": cpu},
        "taught_through": past[-1]["ts"],
        "envelopes": 2,
    }
    assert again["id"] != said["id"] and again["time"] == said["time"]
    assert {c: s.total_samples_count for c, s in state.vpa_live.items()} == {  # type: ignore[union-attr]
        c: n + cpu for c, n in counts.items()
    }
    rest = [x for e in [usage(LIVE + 600.0 + 60 * m) for m in range(5)] for x in engine.process(e)] + engine.flush()
    assert min(ticks(emitted + rest)) >= LIVE  # nothing of the past, before or after it


def test_a_stream_without_envelopes_keeps_its_state_as_it_was() -> None:
    engine, _ = run(live(LIVE, 5), hvpa())
    assert "learned" not in engine.states[KEY].to_dict()


# --- the own VPA warms ---------------------------------------------------------------------------


def test_the_own_vpa_after_an_envelope_before_the_live_stream_is_the_uninterrupted_streams() -> None:
    past, now = history(3), live(LIVE, 10)
    first_tick = LIVE
    _, whole = run(past + now, hvpa())
    _, warmed = run(envelope(past, LIVE) + now, hvpa())
    _, cold = run(now, hvpa())
    assert own_vpa(warmed, first_tick) == own_vpa(whole, first_tick)
    assert (own_vpa(warmed, first_tick)["target"], own_vpa(warmed, first_tick)["lower_bound"]) == (
        {"cpu": "716m", "memory": "548861636"},
        {"cpu": "475m", "memory": "262144k"},
    )
    assert own_vpa(cold, first_tick)["target"] == {"cpu": "182m", "memory": "262144k"}
    # and at every later recommendation
    later = [t for t in ticks(whole) if t > LIVE]
    assert [own_vpa(warmed, t) for t in later if any(k == "vpa" and e["ts"] == t for k, e in warmed)] == [
        own_vpa(whole, t) for t in later if any(k == "vpa" and e["ts"] == t for k, e in whole)
    ]


def test_the_own_vpa_after_an_envelope_behind_live_events_is_warm() -> None:
    """History published after the live stream began: the same past, learned 10 minutes late.

    Not equal by construction, unlike the envelope before the live stream: the CPU histogram
    gets the same weights in another order of addition, and each pod's memory gets one more
    peak (its live samples opened a window of their own before the past came, where the
    uninterrupted stream has one window across; scaling.own.LEARNED_POD).  Here every
    recommendation after the envelope is the uninterrupted stream's all the same."""
    past, now = history(3), live(LIVE, 20)
    at = LIVE + 600
    late = [*now[:11], *envelope(past, at), *now[11:]]
    assert [e["ts"] for e in late] == sorted(e["ts"] for e in late)
    _, whole = run(past + now, hvpa())
    _, warmed = run(late, hvpa())
    after = [e["ts"] for k, e in warmed if k == "vpa" and e["ts"] > at]
    assert after == [LIVE + 60.0 * m for m in range(11, 20)]
    assert [own_vpa(warmed, t) for t in after] == [own_vpa(whole, t) for t in after]
    assert own_vpa(warmed, after[0]) == {
        "target": {"cpu": "716m", "memory": "548861636"},
        "lower_bound": {"cpu": "475m", "memory": "262144k"},
        "upper_bound": {"cpu": "1390m", "memory": "999980788"},
        "uncapped_target": {"cpu": "716m", "memory": "548861636"},
    }


def test_past_samples_the_live_stream_already_gave_are_not_learned_twice() -> None:
    now = live(LIVE, 20)
    engine, _ = run(now, hvpa())
    counts = {c: s.total_samples_count for c, s in engine.states[KEY].vpa_live.items()}  # type: ignore[union-attr]
    overlap = [e for e in now if e["type"] == "metric" and e["ts"] < LIVE + 600]  # imported up to "now"
    said = learned([x for e in envelope(history(1) + overlap, LIVE + 1200, LIVE + 600) for x in engine.process(e)])
    past = sum(len(e["samples"]) for e in history(1) if e["type"] == "metric")
    assert {c: s.total_samples_count for c, s in engine.states[KEY].vpa_live.items()} == {  # type: ignore[union-attr]
        c: n + past for c, n in counts.items()
    }
    # and the audit says which were skipped, and why: at or after the first live sample
    assert [(d["samples"], d["skipped"], d["live_from"], d["envelopes"]) for d in said] == [
        (past, {"live": 2 * 10, "taught": 0}, LIVE, 1)
    ]


# --- Tortoise's replica slots --------------------------------------------------------------------


def hist_of(engine: Engine) -> ReplicaHistory:
    return ReplicaHistory.from_dict(engine.states[KEY].memory["Tortoise"]["hist"])


def past_peaks(h: ReplicaHistory) -> dict[float, int | None]:
    """The peak of each hour of the week before LIVE, as Tortoise's history holds it."""
    return {LIVE - 7 * DAY + k * H: h.peak(LIVE - 7 * DAY + k * H) for k in range(7 * 24)}


@pytest.mark.parametrize(
    "order",
    [
        "envelope policy live",
        "policy envelope live",
        "policy live envelope live",
        "live envelope policy live",
        "live policy envelope live",
    ],
)
def test_tortoise_learns_its_slots_from_an_envelope_before_or_after_its_policy_and_live_events(order: str) -> None:
    past = history(7, step=900.0)
    env = envelope(past, LIVE + 1200)
    policy = {"type": "policy", "ts": LIVE, "workload": dict(WL), "policy": tortoise()}
    parts = iter([live(LIVE, 10), [usage(LIVE + 60.0 * m) for m in range(10, 20)]])
    stream: list[dict[str, Any]] = []
    for part in order.split():
        if part == "envelope":
            stream += [{**e, "ts": max(LIVE + 1200, stream[-1]["ts"] if stream else 0.0)} for e in env]
        elif part == "policy":
            stream.append({**policy, "ts": stream[-1]["ts"] if stream else LIVE})
        else:
            stream += next(parts)
    stream.append(usage(LIVE + 3 * H))  # a tick after everything
    engine = Engine(Settings(cluster="c1"))
    engine.run(sorted(stream, key=lambda e: e["ts"]))
    peaks = past_peaks(hist_of(engine))
    expected = {t: 4 if 8 <= int(t // H) % 24 < 20 else 2 for t in peaks}
    assert peaks == expected


def test_learned_replicas_are_peaks_per_quarter_hour_in_a_four_week_ring() -> None:
    state = WorkloadState(KEY)
    settings = Settings(cluster="c1")
    from scaling.learn import learn

    past = [spec(LIVE - 40 * DAY, 3), spec(LIVE - 40 * DAY + 600, 5), spec(LIVE - H + 60, 7)]
    learn(state, decode_event(envelopes(past, LIVE, LIVE)[0]), settings)  # type: ignore[arg-type]
    peaks = replica_peaks(state.learned)
    assert len(peaks) == 4 * 7 * 96
    assert peaks[0] == (LIVE - 28 * DAY + SLOT, 5)  # four weeks back from the newest slot
    assert peaks[-5:] == [(LIVE - H, 7), (LIVE - H + SLOT, 7), (LIVE - H + 2 * SLOT, 7), (LIVE - SLOT, 7), (LIVE, 7)]
    assert peaks[-6] == (LIVE - H - SLOT, 5)


# --- determinism ---------------------------------------------------------------------------------


def stream_with_envelopes() -> list[dict[str, Any]]:
    past = history(2, step=600.0)
    now = live(LIVE, 30)
    envs = envelopes(past, LIVE + 300, LIVE, max_bytes=8 * 1024)
    return sorted([*now, *envs], key=lambda e: e["ts"])


def run_bytes(events: list[dict[str, Any]], policy: dict[str, Any], restore_at: int | None = None) -> bytes:
    engine = Engine(Settings(cluster="c1"))
    engine.add_policy(policy)
    out: list[bytes] = []
    for i, e in enumerate(events):
        if i == restore_at:
            engine.states = {
                k: WorkloadState.from_dict(orjson.loads(orjson.dumps(s.to_dict()))) for k, s in engine.states.items()
            }
        out.extend(orjson.dumps(x) for _, x in engine.process(e))
    out.extend(orjson.dumps(x) for _, x in engine.flush())
    return b"\n".join(out)


@pytest.mark.parametrize("policy", [hvpa, tortoise])
def test_a_stream_with_envelopes_replays_byte_identically_across_runs_and_state_restores(policy: Any) -> None:
    events = stream_with_envelopes()
    assert sum(e["type"] == "history" for e in events) > 3
    first = run_bytes(events, policy())
    assert first.count(b'"dev.tandem.') > 0
    assert run_bytes(events, policy()) == first
    for cut in range(len(events)):
        assert run_bytes(events, policy(), restore_at=cut) == first, cut


# --- the schema ----------------------------------------------------------------------------------


def test_the_example_envelope_matches_its_schema_and_decodes_and_the_schema_refuses_what_the_decoder_does() -> None:
    import jsonschema

    import schemas
    from schemas.codec import decode

    path = Path(schemas.__file__).parent / "examples" / "history-envelope.json"
    example = orjson.loads(path.read_bytes())
    validator = schemas.validator("history")
    validator.validate(example)
    raw, event = decode(path.read_bytes())
    assert raw == example and event.type == "history" and len(event.events) == 3  # type: ignore[union-attr]
    hpa = ev("hpa", example["until"], desired_replicas=2)
    for change in ({"events": [hpa]}, {"until": "soon"}, {"event": []}):
        bad = {**example, **change}
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)
        with pytest.raises(InvalidEvent):
            decode_event(bad)


def test_the_same_history_published_twice_is_learned_once() -> None:
    """The second copy changes no decision nor recommendation; its learned events say it taught
    nothing, every sample known from the first copy."""
    past, now = history(2), live(LIVE, 10)
    once = envelopes(past, LIVE + 300, LIVE, max_bytes=32 * 1024)
    first = run_bytes(sorted([*now, *once], key=lambda e: e["ts"]), hvpa())
    twice = run_bytes(sorted([*now, *once, *once], key=lambda e: e["ts"]), hvpa())
    lines = [orjson.loads(x) for x in twice.split(b"\n")]
    assert b"\n".join(orjson.dumps(x) for x in lines if x.get("type") != LEARNED) == b"\n".join(
        x for x in first.split(b"\n") if b'"dev.tandem.learned.v1"' not in x
    )
    said = [x["data"] for x in lines if x.get("type") == LEARNED]
    n = len(once)
    assert n == 5 and [d["envelopes"] for d in said] == list(range(1, 2 * n + 1))
    samples = [len(e["samples"]) for x in once for e in x["events"] if e["type"] == "metric"]
    assert sum(d["samples"] for d in said[:n]) == sum(samples) == 1152
    assert [(d["samples"], d["replica_slots"], d["skipped"]["live"]) for d in said[n:]] == [(0, 0, 0)] * n
    assert [d["skipped"]["taught"] for d in said[n:]] == [d["samples"] for d in said[:n]]
