"""Reliability issue, items 6 and 7: the issue's list of hard cases, each within 1 ulp of the exact
result, and determinism (integers independent of the thread count, floats bit-identical run to run).

Every expected value is computed here or in tests/oracle.py with exact arithmetic (Python ints,
``fractions.Fraction``, limb sums of exactly scaled floats, mpmath for logarithms), never from
numred's own output. The huge zero-stride inputs (item 3) and peak memory (item 4) are in
test_reliability_memory.py, the malformed-call fuzzing (item 8) in test_reliability_fuzz.py.

Item 6 complements tests/test_parallel.py, which checks int32/int64 thread independence on 2-D
C-contiguous inputs and float32/float16/bfloat16 determinism for two calls: here all four integer
dtypes (uint32 and uint64 included) on a 3-D array and a transposed view with more axes choices,
and all four float dtypes (float64 included), C-contiguous and transposed, five calls per thread
count.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numred
from numred._registry import OPS
import oracle
from threads import needs_two_threads, with_threads
from oracle import BFLOAT16

try:  # mpmath comes with sympy (an onnxruntime dependency) but is not a declared test dependency
    import mpmath
except ImportError:  # pragma: no cover
    mpmath = None

# every operator but ReduceProd, whose products this module tests on their own
OP_NAMES = tuple(op.name for op in OPS if op.name != "reduce_prod")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BFLOAT16)
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))
U64 = 2.0**-53


# ---- exact helpers ---------------------------------------------------------------------------------


def ulp_distance(got, exact: Fraction, dtype) -> Fraction | float:
    """|got - exact| in units of the spacing of `dtype` in the binade of the exact value (the
    subnormal spacing near zero), as an exact Fraction; inf for a NaN or infinite `got`.

    ``got`` is a value of `dtype` (any scalar or 0-d array convertible to float64, which is exact
    for the four float formats). "Within 1 ulp" is ``ulp_distance(...) <= 1``; a correctly rounded
    result has distance <= 1/2.
    """
    g = float(np.asarray(got).astype(np.float64))
    if not math.isfinite(g):
        return math.inf
    return abs(Fraction(g) - Fraction(exact)) / oracle.ulp(Fraction(exact), dtype)


def mp_to_fraction(v) -> Fraction:
    """An mpmath mpf as the exact Fraction of its binary value."""
    man, exp = v.man_exp
    return Fraction(man) * Fraction(2) ** exp if exp >= 0 else Fraction(man, 2 ** (-exp))


def exact_log_plus(c: Fraction, n: int) -> Fraction:
    """c + ln(n), as a Fraction: to 200 bits with mpmath, else in float64 (math.log).

    Not exact (ln n is irrational). With mpmath the error, 2**-190 relative, is far below any ulp
    checked here. Without it the float64 value is off by about 2**-52 relative: 2**-28 of a float32
    ulp and 2**-44 of a bfloat16 ulp, which can only matter for a result sitting within that much of
    the 1-ulp limit. A transcendental value does not sit on a rounding tie either way."""
    if mpmath is None:
        return c + Fraction(math.log(n))
    with mpmath.workprec(200):
        return mp_to_fraction(mpmath.mpf(c.numerator) / c.denominator + mpmath.log(n))


def _limb_sum_nonneg(y: np.ndarray) -> int:
    """Exact sum of non-negative integer-valued float64s, through 32-bit limbs summed in int64."""
    total, shift = 0, 0
    limb = 2.0**32
    assert y.size < 2**31  # n limbs below 2**32 sum below 2**63
    while y.size:
        q = np.floor(y / limb)  # exact: division by a power of two, floor of a float
        r = y - q * limb  # exact: an integer in [0, 2**32)
        total += int(r.astype(np.int64).sum()) << shift
        shift += 32
        y = q[q != 0]
    return total


def exact_sum(values: np.ndarray) -> Fraction:
    """The exact sum of finite float64 values, as a Fraction.

    Each value is f * 2**e with f a 53-bit fraction, so v * 2**(53 - min e) is an integer; the
    scaling by a power of two is exact (checked: no overflow), and the integers are summed exactly
    in 32-bit limbs."""
    v = np.asarray(values, dtype=np.float64).ravel()
    assert np.isfinite(v).all()
    v = v[v != 0]
    if v.size == 0:
        return Fraction(0)
    _, e = np.frexp(v)
    if e.max() - e.min() > 900:  # too wide for one scaling: sum exponent bands separately
        band = (e - e.min()) // 900
        return sum((exact_sum(v[band == b]) for b in np.unique(band)), Fraction(0))
    scale = int(53 - e.min())
    y = np.ldexp(v, scale)
    assert np.isfinite(y).all() and (y == np.floor(y)).all(), "scaling was not exact"
    s = _limb_sum_nonneg(y[y > 0]) - _limb_sum_nonneg(-y[y < 0])
    return Fraction(s, 2**scale) if scale >= 0 else Fraction(s * 2 ** (-scale))


def test_exact_helpers_on_hand_values():
    assert exact_sum(np.array([0.1, 0.2, -0.3])) == Fraction(0.1) + Fraction(0.2) - Fraction(0.3)
    big = np.array([1e300, 1e-300, -1e300, 2.0**-1074])
    assert exact_sum(big) == Fraction(1e-300) + Fraction(2.0**-1074)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(2000) * np.exp2(rng.integers(-60, 60, 2000))
    assert exact_sum(x) == sum(map(Fraction, x.tolist()), Fraction(0))
    # ulp_distance: the correctly rounded value is within 1/2, its neighbour within 3/2
    q = Fraction(1, 3)
    for dt in FLOAT_DTYPES:
        r = oracle.round_fraction(q, dt)
        assert ulp_distance(r, q, dt) <= Fraction(1, 2)
        nxt = r + float(oracle.ulp(q, dt))  # the next value of dt up (exact in float64)
        assert Fraction(1, 2) < ulp_distance(nxt, q, dt) <= Fraction(3, 2)
    assert ulp_distance(np.float32(np.nan), q, np.float32) == math.inf


# ---- item 7: the issue's hard cases ----------------------------------------------------------------


def _normal_float32(n, seed):
    return np.random.default_rng(seed).standard_normal(n, dtype=np.float32)


def _mixed_magnitudes():
    # a shuffled mix of 1e4 and 1e-3 (float32): a float32 accumulator loses the small ones entirely
    x = np.concatenate([np.full(300_000, 1e4, np.float32), np.full(700_000, 1e-3, np.float32)])
    np.random.default_rng(17).shuffle(x)
    return x


def _case_mean_normal_1e7():
    x = _normal_float32(10_000_000, seed=2024)
    return x, exact_sum(x) / x.size


def _case_ssq_normal_1e7():
    x = _normal_float32(10_000_000, seed=2025)
    x64 = x.astype(np.float64)
    return x, exact_sum(x64 * x64)  # a float32 square is exact in float64 (48 significant bits)


def _case_mixed():
    x = _mixed_magnitudes()
    return x, (300_000 * Fraction(float(np.float32(1e4))) + 700_000 * Fraction(float(np.float32(1e-3)))) / x.size


def _case_f16_point1():
    x = np.full(100_000, 0.1, np.float16)
    return x, Fraction(float(np.float16(0.1)))  # the mean of a constant is that constant


def _case_f16_60000():
    return np.array([60000, 60000], np.float16), Fraction(60000)  # the float16 sum overflows


def _case_bf16_point1():
    x = np.full(100_000, 0.1, BFLOAT16)
    return x, Fraction(float(BFLOAT16.type(0.1)))


def _case_bf16_lse():
    x = np.full(10_000, 0.1, BFLOAT16)
    return x, exact_log_plus(Fraction(float(BFLOAT16.type(0.1))), 10_000)  # LSE of n x c = c + ln n


def _case_f32_lse_1000():
    return np.array([1000, 1000], np.float32), exact_log_plus(Fraction(1000), 2)


def _case_f64_huge_mean():
    return np.array([1.7e308, 1.7e308]), Fraction(1.7e308)


I32, I64, U64MAX = np.iinfo(np.int32).max, np.iinfo(np.int64).max, np.iinfo(np.uint64).max

# (issue wording, op, case builder -> (data, exact value))
HARD_CASES = {
    "float32 mean of 1e7 normal values": ("reduce_mean", _case_mean_normal_1e7),
    "float32 sum of squares of 1e7 normal values": ("reduce_sum_square", _case_ssq_normal_1e7),
    "float32 mean of a shuffled mix of 1e4 and 1e-3": ("reduce_mean", _case_mixed),
    "float16 mean of 100000 x 0.1": ("reduce_mean", _case_f16_point1),
    "float16 mean of [60000, 60000]": ("reduce_mean", _case_f16_60000),
    "bfloat16 mean of 100000 x 0.1": ("reduce_mean", _case_bf16_point1),
    "bfloat16 log-sum-exp of 10000 x 0.1": ("reduce_log_sum_exp", _case_bf16_lse),
    "float32 log-sum-exp of [1000, 1000]": ("reduce_log_sum_exp", _case_f32_lse_1000),
    "float64 mean of [1.7e308, 1.7e308]": ("reduce_mean", _case_f64_huge_mean),
    "int32 mean of [INT32_MAX] x 2": ("reduce_mean", lambda: (np.array([I32] * 2, np.int32), I32)),
    "int64 mean of [INT64_MAX] x 4": ("reduce_mean", lambda: (np.array([I64] * 4, np.int64), I64)),
    "uint64 mean of [UINT64_MAX] x 3": ("reduce_mean", lambda: (np.array([U64MAX] * 3, np.uint64), U64MAX)),
}


@pytest.mark.parametrize("case", list(HARD_CASES))
def test_issue_hard_cases_within_one_ulp_of_exact(case):
    """Issue item 7: float results within 1 ulp of the exact value, integer results exact."""
    opname, build = HARD_CASES[case]
    x, exact = build()
    before = x.copy()
    got = getattr(numred, opname)(x, None, keepdims=0)
    assert type(got) is np.ndarray and got.shape == () and got.dtype == x.dtype, (type(got), got.dtype)
    assert x.tobytes() == before.tobytes(), "the input was modified"
    if x.dtype.kind in "iu":
        assert int(got) == exact, f"{case}: got {int(got)}, exact {exact}"
        return
    d = ulp_distance(got, exact, x.dtype)
    rounded = oracle.round_fraction(exact, x.dtype)
    assert d <= 1, (f"{case}: got {float(got.astype(np.float64))!r}, exact {float(exact)!r} "
                    f"(correctly rounded {rounded!r}), {float(d):.3f} ulp away")


# ---- item 6: determinism ---------------------------------------------------------------------------


def _norm_axes(axes, ndim):
    return tuple(range(ndim)) if axes is None else tuple(sorted(a % ndim for a in axes))


def _int_data(dtype, shape, opname, seed):
    info = np.iinfo(dtype)
    # log-sum-exp keeps max + ln(n) inside the dtype (ln(655360) < 14): otherwise the call must raise
    hi = info.max - 20 if opname == "reduce_log_sum_exp" else info.max
    lo = info.min
    if opname == "reduce_l2":  # sums of squares whose roots fit: |x| * sqrt(655360) below 2**(bits / 2 - 1)
        hi = 2 ** (4 * dtype.itemsize - 12)
        lo = -hi if dtype.kind == "i" else 0
    if opname == "reduce_log_sum":  # positive sums
        lo = 1
    x = np.random.default_rng(seed).integers(lo, hi, shape, dtype=dtype, endpoint=True)
    x.flat[:3] = [lo, hi, hi - 1]
    return x


def _trunc_add(m: int, g: float) -> int:
    """trunc(m + g), exactly, for a Python int m and a float g >= 0."""
    return m + math.floor(g) if m + Fraction(g) >= 0 else m + math.ceil(g)


def int_expected(opname, x, axes):
    """Per output (keepdims=1 shape, C order): the set of accepted Python ints."""
    t = _norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    bits = x.dtype.itemsize * 8
    if opname == "reduce_mean":
        # exact sums: 32-bit halves summed in int64 (n < 2**31), recombined as Python ints
        w = x.astype(np.int64) if bits == 32 else x
        hi = (w >> 32).astype(np.int64)
        lo = (w & (2**32 - 1)).astype(np.int64)
        s_hi = np.sum(hi, axis=t, keepdims=True).ravel().tolist()
        s_lo = np.sum(lo, axis=t, keepdims=True).ravel().tolist()
        out = []
        for a, b in zip(s_hi, s_lo):
            s = a * 2**32 + b
            out.append({s // n if s >= 0 else -((-s) // n)})
        return out
    if opname in ("reduce_max", "reduce_min"):
        return [{v} for v in (np.max if opname == "reduce_max" else np.min)(x, axis=t, keepdims=True).ravel().tolist()]
    if opname in ("reduce_sum_square", "reduce_sum", "reduce_l1"):
        # modular arithmetic: squares and sums modulo 2**64 in uint64 are exact mod 2**64
        # (|INT64_MIN| wraps, as it must; unsigned data is its own |x|)
        w = np.abs(x.astype(np.int64)) if opname == "reduce_l1" and x.dtype.kind == "i" else x
        u = w.astype(np.int64).view(np.uint64) if x.dtype.kind == "i" else w.astype(np.uint64)
        with np.errstate(over="ignore"):
            terms = u * u if opname == "reduce_sum_square" else u
            s = np.sum(terms, axis=t, keepdims=True, dtype=np.uint64).ravel().tolist()
        out = []
        for v in s:
            v %= 2**bits
            if x.dtype.kind == "i" and v >= 2 ** (bits - 1):
                v -= 2**bits
            out.append({v})
        return out
    if opname in ("reduce_l2", "reduce_log_sum"):  # from Python ints, each output's elements in a row
        rows = np.moveaxis(x, t, range(x.ndim - len(t), x.ndim)).reshape(-1, n).tolist()
        if opname == "reduce_l2":
            return [{math.isqrt(sum(v * v for v in row))} for row in rows]
        logs = [math.log(sum(row)) for row in rows]  # (all positive) within 1e-15: both floors next to an integer
        return [{math.floor(f - 1e-9), math.floor(f + 1e-9)} for f in logs]
    # log-sum-exp: exact max m; d = m - x exactly as a uint64 distance; f = ln(sum exp(-d)) in float64
    m = np.max(x, axis=t, keepdims=True)
    wide = np.uint64 if x.dtype.kind == "u" else np.int64
    d = m.astype(wide).view(np.uint64) - x.astype(wide).view(np.uint64)  # exact: 0 <= m - x < 2**64
    f = np.log(np.sum(np.exp(-d.astype(np.float64)), axis=t, keepdims=True)).ravel().tolist()
    out = []
    for mm, ff in zip(m.ravel().tolist(), f):
        lo = max(ff - 1e-9, 1e-300)  # n >= 2: the exact log is > 0 even where float64 says 0
        out.append({_trunc_add(mm, lo), _trunc_add(mm, ff + 1e-9)})
    return out


def _assert_int_matches(got, x, opname, axes, ctx):
    t = _norm_axes(axes, x.ndim)
    shape = tuple(1 if a in t else n for a, n in enumerate(x.shape))
    assert type(got) is np.ndarray and got.dtype == x.dtype and got.shape == shape, (ctx, got.dtype, got.shape)
    exp = int_expected(opname, x, axes)
    bad = [(i, g, sorted(e)) for i, (g, e) in enumerate(zip(got.ravel().tolist(), exp)) if g not in e]
    assert not bad, f"{ctx}: {len(bad)} of {len(exp)} outputs differ; first (index, got, expected): {bad[:3]}"


INT_SHAPE = (128, 40, 128)  # 655360 elements: parallel path, reduced ranges cut into several chunks
INT_AXES = [[0], [2], [1, 2], [0, 2], None]


@needs_two_threads
@pytest.mark.slow
@pytest.mark.parametrize("opname", OP_NAMES)
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=[d.name for d in INT_DTYPES])
def test_integer_results_identical_for_one_and_two_threads(dtype, opname):
    base = _int_data(dtype, INT_SHAPE, opname, seed=dtype.itemsize * 10 + OP_NAMES.index(opname))
    func = getattr(numred, opname)
    views = {"C": base, "transposed(2,0,1)": base.transpose(2, 0, 1)}
    for name, x in views.items():
        for axes in INT_AXES:
            ctx = f"{opname} {dtype} {name} axes={axes}"
            one = with_threads(1, func, x, axes)
            two = with_threads(2, func, x, axes)
            assert one.dtype == two.dtype and one.shape == two.shape, ctx
            assert one.tobytes() == two.tobytes(), f"{ctx}: 1 thread {one.ravel()[:4]} vs 2 threads {two.ravel()[:4]}"
            _assert_int_matches(one, x, opname, axes, ctx)


def _float_data(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype)
    # float16/bfloat16: k/256 with |k| <= 64 (exact in both formats; sums of squares stay finite)
    return (rng.integers(-64, 65, shape).astype(np.float64) / 256).astype(dtype)


def _float_expected(opname, x, axes):
    """(float64 expected values, keepdims=1; absolute tolerance on top of 1 ulp of x.dtype).

    The float64 NumPy oracle is not exact for float32/float64 data; the tolerance is the bound of
    any float64 summation order, (2n + 64) u sum|x| (both sides), so it accepts the exact result."""
    t = _norm_axes(axes, x.ndim)
    n = math.prod(x.shape[a] for a in t)
    x64 = x.astype(np.float64)
    if opname in ("reduce_mean", "reduce_sum"):
        divisor = n if opname == "reduce_mean" else 1
        return (np.sum(x64, axis=t, keepdims=True) / divisor,
                (2 * n + 64) * U64 * np.sum(np.abs(x64), axis=t, keepdims=True) / divisor)
    if opname in ("reduce_max", "reduce_min"):  # exact
        return (np.max if opname == "reduce_max" else np.min)(x64, axis=t, keepdims=True), 0.0
    if opname == "reduce_l1":
        e = np.sum(np.abs(x64), axis=t, keepdims=True)
        return e, (2 * n + 64) * U64 * e
    if opname in ("reduce_sum_square", "reduce_l2"):
        sq = np.sum(x64 * x64, axis=t, keepdims=True)
        if opname == "reduce_l2":
            return np.sqrt(sq), (2 * n + 64) * U64 * np.sqrt(sq)
        return sq, (2 * n + 64) * U64 * sq * (1 if x.dtype != np.float64 else 2)
    if opname == "reduce_log_sum":  # of positive data (test_float_results_bit_identical_run_to_run)
        return np.log(np.sum(x64, axis=t, keepdims=True)), (2 * n + 64) * U64
    m = np.max(x64, axis=t, keepdims=True)
    e = m + np.log(np.sum(np.exp(x64 - m), axis=t, keepdims=True))
    return e, (2 * n + 128) * U64 + 4 * np.spacing(np.abs(e))


def _assert_close(got, e, tol, dtype, ctx):
    """Finite results within 1 ulp of `dtype` plus `tol` of the float64 expectation `e`."""
    assert type(got) is np.ndarray and got.dtype == dtype and got.shape == e.shape, (ctx, got.dtype, got.shape)
    g = got.astype(np.float64)
    limit = oracle.ulp_array(e, dtype) + tol
    ok = np.isfinite(g) & (np.abs(g - e) <= limit * (1 + 1e-12))
    if not ok.all():
        i = tuple(np.argwhere(~ok)[0])
        raise AssertionError(f"{ctx}: {int((~ok).sum())} of {ok.size} differ; first at {i}: "
                             f"got {g[i]!r}, expected {e[i]!r} +- {limit[i]!r}")


FLOAT_CASES = [((4, 300_000), [[1], None]), ((768, 512), [[0], [1], None])]


@needs_two_threads
@pytest.mark.slow
@pytest.mark.parametrize("opname", OP_NAMES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_float_results_bit_identical_run_to_run(dtype, opname):
    func = getattr(numred, opname)
    for shape, axes_list in FLOAT_CASES:
        base = _float_data(dtype, shape, seed=len(shape) + shape[0])
        if opname == "reduce_log_sum":  # positive sums: logs, not NaN
            base = np.abs(base)
        if opname == "reduce_l1" and dtype.itemsize == 2:  # sums of |x| within float16's range
            base = (base.astype(np.float64) / 8).astype(dtype)
        for name, x in (("C", base), ("transposed", base.T)):
            for axes in axes_list:
                ctx = f"{opname} {dtype} {name}{x.shape} axes={axes}"
                runs = {}
                for threads in (2, 1):
                    outs = [with_threads(threads, func, x, axes) for _ in range(5)]
                    first = outs[0].tobytes()
                    assert all(o.tobytes() == first for o in outs[1:]), \
                        f"{ctx}: {threads} threads, results differ between calls"
                    runs[threads] = outs[0]
                e, tol = _float_expected(opname, x, axes)
                _assert_close(runs[2], e, tol, dtype, ctx)
                # the contract allows thread counts to differ in the last bit only
                a64, b64 = runs[2].astype(np.float64), runs[1].astype(np.float64)
                spacing = oracle.ulp_array(np.where(np.isfinite(a64), a64, 0.0), dtype)
                assert ((a64 == b64) | (np.abs(a64 - b64) <= spacing)).all(), f"{ctx}: 1 vs 2 threads beyond 1 ulp"


# ---- float16 decoding ------------------------------------------------------------------------------

_EVERY_HALF_SCRIPT = """
import numpy as np, numred
from numred import kernels
halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
x = np.stack([halves, halves], axis=1)  # each row twice: the mean of a row is its value, exactly
means = numred.reduce_mean(x, np.array([1]), keepdims=0)
print(int(kernels.decode.CPU_CONVERTS_HALVES))
np.save({out!r}, means)
"""


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["host", "generic"])
def test_every_float16_bit_pattern_decodes_exactly(cpu, tmp_path):
    """All 65536 float16 patterns through the kernels' decoding: with F16C conversions where the
    CPU Numba compiles for has them ("host" here) and with the integer decoding where it may not
    (NUMBA_CPU_NAME=generic, the usual setting for portable caches). The mean of [h, h] is h
    exactly, for subnormals and infinities too; NaN stays NaN. The sign of a zero result is not
    part of the contract (SEMANTICS.md is silent), so zeros are compared by value."""
    import os
    import subprocess
    import sys

    out = tmp_path / "means.npy"
    env = dict(os.environ)
    if cpu == "generic":
        env["NUMBA_CPU_NAME"] = "generic"
    done = subprocess.run([sys.executable, "-c", _EVERY_HALF_SCRIPT.format(out=str(out))], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if cpu == "generic":
        assert done.stdout.strip() == "0", "the generic CPU must take the integer decoding"
    means = np.load(out)
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    nan = np.isnan(halves)
    assert np.isnan(means[nan]).all()
    nonzero = ~nan & (halves != 0)
    mismatched = np.nonzero(means[nonzero].view(np.uint16) != halves[nonzero].view(np.uint16))[0]
    assert mismatched.size == 0, [float(v) for v in halves[nonzero][mismatched[:5]]]
    assert (means[halves == 0] == 0).all()


_FLOAT64_SPLIT_SCRIPT = """
import numpy as np, numred
from numred import kernels
x = np.load({data!r})
views = (x, x[:, ::2], x[:, ::3], x[:, :150], x[:, :60])
results = [numred.reduce_mean(v, [1], keepdims=0) for v in views]
results += [numred.reduce_sum_square(v, [1], keepdims=0) for v in views]
print(int(kernels.split_sums.SPLIT_ON_FMA))
np.save({out!r}, np.concatenate(results))
"""


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["host", "generic"])
def test_float64_split_sums_are_nearly_exact_with_and_without_fma(cpu, tmp_path):
    """The float64 split passes do two of their additions as fused multiply-adds by an opaque 1.0
    where the CPU Numba compiles for has FMA (kernels.split_sums.SPLIT_ON_FMA, x86-64), and as plain
    additions elsewhere (NUMBA_CPU_NAME=generic here, as on CPUs without FMA or not x86). Both
    must give the nearly exact sums (oracle.nearly_exact_float64_interval). Rows of
    cancelling data, contiguous (one split piece, and short rows of two passes) and strided (every
    other and every third element)."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    half = rng.random((4, 1000)) * 10.0 ** rng.integers(-3, 9, size=(4, 1))
    x = rng.permuted(np.concatenate([half, -half * (1 + 2.0**-40)], axis=1), axis=1)  # sums far below sum |x|
    data, out = tmp_path / "x.npy", tmp_path / "sums.npy"
    np.save(data, x)
    env = dict(os.environ)
    if cpu == "generic":
        env["NUMBA_CPU_NAME"] = "generic"
    done = subprocess.run([sys.executable, "-c", _FLOAT64_SPLIT_SCRIPT.format(data=str(data), out=str(out))],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    if cpu == "generic":
        assert done.stdout.strip() == "0", "the generic CPU must take plain additions"
    got = iter(np.load(out).tolist())
    views = (x, x[:, ::2], x[:, ::3], x[:, :150], x[:, :60])
    for opname in ("reduce_mean", "reduce_sum_square"):
        for view in views:
            for row in view.tolist():
                lowest, highest = oracle.nearly_exact_float64_interval(row, opname)
                value = next(got)
                assert lowest <= value <= highest, (cpu, opname, view.shape, value, lowest, highest)


@pytest.mark.parametrize("dtype", [BFLOAT16, np.dtype(np.float16)], ids=str)
def test_float64_results_round_once_to_16_bit_floats(dtype):
    """The last step of every bfloat16 and float16 reduction: float64 -> dtype in one correct rounding
    (ties to even, overflow to inf), against exact rounding of the rational value. The values
    cover the whole range (subnormals and overflow included) and sit on, just above and just below
    ties at float64 resolution, where rounding through float32 first would go wrong. The kernels'
    own store (store_rounded) is called through a loop compiled here; results travel as the bits."""
    import numba

    from numred.kernels.store import store_rounded

    @numba.njit
    def store_all(values, result):
        for k in range(values.size):
            store_rounded(result, k, values[k])

    carrier = np.dtype(np.int16) if dtype == BFLOAT16 else np.dtype(np.uint16)

    def round_float64_to(values, dtype):
        result = np.empty(values.size, dtype=carrier)
        store_all(values, result)
        return result.view(dtype)

    rng = np.random.default_rng(7)
    smallest, largest = float(oracle.ulp(0, dtype)), float(oracle.max_finite(dtype))
    mags = np.exp2(rng.uniform(math.log2(smallest) - 2, math.log2(largest) + 1, 3000))
    # ties: a value of the dtype plus half its ulp, and the float64 neighbours on either side
    on_grid = np.array([float(oracle.round_fraction(Fraction(v), dtype)) for v in mags[:1000].tolist()])
    on_grid = on_grid[np.isfinite(on_grid)]
    ties = on_grid + np.array([float(oracle.ulp(Fraction(v), dtype)) / 2 for v in on_grid.tolist()])
    # and the edges: the overflow threshold (a tie with inf), half the smallest subnormal (a tie with 0)
    edges = [float(oracle.overflow_threshold(dtype)), smallest / 2, 3 * smallest / 2, smallest, largest]
    ties = np.concatenate([ties[np.isfinite(ties)], edges])
    values = np.concatenate([mags, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), [0.0]])
    values = np.concatenate([values, -values])
    rounded = round_float64_to(values, dtype)
    assert rounded.dtype == dtype and rounded.shape == values.shape
    got = rounded.astype(np.float64).tolist()
    for v, g in zip(values.tolist(), got):
        assert g == oracle.round_fraction(Fraction(v), dtype), (v, g)
    specials = round_float64_to(np.array([np.inf, -np.inf, np.nan, -0.0]), dtype).astype(np.float64)
    assert specials[0] == np.inf and specials[1] == -np.inf and np.isnan(specials[2])
    assert specials[3] == 0 and math.copysign(1, specials[3]) == -1
