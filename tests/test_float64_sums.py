"""float64 sums through the public functions (ReduceSum, ReduceMean, ReduceSumSquare, and the sums
under ReduceL1, ReduceL2 and ReduceLogSum), against exact sums (tests/oracle.py, mpmath): no worse
than NumPy's pairwise summation and nearly exact along runs, split pieces and folded columns, with
and without fused multiply-adds; sums whose partial sums overflow rescaled, a sum beyond the range
inf only when the exact sum is; results the kernels cannot finish (squares that underflow or
overflow, a log of a sum that overflowed) sent to the general and the exact paths; and the
compensated steps compiled without reassociation.
"""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numred
import oracle
from oracle import assert_matches, expected
from test_properties import FUNCS, SIDES, layouts


# ---- accuracy: no worse than NumPy's pairwise summation, nearly exact ----------------------------


def _exact_mean_and_sumsq(x):
    values = x.tolist()
    return oracle.exact_sum(values) / len(values), oracle.exact_sum(values, squares=True)


@pytest.mark.parametrize("kind", ["uniform", "tenths", "mixed-magnitudes", "cancelling"])
def test_float64_error_no_worse_than_numpy_pairwise(kind):
    rng = np.random.default_rng(17)
    n = 40_000
    if kind == "uniform":
        x = rng.random(n)
    elif kind == "tenths":
        x = np.full(n, 0.1)
    elif kind == "mixed-magnitudes":
        x = np.concatenate([np.full(n // 2, 1e8), rng.random(n // 2) * 1e-3])
        rng.shuffle(x)
    else:
        x = np.concatenate([rng.random(n // 2) * 1e3, -rng.random(n // 2) * 1e3])
        rng.shuffle(x)
    mean_exact, sumsq_exact = _exact_mean_and_sumsq(x)
    F = oracle.Fraction
    for opname, exact, peer in [
        ("reduce_mean", mean_exact, np.mean(x)),
        ("reduce_sum", mean_exact * n, np.sum(x)),
        ("reduce_sum_square", sumsq_exact, np.sum(np.square(x))),
    ]:
        got = FUNCS[opname](x, None, keepdims=0)
        assert got.dtype == np.float64 and got.shape == ()
        err = abs(F(float(got[()])) - exact)
        err_numpy = abs(F(float(peer)) - exact)
        allowed = err_numpy + 2 * oracle.ulp(exact, np.float64)
        assert err <= allowed, f"{opname} {kind}: error {float(err):.3g} > numpy's {float(err_numpy):.3g} + 2 ulp"


# float64 sums and sums of squares along runs are nearly exact (kernels.split_sums._float64_run_for): the result is
# the float64 rounding of a sum within n * 2**-100 of the sum of the terms' magnitudes of the exact
# one (a mean: that rounded sum divided by n and rounded again), where NumPy's pairwise sum and a
# plain vectorised one err by up to about 2**-53 of it times a factor growing with n. Cancelling data
# (sums some 1e-16 of sum |x|), in random order and in sorted halves, along rows (long, strided, every
# other element, short).
@pytest.mark.parametrize("order", ["shuffled", "halves"])
@pytest.mark.parametrize("seed", range(4))
def test_float64_sums_along_runs_are_nearly_exact(seed, order):
    rng = np.random.default_rng(100 + seed)
    half = rng.random((6, 3000)) * 10.0 ** rng.integers(-3, 9)
    x = np.concatenate([half, -rng.permuted(half, axis=1) * (1 + 2.0**-40)], axis=1)  # sums far below sum|x|
    if order == "shuffled":
        x = rng.permuted(x, axis=1)
    for view in (x, x[:, ::3], x[:, ::2], x[:, :37]):
        for opname in ("reduce_mean", "reduce_sum", "reduce_sum_square"):
            got = FUNCS[opname](view, [1], keepdims=0)
            for k, row in enumerate(view.tolist()):
                lowest, highest = oracle.nearly_exact_float64_interval(row, opname)
                assert lowest <= got[k] <= highest, \
                    f"{opname} {order} row {k} of {view.shape}: {got[k]!r} outside [{lowest!r}, {highest!r}]"


# The split sums of a float64 run start each piece (kernels.split_sums.SPLIT_PIECE elements) from the sigma of
# the piece before, in the same row or the row before in the same task, and must notice when it is
# wrong: here the magnitude jumps by 2**+-40 from row to row and within rows (both a sigma far too
# small, which would make the high parts inexact, and one far too large, which would make the low
# parts inexact), and NaN or inf arrives after finite pieces. Rows of one piece are split-summed
# without the general row's compensated additions, from the sigma of the row before; so are short
# rows of every other element (read over their whole span), and contiguous rows from
# kernels.split_sums.ONE_PASS_MIN_ROW elements on (600 rows of 64: a parallel-sized input).
@pytest.mark.parametrize("layout", ["three pieces", "one piece", "every other element", "short rows"])
def test_float64_split_sums_notice_magnitude_jumps(layout):
    from numred.kernels.split_sums import ONE_PASS_MIN_ROW, SPLIT_PIECE

    rng = np.random.default_rng(7)
    n_rows = 600 if layout == "short rows" else 64  # tasks of four rows; three equal pieces per row, or one
    n = {"three pieces": 3 * SPLIT_PIECE - 300, "one piece": SPLIT_PIECE - 100, "every other element": 96,
         "short rows": 64}[layout]
    assert layout != "short rows" or n >= ONE_PASS_MIN_ROW
    piece = -(-n // 3)
    half = rng.random((n_rows, n // 2)) * 2.0 ** rng.integers(-40, 41, size=(n_rows, 1))
    x = np.concatenate([half, -rng.permuted(half, axis=1) * (1 + 2.0**-40)], axis=1)
    if layout == "every other element":  # the same values, each followed by a copy the view skips
        x = np.repeat(x, 2, axis=1)[:, ::2]
    x[::3, piece:2 * piece] *= 2.0**40  # the middle piece of every third row
    x[1::3, piece:2 * piece] *= 2.0**-40
    F = oracle.Fraction
    rows = x.tolist()
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, [1], keepdims=0)
        for k, row in enumerate(rows):
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(row) / n, oracle.exact_sum(row, magnitudes=True) / n
            else:
                exact = bound = oracle.exact_sum([v * v for v in row])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + n * F(2) ** -100 * bound, \
                f"{opname} row {k}: error {float(err):.3g}, exact {float(exact):.6g}"
    # the general kernel: several runs per output (axes 0 and 2), their magnitudes 2**+-40 apart
    y = rng.random((8, 5, 1500)) * 2.0 ** np.array([40, -40] * 4)[:, None, None]
    y[:, :, 750:] = -y[:, :, :750] * (1 + 2.0**-40)
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](y, [0, 2], keepdims=0)
        for k in range(5):
            row = y[:, k, :].ravel().tolist()
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(row) / len(row), oracle.exact_sum(row, magnitudes=True) / len(row)
            else:
                exact = bound = oracle.exact_sum([v * v for v in row])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + len(row) * F(2) ** -100 * bound, (opname, k)
    late = min(100, n // 4)
    x[5, n - 1] = np.nan  # in the last piece
    x[9, n - late] = np.inf
    x[9, n - late + 1] = -np.inf
    x[13, n - 2 * late] = np.inf
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, [1], keepdims=0)
        assert np.isnan(got[5]), opname
        assert np.isnan(got[9]) if opname == "reduce_mean" else got[9] == np.inf, opname  # inf - inf; inf + inf
        assert got[13] == np.inf, opname


# float64 column sums (a leading reduced axis) add each column's rows in plain float64 accumulators
# of at most 256 terms each, folded into compensated totals; short rows are read as "wide rows" of
# several rows at once, with one accumulator per column and position. Cancelling columns, exact
# oracle: within one rounding plus 2**-44 (2 * 256 * 2**-53) of the sum of |x|; NumPy's row-by-row
# column sums err by up to n * 2**-53 of it. Columns of fewer than 256 rows are never folded (their
# plain sums are the totals), 256 rows are folded once (16x4096, 255x200, 256x200).
@pytest.mark.parametrize("shape, axes", [((150000, 4), [0]), ((3000, 64), [0]), ((40, 75, 64), [0, 1]),
                                         ((16, 4096), [0]), ((255, 200), [0]), ((256, 200), [0])])
def test_float64_column_sums_fold_their_accumulators(shape, axes):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, size=shape)
    x -= x.mean(axis=tuple(axes), keepdims=True)  # sums far below sum |x|
    F = oracle.Fraction
    columns = np.moveaxis(x, axes, list(range(len(axes)))).reshape(-1, x.shape[-1]).T
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, axes, keepdims=0).reshape(-1)
        for k, column in enumerate(columns):
            values = column.tolist()
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(values) / len(values), oracle.exact_sum(values, magnitudes=True) / len(values)
            else:
                exact = bound = oracle.exact_sum([v * v for v in values])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + F(2) ** -44 * bound, (opname, shape, k, float(err))


_FLOAT64_SPLIT_SCRIPT = """
import numpy as np, numred
from numred import kernels
x = np.load({data!r})
views = (x, x[:, ::2], x[:, ::3], x[:, :150], x[:, :60])
results = [numred.reduce_mean(v, [1], keepdims=0) for v in views]
results += [numred.reduce_sum_square(v, [1], keepdims=0) for v in views]
print(int(kernels.split_sums.SPLIT_ON_FMA))
np.save({out!r}, np.concatenate(results))
"""


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["host", "generic"])
def test_float64_split_sums_are_nearly_exact_with_and_without_fma(cpu, tmp_path):
    """The float64 split passes do two of their additions as fused multiply-adds by an opaque 1.0
    where the CPU Numba compiles for has FMA (kernels.split_sums.SPLIT_ON_FMA, x86-64), and as plain
    additions elsewhere (NUMBA_CPU_NAME=generic here, as on CPUs without FMA or not x86). Both
    must give the nearly exact sums (oracle.nearly_exact_float64_interval). Rows of
    cancelling data, contiguous (one split piece, and short rows of two passes) and strided (every
    other and every third element)."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    half = rng.random((4, 1000)) * 10.0 ** rng.integers(-3, 9, size=(4, 1))
    x = rng.permuted(np.concatenate([half, -half * (1 + 2.0**-40)], axis=1), axis=1)  # sums far below sum |x|
    data, out = tmp_path / "x.npy", tmp_path / "sums.npy"
    np.save(data, x)
    env = dict(os.environ)
    if cpu == "generic":
        env["NUMBA_CPU_NAME"] = "generic"
    done = subprocess.run([sys.executable, "-c", _FLOAT64_SPLIT_SCRIPT.format(data=str(data), out=str(out))],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    if cpu == "generic":
        assert done.stdout.strip() == "0", "the generic CPU must take plain additions"
    got = iter(np.load(out).tolist())
    views = (x, x[:, ::2], x[:, ::3], x[:, :150], x[:, :60])
    for opname in ("reduce_mean", "reduce_sum_square"):
        for view in views:
            for row in view.tolist():
                lowest, highest = oracle.nearly_exact_float64_interval(row, opname)
                value = next(got)
                assert lowest <= value <= highest, (cpu, opname, view.shape, value, lowest, highest)


def test_split_and_neumaier_stay_exact_when_a_fastmath_loop_compiles_them():
    # The IR of each, compiled (or reused) for a FASTMATH caller, has no reassociating arithmetic,
    # and _split's parts are exact: high a multiple of ulp(sigma) / 2, high + low the term itself.
    from numba import njit
    from numred import kernels
    @njit(fastmath=kernels.base.FASTMATH)
    def caller(term, sigma):
        high, low = kernels.split_sums._split(term, sigma, kernels.split_sums._opaque_one())  # as the split passes do
        total, comp = kernels.states.add_compensated(1.0, 0.0, sigma * 2.0**-70)
        return high, low, total, comp
    term, sigma = 1.0 + 2.0**-50, 2.0**10
    high, low, total, comp = caller(term, sigma)
    half_ulp = math.ulp(sigma) / 2
    assert high % half_ulp == 0 and high + low == term and low != 0.0
    assert total == 1.0 and comp == 2.0**-60
    for function in (kernels.split_sums._split, kernels.states.add_compensated):
        for signature, ir in function.inspect_llvm().items():
            arithmetic = [line for line in ir.splitlines()
                          if any(op in line for op in (" fadd ", " fsub ", " fmul ", "@llvm.fma"))]
            assert arithmetic and not [line for line in arithmetic if "reassoc" in line], (function, signature)


# ---- overflow ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(20, 31), (400, 301), (1, 300_001)])  # serial, parallel rows, chunked
def test_a_float64_sum_overflows_only_when_the_exact_sum_does(shape):
    # Partial sums of finite float64 values can overflow where the whole sum does not: each row is
    # h values of +1.6e308, h of -1.6e308 and one of 1.5e308 - k * 1e300 (k: the row), whose exact
    # sum is that last value. Its float64 result must be finite and within the bound of any
    # float64 summation order (NumPy's pairwise sum's included, docs/SEMANTICS.md), n * 2**-53 * sum |x|.
    # A row whose exact sum is beyond float64's range gives inf of its sign.
    n_rows, n = shape
    h = n // 2
    x = np.empty(shape)
    x[:, :h] = 1.6e308
    x[:, h:2 * h] = -1.6e308
    x[:, -1] = 1.5e308 - np.arange(n_rows) * 1e300
    bound = (n + 2) * Fraction(2) ** -53 * (2 * h * Fraction(1.6e308) + Fraction(1.5e308))
    for call in range(2):
        got = numred.reduce_sum(x, [1], keepdims=0)
        assert np.isfinite(got).all(), (call, got[:3])
        assert all(abs(Fraction(float(g)) - Fraction(float(e))) <= bound for g, e in zip(got, x[:, -1])), call
    y = x.copy()
    y[:, h] = 1.6e308  # one more large positive term: the exact sum is above 3e308
    y[-1, :] = -1.6e308  # all negative
    expected = np.full(n_rows, np.inf)
    expected[-1] = -np.inf
    for call in range(2):
        got = numred.reduce_sum(y, [1], keepdims=0)
        assert np.array_equal(got, expected), (call, got[:3], got[-1:])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_parallel_float64_means_whose_sums_overflow_are_finite(data):
    # Parallel plans (32768 elements and more; test_matches_oracle's examples are all small) of every kind:
    # rows, tiles, narrow tiles, blocks, chunks, in every layout. Every sum overflows; each mean must
    # be the mean, which the rescaled retry finds (a kernel that added terms before scaling them
    # returned inf: tiles with 4-7 rows past a group of eight, found by this kind of sweep).
    shape = data.draw(st.lists(st.sampled_from(SIDES), min_size=2, max_size=4).filter(
        lambda s: 1 << 15 <= math.prod(s) <= 1 << 21), label="shape")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    base = np.random.default_rng(seed).uniform(1.0e308, 1.7e308, shape)
    x, owner, name = data.draw(layouts(base), label="layout")
    axes = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, unique=True), label="axes"))
    before = owner.copy()
    got = numred.reduce_mean(x, axes, keepdims=0)
    # the oracle: NumPy's pairwise mean of the values scaled by 2**-64 (exactly), scaled back, along
    # the last axis of a copy that holds each output's values in a row (NumPy sums pairwise along a
    # contiguous axis only: over the leading axes of a broadcast 8x1x1000x5 it added row by row and
    # was 600 float64 ulps off the exact mean, beyond the tolerance)
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = np.ascontiguousarray(np.moveaxis(x.astype(np.float64) * 2.0**-64, axes, range(len(kept), x.ndim)))
    want = np.mean(rows.reshape([x.shape[a] for a in kept] + [-1]), axis=-1) * 2.0**64
    assert np.isfinite(got).all(), name
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=name)
    assert owner.tobytes() == before.tobytes()


@pytest.mark.parametrize("layout", ["rows", "columns", "strided rows"])
def test_float64_means_of_parallel_inputs_retry_only_overflowing_sums(layout):
    # The results of a parallel float64 mean are checked for inf and NaN
    # (kernels.finish.all_finite_above); when one is found, the mean is computed again on the data scaled by
    # 2**-64, and every result that was not finite is replaced by the rescaled one. Here one
    # output among 400 overflows in its sum though its mean is finite, and others are inf, -inf or
    # NaN from their data, which the rescaled pass must give again.
    x = np.random.default_rng(11).uniform(-1, 1, (400, 300))
    x[5] = 1.7e308
    x[6, 7] = np.inf
    x[7, :2] = [-np.inf, 1.7e308]
    x[8, 100] = np.nan
    x[9, ::2], x[9, 1::2] = 1.7e308, -1.7e308  # its sum never overflows in pairs: 0
    view = {"rows": x, "columns": x.T, "strided rows": np.repeat(x, 2, axis=1)[:, ::2]}[layout]
    axis = 0 if layout == "columns" else 1
    out = numred.reduce_mean(view, axis, keepdims=0)
    assert_matches(out, expected("reduce_mean", view, axis, keepdims=0))
    assert out[5] == 1.7e308 and out[6] == np.inf and out[7] == -np.inf and np.isnan(out[8])


@pytest.mark.parametrize("layout", ["serial", "rows", "columns", "strided rows", "one long row"])
def test_float64_mean_of_an_infinity_and_values_whose_sum_overflows_the_other_way(layout):
    # Finite values whose float64 sum overflows to -inf, and one +inf: the exact sum is +inf, and
    # so is the mean (docs/SEMANTICS.md: an inf without the opposite one gives that inf). A plain sum gives
    # -inf + inf = NaN, or inf when the inf comes first: the result depended on the order, and the
    # rescaled retry (numred._compute.compute_direct) kept the NaN. Found by fuzzing against the oracle.
    rng = np.random.default_rng(12)
    n_rows, n = {"serial": (3, 5), "one long row": (1, 100_000)}.get(layout, (200, 300))
    x = rng.uniform(1.5e308, 1.7e308, (n_rows, n)) * np.where(np.arange(n_rows) % 2, 1, -1)[:, None]
    x[:, -1] = np.where(np.arange(n_rows) % 2, -np.inf, np.inf)  # the infinity last: after the overflow
    if n_rows > 2:
        x[1, 0] = np.nan  # stays NaN
        x[2, 0] = -np.inf  # both infinities: NaN
    view = {"columns": x.T, "strided rows": np.repeat(x, 2, axis=1)[:, ::2]}.get(layout, x)
    axis = 0 if layout == "columns" else 1
    for call in range(2):  # the second call of a geometry is one launch, which falls back to the driver
        out = numred.reduce_mean(view, axis, keepdims=0)
        assert_matches(out, expected("reduce_mean", view, axis, keepdims=0))
    if n_rows > 2:
        assert np.isnan(out[1:3]).all()
    assert (out[3:] == np.where(np.arange(3, n_rows) % 2, -np.inf, np.inf)).all()
    assert out[0] == np.inf


@pytest.mark.parametrize("shape, axis", [
    ((300, 400), 0), ((12, 3000), 0), ((13, 3000), 0), ((13, 40), 0),  # tiles: 8 + 4 (+ 1) rows
    ((100, 12, 300), 1), ((1000, 13, 4), 1), ((20, 13, 4), 1),  # (100 outer blocks: still parallel)
    ((120, 76, 4), 1), ((600, 45, 2), 1),  # narrow tiles: four rows of 64 at a time, then single rows
])
def test_float64_means_of_tiles_whose_sums_overflow_are_finite(shape, axis):
    # Tiles add their rows in groups (eight, four, one: kernels.columns._float_columns; narrow tiles four
    # rows of 64: _narrow_block_sums). When a float64 sum overflows, the mean is summed again with
    # every term scaled by 2**-64: a group added before scaling overflowed again, and the mean of
    # these finite values came out inf (before this test, for tiles with 4-7 rows past the last
    # group of eight).
    x = np.full(shape, 1.5e308)
    x[..., 0] = -1.5e308
    x[..., -1] = 1.7e308
    out = numred.reduce_mean(x, axis, keepdims=0)
    assert np.isfinite(out).all()
    assert_matches(out, expected("reduce_mean", x, axis, keepdims=0))


# ---- ReduceL1, ReduceL2 and ReduceLogSum: sums the kernels cannot finish -------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape,axes", [((3, 4), 1), ((5, 2, 3), (0, 2)), ((40, 6), 0), ((10_000,), 0),
                                        ((300, 400), 1)])
def test_finished_ops_leave_float64_edge_sums_to_the_general_path(dtype, shape, axes):
    # Small ReduceL1, L2 and LogSum calls are one serial kernel that finishes and rounds its results;
    # single runs (a serial vector, parallel rows) are the row kernels' sums, their results checked.
    # float64 sums they cannot finish (an L2 sum of squares that overflowed or may hold subnormal
    # squares, zero included; a LogSum sum that overflowed on the way) send the call to the general
    # path: first calls and repeats (one launch) alike, mixed with ordinary outputs.
    big = 1e200 if np.dtype(dtype).itemsize == 8 else 1.0
    x = np.full(shape, 1.5, dtype)
    x.reshape(-1)[:3] = (big, big, -big)
    if np.dtype(dtype).itemsize == 8:
        x.reshape(-1)[-4:] = 1e-200
        x.reshape(-1)[-7:-4] = (1.7e308, 1.7e308, -1.7e308)
    for op in ("reduce_l1", "reduce_l2", "reduce_log_sum"):
        data = np.abs(x) if op == "reduce_log_sum" else x
        for call in range(2):
            assert_matches(getattr(numred, op)(data, axes), expected(op, data, axes), f"{op} call {call}")
    zeros = np.zeros(shape, dtype)
    for call in range(2):
        assert_matches(numred.reduce_l2(zeros, axes), expected("reduce_l2", zeros, axes))
        assert_matches(numred.reduce_log_sum(zeros, axes), expected("reduce_log_sum", zeros, axes))


# rows of n: the row kernels' float64 variants (two passes, one, pieces); 3 rows (serial) or about
# 40000 elements (parallel; rows of 4 only from 8192 rows, their oracle the slowest part: serial)
@pytest.mark.parametrize("n,parallel", [(4, False), (100, False), (5000, False), (100, True), (5000, True)])
@pytest.mark.parametrize("view", ["rows", "strided rows", "columns"])
def test_float64_l2_and_log_sum_of_single_runs_leave_edge_sums_to_the_general_path(n, parallel, view):
    # float64 ReduceL2 and ReduceLogSum of single runs are the row kernels' sums of squares or of x,
    # finished by the kernel; their results are checked after (a square root at or below
    # L2_SMALLEST_RESULT, a result that is not finite), and such calls go the general way. One row
    # of each kind among ordinary ones, each in a call of its own (one such row sends its whole call
    # the general way): squares that underflow, a sum (of squares) that overflows, and one that
    # overflows on the way but not whole.
    view_of = {"rows": lambda a: a, "strided rows": lambda a: np.repeat(a, 2, axis=1)[:, ::2],
               "columns": lambda a: np.ascontiguousarray(a.T)}[view]
    axis = 0 if view == "columns" else 1
    rows = -(-40_000 // n) if parallel else 3
    for kind in ("underflow", "overflow", "overflow on the way"):
        x = np.random.default_rng(n).uniform(0.5, 1.5, (rows, n))
        if kind == "underflow":
            x[1] = 1e-200  # every square 0: sqrt(n) * 1e-200, not 0
        elif kind == "overflow":
            x[1] = 1e200
            x[1, ::2] = -1e200
        else:
            x[1, : n // 2], x[1, n // 2:] = 1.7e308, -1.7e308
        for op in ("reduce_l2", "reduce_log_sum"):
            data = view_of(np.abs(x) if op == "reduce_log_sum" else x)
            row = np.abs(x[1]) if op == "reduce_log_sum" else x[1]  # (one output: the check of one result)
            want, want_row = expected(op, data, axis), expected(op, row, None)
            for call in range(2):  # a first call, then a repeat (one launch)
                assert_matches(getattr(numred, op)(data, axis), want, f"{kind}: {op} call {call}")
                assert_matches(getattr(numred, op)(row), want_row, f"{kind}: {op} of a row, call {call}")


def test_float64_l2_beyond_the_range_is_inf_without_a_warning():
    # sqrt(2) * 1.7e308 is beyond float64's range: +inf, the exact path's rounding of it, silently, as
    # every other result that overflows (the exact path's ldexp warned, and its squares where a row
    # held inf or NaN, found by the random profile)
    # Rows holding inf or NaN beside values whose squares overflow: inf and NaN, as silently.
    x = np.array([[1.7e308, -1.7e308], [1e308, 1e308], [np.inf, 1.7e308], [np.nan, 1.7e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = numred.reduce_l2(x, axes=[1], keepdims=0)
        whole = numred.reduce_l2(x[:3], keepdims=0)
    assert got[0] == got[2] == math.inf and math.isnan(got[3]) and whole == math.inf
    exact = mpmath.sqrt(2) * mpmath.mpf(1e308)  # (within float64's range)
    assert abs(mpmath.mpf(float(got[1])) - exact) <= math.ulp(float(exact)), got[1]


@pytest.mark.parametrize("block", [5, None])
def test_exact_float64_l2_of_long_rows_adds_its_pieces(block, monkeypatch):
    # float64 ReduceL2 beyond float64's range is computed again scaled (numred._exact.l2), piece by
    # piece: the scaled sums of a long row's pieces (of 5 elements, or the default) added exactly
    from numred import _exact

    if block:
        monkeypatch.setattr(_exact, "_BLOCK_ELEMENTS", block)
    x = np.random.default_rng(12).standard_normal((3, 70_001 if block is None else 37)) * 1e200
    x[1, -1] = 1e-300  # a tiny one among them
    for axes in ([1], None):
        assert_matches(numred.reduce_l2(x, axes=axes, keepdims=0), expected("reduce_l2", x, axes, 0))
