"""Partial states of numred's reductions, and the one rule per accumulator that combines two of them.

A reduction cut into pieces leaves one partial state per piece: the chunks of one output in a
parallel kernel (combined in chunk order by the ``finish_*`` kernels of ``finish``), and the
blocks of a Dask array (``finish.combine_sum_states`` and ``combine_exp_states``, for
``numred._partials``). Wherever two partial states meet, they meet through the combine rule of
their accumulator here; no kernel carries a combine of its own. Every rule is a Numba function of
scalars (callable from Python too), takes the two states field by field and returns the combined
state; the identity state combines to the other one unchanged.

=========================  ==========================  ============  ===========================
accumulator (operators)    state                       identity      combine
=========================  ==========================  ============  ===========================
compensated float64 sum    (total, comp), float64      (0.0, 0.0)    ``combine_sums``: Neumaier
(float mean, sum of                                                  addition of the totals, the
squares, log-sum-exp's                                               compensations added; value
sum of exp(x - max))                                                 ``compensated_value``
exact wide integer         (low, high), uint64: the    (0, 0)        ``combine_wide``: 128-bit
(integer mean)             halves of a 128-bit                       addition with carry
                           two's-complement sum
wrapping integer           uint64                      0             ``combine_wrapping``: addition
(integer sum of squares)                                             modulo 2**64
max of keys (the max       (key, nans): the max key    (lowest, 0)   ``combine_maxima``: max of the
pass of log-sum-exp)       in its integer type and a                 keys, NaN flags or-ed
                           count of NaNs seen
max and sum of exp         (max, total, comp),         (-inf, 0.0,   ``combine_exp_sums``: the sum
(log-sum-exp in one pass   float64: total + comp is    0.0)          under the smaller max scaled
over pieces)               the sum of exp(x - max)                   by exp(its max - the larger)
=========================  ==========================  ============  ===========================

The kernels of one machine take log-sum-exp in two passes (the max first, then the sums of
exp(x - max) under that common max), so their pieces meet as compensated sums; the (max, sum of
exp) state is the one that needs no common max, for pieces that cannot share one. The integer
log-sum-exp's chunk sums of exp(x - max) are plain float64 additions: its result is decided exactly
wherever float rounding could change it (``numred._exact``).
"""
from __future__ import annotations

import math

import numpy as np

from .base import larger
from .jit import subroutine

_U64 = np.uint64


@subroutine(fastmath=False)
def add_compensated(total, comp, value):
    """(total, comp) plus ``value``: Neumaier's compensated addition, the error of total + value
    added to comp exactly."""
    t = total + value
    if abs(total) >= abs(value):
        comp += (total - t) + value
    else:
        comp += (value - t) + total
    return t, comp


@subroutine(fastmath=False)
def compensated_value(total, comp):
    """The float64 value of a compensated sum. Once the running total is inf or NaN, the
    compensation holds inf - inf garbage; the total is then already the IEEE answer."""
    return total + comp if math.isfinite(total) else total


@subroutine(fastmath=False)
def combine_sums(total, comp, other_total, other_comp):
    """Two compensated float64 sums as one."""
    total, comp = add_compensated(total, comp, other_total)
    return total, comp + other_comp


@subroutine(fastmath=False)
def combine_wide(low, high, other_low, other_high):
    """Two 128-bit two's-complement sums held as uint64 halves as one: exact, with the carry."""
    new_low = low + other_low
    return new_low, high + other_high + _U64(new_low < low)


@subroutine(fastmath=False)
def combine_wrapping(total, other_total):
    """Two uint64 sums modulo 2**64 as one."""
    return total + other_total


@subroutine(fastmath=False)
def combine_maxima(key, nans, other_key, other_nans):
    """Two maxima of keys (in one integer type) and their NaN counts as one."""
    return larger(key, other_key), nans + other_nans


@subroutine(fastmath=False)
def combine_exp_sums(maximum, total, comp, other_maximum, other_total, other_comp):
    """Two (max, compensated sum of exp(x - max)) states as one, under the larger max. A NaN max
    wins; a max of +inf decides the result alone (its sum is not used); -inf is an empty piece or
    one of -inf values only, whose sum is not used either."""
    if math.isnan(maximum) or other_maximum == -math.inf:
        return maximum, total, comp
    if math.isnan(other_maximum) or maximum == -math.inf:
        return other_maximum, other_total, other_comp
    if other_maximum > maximum:
        maximum, total, comp, other_maximum, other_total, other_comp = (
            other_maximum, other_total, other_comp, maximum, total, comp)
    if maximum == math.inf:
        return maximum, total, comp
    scale = math.exp(other_maximum - maximum)  # at most 1: the smaller max's sum shrinks, never overflows
    total, comp = add_compensated(total, comp, other_total * scale)
    return maximum, total, comp + other_comp * scale
