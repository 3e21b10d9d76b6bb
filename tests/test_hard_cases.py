"""Cases found while building the kernels, each checked against an exact argument written here."""
import itertools
import math
import warnings

import ml_dtypes
import mpmath
import numpy as np
import pytest

import numred
from numred._registry import OPS
from oracle import assert_matches, expected, round_fraction


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_log_sum_exp_tiny_positive_tail_truncates_toward_zero(dtype):
    # -5 + log(1 + e**-1000) lies strictly between -5 and -4 although float64 rounds the log to 0:
    # truncation toward zero gives -4
    out = numred.reduce_log_sum_exp(np.array([-5, -1005], dtype), keepdims=0)
    assert out.dtype == dtype and int(out) == -4

OP_NAMES = [op.name for op in OPS]


def test_int_log_sum_exp_single_element_is_the_element():
    assert int(numred.reduce_log_sum_exp(np.array([-5], np.int64), keepdims=0)) == -5


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


@pytest.mark.parametrize(
    "shape,axes",
    [((5, 300), 0), ((300, 5), 0), ((7, 9, 11), (0, 2)), ((2, 5000), 0), ((1001, 4), 0), ((999, 3), 0),
     ((2000, 16), 0)],  # (serial tiles of rows read eight at a time)
)
@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.float16, np.float64])
def test_leading_axis_all_ops_match_oracle(shape, axes, dtype):
    rng = np.random.default_rng(7)
    info_max = 1000 if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max // 4
    low = 0 if np.dtype(dtype).kind == "u" else -info_max
    x = rng.integers(low, info_max, size=shape).astype(dtype)
    for op in OP_NAMES:
        if np.dtype(dtype).kind == "f" and op != "reduce_log_sum_exp":
            x = (x / 64).astype(dtype)  # keep float16 sums of squares finite
        data = np.abs(x) + 1 if op == "reduce_log_sum" else x  # (positive sums)
        if op == "reduce_l2" and np.dtype(dtype).kind != "f":  # roots that fit the dtype
            data = x >> (4 * x.itemsize + 8)
        assert_matches(getattr(numred, op)(data, axes), expected(op, data, axes))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_tall_leading_axis_with_special_values(dtype):
    # a short kept axis over many rows is read several rows at a time: NaN, inf and the max must
    # still land in their own column
    x = np.zeros((5000, 3), dtype)
    x[::7, 0] = 3
    x[4321, 1] = 9
    if np.dtype(dtype).kind == "f":
        x[777, 2] = np.nan
        x[100, 1] = np.inf
    for op in OP_NAMES:
        data = x + 1 if op == "reduce_log_sum" else x  # (positive sums)
        assert_matches(getattr(numred, op)(data, 0), expected(op, data, 0))


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


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("shape", [(6, 16), (300, 400)])  # serial and parallel
def test_int_l2_of_a_view_whose_gaps_hold_values_too_large_to_square(dtype, shape):
    # Integer ReduceL2 bounds max|x| over the memory the input spans first: here the elements
    # between the view's are extremes, so that bound fails and the per-output maxima decide that the
    # wrapping sum of squares is exact; a view that does hold large values goes to exact arithmetic.
    info = np.iinfo(dtype)
    x = np.full(shape, 3, dtype)
    x[:, 1::2] = info.max
    view = x[:, ::2]
    assert_matches(numred.reduce_l2(view, 1), expected("reduce_l2", view, 1))
    big = x[:, 1::2][:, :1]  # (one element per output: a root that fits)
    assert_matches(numred.reduce_l2(big, 1), expected("reduce_l2", big, 1))


# one (shape, axes) per layout kind of the plan: serial runs, tiles and general walks; parallel rows,
# tiles, narrow tiles, general walks, blocks; chunked runs and tiles of few outputs
_LAYOUT_KINDS = [((9, 10), (1,)), ((9, 10), (0,)), ((3, 2, 2), (1,)), ((300, 200), (1,)), ((301, 200), (0,)),
                 ((100, 300, 4), (1,)), ((20, 30, 40, 10), (1, 3)), ((30, 40, 50), (0, 2)), ((4, 300_000), (1,)),
                 ((300_000, 4), (0,))]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
@pytest.mark.parametrize("shape,axes", _LAYOUT_KINDS, ids=[f"{'x'.join(map(str, s))}-{a}" for s, a in _LAYOUT_KINDS])
def test_32bit_l2_of_roots_beyond_16_bits_is_decided_by_the_kernels(dtype, shape, axes, monkeypatch):
    # A 32-bit ReduceL2 whose sum of squares exceeds 2**32 (any root of 17 bits or more) but stays
    # below 2**64 comes from the kernels' sums of squares modulo 2**64, on every layout kind, not
    # from Python's exact rows (600x the time on 1000x1000 int32). Oracle: |x| < 2**20 and fewer than
    # 2**23 elements per output, so NumPy's int64 sum of the squares is exact; math.isqrt of it.
    monkeypatch.setattr(numred._exact, "sums_of_squares", _no_exact_rows)
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0 if np.dtype(dtype).kind == "u" else -(2**20), 2**20, shape).astype(dtype)
    sums = np.sum(x.astype(np.int64) ** 2, axis=axes, keepdims=True)
    assert sums.max() >= 2**36  # roots of 19 bits and more
    want = np.vectorize(math.isqrt, otypes=[np.int64])(sums).astype(dtype)
    got = numred.reduce_l2(x, list(axes))
    assert got.dtype == dtype and np.array_equal(got, want)


def _no_exact_rows(rows):
    raise AssertionError("summed in Python")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape,axes", _LAYOUT_KINDS, ids=[f"{'x'.join(map(str, s))}-{a}" for s, a in _LAYOUT_KINDS])
