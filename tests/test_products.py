"""ReduceProd through the public function (numred.kernels.products), against exact products: no
overflow or underflow on the way (split mantissas and exponents, narrow floats renormalised in
float64, every lane of a narrow tile's wide rows renormalised), zeros, infinities and NaN with the
IEEE sign in any block, on every layout kind.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import mpmath
import numpy as np
import pytest

import numred
import oracle
from oracle import assert_matches, expected

DTYPES = list(oracle.ALL_DTYPES)
DT_IDS = [d.name for d in DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_products_on_every_layout_family(dtype):
    # every layout the precompile step walks, on data whose exact products are known: floats are
    # +-2**k (their product is an exact power of two, or beyond the dtype's range, or 0), integers
    # against NumPy's own wrapping product
    from numred.tools.precompile import LAYOUTS

    rng = np.random.default_rng(12)
    for shape, axes, *view in LAYOUTS:
        t = tuple(range(len(shape))) if axes is None else tuple(axes)
        if oracle.is_float_dtype(dtype):
            exponents = rng.integers(-2, 3, shape)
            signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
            x = (signs * np.exp2(exponents)).astype(dtype)
        else:
            info = np.iinfo(dtype)
            x = rng.integers(max(info.min, -3), 4, shape).astype(dtype)
        if view:
            x = x[view[0]]
        got = numred.reduce_prod(x, axes)
        if oracle.is_float_dtype(dtype):
            x64 = x.astype(np.float64)
            total = np.sum(np.log2(np.abs(x64)), axis=t, keepdims=True)  # exact: small integers
            negative = np.sum(x64 < 0, axis=t, keepdims=True) % 2 == 1
            with np.errstate(over="ignore"):
                want = np.where(negative, -1.0, 1.0) * np.exp2(total)  # float64's own range: exact or 0/inf
                want = want.astype(dtype).astype(np.float64)  # the one rounding: 0 or inf beyond the dtype
            g = got.astype(np.float64)
            assert np.array_equal(g, want) and np.array_equal(np.signbit(g), np.signbit(want)), (shape, axes)
        else:
            assert np.array_equal(got, np.prod(x, axis=t, keepdims=True, dtype=dtype)), (shape, axes)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_products_of_long_rows_of_full_mantissas_match_the_exact_product(dtype):
    # Contiguous rows are multiplied as mantissas in [1, 2) and exponents apart, in blocks of
    # kernels.products.SPLIT_BLOCK elements (float64: a block with a zero, a subnormal, an infinity
    # or a NaN split again, _split_specials_block; a tile's columns branch-free, _split_float64): every
    # mantissa bit counts (factors of full mantissas, unlike the powers of two below), rows of one,
    # two and three blocks and a remainder,
    # both signs, exponents that drift far from 0 (beyond float16's range) and back, and subnormal
    # factors. Against the exact product, rounded once (oracle.float_prod_cell). A zero, an infinity
    # or a NaN, in the first block or a later one, decides the product with the IEEE sign.
    from numred.kernels.products import SPLIT_BLOCK, SPLIT_MIN

    rng = np.random.default_rng(5)
    info = ml_dtypes.finfo(dtype)
    k = -int(np.log2(float(info.smallest_subnormal)))
    for n in (SPLIT_MIN, SPLIT_BLOCK - 1, SPLIT_BLOCK, SPLIT_BLOCK + 1, 2 * SPLIT_BLOCK + 37):
        # near 1 (products within float16's range), across an exponent boundary (both ends of a mantissa)
        x = (rng.uniform(0.9, 1.1, (6, n)) * np.where(rng.random((6, n)) < 0.5, -1.0, 1.0)).astype(dtype)
        x[0, 3] = 3 * info.smallest_subnormal  # a subnormal, made up for by two large factors
        x[0, n - 5], x[0, n - 4] = 2.0 ** (k // 2), 2.0 ** (k - k // 2)
        x[1, : n // 2] *= np.asarray(8.0, dtype)  # exponents far above 0, then back below
        x[1, n // 2:] /= np.asarray(8.0, dtype)
        x[2, -1] = np.inf if n % 2 else 0.0
        x[2, 3] = info.smallest_subnormal  # a subnormal first, the deciding special in a later block
        x[3, n - 2] = np.nan
        x[4, 1] = -0.0
        x[5, 0], x[5, -1] = 0.0, -np.inf  # 0 x inf
        assert_matches(numred.reduce_prod(x, [1]), expected("reduce_prod", x, [1]), f"n={n}")
        columns = np.ascontiguousarray(np.concatenate([x, x[::-1], x[:4]]).T)  # the rows as a tile's 16 columns
        assert_matches(numred.reduce_prod(columns, [0]), expected("reduce_prod", columns, [0]), f"n={n}, columns")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("n", [127, 128, 129, 1000, 4099])  # around kernels.products.SPLIT_MIN and SPLIT_BLOCK
def test_products_of_long_runs_keep_range_signs_and_specials(dtype, n):
    # Contiguous runs of narrow floats are multiplied as split mantissas and exponents in blocks:
    # factors of extreme exponents must not overflow or underflow on the way, and a zero, an
    # infinity or a NaN in any block (or in the last, partial one) decides the result with the IEEE
    # sign. Factors are
    # +-2**k: the exact product is a power of two, rounded once (to 0 or inf beyond the dtype). The
    # same factors as columns (the rows' transpose, contiguous, over axis 0) are a tile of outputs,
    # read six rows at a time and, from 128 rows on, as wide rows of several rows each.
    rng = np.random.default_rng(n)
    info = ml_dtypes.finfo(dtype)
    rows = 8
    k = rng.integers(info.minexp, info.maxexp, (rows, n))
    # the first factor brings the total exponent back near 0 where it can: products in range
    k[:, 0] = np.clip(rng.integers(-40, 40, rows) - k[:, 1:].sum(axis=1), info.minexp, info.maxexp - 1)
    signs = np.where(rng.random((rows, n)) < 0.5, -1.0, 1.0)
    x = (signs * np.exp2(k.astype(np.float64))).astype(dtype)
    x[1, n - 1] = 0.0  # a zero in the tail
    x[2, n // 2] = np.inf  # an infinity mid-run
    x[3, 5], x[3, n - 2] = 0.0, -np.inf  # 0 x inf
    x[4, n // 3] = np.nan
    x[5, :] = np.abs(x[5, :])
    x[5, 7] = -0.0  # a negative zero among positive factors
    by_rows = numred.reduce_prod(x, 1, keepdims=0).astype(np.float64)
    by_columns = numred.reduce_prod(np.ascontiguousarray(x.T), 0, keepdims=0).astype(np.float64)
    exact = x.astype(np.float64)
    for r, got in itertools.product(range(rows), (by_rows, by_columns)):
        row = exact[r]
        negative = np.sum(np.signbit(row)) % 2 == 1
        if np.isnan(row).any() or (np.isinf(row).any() and (row == 0).any()):
            assert np.isnan(got[r]), r
            continue
        if np.isinf(row).any():
            want = -np.inf if negative else np.inf
        elif (row == 0).any():
            want = -0.0 if negative else 0.0
        else:
            total = int(np.sum(np.log2(np.abs(row))))  # exact: integer exponents
            with np.errstate(over="ignore"):
                want = float(np.array((-1.0 if negative else 1.0) * 2.0 ** max(min(total, 2000), -2000)
                                      if -1074 <= total <= 1023 else (-1.0 if negative else 1.0)
                                      * (np.inf if total > 0 else 0.0)).astype(dtype).astype(np.float64))
        assert got[r] == want and np.signbit(got[r]) == np.signbit(want), (r, got[r], want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("n", [60, 600, 3000])  # a narrow tile read row by row, and as wide rows
def test_tile_products_of_the_smallest_subnormals_stay_exact_between_renormalisations(dtype, n):
    # Tiles multiply kernels.products.NARROW_GROUP (six) narrow-float factors in float64 between
    # renormalisations: six of the smallest subnormals and a mantissa below 2 are still a normal
    # float64 (2**-894 for float32), where eight underflow to 0. Each column: a long stretch of the
    # smallest subnormals, then as many of the largest powers of two as bring the product back into
    # range, then ones; the exact product is a power of two, rounded once (to inf beyond the dtype).
    info = ml_dtypes.finfo(dtype)
    tiny = -int(np.log2(float(info.smallest_subnormal)))  # 149 for float32
    big = info.maxexp - 1
    x = np.ones((n, 8), dtype)
    want = []
    for c in range(8):
        q = n * big // (tiny + big) - 1 - c  # tiny factors, then m big ones: q + m <= n
        m = -(-q * tiny // big)
        x[:q, c] = info.smallest_subnormal
        x[q:q + m, c] = 2.0**big
        with np.errstate(over="ignore"):
            want.append(float(np.asarray(2.0 ** (m * big - q * tiny)).astype(dtype)))
    got = numred.reduce_prod(x, 0, keepdims=0).astype(np.float64)
    assert got.tolist() == want


@pytest.mark.parametrize("threads", [1, 2])
def test_float64_products_of_narrow_tiles_renormalise_every_lane_of_their_wide_rows(threads):
    # A float64 tile of 4 columns reads 512 back-to-back rows as one wide row, each element in a
    # lane of its own, and renormalises all 2048 lanes every kernels.products.SPLIT_BLOCK wide rows.
    # With one thread nothing is chunked: 600000 rows are 1171 wide rows in one task, so a lane
    # gathers 1171 mantissas near 2 (2**1170 unrenormalised: inf) while the column's product stays
    # near 0.999**300000. Against the exact product in mpmath (200 bits), within the contract's
    # (n - 1) roundings.
    from threads import with_threads

    x = np.empty((600000, 4))
    x[0::2], x[1::2] = 1.999, 1.999 / 4
    x[:, 1] *= -1  # (an even count of negative factors)
    x[7, 3], x[400000, 3] = np.inf, 0.0  # 0 x inf: NaN
    got = with_threads(threads, numred.reduce_prod, x, [0], keepdims=0)
    with mpmath.workprec(200):
        want = float(mpmath.mpf(1.999) ** 300000 * mpmath.mpf(1.999 / 4) ** 300000)
    assert np.isnan(got[3])
    assert all(abs(g - want) <= x.shape[0] * 2.0**-53 * want for g in got[:3]), (got, want)
