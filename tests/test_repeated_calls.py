"""Repeated calls (numred._frontend._REPEATS): from its second call, a call on a geometry seen before
reuses its plan and, where its whole computation is one kernel launch (numred._launch.OneLaunch),
calls the kernel's compiled entry point directly. Every repeat must match the oracle
(tests/numpy_oracle.py), return a new array and leave the input alone; a repeat whose result must
raise still raises, an overflowing float64 mean is still rescaled, and a plan cut for one thread
count is not reused under another.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest

import numred
import oracle
from numpy_oracle import U, float_expected, int_expected, make, norm_axes
from numred._registry import OPS
from threads import needs_two_threads, with_threads

# every operator but ReduceProd, whose repeats test_small_repeats_are_one_call_and_match_the_oracle adds
OP_NAMES = tuple(op.name for op in OPS if op.name != "reduce_prod")


# parallel: rows, tiles, blocks ((120, 70, 40) over [0, 2]), the general kernel, (2000, 30, 1): single
# runs and tiles; serial: the general kernel, tiles, (6, 5, 1): single runs
@pytest.mark.slow
@pytest.mark.parametrize("shape", [(120, 70, 40), (2000, 30, 1), (6, 5, 4), (6, 5, 1)])
@pytest.mark.parametrize("axes", [[1], [0], [0, 2]])
@pytest.mark.parametrize("kind", ["float32-normal", "float16-grid", "bfloat16-grid"])
@pytest.mark.parametrize("opname", OP_NAMES)
def test_repeated_calls_that_are_one_launch_match_the_oracle(opname, kind, axes, shape):
    # A repeat of a float mean or sum of squares that is one kernel call runs it directly
    # (_launch.OneLaunch, kept in _frontend._REPEATS): first and later calls must both be right. So
    # does a serial, single-run or single-block log-sum-exp, whose kernel reads the input twice, as
    # floats and as integer keys.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    # After its first call a launch calls the kernel's compiled entry point directly, with the
    # input's own dtype (float16 and bfloat16 as the 16-bit integers the kernel reads); the input
    # must stay untouched and the result its own array.
    x = make(kind, shape, seed=31)
    before = x.copy()
    e, tol = float_expected(opname, x, axes, exact_sums=kind != "float32-normal")
    key = _repeat_key(OPS_BY_NAME[opname], x, axes, 1, 0)
    for call in range(3):
        got = getattr(numred, opname)(x, axes)
        assert got.dtype == x.dtype and got.shape == e.shape
        oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=f"call {call}")
        assert not np.shares_memory(got, x)
    plan, launch = _REPEATS[key].plan, _REPEATS[key].launch
    if opname == "reduce_log_sum_exp" and plan.parallel and not (plan.single_run or plan.single_block):
        # a max kernel, then a sum kernel
        assert launch is None
    elif opname in ("reduce_max", "reduce_min") and plan.parallel and not plan.single_run:  # keys, then values
        assert launch is None
    else:  # (ReduceL2 and LogSum of these dtypes too: the sum kernels take the root or the log)
        _assert_repeats_call_the_entry_point(launch)
    assert x.tobytes() == before.tobytes(), "the input was modified"


def _assert_repeats_call_the_entry_point(launch):
    """The call was kept as one kernel launch, whose repeats call the compiled entry point of the
    variant they run (not the first-call wrapper that resolves it)."""
    assert launch is not None, "not kept as one launch"
    serial_call, parallel_call = launch.calls
    call = parallel_call if launch.parallel else serial_call
    assert getattr(call, "func", None) != launch._first_call, "repeats do not call the entry point"


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(120, 70, 40), (6, 5, 4), (6, 5, 1)])
@pytest.mark.parametrize("axes", [[1], [0], [0, 2]])
@pytest.mark.parametrize("kind", ["int32", "int64"])
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum_square"])
def test_repeated_integer_calls_that_are_one_launch_match_the_oracle(opname, kind, axes, shape):
    # Integer means and sums of squares that one kernel call finishes are one launch too
    # (_compute.kernel_call), 32-bit means of parallel tiles included, which take the float kernel.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = make(kind, shape, seed=32)
    before = x.copy()
    expected, _ = int_expected(opname, x, axes)
    key = _repeat_key(OPS_BY_NAME[opname], x, axes, 1, 0)
    for call in range(3):
        got = getattr(numred, opname)(x, axes)
        assert got.dtype == x.dtype and got.shape == expected.shape, call
        assert np.array_equal(got.astype(np.int64), expected), f"call {call}"
        assert not np.shares_memory(got, x)
    _assert_repeats_call_the_entry_point(_REPEATS[key].launch)
    assert x.tobytes() == before.tobytes(), "the input was modified"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["int32", "int64"])
def test_repeated_small_integer_log_sum_exps_are_one_launch(kind):
    # A serial integer log-sum-exp is one launch too (_compute.kernel_call): its kernel stores
    # results that fit and returns False otherwise. Repeats must match the oracle, and a repeat
    # whose result does not fit must still raise, as must the call after it.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = make(kind, (6, 5, 4), seed=33)
    top = np.full_like(x, np.iinfo(x.dtype).max)  # max + log(5) > max: no result fits
    for axes in ([1], [0, 2]):
        lo, hi = int_expected("reduce_log_sum_exp", x, axes)
        assert (hi <= np.iinfo(x.dtype).max).all()
        for call in range(3):
            got = numred.reduce_log_sum_exp(x, axes)
            assert got.dtype == x.dtype and got.shape == lo.shape
            g = got.astype(np.int64)
            assert ((g == lo) | (g == hi)).all(), f"{axes} call {call}"
        launch = _REPEATS[_repeat_key(OPS_BY_NAME["reduce_log_sum_exp"], x, axes, 1, 0)].launch
        assert launch is not None
        serial_call, _ = launch.calls
        assert not isinstance(serial_call, functools.partial)
        for call in range(2):
            with pytest.raises(ValueError, match="does not fit"):
                numred.reduce_log_sum_exp(top, axes)
            assert np.array_equal(numred.reduce_log_sum_exp(x, axes).astype(np.int64), g)


@pytest.mark.slow
@pytest.mark.parametrize("axes", [None, 1, -1, [1], [0, 2], np.array([2])])
@pytest.mark.parametrize("kind", ["float32-grid", "float64-grid", "bfloat16-grid", "int32-small", "int64"])
@pytest.mark.parametrize("opname", OP_NAMES + ("reduce_prod",))
def test_small_repeats_are_one_call_and_match_the_oracle(opname, kind, axes):
    # From its second call, a small call on a geometry seen before is a dictionary lookup and one
    # compiled call (kept in _frontend._REPEATS, made by _launch.OneLaunch.repeat_call), under the key
    # _repeat_key gives its arguments (built inline for None, an int or [int]). Every call must
    # match the oracle with either keepdims, return a new array, and leave the input alone; a call
    # whose result must raise raises every time.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = make(kind, (6, 5, 4), seed=34)
    before = x.copy()
    listed = None if axes is None else [int(a) for a in np.atleast_1d(axes)]
    func = getattr(numred, opname)
    if opname == "reduce_prod":
        kept = norm_axes(listed, x.ndim)
        exact = np.apply_along_axis(lambda row: math.prod(Fraction(v) for v in row.tolist()), -1,
                                    np.moveaxis(x.astype(object), kept, range(x.ndim - len(kept), x.ndim))
                                    .reshape(*[n for a, n in enumerate(x.shape) if a not in kept], -1))
        expected = exact.reshape([1 if a in kept else n for a, n in enumerate(x.shape)])
        if x.dtype.kind in "iu":  # wrapping, as the low bits of the exact product
            bits = x.dtype.itemsize * 8
            expected = np.vectorize(lambda v: (int(v) + 2**(bits - 1)) % 2**bits - 2**(bits - 1))(expected)
            expected = upper = expected.astype(np.int64)
            fails = False
        else:
            expected = expected.astype(np.float64)  # (one rounding per factor, in float64)
            tol, fails = np.abs(expected) * math.prod(x.shape[a] for a in kept) * U, False
    elif x.dtype.kind in "iu":
        expected, upper = int_expected(opname, x, listed)  # (equal, or the two results float64 allows)
        fails = bool((upper > np.iinfo(x.dtype).max).any())
    else:
        expected, tol = float_expected(opname, x, listed, exact_sums=True)
        fails = False
    for keepdims in (1, 0):
        reduced = norm_axes(listed, x.ndim)
        shape = expected.shape if keepdims else [n for a, n in enumerate(x.shape) if a not in reduced]
        want = expected.reshape(shape)
        results = []
        for call in range(3):
            context = f"keepdims={keepdims} call {call}"
            if fails:
                with pytest.raises(ValueError):
                    func(x, axes, keepdims=keepdims)
                continue
            got = func(x, axes, keepdims=keepdims)
            assert got.dtype == x.dtype and got.shape == want.shape, context
            if x.dtype.kind in "iu":
                g = got.astype(np.int64)
                assert ((g == want) | (g == upper.reshape(shape))).all(), context
            else:
                oracle.assert_float_close(got, want, x.dtype, ulps=1, context=context,
                                          abs_tol=np.reshape(tol, shape) if np.ndim(tol) else tol)
            assert not np.shares_memory(got, x) and not any(np.shares_memory(got, r) for r in results), context
            results.append(got)
        key = _repeat_key(OPS_BY_NAME[opname], x, axes, keepdims, 0)
        if not fails and _REPEATS[key].launch is not None:
            assert _REPEATS[key].call is not None, "a launch is not kept as one call"
    assert x.tobytes() == before.tobytes(), "the input was modified"
    if kind == "float32-grid":  # every operator's float32 call here is one serial launch
        assert _REPEATS[_repeat_key(OPS_BY_NAME[opname], x, axes, 0, 0)].call is not None


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(200, 300), (20, 30), (1, 600)])  # parallel, serial, one output
def test_a_repeated_float64_mean_still_rescales_an_overflowing_sum(shape):
    # A repeated float64 mean is one launch (_launch.OneLaunch) that hands a result that is not
    # finite back to the driver: its overflow retry must run on repeats too, and NaN and inf still
    # come out. The sum of these values overflows; the mean of each row is 1.5e308.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = np.full(shape, 1.5e308)
    x[:, ::2] = 1.4e308
    x[:, 1::2] = 1.6e308
    for call in range(3):
        got = numred.reduce_mean(x, [1], keepdims=0)
        assert np.all(got == 1.5e308), (call, got[:3])
    assert _REPEATS[_repeat_key(OPS_BY_NAME["reduce_mean"], x, [1], 0, 0)].launch is not None, "not one launch"
    y = np.ones(shape)
    y[0, 5] = np.nan
    y[-1, 7] = np.inf
    for call in range(3):
        got = numred.reduce_mean(y, [1], keepdims=0)
        assert np.isnan(got[0]), (call, got[:3])  # (the one row of (1, 600) holds both: NaN)
        if shape[0] > 1:
            assert got[-1] == np.inf and np.all(got[1:-1] == 1.0), (call, got[:3])


@pytest.mark.slow
@needs_two_threads
def test_a_plan_cut_for_a_thread_count_is_not_reused_under_another():
    # Few wide tiles are cut per thread (_plan.MIN_SPLIT_TILE) and repeated calls reuse their plan
    # (_frontend._REPEATS): a repeat under another thread count must plan again, and be right.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = make("float32-grid", (1000, 1000), seed=23)
    e, tol = float_expected("reduce_mean", x, [0], exact_sums=True)
    key = _repeat_key(OPS_BY_NAME["reduce_mean"], x, [0], 1, 0)
    for threads in (2, 2, 1, 1, 2):
        got = with_threads(threads, numred.reduce_mean, x, [0])
        oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=f"{threads} threads")
        assert _REPEATS[key].plan.threads == threads, f"a plan for {_REPEATS[key].plan.threads} threads ran on {threads}"
