"""An independent oracle for numred's reductions.

Nothing here calls numred. Values are computed with Python ints, ``fractions.Fraction`` and
``math.fsum``/``math.exp``/``math.log``; NumPy is used only to move axes around and to convert
between dtypes (conversions that are exact, see below).

The oracle follows docs/SEMANTICS.md:

* floats (float16, bfloat16, float32, float64):
  - ReduceMean: the exact rational mean. numred accumulates in float64 and rounds once, so a result
    is accepted when it is within 1 ulp (of the output dtype) of the exact value, plus the error
    bound of *any* float64 summation order, gamma(n) * sum|x| (Higham, recursive summation).
    Special values: any NaN -> NaN; +inf and -inf together -> NaN; else an inf gives that inf.
  - ReduceSum: the exact rational sum, same tolerance as the mean (times n); a result beyond the
    dtype's range is inf. Special values as the mean.
  - ReduceSumSquare: the exact sum of x*x, same tolerance (relative to the exact sum); NaN -> NaN,
    any inf -> +inf; a result beyond the dtype's range is inf.
  - ReduceLogSumExp: m + log(fsum(exp(x - m))) with m the exact max, in float64 (far more precise
    than the output ulp for the narrow types, and given an absolute tolerance of a few dozen float64
    ulps for float64). Any NaN -> NaN; else any +inf -> +inf; all -inf -> -inf.
  - ReduceMax / ReduceMin: the exact max / min, any NaN -> NaN, -0.0 below +0.0 (the sign of a zero
    result is checked).
  - ReduceProd: the product (mpmath, 256 bits: exact for up to four factors, within n units of 2**-255
    beyond), within (n + 1) float64 units and 1 ulp of the output; NaN if any NaN or 0 x inf; the
    sign exact, of zeros too.
  - ReduceL1: the exact sum of |x|, tolerance as the sum of squares; NaN -> NaN, else any inf -> +inf.
  - ReduceL2: sqrt of the exact sum of squares (mpmath, 200 bits), within 1 ulp of the output plus
    the float64 sum's error bound (halved by the root); NaN -> NaN, else any inf -> +inf.
  - ReduceLogSum: ln of the exact sum (mpmath), within 1 ulp plus the log of the float64 sum's
    relative error; a sum within that error of 0 may give anything (its sign is not decided);
    negative -> NaN, 0 -> -inf, special values as the sum, with log(-inf) = NaN.
  - Empty reduced set: mean NaN, LSE and LogSum -inf, Sum, SumSquare, L1 and L2 0, Max -inf, Min +inf.
* integers (int32, int64, uint32, uint64):
  - ReduceMean: exact Python-int sum divided by n, truncated toward zero.
  - ReduceSum: exact sum modulo 2**bits, two's complement for signed types.
  - ReduceSumSquare: exact sum of squares modulo 2**bits, two's complement for signed types.
  - ReduceLogSumExp: trunc(m + log(sum exp(x - m))) with m the exact max. When float64 cannot
    decide the truncation (m + f within 1e-12 of an integer) both neighbours are accepted. A result
    that does not fit the dtype must raise ValueError.
  - ReduceMax / ReduceMin: the exact max / min.
  - ReduceProd: the exact product modulo 2**bits, two's complement for signed types.
  - ReduceL1: the exact sum of |x| modulo 2**bits, two's complement for signed types.
  - ReduceL2: math.isqrt of the exact sum of squares; ValueError when it does not fit.
  - ReduceLogSum: floor(ln S) of the exact sum S >= 1, decided with mpmath; S <= 0 raises ValueError.
  - Empty reduced set: mean, LSE and LogSum raise ValueError, Sum, SumSquare, L1 and L2 give 0, Max the
    dtype's minimum, Min its maximum.
* noop_with_empty_axes=1 with no axes: mean/sum/max/min/LSE give a copy, SumSquare gives x*x in the input dtype
  (floats rounded once, integers wrapped), L1 |x| (|INT_MIN| wraps to INT_MIN), L2 |x| (|INT_MIN|
  raises ValueError), LogSum ln x
  (integers floor(ln x), x <= 0 raises ValueError).
"""
from __future__ import annotations

import functools
import math

import mpmath
from dataclasses import dataclass, field
from fractions import Fraction

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BFLOAT16)
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES
NARROW_INT_DTYPES = (np.dtype(np.int8), np.dtype(np.uint8))  # ReduceMax and ReduceMin only

# precision p (significand bits, implicit bit included), emin, emax
_FORMATS = {
    "float64": (53, -1022, 1023),
    "float32": (24, -126, 127),
    "float16": (11, -14, 15),
    "bfloat16": (8, -126, 127),
}

_U64 = Fraction(1, 2**53)  # unit roundoff of float64
_TINY64 = Fraction(1, 2**1074)  # smallest float64 subnormal


