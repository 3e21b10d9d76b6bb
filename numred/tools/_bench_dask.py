"""``python -m numred bench --dask``: numred against dask's own reductions on a two-worker cluster.

A ``distributed.LocalCluster`` of two worker processes with one thread each, as dask starts them
(numred's chunk step then runs its kernels on one thread per task, as dask's NumPy reductions use
one core) holds a random float32 array of 4 GiB
(``--quick``: 64 MiB) in memory. Each reduction is timed against dask's own in turns, median of
the rounds. Then each is computed once more with Python's allocation tracing on the workers
(tracemalloc, which sees NumPy's buffers): the peak above the level at the start, on the worker
with the largest. Every result is checked against an oracle computed chunkwise in extended
precision (NumPy's longdouble, rounded once to float32), and an int64 mean of sums near 2**54
against exact integer sums. Last, the same reductions on dask's threaded scheduler, dask's
default without a cluster: a 512 MiB float32 array (``--quick``: 32 MiB) in 16 chunks, in the
process, timed in turns. dask and distributed come with ``pip install "numred[dask]"``.
"""
from __future__ import annotations

import math
import statistics
import time
from fractions import Fraction

import numpy as np

# dask's own way to compute each reduction (and of log-sum-exp, from its primitives)
_DASK_WAYS = {
    "reduce_mean": lambda x, axis: x.mean(axis=axis),
    "reduce_sum": lambda x, axis: x.sum(axis=axis),
    "reduce_sum_square": lambda x, axis: (x * x).sum(axis=axis),
    "reduce_max": lambda x, axis: x.max(axis=axis),
    "reduce_log_sum_exp": lambda x, axis: _dask_log_sum_exp(x, axis),
}


def _dask_log_sum_exp(x, axis):
    top = x.max(axis=axis, keepdims=True)
    return (np.log(np.exp(x - top).sum(axis=axis, keepdims=True)) + top).squeeze(axis=axis)


def _oracle(name, x, axis):
    """The exact result rounded once to float32 (extended-precision sums per chunk: far below float32's
    rounding), as a lazy array."""
    wide = x.astype(np.longdouble)
    if name == "reduce_max":
        return x.max(axis=axis)
    if name == "reduce_log_sum_exp":
        top = wide.max(axis=axis, keepdims=True)
        return (np.log(np.exp(wide - top).sum(axis=axis, keepdims=True)) + top).squeeze(axis=axis).astype(np.float32)
    total = (wide * wide if name == "reduce_sum_square" else wide).sum(axis=axis)
    if name == "reduce_mean":
        total = total / math.prod(x.shape if axis is None else [x.shape[axis]])
    return total.astype(np.float32)


def _timed(client, lazy):
    """(seconds, result) of computing ``lazy`` on the cluster."""
    start = time.perf_counter()
    result = client.compute(lazy).result()
    return time.perf_counter() - start, np.asarray(result)


def _start_tracing():
    """On a worker: trace allocations (NumPy's included) from here on; the memory traced now."""
    import tracemalloc

    if not tracemalloc.is_tracing():
        tracemalloc.start()
    tracemalloc.reset_peak()
    return tracemalloc.get_traced_memory()[0]


def _traced_peak():
    import tracemalloc

    return tracemalloc.get_traced_memory()[1]


def _stop_tracing():
    import tracemalloc

    tracemalloc.stop()


def _peak_mib(client, lazy):
    """The largest peak of traced memory above its level at the start, over the workers, while
    computing ``lazy`` once more (untimed: tracing slows allocations down), in MiB."""
    before = client.run(_start_tracing)
    client.compute(lazy).result()
    after = client.run(_traced_peak)
    return max(after[w] - before[w] for w in before) / 2**20


def _in_turns(client, ours, theirs, rounds):
    """(numred's times, its last result, dask's times, its last result): ``rounds`` turns each."""
    ours_times, theirs_times = [], []
    for _ in range(rounds):
        seconds, got = _timed(client, ours)
        ours_times.append(seconds)
        seconds, peer = _timed(client, theirs)
        theirs_times.append(seconds)
    return ours_times, got, theirs_times, peer


