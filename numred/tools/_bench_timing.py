"""How ``python -m numred bench`` times: blocks of repeated calls until a time budget and a minimum
call count are reached, implementations in turns (times_in_turns), a wait for a quiet machine before
each block, the plain parallel sum that is the memory-bandwidth reference, and the run's estimate.

Every implementation is called once before timing (for numred this is where Numba compiles), then
called repeatedly, each call timed with ``time.perf_counter``, until a time budget and a minimum
call count are both reached; the caller keeps the median of the blocks' median times per call.

On the largest float32/float64 case (not in --quick) a plain Numba parallel sum over the same buffer
is timed too, as the memory-bandwidth reference the memory-bound reductions are measured against: on
its own for the table's reference row, and in turns with numred and the peers in each memory-bound
op's case, whose share of its bandwidth is taken against the sum timed in those same turns (this
machine's memory bandwidth moves by up to 2x from minute to minute).
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from typing import Callable

@dataclass(frozen=True)
class TimingPolicy:
    target: float  # stop once the timed calls add up to this many seconds ...
    min_calls: int  # ... and at least this many calls were made
    max_total: float  # slow calls: stop after this many seconds once 3 calls were made
    max_calls: int = 100_000


DEFAULT_POLICY = TimingPolicy(target=0.2, min_calls=5, max_total=1.0)
QUICK_POLICY = TimingPolicy(target=0.04, min_calls=3, max_total=0.25)


def median_time(fn: Callable[[], object], policy: TimingPolicy) -> float:
    """Median seconds per call of ``fn``, after one untimed warm-up call."""
    fn()  # warm-up: Numba compiles here, caches and allocators settle
    times: list[float] = []
    total = 0.0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while True:
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            times.append(dt)
            total += dt
            n = len(times)
            if n >= policy.max_calls:
                break
            if total >= policy.target and n >= policy.min_calls:
                break
            if total >= policy.max_total and n >= 3:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(times)


QUIET_STEP = 0.005  # seconds: wait_for_quiet's sleeps
QUIET_MAX = 0.5  # seconds: wait_for_quiet gives up after this long


def wait_for_quiet() -> float | None:
    """Sleep until no thread of this process uses the CPU (a sleep of QUIET_STEP in which the process
    used under a fifth of it), at most QUIET_MAX seconds; return the seconds waited, None on giving up.

    onnxruntime's intra-op workers (and OpenMP's) keep spinning for tens of milliseconds after a call
    returns (measured here: 15-100 ms, a core busy all that time), and slow whichever library is timed
    next: numred's 32x64x56x56 axis-1 mean took a median 1.56 ms in blocks right after an onnxruntime
    block and 0.95 ms when this wait came between them (0.97 ms after nothing).
    """
    start = time.perf_counter()
    while time.perf_counter() - start < QUIET_MAX:
        cpu = time.process_time()
        time.sleep(QUIET_STEP)
        if time.process_time() - cpu < 0.2 * QUIET_STEP:
            return time.perf_counter() - start
    return None


# A run's duration, for the estimate printed before it starts (estimated_seconds): the costs of a
# full float32 run on the 2-core machine the project is measured on, fitted to its measured time.
BLOCK_OVERHEAD = 0.05  # seconds per timed block beyond its budget: the warm-up call, waiting for quiet threads
SECONDS_PER_ELEMENT_CALL = 2e-9  # per element and untimed call (warm-ups, the result comparisons)
SECONDS_PER_ELEMENT_INPUT = 1e-8  # per element, making one case's input (random draws)


def estimated_seconds(cases, n_ops: int, n_impls: int, policy: TimingPolicy, rounds: int) -> float:
    """About how long timing ``cases`` takes for ``n_ops`` operators and ``n_impls`` implementations
    (numred and its peers), compile time left out: each block's budget plus its overhead, and the
    untimed work that grows with the data (inputs, warm-up and comparison calls)."""
    blocks = len(cases) * n_ops * n_impls * rounds
    elements = sum(case.size for case in cases)
    return (blocks * (policy.target / rounds + BLOCK_OVERHEAD)
            + elements * (SECONDS_PER_ELEMENT_INPUT + n_ops * n_impls * 2 * SECONDS_PER_ELEMENT_CALL))


ROUNDS = 3  # default --rounds: numred and its peers timed in turns, this many blocks each per case
SLOW_CALL = 0.05  # seconds per call beyond which one block is enough (see times_in_turns)


def times_in_turns(fns: dict[str, Callable[[], object]], policy: TimingPolicy, rounds: int,
                   block_done: Callable[[], object]) -> dict[str, float | Exception]:
    """Seconds per call of each of ``fns`` (name -> zero-argument callable), timed in ``rounds`` turns.

    Each round times every function in a block of its own (median_time, with a 1/rounds share of the
    policy's budget), one after the other; a function's result is the median of its blocks' medians.
    A passing load on this shared machine, which can slow a few hundred milliseconds of work by 2x,
    then moves no result by itself, where with one block per function it decided whole table rows
    (a 64x64 sum of squares measured 7.4 us instead of its usual 4.5 us in one such run).

    Blocks, not interleaved calls: onnxruntime's and OpenMP's worker threads spin for a while after a
    call, and would slow whichever call came next; each block also starts once they have stopped
    (wait_for_quiet), so that no library pays for the one timed before it. A function slower than
    SLOW_CALL per call gets one block only: its own calls span any such load, and more blocks of it
    would cost minutes. A function that raises is dropped, its exception returned in place of a time.
    ``block_done`` is called once per block, skipped ones included (the progress bar).
    """
    share = TimingPolicy(target=policy.target / rounds, min_calls=policy.min_calls,
                         max_total=policy.max_total / rounds, max_calls=policy.max_calls)
    medians: dict[str, list[float]] = {name: [] for name in fns}
    failed: dict[str, Exception] = {}
    for r in range(rounds):
        for name, fn in fns.items():
            if name not in failed and not (r and medians[name][-1] > SLOW_CALL):
                try:
                    wait_for_quiet()
                    medians[name].append(median_time(fn, share))
                except Exception as exc:  # the caller reports it
                    failed[name] = exc
            block_done()
    return {name: failed[name] if name in failed else statistics.median(medians[name]) for name in fns}


# ------------------------------------------------------------------ bandwidth reference


_plain_sum = None


def plain_parallel_sum():
    """The reference kernel: a minimal Numba parallel sum over a contiguous 1-D array.

    It reads every byte once and does nothing else, which is about as fast as this machine streams
    memory with Numba; the accumulator is float64 like numred's float sums. Compiled on first use.
    """
    global _plain_sum
    if _plain_sum is None:
        import numba

        @numba.njit(parallel=True, fastmath={"reassoc", "contract"})
        def _sum(a):
            s = 0.0
            for i in numba.prange(a.size):
                s += a[i]
            return s

        _plain_sum = _sum
    return _plain_sum
RATE_SAMPLE_SECONDS = 0.01  # each timed sample repeats the call for about this long


def interleaved_times(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds per call of each of ``fns``, timed in turns: every round times each function
    once (after an untimed call that brings its data back into the cache), so that all of them see
    the same machine load. A dtype's rate against float32 measured minutes apart, in separate runs,
    moved by up to 2x on this project's shared machine."""
    calls = {}
    for name, fn in fns.items():  # the first call compiles; the second sizes the samples
        fn()
        t0 = time.perf_counter()
        fn()
        calls[name] = max(1, min(10_000, int(RATE_SAMPLE_SECONDS / max(time.perf_counter() - t0, 1e-7))))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            t0 = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            times[name].append((time.perf_counter() - t0) / calls[name])
    return {name: statistics.median(v) for name, v in times.items()}
