"""Self-tests of tests/oracle.py: the oracle against hand values, NumPy's own correctly rounded casts
and plain float64 NumPy reductions; and of tests/numpy_oracle.py's exact integer ReduceL2. None of
this calls numred."""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import oracle
from numpy_oracle import int_expected, norm_axes
from oracle import BFLOAT16, ExpectedError, expected, round_fraction

I32 = np.iinfo(np.int32)
I64 = np.iinfo(np.int64)
U64 = np.iinfo(np.uint64)


def one(op, values, dtype, **kw):
    """The single expected value of a full reduction with keepdims=0."""
    e = expected(op, np.array(values, dtype=dtype), None, keepdims=0, **kw)
    assert e.shape == ()
    return e.array()[()]


# ---- rounding --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_round_fraction_matches_numpy_cast(dtype):
    # NumPy's float64 -> float32/float16 casts round once, correctly: the oracle must agree on
    # random values over the whole range, subnormals and overflow included
    rng = np.random.default_rng(1)
    fi = np.finfo(dtype)
    lo, hi = math.log2(float(fi.smallest_subnormal)) - 2, math.log2(float(fi.max)) + 1
    with np.errstate(over="ignore"):
        mags = np.exp2(rng.uniform(lo, hi, 4000)) * rng.choice([-1.0, 1.0], 4000)
    # values close to ties of the target format
    ties = np.array([1 + 2.0**-fi.nmant / 2, 1 + 3 * 2.0**-fi.nmant / 2, float(fi.max) * (1 + 2.0**-(fi.nmant + 1))])
    ties = np.concatenate([ties, np.nextafter(ties, 0), np.nextafter(ties, 10)])
    with np.errstate(over="ignore"):
        vals = np.concatenate([mags, ties])
        for v in vals[np.isfinite(vals)].tolist():
            want = float(np.float64(v).astype(dtype))
            assert round_fraction(Fraction(v), dtype) == want, v


def test_round_fraction_bfloat16_matches_single_rounding_from_float32():
    # float32 -> bfloat16 in ml_dtypes is a single correct rounding
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    f32 = bits.view(np.float32)
    f32 = f32[np.isfinite(f32)]
    want = f32.astype(BFLOAT16).astype(np.float64)
    for v, w in zip(f32.astype(np.float64).tolist(), want.tolist()):
        assert round_fraction(Fraction(v), BFLOAT16) == w, v


def test_round_fraction_hand_values():
    # ties to even
    assert round_fraction(1 + Fraction(1, 2**8), BFLOAT16) == 1.0
    assert round_fraction(1 + Fraction(3, 2**8), BFLOAT16) == 1 + 2.0**-6
    # the double-rounding trap: just above the bfloat16 tie, but below float32 resolution
    assert round_fraction(1 + Fraction(1, 2**8) + Fraction(1, 2**30), BFLOAT16) == 1 + 2.0**-7
    # float16 overflow threshold 65520: ties to even -> inf
    assert round_fraction(65519, np.float16) == 65504.0
    assert round_fraction(65520, np.float16) == math.inf
    assert round_fraction(-65520, np.float16) == -math.inf
    # subnormals
    assert round_fraction(Fraction(1, 2**25), np.float16) == 0.0  # tie with 0 -> even (0)
    assert round_fraction(Fraction(3, 2**26), np.float16) == 2.0**-24
    assert round_fraction(Fraction(1, 3), np.float64) == 1 / 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BFLOAT16])
def test_format_constants(dtype):
    fi = ml_dtypes.finfo(dtype) if np.dtype(dtype) == BFLOAT16 else np.finfo(dtype)
    assert float(oracle.max_finite(dtype)) == float(fi.max)
    assert float(oracle.ulp(1, dtype)) == float(fi.eps)
    assert float(oracle.ulp(0, dtype)) == float(fi.smallest_subnormal)


