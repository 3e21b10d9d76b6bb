"""Partial states of whole reductions: reduce pieces of the data apart, combine their states, finish.

A reduction of data cut into pieces (the blocks of a Dask array, numred._dask) is, per output, the
partial state of each piece (``chunk_states``), the states combined in any grouping and order
(``combine_states``), and one finish step with the one rounding to the output dtype
(``finish_states``). The states are the accumulators of the kernels (kernels.states), computed by the
same kernels as an in-memory call and combined by the same rules:

===============================  =======================================  =============================
operators and dtypes             state per output                         combine
===============================  =======================================  =============================
float Mean, Sum, SumSquare, L1,  float64 (total, comp) of the term's sum, compensated addition
L2, LogSum                       and a power-of-two scale exponent        (kernels.finish.
                                 (float64 only: 0, or where a float64 sum combine_sum_states) under the
                                 overflowed or lost bits, the scaled one) larger scale
float LogSumExp                  (max, total, comp): the compensated sum  kernels.states.
                                 of exp(x - max)                          combine_exp_sums
float Prod                       (fraction in [1/2, 1), exponent)         fractions multiplied,
                                                                          exponents added
integer Mean, LogSum, L2         the exact sum (L2: of squares), a        exact addition
                                 Python int
integer LogSumExp                (max, float64 sum of exp(x - max))       sums scaled to the larger max
Max, Min; integer Sum, Prod, L1, the operator's own result on the piece   the operator again (Sum for
SumSquare                        (exact, or exact modulo 2**bits)         L1 and SumSquare)
===============================  =======================================  =============================

Integer, Max and Min results are therefore identical to the in-memory ones for any cut. Float
results carry float64 sums with their compensation and are rounded once, at the end. An integer
log-sum-exp that float64 cannot decide (kernels.integers._int_log_sum_exp) needs the elements near
each undecided output's max: ``exp_distances`` collects them in a second pass (numred._dask).

States travel as NumPy arrays in the keepdims shape of the piece's result (structured dtypes, or
dtype object for Python ints), so that pieces concatenate along the reduced axes.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import _derived, _exact
from ._compute import NO_MAXIMA, SUM_RESCALE, _maxima, as_dtype, geometry, products_kernel, tasks
from ._plan import make_plan
from ._reduction import (ABS, CARRIERS, EXP, FLOAT_BITS, INT_WIDENING, KEY, LOG, PRODUCT, RESULT_DTYPE, SQRT,
                         SQUARES, SUM, Undecided, add_bfloat16, int_log_sum_exp_overflow)
from ._registry import OPS_BY_NAME, Op
from ._runtime import run
from .kernels import finish, table
from .kernels.serial import L2_SMALLEST_SUM

# state kinds
SUMS, EXP_SUMS, PRODUCTS, EXACT_SUMS, INT_EXP_SUMS, RESULTS = (
    "sums", "exp sums", "products", "exact sums", "int exp sums", "results")

_SUMS = np.dtype([("scale", np.int64), ("total", np.float64), ("comp", np.float64)])
_EXP_SUMS = np.dtype([("max", np.float64), ("total", np.float64), ("comp", np.float64)])
_PRODUCTS = np.dtype([("fraction", np.float64), ("exponent", np.int64)])
_OBJECT = np.dtype(object)
# ReduceL1 and ReduceSumSquare of integers: their pieces' results (modulo 2**bits) add up
_COMBINED_BY = {"reduce_l1": "reduce_sum", "reduce_sum_square": "reduce_sum"}


def state_kind(op: Op, dtype: np.dtype) -> str:
    """Which partial state ``op`` keeps for data of ``dtype`` (the table above)."""
    if dtype.name == "bfloat16":  # (a worker process may meet bfloat16 first in a combine step)
        add_bfloat16()
    term, floats = op.reduction.term, dtype in FLOAT_BITS
    if not floats and not op.reduction.int_kernels:
        raise TypeError(f"{op.onnx_name}: integer Dask arrays are not supported (its integers are computed "
                        "exactly, in memory only); call .compute() first")
    if term == KEY or (not floats and op.reduction.int_wraps) or (not floats and term == PRODUCT):
        return RESULTS
    if term == PRODUCT:
        return PRODUCTS
    if term == EXP:
        return EXP_SUMS if floats else INT_EXP_SUMS
    return SUMS if floats else EXACT_SUMS


def state_dtype(op: Op, dtype: np.dtype) -> np.dtype:
    kind = state_kind(op, dtype)
    if kind == INT_EXP_SUMS:
        return np.dtype([("max", INT_WIDENING[dtype][0]), ("total", np.float64)])
    return {SUMS: _SUMS, EXP_SUMS: _EXP_SUMS, PRODUCTS: _PRODUCTS, EXACT_SUMS: _OBJECT, RESULTS: dtype}[kind]


def _identity(op, dtype, shape):
    """The state of a piece with no elements: it combines to the other state unchanged."""
    states = np.empty(shape, dtype=state_dtype(op, dtype))
    kind = state_kind(op, dtype)
    if kind == SUMS:
        states["scale"], states["total"], states["comp"] = 0, 0.0, 0.0
    elif kind == EXP_SUMS:
        states["max"], states["total"], states["comp"] = -np.inf, 0.0, 0.0
    elif kind == PRODUCTS:
        states["fraction"], states["exponent"] = 0.5, 1  # 1.0
    elif kind == EXACT_SUMS:
        states[...] = 0
    elif kind == INT_EXP_SUMS:
        states["max"], states["total"] = np.iinfo(states["max"].dtype).min, 0.0
    else:
        states[...] = _reduce(op, np.empty((0,), dtype=dtype), (0,))
    return states


def _reduce(op, x, axes):
    """``op`` of ``x`` (native byte order) over ``axes`` in memory, keepdims, by the engine's driver:
    the states of RESULTS (maxima, minima and wrapping integer results, which no kernel leaves
    undecided) and the results over empty sets."""
    out_shape = _kept_shape(x.shape, axes)
    if x.size == 0:
        return np.empty(out_shape, x.dtype) if 0 in out_shape else op.empty_result(x.dtype, out_shape)
    carrier = CARRIERS.get(x.dtype, x.dtype)  # (int8 and uint8, of ReduceMax and ReduceMin, are their own)
    plan, src = make_plan(x if carrier == x.dtype else x.view(carrier), tuple(sorted(axes)))
    return _derived.compute(op.reduction, plan, src, x.dtype).reshape(out_shape)


def _kept_shape(shape, axes):
    return tuple(1 if a in axes else n for a, n in enumerate(shape))


# ---- the chunk step -------------------------------------------------------------------------------

def chunk_states(op: Op, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The partial states of ``op`` over ``axes`` of ``x`` (a NumPy array of a dtype op supports,
    axes normalised and not empty), in the keepdims shape of its result."""
    x = np.asarray(x)
    dtype = x.dtype
    out_shape = _kept_shape(x.shape, axes)
    kind = state_kind(op, dtype)  # (first: it registers bfloat16)
    if kind == RESULTS:
        return _reduce(op, x, axes)
    if x.size == 0:
        return _identity(op, dtype, out_shape)
    carrier = CARRIERS[dtype]
    plan, src = make_plan(x if carrier == dtype else x.view(carrier), axes)
    if kind == SUMS:
        states = _float_states(op, plan, src, dtype, lambda: _rows(x, axes))
    elif kind == EXP_SUMS:
        maxima = _maxima(_parallel(plan), src, dtype)
        total, comp = _term_sums(plan, src, EXP, dtype, maxima=maxima)
        states = np.empty(plan.n_kept, dtype=_EXP_SUMS)
        states["max"], states["total"], states["comp"] = maxima, total, comp
    elif kind == PRODUCTS:
        states = _product_states(plan, src, dtype)
    elif kind == EXACT_SUMS:
        states = _exact_states(op, plan, src, dtype, lambda: _rows(x, axes))
    else:
        states = _int_exp_states(plan, src, dtype)
    return states.reshape(out_shape)


