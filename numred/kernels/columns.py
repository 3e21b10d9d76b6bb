"""Columns of a tile: several rows of neighbouring outputs added per call into per-column
accumulators, and the fold of those accumulators into compensated totals.
"""
from __future__ import annotations

import functools

from numba.extending import overload

from .jit import subroutine
from .base import FASTMATH, SUM, SUM_ABS, SUM_SQUARES, _constant, _view, njit_for
from .decode import as_float64
from .exp import exp_nonpositive


def _float_columns(src, offset, step, nrows, width, term, scale, maxima, k0, acc):
    """acc[w] += the terms (as in _float_run: x * scale, x * x, exp(x - max), |x|) of element w of
    ``nrows`` (1, 4, or 8 but not for SUM_EXP) rows of a tile. Tiles exist only over contiguous kept
    elements, so a row is a contiguous run. Several rows per call cut the traffic to ``acc``: eight
    halve it again against four (a gain for float32; no loss for float16 and float64). Eight rows'
    terms are added as one chain of x * scale (multiply-adds, by contraction): on Zen 4 conversions
    and additions share two pipes and multiply-adds have two others, which frees those two pipes for
    the float16 and bfloat16 conversions of column means (sums of squares gain nothing so, and stay
    a tree)."""


@functools.cache
def _float_columns_for(nrows, term):
    """_float_columns for ``nrows`` rows and one ``term``, constants: the other row counts' and terms'
    loops are pruned. Numba does not prune branches on an argument's literal value, and with
    every branch compiled into each call of the one function, those calls made up most of a dtype's
    precompile time."""

    @njit_for(nrows, term, fastmath=FASTMATH)
    def float_columns(src, offset, step, width, scale, maxima, k0, acc):
        shift = maxima[k0:k0 + width]  # used by SUM_EXP only
        r0 = _view(src, offset, offset + width)
        if nrows == 8:
            r1 = _view(src, offset + step, offset + step + width)
            r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
            r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
            r4 = _view(src, offset + 4 * step, offset + 4 * step + width)
            r5 = _view(src, offset + 5 * step, offset + 5 * step + width)
            r6 = _view(src, offset + 6 * step, offset + 6 * step + width)
            r7 = _view(src, offset + 7 * step, offset + 7 * step + width)
            if term == SUM:
                for w in range(width):
                    acc[w] += ((((((as_float64(r0[w]) * scale + as_float64(r1[w]) * scale)
                                    + as_float64(r2[w]) * scale) + as_float64(r3[w]) * scale)
                                  + as_float64(r4[w]) * scale) + as_float64(r5[w]) * scale)
                               + as_float64(r6[w]) * scale) + as_float64(r7[w]) * scale
            elif term == SUM_ABS:
                for w in range(width):
                    acc[w] += (((abs(as_float64(r0[w])) + abs(as_float64(r1[w])))
                                + (abs(as_float64(r2[w])) + abs(as_float64(r3[w]))))
                               + ((abs(as_float64(r4[w])) + abs(as_float64(r5[w])))
                                  + (abs(as_float64(r6[w])) + abs(as_float64(r7[w])))))
            else:
                for w in range(width):
                    a, b, c, d = as_float64(r0[w]), as_float64(r1[w]), as_float64(r2[w]), as_float64(r3[w])
                    e, f, g, h = as_float64(r4[w]), as_float64(r5[w]), as_float64(r6[w]), as_float64(r7[w])
                    acc[w] += ((a * a + b * b) + (c * c + d * d)) + ((e * e + f * f) + (g * g + h * h))
        elif nrows == 4:
            r1 = _view(src, offset + step, offset + step + width)
            r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
            r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
            if term == SUM:  # each term scaled: a float64 sum that overflows is summed again scaled by 2**-64
                for w in range(width):
                    acc[w] += ((as_float64(r0[w]) * scale + as_float64(r1[w]) * scale)
                               + (as_float64(r2[w]) * scale + as_float64(r3[w]) * scale))
            elif term == SUM_SQUARES:
                for w in range(width):
                    a, b, c, d = as_float64(r0[w]), as_float64(r1[w]), as_float64(r2[w]), as_float64(r3[w])
                    acc[w] += (a * a + b * b) + (c * c + d * d)
            elif term == SUM_ABS:
                for w in range(width):
                    acc[w] += ((abs(as_float64(r0[w])) + abs(as_float64(r1[w])))
                               + (abs(as_float64(r2[w])) + abs(as_float64(r3[w]))))
            else:
                for w in range(width):
                    m = shift[w]
                    acc[w] += (exp_nonpositive(as_float64(r0[w]) - m) + exp_nonpositive(as_float64(r1[w]) - m)) + (
                        exp_nonpositive(as_float64(r2[w]) - m) + exp_nonpositive(as_float64(r3[w]) - m))
        elif term == SUM:
            for w in range(width):
                acc[w] += as_float64(r0[w]) * scale
        elif term == SUM_SQUARES:
            for w in range(width):
                v = as_float64(r0[w])
                acc[w] += v * v
        elif term == SUM_ABS:
            for w in range(width):
                acc[w] += abs(as_float64(r0[w]))
        else:
            for w in range(width):
                acc[w] += exp_nonpositive(as_float64(r0[w]) - shift[w])

    return float_columns


@overload(_float_columns, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _float_columns_by_rows(src, offset, step, nrows, width, term, scale, maxima, k0, acc):
    specialised = _float_columns_for(_constant(nrows, "nrows"), _constant(term, "term"))

    def call(src, offset, step, nrows, width, term, scale, maxima, k0, acc):
        return specialised(src, offset, step, width, scale, maxima, k0, acc)

    return call


@subroutine(fastmath=False)
def _fold(acc, totals, comps):
    """Add the plain accumulators into the compensated totals of their columns (acc[j] belongs to
    column j % totals.size) and clear them."""
    width = totals.size
    for j0 in range(0, acc.size, width):  # no j % width: a division per element costs more than the add
        for w in range(width):
            # Knuth's TwoSum: the same exact error as _neumaier's, without its branch on the
            # magnitudes, which the data decides
            total, value = totals[w], acc[j0 + w]
            t = total + value
            back = t - total
            comps[w] += (total - (t - back)) + (value - back)
            totals[w] = t
            acc[j0 + w] = 0.0
