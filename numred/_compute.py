"""Per-operator drivers: run the kernels of a plan, combine partials, round once to the output dtype.

Each driver takes a Plan, the data's ``src`` view and the (native) input dtype and returns a 1-D
array of ``plan.n_kept`` results in that dtype. The accumulator policy lives here, in one place:

| input                          | accumulator                                       | final step            |
|--------------------------------|---------------------------------------------------|-----------------------|
| float16, bfloat16, float32     | float64; runs and chunks combined compensated     | one rounding          |
| float64                        | runs: nearly exact split sums (kernels.split_sums;| none                  |
|                                | small inputs: twice the precision, kernels.serial)|                       |
|                                | tiles: compensated across 256-row pieces          |                       |
| int32/int64/uint32/uint64 mean | exact 128-bit sum (32-bit tiles: float64, exact   | truncate toward zero  |
|                                | for up to 2**20 values, EXACT_FLOAT_INT_COUNT)    |                       |
| integer sum of squares         | uint64, wrapping (uint32 in 32-bit tiles)         | keep the low bits     |
| integer log-sum-exp            | exact max, float64 sum of exp(x - max)            | truncate toward zero; |
|                                |                                                   | next to an integer,   |
|                                |                                                   | decided exactly       |
|                                |                                                   | (Undecided, _exact)   |
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .kernels import base, finish, integers, rows, serial, table, tiles
from ._plan import Plan
from ._runtime import run

# float64 mean of finite values whose sum overflows: sum x * 2**-64 instead (exact scaling), then
# multiply the mean back; a sum of fewer than 2**63 finite float64 values cannot overflow that way.
_MEAN_RESCALE = 2.0**-64


def _launch(name, plan, *args):
    return run(table.KERNELS[name], plan.parallel, *args)


def _geometry(plan, src):
    return (src, plan.base, plan.dims, plan.kept_ndim, plan.nchunks)


_NO_MAXIMA = np.zeros(0)  # the maxima argument of sums that are not of exp(x - max)
_NO_PARTIALS = np.zeros(0)  # the chunk-partial arguments when the kernel writes the results itself


def _tasks(plan):
    return plan.n_kept * plan.nchunks


def _narrow_tile(plan, itemsize):
    """Whether the plan is a single narrow tile (tiles.narrow_tile) for the lean kernels; data of
    ``itemsize`` 8 only in blocks of at most tiles.NARROW_64BIT_MAX_BLOCK elements."""
    if not plan.single_tile:
        return False
    _, _, n_inner, n_reduced, step = plan.single_tile
    return (tiles.narrow_tile(n_inner, plan.tile, n_reduced, step)
            and (itemsize < 8 or n_inner * n_reduced <= tiles.NARROW_64BIT_MAX_BLOCK))


def _finishing_float_kernel(plan, mode, scale, maxima, divisor, carrier):
    """((serial, parallel) kernels, arguments after src, before the result) of the float kernel that
    writes finished results itself, which it does with one chunk per output; None when there are more.
    ``carrier``: src's dtype; float64 sums are compensated (of the single-tile kernels, only narrow
    tiles' are, _narrow_tile)."""
    if plan.single_run:
        n_kept, kept_stride, n_reduced, step = plan.single_run
        variant = rows.float_rows_variant(mode, carrier, kept_stride, n_kept, n_reduced, step, scale)
        return rows.float_rows(mode, variant), (plan.base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor)
    if plan.single_tile and mode != base.SUM_EXP:
        narrow = _narrow_tile(plan, carrier.itemsize)
        if carrier != np.float64 or narrow:
            return table.KERNELS[table.FLOAT_TILES[mode, narrow]], (plan.base, *plan.single_tile, plan.tile, scale,
                                                                    divisor)
    if plan.single_block and mode != base.SUM_EXP:  # (log-sum-exps: _fused_log_sum_exp)
        return table.KERNELS[table.FLOAT_BLOCKS[mode]], (plan.base, *plan.single_block, scale, divisor)
    if plan.nchunks == 1:
        return table.KERNELS[table.FLOAT_SUMS[mode]], (plan.base, plan.dims, plan.kept_ndim, plan.nchunks, plan.tile,
                                                       scale, maxima, _NO_PARTIALS, _NO_PARTIALS, divisor)
    return None


