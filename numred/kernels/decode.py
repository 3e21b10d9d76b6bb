"""Element decoding: carrier elements to float64 (float16 bits, through F16C where the CPU has it;
bfloat16 bits, two per 32-bit load), integers widened to 64 bits or read as their bits.
"""
from __future__ import annotations

import numpy as np
from numba import types
from llvmlite import ir
from numba.extending import intrinsic

from .jit import subroutine, subroutine_by_type
from .base import (FASTMATH, SUM, SUM_SQUARES, _U64, _bits_to_float32, _bits_to_float64, _float32_to_bits,
                   _float64_to_bits)

_HALF_REBIAS = 2.0**1008  # 2**(1023 - 15): float64 exponent bias minus float16's


def _half_bits_to_float64(h):
    # (compiled into as_float64's callers, strict, without F16C) IEEE binary16 -> float64 with integer operations and one exact multiply, without branches so
    # that loops over float16 data vectorise. LLVM's half type crashes (a segfault) on CPUs
    # without F16C. Subnormals, inf and NaN (with its payload) come out bit-exact. (The same in 32-bit
    # lanes with a float32 multiply is slower.)
    h64 = _U64(h)
    magnitude = h64 & _U64(0x7FFF)
    sign = (h64 & _U64(0x8000)) << _U64(48)
    # A half's exponent and mantissa fields moved into float64's read as 2**-1008 times its value,
    # for normal and subnormal halves alike.
    finite = _bits_to_float64(np.int64(magnitude << _U64(42))) * _HALF_REBIAS
    special = _U64(0x7FF0000000000000) | ((magnitude & _U64(0x3FF)) << _U64(42))  # inf, NaN
    bits = special if magnitude >= _U64(0x7C00) else _U64(_float64_to_bits(finite))
    return _bits_to_float64(np.int64(bits | sign))


def _cpu_has(feature: str) -> bool:
    """Whether the CPU Numba compiles for has ``feature`` (LLVM's name: "f16c", "fma"). Numba targets
    the host CPU unless NUMBA_CPU_NAME / NUMBA_CPU_FEATURES name another; its disk cache is keyed by
    the CPU too."""
    from numba.core import config
    if config.CPU_NAME or config.CPU_FEATURES:
        return f"+{feature}" in (config.CPU_FEATURES or "").split(",")
    from llvmlite import binding
    return bool(binding.get_host_cpu_features().get(feature, False))


# With F16C, LLVM's half type converts with one vector instruction; without it, it crashes (a segfault).
CPU_CONVERTS_HALVES = _cpu_has("f16c")


