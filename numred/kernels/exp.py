"""exp for log-sum-exp: exp(x) for x <= 0 in float64 (a polynomial with a 2-ulp bound) for float data,
and a table of exp(-d) for the integer distances of integer data.
"""
from __future__ import annotations

import math

import numpy as np
from numba import types

from .jit import subroutine, subroutine_by_type
from .base import FASTMATH, _bits_to_float64, _float64_to_bits, smaller
from .decode import as_bits

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
# the caller's fused into the first addition rounds an exact product, as good as a rounded one, in
# one instruction instead of two
@subroutine(fastmath={"contract"})
def _round_to_integer(t):
    """(round(t) as float64, and the float64 whose low bits hold round(t) as an integer): a float to
    int conversion would be scalarised, this stays in vector registers."""
    shifted = t + _SHIFTER
    return shifted - _SHIFTER, _float64_to_bits(shifted)


@subroutine(fastmath=FASTMATH)
def exp_nonpositive(x):
    """exp(x) for x <= 0 (after the max shift), within about 2 ulp, in a form LLVM vectorises: Numba's
    math.exp is a scalar libm call, which no loop vectorises around. exp(x) = 2**k * exp(r), |r| <= ln(2)/2, exp(r) by the
    polynomial of _EXP_Q, evaluated by Estrin's scheme for instruction-level parallelism. Below -708,
    exp(x) < 2**-1021 cannot move a sum holding exp(0): 0. Such x (and -inf) are not clamped first;
    their garbage k and r go into a value the last line discards. Fewer terms than the degree-13
    Taylor series and no clamp: less work per exp."""
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


# exp(-d) for the integer distances d = max - x of an integer log-sum-exp, looked up instead of
# computed: a distance of 746 or more gives 0.0 (exp(-746) rounds to zero in float64). A lookup is
# cheaper than the exp polynomial, and each term is libm's exp, not a 2-ulp approximation.
_LAST_DISTANCE = 746
EXP_OF_MINUS = np.array([math.exp(-d) for d in range(_LAST_DISTANCE)] + [0.0])


@subroutine_by_type(fastmath=False)
def exp_of_minus_distance(x, top):
    """exp(x - top) for an integer element ``x`` and the max ``top`` of its set (widened, as_wide)."""
    if isinstance(x, types.Integer) and x.bitwidth <= 32:
        # 0 <= top - x < 2**32: exact modulo 2**32, in 32-bit lanes (top, the max, is of x's own type)
        return lambda x, top: EXP_OF_MINUS[smaller(np.uint32(np.uint32(top) - np.uint32(x)),
                                                   np.uint32(_LAST_DISTANCE))]
    if isinstance(x, types.Integer):
        return lambda x, top: EXP_OF_MINUS[smaller(as_bits(top) - as_bits(x), np.uint64(_LAST_DISTANCE))]
    return None
