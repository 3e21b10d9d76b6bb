"""What a reduction is, as data, and the dtypes the engine reads: the one vocabulary that the registry,
the drivers, the partial states and the tooling share.

An operator computes a **term** per element, accumulates it in an **accumulator** (for integers; every
float sum accumulates in float64), and applies a **finish** step. ``Reduction`` holds the three;
``KERNEL_SETS`` and ``FINISHED_SETS`` list the combinations that kernels exist for.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .kernels import base


class Term(enum.IntEnum):
    """What one element contributes. The values of the four sums are the kernels' compile-time modes
    (``kernels.base``); kernels receive them as plain ints (``int(term)``)."""

    SUM = base.SUM  # x
    SQUARES = base.SUM_SQUARES  # x * x
    EXP = base.SUM_EXP  # exp(x - max)
    ABS = base.SUM_ABS  # |x|
    KEY = 4  # the element itself, compared exactly (float data as integer keys of its bits)
    PRODUCT = 5  # x, multiplied: (mantissa, exponent) partial states, not a sum


class Accumulator(enum.Enum):
    """How integer data accumulates its term (float data: always float64, compensated)."""

    EXACT = "exact"  # the exact 128-bit sum
    WRAPPING = "wrapping"  # the uint64 sum modulo 2**64
    MAX_AND_EXP_SUM = "max and sum of exp"  # the exact max with a float64 sum of exp(x - max)
    MAX = "max"  # the KEY term's accumulators, for every dtype
    MIN = "min"


class Finish(enum.IntEnum):
    """A step applied to unrounded sums before the one rounding to the output dtype. The values are
    the float sum kernels' runtime argument (``kernels.base``); 0 there means none."""

    ROUND = base.ROUND  # the rounding alone (ReduceL1's sum of |x|)
    SQRT = base.SQRT  # ReduceL2
    LOG = base.LOG  # ReduceLogSum


SUM, SQUARES, EXP, ABS, KEY, PRODUCT = Term
EXACT, WRAPPING, MAX_AND_EXP_SUM, MAX, MIN = Accumulator
ROUND, SQRT, LOG = Finish


@dataclass(frozen=True)
class Reduction:
    """What an operator computes: its term, its integer accumulator and its finish step. Besides
    ``finish``: ``mean`` divides by the count (integers truncate toward zero), and the EXP term ends
    in max + log(sum). The kernels are made per (layout, term, accumulator) with these as
    compile-time constants."""

    term: Term
    accumulator: Accumulator
    mean: bool = False
    finish: Finish | None = None  # applied to the unrounded sums (FINISHED_SETS)

    def __post_init__(self):
        if self.finish is not None:
            if (self.term, self.accumulator, self.finish) not in FINISHED_SETS:
                raise ValueError(f"no finish for {self}; there is one for {sorted(map(str, FINISHED_SETS))}")
        elif (self.term, self.accumulator, self.mean) not in KERNEL_SETS | FLOAT_KERNEL_SETS:
            raise ValueError(f"no kernels for {self}; they exist for "
                             f"{sorted(map(str, KERNEL_SETS | FLOAT_KERNEL_SETS))}")

    @property
    def int_kernels(self) -> bool:
        """Whether integer data has kernels for this reduction; without them its integer results are
        the operator's exact function's (Op.exact), computed in Python."""
        return self.finish is not None or (self.term, self.accumulator, self.mean) in KERNEL_SETS

    @property
    def int_wraps(self) -> bool:
        """Whether integer results are exact modulo 2**bits (sums), not a real value truncated."""
        return self.accumulator == WRAPPING or (self.accumulator == EXACT and not self.mean
                                                and self.finish is None)


# (term, integer accumulator, mean) the kernels finish themselves. A sum of x (ReduceSum's) keeps the
# exact sum's low bits, which are its sum modulo 2**bits; a product's integers wrap.
KERNEL_SETS = {(SUM, EXACT, True), (SUM, EXACT, False), (SQUARES, WRAPPING, False), (EXP, MAX_AND_EXP_SUM, False),
               (KEY, MAX, False), (KEY, MIN, False), (PRODUCT, WRAPPING, False)}
