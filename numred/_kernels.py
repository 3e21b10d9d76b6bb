"""Numba kernels. They validate nothing: the front end (``_frontend``) and the plan (``_plan``) hand
them a consistent "kept x reduced" description of the input, and they compute.

Every kernel has the same shape of work: ``nk`` outputs, each reduced over ``nr`` elements. The
reduced range of one output may be cut into ``nchunks`` contiguous pieces so that a few large
outputs still keep every thread busy; a task is one (output, chunk) pair and writes one partial
result. A serial ``_finish_*`` function then combines the partials of each output in chunk order,
so results do not depend on how tasks were scheduled.

The input arrives as ``src``: a 1-D contiguous view of the memory the input spans, in a *carrier*
dtype Numba can load (float16 as uint16 bits, bfloat16 as int16 bits, see ``as_float64``), plus
element offsets and strides. ``base`` is the offset of the first element of the input.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic, overload

# reassociation lets LLVM vectorise the sums; fastmath=True would also assume no NaN/inf and
# delete exactly the checks the contract depends on.
FASTMATH = {"reassoc", "contract"}
# Length of the pieces summed with a plain (vectorised) float64 loop; the pieces are then added with
# compensated (Neumaier) summation, which keeps float64 inputs at least as exact as NumPy's pairwise sum.
BLOCK = 256

_U64 = np.uint64


# ---------------------------------------------------------------------------------------------
# element decoding
# ---------------------------------------------------------------------------------------------
@intrinsic
def _bits_to_float32(typingctx, bits):
    sig = types.float32(types.uint32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return sig, codegen


@njit
def _half_bits_to_float64(h):
    # IEEE binary16 -> float64 with integer operations only: LLVM's half type crashes on CPUs
    # without F16C (DESIGN.md), and this form covers subnormals, inf and NaN bit-exactly.
    h32 = np.uint32(h)
    sign = (h32 & np.uint32(0x8000)) << np.uint32(16)
    magnitude = h32 & np.uint32(0x7FFF)
    if magnitude >= np.uint32(0x7C00):  # inf or NaN: all-ones exponent, payload kept
        bits = sign | np.uint32(0x7F800000) | ((magnitude & np.uint32(0x3FF)) << np.uint32(13))
        return np.float64(_bits_to_float32(bits))
    if magnitude >= np.uint32(0x0400):  # normal: rebias the exponent by 127 - 15 = 112
        bits = sign | ((magnitude << np.uint32(13)) + np.uint32(112 << 23))
        return np.float64(_bits_to_float32(bits))
    value = np.float64(magnitude) * 5.9604644775390625e-08  # subnormal: magnitude * 2**-24, exact
    return -value if sign else value


def as_float64(x):
    """The float64 value of one element of a float carrier array (typed per dtype at compile time)."""


@overload(as_float64)
def _as_float64_impl(x):
    if x in (types.float32, types.float64):
        return lambda x: np.float64(x)
    if x == types.uint16:  # float16 bits
        return lambda x: _half_bits_to_float64(x)
    if x == types.int16:  # bfloat16 bits: the top half of a float32
        return lambda x: np.float64(_bits_to_float32(np.uint32(np.uint16(x)) << np.uint32(16)))
    return None


def as_wide(x):
    """An integer element widened to int64 (signed types) or uint64 (unsigned types)."""


@overload(as_wide)
def _as_wide_impl(x):
    if isinstance(x, types.Integer):
        return (lambda x: np.int64(x)) if x.signed else (lambda x: np.uint64(x))
    return None


def as_bits(x):
    """The two's-complement bits of an integer element as uint64: wrapping arithmetic is defined in
    unsigned types only (signed add/mul carry LLVM's nsw flag)."""


@overload(as_bits)
def _as_bits_impl(x):
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.uint64(np.int64(x))
        return lambda x: np.uint64(x)
    return None


def sign_word(x):
    """The high 64 bits of an integer element sign-extended to 128 bits."""


@overload(sign_word)
def _sign_word_impl(x):
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.uint64(np.int64(x) >> np.int64(63))
        return lambda x: np.uint64(0)
    return None


# ---------------------------------------------------------------------------------------------
# index helpers
# ---------------------------------------------------------------------------------------------
@njit
def _offset_of(index, shape, strides):
    """Element offset of the C-order flat ``index`` into a block of dimensions (shape, strides)."""
    offset = 0
    for d in range(shape.size - 1, -1, -1):
        n = shape[d]
        offset += (index % n) * strides[d]
        index //= n
    return offset


@njit
def _task_range(task, nchunks, nr):
    """(output index, first and end reduced position) of one task."""
    k = task // nchunks
    c = task - k * nchunks
    return k, nr * c // nchunks, nr * (c + 1) // nchunks


@njit
def _neumaier(total, compensation, value):
    t = total + value
    if abs(total) >= abs(value):
        compensation += (total - t) + value
    else:
        compensation += (value - t) + total
    return t, compensation


@njit
def _compensated_result(total, compensation):
    # Once the running total is inf or NaN, the compensation holds inf - inf garbage; the total is
    # then already the IEEE answer.
    return total + compensation if math.isfinite(total) else total


# ---------------------------------------------------------------------------------------------
# float pieces: one strided run of at most BLOCK elements -> float64
# ---------------------------------------------------------------------------------------------
SUM, SUM_SQUARES, SUM_EXP = 0, 1, 2


@njit(fastmath=FASTMATH)
def _float_run(src, offset, n, step, mode, shift):
    """mode SUM: sum of x * shift (shift is a power of two); SUM_SQUARES: sum of x*x;
    SUM_EXP: sum of exp(x - shift)."""
    acc = 0.0
    if mode == SUM:
        if step == 1:
            for i in range(n):
                acc += as_float64(src[offset + i]) * shift
        else:
            for i in range(n):
                acc += as_float64(src[offset + i * step]) * shift
    elif mode == SUM_SQUARES:
        if step == 1:
            for i in range(n):
                v = as_float64(src[offset + i])
                acc += v * v
        else:
            for i in range(n):
                v = as_float64(src[offset + i * step])
                acc += v * v
    else:
        if step == 1:
            for i in range(n):
                acc += math.exp(as_float64(src[offset + i]) - shift)
        else:
            for i in range(n):
                acc += math.exp(as_float64(src[offset + i * step]) - shift)
    return acc


def float_sums(src, base, kshape, kstrides, rshape, rstrides, nchunks, mode, shifts, out_total, out_comp):
    """Compensated float64 sums per task; ``shifts[k]`` is the scale (SUM) or the max (SUM_EXP)."""
    nk = np.prod(kshape)
    nr = np.prod(rshape)
    run_length = rshape[-1]
    step = rstrides[-1]
    for task in prange(nk * nchunks):
        k, pos, end = _task_range(task, nchunks, nr)
        shift = shifts[k]
        origin = base + _offset_of(k, kshape, kstrides)
        total = 0.0
        comp = 0.0
        if mode != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
            while pos < end:
                offset = origin + _offset_of(pos, rshape, rstrides)
                n = min(run_length - pos % run_length, end - pos)
                for b in range(0, n, BLOCK):
                    piece = _float_run(src, offset + b * step, min(BLOCK, n - b), step, mode, shift)
                    total, comp = _neumaier(total, comp, piece)
                pos += n
        out_total[task] = total
        out_comp[task] = comp


def float_max(src, base, kshape, kstrides, rshape, rstrides, nchunks, out_max):
    """Max per task as float64; NaN wins (the contract: any NaN gives NaN)."""
    nk = np.prod(kshape)
    nr = np.prod(rshape)
    run_length = rshape[-1]
    step = rstrides[-1]
    for task in prange(nk * nchunks):
        k, pos, end = _task_range(task, nchunks, nr)
        origin = base + _offset_of(k, kshape, kstrides)
        best = -np.inf
        while pos < end:
            offset = origin + _offset_of(pos, rshape, rstrides)
            n = min(run_length - pos % run_length, end - pos)
            for i in range(n):
                v = as_float64(src[offset + i * step])
                if v > best or v != v:
                    best = v
                if best != best:
                    break
            if best != best:
                break
            pos += n
        out_max[task] = best


# ---------------------------------------------------------------------------------------------
# integer kernels
# ---------------------------------------------------------------------------------------------
def int_sums(src, base, kshape, kstrides, rshape, rstrides, nchunks, squares, out_low, out_high):
    """squares=False: exact 128-bit two's-complement sum (low, high words);
    squares=True: sum of x*x modulo 2**64 (low word only)."""
    nk = np.prod(kshape)
    nr = np.prod(rshape)
    run_length = rshape[-1]
    step = rstrides[-1]
    for task in prange(nk * nchunks):
        k, pos, end = _task_range(task, nchunks, nr)
        origin = base + _offset_of(k, kshape, kstrides)
        low = _U64(0)
        high = _U64(0)
        while pos < end:
            offset = origin + _offset_of(pos, rshape, rstrides)
            n = min(run_length - pos % run_length, end - pos)
            if squares:
                for i in range(n):
                    bits = as_bits(src[offset + i * step])
                    low += bits * bits
            else:
                for i in range(n):
                    x = src[offset + i * step]
                    new_low = low + as_bits(x)
                    high += sign_word(x) + _U64(new_low < low)
                    low = new_low
            pos += n
        out_low[task] = low
        out_high[task] = high


def int_max(src, base, kshape, kstrides, rshape, rstrides, nchunks, out_max):
    """Max per task, widened to int64/uint64 (``out_max`` has that dtype)."""
    nk = np.prod(kshape)
    nr = np.prod(rshape)
    run_length = rshape[-1]
    step = rstrides[-1]
    for task in prange(nk * nchunks):
        k, pos, end = _task_range(task, nchunks, nr)
        origin = base + _offset_of(k, kshape, kstrides)
        best = as_wide(src[origin + _offset_of(pos, rshape, rstrides)])
        while pos < end:
            offset = origin + _offset_of(pos, rshape, rstrides)
            n = min(run_length - pos % run_length, end - pos)
            for i in range(n):
                best = max(best, as_wide(src[offset + i * step]))
            pos += n
        out_max[task] = best


def int_sum_exp(src, base, kshape, kstrides, rshape, rstrides, nchunks, maxima, out_total):
    """Sum of exp(x - max) per task; x - max is taken exactly as a uint64 distance."""
    nk = np.prod(kshape)
    nr = np.prod(rshape)
    run_length = rshape[-1]
    step = rstrides[-1]
    for task in prange(nk * nchunks):
        k, pos, end = _task_range(task, nchunks, nr)
        origin = base + _offset_of(k, kshape, kstrides)
        top = as_bits(maxima[k])
        total = 0.0
        while pos < end:
            offset = origin + _offset_of(pos, rshape, rstrides)
            n = min(run_length - pos % run_length, end - pos)
            for i in range(n):
                distance = top - as_bits(src[offset + i * step])  # exact: max >= x
                total += math.exp(-np.float64(distance))
            pos += n
        out_total[task] = total


# Two compiled variants of each kernel: a parallel launch costs microseconds (DESIGN.md), so small
# inputs take the serial one. The compensated steps must not be reassociated, so only the inner
# _float_run carries FASTMATH.
KERNELS = {
    fn.__name__: (njit(fn), njit(fn, parallel=True))
    for fn in (float_sums, float_max, int_sums, int_max, int_sum_exp)
}


# ---------------------------------------------------------------------------------------------
# combining partials (serial; work proportional to the output)
# ---------------------------------------------------------------------------------------------
@njit
def finish_float_sums(out_total, out_comp, nchunks, result):
    for k in range(result.size):
        total = 0.0
        comp = 0.0
        for c in range(k * nchunks, (k + 1) * nchunks):
            total, comp = _neumaier(total, comp, out_total[c])
            comp += out_comp[c]
        result[k] = _compensated_result(total, comp)


@njit
def finish_max(out_max, nchunks, result):
    for k in range(result.size):
        best = out_max[k * nchunks]
        for c in range(k * nchunks + 1, (k + 1) * nchunks):
            v = out_max[c]
            if v > best or v != v:
                best = v
            if best != best:
                break
        result[k] = best


@njit
def finish_int_mean(out_low, out_high, nchunks, count, result):
    """Exact mean truncated toward zero, as uint64 two's-complement bits."""
    count = _U64(count)
    for k in range(result.size):
        low = _U64(0)
        high = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            new_low = low + out_low[c]
            high += out_high[c] + _U64(new_low < low)
            low = new_low
        negative = (high >> _U64(63)) != _U64(0)
        if negative:  # magnitude of the 128-bit value
            low = ~low + _U64(1)
            high = ~high + _U64(low == _U64(0))
        # |sum| / count: the quotient fits 64 bits (a mean lies within the dtype's range), so
        # high < count and a 64-step long division of (high, low) finishes it.
        remainder = high
        quotient = _U64(0)
        for bit in range(63, -1, -1):
            remainder = (remainder << _U64(1)) | ((low >> _U64(bit)) & _U64(1))
            quotient <<= _U64(1)
            if remainder >= count:
                remainder -= count
                quotient |= _U64(1)
        result[k] = _U64(0) - quotient if negative else quotient


@njit
def finish_int_squares(out_low, nchunks, result):
    for k in range(result.size):
        total = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            total += out_low[c]
        result[k] = total


def cast_like(template, x):
    """x converted to the Numba type of ``template``."""


@overload(cast_like)
def _cast_like_impl(template, x):
    target = template
    return lambda template, x: target(x)


@njit
def finish_int_log_sum_exp(maxima, out_total, nchunks, type_max, result, fits):
    """trunc(max + log(sum)) exactly, in the widened type of ``maxima``; ``fits[k]`` is False where
    the true result exceeds ``type_max`` (the largest value of the input dtype)."""
    for k in range(result.size):
        total = 0.0
        for c in range(k * nchunks, (k + 1) * nchunks):
            total += out_total[c]
        tail = math.log(total)  # >= 0: the max itself contributes exp(0) = 1
        m = maxima[k]
        whole = cast_like(m, math.floor(tail))
        fits[k] = True
        if m >= 0 or m + whole >= 0:
            # non-negative: truncation is floor, so m + floor(tail), if the dtype holds it
            if m > type_max - whole:
                fits[k] = False
                result[k] = type_max
            else:
                result[k] = m + whole
        else:
            # negative: truncation toward zero rounds a fractional tail up
            result[k] = m + whole + cast_like(m, tail > math.floor(tail))
