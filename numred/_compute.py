"""The driver: which kernels compute a plan (the dispatch), and the drivers that run them, combine
their partials and round once to the output dtype.

``compute_direct`` takes an operator's Reduction, a Plan, the data's ``src`` view and the (native)
input dtype and returns a 1-D array of ``plan.n_kept`` results in that dtype. The module reads top
down: the dispatch rules (``kernel_call``: the one kernel call that finishes a plan, as data), then
the drivers of the reductions the kernels finish themselves. The names without an underscore are
what numred._derived builds the other operators from. The accumulator policy lives here, in one
place:

| input                          | accumulator                                       | final step            |
|--------------------------------|---------------------------------------------------|-----------------------|
| float16, bfloat16, float32     | float64; runs and chunks combined compensated     | one rounding          |
| float64                        | runs: nearly exact split sums (kernels.split_sums;| none                  |
|                                | small inputs: twice the precision, kernels.serial)|                       |
|                                | tiles: compensated across 256-row pieces          |                       |
| int32/int64/uint32/uint64 mean | exact 128-bit sum (32-bit tiles: float64, exact   | truncate toward zero  |
|                                | for up to 2**20 values, EXACT_FLOAT_INT_COUNT)    |                       |
| integer sum                    | exact 128-bit sum                                 | keep the low bits     |
| integer sum of squares or |x|  | uint64, wrapping (uint32 in 32-bit tiles)         | keep the low bits     |
| integer log-sum-exp            | exact max, float64 sum of exp(x - max)            | truncate toward zero; |
|                                |                                                   | next to an integer,   |
|                                |                                                   | decided exactly       |
|                                |                                                   | (Undecided, _exact)   |
| any dtype, max or min          | exact: the max of integer keys (float data: keys  | none (a value of the  |
|                                | of its bits; NaN found from the magnitudes)       | data)                 |

ReduceL1, ReduceL2, ReduceLogSum (a ``finish`` step on unrounded sums) and ReduceProd (the PRODUCT
term: mantissa and exponent partials) are finished in ``numred._derived``, on top of the drivers
here; its ``compute`` is the engine's entry point.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .kernels import finish as finishing
from .kernels import integers, rows, serial, table
from .kernels.reading import (ONE_STREAM_LONG_ROWS_ONLY, ONE_STREAM_MIN_BYTES, ONE_STREAM_MIN_FLOAT32_ROW,
                              ONE_STREAM_MIN_INT32_ROW, ONE_STREAM_MIN_LARGE_FLOAT32_ROW, ONE_STREAM_MIN_LARGE_INT64_ROW,
                              ONE_STREAM_MIN_LARGE_ROW, ONE_STREAM_ROWS)
from .kernels.split_sums import ONE_PASS_MIN_ROW, SPLIT_PASS_MIN_RUN, SPLIT_PIECE, STRIDED_SPLIT_MIN_RUN
from ._plan import FEW_TASKS, Plan
from ._reduction import (ABS, EXP, FLOAT_BITS, INT_WIDENING, KEY, MIN, PRODUCT, RESULT_DTYPE, ROUND, SQRT,
                         SQUARES, SUM, Reduction, Term, Undecided)
from ._runtime import run

# float64 mean or sum of finite values whose partial sums overflow: sum x * 2**-64 instead (exact
# scaling), then multiply the result back; a sum of fewer than 2**63 finite float64 values cannot
# overflow that way.
SUM_RESCALE = 2.0**-64

NO_MAXIMA = np.zeros(0)  # the maxima argument of sums that are not of exp(x - max)
_NO_PARTIALS = np.zeros(0)  # the chunk-partial arguments when the kernel writes the results itself
_NO_WORDS = np.zeros(0, dtype=np.uint64)  # the same for the integer kernels
_NO_EXPONENTS = np.zeros(0, dtype=np.int64)  # and for the products kernels


class KernelCall(NamedTuple):
    """One kernel call that computes and stores finished results: what ``kernel_call`` decides."""

    kernel: str | tuple  # its name (kernels.table.kernel): made, if it is not yet, when the call runs
    parallel: bool
    args: tuple  # after src (and keys), before the result
    carrier: np.dtype  # of src and of the result: the kernels' view of the dtype
    # None, or the integer dtype of a second argument that is src's memory again (the keys of the
    # float log-sum-exp's max)
    keys: np.dtype | None = None
    undecided: bool = False  # returns False where an integer log-sum-exp needs exact arithmetic
    finite: bool = False  # False returned, or float64 sums not finite: the driver's general path
    # with finite, results must also be above this (float64 ReduceL2 from the row kernels:
    # serial.L2_SMALLEST_RESULT); finishing.all_finite_above
    lowest: float = -math.inf

    def __call__(self, src, result):
        """What the kernel returns: None, the finite flag of the serial float sums, or for
        ``undecided`` kernels whether every result was decided."""
        kernel = table.kernel(self.kernel)
        if self.keys is None:
            return run(kernel, self.parallel, src, *self.args, result)
        return run(kernel, self.parallel, src, src.view(self.keys), *self.args, result)


# A parallel plan's kernel runs on threads from this many elements on, and below that as its serial
# variant on the calling thread (the same tasks in the same order: the same bits). A launch on TBB
# costs several microseconds more than a serial call (Numba sets up a task arena for each launch),
# which a memory-bound kernel of fewer elements does not win back; exp and products do more work
# per element (docs/performance.md, "Busy machines and threads").
THREADED_MIN_ELEMENTS = 1 << 17
THREADED_MIN_ELEMENTS_BY_TERM = {EXP: 1 << 15, PRODUCT: 1 << 16}


def threaded(plan: Plan, term: int) -> bool:
    """Whether the kernels of ``term`` on ``plan`` are launched on threads."""
    least = THREADED_MIN_ELEMENTS_BY_TERM.get(term, THREADED_MIN_ELEMENTS)
    return plan.parallel and plan.n_kept * plan.n_reduced >= least


def tasks(plan):
    return plan.n_kept * plan.nchunks


def geometry(plan, src):
    return (src, plan.base, plan.dims, plan.kept_ndim, plan.nchunks)


def launch(name, plan, term, *args):
    """Runs the kernel ``name`` (kernels.table.kernel) of ``term`` on ``plan``: on threads where
    ``threaded`` says so."""
    parallel = threaded(plan, term)
    return run(table.kernel(name), parallel, *args)


# The dispatch rules: which kernel computes a plan, named as data (kernels.table.kernel). Everything
# below them runs what they decide.

def kernel_call(reduction: Reduction, plan: Plan, dtype: np.dtype) -> KernelCall | None:
    """The one kernel call that computes ``reduction`` of ``dtype`` data on ``plan`` and stores the
    finished results, or None where the computation takes several steps (chunk partials combined
    after the kernel; a log-sum-exp's max kernel, then its sum kernel; maxima and minima, whose keys
    are turned back into values). A parallel plan below ``threaded``'s size calls its kernel serially."""
    call = _single_call(reduction, plan, dtype)
    if call is None or not call.parallel or threaded(plan, reduction.term):
        return call
    return call._replace(parallel=False)