def _parallel(plan):
    """The plan with its kernels' parallel variants: a piece of a Dask array is worth a launch, and
    the serial variants of the general kernels would be compiled for it alone."""
    return dataclasses.replace(plan, parallel=True)


def _rows(x, axes):
    """Each output's elements in a row (a copy where the layout needs one): for the rare outputs
    that exact arithmetic in Python decides."""
    kept = x.ndim - len(axes)
    return np.moveaxis(x, axes, range(kept, x.ndim)).reshape(-1, math.prod(x.shape[a] for a in axes))


def _term_sums(plan, src, term, dtype, scale=1.0, maxima=NO_MAXIMA):
    """(total, comp) per output: the compensated float64 sum of the term, from the general kernel's
    chunk partials (the parallel variant for every plan: a piece of a Dask array is worth a launch)."""
    partial_total = np.empty(tasks(plan))
    partial_comp = np.empty(tasks(plan))
    run(table.KERNELS[table.FLOAT_SUMS[term]], True, *geometry(plan, src), plan.tile, scale, maxima, partial_total,
        partial_comp, 1.0, 0, np.empty(0, dtype=RESULT_DTYPE[dtype]))
    total = np.empty(plan.n_kept)
    comp = np.empty(plan.n_kept)
    finish.combine_sum_states(partial_total, partial_comp, plan.nchunks, total, comp)
    return total, comp


