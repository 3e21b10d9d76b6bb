"""float64 and int64 NumPy oracles for large inputs (the parallel paths: KR, RK, R, KRK, RKR patterns),
whose exactness is argued next to each one (never numred's code), and the data they are exact for.
Used by tests/test_layouts.py, tests/test_thread_counts.py and tests/test_repeated_calls.py; checked
in tests/test_oracle.py.

Data families (``make``):
* "grid" floats: k / 8 (float32, float16) or k / 4 (bfloat16) for small integers k. Every value,
  square and partial sum of at most 2**53 / 8 is an exact float64, so np.sum in float64 gives the exact
  sum in any order; the mean is that exact sum divided by n, rounded once in float64 (then compared
  within 1 ulp of the output dtype).
* "normal" float32: standard normal values; the float64 oracle is accurate to ~1e-15 relative to
  sum|x|, far below a float32 ulp of the result; the accepted error adds the bound of any float64
  summation order, n * 2**-53 * sum|x|.
* integers: int32 values of any size (sums of 3e6 of them stay below 2**63 in int64) and int64 values
  below 2**40 in magnitude (sums of 2.1e7 stay below 2**63): int64 sums are exact. Squares are summed
  modulo 2**64 in uint64 (wrapping is well-defined there) and reduced modulo 2**bits.
"""
from __future__ import annotations

import math

import numpy as np

from oracle import BFLOAT16


U = 2.0**-53


def make(kind, shape, seed):
    rng = np.random.default_rng(seed)
    if kind == "float32-grid":
        return (rng.integers(-1000, 1001, shape, dtype=np.int32).astype(np.float32) / np.float32(8))
    if kind == "float64-grid":
        return rng.integers(-1000, 1001, shape, dtype=np.int32).astype(np.float64) / 8
    if kind == "float32-normal":
        return rng.standard_normal(shape, dtype=np.float32)
    if kind == "float16-grid":
        return (rng.integers(-64, 65, shape, dtype=np.int32).astype(np.float32) / 8).astype(np.float16)
    if kind == "bfloat16-grid":
        return (rng.integers(-128, 128, shape, dtype=np.int32).astype(np.float32) / 4).astype(BFLOAT16)
    if kind == "int32":
        return rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, shape, dtype=np.int32, endpoint=True)
    if kind == "int32-small":
        return rng.integers(-20, 6, shape, dtype=np.int32)
    if kind == "int64":
        return rng.integers(-(2**40), 2**40, shape, dtype=np.int64)
    raise AssertionError(kind)


def carrier_view(x):
    """x as the kernels read it (numred._reduction.CARRIERS), bfloat16 registered first as numred's first
    call of one would (a test run alone may have made no such call yet)."""
    from numred._reduction import CARRIERS, add_bfloat16

    add_bfloat16()
    return x.view(CARRIERS[x.dtype])


def norm_axes(axes, ndim):
    return tuple(range(ndim)) if axes is None else tuple(a % ndim for a in axes)


def float_expected(opname, x, axes, exact_sums: bool, x64=None, memo=None):
    """(expected float64 values with keepdims=1, extra absolute tolerance); ``x64``: x as float64, if
    the caller has it already (a test calling this for every op converts x once); ``memo``: a dict
    the caller keeps for one x across operators and axes, holding |x|, x * x and their sums once."""
    t = norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    x64 = x.astype(np.float64) if x64 is None else x64
    memo = {} if memo is None else memo

    def once(key, compute):
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    def total(of):  # the float64 sum over t of x, |x| or x * x (of: "x", "abs", "squares")
        terms = {"x": lambda: x64, "abs": lambda: np.abs(x64), "squares": lambda: x64 * x64}[of]
        return once((of, t), lambda: np.sum(once(of, terms), axis=t, keepdims=True))

    if opname in ("reduce_mean", "reduce_sum"):
        divisor = n if opname == "reduce_mean" else 1
        e = total("x") / divisor
        s_abs = total("abs") / divisor
        tol = 0.0 if exact_sums else (2 * n + 64) * U * s_abs
        return e, tol
    if opname == "reduce_sum_square":
        e = total("squares")
        tol = 0.0 if exact_sums else (2 * n + 64) * U * e
        return e, tol
    if opname in ("reduce_max", "reduce_min"):  # exact
        return (np.max if opname == "reduce_max" else np.min)(x64, axis=t, keepdims=True), 0.0
    if opname == "reduce_l1":
        e = total("abs")
        return e, 0.0 if exact_sums else (2 * n + 64) * U * e
    if opname == "reduce_l2":
        e = np.sqrt(total("squares"))
        return e, 0.0 if exact_sums else (2 * n + 64) * U * e
    if opname == "reduce_log_sum":  # NaN where the sum is negative
        s = total("x")
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.log(s)
            tol = 0.0 if exact_sums else (2 * n + 64) * U * total("abs") / np.abs(s)
        return e, np.where(np.isfinite(tol), tol, 0.0)
    m = np.max(x64, axis=t, keepdims=True)
    s = np.sum(np.exp(x64 - m), axis=t, keepdims=True)
    e = m + np.log(s)
    # oracle and implementation: exp/log ulps and summation error of n terms, in the log part
    tol = (2 * n + 128) * U + 4 * np.spacing(np.abs(e))
    return e, tol