def test_ulp_array_matches_scalar_ulp():
    v = np.array([0.0, 1.0, -3.5, 1e-40, 6e4, 1e300])
    for dt in (np.float32, np.float16, BFLOAT16, np.float64):
        got = oracle.ulp_array(v, dt)
        assert got.tolist() == [float(oracle.ulp(Fraction(x), dt)) for x in v.tolist()]


# ---- hand values from docs/SEMANTICS.md -----------------------------------------------------------


def test_contract_value_rows():
    assert one("reduce_mean", [1.7e308, 1.7e308], np.float64) == 1.7e308
    assert one("reduce_log_sum_exp", [1000.0, 1000.0], np.float64) == pytest.approx(1000 + math.log(2), rel=1e-15)
    assert one("reduce_log_sum_exp", [1000.0, 1000.0], np.float16) == 1000.5
    assert one("reduce_log_sum_exp", [1000.0, 1000.0], np.float32) == np.float32(1000 + math.log(2))
    assert one("reduce_mean", [I32.max, I32.max], np.int32) == I32.max
    assert one("reduce_mean", [-1, -2], np.int32) == -1
    assert one("reduce_mean", [-1, -2], np.int64) == -1
    assert one("reduce_mean", [I64.max] * 4, np.int64) == I64.max
    assert one("reduce_mean", [U64.max] * 3, np.uint64) == U64.max
    assert one("reduce_sum_square", [50000, 50000], np.int32) == 705032704
    x = np.array([50000, 50000], dtype=np.int32)
    assert 705032704 == np.sum(np.square(x, dtype=np.int32), dtype=np.int32)
    assert one("reduce_mean", [60000.0, 60000.0], np.float16) == 60000.0
    assert one("reduce_sum_square", [300.0], np.float16) == math.inf  # 90000 > 65504
    assert one("reduce_sum_square", [1e200, 1e200], np.float64) == math.inf
    assert one("reduce_sum", [I32.max, 1], np.int32) == I32.min  # wraps, as np.sum(x, dtype=int32)
    assert one("reduce_sum", [U64.max, 2], np.uint64) == 1
    assert one("reduce_sum", [60000.0, 60000.0], np.float16) == math.inf  # 120000 > 65504
    assert one("reduce_sum", [1.7e308, 1.7e308, -1.7e308], np.float64) == 1.7e308  # exact sum in range
    assert one("reduce_sum", [0.1] * 10, np.float32) == np.float32(10 * float(np.float32(0.1)))
    assert one("reduce_max", [I32.min, I32.max], np.int32) == I32.max
    assert one("reduce_min", [U64.max, 3], np.uint64) == 3
    assert math.copysign(1, one("reduce_max", [-0.0, 0.0], np.float32)) == 1
    assert math.copysign(1, one("reduce_min", [0.0, -0.0], np.float32)) == -1
    assert math.isnan(one("reduce_min", [1.0, math.nan], np.float16))


def test_special_values():
    nan, inf = math.nan, math.inf
    assert math.isnan(one("reduce_mean", [inf, -inf], np.float32))
    assert one("reduce_mean", [inf, 1.0], np.float32) == inf
    assert one("reduce_mean", [-inf, 1.0], np.float32) == -inf
    assert math.isnan(one("reduce_mean", [nan, inf], np.float32))
    assert math.isnan(one("reduce_log_sum_exp", [nan, inf], np.float32))
    assert one("reduce_log_sum_exp", [-inf, inf], np.float32) == inf
    assert one("reduce_log_sum_exp", [-inf, -inf], np.float32) == -inf
    assert one("reduce_log_sum_exp", [-inf, 0.0], np.float32) == 0.0
    assert one("reduce_sum_square", [-inf, 1.0], np.float32) == inf
    assert math.isnan(one("reduce_sum", [inf, -inf], np.float32))
    assert one("reduce_sum", [-inf, 1.0], np.float32) == -inf
    assert math.isnan(one("reduce_sum_square", [nan, inf], np.float32))


