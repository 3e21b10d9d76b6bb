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
from collections.abc import Callable

import numpy as np

# rows are processed in blocks of at most this many elements (_blocks), to bound the temporaries:
# a few of 512 KiB each, which stay in the cache (much larger blocks fall out of it and are slower)
_BLOCK_ELEMENTS = 1 << 16
# exp(-d) is 0.0 in float64 from this distance on
_LAST_DISTANCE = 746


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


def _blocks(rows: np.ndarray):
    """(first row, block) pieces of 2-D ``rows`` of at most about _BLOCK_ELEMENTS elements: groups of
    whole rows, or pieces of one row where a row is longer than that (a reduction over all of a
    large input is one such row), so that the temporaries of the exact paths stay bounded."""
    n_rows, n = rows.shape
    if n <= _BLOCK_ELEMENTS:
        step = max(1, _BLOCK_ELEMENTS // max(1, n))
        for start in range(0, n_rows, step):
            yield start, rows[start:start + step]
        return
    for row in range(n_rows):
        for start in range(0, n, _BLOCK_ELEMENTS):
            yield row, rows[row:row + 1, start:start + _BLOCK_ELEMENTS]


def _distances(top: np.ndarray, block: np.ndarray) -> np.ndarray:
    """max - x of each element of ``block`` from its row's max ``top``: exact modulo 2**64, and
    0 <= max - x < 2**64."""
    return top[:, None].astype(np.uint64) - block.astype(np.uint64)


def distance_counts(row: np.ndarray, top) -> tuple[np.ndarray, np.ndarray]:
    """The distinct distances max - x of one row (1-D) and how many elements are at each, piece
    by piece (_blocks), for floor_log_of_counts."""
    pieces = [np.unique(_distances(np.array([top]), block), return_counts=True) for _, block in _blocks(row[None])]
    values, where = np.unique(np.concatenate([v for v, _ in pieces]), return_inverse=True)
    counts = np.zeros(values.size, dtype=np.int64)
    np.add.at(counts, where, np.concatenate([c for _, c in pieces]))
    return values, counts


def int_log_sum_exp(rows: np.ndarray) -> np.ndarray:
    """The exact integer log-sum-exp of each row of ``rows`` (2-D, an integer dtype, rows non-empty),
    truncated toward zero, in ``rows.dtype``; None if a result does not fit that dtype."""
    n = rows.shape[1]
    top = rows.max(axis=1)
    sums = np.zeros(rows.shape[0])
    for start, block in _blocks(rows):
        stop = start + block.shape[0]
        terms = np.exp(-np.minimum(_distances(top[start:stop], block), _LAST_DISTANCE).astype(np.float64))
        sums[start:stop] += terms.sum(axis=1)
    log = np.log(sums)
    whole = np.floor(log)
    # float64's error on the log: the sum's (each term and each addition rounded, pieces of a row
    # summed apart and then added; NumPy's exp is within a few units in the last place) and the
    # log's; 16 times that is still tiny
    slack = 16 * ((n + 4) * 2.0**-52 + 2.0**-46)
    nearest = np.rint(log)
    decided: dict[tuple[bytes, bytes], int] = {}
    for i in np.flatnonzero((nearest >= 1) & (np.abs(log - nearest) < slack)):
        values, counts = distance_counts(rows[i], top[i])
        key = values.tobytes(), counts.tobytes()  # outputs of the same elements are decided once
        if key not in decided:
            decided[key] = floor_log_of_counts(values, counts)
        whole[i] = decided[key]
    return truncated_log_sum_exp(top, whole.astype(np.int64), n)


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

# float64's log of an integer below 2**128, or of an approximation of it within a relative 2**-50,
# is within 1e-15 of the true log: farther than this from every integer, its floor is the true floor
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


def floor_ln(approximations: np.ndarray, exact: Callable[[int], int]) -> np.ndarray:
    """floor(ln s) of positive integers s, as int64, from float64 ``approximations`` of them (within
    a relative 2**-50) and ``exact(i)``, the i-th s as a Python int: float64 where the log is far from
    every integer, exactly (_floor_ln) next to one."""
    logs = np.log(approximations)
    whole = np.floor(logs).astype(np.int64)
    nearest = np.rint(logs)
    for i in np.flatnonzero((nearest >= 1) & (np.abs(logs - nearest) < _LOG_SLACK)):
        whole[i] = _floor_ln(exact(int(i)))
    return whole


def trunc_ln(values) -> np.ndarray:
    """trunc(ln s) (= floor, as ln s >= 0) of each positive Python int of ``values``, as int64."""
    values = list(values)
    return floor_ln(np.array([float(s) for s in values], dtype=np.float64), values.__getitem__)


def log_sum_not_positive(dtype: np.dtype) -> ValueError:
    """The error of an integer ReduceLogSum (or its elementwise noop) of a sum that is not positive."""
    return ValueError(f"ReduceLogSum: an integer sum <= 0 has no integer log (dtype {dtype}); "
                      "numred does not return -inf or NaN cast to an integer")


def _add_parts(sums: list[int], start: int, parts: list[int]) -> None:
    """Add a block's sums (_blocks) to ``sums`` from row ``start``: a piece of one long row is added
    to it; whole rows, each in one block only, are stored (a slice, not a Python loop per row)."""
    if len(parts) == 1:
        sums[start] += parts[0]
    else:
        sums[start:start + len(parts)] = parts


def row_sums(rows: np.ndarray) -> list[int]:
    """The exact sum of each row of integer ``rows`` (2-D), as Python ints, piece by piece (_blocks):
    64-bit values split into their high 32 bits (signed for int64) and low 32 bits, whose sums over a
    piece fit 64 bits; narrower ones summed in int64 as they are."""
    sums = [0] * rows.shape[0]
    for start, block in _blocks(rows):
        if block.dtype.itemsize < 8:
            parts = np.sum(block, axis=1, dtype=np.int64).tolist()
        else:
            high = np.sum(block >> block.dtype.type(32), axis=1, dtype=block.dtype).tolist()
            low = np.sum(block & block.dtype.type(0xFFFFFFFF), axis=1, dtype=block.dtype).tolist()
            parts = [(h << 32) + v for h, v in zip(high, low)]
        _add_parts(sums, start, parts)
    return sums


def int_log_sum(rows: np.ndarray) -> np.ndarray:
    """trunc(ln S) of the exact sum S of each row of ``rows`` (2-D, an integer dtype), in its dtype;
    ValueError where S <= 0."""
    totals = row_sums(rows)
    if any(s <= 0 for s in totals):
        raise log_sum_not_positive(rows.dtype)
    return trunc_ln(totals).astype(rows.dtype)


def l2_does_not_fit(dtype: np.dtype) -> ValueError:
    """The error of an integer ReduceL2 whose result does not fit ``dtype``."""
    return ValueError(f"ReduceL2: the result does not fit in {dtype} (largest value {np.iinfo(dtype).max}); "
                      "integer results are not clamped")


_LOW32 = np.uint64(0xFFFFFFFF)


def sums_of_squares(rows: np.ndarray) -> list[int]:
    """The exact sum of squares of each row of integer ``rows`` (2-D), as Python ints, piece by piece
    (_blocks): |x| < 2**64 is split into 32-bit halves h, l, so x*x = h*h 2**64 + h*l 2**33 + l*l;
    each product is below 2**64, and its 32-bit halves sum exactly in uint64 over a piece."""
    sums = [0] * rows.shape[0]
    for start, block in _blocks(rows):
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
        _add_parts(sums, start, [(hh << 64) + (hl << 33) + ll for hh, hl, ll in zip(*parts)])
    return sums


def scaled_square_sums(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sum of (x * 2**-e)**2, e) of each row of float64 ``rows`` (2-D), e the exponent of the row's
    largest magnitude (frexp: in [1/2, 1) after scaling, so no square overflows and none that
    matters underflows; 0 for 0, inf and NaN, whose sums then say it), piece by piece (_blocks)."""
    n_rows, n = rows.shape
    largest = np.zeros(n_rows)  # NaN if any is NaN, inf if any is inf
    for start, block in _blocks(rows):
        part = largest[start:start + block.shape[0]]
        np.maximum(part, np.max(np.abs(block), axis=1), out=part)
    _, exponents = np.frexp(largest)
    sums = np.empty(n_rows)
    # a long row's pieces are summed apart (NumPy's pairwise sum) and their sums added exactly
    pieces: list[list[float]] = [[] for _ in range(n_rows)] if n > _BLOCK_ELEMENTS else []
    for start, block in _blocks(rows):
        stop = start + block.shape[0]
        scaled = np.ldexp(block, -exponents[start:stop, None])
        # (a row holding inf or NaN is not scaled: its finite squares may overflow, silently, as its
        # sum is the inf or NaN anyway)
        with np.errstate(over="ignore"):
            if pieces:
                pieces[start].append(float(np.sum(scaled * scaled)))
            else:
                sums[start:stop] = np.sum(scaled * scaled, axis=1)
    if pieces:
        sums[:] = [math.fsum(row) for row in pieces]
    return sums, exponents


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
    sums, exponents = scaled_square_sums(rows)
    with np.errstate(over="ignore"):  # a root beyond float64's range: inf, without a warning, as the kernels
        return np.ldexp(np.sqrt(sums), exponents).astype(rows.dtype)
