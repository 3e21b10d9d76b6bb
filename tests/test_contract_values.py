"""The value rows of docs/SEMANTICS.md through the public functions, against exact values: rank-0
data, the output's type, shape and memory, float overflow, NaN and infinities, signed zeros, empty
reduced and kept sets, integer means truncated toward zero, wrapping sums of squares, the integer
log-sum-exp, 16-bit floats rounded once, the public signature; and the issue's list of hard cases
(float results within 1 ulp of the exact value, integer results exact).

Every expected value is computed here or in tests/oracle.py with exact arithmetic (Python ints,
``fractions.Fraction``, limb sums of exactly scaled floats, mpmath for logarithms), never from
numred's own output. The same rows on random data are in tests/test_properties.py, the error rows
in tests/test_contract_errors.py.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numred
import oracle
from numred._registry import OPS
from oracle import BFLOAT16
from test_properties import FUNCS, check_against_oracle

try:  # mpmath comes with sympy (an onnxruntime dependency) but is not a declared test dependency
    import mpmath
except ImportError:  # pragma: no cover
    mpmath = None

OP_NAMES = [op.name for op in OPS]
DTYPES = list(oracle.ALL_DTYPES)
FLOAT_DTYPES = list(oracle.FLOAT_DTYPES)
INT_DTYPES = list(oracle.INT_DTYPES)
DT_IDS = [d.name for d in DTYPES]


# ---- rank 0 --------------------------------------------------------------------------------------


RANK0_VALUES = {
    "float": [2.5, -0.0, 0.0, np.inf, -np.inf, np.nan, -3.0],
    "int": [0, 7, -7],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_rank0_data(opname, dtype):
    vals = RANK0_VALUES["float" if oracle.is_float_dtype(dtype) else "int"]
    if dtype.kind == "u":
        vals = [v for v in vals if v >= 0] + [int(np.iinfo(dtype).max)]
    else:
        vals = vals + ([int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)] if dtype.kind == "i" else [])
    for v in vals:
        x = np.array(v, dtype=dtype)
        for axes in (None, [], np.array([], dtype=np.int64), ()):
            for kd in (0, 1):
                for noop in (0, 1):
                    if check_against_oracle(opname, x, axes, kd, noop) is None:
                        continue  # (the call raised, as the contract says)
                    out = FUNCS[opname](x, axes, kd, noop)
                    assert type(out) is np.ndarray and out.shape == ()


def test_rank0_full_reduction_values():
    # the contract's sentence: mean x, sum x, log-sum-exp x, sum of squares x*x
    x = np.array(-3.0, dtype=np.float32)
    assert numred.reduce_mean(x, keepdims=0)[()] == -3.0
    assert numred.reduce_sum(x, keepdims=0)[()] == -3.0
    assert numred.reduce_log_sum_exp(x, keepdims=0)[()] == -3.0
    assert numred.reduce_sum_square(x, keepdims=0)[()] == 9.0
    xi = np.array(100000, dtype=np.int32)
    assert numred.reduce_sum_square(xi)[()] == 1410065408  # 10**10 mod 2**32
    xi = np.array(-46341, dtype=np.int32)
    assert numred.reduce_sum_square(xi)[()] == 46341**2 - 2**32  # wraps to -2147479015


# ---- output type ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_full_reduction_keepdims0_is_a_0d_array(opname, dtype):
    x = np.arange(1, 7).astype(dtype).reshape(2, 3)
    for axes in (None, [0, 1], (-1, 0)):
        out = FUNCS[opname](x, axes, keepdims=0)
        assert type(out) is np.ndarray, type(out)
        assert out.shape == () and out.dtype == dtype
        out2 = FUNCS[opname](x, axes, keepdims=1)
        assert type(out2) is np.ndarray and out2.shape == (1, 1)


@pytest.mark.parametrize("opname", OP_NAMES)
def test_list_input_goes_through_asarray(opname):
    out = FUNCS[opname]([[1.0, 2.0], [3.0, 5.0]], [1], 0)
    exp = oracle.expected(opname, np.asarray([[1.0, 2.0], [3.0, 5.0]]), [1], 0)
    oracle.assert_matches(out, exp)
    out = FUNCS[opname]([[1, 2], [3, 5]], 1, 1)
    assert out.dtype == np.int64 and out.shape == (2, 1)


@pytest.mark.parametrize("opname", OP_NAMES)
@pytest.mark.parametrize("dt", [">f4", ">f8", ">f2", ">i4", ">i8", ">u4", ">u8", "<f4", "<i8"])
def test_big_endian_input_gives_native_output(opname, dt):
    rng = np.random.default_rng(3)
    # (positive data for an integer log)
    vals = rng.integers(-50, 50, (3, 4, 5)) if dt[1] != "u" and opname != "reduce_log_sum" else \
        rng.integers(1, 100, (3, 4, 5))
    x = vals.astype(dt)
    for axes in (None, [1], [0, 2], [], -1):
        for noop in (0, 1):
            assert check_against_oracle(opname, x, axes, 1, noop) is not None
            out = FUNCS[opname](x, axes, 1, noop)
            assert out.dtype == np.dtype(dt).newbyteorder("=") and out.dtype.isnative


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_output_is_fresh_for_a_single_element_reduction(opname, dtype):
    # reducing an axis of size 1 must still copy (mean/LSE of one element are the element)
    x = np.arange(1, 7).astype(dtype).reshape(2, 3, 1)
    before = x.copy()
    out = FUNCS[opname](x, [2], keepdims=1)
    assert not np.shares_memory(out, x)
    out[...] = 0
    assert np.array_equal(x.view(np.uint8), before.view(np.uint8))


# ---- targeted value rows -------------------------------------------------------------------------


def _one(opname, values, dtype):
    return FUNCS[opname](np.array(values, dtype=dtype), None, keepdims=0)


def test_mean_of_huge_float64_is_finite():
    out = _one("reduce_mean", [1.7e308, 1.7e308], np.float64)
    assert out[()] == 1.7e308
    out = _one("reduce_mean", [1.7e308, 1.7e308, -1.7e308, 1.7e308], np.float64)
    assert out[()] == pytest.approx(0.85e308, rel=1e-15)
    fmax = np.finfo(np.float32).max
    assert _one("reduce_mean", [fmax] * 1000, np.float32)[()] == fmax


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_log_sum_exp_is_max_shifted(dtype):
    got = _one("reduce_log_sum_exp", [1000, 1000], dtype)
    want = oracle.round_fraction(oracle.Fraction(1000 + math.log(2)), dtype)
    assert got.dtype == dtype and got[()] == want  # float16 1000.5, bfloat16 1000, float32 1000.6931
    if dtype == np.float16:
        assert got[()] == 1000.5
    assert _one("reduce_log_sum_exp", [-1000, -1000], dtype)[()] == oracle.round_fraction(
        oracle.Fraction(-1000 + math.log(2)), dtype)


def test_integer_mean_is_exact_and_truncated_toward_zero():
    i32, i64, u32, u64 = (np.iinfo(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
    assert _one("reduce_mean", [i32.max, i32.max], np.int32)[()] == i32.max
    assert _one("reduce_mean", [i32.min, i32.min], np.int32)[()] == i32.min
    for dt in (np.int32, np.int64):
        assert _one("reduce_mean", [-1, -2], dt)[()] == -1
        assert _one("reduce_mean", [-7, 0, 0], dt)[()] == -2  # -2.33 -> -2 (floor would be -3)
        assert _one("reduce_mean", [np.iinfo(dt).max, np.iinfo(dt).min], dt)[()] == 0  # -0.5 -> 0
    assert _one("reduce_mean", [i64.max] * 4, np.int64)[()] == i64.max
    assert _one("reduce_mean", [i64.min, i64.min + 1], np.int64)[()] == i64.min + 1
    assert _one("reduce_mean", [i64.max, i64.max, i64.max - 1], np.int64)[()] == i64.max - 1
    assert _one("reduce_mean", [u64.max] * 3, np.uint64)[()] == u64.max
    assert _one("reduce_mean", [u64.max, u64.max - 1], np.uint64)[()] == u64.max - 1
    assert _one("reduce_mean", [u32.max] * 5, np.uint32)[()] == u32.max
    assert _one("reduce_mean", [1, 2], np.uint32)[()] == 1
    # a long row of maxima: the sum needs far more than 64 bits
    x = np.full((3, 5000), i64.max, dtype=np.int64)
    x[1] = i64.min
    x[2, ::2] = i64.min
    out = numred.reduce_mean(x, [1], keepdims=0)
    # row 2: the sum is 2500 * (MAX + MIN) = -2500, the mean -0.5 truncates to 0 (floor would give -1)
    assert out.tolist() == [i64.max, i64.min, 0]
    xu = np.full(7000, u64.max, dtype=np.uint64)
    assert numred.reduce_mean(xu, keepdims=0)[()] == u64.max


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=[d.name for d in INT_DTYPES])
def test_integer_sum_square_wraps_like_numpy(dtype):
    if dtype == np.int32:
        assert _one("reduce_sum_square", [50000, 50000], dtype)[()] == 705032704
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(4, 37), dtype=dtype, endpoint=True)
    x[0, :3] = [info.min, info.max, info.max - 1]
    with np.errstate(over="ignore"):
        want = np.sum(np.square(x, dtype=dtype), axis=1, dtype=dtype)
    got = numred.reduce_sum_square(x, [1], keepdims=0)
    assert got.dtype == dtype and got.tolist() == want.tolist()
    # and against the Python-int oracle
    check_against_oracle("reduce_sum_square", x, [0, 1], 0, 0)


def test_float16_mean_accumulates_in_float64():
    x = np.full(100000, 0.1, dtype=np.float16)
    assert _one("reduce_mean", x, np.float16)[()] == np.float16(0.1)
    assert _one("reduce_mean", [60000, 60000], np.float16)[()] == 60000  # the float16 sum overflows
    assert _one("reduce_mean", [65504] * 1000, np.float16)[()] == 65504
    check_against_oracle("reduce_mean", np.array([60000, -60000, 60000, 1], dtype=np.float16))
    # SumSquare of float16: 80000 is beyond the range (inf); 62500 rounds once to 62496
    assert _one("reduce_sum_square", [200, 200], np.float16)[()] == np.inf
    assert _one("reduce_sum_square", [250], np.float16)[()] == 62496
    assert _one("reduce_sum_square", [200, 150], np.float16)[()] == 62496


def test_bfloat16_mean_accumulates_in_float64():
    x = np.full(100000, 0.1, dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == BFLOAT16.type(0.1)
    y = np.full((2, 70001), 3.0, dtype=BFLOAT16)
    y[1, :] = 1e30
    assert numred.reduce_mean(y, -1, keepdims=0).astype(np.float64).tolist() == [3.0, float(BFLOAT16.type(1e30))]


def test_bfloat16_rounds_once_not_through_float32():
    # exact mean 1 + 2^-8 + 2^-30: just above the bfloat16 tie; via float32 it becomes the tie and
    # rounds to even (1.0). Correct: 1 + 2^-7.
    x = np.array([4.0, 2.0**-6, 2.0**-28, 0.0], dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == 1 + 2.0**-7
    # exact sum of squares 1 + 2^-8 + 2^-30
    x = np.array([1.0, 2.0**-4, 2.0**-15], dtype=BFLOAT16)
    assert _one("reduce_sum_square", x, BFLOAT16)[()] == 1 + 2.0**-7
    # and below the tie by the same margin: 1 - ... rounds down
    x = np.array([4.0, 2.0**-6, -(2.0**-28), 0.0], dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == 1.0


def test_float16_rounds_once():
    # exact mean 1 + 2^-11 + 2^-40: just above the float16 tie at 1 + 2^-11
    x = np.array([4.0, 2.0**-9, 0.0, 0.0], dtype=np.float16)
    y = np.array([2.0**-24], dtype=np.float16)  # smallest subnormal
    assert _one("reduce_mean", x, np.float16)[()] == 1.0  # exact tie: to even
    z = np.concatenate([x, y, np.zeros(3, np.float16)])  # mean (4 + 2^-9 + 2^-24) / 8
    want = oracle.round_fraction((4 + oracle.Fraction(1, 2**9) + oracle.Fraction(1, 2**24)) / 8, np.float16)
    assert want == 0.5 + 2.0**-11
    assert _one("reduce_mean", z, np.float16)[()] == want


def test_float32_mean_of_mixed_magnitudes():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.full(5000, 1e4, np.float32), np.full(5000, 1e-3, np.float32)])
    rng.shuffle(x)
    check_against_oracle("reduce_mean", x)
    check_against_oracle("reduce_sum_square", x)
    check_against_oracle("reduce_log_sum_exp", x)
    x2 = x.reshape(100, 100)
    for axes in ([0], [1], None):
        check_against_oracle("reduce_mean", x2, axes, 0, 0)
    # the exact mean is 5000.0005; a float32 accumulation is off by far more than an ulp
    assert _one("reduce_mean", x, np.float32)[()] == np.float32(5000.0005)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_float_special_values(dtype):
    nan, inf = np.nan, np.inf
    cases = [
        ("reduce_mean", [inf, -inf], nan), ("reduce_mean", [inf, 1], inf), ("reduce_mean", [-inf, 1], -inf),
        ("reduce_mean", [nan, 1], nan), ("reduce_mean", [inf, inf], inf),
        ("reduce_log_sum_exp", [nan, inf], nan), ("reduce_log_sum_exp", [-inf, inf], inf),
        ("reduce_log_sum_exp", [-inf, -inf], -inf), ("reduce_log_sum_exp", [-inf, 2], 2),
        ("reduce_log_sum_exp", [nan, -inf], nan), ("reduce_log_sum_exp", [inf, inf, 1], inf),
        ("reduce_sum_square", [-inf, 1], inf), ("reduce_sum_square", [nan, inf], nan),
        ("reduce_sum_square", [-0.0, -0.0], 0.0), ("reduce_mean", [-0.0, 0.0], 0.0),
        ("reduce_sum", [inf, -inf], nan), ("reduce_sum", [inf, 1], inf), ("reduce_sum", [-inf, 1], -inf),
        ("reduce_sum", [nan, 1], nan), ("reduce_sum", [nan, inf], nan), ("reduce_sum", [inf, inf], inf),
        ("reduce_max", [nan, inf], nan), ("reduce_max", [-inf, 1], 1), ("reduce_max", [-inf, -inf], -inf),
        ("reduce_max", [1, nan, inf], nan), ("reduce_min", [inf, nan], nan), ("reduce_min", [inf, 1], 1),
        ("reduce_min", [-inf, 1, inf], -inf),
        ("reduce_prod", [0.0, inf], nan), ("reduce_prod", [-inf, 2], -inf), ("reduce_prod", [nan, 0.0], nan),
        ("reduce_prod", [-0.0, 3], -0.0), ("reduce_prod", [-inf, -inf], inf),
        ("reduce_l1", [nan, inf], nan), ("reduce_l1", [-inf, 1], inf), ("reduce_l1", [-0.0, -0.0], 0.0),
        ("reduce_l2", [nan, inf], nan), ("reduce_l2", [-inf, 1], inf), ("reduce_l2", [-0.0, -0.0], 0.0),
        ("reduce_log_sum", [inf, -inf], nan), ("reduce_log_sum", [inf, 1], inf), ("reduce_log_sum", [-inf, 1], nan),
        ("reduce_log_sum", [0.0, -0.0], -inf), ("reduce_log_sum", [1, -2], nan), ("reduce_log_sum", [nan, inf], nan),
    ]
    for opname, vals, want in cases:
        got = _one(opname, vals, dtype)
        assert got.dtype == dtype
        g = float(got[()])
        assert (math.isnan(g) and math.isnan(want)) or g == want, (opname, vals, g, want)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_max_and_min_order_negative_zero_below_positive_zero(dtype):
    # -0.0 < +0.0 (the contract), in either order, on serial, parallel-row and tile layouts
    for shape, axis in (((2,), 0), ((400, 300), 1), ((300, 400), 0)):
        for first in (-0.0, 0.0):
            x = np.full(shape, first, dtype=dtype)
            x[(slice(None),) * axis + (slice(1, None, 2),)] = -first  # every other element along the axis
            mx, mn = numred.reduce_max(x, [axis], keepdims=0), numred.reduce_min(x, [axis], keepdims=0)
            assert not np.signbit(mx.astype(np.float64)).any() and np.signbit(mn.astype(np.float64)).all(), (shape, first)
        x = np.full(shape, -0.0, dtype=dtype)  # all -0.0: both are -0.0
        assert np.signbit(numred.reduce_max(x, [axis]).astype(np.float64)).all(), shape


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_empty_reduced_set(opname, dtype):
    x = np.zeros((2, 0, 3), dtype=dtype)
    int_info = None if oracle.is_float_dtype(dtype) else np.iinfo(dtype)
    empty = {"reduce_mean": np.nan, "reduce_log_sum_exp": -np.inf, "reduce_sum_square": 0.0, "reduce_sum": 0.0,
             "reduce_max": -np.inf if int_info is None else int(int_info.min),
             "reduce_min": np.inf if int_info is None else int(int_info.max), "reduce_prod": 1.0, "reduce_l1": 0.0,
             "reduce_l2": 0.0,
             "reduce_log_sum": -np.inf}[opname]
    for axes, shape in ([[1], (2, 1, 3)], [None, (1, 1, 1)], [[0, 1], (1, 1, 3)]):
        if oracle.is_float_dtype(dtype) or opname in ("reduce_sum_square", "reduce_sum", "reduce_max", "reduce_min",
                                                      "reduce_prod", "reduce_l1", "reduce_l2"):
            out = FUNCS[opname](x, axes, keepdims=1)
            assert out.dtype == dtype and out.shape == shape
            vals = out.astype(np.float64) if int_info is None else out.astype(object)
            assert (np.isnan(vals).all() if np.isnan(empty) else (vals == empty).all()), vals
        else:
            with pytest.raises(ValueError):
                FUNCS[opname](x, axes, keepdims=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_empty_kept_set_gives_empty_output(opname, dtype):
    # output has zero elements: no error even for integer mean / LSE
    x = np.zeros((0, 3), dtype=dtype)
    for axes, kd, shape in ([[1], 1, (0, 1)], [[1], 0, (0,)], [[-1], 1, (0, 1)]):
        out = FUNCS[opname](x, axes, kd)
        assert type(out) is np.ndarray and out.dtype == dtype and out.shape == shape
    y = np.zeros((0, 0, 2), dtype=dtype)
    out = FUNCS[opname](y, [1], 0)
    assert out.shape == (0, 2) and out.dtype == dtype


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=[d.name for d in INT_DTYPES])
def test_integer_log_sum_exp_values(dtype):
    signed = dtype.kind == "i"
    cases = [([5] * 8, 7), ([5, 4, 4, 4, 4, 4], 6), ([7], 7), ([0, 0], 0), ([3, 0], 3)]
    if signed:
        cases += [([-5] * 8, -2), ([-3, -4], -2), ([-7], -7)]
    for vals, want in cases:
        got = _one("reduce_log_sum_exp", vals, dtype)
        assert got.dtype == dtype and got[()] == want, (vals, got, want)
    mx = int(np.iinfo(dtype).max)
    assert _one("reduce_log_sum_exp", [mx, mx], dtype)[()] == mx  # + log 2 < 1: fits
    assert _one("reduce_log_sum_exp", [mx, mx - 5], dtype)[()] == mx
    assert _one("reduce_log_sum_exp", [mx - 3] * 3, dtype)[()] == mx - 2


# ---- API surface ---------------------------------------------------------------------------------


@pytest.mark.parametrize("opname", OP_NAMES)
def test_public_signature(opname):
    import inspect

    sig = inspect.signature(FUNCS[opname])
    params = [(p.name, p.default) for p in sig.parameters.values()]
    assert params == [("data", inspect.Parameter.empty), ("axes", None), ("keepdims", 1),
                      ("noop_with_empty_axes", 0)]
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = FUNCS[opname](data=x, axes=[1], keepdims=0, noop_with_empty_axes=0)
    oracle.assert_matches(out, oracle.expected(opname, x, [1], 0, 0))


@pytest.mark.parametrize("opname", OP_NAMES)
def test_python_scalar_and_range_axes(opname):
    # a Python float is rank-0 float64 data; a range is a sequence of ints
    out = FUNCS[opname](2.0)
    assert type(out) is np.ndarray and out.shape == () and out.dtype == np.float64
    oracle.assert_matches(out, oracle.expected(opname, np.asarray(2.0)))
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    check_against_oracle(opname, x, range(1, 3), 0, 0)


# ---- the issue's hard cases: exact helpers -------------------------------------------------------


def ulp_distance(got, exact: Fraction, dtype) -> Fraction | float:
    """|got - exact| in units of the spacing of `dtype` in the binade of the exact value (the
    subnormal spacing near zero), as an exact Fraction; inf for a NaN or infinite `got`.

    ``got`` is a value of `dtype` (any scalar or 0-d array convertible to float64, which is exact
    for the four float formats). "Within 1 ulp" is ``ulp_distance(...) <= 1``; a correctly rounded
    result has distance <= 1/2.
    """
    g = float(np.asarray(got).astype(np.float64))
    if not math.isfinite(g):
        return math.inf
    return abs(Fraction(g) - Fraction(exact)) / oracle.ulp(Fraction(exact), dtype)


def mp_to_fraction(v) -> Fraction:
    """An mpmath mpf as the exact Fraction of its binary value."""
    man, exp = v.man_exp
    return Fraction(man) * Fraction(2) ** exp if exp >= 0 else Fraction(man, 2 ** (-exp))


def exact_log_plus(c: Fraction, n: int) -> Fraction:
    """c + ln(n), as a Fraction: to 200 bits with mpmath, else in float64 (math.log).

    Not exact (ln n is irrational). With mpmath the error, 2**-190 relative, is far below any ulp
    checked here. Without it the float64 value is off by about 2**-52 relative: 2**-28 of a float32
    ulp and 2**-44 of a bfloat16 ulp, which can only matter for a result sitting within that much of
    the 1-ulp limit. A transcendental value does not sit on a rounding tie either way."""
    if mpmath is None:
        return c + Fraction(math.log(n))
    with mpmath.workprec(200):
        return mp_to_fraction(mpmath.mpf(c.numerator) / c.denominator + mpmath.log(n))


def _limb_sum_nonneg(y: np.ndarray) -> int:
    """Exact sum of non-negative integer-valued float64s, through 32-bit limbs summed in int64."""
    total, shift = 0, 0
    limb = 2.0**32
    assert y.size < 2**31  # n limbs below 2**32 sum below 2**63
    while y.size:
        q = np.floor(y / limb)  # exact: division by a power of two, floor of a float
        r = y - q * limb  # exact: an integer in [0, 2**32)
        total += int(r.astype(np.int64).sum()) << shift
        shift += 32
        y = q[q != 0]
    return total


def exact_sum(values: np.ndarray) -> Fraction:
    """The exact sum of finite float64 values, as a Fraction.

    Each value is f * 2**e with f a 53-bit fraction, so v * 2**(53 - min e) is an integer; the
    scaling by a power of two is exact (checked: no overflow), and the integers are summed exactly
    in 32-bit limbs."""
    v = np.asarray(values, dtype=np.float64).ravel()
    assert np.isfinite(v).all()
    v = v[v != 0]
    if v.size == 0:
        return Fraction(0)
    _, e = np.frexp(v)
    if e.max() - e.min() > 900:  # too wide for one scaling: sum exponent bands separately
        band = (e - e.min()) // 900
        return sum((exact_sum(v[band == b]) for b in np.unique(band)), Fraction(0))
    scale = int(53 - e.min())
    y = np.ldexp(v, scale)
    assert np.isfinite(y).all() and (y == np.floor(y)).all(), "scaling was not exact"
    s = _limb_sum_nonneg(y[y > 0]) - _limb_sum_nonneg(-y[y < 0])
    return Fraction(s, 2**scale) if scale >= 0 else Fraction(s * 2 ** (-scale))


def test_exact_helpers_on_hand_values():
    assert exact_sum(np.array([0.1, 0.2, -0.3])) == Fraction(0.1) + Fraction(0.2) - Fraction(0.3)
    big = np.array([1e300, 1e-300, -1e300, 2.0**-1074])
    assert exact_sum(big) == Fraction(1e-300) + Fraction(2.0**-1074)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(2000) * np.exp2(rng.integers(-60, 60, 2000))
    assert exact_sum(x) == sum(map(Fraction, x.tolist()), Fraction(0))
    # ulp_distance: the correctly rounded value is within 1/2, its neighbour within 3/2
    q = Fraction(1, 3)
    for dt in FLOAT_DTYPES:
        r = oracle.round_fraction(q, dt)
        assert ulp_distance(r, q, dt) <= Fraction(1, 2)
        nxt = r + float(oracle.ulp(q, dt))  # the next value of dt up (exact in float64)
        assert Fraction(1, 2) < ulp_distance(nxt, q, dt) <= Fraction(3, 2)
    assert ulp_distance(np.float32(np.nan), q, np.float32) == math.inf


# ---- the issue's hard cases, within 1 ulp of the exact value -------------------------------------


def _normal_float32(n, seed):
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def _mixed_magnitudes():
    # a shuffled mix of 1e4 and 1e-3 (float32): a float32 accumulator loses the small ones entirely
    x = np.concatenate([np.full(300_000, 1e4, np.float32), np.full(700_000, 1e-3, np.float32)])
    np.random.default_rng(17).shuffle(x)
    return x


def _case_mean_normal_1e7():
    x = _normal_float32(10_000_000, seed=2024)
    return x, exact_sum(x) / x.size


def _case_ssq_normal_1e7():
    x = _normal_float32(10_000_000, seed=2025)
    x64 = x.astype(np.float64)
    return x, exact_sum(x64 * x64)  # a float32 square is exact in float64 (48 significant bits)


def _case_mixed():
    x = _mixed_magnitudes()
    return x, (300_000 * Fraction(float(np.float32(1e4))) + 700_000 * Fraction(float(np.float32(1e-3)))) / x.size


def _case_f16_point1():
    x = np.full(100_000, 0.1, np.float16)
    return x, Fraction(float(np.float16(0.1)))  # the mean of a constant is that constant


def _case_f16_60000():
    return np.array([60000, 60000], np.float16), Fraction(60000)  # the float16 sum overflows


def _case_bf16_point1():
    x = np.full(100_000, 0.1, BFLOAT16)
    return x, Fraction(float(BFLOAT16.type(0.1)))


def _case_bf16_lse():
    x = np.full(10_000, 0.1, BFLOAT16)
    return x, exact_log_plus(Fraction(float(BFLOAT16.type(0.1))), 10_000)  # LSE of n x c = c + ln n


def _case_f32_lse_1000():
    return np.array([1000, 1000], np.float32), exact_log_plus(Fraction(1000), 2)


def _case_f64_huge_mean():
    return np.array([1.7e308, 1.7e308]), Fraction(1.7e308)


I32, I64, U64MAX = np.iinfo(np.int32).max, np.iinfo(np.int64).max, np.iinfo(np.uint64).max

# (issue wording, op, case builder -> (data, exact value))
HARD_CASES = {
    "float32 mean of 1e7 normal values": ("reduce_mean", _case_mean_normal_1e7),
    "float32 sum of squares of 1e7 normal values": ("reduce_sum_square", _case_ssq_normal_1e7),
    "float32 mean of a shuffled mix of 1e4 and 1e-3": ("reduce_mean", _case_mixed),
    "float16 mean of 100000 x 0.1": ("reduce_mean", _case_f16_point1),
    "float16 mean of [60000, 60000]": ("reduce_mean", _case_f16_60000),
    "bfloat16 mean of 100000 x 0.1": ("reduce_mean", _case_bf16_point1),
    "bfloat16 log-sum-exp of 10000 x 0.1": ("reduce_log_sum_exp", _case_bf16_lse),
    "float32 log-sum-exp of [1000, 1000]": ("reduce_log_sum_exp", _case_f32_lse_1000),
    "float64 mean of [1.7e308, 1.7e308]": ("reduce_mean", _case_f64_huge_mean),
    "int32 mean of [INT32_MAX] x 2": ("reduce_mean", lambda: (np.array([I32] * 2, np.int32), I32)),
    "int64 mean of [INT64_MAX] x 4": ("reduce_mean", lambda: (np.array([I64] * 4, np.int64), I64)),
    "uint64 mean of [UINT64_MAX] x 3": ("reduce_mean", lambda: (np.array([U64MAX] * 3, np.uint64), U64MAX)),
}


@pytest.mark.parametrize("case", list(HARD_CASES))
def test_issue_hard_cases_within_one_ulp_of_exact(case):
    """Issue item 7: float results within 1 ulp of the exact value, integer results exact."""
    opname, build = HARD_CASES[case]
    x, exact = build()
    before = x.copy()
    got = getattr(numred, opname)(x, None, keepdims=0)
    assert type(got) is np.ndarray and got.shape == () and got.dtype == x.dtype, (type(got), got.dtype)
    assert x.tobytes() == before.tobytes(), "the input was modified"
    if x.dtype.kind in "iu":
        assert int(got) == exact, f"{case}: got {int(got)}, exact {exact}"
        return
    d = ulp_distance(got, exact, x.dtype)
    rounded = oracle.round_fraction(exact, x.dtype)
    assert d <= 1, (f"{case}: got {float(got.astype(np.float64))!r}, exact {float(exact)!r} "
                    f"(correctly rounded {rounded!r}), {float(d):.3f} ulp away")
