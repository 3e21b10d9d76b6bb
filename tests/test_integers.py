"""Integer results (int32, int64, uint32, uint64) through the public functions, against exact
arithmetic (Python ints, mpmath): the integer log-sum-exp and log-sum decided exactly next to an
integer, 32-bit tile means at the float64 path's limit, ReduceL1's sums of |x| and ReduceL2's sums of
squares modulo 2**64 where the kernels' bounds say they are exact (and the exact path where they do
not), roots that do not fit, the exact paths' pieces (numred._exact), and the integer narrow-tile
kernels.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import numred
import oracle
from oracle import assert_matches, expected
from test_layouts import NARROW_TILES
from threads import needs_two_threads, with_threads


# ---- log-sum-exp and log-sum ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_log_sum_exp_tiny_positive_tail_truncates_toward_zero(dtype):
    # -5 + log(1 + e**-1000) lies strictly between -5 and -4 although float64 rounds the log to 0:
    # truncation toward zero gives -4
    out = numred.reduce_log_sum_exp(np.array([-5, -1005], dtype), keepdims=0)
    assert out.dtype == dtype and int(out) == -4


def test_int_log_sum_exp_single_element_is_the_element():
    assert int(numred.reduce_log_sum_exp(np.array([-5], np.int64), keepdims=0)) == -5


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


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_int_log_sum_exp_next_to_an_integer_fits_at_the_top_of_the_dtype(dtype):
    # max + log(...) just below max + 2, with max = the dtype's largest value - 1: the result is the
    # largest value, where a float64 decision said max + 2, which does not fit (a ValueError)
    top = int(np.iinfo(dtype).max) - 1
    x = np.array([top] + [top - d for d in _greedy_distances_below(2, 60)], dtype)
    assert int(numred.reduce_log_sum_exp(x, keepdims=0)) == np.iinfo(dtype).max
    with pytest.raises(ValueError, match="does not fit"):  # one more and it does not
        numred.reduce_log_sum_exp(x + dtype(1), keepdims=0)


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


# ---- means ---------------------------------------------------------------------------------------


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


# ---- ReduceL1 and ReduceL2 -----------------------------------------------------------------------


# one (shape, axes) per layout kind of the plan: serial runs, tiles and general walks; parallel rows,
# tiles, narrow tiles, general walks, blocks; chunked runs and tiles of few outputs
_LAYOUT_KINDS = [((9, 10), (1,)), ((9, 10), (0,)), ((3, 2, 2), (1,)), ((300, 200), (1,)), ((301, 200), (0,)),
                 ((100, 300, 4), (1,)), ((20, 30, 40, 10), (1, 3)), ((30, 40, 50), (0, 2)), ((4, 300_000), (1,)),
                 ((300_000, 4), (0,))]


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


# ---- the exact paths -----------------------------------------------------------------------------


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


# ---- narrow tiles --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_narrow_tiles_kernel_takes_32_bit_means_too(dtype):
    # 32-bit means of narrow tiles take the float kernel (_compute._int_mean_by_float_tiles), but the
    # integer kernel accepts them: its 32-bit columns hold whole values (kernels.integers._int_columns),
    # which it had folded as high halves, 2**32 times too large. Called directly on such a tile.
    from numred import _runtime, kernels
    from numred._plan import make_plan

    info = np.iinfo(dtype)
    whole = np.random.default_rng(44).integers(info.min, info.max, (40, 300, 4), dtype=dtype, endpoint=True)
    whole.reshape(-1)[::5] = info.max
    plan, src = with_threads(2, make_plan, whole, (1,))
    n_outer, outer_stride, n_inner, n_reduced, step = plan.single_tile
    assert kernels.tiles.narrow_tile(n_inner, plan.tile, n_reduced, step), plan
    result = np.empty(plan.n_kept, dtype=dtype)
    kernel = kernels.table.KERNELS[kernels.table.INT_TILES[False]]
    _runtime.run(kernel, False, src, plan.base, n_outer, outer_stride, n_inner, n_reduced, n_reduced, result)  # (the count: a mean)
    expected = oracle.expected("reduce_mean", whole, [1])
    oracle.assert_matches(result.reshape(40, 1, 4), expected, dtype)


@pytest.mark.slow
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
    plan, _ = with_threads(2, make_plan, x, tuple(axes))
    _, _, n_inner, n_reduced, _ = plan.single_tile
    for opname in ("reduce_mean", "reduce_sum_square"):
        squares = opname == "reduce_sum_square"
        launched = _compute.kernel_call(OPS_BY_NAME[opname].reduction, plan, x.dtype).kernel
        # 32-bit means take the float tiles; 64-bit data only blocks of up to NARROW_64BIT_MAX_BLOCK
        narrow = x.itemsize == 4 or n_inner * n_reduced <= kernels.tiles.NARROW_64BIT_MAX_BLOCK
        assert plan.narrow == narrow, plan
        if (squares or x.itemsize == 8) and narrow:
            assert launched == kernels.table.INT_TILES[squares], (opname, plan)
        expected = oracle.expected(opname, x, axes)  # exact, from Python integers
        for threads in (2, 1):
            for call in range(2):  # the second call of a C-contiguous input is a OneLaunch
                got = with_threads(threads, getattr(numred, opname), x, axes)
                ctx = f"{opname} {dtype} {case} {threads} threads, call {call + 1}"
                oracle.assert_matches(got, expected, ctx)
                assert not np.shares_memory(got, whole), ctx
    assert whole.tobytes() == before.tobytes(), "the input was modified"