def dtype_name(dtype) -> str:
    return np.dtype(dtype).name


def is_float_dtype(dtype) -> bool:
    return dtype_name(dtype) in _FORMATS


def float_format(dtype):
    return _FORMATS[dtype_name(dtype)]


def int_bits_signed(dtype):
    d = np.dtype(dtype)
    return d.itemsize * 8, d.kind == "i"


def int_range(dtype):
    bits, signed = int_bits_signed(dtype)
    if signed:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def native(dtype) -> np.dtype:
    d = np.dtype(dtype)
    return d.newbyteorder("=") if d.byteorder not in ("=", "|") else d


# ----------------------------------------------------------------------------------------------
# exact rounding of a Fraction to a binary floating-point format
# ----------------------------------------------------------------------------------------------


def _floor_log2(a: Fraction) -> int:
    """floor(log2(a)) for a Fraction a > 0, exactly (integers only: 2**e <= num / den)."""
    num, den = a.numerator, a.denominator
    e = num.bit_length() - den.bit_length()
    def at_least(k):  # num / den >= 2**k
        return (num << -k if k < 0 else num) >= (den if k < 0 else den << k)

    if not at_least(e):
        e -= 1
    assert at_least(e) and not at_least(e + 1)
    return e


def _quantum_exponent(a: Fraction, dtype) -> int:
    """e with 2**e the spacing of the format of ``dtype`` in the binade of a >= 0 (subnormal spacing
    near 0)."""
    p, emin, _ = float_format(dtype)
    return (emin if a == 0 else max(_floor_log2(a), emin)) - p + 1


def ulp(a: Fraction, dtype) -> Fraction:
    """The spacing of the format of `dtype` in the binade of |a| (subnormal spacing near 0)."""
    return Fraction(2) ** _quantum_exponent(abs(Fraction(a)), dtype)


def nearly_exact_float64_interval(row, opname: str) -> tuple[float, float]:
    """The float64 results a nearly exact float64 sum along a run may give (kernels.split_sums._float64_run_for):
    the roundings of the exact sum of the terms minus and plus len(row) * 2**-100 * sum |term|
    (rounding is monotonic, so every value between them); a mean is that sum divided by n and
    rounded again. Terms are the float64 values of ``row``, for sums of squares their squares
    rounded as NumPy's np.square rounds them."""
    terms = [v * v if opname == "reduce_sum_square" else v for v in row]
    total = exact_sum(terms)
    slack = len(terms) * Fraction(2) ** -100 * exact_sum(terms, magnitudes=True)
    lowest, highest = float(total - slack), float(total + slack)
    if opname == "reduce_mean":
        lowest, highest = float(Fraction(lowest) / len(terms)), float(Fraction(highest) / len(terms))
    return lowest, highest


