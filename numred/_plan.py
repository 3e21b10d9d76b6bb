"""From an array and the set of reduced axes to the "kept x reduced" description the kernels take.

No data is copied: the kernels read the input where it lies, through a 1-D view of the memory it
spans. Size-1 axes are dropped, adjacent axes whose strides allow it are merged (onnxruntime's
FastReduceKind idea), and reduced axes are reordered so that the innermost one has the smallest
non-zero stride (a broadcast axis, of stride 0, outermost): the order of the reduced elements does
not change the result beyond rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import functools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .kernels.general import reads_wide_rows
from .kernels.tiles import NARROW_64BIT_MAX_BLOCK, narrow_tile
from ._runtime import get_num_threads

# From this many elements a plan is parallel: the layout kinds made for threads (tiles, blocks,
# chunks). Whether its kernel then runs on threads is _compute.threaded's decision.
PARALLEL_MIN_ELEMENTS = 1 << 15
# When there are fewer than FEW_TASKS tiles of outputs, each tile's reduced range is cut into chunks
# of at least CHUNK_MIN_ELEMENTS elements (at most MAX_CHUNKS) so that every thread has work. The
# count depends on the shape only, never on the thread count, so results do not either.
FEW_TASKS = 16
CHUNK_MIN_ELEMENTS = 1 << 17
MAX_CHUNKS = 16
# Outputs one task reduces together when the reduced axis is not the contiguous one (see Plan.tile):
# whole rows when they fit, so that memory is read in order.
MAX_TILE = 1 << 14
MIN_SERIAL_TILE = 8
# Fewer than FEW_TASKS tiles: the tiles are first cut into narrower ones, at least MIN_SPLIT_TILE
# wide, until every thread has as many; each output's sum stays in one task and needs no combining
# step, where chunks of the full-width tile would add partials to write and a pass to combine them.
# Only when there are still fewer tiles than threads is the reduced range cut into chunks.
MIN_SPLIT_TILE = 256


@dataclass(frozen=True, slots=True)
class Plan:
    """The geometry of a reduction; the data travels beside it as ``src``, a 1-D contiguous view
    of the memory the input spans (see make_plan). Plans are cached per geometry."""

    span: int  # elements of src
    base: int  # element offset in src of the input's first element (after reduced-axis flips)
    # int64: kept shape, kept strides (C order of the output), reduced shape, reduced strides
    # (innermost, smallest stride last), all in elements, at least one entry each; one array because
    # every array argument costs Numba's dispatcher a type check
    dims: np.ndarray
    kept_ndim: int
    n_kept: int
    n_reduced: int
    nchunks: int  # pieces each output's reduced range is cut into
    tile: int  # neighbouring outputs (innermost kept axis, contiguous) a task reduces row by row, or 1
    parallel: bool
    # one kept axis over one reduced axis, no tile, one chunk: each output is a single strided run,
    # and the kernels have a lean variant for it. Then (n_kept, kept stride, n_reduced, reduced
    # stride) as Python ints (NumPy scalars cost Numba's dispatcher more), else None.
    single_run: tuple[int, int, int, int] | None
    # one reduced axis under one or two kept axes, the inner one cut into tiles (tile > 1), one
    # chunk, rows not read as wide rows (kernels.general.reads_wide_rows) or narrow rows back to back
    # (kernels.tiles.narrow_tile): the kernels have a lean variant for these too. Then (n_outer, outer
    # stride, n_inner, n_reduced, reduced stride), else None.
    single_tile: tuple[int, int, int, int, int] | None
    # a single tile that the narrow-tile kernels read (kernels.tiles.narrow_tile; 64-bit data only in
    # blocks of up to kernels.tiles.NARROW_64BIT_MAX_BLOCK elements)
    narrow: bool
    # one kept axis between two reduced ones, the inner one contiguous, no tile, one chunk (RKR): each
    # output a run in each of several blocks, and the kernels (sums, integer sums, maxima) read them
    # block by block, in groups of outputs, one per thread. Then (n_kept, kept stride, n_outer,
    # outer stride, n_inner, groups), else None.
    single_block: tuple[int, int, int, int, int, int] | None
    threads: int  # the thread count the tiles were cut for (MIN_SPLIT_TILE), or 0: the plan fits any count


def _merge(dims):
    """Merge neighbours (n1, s1), (n2, s2) into (n1 * n2, s2) when s1 == n2 * s2, outer first."""
    merged = []
    for n, stride in dims:
        if merged and merged[-1][1] == n * stride:
            merged[-1] = (merged[-1][0] * n, stride)
        else:
            merged.append((n, stride))
    return merged


def _dims(shape, strides, reduced_axes):
    """(base, span, kept dims, reduced dims) of a geometry in elements: the dims as (length, stride)
    pairs, axes of length 1 left out, reversed reduced axes walked forwards from ``base``, reduced
    dims by decreasing stride (stride 0 first), and neighbours that are one contiguous run merged."""
    # the view's lowest address: the last element of every reversed axis
    base = sum((n - 1) * -s for n, s in zip(shape, strides) if s < 0)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides))
    reduced = set(reduced_axes)
    kept_dims = [(shape[a], strides[a]) for a in range(len(shape)) if a not in reduced and shape[a] != 1]
    reduced_dims = []
    for a in sorted(reduced):
        n, s = shape[a], strides[a]
        if n == 1:
            continue
        if s < 0:  # walk a reversed axis forwards: same elements, and it may merge or be contiguous
            base += (n - 1) * s
            s = -s
        reduced_dims.append((n, s))
    # broadcast axes (stride 0) outermost: innermost, their runs would read one element over and over,
    # too slowly to vectorise, where the smallest non-zero stride makes runs that read memory in order
    reduced_dims.sort(key=lambda d: (d[1] != 0, -d[1]))
    return base, span, _merge(kept_dims) or [(1, 0)], _merge(reduced_dims) or [(1, 0)]


def _tiles_and_chunks(kept_dims, reduced_dims, n_reduced, parallel, threads, unchunked_tiles):
    """(tile, nchunks): the width of the tiles of neighbouring outputs a task reads together (1: one
    output per task), and the chunks each output's reduced range is cut into (_layout's arguments)."""
    # A leading reduced axis over contiguous kept elements (RK, KRK): walking one output's reduced
    # elements would stride through memory, so a task reads whole rows of a tile of outputs instead.
    # (Below the parallel threshold a narrow tile saves nothing and costs its accumulator arrays.)
    tile = 1
    if kept_dims[-1][1] == 1 and reduced_dims[-1][1] != 1 and (parallel or kept_dims[-1][0] >= MIN_SERIAL_TILE):
        tile = min(kept_dims[-1][0], MAX_TILE)
    n_inner = kept_dims[-1][0]
    rows = math.prod(n for n, _ in kept_dims) // n_inner
    per_row = -(-n_inner // tile)  # tiles per row of the inner kept axis, all of one width (but the last)
    # one thread: chunks of the reduced range only add partials to write and combine
    enough_tasks = 1 if threads == 1 else FEW_TASKS
    if threads > 1 and tile > 1 and rows * per_row < FEW_TASKS:
        # Few tiles: cut them narrower (at least MIN_SPLIT_TILE wide) until every thread has as many,
        # or there are FEW_TASKS, and chunk only if that leaves fewer tiles than threads: with many
        # outputs, writing partial sums per output and combining them in one thread can cost more
        # than the reduction itself.
        while rows * per_row % threads and rows * per_row < FEW_TASKS and n_inner // (per_row + 1) >= MIN_SPLIT_TILE:
            per_row += 1
        enough_tasks = threads
    if unchunked_tiles and tile >= 2 * MIN_SPLIT_TILE:
        # at least two tiles per row with one thread too, which are then never chunked (below); a tile
        # that is a whole row may be read as wide rows (kernels.general.WIDE_ROW), with several accumulators
        # per column, which round differently
        per_row = max(per_row, 2)
        enough_tasks = 0
    elif unchunked_tiles:
        # float64 runs and narrow tiles are chunked by the shape alone, as for no thread count in
        # particular: chunked partials (a float64 product's above all) round differently from one
        # task's, and results must not depend on the threads
        enough_tasks = FEW_TASKS
    if tile > 1:
        tile = -(-n_inner // per_row)
    nchunks = 1
    if rows * per_row < enough_tasks:
        wanted = min(MAX_CHUNKS, n_reduced * tile // CHUNK_MIN_ELEMENTS)
        if wanted > 1:  # the nearest power of two: an even split over 2, 4, 8 threads (7 chunks would
            wanted = 1 << round(math.log2(wanted))  # leave one of two threads idle for an eighth of the work)
        nchunks = max(1, min(wanted, n_reduced))
    return tile, nchunks


@functools.lru_cache(maxsize=4096)
def _layout(shape, strides, itemsize, reduced_axes, threads=0, unchunked_tiles=False):
    """The Plan of a geometry, cached because calls on arrays of one shape repeat, and small calls
    are dominated by this Python work. None when the strides are not whole elements. ``threads``
    (0: not considered) lets few wide tiles be cut per thread instead of chunked (MIN_SPLIT_TILE);
    with ``unchunked_tiles`` such tiles are never chunked, for any thread count (float64 data)."""
    if any(s % itemsize for s in strides):
        return None
    base, span, kept_dims, reduced_dims = _dims(shape, [s // itemsize for s in strides], reduced_axes)
    n_kept = math.prod(n for n, _ in kept_dims)
    n_reduced = math.prod(n for n, _ in reduced_dims)
    parallel = n_kept * n_reduced >= PARALLEL_MIN_ELEMENTS
    tile, nchunks = _tiles_and_chunks(kept_dims, reduced_dims, n_reduced, parallel, threads, unchunked_tiles)
    nk, nr = len(kept_dims), len(reduced_dims)
    dims = np.array([d[0] for d in kept_dims] + [d[1] for d in kept_dims]
                    + [d[0] for d in reduced_dims] + [d[1] for d in reduced_dims], dtype=np.int64)
    dims.flags.writeable = False  # shared by every call of this geometry
    single_run = None
    if nk == 1 and nr == 1 and tile == 1 and nchunks == 1:
        single_run = (kept_dims[0][0], kept_dims[0][1], reduced_dims[0][0], reduced_dims[0][1])
    single_tile, narrow = None, False
    if nk <= 2 and nr == 1 and tile > 1 and nchunks == 1:
        (n_inner, _), (n_rows, step) = kept_dims[-1], reduced_dims[0]
        n_outer, outer_stride = kept_dims[0] if nk == 2 else (1, 0)
        narrow = narrow_tile(n_inner, tile, n_rows, step)
        if not reads_wide_rows(n_inner, tile, step, n_rows) or narrow:
            single_tile = (n_outer, outer_stride, n_inner, n_rows, step)
        narrow = narrow and (itemsize < 8 or n_inner * n_rows <= NARROW_64BIT_MAX_BLOCK)
    single_block = None
    if parallel and nk == 1 and nr == 2 and tile == 1 and nchunks == 1 and reduced_dims[1][1] == 1:
        groups = max(1, min(n_kept, threads))  # (0 threads: make_plan asks for the count and lays out again)
        single_block = (n_kept, kept_dims[0][1], *reduced_dims[0], reduced_dims[1][0], groups)
    return Plan(span, base, dims, nk, n_kept, n_reduced, nchunks, tile, parallel, single_run, single_tile, narrow,
                single_block, threads)


def make_plan(x: np.ndarray, reduced_axes: tuple[int, ...]) -> tuple[Plan, np.ndarray]:
    """(plan, src) for ``x``: non-empty, in a carrier dtype, native byte order."""
    plan = _layout(x.shape, x.strides, x.itemsize, reduced_axes)
    if plan is None:
        # strides that are not whole elements (views into packed records): the only copy numred makes
        x = np.ascontiguousarray(x)
        plan = _layout(x.shape, x.strides, x.itemsize, reduced_axes)
    if (plan.single_block or plan.parallel and plan.tile >= 2 * MIN_SPLIT_TILE and plan.n_kept // plan.tile < FEW_TASKS
            or plan.nchunks > 1 and get_num_threads() == 1 and x.dtype != np.float64):
        # Few wide tiles: cut per thread instead of chunked (the thread count is asked only here,
        # where a plan needs it: asking has a cost, _runtime.get_num_threads); with one thread, no
        # chunks (_layout). Narrower floats are
        # summed in float64, integers exactly, so with or without chunks their results differ by no
        # more than the last bit. Float64 data's compensated sums would round differently where the
        # sum cancels, so its tiles are never chunked, with one thread or many: a column's sum is
        # then the same whatever the tile's width (and tiles cut narrower are also faster than
        # chunks). Single blocks: a group of outputs per thread (their results do not
        # depend on the grouping).
        plan = _layout(x.shape, x.strides, x.itemsize, reduced_axes, get_num_threads(), x.dtype == np.float64)
    # src is always read-only: the kernels never write the input, and Numba types read-only arrays
    # apart from writeable ones, so one kind of src means one compiled kernel per dtype, not two
    if x.flags.c_contiguous:
        src = x.reshape(-1)
        src.setflags(write=False)  # a view: x itself is untouched (setflags: cheaper than .flags)
    else:  # a 1-D view from the lowest address the input touches over all the memory it spans
        first = x[tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(x.shape, x.strides))]
        src = as_strided(first, shape=(plan.span,), strides=(x.itemsize,), writeable=False)
    return plan, src
