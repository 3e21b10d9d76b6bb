"""Integer accumulation: exact 128-bit sums from 32-bit halves, wrapping sums of squares or of |x|,
exact integer means, and the integer log-sum-exp's exp sums and its exact decision.

The helpers of the wrapping sums take the term as ``term``: a constant of kernels.base, SUM for the
exact sum of x (its halves), SUM_SQUARES for x * x, SUM_ABS for |x| (term_bits).
"""
from __future__ import annotations

import math

import numpy as np
from numba import types

from .jit import subroutine, subroutine_by_type
from .base import (FASTMATH, SUM, SUM_ABS, SUM_SQUARES, _U64, _constant, _view, zeroed_array, integer_total, larger,
                   smaller)
from .decode import as_bits
from .exp import exp_of_minus_distance
from .reading import (EVERY_OTHER_MIN_RUN, QUARTER_LONG_RUNS, STREAMS_MIN_RUN, STRIDED_LANES,
                      STRIDED_LANES_MIN_RUN, every_other_span)


@subroutine_by_type(fastmath=False)
def high_half(x):
    """x >> 32 as int64 (arithmetic for signed x): with the low 32 bits, x = high * 2**32 + low."""
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.int64(x) >> 32
        return lambda x: np.int64(np.uint64(x) >> np.uint64(32))
    return None


@subroutine_by_type(fastmath=False)
def square_bits(x):
    """x * x modulo 2**64 as uint64."""
    if isinstance(x, types.Integer) and x.bitwidth <= 32:
        # exact in 64 bits; a 32 x 32 -> 64-bit product is one vector instruction (pmuldq/pmuludq),
        # where a 64-bit product is emulated
        if x.signed:
            return lambda x: np.uint64(np.int64(x) * np.int64(x))
        return lambda x: np.uint64(x) * np.uint64(x)
    if isinstance(x, types.Integer):
        return lambda x: as_bits(x) * as_bits(x)
    return None


# Sums of up to this many 32-bit halves are exact in 64 bits, and they vectorise where a 128-bit
# carry chain per element does not.
HALVES_BLOCK = 1 << 30


@subroutine_by_type(fastmath=False)
def halves_run(src, offset, n, step):
    """(sum of the low 32-bit halves as uint64, sum of the high halves as int64) of one run of at
    most HALVES_BLOCK elements: x = high * 2**32 + low for each x, so the sums hold the exact total."""
    if src.dtype.bitwidth <= 32:
        # one int64 accumulator is exact for 2**30 values of 32 bits, and takes one widening add
        # per element instead of two halves; the halves are split off the total at the end
        def narrow(src, offset, n, step):
            total = np.int64(0)
            if step == 1 and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # four streams, as _float_run
                quarter = n // 4
                sums = _int_runs4(src, offset, quarter, quarter, False)
                total = np.int64((sums[0] + sums[1]) + (sums[2] + sums[3]))  # exact: |total| < 2**62
                offset += 4 * quarter
                n -= 4 * quarter
            if step == 1:
                run = _view(src, offset, offset + n)
                for i in range(n):
                    total += np.int64(run[i])
            elif step == 2 and n >= EVERY_OTHER_MIN_RUN:
                # every other element over the whole span, the others zeroed, as _every_other_sum
                # (vectorised): faster than the lanes below, for sums of squares (_term_run) and
                # 64-bit data (wide) too, unless memory bounds both
                span = _view(src, offset, offset + every_other_span(src, offset, n))
                for i in range(span.size):
                    total += np.int64(span[i]) & ((i & 1) - 1)
            elif step > 0 and n >= STRIDED_LANES_MIN_RUN:
                # in lanes, as _float_run's float32 runs: one chain of dependent additions would be
                # bound by its latency on long strided runs. One int64 sum per lane: cheaper than
                # the halves' two sums, as in the 64-bit branch below.
                run = src[offset:offset + (n - 1) * step + 1:step]
                lanes = zeroed_array(STRIDED_LANES, np.int64)
                whole = n - n % STRIDED_LANES
                for i0 in range(0, whole, STRIDED_LANES):
                    for j in range(STRIDED_LANES):
                        lanes[j] += np.int64(run[i0 + j])
                total += integer_total(lanes)
                for i in range(whole, n):
                    total += np.int64(run[i])
            else:
                for i in range(n):
                    total += np.int64(src[offset + i * step])
            return _U64(total) & _U64(0xFFFFFFFF), total >> 32

        return narrow

    def wide(src, offset, n, step):
        low = _U64(0)
        high = np.int64(0)
        if step == 1:
            run = _view(src, offset, offset + n)
            for i in range(n):
                low += as_bits(run[i]) & _U64(0xFFFFFFFF)
                high += high_half(run[i])
        elif step == 2 and n >= EVERY_OTHER_MIN_RUN:  # the whole span, as the narrow branch
            span = _view(src, offset, offset + every_other_span(src, offset, n))
            for i in range(span.size):
                keep = (i & 1) - 1
                low += as_bits(span[i]) & _U64(0xFFFFFFFF) & _U64(keep)
                high += high_half(span[i]) & keep
        elif step > 0 and n >= STRIDED_LANES_MIN_RUN:  # in lanes, as _float_run's float32 runs
            run = src[offset:offset + (n - 1) * step + 1:step]
            low_lanes = zeroed_array(STRIDED_LANES, _U64)
            high_lanes = zeroed_array(STRIDED_LANES, np.int64)
            whole = n - n % STRIDED_LANES
            for i0 in range(0, whole, STRIDED_LANES):
                for j in range(STRIDED_LANES):
                    low_lanes[j] += as_bits(run[i0 + j]) & _U64(0xFFFFFFFF)
                    high_lanes[j] += high_half(run[i0 + j])
            low, high = integer_total(low_lanes), integer_total(high_lanes)
            for i in range(whole, n):
                low += as_bits(run[i]) & _U64(0xFFFFFFFF)
                high += high_half(run[i])
        else:
            for i in range(n):
                x = src[offset + i * step]
                low += as_bits(x) & _U64(0xFFFFFFFF)
                high += high_half(x)
        return low, high

    return wide


