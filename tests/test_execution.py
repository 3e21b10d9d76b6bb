"""The execution model (docs/architecture.md, "Execution model"): parallel kernels release the GIL, threads
never wait for one another's launches, and float results have the same bits for any thread count and
for serial and parallel launches.

None of these tests times a speed. The two thread tests observe an order of events that holding the
GIL makes impossible: another thread writing into an input while a kernel still reads it, and a short
call finishing while a long one computes. Each tries up to three times (the OS may not schedule the
other thread in time on a loaded machine); with the GIL held no try can pass.
"""
from __future__ import annotations

import platform
import sys
import threading
import time

import numpy as np
import pytest

import numred
from numred.kernels import rows, table
from test_runtime import run_python
from threads import needs_two_threads, with_threads


def test_parallel_variants_release_the_gil_and_serial_ones_keep_it():
    # (a small input's kernel takes about as long as handing the GIL to another thread and back)
    pairs = list(table.KERNELS.values()) + [rows.float_rows(mode, rows.ROWS_GENERAL) for mode in (0, 1)]
    assert pairs
    for serial, parallel in pairs:
        assert parallel.targetoptions.get("nogil") is True, parallel.py_func.__qualname__
        assert not serial.targetoptions.get("nogil"), serial.py_func.__qualname__


def test_another_thread_runs_while_a_kernel_computes():
    # One thread reads 256 MiB row after row (tens of milliseconds, one thread); another writes the
    # last row's last element a millisecond after the call starts. Had the kernel held the GIL, the
    # writer could only run after it returned, and the max of the last row would be the 0 it read.
    x = np.zeros((4096, 16384), dtype=np.float32)
    numred.reduce_max(x[:64], [1])  # (compiled or loaded before the tries)
    for _ in range(3):
        x[-1, -1] = 0.0
        calling = threading.Event()

        def write_late():
            calling.wait()
            time.sleep(0.001)
            x[-1, -1] = 1.0

        writer = threading.Thread(target=write_late)
        writer.start()

        def call():
            calling.set()
            return numred.reduce_max(x, [1], keepdims=0)

        result = with_threads(1, call)
        writer.join()
        if result[-1] == 1.0:
            return
        assert result[-1] == 0.0
    pytest.fail("the other thread never ran while the kernel read the input")


def test_a_short_call_does_not_wait_for_a_long_one_in_another_thread():
    # A parallel-size call in one thread finishes while another thread's call on 256 MiB still
    # computes: no process-wide launch lock, no GIL held by the kernels.
    big = np.ones((4096, 16384), dtype=np.float32)
    small = np.ones((1000, 1000), dtype=np.float32)
    numred.reduce_sum_square(big[:64], [1]), numred.reduce_mean(small, [1])
    for _ in range(3):
        order = []
        calling = threading.Event()

        def short_call():
            calling.wait()
            time.sleep(0.001)
            result = numred.reduce_mean(small, [1])
            order.append("short")
            assert np.all(result == 1.0)

        other = threading.Thread(target=short_call)
        other.start()
        calling.set()
        assert np.all(numred.reduce_sum_square(big, [1]) == 16384.0)
        order.append("long")
        other.join()
        if order == ["short", "long"]:
            return
    pytest.fail(f"the short call waited for the long one: {order}")


# Every float dtype and operator on layouts whose plans differ with the thread count where the plan
# may let them (chunked runs and tiles, tiles cut per thread, blocks grouped per thread): float64
# ReduceProd over all axes of 1500x1700 and of 3,000,000 elements differed between thread counts.
BITS_SCRIPT = """
import hashlib, numba, numpy as np, ml_dtypes, numred
from numred import _runtime
from numred._registry import OPS
rng = np.random.default_rng(61)
CASES = [((1500, 1700), None), ((3_000_000,), None), ((1000, 1000), [0]), ((1000, 1000), [1]),
         ((4, 20000, 60), [1]), ((16, 100000), [0]), ((4, 300000), [1]), ((300000, 4), [0]),
         ((16, 32, 56, 56), [2, 3]), ((30, 40, 50), [0, 2]), ((100, 300, 4), [1]), ((2000, 3), [1])]
inputs = []
for dtype in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
    for shape, axes in CASES:
        values = rng.standard_normal(shape) * 0.5 + 1.0
        values[..., ::7] *= 10.0 ** rng.integers(-3, 4, size=values[..., ::7].shape)
        inputs.append((values.astype(dtype), axes))
    for shape in ((1500, 1700), (3_000_000,)):  # products near 1, far from overflow and underflow
        logs = rng.uniform(-1.0, 1.0, size=shape)
        values = np.exp(logs - logs.mean()) * np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        inputs.append((values.astype(dtype), None))
def digest():
    h = hashlib.sha256()
    for x, axes in inputs:
        for op in OPS:
            data = np.abs(x) if op.name == "reduce_log_sum" else x
            for view in (data, np.asfortranarray(data)):
                h.update(getattr(numred, op.name)(view, axes).tobytes())
    return h.hexdigest()
parallel = digest()
if numba.config.NUMBA_NUM_THREADS == 2:  # (once is enough: the serial variants run on one thread)
    _runtime._parallel_allowed = False
    assert digest() == parallel, "a serial launch gave other bits than a parallel one"
print(parallel)
"""


@pytest.mark.slow
def test_float_bits_do_not_depend_on_the_thread_count():
    digests = {threads: run_python(BITS_SCRIPT, env={"NUMBA_NUM_THREADS": str(threads)}).split()[-1]
               for threads in (1, 2, 3, 4, 8)}
    assert len(set(digests.values())) == 1, digests


@needs_two_threads
def test_float64_product_over_all_axes_does_not_depend_on_the_thread_count():
    # the in-process form of the case above, for one and two threads: chunked products round
    # differently from one task's, so float64 plans are chunked by the shape alone
    rng = np.random.default_rng(0)
    for shape in ((1500, 1700), (3_000_000,)):
        logs = rng.uniform(-1.0, 1.0, size=shape)
        logs -= logs.mean()  # a product near 1, far from overflow and underflow
        x = np.exp(logs) * np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        one = with_threads(1, numred.reduce_prod, x)
        two = with_threads(2, numred.reduce_prod, x)
        assert one.tobytes() == two.tobytes(), (shape, one.item(), two.item())


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() != "x86_64",
                    reason="the tbb wheel, a dependency on Linux x86_64 only")
def test_parallel_kernels_run_on_tbb_by_default():
    # pip's libtbb is not on the loader's path; numred loads it so that Numba's default picks TBB
    out = run_python("import numpy as np, numba, numred\n"
                     "numred.reduce_mean(np.ones((1000, 1000), np.float32), [1])\n"
                     "print(numred._runtime.TBB_LIBRARY is not None, numba.threading_layer())",
                     env={"NUMBA_THREADING_LAYER": "default"})
    assert out.split() == ["True", "tbb"]
