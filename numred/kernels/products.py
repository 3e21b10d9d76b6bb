"""ReduceProd: per (output, chunk) products over the general geometry, as partial states the driver
combines (numred._derived.products).

Floats are multiplied in float64 as a mantissa and an exponent kept apart: after every few factors
the float64 product is renormalised to [1, 2) from its own bits and its exponent moves to an int64,
so no intermediate product overflows or underflows. Between renormalisations: six factors of the
narrower floats (NARROW_GROUP; at most 2**128 and at least 2**-149 each: six of them and a mantissa
in [1, 2) stay within [2**-894, 2**769), inside float64's normal range), or one float64 factor,
itself split into mantissa and exponent first (a subnormal one scaled to a normal one by 2**64,
exactly). Zeros, infinities and NaN are not renormalised and stay what they are: 0 x inf gives
NaN, and the sign of every product (of a zero too) is the IEEE one. One rounding per
multiplication. Contiguous runs of narrow floats split every element instead (_split_block): its
mantissa in [1, 2) multiplied in float64, its exponent added as an integer, one renormalisation per
SPLIT_BLOCK elements, in a loop that vectorises (one running product renormalised every six
factors waits on each multiplication). A run that holds a zero, an infinity or a NaN has its
product decided by those (_special_factor); one with subnormals is split again, as float64 values.
In a tile, whose lanes are independent, the split is slower than a few factors per renormalisation.
float64 data is split the same way: contiguous runs in blocks (_split_block_float64; a block
holding a zero, a subnormal, an infinity or a NaN split again branch-free, _split_specials_block),
strided runs factor by factor (_times_float64), a tile's columns branch-free (_split_float64),
their lanes renormalised every SPLIT_BLOCK rows; narrow tiles (FLOAT64_WIDE_ROWS_BELOW) read as
wide rows.

Integers multiply their two's-complement bits in uint64 (wrapping), whose low bits are the product
modulo 2**bits of the dtype.

With one chunk per output the kernel stores the finished results itself (2**e applied to the
mantissa by ldexp, then the one rounding to the output dtype; integers their low bits): small and
repeated calls are one launch, without the driver's NumPy passes over the partials.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .jit import subroutine
from .base import (_U64, share, _bits_to_float32, _bits_to_float64, _borrowed, _float64_to_bits, _n_tasks, _next_run,
                   _offset_of, _task, _walker, _view, inlined, zeroed_array, larger, smaller)
from .decode import as_bits, as_float32_bits, as_float64
from .general import _rows_per_wide_row
from .store import store_rounded

_EXPONENT_MASK = 0x7FF << 52
_MANTISSA_AND_SIGN = np.int64(~_EXPONENT_MASK)  # (as int64: the sign bit set)
_ONE_EXPONENT = np.int64(1023 << 52)
_SMALLEST_NORMAL = 2.0**-1022
_SUBNORMAL_SCALE = 2.0**64
# an exponent beyond this overflows or underflows float64 whatever the mantissa in [1, 2)
_EXPONENT_LIMIT = 4000
# factors of a narrow float between renormalisations (module docstring): the most the range allows,
# so that tiles and strided runs renormalise as rarely as possible
NARROW_GROUP = 6
SPLIT_MIN = 128  # contiguous narrow-float runs from this length are split (_split_run_product)
# elements of a contiguous narrow-float run whose mantissas in [1, 2) are multiplied before one
# renormalisation (_split_block): their product stays below 2**1000, and times a mantissa below 2
# inside float64's range; as large as that allows, for fewer renormalisations (a row of up to 1000
# elements is one block)
SPLIT_BLOCK = 1000
# float64 tiles narrower than this read back-to-back rows as wide rows (general._rows_per_wide_row):
# that pays for tiles of a few columns, whose own rows are too short for the loops; from this width
# on, the tile's rows are long enough and wide rows cost more than they save
FLOAT64_WIDE_ROWS_BELOW = 16
_F32_MANTISSA_AND_SIGN = np.uint32(0x807FFFFF)
_F32_ONE_EXPONENT = np.uint32(127 << 23)
_F32_INFINITY = np.uint32(0x7F800000)


@subroutine(fastmath=False)
def _renormalised(m, e):
    """(m', e') with m' * 2**e' = m * 2**e exactly and |m'| in [1, 2), for a normal m; zeros,
    infinities and NaN (and subnormals, which do not arise) as they are. Without branches (selects),
    so that loops over lanes or a tile's columns vectorise."""
    bits = _float64_to_bits(m)
    biased = (bits >> 52) & 0x7FF
    special = (biased == 0) | (biased == 0x7FF)
    renormalised = _bits_to_float64((bits & _MANTISSA_AND_SIGN) | _ONE_EXPONENT)
    return (m if special else renormalised), (e if special else e + biased - 1023)


