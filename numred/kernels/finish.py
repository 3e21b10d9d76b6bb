"""Serial finishing of chunked reductions: the partial states of each output's chunks combined in
chunk order through the rules of ``states``, then finished and stored.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import entry, subroutine
from .base import _U64
from .integers import _int_log_sum_exp, _int_mean, isqrt64
from .maxima import key_to_float64
from .states import combine_exp_sums, combine_maxima, combine_sums, combine_wide, combine_wrapping, compensated_value
from .store import finished, store_rounded


@subroutine(fastmath=False)
def _combined_sum(out_total, out_comp, k, nchunks):
    """The compensated sum of the chunk partials of output k, in chunk order."""
    total = 0.0
    comp = 0.0
    for c in range(k * nchunks, (k + 1) * nchunks):
        total, comp = combine_sums(total, comp, out_total[c], out_comp[c])
    return compensated_value(total, comp)


@entry
def combine_sum_states(out_total, out_comp, nchunks, total, comp):
    """(total[k], comp[k]): the compensated sum states of output k's ``nchunks`` partial states, in
    chunk order: the state of a piece of data whose pieces were reduced apart (numred._partials)."""
    for k in range(total.size):
        t = 0.0
        c = 0.0
        for j in range(k * nchunks, (k + 1) * nchunks):
            t, c = combine_sums(t, c, out_total[j], out_comp[j])
        total[k] = t
        comp[k] = c


@entry
def combine_exp_states(out_max, out_total, out_comp, nchunks, maxima, total, comp):
    """(maxima[k], total[k], comp[k]): output k's ``nchunks`` (max, sum of exp(x - max)) states as
    one (numred._partials)."""
    for k in range(total.size):
        m = -math.inf
        t = 0.0
        c = 0.0
        for j in range(k * nchunks, (k + 1) * nchunks):
            m, t, c = combine_exp_sums(m, t, c, out_max[j], out_total[j], out_comp[j])
        maxima[k] = m
        total[k] = t
        comp[k] = c


@entry
def finish_float_sums(out_total, out_comp, nchunks, divisor, finish, result):
    """result[k] = (sum of the partials of output k) / divisor, rounded once to result's dtype
    (store_rounded: float32 and float64, or the bits of float16 and bfloat16)."""
    for k in range(result.size):
        store_rounded(result, k, finished(_combined_sum(out_total, out_comp, k, nchunks) / divisor, finish))


@entry(fastmath={"reassoc"})  # to vectorise; without nnan and nsz, LLVM keeps value * 0.0
def all_finite_above(values, lowest):
    """Whether every float64 of ``values`` is finite and above ``lowest`` (-inf: finite): the check a
    float64 mean's results pass (an overflowing sum is retried rescaled), and float64 ReduceL2's
    from the row kernels (a square root at or below L2_SMALLEST_RESULT may come from subnormal
    squares). value * 0.0 is 0.0 for a finite value and NaN for inf or NaN. Reassociation may at
    most turn the sum into (sum of values) * 0.0, which sees every inf and NaN too and may raise a
    false alarm on an overflowing sum: a needless retry, never a missed one. The bound is a count in
    integer lanes, which vectorises too. np.isfinite(values).all() right after a parallel kernel
    would cost more than this one compiled check."""
    zeros = 0.0
    for i in range(values.size):
        zeros += values[i] * 0.0
    if zeros != 0.0:
        return False
    if lowest == -math.inf:
        return True
    at_or_below = 0
    for i in range(values.size):
        at_or_below += values[i] <= lowest
    return at_or_below == 0


@entry
def finish_max(out_max, nchunks, result):
    """Per-output max of integer data from the tasks' maxima (combine_maxima, no NaNs)."""
    for k in range(result.size):
        best = out_max[k * nchunks]
        for c in range(k * nchunks + 1, (k + 1) * nchunks):
            best = combine_maxima(best, 0, out_max[c], 0)[0]
        result[k] = best


@entry
def finish_float_max(out_max, out_nans, nchunks, flip, carrier, result):
    """Per-output float64 max from the tasks' float_keys and NaN flags (NaN wins); keys flipped by
    ``flip`` (kernels.maxima.flipped; -1 for a min) are flipped back after the max of the chunks."""
    for k in range(result.size):
        best = out_max[k * nchunks]
        nans = out_nans[k * nchunks]
        for c in range(k * nchunks + 1, (k + 1) * nchunks):
            best, nans = combine_maxima(best, nans, out_max[c], out_nans[c])
        result[k] = np.nan if nans else key_to_float64(best ^ flip, carrier)


@entry
def finish_float_log_sum_exp(out_total, out_comp, nchunks, maxima, result):
    """max + log(sum of exp(x - max)), rounded once to result's dtype; a non-finite max (NaN, +inf,
    or -inf for an all -inf set) is the answer itself."""
    for k in range(result.size):
        m = maxima[k]
        total = _combined_sum(out_total, out_comp, k, nchunks)
        store_rounded(result, k, m + math.log(total) if math.isfinite(m) else m)


@entry
def finish_int_mean(out_low, out_high, nchunks, count, result):
    """Exact mean truncated toward zero, as uint64 two's-complement bits."""
    count = _U64(count)
    for k in range(result.size):
        low = _U64(0)
        high = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            low, high = combine_wide(low, high, out_low[c], out_high[c])
        result[k] = _int_mean(low, high, count)


@entry
def finish_int_squares(out_low, nchunks, result):
    for k in range(result.size):
        total = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            total = combine_wrapping(total, out_low[c])
        result[k] = total


@entry
def finish_int_roots(squares, root_max, result):
    """result[k] = isqrt(squares[k]) (uint64 sums of squares, exact ones): integer ReduceL2's roots.
    Returns whether every root is at most ``root_max`` (a uint64), i.e. fits the dtype. (NumPy's
    float64 square roots, corrected by one up or down, would cost a fixed overhead even on small
    inputs, and more passes on large ones.)"""
    fits = True
    for k in range(squares.size):
        root = isqrt64(squares[k])
        result[k] = root
        fits = fits and root <= root_max
    return fits


@entry
def finish_int_log_sum_exp(maxima, out_total, nchunks, count, type_max, result, fits):
    """result[k], fits[k] from the chunk partials of output k (_int_log_sum_exp)."""
    for k in range(result.size):
        total = 0.0
        for c in range(k * nchunks, (k + 1) * nchunks):
            total += out_total[c]
        result[k], fits[k] = _int_log_sum_exp(maxima[k], total, count, type_max)
