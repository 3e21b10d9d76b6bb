"""ReduceMax and ReduceMin, and the maxima and exponentials of ReduceLogSumExp, through the public
functions: maxima taken as integer keys of the float bits (a NaN of either sign found in any row),
each output's own maximum on leading axes, in wide tiles and in single rows, int8 and uint8 on every
layout kind, and the vectorised exp of every float log-sum-exp term against mpmath.
"""
from __future__ import annotations

import math

import ml_dtypes
import mpmath
import numpy as np
import pytest

import numred
import oracle
from oracle import assert_matches, expected


@pytest.mark.parametrize("dtype", oracle.NARROW_INT_DTYPES, ids=str)
def test_int8_and_uint8_max_and_min_on_every_layout_family(dtype):
    # every layout the precompile step walks (serial, rows, tiles, blocks, chunks), against NumPy's
    # exact integer max and min; the input's extremes placed last, where a chunked read ends
    from numred.tools.precompile import LAYOUTS

    info = np.iinfo(dtype)
    rng = np.random.default_rng(8)
    for shape, axes, *view in LAYOUTS:
        x = rng.integers(info.min + 1, info.max, shape, dtype=dtype)
        x.flat[-1], x.flat[-2] = info.min, info.max
        if view:
            x = x[view[0]]
        t = None if axes is None else tuple(axes)
        for func, peer in ((numred.reduce_max, np.max), (numred.reduce_min, np.min)):
            got = func(x, axes)
            assert got.dtype == dtype and np.array_equal(got, peer(x, axis=t, keepdims=True)), (shape, axes, func)