def _float_states(op, plan, src, dtype, rows):
    reduction = op.reduction
    states = np.zeros(plan.n_kept, dtype=_SUMS)
    states["total"], states["comp"] = _term_sums(plan, src, reduction.term, dtype)
    if dtype.char != "d" or reduction.term == ABS or (reduction.term == SQUARES and reduction.finish != SQRT):
        # no partial sum of |x| exceeds the whole; a sum of squares is what float64 gives, as in memory
        return states
    total = states["total"]
    if reduction.term == SUM:
        # as in memory (numred._derived.compute): where a float64 sum is not finite, the sum of x * 2**-64
        # cannot overflow; a sum that overflowed the other way becomes the infinity it holds
        again = ~np.isfinite(total)
        if again.any():
            scaled_total, scaled_comp = _term_sums(plan, src, SUM, dtype, scale=SUM_RESCALE)
            states["scale"][again] = 64
            states["total"][again], states["comp"][again] = scaled_total[again], scaled_comp[again]
        return states
    # float64 L2 (as _derived._check_l2_range): sums of squares that overflowed or may have lost bits
    # in subnormal squares, and are not explained by a largest magnitude of 0 or inf, are computed
    # again scaled by a power of two (as _exact.l2): sum((x * 2**-e)**2), e the largest's exponent
    again = ~((total >= L2_SMALLEST_SUM) & (total < np.inf) | np.isnan(total))
    if again.any():
        largest = _derived._largest_magnitudes(plan, src, dtype)
        again &= (largest > 0) & (largest < np.inf)
    if again.any():
        sums, exponents = _exact.scaled_square_sums(rows()[again])
        states["scale"][again] = 2 * exponents
        states["total"][again], states["comp"][again] = sums, 0.0
    return states


def _product_states(plan, src, dtype):
    """(fraction, exponent) per output from the products kernel's partials (kernels.products)."""
    exponents = np.empty(tasks(plan), dtype=np.int64)
    mantissas = np.empty(tasks(plan))
    run(table.KERNELS[products_kernel(plan, dtype)], True, *geometry(plan, src), plan.tile, mantissas, exponents,
        np.empty(0, dtype=RESULT_DTYPE[dtype]))
    return _packed_products(*_derived.product_states(mantissas.reshape(plan.n_kept, plan.nchunks),
                                                     exponents.reshape(plan.n_kept, plan.nchunks)))


def _packed_products(fractions, exponents):
    states = np.empty(fractions.size, dtype=_PRODUCTS)
    states["fraction"], states["exponent"] = fractions, exponents
    return states


