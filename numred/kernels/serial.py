"""The serial family: a whole small reduction (below the parallel threshold) in one compiled call.

Each kernel walks the plan's outputs in order; per output, the reduced elements run by run along the
innermost reduced axis (``_next_run``); with a tile (a leading reduced axis over contiguous kept
elements) it adds whole reduced rows of ``tile`` neighbouring outputs into one accumulator per
output, so that memory is read in order. It finishes each output and stores it rounded once.

Accumulators, by operator and data (the contract's, as in ``numred._compute``):

| kernel              | data                       | accumulator                                            |
|---------------------|----------------------------|--------------------------------------------------------|
| float_sums          | float16, bfloat16, float32 | float64 per run; runs added compensated (Neumaier)     |
| float_sums          | float64                    | runs: as in twice the precision (_float64_lanes);      |
|                     |                            | tiles: plain per BLOCK rows, folded compensated        |
| int_sums, mean      | 32- and 64-bit integers    | exact: sums of 32-bit halves, then 128 bits            |
| int_sums, squares   | 32- and 64-bit integers    | uint64, wrapping                                       |
| int_l2              | 32- and 64-bit integers    | uint64 sum of squares and max |x|: exact below 2**64   |
| float_log_sum_exp   | every float                | max of integer keys (NaN wins), then float64 sum of    |
|                     |                            | exp(x - max)                                           |
| int_log_sum_exp     | every integer              | exact max, float64 sum of exp(x - max) by distance     |
| extrema             | every dtype                | max of keys flipped for a min (maxima.flipped); float  |
|                     |                            | data: integer keys of its bits, NaN wins               |

Kernels are made per (term, float64 data or not): a float32 kernel holds no split-sum code. The
table below is filled lazily, so that a first call compiles one kernel for one dtype.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from .jit import entry, subroutine
from .base import (BLOCK, FASTMATH, TERM_NAMES, SQRT, SUM, SUM_ABS, _borrowed, _n_tasks, _next_run, _offset_of, _task,
                   _view, _walker, inlined, zeroed_array, larger, smaller)
from .decode import as_bits, as_float64, as_wide
from .exp import exp_nonpositive
from .integers import (INT_TERMS, _add_halves128, _int_exp_run, _int_log_sum_exp, _int_mean, high_half, isqrt64,
                       squares_and_largest_run, term_bits)
from .maxima import flipped, key_to_float64, lowest_key, magnitude_bits, short_max_run
from .states import add_compensated, compensated_value
from .store import finished, store_rounded


@inlined
@njit(fastmath=False)
def _output_max(src, origin, nr, rshape, rstrides, step, float_bits, flip):
    """(best, top_magnitude) over one output's runs, as max_run: its max key flipped by ``flip``
    (maxima.flipped) and, for float keys (``float_bits``), the largest magnitude_bits (NaN detection).
    The log-sum-exps' max and the extrema kernels walk an output this one way."""
    best = lowest_key(src[origin])
    top_magnitude = magnitude_bits(best) if float_bits else best
    pos = 0
    while pos < nr:
        offset, n = _next_run(pos, nr, rshape, rstrides)
        best, top_magnitude = short_max_run(src, origin + offset, n, step, float_bits, best, top_magnitude, flip)
        pos += n
    return best, top_magnitude


_U64 = np.uint64
_LOW_HALF = np.uint64(0xFFFFFFFF)


# Plain float64 sums of one run, one function per term (each vectorises with reassociation).
@subroutine(fastmath=FASTMATH)
def _sum_run(src, offset, n, step, scale):
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += as_float64(run[i]) * scale
    else:
        for i in range(n):
            total += as_float64(src[offset + i * step]) * scale
    return total


@subroutine(fastmath=FASTMATH)
def _term_run(src, offset, n, step):
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            v = as_float64(run[i])
            total += v * v
    else:
        for i in range(n):
            v = as_float64(src[offset + i * step])
            total += v * v
    return total


