"""The machine-readable contract (``schemas/``) against the decoder and the core.

Every example in ``schemas/examples`` must pass both the JSON Schema and the decoder; every example
in ``schemas/examples/invalid`` must be refused by both, the decoder naming the expected field with
the expected reason.  A decision made by the core must pass ``decision.schema.json``.  The decoder's
edge cases and ``scaling.quantity`` are tested here too, since the schemas restate their rules.
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import schemas
from scaling.cloudevents import APPLIED, APPLY_FAILED, BLOCKED, DECISION, event_id
from scaling.engine import Engine
from scaling.errors import InvalidEvent
from scaling.events import (
    EVENT_TYPES,
    HpaEvent,
    MetricEvent,
    PolicyEvent,
    VpaEvent,
    WorkloadEvent,
    decode_event,
)
from scaling.policies import parse_policy, policy_target
from scaling.quantity import format_cpu, format_memory, format_quantity, parse_duration, parse_quantity
from scaling.vocabulary import CLOUDEVENT_TYPES, LATE, LEARNED, TIE_ORDER
from schemas.codec import decode

EXAMPLES = Path(schemas.__file__).parent / "examples"
INVALID = EXAMPLES / "invalid"
INPUT_TYPES = EVENT_TYPES
WL = {"cluster": "c1", "namespace": "shop", "kind": "Deployment", "name": "web"}
T0 = 1762250400.0


def _examples(prefixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.json") if p.name.split("-", 1)[0] in prefixes)


INPUT_EXAMPLES = _examples(INPUT_TYPES)
DECISION_EXAMPLES = _examples(("decision",))
INVALID_EXAMPLES = sorted(INVALID.glob("*.json"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _schema_type(path: Path) -> str:
    return path.name.split("-", 1)[0]


def _ev(type_: str, ts: float, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "ts": ts, "workload": dict(WL), **fields}


def _resources(section: str, resource: str, value: Any) -> dict[str, Any]:
    """A workload event whose container ``a`` has ``value`` as its ``section``'s ``resource``."""
    return _ev("workload", T0, replicas=1, containers={"a": {section: {resource: value}}})


def _decode_error(event: Any) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as info:
        decode(orjson.dumps(event))
    return info.value


# --- the schemas themselves -------------------------------------------------------------------


