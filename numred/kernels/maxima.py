"""Maxima: float data is compared on integer keys of its bits (an integer max vectorises, a float
max that keeps NaN does not), with NaNs found from the magnitudes; integer data directly. The max
functions are made per float or integer data (``float_bits``, a constant).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit, types
from llvmlite import ir
from numba.extending import intrinsic, overload

from .jit import subroutine_by_type
from .base import FASTMATH, _bits_to_float32, _bits_to_float64, _constant, _view, call_part, larger, njit_for
from .decode import as_float64
from .reading import STREAMS_MIN_RUN


# float_key, lowest_key, flipped and magnitude_bits are integer operations lowered in place
# (intrinsics): as overloads, Numba compiled each in every process, per type, on a first call (about
# 25 ms each, and a max kernel used four or five).
def _signed_magnitude_mask(value):
    """The constant with every bit of ``value``'s LLVM integer type set but the sign bit."""
    return ir.Constant(value.type, (1 << (value.type.width - 1)) - 1)


@intrinsic
def float_key(typingctx, x):
    """For float data read through a signed integer view of its bits: a key of the same integer type
    whose order is the order of the float values (sign-magnitude turned into two's complement).
    Integer max vectorises; a float max that keeps NaN does not (LLVM wants no-NaN flags for that),
    so float maxima are taken on these keys and NaNs are found on the side (magnitude_bits). Keys stay
    as narrow as the data: AVX2 has a max for 8-, 16- and 32-bit lanes but none for 64-bit ones, and
    16-bit keys fill a vector with 16 elements. Defined for signed carriers only: float data is always
    viewed as signed integers, and the max kernels for integer data (_max_run_for(False)) hold no key
    code."""
    if not (isinstance(x, types.Integer) and x.signed):
        return None  # unsigned carriers hold integer data, never float bits
    x = types.unliteral(x)

    def codegen(context, builder, signature, args):
        (value,) = args
        sign_fill = builder.ashr(value, ir.Constant(value.type, value.type.width - 1))
        return builder.xor(value, builder.and_(sign_fill, _signed_magnitude_mask(value)))

    return x(x), codegen


@intrinsic
def lowest_key(typingctx, x):
    """The smallest value of the integer type of x (a start for a max)."""
    if not isinstance(x, types.Integer):
        return None
    x = types.unliteral(x)

    def codegen(context, builder, signature, args):
        return context.get_constant(x, -(1 << (x.bitwidth - 1)) if x.signed else 0)

    return x(x), codegen


@intrinsic
def flipped(typingctx, key, flip):
    """``key ^ flip`` in key's own integer type. A flip of 0 leaves keys as they are; a flip of all
    ones (-1, or the type's max for unsigned keys) reverses their order, so that the max of flipped
    keys is the flipped min: ReduceMin runs the max kernels, at the cost of one xor per element."""
    if not (isinstance(key, types.Integer) and isinstance(flip, types.Integer)):
        return None
    key = types.unliteral(key)

    def codegen(context, builder, signature, args):
        return builder.xor(args[0], context.cast(builder, args[1], signature.args[1], key))

    return key(key, flip), codegen


@intrinsic
def magnitude_bits(typingctx, x):
    """The bits of x without the sign bit, in x's type, for a signed integer view of float bits: a NaN
    is a magnitude above the bits of +inf. Signed carriers only, as float_key."""
    if not (isinstance(x, types.Integer) and x.signed):
        return None
    x = types.unliteral(x)

    def codegen(context, builder, signature, args):
        return builder.and_(args[0], _signed_magnitude_mask(args[0]))

    return x(x), codegen