def _run_float_sums(plan, src, mode, result, scale=1.0, maxima=_NO_MAXIMA, divisor=1.0):
    """result[k] = sum_k / divisor (SUM: of x * scale; SUM_SQUARES) or maxima[k] + log(sum_k)
    (SUM_EXP: of exp(x - maxima[k])), rounded once to result's dtype. With one chunk per output the
    kernel writes the results itself; otherwise its chunk partials are combined here."""
    divisor = float(divisor)
    finishing = _finishing_float_kernel(plan, mode, scale, maxima, divisor, src.dtype)
    if finishing is not None:
        kernels, args = finishing
        run(kernels, plan.parallel, src, *args, result)
        return
    total = np.empty(_tasks(plan))
    comp = np.empty(_tasks(plan))
    _launch(table.FLOAT_SUMS[mode], plan, *_geometry(plan, src), plan.tile, scale, maxima, total, comp, divisor, result)
    if mode == base.SUM_EXP:
        finish.finish_float_log_sum_exp(total, comp, plan.nchunks, maxima, result)
    else:
        finish.finish_float_sums(total, comp, plan.nchunks, divisor, result)


def _float_sums(plan, src, mode, scale=1.0, divisor=1.0, result_dtype=np.float64, check_finite=False):
    """Per-output float sums divided by ``divisor``, rounded once to ``result_dtype``, and whether
    they are all finite (always True unless ``check_finite``: the check is a pass over the results)."""
    result = np.empty(plan.n_kept, dtype=result_dtype)
    if not plan.parallel and not plan.single_run:  # (single runs: the row kernels, serial)
        kernel = serial.float_sums(mode, src.dtype == np.float64)
        finite = kernel(src, plan.base, plan.dims, plan.kept_ndim, plan.tile, float(scale), float(divisor), result)
        return result, finite
    _run_float_sums(plan, src, mode, result, scale=scale, divisor=divisor)
    return result, not check_finite or finish.all_finite(result)


# float dtype -> (signed integer dtype viewing its bits, the bits of +inf)
FLOAT_BITS = {
    np.dtype(np.float32): (np.dtype(np.int32), 0x7F800000),
    np.dtype(np.float64): (np.dtype(np.int64), 0x7FF0000000000000),
    np.dtype(np.float16): (np.dtype(np.int16), 0x7C00),
}  # and bfloat16 (add_bfloat16)
# float dtype -> the dtype the kernels write, rounding once from float64 (store_rounded): float32 and
# float64 themselves; float16 and bfloat16 as their bits, in the carrier dtypes of their inputs
# (as in _frontend.CARRIERS)
RESULT_DTYPE = {dtype: dtype for dtype in FLOAT_BITS} | {np.dtype(np.float16): np.dtype(np.uint16)}


def add_bfloat16(bfloat16: np.dtype) -> None:
    """Add ml_dtypes' bfloat16 to the tables above (_frontend.add_bfloat16)."""
    FLOAT_BITS[bfloat16] = (np.dtype(np.int16), 0x7F80)
    RESULT_DTYPE[bfloat16] = np.dtype(np.int16)


def _as_dtype(result, dtype):
    """The kernels' float results read as ``dtype``: a view for float16 and bfloat16 bits, else the
    array itself (a view costs 0.35 us, a tenth of a small call)."""
    return result if result.dtype is dtype else result.view(dtype)


# integer dtype -> (the dtype its maxima and log-sum-exp results are computed in, its largest value
# in that dtype)
INT_WIDENING = {
    np.dtype(t): (np.dtype(np.uint64 if np.dtype(t).kind == "u" else np.int64),
                  (np.uint64 if np.dtype(t).kind == "u" else np.int64)(np.iinfo(t).max))
    for t in (np.int32, np.int64, np.uint32, np.uint64)
}


