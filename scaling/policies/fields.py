"""Every field of every policy kind, declared once: the source of unknown-field errors and of the schemas.

A kind's manifest is described by a tree of :class:`Obj` (an object with known fields), :class:`Arr`
(a list of one shape), :class:`Map` (an object with free keys: labels, resource lists) and
:class:`Leaf` (a value whose type the kind's parser checks).  :func:`check_fields` walks a manifest
against its kind's tree and raises :class:`~scaling.errors.InvalidPolicy` for the first field the
kind does not have, with its full path and the closest known name.  ``schemas/generate.py``
writes ``schemas/policy.schema.json`` and the CRDs' structural ``openAPIV3Schema`` from the same
trees, so the API server refuses (under strict field validation) exactly what tandem refuses.

The trees are the union of the upstream types (gardener/hvpa-controller ``api/v1alpha1``,
mercari/tortoise ``api/v1beta3``, ``k8s.io/api/autoscaling/v2`` and ``v2beta1``, the VPA's
``autoscaling.k8s.io/v1``) and of the forms tandem reads on top (the HVPA proposal's seed form):
whatever upstream accepts is accepted.  Types are given where upstream fixes them.  Bounds
(``minimum``/``maximum``, ``enum``, ``pattern``) and cross-field rules (:class:`AtMost`: minReplicas
<= maxReplicas) are declared here for the values the kinds' parsers refuse: :func:`check_fields`
enforces them with the parsers' own words before a kind's parser runs, and the generator writes
them into the CRDs (``x-kubernetes-validations`` CEL for the rules), so that the API server refuses
an out-of-range value at ``kubectl apply`` and names the field, as tandem would.  A parser may be
stricter than its declaration (the seed form's fractional ``vpaWeight`` within the 0..100 of the
released form), never looser.  ``metadata`` and ``status`` stay open: the API server owns them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPolicy

__all__ = ["Arr", "AtMost", "Leaf", "Map", "Node", "Obj", "check_fields", "manifest_tree"]


@dataclass(frozen=True, slots=True)
class Leaf:
    #: ``string``, ``integer``, ``number``, ``boolean``, ``int-or-string`` (a quantity), ``any``.
    type: str
    description: str = ""
    #: The values upstream allows (its ``+kubebuilder:validation:Enum``), if it fixes them.
    enum: tuple[str, ...] = ()
    #: Inclusive bounds of a number (``integer``/``number``), where the parser has them.
    minimum: int | None = None
    maximum: int | None = None
    #: A regular expression a string must match (anchored; ECMA 262 and Python alike).
    pattern: str = ""


@dataclass(frozen=True, slots=True)
class AtMost:
    """A cross-field rule of an object: ``lower`` is at most ``upper`` when both are set
    (minReplicas <= maxReplicas); an ``x-kubernetes-validations`` CEL rule in the CRD."""

    lower: str
    upper: str

    @property
    def cel(self) -> str:
        lo, hi = self.lower, self.upper
        return f"!has(self.{lo}) || !has(self.{hi}) || self.{lo} <= self.{hi}"

    @property
    def message(self) -> str:
        return f"{self.upper} must not be below {self.lower}"


@dataclass(frozen=True, slots=True)
class Obj:
    fields: Mapping[str, Node]
    #: Any key is accepted (``metadata``, ``status``): the tree does not say what is inside.
    open: bool = False
    required: tuple[str, ...] = ()
    description: str = ""
    #: Keys match whatever their case (the seed form's ``MinAllowed``: ``scaling.policies.hvpa._ci_get``).
    fold: bool = False
    rules: tuple[AtMost, ...] = ()


@dataclass(frozen=True, slots=True)
class Arr:
    items: Node
    description: str = ""


@dataclass(frozen=True, slots=True)
class Map:
    """An object whose keys are free (label names, resource names) and whose values have one shape."""

    values: Node
    description: str = ""


Node = Leaf | Obj | Arr | Map

STR = Leaf("string")
INT = Leaf("integer")
NUM = Leaf("number")
BOOL = Leaf("boolean")
QTY = Leaf("int-or-string", "a Kubernetes quantity (500m, 2Gi) or a number")
ANY = Leaf("any")
#: A number, or a string holding one (Nanit's controller reads its values as text).
NUMERIC = Leaf("any", "a number, or a string holding one")
OPEN = Obj({}, open=True)


def _obj(description: str = "", required: tuple[str, ...] = (), rules: tuple[AtMost, ...] = (), **fields: Node) -> Obj:
    return Obj(fields, required=required, description=description, rules=rules)


#: An integer of at least 0, of at least 1 (replica counts: the HPA's ``minReplicas``/``maxReplicas``).
COUNT = Leaf("integer", minimum=0)
REPLICAS = Leaf("integer", minimum=1)
#: minReplicas <= maxReplicas (the HPA API's own validation; every kind's parser).
MIN_MAX = AtMost("minReplicas", "maxReplicas")
#: A Go ``time.Duration`` (``3m``, ``1h30m``, ``0``), as ``scaling.quantity.parse_duration`` reads it.
DURATION = Leaf(
    "string",
    "a duration (like '3m' or '1h30m')",
    pattern=r"^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|ms|s|m|h))+)$",
)


# --- shared Kubernetes types (k8s.io/api, k8s.io/apimachinery) ----------------------------------

LABEL_SELECTOR = _obj(
    matchLabels=Map(STR),
    matchExpressions=Arr(_obj(required=("key", "operator"), key=STR, operator=STR, values=Arr(STR))),
)
#: autoscaling/v2 CrossVersionObjectReference (``apiVersion`` optional).
TARGET_REF = _obj(required=("kind", "name"), apiVersion=STR, kind=STR, name=STR)
#: autoscaling/v2 MetricTarget, with v2beta1's object ``target`` (a CrossVersionObjectReference) merged in.
METRIC_TARGET = _obj(type=STR, value=QTY, averageValue=QTY, averageUtilization=INT, apiVersion=STR, kind=STR, name=STR)
METRIC_ID = _obj(name=STR, selector=LABEL_SELECTOR)
#: autoscaling/v2 MetricSpec and v2beta1's fields (HVPA's released API is on v2beta1).
METRIC_SPEC = _obj(
    required=("type",),
    type=STR,
    resource=_obj(name=STR, target=METRIC_TARGET, targetAverageUtilization=INT, targetAverageValue=QTY),
    containerResource=_obj(
        name=STR, container=STR, target=METRIC_TARGET, targetAverageUtilization=INT, targetAverageValue=QTY
    ),
    pods=_obj(metric=METRIC_ID, target=METRIC_TARGET, metricName=STR, targetAverageValue=QTY, selector=LABEL_SELECTOR),
    object=_obj(
        metric=METRIC_ID,
        target=METRIC_TARGET,
        describedObject=TARGET_REF,
        metricName=STR,
        targetValue=QTY,
        averageValue=QTY,
        selector=LABEL_SELECTOR,
    ),
    external=_obj(
        metric=METRIC_ID,
        target=METRIC_TARGET,
        metricName=STR,
        metricSelector=LABEL_SELECTOR,
        targetValue=QTY,
        targetAverageValue=QTY,
    ),
)
SCALING_RULES = _obj(
    stabilizationWindowSeconds=INT,
    selectPolicy=STR,
    policies=Arr(_obj(required=("type", "value", "periodSeconds"), type=STR, value=INT, periodSeconds=INT)),
    tolerance=QTY,
)
HPA_BEHAVIOR = _obj(scaleUp=SCALING_RULES, scaleDown=SCALING_RULES)
#: HorizontalPodAutoscalerSpec (v2; ``targetCPUUtilizationPercentage`` from v1).
HPA_SPEC = _obj(
    rules=(MIN_MAX,),
    scaleTargetRef=TARGET_REF,
    minReplicas=REPLICAS,
    maxReplicas=REPLICAS,
    metrics=Arr(METRIC_SPEC),
    behavior=HPA_BEHAVIOR,
    targetCPUUtilizationPercentage=Leaf("integer", minimum=1),
)
CONTAINER_POLICY = Obj(
    {
        "containerName": STR,
        "mode": STR,
        "minAllowed": Map(QTY),
        "maxAllowed": Map(QTY),
        "controlledResources": Arr(STR),
        "controlledValues": STR,
    },
    fold=True,
)
RESOURCE_POLICY = _obj(containerPolicies=Arr(CONTAINER_POLICY))
#: VerticalPodAutoscalerSpec (autoscaling.k8s.io/v1).
VPA_SPEC = _obj(
    targetRef=TARGET_REF,
    updatePolicy=_obj(
        updateMode=STR,
        minReplicas=INT,
        evictionRequirements=Arr(_obj(resources=Arr(STR), changeRequirement=STR)),
    ),
    resourcePolicy=RESOURCE_POLICY,
    recommenders=Arr(_obj(name=STR)),
)

# --- Gardener HVPA (api/v1alpha1/hvpa_types.go) ----------------------------------------------

CHANGE_PARAMS = _obj(value=STR, percentage=COUNT)
SCALE_PARAMS = _obj(cpu=CHANGE_PARAMS, memory=CHANGE_PARAMS, replicas=CHANGE_PARAMS)
#: HVPA's ``UpdateMode`` (``scaling.policies.hvpa.spec.UPDATE_MODES``).
UPDATE_POLICY = _obj(updateMode=Leaf("string", enum=("Auto", "Off", "MaintenanceWindow")))
SCALE_TYPE = _obj(updatePolicy=UPDATE_POLICY, minChange=SCALE_PARAMS, stabilizationDuration=DURATION)
HPA_TEMPLATE_SPEC = _obj(
    rules=(MIN_MAX,), minReplicas=REPLICAS, maxReplicas=REPLICAS, metrics=Arr(METRIC_SPEC), behavior=HPA_BEHAVIOR
)  # behavior: tandem reads it too (autoscaling/v2)
HVPA_HPA = _obj(
    selector=LABEL_SELECTOR,
    deploy=BOOL,
    scaleUp=SCALE_TYPE,
    scaleDown=SCALE_TYPE,
    template=_obj(metadata=OPEN, spec=HPA_TEMPLATE_SPEC),
)
HVPA_VPA = _obj(
    selector=LABEL_SELECTOR,
    deploy=BOOL,
    scaleUp=SCALE_TYPE,
    scaleDown=SCALE_TYPE,
    template=_obj(metadata=OPEN, spec=_obj(resourcePolicy=RESOURCE_POLICY)),
    limitsRequestsGapScaleParams=SCALE_PARAMS,
)
WEIGHT_INTERVAL = _obj(
    vpaWeight=Leaf(
        "number", "0..100 (released), or a fraction 0..1 (the proposal's seed form)", minimum=0, maximum=100
    ),
    startReplicaCount=COUNT,
    lastReplicaCount=COUNT,
)
HVPA_RELEASED: dict[str, Node] = dict(
    replicas=INT,
    hpa=HVPA_HPA,
    vpa=HVPA_VPA,
    weightBasedScalingIntervals=Arr(WEIGHT_INTERVAL),
    targetRef=TARGET_REF,
    maintenanceTimeWindow=_obj(required=("begin", "end"), begin=STR, end=STR),
)
_STAGES = ("stageTwoStartReplicaCount", "stageTwoStopReplicaCount")
_STAGE_WEIGHTS = ("firstStageVpaWeight", "secondStageVpaWeight", "thirdStageVpaWeight")
_FRACTION = Leaf("number", "a fraction 0..1", minimum=0, maximum=1)
#: The HVPA proposal's seed form, which tandem reads in the same group (``scaling.policies.hvpa``).
HVPA_SEED: dict[str, Node] = dict(
    hpaTemplate=HPA_SPEC,
    hpaSpec=HPA_SPEC,
    vpaTemplate=VPA_SPEC,
    vpaSpec=VPA_SPEC,
    mode=Leaf("string", enum=("WeightBased", "HpaPreferred", "HpaBiased", "VpaBiased", "Mixed")),
    mixed=_obj(prefer=STR, replicaThreshold=COUNT, resourceThreshold=SCALE_PARAMS),
    scaleUpStabilizationWindow=DURATION,
    scaleDownStabilizationWindow=DURATION,
    scaleUpDelay=DURATION,
    scaleDownDelay=DURATION,
    minCpuChange=CHANGE_PARAMS,
    minMemChange=CHANGE_PARAMS,
    scaleTargetRef=TARGET_REF,
    **{n: COUNT for n in _STAGES},
    **{n[0].upper() + n[1:]: COUNT for n in _STAGES},
    **{n: _FRACTION for n in _STAGE_WEIGHTS},
    **{n[0].upper() + n[1:]: _FRACTION for n in _STAGE_WEIGHTS},
)
#: ``targetRef`` is not required: the seed form may name the target in ``hpaTemplate.scaleTargetRef``.
HVPA_SPEC = Obj({**HVPA_RELEASED, **HVPA_SEED})

#: HVPA line B (branch hvpa-v2, group autoscaling.gardener.cloud): scale intervals of totals.
HVPA_V2_SPEC = Obj(
    {
        **HVPA_RELEASED,
        "scaleUp": SCALE_TYPE,
        "scaleDown": SCALE_TYPE,
        "scaleIntervals": Arr(
            _obj(
                maxReplicas=REPLICAS,
                maxCpu=QTY,
                maxMemory=QTY,
                effectiveIntervalExtrapolation=Leaf("string", enum=("linear", "horizontalOnly")),
            )
        ),
        "scalingIntervalsOverlap": SCALE_PARAMS,
        "baseResourcesPerReplica": SCALE_PARAMS,
    },
    required=("targetRef",),
)

# --- Mercari Tortoise (api/v1beta3/tortoise_types.go) ----------------------------------------

TORTOISE_SPEC = _obj(
    required=("targetRefs",),
    targetRefs=_obj(required=("scaleTargetRef",), scaleTargetRef=TARGET_REF, horizontalPodAutoscalerName=STR),
    updateMode=Leaf("string", enum=("Off", "Auto", "Emergency")),
    resourcePolicy=Arr(
        _obj(
            required=("containerName",),
            containerName=STR,
            minAllocatedResources=Map(QTY),
            maxAllocatedResources=Map(QTY),
        )
    ),
    deletionPolicy=Leaf("string", enum=("DeleteAll", "NoDelete")),
    autoscalingPolicy=Arr(
        _obj(
            required=("containerName",),
            containerName=STR,
            policy=Map(Leaf("string", enum=("Off", "Horizontal", "Vertical"))),
        )
    ),
    maxReplicas=REPLICAS,
    horizontalPodAutoscalerBehavior=HPA_BEHAVIOR,
)

# --- Nanit custom HPA, as tandem reads it (scaling.policies.custom_hpa) -----------------------

CUSTOM_HPA_SPEC = _obj(
    required=("minReplicas", "maxReplicas"),
    rules=(MIN_MAX,),
    target=_obj(deployment=STR, namespace=STR, value=NUMERIC),
    targetRef=TARGET_REF,
    scaleTargetRef=TARGET_REF,
    metric=_obj(series=STR),
    prometheus=_obj(url=STR, query=STR),
    minReplicas=COUNT,
    maxReplicas=REPLICAS,
    controlLoopPeriod=NUMERIC,
    dryRun=BOOL,
    behavior=_obj(
        scaleUpCooldown=NUMERIC,
        scaleDownCooldown=NUMERIC,
        scaleUpMinFactor=NUMERIC,
        scaleUpMaxFactor=NUMERIC,
        scaleDownMinFactor=NUMERIC,
        scaleDownMaxFactor=NUMERIC,
    ),
)


#: ``spec.predictive`` (issue 36, ``scaling/policies/predictive.py``): the same section for every
#: kind, declared here once and added to each kind's ``spec`` by :func:`with_common_fields`.
PREDICTIVE = _obj(
    "Scale up ahead of a forecast ramp (a seasonal profile per weekday and time of day times a short-term "
    "level); never below what the policy asks. {} means every default.",
    horizon=Leaf(
        "string",
        "how far ahead to forecast, a duration; default: the observed pod start-up time plus one sync period",
        pattern=DURATION.pattern,
    ),
    maxPreScalePercent=Leaf(
        "integer",
        "the most a pre-scale adds, in percent of the replicas the policy asks (default: no bound but maxReplicas)",
        minimum=0,
    ),
    minHistory=Leaf("string", "the history needed before it acts, a duration (default 24h)", pattern=DURATION.pattern),
    maxErrorPercent=Leaf(
        "integer",
        "it acts only while the forecaster's recent error is at most this, in percent (default 25)",
        minimum=0,
        maximum=100,
    ),
)


#: ``status.predictive`` (``scaling.policies.status.fold_predictive``), the same on every kind: the
#: CRDs declare it in their otherwise open ``status`` (``schemas/generate.py``).  Decimals are text.
PREDICTIVE_STATUS = _obj(
    "spec.predictive: the forecaster at the policy's latest decision or report, and its latest pre-scale",
    reason=Leaf(
        "string",
        "PreScaled, or why it did not pre-scale: TooLittleHistory, NoProfile, ErrorNotMeasured, ErrorTooLarge, "
        "NoBetterThanNaive, WithinReactive or Capped",
    ),
    message=Leaf("string", "the same in words, as tandem audit explain says it"),
    historyHours=Leaf("string", "hours of load history behind the forecast (at most 672)"),
    recentErrorPercent=Leaf("string", "the forecaster's recent error in percent; absent while not measured"),
    versusNaive=Leaf(
        "string",
        'its error over the last day divided by that of "as the slot before"; it acts only at 1 or below',
    ),
    lastPreScale=_obj(
        "the latest pre-scale",
        time=Leaf("string", "the tick of the decision (event time, RFC 3339)"),
        replicas=Leaf("integer", "the replicas (or the HPA's minReplicas) it pre-scaled to"),
        requests=Map(Map(STR), "requests raised while replicas were capped at maxReplicas: container, resource"),
        forecast=Leaf("string", "the forecast load, in replicas"),
        forecastTime=Leaf("string", "the time the forecast is for (RFC 3339)"),
    ),
    lastUpdateTime=Leaf("string", "the tick this part was last written at (event time, RFC 3339)"),
)


def with_common_fields(spec: Obj) -> Obj:
    """A kind's ``spec`` with the sections every kind has (``predictive``)."""
    if "predictive" in spec.fields:
        return spec
    return Obj(
        {**spec.fields, "predictive": PREDICTIVE},
        open=spec.open,
        required=spec.required,
        description=spec.description,
        fold=spec.fold,
        rules=spec.rules,
    )


