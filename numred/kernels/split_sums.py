"""Nearly exact float64 sums of float64 runs: each term split at a power of two (sigma) into a high
part that sums exactly and a low part that sums with a tiny error, in one pass from the previous
piece's sigma, or in two. Reached only through the gates (``float64_run`` and friends), which
compile a stub for other data, so kernels of narrower dtypes hold no float64 code.
"""
from __future__ import annotations

import functools
import math
import platform

from numba import types
from llvmlite import ir
from numba.extending import intrinsic, overload

from .jit import subroutine
from .base import FASTMATH, SUM, SUM_ABS, _bits_to_float64, _float64_to_bits, _is_one, _view, njit_for
from .decode import _cpu_has
from .reading import every_other_span


@subroutine(fastmath=False)  # a square is rounded by itself, as NumPy's np.square rounds it
def _float64_term(x, term, shift):
    """x * shift (SUM), |x| (SUM_ABS: positive terms, as squares, for the bounds below) or x * x."""
    if term == SUM:
        return x * shift
    return abs(x) if term == SUM_ABS else x * x


# The split passes are bound by their floating-point additions: five per element (two to split, one
# for the low part, two to accumulate), where the multiply-add units only square for the bound. Where
# wide vector additions take all of a core's adder pipes (AMD Zen 4's 512-bit ones), that makes a
# split sum much slower than a plain one. Two of the five are therefore done as multiply-adds by 1.0,
# on the multiply-add pipes: high = fma(sigma + term, 1.0, -sigma) and accumulator += high * 1.0. The
# values are the same (the product is exact, the sum rounded once, as by an addition), and the work
# is spread over both kinds of pipe.
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


@subroutine(fastmath=False)  # reassociation would fold (sigma + term) - sigma into term, and low into 0
def _split(term, sigma, one):
    """``term`` as (high, low): high is term rounded to a multiple of ulp(sigma) / 2, for |term| <=
    sigma a power of two, and low = term - high exactly (Rump, Ogita and Oishi's ExtractScalar).
    ``one``: _opaque_one(); the callers add high parts as ``high += part_high * one``."""
    high = _add_on_fma(sigma + term, one, -sigma)
    return high, term - high


# float64 runs are split-summed (_float64_run_for) in equal pieces of at most this many elements, each
# starting from the previous one's sigma. Each piece costs fixed work (three vector accumulators
# reduced, a square root, two compensated additions), so pieces are long enough to spread it (longer
# ones gain nothing more). The low parts' error grows with the square of the length: at most about
# 2**-80 of the sum of |x| here, where NumPy's pairwise sum errs by up to about 2**-53 of it times a
# growing factor.
# Runs shorter than SPLIT_PASS_MIN_RUN take two passes (_float64_run_two_pass), whose fixed cost is
# smaller: through the general row's calls, one pass pays only for longer runs. Rows of
# ONE_PASS_MIN_ROW elements or more (up to one piece) that float_rows splits directly, without those
# calls and with the split functions inlined, take one pass; shorter rows do better in two.
SPLIT_PIECE = 2048
ONE_PASS_MIN_ROW = 48
SPLIT_PASS_MIN_RUN = 512
# Strided rows in float_rows take one split pass from the row before's sigma (_float64_one_pass_for) from
# this length on; for shorter ones _float64_run_two_pass's two single chains do better.
STRIDED_SPLIT_MIN_RUN = 32