@subroutine(fastmath=FASTMATH)
def _abs_run(src, offset, n, step):
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += abs(as_float64(run[i]))
    else:
        for i in range(n):
            total += abs(as_float64(src[offset + i * step]))
    return total


@subroutine(fastmath=FASTMATH)
def _exp_run(src, offset, n, step, top):
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += exp_nonpositive(as_float64(run[i]) - top)
    else:
        for i in range(n):
            total += exp_nonpositive(as_float64(src[offset + i * step]) - top)
    return total


# Float64 data: each lane of LANES a running sum with its rounding errors (TwoSum) summed apart, as
# if in twice the precision (Ogita, Rump and Oishi's Sum2): the result is within about
# n * 2**-106 * sum |term| of the exact sum before its last rounding, where a plain sum errs by up to
# n * 2**-53 * sum |term| (the contract asks for no worse than NumPy's pairwise sum). The lanes are
# independent, so the loop vectorises without reassociation (strict arithmetic: TwoSum's error term
# must not be simplified away). The parallel families split-sum instead (split_sums._float64_run_for),
# which is faster per element but compiles to several times the code.
LANES = 8


@subroutine(fastmath=False)
def _two_sum(a, b):
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


@subroutine(fastmath=False)
def _term(x, term, scale):
    """What one float64 element adds to a sum: x * scale (SUM), |x| (SUM_ABS) or x * x (SUM_SQUARES)."""
    if term == SUM:
        return x * scale
    if term == SUM_ABS:
        return abs(x)
    return x * x


@subroutine(fastmath=False)
def _float64_lanes(src, offset, n, step, term, scale):
    """(high, low) of the sum of _term over one float64 run, as above."""
    high = zeroed_array(LANES, np.float64)
    low = zeroed_array(LANES, np.float64)
    whole = n - n % LANES
    for i0 in range(0, whole, LANES):
        for j in range(LANES):
            x = src[offset + (i0 + j) * step]
            high[j], error = _two_sum(high[j], _term(x, term, scale))
            low[j] += error
    total, comp = 0.0, 0.0
    for j in range(LANES):
        total, error = _two_sum(total, high[j])
        comp += error + low[j]
    for i in range(whole, n):
        x = src[offset + i * step]
        total, error = _two_sum(total, _term(x, term, scale))
        comp += error
    return total, comp


@subroutine(fastmath=FASTMATH)
def _add_sum_row(acc, src, offset, width, scale):
    for w in range(width):
        acc[w] += as_float64(src[offset + w]) * scale


@subroutine(fastmath=FASTMATH)
def _add_squares_row(acc, src, offset, width):
    for w in range(width):
        v = as_float64(src[offset + w])
        acc[w] += v * v


@subroutine(fastmath=FASTMATH)
def _add_abs_row(acc, src, offset, width):
    for w in range(width):
        acc[w] += abs(as_float64(src[offset + w]))


@subroutine(fastmath=False)
def _fold(acc, totals, comps, width):
    """Add the plain column sums acc[:width] into their compensated totals and clear them."""
    for w in range(width):
        totals[w], comps[w] = add_compensated(totals[w], comps[w], acc[w])
        acc[w] = 0.0


@subroutine(fastmath=False)
def _halves_run(src, offset, n, step):
    """(sum of the low 32-bit halves as uint64, sum of the high halves as int64) of one run of integers:
    x = high * 2**32 + low, so the two sums hold the exact total (for fewer than 2**31 elements)."""
    low = _U64(0)
    high = np.int64(0)
    for i in range(n):
        x = src[offset + i * step]
        low += as_bits(x) & _LOW_HALF
        high += high_half(x)
    return low, high


@subroutine(fastmath=False)
def _term_bits_run(src, offset, n, step, term):
    total = _U64(0)
    for i in range(n):
        total += term_bits(src[offset + i * step], term)
    return total