@functools.cache
def _four_max_runs_for(float_bits):
    """four_max_runs(src, offset, stride, n, flip) -> ((best, top_magnitude),) * 4 of four contiguous
    runs of ``n`` elements from ``offset``, ``stride`` apart, each as max_run from a start of
    lowest_key: the four read side by side, four memory streams, as the sums' four rows together
    (kernels.rows.ROWS_FOUR). One run at a time leaves part of a thread's read bandwidth unused."""

    @njit_for(float_bits, fastmath=FASTMATH)
    def four_max_runs(src, offset, stride, n, flip):
        r0 = _view(src, offset, offset + n)
        r1 = _view(src, offset + stride, offset + stride + n)
        r2 = _view(src, offset + 2 * stride, offset + 2 * stride + n)
        r3 = _view(src, offset + 3 * stride, offset + 3 * stride + n)
        b0 = b1 = b2 = b3 = lowest_key(src[offset])
        t0 = t1 = t2 = t3 = b0  # (passed through for integer values, as max_run's top_magnitude)
        if float_bits:
            t0 = t1 = t2 = t3 = magnitude_bits(b0)
            for i in range(n):
                b0, t0 = larger(b0, flipped(float_key(r0[i]), flip)), larger(t0, magnitude_bits(r0[i]))
                b1, t1 = larger(b1, flipped(float_key(r1[i]), flip)), larger(t1, magnitude_bits(r1[i]))
                b2, t2 = larger(b2, flipped(float_key(r2[i]), flip)), larger(t2, magnitude_bits(r2[i]))
                b3, t3 = larger(b3, flipped(float_key(r3[i]), flip)), larger(t3, magnitude_bits(r3[i]))
        else:
            for i in range(n):
                b0, b1 = larger(b0, flipped(r0[i], flip)), larger(b1, flipped(r1[i], flip))
                b2, b3 = larger(b2, flipped(r2[i], flip)), larger(b3, flipped(r3[i], flip))
        return (b0, t0), (b1, t1), (b2, t2), (b3, t3)

    return four_max_runs


@njit(fastmath=False, inline="always")  # integer maxima only: the caller's fastmath flags change nothing
def max_of_quarters(four_runs, src, offset, n, best, top_magnitude, flip):
    """A contiguous run of ``n`` elements from ``offset`` read as its four quarters side by side by
    ``four_runs`` (a _four_max_runs_for function) and folded into ``best`` and ``top_magnitude`` (as
    max_run keeps them): (offset, n, best, top_magnitude), the offset and count of the last 0-3
    elements, which the caller reads itself."""
    quarter = n // 4
    quarters = four_runs(src, offset, quarter, quarter, flip)
    for j in range(4):
        best, top_magnitude = larger(best, quarters[j][0]), larger(top_magnitude, quarters[j][1])
    return offset + 4 * quarter, n - 4 * quarter, best, top_magnitude


@functools.cache
def _max_run_for(float_bits, long_runs=True):
    """max_run(src, offset, n, step, best, top_magnitude, flip) -> (best, top_magnitude), updated with
    one run: for float keys (``float_bits``, a constant), the max float_key and the largest
    magnitude_bits; for integer values, the max value (top_magnitude is passed through). Keys are
    flipped by ``flip`` first (0 for a max). All in src's own integer type. A contiguous run of 2 *
    STREAMS_MIN_RUN elements or more is read in four quarters side by side (_four_max_runs_for: a max
    does not depend on the order of its elements); without ``long_runs`` (the serial kernels' and the
    row kernels', max_key_run and max_value_run) every run is read in one stream, and the four-stream
    function is left out, with its compile time."""
    four_max_runs = _four_max_runs_for(float_bits)

    @njit_for(float_bits, long_runs, fastmath=FASTMATH)
    def max_run(src, offset, n, step, best, top_magnitude, flip):
        # A contiguous run is read through a view: indexing src[offset + i] keeps a negative-index
        # check per element, and the loop is not vectorised.
        if step == 1:
            if long_runs and n >= 2 * STREAMS_MIN_RUN:  # (the last 0-3 elements, below)
                offset, n, best, top_magnitude = max_of_quarters(four_max_runs, src, offset, n, best,
                                                                 top_magnitude, flip)
            run = _view(src, offset, offset + n)
            if float_bits:
                for i in range(n):
                    best = larger(best, flipped(float_key(run[i]), flip))
                    top_magnitude = larger(top_magnitude, magnitude_bits(run[i]))
            else:
                for i in range(n):
                    best = larger(best, flipped(run[i], flip))
        elif float_bits:
            for i in range(n):
                x = src[offset + i * step]
                best = larger(best, flipped(float_key(x), flip))
                top_magnitude = larger(top_magnitude, magnitude_bits(x))
        else:
            for i in range(n):
                best = larger(best, flipped(src[offset + i * step], flip))
        return best, top_magnitude

    return max_run


