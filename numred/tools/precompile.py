"""``python -m numred precompile``: compile numred's kernels into Numba's disk cache ahead of use.

numred's kernels are compiled by Numba on their first call, per input type and kernel family, and
cached on disk; a cold first call of one operator on one dtype takes seconds, all of them several
minutes. This runs one call of every operator on every layout family the plan layer picks (serial,
parallel rows, tiles, blocks, chunked) for each dtype, in worker processes so that several cores
compile at once. Each kernel is compiled once and serves serial calls (small inputs, forked
children) and parallel launches alike; the launcher is compiled per kernel argument types. The work is sharded by dtype and, within a
dtype, by the operators that share kernels (``shards``), so that no two workers compile the same
kernel and one dtype alone keeps every core busy. Saves to the cache are serialised across
processes (``numred._runtime``), so the workers cannot corrupt it. Useful after an install (a
container image build, say) and before a test session; a warm cache makes it a few seconds of loads.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

# the command's --help text (plain text; the docstring above is for Sphinx)
DESCRIPTION = """Compile numred's kernels into Numba's disk cache now, instead of on each first call.

A first call of an operator on a dtype compiles its kernels, which takes seconds; this compiles
them all (every operator, every layout family, each dtype), one worker process per core. Run it
once after installing, or when building a container image. With a warm cache it only loads them,
in a few seconds. --op compiles the kernels of the operators
named only, in a fraction of the time."""

_EVERY_OTHER = (slice(None), slice(None, None, 2))
# (shape, axes[, view]): one call per kernel family of numred._plan and per variant of the row kernels
# (numred._compute._float_rows_variant, _int_rows_four); sizes just above or below their thresholds
LAYOUTS = (
    ((3, 2, 2), [1]),  # serial, general geometry
    ((9, 10), [1]),  # serial, one run per output
    ((9, 10), [0]),  # serial, a tile of outputs
    # parallel plans, each once below _compute.THREADED_MIN_ELEMENTS (a serial call on the calling
    # thread: where the size picks another variant) and once above it (a launch)
    ((300, 200), [1]),  # parallel rows: four at a time (float64: one split pass each)
    ((700, 200), [1]),
    ((300, 400), [1], _EVERY_OTHER),  # strided rows
    ((700, 400), [1], _EVERY_OTHER),
    ((300, 400), [0], _EVERY_OTHER),  # strided columns
    ((700, 400), [0], _EVERY_OTHER),
    ((3000, 16), [1]),  # short rows (float64: two passes each)
    ((9000, 16), [1]),
    ((3000, 32), [1], _EVERY_OTHER),  # short strided rows
    ((9000, 32), [1], _EVERY_OTHER),
    ((16, 3000), [1]),  # long rows (float64: several split pieces)
    ((48, 3000), [1]),
    ((8192, 1024), [1]),  # rows of an input beyond the cache (one row at a time on AMD Zen)
    ((301, 200), [0]),  # parallel tiles of rows read as wide rows
    ((701, 200), [0]),
    ((100, 1500), [0]),  # parallel single tiles: the lean float_tiles kernel
    ((100, 300, 4), [1]),  # parallel narrow tiles (integers: the int_tiles kernels)
    ((100, 400, 4), [1]),
    ((20, 30, 40, 10), [1, 3]),  # parallel, general geometry
    ((30, 40, 50), [0, 2]),  # parallel blocks: a kept axis between two reduced ones
    ((60, 40, 60), [0, 2]),
    ((4, 300_000), [1]),  # few outputs: chunked runs, combined afterwards
    ((300_000, 4), [0]),  # few narrow tiles: chunked tiles
    ((1_200_000,), None),  # one output: runs long enough to be summed in quarters
)


def dtype_names() -> list[str]:
    """The eight supported dtypes, then int8 and uint8 (ReduceMax and ReduceMin only)."""
    from numred._frontend import NARROW_INTS, SUPPORTED_NAMES

    return SUPPORTED_NAMES.split(", ") + [d.name for d in NARROW_INTS]


def _sample(shape, dtype):
    # small non-negative values: every integer log-sum-exp fits, no float sum overflows
    return (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)


def _dtype(name: str):
    """The dtype of one of dtype_names (bfloat16 registered with NumPy)."""
    from numred._frontend import NARROW_INTS, supported_dtypes

    return next(d for d in supported_dtypes() + list(NARROW_INTS) if str(d) == name)


def _kernel_group(op, dtype) -> int:
    """The group of ``op``'s kernels on ``dtype`` data: operators of one group share kernels, of two
    groups none (but for small helpers). The operator's term, with two merges: a log-sum-exp's max
    kernel is ReduceMax's (the KEY term), and unsigned integers are their own |x|, so their ReduceL1
    runs ReduceSum's kernels (the SUM term)."""
    from numred._reduction import ABS, EXP, KEY, SUM

    term = op.reduction.term
    if term == EXP:
        return KEY
    if term == ABS and dtype.kind == "u":
        return SUM
    return term