def manifest_tree(spec: Obj) -> Obj:
    """The whole manifest around a kind's ``spec``: the API server owns ``metadata`` and ``status``."""
    return Obj(
        {"apiVersion": STR, "kind": STR, "metadata": OPEN, "spec": with_common_fields(spec), "status": OPEN},
        required=("spec",),
    )


def _closest(name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not near:
        lowered = {k.lower(): k for k in known}
        hit = lowered.get(name.lower())
        near = [hit] if hit else []
    return f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(known))})"


#: The largest integer a parser takes (``scaling.policies.base.int_field``'s default bound).
_MAX_INT32 = 2**31 - 1


def _check_leaf(value: Any, leaf: Leaf, path: str) -> None:
    """The declared bounds of ``leaf``, in the parsers' words (a wrong type is the parser's to name)."""
    if leaf.enum and isinstance(value, str) and value not in leaf.enum:
        raise InvalidPolicy(path, f"{value!r} is not one of {', '.join(leaf.enum)}")
    if leaf.pattern and isinstance(value, str) and re.search(leaf.pattern, value) is None:
        raise InvalidPolicy(path, f"{value!r} is not {leaf.description or 'of the form ' + leaf.pattern}")
    if (leaf.minimum is not None or leaf.maximum is not None) and isinstance(value, int | float):
        if isinstance(value, bool):
            return
        lo = leaf.minimum if leaf.minimum is not None else -_MAX_INT32
        hi = leaf.maximum if leaf.maximum is not None else _MAX_INT32
        if not lo <= value <= hi:
            raise InvalidPolicy(path, f"{value} is outside {lo}..{hi}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_rules(value: Mapping[str, Any], node: Obj, path: str) -> None:
    for rule in node.rules:
        if rule.lower not in value or rule.upper not in value:
            continue
        lo, hi = value[rule.lower], value[rule.upper]
        if not (_is_number(lo) and _is_number(hi)):
            continue  # a wrong type: the parser's to name
        if lo > hi:
            where = f"{path}.{rule.upper}" if path else rule.upper
            raise InvalidPolicy(where, f"{hi} is below {rule.lower} {lo}")


def _walk(value: Any, node: Node, path: str) -> None:
    if isinstance(node, Leaf):
        _check_leaf(value, node, path)
    elif isinstance(node, Obj):
        if node.open or not isinstance(value, Mapping):
            return  # a wrong type is the parser's to name
        folded = {k.lower(): v for k, v in node.fields.items()} if node.fold else {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            sub = node.fields.get(key) if isinstance(key, str) else None
            if sub is None and node.fold and isinstance(key, str):
                sub = folded.get(key.lower())
            if sub is None:
                raise InvalidPolicy(where, "unknown field" + _closest(str(key), list(node.fields)))
            _walk(item, sub, where)
        _check_rules(value, node, path)
    elif isinstance(node, Arr):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, node.items, f"{path}[{i}]")
    elif isinstance(node, Map) and isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, node.values, f"{path}.{key}")


def check_fields(manifest: Mapping[str, Any], spec: Obj | None) -> None:
    """Raise :class:`InvalidPolicy` for the first field of ``manifest`` that its kind's ``spec``
    tree (the descriptor's ``fields``) does not have.

    A kind without a field tree (a test's toy kind) is not checked.
    """
    if spec is not None:
        _walk(manifest, manifest_tree(spec), "")
