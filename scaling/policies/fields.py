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
whatever upstream accepts is accepted.  Types are given where upstream fixes them; bounds never
(the parsers check values, and upstream has none of its own to copy).  ``metadata`` and
``status`` stay open: the API server owns them.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidPolicy

__all__ = ["KIND_FIELDS", "Arr", "Leaf", "Map", "Node", "Obj", "check_fields", "manifest_tree"]


@dataclass(frozen=True, slots=True)
class Leaf:
    #: ``string``, ``integer``, ``number``, ``boolean``, ``int-or-string`` (a quantity), ``any``.
    type: str
    description: str = ""
    #: The values upstream allows (its ``+kubebuilder:validation:Enum``), if it fixes them.
    enum: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Obj:
    fields: Mapping[str, Node]
    #: Any key is accepted (``metadata``, ``status``): the tree does not say what is inside.
    open: bool = False
    required: tuple[str, ...] = ()
    description: str = ""
    #: Keys match whatever their case (the seed form's ``MinAllowed``: ``scaling.policies.hvpa._ci_get``).
    fold: bool = False


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


def _obj(description: str = "", required: tuple[str, ...] = (), **fields: Node) -> Obj:
    return Obj(fields, required=required, description=description)


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
    scaleTargetRef=TARGET_REF,
    minReplicas=INT,
    maxReplicas=INT,
    metrics=Arr(METRIC_SPEC),
    behavior=HPA_BEHAVIOR,
    targetCPUUtilizationPercentage=INT,
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

CHANGE_PARAMS = _obj(value=STR, percentage=INT)
SCALE_PARAMS = _obj(cpu=CHANGE_PARAMS, memory=CHANGE_PARAMS, replicas=CHANGE_PARAMS)
UPDATE_POLICY = _obj(updateMode=STR)
SCALE_TYPE = _obj(updatePolicy=UPDATE_POLICY, minChange=SCALE_PARAMS, stabilizationDuration=STR)
HPA_TEMPLATE_SPEC = _obj(
    minReplicas=INT, maxReplicas=INT, metrics=Arr(METRIC_SPEC), behavior=HPA_BEHAVIOR
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
    vpaWeight=Leaf("number", "0..100 (released), or a fraction 0..1 (the proposal's seed form)"),
    startReplicaCount=INT,
    lastReplicaCount=INT,
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
#: The HVPA proposal's seed form, which tandem reads in the same group (``scaling.policies.hvpa``).
HVPA_SEED: dict[str, Node] = dict(
    hpaTemplate=HPA_SPEC,
    hpaSpec=HPA_SPEC,
    vpaTemplate=VPA_SPEC,
    vpaSpec=VPA_SPEC,
    mode=STR,
    mixed=_obj(prefer=STR, replicaThreshold=INT, resourceThreshold=SCALE_PARAMS),
    scaleUpStabilizationWindow=STR,
    scaleDownStabilizationWindow=STR,
    scaleUpDelay=STR,
    scaleDownDelay=STR,
    minCpuChange=CHANGE_PARAMS,
    minMemChange=CHANGE_PARAMS,
    scaleTargetRef=TARGET_REF,
    **{n: INT for n in _STAGES},
    **{n[0].upper() + n[1:]: INT for n in _STAGES},
    **{n: NUM for n in _STAGE_WEIGHTS},
    **{n[0].upper() + n[1:]: NUM for n in _STAGE_WEIGHTS},
)
#: ``targetRef`` is not required: the seed form may name the target in ``hpaTemplate.scaleTargetRef``.
HVPA_SPEC = Obj({**HVPA_RELEASED, **HVPA_SEED})

#: HVPA line B (branch hvpa-v2, group autoscaling.gardener.cloud): scale intervals of totals.
HVPA_V2_SPEC = Obj(
    {
        **HVPA_RELEASED,
        "scaleUp": SCALE_TYPE,
        "scaleDown": SCALE_TYPE,
        "scaleIntervals": Arr(_obj(maxReplicas=INT, maxCpu=QTY, maxMemory=QTY, effectiveIntervalExtrapolation=STR)),
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
    maxReplicas=INT,
    horizontalPodAutoscalerBehavior=HPA_BEHAVIOR,
)

# --- Nanit custom HPA, as tandem reads it (scaling.policies.custom_hpa) -----------------------

CUSTOM_HPA_SPEC = _obj(
    required=("minReplicas", "maxReplicas"),
    target=_obj(deployment=STR, namespace=STR, value=NUMERIC),
    targetRef=TARGET_REF,
    scaleTargetRef=TARGET_REF,
    metric=_obj(series=STR),
    prometheus=_obj(url=STR, query=STR),
    minReplicas=INT,
    maxReplicas=INT,
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

#: Each kind's ``spec``, by (kind, API group): the registry's kinds each have one (a test checks).
KIND_FIELDS: dict[tuple[str, str], Obj] = {
    ("Hvpa", "autoscaling.k8s.io"): HVPA_SPEC,
    ("Hvpa", "autoscaling.gardener.cloud"): HVPA_V2_SPEC,
    ("Tortoise", "autoscaling.mercari.com"): TORTOISE_SPEC,
    ("CustomHpa", "autoscaling.tandem.dev"): CUSTOM_HPA_SPEC,
}


def manifest_tree(spec: Obj) -> Obj:
    """The whole manifest around a kind's ``spec``: the API server owns ``metadata`` and ``status``."""
    return Obj(
        {"apiVersion": STR, "kind": STR, "metadata": OPEN, "spec": spec, "status": OPEN},
        required=("spec",),
    )


def _closest(name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not near:
        lowered = {k.lower(): k for k in known}
        hit = lowered.get(name.lower())
        near = [hit] if hit else []
    return f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(known))})"


def _walk(value: Any, node: Node, path: str) -> None:
    if isinstance(node, Obj):
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
    elif isinstance(node, Arr):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _walk(item, node.items, f"{path}[{i}]")
    elif isinstance(node, Map) and isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, node.values, f"{path}.{key}")


def check_fields(manifest: Mapping[str, Any], kind: str, group: str) -> None:
    """Raise :class:`InvalidPolicy` for the first field of ``manifest`` that its kind does not have.

    A kind without a field tree (a test's toy kind) is not checked.
    """
    spec = KIND_FIELDS.get((kind, group))
    if spec is not None:
        _walk(manifest, manifest_tree(spec), "")