def _maxima(plan, src, dtype):
    """Per-output max: float64 for float dtypes (NaN where any element is NaN), the widened int64 or
    uint64 value for integer dtypes."""
    is_float = dtype in FLOAT_BITS
    keys, inf_bits = (src.view(FLOAT_BITS[dtype][0]), FLOAT_BITS[dtype][1]) if is_float else (src, 0)
    wide = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    partial = np.empty(_tasks(plan), dtype=wide)
    nans = np.empty(_tasks(plan), dtype=np.int64)
    _launch(table.MAX_KEYS[is_float], plan, *_geometry(plan, keys), plan.tile, inf_bits, partial, nans)
    if not is_float:
        keys = np.empty(plan.n_kept, dtype=wide)
        finish.finish_max(partial, plan.nchunks, keys)
        return keys
    values = np.empty(plan.n_kept)
    finish.finish_float_max(partial, nans, plan.nchunks, src[:0], values)
    return values


_NO_WORDS = np.zeros(0, dtype=np.uint64)  # the partial arguments when the kernel finishes the results


def _int_launch(plan, squares, carrier):
    """(kernels (serial, parallel), parallel, arguments after src and before the result) of the
    integer mean or sum of squares (``squares``) of ``carrier`` data that one kernel call finishes,
    or None when chunk partials are combined afterwards."""
    itemsize = carrier.itemsize
    if plan.single_run:  # serial ones too: the row kernels' serial variants
        n_kept, kept_stride, n_reduced, step = plan.single_run
        four = rows.int_rows_four(squares, carrier, n_kept, n_reduced, step)
        return rows.int_rows(squares, four), plan.parallel, (plan.base, kept_stride, n_kept, n_reduced, step)
    if not plan.parallel:
        return ((serial.int_sums(squares), None), False,
                (plan.base, plan.dims, plan.kept_ndim, plan.tile, plan.n_reduced))
    if plan.single_block:
        return table.KERNELS[table.INT_BLOCKS[squares]], True, (plan.base, *plan.single_block)
    if _narrow_tile(plan, itemsize) and (squares or itemsize == 8):  # (kernels.tiles._int_tiles_for)
        n_outer, outer_stride, n_inner, n_reduced, _ = plan.single_tile
        return table.KERNELS[table.INT_TILES[squares]], True, (plan.base, n_outer, outer_stride, n_inner, n_reduced)
    if plan.nchunks == 1:
        return table.KERNELS["int_sums"], True, (plan.base, plan.dims, plan.kept_ndim, plan.nchunks, plan.tile, squares,
                                             plan.n_reduced, _NO_WORDS, _NO_WORDS)
    return None


def _int_sums(plan, src, squares, result):
    """Integer exact mean or wrapping sum of squares (squares) into result, of the input dtype: the
    kernels compute uint64 two's-complement bits, and the store keeps the low bits."""
    one_launch = _int_launch(plan, squares, src.dtype)
    if one_launch is not None:
        kernels, parallel, args = one_launch
        run(kernels, parallel, src, *args, result)
        return
    low = np.empty(_tasks(plan), dtype=np.uint64)
    high = np.empty(_tasks(plan), dtype=np.uint64)
    _launch("int_sums", plan, *_geometry(plan, src), plan.tile, squares, plan.n_reduced, low, high, result)
    if squares:
        finish.finish_int_squares(low, plan.nchunks, result)
    else:
        finish.finish_int_mean(low, high, plan.nchunks, plan.n_reduced, result)


def _int_mean_by_float_tiles(plan: Plan, dtype: np.dtype) -> bool:
    # 32-bit tiles through the float kernel, exact here (integers.EXACT_FLOAT_INT_COUNT): it reads tiles at
    # float32's rate, where int_sums ran at 0.6-0.75x of it (32x64x56x56 axis 1: 1.9 against 1.2 ms)
    return plan.tile > 1 and plan.parallel and dtype.itemsize == 4 and plan.n_reduced <= integers.EXACT_FLOAT_INT_COUNT


