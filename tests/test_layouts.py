"""Every layout kind the plan picks, through the public functions against exact oracles: leading
reduced axes, rows (contiguous, short, beyond the cache, strided), columns and tiles (single tiles,
narrow tiles read as runs or as wide rows, few tiles cut among the threads), blocks (a kept axis
between two reduced ones), chunks, the general walker, and views of large inputs (transposed,
reversed, stepped, Fortran-ordered). Each case is built so that an element read twice, skipped, or
added to a neighbouring output shows beyond rounding.

Huge zero-stride views are in tests/test_memory.py; the layouts' results across thread counts in
tests/test_thread_counts.py.
"""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import numred
import oracle
from numpy_oracle import carrier_view, float_expected, int_expected, magnitude_pieces, make, norm_axes
from numred._registry import OPS
from oracle import BFLOAT16, assert_matches, expected, round_fraction
from threads import needs_two_threads, with_threads

OP_NAMES = [op.name for op in OPS]
# every operator but ReduceProd, whose products tests/test_products.py tests on their own
OP_NAMES_BUT_PROD = tuple(op.name for op in OPS if op.name != "reduce_prod")


# ---- leading reduced axes ------------------------------------------------------------------------


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


# ---- large inputs and their views ----------------------------------------------------------------


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


@pytest.mark.slow
@pytest.mark.parametrize("kind,shape", CASES, ids=[f"{k}-{'x'.join(map(str, s))}" for k, s in CASES])
def test_large_reduction_matches_oracle(kind, shape):
    x = make(kind, shape, seed=sum(shape) + len(kind))
    before = x.copy()
    converted = x.astype(np.float64 if x.dtype.kind == "f" or x.dtype == BFLOAT16 else np.int64)
    pieces = magnitude_pieces(converted) if converted.dtype == np.int64 else None
    memo = {}  # the float oracle's |x|, x * x and sums, made once for every operator and axes
    for opname in OP_NAMES_BUT_PROD:
        func = getattr(numred, opname)
        for axes in _axes_for(x.ndim):
            ctx = f"{opname} {kind} {shape} axes={axes}"
            if x.dtype.kind == "f" or x.dtype == BFLOAT16:
                e, tol = float_expected(opname, x, axes, exact_sums=kind.endswith("grid"), x64=converted,
                                        memo=memo)
                got = func(x, axes, keepdims=1)
                oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=ctx)
            else:
                lo, hi = int_expected(opname, x, axes, wide=converted, pieces=pieces)
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


@pytest.mark.slow
def test_large_views_match_contiguous_oracle():
    # strided / transposed / reversed views of a large array take the same paths as their copies
    x = make("float32-grid", (600, 20000), seed=9)
    views = {
        "transposed": x.T,
        "reversed": x[::-1, ::-1],
        "step": x[::2, ::3],
        "fortran": np.asfortranarray(x[:300]),
    }
    for name, v in views.items():
        memo = {}  # the oracle's |v|, v * v and sums, made once for every operator and axes
        v64 = v.astype(np.float64)
        for opname in OP_NAMES_BUT_PROD:
            for axes in ([0], [1], None):
                e, tol = float_expected(opname, v, axes, exact_sums=True, x64=v64, memo=memo)
                got = getattr(numred, opname)(v, axes, keepdims=1)
                oracle.assert_float_close(got, e, np.float32, ulps=1, abs_tol=tol, context=f"{opname} {name} {axes}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64])
def test_broadcast_axes_are_read_outermost_and_count_every_element(dtype):
    # A reduced axis of stride 0 (np.broadcast_to) goes outermost in the plan, the row's own axis
    # innermost: the other way round each run read one element over and over, which does not
    # vectorise (docs/performance.md, "Broadcast views").
    from numred._plan import make_plan

    rng = np.random.default_rng(5)
    values = rng.integers(0, 1001, 301)
    row = (values / 8 if np.dtype(dtype).kind == "f" else values).astype(dtype)
    for x in (np.broadcast_to(row, (40, 301)), np.broadcast_to(row[:, None], (301, 40))):
        plan, _ = make_plan(x, (0, 1))
        assert plan.dims[-1] == 1 and plan.n_reduced == x.size, plan  # the row, innermost
        for op in OP_NAMES:
            assert_matches(getattr(numred, op)(x), expected(op, x), f"{x.shape} {x.strides}")


# ---- rows ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(700, 47), (700, 48), (331, 100), (67, 511), (67, 512), (35, 1000)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint32,
                                   np.int64])
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum_square"])
def test_contiguous_rows_read_one_at_a_time_or_four_together_count_every_row(opname, dtype, shape):
    # Contiguous rows of a parallel-sized input (above 2**15 elements) are summed four rows per pass
    # or one row after another, by dtype and row length (numred._compute._rows_together: 32-bit integer rows
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
    # shorter row length than others (numred._compute._rows_together's min_large_row: 16 elements for
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