def test_signed_l1_sums_magnitudes_in_the_kernels_without_a_copy(dtype, shape, axes):
    # Signed integer ReduceL1 is the sum of |x| modulo 2**bits (|INT_MIN| wraps to INT_MIN), taken by
    # the kernels on every layout kind, with no temporary of the input's size (NumPy's |x| of the
    # whole input was one: tracemalloc sees NumPy's allocations, not the kernels'). Oracle: NumPy's
    # |x| in int64 (|INT64_MIN| wraps to 2**63 as uint64), summed modulo 2**64 in uint64, low bits.
    import tracemalloc

    info = np.iinfo(dtype)
    rng = np.random.default_rng(sum(shape) + 7)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x.ravel()[::97] = info.min
    magnitudes = np.abs(x.astype(np.int64)).view(np.uint64)
    want = np.sum(magnitudes, axis=axes, dtype=np.uint64)
    want = want.view(np.int64) if dtype == np.int64 else want.astype(dtype)
    numred.reduce_l1(x, list(axes), keepdims=0)  # (compiled first: Numba's own allocations)
    tracemalloc.start()
    try:
        got = numred.reduce_l1(x, list(axes), keepdims=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.dtype == dtype and np.array_equal(got, want)
    assert peak < 0.1 * x.nbytes + 64 * 1024 + 2 * want.nbytes, (peak, x.nbytes)


@pytest.mark.parametrize("shape,axes", [((2,), (0,)), ((64, 2), (1,)), ((65, 2), (1,)), ((300, 2), (1,)),
                                        ((2, 300), (0,)), ((2, 300, 300), (0,)), ((2, 70000), (0,))])
def test_int32_l2_whose_root_does_not_fit_raises(shape, axes):
    # sums of squares of 2**63, below 2**64, so decided by the kernels: roots of 3037000499.96 do not fit
    # int32 (largest 2**31 - 1) and must raise, not wrap; one below 2**62 fits. The roots of single
    # runs and small inputs are the one-pass kernels' (kernels.rows.int_rows_l2,
    # kernels.serial.serial_int_l2), the others kernels.finish.finish_int_roots'.
    x = np.full(shape, -(2**31), np.int32)
    with pytest.raises(ValueError, match="does not fit in int32"):
        numred.reduce_l2(x, list(axes))
    x[...] = -(2**30)
    got = numred.reduce_l2(x, list(axes))
    assert got.dtype == np.int32 and np.all(got == math.isqrt(2 * 2**60))


# single runs (parallel: long rows, strided rows; serial) and small general geometries
_L2_IN_ONE_PASS = [((6, 40_000), (1,), False), ((300, 800), (1,), True), ((9, 10), (1,), False),
                   ((3, 2, 2), (1,), False), ((5, 6, 7), (0, 2), False)]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("shape,axes,every_other", _L2_IN_ONE_PASS,
                         ids=[f"{'x'.join(map(str, s))}-{a}{'-strided' if e else ''}" for s, a, e in _L2_IN_ONE_PASS])
def test_int_l2_in_one_pass_is_exact_on_both_sides_of_its_bound(dtype, shape, axes, every_other, monkeypatch):
    # Integer ReduceL2 of single runs and of small inputs is one kernel pass: each output's largest |x|
    # m and its sum of squares modulo 2**64, exact where n * m**2 < 2**64, m at most
    # isqrt((2**64 - 1) // n). Every element m: at the bound the sum is below 2**64, and a root that
    # fits the dtype comes from the kernel alone (the driver's other path is not taken); one past
    # it the sum is 2**64 or more, which wraps in the kernel, and the driver's general path must give
    # the exact root or the ValueError of one that does not fit. Oracle: math.isqrt of n * m**2.
    info = np.iinfo(dtype)
    full = np.zeros(shape[:-1] + (shape[-1] * (2 if every_other else 1),), dtype)
    x = full[..., ::2] if every_other else full
    full[...] = info.max  # (the gaps of the strided view: never read)
    n = math.prod(shape[a] for a in axes)
    fit = math.isqrt(((1 << 64) - 1) // n)
    for m in (min(fit, info.max), fit + 1):
        if m > info.max:
            continue
        x[...] = m
        root = math.isqrt(n * m * m)
        if root > info.max:
            with pytest.raises(ValueError, match=f"does not fit in {np.dtype(dtype).name}"):
                numred.reduce_l2(x, list(axes))
            continue
        if m <= fit:
            monkeypatch.setattr(numred._derived, "_int_l2", _no_second_pass)
        got = numred.reduce_l2(x, list(axes), keepdims=0)
        monkeypatch.undo()
        assert got.dtype == dtype and np.all(got == root) and int(got.ravel()[0]) == root, (m, fit)


def _no_second_pass(plan, src, dtype):
    raise AssertionError("ReduceL2 took the general path")


# both sides of _derived._LARGEST_BY_KERNEL_MIN, and pieces of unequal length
@pytest.mark.parametrize("size", [2**18 - 2, 2**18 + 6])
@pytest.mark.parametrize("tiles", [False, True], ids=["rows", "tiles"])
@pytest.mark.parametrize("dtype,extreme,count", [(np.int32, -(2**31), 4), (np.uint32, 2**32 - 1, 2)])
def test_32bit_l2_bound_reads_every_element(dtype, extreme, count, size, tiles):
    # The kernels' sums of squares are taken modulo 2**64, exact only where a bound on max|x| says
    # so: each row's own in the one-pass kernels of single runs, else one over the input's memory
    # (NumPy's min and max, or a parallel kernel over pieces of it from 2**18 elements). A few
    # extremes at the very end of an input of zeros square to a sum of 2**64 or more, which wraps to
    # a small one whose root fits: missing them would be a silently wrong root, not the ValueError of
    # a root that does not fit. Two outputs, as rows (axis 1) or as a tile (axis 0).
    x = np.zeros((2, size // 2), dtype=dtype)
    last = x[1, -count:]
    if tiles:
        x = np.ascontiguousarray(x.T)
        last = x[-count:, 1]
    axes = [0] if tiles else [1]
    last[...] = extreme
    assert count * extreme**2 >= 2**64
    with pytest.raises(ValueError, match=f"does not fit in {np.dtype(dtype).name}"):
        numred.reduce_l2(x, axes)
    last[...] = 3
    assert numred.reduce_l2(x, axes, keepdims=0).tolist() == [0, math.isqrt(9 * count)]


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_64bit_l2_bound_sees_one_large_element_anywhere_in_memory(dtype):
    # One 64-bit element of 2**32 + 1 squares to more than 2**64 on its own: the sum of squares
    # modulo 2**64 is then 2**33 + 1, whose root (92681) would be silently wrong. The bound over the
    # input's memory (a parallel kernel over pieces of it, from 2**18 elements) must see that element
    # wherever it is: at either end, and on both sides of every edge between its pieces (for this
    # process's thread count). Two outputs as a tile (axis 0), so that the bound decides.
    size = 2**18 + 6
    x = np.zeros((size // 2, 2), dtype=dtype)
    flat = x.reshape(-1)
    piece = -(-size // (numred._derived._LARGEST_PIECES_PER_THREAD * numred._runtime.get_num_threads()))
    positions = {0, size - 1} | {k * piece + d for k in range(1, -(-size // piece)) for d in (-1, 0)}
    for p in sorted(positions):
        flat[p] = 2**32 + 1
        got = numred.reduce_l2(x, [0], keepdims=0)
        assert got.tolist() == [2**32 + 1 if p % 2 == j else 0 for j in range(2)], p
        flat[p] = 0


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


@pytest.mark.parametrize("n", [1 << 20, (1 << 20) + 1])  # the float64 path's limit, and past it
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_32bit_tile_means_truncate_exactly_at_the_float64_limit(dtype, n):
    # Means of 32-bit tiles are float64 sums divided in float64 (numred.kernels.integers.EXACT_FLOAT_INT_COUNT).
    # Extreme values one unit off an integer mean: the quotient lies 1/n from the integer, the
    # nearest a mean that is not an integer can be, and must still truncate to the right side.
    info = np.iinfo(dtype)
    x = np.empty((n, 3), dtype)
    x[:, 0] = info.max
    x[5, 0] = info.max - 1  # mean max - 1/n: truncates to max - 1
    x[:, 1] = info.min
    x[7, 1] = info.min + 1  # mean min + 1/n: for int32 truncates toward zero, to min + 1
    x[:, 2] = info.max
    x[::2, 2] = info.min  # a mean near the middle (n even: exact; odd: one unit more of max)
    out = numred.reduce_mean(x, 0, keepdims=0)
    for j in range(3):
        total = sum(int(v) * int(c) for v, c in zip(*np.unique(x[:, j], return_counts=True)))
        exact = abs(total) // n * (1 if total >= 0 else -1)
        assert int(out[j]) == exact, (j, int(out[j]), exact)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_32bit_tile_means_past_the_float64_limit_on_random_data(dtype):
    # Past numred.kernels.integers.EXACT_FLOAT_INT_COUNT rows, 32-bit tile means are exact integer sums that
    # read eight wide rows per pass (the rows after the last eight in smaller passes); every row must
    # count once.
    n = (1 << 20) + 1001
    info = np.iinfo(dtype)
    x = np.random.default_rng(11).integers(info.min, info.max, size=(n, 3), endpoint=True, dtype=dtype)
    out = numred.reduce_mean(x, 0, keepdims=0)
    for j, total in enumerate(x.astype(np.int64).sum(axis=0).tolist()):  # exact: |total| < 2**53
        exact = abs(total) // n * (1 if total >= 0 else -1)
        assert int(out[j]) == exact, (j, int(out[j]), exact)


@pytest.mark.parametrize("shape,axis", [((150, 256), 0), ((6, 520, 64), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint64,
                                   np.int8])
def test_maxima_of_wide_tiles_find_every_planted_extreme(dtype, shape, axis):
    # The maxima of wide tiles are taken eight (wide) rows per pass, then four, then one by one
    # (kernels.general._max_keys_for). Output j gets the largest value at reduced position j and the
    # smallest at the next one, so every slot of every pass holds some output's extremes; among floats
    # also a NaN of either sign in every fifth output, and in every seventh one zeros of both signs
    # only, the +0.0 (the max) or the -0.0 (the min) at position j alone.
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
    from numred.kernels.exp import exp_nonpositive

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


@pytest.mark.parametrize("n_rows", [1, 4, 5, 9])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 1001, 30001])
@pytest.mark.parametrize("start", [0, 1])
def test_bfloat16_runs_read_in_pairs_count_every_element_once(n_rows, n, start):
    # bfloat16 runs are read two elements per 32-bit load (numred.kernels.decode.pair_sums): runs of odd
    # and even length, starting on odd and even elements, in four-row groups and the rows after
    # them, serial (small) and parallel. The last element of each row is large, so a run that drops
    # its odd tail, or reads one element past it, is off by far more than rounding.
    x = np.random.default_rng(n * 10 + n_rows).uniform(-4, 4, size=(n_rows, n + 1)).astype(ml_dtypes.bfloat16)
    x[:, -1] = 64
    x = x[:, start:start + n]
    x[:, -1] = 256
    for op in ("reduce_mean", "reduce_sum_square"):
        assert_matches(getattr(numred, op)(x, 1), expected(op, x, 1), f"{x.shape} from element {start}")


def test_bfloat16_long_run_quarters_read_in_pairs():
    # A long contiguous run is summed as four quarters read together, then the 0-3 elements left
    # (except on AMD Zen, which reads it whole: kernels.reading.QUARTER_LONG_RUNS); with an odd quarter each
    # quarter has an odd tail read alone. Powers of two at every quarter's end and at the end make
    # any element dropped or read twice visible beyond rounding.
    quarter = (1 << 16) + 1
    x = np.random.default_rng(5).uniform(-1, 1, size=4 * quarter + 3).astype(ml_dtypes.bfloat16)
    for i in range(4):
        x[(i + 1) * quarter - 1] = 2.0 ** (12 + i)
    x[-3:] = [2.0**16, 2.0**17, 2.0**18]
    for op in ("reduce_mean", "reduce_sum_square"):
        assert_matches(getattr(numred, op)(x), expected(op, x))
        assert_matches(getattr(numred, op)(x[1:]), expected(op, x[1:]))  # from an odd element


@pytest.mark.parametrize("shape", [(700, 47), (700, 48), (331, 100), (67, 511), (67, 512), (35, 1000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint32,
                                   np.int64])
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum_square"])
def test_contiguous_rows_read_one_at_a_time_or_four_together_count_every_row(opname, dtype, shape):
    # Contiguous rows of a parallel-sized input (above 2**15 elements) are summed four rows per pass
    # or one row after another, by dtype and row length (kernels.reading._rows_together: 32-bit integer rows
    # switch at 512 elements on AMD Zen 5), with 1-3 rows left after the last four-row pass (row counts
    # 4k + 3); float64 rows take two passes below 48 elements and one from the row before's sigma
    # from 48 on (kernels.split_sums.ONE_PASS_MIN_ROW). Each row gets its own magnitude, so a row summed
    # twice, skipped, or stored in its neighbour's place shows; float rows end in NaN, inf or -inf
    # in the last rows. (Float magnitudes stay in [1, 2): float16 sums of squares of 1000 such
    # values are finite.)
    rng = np.random.default_rng(shape[1])
    if np.dtype(dtype).kind in "iu":
        x = (rng.integers(0, 1000, size=shape) * np.arange(1, shape[0] + 1)[:, None]).astype(dtype)
        if np.dtype(dtype).kind == "i":
            x[::2] = -x[::2]
    else:
        x = (rng.uniform(-1, 1, size=shape) * (1 + np.arange(shape[0])[:, None] / shape[0])).astype(dtype)
        x[-1, 7], x[-2, 3], x[-3, 0] = np.nan, np.inf, -np.inf
    before = x.copy()
    out = getattr(numred, opname)(x, 1, keepdims=0)
    assert_matches(out, expected(opname, x, 1, keepdims=0))
    assert x.tobytes() == before.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint32, np.int64,
                                   np.uint64])
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum_square"])
def test_short_rows_of_inputs_beyond_the_cache_count_every_row(opname, dtype):
    # Inputs of ONE_STREAM_MIN_BYTES or more read their rows one after another on AMD Zen from a
    # shorter row length than others (kernels.reading._rows_together's min_large_row: 16 elements for
    # float32, 64 for 64-bit integers, 256 for the rest) and four rows together elsewhere, with
    # 4k + 3 rows here for the rows left after the last four. The rows are that long. Row k holds
    # v_k + d, with d repeating 1, -1, 2, -2 (summing to 0) and v_k cycling through 13 values, so
    # the exact mean is v_k and the exact sum of squares an integer (both exact in every dtype
    # here, or rounded once by the oracle): a row summed twice, skipped or stored in its
    # neighbour's place shows.
    from numred import kernels

    itemsize = np.dtype(dtype).itemsize
    reading = kernels.reading
    n = {np.float32: reading.ONE_STREAM_MIN_LARGE_FLOAT32_ROW, np.int64: reading.ONE_STREAM_MIN_LARGE_INT64_ROW,
         np.uint64: reading.ONE_STREAM_MIN_LARGE_INT64_ROW}.get(dtype, reading.ONE_STREAM_MIN_LARGE_ROW)
    n_rows = -(-reading.ONE_STREAM_MIN_BYTES // (n * itemsize)) // 4 * 4 + 3
    lowest = 2 if np.dtype(dtype).kind == "u" else -6
    v = np.arange(n_rows) % 13 + lowest
    x64 = v[:, None] + np.resize([1, -1, 2, -2], n)[None, :]
    x = x64.astype(dtype)
    before = x.copy()
    out = getattr(numred, opname)(x, 1, keepdims=0)
    if opname == "reduce_mean":
        want = v.astype(dtype)
    else:
        exact = (x64 * x64).sum(axis=1)  # int64: exact
        rounded = {s: round_fraction(int(s), dtype) for s in np.unique(exact)} if np.dtype(dtype).kind == "f" \
            else None
        want = (np.array([rounded[s] for s in exact]) if rounded else exact).astype(dtype)
    assert out.dtype == x.dtype and np.array_equal(out, want)
    assert x.tobytes() == before.tobytes()


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
    # so is the mean (SEMANTICS: an inf without the opposite one gives that inf). A plain sum gives
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


@pytest.mark.parametrize("shape,axis", [((3, 24, 1000), 1), ((5, 16, 700), 1), ((16, 3000), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint64])
def test_few_tiles_are_cut_to_share_evenly_among_threads(dtype, shape, axis):
    # A leading reduced axis over few tiles of outputs (3 or 5 rows of one tile, one tile): the tiles
    # are cut narrower until every thread has as many (_plan._layout), not chunked, whose partial
    # sums per output cost more than the reduction (16x100000 float32 axis 0: 14x torch's time).
    # Every thread count gives one chunk and an even share where the tiles can be cut that far; the
    # results match the oracle at 1 and 2
    # threads. Each output gets its own magnitude, so a column summed in its neighbour's place shows.
    from numred._plan import FEW_TASKS, MIN_SPLIT_TILE, _layout
    from threads import with_threads

    x = np.random.default_rng(9).uniform(0, 4, size=shape) * (1 + np.arange(shape[-1]) % 7)
    x = (x if np.dtype(dtype).kind == "f" else x * 1000).astype(dtype)
    for case in (x, np.zeros((16, 100000), dtype)):
        inner = case.shape[-1]
        for threads in (2, 3, 4, 8):
            plan = _layout(case.shape, case.strides, case.itemsize, (axis,) if case is x else (0,), threads,
                           case.dtype == np.float64)
            per_row = -(-inner // plan.tile)
            n_tiles = plan.n_kept // inner * per_row
            assert plan.nchunks == 1, (case.shape, threads, plan.tile, plan.nchunks)
            # (or tiles too narrow to cut again: then some threads have one tile more)
            evenly = n_tiles % threads == 0 or n_tiles >= FEW_TASKS or inner // (per_row + 1) < MIN_SPLIT_TILE
            assert evenly and n_tiles >= threads, (case.shape, threads, plan.tile)
    for op in ("reduce_mean", "reduce_log_sum_exp", "reduce_sum_square"):
        want = expected(op, x, axis)
        for threads in (2, 1):
            assert_matches(with_threads(threads, getattr(numred, op), x, axis), want, f"{op}, {threads} threads")


@pytest.mark.parametrize("shape", [(9, 333, 16), (37, 1000, 8), (3, 7000, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint64])
def test_narrow_tiles_read_as_wide_rows_count_every_row_once(dtype, shape):
    # A short kept axis under a reduced one, rows back to back (KRK with a narrow inner axis): each
    # task reads several rows at once as one "wide row", as many as leave it at least
    # kernels.general.MIN_WIDE_ROWS of them (here 5, 15 and 109 rows per wide row), then the rows left
    # over one by one. Rows get distinct magnitudes and floats a NaN, an inf and a -inf in the
    # last rows, so a row read twice, skipped, or added to the wrong column shows.
    rng = np.random.default_rng(shape[1])
    scale = (1 + np.arange(shape[1]) % 13)[None, :, None]
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(0, 1000, size=shape) * scale
    else:
        x = rng.uniform(-1, 1, size=shape) * scale / 8
    x = x.astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[0, -1, 1], x[-1, -2, 2], x[-1, -3, 0] = np.nan, np.inf, -np.inf
    for op in ("reduce_mean", "reduce_log_sum_exp", "reduce_sum_square"):
        assert_matches(getattr(numred, op)(x, 1), expected(op, x, 1), op)


@pytest.mark.parametrize("n", [16, 32, 63, 64, 71, 1001])
@pytest.mark.parametrize("step", [2, 3, -2])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64,
                                   np.int32, np.int64, np.uint32, np.uint64])
def test_strided_rows_count_every_element_once(dtype, step, n):
    # Rows whose elements are a step apart (x[:, ::2]) are summed one row per task: float32 and
    # integer runs of 64 or more in kernels.reading.STRIDED_LANES interleaved sums with the 0-7 elements
    # left added alone, float64 ones of 32 or more (STRIDED_SPLIT_MIN_RUN) split in four
    # interleaved sums with the 0-3 left added alone; every other element of 16 or more (float64:
    # 32) over the whole span with the terms of the elements in between zeroed. The
    # last used element of each row is large and every unused one larger, so a dropped tail element
    # or any element read in between or past the run shows beyond rounding; some float rows carry
    # NaN or inf, and others carry them between their elements, where they must not count.
    n_rows = max(40, -(-(1 << 15) // n))  # parallel-sized
    rng = np.random.default_rng(n * 7 + step)
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" else -30
        wide = rng.integers(low, 30, size=(n_rows, abs(step) * n)).astype(dtype)
    else:
        wide = rng.uniform(-1, 1, size=(n_rows, abs(step) * n)).astype(dtype)
    x = wide[:, ::step]
    assert x.shape == (n_rows, n)
    used = np.zeros(wide.shape, bool)
    used[:, ::step] = True
    wide[~used] = 1000
    x[:, -1] = 48
    if np.dtype(dtype).kind not in "iu":
        x[3, 5], x[4, 6], x[5, 7] = np.nan, np.inf, -np.inf
        for row, value in ((6, np.nan), (7, np.inf), (8, -np.inf)):
            unused = np.flatnonzero(~used[row])
            wide[row, unused[len(unused) // 2]] = value  # between the row's first and last element
    for op in ("reduce_mean", "reduce_sum_square", "reduce_log_sum_exp"):
        assert_matches(getattr(numred, op)(x, 1), expected(op, x, 1), f"{op} n={n} step={step}")


@pytest.mark.parametrize("n_rows", [100, 130, 1100, 5000])
@pytest.mark.parametrize("step", [2, 3, -2])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_strided_columns_read_row_by_row_count_every_element_once(dtype, step, n_rows):
    # Columns of a strided view (x[:, ::step] over axis 0) of 128 rows or more are read whole row
    # by whole row (kernels.rows.COLUMN_MIN_ROWS), in up to 16 chunks of the rows whose partial sums
    # are added after, float64 folded compensated every 256 rows within a chunk; 100 rows keep one
    # output at a time, and so do reversed views. Each column has its own magnitude and every unused
    # element is far larger, so a column summed in its neighbour's place, an element read twice or
    # skipped, or a chunk dropped shows beyond rounding; some columns carry NaN or inf. The chunks
    # are fixed by the shape, so one thread and two give the same bits.
    from threads import with_threads
    n_cols = 37
    rng = np.random.default_rng(n_rows + step)
    magnitudes = np.repeat(np.arange(1, n_cols + 1), abs(step))
    wide = (rng.uniform(-1, 1, size=(n_rows, abs(step) * n_cols)) * magnitudes).astype(dtype)
    x = wide[:, ::step]
    used = np.zeros(wide.shape, bool)
    used[:, ::step] = True
    wide[~used] = 3000
    x[-1, :] = 40
    x[7, 3], x[n_rows // 2, 4], x[-2, 5] = np.nan, np.inf, -np.inf
    for op in ("reduce_mean", "reduce_sum_square", "reduce_log_sum_exp"):
        got = getattr(numred, op)(x, 0)
        assert_matches(got, expected(op, x, 0), f"{op} rows={n_rows} step={step}")
        one_thread = with_threads(1, getattr(numred, op), x, 0)
        assert np.array_equal(np.asarray(got).view(np.uint8), np.asarray(one_thread).view(np.uint8)), op


@pytest.mark.parametrize("shape, view", [((33, 21, 50), "contiguous"), ((7, 6, 800), "contiguous"),
                                         ((120, 100, 3), "contiguous"), ((33, 42, 50), "every other kept"),
                                         ((33, 21, 50), "reversed runs")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_kept_axis_between_reduced_axes_reads_blocks_in_groups_of_outputs(dtype, shape, view):
    # A kept axis between two reduced ones, the inner one contiguous (RKR, axes [0, 2]), is read block
    # by block of the outer reduced axis, each task adding the runs of a group of neighbouring outputs,
    # a group per thread (kernels.blocks._float_blocks_for, _int_blocks_for; log-sum-exps find each
    # group's maxima and exp sums in one task, float_blocks_log_sum_exp, int_blocks_log_sum_exp). Each
    # output has its own magnitude (a max taken from a neighbouring output shows); float outputs carry
    # NaN, inf or (float64) a sum that cancels, integer ones the
    # extremes of their dtype (128-bit sums, wrapping squares). A run added to its neighbour's output,
    # read twice or skipped shows; one thread (one group) and two give the same bits.
    from numred._plan import _layout
    from threads import with_threads
    rng = np.random.default_rng(shape[2])
    n_kept = shape[1]
    magnitudes = (1 + np.arange(n_kept))[None, :, None]
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        wide = (rng.integers(0 if info.min == 0 else -1000, 1000, size=shape) * magnitudes).astype(dtype)
        wide[:, 1] = 3000  # (every other kept: an output the view leaves out)
        wide[:, 2], wide[:, 3] = info.max, info.min
    else:
        wide = rng.uniform(-1, 1, size=shape) * magnitudes
        wide[:, 1] = 3000.0
        wide[0, 2, 1], wide[-1, 3, 0], wide[1, 4, 2] = np.nan, np.inf, -np.inf
        if dtype == np.float64:
            wide[:, 5], wide[0, 5, 0], wide[-1, 5, -1] = 1.0, 1e300, -1e300  # cancels to n - 2 exactly
        wide = wide.astype(dtype)
    def viewed(a):
        return {"contiguous": a, "every other kept": a[:, ::2], "reversed runs": a[:, :, ::-1]}[view]

    x = viewed(wide)
    assert _layout(x.shape, x.strides, x.itemsize, (0, 2), 2).single_block is not None
    # (an integer log-sum-exp of the extremes does not fit the dtype: small values for it, each
    # output's 1000 apart)
    lse_input = (viewed((wide % 50 + 1000 * np.arange(n_kept)[None, :, None]).astype(dtype))
                 if np.dtype(dtype).kind in "iu" else x)
    for op, data in (("reduce_mean", x), ("reduce_sum_square", x), ("reduce_log_sum_exp", lse_input)):
        want = expected(op, data, (0, 2))
        got = getattr(numred, op)(data, (0, 2))
        assert_matches(got, want, f"{op} {view}")
        one_thread = with_threads(1, getattr(numred, op), data, (0, 2))
        assert np.asarray(one_thread).tobytes() == np.asarray(got).tobytes(), op
    if np.dtype(dtype).kind in "iu":  # an output of the largest values: max + log(count) does not fit
        top = np.array(lse_input)
        top[:, 4] = np.iinfo(dtype).max
        for call in range(2):  # the first call, and its repeat as one launch
            with pytest.raises(ValueError, match="does not fit"):
                numred.reduce_log_sum_exp(top, (0, 2))


def test_every_kernel_function_states_its_fastmath_flags():
    # Numba compiles a function whose fastmath flags are unset with the flags of the caller that
    # first compiles it: _split and Neumaier's addition, error-free transformations, had come out with
    # reassoc and contract when a FASTMATH loop compiled them first, and strict otherwise.
    import inspect
    from numba.core.registry import CPUDispatcher
    from numred import kernels
    from numred.kernels import serial
    dispatchers = {f"{module.__name__}.{name}": obj for module in kernels.modules()
                   for name, obj in vars(module).items() if isinstance(obj, CPUDispatcher)}
    for name, variants in kernels.table.KERNELS.items():
        for variant in variants:
            dispatchers[f"{name} {variant.py_func.__qualname__}"] = variant
    # the serial family's kernels, made by factories on first use
    for kernel in ([serial.float_sums(term, float64) for term in (serial.SUM, serial.SQUARES, serial.SUM_ABS)
                    for float64 in (0, 1)]
                   + [serial.int_sums(squares) for squares in (0, 1)]
                   + [serial.float_log_sum_exp(float64) for float64 in (0, 1)] + [serial.int_log_sum_exp()]):
        dispatchers[kernel.py_func.__qualname__] = kernel
    assert len(dispatchers) > 50
    assert [name for name, d in dispatchers.items() if "fastmath" not in d.targetoptions] == []
    source = "".join(inspect.getsource(module) for module in kernels.modules())
    overloads = [line for line in source.splitlines() if line.startswith("@overload(")]
    assert len(overloads) > 10
    assert [line for line in overloads if "jit_options" not in line] == []


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


def _greedy_distances_below(k: int, terms: int) -> list[int]:
    """Distances d >= 1, chosen greedily (each the smallest that keeps the sum below e**k), so that
    1 + sum(exp(-d)) creeps up to e**k from below: with 60 terms it is within 3e-28 (relative)."""
    with mpmath.workprec(1000):
        target, total, distances, d = mpmath.e ** k, mpmath.mpf(1), [], 1
        while len(distances) < terms:
            while total + mpmath.exp(-d) >= target:
                d += 1
            total += mpmath.exp(-d)
            distances.append(d)
    return distances


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("k,terms,top", [(2, 60, 1000), (2, 200, 1000), (3, 80, -1000), (1, 60, 0)])
@pytest.mark.parametrize("layout", ["serial", "rows", "columns"])
def test_int_log_sum_exp_next_to_an_integer_is_decided_exactly(dtype, k, terms, top, layout):
    # top + log(1 + sum(exp(-d))) lies just below top + k: float64 rounds the sum up to e**k, and a
    # float64 decision gave top + k (1002 for k=2, top=1000), where the truncation is top + k - 1
    # (or top + k below zero, where truncation rounds up). The oracle decides it with mpmath.
    if np.dtype(dtype).kind == "u":  # every element must be >= 0
        top = max(abs(top), 1000)
    row = [top] + [top - d for d in _greedy_distances_below(k, terms)]
    if layout == "serial":
        x = np.array(row, dtype)
        axes = None
    else:  # many outputs, read in parallel; the first, one in the middle and the last are hard
        rows = np.array([[top] * len(row)] * 1200, dtype)
        rows[1::2, 1] -= 3  # other easy ones
        rows[[0, 601, -1]] = row
        # rows: each output a run; columns: the reduced axis leads (tiles of columns)
        x, axes = (rows, [1]) if layout == "rows" else (rows.T.copy(), [0])
    expected_value = top + k - 1 if top + k - 1 >= 0 else top + k
    got = numred.reduce_log_sum_exp(x, axes=axes, keepdims=0)
    assert got.dtype == dtype
    assert int(got.ravel()[0]) == expected_value
    assert_matches(got, expected("reduce_log_sum_exp", x, axes, 0))
    # and the same call again: repeated calls take a shortcut of their own (_frontend._REPEATS)
    assert_matches(numred.reduce_log_sum_exp(x, axes=axes, keepdims=0), expected("reduce_log_sum_exp", x, axes, 0))


@pytest.mark.parametrize("dtype,k,n", [(np.int32, 21, 2), (np.uint32, 22, 2), (np.int64, 43, 3), (np.int64, 45, 8),
                                       (np.uint64, 44, 1), (np.uint64, 46, 8)])
@pytest.mark.parametrize("layout", ["rows", "columns", "all"])
def test_int_log_sum_next_to_an_integer_is_decided_exactly(dtype, k, n, layout):
    # floor(e**k) and floor(e**k) + 1 as exact sums S of n elements: ln S is k minus about 1e-20
    # and k plus about as much, closer than float64's log can tell (it gives k for both beyond
    # 2**53), so trunc(ln S) must be decided exactly: k - 1, then k. Sums beyond 2**63 (int64, n = 8)
    # and 2**64 (uint64) are the exact mean and residue's only; many outputs are decided at once.
    with mpmath.workprec(200):
        below = int(mpmath.floor(mpmath.exp(k)))

    def row(total):  # n elements of sum ``total``, the last one the remainder
        return [total // n] * (n - 1) + [total - (n - 1) * (total // n)]

    rows = np.array([row(below + i % 2) for i in range(400)], dtype)
    rows[2::4, 0] -= 5  # other outputs, far from an integer log... (S - 5 is still next to e**k)
    rows[3::4, -1] //= 3  # ... and these far from it
    x, axes = {"rows": (rows, [1]), "columns": (rows.T.copy(), [0]), "all": (rows[0], None)}[layout]
    got = numred.reduce_log_sum(x, axes=axes, keepdims=0)
    assert got.dtype == dtype
    sums = [sum(int(v) for v in r) for r in (x.T if layout == "columns" else x.reshape(-1, n))]
    with mpmath.workprec(200):
        assert got.ravel().tolist() == [int(mpmath.floor(mpmath.log(s))) for s in sums]
    assert got.ravel()[0] == k - 1 and (layout == "all" or got.ravel()[1] == k)


def _spy(monkeypatch, module, name):
    """Wrap ``module.name`` to count its calls: the list its calls are appended to."""
    calls, original = [], getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("axes", [[1], None])
def test_exact_paths_read_long_rows_in_pieces(dtype, axes, monkeypatch):
    # What the kernels leave undecided is computed again in Python (numred._exact), in pieces of at
    # most _BLOCK_ELEMENTS elements: groups of rows, or pieces of one row where a row is longer (a
    # reduction over all of a large input). Pieces of 5 here, so that rows of 37 and 61 elements
    # are cut unevenly: sums of squares (ReduceL2 beyond 2**64), sums (ReduceLogSum, its residue
    # method patched to give up) and counts of distances (ReduceLogSumExp next to an integer) must
    # add up across the pieces, for every output.
    from numred import _derived, _exact
    from numred._reduction import Undecided

    monkeypatch.setattr(_exact, "_BLOCK_ELEMENTS", 5)
    rng = np.random.default_rng(11)
    bits = 8 * np.dtype(dtype).itemsize
    small = 1000 if bits == 32 else 2**35
    large = 2**31 - 1 if bits == 32 else 2**40  # n * large**2 >= 2**64: the kernels' bound fails
    x = rng.integers(0 if np.dtype(dtype).kind == "u" else -small, small, (3, 37), dtype=dtype, endpoint=True)
    x[0, 5] = large  # (one: the root of a whole 32-bit input fits)
    squares = _spy(monkeypatch, _exact, "sums_of_squares")
    got = numred.reduce_l2(x, axes=axes, keepdims=0)
    rows = x.tolist() if axes else [x.ravel().tolist()]
    assert squares and got.ravel().tolist() == [math.isqrt(sum(v * v for v in row)) for row in rows]

    def undecided(*args):
        raise Undecided

    monkeypatch.setattr(_derived, "_means_and_residues", undecided)
    x[:, 0] = 2**62 if dtype == np.int64 else np.iinfo(dtype).max // 2  # every sum positive
    x[:, 1:] //= 2**6
    sums = _spy(monkeypatch, _exact, "row_sums")
    got = numred.reduce_log_sum(x, axes=axes, keepdims=0)
    assert sums
    assert_matches(got, expected("reduce_log_sum", x, axes, 0))

    top = 1000
    row = [top] + [top - d for d in _greedy_distances_below(2, 60)]  # 61 elements
    x = np.array([row, row[::-1], [top] * 61], dtype)
    got = numred.reduce_log_sum_exp(x, axes=axes, keepdims=0)
    assert got.ravel().tolist() == ([top + 1, top + 1, top + 4] if axes else [top + 4])  # 3 rows: ln(3 * 61.0...)
    assert_matches(got, expected("reduce_log_sum_exp", x, axes, 0))


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


def _l2_and_peak(x, axes=None):
    """numred.reduce_l2(x, axes, keepdims=0) and the peak of the allocations traced during the call
    (tracemalloc sees NumPy's; the kernels are loaded first, on a piece, so that Numba's are not)."""
    import tracemalloc

    numred.reduce_l2(x[..., :2], axes=axes)
    tracemalloc.start()
    try:
        got = numred.reduce_l2(x, axes=axes, keepdims=0)
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype,value", [(np.int64, 2**40), (np.float64, 1e200)])
def test_exact_l2_of_a_long_row_needs_no_temporary_proportional_to_it(dtype, value):
    # A reduction over all of a large input is one long row: its exact path (squares beyond 2**64,
    # or beyond float64's range) takes it in pieces, with temporaries of a few pieces, not several
    # the size of the input (NumPy's allocations are traced)
    x = np.full(1 << 22, value, dtype=dtype)  # 32 MiB
    x[::3] = -value
    got, peak = _l2_and_peak(x)
    if dtype == np.int64:
        assert int(got) == math.isqrt(x.size * value**2)
    else:
        assert got == 2048 * value  # sqrt(2**22) exactly, times 1e200 rounded once
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"


@pytest.mark.parametrize("batch", [False, True])
def test_exact_path_over_axes_that_do_not_merge_copies_one_group_of_rows_at_a_time(batch):
    # Reduced axes around a kept one (axes [0, 2] of 64x32x4096) cannot be one row per output without
    # a copy: the exact path copies a group of rows at a time, not all of them (64 MiB at its peak
    # before). Output k's elements are +-(2**40 + k), its squares' sum 2**18 (2**40 + k)**2, beyond
    # 2**64: its root 2**9 (2**40 + k), exactly. Also behind a kept axis of length 1 (a batch of one,
    # 1x64x32x4096 over [1, 3]), which the groups pass over.
    x = np.empty((64, 32, 4096), dtype=np.int64)  # 64 MiB
    x[...] = (2**40 + np.arange(32))[None, :, None]
    x[::3] *= -1
    axes = [0, 2]
    if batch:
        x, axes = x[None], [1, 3]
    got, peak = _l2_and_peak(x, axes)
    assert got.ravel().tolist() == [2**9 * (2**40 + k) for k in range(32)]
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"


@pytest.mark.parametrize("axes", [None, [0, 1]])
def test_exact_path_reads_a_transposed_input_in_place(axes):
    # A transposed (here Fortran-ordered) input: the exact path takes each output's elements in
    # memory's order, a view, where the axes' given order needs a copy of the whole input (32 MiB at
    # the peak before). 2**22 elements +-2**40, or 2**16 per output over [0, 1]: squares' sums
    # beyond 2**64, roots 2**51 and 2**48 exactly.
    x = np.full((64, 16, 4096), 2**40, dtype=np.int64)  # 32 MiB
    x[:, ::3] *= -1
    x = x.T  # 4096x16x64, Fortran-ordered
    got, peak = _l2_and_peak(x, axes)
    assert got.ravel().tolist() == ([2**51] if axes is None else [2**48] * 64)
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_int_log_sum_exp_next_to_an_integer_fits_at_the_top_of_the_dtype(dtype):
    # max + log(...) just below max + 2, with max = the dtype's largest value - 1: the result is the
    # largest value, where a float64 decision said max + 2, which does not fit (a ValueError)
    top = int(np.iinfo(dtype).max) - 1
    x = np.array([top] + [top - d for d in _greedy_distances_below(2, 60)], dtype)
    assert int(numred.reduce_log_sum_exp(x, keepdims=0)) == np.iinfo(dtype).max
    with pytest.raises(ValueError, match="does not fit"):  # one more and it does not
        numred.reduce_log_sum_exp(x + dtype(1), keepdims=0)