def _single_call(reduction, plan, dtype):
    if dtype not in FLOAT_BITS and not reduction.int_kernels:
        return None
    if reduction.finish is not None:
        return _finished_call(reduction, plan, dtype)
    if reduction.term == PRODUCT:
        return _products_call(plan, dtype)
    if reduction.term == KEY:
        return _extrema_call(plan, dtype, reduction.accumulator == MIN)
    if reduction.term == EXP:
        return _log_sum_exp_call(plan, dtype)
    count = plan.n_reduced if reduction.mean else 1
    if dtype in FLOAT_BITS:
        return float_call(plan, reduction.term, RESULT_DTYPE[dtype], divisor=float(count),
                          finite=_retried_if_not_finite(reduction, dtype))
    if reduction.mean and _int_mean_by_float_tiles(plan, dtype):
        return float_call(plan, SUM, dtype, divisor=float(count))
    return _int_call(plan, reduction.term, dtype, count)


def int_l1_term(dtype: np.dtype) -> Term:
    """The term of ReduceL1 on integer ``dtype`` data: |x| (|INT_MIN| wrapping to INT_MIN) for signed
    data; unsigned data is its own |x|, summed as ReduceSum sums it (the exact sum, stored modulo
    2**bits)."""
    return ABS if dtype.kind == "i" else SUM