# Float64 sums of squares below this lose bits where squares underflow to subnormals (an element's
# square below 2**-1022 carries an error up to 2**-1075, n of them at most n * 2**-175 relative to
# this): ReduceL2 of float64 computes those outputs again, scaled (numred._derived, _exact.l2), as it
# does those whose sum overflows.
L2_SMALLEST_SUM = 2.0**-900
# Its square root: a square root rounded to above this is that of a sum above L2_SMALLEST_SUM (the
# check on the results of the row kernels, which store square roots, not sums)
L2_SMALLEST_RESULT = 2.0**-450


@subroutine(fastmath=False)
def _finished(value, finish):
    """(the result, whether it is decided) from one output's float64 sum ``value`` (a mean's already
    divided): as it is (0: a mean or a sum of x, x * x or |x|, decided where finite: a float64 mean
    then retries rescaled), its square root (SQRT: ReduceL2, decided
    where float64 data's sum of squares is neither in danger of subnormal squares nor overflowed) or
    its log (LOG: ReduceLogSum, decided where the sum is finite: float64 partial sums can overflow
    where the whole does not)."""
    if finish == SQRT:
        return finished(value, finish), (L2_SMALLEST_SUM <= value < math.inf) or value != value
    return finished(value, finish), math.isfinite(value)