def shards(names: list[str], op_names: list[str] | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """The precompile tasks for dtypes ``names``: (dtype name, operator names) per group of operators
    that share kernels (_kernel_group), in registry order; only the operators of ``op_names``, if
    given (a dtype none of them supports has no task)."""
    from numred._frontend import NARROW_INTS
    from numred._registry import OPS

    tasks = []
    for name in names:
        dtype = _dtype(name)
        groups: dict[int, list[str]] = {}
        for op in OPS:
            if (op.narrow_ints or dtype not in NARROW_INTS) and (op_names is None or op.name in op_names):
                groups.setdefault(_kernel_group(op, dtype), []).append(op.name)
        tasks += [(name, tuple(ops)) for ops in groups.values()]
    return tasks


def compile_dtype(name: str, op_names: tuple[str, ...] | None = None) -> tuple[str, float]:
    """Run every operator (or those of ``op_names``) on every layout for one dtype: (name, seconds)."""
    import numred
    from numred._frontend import NARROW_INTS
    from numred._registry import OPS

    start = time.perf_counter()
    dtype = _dtype(name)
    ops = [op for op in OPS if (op.narrow_ints or dtype not in NARROW_INTS)
           and (op_names is None or op.name in op_names)]
    for shape, axes, *view in LAYOUTS:
        x = _sample(shape, dtype)
        if view:
            x = x[view[0]]
        for op in ops:
            getattr(numred, op.name)(x, axes=axes)
    _partial_states(dtype, ops)
    return name, time.perf_counter() - start


def _partial_states(dtype, ops) -> None:
    """The steps of a reduction of a Dask array (numred._partials) on a small block: the kernels
    that combine blocks' states, beyond the in-memory calls' (dask itself is not needed)."""
    from numred import _partials

    x = _sample((9, 10), dtype)
    for op in ops:
        states = _partials.chunk_states(op, x, (1,))
        if _partials.state_kind(op, dtype) == _partials.INT_EXP_SUMS:
            _partials.int_exp_candidates(dtype, states, (1,), 10)
        else:
            _partials.finish_states(op, dtype, np.concatenate([states, states], axis=1), (1,), 20, False)


def planned_tasks(dtypes: list[str] | None = None, ops: list[str] | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """The tasks of a precompile (precompile's arguments): (dtype name, operator names) per shard;
    ValueError for an unknown dtype or operator, or operators none of the dtypes takes."""
    from numred._registry import OPS

    names = dtype_names() if dtypes is None else list(dtypes)
    unknown = set(names) - set(dtype_names())
    if unknown:
        raise ValueError(f"unknown dtype(s) {sorted(unknown)}; numred supports {', '.join(dtype_names())}")
    unknown_ops = set(ops or ()) - {op.name for op in OPS}
    if unknown_ops:
        raise ValueError(f"unknown operator(s) {sorted(unknown_ops)}; numred has {', '.join(op.name for op in OPS)}")
    tasks = shards(names, ops)
    if not tasks:  # (int8 and uint8 have ReduceMax and ReduceMin only)
        raise ValueError(f"none of the operators {', '.join(ops or ())} takes the dtype(s) {', '.join(names)}")
    return tasks


def precompile(dtypes: list[str] | None = None, processes: int | None = None, report=None,
               ops: list[str] | None = None, progress=None) -> None:
    """Compile (or load) the kernels of ``dtypes`` (default: all ten, dtype_names) in ``processes`` worker
    processes (default: one per core), of the operators ``ops``
    (names, default all); ``report(name, seconds)`` per dtype, when its last shard is done, with the
    seconds of all its shards (compile time, not wall time: they may run at once);
    ``progress(done, total, label)`` once before the first shard and after each one (Progress)."""
    tasks = planned_tasks(dtypes, ops)
    if progress is not None:
        progress(0, len(tasks), "")
    names = list(dict.fromkeys(name for name, _ in tasks))
    left = {name: sum(task[0] == name for task in tasks) for name in names}
    seconds = dict.fromkeys(names, 0.0)
    workers = max(1, min(processes or os.cpu_count() or 1, len(tasks)))
    # spawn: a fresh interpreter per worker (fork after Numba's threads started is not safe)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(compile_dtype, *task) for task in tasks]
        for done, future in enumerate(as_completed(futures), 1):
            name, took = future.result()
            seconds[name] += took
            left[name] -= 1
            if progress is not None:
                progress(done, len(tasks), name)
            if left[name] == 0 and report is not None:
                report(name, seconds[name])


class Progress:
    """What a precompile has done, shown as it goes: tqdm's bar (count, elapsed time, estimate) where
    tqdm is installed and ``stream`` is a terminal; otherwise one plain line per group of kernels
    (``write``, default: print to ``stream``), as a log keeps them."""

    def __init__(self, stream=None, write=None):
        stream = sys.stderr if stream is None else stream
        self.stream, self.write, self.bar, self.start = stream, write, None, time.perf_counter()
        if write is None and stream.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self.bar = tqdm(total=0, desc="numred precompile", unit=" kernel groups", file=stream)

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.bar is not None:
            self.bar.total = total
            self.bar.update(done - self.bar.n)
            if done == total:
                self.bar.close()
            return
        elapsed = time.perf_counter() - self.start
        line = f"numred precompile: {done}/{total} kernel groups, {elapsed:.0f} s"
        if done == 0:
            line += " (compiling every kernel into Numba's disk cache: minutes once, seconds after)"
        elif done < total:
            line += f", about {elapsed / done * (total - done):.0f} s left"
        (self.write or (lambda text: print(text, file=self.stream, flush=True)))(line)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numred._registry import OPS

    parser.add_argument("--dtype", action="append", choices=dtype_names(), metavar="DTYPE",
                        help=f"compile for this dtype only (repeatable; default all: {', '.join(dtype_names())})")
    parser.add_argument("--op", action="append", choices=[op.name for op in OPS], metavar="OP",
                        help=f"compile this operator's kernels only (repeatable; one of {', '.join(op.name for op in OPS)})")
    parser.add_argument("--processes", type=int, default=None,
                        help="worker processes (default: one per core)")


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    try:
        planned_tasks(args.dtype, args.op)
    except ValueError as error:  # (an argument error, before any work)
        print(f"numred precompile: {error}", file=sys.stderr)
        return 2
    precompile(args.dtype, args.processes, report=lambda name, s: print(f"{name:9s} {s:6.1f} s", flush=True),
               ops=args.op, progress=Progress())
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0