four_max_key_runs = _four_max_runs_for(True)
four_max_value_runs = _four_max_runs_for(False)


# The row kernels' runs, each read in one stream: the row kernels read four rows side by side
# through four_max_key_runs, and a long row they take alone as its four quarters through the same
# function (kernels.rows.float_rows_extrema), where QUARTER_LONG_RUNS; with the long runs' function
# inside this loop instead (long_runs), they read float16 rows from memory slower (docs/changes.md).
max_key_run = _max_run_for(True, long_runs=False)
max_value_run = _max_run_for(False, long_runs=False)


# Kernels reach the max_run (these intrinsics) and max_columns (the overload further down) of their
# kind of data through a literal float_bits, not as captured dispatchers: Numba keys a cached kernel by its closure's
# pickled contents, and a dispatcher pickles differently in every process (a disk-cache miss each
# time).
def _max_run_by_kind(long_runs, doc):
    @intrinsic(prefer_literal=True)
    def max_run_by_kind(typingctx, src, offset, n, step, float_bits, best, top_magnitude, flip):
        part = _max_run_for(_constant(float_bits, "float_bits"), long_runs)
        return call_part(typingctx, part, (src, offset, n, step, float_bits, best, top_magnitude, flip),
                         (0, 1, 2, 3, 5, 6, 7))

    max_run_by_kind.__doc__ = doc
    return max_run_by_kind


max_run = _max_run_by_kind(True, """max_run(src, offset, n, step, float_bits, best, top_magnitude, flip):
    _max_run_for(float_bits)'s max_run, long runs in two streams (the general and block kernels');
    ``float_bits`` a constant.""")
short_max_run = _max_run_by_kind(False, """short_max_run(src, offset, n, step, float_bits, best, top_magnitude, flip):
    max_run for runs shorter than 2 * STREAMS_MIN_RUN elements (serial kernels: every input below the
    parallel size), read in one stream.""")