def _exact_states(op, plan, src, dtype, rows):
    """The exact sum (L2: of squares) per output, as Python ints in an object array."""
    states = np.empty(plan.n_kept, dtype=_OBJECT)
    if op.reduction.term == SQUARES:
        if _derived.squares_fit(plan, src, dtype):
            states[:] = _derived.int_square_sums(plan, src, dtype).tolist()
        else:
            states[:] = _exact.sums_of_squares(rows())
        return states
    try:
        states[:] = _derived.int_totals(plan, src, dtype)
    except Undecided:  # more elements per output than the residues decide: summed in Python
        states[:] = _exact.row_sums(rows())
    return states


def _int_exp_states(plan, src, dtype):
    """(max, float64 sum of exp(x - max)) per output, from the kernels of the in-memory call."""
    maxima = _maxima(_parallel(plan), src, dtype)
    partial_total = np.empty(tasks(plan))
    run(table.KERNELS["int_sum_exp"], True, *geometry(plan, src), plan.tile, maxima, partial_total, plan.n_reduced,
        INT_WIDENING[dtype][1], np.empty(plan.n_kept, dtype=maxima.dtype), np.empty(plan.n_kept, dtype=np.bool_))
    states = np.empty(plan.n_kept, dtype=state_dtype(OPS_BY_NAME["reduce_log_sum_exp"], dtype))
    states["max"] = maxima
    states["total"] = partial_total.reshape(plan.n_kept, plan.nchunks).sum(axis=1)
    return states


# ---- the combine step -----------------------------------------------------------------------------

