"""Resource amounts and the Go arithmetic that the VPA's integer results depend on.

Upstream: ``vertical-pod-autoscaler/pkg/recommender/model/types.go`` (``ResourceAmount`` is an int64;
``resourceAmountFromFloat`` clamps to [0, 1e14] and truncates; ``ScaleResource``) and Go's ``math``
package, whose ``Pow`` is not correctly rounded and whose float division by zero gives infinities:
several upstream vectors depend on those exact bits.
"""

from __future__ import annotations

import math
from typing import Final

__all__ = ["MAX_RESOURCE_AMOUNT", "millicores_up"]


#: VPA: pkg/recommender/model/types.go, MaxResourceAmount = 1e14 (reference 2.7 step 1).
MAX_RESOURCE_AMOUNT: Final = 10**14
RESOURCES: Final[tuple[str, ...]] = ("cpu", "memory")

# --------------------------------------------------------------------------------------------------
# Go arithmetic that the integer results depend on
# --------------------------------------------------------------------------------------------------


def resource_amount(value: float) -> int:
    """``resourceAmountFromFloat`` (VPA: model/types.go): clamp to [0, 1e14], then truncate.

    Go converts NaN to an implementation-defined int64 (MinInt64 on amd64, 0 on arm64); it only
    arises as 0 x Inf in the confidence multiplier and is then raised to the pod minimum, so tandem
    uses 0.
    """
    if 0 <= value <= MAX_RESOURCE_AMOUNT:  # the common case first (NaN fails it)
        return int(value)
    if value > MAX_RESOURCE_AMOUNT:
        return MAX_RESOURCE_AMOUNT
    if value < 0:
        return 0
    if value != value:
        return 0
    return int(value)


def millicores_up(cores: float) -> int:
    """A CPU sample of ``cores`` (>= 0) as the live recommender sees it: integer millicores, up.

    VPA: input/metrics/metrics_client.go takes metrics-server's usage quantity (nanocores) with
    ``Quantity.MilliValue()``, which rounds up (``CPUAmountFromCores``, which truncates, is only
    used for Prometheus history).  The float is first taken to the whole nanocore it stands for
    (0.3 is 300000000n, exactly 300m, where ``ceil(0.3 * 1000)`` would give 301).
    """
    x = cores * 1e9
    if not x < 9e18:  # beyond int64 nanocores (and +Inf): the amount clamps anyway
        return MAX_RESOURCE_AMOUNT
    return -(-round(x) // 1_000_000)


def scale_resource(amount: int, factor: float) -> int:
    """``ScaleResource`` (VPA: model/types.go): amount x factor through ``resourceAmountFromFloat``."""
    return resource_amount(float(amount) * factor)


def go_div(a: float, b: float) -> float:
    """IEEE division as Go does it: x/0 is +-Inf (NaN for 0/0) instead of an exception."""
    if b != 0.0:
        return a / b
    if a == 0.0 or a != a:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


TWO_TO_500: Final = 2.0**500


def go_exp2(x: float) -> float:
    """Go's ``math.Exp2`` bit for bit (src/math/exp.go ``exp2`` and ``expmulti``; amd64 has no
    assembly for it).  Not correctly rounded: ``2.0 ** x`` differs in the last bit for about one
    ``x`` in ten, and the decaying histograms' weights are this; a percentile whose running sum ties
    with its threshold (equal weights, as pods started together give) then lands a bucket off.
    """
    if x != x:
        return x
    if x > 1.0239999999999999e03:
        return math.inf
    if x < -1.0740e03:
        return 0.0
    # argument reduction; x = r x lg(e) + k with |r| <= ln(2)/2, r = hi - lo for extra precision
    if x > 0:
        k = int(x + 0.5)
    elif x < 0:
        k = int(x - 0.5)
    else:
        k = 0
    t = x - float(k)
    hi = t * 6.93147180369123816490e-01  # Ln2Hi
    lo = -t * 1.90821492927058770002e-10  # Ln2Lo
    # expmulti
    r = hi - lo
    tt = r * r
    c = r - tt * (
        1.66666666666666657415e-01
        + tt
        * (
            -2.77777777770155933842e-03
            + tt * (6.61375632143793436117e-05 + tt * (-1.65339022054652515390e-06 + tt * 4.13813679705723846039e-08))
        )
    )
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    try:
        return math.ldexp(y, k)
    except OverflowError:  # Go's Ldexp gives +Inf (only for x just under 1024)
        return math.inf


def go_pow(x: float, y: float) -> float:
    """Go's ``math.Pow``, which is *not* correctly rounded: integer powers by repeated squaring.

    It matters for integers: with libm's pow, memory bucket 4 would start at 43101250 bytes; Go's
    algorithm gives 43101249.99999996 -> 43101249 after truncation (VPA: util/histogram_options.go
    GetBucketStart uses math.Pow; logic/estimator.go confidence multiplier too).
    """
    if y == 0 or x == 1:
        return 1.0
    if y == 1:
        return x
    if y == -2.0 and 1.0 <= x < TWO_TO_500:
        # The lower bound's confidence multiplier, every recommendation.  For this y the loop below
        # computes 1 / fl(x1 * x1) scaled by a power of two (x = x1 * 2^e, frexp); while x * x and
        # its reciprocal stay normal, scaling commutes with rounding, so that is 1 / fl(x * x).
        return 1.0 / (x * x)
    if x != x or y != y:
        return math.nan
    if x == 0:
        odd = float(y).is_integer() and int(y) % 2 == 1
        if y < 0:
            return math.copysign(math.inf, x) if odd else math.inf
        return x if odd else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    if math.isinf(x):
        if x < 0:
            return go_pow(-0.0, -y)
        return 0.0 if y < 0 else math.inf
    if y == 0.5:
        return math.sqrt(x)
    if y == -0.5:
        return 1 / math.sqrt(x)
    yf, yi = math.modf(abs(y))
    if yf != 0 and x < 0:
        return math.nan
    if yi >= 2.0**63:
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    a1 = 1.0
    ae = 0
    if yf != 0:
        if yf > 0.5:
            yf -= 1
            yi += 1
        a1 = math.exp(yf * math.log(x))
    x1, xe = math.frexp(x)
    i = int(yi)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    try:
        return math.ldexp(a1, ae)
    except OverflowError:
        return math.copysign(math.inf, a1)


def go_log(base: float, x: float) -> float:
    """``log(base, x) = math.Log(x) / math.Log(base)`` (VPA: util/histogram_options.go)."""
    return math.log(x) / math.log(base)
