"""Blocks (RKR): one kept axis between two reduced ones. Each task takes a group of neighbouring
outputs and reads their runs block by block, in memory order.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .base import SUM_EXP, _U64, _borrowed, njit_for, share, filled_array, new_array, zeroed_array, smaller
from .decode import as_wide
from .integers import (HALVES_BLOCK, _add_halves128, _int_exp_run, _int_log_sum_exp, _int_mean, _term_run,
                       halves_run)
from .maxima import key_to_float64, lowest_key, magnitude_bits, max_run
from .runs import _add_run
from .store import _finish_sum, finished, store_rounded


@njit(fastmath=False, inline="always")  # integer arithmetic: the caller's flags change nothing
def _group_of_outputs(group, n_kept, groups):
    """(first output, count) of task ``group`` of ``groups`` in a single-block kernel: the outputs
    cut into groups whose sizes differ by at most one."""
    k0 = np.int64(group) * n_kept // groups
    return k0, (np.int64(group) + 1) * n_kept // groups - k0


def _float_blocks_for(term):
    """float_sums for reduced axes on both sides of one kept axis (RKR: the batch and spatial axes of
    NCHW data, say), fixed to one ``term`` (SUM, of x * scale, SUM_SQUARES or SUM_ABS): ``n_outer``
    blocks ``outer_stride`` apart, each holding the contiguous runs of ``n_inner`` elements of the
    ``n_kept`` outputs, ``kept_stride`` apart. One output at a time, as float_sums walks them, reads
    a short run from each block in turn (1 KiB, 128 blocks apart, on 128x512x256 axes [0, 2]); here
    each task takes a group of neighbouring outputs and reads their runs block by block, in memory
    order, adding each run to its output's sum (_add_run) as float_sums does, in the same order: the
    same bits for any grouping, so there are ``groups`` of them, one per thread (the plan's). Reading
    in memory order is what makes this faster than float_sums on such layouts."""

    def float_blocks(part, parts, src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, scale,
                     divisor, finish, result):
        src = _borrowed(src)
        first_task, end_task = share(groups, part, parts)
        for group in range(first_task, end_task):
            k0, width = _group_of_outputs(group, n_kept, groups)
            totals = zeroed_array(width, np.float64)
            comps = zeroed_array(width, np.float64)
            sigmas = zeroed_array(width, np.float64)  # (_float64_run_for's, passed on from run to run of one output)
            for i in range(n_outer):
                origin = base + i * outer_stride + k0 * kept_stride
                for w in range(width):
                    totals[w], comps[w], sigmas[w] = _add_run(totals[w], comps[w], sigmas[w], src,
                                                              origin + w * kept_stride, n_inner, 1, term, scale)
            for w in range(width):
                value = _finish_sum(totals[w], comps[w], term, divisor, scale)
                store_rounded(result, k0 + w, finished(value, finish))

    return float_blocks


def _int_blocks_for(term):
    """int_sums for single-block plans (see _float_blocks_for), fixed to the exact mean or the
    wrapping sum of squares or of |x| (``term``, as in int_rows): a group of neighbouring outputs
    per task, their runs read block by block, each added to its output's 128-bit sum or wrapping
    uint64 sum (exact: the order does not matter); finished into uint64 bits as int_rows does
    (divided by ``count``)."""

    def int_blocks(part, parts, src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, count, result):
        src = _borrowed(src)
        count = _U64(count)
        first_task, end_task = share(groups, part, parts)
        for group in range(first_task, end_task):
            k0, width = _group_of_outputs(group, n_kept, groups)
            low = zeroed_array(width, np.uint64)
            high = zeroed_array(width, np.uint64)
            for i in range(n_outer):
                origin = base + i * outer_stride + k0 * kept_stride
                for w in range(width):
                    offset = origin + w * kept_stride
                    if term:
                        low[w] += _term_run(src, offset, n_inner, 1, term)
                    else:
                        for b in range(0, n_inner, HALVES_BLOCK):
                            low_sum, high_sum = halves_run(src, offset + b, smaller(HALVES_BLOCK, n_inner - b), 1)
                            low[w], high[w] = _add_halves128(low[w], high[w], low_sum, high_sum)
            for w in range(width):
                result[k0 + w] = low[w] if term else _int_mean(low[w], high[w], count)

    return int_blocks


def _group_maxima_for(float_bits):
    """group_maxima(src, origin, width, kept_stride, n_outer, outer_stride, n_inner, lowest) ->
    (best, top_magnitude): max_run over the runs of ``width`` neighbouring outputs, block by block,
    one slot per output (as max_keys: float keys and their largest magnitude bits for float data,
    ``float_bits``; integer values otherwise)."""

    @njit_for(float_bits, fastmath=False)
    def group_maxima(src, origin, width, kept_stride, n_outer, outer_stride, n_inner, lowest):
        best_of = filled_array(width, lowest)
        top_magnitude_of = filled_array(width, magnitude_bits(lowest) if float_bits else lowest)
        for i in range(n_outer):
            for w in range(width):
                best_of[w], top_magnitude_of[w] = max_run(src, origin + i * outer_stride + w * kept_stride, n_inner, 1,
                                                          float_bits, best_of[w], top_magnitude_of[w], 0)
        return best_of, top_magnitude_of

    return group_maxima


_float_group_maxima = _group_maxima_for(True)
_int_group_maxima = _group_maxima_for(False)


def float_blocks_log_sum_exp(part, parts, src, keys, inf_bits, base, n_kept, kept_stride, n_outer, outer_stride,
                             n_inner, groups, result):
    """Float log-sum-exp of single-block plans, the maxima and the sums of a group of outputs in one
    task (as float_rows_log_sum_exp does for rows): ``keys`` is src's memory viewed as signed
    integers (max_keys), the sums are _float_blocks_for's, in its order, of exp(x - max). (A max kernel
    and then a sum kernel were two parallel loops to compile on a first call, the slowest first calls.)"""
    src, keys = _borrowed(src), _borrowed(keys)
    carrier = src[:0]
    first_task, end_task = share(groups, part, parts)
    for group in range(first_task, end_task):
        k0, width = _group_of_outputs(group, n_kept, groups)
        origin = base + k0 * kept_stride
        best_of, top_magnitude_of = _float_group_maxima(keys, origin, width, kept_stride, n_outer, outer_stride,
                                                        n_inner, lowest_key(keys[base]))
        maxima = new_array(width, np.float64)
        for w in range(width):
            maxima[w] = np.nan if top_magnitude_of[w] > inf_bits else key_to_float64(as_wide(best_of[w]), carrier)
        totals = zeroed_array(width, np.float64)
        comps = zeroed_array(width, np.float64)
        sigmas = zeroed_array(width, np.float64)
        for i in range(n_outer):
            for w in range(width):
                if math.isfinite(maxima[w]):  # a non-finite max decides the result alone
                    totals[w], comps[w], sigmas[w] = _add_run(totals[w], comps[w], sigmas[w], src,
                                                              origin + i * outer_stride + w * kept_stride, n_inner, 1,
                                                              SUM_EXP, maxima[w])
        for w in range(width):
            store_rounded(result, k0 + w, _finish_sum(totals[w], comps[w], SUM_EXP, 1.0, maxima[w]))


def int_blocks_log_sum_exp(part, parts, src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups,
                           type_max, result):
    """Integer log-sum-exp of single-block plans, the maxima and the exp sums of a group of outputs in
    one task (as float_blocks_log_sum_exp), into ``result`` of the input dtype; False if a result
    does not fit it (``type_max``) or is not decided, for the caller to raise (as
    rows.int_rows_log_sum_exp)."""
    src = _borrowed(src)
    count = n_outer * n_inner
    all_fit = True
    first_task, end_task = share(groups, part, parts)
    for group in range(first_task, end_task):
        k0, width = _group_of_outputs(group, n_kept, groups)
        origin = base + k0 * kept_stride
        lowest = lowest_key(src[base])
        best_of = _int_group_maxima(src, origin, width, kept_stride, n_outer, outer_stride, n_inner, lowest)[0]
        totals = zeroed_array(width, np.float64)
        for i in range(n_outer):
            for w in range(width):
                totals[w] += _int_exp_run(src, origin + i * outer_stride + w * kept_stride, n_inner, 1,
                                          as_wide(best_of[w]))
        for w in range(width):
            result[k0 + w], fits = _int_log_sum_exp(as_wide(best_of[w]), totals[w], count, type_max)
            all_fit &= fits
    return all_fit