@functools.cache
def _max_columns_for(float_bits, nrows):
    """max_columns(src, offset, step, width, best, top_magnitude, flip): best[w] and top_magnitude[w]
    updated (as by _max_run_for(float_bits)) with element w of ``nrows`` (1, 4 or 8) contiguous rows
    of a tile, ``step`` apart. One function per row count, with the others' loops left out (Numba
    prunes branches on closure constants, not on a constant argument's value)."""

    @njit_for(float_bits, nrows, fastmath=FASTMATH)
    def max_columns(src, offset, step, width, best, top_magnitude, flip):
        r0 = _view(src, offset, offset + width)
        if nrows == 1:
            if float_bits:
                for w in range(width):
                    best[w] = larger(best[w], flipped(float_key(r0[w]), flip))
                    top_magnitude[w] = larger(top_magnitude[w], magnitude_bits(r0[w]))
            else:
                for w in range(width):
                    best[w] = larger(best[w], flipped(r0[w], flip))
            return
        r1 = _view(src, offset + step, offset + step + width)
        r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
        r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
        if nrows == 4:
            if float_bits:
                for w in range(width):
                    pair01 = larger(flipped(float_key(r0[w]), flip), flipped(float_key(r1[w]), flip))
                    pair23 = larger(flipped(float_key(r2[w]), flip), flipped(float_key(r3[w]), flip))
                    best[w] = larger(larger(best[w], pair01), pair23)
                    magnitudes01 = larger(magnitude_bits(r0[w]), magnitude_bits(r1[w]))
                    magnitudes23 = larger(magnitude_bits(r2[w]), magnitude_bits(r3[w]))
                    top_magnitude[w] = larger(larger(top_magnitude[w], magnitudes01), magnitudes23)
            else:
                for w in range(width):
                    pair01 = larger(flipped(r0[w], flip), flipped(r1[w], flip))
                    best[w] = larger(larger(best[w], pair01), larger(flipped(r2[w], flip), flipped(r3[w], flip)))
            return
        r4 = _view(src, offset + 4 * step, offset + 4 * step + width)
        r5 = _view(src, offset + 5 * step, offset + 5 * step + width)
        r6 = _view(src, offset + 6 * step, offset + 6 * step + width)
        r7 = _view(src, offset + 7 * step, offset + 7 * step + width)
        if float_bits:
            for w in range(width):
                best[w] = larger(best[w], larger(
                    larger(larger(flipped(float_key(r0[w]), flip), flipped(float_key(r1[w]), flip)),
                        larger(flipped(float_key(r2[w]), flip), flipped(float_key(r3[w]), flip))),
                    larger(larger(flipped(float_key(r4[w]), flip), flipped(float_key(r5[w]), flip)),
                        larger(flipped(float_key(r6[w]), flip), flipped(float_key(r7[w]), flip)))))
                top_magnitude[w] = larger(top_magnitude[w], larger(
                    larger(larger(magnitude_bits(r0[w]), magnitude_bits(r1[w])),
                        larger(magnitude_bits(r2[w]), magnitude_bits(r3[w]))),
                    larger(larger(magnitude_bits(r4[w]), magnitude_bits(r5[w])),
                        larger(magnitude_bits(r6[w]), magnitude_bits(r7[w])))))
        else:
            for w in range(width):
                best[w] = larger(best[w], larger(
                    larger(larger(flipped(r0[w], flip), flipped(r1[w], flip)),
                        larger(flipped(r2[w], flip), flipped(r3[w], flip))),
                    larger(larger(flipped(r4[w], flip), flipped(r5[w], flip)),
                        larger(flipped(r6[w], flip), flipped(r7[w], flip)))))

    return max_columns


def max_columns(src, offset, step, nrows, width, float_bits, best, top_magnitude, flip):
    """_max_columns_for(float_bits, nrows)'s max_columns; ``nrows`` and ``float_bits`` constants."""


@overload(max_columns, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _max_columns_by_kind(src, offset, step, nrows, width, float_bits, best, top_magnitude, flip):
    specialised = _max_columns_for(_constant(float_bits, "float_bits"), _constant(nrows, "nrows"))
    return lambda src, offset, step, nrows, width, float_bits, best, top_magnitude, flip: specialised(
        src, offset, step, width, best, top_magnitude, flip)


@subroutine_by_type(fastmath=False)
def key_to_float64(key, carrier):
    """The float64 value of a float_key of an element of a ``carrier`` array (a type witness)."""
    width = carrier.dtype.bitwidth
    magnitude_mask = (1 << (width - 1)) - 1
    if carrier.dtype == types.float64:
        return lambda key, carrier: _bits_to_float64(key ^ ((key >> 63) & magnitude_mask))
    if carrier.dtype == types.float32:
        return lambda key, carrier: np.float64(
            _bits_to_float32(np.uint32(key ^ ((key >> 31) & magnitude_mask) & 0xFFFFFFFF)))
    if carrier.dtype == types.uint16:  # float16 bits
        return lambda key, carrier: as_float64(np.uint16(key ^ ((key >> 15) & magnitude_mask) & 0xFFFF))
    if carrier.dtype == types.int16:  # bfloat16 bits
        return lambda key, carrier: as_float64(np.int16(np.uint16(key ^ ((key >> 15) & magnitude_mask) & 0xFFFF)))
    return None