@subroutine(fastmath=False)
def _split_float64(x):
    """(mantissa, exponent) of a float64 factor x: its mantissa in [1, 2) with its sign and its
    unbiased exponent (a subnormal x scaled to a normal one first); a zero, an infinity or a NaN as
    itself, with exponent 0, so that a product of such mantissas, up to SPLIT_BLOCK of them, is the
    IEEE product of the factors' specials or a finite value below 2**SPLIT_BLOCK. Without branches
    (selects), so that a tile's loop over its columns vectorises."""
    subnormal = (x != 0.0) & (abs(x) < _SMALLEST_NORMAL)
    scaled = x * _SUBNORMAL_SCALE if subnormal else x
    bits = _float64_to_bits(scaled)
    biased = (bits >> 52) & 0x7FF
    special = (biased == 0) | (biased == 0x7FF)
    mantissa = _bits_to_float64((bits & _MANTISSA_AND_SIGN) | _ONE_EXPONENT)
    return (scaled if special else mantissa), (0 if special else biased - (1087 if subnormal else 1023))


@subroutine(fastmath=False)
def _times_float64(m, e, x):
    """(m, e) times the float64 factor x, renormalised: x is split into its own mantissa in [1, 2)
    and exponent first (_split_float64), so m * x is in [1, 4): a mantissa in [1, 2) times the
    largest float64 would overflow, and one in [1/2, 1) times the smallest normal one would be
    subnormal."""
    mantissa, exponent = _split_float64(x)
    return _renormalised(m * mantissa, e + exponent)


@njit(fastmath=False)
def _renormalise_lanes(ms, es, lanes):
    """The first ``lanes`` (mantissa, exponent) pairs of a tile renormalised in place."""
    for w in range(lanes):
        m, e = _renormalised(ms[w], es[w])
        ms[w] = m
        es[w] = e


_renormalise_lanes_inlined = inlined(_renormalise_lanes)  # (in the kernels' IR: the loops as they were)


@subroutine(fastmath=False)
def finished_product(m, e):
    """m * 2**e in float64 (inf or 0 beyond its range; 0, inf and NaN mantissas as they are), for the
    one rounding to the output dtype: exact where the dtype's own range can hold it."""
    return math.ldexp(m, larger(-_EXPONENT_LIMIT, smaller(_EXPONENT_LIMIT, e)))


def _u32_op(name):
    """An intrinsic for one uint32 operation (``add``, wrapping; ``min``; ``max``) that stays 32
    bits wide: Numba widens integer arithmetic to 64 bits, and the exponent lanes of _split_block
    would then be eight to a vector instead of sixteen."""

    @intrinsic
    def op(typingctx, a, b):
        def codegen(context, builder, signature, args):
            x, y = args
            if name == "add":
                return builder.add(x, y)
            return builder.select(builder.icmp_unsigned("<" if name == "min" else ">", x, y), x, y)

        return types.uint32(types.uint32, types.uint32), codegen

    return op


_add_u32, _min_u32, _max_u32 = _u32_op("add"), _u32_op("min"), _u32_op("max")


@subroutine(fastmath={"reassoc"})
def _split_block(block):
    """(product, exponents, smallest, largest) of a contiguous block of narrow floats (at most
    SPLIT_BLOCK; a view from its first element: LLVM does not vectorise the loop from an offset of a
    longer run). Each element, as float32 bits, is split into its mantissa
    in [1, 2), with its sign, and its biased exponent: the product of the mantissas in float64
    (below 2**SPLIT_BLOCK in magnitude in any order: reassociated, so that the loop vectorises),
    the sum of the exponents, and the smallest and largest exponent: 0 for a zero or a subnormal,
    255 for an infinity or NaN, for which the split does not hold. (Splitting the float64 value
    instead would take 64-bit lanes, half as many to a vector.)"""
    product = 1.0
    exponents = largest = np.uint32(0)
    smallest = np.uint32(255)
    for i in range(block.size):
        bits = as_float32_bits(block[i])
        biased = (bits >> np.uint32(23)) & np.uint32(0xFF)
        product *= np.float64(_bits_to_float32((bits & _F32_MANTISSA_AND_SIGN) | _F32_ONE_EXPONENT))
        exponents = _add_u32(exponents, biased)
        smallest = _min_u32(smallest, biased)
        largest = _max_u32(largest, biased)
    return product, exponents, smallest, largest