def run(args, out) -> int:
    try:
        import dask
        import dask.array as da
        import distributed
    except ImportError as exc:
        print(f"--dask needs dask and distributed: pip install \"numred[dask]\" ({exc})", file=out)
        return 2
    import numred

    ways = {name: way for name, way in _DASK_WAYS.items() if not args.op or name in args.op}
    if not ways:
        print(f"--dask compares {', '.join(_DASK_WAYS)} with dask's own; --op names none of them", file=out)
        return 2
    rounds = args.rounds or (1 if args.quick else 5)
    # x 16384 float32: 64 MiB, or 4 GiB in chunks of 128 MiB (a cluster's scheduling costs about a
    # tenth of a second per reduction, which would be most of the time on less)
    rows = 1024 if args.quick else 65536
    shape, chunks = (rows, 16384), (rows // 16 if args.quick else 2048, 16384)
    workers = 2
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        x = da.random.default_rng(0).standard_normal(shape, dtype=np.float32, chunks=chunks).persist()
        distributed.wait(x)
        chunk_mib = x.nbytes / x.npartitions / 2**20
        print(f"numred {numred.__version__} on Dask arrays: dask {dask.__version__}, "
              f"distributed {distributed.__version__}, {workers} worker processes x 1 thread, float32 {shape[0]}x"
              f"{shape[1]} ({x.nbytes / 2**30:.2f} GiB, {x.npartitions} chunks of {chunk_mib:.0f} MiB), "
              f"median of {rounds} rounds in turns", file=out)
        print(f"{'operator':<20}{'axis':>6}{'numred':>10}{'dask':>10}{'ratio':>8}"
              f"{'exact (numred/dask)':>22}{'peak MiB on a worker (numred/dask)':>36}", file=out)
        worst_ratio = math.inf
        most_above = -math.inf  # numred's peak memory above dask's, MiB
        for name, dask_way in ways.items():
            for axis in (None, 1):
                ours = getattr(numred, name)(x, axes=axis, keepdims=0)
                theirs = dask_way(x, axis)
                expected = np.asarray(client.compute(_oracle(name, x, axis)).result())
                client.compute(ours).result()  # untimed: the workers load (or compile) the kernels
                ours_times, got, theirs_times, peer = _in_turns(client, ours, theirs, rounds)
                ratio = statistics.median(theirs_times) / statistics.median(ours_times)
                worst_ratio = min(worst_ratio, ratio)
                exact = (f"{int(np.sum(got != expected))}/{int(np.sum(peer.astype(np.float32) != expected))} "
                         f"of {expected.size} off")
                peaks = [_peak_mib(client, ours), _peak_mib(client, theirs)]
                client.run(_stop_tracing)
                print(f"{name:<20}{str(axis):>6}{statistics.median(ours_times) * 1e3:>8.1f}ms"
                      f"{statistics.median(theirs_times) * 1e3:>8.1f}ms{ratio:>7.2f}x{exact:>22}"
                      f"{peaks[0]:>21.1f} / {peaks[1]:<12.1f}", file=out)
                most_above = max(most_above, peaks[0] - peaks[1])
        del x
        _integer_mean(client, da, numred, out, args.quick)
        print(f"slowest ratio (dask time / numred time): {worst_ratio:.2f}x; ratio above 1: numred faster", file=out)
        print(f"peak memory: numred's at most {most_above:.1f} MiB above dask's on a worker "
              f"(a tenth of a chunk: {chunk_mib / 10:.1f} MiB)", file=out)
    _threaded(da, numred, ways, args, out)
    return 0


def _threaded(da, numred, ways, args, out):
    """The reductions on dask's threaded scheduler: each chunk's kernel launched from the task's thread,
    dask's tasks on as many threads as cores. Medians of the rounds in turns; every compute pays the
    scheduler's fixed cost, some milliseconds, as dask's own does."""
    import dask

    rounds = args.rounds or (1 if args.quick else 7)
    rows = 2048 if args.quick else 32768
    with dask.config.set(scheduler="threads"):
        x = da.random.default_rng(0).standard_normal((rows, 4096), dtype=np.float32, chunks=(rows // 16, 4096))
        x = x.persist()
        print(f"dask's threaded scheduler: float32 {rows}x4096 ({x.nbytes / 2**20:.0f} MiB, {x.npartitions} chunks), "
              f"median of {rounds} rounds in turns", file=out)
        print(f"{'':<9}{'operator':<20}{'axis':>6}{'numred':>10}{'dask':>10}{'ratio':>8}", file=out)
        for name, dask_way in ways.items():
            for axis in (None, 1):
                ours = getattr(numred, name)(x, axes=axis, keepdims=0)
                theirs = dask_way(x, axis)
                ours.compute()  # untimed: loads (or compiles) the kernels
                theirs.compute()
                ours_times, theirs_times = [], []
                for _ in range(rounds):
                    for lazy, times in ((ours, ours_times), (theirs, theirs_times)):
                        start = time.perf_counter()
                        lazy.compute()
                        times.append(time.perf_counter() - start)
                ours_time, theirs_time = statistics.median(ours_times), statistics.median(theirs_times)
                print(f"{'threaded':<9}{name:<20}{str(axis):>6}{ours_time * 1e3:>8.1f}ms{theirs_time * 1e3:>8.1f}ms"
                      f"{theirs_time / ours_time:>7.2f}x", file=out)


def _integer_mean(client, da, numred, out, quick):
    """An int64 mean whose sums (about 2**54) are beyond float64's integers: numred's is exact."""
    rows, n = (16, 1 << 14) if quick else (1024, 1 << 14)
    x = (da.random.default_rng(1).integers(0, 2**20, (rows, n), dtype=np.int64, chunks=(rows // 4, n // 4))
         + 2**40).persist()
    # exact sums: x = high * 2**20 + low, whose int64 sums cannot overflow
    high = client.compute((x >> 20).sum(axis=1)).result().tolist()
    low = client.compute((x & (2**20 - 1)).sum(axis=1)).result().tolist()
    sums = [(h << 20) + lo for h, lo in zip(high, low)]
    ours = client.compute(numred.reduce_mean(x, axes=1, keepdims=0)).result().tolist()
    theirs = client.compute(x.mean(axis=1)).result().tolist()
    # numred's integer mean is the exact mean truncated toward zero (here: floor); dask's a float64,
    # right when it is the exact mean rounded once to float64
    print(f"int64 mean of {rows} rows of {n} values near 2**40 (sums near 2**54): numred exact in "
          f"{sum(a == s // n for a, s in zip(ours, sums))}/{rows} rows, dask's float64 mean in "
          f"{sum(a == float(Fraction(s, n)) for a, s in zip(theirs, sums))}/{rows}", file=out)