@pytest.mark.parametrize("dtype", oracle.FLOAT_DTYPES, ids=str)
def test_empty_reduced_set_floats(dtype):
    x = np.zeros((2, 0), dtype=dtype)
    assert np.isnan(expected("reduce_mean", x, [1]).array().astype(np.float64)).all()
    assert (expected("reduce_log_sum_exp", x, [1]).array().astype(np.float64) == -np.inf).all()
    assert (expected("reduce_sum_square", x, [1]).array().astype(np.float64) == 0).all()
    assert (expected("reduce_sum", x, [1]).array().astype(np.float64) == 0).all()
    assert expected("reduce_mean", x, [1]).shape == (2, 1)


@pytest.mark.parametrize("dtype", oracle.INT_DTYPES, ids=str)
def test_empty_reduced_set_integers(dtype):
    x = np.zeros((2, 0), dtype=dtype)
    for op in ("reduce_mean", "reduce_log_sum_exp"):
        with pytest.raises(ExpectedError) as ei:
            expected(op, x, [1])
        assert ei.value.exc_type is ValueError
    assert expected("reduce_sum_square", x, [1]).array().tolist() == [[0], [0]]
    assert expected("reduce_sum", x, [1]).array().tolist() == [[0], [0]]
    lo, hi = oracle.int_range(dtype)
    assert expected("reduce_max", x, [1]).array().tolist() == [[lo], [lo]]
    assert expected("reduce_min", x, [1]).array().tolist() == [[hi], [hi]]
    # empty kept set: no error
    assert expected("reduce_mean", np.zeros((0, 3), dtype=dtype), [1]).shape == (0, 1)


def test_integer_lse():
    assert one("reduce_log_sum_exp", [5] * 8, np.int64) == 7  # 5 + log 8 = 7.08
    assert one("reduce_log_sum_exp", [-5] * 8, np.int64) == -2  # -2.92 -> toward zero
    assert one("reduce_log_sum_exp", [-3, -4], np.int32) == -2  # -2.687
    assert one("reduce_log_sum_exp", [5, 4, 4, 4, 4, 4], np.int32) == 6  # 6.04
    assert one("reduce_log_sum_exp", [-7], np.int32) == -7
    with pytest.raises(ExpectedError):
        expected("reduce_log_sum_exp", np.array([I64.max] * 3, dtype=np.int64))
    # INT64_MAX + log(1 + e^-5) truncates to INT64_MAX: fits
    assert one("reduce_log_sum_exp", [I64.max, I64.max - 5], np.int64) == I64.max
    with pytest.raises(ExpectedError):
        expected("reduce_log_sum_exp", np.array([U64.max] * 3, dtype=np.uint64))
    assert one("reduce_log_sum_exp", [U64.max] * 2, np.uint64) == U64.max  # + log 2 < 1
    # -5 + log(1 + e^-1000) is just above -5 although float64 rounds the log to 0: exactly -4
    e = expected("reduce_log_sum_exp", np.array([-5, -1005], dtype=np.int64), None, 0)
    assert e.cells[0].candidates == {-4}


def test_noop_results():
    x = np.array([[1.5, -np.inf], [np.nan, 3.0]], dtype=np.float32)
    e = expected("reduce_mean", x, None, 1, 1)
    np.testing.assert_array_equal(e.array(), x)
    e = expected("reduce_log_sum_exp", x, [], 0, 1)
    np.testing.assert_array_equal(e.array(), x)
    e = expected("reduce_sum_square", x, np.array([], dtype=np.int64), 1, 1)
    np.testing.assert_array_equal(e.array(), np.array([[2.25, np.inf], [np.nan, 9.0]], dtype=np.float32))
    xi = np.array([50000, -3, I32.min], dtype=np.int32)
    e = expected("reduce_sum_square", xi, None, 1, 1)
    assert e.array().tolist() == [-1794967296, 9, 0]
    assert e.array().tolist() == np.multiply(xi, xi).tolist()


def test_rank0():
    x = np.array(2.5, dtype=np.float32)
    for op, v in [("reduce_mean", 2.5), ("reduce_log_sum_exp", 2.5), ("reduce_sum_square", 6.25)]:
        for kd in (0, 1):
            e = expected(op, x, None, kd)
            assert e.shape == () and e.array()[()] == v


