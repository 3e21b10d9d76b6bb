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

import functools
import math
import platform

import numpy as np
from numba import njit, prange, types
from llvmlite import ir
from numba.extending import intrinsic, overload
from numba.np.arrayobj import populate_array
from numba.np.numpy_support import as_dtype

from ._runtime import entry
from .kernels.states import (add_compensated, combine_maxima, combine_sums, combine_wide, combine_wrapping,
                             compensated_value)

# reassociation lets LLVM vectorise the sums; fastmath=True would also assume no NaN/inf and
# delete exactly the checks the contract depends on.
FASTMATH = {"reassoc", "contract"}
# Every other function and overload here states its fastmath flags itself: Numba compiles one that
# leaves them unset with the flags of the caller that first compiles it (inherit_if_not_set), so
# error-free transformations such as _split and _neumaier, called from FASTMATH loops, could get
# reassoc and contract, depending on the order in which things were compiled.

# Length of the pieces summed with a plain (vectorised) float64 loop; the pieces are then added with
# compensated (Neumaier) summation, which keeps float64 inputs at least as exact as NumPy's pairwise sum.
BLOCK = 256
NEVER = 1 << 62  # the compensation block of narrower floats

_U64 = np.uint64


@intrinsic
def _view(typingctx, src, start, stop):
    """src[start:stop] for 0 <= start <= stop <= len(src), without a slice's bounds arithmetic
    (clamping, negative starts) and without a reference to src's memory (as _borrowed). Short float64
    rows handed to their split sums as slices took 1.25-2x the time of these views (20000x100,
    100000x16; 2 threads, AMD Zen 4), where LLVM did not inline the call for the slice."""

    def codegen(context, builder, signature, args):
        whole = context.make_array(signature.args[0])(context, builder, args[0])
        view = context.make_array(signature.return_type)(context, builder)
        populate_array(view, data=builder.gep(whole.data, [args[1]]), shape=[builder.sub(args[2], args[1])],
                       strides=[whole.itemsize], itemsize=whole.itemsize, meminfo=None)
        return view._getvalue()

    if not (isinstance(src, types.Array) and src.ndim == 1 and src.layout == "C"):
        return None
    return src(src, types.intp, types.intp), codegen


@intrinsic
def _borrowed(typingctx, array):
    """``array`` as a borrowed reference: the same array without its memory's reference count, so
    that what Numba increments and decrements around every call it is handed to, and for every
    slice of it, is nothing. Those counts are atomic: with two threads handing the same input to a
    call per row, the two cores fought over the count's cache line: float32 20000x100 means and
    sums of squares took 1.3-1.4x the time of borrowed ones (2 threads, AMD Zen 4). Each kernel
    borrows the arrays it reads while the caller holds them, never one it writes: Numba takes the
    borrowed array for a new one of the kernel's own, and drops a parallel loop whose only effect
    is to store into it (int_rows then wrote nothing)."""

    def codegen(context, builder, signature, args):
        borrowed = context.make_array(signature.args[0])(context, builder, args[0])
        borrowed.meminfo = ir.Constant(borrowed.meminfo.type, None)
        return borrowed._getvalue()

    if not isinstance(array, types.Array):
        return None
    return array(array), codegen


# ---------------------------------------------------------------------------------------------
# element decoding
# ---------------------------------------------------------------------------------------------
def _bitcast(source, target):
    """An intrinsic reading the bits of a ``source`` value as a ``target`` value (same width)."""

    @intrinsic
    def bitcast(typingctx, value):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return bitcast


_bits_to_float32 = _bitcast(types.uint32, types.float32)
_bits_to_float64 = _bitcast(types.int64, types.float64)
_float64_to_bits = _bitcast(types.float64, types.int64)
_float32_to_bits = _bitcast(types.float32, types.uint32)


_HALF_REBIAS = 2.0**1008  # 2**(1023 - 15): float64 exponent bias minus float16's


@njit(fastmath=False)
def _half_bits_to_float64(h):
    # IEEE binary16 -> float64 with integer operations and one exact multiply, without branches so
    # that loops over float16 data vectorise. LLVM's half type crashes on CPUs without F16C
    # (DESIGN.md). Subnormals, inf and NaN (with its payload) come out bit-exact. (The same in 32-bit
    # lanes with a float32 multiply measured a third slower here.)
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


# With F16C, LLVM's half type converts with one vector instruction; without it, it crashes (DESIGN.md).
CPU_CONVERTS_HALVES = _cpu_has("f16c")


@intrinsic
def _half_bits_to_float64_f16c(typingctx, bits):
    """float16 bits (uint16) -> float64 through LLVM's half type (F16C's vcvtph2ps); exact."""

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.DoubleType())

    return types.float64(types.uint16), codegen


def as_float64(x):
    """The float64 value of one element of a float carrier array (typed per dtype at compile time)."""


@overload(as_float64, jit_options={"fastmath": False})
def _as_float64_impl(x):
    if x in (types.float32, types.float64, types.int32, types.uint32):  # 32-bit integers: exact
        return lambda x: np.float64(x)
    if x == types.uint16:  # float16 bits
        if CPU_CONVERTS_HALVES:  # 1.5-2x the element rate of the integer decode
            return lambda x: _half_bits_to_float64_f16c(x)
        return lambda x: _half_bits_to_float64(x)
    if x == types.int16:  # bfloat16 bits: the top half of a float32
        return lambda x: np.float64(_bits_to_float32(np.uint32(np.uint16(x)) << np.uint32(16)))
    return None


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


def as_wide(x):
    """An integer element widened to int64 (signed types) or uint64 (unsigned types)."""


@overload(as_wide, jit_options={"fastmath": False})
def _as_wide_impl(x):
    if isinstance(x, types.Integer):
        return (lambda x: np.int64(x)) if x.signed else (lambda x: np.uint64(x))
    return None


def as_bits(x):
    """The two's-complement bits of an integer element as uint64: wrapping arithmetic is defined in
    unsigned types only (signed add/mul carry LLVM's nsw flag)."""


@overload(as_bits, jit_options={"fastmath": False})
def _as_bits_impl(x):
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.uint64(np.int64(x))
        return lambda x: np.uint64(x)
    return None


# ---------------------------------------------------------------------------------------------
# scalar helpers
# ---------------------------------------------------------------------------------------------
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that k * _LN2_HI is exact for |k| < 2**20
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52: t + _SHIFTER rounds t to an integer held in the low bits
# exp(r) = 1 + r + r**2 * Q(r) on |r| <= ln(2)/2, Q of degree 9: coefficients fitted for the least
# maximum relative error (Lawson-weighted least squares at 400 Chebyshev nodes, 50-digit mpmath),
# 2**-58 before rounding. Degree 11 in all, where the Taylor series needed degree 13.
_EXP_Q = (
    0.5000000000000011,
    0.16666666666666413,
    0.04166666666653026,
    0.008333333333494336,
    0.001388888894359938,
    0.000198412695067794,
    2.480149313455227e-05,
    2.7557586262911595e-06,
    2.763023446764578e-07,
    2.5000074236309794e-08,
)


# Contraction only: reassociation would fold (t + _SHIFTER) - _SHIFTER into t, while a multiply of
# the caller's fused into the first addition rounds an exact product, as good as a rounded one (with
# the two rounded apart, log-sum-exp took 1.04-1.07x the time)
@njit(fastmath={"contract"})
def _round_to_integer(t):
    """(round(t) as float64, and the float64 whose low bits hold round(t) as an integer): a float to
    int conversion would be scalarised, this stays in vector registers."""
    shifted = t + _SHIFTER
    return shifted - _SHIFTER, _float64_to_bits(shifted)


@njit(fastmath=FASTMATH)
def exp_nonpositive(x):
    """exp(x) for x <= 0 (after the max shift), within about 2 ulp, in a form LLVM vectorises: Numba's
    math.exp is a scalar libm call (DESIGN.md). exp(x) = 2**k * exp(r), |r| <= ln(2)/2, exp(r) by the
    polynomial of _EXP_Q, evaluated by Estrin's scheme for instruction-level parallelism. Below -708,
    exp(x) < 2**-1021 cannot move a sum holding exp(0): 0. Such x (and -inf) are not clamped first;
    their garbage k and r go into a value the last line discards. Against the degree-13 Taylor
    version with a clamp: 0.87x the time per exp (1M float32, one thread), log-sum-exp 0.87-0.93x
    (1000x1000 and 32x64x56x56, float32, float16, int32; in-process A/B)."""
    k, k_bits = _round_to_integer(x * _LOG2E)
    r = (x - k * _LN2_HI) - k * _LN2_LO
    q = _EXP_Q
    r2 = r * r
    r4 = r2 * r2
    low = (1.0 + r) + (q[0] + q[1] * r) * r2
    middle = (q[2] + q[3] * r) + (q[4] + q[5] * r) * r2
    high = (q[6] + q[7] * r) + (q[8] + q[9] * r) * r2
    p = (low + middle * r4) + high * (r4 * r4)
    # 2**k: the low bits of k_bits are k; shifting by 52 drops the shifter's own bits
    value = p * _bits_to_float64((k_bits + 1023) << 52)
    return value if x >= -708.0 else 0.0


def compensation_block(src):
    """How many terms a plain float64 accumulator may take before it is folded into the compensated
    total: 256 for float64 data (column sums of tiles, and exp sums; its sums along runs are nearly
    exact instead, _float64_run_for); for narrower floats a float64 accumulator is already far more exact
    than the output, so never."""


@overload(compensation_block, jit_options={"fastmath": False})
def _compensation_block_impl(src):
    if src.dtype == types.float64:
        return lambda src: BLOCK
    return lambda src: NEVER


@njit(fastmath=False)
def _offset_of(index, shape, strides):
    """Element offset of the C-order flat ``index`` (< prod(shape)) into a block of dimensions
    (shape, strides). The outermost dimension needs no modulo: with one dimension, no division."""
    offset = 0
    for d in range(shape.size - 1, 0, -1):
        n = shape[d]
        outer = index // n
        offset += (index - outer * n) * strides[d]
        index = outer
    return offset + index * strides[0]


@njit(fastmath=False)
def _next_run(pos, end, rshape, rstrides):
    """(offset, length) of the run of reduced positions [pos, end) that lies along the innermost
    reduced axis: the unit the kernels' inner loops take. Divisions only for 2+ reduced axes (they are
    per run, and a run may be short)."""
    if rshape.size == 1:
        return pos * rstrides[0], end - pos
    run_length = rshape[-1]
    return _offset_of(pos, rshape, rstrides), min(run_length - pos % run_length, end - pos)


@njit(fastmath=False)
def _unpack(dims, kept_ndim):
    """(kept shape, kept strides, reduced shape, reduced strides) from the plan's one dims array."""
    reduced_ndim = (dims.size - 2 * kept_ndim) // 2
    r0 = 2 * kept_ndim
    return dims[:kept_ndim], dims[kept_ndim:r0], dims[r0:r0 + reduced_ndim], dims[r0 + reduced_ndim:]