def _sums_of_products(p, q, t):
    """Sums over the axes ``t`` of p * q (int64 arrays whose every partial sum stays below 2**63, so
    exact), with keepdims: einsum multiplies and adds in one pass, without an input-sized product
    (whose fresh pages took most of this oracle's time)."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:p.ndim]
    kept = "".join(letter for axis, letter in enumerate(letters) if axis not in t)
    return np.expand_dims(np.einsum(f"{letters},{letters}->{kept}", p, q), t)


def magnitude_pieces(wide):
    """|x| of int64 values below 2**42 in magnitude as three arrays of 14-bit pieces a, b, c, with
    |x| = a 2**28 + b 2**14 + c."""
    magnitude = np.abs(wide)
    assert magnitude.max(initial=0) < 2**42
    middle = np.bitwise_and(magnitude >> 14, 2**14 - 1)
    return [magnitude >> 28, middle, np.bitwise_and(magnitude, 2**14 - 1, out=magnitude)]


def int_expected(opname, x, axes, wide=None, pieces=None):
    """(lo, hi) int arrays (keepdims=1): the accepted results; equal unless float64 cannot decide. A
    value of hi above the dtype's maximum means the call must raise ValueError (a result that does
    not fit, a log of a sum <= 0). ``wide``: x as int64, and ``pieces``: magnitude_pieces(wide), if
    the caller has them already (a test calling this for every op and axes makes them once)."""
    wide = x.astype(np.int64) if wide is None else wide
    t = norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    dtype = x.dtype
    bits = dtype.itemsize * 8
    if opname == "reduce_mean":
        s = np.sum(wide, axis=t, keepdims=True)  # exact, see the module docstring
        q = np.where(s >= 0, s // n, -((-s) // n))  # truncation toward zero
        return q, q
    if opname in ("reduce_max", "reduce_min"):
        e = (np.max if opname == "reduce_max" else np.min)(x, axis=t, keepdims=True).astype(np.int64)
        return e, e
    if opname == "reduce_l1":  # modulo 2**bits: the low bits of NumPy's (wrapping) uint64 sum of |x|
        magnitude = np.abs(wide).view(np.uint64)  # (|x| < 2**63 in these cases)
        s = np.sum(magnitude, axis=t, keepdims=True, dtype=np.uint64)
        s = s.astype(dtype).astype(np.int64) if bits < 64 else s.view(np.int64)
        return s, s
    if opname == "reduce_l2":  # isqrt of the exact sum of squares, |x| in three pieces of 14 bits
        pieces = magnitude_pieces(wide) if pieces is None else pieces
        assert n < 2**32  # products of pieces < 2**28: each sum below, of weight 2**(14 k), < 2**62
        digit_sums = [0] * 5
        for i in range(3):
            for j in range(i, 3):
                digit_sums[4 - i - j] = digit_sums[4 - i - j] + (1 if i == j else 2) * _sums_of_products(
                    pieces[i], pieces[j], t)
        # carried from the lowest 14-bit digit up in int64, so that only two arrays become Python ints
        low, carry = 0, 0
        for k in range(4):
            digits = digit_sums[k] + carry
            low, carry = low + ((digits & (2**14 - 1)) << 14 * k), digits >> 14
        total = ((digit_sums[4] + carry).astype(object) << 56) + low.astype(object)
        roots = np.vectorize(math.isqrt, otypes=[object])(total)
        return roots, roots
    if opname == "reduce_log_sum":  # floor(ln S) of the exact sum; an output with S <= 0 must raise
        s = np.sum(wide, axis=t, keepdims=True).astype(object)  # exact: |S| < 2**63 here
        if (s <= 0).any():
            raise_marker = np.full(s.shape, int(np.iinfo(dtype).max) + 1, dtype=object)
            return raise_marker, raise_marker
        logs = np.log(s.astype(np.float64))  # within 1e-15 of ln S: both floors next to an integer
        return np.floor(logs - 1e-9).astype(np.int64), np.floor(logs + 1e-9).astype(np.int64)
    if opname == "reduce_sum":  # modulo 2**bits: the low bits of NumPy's (wrapping) uint64 sum
        with np.errstate(over="ignore"):
            s = np.sum(wide.view(np.uint64), axis=t, keepdims=True, dtype=np.uint64)
        s = s.astype(dtype).astype(np.int64) if bits < 64 else s.view(np.int64)  # (as the test casts results)
        return s, s
    if opname == "reduce_sum_square":
        u = wide.view(np.uint64)
        with np.errstate(over="ignore"):
            s = np.sum(u * u, axis=t, keepdims=True, dtype=np.uint64)  # modulo 2**64
        s = s % np.uint64(2**bits) if bits < 64 else s
        s = s.astype(np.uint64).view(np.int64) if bits == 64 else s.astype(np.int64)
        if bits < 64:
            s = np.where(s >= 2 ** (bits - 1), s - 2**bits, s)
        return s, s
    m = np.max(x, axis=t, keepdims=True).astype(np.int64)
    d = np.subtract(wide, m, dtype=np.float64)  # exact: |d| < 2**42
    # exp(-800) is 0 in float64, as is exp of anything below it; NumPy's exp of values far below
    # took ten times as long
    np.exp(np.maximum(d, -800.0, out=d), out=d)
    f = np.log(np.sum(d, axis=t, keepdims=True))
    # trunc(m + f) with f >= 0, f known to ~1e-13: m + floor(f) if m + f >= 0, else m + ceil(f)
    delta = 1e-9
    lo_f = np.maximum(f - delta, 0.0)
    hi_f = f + delta

    def trunc(ff):
        up = m + np.floor(ff).astype(np.int64)
        down = m + np.ceil(ff).astype(np.int64)
        return np.where(m + ff >= 0, up, down)

    return trunc(lo_f), trunc(hi_f)
