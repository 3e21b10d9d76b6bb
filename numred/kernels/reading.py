"""How runs are read, tuned per CPU: several memory streams at once, long runs in quarters, rows one
after another or four together, every other element over its whole span, strided runs in lanes.
"""
from __future__ import annotations


from .jit import subroutine
from .base import smaller

# Memory-bound sums read several places at once: on CPUs other than AMD Zen (Intel, for one), a
# single memory stream per thread leaves part of the read bandwidth unused, so rows are read four at
# a time and long runs in four quarters. Runs shorter than four times this are not cut into quarters.
STREAMS_MIN_RUN = 1 << 14


def _amd_zen_generation() -> int:
    """The AMD Zen generation Numba compiles for (LLVM's CPU names znver1..5), 0 for other CPUs: the
    host's, unless NUMBA_CPU_NAME names another (the disk cache is keyed by that CPU name too)."""
    from numba.core import config
    from llvmlite import binding
    generation = (config.CPU_NAME or binding.get_host_cpu_name()).removeprefix("znver")
    return int(generation) if generation.isdigit() else 0


# On AMD Zen the opposite holds for long rows beyond the cache: rows read one after another (one
# stream per thread) do better than four rows read together. In the cache, and for short rows, it
# depends on the generation and the type. On Zen 5 one row at a time pays for float32 rows of any
# length and for 32-bit integer rows of 512 elements or more, but four rows together stay better
# for float16 and bfloat16 (bound there by their conversions to float64) and for shorter integer
# rows. On Zen 4 four rows together stay better in the cache for every type.
ZEN_GENERATION = _amd_zen_generation()
ONE_STREAM_ROWS = ZEN_GENERATION > 0
# The same holds for long runs on AMD Zen: one stream per run does at least as well as four quarters
# (STREAMS_MIN_RUN), for float and integer types alike, so long runs are cut into quarters only
# elsewhere.
QUARTER_LONG_RUNS = not ONE_STREAM_ROWS
# Rows of inputs of any size (min_row of numred._compute._rows_together): on Zen 4 only long ones
# (above), the cache favouring four rows together; on Zen 5 all float32 rows and 32-bit integer rows
# of 512 or more.
ONE_STREAM_LONG_ROWS_ONLY = 1 << 62  # other dtypes: in the cache, four rows together stay better
ONE_STREAM_MIN_FLOAT32_ROW = 0 if ZEN_GENERATION >= 5 else ONE_STREAM_LONG_ROWS_ONLY
ONE_STREAM_MIN_INT32_ROW = 512 if ZEN_GENERATION >= 5 else ONE_STREAM_LONG_ROWS_ONLY
# Rows of inputs of ONE_STREAM_MIN_BYTES or more (min_large_row), where ONE_STREAM_ROWS holds:
# short rows beyond the cache are read one after another as well, from a length per type below
# which four rows together still do better: float32 from rows of 16 elements, 64-bit integers from
# 64, the others (16-bit floats, 32-bit integers) from 256.
ONE_STREAM_MIN_BYTES = 16 << 20
ONE_STREAM_MIN_LARGE_ROW = 256
ONE_STREAM_MIN_LARGE_FLOAT32_ROW = 16
ONE_STREAM_MIN_LARGE_INT64_ROW = 64


STRIDED_LANES = 8
STRIDED_LANES_MIN_RUN = 64
EVERY_OTHER_MIN_RUN = 16  # every other element over its whole span from here on (shorter runs: untried)


@subroutine(fastmath=False)
def every_other_span(src, offset, n):
    """How many elements from src[offset] on to read for every other element of n: 2n where src has
    them (the element after the last one is read and dropped, so that the span is a whole number of
    vector iterations for n a multiple of 16, where a span of 2n - 1 would leave its tail to a
    scalar loop), else 2n - 1."""
    return smaller(2 * n, src.size - offset)