def _int_kernel_term(term: Term) -> int:
    """``term`` as the integer kernels take it (kernels.integers.INT_TERMS: the exact sum of x, the
    wrapping sum of squares or of |x|); a term they do not sum is an error, never a different sum."""
    if term not in integers.INT_TERMS:
        raise ValueError(f"the integer kernels do not sum the term {term!r}")
    return int(term)


def _finished_call(reduction, plan, dtype):
    """The KernelCall of a float ReduceL1 (ROUND: the sum of |x| rounded once, which is what every
    float sum kernel stores), of a float32, float16 or bfloat16 ReduceL2 or LogSum (the kernel of the
    sum of squares or of x, which takes the square root or the log before its rounding: a float64
    sum of such data neither overflows nor loses bits in subnormal squares), or of a small (serial)
    float64 one, whose serial kernel finishes and rounds the results itself. Where one is not
    decided there (an L2 sum of squares that overflowed or may hold subnormal squares, a LogSum sum
    that is not finite) the kernel returns False and the driver computes the call its general way
    (_derived.finished). float64 single runs, serial or parallel, take the row kernels of the sum of
    squares or of x (split sums, which vectorise where the serial kernel's lanes of TwoSums do
    not); their results are checked instead (KernelCall.finite and lowest: a log that is not
    finite, a square root at or below serial.L2_SMALLEST_RESULT or not finite). None for chunk
    partials, integer LogSum, integer L2 but of single runs and small inputs (int_l2_call), and
    other parallel float64 L2 and LogSum, which _derived.finished computes from other reductions'
    results. An integer ReduceL1 is the wrapping sum of |x| (unsigned data: of x, ReduceSum's), one
    integer kernel call where there are no chunks."""
    if dtype not in FLOAT_BITS:
        if reduction.finish == ROUND:
            return _int_call(plan, int_l1_term(dtype), dtype, 1)
        if reduction.finish == SQRT and (plan.single_run or not plan.parallel):
            return int_l2_call(plan, dtype)
        return None
    if reduction.finish == ROUND or dtype.char != "d":
        return float_call(plan, reduction.term, RESULT_DTYPE[dtype], finish=reduction.finish)
    if plan.single_run:
        lowest = serial.L2_SMALLEST_RESULT if reduction.finish == SQRT else -math.inf
        call = float_call(plan, reduction.term, dtype, finite=True, finish=reduction.finish)
        return None if call is None else call._replace(lowest=lowest)
    if plan.parallel:
        return None
    return KernelCall(("serial_float_sums", int(reduction.term), True), False,
                      (plan.base, plan.dims, plan.kept_ndim, plan.tile, 1.0, 1.0, int(reduction.finish)), dtype,
                      finite=True)


def products_kernel(plan, dtype) -> str:
    """The name of ReduceProd's kernel (kernels.table.PRODUCTS) for ``dtype`` on ``plan``."""
    kind = "float64" if dtype == np.float64 else "float" if dtype in FLOAT_BITS else "int"
    return table.PRODUCTS[kind, plan.tile > 1]


def _products_call(plan, dtype):
    """The KernelCall of a ReduceProd with one chunk per output, whose products kernel stores the
    finished results; None with chunks (their partials are combined in _derived.products)."""
    if plan.nchunks != 1:
        return None
    floats = dtype in FLOAT_BITS
    return KernelCall(products_kernel(plan, dtype), plan.parallel,
                      (plan.base, plan.dims, plan.kept_ndim, plan.nchunks, plan.tile, _NO_PARTIALS, _NO_EXPONENTS),
                      RESULT_DTYPE[dtype] if floats else dtype)


def _retried_if_not_finite(reduction, dtype):
    """Whether float64 sums of x (means and sums) are computed again, rescaled, where a result is not
    finite: float64 partial sums can overflow where the whole sum does not (compute)."""
    return reduction.term == SUM and dtype.char == "d"


