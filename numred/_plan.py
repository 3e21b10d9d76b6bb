"""From an array and the set of reduced axes to the "kept x reduced" description the kernels take.

No data is copied: the kernels read the input where it lies, through a 1-D view of the memory it
spans. Size-1 axes are dropped, adjacent axes whose strides allow it are merged (onnxruntime's
FastReduceKind idea), and reduced axes are reordered so that the innermost one has the smallest
stride: the order of the reduced elements does not change the result beyond rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

# Below this many elements a parallel launch costs more than it saves (DESIGN.md: about 2 us).
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


@dataclass(frozen=True)
class Plan:
    src: np.ndarray  # 1-D contiguous read-only view over the memory the input spans
    base: int  # element offset in src of the input's first element (after reduced-axis flips)
    kept_shape: np.ndarray  # int64, C order of the output
    kept_strides: np.ndarray  # int64, in elements
    reduced_shape: np.ndarray  # int64, innermost (smallest stride) last; at least one entry
    reduced_strides: np.ndarray
    n_kept: int
    n_reduced: int
    nchunks: int  # pieces each output's reduced range is cut into
    tile: int  # neighbouring outputs (innermost kept axis, contiguous) a task reduces row by row, or 1
    parallel: bool


def _merge(dims):
    """Merge neighbours (n1, s1), (n2, s2) into (n1 * n2, s2) when s1 == n2 * s2, outer first."""
    merged = []
    for n, stride in dims:
        if merged and merged[-1][1] == n * stride:
            merged[-1] = (merged[-1][0] * n, stride)
        else:
            merged.append((n, stride))
    return merged


def _spanning_view(x):
    """(1-D contiguous view over all memory x touches, offset of x's first element in it, strides
    in elements)."""
    itemsize = x.itemsize
    strides = [s // itemsize for s in x.strides]
    if x.flags.c_contiguous:  # the common case, without as_strided's cost
        return x.reshape(-1), 0, strides
    first = x[tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(x.shape, strides))]
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(x.shape, strides))
    base = sum((n - 1) * -s for n, s in zip(x.shape, strides) if s < 0)
    return as_strided(first, shape=(span,), strides=(itemsize,), writeable=False), base, strides


def make_plan(x: np.ndarray, reduced_axes: tuple[int, ...]) -> Plan:
    """``x`` is non-empty, in a carrier dtype, native byte order."""
    if any(s % x.itemsize for s in x.strides):
        # strides that are not whole elements (views into packed records): the only copy numred makes
        x = np.ascontiguousarray(x)
    src, base, strides = _spanning_view(x)
    reduced = set(reduced_axes)
    kept_dims = [(x.shape[a], strides[a]) for a in range(x.ndim) if a not in reduced and x.shape[a] != 1]
    reduced_dims = []
    for a in sorted(reduced):
        n, s = x.shape[a], strides[a]
        if n == 1:
            continue
        if s < 0:  # walk a reversed axis forwards: same elements, and it may merge or be contiguous
            base += (n - 1) * s
            s = -s
        reduced_dims.append((n, s))
    reduced_dims.sort(key=lambda d: -d[1])
    kept_dims = _merge(kept_dims) or [(1, 0)]
    reduced_dims = _merge(reduced_dims) or [(1, 0)]
    n_kept = math.prod(n for n, _ in kept_dims)
    n_reduced = math.prod(n for n, _ in reduced_dims)
    # A leading reduced axis over contiguous kept elements (RK, KRK): walking one output's reduced
    # elements would stride through memory, so a task reads whole rows of a tile of outputs instead.
    tile = 1
    if kept_dims[-1][1] == 1 and reduced_dims[-1][1] != 1:
        tile = min(kept_dims[-1][0], MAX_TILE)
    n_tiles = n_kept // kept_dims[-1][0] * -(-kept_dims[-1][0] // tile)
    nchunks = 1
    if n_tiles < FEW_TASKS:
        nchunks = max(1, min(MAX_CHUNKS, n_reduced * tile // CHUNK_MIN_ELEMENTS, n_reduced))
    return Plan(
        src=src,
        base=base,
        kept_shape=np.array([n for n, _ in kept_dims], dtype=np.int64),
        kept_strides=np.array([s for _, s in kept_dims], dtype=np.int64),
        reduced_shape=np.array([n for n, _ in reduced_dims], dtype=np.int64),
        reduced_strides=np.array([s for _, s in reduced_dims], dtype=np.int64),
        n_kept=n_kept,
        n_reduced=n_reduced,
        nchunks=nchunks,
        tile=tile,
        parallel=n_kept * n_reduced >= PARALLEL_MIN_ELEMENTS,
    )