@functools.cache
def _float64_run_for(contiguous):
    """float64_run(src, offset, n, step, term, shift, sigma): the sum of x * shift (SUM) or x * x
    (SUM_SQUARES) over one run of float64 data as an exact high part and a nearly exact low part (summed
    compensated by _add_run), where a plain vectorised sum is not. Each term is split at a power of two,
    sigma, of more than twice the sum of the terms' magnitudes: its high part, a multiple of
    ulp(sigma) / 2, sums exactly in any order (no partial sum reaches sigma), and its low part, at most
    ulp(sigma) / 2, sums with an error of about n**2 * 2**-106 * sigma. A plain vectorised sum and NumPy's pairwise
    one err by up to n * 2**-53 * sum|x|, and which of the two came closer varied with the data and the
    CPU's vector width (the contract asks for no worse than NumPy's).

    ``sigma`` is the previous piece's (0.0 for none): neighbouring pieces have similar magnitudes, so
    one pass that splits at it and bounds the magnitude on the way (_split_pass) usually suffices; only
    when the bound shows it too small (wrong) or more than 16 times the bound (inexact) does a second
    pass split at a new one. Returns (high, low, sigma); sigma 0.0 after the fallback for non-finite
    terms, a magnitude near overflow, or a scaled sum (_float64_run_two_pass).

    Made for contiguous runs only (``contiguous``, a constant: step is 1; callers pass a literal 1) or
    for any step: the strided passes are not compiled into kernels whose runs are all contiguous (they
    would be a large share of such a kernel's first call)."""
    contiguous_one_pass = _float64_one_pass_for(True)
    strided_one_pass = _float64_one_pass_for(False)

    @njit_for(contiguous, fastmath=FASTMATH)
    def float64_run(src, offset, n, step, term, shift, sigma):
        # A literal step: an unknown one keeps LLVM from vectorising the loops. Each path slices src
        # itself: a slice handed down one more function costs extra on every short row.
        # shift: always 1, but for a rescaled mean after an overflow. Strided runs of any length take
        # the one-pass split: its passes over them run four sums each (_split_pass_strided).
        if contiguous or step == 1:
            if shift == 1.0 and n >= SPLIT_PASS_MIN_RUN:
                return contiguous_one_pass(_view(src, offset, offset + n), n, 1, term, sigma)
            high, low = _float64_run_two_pass(_view(src, offset, offset + n), n, 1, term, shift)
            return high, low, 0.0
        if shift == 1.0:  # (step may be 0: a broadcast axis)
            return strided_one_pass(_view(src, offset, len(src)), n, step, term, sigma)
        high, low = _float64_run_two_pass(_view(src, offset, len(src)), n, step, term, shift)
        return high, low, 0.0

    return float64_run


@functools.cache
def _float64_one_pass_for(contiguous):
    """one_pass(run, n, step, term, sigma): float64_run over run[0], run[step], ..., n elements of
    terms x (SUM) or x * x (SUM_SQUARES), usually in one pass; for a contiguous run (``contiguous``,
    a constant: step is 1) or a strided one."""

    @njit_for(contiguous, fastmath=FASTMATH)
    def one_pass(run, n, step, term, sigma):
        if sigma > 0.0:
            if contiguous:
                high, low, bound = _split_pass(run, n, term, sigma)
            else:
                high, low, bound = _split_pass_strided_run(run, n, step, term, sigma)
            if 2.0 * bound < sigma <= 16.0 * bound:
                return high, low, sigma
        elif contiguous:
            bound = _magnitude_bound(run, n, term)
        else:  # split at 0.0, each term is its own high part
            bound = _split_pass_strided_run(run, n, step, term, 0.0)[2]
        if bound < 2.0**1020:
            # the power of two three binades above bound's: 4 * bound < sigma <= 8 * bound, inside
            # the window the next piece keeps it in (above) with room on both sides. Two binades
            # above (at most 4 * bound), the next row would often outgrow it and be split again;
            # three leave room for ordinary variation. Low parts then err by up to twice as much, no
            # more than the window already allows.
            sigma = _bits_to_float64(((_float64_to_bits(bound) >> 52) + 3) << 52)
            if contiguous:
                high, low, _ = _split_pass(run, n, term, sigma)
            else:
                high, low, _ = _split_pass_strided_run(run, n, step, term, sigma)
            return high, low, sigma
        high, low = _float64_run_two_pass(run, n, step, term, 1.0)
        return high, low, 0.0

    return one_pass


# A bound on the sum of |term| over a run, from sums computed in the same pass as the split, with
# factors covering their rounding (n * 2**-53 relative for up to SPLIT_PIECE positive terms, and
# 2**-1074 per square that underflows):
# - SUM: sum |x| <= sqrt(n * sum x**2) (Cauchy-Schwarz). One fused multiply-add per element, where
#   sum |x| costs an abs and an add: the split pass is bound by its vector instructions, so one
#   fewer per element counts; on typical data the bound exceeds sum |x| only modestly (on a single
#   large term among n, by sqrt(n): a sigma that much larger, a low part that much less exact, still
#   far below NumPy's error).
# - SUM_SQUARES: the terms are positive, so their sum itself, high + low.
_BOUND_ROUNDING = 1.0 + 2.0**-30
_UNDERFLOW_ROOT = 2.0**-537  # sqrt(2**-1074)