# the integer kernels' terms (``term``) and the names of their kernels: the exact sum of x (means,
# ReduceSum), the wrapping sum of x * x (ReduceSumSquare, ReduceL2) or of |x| (ReduceL1 of signed data)
INT_TERMS = {SUM: "mean", SUM_SQUARES: "sum_squares", SUM_ABS: "sum_abs"}


@subroutine_by_type(fastmath=False)
def abs_bits(x):
    """|x| modulo 2**64 as uint64 (|INT64_MIN| is 2**63, whose low bits are INT64_MIN's)."""
    if isinstance(x, types.Integer) and x.signed:
        if x.bitwidth <= 32:
            return lambda x: np.uint64(abs(np.int64(x)))
        return lambda x: _U64(x ^ (x >> 63)) - _U64(x >> 63)  # (x ^ s) - s, s all ones for x < 0
    if isinstance(x, types.Integer):
        return lambda x: np.uint64(x)
    return None


@subroutine_by_type(fastmath=False, prefer_literal=True)
def term_bits(x, term):
    """The wrapping term of x as uint64: x * x (``term`` SUM_SQUARES) or |x| (SUM_ABS); a
    constant."""
    if _constant(term, "term") == SUM_ABS:
        return lambda x, term: abs_bits(x)
    return lambda x, term: square_bits(x)


@subroutine(fastmath=False)
def _term_run(src, offset, n, step, term):
    """Sum of x * x (or |x|: term_bits) modulo 2**64 over one run, as uint64 (a local accumulator:
    vectorises)."""
    total = _U64(0)
    if step == 1 and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # four streams, as _float_run
        quarter = n // 4
        sums = _int_runs4(src, offset, quarter, quarter, term)
        total = (sums[0] + sums[1]) + (sums[2] + sums[3])
        offset += 4 * quarter
        n -= 4 * quarter
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += term_bits(run[i], term)
    elif step == 2 and n >= EVERY_OTHER_MIN_RUN:  # the whole span, as halves_run
        span = _view(src, offset, offset + every_other_span(src, offset, n))
        for i in range(span.size):
            total += term_bits(span[i], term) & _U64((i & 1) - 1)
    elif step > 0 and n >= STRIDED_LANES_MIN_RUN:  # in lanes, as _float_run's float32 runs
        run = src[offset:offset + (n - 1) * step + 1:step]
        lanes = zeroed_array(STRIDED_LANES, _U64)
        whole = n - n % STRIDED_LANES
        for i0 in range(0, whole, STRIDED_LANES):
            for j in range(STRIDED_LANES):
                lanes[j] += term_bits(run[i0 + j], term)
        total += integer_total(lanes)
        for i in range(whole, n):
            total += term_bits(run[i], term)
    else:
        for i in range(n):
            total += term_bits(src[offset + i * step], term)
    return total