def _float_sums_for(term, float64):
    """Mean or sum (term SUM, divisor n or 1), sum of squares (SUM_SQUARES) or of |x| (SUM_ABS) of float
    data, finished by the runtime ``finish`` (store.finished: 0, SQRT or LOG); ``float64``: the data
    is float64, whose sums along runs are nearly exact."""

    def serial_float_sums(src, base, dims, kept_ndim, tile, scale, divisor, finish, result):
        """Results into ``result``; False if one is not decided (_finished): the driver then computes
        the call its general way (a float64 mean retries rescaled)."""
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        decided = True
        # the column sums of a tile: plain ones, and (float64 data) their compensated totals
        acc = zeroed_array(tile, np.float64)
        totals = zeroed_array(tile, np.float64)
        comps = zeroed_array(tile, np.float64)
        for task in range(_n_tasks(kshape, tile, 1)):
            k0, width, _, _, _ = _task(task, kshape, tile, 1, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            if tile == 1:
                total = 0.0
                comp = 0.0
                pos = 0
                while pos < nr:
                    offset, n = _next_run(pos, nr, rshape, rstrides)
                    offset += origin
                    if float64:
                        high, low = _float64_lanes(src, offset, n, step, term, scale)
                        total, comp = add_compensated(total, comp, high)
                        comp += low
                    elif term == SUM:
                        total, comp = add_compensated(total, comp, _sum_run(src, offset, n, step, scale))
                    elif term == SUM_ABS:
                        total, comp = add_compensated(total, comp, _abs_run(src, offset, n, step))
                    else:
                        total, comp = add_compensated(total, comp, _term_run(src, offset, n, step))
                    pos += n
                value, ok = _finished(compensated_value(total, comp) / divisor, finish)
                store_rounded(result, k0, value)
                decided = decided and ok
            else:
                rows = 0
                pos = 0
                while pos < nr:
                    offset, n = _next_run(pos, nr, rshape, rstrides)
                    offset += origin
                    for i in range(n):
                        if term == SUM:
                            _add_sum_row(acc, src, offset + i * step, width, scale)
                        elif term == SUM_ABS:
                            _add_abs_row(acc, src, offset + i * step, width)
                        else:
                            _add_squares_row(acc, src, offset + i * step, width)
                        rows += 1
                        if float64 and rows == BLOCK:
                            _fold(acc, totals, comps, width)
                            rows = 0
                    pos += n
                if float64:
                    _fold(acc, totals, comps, width)
                for w in range(width):
                    value, ok = _finished((compensated_value(totals[w], comps[w]) if float64 else acc[w]) / divisor,
                                          finish)
                    store_rounded(result, k0 + w, value)
                    decided = decided and ok
                    acc[w] = 0.0
                    totals[w] = 0.0
                    comps[w] = 0.0
        return decided

    return serial_float_sums


def _int_sums_for(term):
    """Exact mean truncated toward zero, or (``term`` SUM_SQUARES or SUM_ABS) the sum of squares or of
    |x| modulo 2**bits."""

    def serial_int_sums(src, base, dims, kept_ndim, tile, count, result):
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        # a tile's column sums: squares in low; a mean's 32-bit halves in low and high
        low_acc = zeroed_array(tile, np.uint64)
        high_acc = zeroed_array(tile, np.int64)
        for task in range(_n_tasks(kshape, tile, 1)):
            k0, width, _, _, _ = _task(task, kshape, tile, 1, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            pos = 0
            if tile == 1:
                low = _U64(0)
                high = _U64(0)
                while pos < nr:
                    offset, n = _next_run(pos, nr, rshape, rstrides)
                    if term:
                        low += _term_bits_run(src, origin + offset, n, step, term)
                    else:
                        low_sum, high_sum = _halves_run(src, origin + offset, n, step)
                        low, high = _add_halves128(low, high, low_sum, high_sum)
                    pos += n
                result[k0] = low if term else _int_mean(low, high, _U64(count))
            else:
                while pos < nr:
                    offset, n = _next_run(pos, nr, rshape, rstrides)
                    for i in range(n):
                        row = origin + offset + i * step
                        for w in range(width):
                            x = src[row + w]
                            if term:
                                low_acc[w] += term_bits(x, term)
                            else:
                                low_acc[w] += as_bits(x) & _LOW_HALF
                                high_acc[w] += high_half(x)
                    pos += n
                for w in range(width):
                    if term:
                        result[k0 + w] = low_acc[w]
                    else:
                        low, high = _add_halves128(_U64(0), _U64(0), low_acc[w], high_acc[w])
                        result[k0 + w] = _int_mean(low, high, _U64(count))
                    low_acc[w] = 0
                    high_acc[w] = 0

    return serial_int_sums


def _float_log_sum_exp_for(float64):
    """max + log(sum of exp(x - max)) of float data; ``float64``: exp sums in pieces of BLOCK terms
    added compensated (narrower data: a float64 sum per run is far more exact than the output)."""

    def serial_float_log_sum_exp(src, keys, inf_bits, base, dims, kept_ndim, result):
        """``keys``: src's memory as signed integers, whose max (of maxima.float_key) vectorises
        where a float max that keeps NaN does not; a NaN is a magnitude above inf_bits."""
        src, keys = _borrowed(src), _borrowed(keys)
        carrier = src[:0]
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        for k in range(result.size):
            origin = base + _offset_of(k, kshape, kstrides)
            best, top_magnitude = _output_max(keys, origin, nr, rshape, rstrides, step, True, 0)
            if top_magnitude > inf_bits:  # a NaN
                store_rounded(result, k, math.nan)
                continue
            top = key_to_float64(as_wide(best), carrier)
            if not math.isfinite(top):  # +inf, or -inf for an all -inf set: the answer itself
                store_rounded(result, k, top)
                continue
            total = 0.0
            comp = 0.0
            pos = 0
            while pos < nr:
                offset, n = _next_run(pos, nr, rshape, rstrides)
                offset += origin
                block = BLOCK if float64 else n
                for b in range(0, n, block):
                    block_sum = _exp_run(src, offset + b * step, smaller(block, n - b), step, top)
                    total, comp = add_compensated(total, comp, block_sum)
                pos += n
            store_rounded(result, k, top + math.log(compensated_value(total, comp)))

    return serial_float_log_sum_exp


def serial_int_log_sum_exp(src, base, dims, kept_ndim, count, type_max, result):
    """trunc(max + log(sum of exp(x - max))) of integer data into ``result`` (the input dtype); False
    when one is undecided in float64 or does not fit ``type_max`` (_int_log_sum_exp), for the
    front end to decide exactly."""
    src = _borrowed(src)
    kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
    decided = True
    for k in range(result.size):
        origin = base + _offset_of(k, kshape, kstrides)
        top = as_wide(_output_max(src, origin, nr, rshape, rstrides, step, False, 0)[0])
        total = 0.0
        pos = 0
        while pos < nr:
            offset, n = _next_run(pos, nr, rshape, rstrides)
            total += _int_exp_run(src, origin + offset, n, step, top)
            pos += n
        value, fits = _int_log_sum_exp(top, total, count, type_max)
        result[k] = value
        decided = decided and fits
    return decided


def serial_int_l2(src, base, dims, kept_ndim, largest_fit, root_max, result):
    """Integer ReduceL2, as rows.int_rows_l2 over any geometry: each output's largest |x| and its sum
    of squares modulo 2**64, exact where the largest |x| is at most ``largest_fit``, and its isqrt,
    if at most ``root_max``. Returns whether every output was decided so."""
    src = _borrowed(src)
    kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
    decided = True
    for k in range(result.size):
        origin = base + _offset_of(k, kshape, kstrides)
        largest = _U64(0)
        squares = _U64(0)
        pos = 0
        while pos < nr:
            offset, n = _next_run(pos, nr, rshape, rstrides)
            run_squares, run_largest = squares_and_largest_run(src, origin + offset, n, step)
            squares += run_squares
            largest = larger(largest, run_largest)
            pos += n
        root = isqrt64(squares)
        result[k] = root
        decided = decided and largest <= largest_fit and root <= root_max
    return decided


@functools.cache
def int_l2():
    return entry(serial_int_l2)


@functools.cache
def float_sums(term: int, float64: bool):
    """The kernel of a float mean or sum (SUM), sum of squares (SUM_SQUARES) or sum of |x| (SUM_ABS), and
    with a finish step (_finished) of ReduceL2 (SUM_SQUARES, SQRT) and ReduceLogSum (SUM, LOG)."""
    return entry(_float_sums_for(term, float64), name=f"serial_float_{TERM_NAMES[term]}{'_float64' if float64 else ''}")


@functools.cache
def int_sums(term):
    return entry(_int_sums_for(term), name=f"serial_int_{INT_TERMS[term]}")


@functools.cache
def float_log_sum_exp(float64: bool):
    return entry(_float_log_sum_exp_for(float64), name=f"serial_float_log_sum_exp{'_float64' if float64 else ''}")


@functools.cache
def int_log_sum_exp():
    return entry(serial_int_log_sum_exp)


def serial_float_extrema(src, keys, base, dims, kept_ndim, inf_bits, flip, result):
    """The max of each output's float values, or with ``flip`` -1 the min (maxima.flipped), stored in
    ``result`` (of the input's carrier dtype; exact, every value is one of the input's); NaN where
    any element is NaN (a magnitude above ``inf_bits``). ``keys`` is src's memory as signed integers."""
    src, keys = _borrowed(src), _borrowed(keys)
    carrier = src[:0]
    kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
    for k in range(result.size):
        origin = base + _offset_of(k, kshape, kstrides)
        best, top_magnitude = _output_max(keys, origin, nr, rshape, rstrides, step, True, flip)
        value = math.nan if top_magnitude > inf_bits else key_to_float64(as_wide(flipped(best, flip)), carrier)
        store_rounded(result, k, value)


def serial_int_extrema(src, base, dims, kept_ndim, flip, result):
    """The max of each output's integers, or with ``flip`` -1 the min (maxima.flipped), into ``result``
    (the input dtype)."""
    src = _borrowed(src)
    kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
    for k in range(result.size):
        origin = base + _offset_of(k, kshape, kstrides)
        result[k] = flipped(_output_max(src, origin, nr, rshape, rstrides, step, False, flip)[0], flip)


@functools.cache
def extrema(float_bits: bool):
    """The kernel of a small max or min (ReduceMax, ReduceMin): float data on keys, or integers."""
    return entry(serial_float_extrema if float_bits else serial_int_extrema)
