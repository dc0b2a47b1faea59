"""Normalization of the desired replicas: stabilization, rate limits and the scale-event record.

Upstream: ``pkg/controller/podautoscaler/horizontal.go`` ``normalizeDesiredReplicas`` /
``stabilizeRecommendation`` / ``convertDesiredReplicasWithRules`` without ``behavior``
(docs/recommenders.md 1.8), and ``normalizeDesiredReplicasWithBehaviors`` /
``stabilizeRecommendationWithBehaviors`` / ``convertDesiredReplicasWithBehaviorRate`` /
``storeScaleEvent`` with it (1.9).  Pure functions of explicit lists, so the caller owns the state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .arithmetic import MAX_INT32, MIN_INT32
from .behavior import Behavior, ScalingRules

__all__ = [
    "limit_legacy",
    "limit_with_behavior",
    "replicas_changed_in_period",
    "stabilize_legacy",
    "stabilize_with_behavior",
    "store_scale_event",
]

# HPA: horizontal.go, scaleUpLimitFactor / scaleUpLimitMinimum (reference 1.8).
_SCALE_UP_LIMIT_FACTOR = 2.0
_SCALE_UP_LIMIT_MINIMUM = 4.0


def stabilize_legacy(
    history: Sequence[tuple[int, float]], proposal: int, now: float, window: float
) -> tuple[int, list[tuple[int, float]]]:
    """Legacy stabilization (``stabilizeRecommendation``, reference 1.8 step 1).

    Returns the maximum of ``proposal`` and the recommendations younger than ``window`` (so
    scale-downs wait, scale-ups do not), and the new history: the raw proposal overwrites the last
    entry older than the window, or is appended.  An entry aged exactly ``window`` is neither
    counted nor reused ("age < period", reference 5).
    """
    cutoff = now - window
    stabilized = proposal
    old_index: int | None = None
    for i, (rec, ts) in enumerate(history):
        if ts < cutoff:
            old_index = i
        elif ts > cutoff and rec > stabilized:
            stabilized = rec
    new_history = list(history)
    if old_index is not None:
        new_history[old_index] = (proposal, now)
    else:
        new_history.append((proposal, now))
    return stabilized, new_history


def limit_legacy(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithRules`` (reference 1.8 step 2): (replicas, reason, message).

    The scale-up limit ``max(2 x current, 4)`` re-applies every sync: without behavior there is no
    scale-event memory.
    """
    scale_up_limit = int(max(_SCALE_UP_LIMIT_FACTOR * float(current), _SCALE_UP_LIMIT_MINIMUM))
    if max_replicas > scale_up_limit:
        upper = scale_up_limit
        reason, message = "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
    else:
        upper = max_replicas
        reason, message = "TooManyReplicas", "the desired replica count is more than the maximum replica count"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > upper:
        return upper, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def stabilize_with_behavior(
    history: Sequence[tuple[int, float]],
    current: int,
    proposal: int,
    now: float,
    up_window: float,
    down_window: float,
) -> tuple[int, str, str, list[tuple[int, float]]]:
    """``stabilizeRecommendationWithBehaviors`` (reference 1.9.1).

    Scale up only to the lowest proposal of the up-window, down only to the highest of the
    down-window, never against the direction of ``proposal``.  The raw proposal is stored over the
    last entry older than *both* windows, or appended.  Returns (stabilized, reason, message,
    new history); the reason is what ``AbleToScale`` shows when stabilization changed the value.
    """
    up_cutoff = now - up_window
    down_cutoff = now - down_window
    up_rec = proposal
    down_rec = proposal
    old_index: int | None = None
    for i, (rec, ts) in enumerate(history):
        if ts > up_cutoff:
            up_rec = min(rec, up_rec)
        if ts > down_cutoff:
            down_rec = max(rec, down_rec)
        if ts < up_cutoff and ts < down_cutoff:
            old_index = i
    result = current
    if result < up_rec:
        result = up_rec
    if result > down_rec:
        result = down_rec
    new_history = list(history)
    if old_index is not None:
        new_history[old_index] = (proposal, now)
    else:
        new_history.append((proposal, now))
    if proposal >= current:
        reason = "ScaleUpStabilized"
        message = "recent recommendations were lower than current one, applying the lowest recent recommendation"
    else:
        reason = "ScaleDownStabilized"
        message = "recent recommendations were higher than current one, applying the highest recent recommendation"
    return result, reason, message, new_history