@subroutine(fastmath=False)
def squares_and_largest_run(src, offset, n, step):
    """(sum of x * x modulo 2**64, max |x|) over one run of n >= 1 elements, as uint64, in one loop
    that vectorises: the max |x| from the run's min and max in its own integer type, whose lanes are
    as narrow as the data (|x| in uint64 lanes, or a second pass for the magnitudes, would be
    slower)."""
    lowest = highest = src[offset]
    total = _U64(0)
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            x = run[i]
            lowest = smaller(lowest, x)
            highest = larger(highest, x)
            total += square_bits(x)
    else:
        for i in range(n):
            x = src[offset + i * step]
            lowest = smaller(lowest, x)
            highest = larger(highest, x)
            total += square_bits(x)
    return total, larger(abs_bits(lowest), abs_bits(highest))


@subroutine(fastmath=False)
def isqrt64(s):
    """floor(sqrt(s)) of a uint64 s, exactly: float64's square root is within one of it (the root of
    a number below 2**64 is below 2**32, so its square is exact in uint64)."""
    root = math.sqrt(np.float64(s))
    root = _U64(root if root < 4294967295.0 else 4294967295.0)
    while root * root > s:
        root -= _U64(1)
    while root < _U64(4294967295) and (root + _U64(1)) * (root + _U64(1)) <= s:
        root += _U64(1)
    return root


@subroutine(fastmath=False)
def _add_halves128(low, high, low_sum, high_sum):
    """(low, high) += high_sum * 2**32 + low_sum, in uint64 two's complement."""
    new_low = low + low_sum
    high += _U64(new_low < low)
    low = new_low
    new_low = low + (np.uint64(high_sum) << _U64(32))
    return new_low, high + np.uint64(high_sum >> 32) + _U64(new_low < low)


@subroutine(fastmath=False)
def _int_columns(row, term, low_acc, high_acc):
    """Per column of a tile row (contiguous): low_acc += x * x (wrapping) when ``term``, else the
    32-bit halves of x into low_acc and high_acc (carry-free, so the loop vectorises)."""
    if term:
        for i in range(row.size):
            low_acc[i] += term_bits(row[i], term)
    elif narrow_int(row):  # whole values into high_acc: one widening add (see _fold_halves)
        for i in range(row.size):
            high_acc[i] += np.int64(row[i])
    else:
        for i in range(row.size):
            low_acc[i] += as_bits(row[i]) & _U64(0xFFFFFFFF)
            high_acc[i] += high_half(row[i])


@subroutine(fastmath=False)
def _int_columns4(r0, r1, r2, r3, term, low_acc, high_acc):
    """_int_columns over four rows at once: a quarter of the traffic to the accumulators."""
    if term:
        for i in range(r0.size):
            low_acc[i] += ((term_bits(r0[i], term) + term_bits(r1[i], term))
                           + (term_bits(r2[i], term) + term_bits(r3[i], term)))
    elif narrow_int(r0):
        for i in range(r0.size):
            high_acc[i] += (np.int64(r0[i]) + np.int64(r1[i])) + (np.int64(r2[i]) + np.int64(r3[i]))
    else:
        mask = _U64(0xFFFFFFFF)
        for i in range(r0.size):
            low_acc[i] += ((as_bits(r0[i]) & mask) + (as_bits(r1[i]) & mask)) + (
                (as_bits(r2[i]) & mask) + (as_bits(r3[i]) & mask))
            high_acc[i] += (high_half(r0[i]) + high_half(r1[i])) + (high_half(r2[i]) + high_half(r3[i]))


