"""Rows: one kept axis over one reduced axis, each output one run (or a strided column). One kernel
per (term, variant) for floats and per (squares, four rows or one) for integers, the variant chosen
by the dispatch from the geometry (numred._compute); log-sum-exp rows take the max and the sum of
each row in one task.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

from .jit import Kernel, entry, subroutine
from .base import TERM_NAMES, SUM, SUM_EXP, SUM_SQUARES, _U64, _borrowed, _view, share, zeroed_array, larger, smaller
from .columns import _fold
from .decode import as_float64, as_wide
from .integers import (INT_TERMS, _int_exp_run, _int_log_sum_exp, _int_mean, _int_mean_row,
                       _int_runs4, _term_run, isqrt64, squares_and_largest_run)
from .reading import QUARTER_LONG_RUNS, STREAMS_MIN_RUN
from .maxima import (flipped, four_max_key_runs, four_max_value_runs, key_to_float64, lowest_key, magnitude_bits,
                     max_key_run, max_of_quarters, max_value_run)
from .runs import _add_run, _float_row, _float_run, _float_runs4
from .split_sums import (float64_one_pass, float64_run_two_pass)
from .store import _finish_sum, compensation_block, finished, store_rounded

# Columns of a strided view (float_columns): tasks (chunks of the rows), at most; rows per chunk, at
# least; rows, at least.
COLUMN_TASKS = 16
COLUMN_CHUNK_MIN_ROWS = 64
# Columns of fewer rows stay one output at a time: neighbouring outputs then find their rows'
# cache lines still in L1, which reading by rows would not beat.
COLUMN_MIN_ROWS = 128


@subroutine(fastmath=False)
def _add_strided_row(acc, src, origin, stride, term, scale):
    """acc[k] += the term (x * scale (SUM), x * x (SUM_SQUARES) or |x| (SUM_ABS)) of
    src[origin + k * stride], each k."""
    row = _view(src, origin, len(src))
    if term == SUM:
        for k in range(acc.size):
            acc[k] += as_float64(row[k * stride]) * scale
    elif term == SUM_SQUARES:
        for k in range(acc.size):
            v = as_float64(row[k * stride])
            acc[k] += v * v
    else:
        for k in range(acc.size):
            acc[k] += abs(as_float64(row[k * stride]))


# The variants of the float row kernel, one kernel each (the dispatch picks one per call):
# strided columns; narrow floats' strided rows, rows one by one, four rows together; float64 rows of
# one split piece (contiguous, strided), of several pieces, short rows in two passes (contiguous,
# strided); and the general row (float64 rescaled sums, exp sums).
(ROWS_COLUMNS, ROWS_STRIDED, ROWS_ONE_BY_ONE, ROWS_FOUR, ROWS_ONE_PASS, ROWS_ONE_PASS_STRIDED, ROWS_PIECES,
 ROWS_TWO_PASS, ROWS_TWO_PASS_STRIDED, ROWS_GENERAL) = range(10)


# The row kernels of floats take these arguments, whatever their variant (float_rows):
# (part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish, result),
# but for ROWS_COLUMNS (float_columns, whose chunk partials the driver combines). Each variant is a
# kernel of its own, made by its function below for one ``term`` fixed at compile time (LLVM then
# keeps only that term's loops); in one kernel, all the variants were compiled on every first call.


def column_chunks(n_reduced):
    """The chunks of rows of ROWS_COLUMNS plans (float_columns): a power of two, an even share for 2,
    4, 8 threads, fixed by the shape so that results do not depend on the threads."""
    nchunks = 1
    while 2 * nchunks <= COLUMN_TASKS and 2 * nchunks * COLUMN_CHUNK_MIN_ROWS <= n_reduced:
        nchunks *= 2
    return nchunks


def _columns_for(term):
    """ROWS_COLUMNS: columns of a strided view (x[:, ::2] over axis 0). The outputs lie along each
    row, so whole rows are read in turn, in tasks of a chunk of the rows each (column_chunks; parts
    of rows per task, as tiles, can do worse even than one output at a time), summed as float tiles
    are (plain sums of up to ``block`` rows, folded compensated). Each task writes its chunk's
    partials of every output (output k's at k * nchunks + c), which the driver combines in chunk
    order (finish.finish_float_sums): no float_rows kernel of its own. One output at a time, each
    column would run through thousands of pages. Not for float16 sums of squares, which are slower
    here than one output at a time (the same loop outside this kernel runs as fast as the sums;
    cause not found)."""

    def float_columns(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, nchunks, out_total,
                      out_comp):
        src = _borrowed(src)
        block = compensation_block(src)
        rows_per_chunk = -(-n_reduced // nchunks)
        first_task, end_task = share(nchunks, part, parts)
        for c in range(first_task, end_task):
            acc = zeroed_array(n_kept, np.float64)
            totals = zeroed_array(n_kept, np.float64)
            comps = zeroed_array(n_kept, np.float64)
            first, end = c * rows_per_chunk, smaller(n_reduced, (c + 1) * rows_per_chunk)
            for j0 in range(first, end, block):  # one piece but for float64 (block: NEVER)
                for j in range(j0, smaller(j0 + block, end)):
                    _add_strided_row(acc, src, base + j * step, kept_stride, term, scale)
                _fold(acc, totals, comps)
            for k in range(n_kept):
                out_total[k * nchunks + c] = totals[k]
                out_comp[k * nchunks + c] = comps[k]

    return float_columns


@functools.cache
def float_columns(term):
    """The ROWS_COLUMNS Kernel of one term (_columns_for), made on first use."""
    return Kernel(entry(_columns_for(term), name=f"float_columns_{TERM_NAMES[term]}"))


def _plain_rows_for(term, contiguous):
    """ROWS_ONE_BY_ONE (``contiguous``) and ROWS_STRIDED: rows of float32, float16 or bfloat16 data
    one per task, their plain float64 sums divided here: not through _float_row and _finish_sum,
    whose compensation and non-finite test only float64 sums need. The step of contiguous rows is the
    literal 1 (_float_run's contiguous loop). Not for SUM_EXP, which is bound by exp, not by memory."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src = _borrowed(src)
        first_task, end_task = share(n_kept, part, parts)
        for k in range(first_task, end_task):
            if contiguous:
                total = _float_run(src, base + k * kept_stride, n_reduced, 1, term, scale)
            else:
                total = _float_run(src, base + k * kept_stride, n_reduced, step, term, scale)
            store_rounded(result, k, finished(total / divisor, finish))

    return float_rows


def _four_rows_for(term):
    """ROWS_FOUR: contiguous rows of float32, float16 or bfloat16 data four at a time (where
    numred._compute._rows_together says so): four memory streams (STREAMS_MIN_RUN) and a quarter of
    the per-row loop overhead; plain sums, as _plain_rows_for."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src = _borrowed(src)
        first_task, end_task = share(-(-n_kept // 4), part, parts)
        for group in range(first_task, end_task):
            k0 = 4 * group
            if k0 + 4 <= n_kept:
                sums = _float_runs4(src, base + k0 * kept_stride, kept_stride, n_reduced, term, scale)
                for j in range(4):
                    store_rounded(result, k0 + j, finished(sums[j] / divisor, finish))
            else:  # the last 1-3 rows
                for k in range(k0, n_kept):
                    total = _float_run(src, base + k * kept_stride, n_reduced, 1, term, scale)
                    store_rounded(result, k, finished(total / divisor, finish))

    return float_rows


@njit(fastmath=False, inline="always")  # integer arithmetic: the caller's flags change nothing
def _float64_rows_per_task(n_kept):
    """Rows per task of float64 rows that carry a sigma from row to row (_float64_run_for): only one
    row in up to sixteen needs a separate first pass over its first piece, and at least sixteen
    tasks remain for the threads."""
    return smaller(16, larger(1, n_kept // 16))


def _one_pass_rows_for(term, contiguous):
    """ROWS_ONE_PASS (``contiguous``) and ROWS_ONE_PASS_STRIDED: float64 rows of one split piece,
    float64_one_pass called directly: high + low rounded once is what _float_row's compensated
    additions and finish give, without _float_row's per-row overhead. Strided rows from
    STRIDED_SPLIT_MIN_RUN on: one pass each costs less than a bound and a split pass each. One call
    of the split function in the loop (the other is pruned at compile time): LLVM inlines a
    function called once, and a call for each step in one loop leaves both out of line."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src = _borrowed(src)
        rows_per_task = _float64_rows_per_task(n_kept)
        first_task, end_task = share(-(-n_kept // rows_per_task), part, parts)
        for task in range(first_task, end_task):
            sigma = 0.0
            for k in range(task * rows_per_task, smaller(task * rows_per_task + rows_per_task, n_kept)):
                origin = base + k * kept_stride
                if contiguous:
                    high, low, sigma = float64_one_pass(_view(src, origin, origin + n_reduced), n_reduced, 1,
                                                         term, sigma)
                else:
                    high, low, sigma = float64_one_pass(_view(src, origin, len(src)), n_reduced, step, term, sigma)
                store_rounded(result, k, finished((high + low) / divisor, finish))

    return float_rows


def _pieces_rows_for(term):
    """ROWS_PIECES: contiguous float64 rows of several split pieces: _add_run called here, from one
    place in its own loop, with a literal step, and finished by _finish_sum, as _float_row does (the
    same bits). Through _float_row, whose calls LLVM leaves out of line, rows of several pieces cost
    more per element than rows of one piece; this way they cost no more."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src = _borrowed(src)
        rows_per_task = _float64_rows_per_task(n_kept)
        first_task, end_task = share(-(-n_kept // rows_per_task), part, parts)
        for task in range(first_task, end_task):
            sigma = 0.0
            for k in range(task * rows_per_task, smaller(task * rows_per_task + rows_per_task, n_kept)):
                total, comp, sigma = _add_run(0.0, 0.0, sigma, src, base + k * kept_stride, n_reduced, 1, term, 1.0)
                store_rounded(result, k, finished(_finish_sum(total, comp, term, divisor, 1.0), finish))

    return float_rows


def _two_pass_rows_for(term, contiguous):
    """ROWS_TWO_PASS (``contiguous``) and ROWS_TWO_PASS_STRIDED: short float64 rows (and rescaled
    ones), two passes each (float64_run_two_pass) called directly, not through _float_row and
    _float64_run_for, whose per-row overhead weighs heavily on short rows. One rounding of high + low
    is the whole finish: what a compensated addition of low to high and _finish_sum's total +
    compensation would give (inf and NaN included)."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src = _borrowed(src)
        first_task, end_task = share(n_kept, part, parts)
        for k in range(first_task, end_task):
            origin = base + k * kept_stride
            if contiguous:
                high, low = float64_run_two_pass(_view(src, origin, origin + n_reduced), n_reduced, 1, term, scale)
            else:
                high, low = float64_run_two_pass(_view(src, origin, len(src)), n_reduced, step, term, scale)
            store_rounded(result, k, finished((high + low) / divisor, finish))

    return float_rows


def _general_rows_for(term):
    """ROWS_GENERAL: any other rows (float64 rescaled sums, sums of exp(x - max)) through _float_row,
    which carries the sigma of the row before in its task (_float64_rows_per_task)."""

    def float_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish,
                   result):
        src, maxima = _borrowed(src), _borrowed(maxima)
        rows_per_task = _float64_rows_per_task(n_kept)
        first_task, end_task = share(-(-n_kept // rows_per_task), part, parts)
        for task in range(first_task, end_task):
            sigma = 0.0
            for k in range(task * rows_per_task, smaller(task * rows_per_task + rows_per_task, n_kept)):
                shift = maxima[k] if term == SUM_EXP else scale
                value, sigma = _float_row(src, base + k * kept_stride, n_reduced, step, term, shift, sigma, divisor)
                store_rounded(result, k, finished(value, finish))

    return float_rows


# variant -> the function that makes its kernel for a term
_FLOAT_ROWS_FOR = {
    ROWS_STRIDED: functools.partial(_plain_rows_for, contiguous=False),
    ROWS_ONE_BY_ONE: functools.partial(_plain_rows_for, contiguous=True),
    ROWS_FOUR: _four_rows_for,
    ROWS_ONE_PASS: functools.partial(_one_pass_rows_for, contiguous=True),
    ROWS_ONE_PASS_STRIDED: functools.partial(_one_pass_rows_for, contiguous=False),
    ROWS_PIECES: _pieces_rows_for,
    ROWS_TWO_PASS: functools.partial(_two_pass_rows_for, contiguous=True),
    ROWS_TWO_PASS_STRIDED: functools.partial(_two_pass_rows_for, contiguous=False),
    ROWS_GENERAL: _general_rows_for,
}
FLOAT_ROWS_VARIANTS = tuple(_FLOAT_ROWS_FOR)  # (the float_rows kernels: every variant but ROWS_COLUMNS)


def _int_rows_for(term, four):
    """int_sums for single-run plans (see the float row kernels), fixed to the exact mean (finished here)
    or the wrapping sum of squares or of |x| (``term`` SUM_SQUARES or SUM_ABS: integers.term_bits), and to
    reading rows four at a time or one by one (numred._compute._int_rows_four):
    one parallel loop per kernel. No per-output arrays or chunk partials. The kernel computes uint64
    two's-complement bits; storing them into the input dtype keeps the low bits. The exact sums are
    divided by ``count`` (integers._int_mean: 1 for the wrapping sum itself)."""

    def int_rows(part, parts, src, base, kept_stride, n_kept, n_reduced, step, count, result):
        src = _borrowed(src)
        count = _U64(count)
        if four:
            first_task, end_task = share(-(-n_kept // 4), part, parts)
            for group in range(first_task, end_task):
                k0 = 4 * group
                if k0 + 4 <= n_kept:
                    sums = _int_runs4(src, base + k0 * kept_stride, kept_stride, n_reduced, term)
                    for j in range(4):
                        if term:
                            result[k0 + j] = sums[j]
                        else:  # the int64 sum, sign-extended to 128 bits
                            result[k0 + j] = _int_mean(sums[j], _U64(np.int64(sums[j]) >> 63), count)
                else:  # the last 1-3 rows
                    for k in range(k0, n_kept):
                        if term:
                            result[k] = _term_run(src, base + k * kept_stride, n_reduced, 1, term)
                        else:
                            result[k] = _int_mean_row(src, base + k * kept_stride, n_reduced, 1, count)
            return
        # rows one after another (ONE_STREAM_ROWS), strided rows, and 64-bit means
        first_task, end_task = share(n_kept, part, parts)
        for k in range(first_task, end_task):
            if term:
                result[k] = _term_run(src, base + k * kept_stride, n_reduced, step, term)
            else:
                result[k] = _int_mean_row(src, base + k * kept_stride, n_reduced, step, count)

    return int_rows


def float_rows_log_sum_exp(part, parts, src, keys, inf_bits, base, kept_stride, n_kept, n_reduced, step, result):
    """Float log-sum-exp of the single-run layout (float_rows), the max and the sum of each row in
    one task: the row is read twice while it is in the cache, and no maxima array is written and
    read back. ``keys`` is src's memory viewed as signed integers (max_keys). Separate max_keys and
    float_rows passes would cost more, mostly in the per-row set-up of the general max kernel."""
    src, keys = _borrowed(src), _borrowed(keys)
    carrier = src[:0]
    first_task, end_task = share(n_kept, part, parts)
    for k in range(first_task, end_task):
        origin = base + k * kept_stride
        lowest = lowest_key(keys[origin])
        best, top_magnitude = max_key_run(keys, origin, n_reduced, step, lowest, magnitude_bits(lowest), 0)
        maximum = np.nan if top_magnitude > inf_bits else key_to_float64(as_wide(best), carrier)
        store_rounded(result, k, _float_row(src, origin, n_reduced, step, SUM_EXP, maximum, 0.0, 1.0)[0])


def int_rows_log_sum_exp(part, parts, src, base, kept_stride, n_kept, n_reduced, step, type_max, result):
    """Integer log-sum-exp of the single-run layout, the max and the sum of each row in one task (as
    float_rows_log_sum_exp), into ``result`` of the input dtype; False if a result does not fit it
    (``type_max``), for the caller to raise (as kernels.serial.serial_int_log_sum_exp)."""
    src = _borrowed(src)
    all_fit = True
    first_task, end_task = share(n_kept, part, parts)
    for k in range(first_task, end_task):
        origin = base + k * kept_stride
        lowest = lowest_key(src[origin])
        top = as_wide(max_value_run(src, origin, n_reduced, step, lowest, lowest, 0)[0])
        total = _int_exp_run(src, origin, n_reduced, step, top)
        result[k], fits = _int_log_sum_exp(top, total, n_reduced, type_max)
        all_fit &= fits
    return all_fit


def int_rows_l2(part, parts, src, base, kept_stride, n_kept, n_reduced, step, largest_fit, root_max, result):
    """Integer ReduceL2 of each row in one task: the largest |x| and the sum of squares modulo 2**64
    in one pass (integers.squares_and_largest_run). Where max |x| is at most ``largest_fit``
    (n * max|x|**2 < 2**64) that sum is the exact one and its isqrt the result, if at most
    ``root_max``. Returns whether every row was decided so; otherwise the driver computes the call
    its general way (_derived._int_l2: exact arithmetic, or the ValueError of a root that does not
    fit). The bound over the whole input, then a sum-of-squares kernel, would read the data three
    times."""
    src = _borrowed(src)
    decided = True
    first_task, end_task = share(n_kept, part, parts)
    for k in range(first_task, end_task):
        origin = base + k * kept_stride
        squares, largest = squares_and_largest_run(src, origin, n_reduced, step)
        root = isqrt64(squares)
        decided &= largest <= largest_fit and root <= root_max
        result[k] = root
    return decided


def int_largest_magnitudes(part, parts, src, piece, result):
    """result[k] = max |x| over src[k * piece:(k + 1) * piece] (the last piece shorter), as uint64:
    the bound of integer ReduceL2 over an input's whole memory (numred._derived.squares_fit), one
    pass, where NumPy's min and max take two, single-threaded, and ReduceMin's and ReduceMax's
    kernels two."""
    src = _borrowed(src)
    first_task, end_task = share(result.size, part, parts)
    for k in range(first_task, end_task):
        start = k * piece
        result[k] = squares_and_largest_run(src, start, smaller(piece, src.size - start), 1)[1]


def float_rows_extrema(part, parts, src, keys, base, kept_stride, n_kept, n_reduced, step, together, inf_bits, flip,
                       result):
    """The max (with ``flip`` -1 the min, maxima.flipped) of each row of float data, stored in
    ``result`` (the input's carrier dtype; exact); NaN where a row holds one. ``keys`` is src's
    memory as signed integers. A task is ``together`` rows: 4, contiguous rows read side by side
    (maxima.four_max_key_runs), or 1, as numred._compute._rows_together says. A long contiguous row
    read alone (fewer than four left, or rows one by one) is read as its four quarters side by side
    through the same function where one stream per thread leaves part of the read bandwidth unused
    (kernels.reading.QUARTER_LONG_RUNS), as the general max kernel reads a long run: a reduction over
    all of a contiguous input is one such row. It spares rows the general max kernel's per-output
    set-up and finishing pass, and a first call compiles much less code."""
    src, keys = _borrowed(src), _borrowed(keys)
    carrier = src[:0]
    first_task, end_task = share(-(-n_kept // together), part, parts)
    for group in range(first_task, end_task):
        k0 = together * group
        four = together == 4 and k0 + 4 <= n_kept
        if four:
            runs = four_max_key_runs(keys, base + k0 * kept_stride, kept_stride, n_reduced, flip)
        for k in range(k0, smaller(k0 + together, n_kept)):
            if four:
                best, top_magnitude = runs[k - k0]
            else:
                origin = base + k * kept_stride
                lowest = lowest_key(keys[origin])
                best, top_magnitude = lowest, magnitude_bits(lowest)
                offset, n = origin, n_reduced
                if QUARTER_LONG_RUNS and step == 1 and n >= 2 * STREAMS_MIN_RUN:  # (a row read alone: above)
                    offset, n, best, top_magnitude = max_of_quarters(four_max_key_runs, keys, offset, n, best,
                                                                     top_magnitude, flip)
                best, top_magnitude = max_key_run(keys, offset, n, step, best, top_magnitude, flip)
            value = np.nan if top_magnitude > inf_bits else key_to_float64(as_wide(flipped(best, flip)), carrier)
            store_rounded(result, k, value)


def int_rows_extrema(part, parts, src, base, kept_stride, n_kept, n_reduced, step, together, flip, result):
    """The max (with ``flip`` -1 the min) of each row of integers, into ``result`` (the input dtype);
    ``together`` rows per task, as float_rows_extrema."""
    src = _borrowed(src)
    first_task, end_task = share(-(-n_kept // together), part, parts)
    for group in range(first_task, end_task):
        k0 = together * group
        four = together == 4 and k0 + 4 <= n_kept
        if four:
            runs = four_max_value_runs(src, base + k0 * kept_stride, kept_stride, n_reduced, flip)
        for k in range(k0, smaller(k0 + together, n_kept)):
            if four:
                best = runs[k - k0][0]
            else:
                origin = base + k * kept_stride
                best = lowest_key(src[origin])
                offset, n = origin, n_reduced
                if QUARTER_LONG_RUNS and step == 1 and n >= 2 * STREAMS_MIN_RUN:  # (as float_rows_extrema)
                    offset, n, best, _ = max_of_quarters(four_max_value_runs, src, offset, n, best, best, flip)
                best = max_value_run(src, offset, n, step, best, best, flip)[0]
            result[k] = flipped(best, flip)


@functools.cache
def float_rows(term, variant):
    """The float_rows Kernel of one term and variant (ROWS_*), made on first use."""
    return Kernel(entry(_FLOAT_ROWS_FOR[variant](term), name=f"float_rows_{TERM_NAMES[term]}_{variant}"))


@functools.cache
def int_rows(term, four):
    """The int_rows Kernel: means or wrapping sums of squares or |x| (``term``, as table.INT_TERMS), four
    rows at a time or one."""
    return Kernel(entry(_int_rows_for(term, four), name=f"int_rows_{INT_TERMS[term]}{'_four' if four else ''}"))