def combine_states(op: Op, dtype: np.dtype, states: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The states of ``states`` (pieces side by side along ``axes``) combined along ``axes``, in
    the keepdims shape."""
    out_shape = _kept_shape(states.shape, axes)
    kind = state_kind(op, dtype)
    if kind == RESULTS:
        return _reduce(OPS_BY_NAME[_COMBINED_BY.get(op.name, op.name)], states, axes)
    if states.size == 0:
        return _identity(op, dtype, out_shape)
    rows = _rows(states, axes)
    return _combined_rows(op, dtype, kind, rows).reshape(out_shape)


def _combined_rows(op, dtype, kind, rows):
    n_out, pieces = rows.shape
    if kind == EXACT_SUMS:
        return rows.sum(axis=1, dtype=_OBJECT) if pieces else np.zeros(n_out, dtype=_OBJECT)
    if kind == PRODUCTS:
        return _packed_products(*_derived.product_states(rows["fraction"], rows["exponent"]))
    combined = np.empty(n_out, dtype=rows.dtype)
    if kind == EXP_SUMS:
        m, t, c = (np.ascontiguousarray(rows[name]).ravel() for name in ("max", "total", "comp"))
        # (the kernels write contiguous arrays: the fields of a structured array are strided views,
        # another signature to compile)
        maxima, total, comp = np.empty(n_out), np.empty(n_out), np.empty(n_out)
        finish.combine_exp_states(m, t, c, pieces, maxima, total, comp)
        combined["max"], combined["total"], combined["comp"] = maxima, total, comp
        return combined
    if kind == INT_EXP_SUMS:
        combined["max"] = top = rows["max"].max(axis=1)
        # exp(max - top) of the exact (uint64) distance: exp(0) = 1 for the piece of the max
        distances = (top[:, None].astype(np.uint64) - rows["max"].astype(np.uint64)).astype(np.float64)
        combined["total"] = np.sum(rows["total"] * np.exp(-distances), axis=1)
        return combined
    # SUMS: under the largest scale of the pieces with a non-zero sum (scaling the others down is exact,
    # or drops what is far below the rounding of the result)
    scales = rows["scale"]
    nonzero = rows["total"] != 0
    scale = np.where(nonzero.any(axis=1), np.max(np.where(nonzero, scales, np.iinfo(np.int64).min), axis=1), 0)
    _combine_scaled(rows, scale, combined)
    # finite float64 sums whose sum overflows: again under a scale 2**64 larger, which it cannot
    # overflow (a sum that overflowed the other way becomes the infinity it holds)
    again = ~np.isfinite(combined["total"]) & np.isfinite(rows["total"]).all(axis=1)
    if again.any():
        retried = np.empty(int(again.sum()), dtype=rows.dtype)
        _combine_scaled(rows[again], scale[again] + 64, retried)
        combined[again] = retried
    return combined


def _combine_scaled(rows, scale, combined):
    """combined = the sum states of ``rows`` (2-D) under ``scale`` (per row): each piece scaled by
    2**(its scale - scale), exact or far below the result's rounding, then added compensated."""
    shift = (rows["scale"] - scale[:, None]).astype(np.int32)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        total = np.ascontiguousarray(np.ldexp(rows["total"], shift)).ravel()
        comp = np.ascontiguousarray(np.ldexp(rows["comp"], shift)).ravel()
    combined["scale"] = scale
    out_total, out_comp = np.empty(len(rows)), np.empty(len(rows))
    finish.combine_sum_states(total, comp, rows.shape[1], out_total, out_comp)
    combined["total"], combined["comp"] = out_total, out_comp


# ---- the finish step ------------------------------------------------------------------------------

def finish_states(op: Op, dtype: np.dtype, states: np.ndarray, axes: tuple[int, ...], n_reduced: int,
                  keepdims: bool) -> np.ndarray:
    """The results of ``op`` from the states of all pieces of each output, side by side along
    ``axes``: ``n_reduced`` elements reduced per output; the reduced axes kept with ``keepdims``."""
    kind = state_kind(op, dtype)
    if n_reduced == 0:  # the contract's value for an empty set (the front end's)
        result = np.broadcast_to(_reduce(op, np.empty((0,), dtype=dtype), (0,)), _kept_shape(states.shape, axes)).copy()
    elif kind == RESULTS:
        result = combine_states(op, dtype, states, axes)
    else:
        combined = combine_states(op, dtype, states, axes)
        result = _finished(op, dtype, kind, combined.ravel(), n_reduced).reshape(combined.shape)
    return result if keepdims else result.reshape([n for a, n in enumerate(result.shape) if a not in axes])


def _finished(op, dtype, kind, states, n_reduced):
    reduction = op.reduction
    if kind == EXACT_SUMS:
        totals = states.tolist()
        if reduction.finish == SQRT:
            roots = [math.isqrt(s) for s in totals]
            if roots and max(roots) > np.iinfo(dtype).max:
                raise _exact.l2_does_not_fit(dtype)
            return np.array(roots, dtype=dtype)
        if reduction.finish == LOG:
            if any(s <= 0 for s in totals):
                raise _exact.log_sum_not_positive(dtype)
            return _exact.trunc_ln(totals).astype(dtype)
        return np.array([abs(s) // n_reduced * (1 if s >= 0 else -1) for s in totals], dtype=dtype)  # a mean
    if kind == PRODUCTS:
        return _derived.finished_products(states["fraction"], states["exponent"], dtype)
    result = np.empty(states.size, dtype=RESULT_DTYPE[dtype])
    if kind == EXP_SUMS:
        finish.finish_float_log_sum_exp(np.ascontiguousarray(states["total"]), np.ascontiguousarray(states["comp"]),
                                        1, np.ascontiguousarray(states["max"]), result)
        return as_dtype(result, dtype)
    if kind == INT_EXP_SUMS:
        raise AssertionError("integer log-sum-exp states finish in two steps (int_exp_candidates)")
    divisor = float(n_reduced) if reduction.mean else 1.0
    step = reduction.finish or 0
    total, comp = np.ascontiguousarray(states["total"]), np.ascontiguousarray(states["comp"])
    finish.finish_float_sums(total, comp, 1, divisor, step, result)
    scaled = states["scale"] != 0
    if scaled.any():  # float64 only: the value is (total + comp) * 2**scale
        value = np.where(np.isfinite(total[scaled]), total[scaled] + comp[scaled], total[scaled])  # (compensated_value)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if step == SQRT:
                result[scaled] = np.ldexp(np.sqrt(value), states["scale"][scaled] // 2)
            elif step == LOG:
                result[scaled] = np.log(value) + states["scale"][scaled] * _derived._LN_2
            else:
                result[scaled] = np.ldexp(value / divisor, states["scale"][scaled].astype(np.int32))
    return as_dtype(result, dtype)


# ---- integer log-sum-exp: float64 first, exactly where that cannot decide ---------------------------

def candidate_dtype(dtype: np.dtype) -> np.dtype:
    """(the max, the result where float64 decides it, whether it does) per output."""
    return np.dtype([("max", INT_WIDENING[dtype][0]), ("result", INT_WIDENING[dtype][0]), ("decided", np.bool_)])


def int_exp_candidates(dtype, states, axes, n_reduced):
    """The integer log-sum-exps that float64 decides, from the states of all pieces (keepdims shape);
    the others (a log within rounding of an integer, or a result that does not fit) are decided by
    ``decide_int_exp`` from ``exp_distances``."""
    combined = combine_states(OPS_BY_NAME["reduce_log_sum_exp"], dtype, states, axes)
    flat = combined.ravel()
    candidates = np.empty(flat.size, dtype=candidate_dtype(dtype))
    candidates["max"] = flat["max"]
    result = np.empty(flat.size, dtype=INT_WIDENING[dtype][0])
    decided = np.empty(flat.size, dtype=np.bool_)
    finish.finish_int_log_sum_exp(np.ascontiguousarray(flat["max"]), np.ascontiguousarray(flat["total"]), 1,
                                  n_reduced, INT_WIDENING[dtype][1], result, decided)
    candidates["result"], candidates["decided"] = result, decided
    return candidates.reshape(combined.shape)


def exp_distances(x, candidates, axes):
    """Per output of ``x`` (keepdims shape, object): None where its candidate is decided, else a dict
    {max - element: count} of the piece's elements, with the max of all pieces."""
    out = np.full(candidates.shape, None, dtype=_OBJECT)
    undecided = np.flatnonzero(~candidates["decided"].ravel())
    if undecided.size:
        rows = _rows(np.asarray(x), axes)
        tops = candidates["max"].ravel()
        flat = out.reshape(-1)
        for i in undecided:
            values, counts = _exact.distance_counts(rows[i], tops[i])
            flat[i] = dict(zip(values.tolist(), counts.tolist()))
    return out


def merge_distances(distances, axes):
    """The distance counts of pieces side by side along ``axes``, merged (keepdims shape)."""
    rows = _rows(distances, axes)
    out = np.full(rows.shape[0], None, dtype=_OBJECT)
    for i, row in enumerate(rows):
        if row[0] is not None:
            merged: dict = {}
            for counts in row:
                for d, c in counts.items():
                    merged[d] = merged.get(d, 0) + c
            out[i] = merged
    return out.reshape(_kept_shape(distances.shape, axes))


def decide_int_exp(dtype, candidates, distances, n_reduced):
    """The integer log-sum-exps (candidates' shape), the undecided ones exactly from their distance
    counts; ValueError where one does not fit the dtype."""
    flat_candidates = candidates.ravel()
    result = flat_candidates["result"].copy()
    undecided = np.flatnonzero(~flat_candidates["decided"])
    if undecided.size:
        flat = distances.ravel()
        whole = np.array([_exact.floor_log_of_counts(np.array(list(flat[i].keys()), dtype=np.uint64),
                                                     np.array(list(flat[i].values())))
                          for i in undecided], dtype=np.int64)
        exact = _exact.truncated_log_sum_exp(flat_candidates["max"][undecided].astype(dtype), whole, n_reduced)
        if exact is None:
            raise int_log_sum_exp_overflow(dtype)
        result[undecided] = exact
    return result.astype(dtype).reshape(candidates.shape)
