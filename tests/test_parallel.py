"""Large inputs that take numred's parallel paths (KR, RK, R, KRK, RKR patterns), checked against
float64/int64 NumPy oracles whose exactness is argued next to each one (never numred's code), and
the thread-count rules of docs/SEMANTICS.md.

Data families:
* "grid" floats: k / 8 (float32, float16) or k / 4 (bfloat16) for small integers k. Every value,
  square and partial sum of at most 2**53 / 8 is an exact float64, so np.sum in float64 gives the exact
  sum in any order; the mean is that exact sum divided by n, rounded once in float64 (then compared
  within 1 ulp of the output dtype).
* "normal" float32: standard normal values; the float64 oracle is accurate to ~1e-15 relative to
  sum|x|, far below a float32 ulp of the result; the accepted error adds the bound of any float64
  summation order, n * 2**-53 * sum|x|.
* integers: int32 values of any size (sums of 3e6 of them stay below 2**63 in int64) and int64 values
  below 2**40 in magnitude (sums of 2.1e7 stay below 2**63): int64 sums are exact. Squares are summed
  modulo 2**64 in uint64 (wrapping is well-defined there) and reduced modulo 2**bits.
"""
from __future__ import annotations

import errno
import functools
import math
from fractions import Fraction

import numpy as np
import pytest

import numred
from numred._registry import OPS
import oracle
from threads import needs_two_threads, with_threads
from oracle import BFLOAT16

pytestmark = pytest.mark.slow

# every operator but ReduceProd, whose products this module tests on their own
OP_NAMES = tuple(op.name for op in OPS if op.name != "reduce_prod")
U = 2.0**-53


def _make(kind, shape, seed):
    rng = np.random.default_rng(seed)
    if kind == "float32-grid":
        return (rng.integers(-1000, 1001, shape, dtype=np.int32).astype(np.float32) / np.float32(8))
    if kind == "float64-grid":
        return rng.integers(-1000, 1001, shape, dtype=np.int32).astype(np.float64) / 8
    if kind == "float32-normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if kind == "float16-grid":
        return (rng.integers(-64, 65, shape, dtype=np.int32).astype(np.float32) / 8).astype(np.float16)
    if kind == "bfloat16-grid":
        return (rng.integers(-128, 128, shape, dtype=np.int32).astype(np.float32) / 4).astype(BFLOAT16)
    if kind == "int32":
        return rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, shape, dtype=np.int32, endpoint=True)
    if kind == "int32-small":
        return rng.integers(-20, 6, shape, dtype=np.int32)
    if kind == "int64":
        return rng.integers(-(2**40), 2**40, shape, dtype=np.int64)
    raise AssertionError(kind)


def _carrier_view(x):
    """x as the kernels read it (numred._reduction.CARRIERS), bfloat16 registered first as numred's first
    call of one would (a test run alone may have made no such call yet)."""
    from numred._reduction import CARRIERS, add_bfloat16

    add_bfloat16()
    return x.view(CARRIERS[x.dtype])


def _norm_axes(axes, ndim):
    return tuple(range(ndim)) if axes is None else tuple(a % ndim for a in axes)