# ---- columns and tiles ---------------------------------------------------------------------------


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


@pytest.mark.slow
@needs_two_threads
@pytest.mark.parametrize("case", NARROW_TILES)
def test_narrow_tiles_are_read_as_runs_of_rows(case):
    from numred import kernels
    from numred._plan import make_plan

    view, shape, axes = NARROW_TILES[case]
    x = view(make("float32-grid", shape, seed=41))
    plan, _ = with_threads(2, make_plan, x, tuple(axes))
    n_outer, _, n_inner, n_reduced, step = plan.single_tile
    assert n_outer >= 16 and kernels.tiles.narrow_tile(n_inner, plan.tile, n_reduced, step), plan


@pytest.mark.slow
@needs_two_threads
@pytest.mark.parametrize("case", SINGLE_TILES)
@pytest.mark.parametrize("kind", ["float32-grid", "float64-grid", "float16-grid", "bfloat16-grid", "int32"])
def test_single_tile_plans_match_the_oracle(kind, case):
    from numred._plan import make_plan

    view, shape, axes = SINGLE_TILES[case]
    x = view(make(kind, shape, seed=41))
    plan, _ = with_threads(2, make_plan, carrier_view(x), tuple(axes))
    assert plan.single_tile is not None and plan.parallel, plan
    for opname in ("reduce_mean", "reduce_sum_square"):
        func = getattr(numred, opname)
        for threads in (2, 1):
            got = with_threads(threads, func, x, axes)
            ctx = f"{opname} {case} {threads} threads"
            if kind == "int32":
                lo, hi = int_expected(opname, x, axes)
                assert got.dtype == x.dtype and np.array_equal(got.astype(np.int64), lo), ctx
            else:
                e, tol = float_expected(opname, x, axes, exact_sums=True)
                oracle.assert_float_close(got, e, x.dtype, ulps=1, abs_tol=tol, context=ctx)


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


# ---- blocks --------------------------------------------------------------------------------------


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


# ---- every layout the precompile step covers -----------------------------------------------------


def _plan_kind(x, axes):
    from numred._plan import make_plan

    plan, _ = make_plan(carrier_view(x), tuple(range(x.ndim)) if axes is None else tuple(axes))
    if not plan.parallel:
        return "serial rows" if plan.single_run else "serial"
    for kind in ("single_run", "single_tile", "single_block"):
        if getattr(plan, kind):
            return kind
    return "chunked" if plan.nchunks > 1 else "general"


@pytest.mark.slow
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
            whole = make(kind, shape, seed=len(shape))
            flat = whole.reshape(-1)
            flat[7], flat[-3], flat[len(flat) // 2], flat[len(flat) // 2 + 1] = np.nan, np.inf, np.inf, -np.inf
        else:
            info = np.iinfo(dtype)
            whole = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        x = whole[view[0]] if view else whole
        before = whole.copy()
        t = norm_axes(axes, x.ndim)
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