def float_call(plan, term, carrier, scale=1.0, maxima=NO_MAXIMA, divisor=1.0, finite=False, finish=0):
    """The KernelCall of a float sum that writes finished results itself: result[k] = sum_k / divisor
    (of x * scale, of x * x or of |x|; then its square root or log by ``finish``: SQRT or LOG;
    0 or ROUND, none) or
    maxima[k] + log(sum_k) (EXP: of exp(x - maxima[k]), parallel plans only); None where there is
    more than one chunk per output. ``carrier``: src's dtype; float64 sums
    are compensated (of the single-tile kernels, only narrow tiles' are, Plan.narrow). ``finite``:
    KernelCall.finite."""
    term, finish = int(term), int(finish)  # (the kernels take plain ints)
    if not plan.parallel and not plan.single_run:  # (single runs: the row kernels, called serially)
        kernel = "serial_float_sums", term, carrier == np.float64
        args = plan.base, plan.dims, plan.kept_ndim, plan.tile, scale, divisor, finish
    elif plan.single_run:
        n_kept, kept_stride, n_reduced, step = plan.single_run
        variant = _float_rows_variant(term, carrier, kept_stride, n_kept, n_reduced, step, scale)
        if variant == rows.ROWS_COLUMNS:  # (chunk partials, combined by float_sums_into)
            return None
        kernel = "float_rows", term, variant
        args = plan.base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, finish
    elif plan.single_tile and term != EXP and (carrier != np.float64 or plan.narrow):
        kernel = table.FLOAT_TILES[term, plan.narrow]
        args = plan.base, *plan.single_tile, plan.tile, scale, divisor, finish
    elif plan.single_block and term != EXP:  # (log-sum-exps: _log_sum_exp_call)
        kernel = table.FLOAT_BLOCKS[term]
        args = plan.base, *plan.single_block, scale, divisor, finish
    elif plan.nchunks == 1:
        kernel = table.FLOAT_SUMS[term]
        args = (plan.base, plan.dims, plan.kept_ndim, plan.nchunks, plan.tile, scale, maxima, _NO_PARTIALS,
                _NO_PARTIALS, divisor, finish)
    else:
        return None
    return KernelCall(kernel, plan.parallel, args, carrier, finite=finite)


def _int_call(plan, term, carrier, count):
    """The KernelCall of the integer exact sum (SUM) divided by ``count`` (integers._int_mean; 1: the
    sum modulo 2**bits) or wrapping sum of squares (SQUARES) or of |x| (ABS) of ``carrier`` data that
    writes finished results itself, or None."""
    term = _int_kernel_term(term)
    if plan.single_run:  # serial ones too: the row kernels, called serially
        n_kept, kept_stride, n_reduced, step = plan.single_run
        kernel = "int_rows", term, _int_rows_four(term, carrier, n_kept, n_reduced, step)
        args = plan.base, kept_stride, n_kept, n_reduced, step, count
    elif not plan.parallel:
        kernel = "serial_int_sums", term
        args = plan.base, plan.dims, plan.kept_ndim, plan.tile, count
    elif plan.single_block:
        kernel = table.INT_BLOCKS[term]
        args = plan.base, *plan.single_block, count
    elif plan.narrow and (term != SUM or carrier.itemsize == 8):  # (tiles._int_tiles_for)
        n_outer, outer_stride, n_inner, n_reduced, _ = plan.single_tile
        kernel = table.INT_TILES[term]
        args = plan.base, n_outer, outer_stride, n_inner, n_reduced, count
    elif plan.nchunks == 1:
        kernel = table.INT_SUMS[term]
        args = plan.base, plan.dims, plan.kept_ndim, plan.nchunks, plan.tile, count, _NO_WORDS, _NO_WORDS
    else:
        return None
    return KernelCall(kernel, plan.parallel, args, carrier)