@subroutine(fastmath={"reassoc"})
def _split_block_float64(block):
    """_split_block for float64 data, and for narrow-float blocks with subnormal elements: each element
    split as a float64 value (float32's subnormals are normal there), in 64-bit lanes; the exponents,
    smallest and largest are float64's biased ones (0: a zero or a subnormal; 0x7FF: an infinity or
    NaN)."""
    product = 1.0
    exponents = largest = 0
    smallest = 0x7FF
    for i in range(block.size):
        bits = _float64_to_bits(as_float64(block[i]))
        biased = (bits >> 52) & 0x7FF
        product *= _bits_to_float64((bits & _MANTISSA_AND_SIGN) | _ONE_EXPONENT)
        exponents += biased
        smallest = smaller(smallest, biased)
        largest = larger(largest, biased)
    return product, exponents, smallest, largest


@subroutine(fastmath={"reassoc"})
def _split_specials_block(block):
    """(product, exponents) of a block of float64 factors (at most SPLIT_BLOCK) holding a zero, a
    subnormal, an infinity or a NaN, for which _split_block_float64's split does not hold: each
    element split by _split_float64, the product of their mantissas (below 2**SPLIT_BLOCK, or the
    IEEE product of the specials among them, in any order: reassociated) and the sum of their
    exponents. Without branches, so that the loop vectorises (factor by factor, _times_float64, such
    a block would cost many times a plain one)."""
    product = 1.0
    exponents = 0
    for i in range(block.size):
        mantissa, exponent = _split_float64(block[i])
        product *= mantissa
        exponents += exponent
    return product, exponents


@subroutine(fastmath=False)
def _special_factor(run):
    """(True, the factor that decides the product) of a run of narrow floats holding a zero, an
    infinity or a NaN: NaN with a NaN or both a zero and an infinity, else an infinity or a zero,
    with the sign of the product; (False, 0.0) for one whose only special elements are subnormals.
    One pass of counts in 32-bit lanes, so that it vectorises."""
    zeros = infinities = nans = negatives = np.uint32(0)
    for i in range(run.size):
        bits = as_float32_bits(run[i])
        magnitude = bits & np.uint32(0x7FFFFFFF)
        zeros = _add_u32(zeros, np.uint32(magnitude == np.uint32(0)))
        infinities = _add_u32(infinities, np.uint32(magnitude == _F32_INFINITY))
        nans = _add_u32(nans, np.uint32(magnitude > _F32_INFINITY))
        negatives = _add_u32(negatives, bits >> np.uint32(31))
    if nans > 0 or (zeros > 0 and infinities > 0):
        return True, math.nan
    if zeros == 0 and infinities == 0:
        return False, 0.0
    factor = math.inf if infinities > 0 else 0.0
    return True, (-factor if negatives % 2 == 1 else factor)


@subroutine(fastmath=False)
def _split_run_product(run, m, e):
    """(m, e) times the product of a contiguous run of narrow floats, in blocks of SPLIT_BLOCK
    elements (_split_block), each block's mantissa product and exponents added to (m, e) and
    renormalised. A run holding a zero, an infinity or a NaN: m times its deciding factor
    (_special_factor), IEEE's rules deciding with what (m, e) holds already (0 x inf is NaN). A run
    with subnormals but none of those: again, split in float64 (_split_block_float64)."""
    n = run.size
    split_m, split_e = m, e
    for start in range(0, n, SPLIT_BLOCK):
        stop = smaller(n, start + SPLIT_BLOCK)
        product, exponents, smallest, largest = _split_block(_view(run, start, stop))
        if smallest == 0 or largest == 255:
            decided, factor = _special_factor(run)
            if decided:
                return m * factor, e
            break
        split_m, split_e = _renormalised(split_m * product, split_e + np.int64(exponents) - 127 * (stop - start))
    else:
        return split_m, split_e
    for start in range(0, n, SPLIT_BLOCK):  # subnormals, and no zero, infinity or NaN
        stop = smaller(n, start + SPLIT_BLOCK)
        product, exponents, _, _ = _split_block_float64(_view(run, start, stop))
        m, e = _renormalised(m * product, e + exponents - 1023 * (stop - start))
    return m, e