@subroutine(fastmath=False)
def _int_columns8(src, start, step, width, term, low_acc, high_acc):
    """_int_columns over element i of eight rows ``step`` apart, for sums of squares and for sums of
    ``narrow`` data (not the halves of 64-bit data): an eighth of the traffic to the accumulators,
    half that of four rows per pass (_int_columns4)."""
    r0 = _view(src, start, start + width)
    r1 = _view(src, start + step, start + step + width)
    r2 = _view(src, start + 2 * step, start + 2 * step + width)
    r3 = _view(src, start + 3 * step, start + 3 * step + width)
    r4 = _view(src, start + 4 * step, start + 4 * step + width)
    r5 = _view(src, start + 5 * step, start + 5 * step + width)
    r6 = _view(src, start + 6 * step, start + 6 * step + width)
    r7 = _view(src, start + 7 * step, start + 7 * step + width)
    if term:
        for i in range(width):
            low_acc[i] += (((term_bits(r0[i], term) + term_bits(r1[i], term))
                            + (term_bits(r2[i], term) + term_bits(r3[i], term)))
                           + ((term_bits(r4[i], term) + term_bits(r5[i], term))
                              + (term_bits(r6[i], term) + term_bits(r7[i], term))))
    else:
        for i in range(width):
            high_acc[i] += ((np.int64(r0[i]) + np.int64(r1[i])) + (np.int64(r2[i]) + np.int64(r3[i]))) + (
                (np.int64(r4[i]) + np.int64(r5[i])) + (np.int64(r6[i]) + np.int64(r7[i])))


@subroutine_by_type(fastmath=False)
def narrow_int(x):
    """Whether array ``x`` holds integers of 32 bits or fewer, whose sums of up to HALVES_BLOCK
    values one int64 holds exactly (a compile-time constant)."""
    narrow = isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
    return lambda x: narrow


@subroutine_by_type(fastmath=False)
def low_accumulators(src, result, n):
    """n zeroed ``low_acc`` accumulators of a tile (int_sums). For data of 32 bits or fewer they hold
    only wrapping sums of squares; where ``result`` keeps only the low 32 bits of those sums (a
    ReduceSumSquare's results in the data's dtype): uint32, and LLVM then narrows the products and
    sums to 32-bit lanes, twice as many per vector as 64-bit ones. Otherwise (ReduceL2's sums of squares
    modulo 2**64, into uint64 results) uint64."""
    if (isinstance(src.dtype, types.Integer) and src.dtype.bitwidth <= 32
            and isinstance(result.dtype, types.Integer) and result.dtype.bitwidth <= 32):
        return lambda src, result, n: zeroed_array(n, np.uint32)
    return lambda src, result, n: zeroed_array(n, np.uint64)


@subroutine(fastmath=False)
def _fold_halves(low_acc, high_acc, low, high, term, narrow):
    """Add the column accumulators (column i % low.size) into the 128-bit sums and clear them. Only
    the accumulators a sum uses exist: low_acc for squares, high_acc for ``narrow`` data (whole sums,
    _int_columns, split into halves here), both otherwise."""
    width = low.size
    for i0 in range(0, larger(low_acc.size, high_acc.size), width):  # no i % width, as in _fold
        for w in range(width):
            if term:
                low[w] += low_acc[i0 + w]
                low_acc[i0 + w] = 0
            elif narrow:
                whole = high_acc[i0 + w]
                low[w], high[w] = _add_halves128(low[w], high[w], _U64(whole) & _U64(0xFFFFFFFF), whole >> 32)
                high_acc[i0 + w] = 0
            else:
                low[w], high[w] = _add_halves128(low[w], high[w], low_acc[i0 + w], high_acc[i0 + w])
                low_acc[i0 + w] = 0
                high_acc[i0 + w] = 0


@subroutine(fastmath=False)
def _int_runs4(src, first, gap, n, term):
    """Four contiguous runs of ``n`` elements ``gap`` apart, read together as in _float_runs4: their
    wrapping sums of squares (``term``) or, for data of 32 bits or fewer and n <= HALVES_BLOCK,
    their exact sums as int64 two's-complement bits."""
    a = _view(src, first, first + n)
    b = _view(src, first + gap, first + gap + n)
    c = _view(src, first + 2 * gap, first + 2 * gap + n)
    d = _view(src, first + 3 * gap, first + 3 * gap + n)
    if term:
        s0 = _U64(0)
        s1 = _U64(0)
        s2 = _U64(0)
        s3 = _U64(0)
        for i in range(n):
            s0 += term_bits(a[i], term)
            s1 += term_bits(b[i], term)
            s2 += term_bits(c[i], term)
            s3 += term_bits(d[i], term)
        return s0, s1, s2, s3
    t0 = np.int64(0)
    t1 = np.int64(0)
    t2 = np.int64(0)
    t3 = np.int64(0)
    for i in range(n):
        t0 += np.int64(a[i])
        t1 += np.int64(b[i])
        t2 += np.int64(c[i])
        t3 += np.int64(d[i])
    return _U64(t0), _U64(t1), _U64(t2), _U64(t3)