def _float_rows_variant(term, carrier, kept_stride, n_kept, n_reduced, step, scale):
    """The float_rows variant (kernels.rows.ROWS_*) for these rows of ``carrier`` data (the kernels'
    view of the dtype)."""
    if (term != EXP and 0 < kept_stride < step and n_reduced >= rows.COLUMN_MIN_ROWS
            and not (term == SQUARES and carrier == np.uint16)):  # (float16 sums of squares)
        return rows.ROWS_COLUMNS
    float64 = carrier == np.float64
    if term != EXP and not float64:
        if step != 1:
            return rows.ROWS_STRIDED
        if _float_rows_together(carrier.itemsize, n_kept, n_reduced) == 1:
            return rows.ROWS_ONE_BY_ONE
        return rows.ROWS_FOUR
    if (float64 and term != EXP and scale == 1.0 and n_reduced <= SPLIT_PIECE
            and n_reduced >= (ONE_PASS_MIN_ROW if step == 1 else STRIDED_SPLIT_MIN_RUN)):
        return rows.ROWS_ONE_PASS if step == 1 else rows.ROWS_ONE_PASS_STRIDED
    if float64 and term != EXP and scale == 1.0 and step == 1 and n_reduced > SPLIT_PIECE:
        return rows.ROWS_PIECES
    if float64 and term != EXP and n_reduced < SPLIT_PASS_MIN_RUN:
        return rows.ROWS_TWO_PASS if step == 1 else rows.ROWS_TWO_PASS_STRIDED
    return rows.ROWS_GENERAL


def _float_rows_together(itemsize, n_kept, n_reduced):
    """_rows_together for contiguous rows of float data (sums and extrema) of ``itemsize`` bytes."""
    min_row, min_large_row = ((ONE_STREAM_MIN_FLOAT32_ROW, ONE_STREAM_MIN_LARGE_FLOAT32_ROW)
                              if itemsize == 4 else (ONE_STREAM_LONG_ROWS_ONLY, ONE_STREAM_MIN_LARGE_ROW))
    return _rows_together(itemsize, n_kept, n_reduced, min_row, min_large_row)


def _int_rows_four(term, carrier, n_kept, n_reduced, step):
    """Whether int_rows reads these rows of ``carrier`` data four at a time (contiguous rows, as
    float_rows does; 64-bit means: never), rather than one by one."""
    return (step == 1 and (term != SUM or carrier.itemsize <= 4) and n_reduced <= integers.HALVES_BLOCK
            and _int_rows_together(carrier.itemsize, n_kept, n_reduced) == 4)


def _int_rows_together(itemsize, n_kept, n_reduced):
    """_rows_together for contiguous rows of integers (sums and extrema) of ``itemsize`` bytes."""
    min_row = ONE_STREAM_MIN_INT32_ROW if itemsize == 4 else ONE_STREAM_LONG_ROWS_ONLY
    min_large_row = ONE_STREAM_MIN_LARGE_INT64_ROW if itemsize == 8 else ONE_STREAM_MIN_LARGE_ROW
    return _rows_together(itemsize, n_kept, n_reduced, min_row, min_large_row)


def _rows_together(itemsize, n_kept, n_reduced, min_row, min_large_row):
    """How many contiguous rows the row kernels read together: 4 (four memory streams per thread),
    or 1 (whole rows one after another) where kernels.reading.ONE_STREAM_ROWS says so: rows of
    ``min_row`` elements or more, and rows of ``min_large_row`` or more of inputs beyond the cache."""
    if ONE_STREAM_ROWS and (n_reduced >= min_row or n_reduced >= min_large_row
                            and n_kept * n_reduced * itemsize >= ONE_STREAM_MIN_BYTES):
        return 1
    return 4


def _int_mean_by_float_tiles(plan: Plan, dtype: np.dtype) -> bool:
    # 32-bit tiles through the float kernel, exact here (integers.EXACT_FLOAT_INT_COUNT): it reads tiles at
    # float32's rate, which the integer kernels (int_sums_into) do not reach
    return plan.tile > 1 and plan.parallel and dtype.itemsize == 4 and plan.n_reduced <= integers.EXACT_FLOAT_INT_COUNT


