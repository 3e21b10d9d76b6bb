"""Tiles: a leading reduced axis over contiguous kept elements, one tile per task; narrow tiles (rows
of 2-64 outputs back to back) read as blocks of rows.
"""
from __future__ import annotations

import numpy as np

from .jit import subroutine
from .base import (BLOCK, FASTMATH, NEVER, SUM, SUM_ABS, _U64, _borrowed, _view, larger, share, smaller,
                   zeroed_array)
from .columns import _float_columns, _fold
from .decode import as_float64
from .integers import (_add_halves128, _int_columns, _int_columns4, _int_columns8, _int_mean,
                       low_accumulators, narrow_int)
from .store import _finish_sum, compensation_block, finished, store_rounded

# Tiles of a few contiguous outputs whose rows lie back to back (256x1024x8 over axis 1, NHWC data
# with few channels over its spatial axes): each outer output block is one contiguous run, whose
# element p belongs to output p % width. For widths dividing NARROW_ROW the run is read as rows of
# NARROW_ROW (a literal: LLVM then keeps a row in eight vector registers) into one accumulator per
# position, folded into the columns at the end (_narrow_block_sums). Wide rows of a width known
# only at run time (float_sums) are markedly slower on such tiles.
NARROW_ROW = 64
# Only blocks of up to this many elements: larger ones read at least as fast as wide rows
# (float_sums), float64 ones especially (reading four quarters of a block at once instead of
# neighbouring rows does not change that).
NARROW_MAX_BLOCK = 1 << 16
# 64-bit data (float64, int64, uint64) only in blocks of up to this many elements (64 KiB): such
# blocks read faster as narrow tiles than as wide rows, larger ones slower (float32 gains on larger
# blocks too). int64 and uint64 (_int_tiles_for) the same way, against int_sums.
NARROW_64BIT_MAX_BLOCK = 1 << 13
# A task of float_tiles takes whole narrow blocks, enough for this many elements, while that leaves
# FEW_NARROW_TASKS tasks.
NARROW_TASK_ELEMENTS = 1 << 14
FEW_NARROW_TASKS = 16


def narrow_tile(n_inner, tile, n_reduced, step):
    """Whether a single tile is narrow, for the kernels that read each outer block as one run of
    NARROW_ROW-element rows (float_narrow_tiles_*, int_tiles_*): a tile that is the whole kept row,
    of a width dividing NARROW_ROW, whose rows lie back to back, in blocks of at most
    NARROW_MAX_BLOCK elements."""
    return tile == n_inner == step and NARROW_ROW % n_inner == 0 and n_reduced * n_inner <= NARROW_MAX_BLOCK


@subroutine(fastmath=FASTMATH)
def _narrow_rows4(run, first, term, scale, acc):
    """acc[l] += the terms (x * scale (SUM), x * x (SUM_SQUARES) or |x| (SUM_ABS)) of the four
    NARROW_ROW-element rows of ``run`` from ``first`` on, summed as a tree."""
    a = run[first:first + NARROW_ROW]
    b = run[first + NARROW_ROW:first + 2 * NARROW_ROW]
    c = run[first + 2 * NARROW_ROW:first + 3 * NARROW_ROW]
    d = run[first + 3 * NARROW_ROW:first + 4 * NARROW_ROW]
    if term == SUM:  # each term scaled, as in _float_columns
        for l in range(NARROW_ROW):
            acc[l] += ((as_float64(a[l]) * scale + as_float64(b[l]) * scale)
                       + (as_float64(c[l]) * scale + as_float64(d[l]) * scale))
    elif term == SUM_ABS:
        for l in range(NARROW_ROW):
            acc[l] += ((abs(as_float64(a[l])) + abs(as_float64(b[l]))) + (abs(as_float64(c[l])) + abs(as_float64(d[l]))))
    else:
        for l in range(NARROW_ROW):
            va, vb, vc, vd = as_float64(a[l]), as_float64(b[l]), as_float64(c[l]), as_float64(d[l])
            acc[l] += (va * va + vb * vb) + (vc * vc + vd * vd)