class OneLaunch:
    """A whole computation that is one kernel call writing finished results: a mean or sum of squares
    with one chunk per output. The front end keeps it with the plan for repeated calls, which then
    skip the drivers below. A float64 mean's launch returns None when a result is not finite: the
    front end then runs the driver (mean), which retries an overflowing sum rescaled. In parallel
    calls, after a kernel has streamed its data, each Python step of them runs on cold caches, and
    together they were a tenth of a 1000x1000 float32 mean (about 10 us of 70); small serial calls
    are mostly such steps.

    The first call of each variant (serial, parallel) goes through Numba's dispatcher, which checks
    the argument types, on the carrier views the kernels are compiled for (read-only input, float16
    and bfloat16 as 16-bit integers). Later calls go straight to the compiled entry point it chose,
    with the input's own 1-D view and a result in the input's dtype: no dispatch by type, no views,
    no read-only flag. That is safe because every later call has the same argument types by
    construction (same dtype, 1-D and C-contiguous, the same argument objects), and the entry point
    reads an array's data, shape and strides without looking at its dtype or flags, so the 16-bit
    floats arrive as the integers they are compiled for. Small calls (3x2x2, 64x64) took 0.79-0.80x
    the time for float32, 0.66-0.68x for float16 and bfloat16, 0.72-0.82x for int32 and int64."""

    __slots__ = ("kernels", "parallel", "args", "carrier", "dtype", "keys", "undecided", "finite", "calls")

    def __init__(self, kernels, parallel, args, carrier, dtype, keys=None, undecided=None, finite=False):
        self.kernels = kernels  # (serial, parallel) dispatchers
        self.parallel = parallel
        self.args = args  # after src (and keys), before the result
        self.carrier = carrier  # of src and of the result: the kernels' view of ``dtype``
        self.dtype = dtype
        # None, or the integer dtype of a second argument that is src's memory again (the keys of
        # the float log-sum-exp's max): later calls pass the input's view twice
        self.keys = keys
        # None, or the exception to raise when the kernel returns False (an integer log-sum-exp it
        # could not decide or that does not fit its dtype: Undecided); other kernels return None
        self.undecided = undecided
        self.finite = finite  # whether results must all be finite (else __call__ returns None)
        # what run() calls: the first call of a variant, then its entry point
        self.calls = [functools.partial(self._first_call, variant) for variant in (0, 1)]

    def _first_call(self, variant, src, *args):
        kernel = self.kernels[variant]
        src = src.view(self.carrier)
        src.setflags(write=False)
        if self.keys is not None:
            args = (src.view(self.keys), *args[1:])
        typed = (src, *args[:-1], args[-1].view(self.carrier))
        returned = kernel(*typed)
        try:  # Numba internals: without them every call keeps going through the dispatcher
            entry = kernel.overloads[tuple(numba.typeof(a) for a in typed)].entry_point
        except (AttributeError, KeyError):
            return returned
        self.calls[variant] = entry
        return returned

    def __call__(self, data, n_kept):
        """The results (1-D, in data's dtype) for ``data``: C-contiguous, of this launch's geometry;
        None for a float64 mean with a result that is not finite."""
        result = np.empty(n_kept, dtype=self.dtype)
        src = data.ravel()
        if self.keys is None:
            returned = run(self.calls, self.parallel, src, *self.args, result)
        else:
            returned = run(self.calls, self.parallel, src, src, *self.args, result)
        if returned is False and self.undecided is not None:
            raise self.undecided
        if self.finite:  # the serial kernel of _float_sums returns whether they are; others return None
            if returned is None:
                returned = math.isfinite(result[0]) if n_kept == 1 else finish.all_finite(result)
            if not returned:
                return None
        return result


def _one_launch(plan: Plan, dtype: np.dtype, mode: int, divisor: float, finite: bool = False) -> OneLaunch | None:
    if dtype not in FLOAT_BITS:  # integers are their own carriers
        if mode == base.SUM and _int_mean_by_float_tiles(plan, dtype):
            return None
        one_launch = _int_launch(plan, mode == base.SUM_SQUARES, dtype)
        return None if one_launch is None else OneLaunch(*one_launch, dtype, dtype)
    carrier = RESULT_DTYPE[dtype]  # for float dtypes also the carrier of the input (_frontend.CARRIERS)
    if not plan.parallel and not plan.single_run:  # the serial kernel _float_sums takes for these
        kernel = serial.float_sums(mode, dtype.char == "d")
        return OneLaunch((kernel, None), False, (plan.base, plan.dims, plan.kept_ndim, plan.tile, 1.0, divisor),
                         carrier, dtype, finite=finite)
    finishing = _finishing_float_kernel(plan, mode, 1.0, _NO_MAXIMA, divisor, carrier)
    if finishing is None:
        return None
    kernels, args = finishing
    return OneLaunch(kernels, plan.parallel, args, carrier, dtype, finite=finite)