@subroutine(fastmath=False)
def _float64_run_product(src, offset, n, step, m, e):
    """(m, e) times the product of one strided run of float64 elements, each factor split too
    (_times_float64). A contiguous run of SPLIT_MIN elements or more is split in blocks instead, as
    narrow floats are (_split_block_float64: a vectorised loop, where _times_float64 renormalises
    and waits on each product). One
    block holding a zero, a subnormal, an infinity or a NaN is split again, each element as
    _split_float64 splits it (_split_specials_block)."""
    if step == 1 and n >= SPLIT_MIN:
        run = _view(src, offset, offset + n)
        for start in range(0, n, SPLIT_BLOCK):
            stop = smaller(n, start + SPLIT_BLOCK)
            block = _view(run, start, stop)
            product, exponents, smallest, largest = _split_block_float64(block)
            exponents -= 1023 * (stop - start)
            if smallest == 0 or largest == 0x7FF:
                product, exponents = _split_specials_block(block)
            m, e = _renormalised(m * product, e + exponents)
        return m, e
    for i in range(n):
        m, e = _times_float64(m, e, src[offset + i * step])
    return m, e


@subroutine(fastmath=False)
def _six_factors(a, b, c, d, e, f):
    """The float64 product of NARROW_GROUP (six) narrow float factors, as a tree."""
    return ((as_float64(a) * as_float64(b)) * (as_float64(c) * as_float64(d))) * (as_float64(e) * as_float64(f))


@subroutine(fastmath=False)
def _narrow_run_product(src, offset, n, step, m, e):
    """(m, e) times the product of one strided run of narrow float elements, NARROW_GROUP factors
    between renormalisations; a contiguous run of SPLIT_MIN elements or more split
    (_split_run_product)."""
    if step == 1 and n >= SPLIT_MIN:
        return _split_run_product(_view(src, offset, offset + n), m, e)
    whole = n - n % NARROW_GROUP
    for i in range(0, whole, NARROW_GROUP):
        first = offset + i * step
        m, e = _renormalised(m * _six_factors(src[first], src[first + step], src[first + 2 * step],
                                              src[first + 3 * step], src[first + 4 * step], src[first + 5 * step]), e)
    for i in range(whole, n):
        m, e = _renormalised(m * as_float64(src[offset + i * step]), e)
    return m, e


@subroutine(fastmath=False)
def _int_run_product(src, offset, n, step, bits):
    """``bits`` times the two's-complement bits of one strided run of integers, wrapping (uint64). A
    contiguous run through a view, so that the loop vectorises (the same loop over offsets into src
    does not)."""
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            bits *= as_bits(run[i])
        return bits
    for i in range(n):
        bits *= as_bits(src[offset + i * step])
    return bits