@subroutine(fastmath=FASTMATH)
def _narrow_block_sums(src, offset, n, term, scale, acc):
    """acc[l] += the terms (as in _float_run; SUM, SUM_SQUARES or SUM_ABS) of src[offset + p] for 0 <= p < n
    and p % NARROW_ROW == l: four rows per step (one row per step is much slower: each
    accumulator waits on its own store), then single rows and the last part."""
    run = _view(src, offset, offset + n)
    p = 0
    while p + 4 * NARROW_ROW <= n:
        _narrow_rows4(run, p, term, scale, acc)
        p += 4 * NARROW_ROW
    while p < n:  # rows of NARROW_ROW, and the last part: whole rows of the outputs' width
        _float_columns(src, offset + p, NARROW_ROW, 1, smaller(NARROW_ROW, n - p), term, scale, acc[:0], 0, acc)
        p += NARROW_ROW


def _float_tiles_for(term, narrow):
    """float_sums for the commonest tile layout, fixed to one ``term`` (SUM, SUM_SQUARES or SUM_ABS) and to
    uncompensated data (not float64, but for narrow tiles, NARROW_ROW): one reduced axis of
    ``n_reduced`` rows ``step`` apart over ``n_outer`` x ``n_inner`` outputs, the inner ones
    contiguous and cut into tiles of ``tile``, one chunk, and no wide rows (_rows_per_wide_row is
    1). With ``narrow`` (the plan's narrow_tile) each outer block is read as rows of NARROW_ROW,
    several blocks per task; without, a task reads one tile. It spares these tiles the general
    kernel's run walking and per-task set-up.
    ``narrow`` is a constant of the kernel, so that each compiles one parallel loop (with ``narrow``
    an argument, a first call would compile both)."""

    def float_tiles(part, parts, src, base, n_outer, outer_stride, n_inner, n_reduced, step, tile, scale, divisor,
                    finish, result):
        src = _borrowed(src)
        if narrow:
            n = n_reduced * n_inner
            compensated = compensation_block(src) < NEVER
            # several small blocks per task: its arrays are allocated once
            per_task = larger(1, smaller(NARROW_TASK_ELEMENTS // n, n_outer // FEW_NARROW_TASKS))
            first_task, end_task = share(-(-n_outer // per_task), part, parts)
            for task in range(first_task, end_task):
                acc = zeroed_array(NARROW_ROW, np.float64)
                totals = zeroed_array(n_inner if compensated else 0, np.float64)
                comps = zeroed_array(n_inner if compensated else 0, np.float64)
                for outer in range(task * per_task, smaller(n_outer, (task + 1) * per_task)):
                    offset = base + outer * outer_stride
                    if compensated:  # float64: plain sums of BLOCK terms per accumulator, folded as float_sums does
                        totals[:] = 0.0
                        comps[:] = 0.0
                        for p in range(0, n, BLOCK * NARROW_ROW):
                            _narrow_block_sums(src, offset + p, smaller(BLOCK * NARROW_ROW, n - p), term, scale, acc)
                            _fold(acc, totals, comps)
                        for w in range(n_inner):
                            store_rounded(result, outer * n_inner + w,
                                          finished(_finish_sum(totals[w], comps[w], term, divisor, 0.0), finish))
                    else:  # (plain sums: only float64 needs the costlier compensated fold per block)
                        _narrow_block_sums(src, offset, n, term, scale, acc)
                        for w in range(n_inner):
                            total = 0.0
                            for j in range(w, NARROW_ROW, n_inner):
                                total += acc[j]
                                acc[j] = 0.0
                            store_rounded(result, outer * n_inner + w, finished(total / divisor, finish))
            return
        tiles_per_row = (n_inner + tile - 1) // tile
        first_task, end_task = share(n_outer * tiles_per_row, part, parts)
        for task in range(first_task, end_task):
            outer = np.int64(task) // tiles_per_row
            k0 = (np.int64(task) - outer * tiles_per_row) * tile
            width = smaller(tile, n_inner - k0)
            offset = base + outer * outer_stride + k0
            acc = zeroed_array(width, np.float64)
            no_maxima = acc[:0]  # (SUM_EXP's)
            j = 0
            while j + 8 <= n_reduced:  # eight rows per call, then four, then one (_float_columns)
                _float_columns(src, offset + j * step, step, 8, width, term, scale, no_maxima, 0, acc)
                j += 8
            if j + 4 <= n_reduced:
                _float_columns(src, offset + j * step, step, 4, width, term, scale, no_maxima, 0, acc)
                j += 4
            while j < n_reduced:
                _float_columns(src, offset + j * step, step, 1, width, term, scale, no_maxima, 0, acc)
                j += 1
            first = outer * n_inner + k0
            for w in range(width):
                store_rounded(result, first + w, finished(acc[w] / divisor, finish))  # (plain sums: no _finish_sum)

    return float_tiles


def _int_tiles_for(term):
    """int_sums for narrow tiles (narrow_tile), fixed to the wrapping sum of squares (``term``) or
    the exact mean of 64-bit data (32-bit means take float_tiles: _compute._int_mean_by_float_tiles),
    reading each outer block of n_reduced x n_inner contiguous elements as float_tiles does: as rows
    of NARROW_ROW (eight at a time for squares, four for the halves of means) into NARROW_ROW column
    accumulators, folded into the outputs at the end and finished into uint64 bits as int_rows does
    (divided by ``count``).
    int_sums reads these blocks as wide rows of a width known only at run time, with arrays per outer
    block, much slower than float32's narrow tiles. (With the fold through _fold_halves and per-task
    output arrays, a kernel loaded from the disk cache ran markedly slower than in the process that
    compiled it.)"""

    def int_tiles(part, parts, src, base, n_outer, outer_stride, n_inner, n_reduced, count, result):
        src = _borrowed(src)
        n = n_reduced * n_inner
        count = _U64(count)
        per_task = larger(1, smaller(NARROW_TASK_ELEMENTS // n, n_outer // FEW_NARROW_TASKS))
        first_task, end_task = share(-(-n_outer // per_task), part, parts)
        for task in range(first_task, end_task):
            # the low halves (or wrapping squares) and high halves of each column, as in int_sums
            low_acc = low_accumulators(src, result, NARROW_ROW)
            high_acc = zeroed_array(0 if term else NARROW_ROW, np.int64)
            for outer in range(task * per_task, smaller(n_outer, (task + 1) * per_task)):
                offset = base + outer * outer_stride
                p = 0
                if term:
                    while p + 8 * NARROW_ROW <= n:
                        _int_columns8(src, offset + p, NARROW_ROW, NARROW_ROW, term, low_acc, high_acc)
                        p += 8 * NARROW_ROW
                while p + 4 * NARROW_ROW <= n:
                    first = offset + p
                    _int_columns4(_view(src, first, first + NARROW_ROW),
                                  _view(src, first + NARROW_ROW, first + 2 * NARROW_ROW),
                                  _view(src, first + 2 * NARROW_ROW, first + 3 * NARROW_ROW),
                                  _view(src, first + 3 * NARROW_ROW, first + 4 * NARROW_ROW),
                                  term, low_acc, high_acc)
                    p += 4 * NARROW_ROW
                while p < n:  # rows of NARROW_ROW, and the last part: whole rows of the outputs' width
                    _int_columns(_view(src, offset + p, offset + smaller(p + NARROW_ROW, n)), term, low_acc,
                                 high_acc)
                    p += NARROW_ROW
                for w in range(n_inner):  # output w's columns are w, w + n_inner, ...
                    low = _U64(0)
                    high = _U64(0)
                    for j in range(w, NARROW_ROW, n_inner):
                        if term:
                            low += low_acc[j]
                        elif narrow_int(src):  # whole values in high_acc (_int_columns), split here
                            whole = high_acc[j]
                            low, high = _add_halves128(low, high, _U64(whole) & _U64(0xFFFFFFFF), whole >> 32)
                            high_acc[j] = 0
                        else:
                            low, high = _add_halves128(low, high, low_acc[j], high_acc[j])
                            high_acc[j] = 0
                        low_acc[j] = 0
                    result[outer * n_inner + w] = low if term else _int_mean(low, high, count)

    return int_tiles