def test_every_schema_is_valid_draft_2020_12_and_identified_by_its_id() -> None:
    from jsonschema import Draft202012Validator

    names = schemas.schema_names()
    assert set(names) >= {*INPUT_TYPES, "event", "decision", "common"}
    for name in names:
        schema = schemas.load_schema(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == f"https://tandem.dev/schemas/{name}.schema.json"
        assert schemas.load_schema(f"{name}.schema.json") == schema


def test_load_schema_returns_a_fresh_copy_each_time() -> None:
    first = schemas.load_schema("metric")
    first["title"] = "changed"
    assert schemas.load_schema("metric")["title"] != "changed"


def test_schemas_cross_reference_each_other_by_id_only() -> None:
    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    yield value
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for item in node:
                yield from refs(item)

    for name in schemas.schema_names():
        for ref in refs(schemas.load_schema(name)):
            assert ref.startswith(("#", schemas.BASE_URI)), (name, ref)
            if ref.startswith(schemas.BASE_URI):
                target = ref[len(schemas.BASE_URI) :].split("#", 1)[0]
                assert target.removesuffix(".schema.json") in schemas.schema_names(), (name, ref)


def test_event_schema_lists_exactly_the_decoders_event_types() -> None:
    schema = schemas.load_schema("event")
    assert tuple(schema["properties"]["type"]["enum"]) == EVENT_TYPES
    assert len(schema["oneOf"]) == len(EVENT_TYPES)
    common = schemas.load_schema("common")["$defs"]["eventCommon"]
    assert tuple(common["properties"]["type"]["enum"]) == EVENT_TYPES


def test_decision_schema_lists_exactly_the_vocabularys_cloudevent_types() -> None:
    schema = schemas.load_schema("decision")
    assert tuple(schema["properties"]["type"]["enum"]) == tuple(CLOUDEVENT_TYPES.values())
    assert tuple(CLOUDEVENT_TYPES.values()) == (DECISION, BLOCKED, APPLIED, APPLY_FAILED, LATE, LEARNED)


def test_the_merges_tie_order_ranks_every_event_type_once() -> None:
    assert sorted(TIE_ORDER) == sorted(EVENT_TYPES) and len(set(TIE_ORDER)) == len(EVENT_TYPES)


def test_blocked_reasons_in_the_decision_schema_are_the_contracts_names() -> None:
    reasons = schemas.load_schema("decision")["$defs"]["blocked"]["properties"]["reason"]["enum"]
    assert reasons == [
        "Weight",
        "UpdatePolicy",
        "StabilizationWindow",
        "MaintenanceWindow",
        "MinChange",
        "ParadoxicalScaling",
        "Cooldown",
        "MinFactor",
        "Bounds",
        "DryRun",
        "GatheringData",
        "AmbiguousPolicy",
    ]


def test_examples_cover_every_event_shape_named_by_the_contract() -> None:
    names = {p.stem for p in EXAMPLES.glob("*.json")}
    for required in (
        "metric-container-sample",
        "metric-series-workload",
        "metric-series-pod",
        "metric-batch",
        "workload-pods",
        "hpa-full",
        "vpa-bounds-conditions",
        "policy-hvpa-released",
        "policy-hvpa-seed",
        "policy-hvpa-scale-intervals",
        "policy-tortoise",
        "policy-custom-hpa",
        "policy-delete",
        "decision-hvpa-released",
        "decision-blocked",
        "decision-applied",
        "decision-apply-failed",
        "decision-learned-history",
    ):
        assert required in names
    for type_ in INPUT_TYPES:
        assert len([p for p in INPUT_EXAMPLES if _schema_type(p) == type_]) >= 2, type_
    types = {_load(p)["type"] for p in DECISION_EXAMPLES}
    assert types == {DECISION, BLOCKED, APPLIED, APPLY_FAILED, LEARNED}
    assert len(INVALID_EXAMPLES) >= 20


# --- valid input examples ---------------------------------------------------------------------


@pytest.mark.parametrize("path", INPUT_EXAMPLES, ids=_ids(INPUT_EXAMPLES))
def test_valid_input_example_matches_its_schema_and_the_event_schema(path: Path) -> None:
    event = _load(path)
    assert event["type"] == _schema_type(path)
    schemas.validator(_schema_type(path)).validate(event)
    schemas.validator("event").validate(event)


_TYPED = {"metric": MetricEvent, "workload": WorkloadEvent, "hpa": HpaEvent, "vpa": VpaEvent, "policy": PolicyEvent}


@pytest.mark.parametrize("path", INPUT_EXAMPLES, ids=_ids(INPUT_EXAMPLES))
def test_valid_input_example_decodes_through_the_codec(path: Path) -> None:
    raw, event = decode(path.read_bytes())
    assert raw == _load(path)
    assert isinstance(event, _TYPED[raw["type"]])
    assert event.ts == raw["ts"]
    assert event.workload.as_dict() == {k: raw["workload"][k] for k in ("cluster", "namespace", "kind", "name")}
    if isinstance(event, MetricEvent):
        batch = raw.get("samples")
        assert len(event.samples) + len(event.series) == (len(batch) if batch is not None else 1)


_POLICY_MODULES = {
    ("Tortoise", "autoscaling.mercari.com"): "scaling.policies.tortoise",
    ("Hvpa", "autoscaling.gardener.cloud"): "scaling.policies.hvpa.v2",
}
POLICY_EXAMPLES = [p for p in INPUT_EXAMPLES if _schema_type(p) == "policy"]


@pytest.mark.parametrize("path", POLICY_EXAMPLES, ids=_ids(POLICY_EXAMPLES))
def test_policy_example_parses_as_the_policy_of_its_events_workload(path: Path) -> None:
    raw, event = decode(path.read_bytes())
    assert isinstance(event, PolicyEvent)
    manifest = event.manifest
    if manifest is None:
        assert raw["policy"] is None  # a deletion: nothing to parse
        return
    module = _POLICY_MODULES.get((manifest["kind"], manifest["apiVersion"].split("/", 1)[0]))
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.xfail(f"{module} (policy kind {manifest['kind']} {manifest['apiVersion']}) is not there yet: {exc}")
    ref = policy_target(manifest, event.workload.cluster)
    assert ref == event.workload
    policy = parse_policy(manifest, ref)
    assert policy.kind == manifest["kind"]
    assert policy.workload == event.workload


# --- invalid input examples -------------------------------------------------------------------


def _field_of(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_fields(errors: Any) -> set[str]:
    """Every field a schema error (or one of its sub-errors) points at, in the decoder's notation."""
    fields: set[str] = set()
    for error in errors:
        base = _field_of(error.absolute_path)
        fields.add(base)
        if error.validator in ("required", "unevaluatedProperties", "additionalProperties"):
            # 'x' is a required property / Unevaluated properties are not allowed ('x' was unexpected)
            named = error.message.split("'")[1]
            fields.add(f"{base}.{named}" if base else named)
        fields |= _schema_fields(error.context)
    return fields


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=_ids(INVALID_EXAMPLES))
def test_invalid_example_is_refused_by_the_schema_at_the_expected_field(path: Path) -> None:
    case = _load(path)
    assert set(case) == {"event", "field", "why"}, "an invalid example is {event, field, why}"
    event = case["event"]
    errors = list(schemas.validator("event").iter_errors(event))
    assert errors, "the event schema accepts it"
    type_ = event.get("type") if isinstance(event, dict) else None
    if type_ in INPUT_TYPES:
        errors = list(schemas.validator(type_).iter_errors(event))
        assert errors, f"{type_}.schema.json accepts it"
    assert case["field"] in _schema_fields(errors), [e.message for e in errors]


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=_ids(INVALID_EXAMPLES))
def test_invalid_example_is_refused_by_the_decoder_naming_field_and_reason(path: Path) -> None:
    case = _load(path)
    data = orjson.dumps(case["event"])
    with pytest.raises(InvalidEvent) as info:
        raw, event = decode(data)
        # A policy manifest is parsed when the event is ingested, as the worker and the replay do.
        Engine().process(raw, event)
    assert info.value.field == case["field"]
    assert case["why"] in info.value.reason