def _log_sum_exp_call(plan, dtype):
    """The KernelCall of a log-sum-exp whose kernel also finds the maxima: small (serial) ones, single
    runs and single blocks; None for the others, which launch a max kernel and a sum kernel. An
    integer one's kernel stores the results that fit the dtype and returns False where one does not
    fit or is within rounding of an integer (Undecided)."""
    if dtype in FLOAT_BITS:
        key_dtype, inf_bits = FLOAT_BITS[dtype]
        carrier = RESULT_DTYPE[dtype]
        if not plan.parallel:
            return KernelCall(("serial_float_log_sum_exp", dtype.char == "d"), False,
                              (inf_bits, plan.base, plan.dims, plan.kept_ndim), carrier, keys=key_dtype)
        if plan.single_run:
            return KernelCall("float_rows_log_sum_exp", True,
                              (inf_bits, plan.base, *_kept_rows(plan)), carrier, keys=key_dtype)
        if plan.single_block:
            return KernelCall("float_blocks_log_sum_exp", True,
                              (inf_bits, plan.base, *plan.single_block), carrier, keys=key_dtype)
        return None
    type_max = INT_WIDENING[dtype][1]
    if not plan.parallel:
        return KernelCall(("serial_int_log_sum_exp",), False,
                          (plan.base, plan.dims, plan.kept_ndim, plan.n_reduced, type_max), dtype, undecided=True)
    if plan.single_run:
        return KernelCall("int_rows_log_sum_exp", True, (plan.base, *_kept_rows(plan), type_max),
                          dtype, undecided=True)
    if plan.single_block:
        return KernelCall("int_blocks_log_sum_exp", True, (plan.base, *plan.single_block, type_max),
                          dtype, undecided=True)
    return None


def _extrema_call(plan, dtype, minimum):
    """The KernelCall of a max or min whose kernel stores the values: small (serial) ones and single
    runs; None for the others, which run the general max kernel, then turn its keys into values
    (compute)."""
    flip = -1 if minimum else 0  # (kernels.maxima.flipped)
    if dtype in FLOAT_BITS:
        key_dtype, inf_bits = FLOAT_BITS[dtype]
        if not plan.parallel:
            return KernelCall(("serial_extrema", True), False,
                              (plan.base, plan.dims, plan.kept_ndim, inf_bits, flip), RESULT_DTYPE[dtype], keys=key_dtype)
        if plan.single_run:
            return KernelCall("float_rows_extrema", True, (plan.base, *_extrema_rows(plan, dtype), inf_bits, flip),
                              RESULT_DTYPE[dtype], keys=key_dtype)
        return None
    if not plan.parallel:
        return KernelCall(("serial_extrema", False), False, (plan.base, plan.dims, plan.kept_ndim, flip), dtype)
    if plan.single_run:
        return KernelCall("int_rows_extrema", True, (plan.base, *_extrema_rows(plan, dtype), flip), dtype)
    return None


def _extrema_rows(plan, dtype):
    """A single-run plan's rows as the row extrema kernels take them: _kept_rows and how many rows a
    task reads together. The row sums' choice for the dtype's kind (_float_rows_together,
    _int_rows_together), but one by one for strided rows, and where groups of four would leave fewer
    than FEW_TASKS tasks, too few to spread over the threads (8 rows: two tasks instead of eight)."""
    kept_stride, n_kept, n_reduced, step = _kept_rows(plan)
    rows_together = _float_rows_together if dtype in FLOAT_BITS else _int_rows_together
    together = 1
    if step == 1 and n_kept >= 4 * FEW_TASKS:
        together = rows_together(dtype.itemsize, n_kept, n_reduced)
    return kept_stride, n_kept, n_reduced, step, together


def _kept_rows(plan):
    """A single-run plan's (kept stride, outputs, elements per output, step), as the row kernels take them."""
    n_kept, kept_stride, n_reduced, step = plan.single_run
    return kept_stride, n_kept, n_reduced, step


def root_max(dtype):
    """The largest integer ReduceL2 result the kernels store: the dtype's largest value, or
    2**32 - 1 (every root of a sum below 2**64 fits a 64-bit dtype), as uint64."""
    return np.uint64(min(int(np.iinfo(dtype).max), (1 << 32) - 1))