@intrinsic
def as_float64(typingctx, x):
    """The float64 value of one element of a float carrier array (typed per dtype at compile time),
    lowered in place: as an overload, Numba compiled it in every process, per dtype, on a first call
    (about 35 ms)."""
    x = types.unliteral(x)
    if x in (types.float32, types.float64, types.int32, types.uint32):  # 32-bit integers: exact

        def codegen(context, builder, signature, args):
            return context.cast(builder, args[0], x, types.float64)

    elif x == types.uint16:  # float16 bits
        if CPU_CONVERTS_HALVES:  # LLVM's half type (F16C's vcvtph2ps): faster than the integer decode

            def codegen(context, builder, signature, args):
                return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.DoubleType())

        else:

            def codegen(context, builder, signature, args):
                return context.compile_internal(builder, _half_bits_to_float64, signature, args)

    elif x == types.int16:  # bfloat16 bits: the top half of a float32

        def codegen(context, builder, signature, args):
            float32_bits = builder.shl(builder.zext(args[0], ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
            return builder.fpext(builder.bitcast(float32_bits, ir.FloatType()), ir.DoubleType())

    else:
        return None
    return types.float64(x), codegen


@intrinsic
def _pair_bits(typingctx, run, index):
    """run[index] and run[index + 1], two 16-bit elements of a contiguous run, as the one uint32
    they make in memory (no bounds check, as Numba's own indexing). A view of the run as uint32
    inside a kernel cost more per row than it saved."""
    if not (isinstance(run, types.Array) and run.ndim == 1 and run.layout == "C" and run.dtype == types.int16):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        pointer = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(32).as_pointer())
        return builder.load(pointer, align=2)

    return types.uint32(run, index), codegen


@subroutine_by_type(fastmath=False)
def as_float32_bits(x):
    """A narrow float element's value as float32 bits (uint32), exactly: float32 as it is, bfloat16
    (the top half of a float32) shifted into place, float16 converted (every float16 is a float32,
    its subnormals normal ones)."""
    if x == types.float32:
        return lambda x: _float32_to_bits(x)
    if x == types.int16:  # bfloat16 bits
        return lambda x: np.uint32(np.uint16(x)) << np.uint32(16)
    if x == types.uint16:  # float16 bits
        return lambda x: _float32_to_bits(np.float32(as_float64(x)))
    return None


@subroutine_by_type(fastmath=False)
def as_wide(x):
    """An integer element widened to int64 (signed types) or uint64 (unsigned types)."""
    if isinstance(x, types.Integer):
        return (lambda x: np.int64(x)) if x.signed else (lambda x: np.uint64(x))
    return None


@subroutine_by_type(fastmath=False)
def as_bits(x):
    """The two's-complement bits of an integer element as uint64: wrapping arithmetic is defined in
    unsigned types only (signed add/mul carry LLVM's nsw flag)."""
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.uint64(np.int64(x))
        return lambda x: np.uint64(x)
    return None


@subroutine_by_type(fastmath=False)
def pair_values(run, index):
    """The float64 values of bfloat16 elements run[index] and run[index + 1]: each is the top half
    of a float32, so one 32-bit load, a shift and a mask decode both (half the loads of one element
    per load). Which one comes first depends on byte order, and the sums do
    not. Defined for bfloat16 bits (int16) only."""
    if run.dtype != types.int16:
        return None

    def values(run, index):
        word = _pair_bits(run, index)
        return (np.float64(_bits_to_float32(word << np.uint32(16))),
                np.float64(_bits_to_float32(word & np.uint32(0xFFFF0000))))

    return values


# FASTMATH is safe in these: a bfloat16 value's square is exact in float64, so a fused multiply-add
# rounds as the separate operations would, and bfloat16 sums of squares take fewer instructions.
@subroutine(fastmath=FASTMATH)
def _pair_sum(run, index):
    low, high = pair_values(run, index)
    return low + high


@subroutine(fastmath=FASTMATH)
def _pair_square_sum(run, index):
    low, high = pair_values(run, index)
    return low * low + high * high


@subroutine(fastmath=FASTMATH)
def _pair_abs_sum(run, index):
    low, high = pair_values(run, index)
    return abs(low) + abs(high)


@subroutine_by_type(fastmath=FASTMATH)
def pair_sums(run, n, squares, shift):
    """(sum, n_read): the float64 sum (of x * shift, or of x * x with ``squares``) of the first
    ``n_read`` elements of a contiguous run of ``n``, read two elements per load (pair_values), and
    n_read, the even part of ``n``. Only bfloat16 elements are read in pairs (their per-element decode
    is integer work); for every other element type nothing is read here, (0.0, 0), and the caller's
    per-element loop reads the whole run. The type decides at compile time, so other dtypes' kernels
    hold no pair code."""
    if run.dtype != types.int16:
        return lambda run, n, squares, shift: (0.0, 0)

    def sums(run, n, squares, shift):
        total = 0.0
        if not squares:  # shift is a power of two: scaling the sum rounds as scaling each term would
            for p in range(n // 2):
                total += _pair_sum(run, 2 * p)
            total *= shift
        else:
            for p in range(n // 2):
                total += _pair_square_sum(run, 2 * p)
        return total, n - n % 2

    return sums


@subroutine_by_type(fastmath=FASTMATH)
def pair_sums4(a, b, c, d, n, term, shift):
    """pair_sums of four runs of ``n`` elements read together (four memory streams), of the terms
    x * shift (SUM), x * x (SUM_SQUARES) or |x| (SUM_ABS): (s0, s1, s2, s3, n_read)."""
    if a.dtype != types.int16:
        return lambda a, b, c, d, n, term, shift: (0.0, 0.0, 0.0, 0.0, 0)

    def sums(a, b, c, d, n, term, shift):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        if term == SUM:
            for p in range(n // 2):
                s0 += _pair_sum(a, 2 * p)
                s1 += _pair_sum(b, 2 * p)
                s2 += _pair_sum(c, 2 * p)
                s3 += _pair_sum(d, 2 * p)
            s0, s1, s2, s3 = s0 * shift, s1 * shift, s2 * shift, s3 * shift
        elif term == SUM_SQUARES:
            for p in range(n // 2):
                s0 += _pair_square_sum(a, 2 * p)
                s1 += _pair_square_sum(b, 2 * p)
                s2 += _pair_square_sum(c, 2 * p)
                s3 += _pair_square_sum(d, 2 * p)
        else:
            for p in range(n // 2):
                s0 += _pair_abs_sum(a, 2 * p)
                s1 += _pair_abs_sum(b, 2 * p)
                s2 += _pair_abs_sum(c, 2 * p)
                s3 += _pair_abs_sum(d, 2 * p)
        return s0, s1, s2, s3, n - n % 2

    return sums