def mean_launch(plan: Plan, dtype: np.dtype) -> OneLaunch | None:
    """The OneLaunch of a mean on ``plan``, or None. A float64 mean's results must be finite: an
    overflowing sum of finite values is retried rescaled (mean). Repeated float64 3x2x2 and 64x64
    means took 0.83 and 0.52x the time as one launch."""
    return _one_launch(plan, dtype, base.SUM, float(plan.n_reduced), finite=dtype.char == "d")


def sum_square_launch(plan: Plan, dtype: np.dtype) -> OneLaunch | None:
    """The OneLaunch of a sum of squares on ``plan``, or None."""
    return _one_launch(plan, dtype, base.SUM_SQUARES, 1.0)


def _fused_log_sum_exp(plan: Plan, dtype: np.dtype):
    """(KERNELS name, arguments after src (and keys) and before the result) of the log-sum-exp kernel
    that finds the maxima and the sums in one task, for parallel single-run and single-block plans;
    None for the others, which launch a max kernel and a sum kernel."""
    if not plan.parallel:
        return None
    if plan.single_run:
        n_kept, kept_stride, n_reduced, step = plan.single_run
        if dtype not in FLOAT_BITS:
            return "int_rows_log_sum_exp", (plan.base, kept_stride, n_kept, n_reduced, step, INT_WIDENING[dtype][1])
        return "float_rows_log_sum_exp", (FLOAT_BITS[dtype][1], plan.base, kept_stride, n_kept, n_reduced, step)
    if plan.single_block:
        if dtype not in FLOAT_BITS:
            return "int_blocks_log_sum_exp", (plan.base, *plan.single_block, INT_WIDENING[dtype][1])
        return "float_blocks_log_sum_exp", (FLOAT_BITS[dtype][1], plan.base, *plan.single_block)
    return None


def log_sum_exp_launch(plan: Plan, dtype: np.dtype) -> OneLaunch | None:
    """The OneLaunch of a log-sum-exp whose kernel also finds the maxima: small (serial) ones, single
    runs and single blocks; None for the others, which launch a max kernel and a sum kernel. An
    integer one's kernel returns False where a result does not fit the dtype, and the launch raises."""
    fused = _fused_log_sum_exp(plan, dtype)
    if fused is not None:
        name, args = fused
        if dtype not in FLOAT_BITS:
            return OneLaunch(table.KERNELS[name], True, args, dtype, dtype,
                             undecided=Undecided)
        return OneLaunch(table.KERNELS[name], True, args, RESULT_DTYPE[dtype], dtype, keys=FLOAT_BITS[dtype][0])
    if plan.parallel:
        return None
    if dtype not in FLOAT_BITS:
        return OneLaunch((serial.int_log_sum_exp(), None), False,
                         (plan.base, plan.dims, plan.kept_ndim, plan.n_reduced, INT_WIDENING[dtype][1]),
                         dtype, dtype, undecided=Undecided)
    key_dtype, inf_bits = FLOAT_BITS[dtype]
    return OneLaunch((serial.float_log_sum_exp(dtype.char == "d"), None), False,
                     (inf_bits, plan.base, plan.dims, plan.kept_ndim), RESULT_DTYPE[dtype], dtype, keys=key_dtype)


