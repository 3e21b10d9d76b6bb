"""Finishing and storing a result: the one rounding from the float64 value to the output dtype
(float32, float64, float16 and bfloat16 bits, integers), the finish of a compensated sum
(divide, or max + log), and the operators' finish steps (square root, log) before the rounding.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .base import BLOCK, LOG, NEVER, SQRT, SUM_EXP, _float32_to_bits, larger
from .jit import subroutine, subroutine_by_type
from .states import compensated_value


@subroutine_by_type(fastmath=False)
def compensation_block(src):
    """How many terms a plain float64 accumulator may take before it is folded into the compensated
    total: 256 for float64 data (column sums of tiles, and exp sums; its sums along runs are nearly
    exact instead, _float64_run_for); for narrower floats a float64 accumulator is already far more exact
    than the output, so never."""
    if src.dtype == types.float64:
        return lambda src: BLOCK
    return lambda src: NEVER


@subroutine(fastmath=False)
def _round_to_odd_float32_bits(value):
    """The bits of float64 ``value`` (not NaN) rounded to float32 with round-to-odd: inexact results
    get an odd last bit; beyond float32's range, the largest finite value. Rounding those once more,
    to a format of at most 11 significant bits, rounds ``value`` itself correctly, where plain
    rounding through float32 would round twice (ml_dtypes rounds float64 -> bfloat16 that way)."""
    nearest = np.float32(value)  # beyond float32's range, inf
    word = _float32_to_bits(nearest)
    wide = np.float64(nearest)
    if wide != value and math.isfinite(value):  # inexact: step to the odd neighbour toward zero
        if abs(wide) > abs(value):
            word -= np.uint32(1)  # sign-magnitude: toward zero is one less on the magnitude
        word |= np.uint32(1)
    return word


@subroutine(fastmath=False)
def _float32_bits_to_half_bits(word):
    """float32 bits (not NaN) -> float16 bits, rounded to nearest-even, in integer arithmetic."""
    sign = (word >> np.uint32(16)) & np.uint32(0x8000)
    magnitude = word & np.uint32(0x7FFFFFFF)
    if magnitude >= np.uint32(0x47800000):  # 2**16 or more: inf
        return np.uint16(sign | np.uint32(0x7C00))
    if magnitude >= np.uint32(0x38800000):  # a normal half (from 2**-14): rebias, round on the bits;
        # a carry out of the mantissa steps the exponent, up to inf for [65520, 65536)
        odd = (magnitude >> np.uint32(13)) & np.uint32(1)
        return np.uint16(sign | ((magnitude - np.uint32(112 << 23) + np.uint32(0xFFF) + odd) >> np.uint32(13)))
    # a subnormal half or zero: the significand in units of 2**-24, shifted with ties to even
    exponent = larger(np.int64(magnitude >> np.uint32(23)), 1)
    significand = np.uint64(magnitude & np.uint32(0x7FFFFF))
    if magnitude >= np.uint32(0x800000):
        significand |= np.uint64(0x800000)  # the implicit bit of a normal float32
    shift = 126 - exponent  # at least 14
    if shift > 40:
        return np.uint16(sign)
    odd = (significand >> np.uint64(shift)) & np.uint64(1)
    half = (significand + (np.uint64(1) << np.uint64(shift - 1)) - np.uint64(1) + odd) >> np.uint64(shift)
    return np.uint16(sign | np.uint32(half))


def _store_half(result, k, value):
    if math.isnan(value):
        result[k] = np.uint16(0x7E00)
    else:
        result[k] = _float32_bits_to_half_bits(_round_to_odd_float32_bits(value))


def _store_bfloat16(result, k, value):
    if math.isnan(value):
        result[k] = np.int16(0x7FC0)
    else:
        word = _round_to_odd_float32_bits(value)
        result[k] = np.int16(np.uint16(
            (word + np.uint32(0x7FFF) + ((word >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)))


def _store_truncated(result, k, value):
    result[k] = np.int64(value)  # float -> int truncates toward zero


@intrinsic
def store_rounded(typingctx, result, k, value):
    """result[k] = float64 ``value`` rounded once to the output dtype. float32 and float64 results
    are float arrays (the store rounds). float16 and bfloat16 results travel as their bits, in the
    carrier dtypes of the input (uint16: float16, int16: bfloat16), rounded here; ml_dtypes would
    round bfloat16 through float32, twice, and NumPy passes over small results cost microseconds.
    int32 and uint32 results are the means of 32-bit integer tiles (EXACT_FLOAT_INT_COUNT),
    truncated toward zero. An intrinsic: as an overload, Numba compiled it in every process, per
    dtype, on a first call (25-45 ms); float results are stored in place, the others through their
    Python functions above."""
    if not (isinstance(result, types.Array) and result.ndim == 1 and isinstance(k, types.Integer)
            and value == types.float64):
        return None
    dtype = result.dtype
    store = {types.uint16: _store_half, types.int16: _store_bfloat16, types.int32: _store_truncated,
             types.uint32: _store_truncated}.get(dtype)
    if isinstance(dtype, types.Float):

        def codegen(context, builder, signature, args):
            array = context.make_array(result)(context, builder, args[0])
            index = context.cast(builder, args[1], signature.args[1], types.intp)
            pointer = cgutils.get_item_pointer(context, builder, result, array, [index])
            context.pack_value(builder, dtype, context.cast(builder, args[2], types.float64, dtype), pointer)
            return context.get_dummy_value()

    elif store is not None:

        def codegen(context, builder, signature, args):
            return context.compile_internal(builder, store, signature, args)

    else:
        return None
    return types.none(result, k, value), codegen


@subroutine(fastmath=False)
def _finish_sum(total, comp, term, divisor, maximum):
    """The result of one output from its compensated sum: sum / divisor (SUM, SUM_SQUARES), or
    max + log(sum) for SUM_EXP, where a non-finite max (NaN, +inf, or -inf for an all -inf set) is
    the answer itself. Stored into the result array, it is rounded once to its dtype."""
    value = compensated_value(total, comp)
    if term == SUM_EXP:
        return maximum + math.log(value) if math.isfinite(maximum) else maximum
    return value / divisor


@intrinsic
def _kept_in_place(typingctx, value):
    """``value`` (float64) passed through an empty inline-assembly statement that has side effects,
    which LLVM may neither move out of its branch nor execute where the code does not ask for it;
    nor anything computed from its result. math.log compiles to the ``llvm.log`` intrinsic, which
    LLVM may execute speculatively: in the code saved to the disk cache, where each kernel's helpers
    are optimised together with it, it vectorised store loops whose finish step is a runtime argument
    (finished) into a call of libm's log for every output, whatever the step, and for negative sums
    too, which glibc answers through its slow error path, so that such a kernel loaded from the cache
    ran far slower than the same kernel compiled in the process. (A call of libm's ``log`` by name
    is no help: LLVM turns it into the intrinsic.)"""

    def codegen(context, builder, signature, args):
        word = ir.IntType(64)
        kept = builder.asm(ir.FunctionType(word, [word]), "", "=r,0", [builder.bitcast(args[0], word)],
                           side_effect=True)
        return builder.bitcast(kept, ir.DoubleType())

    if value != types.float64:
        return None
    return types.float64(types.float64), codegen


@subroutine(fastmath=False)
def finished(value, finish):
    """One output's float64 sum (a mean's already divided) finished as its operator finishes it before
    the one rounding: as it is (0, or ROUND: ReduceL1), its square root (SQRT: ReduceL2) or its log
    (LOG: ReduceLogSum).
    ``finish`` is a runtime argument of the sum kernels, not a constant: ReduceL2 and ReduceLogSum of
    float32, float16 and bfloat16 data run the kernels of ReduceSumSquare and ReduceSum (a float64
    sum of those squares or values neither overflows nor loses bits), and compile none of their own."""
    if finish == SQRT:
        return math.sqrt(value)
    if finish == LOG:  # (math.log raises on 0 and negative values: -inf and NaN, as np.log gives them)
        if value > 0.0:
            return math.log(_kept_in_place(value))
        return -math.inf if value == 0.0 else math.nan
    return value