def _products_for(floats, float64, tiles):
    """The products kernel of float data (``floats``: mantissa and exponent partials; ``float64`` or
    a narrower float) or integer data (wrapping uint64 partials), for single runs per output or for
    ``tiles`` of neighbouring outputs: constants, so that a call compiles only the code it runs (compiling the
    tiles' code beside the runs' would make a first call much slower)."""
    group = 1 if float64 else NARROW_GROUP  # factors between renormalisations (module docstring)

    def products(part, parts, src, base, dims, kept_ndim, nchunks, tile, out_mantissas, out_exponents, result):
        """Per task (``width`` outputs from k0: one, or a tile of neighbouring ones; a chunk c of the
        reduced range) the partials of output k at k * nchunks + c: floats the (mantissa, exponent)
        of the product, integers its wrapping uint64 bits (in out_exponents). With an empty
        out_exponents (one chunk per output) the finished result[k] instead. A tile's outputs are
        contiguous, and their reduced rows are read one by one, each output's factor of a row in
        turn (rather than a strided column walk per output, which is slow)."""
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides, nr, step = _walker(dims, kept_ndim)
        first_task, end_task = share(_n_tasks(kshape, tile, nchunks), part, parts)
        for task in range(first_task, end_task):
            k0, width, c, pos, end = _task(np.int64(task), kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            if not tiles:
                m = 1.0
                e = np.int64(0)  # (not a literal 0: the run's product would be compiled for both)
                bits = _U64(1)
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    if floats and float64:
                        m, e = _float64_run_product(src, origin + offset, n, step, m, e)
                    elif floats:
                        m, e = _narrow_run_product(src, origin + offset, n, step, m, e)
                    else:
                        bits = _int_run_product(src, origin + offset, n, step, bits)
                    pos += n
                if out_exponents.size == 0:
                    if floats:
                        store_rounded(result, k0, finished_product(m, e))
                    else:
                        result[k0] = bits  # (its low bits)
                elif floats:
                    out_mantissas[k0 * nchunks + c], out_exponents[k0 * nchunks + c] = _renormalised(m, e)
                else:
                    out_exponents[k0 * nchunks + c] = np.int64(bits)
            else:
                # narrow floats: back-to-back rows of a narrow tile read as wide rows of ``per_wide``
                # rows (general._rows_per_wide_row), each column's factors in per_wide lanes,
                # multiplied together at the end
                per_wide = (_rows_per_wide_row(width, step, end - pos)
                            if floats and (group > 1 or width < FLOAT64_WIDE_ROWS_BELOW) else 1)
                wide = per_wide * width
                ms = np.ones(wide)
                es = zeroed_array(wide, np.int64)
                words = np.ones(width, dtype=np.uint64)
                rows = 0
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    j = 0
                    while j < n:
                        row = origin + offset + j * step
                        if floats and group > 1 and rows == 0 and j + per_wide <= n:
                            # six (wide) rows in one pass, renormalised in it: one load and store of each
                            # lane's (mantissa, exponent) per six rows instead of seven. (Several rows
                            # per pass rather than one: far fewer loads and stores of the lanes.)
                            stride = per_wide * step
                            if j + group * per_wide <= n:
                                row0 = _view(src, row, row + wide)  # (views, so that the loop vectorises)
                                row1 = _view(src, row + stride, row + stride + wide)
                                row2 = _view(src, row + 2 * stride, row + 2 * stride + wide)
                                row3 = _view(src, row + 3 * stride, row + 3 * stride + wide)
                                row4 = _view(src, row + 4 * stride, row + 4 * stride + wide)
                                row5 = _view(src, row + 5 * stride, row + 5 * stride + wide)
                                for w in range(wide):
                                    m, e = _renormalised(ms[w] * _six_factors(row0[w], row1[w], row2[w], row3[w],
                                                                              row4[w], row5[w]), es[w])
                                    ms[w] = m
                                    es[w] = e
                                j += group * per_wide
                                continue
                            # the run's last whole wide rows, fewer than six: one factor each per lane,
                            # then a renormalisation (cheaper than taking them one by one over the
                            # outputs' width)
                            count = (n - j) // per_wide
                            for r in range(count):
                                factors = _view(src, row + r * stride, row + r * stride + wide)
                                for w in range(wide):
                                    ms[w] *= as_float64(factors[w])
                            _renormalise_lanes_inlined(ms, es, wide)
                            j += count * per_wide
                            continue
                        if floats and float64:
                            # each factor split (_split_float64); per_wide back-to-back rows at once
                            # where the run has them (one wide row), else one
                            lanes = wide if j + per_wide <= n else width
                            factors = _view(src, row, row + lanes)
                            for w in range(lanes):
                                mantissa, exponent = _split_float64(factors[w])
                                ms[w] *= mantissa
                                es[w] += exponent
                            rows += 1
                            j += per_wide if lanes == wide else 1
                            if rows == SPLIT_BLOCK:
                                _renormalise_lanes_inlined(ms, es, wide)
                                rows = 0
                            continue
                        if floats:  # (a view of the row, so that the loops vectorise)
                            factors = _view(src, row, row + width)
                            for w in range(width):
                                ms[w] *= as_float64(factors[w])
                            rows += 1
                            if rows == group:
                                _renormalise_lanes_inlined(ms, es, width)
                                rows = 0
                        else:
                            factors = _view(src, row, row + width)
                            for w in range(width):
                                words[w] *= as_bits(factors[w])
                        j += 1
                    pos += n
                for w in range(width):  # (the other lanes were renormalised after their last pass)
                    m, e = _renormalised(ms[w], es[w])
                    for lane in range(w + width, wide, width):
                        m, e = _renormalised(m * ms[lane], e + es[lane])
                    ms[w] = m
                    es[w] = e
                for w in range(width):
                    if out_exponents.size == 0:
                        if floats:
                            store_rounded(result, k0 + w, finished_product(ms[w], es[w]))
                        else:
                            result[k0 + w] = words[w]
                    elif floats:
                        out_mantissas[(k0 + w) * nchunks + c], out_exponents[(k0 + w) * nchunks + c] = \
                            _renormalised(ms[w], es[w])
                    else:
                        out_exponents[(k0 + w) * nchunks + c] = np.int64(words[w])

    return products