# ---- against NumPy in float64 on ordinary data -------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_against_numpy_float64(seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.integers(1, 5, ndim))
    x = rng.normal(size=shape) * 10
    axes = [int(a) for a in rng.choice(ndim, int(rng.integers(1, ndim + 1)), replace=False)]
    for kd in (0, 1):
        t = tuple(axes)
        m = expected("reduce_mean", x, axes, kd).array()
        np.testing.assert_allclose(m, np.mean(x, axis=t, keepdims=bool(kd)), rtol=1e-12, atol=1e-13)
        s = expected("reduce_sum_square", x, axes, kd).array()
        np.testing.assert_allclose(s, np.sum(x * x, axis=t, keepdims=bool(kd)), rtol=1e-12)
        lse = np.log(np.sum(np.exp(x), axis=t, keepdims=bool(kd)))
        np.testing.assert_allclose(expected("reduce_log_sum_exp", x, axes, kd).array(), lse, rtol=1e-12)


@pytest.mark.parametrize("dtype", oracle.INT_DTYPES, ids=str)
def test_against_python_integers(dtype):
    rng = np.random.default_rng(7)
    lo = 0 if np.dtype(dtype).kind == "u" else -1000
    x = rng.integers(lo, 1000, (3, 4, 5)).astype(dtype)
    e = expected("reduce_mean", x, [0, 2], 0).array()
    s = x.astype(np.int64).sum(axis=(0, 2))
    assert e.tolist() == np.trunc(s / 15).astype(np.int64).tolist()
    e = expected("reduce_sum_square", x, (-1,), 1).array()
    assert e.tolist() == np.sum(np.square(x, dtype=dtype), axis=-1, keepdims=True, dtype=dtype).tolist()
    e = expected("reduce_log_sum_exp", x, 1, 0).array()
    xf = x.astype(np.float64)
    m = xf.max(axis=1, keepdims=True)
    f = np.log(np.sum(np.exp(xf - m), axis=1)) + m[:, 0]
    # with several terms the exact log is > 0: a negative float result that landed on an integer
    # (the log below float64 resolution) truncates one step toward zero
    reference = np.trunc(f) + ((f == np.trunc(f)) & (f < 0))
    assert e.tolist() == reference.astype(np.int64).tolist()


def test_byte_order_and_views():
    x = np.arange(24, dtype=">f4").reshape(2, 3, 4)[:, ::-1, ::2]
    e = expected("reduce_mean", x, [1, -1], 0)
    assert e.dtype == np.float32 and e.dtype.isnative
    np.testing.assert_array_equal(e.array(), np.mean(x.astype(np.float64), axis=(1, 2)).astype(np.float32))


def test_axes_forms_give_same_shape():
    x = np.zeros((2, 3, 4, 5), dtype=np.int32)
    ref = expected("reduce_sum_square", x, [1, 3], 1).shape
    for axes in ([3, 1], (-1, -3), np.array([1, 3]), np.array([-3, 3], dtype=np.int32)):
        assert expected("reduce_sum_square", x, axes, 1).shape == ref == (2, 1, 4, 1)
    assert expected("reduce_sum_square", x, -2, 0).shape == (2, 3, 5)
    assert expected("reduce_sum_square", x, [], 0).shape == ()
    assert expected("reduce_sum_square", x, None, 1).shape == (1, 1, 1, 1)


# ---- the checker itself must fail on wrong results ----------------------------------------------