# --- decisions --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", DECISION_EXAMPLES, ids=_ids(DECISION_EXAMPLES))
def test_decision_example_matches_the_decision_schema(path: Path) -> None:
    schemas.validator("decision").validate(_load(path))


@pytest.mark.parametrize("path", DECISION_EXAMPLES, ids=_ids(DECISION_EXAMPLES))
def test_decision_example_has_the_deterministic_id_of_its_data(path: Path) -> None:
    event = _load(path)
    if event["type"] in (DECISION, BLOCKED, LEARNED):
        assert event["id"] == event_id(event["type"], event["data"])
    assert event["subject"] == "/".join(event["data"]["workload"][k] for k in ("cluster", "namespace", "kind", "name"))
    assert event["source"] == f"/tandem/{event['data']['workload']['cluster']}"


def _decision_example(name: str) -> dict[str, Any]:
    return copy.deepcopy(_load(EXAMPLES / f"{name}.json"))


def _mutations() -> Iterator[tuple[str, dict[str, Any]]]:
    e = _decision_example("decision-hvpa-released")
    e["data"]["blocked"][0]["reason"] = "TooSoon"
    yield "unknown blocked reason", e
    e = _decision_example("decision-hvpa-released")
    e["data"]["blocked"][0]["target"] = "app/cpu/requests"
    yield "blocked target that is neither replicas, container/resource nor hpa/field", e
    e = _decision_example("decision-hvpa-released")
    for key in ("replicas", "containers", "hpa"):
        e["data"].pop(key, None)
    yield "decision that changes nothing", e
    e = _decision_example("decision-blocked")
    e["data"]["replicas"] = {"from": 2, "to": 3}
    yield "blocked event that changes replicas", e
    e = _decision_example("decision-blocked")
    e["data"]["blocked"] = []
    yield "blocked event without a blocked change", e
    e = _decision_example("decision-hvpa-released")
    e["type"] = "dev.tandem.decision.v2"
    yield "unknown CloudEvent type", e
    e = _decision_example("decision-hvpa-released")
    e["specversion"] = "0.3"
    yield "other CloudEvents version", e
    e = _decision_example("decision-hvpa-released")
    e["source"] = "tandem"
    yield "source that is not /tandem/<cluster>", e
    e = _decision_example("decision-hvpa-released")
    e["subject"] = "web"
    yield "subject that is not a workload key", e
    e = _decision_example("decision-hvpa-released")
    e["time"] = 1762250430.0
    yield "time as a number", e
    e = _decision_example("decision-hvpa-released")
    e["data"]["containers"]["app"]["requests"]["memory"]["to"] = "-1G"
    yield "negative quantity", e
    e = _decision_example("decision-hvpa-released")
    del e["data"]["containers"]["app"]["requests"]["memory"]["from"]
    yield "change without from", e
    e = _decision_example("decision-hvpa-released")
    e["data"]["replicas"]["to"] = 2.5
    yield "fractional replicas", e
    e = _decision_example("decision-hvpa-released")
    del e["data"]["policy"]["mode"]
    yield "policy without mode", e
    e = _decision_example("decision-hvpa-released")
    e["data"]["dry_run"] = "false"
    yield "dry_run as a string", e
    e = _decision_example("decision-tortoise-metrics-removed")
    e["data"]["hpa"]["metrics"]["removed"] = []
    yield "empty list of removed HPA metrics", e
    e = _decision_example("decision-tortoise-metrics-removed")
    del e["data"]["hpa"]["metrics"]["removed"][0]["container"]
    yield "removed ContainerResource metric without its container", e
    e = _decision_example("decision-tortoise-metrics-removed")
    e["data"]["hpa"]["metrics"]["removed"][1]["container"] = "app"
    yield "removed External metric with a container", e
    e = _decision_example("decision-tortoise-metrics-removed")
    e["data"]["hpa"]["metrics"]["removed"][2]["type"] = "Custom"
    yield "removed metric of an unknown type", e
    e = _decision_example("decision-applied")
    del e["data"]["decision"]
    yield "applier result without the decision id", e
    e = _decision_example("decision-learned-history")
    del e["data"]["skipped"]["taught"]
    yield "learned history without the samples skipped as taught", e
    e = _decision_example("decision-learned-history")
    e["data"]["samples"] = -1
    yield "learned history with a negative sample count", e
    e = _decision_example("decision-learned-history")
    e["data"]["envelopes"] = 0
    yield "learned history as the workload's 0th envelope", e