def replicas_changed_in_period(events: Sequence[tuple[int, float]], period: float, now: float) -> int:
    """``getReplicasChangePerPeriod``: sum of the changes younger than ``period`` (age < period)."""
    cutoff = now - period
    return sum(change for change, ts in events if ts > cutoff)


def _replicas_at_period_start(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], period: float, now: float
) -> int:
    """Replicas before the changes of the last ``period``: both limits measure a policy from there."""
    return current - replicas_changed_in_period(up, period, now) + replicas_changed_in_period(down, period, now)


def _scale_up_limit(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], rules: ScalingRules, now: float
) -> int:
    # HPA: horizontal.go calculateScaleUpLimitWithScalingRules (reference 1.9.2).
    if rules.select_policy == "Disabled":
        return current
    pick_min = rules.select_policy == "Min"
    result = MAX_INT32 if pick_min else MIN_INT32
    for policy in rules.policies:
        period_start = _replicas_at_period_start(current, up, down, policy.period_seconds, now)
        if policy.type == "Pods":
            proposed = period_start + policy.value
        else:
            # Rounded up so that a small percentage still adds a pod.
            proposed = math.ceil(float(period_start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def _scale_down_limit(
    current: int, up: Sequence[tuple[int, float]], down: Sequence[tuple[int, float]], rules: ScalingRules, now: float
) -> int:
    # HPA: horizontal.go calculateScaleDownLimitWithBehaviors (reference 1.9.2): "Max" selects the
    # biggest change, i.e. the smallest replica count.
    if rules.select_policy == "Disabled":
        return current
    pick_min_change = rules.select_policy == "Min"
    result = MIN_INT32 if pick_min_change else MAX_INT32
    for policy in rules.policies:
        period_start = _replicas_at_period_start(current, up, down, policy.period_seconds, now)
        if policy.type == "Pods":
            proposed = period_start - policy.value
        else:
            # int32(float64 x (1 - v/100)): truncation toward zero.
            proposed = int(float(period_start) * (1 - float(policy.value) / 100))
        result = max(result, proposed) if pick_min_change else min(result, proposed)
    return result


def limit_with_behavior(
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    scale_up_events: Sequence[tuple[int, float]],
    scale_down_events: Sequence[tuple[int, float]],
    behavior: Behavior,
    now: float,
) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithBehaviorRate`` (reference 1.9.2): (replicas, reason, message).

    ``desired`` is the stabilized value.  The scale-up branch never looks at ``min_replicas`` and
    the scale-down branch never at ``max_replicas``, as upstream.
    """
    if desired > current:
        limit = _scale_up_limit(current, scale_up_events, scale_down_events, behavior.scale_up, now)
        if limit < current:
            limit = current
        if max_replicas > limit:
            upper = limit
            reason, message = (
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            upper = max_replicas
            reason, message = "TooManyReplicas", "the desired replica count is more than the maximum replica count"
        if desired > upper:
            return upper, reason, message
    elif desired < current:
        limit = _scale_down_limit(current, scale_up_events, scale_down_events, behavior.scale_down, now)
        if limit > current:
            limit = current
        if min_replicas < limit:
            lower = limit
            reason, message = (
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            lower = min_replicas
            reason, message = "TooFewReplicas", "the desired replica count is less than the minimum replica count"
        if desired < lower:
            return lower, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def store_scale_event(
    events: Sequence[tuple[int, float]], change: int, now: float, longest_period: float
) -> list[tuple[int, float]]:
    """``storeScaleEvent`` for one direction (reference 1.9.4).

    Events older than the direction's longest policy period are outdated; the new ``(|change|,
    now)`` overwrites the last outdated one, or is appended.  (Upstream keeps a sticky "outdated"
    flag set at each store; recomputing it from the timestamps is the same unless the HPA's longest
    period grows between two stores, and then only changes which dead slot is reused.)
    """
    cutoff = now - longest_period
    old_index: int | None = None
    for i, (_, ts) in enumerate(events):
        if ts < cutoff:
            old_index = i
    out = list(events)
    if old_index is not None:
        out[old_index] = (change, now)
    else:
        out.append((change, now))
    return out