@pytest.mark.parametrize("shape,axis", [((150, 256), 0), ((6, 520, 64), 1), ((40, 33), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint64,
                                   np.int8])
def test_maxima_of_tiles_and_rows_find_every_planted_extreme(dtype, shape, axis):
    # The maxima of wide tiles are taken eight (wide) rows per pass, then four, then one by one
    # (kernels.general._max_keys_for); short contiguous rows in one stream. Output j gets the
    # largest value at reduced position j and the smallest at the next one, so every slot of every
    # pass holds some output's extremes; among floats also a NaN of either sign in every fifth
    # output, and in every seventh one zeros of both signs only, the +0.0 (the max) or the -0.0 (the
    # min) at position j alone.
    n = shape[axis]
    n_out = math.prod(shape) // n
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        matrix = rng.integers(info.min + 1, info.max, (n, n_out), dtype=dtype)
        top, bottom = info.max, info.min
    else:
        matrix = rng.uniform(-3, 3, (n, n_out)).astype(dtype)
        top, bottom = np.inf, -np.inf
    for j in range(n_out):
        matrix[j % n, j], matrix[(j + 1) % n, j] = top, bottom
    if np.dtype(dtype).kind not in "iu":
        for j in range(0, n_out, 5):
            matrix[(j + 2) % n, j] = -np.nan if j % 10 == 0 else np.nan
        for j in range(3, n_out, 7):
            matrix[:, j] = -0.0 if j % 2 else 0.0
            matrix[j % n, j] = 0.0 if j % 2 else -0.0
    # the reduced axis moved from the front of the matrix to ``axis`` of ``shape``
    x = np.ascontiguousarray(np.moveaxis(matrix.reshape((n,) + tuple(s for a, s in enumerate(shape) if a != axis)), 0,
                                         axis))
    assert x.shape == shape
    for op in ("reduce_max", "reduce_min"):
        assert_matches(getattr(numred, op)(x, axis), expected(op, x, axis))


@pytest.mark.parametrize("n", [32768, 32769, 65539])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint64])
def test_long_rows_find_their_extremes_in_any_quarter_and_the_rest(dtype, n):
    # A long contiguous run of the general kernel is read as four quarters side by side, then the
    # 0-3 elements after them (kernels.maxima.max_run); contiguous rows four at a time, side by side
    # (maxima.four_max_key_runs), the last 1-3 rows one by one, each long one in quarters as well
    # (kernels.rows.float_rows_extrema; where reading.QUARTER_LONG_RUNS). Row r holds its largest value at
    # position r of the positions below (each end of each quarter, the rest, and some in between)
    # and its smallest at the next one; among floats also a NaN of either sign in every fifth row
    # (each of the four side by side in turn) and zeros of both signs alone in every seventh. Rows
    # (67: groups of four for 64 rows and more, numred._compute._extrema_rows, and 3 over),
    # a whole row (one output) and nine rows over both axes.
    quarter = n // 4
    ends = {j * quarter + d for j in range(1, 5) for d in (-1, 0, 1)}
    positions = sorted({0, 1, quarter // 2, n // 3, (3 * n) // 4, n - 1} | {p for p in ends if p < n})
    n_rows = 67
    rng = np.random.default_rng(11)
    floats = np.dtype(dtype).kind not in "iu"
    if floats:
        x = rng.uniform(-3, 3, (n_rows, n)).astype(dtype)
        top, bottom = np.inf, -np.inf
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min + 1, info.max, (n_rows, n), dtype=dtype)
        top, bottom = info.max, info.min
    for r in range(n_rows):
        x[r, positions[r % len(positions)]] = top
        x[r, positions[(r + 1) % len(positions)]] = bottom
        if floats and r % 5 == 4:
            x[r, positions[(r + 2) % len(positions)]] = -np.nan if r % 10 == 4 else np.nan
        if floats and r % 7 == 6:
            x[r] = -0.0 if r % 2 else 0.0
            x[r, positions[r % len(positions)]] = 0.0 if r % 2 else -0.0
    for op in ("reduce_max", "reduce_min"):
        for data, axes in ((x, [1]), (x[3], [0]), (x[:9], None)):
            assert_matches(getattr(numred, op)(data, axes), expected(op, data, axes))
        # nine rows without NaNs over both axes: chunks of the general kernel, each one run read in
        # quarters, the last element of the last run (beyond its quarters, for n not a multiple of
        # four) holding the extreme
        plain = x[[r for r in range(n_rows) if r % 5 != 4 and r % 7 != 6][:9]]
        for last in (top, bottom, np.nan) if floats else (top, bottom):
            data = plain.copy()
            data[-1, -1] = last
            assert_matches(getattr(numred, op)(data), expected(op, data))
        # one row alone (a whole input's one output: the row kernels read it as four quarters side
        # by side, then its last 0-3 elements), its extreme at each end of each quarter in turn
        for p in sorted(p for p in ends | {n - 1} if p < n):
            for extreme in (top, bottom, np.nan) if floats else (top, bottom):
                data = plain[0].copy()
                data[p] = extreme
                assert_matches(getattr(numred, op)(data), expected(op, data), f"at {p}")


ONE_SIGN_ROWS = (
    # (sign of the row's values, the special value planted, if any)
    (-1, None), (1, None), (-1, -np.nan), (-1, np.nan), (1, -np.nan), (1, np.nan), (-1, -np.inf),
    (-1, np.inf), (1, np.inf), (1, -np.inf), (-1, -0.0), (-1, 0.0), (1, 0.0), (1, -0.0), (0, 0.0), (0, None),
)


@pytest.mark.parametrize("n", [5, 1000, 70001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_rows_of_one_sign_find_their_extremes(dtype, n):
    # Which element holds a float max or min, and whether a NaN is found, depends on the signs
    # present: a max of negative values only is the one of smallest magnitude, a min of positive
    # values only likewise, and a NaN's sign bit may be set. Rows of negative values only, positive
    # only, and zeros of one sign (sign 0: -0.0), each with a NaN or an infinity of either sign or a
    # zero of the other sign planted, or none; rows (an even and an odd count; and 85 rows, row i of
    # kind (i % 17) % 16: 17 is 1 modulo 4, so that read four side by side each of the 16 kinds
    # takes each of the four places), and each
    # kind of row over all axes of three copies (the general kernel's chunks, long runs read in
    # quarters).
    rng = np.random.default_rng(23)
    x = np.empty((len(ONE_SIGN_ROWS), n), dtype=dtype)
    for r, (sign, planted) in enumerate(ONE_SIGN_ROWS):
        x[r] = rng.uniform(0.5, 3, n) * sign if sign else -0.0
        if planted is not None:
            x[r, (r * 7919) % n if r % 3 else n - 1] = planted
    for op in ("reduce_max", "reduce_min"):
        for rows in (x, x[1:], x[np.arange(85) % 17 % len(ONE_SIGN_ROWS)]):
            assert_matches(getattr(numred, op)(rows, [1]), expected(op, rows, [1]))
        for r in range(len(ONE_SIGN_ROWS)):
            block = np.repeat(x[r:r + 1], 3, axis=0)
            assert_matches(getattr(numred, op)(block), expected(op, block), f"row kind {ONE_SIGN_ROWS[r]}")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64])
def test_leading_axis_maxima_are_per_column(dtype):
    # Reducing a leading axis reads rows of neighbouring outputs together; every column must start
    # its max on its own data, not on the first column's (a wrong shift shows in integer results).
    x = np.array([[100, 0, 0, 7], [0, 1, 2, 7], [3, 0, 50, 7]], dtype)
    out = numred.reduce_log_sum_exp(x, 0, 0)
    for j in range(x.shape[1]):
        column = [int(v) for v in x[:, j]]
        m = max(column)
        exact = m + math.log(math.fsum(math.exp(v - m) for v in column))
        if np.dtype(dtype).kind in "iu":
            assert int(out[j]) == math.trunc(exact)
        else:
            assert out[j] == pytest.approx(exact, rel=1e-6)


@pytest.mark.parametrize("layout", ["contiguous", "every other column", "columns reversed", "transposed"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16,
                                   np.int32, np.uint32, np.int64, np.uint64])
def test_row_log_sum_exp_finds_each_rows_max_and_sum_in_one_task(dtype, layout):
    # Parallel single-run log-sum-exps find each row's max and its sum of exp(x - max) in one task
    # (kernels.rows.float_rows_log_sum_exp, int_rows_log_sum_exp). Every row gets its own offset, so a
    # row that took its neighbour's max is off by far more than rounding; float rows carry the special
    # values the max decides: NaN anywhere (also beside +inf), +inf, all -inf, -inf beside finite values.
    rng = np.random.default_rng(11)
    n_rows, n = 2003, 37  # above 2**15 elements: parallel
    offsets = np.arange(n_rows)[:, None] % 61
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(0, 40, size=(n_rows, 2 * n)) + offsets * 1000
        if np.dtype(dtype).kind == "i":
            x[1::2] -= 70_000
    else:
        x = rng.uniform(-3, 3, size=(n_rows, 2 * n)) + offsets / 4
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[5, 3] = x[6, 2 * n - 1] = np.nan
        x[7, 0], x[7, 9] = np.inf, np.nan
        x[8, 11] = np.inf
        x[9, :] = -np.inf
        x[10, 4] = -np.inf
    view = {"contiguous": x[:, :n], "every other column": x[:, ::2], "columns reversed": x[:, ::-1],
            "transposed": np.ascontiguousarray(x.T).T}[layout]
    before = x.copy()
    out = numred.reduce_log_sum_exp(view, 1, keepdims=0)
    assert_matches(out, expected("reduce_log_sum_exp", view, 1, keepdims=0))
    assert x.tobytes() == before.tobytes()
    if np.dtype(dtype).kind in "iu":  # a row whose result does not fit the dtype is an error
        top = np.iinfo(dtype).max
        view = x[:, :n].copy()
        view[1500, :3] = top  # top + log(3): one past the largest value
        with pytest.raises(ValueError, match="does not fit"):
            numred.reduce_log_sum_exp(view, 1)


@pytest.mark.parametrize("shape,axis", [((9, 7), 0), ((7, 9), 1), ((301, 131), 0), ((131, 301), 1)])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_log_sum_exp_finds_a_nan_of_either_sign_in_any_row(dtype, shape, axis):
    # The maxima are integer keys of the float bits; a NaN is found as a magnitude above +inf's bits,
    # so a NaN with its sign bit set (the smallest key) must count as much as a positive one. Output j
    # gets a NaN at reduced position j (every slot of a four-row pass, and the rows after the last
    # full pass), alternating signs; serial (small) and parallel shapes, runs (axis 1) and tiles (0).
    x = np.random.default_rng(3).uniform(-3, 3, size=shape).astype(dtype)
    bits = x.view(np.uint16 if x.itemsize == 2 else np.uint32 if x.itemsize == 4 else np.uint64)
    sign = bits.dtype.type(1 << (8 * x.itemsize - 1))
    n_out, n_reduced = x.shape[1 - axis], x.shape[axis]
    for j in range(0, n_out, 2):
        at = (j % n_reduced, j) if axis == 0 else (j, j % n_reduced)
        x[at] = np.nan
        if j % 4 == 0:
            bits[at] |= sign
    assert np.isnan(x).sum() == -(-n_out // 2) and (bits[np.isnan(x)] & sign).any()
    out = numred.reduce_log_sum_exp(x, axis, keepdims=0)
    assert np.isnan(out.astype(np.float64)[::2]).all()
    assert_matches(out, expected("reduce_log_sum_exp", x, axis, keepdims=0))


def test_vectorised_exp_is_within_two_and_a_half_ulp():
    # numred.kernels.exp.exp_nonpositive (the exp of every float log-sum-exp term) against 40-digit
    # mpmath: points across [-708, 0], near 0, and on both sides of the ln(2)/2 range-reduction
    # boundaries; below -708 (and -inf) it gives 0, which cannot move a sum holding exp(0) = 1.
    from numba import njit
    from numred.kernels import exp

    exp_nonpositive = njit(lambda x: exp.exp_nonpositive(x))  # (a subroutine: called from jitted code only)

    mpmath.mp.dps = 40
    rng = np.random.default_rng(11)
    half_ln2 = math.log(2) / 2
    boundaries = np.arange(1, 2 * 708 / math.log(2), 37) * -half_ln2
    points = np.concatenate([rng.uniform(-708, 0, 3000), -rng.exponential(1.0, 3000), -rng.uniform(0, 1e-6, 500),
                             np.nextafter(boundaries, 0), np.nextafter(boundaries, -np.inf), [0.0, -708.0]])
    worst = 0.0
    for x in points:
        got = exp_nonpositive(float(x))
        exact = mpmath.exp(mpmath.mpf(float(x)))
        worst = max(worst, float(abs(mpmath.mpf(got) - exact)) / math.ulp(float(exact)))
    assert worst <= 2.5, worst
    assert all(exp_nonpositive(x) == 0.0 for x in (-708.0001, -745.2, -1e300, -np.inf))
