"""One run of the reduced elements of an output: its float64 sum of the operator's term (plain for
narrower floats, split sums for float64), added compensated to a running total (``_add_run``),
and a whole row finished (``_float_row``). Each is compiled per literal term, float64 or not, and
contiguous or not.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import types
from numba.extending import intrinsic, overload

from .jit import subroutine
from .base import (FASTMATH, SUM, SUM_ABS, SUM_EXP, SUM_SQUARES, _constant, _is_one, _view, call_part, njit_for,
                   smaller, zeroed_array)
from .decode import as_float64, pair_sums, pair_sums4
from .exp import exp_nonpositive
from .reading import (EVERY_OTHER_MIN_RUN, QUARTER_LONG_RUNS, STREAMS_MIN_RUN, STRIDED_LANES,
                      STRIDED_LANES_MIN_RUN, every_other_span)
from .split_sums import SPLIT_PIECE, _kept_if, float64_run
from .states import add_compensated
from .store import _finish_sum, compensation_block


@subroutine(fastmath=FASTMATH)
def _float_runs4(src, first, gap, n, term, shift):
    """The plain float64 sums (of x * shift (SUM), x * x (SUM_SQUARES) or |x| (SUM_ABS)) of four
    contiguous runs of ``n`` elements starting ``gap`` apart, read together: four memory streams."""
    a = _view(src, first, first + n)
    b = _view(src, first + gap, first + gap + n)
    c = _view(src, first + 2 * gap, first + 2 * gap + n)
    d = _view(src, first + 3 * gap, first + 3 * gap + n)
    s0, s1, s2, s3, n_read = pair_sums4(a, b, c, d, n, term, shift)  # bfloat16: two per load
    if n_read:
        a, b, c, d = a[n_read:], b[n_read:], c[n_read:], d[n_read:]  # the last element of each, below
        n -= n_read
    if term == SUM:
        for i in range(n):
            s0 += as_float64(a[i]) * shift
            s1 += as_float64(b[i]) * shift
            s2 += as_float64(c[i]) * shift
            s3 += as_float64(d[i]) * shift
    elif term == SUM_SQUARES:
        for i in range(n):
            va, vb, vc, vd = as_float64(a[i]), as_float64(b[i]), as_float64(c[i]), as_float64(d[i])
            s0 += va * va
            s1 += vb * vb
            s2 += vc * vc
            s3 += vd * vd
    else:
        for i in range(n):
            s0 += abs(as_float64(a[i]))
            s1 += abs(as_float64(b[i]))
            s2 += abs(as_float64(c[i]))
            s3 += abs(as_float64(d[i]))
    return s0, s1, s2, s3


@functools.cache
def _add_run_for(term, float64, contiguous):
    """_add_run for one ``term``, for float64 data or not, and for contiguous runs (a literal step 1
    at the call) or any, constants: the other terms' loops, the other data's path and, for
    contiguous runs, the float64 strided passes are pruned."""

    @njit_for(term, float64, contiguous, fastmath=False)
    def add_run(total, comp, sigma, src, offset, n, step, shift):
        block = compensation_block(src)
        if float64 and term != SUM_EXP:
            # equal pieces, no short last one (4160: 3 x 1387, not 2 x 2048 + 64); no divisions for one
            piece = n if n <= SPLIT_PIECE else -(-n // -(-n // SPLIT_PIECE))
            for b in range(0, n, piece):
                if contiguous:
                    high, low, sigma = float64_run(src, offset + b, smaller(piece, n - b), 1, term, shift, sigma)
                else:
                    high, low, sigma = float64_run(src, offset + b * step, smaller(piece, n - b), step, term, shift,
                                                   sigma)
                total, comp = add_compensated(total, comp, high)
                total, comp = add_compensated(total, comp, low)
            return total, comp, sigma
        for b in range(0, n, block):
            block_sum = _float_run(src, offset + b * step, smaller(block, n - b), step, term, shift)
            total, comp = add_compensated(total, comp, block_sum)
        return total, comp, sigma

    return add_run


@intrinsic(prefer_literal=True)
def _add_run(typingctx, total, comp, sigma, src, offset, n, step, term, shift):
    """(total, comp) plus the sum of one run's terms (as in _float_run), compensated (Neumaier), and
    the sigma of its last split piece: float64 sums and sums of squares nearly exactly in equal pieces
    of at most SPLIT_PIECE (_float64_run_for; ``sigma`` is the previous piece's), float64 exp sums plainly
    in pieces of BLOCK, and narrower floats plainly at once."""
    float64 = src.dtype == types.float64
    # contiguity matters to the float64 split sums only: other data compiles one add_run for both
    part = _add_run_for(_constant(term, "term"), float64, float64 and _is_one(step))
    return call_part(typingctx, part, (total, comp, sigma, src, offset, n, step, term, shift),
                     (0, 1, 2, 3, 4, 5, 6, 8))


# The term tests sit outside the loops on purpose: a branch inside a loop keeps LLVM from
# vectorising it, and it does not unswitch three-way branches by itself.
def _float_run(src, offset, n, step, term, shift):
    """Plain float64 sum over one strided run of: x * shift (SUM; shift is 1 or a power-of-two
    scale), x * x (SUM_SQUARES), exp(x - shift) (SUM_EXP; shift is the max) or |x| (SUM_ABS)."""


@functools.cache
def _contiguous_float_run_for(term):
    """_float_run of a contiguous run for one ``term``, a constant: the other terms' loops are pruned.
    The reading strategies of sums of x and x * x (quarters of long runs, bfloat16 pairs) are theirs
    alone; |x| and exp(x - max) take the plain loops."""
    streams = term == SUM or term == SUM_SQUARES

    @njit_for(term, fastmath=FASTMATH)
    def contiguous_float_run(src, offset, n, shift):
        acc = 0.0
        if streams and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # quarters of a long run
            quarter = n // 4
            s0, s1, s2, s3 = _float_runs4(src, offset, quarter, quarter, term, shift)
            acc = (s0 + s1) + (s2 + s3)
            offset += 4 * quarter
            n -= 4 * quarter
        run = _view(src, offset, offset + n)
        if streams:  # bfloat16: two elements per load
            pairs, n_read = pair_sums(run, n, term == SUM_SQUARES, shift)
            if n_read:
                acc += pairs
                run = run[n_read:]  # the last element of an odd run, below
                n -= n_read
        if term == SUM:
            for i in range(n):
                acc += as_float64(run[i]) * shift
        elif term == SUM_SQUARES:
            for i in range(n):
                v = as_float64(run[i])
                acc += v * v
        elif term == SUM_ABS:
            for i in range(n):
                acc += abs(as_float64(run[i]))
        else:
            for i in range(n):
                acc += exp_nonpositive(as_float64(run[i]) - shift)
        return acc

    return contiguous_float_run


@functools.cache
def _strided_float_run_for(term):
    """_float_run of a run of any step but 1 for one ``term``, a constant. The reading strategies of
    sums of x and x * x (every other element, strided lanes) are theirs alone; |x| and exp(x - max)
    take the plain loops."""
    streams = term == SUM or term == SUM_SQUARES

    @njit_for(term, fastmath=FASTMATH)
    def strided_float_run(src, offset, n, step, shift):
        acc = 0.0
        if streams and step == 2 and n >= EVERY_OTHER_MIN_RUN:
            # every other element, read over the whole span (_every_other_sum): vectorised, so
            # faster than the paths below for float32, float16 and bfloat16 alike
            span = _view(src, offset, offset + every_other_span(src, offset, n))
            return _every_other_sum(span, term == SUM_SQUARES, shift)
        if streams and n >= STRIDED_LANES_MIN_RUN and step > 0 and src.itemsize == 4:
            # float32, not a broadcast (step 0, which a slice cannot take). A strided run is not
            # vectorised, and one chain of dependent additions is bound by its latency: STRIDED_LANES
            # sums held in an array break the chain. Scalar sums do not (reassociation may fold
            # them back into one chain). Not for the 16-bit floats, whose conversions bound the loop
            # already (no steady gain), nor for exp sums (bound by the exp), nor for short runs (the
            # array costs more than it saves).
            run = src[offset:offset + (n - 1) * step + 1:step]
            lanes = zeroed_array(STRIDED_LANES, np.float64)
            whole = n - n % STRIDED_LANES
            if term == SUM:
                for i0 in range(0, whole, STRIDED_LANES):
                    for j in range(STRIDED_LANES):
                        lanes[j] += as_float64(run[i0 + j]) * shift
                for i in range(whole, n):
                    acc += as_float64(run[i]) * shift
            else:
                for i0 in range(0, whole, STRIDED_LANES):
                    for j in range(STRIDED_LANES):
                        v = as_float64(run[i0 + j])
                        lanes[j] += v * v
                for i in range(whole, n):
                    v = as_float64(run[i])
                    acc += v * v
            return acc + lanes.sum()
        if term == SUM:
            for i in range(n):
                acc += as_float64(src[offset + i * step]) * shift
        elif term == SUM_SQUARES:
            for i in range(n):
                v = as_float64(src[offset + i * step])
                acc += v * v
        elif term == SUM_ABS:
            for i in range(n):
                acc += abs(as_float64(src[offset + i * step]))
        else:
            for i in range(n):
                acc += exp_nonpositive(as_float64(src[offset + i * step]) - shift)
        return acc

    return strided_float_run


# A run whose step is the constant 1 at the call (a contiguous row) compiles the contiguous function
# alone: the strided one's helpers (every_other_span, the lanes' array) cost a first call's compile
# time in every kernel that links them, run or not.
@overload(_float_run, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _float_run_by_mode(src, offset, n, step, term, shift):
    contiguous = _contiguous_float_run_for(_constant(term, "term"))
    if _is_one(step):
        return lambda src, offset, n, step, term, shift: contiguous(src, offset, n, shift)
    strided = _strided_float_run_for(_constant(term, "term"))

    def call(src, offset, n, step, term, shift):
        if step == 1:
            return contiguous(src, offset, n, shift)
        return strided(src, offset, n, step, shift)

    return call


@subroutine(fastmath=FASTMATH)
def _every_other_sum(span, squares, shift):
    """_float_run's plain float64 sum (of x * shift, or of x * x with ``squares``) of the even elements of ``span``
    (every_other_span), as _split_pass_every_other reads them: the whole span, vectorised, the
    terms of the elements in between zeroed by their bits."""
    acc = 0.0
    if not squares:  # the term zeroed, not the element: a float32 one becomes a slower masked load
        for i in range(span.size):
            acc += _kept_if(as_float64(span[i]) * shift, (i & 1) - 1)
        return acc
    for i in range(span.size):
        v = as_float64(span[i])
        acc += _kept_if(v * v, (i & 1) - 1)
    return acc


@functools.cache
def _float_row_for(term, float64):
    """_float_row for one ``term`` and for float64 data or not, constants: the other terms' loops and
    the other data's path are pruned."""

    @njit_for(term, float64, fastmath=False)
    def float_row(src, origin, n, step, shift, sigma, divisor):
        total = 0.0
        comp = 0.0
        if term != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
            if not float64:  # narrower floats: one plain float64 sum
                total = _float_run(src, origin, n, step, term, shift)
            else:
                total, comp, sigma = _add_run(total, comp, sigma, src, origin, n, step, term, shift)
        return _finish_sum(total, comp, term, divisor, shift), sigma

    return float_row


@intrinsic(prefer_literal=True)
def _float_row(typingctx, src, origin, n, step, term, shift, sigma, divisor):
    """One output of float_rows over its run, finished (_finish_sum), and the sigma its float64 split
    sums ended with (_add_run; ``sigma`` is the one to start from)."""
    part = _float_row_for(_constant(term, "term"), src.dtype == types.float64)
    return call_part(typingctx, part, (src, origin, n, step, term, shift, sigma, divisor), (0, 1, 2, 3, 5, 6, 7))