@njit(fastmath=False)
def _n_tasks(kshape, tile, nchunks):
    rows = np.prod(kshape) // kshape[-1]
    return rows * ((kshape[-1] + tile - 1) // tile) * nchunks


@njit(fastmath=False)
def _task(task, kshape, tile, nchunks, nr):
    """One task: ``width`` consecutive outputs from flat output index ``k0`` along the innermost kept
    dimension (a tile), over reduced positions [first, end) (a chunk). The common cases (one chunk,
    no tile) skip the divisions: with short reduced ranges they cost as much as the reduction."""
    if nchunks == 1:
        t, c, first, end = np.int64(task), 0, 0, nr  # a prange index may be unsigned
    else:
        t = task // nchunks
        c = task - t * nchunks
        first, end = nr * c // nchunks, nr * (c + 1) // nchunks
    if tile == 1:
        return t, 1, c, first, end
    tiles_per_row = (kshape[-1] + tile - 1) // tile
    row = t // tiles_per_row
    column = (t - row * tiles_per_row) * tile
    return row * kshape[-1] + column, min(tile, kshape[-1] - column), c, first, end


# ---------------------------------------------------------------------------------------------
# storing a result: one rounding from float64 to the output dtype
# ---------------------------------------------------------------------------------------------
@njit(fastmath=False)
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


@njit(fastmath=False)
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
    exponent = max(np.int64(magnitude >> np.uint32(23)), 1)
    significand = np.uint64(magnitude & np.uint32(0x7FFFFF))
    if magnitude >= np.uint32(0x800000):
        significand |= np.uint64(0x800000)  # the implicit bit of a normal float32
    shift = 126 - exponent  # at least 14
    if shift > 40:
        return np.uint16(sign)
    odd = (significand >> np.uint64(shift)) & np.uint64(1)
    half = (significand + (np.uint64(1) << np.uint64(shift - 1)) - np.uint64(1) + odd) >> np.uint64(shift)
    return np.uint16(sign | np.uint32(half))


def store_rounded(result, k, value):
    """result[k] = float64 ``value`` rounded once to the output dtype. float32 and float64 results
    are float arrays (the store rounds). float16 and bfloat16 results travel as their bits, in the
    carrier dtypes of the input (uint16: float16, int16: bfloat16), rounded here; ml_dtypes would
    round bfloat16 through float32, twice, and NumPy passes over small results cost microseconds."""


@overload(store_rounded, jit_options={"fastmath": False})
def _store_rounded_impl(result, k, value):
    if isinstance(result.dtype, types.Float):
        def store(result, k, value):
            result[k] = value
    elif result.dtype == types.uint16:  # float16
        def store(result, k, value):
            if math.isnan(value):
                result[k] = np.uint16(0x7E00)
            else:
                result[k] = _float32_bits_to_half_bits(_round_to_odd_float32_bits(value))
    elif result.dtype == types.int16:  # bfloat16
        def store(result, k, value):
            if math.isnan(value):
                result[k] = np.int16(0x7FC0)
            else:
                word = _round_to_odd_float32_bits(value)
                result[k] = np.int16(np.uint16(
                    (word + np.uint32(0x7FFF) + ((word >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)))
    elif result.dtype in (types.int32, types.uint32):  # means of 32-bit integer tiles (EXACT_FLOAT_INT_COUNT)
        def store(result, k, value):
            result[k] = np.int64(value)  # float -> int truncates toward zero
    else:
        return None
    return store


# ---------------------------------------------------------------------------------------------
# float kernels
# ---------------------------------------------------------------------------------------------
SUM, SUM_SQUARES, SUM_EXP = 0, 1, 2


@njit(fastmath=False)
def _finish_sum(total, comp, mode, divisor, maximum):
    """The result of one output from its compensated sum: sum / divisor (SUM, SUM_SQUARES), or
    max + log(sum) for SUM_EXP, where a non-finite max (NaN, +inf, or -inf for an all -inf set) is
    the answer itself. Stored into the result array, it is rounded once to its dtype."""
    value = compensated_value(total, comp)
    if mode == SUM_EXP:
        return maximum + math.log(value) if math.isfinite(maximum) else maximum
    return value / divisor


def pair_values(run, index):
    """The float64 values of bfloat16 elements run[index] and run[index + 1]: each is the top half
    of a float32, so one 32-bit load, a shift and a mask decode both (bfloat16 means and sums of
    squares of 1000x1000 and 4096x4096 rows, 32x64x56x56 axes [2,3]: 0.84-0.88x the time of one
    element per load, in-process A/B). Which one comes first depends on byte order, and the sums do
    not. Defined for bfloat16 bits (int16) only."""


@overload(pair_values, jit_options={"fastmath": False})
def _pair_values_impl(run, index):
    if run.dtype != types.int16:
        return None

    def values(run, index):
        word = _pair_bits(run, index)
        return (np.float64(_bits_to_float32(word << np.uint32(16))),
                np.float64(_bits_to_float32(word & np.uint32(0xFFFF0000))))

    return values


# FASTMATH is safe in these: a bfloat16 value's square is exact in float64, so a fused multiply-add
# rounds as the separate operations would; without it, bfloat16 sums of squares took 1.2x the time
# (1000x1000 rows).
@njit(fastmath=FASTMATH)
def _pair_sum(run, index):
    low, high = pair_values(run, index)
    return low + high


@njit(fastmath=FASTMATH)
def _pair_square_sum(run, index):
    low, high = pair_values(run, index)
    return low * low + high * high


def pair_sums(run, n, squares, shift):
    """(sum, n_read): the float64 sum (of x * shift, or of x * x with ``squares``) of the first
    ``n_read`` elements of a contiguous run of ``n``, read two elements per load (pair_values), and
    n_read, the even part of ``n``. Only bfloat16 elements are read in pairs (their per-element decode
    is integer work); for every other element type nothing is read here, (0.0, 0), and the caller's
    per-element loop reads the whole run. The type decides at compile time, so other dtypes' kernels
    hold no pair code."""


@overload(pair_sums, jit_options={"fastmath": FASTMATH})
def _pair_sums_impl(run, n, squares, shift):
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


def pair_sums4(a, b, c, d, n, squares, shift):
    """pair_sums of four runs of ``n`` elements read together (four memory streams):
    (s0, s1, s2, s3, n_read)."""


@overload(pair_sums4, jit_options={"fastmath": FASTMATH})
def _pair_sums4_impl(a, b, c, d, n, squares, shift):
    if a.dtype != types.int16:
        return lambda a, b, c, d, n, squares, shift: (0.0, 0.0, 0.0, 0.0, 0)

    def sums(a, b, c, d, n, squares, shift):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        if not squares:
            for p in range(n // 2):
                s0 += _pair_sum(a, 2 * p)
                s1 += _pair_sum(b, 2 * p)
                s2 += _pair_sum(c, 2 * p)
                s3 += _pair_sum(d, 2 * p)
            s0, s1, s2, s3 = s0 * shift, s1 * shift, s2 * shift, s3 * shift
        else:
            for p in range(n // 2):
                s0 += _pair_square_sum(a, 2 * p)
                s1 += _pair_square_sum(b, 2 * p)
                s2 += _pair_square_sum(c, 2 * p)
                s3 += _pair_square_sum(d, 2 * p)
        return s0, s1, s2, s3, n - n % 2

    return sums


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


@njit(fastmath=FASTMATH)
def _float_runs4(src, first, gap, n, squares, shift):
    """The plain float64 sums (of x * shift, or of x * x with ``squares``) of four contiguous runs of
    ``n`` elements starting ``gap`` apart, read together: four memory streams."""
    a = _view(src, first, first + n)
    b = _view(src, first + gap, first + gap + n)
    c = _view(src, first + 2 * gap, first + 2 * gap + n)
    d = _view(src, first + 3 * gap, first + 3 * gap + n)
    s0, s1, s2, s3, n_read = pair_sums4(a, b, c, d, n, squares, shift)  # bfloat16: two per load
    if n_read:
        a, b, c, d = a[n_read:], b[n_read:], c[n_read:], d[n_read:]  # the last element of each, below
        n -= n_read
    if not squares:
        for i in range(n):
            s0 += as_float64(a[i]) * shift
            s1 += as_float64(b[i]) * shift
            s2 += as_float64(c[i]) * shift
            s3 += as_float64(d[i]) * shift
    else:
        for i in range(n):
            va, vb, vc, vd = as_float64(a[i]), as_float64(b[i]), as_float64(c[i]), as_float64(d[i])
            s0 += va * va
            s1 += vb * vb
            s2 += vc * vc
            s3 += vd * vd
    return s0, s1, s2, s3


@njit(fastmath=False)  # a square is rounded by itself, as NumPy's np.square rounds it
def _float64_term(x, mode, shift):
    return x * shift if mode == SUM else x * x


# The split passes are bound by their floating-point additions: five per element (two to split, one
# for the low part, two to accumulate), where the multiply-add units only square for the bound. On
# AMD Zen 4, whose 512-bit additions take both of its adder pipes, rows of 1000 float64 from the L3
# cache took 2x the time of a plain sum (torch's mean: 1.25x). Two of the five are therefore done as
# multiply-adds by 1.0, on the multiply-add pipes: high = fma(sigma + term, 1.0, -sigma) and
# accumulator += high * 1.0. The values are the same (the product is exact, the sum rounded once, as
# by an addition); the split pass took 0.66-0.75x the time (2 threads; 1000x1000, 4000x300, 200x1000).
# The 1.0 comes through an empty assembly block, or LLVM folds the multiply-adds back into additions.
# Only on x86-64 CPUs with FMA: elsewhere llvm.fma can be a library call, and the block's register
# constraint is x86's.
SPLIT_ON_FMA = platform.machine().lower() in ("x86_64", "amd64") and _cpu_has("fma")


@intrinsic
def _opaque_one(typingctx):
    """1.0 that LLVM cannot see is 1.0 where SPLIT_ON_FMA (the value of an empty assembly block),
    else a plain 1.0 (which LLVM folds away from ``x * one``)."""

    def codegen(context, builder, signature, args):
        one = ir.Constant(ir.DoubleType(), 1.0)
        if not SPLIT_ON_FMA:
            return one
        block = ir.InlineAsm(ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), "", "=x,0")
        return builder.call(block, [one])

    return types.float64(), codegen


@intrinsic
def _add_on_fma(typingctx, a, one, b):
    """a + b (``one`` is _opaque_one()'s 1.0), rounded once: fma(a, one, b) where SPLIT_ON_FMA."""

    def codegen(context, builder, signature, args):
        if SPLIT_ON_FMA:
            return builder.fma(*args)
        return builder.fadd(args[0], args[2])

    return types.float64(types.float64, types.float64, types.float64), codegen


@njit(fastmath=False)  # reassociation would fold (sigma + term) - sigma into term, and low into 0
def _split(term, sigma, one):
    """``term`` as (high, low): high is term rounded to a multiple of ulp(sigma) / 2, for |term| <=
    sigma a power of two, and low = term - high exactly (Rump, Ogita and Oishi's ExtractScalar).
    ``one``: _opaque_one(); the callers add high parts as ``high += part_high * one``."""
    high = _add_on_fma(sigma + term, one, -sigma)
    return high, term - high


# float64 runs are split-summed (_float64_run_for) in equal pieces of at most this many elements, each
# starting from the previous one's sigma. Each piece costs fixed work (three vector accumulators
# reduced, a square root, two compensated additions): rows of 3136 and 4096 elements took 0.82 and
# 0.77x the time in pieces of 2048 that they took in pieces of 1024 (4096: no better). The low
# parts' error grows with the square of the length: at most about 2**-80 of the sum of |x| here,
# where NumPy's pairwise sum errs by up to about 2**-53 of it times a growing factor.
# Runs shorter than SPLIT_PASS_MIN_RUN take two passes (_float64_run_two_pass), whose fixed cost is
# smaller: through the general row's calls, 20000x300 rows took 1.25x and 10000x600 1.0x as long in
# one pass as in two, 5000x1000 0.75x. Rows of ONE_PASS_MIN_ROW elements or more (up to one piece)
# that float_rows splits directly, without those calls, take one pass: rows of 100 and 200 took
# 0.77-0.89x the time of two passes, of 300 0.9-1.06x. Rows of 48-96 took 0.68-1.06x the time in
# one pass once the split functions were inlined (float_rows; before, 48 and 64 took 1.2-1.5x);
# of 16 and 24, 1.1-2.7x (2 threads, Zen 4, in-process A/B, means and sums of squares).
SPLIT_PIECE = 2048
ONE_PASS_MIN_ROW = 48
SPLIT_PASS_MIN_RUN = 512
# Strided rows in float_rows take one split pass from the row before's sigma (_float64_one_pass_for) from
# this length on, where _float64_run_two_pass's two single chains were faster for shorter ones (every
# other element of float64 rows, means, a bound and a split pass each: 64 elements 0.70x the time of
# two chains, 32 0.75x, 16 1.15x, 8 1.4x; the sigma of the row before saved a further 0.51-0.76x).
STRIDED_SPLIT_MIN_RUN = 32


@functools.cache
def _float64_run_for(contiguous):
    """float64_run(src, offset, n, step, mode, shift, sigma): the sum of x * shift (SUM) or x * x
    (SUM_SQUARES) over one run of float64 data as an exact high part and a nearly exact low part (summed compensated by _add_run), where a plain vectorised
    sum is not. Each term is split at a power of two, sigma, of more than twice the sum of the terms'
    magnitudes: its high part, a multiple of ulp(sigma) / 2, sums exactly in any order (no partial
    sum reaches sigma), and its low part, at most ulp(sigma) / 2, sums with an error of about
    n**2 * 2**-106 * sigma. A plain vectorised sum and NumPy's pairwise one err by up to
    n * 2**-53 * sum|x|, and which of the two came closer varied with the data and the CPU's vector
    width (the contract asks for no worse than NumPy's).

    ``sigma`` is the previous piece's (0.0 for none): neighbouring pieces have similar magnitudes, so
    one pass that splits at it and bounds the magnitude on the way (_split_pass) usually suffices;
    only when the bound shows it too small (wrong) or more than 16 times the bound (inexact) does a
    second pass split at a new one. Returns (high, low, sigma); sigma 0.0 after the fallback for
    non-finite terms, a magnitude near overflow, or a scaled sum (_float64_run_two_pass).

    Made for contiguous runs only (``contiguous``, a constant: step is 1; callers pass a literal 1)
    or for any step: the strided passes are not compiled into kernels whose runs are all contiguous
    (a float64 mean of 64x32x32 blocks compiled them, a third of its first call)."""
    contiguous_one_pass = _float64_one_pass_for(True)
    strided_one_pass = _float64_one_pass_for(False)

    @njit(fastmath=FASTMATH)
    def float64_run(src, offset, n, step, mode, shift, sigma):
        # A literal step: an unknown one keeps LLVM from vectorising the loops (6-10x slower). Each
        # path slices src itself: a slice handed down one more function took 16 ns more per short row.
        # shift: always 1, but for a rescaled mean after an overflow. Strided runs of any length take
        # the one-pass split: its passes over them run four sums each (_split_pass_strided).
        if contiguous or step == 1:
            if shift == 1.0 and n >= SPLIT_PASS_MIN_RUN:
                return contiguous_one_pass(_view(src, offset, offset + n), n, 1, mode, sigma)
            high, low = _float64_run_two_pass(_view(src, offset, offset + n), n, 1, mode, shift)
            return high, low, 0.0
        if shift == 1.0:  # (step may be 0: a broadcast axis)
            return strided_one_pass(_view(src, offset, len(src)), n, step, mode, sigma)
        high, low = _float64_run_two_pass(_view(src, offset, len(src)), n, step, mode, shift)
        return high, low, 0.0

    return float64_run


@functools.cache
def _float64_one_pass_for(contiguous):
    """one_pass(run, n, step, mode, sigma): float64_run over run[0], run[step], ..., n elements of
    terms x (SUM) or x * x (SUM_SQUARES), usually in one pass; for a contiguous run (``contiguous``,
    a constant: step is 1) or a strided one."""

    @njit(fastmath=FASTMATH)
    def one_pass(run, n, step, mode, sigma):
        if sigma > 0.0:
            if contiguous:
                high, low, bound = _split_pass(run, n, mode, sigma)
            else:
                high, low, bound = _split_pass_strided_run(run, n, step, mode, sigma)
            if 2.0 * bound < sigma <= 16.0 * bound:
                return high, low, sigma
        elif contiguous:
            bound = _magnitude_bound(run, n, mode)
        else:  # split at 0.0, each term is its own high part
            bound = _split_pass_strided_run(run, n, step, mode, 0.0)[2]
        if bound < 2.0**1020:
            # the power of two three binades above bound's: 4 * bound < sigma <= 8 * bound, inside
            # the window the next piece keeps it in (above) with room on both sides. Two binades
            # above (at most 4 * bound), 48 of 1000 standard normal rows of 1000 outgrew the sigma of
            # the row before and were split again; three, none. Low parts then err by up to twice as
            # much, no more than the window already allows.
            sigma = _bits_to_float64(((_float64_to_bits(bound) >> 52) + 3) << 52)
            if contiguous:
                high, low, _ = _split_pass(run, n, mode, sigma)
            else:
                high, low, _ = _split_pass_strided_run(run, n, step, mode, sigma)
            return high, low, sigma
        high, low = _float64_run_two_pass(run, n, step, mode, 1.0)
        return high, low, 0.0

    return one_pass


# A bound on the sum of |term| over a run, from sums computed in the same pass as the split, with
# factors covering their rounding (n * 2**-53 relative for up to SPLIT_PIECE positive terms, and
# 2**-1074 per square that underflows):
# - SUM: sum |x| <= sqrt(n * sum x**2) (Cauchy-Schwarz). One fused multiply-add per element, where
#   sum |x| costs an abs and an add: the split pass is bound by its vector instructions (from the L1
#   cache, one core: 12.8 against 10.5 Gelem/s); on typical data the bound exceeds sum |x| by
#   15-25% (on a single large term among n, by sqrt(n): a sigma that much larger, a low part that
#   much less exact, still far below NumPy's error).
# - SUM_SQUARES: the terms are positive, so their sum itself, high + low.
_BOUND_ROUNDING = 1.0 + 2.0**-30
_UNDERFLOW_ROOT = 2.0**-537  # sqrt(2**-1074)


@njit(fastmath=FASTMATH)
def _split_pass(run, n, mode, sigma):
    """(high, low, bound) of the n elements of a contiguous run split at ``sigma`` (_float64_run_for;
    shift 1)."""
    one = _opaque_one()
    high = 0.0
    low = 0.0
    if mode == SUM:
        squares = 0.0
        for i in range(n):
            x = run[i]
            part_high, part_low = _split(x, sigma, one)
            high += part_high * one
            low += part_low
            squares += x * x
        return high, low, (math.sqrt(n * squares) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    for i in range(n):
        part_high, part_low = _split(_float64_term(run[i], mode, 1.0), sigma, one)
        high += part_high * one
        low += part_low
    return high, low, (high + low) * _BOUND_ROUNDING


@njit(fastmath=FASTMATH)
def _split_pass_strided_run(run, n, step, mode, sigma):
    """_split_pass over run[0], run[step], ...: every other element over its span, other steps in four
    interleaved sums."""
    if step == 2 and n > 0:
        return _split_pass_every_other(run, n, mode, sigma)
    return _split_pass_strided(run, n, step, mode, sigma)


@njit(fastmath=FASTMATH)
def _magnitude_bound(run, n, mode):
    """_split_pass's bound alone, for the first piece of a contiguous run."""
    total = 0.0
    if mode == SUM:
        for i in range(n):
            x = run[i]
            total += x * x
        return (math.sqrt(n * total) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    for i in range(n):
        total += _float64_term(run[i], mode, 1.0)
    return total * _BOUND_ROUNDING


@njit(fastmath=False)
def _kept_if(value, keep):
    """``value`` where ``keep`` (an int64 of all ones) and 0.0 where it is 0, by its bits."""
    return _bits_to_float64(_float64_to_bits(value) & keep)


@njit(fastmath=FASTMATH)
def _split_pass_every_other(run, n, mode, sigma):
    """_split_pass over every other element as one pass over the whole span (every_other_span), with
    the parts of the elements in between zeroed by their bits (so that their NaN or inf never
    enters). The span lies inside the input's buffer (src spans all the memory the input touches),
    and this loop is vectorised where a strided one is not: every other element of float64 rows ran
    at 1.4-4.6 against 1.0-1.4 Gelem/s in four interleaved sums (_split_pass_strided; one core, rows
    of 64 and 2000 from the L2 cache and from memory). Splits of 0.0 add 0.0 exactly to both parts,
    and the bound counts n terms, not the span.
    The parts are zeroed, not the elements: LLVM made an element zeroed by bits or selected a
    masked load, which from memory took 2.5x as long per row as the strided loop (AMD Zen 5). Nor
    for every third or fourth element: i % 3 was not vectorised, every fourth took 1.2-3x as long."""
    span = every_other_span(run, 0, n)
    one = _opaque_one()
    high = 0.0
    low = 0.0
    if mode == SUM:
        squares = 0.0
        for i in range(span):
            keep = (i & 1) - 1  # all ones for even i, 0 for odd
            x = run[i]
            part_high, part_low = _split(x, sigma, one)
            high += _kept_if(part_high, keep) * one
            low += _kept_if(part_low, keep)
            squares += _kept_if(x * x, keep)
        return high, low, (math.sqrt(n * squares) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    for i in range(span):
        keep = (i & 1) - 1
        part_high, part_low = _split(_float64_term(run[i], mode, 1.0), sigma, one)
        high += _kept_if(part_high, keep) * one
        low += _kept_if(part_low, keep)
    return high, low, (high + low) * _BOUND_ROUNDING


# fastmath=False: with reassoc (as it had inherited from _split_pass) the loop took 3.3x as long
@njit(fastmath=False)
def _split_pass_strided(run, n, step, mode, sigma):
    """_split_pass over a strided run (a step other than 1) in four sums of each kind, one per
    element in turn: a strided loop is not vectorised, and as three chains of dependent additions
    (one per kind) every other element of 4000x3000 float64 rows took 3x as long (one thread).
    The high parts sum exactly in any order, and the low parts' order does not change their error
    bound."""
    one = _opaque_one()  # for the split; the sums below are chains bound by latency, so plain additions
    high0 = high1 = high2 = high3 = 0.0
    low0 = low1 = low2 = low3 = 0.0
    squares0 = squares1 = squares2 = squares3 = 0.0  # SUM's bound
    whole = n - n % 4
    for i in range(0, whole, 4):
        x0, x1, x2, x3 = run[i * step], run[(i + 1) * step], run[(i + 2) * step], run[(i + 3) * step]
        part_high, part_low = _split(_float64_term(x0, mode, 1.0), sigma, one)
        high0, low0, squares0 = high0 + part_high, low0 + part_low, squares0 + x0 * x0
        part_high, part_low = _split(_float64_term(x1, mode, 1.0), sigma, one)
        high1, low1, squares1 = high1 + part_high, low1 + part_low, squares1 + x1 * x1
        part_high, part_low = _split(_float64_term(x2, mode, 1.0), sigma, one)
        high2, low2, squares2 = high2 + part_high, low2 + part_low, squares2 + x2 * x2
        part_high, part_low = _split(_float64_term(x3, mode, 1.0), sigma, one)
        high3, low3, squares3 = high3 + part_high, low3 + part_low, squares3 + x3 * x3
    high, low = (high0 + high1) + (high2 + high3), (low0 + low1) + (low2 + low3)
    squares = (squares0 + squares1) + (squares2 + squares3)
    for i in range(whole, n):
        x = run[i * step]
        part_high, part_low = _split(_float64_term(x, mode, 1.0), sigma, one)
        high, low, squares = high + part_high, low + part_low, squares + x * x
    if mode == SUM:
        return high, low, (math.sqrt(n * squares) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    return high, low, (high + low) * _BOUND_ROUNDING


@njit(fastmath=FASTMATH)
def _float64_run_two_pass(run, n, step, mode, shift):
    """_float64_run_for's fallback: sum |term| first, then split at a sigma from it; the plain sum of the
    terms where they are not finite or their magnitude is near overflow: there it is the IEEE
    answer (or is rescaled)."""
    magnitude = 0.0
    for i in range(n):
        magnitude += abs(_float64_term(run[i * step], mode, shift))
    if not magnitude < 2.0**1021:  # inf, NaN, or too near overflow for sigma
        total = 0.0
        for i in range(n):
            total += _float64_term(run[i * step], mode, shift)
        return total, 0.0
    sigma = _bits_to_float64(((_float64_to_bits(magnitude) >> 52) + 2) << 52)
    high = 0.0
    low = 0.0
    # plain additions (a literal 1.0): these runs are short, and with multiply-adds, whose latency
    # is longer, 100000x16 rows took 1.04-1.05x the time (Zen 4)
    for i in range(n):
        part_high, part_low = _split(_float64_term(run[i * step], mode, shift), sigma, 1.0)
        high += part_high
        low += part_low
    return high, low


def _literal_mode(mode):
    """The value of a ``mode`` argument typed as a literal (a constant at the call), for the functions
    compiled once per mode (_add_run, _float_run, _float_row): every caller passes a constant."""
    if not isinstance(mode, types.IntegerLiteral):
        raise TypeError(f"mode must be a constant at the call, got {mode}")
    return mode.literal_value


# The float64 split sums are reached only for float64 data, but a kernel's branch on
# compensation_block(src) is not folded by Numba: called directly, they were compiled into every
# float32, float16 and bfloat16 kernel too (a third of a float32 row kernel's compile time). Called
# through these gates, other data compiles a stub instead.
def _is_one(step):
    """Whether a ``step`` argument is the constant 1 at the call: a contiguous run."""
    return isinstance(step, types.IntegerLiteral) and step.literal_value == 1


def float64_run(src, offset, n, step, mode, shift, sigma):
    """_float64_run_for's float64_run for float64 ``src``, the contiguous one where ``step`` is a
    literal 1; never reached for other data."""


@overload(float64_run, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _float64_run_gate(src, offset, n, step, mode, shift, sigma):
    if src.dtype == types.float64:
        run = _float64_run_for(_is_one(step))
        return lambda src, offset, n, step, mode, shift, sigma: run(src, offset, n, step, mode, shift, sigma)
    return lambda src, offset, n, step, mode, shift, sigma: (0.0, 0.0, sigma)


def float64_one_pass(run, n, step, mode, sigma):
    """_float64_one_pass_for's one_pass for float64 ``run``, the contiguous one where ``step`` is a
    literal 1; never reached for other data."""


@overload(float64_one_pass, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _float64_one_pass_gate(run, n, step, mode, sigma):
    if run.dtype == types.float64:
        one_pass = _float64_one_pass_for(_is_one(step))
        return lambda run, n, step, mode, sigma: one_pass(run, n, step, mode, sigma)
    return lambda run, n, step, mode, sigma: (0.0, 0.0, sigma)


def float64_run_two_pass(run, n, step, mode, shift):
    """_float64_run_two_pass for float64 ``run``; never reached for other data."""


@overload(float64_run_two_pass, inline="always", jit_options={"fastmath": False})
def _float64_run_two_pass_gate(run, n, step, mode, shift):
    if run.dtype == types.float64:
        return lambda run, n, step, mode, shift: _float64_run_two_pass(run, n, step, mode, shift)
    return lambda run, n, step, mode, shift: (0.0, 0.0)


def _add_run(total, comp, sigma, src, offset, n, step, mode, shift):
    """(total, comp) plus the sum of one run's terms (as in _float_run), compensated (Neumaier), and
    the sigma of its last split piece: float64 sums and sums of squares nearly exactly in equal pieces
    of at most SPLIT_PIECE (_float64_run_for; ``sigma`` is the previous piece's), float64 exp sums plainly
    in pieces of BLOCK, and narrower floats plainly at once."""


@functools.cache
def _add_run_for(mode, float64, contiguous):
    """_add_run for one ``mode``, for float64 data or not, and for contiguous runs (a literal step 1
    at the call) or any, constants: the other modes' loops, the other data's path and, for
    contiguous runs, the float64 strided passes are pruned."""

    @njit(fastmath=False)
    def add_run(total, comp, sigma, src, offset, n, step, shift):
        block = compensation_block(src)
        if float64 and mode != SUM_EXP:
            # equal pieces, no short last one (4160: 3 x 1387, not 2 x 2048 + 64); no divisions for one
            piece = n if n <= SPLIT_PIECE else -(-n // -(-n // SPLIT_PIECE))
            for b in range(0, n, piece):
                if contiguous:
                    high, low, sigma = float64_run(src, offset + b, min(piece, n - b), 1, mode, shift, sigma)
                else:
                    high, low, sigma = float64_run(src, offset + b * step, min(piece, n - b), step, mode, shift,
                                                   sigma)
                total, comp = add_compensated(total, comp, high)
                total, comp = add_compensated(total, comp, low)
            return total, comp, sigma
        for b in range(0, n, block):
            total, comp = add_compensated(total, comp, _float_run(src, offset + b * step, min(block, n - b), step, mode,
                                                            shift))
        return total, comp, sigma

    return add_run


@overload(_add_run, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _add_run_by_mode(total, comp, sigma, src, offset, n, step, mode, shift):
    specialised = _add_run_for(_literal_mode(mode), src.dtype == types.float64, _is_one(step))

    def call(total, comp, sigma, src, offset, n, step, mode, shift):
        return specialised(total, comp, sigma, src, offset, n, step, shift)

    return call


# The mode tests sit outside the loops on purpose: a branch inside a loop keeps LLVM from
# vectorising it, and it does not unswitch three-way branches by itself.
def _float_run(src, offset, n, step, mode, shift):
    """Plain float64 sum over one strided run of: x * shift (SUM; shift is 1 or a power-of-two
    scale), x * x (SUM_SQUARES), or exp(x - shift) (SUM_EXP; shift is the max)."""


@functools.cache
def _float_run_for(mode):
    """_float_run for one ``mode``, a constant: the other modes' loops are pruned."""

    @njit(fastmath=FASTMATH)
    def float_run(src, offset, n, step, shift):
        acc = 0.0
        if step == 1 and mode != SUM_EXP and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # quarters of a long run
            quarter = n // 4
            s0, s1, s2, s3 = _float_runs4(src, offset, quarter, quarter, mode == SUM_SQUARES, shift)
            acc = (s0 + s1) + (s2 + s3)
            offset += 4 * quarter
            n -= 4 * quarter
        if step == 1:
            run = _view(src, offset, offset + n)
            if mode != SUM_EXP:  # bfloat16: two elements per load
                pairs, n_read = pair_sums(run, n, mode == SUM_SQUARES, shift)
                if n_read:
                    acc += pairs
                    run = run[n_read:]  # the last element of an odd run, below
                    n -= n_read
            if mode == SUM:
                for i in range(n):
                    acc += as_float64(run[i]) * shift
            elif mode == SUM_SQUARES:
                for i in range(n):
                    v = as_float64(run[i])
                    acc += v * v
            else:
                for i in range(n):
                    acc += exp_nonpositive(as_float64(run[i]) - shift)
        else:
            if mode != SUM_EXP and step == 2 and n >= EVERY_OTHER_MIN_RUN:
                # every other element, read over the whole span (_every_other_sum): in-process against
                # the paths below, 4000x3000, 1000x2000 and 100000x32-64 rows, every other element:
                # float32 0.25-0.83x the time, float16 0.26-0.85x, bfloat16 0.38-0.84x
                span = _view(src, offset, offset + every_other_span(src, offset, n))
                return _every_other_sum(span, mode == SUM_SQUARES, shift)
            if mode != SUM_EXP and n >= STRIDED_LANES_MIN_RUN and step > 0 and src.itemsize == 4:
                # float32, not a broadcast (step 0, which a slice cannot take). A strided run is not
                # vectorised, and as one chain of dependent additions every other or every third element
                # of 4000x3000 float32 rows took 4-5x as long as in STRIDED_LANES sums held in an array
                # (100000x256 every other: 2.5-3x). Scalar sums did not do it (reassociation may fold
                # them back into one chain). Not for the 16-bit floats, whose conversions bound the loop
                # already (float16 1.8x the time, bfloat16 0.75x or 1.2x from one build to the next),
                # nor for exp sums (1.2-2.7x: bound by the exp), nor for short runs (the array cost more
                # than it saved: 2x on rows of 16).
                run = src[offset:offset + (n - 1) * step + 1:step]
                lanes = np.zeros(STRIDED_LANES)
                whole = n - n % STRIDED_LANES
                if mode == SUM:
                    for i0 in range(0, whole, STRIDED_LANES):
                        for j in range(STRIDED_LANES):
                            lanes[j] += as_float64(run[i0 + j]) * shift
                    for i in range(whole, n):
                        acc += as_float64(run[i]) * shift
                else:
                    for i0 in range(0, whole, STRIDED_LANES):
                        for j in range(STRIDED_LANES):
                            v = as_float64(run[i0 + j])
                            lanes[j] += v * v
                    for i in range(whole, n):
                        v = as_float64(run[i])
                        acc += v * v
                return acc + lanes.sum()
            if mode == SUM:
                for i in range(n):
                    acc += as_float64(src[offset + i * step]) * shift
            elif mode == SUM_SQUARES:
                for i in range(n):
                    v = as_float64(src[offset + i * step])
                    acc += v * v
            else:
                for i in range(n):
                    acc += exp_nonpositive(as_float64(src[offset + i * step]) - shift)
        return acc

    return float_run


@overload(_float_run, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _float_run_by_mode(src, offset, n, step, mode, shift):
    specialised = _float_run_for(_literal_mode(mode))

    def call(src, offset, n, step, mode, shift):
        return specialised(src, offset, n, step, shift)

    return call


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


@njit(fastmath=FASTMATH)
def _every_other_sum(span, squares, shift):
    """_float_run's plain float64 sum (of x * shift, or of x * x with ``squares``) of the even elements of ``span``
    (every_other_span), as _split_pass_every_other reads them: the whole span, vectorised, the
    terms of the elements in between zeroed by their bits."""
    acc = 0.0
    if not squares:  # the term zeroed, not the element: a float32 one became a masked load (2x the time)
        for i in range(span.size):
            acc += _kept_if(as_float64(span[i]) * shift, (i & 1) - 1)
        return acc
    for i in range(span.size):
        v = as_float64(span[i])
        acc += _kept_if(v * v, (i & 1) - 1)
    return acc


@njit(fastmath=FASTMATH)
def _float_columns(src, offset, step, nrows, width, mode, scale, maxima, k0, acc):
    """acc[w] += the terms (as in _float_run) of element w of ``nrows`` (1, 4, or 8 but not for
    SUM_EXP) rows of a tile. Tiles exist only over contiguous kept elements, so a row is a contiguous
    run. Several rows per call cut the traffic to ``acc``: eight instead of four took 0.79-0.84x the
    time on 32x64x56x56 float32 axis 1 (in-process A/B; float16 and float64 unchanged). Eight rows'
    terms are added as one chain of x * scale (multiply-adds, by contraction): on Zen 4 conversions
    and additions share two pipes and multiply-adds have two others, and float16 and bfloat16 column
    means took 0.89-0.96x the time of a tree of additions (float32, float64 and int32 unchanged;
    sums of squares 0.95-1.03x, left as a tree)."""
    shift = maxima[k0:k0 + width]  # used by SUM_EXP only
    r0 = _view(src, offset, offset + width)
    if nrows == 8:
        r1 = _view(src, offset + step, offset + step + width)
        r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
        r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
        r4 = _view(src, offset + 4 * step, offset + 4 * step + width)
        r5 = _view(src, offset + 5 * step, offset + 5 * step + width)
        r6 = _view(src, offset + 6 * step, offset + 6 * step + width)
        r7 = _view(src, offset + 7 * step, offset + 7 * step + width)
        if mode == SUM:
            for w in range(width):
                acc[w] += ((((((as_float64(r0[w]) * scale + as_float64(r1[w]) * scale) + as_float64(r2[w]) * scale)
                               + as_float64(r3[w]) * scale) + as_float64(r4[w]) * scale) + as_float64(r5[w]) * scale)
                           + as_float64(r6[w]) * scale) + as_float64(r7[w]) * scale
        else:
            for w in range(width):
                a, b, c, d = as_float64(r0[w]), as_float64(r1[w]), as_float64(r2[w]), as_float64(r3[w])
                e, f, g, h = as_float64(r4[w]), as_float64(r5[w]), as_float64(r6[w]), as_float64(r7[w])
                acc[w] += ((a * a + b * b) + (c * c + d * d)) + ((e * e + f * f) + (g * g + h * h))
    elif nrows == 4:
        r1 = _view(src, offset + step, offset + step + width)
        r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
        r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
        if mode == SUM:  # each term scaled: a float64 sum that overflows is summed again scaled by 2**-64
            for w in range(width):
                acc[w] += ((as_float64(r0[w]) * scale + as_float64(r1[w]) * scale)
                           + (as_float64(r2[w]) * scale + as_float64(r3[w]) * scale))
        elif mode == SUM_SQUARES:
            for w in range(width):
                a, b, c, d = as_float64(r0[w]), as_float64(r1[w]), as_float64(r2[w]), as_float64(r3[w])
                acc[w] += (a * a + b * b) + (c * c + d * d)
        else:
            for w in range(width):
                m = shift[w]
                acc[w] += (exp_nonpositive(as_float64(r0[w]) - m) + exp_nonpositive(as_float64(r1[w]) - m)) + (
                    exp_nonpositive(as_float64(r2[w]) - m) + exp_nonpositive(as_float64(r3[w]) - m))
    elif mode == SUM:
        for w in range(width):
            acc[w] += as_float64(r0[w]) * scale
    elif mode == SUM_SQUARES:
        for w in range(width):
            v = as_float64(r0[w])
            acc[w] += v * v
    else:
        for w in range(width):
            acc[w] += exp_nonpositive(as_float64(r0[w]) - shift[w])


@njit(fastmath=False)
def _fold(acc, totals, comps):
    """Add the plain accumulators into the compensated totals of their columns (acc[j] belongs to
    column j % totals.size) and clear them."""
    width = totals.size
    for j0 in range(0, acc.size, width):  # no j % width: a division per element costs more than the add
        for w in range(width):
            # Knuth's TwoSum: the same exact error as _neumaier's, without its branch on the
            # magnitudes, which the data decides (narrow float64 tiles of 1000x500x4 and 256x1024x8:
            # 0.90-0.94x the time, in-process A/B)
            total, value = totals[w], acc[j0 + w]
            t = total + value
            back = t - total
            comps[w] += (total - (t - back)) + (value - back)
            totals[w] = t
            acc[j0 + w] = 0.0


# A tile narrower than this whose rows lie back to back (a short kept axis over a contiguous block,
# such as 4194304x4 reduced over axis 0) is read as "wide rows" of several real rows at once, so the
# inner loops stay long enough to vectorise.
WIDE_ROW = 2048
# ... but a task reads at least this many wide rows: its accumulators (one per element of a wide
# row) are allocated and folded once per task, and with few rows per task that cost more than the
# reads. 256x1024x8 axis 1 (1024 rows of 8 per task) took 195 us in 4 wide rows of 2048 elements
# and 85-100 us in wide rows of 128-256; 4194304x4 axis 0 (chunks of 262144 rows) wants all 2048.
MIN_WIDE_ROWS = 64


@njit(fastmath=False)
def _rows_per_wide_row(width, step, n_rows):
    """How many back-to-back rows of ``width`` elements a task of ``n_rows`` rows reads as one."""
    if step != width or 2 * width > WIDE_ROW:
        return 1
    return max(1, min(WIDE_ROW // width, n_rows // MIN_WIDE_ROWS))


def reads_wide_rows(n_inner, tile, step, n_rows):
    """Whether float_sums reads the ``n_rows`` rows of some tile of ``n_inner`` outputs cut into tiles
    of ``tile`` as wide rows (_rows_per_wide_row above 1); for the plan, in Python."""
    last = n_inner - (n_inner - 1) // tile * tile
    return any(_rows_per_wide_row.py_func(width, step, n_rows) > 1 for width in (tile, last))


def _float_sums_for(mode):
    """The float_sums kernel for one ``mode`` (SUM, SUM_SQUARES, SUM_EXP), fixed at compile time: LLVM
    then keeps only that mode's loops and inlines them. With the mode a runtime argument, rows of
    100-1000 elements took 1.3-2.2x as long (the per-row call and set-up were not optimised away)."""

    def float_sums(src, base, dims, kept_ndim, nchunks, tile, scale, maxima, out_total, out_comp, divisor, result):
        """Compensated float64 sums per (output, chunk) of x * scale (SUM), x * x (SUM_SQUARES) or
        exp(x - maxima[k]) (SUM_EXP). With tile > 1 a task walks the reduced rows of ``tile`` neighbouring
        outputs together (a leading reduced axis read row by row instead of column by column).

        Without partial arrays (size 0; one chunk per output) the task writes the finished
        ``result[k]`` itself (see _finish_sum): with many outputs a separate serial finishing pass
        would cost as much as the reduction. Otherwise the chunk partials go to out_total/out_comp
        for _finish_* to combine (also with one chunk: the integer log-sum-exp finishes its own way)."""
        src, maxima = _borrowed(src), _borrowed(maxima)
        kshape, kstrides, rshape, rstrides = _unpack(dims, kept_ndim)
        nr = np.prod(rshape)
        step = rstrides[-1]
        block = compensation_block(src)
        for task in prange(_n_tasks(kshape, tile, nchunks)):
            k0, width, c, pos, end = _task(task, kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            if tile == 1:
                shift = maxima[k0] if mode == SUM_EXP else scale
                total = 0.0
                comp = 0.0
                sigma = 0.0  # (_float64_run_for's, passed on from run to run)
                if mode != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
                    while pos < end:
                        offset, n = _next_run(pos, end, rshape, rstrides)
                        total, comp, sigma = _add_run(total, comp, sigma, src, origin + offset, n, step, mode, shift)
                        pos += n
                if out_total.size == 0:
                    store_rounded(result, k0, _finish_sum(total, comp, mode, divisor, shift))
                else:
                    out_total[k0 * nchunks + c] = total
                    out_comp[k0 * nchunks + c] = comp
            else:
                m = _rows_per_wide_row(width, step, end - pos)
                wide = m * width  # accumulators: column j % width, m of them per column
                acc = np.zeros(wide)
                # Per-task work proportional to the width must stay small next to the rows (a task may
                # have only a few): compensated totals exist only where they are folded (float64 data),
                # and the maxima only for SUM_EXP.
                # (Arrays not needed are empty views of acc, not allocations: with few rows per task
                # each allocation counts.)
                # Fewer rows than a block, in accumulators of their own (no wide rows): their plain
                # sums are what the compensated fold would give (0 + acc[w], exactly), so float64
                # skips the fold and its arrays (16x100000 float64 over axis 0: 0.65-0.68x the time,
                # 64x20000 0.89-0.90x, in-process A/B).
                compensated = block < NEVER and (m > 1 or end - pos >= block)
                totals = np.zeros(width) if compensated else acc[:0]
                comps = np.zeros(width) if compensated else acc[:0]
                column_max = np.empty(wide) if mode == SUM_EXP else acc[:0]  # the max of each accumulator's column
                if mode == SUM_EXP:
                    for j0 in range(0, wide, width):
                        column_max[j0:j0 + width] = maxima[k0:k0 + width]
                # The most terms one accumulator has taken since the last fold (at most block): a wide
                # row gives each accumulator one term (counting real rows instead folded 4194304x4's
                # wide rows of 512 rows after every call).
                terms = 0
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    j = 0
                    while j < n:
                        if mode != SUM_EXP and n - j >= 8 * m:  # eight (wide) rows per call: less traffic to acc
                            _float_columns(src, offset + j * step, m * step, 8, wide, mode, scale, column_max, 0, acc)
                            j += 8 * m
                            terms += 8
                        elif n - j >= 4 * m:  # four: a quarter of the traffic of one
                            _float_columns(src, offset + j * step, m * step, 4, wide, mode, scale, column_max, 0, acc)
                            j += 4 * m
                            terms += 4
                        elif n - j >= m:
                            _float_columns(src, offset + j * step, m * step, 1, wide, mode, scale, column_max, 0, acc)
                            j += m
                            terms += 1
                        else:
                            _float_columns(src, offset + j * step, step, 1, width, mode, scale, column_max, 0, acc)
                            j += 1
                            terms += 1
                        if terms >= block:
                            _fold(acc, totals, comps)
                            terms = 0
                    pos += n
                if compensated:
                    _fold(acc, totals, comps)
                else:
                    for j0 in range(width, wide, width):  # the m accumulators of each column
                        acc[:width] += acc[j0:j0 + width]
                    totals = acc[:width]
                if out_total.size == 0:
                    for w in range(width):
                        comp = comps[w] if compensated else 0.0
                        store_rounded(result, k0 + w, _finish_sum(totals[w], comp, mode, divisor,
                                                                  column_max[w] if mode == SUM_EXP else 0.0))
                else:
                    for w in range(width):
                        out_total[(k0 + w) * nchunks + c] = totals[w]
                        out_comp[(k0 + w) * nchunks + c] = comps[w] if compensated else 0.0

    return float_sums


# Columns of a strided view (float_rows): tasks (chunks of the rows), at most; rows per chunk, at
# least; rows, at least.
COLUMN_TASKS = 16
COLUMN_CHUNK_MIN_ROWS = 64
# Columns of fewer rows stay one output at a time: neighbouring outputs then find their rows'
# cache lines still in L1 (every other column of 200x50000 float32: 1.3x the time by rows).
COLUMN_MIN_ROWS = 128


@njit(fastmath=False)
def _add_strided_row(acc, src, origin, stride, squares, scale):
    """acc[k] += the term (x * scale, or x * x with ``squares``) of src[origin + k * stride], each k."""
    row = _view(src, origin, len(src))
    if not squares:
        for k in range(acc.size):
            acc[k] += as_float64(row[k * stride]) * scale
    else:
        for k in range(acc.size):
            v = as_float64(row[k * stride])
            acc[k] += v * v


# The variants of the float row kernel, one kernel each (float_rows_variant picks one per call):
# strided columns; narrow floats' strided rows, rows one by one, four rows together; float64 rows of
# one split piece (contiguous, strided), of several pieces, short rows in two passes (contiguous,
# strided); and the general row (float64 rescaled sums, exp sums).
(ROWS_COLUMNS, ROWS_STRIDED, ROWS_ONE_BY_ONE, ROWS_FOUR, ROWS_ONE_PASS, ROWS_ONE_PASS_STRIDED, ROWS_PIECES,
 ROWS_TWO_PASS, ROWS_TWO_PASS_STRIDED, ROWS_GENERAL) = range(10)


def float_rows_variant(mode, carrier, kept_stride, n_kept, n_reduced, step, scale):
    """The float_rows variant for these rows of ``carrier`` data (the kernels' view of the dtype)."""
    carrier = np.dtype(carrier)
    if (mode != SUM_EXP and 0 < kept_stride < step and n_reduced >= COLUMN_MIN_ROWS
            and not (mode == SUM_SQUARES and carrier == np.uint16)):  # (float16 sums of squares)
        return ROWS_COLUMNS
    float64 = carrier == np.float64
    if mode != SUM_EXP and not float64:
        if step != 1:
            return ROWS_STRIDED
        min_row, min_large_row = ((ONE_STREAM_MIN_FLOAT32_ROW, ONE_STREAM_MIN_LARGE_FLOAT32_ROW)
                                  if carrier.itemsize == 4 else (ONE_STREAM_LONG_ROWS_ONLY, ONE_STREAM_MIN_LARGE_ROW))
        if _rows_together(carrier.itemsize, n_kept, n_reduced, min_row, min_large_row) == 1:
            return ROWS_ONE_BY_ONE
        return ROWS_FOUR
    if (float64 and mode != SUM_EXP and scale == 1.0 and n_reduced <= SPLIT_PIECE
            and n_reduced >= (ONE_PASS_MIN_ROW if step == 1 else STRIDED_SPLIT_MIN_RUN)):
        return ROWS_ONE_PASS if step == 1 else ROWS_ONE_PASS_STRIDED
    if float64 and mode != SUM_EXP and scale == 1.0 and step == 1 and n_reduced > SPLIT_PIECE:
        return ROWS_PIECES
    if float64 and mode != SUM_EXP and n_reduced < SPLIT_PASS_MIN_RUN:
        return ROWS_TWO_PASS if step == 1 else ROWS_TWO_PASS_STRIDED
    return ROWS_GENERAL


def _float_rows_for(mode, variant):
    """float_sums for the commonest layout, fixed to one ``mode`` and one ``variant`` (ROWS_*): one
    output per task, each a single run of ``n_reduced`` elements ``step`` apart (after merging: one
    kept axis over one reduced axis, no tile, one chunk). The general kernel's per-output set-up (task
    decoding, run walking) took as long again as rows of 100-1000 elements themselves; here only the
    run is left. Each variant is a kernel of its own, one parallel loop each: in one kernel, all ten
    were compiled on every first call."""

    def float_rows(src, base, kept_stride, n_kept, n_reduced, step, scale, maxima, divisor, result):
        src, maxima = _borrowed(src), _borrowed(maxima)
        block = compensation_block(src)
        if variant == ROWS_COLUMNS:
            # Columns of a strided view (x[:, ::2] over axis 0): the outputs lie along each row, so
            # whole rows are read in turn, in tasks of a chunk of the rows each (their count fixed
            # by the shape: results do not depend on the threads; parts of rows per task, as
            # tiles, took up to 1.6x as long as one output at a time on 600x20000), summed as
            # float tiles are (plain sums of up to ``block`` rows, folded compensated), the chunks
            # combined after. One output at a time, each column through thousands of pages,
            # every other column of 4000x3000 took 3-4x as long (float32, float64, bfloat16, and
            # float16 means). Not for float16 sums of squares, which took 2.4-5x as long here
            # (the same loop outside this kernel ran as fast as the sums; cause not found).
            nchunks = 1
            while 2 * nchunks <= COLUMN_TASKS and 2 * nchunks * COLUMN_CHUNK_MIN_ROWS <= n_reduced:
                nchunks *= 2  # a power of two: an even share for 2, 4, 8 threads
            rows_per_chunk = -(-n_reduced // nchunks)
            totals = np.zeros((nchunks, n_kept))  # at most 1/16 of the bytes the input spans
            comps = np.zeros((nchunks, n_kept))
            for c in prange(nchunks):
                acc = np.zeros(n_kept)
                first, end = c * rows_per_chunk, min(n_reduced, (c + 1) * rows_per_chunk)
                for j0 in range(first, end, block):  # one piece but for float64 (block: NEVER)
                    for j in range(j0, min(j0 + block, end)):
                        _add_strided_row(acc, src, base + j * step, kept_stride, mode == SUM_SQUARES, scale)
                    _fold(acc, totals[c], comps[c])
            # each output's partials next to each other, as _combined_sum takes them (folding
            # into columns of an output-major array instead: up to 1.4x the time)
            totals = np.ascontiguousarray(totals.T).ravel()
            comps = np.ascontiguousarray(comps.T).ravel()
            for k in range(n_kept):
                store_rounded(result, k, _combined_sum(totals, comps, k, nchunks) / divisor)
            return
        if variant == ROWS_STRIDED or variant == ROWS_ONE_BY_ONE or variant == ROWS_FOUR:  # not float64 data
            # Rows, their plain sums divided here: not through _float_row and _finish_sum,
            # whose compensation and non-finite test only float64 sums need (the per-row calls cost
            # 3-4 us on 1000x1000 float32, 2 threads). With float32 rows one at a time
            # (_rows_together), whole float32 means and sums of squares took 0.83-0.86x the time on
            # 1000x1000 and 20000x100, 0.91-0.93x on 100000x16; float16 0.80-0.84x on 20000x100
            # (in-process A/B). Not for SUM_EXP, which is bound by exp, not by memory.
            # (float32 is the only 4-byte float)
            if variant == ROWS_STRIDED:  # strided rows, one per task as well: every other element of 100000x32
                # float16 rows took 0.82-0.85x the time of the loop below with _float_row
                for k in prange(n_kept):
                    total = _float_run(src, base + k * kept_stride, n_reduced, step, mode, scale)
                    store_rounded(result, k, total / divisor)
                return
            if variant == ROWS_ONE_BY_ONE:  # (_rows_together)
                for k in prange(n_kept):
                    total = _float_run(src, base + k * kept_stride, n_reduced, 1, mode, scale)
                    store_rounded(result, k, total / divisor)
                return
            # four at a time: four memory streams (STREAMS_MIN_RUN) and a quarter of the per-row loop
            # overhead (10000x16 float32 mean: 183 -> 62 us; 32x64x56x56 axes [2,3]: 1.11 -> 0.80 ms)
            for group in prange(-(-n_kept // 4)):
                k0 = 4 * group
                if k0 + 4 <= n_kept:
                    sums = _float_runs4(src, base + k0 * kept_stride, kept_stride, n_reduced, mode == SUM_SQUARES,
                                        scale)
                    for j in range(4):
                        store_rounded(result, k0 + j, sums[j] / divisor)
                else:  # the last 1-3 rows
                    for k in range(k0, n_kept):
                        total = _float_run(src, base + k * kept_stride, n_reduced, 1, mode, scale)
                        store_rounded(result, k, total / divisor)
            return
        # Float64 rows start from the sigma of the row before in their task (_float64_run_for), so that only
        # one row in up to sixteen needs a separate first pass over its first piece (float64 1000x1000 rows:
        # 72 us in tasks of sixteen rows, 79 in tasks of four, 85 before the one-pass split). At least
        # sixteen tasks remain for the threads.
        rows_per_task = min(16, max(1, n_kept // 16))
        if variant == ROWS_ONE_PASS or variant == ROWS_ONE_PASS_STRIDED:
            # Rows of one split piece, called directly: high + low rounded once is what _float_row's
            # compensated additions and finish give (as for short rows below). Through _float_row,
            # float64 1000x1000 and 1000x600 rows took 1.2-1.35x the time (in-process A/B). Strided
            # rows from STRIDED_SPLIT_MIN_RUN on: every other or every third element of 100000x64,
            # 100000x128, 20000x100 and 100000x96 rows took 0.51-0.76x the time of a bound and a
            # split pass each (the branch below).
            # One call of each split function per loop (here and below): LLVM inlines a function
            # called once, and a call for each step in one loop left both not inlined: 100000x16
            # float64 rows took 1.4x the time (2 threads, AMD Zen 4).
            if variant == ROWS_ONE_PASS:
                for task in prange(-(-n_kept // rows_per_task)):
                    sigma = 0.0
                    for k in range(task * rows_per_task, min(task * rows_per_task + rows_per_task, n_kept)):
                        origin = base + k * kept_stride
                        high, low, sigma = float64_one_pass(_view(src, origin, origin + n_reduced), n_reduced, 1,
                                                             mode, sigma)
                        store_rounded(result, k, (high + low) / divisor)
                return
            for task in prange(-(-n_kept // rows_per_task)):
                sigma = 0.0
                for k in range(task * rows_per_task, min(task * rows_per_task + rows_per_task, n_kept)):
                    origin = base + k * kept_stride
                    high, low, sigma = float64_one_pass(_view(src, origin, len(src)), n_reduced, step, mode, sigma)
                    store_rounded(result, k, (high + low) / divisor)
            return
        if variant == ROWS_PIECES:
            # Contiguous rows of several split pieces: _add_run called here, from one place in its
            # own loop, with a literal step, and finished by _finish_sum, as _float_row does (the
            # same bits). Through _float_row, whose calls LLVM left out of line, 490x2049 rows took
            # 1.2x the time per element of 500x2000 ones (one piece, above); this way 490x2049,
            # 250x4000 and 1000x3000 rows take 0.91-0.97x the time of that. A copy of _add_run's
            # piece loop here saved a further 3-6%: not worth the copy.
            for task in prange(-(-n_kept // rows_per_task)):
                sigma = 0.0
                for k in range(task * rows_per_task, min(task * rows_per_task + rows_per_task, n_kept)):
                    total, comp, sigma = _add_run(0.0, 0.0, sigma, src, base + k * kept_stride, n_reduced, 1, mode,
                                                  1.0)
                    store_rounded(result, k, _finish_sum(total, comp, mode, divisor, 1.0))
            return
        if variant == ROWS_TWO_PASS or variant == ROWS_TWO_PASS_STRIDED:
            # short float64 rows (and rescaled ones): two passes each (_float64_run_two_pass),
            # called directly; through _float_row and _float64_run_for, 100000x16 rows took 1350 us
            # where this takes 520-600.
            # One rounding of high + low is the whole finish: what a compensated addition of low to
            # high and _finish_sum's total + compensation would give (inf and NaN included), at
            # 0.85x the time of those two calls on 100000x16 rows (kernels alone).
            if variant == ROWS_TWO_PASS:
                for k in prange(n_kept):
                    origin = base + k * kept_stride
                    high, low = float64_run_two_pass(_view(src, origin, origin + n_reduced), n_reduced, 1, mode, scale)
                    store_rounded(result, k, (high + low) / divisor)
                return
            for k in prange(n_kept):
                origin = base + k * kept_stride
                high, low = float64_run_two_pass(_view(src, origin, len(src)), n_reduced, step, mode, scale)
                store_rounded(result, k, (high + low) / divisor)
            return
        for task in prange(-(-n_kept // rows_per_task)):
            sigma = 0.0
            for k in range(task * rows_per_task, min(task * rows_per_task + rows_per_task, n_kept)):
                shift = maxima[k] if mode == SUM_EXP else scale
                value, sigma = _float_row(src, base + k * kept_stride, n_reduced, step, mode, shift, sigma, divisor)
                store_rounded(result, k, value)

    return float_rows


# Tiles of a few contiguous outputs whose rows lie back to back (256x1024x8 over axis 1, NHWC data
# with few channels over its spatial axes): each outer output block is one contiguous run, whose
# element p belongs to output p % width. For widths dividing NARROW_ROW the run is read as rows of
# NARROW_ROW (a literal: LLVM then keeps a row in eight vector registers) into one accumulator per
# position, folded into the columns at the end (_narrow_block_sums). With wide rows of a width known
# only at run time (float_sums), 256x1024x8 float32 means took 1.2-1.9x the time, 1000x500x4
# 1.9-2.4x (whole calls, in-process A/B).
NARROW_ROW = 64
# Only blocks of up to this many elements: larger ones read as fast as wide rows (float_sums) or
# faster (32x56x56x64 over axes [1, 2], blocks of 200704 elements: float32 0.98-1.33x, float64
# 1.14-1.37x the time of wide rows, in-process A/B; four quarters of a block at once instead of
# neighbouring rows did not close it for float64).
NARROW_MAX_BLOCK = 1 << 16
# 64-bit data (float64, int64, uint64) only in blocks of up to this many elements (64 KiB): float64
# on 1000x500x4, 256x1024x8, 2048x300x2 and 800x1000x4 took 0.31-0.88x the time of wide rows, but
# 64x1000x32 (blocks of 32000) 1.23x, 100x2000x16 2.2x and 200x4000x4 1.1x (in-process A/B; float32
# on the same shapes 0.55-0.9x). int64 and uint64 (_int_tiles_for) the same way: 0.38-0.77x the time
# of int_sums on the four, but 100x2000x16 1.2-1.7x.
NARROW_64BIT_MAX_BLOCK = 1 << 13
# A task of float_tiles takes whole narrow blocks, enough for this many elements, while that leaves
# FEW_NARROW_TASKS tasks.
NARROW_TASK_ELEMENTS = 1 << 14
FEW_NARROW_TASKS = 16


@njit(fastmath=False)
def narrow_tile(n_inner, tile, n_reduced, step):
    """Whether float_tiles reads each outer block as one run of NARROW_ROW-element rows (the plan
    asks through ``narrow_tile.py_func``): a tile that is the whole kept row, of a width dividing
    NARROW_ROW, whose rows lie back to back, in blocks of at most NARROW_MAX_BLOCK elements."""
    return tile == n_inner == step and NARROW_ROW % n_inner == 0 and n_reduced * n_inner <= NARROW_MAX_BLOCK


@njit(fastmath=FASTMATH)
def _narrow_rows4(run, first, squares, scale, acc):
    """acc[l] += the terms (x * scale, or x * x with ``squares``) of the four NARROW_ROW-element rows
    of ``run`` from ``first`` on, summed as a tree."""
    a = run[first:first + NARROW_ROW]
    b = run[first + NARROW_ROW:first + 2 * NARROW_ROW]
    c = run[first + 2 * NARROW_ROW:first + 3 * NARROW_ROW]
    d = run[first + 3 * NARROW_ROW:first + 4 * NARROW_ROW]
    if not squares:  # each term scaled, as in _float_columns
        for l in range(NARROW_ROW):
            acc[l] += ((as_float64(a[l]) * scale + as_float64(b[l]) * scale)
                       + (as_float64(c[l]) * scale + as_float64(d[l]) * scale))
    else:
        for l in range(NARROW_ROW):
            va, vb, vc, vd = as_float64(a[l]), as_float64(b[l]), as_float64(c[l]), as_float64(d[l])
            acc[l] += (va * va + vb * vb) + (vc * vc + vd * vd)


@njit(fastmath=FASTMATH)
def _narrow_block_sums(src, offset, n, mode, scale, acc):
    """acc[l] += the terms (as in _float_run; SUM or SUM_SQUARES) of src[offset + p] for 0 <= p < n
    and p % NARROW_ROW == l: four rows per step (one row per step took 4x the time: each
    accumulator waits on its own store), then single rows and the last part."""
    run = _view(src, offset, offset + n)
    p = 0
    while p + 4 * NARROW_ROW <= n:
        _narrow_rows4(run, p, mode == SUM_SQUARES, scale, acc)
        p += 4 * NARROW_ROW
    while p < n:  # rows of NARROW_ROW, and the last part: whole rows of the outputs' width
        _float_columns(src, offset + p, NARROW_ROW, 1, min(NARROW_ROW, n - p), mode, scale, acc[:0], 0, acc)
        p += NARROW_ROW


def _float_tiles_for(mode):
    """float_sums for the commonest tile layout, fixed to one ``mode`` (SUM or SUM_SQUARES) and to
    uncompensated data (not float64, but for narrow tiles, NARROW_ROW): one reduced axis of
    ``n_reduced`` rows ``step`` apart over ``n_outer`` x ``n_inner`` outputs, the inner ones
    contiguous and cut into tiles of ``tile``, one chunk, and no wide rows (_rows_per_wide_row is
    1) or narrow rows (narrow_tile). Without the general kernel's run walking and per-task set-up,
    the kernel alone took 0.91-0.99x its time on 1000x1000 float32 axis 0 and 0.70-0.88x on
    32x64x56x56 axis 1; whole calls 0.94-0.98x and 0.86-0.97x (in-process A/B)."""

    def float_tiles(src, base, n_outer, outer_stride, n_inner, n_reduced, step, tile, scale, divisor, result):
        src = _borrowed(src)
        if narrow_tile(n_inner, tile, n_reduced, step):
            n = n_reduced * n_inner
            compensated = compensation_block(src) < NEVER
            # several small blocks per task: its arrays are allocated once
            per_task = max(1, min(NARROW_TASK_ELEMENTS // n, n_outer // FEW_NARROW_TASKS))
            for task in prange(-(-n_outer // per_task)):
                acc = np.zeros(NARROW_ROW)
                totals = np.zeros(n_inner if compensated else 0)
                comps = np.zeros(n_inner if compensated else 0)
                for outer in range(task * per_task, min(n_outer, (task + 1) * per_task)):
                    offset = base + outer * outer_stride
                    if compensated:  # float64: plain sums of BLOCK terms per accumulator, folded as float_sums does
                        totals[:] = 0.0
                        comps[:] = 0.0
                        for p in range(0, n, BLOCK * NARROW_ROW):
                            _narrow_block_sums(src, offset + p, min(BLOCK * NARROW_ROW, n - p), mode, scale, acc)
                            _fold(acc, totals, comps)
                        for w in range(n_inner):
                            store_rounded(result, outer * n_inner + w,
                                          _finish_sum(totals[w], comps[w], mode, divisor, 0.0))
                    else:  # (a compensated fold per block took 1.3-1.8x the time on 1000x500x4 float32)
                        _narrow_block_sums(src, offset, n, mode, scale, acc)
                        for w in range(n_inner):
                            total = 0.0
                            for j in range(w, NARROW_ROW, n_inner):
                                total += acc[j]
                                acc[j] = 0.0
                            store_rounded(result, outer * n_inner + w, total / divisor)
            return
        tiles_per_row = (n_inner + tile - 1) // tile
        for task in prange(n_outer * tiles_per_row):
            outer = np.int64(task) // tiles_per_row  # a prange index may be unsigned
            k0 = (np.int64(task) - outer * tiles_per_row) * tile
            width = min(tile, n_inner - k0)
            offset = base + outer * outer_stride + k0
            acc = np.zeros(width)
            no_maxima = acc[:0]  # (SUM_EXP's)
            j = 0
            while j + 8 <= n_reduced:  # eight rows per call, then four, then one (_float_columns)
                _float_columns(src, offset + j * step, step, 8, width, mode, scale, no_maxima, 0, acc)
                j += 8
            if j + 4 <= n_reduced:
                _float_columns(src, offset + j * step, step, 4, width, mode, scale, no_maxima, 0, acc)
                j += 4
            while j < n_reduced:
                _float_columns(src, offset + j * step, step, 1, width, mode, scale, no_maxima, 0, acc)
                j += 1
            first = outer * n_inner + k0
            for w in range(width):
                store_rounded(result, first + w, acc[w] / divisor)  # (plain sums: no _finish_sum, as float_rows)

    return float_tiles


@njit(fastmath=False)
def _group_of_outputs(group, n_kept, groups):
    """(first output, count) of task ``group`` of ``groups`` in a single-block kernel: the outputs
    cut into groups whose sizes differ by at most one."""
    k0 = np.int64(group) * n_kept // groups  # a prange index may be unsigned
    return k0, (np.int64(group) + 1) * n_kept // groups - k0


def _float_blocks_for(mode):
    """float_sums for reduced axes on both sides of one kept axis (RKR: the batch and spatial axes of
    NCHW data, say), fixed to one ``mode`` (SUM_EXP with the ``maxima`` of max_blocks): ``n_outer``
    blocks ``outer_stride`` apart, each holding the contiguous runs of ``n_inner`` elements of the
    ``n_kept`` outputs, ``kept_stride`` apart. One output at a time, as float_sums walks them, reads
    a short run from each block in turn (1 KiB, 128 blocks apart, on 128x512x256 axes [0, 2]); here
    each task takes a group of neighbouring outputs and reads their runs block by block, in memory
    order, adding each run to its output's sum (_add_run) as float_sums does, in the same order: the
    same bits for any grouping, so there are ``groups`` of them, one per thread (the plan's). Means
    and sums of squares took 0.12-0.67x the time of float_sums in float32, 0.24-0.82x in float64,
    log-sum-exps 0.18-0.93x (in-process A/B)."""

    def float_blocks(src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, scale, maxima,
                     divisor, result):
        src, maxima = _borrowed(src), _borrowed(maxima)
        for group in prange(groups):
            k0, width = _group_of_outputs(group, n_kept, groups)
            totals = np.zeros(width)
            comps = np.zeros(width)
            sigmas = np.zeros(width)  # (_float64_run_for's, passed on from run to run of one output)
            for i in range(n_outer):
                origin = base + i * outer_stride + k0 * kept_stride
                for w in range(width):
                    shift = maxima[k0 + w] if mode == SUM_EXP else scale
                    if mode != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
                        totals[w], comps[w], sigmas[w] = _add_run(totals[w], comps[w], sigmas[w], src,
                                                                  origin + w * kept_stride, n_inner, 1, mode, shift)
            for w in range(width):
                shift = maxima[k0 + w] if mode == SUM_EXP else scale
                store_rounded(result, k0 + w, _finish_sum(totals[w], comps[w], mode, divisor, shift))

    return float_blocks


def _float_row(src, origin, n, step, mode, shift, sigma, divisor):
    """One output of float_rows over its run, finished (_finish_sum), and the sigma its float64 split
    sums ended with (_add_run; ``sigma`` is the one to start from)."""


@functools.cache
def _float_row_for(mode, float64):
    """_float_row for one ``mode`` and for float64 data or not, constants: the other modes' loops and
    the other data's path are pruned."""

    @njit(fastmath=False)
    def float_row(src, origin, n, step, shift, sigma, divisor):
        total = 0.0
        comp = 0.0
        if mode != SUM_EXP or math.isfinite(shift):  # a non-finite max decides the result alone
            if not float64:  # narrower floats: one plain float64 sum
                total = _float_run(src, origin, n, step, mode, shift)
            else:
                total, comp, sigma = _add_run(total, comp, sigma, src, origin, n, step, mode, shift)
        return _finish_sum(total, comp, mode, divisor, shift), sigma

    return float_row


@overload(_float_row, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _float_row_by_mode(src, origin, n, step, mode, shift, sigma, divisor):
    specialised = _float_row_for(_literal_mode(mode), src.dtype == types.float64)

    def call(src, origin, n, step, mode, shift, sigma, divisor):
        return specialised(src, origin, n, step, shift, sigma, divisor)

    return call


# ---------------------------------------------------------------------------------------------
# integer kernels
# ---------------------------------------------------------------------------------------------
def high_half(x):
    """x >> 32 as int64 (arithmetic for signed x): with the low 32 bits, x = high * 2**32 + low."""


@overload(high_half, jit_options={"fastmath": False})
def _high_half_impl(x):
    if isinstance(x, types.Integer):
        if x.signed:
            return lambda x: np.int64(x) >> 32
        return lambda x: np.int64(np.uint64(x) >> np.uint64(32))
    return None


def square_bits(x):
    """x * x modulo 2**64 as uint64."""


@overload(square_bits, jit_options={"fastmath": False})
def _square_bits_impl(x):
    if isinstance(x, types.Integer) and x.bitwidth <= 32:
        # exact in 64 bits; a 32 x 32 -> 64-bit product is one vector instruction (pmuldq/pmuludq),
        # where a 64-bit product is emulated
        if x.signed:
            return lambda x: np.uint64(np.int64(x) * np.int64(x))
        return lambda x: np.uint64(x) * np.uint64(x)
    if isinstance(x, types.Integer):
        return lambda x: as_bits(x) * as_bits(x)
    return None


# Sums of up to this many 32-bit halves are exact in 64 bits, and they vectorise where a 128-bit
# carry chain per element does not.
HALVES_BLOCK = 1 << 30


def halves_run(src, offset, n, step):
    """(sum of the low 32-bit halves as uint64, sum of the high halves as int64) of one run of at
    most HALVES_BLOCK elements: x = high * 2**32 + low for each x, so the sums hold the exact total."""


@overload(halves_run, jit_options={"fastmath": False})
def _halves_run_impl(src, offset, n, step):
    if src.dtype.bitwidth <= 32:
        # one int64 accumulator is exact for 2**30 values of 32 bits, and takes one widening add
        # per element instead of two halves; the halves are split off the total at the end
        def narrow(src, offset, n, step):
            total = np.int64(0)
            if step == 1 and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # four streams, as _float_run
                quarter = n // 4
                sums = _int_runs4(src, offset, quarter, quarter, False)
                total = np.int64((sums[0] + sums[1]) + (sums[2] + sums[3]))  # exact: |total| < 2**62
                offset += 4 * quarter
                n -= 4 * quarter
            if step == 1:
                run = _view(src, offset, offset + n)
                for i in range(n):
                    total += np.int64(run[i])
            elif step == 2 and n >= EVERY_OTHER_MIN_RUN:
                # every other element over the whole span, the others zeroed, as _every_other_sum
                # (vectorised): 4000x3000, 1000x2000, 300x8000 and 100000x64 int32 and uint32 rows
                # 0.21-0.65x the time of the lanes below, 64-bit ones (wide) 0.24-0.51x but 1.0-1.1x
                # on 4000x3000 (memory-bound), sums of squares (_squares_run) 0.18-0.55x
                span = _view(src, offset, offset + every_other_span(src, offset, n))
                for i in range(span.size):
                    total += np.int64(span[i]) & ((i & 1) - 1)
            elif step > 0 and n >= STRIDED_LANES_MIN_RUN:
                # in lanes, as _float_run's float32 runs: as one chain, every other element of
                # 4000x3000 int32, int64 and uint64 rows took 2.4-3.3x as long (in the L3 cache,
                # 300x8000 int32 rows 0.8-0.9x). One int64 sum per lane: the halves' two sums, as
                # in the 64-bit branch below, took 1.1-1.2x as long.
                run = src[offset:offset + (n - 1) * step + 1:step]
                lanes = np.zeros(STRIDED_LANES, np.int64)
                whole = n - n % STRIDED_LANES
                for i0 in range(0, whole, STRIDED_LANES):
                    for j in range(STRIDED_LANES):
                        lanes[j] += np.int64(run[i0 + j])
                total += lanes.sum()
                for i in range(whole, n):
                    total += np.int64(run[i])
            else:
                for i in range(n):
                    total += np.int64(src[offset + i * step])
            return _U64(total) & _U64(0xFFFFFFFF), total >> 32

        return narrow

    def wide(src, offset, n, step):
        low = _U64(0)
        high = np.int64(0)
        if step == 1:
            run = _view(src, offset, offset + n)
            for i in range(n):
                low += as_bits(run[i]) & _U64(0xFFFFFFFF)
                high += high_half(run[i])
        elif step == 2 and n >= EVERY_OTHER_MIN_RUN:  # the whole span, as the narrow branch
            span = _view(src, offset, offset + every_other_span(src, offset, n))
            for i in range(span.size):
                keep = (i & 1) - 1
                low += as_bits(span[i]) & _U64(0xFFFFFFFF) & _U64(keep)
                high += high_half(span[i]) & keep
        elif step > 0 and n >= STRIDED_LANES_MIN_RUN:  # in lanes, as _float_run's float32 runs
            run = src[offset:offset + (n - 1) * step + 1:step]
            low_lanes = np.zeros(STRIDED_LANES, _U64)
            high_lanes = np.zeros(STRIDED_LANES, np.int64)
            whole = n - n % STRIDED_LANES
            for i0 in range(0, whole, STRIDED_LANES):
                for j in range(STRIDED_LANES):
                    low_lanes[j] += as_bits(run[i0 + j]) & _U64(0xFFFFFFFF)
                    high_lanes[j] += high_half(run[i0 + j])
            low, high = low_lanes.sum(), high_lanes.sum()
            for i in range(whole, n):
                low += as_bits(run[i]) & _U64(0xFFFFFFFF)
                high += high_half(run[i])
        else:
            for i in range(n):
                x = src[offset + i * step]
                low += as_bits(x) & _U64(0xFFFFFFFF)
                high += high_half(x)
        return low, high

    return wide


@njit(fastmath=False)
def _squares_run(src, offset, n, step):
    """Sum of x * x modulo 2**64 over one run, as uint64 (a local accumulator: vectorises)."""
    total = _U64(0)
    if step == 1 and n >= 4 * STREAMS_MIN_RUN and QUARTER_LONG_RUNS:  # four streams, as _float_run
        quarter = n // 4
        sums = _int_runs4(src, offset, quarter, quarter, True)
        total = (sums[0] + sums[1]) + (sums[2] + sums[3])
        offset += 4 * quarter
        n -= 4 * quarter
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += square_bits(run[i])
    elif step == 2 and n >= EVERY_OTHER_MIN_RUN:  # the whole span, as halves_run
        span = _view(src, offset, offset + every_other_span(src, offset, n))
        for i in range(span.size):
            total += square_bits(span[i]) & _U64((i & 1) - 1)
    elif step > 0 and n >= STRIDED_LANES_MIN_RUN:  # in lanes, as _float_run's float32 runs
        run = src[offset:offset + (n - 1) * step + 1:step]
        lanes = np.zeros(STRIDED_LANES, _U64)
        whole = n - n % STRIDED_LANES
        for i0 in range(0, whole, STRIDED_LANES):
            for j in range(STRIDED_LANES):
                lanes[j] += square_bits(run[i0 + j])
        total += lanes.sum()
        for i in range(whole, n):
            total += square_bits(run[i])
    else:
        for i in range(n):
            total += square_bits(src[offset + i * step])
    return total


@njit(fastmath=False)
def _add_halves128(low, high, low_sum, high_sum):
    """(low, high) += high_sum * 2**32 + low_sum, in uint64 two's complement."""
    new_low = low + low_sum
    high += _U64(new_low < low)
    low = new_low
    new_low = low + (np.uint64(high_sum) << _U64(32))
    return new_low, high + np.uint64(high_sum >> 32) + _U64(new_low < low)


@njit(fastmath=False)
def _int_columns(row, squares, low_acc, high_acc):
    """Per column of a tile row (contiguous): low_acc += x * x (wrapping) when ``squares``, else the
    32-bit halves of x into low_acc and high_acc (carry-free, so the loop vectorises)."""
    if squares:
        for i in range(row.size):
            low_acc[i] += square_bits(row[i])
    elif narrow_int(row):  # whole values into high_acc: one widening add (see _fold_halves)
        for i in range(row.size):
            high_acc[i] += np.int64(row[i])
    else:
        for i in range(row.size):
            low_acc[i] += as_bits(row[i]) & _U64(0xFFFFFFFF)
            high_acc[i] += high_half(row[i])


@njit(fastmath=False)
def _int_columns4(r0, r1, r2, r3, squares, low_acc, high_acc):
    """_int_columns over four rows at once: a quarter of the traffic to the accumulators."""
    if squares:
        for i in range(r0.size):
            low_acc[i] += (square_bits(r0[i]) + square_bits(r1[i])) + (square_bits(r2[i]) + square_bits(r3[i]))
    elif narrow_int(r0):
        for i in range(r0.size):
            high_acc[i] += (np.int64(r0[i]) + np.int64(r1[i])) + (np.int64(r2[i]) + np.int64(r3[i]))
    else:
        mask = _U64(0xFFFFFFFF)
        for i in range(r0.size):
            low_acc[i] += ((as_bits(r0[i]) & mask) + (as_bits(r1[i]) & mask)) + (
                (as_bits(r2[i]) & mask) + (as_bits(r3[i]) & mask))
            high_acc[i] += (high_half(r0[i]) + high_half(r1[i])) + (high_half(r2[i]) + high_half(r3[i]))


@njit(fastmath=False)
def _int_columns8(src, start, step, width, squares, low_acc, high_acc):
    """_int_columns over element i of eight rows ``step`` apart, for sums of squares and for sums of
    ``narrow`` data (not the halves of 64-bit data): an eighth of the traffic to the accumulators.
    Against four rows per pass, in-process A/B: 32x64x56x56 axis 1 sums of squares, int32 0.83x and
    uint32 0.88x the time; 4194304x4 axis 0 means (past EXACT_FLOAT_INT_COUNT rows), int32
    0.73-0.89x and uint32 0.83-0.86x (AMD Zen 4); serial 2000x16 axis 0 means 0.87-0.90x."""
    r0 = _view(src, start, start + width)
    r1 = _view(src, start + step, start + step + width)
    r2 = _view(src, start + 2 * step, start + 2 * step + width)
    r3 = _view(src, start + 3 * step, start + 3 * step + width)
    r4 = _view(src, start + 4 * step, start + 4 * step + width)
    r5 = _view(src, start + 5 * step, start + 5 * step + width)
    r6 = _view(src, start + 6 * step, start + 6 * step + width)
    r7 = _view(src, start + 7 * step, start + 7 * step + width)
    if squares:
        for i in range(width):
            low_acc[i] += ((square_bits(r0[i]) + square_bits(r1[i])) + (square_bits(r2[i]) + square_bits(r3[i]))) + (
                (square_bits(r4[i]) + square_bits(r5[i])) + (square_bits(r6[i]) + square_bits(r7[i])))
    else:
        for i in range(width):
            high_acc[i] += ((np.int64(r0[i]) + np.int64(r1[i])) + (np.int64(r2[i]) + np.int64(r3[i]))) + (
                (np.int64(r4[i]) + np.int64(r5[i])) + (np.int64(r6[i]) + np.int64(r7[i])))


def narrow_int(x):
    """Whether array ``x`` holds integers of 32 bits or fewer, whose sums of up to HALVES_BLOCK
    values one int64 holds exactly (a compile-time constant)."""


@overload(narrow_int, jit_options={"fastmath": False})
def _narrow_int_impl(x):
    narrow = isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
    return lambda x: narrow


def low_accumulators(src, n):
    """n zeroed ``low_acc`` accumulators of a tile (int_sums). For data of 32 bits or fewer they hold
    only wrapping sums of squares, whose results keep the low 32 bits anyway: uint32, and LLVM then
    narrows the products and sums to 32-bit lanes, twice as many per vector as 64-bit ones (int32
    32x64x56x56 axis 1 sum of squares: 1.5 -> 0.7-0.95 ms, float32 0.65-0.9 ms). Otherwise uint64."""


@overload(low_accumulators, jit_options={"fastmath": False})
def _low_accumulators_impl(src, n):
    if isinstance(src.dtype, types.Integer) and src.dtype.bitwidth <= 32:
        return lambda src, n: np.zeros(n, dtype=np.uint32)
    return lambda src, n: np.zeros(n, dtype=np.uint64)


@njit(fastmath=False)
def _fold_halves(low_acc, high_acc, low, high, squares, narrow):
    """Add the column accumulators (column i % low.size) into the 128-bit sums and clear them. Only
    the accumulators a sum uses exist: low_acc for squares, high_acc for ``narrow`` data (whole sums,
    _int_columns, split into halves here), both otherwise."""
    width = low.size
    for i0 in range(0, max(low_acc.size, high_acc.size), width):  # no i % width, as in _fold
        for w in range(width):
            if squares:
                low[w] += low_acc[i0 + w]
                low_acc[i0 + w] = 0
            elif narrow:
                whole = high_acc[i0 + w]
                low[w], high[w] = _add_halves128(low[w], high[w], _U64(whole) & _U64(0xFFFFFFFF), whole >> 32)
                high_acc[i0 + w] = 0
            else:
                low[w], high[w] = _add_halves128(low[w], high[w], low_acc[i0 + w], high_acc[i0 + w])
                low_acc[i0 + w] = 0
                high_acc[i0 + w] = 0


def int_sums(src, base, dims, kept_ndim, nchunks, tile, squares, count, out_low, out_high, result):
    """squares=False: exact 128-bit two's-complement sum (low, high words);
    squares=True: sum of x*x modulo 2**64 (low word only). Tiles (and wide rows) as in float_sums.
    With one chunk per output the task finishes it into ``result`` (uint64 bits): the exact mean
    over ``count`` elements, or the wrapping sum of squares. Otherwise the partials go to out_low and
    out_high for finish_int_mean / finish_int_squares."""
    src = _borrowed(src)
    kshape, kstrides, rshape, rstrides = _unpack(dims, kept_ndim)
    nr = np.prod(rshape)
    step = rstrides[-1]
    for task in prange(_n_tasks(kshape, tile, nchunks)):
        k0, width, c, pos, end = _task(task, kshape, tile, nchunks, nr)
        origin = base + _offset_of(k0, kshape, kstrides)
        low = np.zeros(width, dtype=np.uint64)
        high = np.zeros(width, dtype=np.uint64)
        if tile == 1:
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                offset += origin
                if squares:
                    low[0] += _squares_run(src, offset, n, step)
                else:
                    for b in range(0, n, HALVES_BLOCK):
                        low_sum, high_sum = halves_run(src, offset + b * step, min(HALVES_BLOCK, n - b), step)
                        low[0], high[0] = _add_halves128(low[0], high[0], low_sum, high_sum)
                pos += n
        else:  # the tile's rows are contiguous (the plan tiles only a stride-1 kept axis)
            m = _rows_per_wide_row(width, step, end - pos)
            # only the accumulators this sum uses (_fold_halves): half the memory a task touches
            low_acc = low_accumulators(src, m * width if squares or not narrow_int(src) else 0)
            high_acc = np.zeros(0 if squares else m * width, dtype=np.int64)
            rows = 0
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                offset += origin
                j = 0
                while j < n:
                    start = offset + j * step
                    # eight (wide) rows per call, as in float_sums
                    if (squares or narrow_int(src)) and n - j >= 8 * m:
                        _int_columns8(src, start, m * step, m * width, squares, low_acc, high_acc)
                        span = 8 * m
                    elif n - j >= 4 * m:  # four: a quarter of the traffic of one
                        wide = m * width
                        _int_columns4(_view(src, start, start + wide),
                                      _view(src, start + m * step, start + m * step + wide),
                                      _view(src, start + 2 * m * step, start + 2 * m * step + wide),
                                      _view(src, start + 3 * m * step, start + 3 * m * step + wide),
                                      squares, low_acc, high_acc)
                        span = 4 * m
                    else:
                        span = m if n - j >= m else 1  # m back-to-back rows read as one wide row
                        _int_columns(_view(src, start, start + span * width), squares, low_acc, high_acc)
                    j += span
                    rows += span
                    if rows >= HALVES_BLOCK:
                        _fold_halves(low_acc, high_acc, low, high, squares, narrow_int(src))
                        rows = 0
                pos += n
            _fold_halves(low_acc, high_acc, low, high, squares, narrow_int(src))
        if nchunks == 1:  # finished here, in parallel: a 128-bit division per output adds up
            for w in range(width):
                result[k0 + w] = low[w] if squares else _int_mean(low[w], high[w], _U64(count))
        else:
            for w in range(width):
                out_low[(k0 + w) * nchunks + c] = low[w]
                out_high[(k0 + w) * nchunks + c] = high[w]


@njit(fastmath=False)
def _int_runs4(src, first, gap, n, squares):
    """Four contiguous runs of ``n`` elements ``gap`` apart, read together as in _float_runs4: their
    wrapping sums of squares (``squares``) or, for data of 32 bits or fewer and n <= HALVES_BLOCK,
    their exact sums as int64 two's-complement bits."""
    a = _view(src, first, first + n)
    b = _view(src, first + gap, first + gap + n)
    c = _view(src, first + 2 * gap, first + 2 * gap + n)
    d = _view(src, first + 3 * gap, first + 3 * gap + n)
    if squares:
        s0 = _U64(0)
        s1 = _U64(0)
        s2 = _U64(0)
        s3 = _U64(0)
        for i in range(n):
            s0 += square_bits(a[i])
            s1 += square_bits(b[i])
            s2 += square_bits(c[i])
            s3 += square_bits(d[i])
        return s0, s1, s2, s3
    t0 = np.int64(0)
    t1 = np.int64(0)
    t2 = np.int64(0)
    t3 = np.int64(0)
    for i in range(n):
        t0 += np.int64(a[i])
        t1 += np.int64(b[i])
        t2 += np.int64(c[i])
        t3 += np.int64(d[i])
    return _U64(t0), _U64(t1), _U64(t2), _U64(t3)


def int_rows_four(squares, carrier, n_kept, n_reduced, step):
    """Whether int_rows reads these rows of ``carrier`` data four at a time (contiguous rows, as
    float_rows does; 64-bit means: never), rather than one by one."""
    carrier = np.dtype(carrier)
    min_row = ONE_STREAM_MIN_INT32_ROW if carrier.itemsize == 4 else ONE_STREAM_LONG_ROWS_ONLY
    min_large_row = ONE_STREAM_MIN_LARGE_INT64_ROW if carrier.itemsize == 8 else ONE_STREAM_MIN_LARGE_ROW
    return (step == 1 and (squares or carrier.itemsize <= 4) and n_reduced <= HALVES_BLOCK
            and _rows_together(carrier.itemsize, n_kept, n_reduced, min_row, min_large_row) == 4)


def _int_rows_for(squares, four):
    """int_sums for single-run plans (see _float_rows_for), fixed to the exact mean (finished here)
    or the wrapping sum of squares, and to reading rows four at a time or one by one (int_rows_four):
    one parallel loop per kernel. No per-output arrays or chunk partials. The kernel computes uint64
    two's-complement bits; storing them into the input dtype keeps the low bits."""

    def int_rows(src, base, kept_stride, n_kept, n_reduced, step, result):
        src = _borrowed(src)
        count = _U64(n_reduced)
        if four:
            for group in prange(-(-n_kept // 4)):
                k0 = 4 * group
                if k0 + 4 <= n_kept:
                    sums = _int_runs4(src, base + k0 * kept_stride, kept_stride, n_reduced, squares)
                    for j in range(4):
                        if squares:
                            result[k0 + j] = sums[j]
                        else:  # the int64 sum, sign-extended to 128 bits
                            result[k0 + j] = _int_mean(sums[j], _U64(np.int64(sums[j]) >> 63), count)
                else:  # the last 1-3 rows
                    for k in range(k0, n_kept):
                        if squares:
                            result[k] = _squares_run(src, base + k * kept_stride, n_reduced, 1)
                        else:
                            result[k] = _int_mean_row(src, base + k * kept_stride, n_reduced, 1, count)
            return
        # rows one after another (ONE_STREAM_ROWS), strided rows, and 64-bit means
        for k in prange(n_kept):
            if squares:
                result[k] = _squares_run(src, base + k * kept_stride, n_reduced, step)
            else:
                result[k] = _int_mean_row(src, base + k * kept_stride, n_reduced, step, count)

    return int_rows


def _int_blocks_for(squares):
    """int_sums for single-block plans (see _float_blocks_for), fixed to the exact mean or the
    wrapping sum of squares (``squares``): a group of neighbouring outputs per task, their runs read
    block by block, each added to its output's 128-bit sum or wrapping uint64 sum of squares (exact:
    the order does not matter); finished into uint64 bits as int_rows does."""

    def int_blocks(src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, result):
        src = _borrowed(src)
        count = _U64(n_outer * n_inner)
        for group in prange(groups):
            k0, width = _group_of_outputs(group, n_kept, groups)
            low = np.zeros(width, dtype=np.uint64)
            high = np.zeros(width, dtype=np.uint64)
            for i in range(n_outer):
                origin = base + i * outer_stride + k0 * kept_stride
                for w in range(width):
                    offset = origin + w * kept_stride
                    if squares:
                        low[w] += _squares_run(src, offset, n_inner, 1)
                    else:
                        for b in range(0, n_inner, HALVES_BLOCK):
                            low_sum, high_sum = halves_run(src, offset + b, min(HALVES_BLOCK, n_inner - b), 1)
                            low[w], high[w] = _add_halves128(low[w], high[w], low_sum, high_sum)
            for w in range(width):
                result[k0 + w] = low[w] if squares else _int_mean(low[w], high[w], count)

    return int_blocks


def _int_tiles_for(squares):
    """int_sums for narrow tiles (narrow_tile), fixed to the wrapping sum of squares (``squares``) or
    the exact mean of 64-bit data (32-bit means take float_tiles: _compute._int_mean_by_float_tiles),
    reading each outer block of n_reduced x n_inner contiguous elements as float_tiles does: as rows
    of NARROW_ROW (eight at a time for squares, four for the halves of means) into NARROW_ROW column
    accumulators, folded into the outputs at the end and finished into uint64 bits as int_rows does.
    int_sums read these blocks as wide rows of a width known only at run time, with arrays per outer
    block: int32 sums of squares took 1.5-2.6x float32's time. (With the fold through _fold_halves
    and per-task output arrays, 2048x300x2 int32 sums of squares took 2.4-2.8x as long in processes
    that loaded the kernel from the disk cache as in the one that compiled it.)"""

    def int_tiles(src, base, n_outer, outer_stride, n_inner, n_reduced, result):
        src = _borrowed(src)
        n = n_reduced * n_inner
        count = _U64(n_reduced)
        per_task = max(1, min(NARROW_TASK_ELEMENTS // n, n_outer // FEW_NARROW_TASKS))
        for task in prange(-(-n_outer // per_task)):
            # the low halves (or wrapping squares) and high halves of each column, as in int_sums
            low_acc = low_accumulators(src, NARROW_ROW)
            high_acc = np.zeros(0 if squares else NARROW_ROW, dtype=np.int64)
            for outer in range(task * per_task, min(n_outer, (task + 1) * per_task)):
                offset = base + outer * outer_stride
                p = 0
                if squares:
                    while p + 8 * NARROW_ROW <= n:
                        _int_columns8(src, offset + p, NARROW_ROW, NARROW_ROW, squares, low_acc, high_acc)
                        p += 8 * NARROW_ROW
                while p + 4 * NARROW_ROW <= n:
                    first = offset + p
                    _int_columns4(_view(src, first, first + NARROW_ROW),
                                  _view(src, first + NARROW_ROW, first + 2 * NARROW_ROW),
                                  _view(src, first + 2 * NARROW_ROW, first + 3 * NARROW_ROW),
                                  _view(src, first + 3 * NARROW_ROW, first + 4 * NARROW_ROW),
                                  squares, low_acc, high_acc)
                    p += 4 * NARROW_ROW
                while p < n:  # rows of NARROW_ROW, and the last part: whole rows of the outputs' width
                    _int_columns(_view(src, offset + p, offset + min(p + NARROW_ROW, n)), squares, low_acc, high_acc)
                    p += NARROW_ROW
                for w in range(n_inner):  # output w's columns are w, w + n_inner, ...
                    low = _U64(0)
                    high = _U64(0)
                    for j in range(w, NARROW_ROW, n_inner):
                        if squares:
                            low += low_acc[j]
                        elif narrow_int(src):  # whole values in high_acc (_int_columns), split here
                            whole = high_acc[j]
                            low, high = _add_halves128(low, high, _U64(whole) & _U64(0xFFFFFFFF), whole >> 32)
                            high_acc[j] = 0
                        else:
                            low, high = _add_halves128(low, high, low_acc[j], high_acc[j])
                            high_acc[j] = 0
                        low_acc[j] = 0
                    result[outer * n_inner + w] = low if squares else _int_mean(low, high, count)

    return int_tiles


@njit(fastmath=False)
def _int_mean_row(src, origin, n, step, count):
    """The exact mean over ``count`` elements of one output of int_rows, over its run, as uint64 bits."""
    low = _U64(0)
    high = _U64(0)
    for b in range(0, n, HALVES_BLOCK):
        low_sum, high_sum = halves_run(src, origin + b * step, min(HALVES_BLOCK, n - b), step)
        low, high = _add_halves128(low, high, low_sum, high_sum)
    return _int_mean(low, high, count)


def float_key(x):
    """For float data read through a signed integer view of its bits: a key of the same integer type
    whose order is the order of the float values (sign-magnitude turned into two's complement).
    Integer max vectorises; a float max that keeps NaN does not (LLVM wants no-NaN flags for that),
    so float maxima are taken on these keys and NaNs are found on the side (magnitude_bits). Keys stay
    as narrow as the data: AVX2 has a max for 8-, 16- and 32-bit lanes but none for 64-bit ones, and
    16-bit keys fill a vector with 16 elements. Defined for signed carriers only: float data is always
    viewed as signed integers, and the max kernels for integer data (_max_run_for(False)) hold no key
    code."""


def _same_type(x):
    """The NumPy scalar type of Numba integer type x, to cast results of promoted arithmetic back."""
    return as_dtype(x).type


@overload(float_key, jit_options={"fastmath": False})
def _float_key_impl(x):
    if isinstance(x, types.Integer) and x.signed:
        shift = x.bitwidth - 1
        magnitude_mask = (1 << shift) - 1
        same = _same_type(x)
        return lambda x: same(x ^ ((x >> shift) & magnitude_mask))
    return None  # unsigned carriers hold integer data, never float bits


def lowest_key(x):
    """The smallest value of the integer type of x (a start for a max)."""


@overload(lowest_key, jit_options={"fastmath": False})
def _lowest_key_impl(x):
    if isinstance(x, types.Integer):
        same = _same_type(x)
        lowest = -(1 << (x.bitwidth - 1)) if x.signed else 0
        return lambda x: same(lowest)
    return None


def magnitude_bits(x):
    """The bits of x without the sign bit, in x's type, for a signed integer view of float bits: a NaN
    is a magnitude above the bits of +inf. Signed carriers only, as float_key."""


@overload(magnitude_bits, jit_options={"fastmath": False})
def _magnitude_bits_impl(x):
    if isinstance(x, types.Integer) and x.signed:
        same = _same_type(x)
        mask = (1 << (x.bitwidth - 1)) - 1
        return lambda x: same(x & mask)
    return None


@functools.cache
def _max_run_for(float_bits):
    """max_run(src, offset, n, step, best, top_magnitude) -> (best, top_magnitude), updated with one
    run: for float keys (``float_bits``, a constant), the max float_key and the largest magnitude_bits;
    for integer values, the max value (top_magnitude is passed through). All in src's own integer
    type."""

    @njit(fastmath=FASTMATH)
    def max_run(src, offset, n, step, best, top_magnitude):
        # A contiguous run is read through a slice: indexing src[offset + i] keeps a negative-index
        # check per element, and the loop is not vectorised.
        if step == 1:
            run = _view(src, offset, offset + n)
            if float_bits:
                for i in range(n):
                    best = max(best, float_key(run[i]))
                    top_magnitude = max(top_magnitude, magnitude_bits(run[i]))
            else:
                for i in range(n):
                    best = max(best, run[i])
        elif float_bits:
            for i in range(n):
                x = src[offset + i * step]
                best = max(best, float_key(x))
                top_magnitude = max(top_magnitude, magnitude_bits(x))
        else:
            for i in range(n):
                best = max(best, src[offset + i * step])
        return best, top_magnitude

    return max_run


max_key_run = _max_run_for(True)
max_value_run = _max_run_for(False)


def _literal_flag(flag):
    """The value of a bool argument typed as a literal (a constant at the call)."""
    if not isinstance(flag, types.BooleanLiteral):
        raise TypeError(f"float_bits must be a constant at the call, got {flag}")
    return flag.literal_value


# Kernels reach the max_run and max_columns of their kind of data through these overloads on a
# literal float_bits, not as captured dispatchers: Numba keys a cached kernel by its closure's
# pickled contents, and a dispatcher pickles differently in every process (a disk-cache miss each
# time).
def max_run(src, offset, n, step, float_bits, best, top_magnitude):
    """_max_run_for(float_bits)'s max_run; ``float_bits`` a constant."""


@overload(max_run, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _max_run_by_kind(src, offset, n, step, float_bits, best, top_magnitude):
    specialised = _max_run_for(_literal_flag(float_bits))
    return lambda src, offset, n, step, float_bits, best, top_magnitude: specialised(src, offset, n, step, best,
                                                                                      top_magnitude)


@functools.cache
def _max_columns_for(float_bits):
    """max_columns(src, offset, step, nrows, width, best, top_magnitude): best[w] and top_magnitude[w]
    updated (as by _max_run_for(float_bits)) with element w of ``nrows`` (1 or 4) contiguous rows of a
    tile."""

    @njit(fastmath=FASTMATH)
    def max_columns(src, offset, step, nrows, width, best, top_magnitude):
        r0 = _view(src, offset, offset + width)
        if nrows == 4:
            r1 = _view(src, offset + step, offset + step + width)
            r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
            r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
            if float_bits:
                for w in range(width):
                    best[w] = max(max(best[w], max(float_key(r0[w]), float_key(r1[w]))),
                                  max(float_key(r2[w]), float_key(r3[w])))
                    top_magnitude[w] = max(max(top_magnitude[w], max(magnitude_bits(r0[w]), magnitude_bits(r1[w]))),
                                           max(magnitude_bits(r2[w]), magnitude_bits(r3[w])))
            else:
                for w in range(width):
                    best[w] = max(max(best[w], max(r0[w], r1[w])), max(r2[w], r3[w]))
        elif float_bits:
            for w in range(width):
                best[w] = max(best[w], float_key(r0[w]))
                top_magnitude[w] = max(top_magnitude[w], magnitude_bits(r0[w]))
        else:
            for w in range(width):
                best[w] = max(best[w], r0[w])

    return max_columns


def max_columns(src, offset, step, nrows, width, float_bits, best, top_magnitude):
    """_max_columns_for(float_bits)'s max_columns; ``float_bits`` a constant."""


@overload(max_columns, prefer_literal=True, inline="always", jit_options={"fastmath": FASTMATH})
def _max_columns_by_kind(src, offset, step, nrows, width, float_bits, best, top_magnitude):
    specialised = _max_columns_for(_literal_flag(float_bits))
    return lambda src, offset, step, nrows, width, float_bits, best, top_magnitude: specialised(
        src, offset, step, nrows, width, best, top_magnitude)


def _max_keys_for(float_bits):
    """max_keys(src, base, dims, kept_ndim, nchunks, tile, inf_bits, out_max, out_nans): the max per
    (output, chunk), widened (as_wide), and whether it saw a NaN (out_nans 1, else 0). Integer data:
    the max value. Float data (``float_bits``): ``src`` is a signed integer view of the bits, the max
    is a float_key, and magnitudes above ``inf_bits`` (the bits of +inf) are NaNs. Tiles as in
    float_sums. Everything before the widening stays in src's own type (float_key): with the
    allocations gone from one-output tasks, the maxima of 1000x1000 took 0.13-0.50x the time
    (float16 axis 0 to int32 axis 1; 2 threads, in-process A/B) and log-sum-exp 0.66-0.90x."""

    def max_keys(src, base, dims, kept_ndim, nchunks, tile, inf_bits, out_max, out_nans):
        src = _borrowed(src)
        kshape, kstrides, rshape, rstrides = _unpack(dims, kept_ndim)
        nr = np.prod(rshape)
        step = rstrides[-1]
        for task in prange(_n_tasks(kshape, tile, nchunks)):
            k0, width, c, pos, end = _task(task, kshape, tile, nchunks, nr)
            origin = base + _offset_of(k0, kshape, kstrides)
            lowest = lowest_key(src[origin])
            # every magnitude is at least 0, in src's type; integer data has none (passed through)
            zero = magnitude_bits(lowest) if float_bits else lowest
            if tile == 1:  # scalars: a task per output allocated two arrays before
                best, top_magnitude = lowest, zero
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    best, top_magnitude = max_run(src, offset + origin, n, step, float_bits, best, top_magnitude)
                    pos += n
                out_max[k0 * nchunks + c] = as_wide(best)
                out_nans[k0 * nchunks + c] = float_bits and top_magnitude > inf_bits
            else:
                m = _rows_per_wide_row(width, step, end - pos)
                wide = m * width  # as in float_sums: slot j holds column j % width
                best_of = np.full(wide, lowest)
                top_magnitude_of = np.full(wide, zero)
                while pos < end:
                    offset, n = _next_run(pos, end, rshape, rstrides)
                    offset += origin
                    j = 0
                    while j < n:
                        if n - j >= 4 * m:
                            max_columns(src, offset + j * step, m * step, 4, wide, float_bits, best_of, top_magnitude_of)
                            j += 4 * m
                        elif n - j >= m:
                            max_columns(src, offset + j * step, m * step, 1, wide, float_bits, best_of, top_magnitude_of)
                            j += m
                        else:
                            max_columns(src, offset + j * step, step, 1, width, float_bits, best_of, top_magnitude_of)
                            j += 1
                    pos += n
                for j0 in range(width, wide, width):  # the m slots of each column
                    for w in range(width):
                        best_of[w] = max(best_of[w], best_of[j0 + w])
                        top_magnitude_of[w] = max(top_magnitude_of[w], top_magnitude_of[j0 + w])
                for w in range(width):
                    out_max[(k0 + w) * nchunks + c] = as_wide(best_of[w])
                    out_nans[(k0 + w) * nchunks + c] = float_bits and top_magnitude_of[w] > inf_bits

    return max_keys


def _max_blocks_for(float_bits):
    """max_blocks(src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, inf_bits,
    out_max, out_nans): max_keys for single-block plans, a group of neighbouring outputs per task,
    their runs read block by block (as in _float_blocks_for), one max and NaN flag per output."""

    def max_blocks(src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, inf_bits,
                   out_max, out_nans):
        src = _borrowed(src)
        for group in prange(groups):
            k0, width = _group_of_outputs(group, n_kept, groups)
            lowest = lowest_key(src[base])
            best_of = np.full(width, lowest)
            top_magnitude_of = np.full(width, magnitude_bits(lowest) if float_bits else lowest)
            for i in range(n_outer):
                origin = base + i * outer_stride + k0 * kept_stride
                for w in range(width):
                    best_of[w], top_magnitude_of[w] = max_run(src, origin + w * kept_stride, n_inner, 1, float_bits,
                                                              best_of[w], top_magnitude_of[w])
            for w in range(width):
                out_max[k0 + w] = as_wide(best_of[w])
                out_nans[k0 + w] = float_bits and top_magnitude_of[w] > inf_bits

    return max_blocks


def float_rows_log_sum_exp(src, keys, inf_bits, base, kept_stride, n_kept, n_reduced, step, result):
    """Float log-sum-exp of the single-run layout (float_rows), the max and the sum of each row in
    one task: the row is read twice while it is in the cache, and no maxima array is written and
    read back. ``keys`` is src's memory viewed as signed integers (max_keys). Separate max_keys and
    float_rows passes took 2.6 ms on 100000x16 float32 (torch: 1.6 ms), most of it the per-row set-up
    of the general max kernel."""
    src, keys = _borrowed(src), _borrowed(keys)
    carrier = src[:0]
    for k in prange(n_kept):
        origin = base + k * kept_stride
        lowest = lowest_key(keys[origin])
        best, top_magnitude = max_key_run(keys, origin, n_reduced, step, lowest, magnitude_bits(lowest))
        maximum = np.nan if top_magnitude > inf_bits else key_to_float64(as_wide(best), carrier)
        store_rounded(result, k, _float_row(src, origin, n_reduced, step, SUM_EXP, maximum, 0.0, 1.0)[0])


def int_rows_log_sum_exp(src, base, kept_stride, n_kept, n_reduced, step, type_max, result):
    """Integer log-sum-exp of the single-run layout, the max and the sum of each row in one task (as
    float_rows_log_sum_exp), into ``result`` of the input dtype; False if a result does not fit it
    (``type_max``), for the caller to raise (as kernels.serial.serial_int_log_sum_exp)."""
    src = _borrowed(src)
    fits = np.empty(n_kept, dtype=np.bool_)
    for k in prange(n_kept):
        origin = base + k * kept_stride
        lowest = lowest_key(src[origin])
        top = as_wide(max_value_run(src, origin, n_reduced, step, lowest, lowest)[0])
        total = _int_exp_run(src, origin, n_reduced, step, top)
        result[k], fits[k] = _int_log_sum_exp(top, total, n_reduced, type_max)
    return fits.all()


# exp(-d) for the integer distances d = max - x of an integer log-sum-exp, looked up instead of
# computed: a distance of 746 or more gives 0.0 (exp(-746) rounds to zero in float64). Against the
# exp polynomial the exp pass took 0.75x the time on 16M int32 and 0.70-0.75x on int64 values (two
# threads, interleaved), and each term is libm's exp, not a 2-ulp approximation.
_LAST_DISTANCE = 746
EXP_OF_MINUS = np.array([math.exp(-d) for d in range(_LAST_DISTANCE)] + [0.0])


def exp_of_minus_distance(x, top):
    """exp(x - top) for an integer element ``x`` and the max ``top`` of its set (widened, as_wide)."""


@overload(exp_of_minus_distance, jit_options={"fastmath": False})
def _exp_of_minus_distance_impl(x, top):
    if isinstance(x, types.Integer) and x.bitwidth <= 32:
        # 0 <= top - x < 2**32: exact modulo 2**32, in 32-bit lanes (top, the max, is of x's own type)
        return lambda x, top: EXP_OF_MINUS[min(np.uint32(np.uint32(top) - np.uint32(x)), np.uint32(_LAST_DISTANCE))]
    if isinstance(x, types.Integer):
        return lambda x, top: EXP_OF_MINUS[min(as_bits(top) - as_bits(x), np.uint64(_LAST_DISTANCE))]
    return None


@njit(fastmath=FASTMATH)
def _int_exp_run(src, offset, n, step, top):
    """Sum of exp(x - top) over one run of integers (a slice when contiguous, as in _max_run_for)."""
    total = 0.0
    if step == 1:
        run = _view(src, offset, offset + n)
        for i in range(n):
            total += exp_of_minus_distance(run[i], top)
    else:
        for i in range(n):
            total += exp_of_minus_distance(src[offset + i * step], top)
    return total


def cast_like(template, x):
    """x converted to the Numba type of ``template``."""


@overload(cast_like, jit_options={"fastmath": False})
def _cast_like_impl(template, x):
    target = template
    return lambda template, x: target(x)


@njit(fastmath=False)
def _int_log_sum_exp(m, total, count, type_max):
    """(trunc(m + log(total)) exactly, in the widened type of the max ``m``; whether it is decided and
    fits, i.e. the true result is at most ``type_max``, the largest value of the input dtype). ``total`` is the sum of
    exp(x - m) and ``count`` the number of reduced elements: with more than one, the log is strictly
    positive and never an integer (the sum is 1 + exp(-d) + ..., and e is transcendental), even where
    float64 rounds it to an integer such as 0."""
    tail = math.log(total)  # >= 0: the max itself contributes exp(0) = 1
    # Within float64's error of an integer k >= 1 (the sum's: each term and addition rounded, and
    # the log's, with a margin), the floor is not decided: reported like a result that does not
    # fit, for the front end to decide exactly (numred._exact). Below 1/2 the floor is 0 anyway.
    nearest = math.floor(tail + 0.5)
    if nearest >= 1.0 and abs(tail - nearest) < 4.0 * ((count + 4) * 2.0**-53 + 2.0**-48):
        return m, False
    whole = cast_like(m, math.floor(tail))
    if m >= 0 or m + whole >= 0:
        # non-negative: truncation is floor, so m + floor(tail), if the dtype holds it
        if m > type_max - whole:
            return cast_like(m, type_max), False
        return m + whole, True
    # negative with a fractional tail: truncation toward zero rounds up
    return m + whole + cast_like(m, count > 1), True


def int_exp_blocks(src, base, n_kept, kept_stride, n_outer, outer_stride, n_inner, groups, maxima, count, type_max,
                   result, fits):
    """int_sum_exp for single-block plans: a group of neighbouring outputs per task, their runs read
    block by block (as in _float_blocks_for), each run's sum of exp(x - max) added to its output's
    total in the same order as int_sum_exp adds them; finished there too (_int_log_sum_exp)."""
    src, maxima = _borrowed(src), _borrowed(maxima)
    for group in prange(groups):
        k0, width = _group_of_outputs(group, n_kept, groups)
        totals = np.zeros(width)
        for i in range(n_outer):
            origin = base + i * outer_stride + k0 * kept_stride
            for w in range(width):
                totals[w] += _int_exp_run(src, origin + w * kept_stride, n_inner, 1, maxima[k0 + w])
        for w in range(width):
            result[k0 + w], fits[k0 + w] = _int_log_sum_exp(maxima[k0 + w], totals[w], count, type_max)


def int_sum_exp(src, base, dims, kept_ndim, nchunks, tile, maxima, out_total, count, type_max, result, fits):
    """Sum of exp(x - max) per (output, chunk), each term looked up by the exact integer distance
    max - x (exp_of_minus_distance). With tile > 1 a task reads the reduced rows of ``tile``
    neighbouring outputs (narrow ones back to back as wide rows), as float_sums does, instead of one
    strided column per output. On leading reduced axes (1000x1000 to 8192x16384, 4194304x4, int32 and
    int64) that took 0.15-0.94x the time, int64 gaining most (4096x4096 axis 0: 0.20x), int32 least:
    its tiles went through the float kernel with the exp polynomial before (in-process A/B). Four (wide)
    rows per call (_int_exp_columns4) then took 0.56-0.93x the time again on leading axes of 32-bit
    types and 0.63-0.70x on 64-bit ones, except 4096x4096 axis 0 (1.02-1.05x) (AMD Zen 5).

    Without partial arrays (size 0; one chunk per output) the task finishes its outputs itself
    (_int_log_sum_exp) into ``result`` and ``fits``, as float_sums does: the separate serial finishing
    pass took 0.8 ms of a 3.4 ms int32 log-sum-exp over 32x64x56x56 axis 1 (100352 outputs)."""
    src, maxima = _borrowed(src), _borrowed(maxima)
    kshape, kstrides, rshape, rstrides = _unpack(dims, kept_ndim)
    nr = np.prod(rshape)
    step = rstrides[-1]
    for task in prange(_n_tasks(kshape, tile, nchunks)):
        k0, width, c, pos, end = _task(task, kshape, tile, nchunks, nr)
        origin = base + _offset_of(k0, kshape, kstrides)
        if tile == 1:
            top = maxima[k0]
            total = 0.0
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                total += _int_exp_run(src, offset + origin, n, step, top)
                pos += n
            if out_total.size == 0:
                result[k0], fits[k0] = _int_log_sum_exp(top, total, count, type_max)
            else:
                out_total[k0 * nchunks + c] = total
        else:
            m = _rows_per_wide_row(width, step, end - pos)  # narrow rows back to back: m of them read as one
            wide = m * width
            tops = np.empty(wide, dtype=maxima.dtype)
            for j0 in range(0, wide, width):
                tops[j0:j0 + width] = maxima[k0:k0 + width]
            acc = np.zeros(wide)
            while pos < end:
                offset, n = _next_run(pos, end, rshape, rstrides)
                offset += origin
                j = 0
                while n - j >= 4 * m:  # four (wide) rows per call: a quarter of the traffic to acc
                    _int_exp_columns4(src, offset + j * step, m * step, wide, tops, acc)
                    j += 4 * m
                while n - j >= m:
                    _int_exp_columns(_view(src, offset + j * step, offset + j * step + wide), tops, acc)
                    j += m
                while j < n:
                    _int_exp_columns(_view(src, offset + j * step, offset + j * step + width), tops, acc)
                    j += 1
                pos += n
            for j0 in range(width, wide, width):  # the m accumulators of each column
                acc[:width] += acc[j0:j0 + width]
            if out_total.size == 0:
                for w in range(width):
                    result[k0 + w], fits[k0 + w] = _int_log_sum_exp(maxima[k0 + w], acc[w], count, type_max)
            else:
                for w in range(width):
                    out_total[(k0 + w) * nchunks + c] = acc[w]


@njit(fastmath=FASTMATH)
def _int_exp_columns(row, tops, acc):
    """acc[w] += exp(row[w] - tops[w]): one row of a tile."""
    for w in range(row.size):
        acc[w] += exp_of_minus_distance(row[w], tops[w])


@njit(fastmath=FASTMATH)
def _int_exp_columns4(src, offset, step, width, tops, acc):
    """acc[w] += the exp(x - tops[w]) of element w of four rows ``step`` apart (as _float_columns)."""
    r0 = _view(src, offset, offset + width)
    r1 = _view(src, offset + step, offset + step + width)
    r2 = _view(src, offset + 2 * step, offset + 2 * step + width)
    r3 = _view(src, offset + 3 * step, offset + 3 * step + width)
    for w in range(width):
        top = tops[w]
        acc[w] += (exp_of_minus_distance(r0[w], top) + exp_of_minus_distance(r1[w], top)) + (
            exp_of_minus_distance(r2[w], top) + exp_of_minus_distance(r3[w], top))


# Two compiled variants of each kernel: a parallel launch costs microseconds (DESIGN.md), so small
# inputs take the serial one. The compensated steps must not be reassociated, so only the inner
# _float_run carries FASTMATH.
# KERNELS names of the float kernels per mode: general layouts, single runs (_float_rows_for), single
# tiles (_float_tiles_for) and single blocks (_float_blocks_for)
FLOAT_SUMS = {SUM: "float_sum", SUM_SQUARES: "float_sum_squares", SUM_EXP: "float_sum_exp"}
FLOAT_TILES = {mode: FLOAT_SUMS[mode].replace("_sum", "_tiles_sum", 1) for mode in (SUM, SUM_SQUARES)}
FLOAT_BLOCKS = {mode: name.replace("_sum", "_blocks_sum", 1) for mode, name in FLOAT_SUMS.items()}
INT_BLOCKS = {False: "int_blocks_mean", True: "int_blocks_sum_squares"}  # by ``squares``
INT_TILES = {False: "int_tiles_mean", True: "int_tiles_sum_squares"}  # by ``squares``
MAX_KEYS = {True: "max_float_keys", False: "max_ints"}  # by float bits or integer data
MAX_BLOCKS = {True: "max_float_key_blocks", False: "max_int_blocks"}
KERNELS = {
    name: (entry(fn, name=name), entry(fn, name=name, parallel=True))
    for name, fn in [(FLOAT_SUMS[mode], _float_sums_for(mode)) for mode in FLOAT_SUMS]
    + [(FLOAT_TILES[mode], _float_tiles_for(mode)) for mode in FLOAT_TILES]
    + [(FLOAT_BLOCKS[mode], _float_blocks_for(mode)) for mode in FLOAT_BLOCKS]
    + [(INT_BLOCKS[squares], _int_blocks_for(squares)) for squares in INT_BLOCKS]
    + [(INT_TILES[squares], _int_tiles_for(squares)) for squares in INT_TILES]
    + [(MAX_KEYS[float_bits], _max_keys_for(float_bits)) for float_bits in MAX_KEYS]
    + [(MAX_BLOCKS[float_bits], _max_blocks_for(float_bits)) for float_bits in MAX_BLOCKS]
    + [(fn.__name__, fn) for fn in (int_sums, int_sum_exp, int_exp_blocks,
                                    float_rows_log_sum_exp, int_rows_log_sum_exp)]
}


# ---------------------------------------------------------------------------------------------
# combining partials (serial; work proportional to the output)
# ---------------------------------------------------------------------------------------------
@njit(fastmath=False)
def _combined_sum(out_total, out_comp, k, nchunks):
    """The compensated sum of the chunk partials of output k, in chunk order."""
    total = 0.0
    comp = 0.0
    for c in range(k * nchunks, (k + 1) * nchunks):
        total, comp = combine_sums(total, comp, out_total[c], out_comp[c])
    return compensated_value(total, comp)


@entry
def finish_float_sums(out_total, out_comp, nchunks, divisor, result):
    """result[k] = (sum of the partials of output k) / divisor, rounded once to result's dtype
    (store_rounded: float32 and float64, or the bits of float16 and bfloat16)."""
    for k in range(result.size):
        store_rounded(result, k, _combined_sum(out_total, out_comp, k, nchunks) / divisor)


@entry(fastmath={"reassoc"})  # to vectorise; without nnan and nsz, LLVM keeps value * 0.0
def all_finite(values):
    """Whether every float64 of ``values`` is finite: the check a float64 mean's results pass (an
    overflowing sum is retried rescaled). value * 0.0 is 0.0 for a finite value and NaN for inf or
    NaN. Reassociation may at most turn the sum into (sum of values) * 0.0, which sees every inf and
    NaN too and may raise a false alarm on an overflowing sum: a needless retry, never a missed one.
    np.isfinite(values).all() right after a parallel kernel took 2-7 us more than this on 1000
    results (in-process, AMD Zen 4)."""
    zeros = 0.0
    for i in range(values.size):
        zeros += values[i] * 0.0
    return zeros == 0.0


@entry
def finish_max(out_max, nchunks, result):
    """Per-output max of integer data from the tasks' maxima (combine_maxima, no NaNs)."""
    for k in range(result.size):
        best = out_max[k * nchunks]
        for c in range(k * nchunks + 1, (k + 1) * nchunks):
            best = combine_maxima(best, 0, out_max[c], 0)[0]
        result[k] = best


def key_to_float64(key, carrier):
    """The float64 value of a float_key of an element of a ``carrier`` array (a type witness)."""


@overload(key_to_float64, jit_options={"fastmath": False})
def _key_to_float64_impl(key, carrier):
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


@entry
def finish_float_max(out_max, out_nans, nchunks, carrier, result):
    """Per-output float64 max from the tasks' float_keys and NaN flags (NaN wins)."""
    for k in range(result.size):
        best = out_max[k * nchunks]
        nans = out_nans[k * nchunks]
        for c in range(k * nchunks + 1, (k + 1) * nchunks):
            best, nans = combine_maxima(best, nans, out_max[c], out_nans[c])
        result[k] = np.nan if nans else key_to_float64(best, carrier)


@entry
def finish_float_log_sum_exp(out_total, out_comp, nchunks, maxima, result):
    """max + log(sum of exp(x - max)), rounded once to result's dtype; a non-finite max (NaN, +inf,
    or -inf for an all -inf set) is the answer itself."""
    for k in range(result.size):
        m = maxima[k]
        total = _combined_sum(out_total, out_comp, k, nchunks)
        store_rounded(result, k, m + math.log(total) if math.isfinite(m) else m)


@njit(fastmath=False)
def _int_mean(low, high, count):
    """The 128-bit two's-complement sum (low, high) divided by ``count`` (uint64), truncated toward
    zero, as uint64 two's-complement bits."""
    negative = (high >> _U64(63)) != _U64(0)
    if negative:  # magnitude of the 128-bit value
        low = ~low + _U64(1)
        high = ~high + _U64(low == _U64(0))
    if high == _U64(0):  # |sum| < 2**64: the machine division
        quotient = low // count
    else:
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
    return _U64(0) - quotient if negative else quotient


# Means of 32-bit integer tiles go through the float kernel (SUM, divisor n) into an int32/uint32
# result, truncated as stored. Exact for at most this many values: |x| <= 2**32, so every partial sum
# is an integer of at most 2**52 in magnitude, which float64 holds exactly. The float64 quotient then
# truncates correctly: a mean that is not an integer lies at least 1/n from one, and the quotient's
# rounding error is at most |mean| * 2**-53 < 2**52 / n * 2**-53, half of that.
EXACT_FLOAT_INT_COUNT = 1 << 20


@entry
def finish_int_mean(out_low, out_high, nchunks, count, result):
    """Exact mean truncated toward zero, as uint64 two's-complement bits."""
    count = _U64(count)
    for k in range(result.size):
        low = _U64(0)
        high = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            low, high = combine_wide(low, high, out_low[c], out_high[c])
        result[k] = _int_mean(low, high, count)


@entry
def finish_int_squares(out_low, nchunks, result):
    for k in range(result.size):
        total = _U64(0)
        for c in range(k * nchunks, (k + 1) * nchunks):
            total = combine_wrapping(total, out_low[c])
        result[k] = total


@entry
def finish_int_log_sum_exp(maxima, out_total, nchunks, count, type_max, result, fits):
    """result[k], fits[k] from the chunk partials of output k (_int_log_sum_exp)."""
    for k in range(result.size):
        total = 0.0
        for c in range(k * nchunks, (k + 1) * nchunks):
            total += out_total[c]
        result[k], fits[k] = _int_log_sum_exp(maxima[k], total, count, type_max)


@functools.cache
def float_rows(mode, variant):
    """(serial, parallel) float_rows kernels of one mode and variant (ROWS_*), made on first use."""
    name = f"{FLOAT_SUMS[mode].replace('_sum', '_rows_sum', 1)}_{variant}"
    fn = _float_rows_for(mode, variant)
    return entry(fn, name=name), entry(fn, name=name, parallel=True)


@functools.cache
def int_rows(squares, four):
    """(serial, parallel) int_rows kernels: sums of squares or means, four rows at a time or one."""
    name = f"int_rows_{'sum_squares' if squares else 'mean'}{'_four' if four else ''}"
    fn = _int_rows_for(squares, four)
    return entry(fn, name=name), entry(fn, name=name, parallel=True)