@subroutine(fastmath=FASTMATH)
def _split_pass(run, n, term, sigma):
    """(high, low, bound) of the n elements of a contiguous run split at ``sigma`` (_float64_run_for;
    shift 1)."""
    one = _opaque_one()
    high = 0.0
    low = 0.0
    if term == SUM:
        squares = 0.0
        for i in range(n):
            x = run[i]
            part_high, part_low = _split(x, sigma, one)
            high += part_high * one
            low += part_low
            squares += x * x
        return high, low, (math.sqrt(n * squares) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    for i in range(n):
        part_high, part_low = _split(_float64_term(run[i], term, 1.0), sigma, one)
        high += part_high * one
        low += part_low
    return high, low, (high + low) * _BOUND_ROUNDING


@subroutine(fastmath=FASTMATH)
def _split_pass_strided_run(run, n, step, term, sigma):
    """_split_pass over run[0], run[step], ...: every other element over its span, other steps in four
    interleaved sums."""
    if step == 2 and n > 0:
        return _split_pass_every_other(run, n, term, sigma)
    return _split_pass_strided(run, n, step, term, sigma)


@subroutine(fastmath=FASTMATH)
def _magnitude_bound(run, n, term):
    """_split_pass's bound alone, for the first piece of a contiguous run."""
    total = 0.0
    if term == SUM:
        for i in range(n):
            x = run[i]
            total += x * x
        return (math.sqrt(n * total) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    for i in range(n):
        total += _float64_term(run[i], term, 1.0)
    return total * _BOUND_ROUNDING


@subroutine(fastmath=False)
def _kept_if(value, keep):
    """``value`` where ``keep`` (an int64 of all ones) and 0.0 where it is 0, by its bits."""
    return _bits_to_float64(_float64_to_bits(value) & keep)


@subroutine(fastmath=FASTMATH)
def _split_pass_every_other(run, n, term, sigma):
    """_split_pass over every other element as one pass over the whole span (every_other_span), with
    the parts of the elements in between zeroed by their bits (so that their NaN or inf never
    enters). The span lies inside the input's buffer (src spans all the memory the input touches),
    and this loop is vectorised where a strided one (four interleaved sums, _split_pass_strided) is
    not. Splits of 0.0 add 0.0 exactly to both parts, and the bound counts n terms, not the span.
    The parts are zeroed, not the elements: LLVM makes an element zeroed by bits or selected a
    masked load, slower from memory than even the strided loop. Nor for every third or fourth
    element: i % 3 is not vectorised, and every fourth element over its span is slower than the
    strided loop."""
    span = every_other_span(run, 0, n)
    one = _opaque_one()
    high = 0.0
    low = 0.0
    if term == SUM:
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
        part_high, part_low = _split(_float64_term(run[i], term, 1.0), sigma, one)
        high += _kept_if(part_high, keep) * one
        low += _kept_if(part_low, keep)
    return high, low, (high + low) * _BOUND_ROUNDING


# fastmath=False: with reassoc (as _split_pass has) the loop is much slower
@subroutine(fastmath=False)
def _split_pass_strided(run, n, step, term, sigma):
    """_split_pass over a strided run (a step other than 1) in four sums of each kind, one per
    element in turn: a strided loop is not vectorised, and three chains of dependent additions
    (one per kind) would be bound by their latency.
    The high parts sum exactly in any order, and the low parts' order does not change their error
    bound."""
    one = _opaque_one()  # for the split; the sums below are chains bound by latency, so plain additions
    high0 = high1 = high2 = high3 = 0.0
    low0 = low1 = low2 = low3 = 0.0
    squares0 = squares1 = squares2 = squares3 = 0.0  # SUM's bound
    whole = n - n % 4
    for i in range(0, whole, 4):
        x0, x1, x2, x3 = run[i * step], run[(i + 1) * step], run[(i + 2) * step], run[(i + 3) * step]
        part_high, part_low = _split(_float64_term(x0, term, 1.0), sigma, one)
        high0, low0, squares0 = high0 + part_high, low0 + part_low, squares0 + x0 * x0
        part_high, part_low = _split(_float64_term(x1, term, 1.0), sigma, one)
        high1, low1, squares1 = high1 + part_high, low1 + part_low, squares1 + x1 * x1
        part_high, part_low = _split(_float64_term(x2, term, 1.0), sigma, one)
        high2, low2, squares2 = high2 + part_high, low2 + part_low, squares2 + x2 * x2
        part_high, part_low = _split(_float64_term(x3, term, 1.0), sigma, one)
        high3, low3, squares3 = high3 + part_high, low3 + part_low, squares3 + x3 * x3
    high, low = (high0 + high1) + (high2 + high3), (low0 + low1) + (low2 + low3)
    squares = (squares0 + squares1) + (squares2 + squares3)
    for i in range(whole, n):
        x = run[i * step]
        part_high, part_low = _split(_float64_term(x, term, 1.0), sigma, one)
        high, low, squares = high + part_high, low + part_low, squares + x * x
    if term == SUM:
        return high, low, (math.sqrt(n * squares) + n * _UNDERFLOW_ROOT) * _BOUND_ROUNDING
    return high, low, (high + low) * _BOUND_ROUNDING


@subroutine(fastmath=FASTMATH)
def _float64_run_two_pass(run, n, step, term, shift):
    """_float64_run_for's fallback: sum |term| first, then split at a sigma from it; the plain sum of the
    terms where they are not finite or their magnitude is near overflow: there it is the IEEE
    answer (or is rescaled)."""
    magnitude = 0.0
    for i in range(n):
        magnitude += abs(_float64_term(run[i * step], term, shift))
    if not magnitude < 2.0**1021:  # inf, NaN, or too near overflow for sigma
        total = 0.0
        for i in range(n):
            total += _float64_term(run[i * step], term, shift)
        return total, 0.0
    sigma = _bits_to_float64(((_float64_to_bits(magnitude) >> 52) + 2) << 52)
    high = 0.0
    low = 0.0
    # plain additions (a literal 1.0): these runs are short, and multiply-adds, whose latency is
    # longer, would slow them
    for i in range(n):
        part_high, part_low = _split(_float64_term(run[i * step], term, shift), sigma, 1.0)
        high += part_high
        low += part_low
    return high, low


def float64_run(src, offset, n, step, term, shift, sigma):
    """_float64_run_for's float64_run for float64 ``src``, the contiguous one where ``step`` is a
    literal 1; never reached for other data."""


@overload(float64_run, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _float64_run_gate(src, offset, n, step, term, shift, sigma):
    if src.dtype == types.float64:
        run = _float64_run_for(_is_one(step))
        return lambda src, offset, n, step, term, shift, sigma: run(src, offset, n, step, term, shift, sigma)
    return lambda src, offset, n, step, term, shift, sigma: (0.0, 0.0, sigma)


def float64_one_pass(run, n, step, term, sigma):
    """_float64_one_pass_for's one_pass for float64 ``run``, the contiguous one where ``step`` is a
    literal 1; never reached for other data."""


@overload(float64_one_pass, prefer_literal=True, inline="always", jit_options={"fastmath": False})
def _float64_one_pass_gate(run, n, step, term, sigma):
    if run.dtype == types.float64:
        one_pass = _float64_one_pass_for(_is_one(step))
        return lambda run, n, step, term, sigma: one_pass(run, n, step, term, sigma)
    return lambda run, n, step, term, sigma: (0.0, 0.0, sigma)


def float64_run_two_pass(run, n, step, term, shift):
    """_float64_run_two_pass for float64 ``run``; never reached for other data."""


@overload(float64_run_two_pass, inline="always", jit_options={"fastmath": False})
def _float64_run_two_pass_gate(run, n, step, term, shift):
    if run.dtype == types.float64:
        return lambda run, n, step, term, shift: _float64_run_two_pass(run, n, step, term, shift)
    return lambda run, n, step, term, shift: (0.0, 0.0)
