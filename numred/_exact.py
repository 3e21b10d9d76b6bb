"""Exact integer log-sum-exp, for the outputs the float64 kernels cannot decide.

The kernels compute trunc(max + log(sum(exp(x - max)))) with a float64 sum and a float64 log. That
decides the result except where the log lies within its rounding error of an integer k >= 1: there
the sum may be just below e**k while float64 says e**k or above (a row of max 1000 and 60 smaller
elements chosen greedily is within 3e-28 below e**2: float64 gives 1002, the exact result is 1001).
The kernels report such outputs as undecided, as they report results that do not fit the dtype, and
the front end then computes the call again here, exactly.

The log is decided with decimal arithmetic at a precision doubled until the sum is provably on one
side of e**k. It always ends: sum(c_j * e**-d_j) = e**k with integers k >= 1, d_j >= 0 would make e
the root of a non-zero integer polynomial, and e is transcendental.
"""
from __future__ import annotations

import decimal
import math

import numpy as np

# rows are processed in blocks of about this many elements, to bound the temporaries
_BLOCK_ELEMENTS = 1 << 22
# exp(-d) is 0.0 in float64 from this distance on
_LAST_DISTANCE = 746


def _floor_log(distances: np.ndarray) -> int:
    """floor(log(sum(exp(-d)))) exactly, for the distances d = max - x >= 0 of one output's elements."""
    return floor_log_of_counts(*np.unique(distances, return_counts=True))


def floor_log_of_counts(values: np.ndarray, counts: np.ndarray) -> int:
    """floor(log(sum(c * exp(-d)))) exactly, for the distinct distances d = max - x >= 0 of one
    output's elements (0 among them) and how many elements are at each."""
    n = int(counts.sum())
    if n == 1:
        return 0
    digits = 40
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = digits + 20
            # terms below 10**-(digits + 5) (relative to the sum, which is >= 1) add up to less than
            # n * 10**-(digits + 5): within the error bound below
            limit = (digits + 5) * math.log(10) + math.log(n)
            total = sum(int(c) * decimal.Decimal(-int(d)).exp() for d, c in zip(values, counts) if d <= limit)
            log = total.ln()
            k = int(log.to_integral_value(rounding=decimal.ROUND_FLOOR))
            # the computed log is within (n + 1) * 10**-digits of the true one
            if min(log - k, k + 1 - log) > (n + 1) * decimal.Decimal(10) ** -digits:
                return k
        digits *= 2
        if digits > 1 << 16:  # cannot happen (see the module docstring); never loop for ever
            raise RuntimeError("numred: an integer log-sum-exp could not be decided")