def test_checker_rejects_wrong_results():
    x = np.array([[1.0, 2.0, 4.0]], dtype=np.float32)
    e = expected("reduce_mean", x, [1], 1)
    good = np.array([[7 / 3]], dtype=np.float32)
    assert oracle.mismatches(good, e) == []
    two_ulps = np.array([[np.nextafter(np.nextafter(good[0, 0], 9), 9)]], dtype=np.float32)
    assert oracle.mismatches(two_ulps, e)
    assert oracle.mismatches(good.astype(np.float64), e)  # dtype
    assert oracle.mismatches(good.astype(">f4"), e)  # byte order
    assert oracle.mismatches(good.reshape(1), e)  # shape
    assert oracle.mismatches(np.float32(7 / 3), e)  # numpy scalar instead of an array
    assert oracle.mismatches(np.array([[np.nan]], dtype=np.float32), e)
    ei = expected("reduce_mean", np.array([-1, -2], dtype=np.int64), None, 0)
    assert oracle.mismatches(np.array(-1, dtype=np.int64), ei) == []
    assert oracle.mismatches(np.array(-2, dtype=np.int64), ei)  # floor instead of trunc


def test_assert_float_close():
    e = np.array([1.0, np.nan, -np.inf, 70000.0, 3.0])
    got = np.array([1.0, np.nan, -np.inf, np.inf, 3.0], dtype=np.float16)
    oracle.assert_float_close(got, e, np.float16)
    with pytest.raises(AssertionError):
        oracle.assert_float_close(got.astype(np.float16) * np.float16(1.01), e, np.float16)
    with pytest.raises(AssertionError):
        oracle.assert_float_close(np.array([1.0, 0.0, -np.inf, np.inf, 3.0], dtype=np.float16), e, np.float16)


def test_exact_sum_is_the_sum_of_the_fractions():
    # exact_sum adds integers over a common power of two instead of Fractions one by one: the same
    # value, for terms from subnormals to float64's largest, both signs, and for squares and magnitudes
    rng = np.random.default_rng(5)
    values = (rng.standard_normal(300) * 2.0 ** rng.integers(-1074, 960, 300)).tolist()
    values += [5e-324, -5e-324, 1.7976931348623157e308, -0.0, 0.0, 3]
    for subset in (values, values[::7], values[-6:], values[:1], []):
        assert oracle.exact_sum(subset) == sum((Fraction(v) for v in subset), Fraction(0))
        assert oracle.exact_sum(subset, squares=True) == sum((Fraction(v) ** 2 for v in subset), Fraction(0))
        assert oracle.exact_sum(subset, magnitudes=True) == sum((abs(Fraction(v)) for v in subset), Fraction(0))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_integer_product_is_the_exact_products_low_bits(dtype):
    # The oracle takes each step's product modulo 2**64; the wrapped result must be the exact
    # product's, wrapped to the dtype (two's complement for signed dtypes), and NumPy's own wrapping
    # product, for rows with the dtype's extremes, zeros and both signs.
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    bits = info.bits
    for n in (0, 1, 2, 7, 50, 301):
        row = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        row[: n // 3] = rng.choice(np.array([info.min, info.max, 1, 3], dtype=dtype), n // 3)
        exact = math.prod(int(v) for v in row) % 2**bits
        if info.min < 0 and exact >= 2 ** (bits - 1):
            exact -= 2**bits
        assert one("reduce_prod", row, dtype) == exact == int(np.prod(row, dtype=dtype)), n


# ---- tests/numpy_oracle.py -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dtype, bound", [(np.int32, 2**31), (np.int64, 2**41)])
def test_the_integer_l2_oracle_is_python_ints_isqrt(dtype, bound):
    # numpy_oracle.int_expected's ReduceL2 (pieces, einsum, carries) against math.isqrt of Python int
    # sums, with the extremes of each dtype's range in these tests
    rng = np.random.default_rng(5)
    x = rng.integers(-bound, bound, (7, 5, 6), dtype=np.int64).astype(dtype)
    x[0, 0, :] = -bound
    x[1, :, 0] = bound - 1
    rows = x.astype(object)
    for axes in ([0], [1, 2], [0, 2], None):
        t = norm_axes(axes, x.ndim)
        lo, hi = int_expected("reduce_l2", x, axes)
        expected = np.vectorize(math.isqrt, otypes=[object])(np.sum(rows * rows, axis=t, keepdims=True))
        assert lo.tolist() == hi.tolist() == expected.tolist(), axes
