"""The general strided walker: any geometry, tiles of neighbouring outputs, chunks of long reduced
ranges with partial states per (output, chunk). One kernel per accumulator: float sums per term,
exact integer sums, maxima, integer exp sums.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import subroutine
from .base import (FASTMATH, NEVER, SUM_EXP, _U64, _borrowed, _n_tasks, share, _next_run, _offset_of, _task, _walker,
                   _view, filled_array, new_array, zeroed_array, larger, smaller)
from .columns import _float_columns, _fold
from .decode import as_wide
from .exp import exp_of_minus_distance
from .integers import (HALVES_BLOCK, _add_halves128, _fold_halves, _int_columns, _int_columns4, _int_columns8,
                       _int_exp_run, _int_log_sum_exp, _int_mean, _term_run, halves_run, low_accumulators,
                       narrow_int)
from .maxima import lowest_key, magnitude_bits, max_columns, max_run
from .runs import _add_run
from .store import _finish_sum, compensation_block, finished, store_rounded

# A tile narrower than this whose rows lie back to back (a short kept axis over a contiguous block,
# such as 4194304x4 reduced over axis 0) is read as "wide rows" of several real rows at once, so the
# inner loops stay long enough to vectorise.
WIDE_ROW = 2048
# ... but a task reads at least this many wide rows: its accumulators (one per element of a wide
# row) are allocated and folded once per task, and with few rows per task that costs more than the
# reads. A task with few rows thus takes narrower wide rows; one with many rows takes the full
# WIDE_ROW.
MIN_WIDE_ROWS = 64
# The maxima of a tile (or of wide rows) take eight rows per pass from this width on, four below it:
# eight rows per pass means fewer passes over the tile's accumulators, which pays on wide tiles; on
# narrower ones the longer loop body costs more than it saves.
EIGHT_ROWS_MIN_WIDTH = 256


@subroutine(fastmath=False)
def _rows_per_wide_row(width, step, n_rows):
    """How many back-to-back rows of ``width`` elements a task of ``n_rows`` rows reads as one."""
    if step != width or 2 * width > WIDE_ROW:
        return 1
    # min and max as expressions: the plan calls this in Python too (reads_wide_rows)
    rows = WIDE_ROW // width if WIDE_ROW // width < n_rows // MIN_WIDE_ROWS else n_rows // MIN_WIDE_ROWS
    return rows if rows > 1 else 1


def reads_wide_rows(n_inner, tile, step, n_rows):
    """Whether float_sums reads the ``n_rows`` rows of some tile of ``n_inner`` outputs cut into tiles
    of ``tile`` as wide rows (_rows_per_wide_row above 1); for the plan, in Python."""
    last = n_inner - (n_inner - 1) // tile * tile
    return any(_rows_per_wide_row.py_func(width, step, n_rows) > 1 for width in (tile, last))


def _float_sums_for(term):
    """The float_sums kernel for one ``term`` (SUM, SUM_SQUARES, SUM_EXP, SUM_ABS), fixed at compile time: LLVM
    then keeps only that term's loops and inlines them. With the term a runtime argument the per-row
    call and its set-up would not be optimised away, a real cost on short rows."""

    def float_sums(part, parts, src, base, dims, kept_ndim, nchunks, tile, scale, maxima, out_total, out_comp, divisor,
                   finish, result):
        """Compensated float64 sums per (output, chunk) of x * scale (SUM), x * x (SUM_SQUARES),
        exp(x - maxima[k]) (SUM_EXP) or |x| (SUM_ABS). With tile > 1 a task walks the reduced rows of
        ``tile`` neighbouring outputs together (a leading reduced axis read row by row instead of
        column by column).

        Without partial arrays (size 0; one chunk per output) the task writes the finished
        ``result[k]`` itself (see _finish_sum): with many outputs a separate serial finishing pass
        would cost as much as the reduction. Otherwise the chunk partials go to out_total/out_comp
        for _finish_* to combine (also with one chunk: the integer log-sum-exp finishes its own way)."""
        src, maxima = _borrowed(src), _borrowed(maxima)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        block = compensation_block(src)
        first_task, end_task = share(_n_tasks(kshape, tile, nchunks), part, parts)
        for task in range(first_task, end_task):
            k0, width, c, pos, end = _task(np.int64(task), kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            if tile == 1:
                shift = maxima[k0] if term == SUM_EXP else scale
                total = 0.0
                comp = 0.0
                sigma = 0.0  # (_float64_run_for's, passed on from run to run)
                if term != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
                    while pos < end:
                        offset, n = _next_run(pos, end, rshape, rstrides)
                        total, comp, sigma = _add_run(total, comp, sigma, src, origin + offset, n, step, term, shift)
                        pos += n
                if out_total.size == 0:
                    store_rounded(result, k0, finished(_finish_sum(total, comp, term, divisor, shift), finish))
                else:
                    out_total[k0 * nchunks + c] = total
                    out_comp[k0 * nchunks + c] = comp
            else:
                m = _rows_per_wide_row(width, step, end - pos)
                wide = m * width  # accumulators: column j % width, m of them per column
                acc = zeroed_array(wide, np.float64)
                # Per-task work proportional to the width must stay small next to the rows (a task may
                # have only a few): compensated totals exist only where they are folded (float64 data),
                # and the maxima only for SUM_EXP.
                # (Arrays not needed are empty views of acc, not allocations: with few rows per task
                # each allocation counts.)
                # Fewer rows than a block, in accumulators of their own (no wide rows): their plain
                # sums are what the compensated fold would give (0 + acc[w], exactly), so float64
                # skips the fold and its arrays (work proportional to the width, which matters for
                # short, wide tiles).
                compensated = block < NEVER and (m > 1 or end - pos >= block)
                totals = zeroed_array(width, np.float64) if compensated else acc[:0]
                comps = zeroed_array(width, np.float64) if compensated else acc[:0]
                # the max of each accumulator's column
                column_max = new_array(wide, np.float64) if term == SUM_EXP else acc[:0]
                if term == SUM_EXP:
                    # (element by element here and below: a slice assigned from an array compiles
                    # Numba's shape-mismatch error message, string formatting that took seconds of
                    # a first call)
                    for j0 in range(0, wide, width):
                        for w in range(width):
                            column_max[j0 + w] = maxima[k0 + w]
                # The most terms one accumulator has taken since the last fold (at most block): a wide
                # row gives each accumulator one term (counting real rows instead would fold after
                # nearly every call when a wide row holds hundreds of rows).
                terms = 0
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    j = 0
                    while j < n:
                        if term != SUM_EXP and n - j >= 8 * m:  # eight (wide) rows per call: less traffic to acc
                            _float_columns(src, offset + j * step, m * step, 8, wide, term, scale, column_max, 0, acc)
                            j += 8 * m
                            terms += 8
                        elif n - j >= 4 * m:  # four: a quarter of the traffic of one
                            _float_columns(src, offset + j * step, m * step, 4, wide, term, scale, column_max, 0, acc)
                            j += 4 * m
                            terms += 4
                        elif n - j >= m:
                            _float_columns(src, offset + j * step, m * step, 1, wide, term, scale, column_max, 0, acc)
                            j += m
                            terms += 1
                        else:
                            _float_columns(src, offset + j * step, step, 1, width, term, scale, column_max, 0, acc)
                            j += 1
                            terms += 1
                        if terms >= block:
                            _fold(acc, totals, comps)
                            terms = 0
                    pos += n
                if compensated:
                    _fold(acc, totals, comps)
                else:
                    for j0 in range(width, wide, width):  # the m accumulators of each column
                        for w in range(width):
                            acc[w] += acc[j0 + w]
                    totals = acc[:width]
                if out_total.size == 0:
                    for w in range(width):
                        comp = comps[w] if compensated else 0.0
                        maximum = column_max[w] if term == SUM_EXP else 0.0
                        store_rounded(result, k0 + w, finished(_finish_sum(totals[w], comp, term, divisor, maximum),
                                                               finish))
                else:
                    for w in range(width):
                        out_total[(k0 + w) * nchunks + c] = totals[w]
                        out_comp[(k0 + w) * nchunks + c] = comps[w] if compensated else 0.0

    return float_sums


def _int_sums_for(term):
    """The int_sums kernel for one term, fixed at compile time (``term``: SUM for the exact
    sum, True for x * x, SUM_ABS for |x|; integers.term_bits)."""

    def int_sums(part, parts, src, base, dims, kept_ndim, nchunks, tile, count, out_low, out_high, result):
        """term SUM: exact 128-bit two's-complement sum (low, high words); otherwise the sum
        of x*x or |x| modulo 2**64 (low word only). Tiles (and wide rows) as in float_sums. With one
        chunk per output the task finishes it into ``result`` (uint64 bits): the exact mean over
        ``count`` elements, or the wrapping sum. Otherwise the partials go to out_low and out_high
        for finish_int_mean / finish_int_squares."""
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        first_task, end_task = share(_n_tasks(kshape, tile, nchunks), part, parts)
        for task in range(first_task, end_task):
            k0, width, c, pos, end = _task(np.int64(task), kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            low = zeroed_array(width, np.uint64)
            high = zeroed_array(width, np.uint64)
            if tile == 1:
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    if term:
                        low[0] += _term_run(src, offset, n, step, term)
                    else:
                        for b in range(0, n, HALVES_BLOCK):
                            low_sum, high_sum = halves_run(src, offset + b * step, smaller(HALVES_BLOCK, n - b), step)
                            low[0], high[0] = _add_halves128(low[0], high[0], low_sum, high_sum)
                    pos += n
            else:  # the tile's rows are contiguous (the plan tiles only a stride-1 kept axis)
                m = _rows_per_wide_row(width, step, end - pos)
                # only the accumulators this sum uses (_fold_halves): half the memory a task touches
                low_acc = low_accumulators(src, result, m * width if term or not narrow_int(src) else 0)
                high_acc = zeroed_array(0 if term else m * width, np.int64)
                rows = 0
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    j = 0
                    while j < n:
                        start = offset + j * step
                        # eight (wide) rows per call, as in float_sums
                        if (term or narrow_int(src)) and n - j >= 8 * m:
                            _int_columns8(src, start, m * step, m * width, term, low_acc, high_acc)
                            span = 8 * m
                        elif n - j >= 4 * m:  # four: a quarter of the traffic of one
                            wide = m * width
                            _int_columns4(_view(src, start, start + wide),
                                          _view(src, start + m * step, start + m * step + wide),
                                          _view(src, start + 2 * m * step, start + 2 * m * step + wide),
                                          _view(src, start + 3 * m * step, start + 3 * m * step + wide),
                                          term, low_acc, high_acc)
                            span = 4 * m
                        else:
                            span = m if n - j >= m else 1  # m back-to-back rows read as one wide row
                            _int_columns(_view(src, start, start + span * width), term, low_acc, high_acc)
                        j += span
                        rows += span
                        if rows >= HALVES_BLOCK:
                            _fold_halves(low_acc, high_acc, low, high, term, narrow_int(src))
                            rows = 0
                    pos += n
                _fold_halves(low_acc, high_acc, low, high, term, narrow_int(src))
            if nchunks == 1:  # finished here, in parallel: a 128-bit division per output adds up
                for w in range(width):
                    result[k0 + w] = low[w] if term else _int_mean(low[w], high[w], _U64(count))
            else:
                for w in range(width):
                    out_low[(k0 + w) * nchunks + c] = low[w]
                    out_high[(k0 + w) * nchunks + c] = high[w]

    return int_sums


def _max_keys_for(float_bits, tiles):
    """max_keys(src, base, dims, kept_ndim, nchunks, tile, inf_bits, flip, out_max, out_nans): the max
    per (output, chunk) of the keys flipped by ``flip`` (maxima.flipped: 0 for a max, all ones for a
    min), widened (as_wide), and whether it saw a NaN (out_nans 1, else 0). Integer data: the max
    value. Float data (``float_bits``): ``src`` is a signed integer view of the bits, the max is a
    float_key, and magnitudes above ``inf_bits`` (the bits of +inf) are NaNs. Tiles as in
    float_sums. Everything before the widening stays in src's own type (float_key), and tasks of
    one output allocate no arrays: with many outputs, per-task allocations would cost more than the
    reads (this matters for log-sum-exp too, whose maxima come from here).
    ``tiles`` (a constant, with float_bits) says whether the tasks are tiles of outputs (tile > 1) or
    single outputs: a first call compiles the code of only one of them, as compiling both is slow."""

    def max_keys(part, parts, src, base, dims, kept_ndim, nchunks, tile, inf_bits, flip, out_max, out_nans):
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        first_task, end_task = share(_n_tasks(kshape, tile, nchunks), part, parts)
        for task in range(first_task, end_task):
            k0, width, c, pos, end = _task(np.int64(task), kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            lowest = lowest_key(src[origin])
            # every magnitude is at least 0, in src's type; integer data has none (passed through)
            zero = magnitude_bits(lowest) if float_bits else lowest
            if not tiles:  # scalars: one task per output, no arrays allocated
                best, top_magnitude = lowest, zero
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    best, top_magnitude = max_run(src, offset + origin, n, step, float_bits, best, top_magnitude,
                                                  flip)
                    pos += n
                out_max[k0 * nchunks + c] = as_wide(best)
                out_nans[k0 * nchunks + c] = float_bits and top_magnitude > inf_bits
            else:
                m = _rows_per_wide_row(width, step, end - pos)
                wide = m * width  # as in float_sums: slot j holds column j % width
                best_of = filled_array(wide, lowest)
                top_magnitude_of = filled_array(wide, zero)
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    j = 0
                    while j < n:
                        if wide >= EIGHT_ROWS_MIN_WIDTH and n - j >= 8 * m:
                            max_columns(src, offset + j * step, m * step, 8, wide, float_bits, best_of,
                                        top_magnitude_of, flip)
                            j += 8 * m
                        elif n - j >= 4 * m:
                            max_columns(src, offset + j * step, m * step, 4, wide, float_bits, best_of,
                                        top_magnitude_of, flip)
                            j += 4 * m
                        elif n - j >= m:
                            max_columns(src, offset + j * step, m * step, 1, wide, float_bits, best_of,
                                        top_magnitude_of, flip)
                            j += m
                        else:
                            max_columns(src, offset + j * step, step, 1, width, float_bits, best_of, top_magnitude_of,
                                        flip)
                            j += 1
                    pos += n
                for j0 in range(width, wide, width):  # the m slots of each column
                    for w in range(width):
                        best_of[w] = larger(best_of[w], best_of[j0 + w])
                        top_magnitude_of[w] = larger(top_magnitude_of[w], top_magnitude_of[j0 + w])
                for w in range(width):
                    out_max[(k0 + w) * nchunks + c] = as_wide(best_of[w])
                    out_nans[(k0 + w) * nchunks + c] = float_bits and top_magnitude_of[w] > inf_bits

    return max_keys


def int_sum_exp(part, parts, src, base, dims, kept_ndim, nchunks, tile, maxima, out_total, count, type_max, result,
                fits):
    """Sum of exp(x - max) per (output, chunk), each term looked up by the exact integer distance
    max - x (exp_of_minus_distance). With tile > 1 a task reads the reduced rows of ``tile``
    neighbouring outputs (narrow ones back to back as wide rows), as float_sums does, instead of one
    strided column per output: on leading reduced axes the reads are contiguous rows, and integer
    tiles need not go through the float kernel and its exp polynomial. Four (wide) rows per call
    (_int_exp_columns4) cut the traffic to the accumulators to a quarter.

    Without partial arrays (size 0; one chunk per output) the task finishes its outputs itself
    (_int_log_sum_exp) into ``result`` and ``fits``, as float_sums does: with many outputs a separate serial
    finishing pass would be a large share of the whole."""
    src, maxima = _borrowed(src), _borrowed(maxima)
    kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
    first_task, end_task = share(_n_tasks(kshape, tile, nchunks), part, parts)
    for task in range(first_task, end_task):
        k0, width, c, pos, end = _task(np.int64(task), kshape, tile, nchunks, nr)
        origin = base + _offset_of(k0, kshape, kstrides)
        if tile == 1:
            top = maxima[k0]
            total = 0.0
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                total += _int_exp_run(src, offset + origin, n, step, top)
                pos += n
            if out_total.size == 0:
                result[k0], fits[k0] = _int_log_sum_exp(top, total, count, type_max)
            else:
                out_total[k0 * nchunks + c] = total
        else:
            m = _rows_per_wide_row(width, step, end - pos)  # narrow rows back to back: m of them read as one
            wide = m * width
            tops = new_array(wide, maxima.dtype)
            for j0 in range(0, wide, width):
                for w in range(width):
                    tops[j0 + w] = maxima[k0 + w]
            acc = zeroed_array(wide, np.float64)
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                offset += origin
                j = 0
                while n - j >= 4 * m:  # four (wide) rows per call: a quarter of the traffic to acc
                    _int_exp_columns4(src, offset + j * step, m * step, wide, tops, acc)
                    j += 4 * m
                while n - j >= m:
                    _int_exp_columns(_view(src, offset + j * step, offset + j * step + wide), tops, acc)
                    j += m
                while j < n:
                    _int_exp_columns(_view(src, offset + j * step, offset + j * step + width), tops, acc)
                    j += 1
                pos += n
            for j0 in range(width, wide, width):  # the m accumulators of each column
                for w in range(width):
                    acc[w] += acc[j0 + w]
            if out_total.size == 0:
                for w in range(width):
                    result[k0 + w], fits[k0 + w] = _int_log_sum_exp(maxima[k0 + w], acc[w], count, type_max)
            else:
                for w in range(width):
                    out_total[(k0 + w) * nchunks + c] = acc[w]


@subroutine(fastmath=FASTMATH)
def _int_exp_columns(row, tops, acc):
    """acc[w] += exp(row[w] - tops[w]): one row of a tile."""
    for w in range(row.size):
        acc[w] += exp_of_minus_distance(row[w], tops[w])


@subroutine(fastmath=FASTMATH)
def _int_exp_columns4(src, offset, step, width, tops, acc):
    """acc[w] += the exp(x - tops[w]) of element w of four rows ``step`` apart (as _float_columns)."""
    r0 = _view(src, offset, offset + width)
    r1 = _view(src, offset + step, offset + step + width)
    r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
    r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
    for w in range(width):
        top = tops[w]
        acc[w] += (exp_of_minus_distance(r0[w], top) + exp_of_minus_distance(r1[w], top)) + (
            exp_of_minus_distance(r2[w], top) + exp_of_minus_distance(r3[w], top))