# (term, EXACT, mean) of the sums that float data has kernels for, whatever integers have: the float
# sum kernels take every sum term, divided by the count or not. A reduction of these that is not in
# KERNEL_SETS (the mean of squares, say) computes integer data by its operator's exact function.
FLOAT_KERNEL_SETS = {(term, EXACT, mean) for term in (SUM, SQUARES, ABS) for mean in (False, True)}
# (term, integer accumulator, finish) of the operators finished from unrounded sums (numred._derived):
# the sum of |x| (integers: modulo 2**bits), the exact integer sum of squares' square root, the exact
# integer sum's log
FINISHED_SETS = {(ABS, WRAPPING, ROUND), (SQUARES, EXACT, SQRT), (SUM, EXACT, LOG)}


# ---- dtypes ---------------------------------------------------------------------------------------

# dtype -> the carrier dtype the kernels read it as: float16 and bfloat16 as their 16-bit patterns
CARRIERS = {
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
    np.dtype(np.float16): np.dtype(np.uint16),
    np.dtype(np.int32): np.dtype(np.int32),
    np.dtype(np.int64): np.dtype(np.int64),
    np.dtype(np.uint32): np.dtype(np.uint32),
    np.dtype(np.uint64): np.dtype(np.uint64),
}  # and bfloat16 (add_bfloat16)
# float dtype -> (signed integer dtype viewing its bits, the bits of +inf)
FLOAT_BITS = {
    np.dtype(np.float32): (np.dtype(np.int32), 0x7F800000),
    np.dtype(np.float64): (np.dtype(np.int64), 0x7FF0000000000000),
    np.dtype(np.float16): (np.dtype(np.int16), 0x7C00),
}  # and bfloat16 (add_bfloat16)
# float dtype -> the dtype the kernels write, rounding once from float64: float32 and float64
# themselves; float16 and bfloat16 as their bits, in the carrier dtypes of their inputs
RESULT_DTYPE = {dtype: dtype for dtype in FLOAT_BITS} | {np.dtype(np.float16): np.dtype(np.uint16)}
# integer dtype -> (the dtype its maxima and log-sum-exp results are computed in, its largest value
# in that dtype)
INT_WIDENING = {
    np.dtype(t): (np.dtype(np.uint64 if np.dtype(t).kind == "u" else np.int64),
                  (np.uint64 if np.dtype(t).kind == "u" else np.int64)(np.iinfo(t).max))
    for t in (np.int32, np.int64, np.uint32, np.uint64)
}


def add_bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, added to the tables above (int16 bits for the kernels). numred does not
    import ml_dtypes at import time: a bfloat16 array exists only where ml_dtypes has been imported,
    so the first one adds the entries."""
    import ml_dtypes

    bfloat16 = np.dtype(ml_dtypes.bfloat16)
    if bfloat16 not in CARRIERS:
        FLOAT_BITS[bfloat16] = (np.dtype(np.int16), 0x7F80)
        RESULT_DTYPE[bfloat16] = np.dtype(np.int16)
        CARRIERS[bfloat16] = np.dtype(np.int16)  # (last: CARRIERS is what the front end checks)
    return bfloat16


# ---- results the kernels leave undecided ----------------------------------------------------------

class Undecided(Exception):
    """A kernel left a result it could not decide in float64 (an integer log-sum-exp within rounding of
    an integer, an integer ReduceL2 whose sum of squares does not fit 64 bits) or one that does not
    fit the dtype: the front end computes the call again exactly (numred._exact), which gives the
    result or the ValueError of one that does not fit."""


def int_log_sum_exp_overflow(dtype: np.dtype) -> ValueError:
    """The error of an integer log-sum-exp whose result does not fit ``dtype``."""
    return ValueError(
        f"ReduceLogSumExp: the result does not fit in {dtype} (largest value {INT_WIDENING[dtype][1]}); "
        "integer results are not clamped"
    )