@functools.lru_cache(maxsize=None)
def max_finite(dtype) -> Fraction:
    p, _, emax = float_format(dtype)
    return (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax


@functools.lru_cache(maxsize=None)
def overflow_threshold(dtype) -> Fraction:
    """Round-to-nearest gives inf at and beyond this magnitude."""
    p, _, emax = float_format(dtype)
    return (2 - Fraction(2) ** (-p)) * Fraction(2) ** emax


def round_fraction(q, dtype) -> float:
    """Round the rational q to the nearest value of `dtype` (ties to even, overflow to inf), once.

    The result is returned as a Python float; every value of the four formats is a float64, so
    converting it to the dtype afterwards is exact. Integer arithmetic on q's numerator and
    denominator: |q| / 2**e = k + rem / scaled_den, for 2**e the spacing of |q|'s binade.
    """
    q = Fraction(q)
    if q == 0:
        return 0.0
    sign = -1.0 if q < 0 else 1.0
    a = abs(q)
    if a >= overflow_threshold(np.dtype(dtype)):
        return sign * math.inf
    e = _quantum_exponent(a, dtype)
    num, den = a.numerator, a.denominator
    scaled_num, scaled_den = (num, den << e) if e >= 0 else (num << -e, den)
    k, rem = divmod(scaled_num, scaled_den)
    if 2 * rem > scaled_den or (2 * rem == scaled_den and k % 2 == 1):
        k += 1
    # exact: k has at most p + 1 bits and k * 2**e is a value of the format (so of float64)
    return sign * math.ldexp(float(k), e)


def gamma(n: int) -> Fraction:
    """Higham's gamma_n = n u / (1 - n u) for float64: the bound of any n-term summation."""
    nu = n * _U64
    return nu / (1 - nu)


# ----------------------------------------------------------------------------------------------
# expected results
# ----------------------------------------------------------------------------------------------


class ExpectedError(Exception):
    """The contract says the call must raise `exc_type`."""

    def __init__(self, exc_type, why):
        super().__init__(f"{exc_type.__name__}: {why}")
        self.exc_type = exc_type
        self.why = why


@dataclass(frozen=True)
class FloatCell:
    kind: str  # "nan", "inf", "num", or "any" (a log of a sum whose sign is not decided)
    sign: int = 1  # for "inf"
    exact: Fraction | None = None  # for "num": the exact (or float64-precise) value
    tol: Fraction = Fraction(0)  # accepted absolute distance from `exact`
    rounded: float = math.nan  # `exact` correctly rounded to the dtype (may be +-inf)
    signed_zero: bool = False  # a zero result must have the sign of `rounded` (max and min)

    def accepts(self, got: float, dtype) -> bool:
        if self.kind == "any":
            return True
        if self.kind == "nan":
            return math.isnan(got)
        if self.kind == "inf":
            return got == self.sign * math.inf
        if math.isnan(got):
            return False
        if self.signed_zero and got == 0 == self.rounded:
            return math.copysign(1.0, got) == math.copysign(1.0, self.rounded)
        if got == self.rounded:
            return True
        if math.isinf(got):
            # an overflow is acceptable only when the exact value is within tolerance of the
            # rounding threshold
            return (got > 0) == (self.exact > 0) and abs(self.exact) + self.tol >= overflow_threshold(dtype)
        return abs(Fraction(got) - self.exact) <= self.tol

    def describe(self) -> str:
        if self.kind in ("nan", "any"):
            return self.kind
        if self.kind == "inf":
            return "+inf" if self.sign > 0 else "-inf"
        return f"{self.rounded!r} (exact {float(self.exact)!r} +- {float(self.tol):.3g})"


@dataclass(frozen=True)
class IntCell:
    candidates: frozenset  # accepted values (one unless float64 cannot decide a truncation)

    def accepts(self, got: int, dtype) -> bool:
        return int(got) in self.candidates

    def describe(self) -> str:
        c = sorted(self.candidates)
        return repr(c[0]) if len(c) == 1 else f"one of {c}"


@dataclass
class Expected:
    op: str
    dtype: np.dtype
    shape: tuple
    cells: list = field(default_factory=list)  # C order
    error_ok: type | None = None  # raising this is also acceptable (undecidable integer overflow)

    def array(self) -> np.ndarray:
        """The best single expected array (correctly rounded / first candidate)."""
        if is_float_dtype(self.dtype):
            vals = []
            for c in self.cells:
                if c.kind in ("nan", "any"):
                    vals.append(math.nan)
                elif c.kind == "inf":
                    vals.append(c.sign * math.inf)
                else:
                    vals.append(c.rounded)
            return np.array(vals, dtype=np.float64).astype(self.dtype).reshape(self.shape)
        vals = [min(c.candidates) for c in self.cells]
        return np.array(vals, dtype=self.dtype).reshape(self.shape)


def normalize_axes(axes, ndim: int, noop_with_empty_axes) -> tuple | None:
    """Reduced axes (sorted, non-negative) for valid arguments, None when nothing is reduced."""
    if axes is None:
        lst = []
    elif isinstance(axes, np.ndarray):
        lst = [int(a) for a in axes.ravel().tolist()]
    elif isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        lst = [int(axes)]
    else:
        lst = [int(a) for a in axes]
    if not lst:
        return None if int(noop_with_empty_axes) else tuple(range(ndim))
    norm = sorted(a + ndim if a < 0 else a for a in lst)
    assert all(0 <= a < ndim for a in norm), (axes, ndim)
    assert len(set(norm)) == len(norm), axes
    return tuple(norm)


def exact_sum(values, *, squares: bool = False, magnitudes: bool = False) -> Fraction:
    """The exact sum of finite floats (of their squares, or of their magnitudes) as a Fraction. Each
    float is an integer over a power of two (``as_integer_ratio``); the terms are added as integers
    over the largest of those powers, and reduced once at the end. (A running sum of Fractions
    reduces by a gcd at every step: these oracles spent most of the suite's time there.)"""
    ratios = [v.as_integer_ratio() for v in values]
    if squares:
        ratios = [(n * n, d * d) for n, d in ratios]
    elif magnitudes:
        ratios = [(abs(n), d) for n, d in ratios]
    if not ratios:
        return Fraction(0)
    common = max(d for _, d in ratios)
    return Fraction(sum(n * (common // d) for n, d in ratios), common)


def _float_values(x: np.ndarray) -> np.ndarray:
    # float16/bfloat16/float32 -> float64 is exact, any byte order
    return x.astype(np.float64)


def _wrap(v: int, dtype) -> int:
    bits, signed = int_bits_signed(dtype)
    v %= 2**bits
    if signed and v >= 2 ** (bits - 1):
        v -= 2**bits
    return v


def _trunc_div(s: int, n: int) -> int:
    q = abs(s) // n
    return q if s >= 0 else -q


def _trunc_fraction(q: Fraction) -> int:
    return math.trunc(q)  # toward zero


# ---- floats ----------------------------------------------------------------------------------


def _num_cell(exact: Fraction, tol: Fraction, dtype) -> FloatCell:
    return FloatCell("num", exact=exact, tol=tol, rounded=round_fraction(exact, dtype))


def _special_sum_cell(vals) -> FloatCell | None:
    """IEEE rules of a sum (and mean) of x: any NaN, or +inf with -inf, gives NaN; else an inf gives it."""
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    pos = any(v == math.inf for v in vals)
    neg = any(v == -math.inf for v in vals)
    if pos and neg:
        return FloatCell("nan")
    if pos or neg:
        return FloatCell("inf", sign=1 if pos else -1)
    return None


def float_mean_cell(vals, dtype) -> FloatCell:
    n = len(vals)
    special = _special_sum_cell(vals)
    if special is not None:
        return special
    if n == 0:
        return FloatCell("nan")
    exact = exact_sum(vals) / n
    s_abs = exact_sum(vals, magnitudes=True)
    tol = ulp(exact, dtype) + gamma(n + 2) * s_abs / n + (n + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def float_sum_cell(vals, dtype) -> FloatCell:
    """The exact sum, within 1 ulp of the output plus any float64 summation order's error bound; beyond
    the dtype's range, inf (FloatCell.accepts allows inf only where the exact sum is within tolerance
    of the overflow threshold)."""
    n = len(vals)
    special = _special_sum_cell(vals)
    if special is not None:
        return special
    if n == 0:
        return FloatCell("num", exact=Fraction(0), tol=Fraction(0), rounded=0.0)
    exact = exact_sum(vals)
    s_abs = exact_sum(vals, magnitudes=True)
    tol = ulp(exact, dtype) + gamma(n + 2) * s_abs + (n + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def float_sum_square_cell(vals, dtype) -> FloatCell:
    n = len(vals)
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    if any(math.isinf(v) for v in vals):
        return FloatCell("inf", sign=1)
    if n == 0:
        return FloatCell("num", exact=Fraction(0), tol=Fraction(0), rounded=0.0)
    exact = exact_sum(vals, squares=True)
    tol = ulp(exact, dtype) + gamma(n + 2) * exact + (n + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def lse_float64(vals) -> float:
    """m + log(fsum(exp(x - m))) for finite max m, in float64 (the oracle's LSE value)."""
    m = max(vals)
    s = math.fsum(math.exp(v - m) for v in vals)
    return m + math.log(s)


def float_lse_cell(vals, dtype) -> FloatCell:
    n = len(vals)
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    if any(v == math.inf for v in vals):
        return FloatCell("inf", sign=1)
    if n == 0 or all(v == -math.inf for v in vals):
        return FloatCell("inf", sign=-1)
    r = lse_float64(vals)
    exact = Fraction(r)
    # oracle error (x - m, exp, fsum, log, final add) plus the implementation's float64 error:
    # a few dozen float64 ulps absolute in the log part, and a couple of ulps of r.
    tol = ulp(exact, dtype) + (2 * n + 64) * 2 * _U64 + 4 * ulp(exact, np.float64)
    if n == 1:
        tol = Fraction(0)  # LSE of one finite value is that value, exactly
    return _num_cell(exact, tol, dtype)


# ---- integers --------------------------------------------------------------------------------


def int_mean_cell(vals, dtype) -> IntCell:
    if not vals:
        raise ExpectedError(ValueError, "integer ReduceMean of an empty set")
    return IntCell(frozenset([_trunc_div(sum(vals), len(vals))]))


def float_extreme_cell(vals, dtype, minimum: bool) -> FloatCell:
    """The exact max (min) of float values: NaN if any is NaN; -0.0 below +0.0; an empty set -inf (+inf)."""
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    if not vals:
        return FloatCell("inf", sign=1 if minimum else -1)
    # order by value, then a zero by its sign bit: -0.0 < +0.0
    best = (min if minimum else max)(vals, key=lambda v: (v, math.copysign(1.0, v)))
    if math.isinf(best):
        return FloatCell("inf", sign=1 if best > 0 else -1)
    return FloatCell("num", exact=Fraction(best), tol=Fraction(0), rounded=best, signed_zero=True)


def int_extreme_cell(vals, dtype, minimum: bool) -> IntCell:
    lo, hi = int_range(dtype)
    if not vals:
        return IntCell(frozenset([hi if minimum else lo]))
    return IntCell(frozenset([(min if minimum else max)(vals)]))


def int_sum_cell(vals, dtype) -> IntCell:
    return IntCell(frozenset([_wrap(sum(vals), dtype)]))


def int_sum_square_cell(vals, dtype) -> IntCell:
    return IntCell(frozenset([_wrap(sum(v * v for v in vals), dtype)]))


def _floor_log_sum_exp_distances(distances) -> int:
    """floor(log(sum(exp(-d)))) for integers d >= 0 (one of them 0), decided exactly with mpmath:
    the precision doubles until the log is provably on one side of every integer. It ends because
    the sum is never exactly e**k for k >= 1 (e is transcendental)."""
    bits = 128
    n = len(distances)
    while True:
        with mpmath.workprec(bits + 32):
            log = mpmath.log(mpmath.fsum(mpmath.exp(-d) for d in distances))
            k = int(mpmath.floor(log))
            # terms, sum and log each carry a relative error of about 2**-(bits + 32); n of them
            if min(log - k, k + 1 - log) > (n + 8) * mpmath.mpf(2) ** -bits:
                return k
        bits *= 2
        assert bits < 1 << 20, "the oracle could not decide an integer log-sum-exp"


def int_lse_candidates(vals) -> set:
    """The truncated LSE value of the Python ints `vals` (not range-checked), as a one-element set.

    float64 (math.fsum of the exp terms) decides it where its log is farther than 1e-9 from every
    integer k >= 1; next to one, mpmath decides it exactly (_floor_log_sum_exp_distances)."""
    n = len(vals)
    m = max(vals)
    if n == 1:
        return {m}
    f = math.log(math.fsum(math.exp(v - m) for v in vals))  # v - m: exact Python int <= 0
    nearest = round(f)
    # with two or more terms the exact log is strictly positive even where float64 rounds it to 0
    # (the sum is 1 + exp(-d) + ... > 1), so a log below 1/2 has floor 0
    whole = math.floor(f) if nearest < 1 or abs(f - nearest) > 1e-9 else \
        _floor_log_sum_exp_distances([m - v for v in vals])
    # truncation toward zero: m + floor(log) from zero up; below zero the (non-integer) log rounds up
    return {m + whole if m + whole >= 0 else m + whole + 1}


def int_lse_cell(vals, dtype):
    if not vals:
        raise ExpectedError(ValueError, "integer ReduceLogSumExp of an empty set")
    cand = int_lse_candidates(vals)
    lo, hi = int_range(dtype)
    ok = {c for c in cand if lo <= c <= hi}
    if not ok:
        raise ExpectedError(ValueError, f"integer ReduceLogSumExp {sorted(cand)} does not fit {dtype}")
    return IntCell(frozenset(ok)), len(ok) != len(cand)


# ---- ReduceL2 and ReduceLogSum ----------------------------------------------------------------

_ROOT_BITS = 200  # mpmath precision of the oracle's square roots and logs: far below any tolerance
_PROD_BITS = 256  # mpmath precision of the oracle's float products (float_prod_cell)


def _mp_fraction(x) -> Fraction:
    """An mpmath value as the exact Fraction of its binary value."""
    x = mpmath.mpf(x)
    mantissa, exponent = x.man_exp  # (of |x|)
    return (-1 if x < 0 else 1) * Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


def _sqrt_fraction(q: Fraction) -> Fraction:
    with mpmath.workprec(_ROOT_BITS):
        return _mp_fraction(mpmath.sqrt(mpmath.mpf(q.numerator) / q.denominator))


def _ln_fraction(q: Fraction) -> Fraction:
    with mpmath.workprec(_ROOT_BITS):
        return _mp_fraction(mpmath.log(mpmath.mpf(q.numerator) / q.denominator))


def float_prod_cell(vals, dtype) -> FloatCell:
    """The exact product: NaN if any NaN or 0 x inf; within n + 1 float64 units (relative) and 1 ulp
    of the output of it, with the exact sign, -0.0 included; beyond the dtype's range, inf."""
    if any(math.isnan(v) for v in vals) or (any(math.isinf(v) for v in vals) and any(v == 0 for v in vals)):
        return FloatCell("nan")
    sign = -1 if sum(math.copysign(1.0, v) < 0 for v in vals) % 2 else 1
    if any(math.isinf(v) for v in vals):
        return FloatCell("inf", sign=sign)
    # The product in _PROD_BITS-bit arithmetic: exact up to four factors, and within n roundings of
    # 2**(1 - _PROD_BITS) beyond, far inside the tolerance (the exact product of a long row is an
    # integer of millions of bits: a 2**19-element row took minutes)
    with mpmath.workprec(_PROD_BITS):
        exact = _mp_fraction(mpmath.fprod(vals))
    tol = (ulp(exact, dtype) + abs(exact) * ((len(vals) + 1) * _U64 + len(vals) * Fraction(2) ** (1 - _PROD_BITS))
           + _TINY64)
    return FloatCell("num", exact=exact, tol=tol, rounded=math.copysign(abs(round_fraction(exact, dtype)), sign),
                     signed_zero=True)


def int_prod_cell(vals, dtype) -> IntCell:
    # the exact product's low bits: each step's product taken modulo 2**64, the widest dtype's (the
    # exact product of a long row is an integer of millions of bits: one row took 47 s)
    product = 1
    for v in vals:
        product = product * v % 2**64
    return IntCell(frozenset([_wrap(product, dtype)]))


def float_l1_cell(vals, dtype) -> FloatCell:
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    if any(math.isinf(v) for v in vals):
        return FloatCell("inf", sign=1)
    exact = exact_sum(vals, magnitudes=True)
    tol = ulp(exact, dtype) + gamma(len(vals) + 2) * exact + (len(vals) + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def int_l1_cell(vals, dtype) -> IntCell:
    return IntCell(frozenset([_wrap(sum(abs(v) for v in vals), dtype)]))


def float_l2_cell(vals, dtype) -> FloatCell:
    if any(math.isnan(v) for v in vals):
        return FloatCell("nan")
    if any(math.isinf(v) for v in vals):
        return FloatCell("inf", sign=1)
    squares = exact_sum(vals, squares=True)
    if squares == 0:
        return FloatCell("num", exact=Fraction(0), tol=Fraction(0), rounded=0.0)
    exact = _sqrt_fraction(squares)
    # the sum's relative error gamma(n + 2) (plus subnormal squares), halved by the root; the root
    # and, for float64, nothing else
    tol = ulp(exact, dtype) + exact * (gamma(len(vals) + 2) + 4 * _U64) + (len(vals) + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def float_log_sum_cell(vals, dtype) -> FloatCell:
    special = _special_sum_cell(vals)
    if special is not None:  # log(NaN) = log(-inf) = NaN, log(+inf) = +inf
        return special if special.kind == "nan" or special.sign > 0 else FloatCell("nan")
    if not vals:
        return FloatCell("inf", sign=-1)
    total = exact_sum(vals)
    sum_tol = gamma(len(vals) + 2) * exact_sum(vals, magnitudes=True) + (len(vals) + 2) * _TINY64
    if total == 0 and all(v == 0 for v in vals):
        return FloatCell("inf", sign=-1)
    if abs(total) <= 2 * sum_tol:  # which side of 0 a float64 sum lands on is not decided
        return FloatCell("any")
    if total < 0:
        return FloatCell("nan")
    exact = _ln_fraction(total)
    relative = sum_tol / total
    tol = ulp(exact, dtype) + 2 * relative + 4 * ulp(exact, np.float64)
    return _num_cell(exact, tol, dtype)


def int_l2_cell(vals, dtype) -> IntCell:
    root = math.isqrt(sum(v * v for v in vals))
    if root > int_range(dtype)[1]:
        raise ExpectedError(ValueError, f"integer ReduceL2 {root} does not fit {dtype}")
    return IntCell(frozenset([root]))


def float_mean_square_cell(vals, dtype) -> FloatCell:
    """The mean of the squares (tests/test_registry.py's operator made of a registry record only)."""
    n = len(vals)
    if any(math.isnan(v) for v in vals) or n == 0:
        return FloatCell("nan")
    if any(math.isinf(v) for v in vals):
        return FloatCell("inf", sign=1)
    exact = exact_sum(vals, squares=True) / n
    tol = ulp(exact, dtype) + gamma(n + 2) * exact + (n + 2) * _TINY64
    return _num_cell(exact, tol, dtype)


def int_mean_square_cell(vals, dtype) -> IntCell:
    if not vals:
        raise ExpectedError(ValueError, "integer mean of squares of an empty set")
    mean = sum(v * v for v in vals) // len(vals)  # (not negative: the floor is the truncation)
    if mean > int_range(dtype)[1]:
        raise ExpectedError(ValueError, f"integer mean of squares {mean} does not fit {dtype}")
    return IntCell(frozenset([mean]))


def floor_ln(s: int) -> int:
    """floor(ln s) of an integer s >= 1, decided with mpmath at a precision doubled until the log is
    provably on one side of an integer (ln s is an integer only for s = 1)."""
    if s == 1:
        return 0
    bits = 128
    while True:
        with mpmath.workprec(bits):
            log = mpmath.log(s)
            k = int(mpmath.floor(log))
            if min(log - k, k + 1 - log) > mpmath.mpf(2) ** (16 - bits):
                return k
        bits *= 2
        assert bits < 1 << 20, "the oracle could not decide an integer log"


def int_log_sum_cell(vals, dtype) -> IntCell:
    if not vals:
        raise ExpectedError(ValueError, "integer ReduceLogSum of an empty set")
    total = sum(vals)
    if total <= 0:
        raise ExpectedError(ValueError, f"integer ReduceLogSum of the sum {total} <= 0")
    return IntCell(frozenset([floor_ln(total)]))


# ---- driver ----------------------------------------------------------------------------------


def _noop_log_cell(v, dtype):
    """ln v elementwise, computed in float64 and rounded once (ReduceLogSum's noop)."""
    if math.isnan(v) or v < 0:
        return FloatCell("nan")
    if v == 0:
        return FloatCell("inf", sign=-1)
    if math.isinf(v):
        return FloatCell("inf", sign=1)
    exact = _ln_fraction(Fraction(v))
    return _num_cell(exact, ulp(exact, dtype) + ulp(exact, np.float64), dtype)


def _noop_int_cell(op, v, dtype):
    if op == "reduce_sum_square":
        return IntCell(frozenset([_wrap(v * v, dtype)]))
    if op == "reduce_l1":
        return IntCell(frozenset([_wrap(abs(v), dtype)]))
    if op == "reduce_l2":
        if abs(v) > int_range(dtype)[1]:
            raise ExpectedError(ValueError, f"|{v}| does not fit {dtype}")
        return IntCell(frozenset([abs(v)]))
    if op == "reduce_log_sum":
        if v <= 0:
            raise ExpectedError(ValueError, f"integer log of {v} <= 0")
        return IntCell(frozenset([floor_ln(v)]))
    return IntCell(frozenset([v]))


def _noop_cells(op, x, dtype):
    cells = []
    if is_float_dtype(dtype):
        for v in _float_values(x).ravel().tolist():
            if op in ("reduce_l1", "reduce_l2"):
                v = abs(v)
            if op == "reduce_log_sum":
                cells.append(_noop_log_cell(v, dtype))
            elif math.isnan(v):
                cells.append(FloatCell("nan"))
            elif math.isinf(v):
                sign = 1 if (op == "reduce_sum_square" or v > 0) else -1
                cells.append(FloatCell("inf", sign=sign))
            else:
                e = Fraction(v) ** 2 if op == "reduce_sum_square" else Fraction(v)
                cells.append(FloatCell("num", exact=e, tol=Fraction(0), rounded=round_fraction(e, dtype)))
    else:
        cells = [_noop_int_cell(op, v, dtype) for v in x.ravel().tolist()]
    return cells


# The exact result of each operator for one output's elements (a row), by operator: float data
# (Python floats) and integer data (Python ints). The integer log-sum-exp is int_lse_cell, which
# may leave a truncation undecided (expected).
FLOAT_CELLS = {"reduce_mean": float_mean_cell, "reduce_sum_square": float_sum_square_cell,
               "reduce_log_sum_exp": float_lse_cell, "reduce_sum": float_sum_cell,
               "reduce_max": lambda r, d: float_extreme_cell(r, d, False),
               "reduce_min": lambda r, d: float_extreme_cell(r, d, True),
               "reduce_prod": float_prod_cell, "reduce_l1": float_l1_cell, "reduce_l2": float_l2_cell,
               "reduce_log_sum": float_log_sum_cell, "reduce_mean_square": float_mean_square_cell}
INT_CELLS = {"reduce_mean": int_mean_cell, "reduce_sum_square": int_sum_square_cell, "reduce_sum": int_sum_cell,
             "reduce_max": lambda r, d: int_extreme_cell(r, d, False),
             "reduce_min": lambda r, d: int_extreme_cell(r, d, True),
             "reduce_prod": int_prod_cell, "reduce_l1": int_l1_cell, "reduce_l2": int_l2_cell,
             "reduce_log_sum": int_log_sum_cell, "reduce_log_sum_exp": int_lse_cell,
             "reduce_mean_square": int_mean_square_cell}
OP_NAMES = tuple(FLOAT_CELLS)


def expected(op: str, x, axes=None, keepdims=1, noop_with_empty_axes=0) -> Expected:
    """The contract's result for valid arguments; raises ExpectedError when the call must raise."""
    assert op in OP_NAMES, op
    x = np.asarray(x)
    dtype = native(x.dtype)
    assert dtype in ALL_DTYPES or (dtype in NARROW_INT_DTYPES and op in ("reduce_max", "reduce_min")), dtype
    red = normalize_axes(axes, x.ndim, noop_with_empty_axes)
    if red is None:
        return Expected(op, dtype, x.shape, _noop_cells(op, x, dtype))

    kept = [a for a in range(x.ndim) if a not in red]
    kshape = [x.shape[a] for a in kept]
    n = math.prod(x.shape[a] for a in red)
    k = math.prod(kshape)
    out_shape = tuple(1 if a in red else x.shape[a] for a in range(x.ndim)) if int(keepdims) else tuple(kshape)
    moved = np.transpose(x, kept + list(red)).reshape(k, n)
    res = Expected(op, dtype, out_shape)
    if is_float_dtype(dtype):
        rows = _float_values(moved).tolist()
        fn = FLOAT_CELLS[op]
        res.cells = [fn(r, dtype) for r in rows]
    else:
        rows = moved.tolist()  # Python ints
        fn = INT_CELLS[op]
        if fn is not int_lse_cell:
            res.cells = [fn(r, dtype) for r in rows]
        else:  # log-sum-exp: float64 may leave a truncation undecided
            undecided = False
            for r in rows:
                cell, und = int_lse_cell(r, dtype)
                res.cells.append(cell)
                undecided |= und
            if undecided:
                res.error_ok = ValueError
    # an empty kept set (k == 0) computes nothing and never raises (docs/SEMANTICS.md: "empty kept set")
    return res


def mismatches(got, exp: Expected, limit: int = 8) -> list[str]:
    """Human-readable list of the differences between `got` and the expected result."""
    problems = []
    if type(got) is not np.ndarray:
        problems.append(f"type {type(got).__name__}, expected numpy.ndarray")
        return problems
    if got.dtype != exp.dtype or not got.dtype.isnative:
        problems.append(f"dtype {got.dtype.str} ({got.dtype}), expected native {exp.dtype}")
        return problems
    if got.shape != exp.shape:
        problems.append(f"shape {got.shape}, expected {exp.shape}")
        return problems
    if is_float_dtype(exp.dtype):
        vals = got.astype(np.float64).ravel().tolist()
    else:
        vals = got.ravel().tolist()
    bad = 0
    for i, (v, c) in enumerate(zip(vals, exp.cells)):
        if not c.accepts(v, exp.dtype):
            bad += 1
            if len(problems) < limit:
                idx = np.unravel_index(i, exp.shape) if exp.shape else ()
                problems.append(f"at {tuple(int(j) for j in idx)}: got {v!r}, expected {c.describe()}")
    if bad > limit:
        problems.append(f"... {bad} mismatching elements in total of {len(vals)}")
    return problems


def assert_matches(got, exp: Expected, context: str = "") -> None:
    problems = mismatches(got, exp)
    assert not problems, f"{exp.op} {context}\n" + "\n".join(problems)


# ----------------------------------------------------------------------------------------------
# vectorised comparison for large arrays (expected values given in float64)
# ----------------------------------------------------------------------------------------------


def ulp_array(e64: np.ndarray, dtype) -> np.ndarray:
    """Elementwise spacing of `dtype` in the binade of each finite float64 value of e64."""
    p, emin, _ = float_format(dtype)
    a = np.abs(e64)
    _, ex = np.frexp(a)  # a = m * 2**ex, m in [0.5, 1)
    e = np.where(a == 0, emin, np.maximum(ex - 1, emin))
    return np.ldexp(1.0, (e - p + 1).astype(np.int64))


def assert_float_close(got: np.ndarray, e64: np.ndarray, dtype, *, ulps: float = 1.0,
                       abs_tol=0.0, context: str = "") -> None:
    """got (of `dtype`) is within `ulps` ulps of dtype plus abs_tol of the float64 values e64.

    NaN must match NaN, infinities must match exactly; a finite e64 whose magnitude is (within the
    tolerance) beyond the dtype's range must give the infinity of its sign.
    """
    assert type(got) is np.ndarray
    assert got.dtype == native(dtype) and got.dtype.isnative, (got.dtype, dtype)
    assert got.shape == e64.shape, (got.shape, e64.shape)
    g = got.astype(np.float64)
    e = np.asarray(e64, dtype=np.float64)
    tol = ulps * ulp_array(np.where(np.isfinite(e), e, 0.0), dtype) + abs_tol
    try:
        thr = float(overflow_threshold(dtype))
    except OverflowError:  # float64: the threshold itself is beyond float64, nothing finite reaches it
        thr = math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        ok_nan = np.isnan(g) & np.isnan(e)
        ok_inf = np.isinf(e) & (g == e)
        fin = np.isfinite(e)
        ok_num = fin & np.isfinite(g) & (np.abs(g - e) <= tol * (1 + 1e-12))
        ok_ovf = fin & np.isinf(g) & (np.sign(g) == np.sign(e)) & (np.abs(e) + tol >= thr)
    ok = ok_nan | ok_inf | ok_num | ok_ovf
    if not ok.all():
        bad = np.argwhere(~ok)[:8]
        lines = [f"at {tuple(int(i) for i in b)}: got {g[tuple(b)]!r}, expected {e[tuple(b)]!r} +- {tol[tuple(b)]!r}"
                 for b in bad]
        raise AssertionError(f"{context}: {int((~ok).sum())} of {ok.size} elements differ\n" + "\n".join(lines))
