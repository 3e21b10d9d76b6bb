"""numred on Dask arrays: every public function takes a ``dask.array.Array`` and returns a lazy one.

The reduction is ``dask.array.reduction`` with numred's partial states (numred._partials) as its
steps: the chunk step runs numred's kernels on the block as it is (no copy) and returns each
output's state, the combine step merges states with the engine's combine rules, and the aggregate
step finishes them and rounds once. The checks that the shapes decide run when the function is
called, through the front end's own code; those that depend on values raise when the result is
computed. dask is imported only when a Dask array is passed (``is_dask_array``).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import sys

import numpy as np

from . import _partials
from ._frontend import as_flag, as_supported_array, reduced_axes, reduce as reduce_in_memory
from ._registry import OPS_BY_NAME, Op
from ._runtime import get_num_threads


def is_dask_array(data) -> bool:
    """Whether ``data`` is a dask.array.Array (False, without importing dask, where it is not loaded)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(data, module.Array)


def reduce_any(op: Op, data, axes, keepdims, noop_with_empty_axes):
    """``op`` of ``data``: a Dask array lazily (``reduce``), anything else in memory
    (numred._frontend.reduce). The public functions call this."""
    if type(data) is not np.ndarray and is_dask_array(data):
        return reduce(op, data, axes, keepdims, noop_with_empty_axes)
    return reduce_in_memory(op, data, axes, keepdims, noop_with_empty_axes)


def reduce(op: Op, data, axes, keepdims, noop_with_empty_axes):
    """``op`` of the Dask array ``data``, lazily: the rules of numred._frontend.reduce."""
    dtype = as_supported_array(np.empty(0, dtype=data.dtype), op.narrow_ints).dtype  # its TypeError
    if dtype != data.dtype:  # byte-swapped: native order, block by block
        data = data.astype(dtype)
    keepdims = as_flag(keepdims, "keepdims")
    noop = as_flag(noop_with_empty_axes, "noop_with_empty_axes")
    axes = reduced_axes(axes, data.ndim)
    if not axes and noop:
        return data.map_blocks(op.noop, dtype=dtype)
    if data.ndim == 0:  # one block, one element
        return data.map_blocks(functools.partial(_reduce_block, op.name, keepdims), dtype=dtype)
    axes = axes or tuple(range(data.ndim))
    for a in axes:
        if math.isnan(data.shape[a]):
            raise ValueError(f"{op.onnx_name}: axis {a} of the Dask array has unknown chunk sizes, and it is "
                             "reduced; call data.compute_chunk_sizes() first")
    if 0 in (data.shape[a] for a in range(data.ndim) if a not in axes):
        return _empty_result(data, axes, keepdims, dtype)
    n_reduced = math.prod(data.shape[a] for a in axes)
    if n_reduced == 0:
        op.empty_result(dtype, ())  # raises the contract's ValueError where the result is undefined
    name = op.name
    meta = np.empty((0,) * (data.ndim if keepdims else data.ndim - len(axes)), dtype=dtype)
    if all(data.numblocks[a] == 1 for a in axes):
        # every output's elements lie in one block: its results are the block's in-memory ones,
        # with no partial states to keep and finish (still as a dask.array.reduction: dask runs a
        # map_blocks of the same function markedly slower, docs/changes.md)
        return _reduction(name, data, functools.partial(_block_results, name), _kept_results, None, axes,
                          keepdims, meta, None)
    chunk = functools.partial(_chunk_states, name)
    combine = functools.partial(_combine_states, name, dtype)
    split_every = _split_every(op, data, axes)
    if _partials.state_kind(op, dtype) != _partials.INT_EXP_SUMS:
        return _reduction(name, data, chunk, functools.partial(_finish_states, name, dtype, n_reduced), combine,
                          axes, keepdims, meta, split_every)
    # integer log-sum-exp: float64 decides nearly every output; the others are decided exactly from
    # the distances of their elements to the max, read in a second pass over the data (their states,
    # counts of distances, can be large: dask's own split_every)
    candidates_meta = np.empty((0,) * data.ndim, dtype=_partials.candidate_dtype(dtype))
    candidates = _reduction(name, data, chunk, functools.partial(_int_exp_candidates, dtype, n_reduced), combine,
                            axes, True, candidates_meta, split_every)
    return _reduction(f"{name}-exactly", data, _exp_distances, functools.partial(_decide_int_exp, dtype, n_reduced),
                      _merge_distances, axes, keepdims, meta, None, weights=candidates)


