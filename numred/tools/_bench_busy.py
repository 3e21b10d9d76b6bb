"""``python -m numred bench --busy``: numred on a machine whose cores are busy, and called from threads.

Two tables, float32 ReduceMean throughout:

- **Contended.** One busy-loop process per core (``python -c "while True: pass"``) runs for the whole
  table. numred with its default threads, numred on one thread (``numba.set_num_threads(1)`` in the
  calling thread) and NumPy are timed in turns (``times_in_turns``), median per call. A launch that
  waited for every one of its threads would wait for the OS to schedule a thread that the busy
  processes hold; numred's calling thread works on the tasks itself (docs/architecture.md).
- **Threads.** Calls per second over a fixed time: from the main thread, from one worker thread, and
  from two threads at once (numred, then NumPy), in turns, the median of ``--rounds`` turns. Inputs
  of a few thousand elements run on the calling thread; inputs of 1-16 MB use every core in one call.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

from numred.tools._bench_output import format_ratio, format_time, write_json
from numred.tools._bench_timing import DEFAULT_POLICY, QUICK_POLICY, times_in_turns

# (shape, axes): the busy machine's cases, and the threads' (serial sizes, then parallel sizes)
CONTENDED_CASES = (((1000, 1000), (0,)), ((1000, 1000), (1,)), ((250, 4096), (1,)), ((32, 64, 56, 56), (2, 3)),
                   ((4096, 4096), (0,)))
THREAD_CASES = (((8, 2000), (1,)), ((30, 1000), (1,)), ((512, 512), (1,)), ((2048, 2048), (1,)))
THREAD_SECONDS = 0.3  # each measurement of calls per second


@contextlib.contextmanager
def busy_cores(n: int):
    """``n`` processes that each keep a core busy until the block ends."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # (scheduled and spinning)
        yield
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()


def _one_thread(fn):
    """fn, run with Numba at one thread in the calling thread."""
    import numba

    def call():
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return fn()
        finally:
            numba.set_num_threads(threads)
    return call


def _input(shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def contended_rows(quick: bool, rounds: int) -> list[dict]:
    """Per case: numred's default, numred on one thread and NumPy, seconds per call with every core busy."""
    import numred

    rows = []
    with busy_cores(os.cpu_count() or 2):
        for shape, axes in CONTENDED_CASES:
            x = _input(shape)
            fns = {"numred": lambda: numred.reduce_mean(x, list(axes)),
                   "numred, one thread": _one_thread(lambda: numred.reduce_mean(x, list(axes))),
                   "numpy": lambda: np.mean(x, axis=axes, keepdims=True)}
            times = times_in_turns(fns, QUICK_POLICY if quick else DEFAULT_POLICY, rounds, lambda: None)
            rows.append({"case": _label(shape, axes), **times})
    return rows


def calls_per_second(fn, threads: int, in_main: bool = False) -> float:
    """Calls of ``fn`` per second, all threads together, over THREAD_SECONDS: in the main thread
    (``in_main``), or in ``threads`` worker threads started together."""
    counts = [0] * threads
    start_line = threading.Barrier(threads + (0 if in_main else 1))

    def loop(slot):
        if not in_main:
            start_line.wait()
        end = time.perf_counter() + THREAD_SECONDS
        n = 0
        while time.perf_counter() < end:
            fn()
            n += 1
        counts[slot] = n

    fn()  # (compiled, warm)
    if in_main:
        loop(0)
    else:
        workers = [threading.Thread(target=loop, args=(slot,)) for slot in range(threads)]
        for worker in workers:
            worker.start()
        start_line.wait()
        for worker in workers:
            worker.join()
    return sum(counts) / THREAD_SECONDS


def thread_rows(rounds: int) -> list[dict]:
    """Per case: calls per second from the main thread, one worker thread, two threads (numred), and
    two threads calling NumPy; the median of ``rounds`` turns."""
    import numred

    rows = []
    for shape, axes in THREAD_CASES:
        x = _input(shape)
        ours = lambda: numred.reduce_mean(x, list(axes))  # noqa: E731
        numpy = lambda: np.mean(x, axis=axes, keepdims=True)  # noqa: E731
        ways = {"main thread": lambda: calls_per_second(ours, 1, in_main=True),
                "worker thread": lambda: calls_per_second(ours, 1),
                "two threads": lambda: calls_per_second(ours, 2),
                "numpy, two threads": lambda: calls_per_second(numpy, 2)}
        turns = {name: [] for name in ways}
        for _ in range(rounds):
            for name, way in ways.items():
                turns[name].append(way())
        rows.append({"case": _label(shape, axes), "bytes": x.nbytes,
                     **{name: statistics.median(rates) for name, rates in turns.items()}})
    return rows


def _label(shape, axes) -> str:
    return f"{'x'.join(map(str, shape))} over {list(axes)}"


def run(args, out, versions: list[str], threads: int) -> int:
    rounds = getattr(args, "rounds", None) or (3 if args.quick else 5)
    print(" | ".join([*versions, f"threads {threads}", "busy", f"{rounds} rounds"]), file=out)
    print(f"\nfloat32 ReduceMean, every core kept busy by another process ({os.cpu_count()} busy loops):", file=out)
    print(f"{'case':<28}{'numred':>12}{'one thread':>12}{'numpy':>12}{'numred / one thread':>22}"
          f"{'numpy / numred':>16}", file=out)
    contended = contended_rows(args.quick, rounds)
    status = 0
    for row in contended:
        ours, one, numpy = row["numred"], row["numred, one thread"], row["numpy"]
        if any(isinstance(t, Exception) for t in (ours, one, numpy)):
            print(f"{row['case']:<28} ERROR {ours!r} {one!r} {numpy!r}", file=out)
            status = 1
            continue
        print(f"{row['case']:<28}{format_time(ours):>12}{format_time(one):>12}{format_time(numpy):>12}"
              f"{format_ratio(ours / one):>22}{format_ratio(numpy / ours):>16}", file=out)
    print("\nfloat32 ReduceMean from Python threads, calls per second (quiet machine):", file=out)
    print(f"{'case':<28}{'main':>10}{'worker':>10}{'two':>10}{'numpy two':>11}{'worker / main':>15}"
          f"{'two / one':>11}", file=out)
    threaded = thread_rows(rounds)
    for row in threaded:
        print(f"{row['case']:<28}{row['main thread']:>10.0f}{row['worker thread']:>10.0f}{row['two threads']:>10.0f}"
              f"{row['numpy, two threads']:>11.0f}{format_ratio(row['worker thread'] / row['main thread']):>15}"
              f"{format_ratio(row['two threads'] / row['worker thread']):>11}", file=out)
    if args.json:
        report = {"meta": {"versions": versions, "threads": threads, "rounds": rounds, "busy": True},
                  "contended": [{k: (repr(v) if isinstance(v, Exception) else v) for k, v in row.items()}
                                for row in contended],
                  "threads": threaded}
        if not write_json(args.json, report, out):
            status = 2
    return status