MUTATIONS = list(_mutations())


@pytest.mark.parametrize("event", [m[1] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_decision_schema_refuses_an_event_that_breaks_the_contract(event: dict[str, Any]) -> None:
    assert list(schemas.validator("decision").iter_errors(event))


def test_decision_schema_allows_unknown_fields() -> None:
    e = _decision_example("decision-hvpa-released")
    e["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    e["data"]["explain"] = {"weights": [40, 60]}
    e["data"]["blocked"][0]["detail"] = "below minChange"
    schemas.validator("decision").validate(e)


def test_decisions_made_by_the_core_match_the_decision_schema() -> None:
    policy = _load(EXAMPLES / "policy-hvpa-released.json")
    events = [
        policy,
        _ev(
            "workload",
            T0,
            replicas=2,
            containers={"app": {"requests": {"cpu": "300m", "memory": "200M"}, "limits": {"cpu": "2", "memory": "5G"}}},
        ),
        _ev(
            "hpa",
            T0 + 30,
            desired_replicas=3,
            max_replicas=3,
            conditions=[{"type": "ScalingLimited", "status": "True"}],
        ),
        _ev("vpa", T0 + 30, containers={"app": {"target": {"cpu": "500m", "memory": "3G"}}}),
        # After the scale-up, a bigger recommendation inside the 3m stabilization window is blocked.
        _ev("vpa", T0 + 60, containers={"app": {"target": {"cpu": "2", "memory": "6G"}}}),
        # History learned at the present: said in the audit as what it taught.
        _ev(
            "history",
            T0 + 60,
            until=T0 - 60,
            events=[_ev("metric", T0 - 120, pod="web-1", container="app", cpu=0.4, memory=300_000_000)],
        ),
    ]
    audit = [e for kind, e in Engine().run(events) if kind == "audit"]
    assert {DECISION, BLOCKED, LEARNED} <= {e["type"] for e in audit}
    validator = schemas.validator("decision")
    for event in audit:
        validator.validate(orjson.loads(orjson.dumps(event)))  # as written to the audit topic
    assert audit[0]["data"]["replicas"] == {"from": 2, "to": 3}  # reference vector A1


# --- decoder edge cases -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b'{"type": "metric", "ts": 17622504',
        b'{"type": "hpa", "ts": 1, "workload": {',
        b"",
        b"not json",
        b"{'type': 'hpa'}",
    ],
    ids=["truncated number", "truncated object", "empty", "bare word", "single quotes"],
)
def test_decoder_refuses_malformed_json_and_says_where(data: bytes) -> None:
    with pytest.raises(InvalidEvent) as info:
        decode(data)
    assert info.value.field == ""
    assert "not valid JSON" in info.value.reason
    assert "at char" in info.value.reason


@pytest.mark.parametrize(
    ("event", "field", "why"),
    [
        (_ev("workload", "1762250400", replicas=2, containers={}), "ts", "expected a number, got str"),
        (_ev("workload", True, replicas=2, containers={}), "ts", "expected a number, got bool"),
        (_ev("workload", T0, replicas="2", containers={}), "replicas", "expected an integer, got str"),
        (_ev("workload", T0, replicas=2, containers="app"), "containers", "expected an object, got str"),
        (_ev("metric", T0, pod="p", container="app", cpu=True), "cpu", "expected a quantity, got a boolean"),
        (_ev("metric", T0, pod="p", container="app", memory=[1]), "memory", "expected a quantity string or number"),
        (_ev("metric", T0, pod=7, container="app", cpu=0.1), "pod", "expected a non-empty string, got int"),
        (_ev("metric", T0, series="q", value=None), "value", "expected a number, got NoneType"),
        (_ev("hpa", T0, desired_replicas=3, current_replicas="3"), "current_replicas", "expected an integer"),
        (_ev("hpa", T0, desired_replicas=3, conditions="ScalingLimited"), "conditions", "expected a list"),
        (_ev("vpa", T0, containers={"app": {"target": {"cpu": {"value": "1"}}}}), "containers.app.target.cpu", "dict"),
        (
            _ev("workload", T0, replicas=1, containers={}, pods=[{"name": "p", "started": "now"}]),
            "pods[0].started",
            "now",
        ),
        ({"type": "workload", "ts": T0, "workload": ["c1", "shop"]}, "workload", "expected an object"),
    ],
)
def test_decoder_refuses_wrong_types_naming_the_field(event: dict[str, Any], field: str, why: str) -> None:
    error = _decode_error(event)
    assert error.field == field
    assert why in error.reason


@pytest.mark.parametrize("type_", ["metrics", "Metric", "deployment", "", 5, None])
def test_decoder_refuses_an_unknown_event_type(type_: Any) -> None:
    error = _decode_error(_ev("metric", T0, pod="p", container="app", cpu=0.1) | {"type": type_})
    assert error.field == "type"
    assert "unknown event type" in error.reason
    assert "metric, workload, hpa, vpa, policy" in error.reason


def test_decoder_refuses_a_json_value_that_is_not_an_object() -> None:
    for value in ([], "metric", 3, None):
        error = _decode_error(value)
        assert error.field == ""
        assert "an event must be a JSON object" in error.reason


@pytest.mark.parametrize(
    ("event", "field", "why"),
    [
        (_ev("metric", T0, pod="p", container="app", cpu=-0.001), "cpu", "usage must be >= 0"),
        (_ev("metric", T0, pod="p", container="app", memory="-5Mi"), "memory", "is negative"),
        (_ev("metric", T0, pod="p", container="app", cpu=100_001), "cpu", "is absurd for cpu"),
        (_ev("metric", T0, pod="p", container="app", memory="2Pi"), "memory", "is absurd for memory"),
        (_resources("requests", "cpu", -1), "containers.a.requests.cpu", "is negative"),
        (_resources("limits", "cpu", "100001"), "containers.a.limits.cpu", "100001 is absurd for cpu"),
        (_resources("limits", "memory", "2Pi"), "containers.a.limits.memory", "2Pi is absurd for memory"),
        (_resources("limits", "memory", 2**51), "containers.a.limits.memory", "is absurd for memory"),
        (_resources("requests", "memory", "9e30"), "containers.a.requests.memory", "is out of range"),
        (_resources("requests", "cpu", "1e31"), "containers.a.requests.cpu", "exponent out of range"),
        (_ev("vpa", T0, containers={"a": {"target": {"memory": "-1"}}}), "containers.a.target.memory", "is negative"),
        (_ev("vpa", T0, containers={"a": {"target": {"cpu": 1e9}}}), "containers.a.target.cpu", "is absurd for cpu"),
        (_ev("workload", T0, replicas=1_000_001, containers={}), "replicas", "is absurd (more than 1000000)"),
        (_ev("hpa", T0, desired_replicas=-3), "desired_replicas", "must be >= 0"),
        (_ev("workload", 1e12, replicas=1, containers={}), "ts", "is not Unix epoch seconds"),
    ],
)
def test_decoder_refuses_negative_or_absurd_values(event: dict[str, Any], field: str, why: str) -> None:
    error = _decode_error(event)
    assert error.field == field
    assert why in error.reason


def test_decoder_refuses_hpa_min_replicas_above_max_replicas() -> None:
    # A rule the schema cannot state (it compares two fields).
    error = _decode_error(_ev("hpa", T0, desired_replicas=3, min_replicas=5, max_replicas=3))
    assert (error.field, error.reason) == ("min_replicas", "5 is above max_replicas 3")


def test_decoder_refuses_non_finite_numbers_in_decoded_values() -> None:
    for value in (float("inf"), float("nan")):
        with pytest.raises(InvalidEvent) as info:
            decode_event(_ev("metric", T0, series="q", value=value))
        assert info.value.field == "value"
        assert "not finite" in info.value.reason


def test_decoder_treats_null_optionals_as_absent() -> None:
    raw = _ev("hpa", T0, desired_replicas=3, current_replicas=None, conditions=None, name=None)
    event = decode_event(raw)
    assert isinstance(event, HpaEvent)
    assert (event.desired_replicas, event.current_replicas, event.conditions, event.name) == (3, None, (), None)
    schemas.validator("hpa").validate(raw)


@pytest.mark.parametrize(
    ("extra", "field", "why"),
    [
        ({"desired_replica": 3}, "desired_replica", "unknown field (did you mean desired_replicas?)"),
        ({"annotations": {"x": 1}}, "annotations", "unknown field"),
        ({"MIN_REPLICAS": 1}, "MIN_REPLICAS", "unknown field (did you mean min_replicas?)"),
    ],
)
def test_decoder_refuses_an_unknown_field_naming_the_closest_known_one(
    extra: dict[str, Any], field: str, why: str
) -> None:
    raw = _ev("hpa", T0, desired_replicas=3, **extra)
    with pytest.raises(InvalidEvent) as info:
        decode_event(raw)
    assert (info.value.field, info.value.reason) == (field, why)
    assert list(schemas.validator("hpa").iter_errors(raw)), "the schema refuses it too"


def test_a_container_sample_with_an_unknown_field_takes_the_full_decoder_and_is_refused() -> None:
    raw = _ev(
        "metric",
        T0,
        samples=[{"pod": "p", "container": "c", "cpu": 0.5}, {"pod": "p", "container": "d", "cpu": 1, "oomed": True}],
    )
    with pytest.raises(InvalidEvent) as info:
        decode_event(raw)
    assert (info.value.field, info.value.reason) == ("samples[1].oomed", "unknown field (did you mean oom?)")


def test_decoder_keeps_integral_floats_as_integers_and_quantities_exact() -> None:
    event = decode_event(
        _ev("workload", T0, replicas=3.0, containers={"app": {"requests": {"cpu": 0.1, "memory": "1.1Gi"}}})
    )
    assert isinstance(event, WorkloadEvent)
    assert event.replicas == 3 and isinstance(event.replicas, int)
    req = event.containers["app"].requests
    assert (req["cpu"].milli, req["cpu"].text) == (100, "0.1")
    assert req["memory"].milli == 1181116006400  # 1.1 * 2**30 bytes, rounded up to the byte, in milli


# --- scaling.quantity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("250m", 250),
        ("1.5Gi", int(1.5 * 2**30 * 1000)),
        ("2e3", 2_000_000),
        ("0.1", 100),
        ("1.5m", 2),
        ("2", 2000),
        ("200M", 200_000_000_000),
        ("1320000k", 1_320_000_000_000),
        ("+1Ki", 1_024_000),
        (".5", 500),
        ("1P", 10**18),
        ("2Mi", 2 * 2**20 * 1000),
        ("5E-3", 5),
        ("100n", 1),
        ("0", 0),
        (0.25, 250),
        (3, 3000),
        (314572800, 314_572_800_000),
    ],
)
def test_parse_quantity_gives_milli_units_rounded_up(text: Any, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-1", "is negative"),
        ("-250m", "is negative"),
        (-0.5, "is negative"),
        ("250 m", "is not a Kubernetes quantity"),
        ("1.5GB", "is not a Kubernetes quantity"),
        ("", "is not a Kubernetes quantity"),
        ("1e", "is not a Kubernetes quantity"),
        ("1e31", "exponent out of range"),
        ("9Ei", "is out of range"),
        (True, "got a boolean"),
        (None, "expected a quantity string or number"),
        (float("inf"), "is not finite"),
    ],
)
def test_parse_quantity_rejects_negative_malformed_and_out_of_range_values(value: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_quantity(value)


@pytest.mark.parametrize(
    "text", ["250m", "1.5Gi", "2e3", "0.1", "200M", "1320000k", "+1Ki", ".5", "5E-3", "9T", "1e-30", "007"]
)
def test_quantity_pattern_of_the_schema_accepts_what_parse_quantity_accepts(text: str) -> None:
    parse_quantity(text)
    quantity = {"$ref": "https://tandem.dev/schemas/common.schema.json#/$defs/quantityString"}
    _validate_against(quantity, text)


@pytest.mark.parametrize("text", ["-1", "250 m", "1.5GB", "", "1e", "1e31", "m", "1.2.3", "0x10", "1Kb"])
def test_quantity_pattern_of_the_schema_refuses_what_parse_quantity_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)
    quantity = {"$ref": "https://tandem.dev/schemas/common.schema.json#/$defs/quantityString"}
    with pytest.raises(Exception, match="does not match"):
        _validate_against(quantity, text)


