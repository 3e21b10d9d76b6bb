"""How runs are read, tuned per CPU: several memory streams at once, long runs in quarters, rows one
after another or four together, every other element over its whole span, strided runs in lanes.
"""
from __future__ import annotations

from numba import njit

# Memory-bound sums read several places at once: on an Intel Xeon, one stream per thread left 15-25%
# of the read bandwidth unused (4096x4096 float32 rows: 3.0 ms one row at a time, 2.2-2.6 ms four rows
# at a time; a 4x4194304 run: 3.2 ms as one stream, 2.7 ms as four quarters). Runs shorter than four
# times this are not cut into quarters.
STREAMS_MIN_RUN = 1 << 14


def _amd_zen_generation() -> int:
    """The AMD Zen generation Numba compiles for (LLVM's CPU names znver1..5), 0 for other CPUs: the
    host's, unless NUMBA_CPU_NAME names another (the disk cache is keyed by that CPU name too)."""
    from numba.core import config
    from llvmlite import binding
    generation = (config.CPU_NAME or binding.get_host_cpu_name()).removeprefix("znver")
    return int(generation) if generation.isdigit() else 0


# On AMD Zen 5 the opposite held for long rows out of the cache: rows read one after another (one
# stream per thread) took 0.80-0.97x the time of four rows read together on float32 4096x4096,
# 32x64x56x56 axes [2,3] and 8192x16384 rows, and 0.65-0.91x on float16 and bfloat16 (in-process
# A/B). In the cache, and for short rows, four together stayed faster for float16 and bfloat16
# (1000x1000: 0.87-0.9x, 20000x100: 0.6-0.7x), whose conversions to float64 bound them there, but
# not for float32 (kernels alone, one row at a time: 1000x1000 0.88x the time, 20000x100 0.89x,
# 300x300 0.95x, 100000x16 0.98x), nor for 32-bit integers in rows of 500 or more (means: 10000x700
# 0.71x, 1000x1000 0.93x, but 300x300 1.14x; sums of squares: 1000x1000 0.85x, 100000x16 1.13x).
# On AMD Zen 4 long rows out of the cache gained as well (float32 4096x4096 means 0.81x, 32x64x56x56
# axes [2,3] 0.67x; float16 0.70x and 1.0x), but in the cache four rows together stayed faster for
# float32 too (one row at a time: 1000x1000, 2000x1000, 6000x300 and 20000x100 means and sums of
# squares 1.03-1.09x the time) and for 32-bit integer means (1000x1000 1.08x, 2000x1000 1.13x).
ZEN_GENERATION = _amd_zen_generation()
ONE_STREAM_ROWS = ZEN_GENERATION > 0
# The same held for long runs cut into quarters (STREAMS_MIN_RUN) on AMD Zen 4: read as one stream
# each, whole arrays (4096x4096, 8192x16384) and 4x4194304 rows took 0.89-0.99x the time in float32,
# 0.85-0.96x in float16 and bfloat16, 0.84-1.00x in 32-bit integers and 0.91-1.01x in int64 (means
# and sums of squares, in-process A/B, interleaved; an earlier A/B of float32 alone: 0.97-1.04x).
QUARTER_LONG_RUNS = not ONE_STREAM_ROWS
# Rows of inputs of any size (min_row of _rows_together): on Zen 4 only long ones (above), the cache
# favouring four rows together; on Zen 5 all float32 rows and 32-bit integer rows of 512 or more.
ONE_STREAM_LONG_ROWS_ONLY = 1 << 62  # other dtypes (64-bit integer sums of squares: 1000x1000 1.05x)
ONE_STREAM_MIN_FLOAT32_ROW = 0 if ZEN_GENERATION >= 5 else ONE_STREAM_LONG_ROWS_ONLY
ONE_STREAM_MIN_INT32_ROW = 512 if ZEN_GENERATION >= 5 else ONE_STREAM_LONG_ROWS_ONLY
# Rows of inputs of ONE_STREAM_MIN_BYTES or more (min_large_row): on AMD Zen 4, short rows beyond
# the cache as well. Rows of 16-1000 elements in 20 and 64 MiB inputs, one row at a time against
# four together (in-process A/B, interleaved, means and sums of squares): float32 0.40-0.94x the
# time from rows of 16; float16, bfloat16, int32 and uint32 0.34-1.03x from rows of 256 (but once
# 1.11x, bfloat16 sums of squares in rows of 256), where shorter rows took up to 1.6x (16-bit
# floats, rows of 16-100) and 3.2x (32-bit integers, rows of 16-64); 64-bit integer sums of squares
# 0.39-0.82x from rows of 64, 1.0-1.7x in rows of 16-32. (The rule used to start at rows of 1024.)
ONE_STREAM_MIN_BYTES = 16 << 20
ONE_STREAM_MIN_LARGE_ROW = 256
ONE_STREAM_MIN_LARGE_FLOAT32_ROW = 16
ONE_STREAM_MIN_LARGE_INT64_ROW = 64


def _rows_together(itemsize, n_kept, n_reduced, min_row, min_large_row):
    """How many contiguous rows the row kernels read together: 4 (four memory streams per thread),
    or 1 (whole rows one after another) where ONE_STREAM_ROWS says so: rows of ``min_row`` elements
    or more, and rows of ``min_large_row`` or more of inputs beyond the cache. Decided in Python,
    with the row kernel's variant (float_rows_variant, int_rows_four)."""
    if ONE_STREAM_ROWS and (n_reduced >= min_row or n_reduced >= min_large_row
                            and n_kept * n_reduced * itemsize >= ONE_STREAM_MIN_BYTES):
        return 1
    return 4


STRIDED_LANES = 8
STRIDED_LANES_MIN_RUN = 64
EVERY_OTHER_MIN_RUN = 16  # (rows of 16: 0.64-0.85x the time; shorter ones were not measured)


@njit(fastmath=False)
def every_other_span(src, offset, n):
    """How many elements from src[offset] on to read for every other element of n: 2n where src has
    them (the element after the last one is read and dropped, so that the span is a whole number of
    vector iterations for n a multiple of 16: every other element of 100000x64 rows took 0.69-0.80x
    the time of spans of 2n - 1, whose last 31 elements took a scalar loop; float32, float64,
    bfloat16, int32 and int64 means), else 2n - 1."""
    return min(2 * n, src.size - offset)