def int_log_sum_exp(rows: np.ndarray) -> np.ndarray:
    """The exact integer log-sum-exp of each row of ``rows`` (2-D, an integer dtype, rows non-empty),
    truncated toward zero, in ``rows.dtype``; None if a result does not fit that dtype."""
    result = np.empty(rows.shape[0], dtype=rows.dtype)
    step = max(1, _BLOCK_ELEMENTS // rows.shape[1])
    decided: dict[bytes, int] = {}
    for start in range(0, rows.shape[0], step):
        block = rows[start:start + step]
        top = block.max(axis=1)
        # max - x is exact modulo 2**64, and 0 <= max - x < 2**64
        distances = top[:, None].astype(np.uint64) - block.astype(np.uint64)
        terms = np.exp(-np.minimum(distances, _LAST_DISTANCE).astype(np.float64))
        log = np.log(terms.sum(axis=1))
        whole = np.floor(log)
        # float64's error on the log: the sum's (each term and each addition rounded; NumPy's exp is
        # within a few units in the last place) and the log's; 16 times that is still tiny
        slack = 16 * ((rows.shape[1] + 4) * 2.0**-52 + 2.0**-46)
        nearest = np.rint(log)
        for i in np.flatnonzero((nearest >= 1) & (np.abs(log - nearest) < slack)):
            key = np.sort(distances[i]).tobytes()  # outputs of the same elements are decided once
            if key not in decided:
                decided[key] = _floor_log(distances[i])
            whole[i] = decided[key]
        truncated = truncated_log_sum_exp(top, whole.astype(np.int64), rows.shape[1])
        if truncated is None:
            return None
        result[start:start + step] = truncated
    return result


def truncated_log_sum_exp(top: np.ndarray, whole: np.ndarray, count: int) -> np.ndarray | None:
    """The integer log-sum-exps trunc(top + log(sum)) in top's dtype, from each output's max ``top``
    and floor(log(sum of exp(x - top))) ``whole`` (int64), over ``count`` elements each; None if
    one does not fit the dtype."""
    dtype = top.dtype
    # truncation toward zero: max + floor(log) when that is >= 0; one more below zero, where
    # the log (of a sum of more than one element) is not an integer
    below_zero = (top < 0) & (top + whole.astype(dtype) < 0) if dtype.kind == "i" else False
    step_up = whole + ((count > 1) & below_zero)
    if np.any(top > np.asarray(np.iinfo(dtype).max, dtype) - step_up.astype(dtype)):
        return None
    return top + step_up.astype(dtype)


# ---- ReduceLogSum and ReduceL2: logs and square roots of exact integer sums ----------------------

# float64's log of an integer below 2**128 is within 1e-15 of the true log: farther than this from
# every integer, its floor is the true floor
_LOG_SLACK = 1e-9


def _floor_ln(s: int) -> int:
    """floor(ln s) of an integer s >= 1, exactly: decimal's ln is correctly rounded, and the precision
    doubles until the log is provably on one side of an integer. ln s is an integer only for s = 1
    (e**k is irrational for k >= 1), so this ends."""
    if s == 1:
        return 0
    digits = 50
    while True:
        with decimal.localcontext() as ctx:
            ctx.prec = digits
            log = decimal.Decimal(s).ln()
            k = int(log.to_integral_value(rounding=decimal.ROUND_FLOOR))
            # ln s < 89 (s < 2**128): the rounding error is below 10**(2 - digits)
            if min(log - k, k + 1 - log) > decimal.Decimal(10) ** (2 - digits):
                return k
        digits *= 2
        if digits > 1 << 16:  # cannot happen (see above); never loop for ever
            raise RuntimeError("numred: an integer log could not be decided")


def trunc_ln(values) -> np.ndarray:
    """trunc(ln s) (= floor, as ln s >= 0) of each positive Python int of ``values``, as int64:
    float64 where its log is far from every integer, exactly (_floor_ln) next to one."""
    values = list(values)
    logs = np.log(np.array([float(s) for s in values], dtype=np.float64))
    whole = np.floor(logs).astype(np.int64)
    nearest = np.rint(logs)
    for i in np.flatnonzero((nearest >= 1) & (np.abs(logs - nearest) < _LOG_SLACK)):
        whole[i] = _floor_ln(values[i])
    return whole


def log_sum_not_positive(dtype: np.dtype) -> ValueError:
    """The error of an integer ReduceLogSum (or its elementwise noop) of a sum that is not positive."""
    return ValueError(f"ReduceLogSum: an integer sum <= 0 has no integer log (dtype {dtype}); "
                      "numred does not return -inf or NaN cast to an integer")


def int_log_sum(rows: np.ndarray) -> np.ndarray:
    """trunc(ln S) of the exact sum S of each row of ``rows`` (2-D, an integer dtype), in its dtype;
    ValueError where S <= 0."""
    totals = [sum(row) for row in rows.tolist()]
    if any(s <= 0 for s in totals):
        raise log_sum_not_positive(rows.dtype)
    return trunc_ln(totals).astype(rows.dtype)


def l2_does_not_fit(dtype: np.dtype) -> ValueError:
    """The error of an integer ReduceL2 whose result does not fit ``dtype``."""
    return ValueError(f"ReduceL2: the result does not fit in {dtype} (largest value {np.iinfo(dtype).max}); "
                      "integer results are not clamped")


_LOW32 = np.uint64(0xFFFFFFFF)


def sums_of_squares(rows: np.ndarray) -> list[int]:
    """The exact sum of squares of each row of integer ``rows`` (fewer than 2**32 per row), as Python
    ints, vectorised: |x| < 2**64 is split into 32-bit halves h, l, so x*x = h*h 2**64 + h*l 2**33
    + l*l; each product is below 2**64, and its 32-bit halves sum exactly in uint64."""
    sums = []
    step = max(1, _BLOCK_ELEMENTS // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        block = rows[start:start + step]
        if block.dtype.kind == "i":
            wide = block.astype(np.int64)
            magnitude = np.where(wide < 0, ~wide.view(np.uint64) + np.uint64(1), wide.view(np.uint64))
        else:
            magnitude = block.astype(np.uint64)
        high, low = magnitude >> np.uint64(32), magnitude & _LOW32
        parts = []
        for product in (high * high, high * low, low * low):
            upper = np.sum(product >> np.uint64(32), axis=1, dtype=np.uint64).tolist()
            lower = np.sum(product & _LOW32, axis=1, dtype=np.uint64).tolist()
            parts.append([(u << 32) + v for u, v in zip(upper, lower)])
        sums += [(hh << 64) + (hl << 33) + ll for hh, hl, ll in zip(*parts)]
    return sums


def l2(rows: np.ndarray) -> np.ndarray:
    """The L2 norm of each row of ``rows`` (2-D): for integers isqrt of the exact sum of squares
    (ValueError where it does not fit the dtype); for float64 the rows scaled by a power of two
    (exact) so that their largest magnitude is in [1/2, 1): no square overflows, and none that
    matters underflows. What the kernels' float64 sums of squares cannot give: beyond float64's
    range, or so small that the squares lose bits as subnormals."""
    if rows.dtype.kind in "iu":
        roots = [math.isqrt(s) for s in sums_of_squares(rows)]
        if roots and max(roots) > np.iinfo(rows.dtype).max:
            raise l2_does_not_fit(rows.dtype)
        return np.array(roots, dtype=rows.dtype)
    largest = np.max(np.abs(rows), axis=1)  # NaN if any is NaN, inf if any is inf
    _, exponents = np.frexp(largest)  # 0 for 0, inf and NaN: then the sum below says it
    scaled = np.ldexp(rows, -exponents[:, None])
    return np.ldexp(np.sqrt(np.sum(scaled * scaled, axis=1)), exponents).astype(rows.dtype)