def mean(plan: Plan, src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype in FLOAT_BITS:
        float64 = dtype.char == "d"
        means, finite = _float_sums(plan, src, base.SUM, divisor=plan.n_reduced, result_dtype=RESULT_DTYPE[dtype],
                                    check_finite=float64)
        if float64 and not finite:  # inf/NaN inputs or an overflowing sum of finite values
            # The rescaled sums cannot overflow, so where a result is not finite theirs is the right
            # one: finite for finite values, and for an infinity among values whose sum overflowed
            # the other way, that infinity ([-1.7e308, -1.7e308, inf] had come out NaN: -inf + inf).
            rescaled = _float_sums(plan, src, base.SUM, _MEAN_RESCALE, divisor=plan.n_reduced)[0] / _MEAN_RESCALE
            means = np.where(np.isfinite(means), means, rescaled)
        return _as_dtype(means, dtype)
    result = np.empty(plan.n_kept, dtype=dtype)
    if _int_mean_by_float_tiles(plan, dtype):
        _run_float_sums(plan, src, base.SUM, result, divisor=plan.n_reduced)
    else:
        _int_sums(plan, src, False, result)
    return result


def sum_square(plan: Plan, src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype in FLOAT_BITS:
        sums = _float_sums(plan, src, base.SUM_SQUARES, result_dtype=RESULT_DTYPE[dtype])[0]
        return _as_dtype(sums, dtype)
    result = np.empty(plan.n_kept, dtype=dtype)
    _int_sums(plan, src, True, result)
    return result


def log_sum_exp(plan: Plan, src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    fused = _fused_log_sum_exp(plan, dtype)
    if fused is not None:
        name, args = fused
        if dtype not in FLOAT_BITS:
            result = np.empty(plan.n_kept, dtype=dtype)
            if not _launch(name, plan, src, *args, result):
                raise Undecided
            return result
        result = np.empty(plan.n_kept, dtype=RESULT_DTYPE[dtype])
        _launch(name, plan, src, src.view(FLOAT_BITS[dtype][0]), *args, result)
        return _as_dtype(result, dtype)
    if dtype in FLOAT_BITS:
        result = np.empty(plan.n_kept, dtype=RESULT_DTYPE[dtype])
        if not plan.parallel:
            key_dtype, inf_bits = FLOAT_BITS[dtype]
            serial.float_log_sum_exp(dtype.char == "d")(src, src.view(key_dtype), inf_bits, plan.base, plan.dims,
                                                        plan.kept_ndim, result)
        else:
            _run_float_sums(plan, src, base.SUM_EXP, result, maxima=_maxima(plan, src, dtype))
        return _as_dtype(result, dtype)
    wide, type_max = INT_WIDENING[dtype]
    if not plan.parallel:  # the kernel stores results that fit into the input dtype itself
        result = np.empty(plan.n_kept, dtype=dtype)
        if not serial.int_log_sum_exp()(src, plan.base, plan.dims, plan.kept_ndim, plan.n_reduced, type_max, result):
            raise Undecided
        return result
    result = np.empty(plan.n_kept, dtype=wide)
    fits_each = np.empty(plan.n_kept, dtype=np.bool_)
    maxima = _maxima(plan, src, dtype)
    # one chunk per output: the kernel finishes the results itself (no partials)
    totals = _NO_PARTIALS if plan.nchunks == 1 else np.empty(_tasks(plan))
    _launch("int_sum_exp", plan, *_geometry(plan, src), plan.tile, maxima, totals, plan.n_reduced, type_max,
            result, fits_each)
    if plan.nchunks > 1:
        finish.finish_int_log_sum_exp(maxima, totals, plan.nchunks, plan.n_reduced, type_max, result, fits_each)
    if not fits_each.all():
        raise Undecided
    return result.astype(dtype)


class Undecided(Exception):
    """An integer log-sum-exp kernel returned a result it could not decide in float64 (a log within
    rounding of an integer) or one that does not fit the dtype: the front end computes the call
    again exactly (numred._exact), which gives the result or the ValueError of one that does not fit."""


def int_log_sum_exp_overflow(dtype: np.dtype) -> ValueError:
    """The error of an integer log-sum-exp whose result does not fit ``dtype``."""
    return ValueError(
        f"ReduceLogSumExp: the result does not fit in {dtype} (largest value {INT_WIDENING[dtype][1]}); "
        "integer results are not clamped"
    )