def int_l2_call(plan, dtype):
    """The KernelCall of an integer ReduceL2 of single runs (kernels.rows.int_rows_l2) or of a small
    input (kernels.serial.int_l2): the roots of outputs whose sum of squares is below 2**64 by
    their largest |x|. False returned where one is not: numred._derived then computes the call."""
    largest_fit = np.uint64(math.isqrt(((1 << 64) - 1) // plan.n_reduced))  # n * largest_fit**2 < 2**64
    if plan.single_run:
        n_kept, kept_stride, n_reduced, step = plan.single_run
        return KernelCall("int_rows_l2", plan.parallel,
                          (plan.base, kept_stride, n_kept, n_reduced, step, largest_fit, root_max(dtype)), dtype,
                          finite=True)
    return KernelCall(("serial_int_l2",), False,
                      (plan.base, plan.dims, plan.kept_ndim, largest_fit, root_max(dtype)), dtype, finite=True)


# The drivers

def as_dtype(result: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The kernels' float results read as ``dtype``: a view for float16 and bfloat16 bits, else the
    array itself."""
    return result if result.dtype is dtype else result.view(dtype)


def compute_direct(reduction: Reduction, plan: Plan, src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``reduction`` of ``src`` (the carrier view of ``dtype`` data) on ``plan``, for the reductions the
    kernels finish themselves (no finish step, not PRODUCT; numred._derived.compute takes every
    reduction): 1-D, ``plan.n_kept`` results in ``dtype``."""
    if dtype not in FLOAT_BITS and not reduction.int_kernels:
        raise Undecided  # (the operator's exact function computes its integers)
    call = kernel_call(reduction, plan, dtype)
    if reduction.term == KEY and call is None:
        # each result is one of the data's values: exact in the float64 or 64-bit integer maxima
        return _maxima(plan, src, dtype, minimum=reduction.accumulator == MIN).astype(dtype)
    result = np.empty(plan.n_kept, dtype=RESULT_DTYPE.get(dtype, dtype))
    count = plan.n_reduced if reduction.mean else 1  # what the sums are divided by
    returned = None
    if call is not None:
        returned = call(src, result)
        if call.undecided and not returned:
            raise Undecided
    elif reduction.term == EXP:
        if dtype in FLOAT_BITS:
            float_sums_into(plan, src, EXP, result, maxima=_maxima(plan, src, dtype))
        else:
            _int_log_sum_exp(plan, src, dtype, result)
    elif dtype in FLOAT_BITS or (reduction.mean and _int_mean_by_float_tiles(plan, dtype)):
        float_sums_into(plan, src, reduction.term, result, divisor=float(count))
    else:
        int_sums_into(plan, src, reduction.term, count, result)
    if _retried_if_not_finite(reduction, dtype) and not (
            finishing.all_finite_above(result, -math.inf) if returned is None else returned):
        # inf/NaN inputs or an overflowing sum of finite values. The rescaled sums cannot overflow,
        # so where a result is not finite theirs is the right one: finite for finite values whose
        # sum (mean) is within range, and for an infinity among values whose sum overflowed the
        # other way, that infinity ([-1.7e308, -1.7e308, inf] had come out NaN: -inf + inf).
        rescaled = np.empty(plan.n_kept)
        float_sums_into(plan, src, SUM, rescaled, scale=SUM_RESCALE, divisor=float(count))
        with np.errstate(over="ignore"):  # a sum beyond float64's range: inf, as IEEE addition
            result = np.where(np.isfinite(result), result, rescaled / SUM_RESCALE)
    return as_dtype(result, dtype)


def float_sums_into(plan, src, term, result, scale=1.0, maxima=NO_MAXIMA, divisor=1.0, finish=0):
    """result = the float sums of float_call on any plan, rounded once to result's dtype: with one
    chunk per output the kernel writes the results itself; otherwise its chunk partials are
    combined here."""
    call = float_call(plan, term, src.dtype, scale, maxima, divisor, finish=finish)
    if call is not None:
        return call(src, result)
    term, finish = int(term), int(finish)
    if plan.single_run:  # strided columns (rows.ROWS_COLUMNS): partials of chunks of whole rows
        n_kept, kept_stride, n_reduced, step = plan.single_run
        nchunks = rows.column_chunks(n_reduced)
        total = np.empty(n_kept * nchunks)
        comp = np.empty(n_kept * nchunks)
        launch(("float_columns", term), plan, term, src, plan.base, kept_stride, n_kept, n_reduced, step, scale,
               nchunks, total, comp)
        finishing.finish_float_sums(total, comp, nchunks, divisor, finish, result)
        return None
    total = np.empty(tasks(plan))
    comp = np.empty(tasks(plan))
    launch(table.FLOAT_SUMS[term], plan, term, *geometry(plan, src), plan.tile, scale, maxima, total, comp, divisor,
           finish, result)
    if term == EXP:
        finishing.finish_float_log_sum_exp(total, comp, plan.nchunks, maxima, result)
    else:
        finishing.finish_float_sums(total, comp, plan.nchunks, divisor, finish, result)
    return None


def int_sums_into(plan, src, term, count, result):
    """Integer exact sum divided by ``count`` (SUM) or wrapping sum of squares (SQUARES) or of |x|
    (ABS) into result, of the input dtype (or uint64: _derived.int_square_sums): the kernels
    compute uint64 two's-complement bits, and the store keeps the low bits."""
    call = _int_call(plan, term, src.dtype, count)
    if call is not None:
        call(src, result)
        return
    low = np.empty(tasks(plan), dtype=np.uint64)
    high = np.empty(tasks(plan), dtype=np.uint64)
    term = _int_kernel_term(term)
    launch(table.INT_SUMS[term], plan, SUM, *geometry(plan, src), plan.tile, count, low, high, result)
    if term != SUM:  # (the wrapping sums)
        finishing.finish_int_squares(low, plan.nchunks, result)
    else:
        finishing.finish_int_mean(low, high, plan.nchunks, count, result)


def _maxima(plan, src, dtype, minimum=False):
    """Per-output max (with ``minimum``: min): float64 for float dtypes (NaN where any element is NaN),
    the widened int64 or uint64 value for integer dtypes."""
    is_float = dtype in FLOAT_BITS
    keys, inf_bits = (src.view(FLOAT_BITS[dtype][0]), FLOAT_BITS[dtype][1]) if is_float else (src, 0)
    wide = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    partial = np.empty(tasks(plan), dtype=wide)
    nans = np.empty(tasks(plan), dtype=np.int64)
    # a min is the max of keys with every bit flipped (kernels.maxima.flipped; -1 is all ones in
    # every key type), flipped back at the end
    flip = -1 if minimum else 0
    launch(table.MAX_KEYS[is_float, plan.tile > 1], plan, KEY, *geometry(plan, keys), plan.tile, inf_bits, flip,
           partial, nans)
    if not is_float:
        keys = np.empty(plan.n_kept, dtype=wide)
        finishing.finish_max(partial, plan.nchunks, keys)
        if minimum:  # all ones of the data's width: the widened unsigned keys were zero-extended
            keys ^= wide.type(np.iinfo(dtype).max if dtype.kind == "u" else -1)
        return keys
    values = np.empty(plan.n_kept)
    finishing.finish_float_max(partial, nans, plan.nchunks, flip, src[:0], values)
    return values


def _int_log_sum_exp(plan, src, dtype, result):
    """The parallel integer log-sum-exp of the general layout: a max kernel, then a sum kernel."""
    wide, type_max = INT_WIDENING[dtype]
    wide_result = np.empty(plan.n_kept, dtype=wide)
    fits_each = np.empty(plan.n_kept, dtype=np.bool_)
    maxima = _maxima(plan, src, dtype)
    # one chunk per output: the kernel finishes the results itself (no partials)
    totals = _NO_PARTIALS if plan.nchunks == 1 else np.empty(tasks(plan))
    launch("int_sum_exp", plan, EXP, *geometry(plan, src), plan.tile, maxima, totals, plan.n_reduced, type_max,
           wide_result, fits_each)
    if plan.nchunks > 1:
        finishing.finish_int_log_sum_exp(maxima, totals, plan.nchunks, plan.n_reduced, type_max, wide_result, fits_each)
    if not fits_each.all():
        raise Undecided
    result[:] = wide_result