def _validate_against(schema: dict[str, Any], instance: Any) -> None:
    from jsonschema import Draft202012Validator

    Draft202012Validator(schema, registry=schemas.registry()).validate(instance)


@pytest.mark.parametrize(
    ("milli", "text"),
    [(2000, "2"), (2500, "2500m"), (250, "250m"), (0, "0"), (1, "1m"), (100_000_000, "100000")],
)
def test_format_cpu_writes_whole_cores_or_millicores(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("milli", "text"),
    [
        (1_320_000_000_000, "1320000k"),
        (3_000_000_000_000, "3000000k"),
        (1_000_000, "1k"),
        (1_500_000, "1500"),  # not whole kB: exact bytes
        (1_500_001, "1501"),  # a part of a byte rounds up to the byte
        (1, "1"),
        (0, "0"),
        (int(1.5 * 2**30 * 1000), "1610612736"),
    ],
)
def test_format_memory_writes_whole_bytes_in_kilobytes_when_it_can(milli: int, text: str) -> None:
    assert format_memory(milli) == text
    assert parse_quantity(text) >= milli


def test_format_quantity_formats_cpu_as_cpu_and_everything_else_as_memory() -> None:
    assert format_quantity("cpu", 380) == "380m"
    assert format_quantity("memory", 2_376_000_000_000) == "2376000k"
    assert format_quantity("ephemeral-storage", 1_000_000) == "1k"
    assert format_quantity("memory", 4 * 2**30 * 1000) == "4294967296"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1h30m", 5400.0),
        ("3m", 180.0),
        ("90s", 90.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("2m30s", 150.0),
        ("0", 0.0),
        (42, 42.0),
        (2.5, 2.5),
    ],
)
def test_parse_duration_reads_go_durations_and_plain_seconds(value: Any, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    "value", ["", "5", "1d", "abc", "-5m", "1h-30m", "m", "1 h", -1, float("inf"), True, None, [1]]
)
def test_parse_duration_rejects_what_go_would_not_parse(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)