@subroutine(fastmath=False)
def _int_mean_row(src, origin, n, step, count):
    """The exact mean over ``count`` elements of one output of int_rows, over its run, as uint64 bits."""
    low = _U64(0)
    high = _U64(0)
    for b in range(0, n, HALVES_BLOCK):
        low_sum, high_sum = halves_run(src, origin + b * step, smaller(HALVES_BLOCK, n - b), step)
        low, high = _add_halves128(low, high, low_sum, high_sum)
    return _int_mean(low, high, count)


@subroutine(fastmath=FASTMATH)
def _int_exp_run(src, offset, n, step, top):
    """Sum of exp(x - top) over one run of integers (a slice when contiguous, as in _max_run_for)."""
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += exp_of_minus_distance(run[i], top)
    else:
        for i in range(n):
            total += exp_of_minus_distance(src[offset + i * step], top)
    return total


@subroutine_by_type(fastmath=False)
def cast_like(template, x):
    """x converted to the Numba type of ``template``."""
    target = template
    return lambda template, x: target(x)


@subroutine(fastmath=False)
def _int_log_sum_exp(m, total, count, type_max):
    """(trunc(m + log(total)) exactly, in the widened type of the max ``m``; whether it is decided and
    fits, i.e. the true result is at most ``type_max``, the largest value of the input dtype). ``total`` is the sum of
    exp(x - m) and ``count`` the number of reduced elements: with more than one, the log is strictly
    positive and never an integer (the sum is 1 + exp(-d) + ..., and e is transcendental), even where
    float64 rounds it to an integer such as 0."""
    tail = math.log(total)  # >= 0: the max itself contributes exp(0) = 1
    # Within float64's error of an integer k >= 1 (the sum's: each term and addition rounded, and
    # the log's, with a margin), the floor is not decided: reported like a result that does not
    # fit, for the front end to decide exactly (numred._exact). Below 1/2 the floor is 0 anyway.
    nearest = math.floor(tail + 0.5)
    if nearest >= 1.0 and abs(tail - nearest) < 4.0 * ((count + 4) * 2.0**-53 + 2.0**-48):
        return m, False
    whole = cast_like(m, math.floor(tail))
    if m >= 0 or m + whole >= 0:
        # non-negative: truncation is floor, so m + floor(tail), if the dtype holds it
        if m > type_max - whole:
            return cast_like(m, type_max), False
        return m + whole, True
    # negative with a fractional tail: truncation toward zero rounds up
    return m + whole + cast_like(m, count > 1), True


@subroutine(fastmath=False)
def _int_mean(low, high, count):
    """The 128-bit two's-complement sum (low, high) divided by ``count`` (uint64), truncated toward
    zero, as uint64 two's-complement bits: a mean. With ``count`` 1, the sum modulo 2**64."""
    negative = (high >> _U64(63)) != _U64(0)
    if negative:  # magnitude of the 128-bit value
        low = ~low + _U64(1)
        high = ~high + _U64(low == _U64(0))
    if high == _U64(0):  # |sum| < 2**64: the machine division
        quotient = low // count
    elif count == _U64(1):  # a sum, not a mean: its low bits (the division below needs a 64-bit quotient)
        quotient = low
    else:
        # |sum| / count: the quotient fits 64 bits (a mean lies within the dtype's range), so
        # high < count and a 64-step long division of (high, low) finishes it.
        remainder = high
        quotient = _U64(0)
        for bit in range(63, -1, -1):
            remainder = (remainder << _U64(1)) | ((low >> _U64(bit)) & _U64(1))
            quotient <<= _U64(1)
            if remainder >= count:
                remainder -= count
                quotient |= _U64(1)
    return _U64(0) - quotient if negative else quotient


# Means of 32-bit integer tiles go through the float kernel (SUM, divisor n) into an int32/uint32
# result, truncated as stored. Exact for at most this many values: |x| <= 2**32, so every partial sum
# is an integer of at most 2**52 in magnitude, which float64 holds exactly. The float64 quotient then
# truncates correctly: a mean that is not an integer lies at least 1/n from one, and the quotient's
# rounding error is at most |mean| * 2**-53 < 2**52 / n * 2**-53, half of that.
EXACT_FLOAT_INT_COUNT = 1 << 20