def _float_expected(opname, x, axes, exact_sums: bool, x64=None):
    """(expected float64 values with keepdims=1, extra absolute tolerance); ``x64``: x as float64, if
    the caller has it already (a test calling this for every op converts x once)."""
    t = _norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    x64 = x.astype(np.float64) if x64 is None else x64
    if opname in ("reduce_mean", "reduce_sum"):
        divisor = n if opname == "reduce_mean" else 1
        e = np.sum(x64, axis=t, keepdims=True) / divisor
        s_abs = np.sum(np.abs(x64), axis=t, keepdims=True) / divisor
        tol = 0.0 if exact_sums else (2 * n + 64) * U * s_abs
        return e, tol
    if opname == "reduce_sum_square":
        e = np.sum(x64 * x64, axis=t, keepdims=True)
        tol = 0.0 if exact_sums else (2 * n + 64) * U * e
        return e, tol
    if opname in ("reduce_max", "reduce_min"):  # exact
        return (np.max if opname == "reduce_max" else np.min)(x64, axis=t, keepdims=True), 0.0
    if opname == "reduce_l1":
        e = np.sum(np.abs(x64), axis=t, keepdims=True)
        return e, 0.0 if exact_sums else (2 * n + 64) * U * e
    if opname == "reduce_l2":
        e = np.sqrt(np.sum(x64 * x64, axis=t, keepdims=True))
        return e, 0.0 if exact_sums else (2 * n + 64) * U * e
    if opname == "reduce_log_sum":  # NaN where the sum is negative
        s = np.sum(x64, axis=t, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.log(s)
            tol = 0.0 if exact_sums else (2 * n + 64) * U * np.sum(np.abs(x64), axis=t, keepdims=True) / np.abs(s)
        return e, np.where(np.isfinite(tol), tol, 0.0)
    m = np.max(x64, axis=t, keepdims=True)
    s = np.sum(np.exp(x64 - m), axis=t, keepdims=True)
    e = m + np.log(s)
    # oracle and implementation: exp/log ulps and summation error of n terms, in the log part
    tol = (2 * n + 128) * U + 4 * np.spacing(np.abs(e))
    return e, tol


def _sums_of_products(p, q, t):
    """Sums over the axes ``t`` of p * q (int64 arrays whose every partial sum stays below 2**63, so
    exact), with keepdims: einsum multiplies and adds in one pass, without an input-sized product
    (whose fresh pages took most of this oracle's time)."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:p.ndim]
    kept = "".join(letter for axis, letter in enumerate(letters) if axis not in t)
    return np.expand_dims(np.einsum(f"{letters},{letters}->{kept}", p, q), t)


def _magnitude_pieces(wide):
    """|x| of int64 values below 2**42 in magnitude as three arrays of 14-bit pieces a, b, c, with
    |x| = a 2**28 + b 2**14 + c."""
    magnitude = np.abs(wide)
    assert magnitude.max(initial=0) < 2**42
    middle = np.bitwise_and(magnitude >> 14, 2**14 - 1)
    return [magnitude >> 28, middle, np.bitwise_and(magnitude, 2**14 - 1, out=magnitude)]


def _int_expected(opname, x, axes, wide=None, pieces=None):
    """(lo, hi) int arrays (keepdims=1): the accepted results; equal unless float64 cannot decide. A
    value of hi above the dtype's maximum means the call must raise ValueError (a result that does
    not fit, a log of a sum <= 0). ``wide``: x as int64, and ``pieces``: _magnitude_pieces(wide), if
    the caller has them already (a test calling this for every op and axes makes them once)."""
    wide = x.astype(np.int64) if wide is None else wide
    t = _norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    dtype = x.dtype
    bits = dtype.itemsize * 8
    if opname == "reduce_mean":
        s = np.sum(wide, axis=t, keepdims=True)  # exact, see the module docstring
        q = np.where(s >= 0, s // n, -((-s) // n))  # truncation toward zero
        return q, q
    if opname in ("reduce_max", "reduce_min"):
        e = (np.max if opname == "reduce_max" else np.min)(x, axis=t, keepdims=True).astype(np.int64)
        return e, e
    if opname == "reduce_l1":  # modulo 2**bits: the low bits of NumPy's (wrapping) uint64 sum of |x|
        magnitude = np.abs(wide).view(np.uint64)  # (|x| < 2**63 in these cases)
        s = np.sum(magnitude, axis=t, keepdims=True, dtype=np.uint64)
        s = s.astype(dtype).astype(np.int64) if bits < 64 else s.view(np.int64)
        return s, s
    if opname == "reduce_l2":  # isqrt of the exact sum of squares, |x| in three pieces of 14 bits
        pieces = _magnitude_pieces(wide) if pieces is None else pieces
        assert n < 2**32  # products of pieces < 2**28: each sum below, of weight 2**(14 k), < 2**62
        digit_sums = [0] * 5
        for i in range(3):
            for j in range(i, 3):
                digit_sums[4 - i - j] = digit_sums[4 - i - j] + (1 if i == j else 2) * _sums_of_products(
                    pieces[i], pieces[j], t)
        # carried from the lowest 14-bit digit up in int64, so that only two arrays become Python ints
        low, carry = 0, 0
        for k in range(4):
            digits = digit_sums[k] + carry
            low, carry = low + ((digits & (2**14 - 1)) << 14 * k), digits >> 14
        total = ((digit_sums[4] + carry).astype(object) << 56) + low.astype(object)
        roots = np.vectorize(math.isqrt, otypes=[object])(total)
        return roots, roots
    if opname == "reduce_log_sum":  # floor(ln S) of the exact sum; an output with S <= 0 must raise
        s = np.sum(wide, axis=t, keepdims=True).astype(object)  # exact: |S| < 2**63 here
        if (s <= 0).any():
            raise_marker = np.full(s.shape, int(np.iinfo(dtype).max) + 1, dtype=object)
            return raise_marker, raise_marker
        logs = np.log(s.astype(np.float64))  # within 1e-15 of ln S: both floors next to an integer
        return np.floor(logs - 1e-9).astype(np.int64), np.floor(logs + 1e-9).astype(np.int64)
    if opname == "reduce_sum":  # modulo 2**bits: the low bits of NumPy's (wrapping) uint64 sum
        with np.errstate(over="ignore"):
            s = np.sum(wide.view(np.uint64), axis=t, keepdims=True, dtype=np.uint64)
        s = s.astype(dtype).astype(np.int64) if bits < 64 else s.view(np.int64)  # (as the test casts results)
        return s, s
    if opname == "reduce_sum_square":
        u = wide.view(np.uint64)
        with np.errstate(over="ignore"):
            s = np.sum(u * u, axis=t, keepdims=True, dtype=np.uint64)  # modulo 2**64
        s = s % np.uint64(2**bits) if bits < 64 else s
        s = s.astype(np.uint64).view(np.int64) if bits == 64 else s.astype(np.int64)
        if bits < 64:
            s = np.where(s >= 2 ** (bits - 1), s - 2**bits, s)
        return s, s
    m = np.max(x, axis=t, keepdims=True).astype(np.int64)
    d = np.subtract(wide, m, dtype=np.float64)  # exact: |d| < 2**42
    # exp(-800) is 0 in float64, as is exp of anything below it; NumPy's exp of values far below
    # took ten times as long
    np.exp(np.maximum(d, -800.0, out=d), out=d)
    f = np.log(np.sum(d, axis=t, keepdims=True))
    # trunc(m + f) with f >= 0, f known to ~1e-13: m + floor(f) if m + f >= 0, else m + ceil(f)
    delta = 1e-9
    lo_f = np.maximum(f - delta, 0.0)
    hi_f = f + delta

    def trunc(ff):
        up = m + np.floor(ff).astype(np.int64)
        down = m + np.ceil(ff).astype(np.int64)
        return np.where(m + ff >= 0, up, down)

    return trunc(lo_f), trunc(hi_f)


@pytest.mark.parametrize("dtype, bound", [(np.int32, 2**31), (np.int64, 2**41)])
def test_the_integer_l2_oracle_is_python_ints_isqrt(dtype, bound):
    # _int_expected's ReduceL2 (pieces, einsum, carries) against math.isqrt of Python int sums,
    # with the extremes of each dtype's range in these tests
    rng = np.random.default_rng(5)
    x = rng.integers(-bound, bound, (7, 5, 6), dtype=np.int64).astype(dtype)
    x[0, 0, :] = -bound
    x[1, :, 0] = bound - 1
    rows = x.astype(object)
    for axes in ([0], [1, 2], [0, 2], None):
        t = _norm_axes(axes, x.ndim)
        lo, hi = _int_expected("reduce_l2", x, axes)
        expected = np.vectorize(math.isqrt, otypes=[object])(np.sum(rows * rows, axis=t, keepdims=True))
        assert lo.tolist() == hi.tolist() == expected.tolist(), axes


CASES = [
    # (kind, shape)
    ("float32-grid", (300, 70000)),
    ("float32-grid", (2, 3_000_000)),
    ("float32-grid", (1_500_000, 3)),
    ("float32-normal", (300, 70000)),
    ("float32-normal", (2, 3_000_000)),
    ("float16-grid", (300, 70000)),
    ("float16-grid", (2, 3_000_000)),
    ("bfloat16-grid", (300, 70000)),
    ("bfloat16-grid", (2, 3_000_000)),
    ("int32", (300, 70000)),
    ("int32", (2, 3_000_000)),
    ("int32-small", (300, 70000)),
    ("int32-small", (1_500_000, 3)),
    ("int64", (300, 70000)),
    ("int64", (2, 3_000_000)),
    ("float32-grid", (40, 5000, 30)),
    ("int64", (40, 5000, 30)),
]


def _axes_for(ndim):
    if ndim == 2:
        return [[0], [1], None]
    return [[1], [0, 2], [0, 1], None]


@pytest.mark.parametrize("kind,shape", CASES, ids=[f"{k}-{'x'.join(map(str, s))}" for k, s in CASES])
def test_large_reduction_matches_oracle(kind, shape):
    x = _make(kind, shape, seed=sum(shape) + len(kind))
    before = x.copy()
    converted = x.astype(np.float64 if x.dtype.kind == "f" or x.dtype == BFLOAT16 else np.int64)
    pieces = _magnitude_pieces(converted) if converted.dtype == np.int64 else None
    for opname in OP_NAMES:
        func = getattr(numred, opname)
        for axes in _axes_for(x.ndim):
            ctx = f"{opname} {kind} {shape} axes={axes}"
            if x.dtype.kind == "f" or x.dtype == BFLOAT16:
                e, tol = _float_expected(opname, x, axes, exact_sums=kind.endswith("grid"), x64=converted)
                got = func(x, axes, keepdims=1)
                oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=ctx)
            else:
                lo, hi = _int_expected(opname, x, axes, wide=converted, pieces=pieces)
                info = np.iinfo(x.dtype)
                if (hi > info.max).any():
                    with pytest.raises(ValueError):
                        func(x, axes, keepdims=1)
                    continue
                got = func(x, axes, keepdims=1)
                assert type(got) is np.ndarray and got.dtype == x.dtype, ctx
                assert got.shape == lo.shape, ctx
                g = got.astype(np.int64)
                ok = (g == lo) | (g == hi)
                assert ok.all(), f"{ctx}: {int((~ok).sum())} differ; first at {np.argwhere(~ok)[:3].tolist()}: " \
                                 f"got {g[~ok][:3].tolist()}, expected {lo[~ok][:3].tolist()}"
            assert not np.shares_memory(got, x)
    assert x.tobytes() == before.tobytes(), "the input was modified"


def test_large_views_match_contiguous_oracle():
    # strided / transposed / reversed views of a large array take the same paths as their copies
    x = _make("float32-grid", (600, 20000), seed=9)
    views = {
        "transposed": x.T,
        "reversed": x[::-1, ::-1],
        "step": x[::2, ::3],
        "fortran": np.asfortranarray(x[:300]),
    }
    for name, v in views.items():
        for opname in OP_NAMES:
            for axes in ([0], [1], None):
                e, tol = _float_expected(opname, v, axes, exact_sums=True)
                got = getattr(numred, opname)(v, axes, keepdims=1)
                oracle.assert_float_close(got, e, np.float32, ulps=1, abs_tol=tol, context=f"{opname} {name} {axes}")


# ---- threads ---------------------------------------------------------------------------------------


@needs_two_threads
@pytest.mark.parametrize("kind", ["int32", "int64", "int32-small"])
@pytest.mark.parametrize("opname", OP_NAMES)
def test_integer_results_do_not_depend_on_thread_count(opname, kind):
    x = _make(kind, (4, 1_000_000), seed=21)
    func = getattr(numred, opname)
    for axes in ([1], None, [0]):
        try:
            one = with_threads(1, func, x, axes)
        except ValueError:  # integer LSE overflow: then it must raise for 2 threads too
            with pytest.raises(ValueError):
                with_threads(2, func, x, axes)
            continue
        two = with_threads(2, func, x, axes)
        assert one.dtype == two.dtype and one.tobytes() == two.tobytes(), (opname, kind, axes)


@needs_two_threads
@pytest.mark.parametrize("shape, axes", [((1000, 1000), [0]), ((700, 3000), [0]), ((3, 600, 900), [1])])
def test_float64_column_sums_do_not_depend_on_thread_count(shape, axes):
    # Wide float64 tiles are cut per thread but never chunked (_plan._layout's unchunked_tiles), so
    # each column is summed in the same order with any thread count: bit-identical results, also
    # where the sums cancel (chunked compensated sums would round differently there).
    rng = np.random.default_rng(24)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, size=shape)
    x[..., ::2] -= x[..., ::2].mean(axis=tuple(a for a in axes), keepdims=True)  # half of the columns cancel
    for opname in OP_NAMES:
        func = getattr(numred, opname)
        one = with_threads(1, func, x, axes)
        two = with_threads(2, func, x, axes)
        assert one.tobytes() == two.tobytes(), (opname, shape, axes)


@pytest.mark.parametrize("shape, axes", [((1000, 1000), (0,)), ((700, 3000), (0,)), ((3, 600, 900), (1,)),
                                         ((64, 20000), (0,))])
def test_float64_tiles_are_never_chunked_for_any_thread_count(shape, axes):
    # The plan behind the test above, for thread counts this machine cannot run: float64 tiles are
    # cut per thread but never chunked, and never a whole row (whose wide rows round differently).
    from numred._plan import _layout

    x = np.zeros(shape)
    for threads in (1, 2, 3, 8, 32, 64):
        plan = _layout(x.shape, x.strides, x.itemsize, axes, threads, True)
        assert plan.nchunks == 1 and plan.tile < shape[-1], (threads, plan.tile, plan.nchunks)


@needs_two_threads
def test_a_plan_cut_for_a_thread_count_is_not_reused_under_another():
    # Few wide tiles are cut per thread (_plan.MIN_SPLIT_TILE) and repeated calls reuse their plan
    # (_frontend._REPEATS): a repeat under another thread count must plan again, and be right.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = _make("float32-grid", (1000, 1000), seed=23)
    e, tol = _float_expected("reduce_mean", x, [0], exact_sums=True)
    key = _repeat_key(OPS_BY_NAME["reduce_mean"], x, [0], 1, 0)
    for threads in (2, 2, 1, 1, 2):
        got = with_threads(threads, numred.reduce_mean, x, [0])
        oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=f"{threads} threads")
        assert _REPEATS[key].plan.threads == threads, f"a plan for {_REPEATS[key].plan.threads} threads ran on {threads}"


@needs_two_threads
@pytest.mark.parametrize("kind", ["float32-normal", "float16-grid", "bfloat16-grid"])
@pytest.mark.parametrize("opname", OP_NAMES)
def test_float_results_deterministic_and_within_one_ulp_across_thread_counts(opname, kind):
    x = _make(kind, (3, 2_000_000), seed=22)
    if opname == "reduce_log_sum":  # positive sums: logs, not NaN
        x = np.abs(x)
    func = getattr(numred, opname)
    for axes in ([1], None):
        a = with_threads(2, func, x, axes)
        b = with_threads(2, func, x, axes)
        assert a.tobytes() == b.tobytes(), "not deterministic for a fixed thread count"
        c = with_threads(1, func, x, axes)
        a64, c64 = a.astype(np.float64), c.astype(np.float64)
        spacing = oracle.ulp_array(np.where(np.isfinite(a64), a64, 0.0), x.dtype)
        with np.errstate(invalid="ignore"):
            close = (a64 == c64) | (np.abs(a64 - c64) <= spacing) | (np.isnan(a64) & np.isnan(c64))
        assert close.all(), (opname, kind, axes, a64.ravel()[:4], c64.ravel()[:4])


# parallel: rows, tiles, blocks ((120, 70, 40) over [0, 2]), the general kernel, (2000, 30, 1): single
# runs and tiles; serial: the general kernel, tiles, (6, 5, 1): single runs
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
    x = _make(kind, shape, seed=31)
    before = x.copy()
    e, tol = _float_expected(opname, x, axes, exact_sums=kind != "float32-normal")
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
        assert launch is not None, "not kept as one launch"
        variant = 1 if launch.parallel else 0
        assert not isinstance(launch.calls[variant], functools.partial), "repeats do not call the entry point"
    assert x.tobytes() == before.tobytes(), "the input was modified"


# One reduced axis under one or two kept axes read as tiles of rows (_plan.Plan.single_tile, the
# kernels.tiles float_tiles kernels): eight-row groups followed by a four-row group and single rows,
# tiles of unequal width cut per thread, an outer kept axis, fewer than eight rows, rows a stride
# apart and rows walked backwards.
SINGLE_TILES = {
    "1003x1000 axis 0": (lambda x: x, (1003, 1000), [0]),  # 125 x 8 + 3 rows; tiles of 500 and 500
    "1004x1001 axis 0": (lambda x: x, (1004, 1001), [0]),  # 125 x 8 + 4 rows; tiles of 501 and 500
    "7x13x3000 axis 1": (lambda x: x, (7, 13, 3000), [1]),  # 8 + 4 + 1 rows under 7 outer outputs
    "5x40000 axis 0": (lambda x: x, (5, 40000), [0]),  # 4 + 1 rows; tiles of 16384, 16384 and 7232
    "every other row": (lambda x: x[::2], (2022, 1000), [0]),
    "rows reversed": (lambda x: x[::-1], (1011, 1000), [0]),
}
# Narrow tiles whose rows lie back to back, read as one run per outer output block
# (kernels.tiles.narrow_tile): groups of four NARROW_ROW-element rows, single rows and a last part of
# whole rows of the tile, widths 2 to NARROW_ROW, outer blocks a stride apart.
NARROW_TILES = {
    "300x37x4 axis 1": (lambda x: x, (300, 37, 4), [1]),  # blocks of 148: two rows of 64, 20 more
    "100x700x8 axis 1": (lambda x: x, (100, 700, 8), [1]),  # 21 groups of four rows, 3 rows, 32 more
    "600x60x2 axis 1": (lambda x: x, (600, 60, 2), [1]),
    "16x20x30x16 axes [1, 2]": (lambda x: x, (16, 20, 30, 16), [1, 2]),
    "40x50x32 axis 1": (lambda x: x, (40, 50, 32), [1]),
    "every other block of 64": (lambda x: x[::2], (64, 33, 64), [1]),
}
SINGLE_TILES |= NARROW_TILES


@pytest.mark.parametrize("module, helper, arguments", [
    ("decode", "pair_values", (np.zeros(4, np.float32), 0)),  # bfloat16 bits (int16) only
    ("maxima", "float_key", (np.uint32(5),)),  # float bits, read through signed views only
    ("maxima", "magnitude_bits", (np.uint64(5),)),
])
def test_element_helpers_refuse_types_they_do_not_decode(module, helper, arguments):
    # pair_values once returned (0, 0) for any other type, float_key the value itself and
    # magnitude_bits 0 for unsigned integers, so that kernels could compile branches their dtype never
    # takes. The kernels are now made per element type and float-or-integer data (pair_sums,
    # _max_run_for), and a misuse of these fails to compile instead of giving wrong values.
    from numba import njit
    from numba.core.errors import TypingError

    from numred import kernels

    fn = getattr(getattr(kernels, module), helper)
    call = njit(lambda *args: fn(*args))
    with pytest.raises(TypingError):
        call(*arguments)


@needs_two_threads
@pytest.mark.parametrize("case", NARROW_TILES)
def test_narrow_tiles_are_read_as_runs_of_rows(case):
    from numred import kernels
    from numred._plan import make_plan

    view, shape, axes = NARROW_TILES[case]
    x = view(_make("float32-grid", shape, seed=41))
    plan = with_threads(2, make_plan, x, tuple(axes))[0]
    n_outer, _, n_inner, n_reduced, step = plan.single_tile
    assert n_outer >= 16 and kernels.tiles.narrow_tile(n_inner, plan.tile, n_reduced, step), plan


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_narrow_tiles_kernel_takes_32_bit_means_too(dtype):
    # 32-bit means of narrow tiles take the float kernel (_compute._int_mean_by_float_tiles), but the
    # integer kernel accepts them: its 32-bit columns hold whole values (kernels.integers._int_columns),
    # which it had folded as high halves, 2**32 times too large. Called directly on such a tile.
    from numred import kernels
    from numred._plan import make_plan

    info = np.iinfo(dtype)
    whole = np.random.default_rng(44).integers(info.min, info.max, (40, 300, 4), dtype=dtype, endpoint=True)
    whole.reshape(-1)[::5] = info.max
    plan, src = with_threads(2, make_plan, whole, (1,))
    n_outer, _, n_inner, n_reduced, step = plan.single_tile
    assert kernels.tiles.narrow_tile(n_inner, plan.tile, n_reduced, step), plan
    result = np.empty(plan.n_kept, dtype=dtype)
    kernel = kernels.table.KERNELS[kernels.table.INT_TILES[False]][0]
    kernel(src, plan.base, *plan.single_tile[:4], n_reduced, result)  # (the count: a mean)
    expected = oracle.expected("reduce_mean", whole, [1])
    oracle.assert_matches(result.reshape(40, 1, 4), expected, dtype)


@needs_two_threads
@pytest.mark.parametrize("case", NARROW_TILES)
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64"])
def test_integer_narrow_tiles_are_exact(dtype, case):
    # The integer narrow-tile kernels (kernels.tiles._int_tiles_for): groups of eight rows of NARROW_ROW
    # (sums of squares) or four (the 128-bit halves of 64-bit means), single rows, the last part,
    # on values spanning the dtype with its extremes, where squares wrap and means need every bit.
    from numred import _compute, kernels
    from numred._plan import make_plan
    from numred._registry import OPS_BY_NAME

    view, shape, axes = NARROW_TILES[case]
    info = np.iinfo(dtype)
    whole = np.random.default_rng(43).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    whole.reshape(-1)[::5] = info.max
    whole.reshape(-1)[1::7] = info.min
    x = view(whole)
    before = whole.copy()
    plan = with_threads(2, make_plan, x, tuple(axes))[0]
    for opname in ("reduce_mean", "reduce_sum_square"):
        squares = opname == "reduce_sum_square"
        launched = _compute.kernel_call(OPS_BY_NAME[opname].reduction, plan, x.dtype).kernels
        # 32-bit means take the float tiles; 64-bit data only blocks of up to NARROW_64BIT_MAX_BLOCK
        narrow = x.itemsize == 4 or plan.single_tile[2] * plan.single_tile[3] <= kernels.tiles.NARROW_64BIT_MAX_BLOCK
        if (squares or x.itemsize == 8) and narrow:
            assert launched is kernels.table.KERNELS[kernels.table.INT_TILES[squares]], (opname, plan)
        expected = oracle.expected(opname, x, axes)  # exact, from Python integers
        for threads in (2, 1):
            for call in range(2):  # the second call of a C-contiguous input is a OneLaunch
                got = with_threads(threads, getattr(numred, opname), x, axes)
                ctx = f"{opname} {dtype} {case} {threads} threads, call {call + 1}"
                oracle.assert_matches(got, expected, ctx)
                assert not np.shares_memory(got, whole), ctx
    assert whole.tobytes() == before.tobytes(), "the input was modified"


@needs_two_threads
@pytest.mark.parametrize("case", SINGLE_TILES)
@pytest.mark.parametrize("kind", ["float32-grid", "float64-grid", "float16-grid", "bfloat16-grid", "int32"])
def test_single_tile_plans_match_the_oracle(kind, case):
    from numred._plan import make_plan

    view, shape, axes = SINGLE_TILES[case]
    x = view(_make(kind, shape, seed=41))
    plan = with_threads(2, make_plan, _carrier_view(x), tuple(axes))[0]
    assert plan.single_tile is not None and plan.parallel, plan
    for opname in ("reduce_mean", "reduce_sum_square"):
        func = getattr(numred, opname)
        for threads in (2, 1):
            got = with_threads(threads, func, x, axes)
            ctx = f"{opname} {case} {threads} threads"
            if kind == "int32":
                lo, hi = _int_expected(opname, x, axes)
                assert got.dtype == x.dtype and np.array_equal(got.astype(np.int64), lo), ctx
            else:
                e, tol = _float_expected(opname, x, axes, exact_sums=True)
                oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=ctx)


@pytest.mark.parametrize("shape", [(120, 70, 40), (6, 5, 4), (6, 5, 1)])
@pytest.mark.parametrize("axes", [[1], [0], [0, 2]])
@pytest.mark.parametrize("kind", ["int32", "int64"])
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum_square"])
def test_repeated_integer_calls_that_are_one_launch_match_the_oracle(opname, kind, axes, shape):
    # Integer means and sums of squares that one kernel call finishes are one launch too
    # (_compute.kernel_call), 32-bit means of parallel tiles included, which take the float kernel.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = _make(kind, shape, seed=32)
    before = x.copy()
    expected, _ = _int_expected(opname, x, axes)
    key = _repeat_key(OPS_BY_NAME[opname], x, axes, 1, 0)
    for call in range(3):
        got = getattr(numred, opname)(x, axes)
        assert got.dtype == x.dtype and got.shape == expected.shape, call
        assert np.array_equal(got.astype(np.int64), expected), f"call {call}"
        assert not np.shares_memory(got, x)
    launch = _REPEATS[key].launch
    assert launch is not None, "not kept as one launch"
    variant = 1 if launch.parallel else 0
    assert not isinstance(launch.calls[variant], functools.partial), "repeats do not call the entry point"
    assert x.tobytes() == before.tobytes(), "the input was modified"


@pytest.mark.parametrize("kind", ["int32", "int64"])
def test_repeated_small_integer_log_sum_exps_are_one_launch(kind):
    # A serial integer log-sum-exp is one launch too (_compute.kernel_call): its kernel stores
    # results that fit and returns False otherwise. Repeats must match the oracle, and a repeat
    # whose result does not fit must still raise, as must the call after it.
    from numred._frontend import _REPEATS, _repeat_key
    from numred._registry import OPS_BY_NAME

    x = _make(kind, (6, 5, 4), seed=33)
    top = np.full_like(x, np.iinfo(x.dtype).max)  # max + log(5) > max: no result fits
    for axes in ([1], [0, 2]):
        lo, hi = _int_expected("reduce_log_sum_exp", x, axes)
        assert (hi <= np.iinfo(x.dtype).max).all()
        for call in range(3):
            got = numred.reduce_log_sum_exp(x, axes)
            assert got.dtype == x.dtype and got.shape == lo.shape
            g = got.astype(np.int64)
            assert ((g == lo) | (g == hi)).all(), f"{axes} call {call}"
        launch = _REPEATS[_repeat_key(OPS_BY_NAME["reduce_log_sum_exp"], x, axes, 1, 0)].launch
        assert launch is not None and not isinstance(launch.calls[0], functools.partial)
        for call in range(2):
            with pytest.raises(ValueError, match="does not fit"):
                numred.reduce_log_sum_exp(top, axes)
            assert np.array_equal(numred.reduce_log_sum_exp(x, axes).astype(np.int64), g)


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

    x = _make(kind, (6, 5, 4), seed=34)
    before = x.copy()
    listed = None if axes is None else [int(a) for a in np.atleast_1d(axes)]
    func = getattr(numred, opname)
    if opname == "reduce_prod":
        kept = _norm_axes(listed, x.ndim)
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
        expected, upper = _int_expected(opname, x, listed)  # (equal, or the two results float64 allows)
        fails = bool((upper > np.iinfo(x.dtype).max).any())
    else:
        expected, tol = _float_expected(opname, x, listed, exact_sums=True)
        fails = False
    for keepdims in (1, 0):
        reduced = _norm_axes(listed, x.ndim)
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


# ---- ReduceSum on every layout --------------------------------------------------------------

def _plan_kind(x, axes):
    from numred._plan import make_plan

    plan = make_plan(_carrier_view(x), tuple(range(x.ndim)) if axes is None else tuple(axes))[0]
    if not plan.parallel:
        return "serial rows" if plan.single_run else "serial"
    for kind in ("single_run", "single_tile", "single_block"):
        if getattr(plan, kind):
            return kind
    return "chunked" if plan.nchunks > 1 else "general"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64"])
def test_sums_of_x_and_of_abs_x_match_exact_sums_on_every_layout(dtype):
    # ReduceSum (term x, no division; _reduction.KERNEL_SETS) and ReduceL1 (term |x|), first calls and
    # repeats (one launch), on every layout the precompile step covers (each layout's kernel variant
    # per term: the |x| variants of the float row, narrow-tile and block kernels are their own). Floats: grid
    # values, whose float64 sums are exact in any order, so the result is that sum rounded once
    # (float16 sums beyond 65504 are inf), with NaN, +inf and inf - inf rows. Integers: values over
    # the whole dtype, whose sum wraps; NumPy's uint64 sum is exact modulo 2**64, and its low bits
    # are the sum modulo 2**bits (of |x| too, where |INT_MIN| wraps to INT_MIN, as the contract says).
    from numred.tools.precompile import LAYOUTS

    kinds = set()
    for shape, axes, *view in LAYOUTS:
        rng = np.random.default_rng(sum(shape))
        if dtype in ("float32", "float64", "float16", "bfloat16"):
            kind = "float32-grid" if dtype == "float32" else "float64-grid" if dtype == "float64" else f"{dtype}-grid"
            whole = _make(kind, shape, seed=len(shape))
            flat = whole.reshape(-1)
            flat[7], flat[-3], flat[len(flat) // 2], flat[len(flat) // 2 + 1] = np.nan, np.inf, np.inf, -np.inf
        else:
            info = np.iinfo(dtype)
            whole = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        x = whole[view[0]] if view else whole
        before = whole.copy()
        t = _norm_axes(axes, x.ndim)
        for func, term in ((numred.reduce_sum, lambda v: v), (numred.reduce_l1, np.abs)):
            if x.dtype.kind in "iu":
                wide = x.astype(np.int64 if x.dtype.kind == "i" else np.uint64)
                with np.errstate(over="ignore"):
                    wrapped = np.sum(term(wide).view(np.uint64), axis=t, keepdims=True, dtype=np.uint64)
                expected = wrapped.astype(x.dtype)  # the low bits, as C casts keep them
            else:
                with np.errstate(over="ignore", invalid="ignore"):
                    expected = np.sum(term(x.astype(np.float64)), axis=t, keepdims=True).astype(x.dtype)
            for call in range(2):
                got = func(x, axes)
                ctx = f"{func.__name__} {dtype} {shape} axes={axes} view={bool(view)} call {call + 1}"
                assert got.dtype == x.dtype and got.shape == expected.shape, ctx
                same = (got == expected) | (np.isnan(got.astype(np.float64)) & np.isnan(expected.astype(np.float64)))
                assert same.all(), f"{ctx}: {int((~same).sum())} differ, first {got[~same][:3]} for {expected[~same][:3]}"
                assert not np.shares_memory(got, x), ctx
        assert whole.tobytes() == before.tobytes(), "the input was modified"
        kinds.add(_plan_kind(x, axes))  # (after a call: bfloat16's carrier is registered on first use)
    assert kinds == {"serial", "serial rows", "single_run", "single_tile", "single_block", "general", "chunked"}, kinds


@pytest.mark.parametrize("shape", [(20, 31), (400, 301), (1, 300_001)])  # serial, parallel rows, chunked
def test_a_float64_sum_overflows_only_when_the_exact_sum_does(shape):
    # Partial sums of finite float64 values can overflow where the whole sum does not: each row is
    # h values of +1.6e308, h of -1.6e308 and one of 1.5e308 - k * 1e300 (k: the row), whose exact
    # sum is that last value. Its float64 result must be finite and within the bound of any
    # float64 summation order (NumPy's pairwise sum's included, SEMANTICS.md), n * 2**-53 * sum |x|.
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


def _errno_of_this_thread():
    """The C library's errno of the calling thread, as a ctypes int (glibc's __errno_location, macOS's
    __error), or None."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    for name in ("__errno_location", "__error"):
        location = getattr(libc, name, None)
        if location is not None:
            location.restype = ctypes.POINTER(ctypes.c_int)
            return location().contents
    return None