# The combine steps' tree. dask's default merges four blocks' results per task (split_every); numred's
# states are a few numbers per output, so where they are small next to a block one task merges more
# of them, and the tree has fewer rounds of tasks (each round waits for the one before), which makes
# the reduction faster than dask's own. At most _MOST_STATES per task, their bytes (and the copy that
# concatenates them) within a tenth of a block's, the margin allowed over dask's own reduction.
_MOST_STATES = 64
_PYTHON_INT_BYTES = 40  # an exact sum's Python int, besides its pointer in the object array


def _split_every(op: Op, data, axes):
    """split_every for dask.array.reduction of ``op``: None (dask's configuration) where the user
    configured one or no reduced axis is cut into blocks, else a count per reduced axis cut."""
    import dask

    cut = [a for a in axes if data.numblocks[a] > 1]
    if dask.config.get("split_every", None) is not None or not cut:
        return None
    exact = _partials.state_kind(op, data.dtype) == _partials.EXACT_SUMS
    state_bytes = _partials.state_dtype(op, data.dtype).itemsize + _PYTHON_INT_BYTES * exact
    block = [max(sizes) for sizes in data.chunks]
    outputs = math.prod(n for a, n in enumerate(block) if a not in axes)
    budget = math.prod(block) * data.dtype.itemsize // 10  # bytes
    states = max(4, min(_MOST_STATES, budget // (2 * state_bytes * outputs)))
    return dict.fromkeys(cut, max(2, int(states ** (1 / len(cut)) + 1e-9)))


def _empty_result(data, axes, keepdims, dtype):
    """The result of a reduction whose kept set is empty: an empty array, the kept axes chunked as in
    ``data``. Nothing is computed and nothing raises, whatever the operator and the reduced set, as
    in memory (SEMANTICS: "empty kept set"); through dask.array.reduction an integer mean over two
    empty axes raised when computed."""
    import dask.array as da

    chunks = tuple((1,) if a in axes else data.chunks[a] for a in range(data.ndim) if keepdims or a not in axes)
    return da.empty(tuple(sum(c) for c in chunks), dtype=dtype, chunks=chunks)


def _reduction(name, data, chunk, aggregate, combine, axes, keepdims, meta, split_every, weights=None):
    """dask.array.reduction with numred's steps; ``meta``: an empty array of the result's dtype and
    rank (the states in between are the steps' own business)."""
    import dask.array as da

    return da.reduction(data, chunk, aggregate, combine=combine, axis=axes, keepdims=bool(keepdims),
                        dtype=meta.dtype, meta=meta, weights=weights, split_every=split_every, concatenate=True,
                        name=f"numred-{name}")


def _worker_threads():
    """The cores dask gives this process when it is a ``distributed`` worker: its thread count times
    OMP_NUM_THREADS, the threads a task's libraries may use (the nanny sets it to 1); None elsewhere."""
    module = sys.modules.get("distributed")
    if module is None:
        return None
    try:
        worker = module.get_worker()
    except ValueError:  # not in a worker's task
        return None
    try:
        per_task = max(1, int(os.environ.get("OMP_NUM_THREADS") or 1))
    except ValueError:
        per_task = 1
    return worker.state.nthreads * per_task


@contextlib.contextmanager
def _task_threads():
    """Numba's threads for the kernels of one task, in this thread: in a ``distributed`` worker, no
    more than the cores dask gives it (_worker_threads). dask starts as many workers as fill the
    cores, and a library that uses every core in each worker's task oversubscribes them: each
    kernel's threads compete for the cores with the other workers', and the reduction runs slower
    than dask's own. Outside a worker (dask's threaded or synchronous scheduler) each kernel keeps
    all of Numba's threads: the kernels release the GIL, and under TBB the launches of dask's
    threads share one pool of as many threads as cores, whose calling threads work on their own
    tasks (docs/architecture.md, "Execution model")."""
    import numba

    wanted = _worker_threads()
    threads = get_num_threads() if wanted is not None else 0
    if wanted is None or wanted >= threads:
        yield
        return
    numba.set_num_threads(wanted)  # (Numba's thread count is per calling thread)
    try:
        yield
    finally:
        numba.set_num_threads(threads)


def _reduce_block(name, keepdims, block, axis=None):
    with _task_threads():
        return reduce_in_memory(OPS_BY_NAME[name], block, axis, keepdims, 0)


def _block_results(name, x, axis, keepdims, computing_meta=False):
    """The chunk step where every output lies in one block: its results, kept axes kept."""
    if computing_meta:
        return np.empty((0,) * x.ndim, dtype=x.dtype)
    return _reduce_block(name, 1, x, axis)


def _kept_results(results, axis, keepdims):
    """The aggregate step of _block_results: the reduced axes dropped unless kept."""
    return results if keepdims else results.reshape([n for a, n in enumerate(results.shape) if a not in axis])


# The steps, module-level functions of picklable arguments (distributed sends them to its workers); no
# argument is called dtype, which dask.array.reduction would fill in itself. The chunk step runs its
# kernels under _task_threads; the others merge small states, serially.

def _chunk_states(name, x, axis, keepdims, computing_meta=False):
    if computing_meta:  # (dask asks for a sample result on empty arrays; the states' own meta is given)
        return np.empty((0,) * x.ndim)
    with _task_threads():
        return _partials.chunk_states(OPS_BY_NAME[name], x, axis)


def _combine_states(name, input_dtype, states, axis, keepdims):
    return _partials.combine_states(OPS_BY_NAME[name], input_dtype, states, axis)


def _finish_states(name, input_dtype, n_reduced, states, axis, keepdims):
    return _partials.finish_states(OPS_BY_NAME[name], input_dtype, states, axis, n_reduced, keepdims)


def _int_exp_candidates(input_dtype, n_reduced, states, axis, keepdims):
    return _partials.int_exp_candidates(input_dtype, states, axis, n_reduced)


def _distances_dtype(dtype):
    return np.dtype(_partials.candidate_dtype(dtype).descr + [("distances", object)])


def _exp_distances(x, candidates, axis, keepdims, computing_meta=False):
    if computing_meta:
        return np.empty((0,) * x.ndim)
    # candidates: broadcast along the reduced axes; one value per output
    ours = candidates[tuple(slice(0, 1) if a in axis else slice(None) for a in range(x.ndim))]
    states = np.empty(ours.shape, dtype=_distances_dtype(x.dtype))
    for field in ours.dtype.names:
        states[field] = ours[field]
    states["distances"] = _partials.exp_distances(x, ours, axis)
    return states


def _merge_distances(states, axis, keepdims):
    first = states[tuple(slice(0, 1) if a in axis else slice(None) for a in range(states.ndim))]
    merged = first.copy()
    merged["distances"] = _partials.merge_distances(states["distances"], axis)
    return merged


def _decide_int_exp(input_dtype, n_reduced, states, axis, keepdims):
    merged = _merge_distances(states, axis, keepdims)
    candidates = merged[list(_partials.candidate_dtype(input_dtype).names)]
    result = _partials.decide_int_exp(input_dtype, candidates, merged["distances"], n_reduced)
    return result if keepdims else result.reshape([n for a, n in enumerate(result.shape) if a not in axis])
