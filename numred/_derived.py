"""The engine's entry point, ``compute``, and the operators built on other reductions' results where
one kernel call cannot finish them (numred._compute.kernel_call decides): ReduceL1 from the chunk
partials of sums of |x|, ReduceL2 and ReduceLogSum from unrounded float64 sums of their layout's sum
kernels (integers: from exact or wrapping integer reductions), and ReduceProd from its products
kernel's (mantissa, exponent) partials. Every other reduction goes to the drivers in numred._compute.
"""
from __future__ import annotations

import math

import numpy as np

from . import _exact
from ._compute import (NO_MAXIMA, SUM_RESCALE, as_dtype, compute_direct, float_call, float_sums_into, geometry,
                       int_l1_term, int_sums_into, kernel_call, launch, products_kernel, root_max, tasks)
from ._plan import Plan
from ._reduction import (EXACT, FLOAT_BITS, KEY, MAX, MIN, PRODUCT, RESULT_DTYPE, ROUND, SQRT, SQUARES, SUM, WRAPPING,
                         Reduction, Undecided)
from ._runtime import get_num_threads, run
from .kernels import finish as finishing
from .kernels import table
from .kernels.serial import L2_SMALLEST_SUM


def compute(reduction: Reduction, plan: Plan, src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``reduction`` of ``src`` (the carrier view of ``dtype`` data) on ``plan``: 1-D, ``plan.n_kept``
    results in ``dtype``. Raises Undecided where exact arithmetic must decide a result."""
    if reduction.finish is not None:
        return finished(reduction, plan, src, dtype)
    if reduction.term == PRODUCT:
        return products(plan, src, dtype)
    return compute_direct(reduction, plan, src, dtype)


# ReduceL1, ReduceL2 and ReduceLogSum: the float64 sums (the exact integer sums) are finished here,
# unrounded: nothing, a square root or a log, then the one rounding to the output dtype.

_LN_2 = math.log(2.0)

_INT_MEAN = Reduction(SUM, EXACT, mean=True)
_INT_SUM = Reduction(SUM, EXACT)
_INT_SQUARES = Reduction(SQUARES, WRAPPING)
_MAX, _MIN = Reduction(KEY, MAX), Reduction(KEY, MIN)
_PRODUCT = Reduction(PRODUCT, WRAPPING)


def _largest_magnitudes(plan, src, dtype):
    """max |x| per output, in float64 (exact for floats; integers rounded), from ReduceMax's and
    ReduceMin's kernels."""
    return np.maximum(np.abs(compute_direct(_MAX, plan, src, dtype).astype(np.float64)),
                      np.abs(compute_direct(_MIN, plan, src, dtype).astype(np.float64)))


def finished(reduction, plan, src, dtype):
    """ReduceL1 (ROUND), ReduceL2 (SQRT) or ReduceLogSum (LOG) of ``src`` on ``plan``: 1-D, in ``dtype``."""
    call = kernel_call(reduction, plan, dtype)
    if call is not None:  # one kernel call (_compute._finished_call), unless it leaves a float64 result undecided
        result = np.empty(plan.n_kept, dtype=RESULT_DTYPE.get(dtype, dtype))
        returned = call(src, result)
        if returned is None and call.finite:  # (the row kernels: their results checked here)
            returned = finishing.all_finite_above(result, call.lowest)
        if returned or not call.finite:
            return as_dtype(result, dtype)
    if dtype not in FLOAT_BITS:
        if reduction.finish == ROUND:
            return _int_l1(plan, src, dtype)
        if reduction.finish == SQRT:
            return _int_l2(plan, src, dtype)
        return _int_log_sum(plan, src, dtype)
    if reduction.finish == ROUND or dtype.char != "d":
        # chunk partials combined, finished and rounded once: the sum of |x| (float64: no partial sum of
        # |x| exceeds the whole, so none overflows on the way), or the square root or log of a float64
        # sum of narrower floats (no overflow, no bits lost in subnormal squares)
        result = np.empty(plan.n_kept, dtype=RESULT_DTYPE[dtype])
        float_sums_into(plan, src, reduction.term, result, finish=reduction.finish)
        return as_dtype(result, dtype)
    sums = _float64_sums(plan, src, reduction.term)
    # (overflow: a result beyond the dtype's range is inf, as IEEE rounding gives it)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if reduction.finish == SQRT:
            _check_l2_range(plan, src, dtype, sums)
            return np.sqrt(sums)
        logs = np.log(sums)
        if not finishing.all_finite_above(sums, -math.inf):
            # as a float64 sum (compute): partial sums of finite values may overflow where the whole
            # sum does not; the sum of x * 2**-64 cannot, and its log differs by 64 * ln 2
            rescaled = _float64_sums(plan, src, SUM, scale=SUM_RESCALE)
            logs = np.where(np.isfinite(sums), logs, np.log(rescaled) + 64 * _LN_2)
    return logs


def _check_l2_range(plan, src, dtype, sums):
    """Undecided where a float64 sum of squares overflowed or is small enough to have lost bits in
    subnormal squares (zero included: four 1e-200 square to 0), unless the data's largest magnitude
    says it is right: 0 (all zeros) or inf. Those outputs are computed scaled (_exact.l2)."""
    suspect = ~((sums >= L2_SMALLEST_SUM) & (sums < np.inf) | np.isnan(sums))
    if suspect.any():
        largest = _largest_magnitudes(plan, src, dtype)
        if np.any(suspect & (largest > 0) & (largest < np.inf)):
            raise Undecided


def _float64_sums(plan, src, term, scale=1.0):
    """The float64 sums of float64 data's ``term`` (x * scale, x * x) per output, unrounded: from the kernel
    a mean or sum of squares of the plan runs (rows, tiles, blocks, the general kernel with one
    chunk per output), its results stored into a float64 array; else from the general kernel's
    chunk partials, combined in chunk order."""
    sums = np.empty(plan.n_kept)
    call = float_call(plan, term, src.dtype, scale)
    if call is not None:
        call(src, sums)
        return sums
    total = np.empty(tasks(plan))
    comp = np.empty(tasks(plan))
    launch(table.FLOAT_SUMS[term], plan, term, *geometry(plan, src), plan.tile, scale, NO_MAXIMA, total, comp,
           1.0, 0, np.empty(0, dtype=src.dtype))
    finishing.finish_float_sums(total, comp, plan.nchunks, 1.0, 0, sums)
    return sums


def products(plan, src, dtype):
    """The product over each output's elements (1-D, in ``dtype``): with one chunk per output the
    products kernel's own finished results; otherwise from its partial states (kernels.products):
    floats the chunks' mantissas multiplied (each in [1, 2):
    no overflow for any number of chunks a plan has) and their exponents added, then one rounding;
    integers the chunks' wrapping uint64 products multiplied, modulo 2**64, and their low bits."""
    floats = dtype in FLOAT_BITS
    carrier = RESULT_DTYPE[dtype] if floats else dtype
    call = kernel_call(_PRODUCT, plan, dtype)
    if call is not None:  # one chunk per output: the kernel stores the finished results
        result = np.empty(plan.n_kept, dtype=carrier)
        call(src, result)
        return as_dtype(result, dtype)
    exponents = np.empty(tasks(plan), dtype=np.int64)
    mantissas = np.empty(tasks(plan) if floats else 0)
    launch(products_kernel(plan, dtype), plan, PRODUCT, *geometry(plan, src), plan.tile, mantissas,
           exponents, np.empty(0, dtype=carrier))
    if not floats:
        return np.multiply.reduce(exponents.view(np.uint64).reshape(plan.n_kept, plan.nchunks), axis=1).astype(dtype)
    fractions, exponents = product_states(mantissas.reshape(plan.n_kept, plan.nchunks),
                                          exponents.reshape(plan.n_kept, plan.nchunks))
    return finished_products(fractions, exponents, dtype)


def product_states(mantissas, exponents):
    """The (fraction in [1/2, 1), exponent) state of each row of (mantissa, exponent) partial products
    (2-D arrays): the mantissas multiplied in column order, each product renormalised (frexp is exact),
    so that no number of pieces overflows or underflows; the exponents added."""
    fractions = np.ones(mantissas.shape[0])
    total = np.zeros(mantissas.shape[0], dtype=np.int64)
    # (IEEE: 0 x inf is NaN; no warnings for it)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        for column in range(mantissas.shape[1]):
            fractions, more = np.frexp(fractions * mantissas[:, column])
            total += exponents[:, column] + more
    return fractions, total


def finished_products(fractions, exponents, dtype):
    """fraction * 2**exponent per output, rounded once to ``dtype`` (a result beyond its range is inf
    or 0, as IEEE rounding gives it)."""
    with np.errstate(over="ignore", under="ignore"):
        # (an exponent beyond +-4000 overflows or underflows float64 whatever the fraction)
        return np.ldexp(fractions, np.clip(exponents, -4000, 4000).astype(np.int32)).astype(dtype)


def _int_l1(plan, src, dtype):
    """The sum of |x| modulo 2**bits, from the kernels' chunk partials of the term int_l1_term picks
    (the one-call case is _compute._finished_call's)."""
    result = np.empty(plan.n_kept, dtype=dtype)
    int_sums_into(plan, src, int_l1_term(dtype), 1, result)
    return result


def _means_and_residues(plan, src, dtype):
    """Per output, q = trunc(S / n) of its exact integer sum S (the exact mean kernel) and S modulo
    2**bits (the wrapping sum kernel, as unsigned). Truncation toward zero puts S within n - 1 of n q,
    a range of 2 n - 1 values; with n <= 2**(bits - 1) the residue picks the one value of that range.
    Undecided (the rows are summed in Python) for larger n."""
    if plan.n_reduced > 1 << (8 * dtype.itemsize - 1):
        raise Undecided
    return compute_direct(_INT_MEAN, plan, src, dtype), compute_direct(_INT_SUM, plan, src, dtype).view(f"u{dtype.itemsize}")


def int_totals(plan, src, dtype):
    """The exact integer sum S of each output, as Python ints (_means_and_residues)."""
    return _totals(plan.n_reduced, *_means_and_residues(plan, src, dtype))


def _totals(n, quotients, residues):
    """The exact integer sums of ``n`` elements each, as Python ints, from their _means_and_residues."""
    modulus = 1 << (8 * residues.itemsize)
    return [n * q - (n - 1) + (r - n * q + (n - 1)) % modulus for q, r in zip(quotients.tolist(), residues.tolist())]


# From this many outputs an integer ReduceLogSum is finished in NumPy (_int_log_sum); below it NumPy's
# fixed cost per step is more than Python's per output
_LOG_SUMS_IN_NUMPY = 32


def _int_log_sum(plan, src, dtype):
    """trunc(ln S) of each output's exact integer sum S; ValueError where one is <= 0.

    With many outputs, S = n q + d in NumPy (_means_and_residues): d + n - 1 = (r - n q + n - 1)
    modulo 2**bits, in wrapping unsigned arithmetic, so |d| < n with the sign of S; S <= 0 exactly
    where q n + d in float64 is; the log of that (three roundings: still within 1e-15 of ln S), and S
    as a Python int only where the log is within rounding of an integer (_exact.floor_ln): Python ints
    for every output would cost more than the rest of the call."""
    n = plan.n_reduced
    quotients, residues = _means_and_residues(plan, src, dtype)
    if plan.n_kept < _LOG_SUMS_IN_NUMPY:
        totals = _totals(n, quotients, residues)
        if any(s <= 0 for s in totals):
            raise _exact.log_sum_not_positive(dtype)
        return _exact.trunc_ln(totals).astype(dtype)
    unsigned = residues.dtype.type
    offsets = (residues - quotients.astype(residues.dtype) * unsigned(n) + unsigned(n - 1)).astype(np.int64) - (n - 1)
    quotients = quotients.astype(np.uint64 if dtype.kind == "u" else np.int64)
    approximations = quotients.astype(np.float64) * float(n) + offsets
    if np.any(approximations <= 0):
        raise _exact.log_sum_not_positive(dtype)
    return _exact.floor_ln(approximations, lambda i: n * int(quotients[i]) + int(offsets[i])).astype(dtype)


# Below this many elements, the largest |x| of an integer input's memory is NumPy's (its min and max):
# a kernel (kernels.rows.int_largest_magnitudes) would be compiled for a first call that does not
# need it, and lengthen that call. From it on, that kernel finds it in one parallel pass over the
# memory, faster than ReduceMin's and ReduceMax's kernels.
_LARGEST_BY_KERNEL_MIN = 1 << 18
# pieces of the memory per thread in that kernel
_LARGEST_PIECES_PER_THREAD = 4


def _largest_magnitude(src):
    """max |x| over all of ``src`` (an integer input's memory), as a Python int."""
    if src.size < _LARGEST_BY_KERNEL_MIN:
        return max(-int(src.min()), int(src.max()))
    piece = -(-src.size // (_LARGEST_PIECES_PER_THREAD * get_num_threads()))
    largest = np.empty(-(-src.size // piece), dtype=np.uint64)  # (no piece empty, whatever the thread count)
    run(table.KERNELS["int_largest_magnitudes"], True, src, piece, largest)
    return int(largest.max())


def squares_fit(plan, src, dtype):
    """Whether every output's exact integer sum of squares is below 2**64, so that the wrapping sum
    of squares modulo 2**64 (int_square_sums) is that sum. max|x| is first bounded over all of src's
    memory (_largest_magnitude; src may hold elements between the input's own, which can only raise
    the bound), and only where that bound is too large per output, by ReduceMax's and ReduceMin's
    kernels: data of moderate magnitude compiles and runs no maxima kernels."""
    n = plan.n_reduced
    info = np.iinfo(dtype)
    if n * max(info.max, -info.min) ** 2 < 1 << 64:  # whatever the data (int32: up to 3 elements)
        return True
    if n * _largest_magnitude(src) ** 2 < 1 << 64:
        return True
    largest = _largest_magnitudes(plan, src, dtype)
    # float64 rounds the bound by a relative 2**-52 at most, three times: a margin of 2**-40
    return bool(np.all(n * largest * largest < 2.0**64 * (1 - 2.0**-40)))


def int_square_sums(plan, src, dtype):
    """The integer sum of squares of each output modulo 2**64, as uint64 (exact where squares_fit).
    The kernels square and add in uint64; 32-bit data's results go to a uint64 array of their own
    (ReduceSumSquare stores only their low 32 bits), so that every int32 or uint32 L2 whose sum of
    squares is below 2**64, all of those whose result fits, is decided here and not in Python."""
    if dtype.itemsize == 8:
        return compute_direct(_INT_SQUARES, plan, src, dtype).view(np.uint64)
    sums = np.empty(plan.n_kept, dtype=np.uint64)
    int_sums_into(plan, src, SQUARES, 1, sums)
    return sums


def _int_l2(plan, src, dtype):
    """isqrt of the exact integer sum of squares of each output: from the wrapping sum of squares,
    which is that sum where it fits (squares_fit); elsewhere Undecided: the rows are summed in
    Python (_exact.l2). ValueError where a root does not fit the dtype (int32: 2**31 and above)."""
    if not squares_fit(plan, src, dtype):
        raise Undecided
    squares = int_square_sums(plan, src, dtype)
    roots = np.empty(squares.size, dtype=dtype)
    if not finishing.finish_int_roots(squares, root_max(dtype), roots):
        raise _exact.l2_does_not_fit(dtype)
    return roots