ERRNO = _errno_of_this_thread()
# one layout of each kind the plan picks: single runs, tiles, narrow tiles, blocks, the general walker
# (tiles of 50 outputs), chunks of a reduced range finished after the kernel, the serial path
FINISH_LAYOUTS = {"rows": ((2000, 300), [1]), "tiles": ((8, 64, 28, 28), [1]), "narrow tiles": ((2048, 300, 2), [1]),
                  "blocks": ((40, 50, 30), [0, 2]), "general": ((30, 20, 40, 50), [0, 2]),
                  "chunks": ((4, 1_000_000), [1]), "serial": ((6, 5, 4), [1])}


@pytest.mark.skipif(ERRNO is None, reason="needs the C library's errno")
@pytest.mark.parametrize("layout", FINISH_LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("opname", ["reduce_sum", "reduce_mean"])
def test_sums_do_not_take_the_log_that_only_reduce_log_sum_asks_for(opname, dtype, layout):
    # The sum kernels take their finish step (none, ReduceL2's square root, ReduceLogSum's log) as a
    # runtime argument (kernels.store.finished). LLVM once vectorised the store loops of float16 and
    # bfloat16 kernels into a log of every output whatever the step, mostly in the machine code saved
    # to the disk cache, which every process that did not compile a kernel runs: 2.3x the time of a
    # float16 sum, and the C library's log of each negative sum set errno to EDOM, which is how this
    # test sees it. (The floating-point exception flags cannot tell: LLVM converts a float16 value in
    # a vector register whose other lanes may hold signalling NaNs.) One thread, so that the kernel
    # runs in this thread, whose errno this is.
    shape, axes = FINISH_LAYOUTS[layout]
    x = np.random.default_rng(7).standard_normal(shape).astype(np.dtype(BFLOAT16 if dtype == "bfloat16" else dtype))
    reduce = getattr(numred, opname)
    with_threads(1, reduce, x, axes)  # a first call may compile, or load from the cache
    ERRNO.value = 0
    result = with_threads(1, reduce, x, axes)
    assert ERRNO.value != errno.EDOM
    assert (np.asarray(result, np.float64) < 0).any()  # the data has negative sums


@needs_two_threads
def test_with_one_thread_no_plan_is_chunked_and_sums_stay_exact():
    # Chunks of the reduced range give threads tasks (few outputs, few wide tiles); with one thread
    # they only add partials to write and combine, and the plan has none (a column reduction of
    # 2048x16384 float32 took 0.61x the time without its 16 chunks). Every layout the precompile
    # step covers, on grid values whose float64 sums are exact in any order: the float32 sum is
    # that sum rounded once, and the max is exact, with one thread as with two.
    from numred._plan import make_plan
    from numred.tools.precompile import LAYOUTS

    chunked_with_two = 0
    for shape, axes, *view in LAYOUTS:
        x = _make("float32-grid", shape, seed=len(shape))
        x = x[view[0]] if view else x
        reduced = tuple(range(x.ndim)) if axes is None else tuple(axes)
        assert with_threads(1, make_plan, _carrier_view(x), reduced)[0].nchunks == 1, (shape, axes)
        chunked_with_two += with_threads(2, make_plan, _carrier_view(x), reduced)[0].nchunks > 1
        exact = np.sum(x.astype(np.float64), axis=reduced, keepdims=True)
        assert with_threads(1, numred.reduce_sum, x, axes).tolist() == exact.astype(np.float32).tolist(), (shape, axes)
        assert with_threads(1, numred.reduce_max, x, axes).tolist() == np.max(x, axis=reduced, keepdims=True).tolist()
    assert chunked_with_two > 0  # (the layouts include plans chunked for two threads)
