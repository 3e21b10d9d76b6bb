"""Results and the thread count (docs/SEMANTICS.md, "Values": results do not depend on the number of
threads): every result, integer or float, has the same bits for one thread and for two, for
every count from 1 to 8 and for a serial launch (test_float_bits_do_not_depend_on_the_thread_count),
and the plans behind that are fixed by the shape where chunks would round differently (float64
tiles and products).

Every expected value is computed here, in tests/oracle.py or in tests/numpy_oracle.py with exact
arithmetic or a float64 oracle within a bound argued next to it, never from numred's own output. The
tests of one layout at 1 and 2 threads are with their layouts (tests/test_layouts.py), the GIL,
Python threads and processes in tests/test_threads_and_processes.py.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numred
import oracle
from numpy_oracle import carrier_view, make
from numred._registry import OPS
from oracle import BFLOAT16
from test_threads_and_processes import run_python
from threads import needs_two_threads, with_threads

# every operator but ReduceProd, whose products are tested below and in tests/test_products.py
OP_NAMES = tuple(op.name for op in OPS if op.name != "reduce_prod")
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BFLOAT16)
INT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.uint32), np.dtype(np.uint64))
U64 = 2.0**-53


# ---- integers: identical for any thread count ----------------------------------------------------


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


@pytest.mark.slow
@needs_two_threads
@pytest.mark.parametrize("kind", ["int32", "int64", "int32-small"])
@pytest.mark.parametrize("opname", OP_NAMES)
def test_integer_results_do_not_depend_on_thread_count(opname, kind):
    x = make(kind, (4, 1_000_000), seed=21)
    func = getattr(numred, opname)
    for axes in ([1], None, [0]):
        try:
            one = with_threads(1, func, x, axes)
        except ValueError:  # integer LSE overflow: then it must raise for 2 threads too
            with pytest.raises(ValueError):
                with_threads(2, func, x, axes)
            continue
        two = with_threads(2, func, x, axes)
        assert one.dtype == two.dtype and one.tobytes() == two.tobytes(), (opname, kind, axes)


# ---- floats: deterministic, the same bits across thread counts ----------------------------------


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
                # the contract (docs/SEMANTICS.md): the same bits for any thread count
                assert runs[2].tobytes() == runs[1].tobytes(), f"{ctx}: 1 and 2 threads give other bits"


@pytest.mark.slow
@needs_two_threads
@pytest.mark.parametrize("kind", ["float32-normal", "float16-grid", "bfloat16-grid"])
@pytest.mark.parametrize("opname", OP_NAMES)
def test_float_results_deterministic_and_the_same_bits_across_thread_counts(opname, kind):
    x = make(kind, (3, 2_000_000), seed=22)
    if opname == "reduce_log_sum":  # positive sums: logs, not NaN
        x = np.abs(x)
    func = getattr(numred, opname)
    for axes in ([1], None):
        a = with_threads(2, func, x, axes)
        b = with_threads(2, func, x, axes)
        assert a.tobytes() == b.tobytes(), "not deterministic for a fixed thread count"
        c = with_threads(1, func, x, axes)
        assert c.tobytes() == a.tobytes(), (opname, kind, axes, a.ravel()[:4], c.ravel()[:4])


# ---- plans fixed by the shape: the same bits for any thread count --------------------------------


@pytest.mark.slow
@needs_two_threads
@pytest.mark.parametrize("shape, axes", [((1000, 1000), [0]), ((700, 3000), [0]), ((3, 600, 900), [1])])
def test_float64_column_sums_do_not_depend_on_thread_count(shape, axes):
    # Wide float64 tiles are cut per thread but never chunked (_plan._layout's unchunked_tiles), so
    # each column is summed in the same order with any thread count: bit-identical results, also
    # where the sums cancel (chunked compensated sums would round differently there).
    rng = np.random.default_rng(24)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, size=shape)
    x[..., ::2] -= x[..., ::2].mean(axis=tuple(a for a in axes), keepdims=True)  # half of the columns cancel
    for opname in OP_NAMES:
        func = getattr(numred, opname)
        one = with_threads(1, func, x, axes)
        two = with_threads(2, func, x, axes)
        assert one.tobytes() == two.tobytes(), (opname, shape, axes)


@pytest.mark.slow
@pytest.mark.parametrize("shape, axes", [((1000, 1000), (0,)), ((700, 3000), (0,)), ((3, 600, 900), (1,)),
                                         ((64, 20000), (0,))])
def test_float64_tiles_are_never_chunked_for_any_thread_count(shape, axes):
    # The plan behind the test above, for thread counts this machine cannot run: float64 tiles are
    # cut per thread but never chunked, and never a whole row (whose wide rows round differently).
    from numred._plan import _layout

    x = np.zeros(shape)
    for threads in (1, 2, 3, 8, 32, 64):
        plan = _layout(x.shape, x.strides, x.itemsize, axes, threads, True)
        assert plan.nchunks == 1 and plan.tile < shape[-1], (threads, plan.tile, plan.nchunks)


@pytest.mark.slow
@needs_two_threads
def test_with_one_thread_no_plan_is_chunked_and_sums_stay_exact():
    # Chunks of the reduced range give threads tasks (few outputs, few wide tiles); with one thread
    # they only add partials to write and combine, and the plan has none (a column reduction of
    # 2048x16384 float32 took 0.61x the time without its 16 chunks). Every layout the precompile
    # step covers, on grid values whose float64 sums are exact in any order: the float32 sum is
    # that sum rounded once, and the max is exact, with one thread as with two.
    from numred._plan import make_plan
    from numred.tools.precompile import LAYOUTS

    chunked_with_two = 0
    for shape, axes, *view in LAYOUTS:
        x = make("float32-grid", shape, seed=len(shape))
        x = x[view[0]] if view else x
        reduced = tuple(range(x.ndim)) if axes is None else tuple(axes)
        one_thread, _ = with_threads(1, make_plan, carrier_view(x), reduced)
        assert one_thread.nchunks == 1, (shape, axes)
        two_threads, _ = with_threads(2, make_plan, carrier_view(x), reduced)
        chunked_with_two += two_threads.nchunks > 1
        exact = np.sum(x.astype(np.float64), axis=reduced, keepdims=True)
        assert with_threads(1, numred.reduce_sum, x, axes).tolist() == exact.astype(np.float32).tolist(), (shape, axes)
        assert with_threads(1, numred.reduce_max, x, axes).tolist() == np.max(x, axis=reduced, keepdims=True).tolist()
    assert chunked_with_two > 0  # (the layouts include plans chunked for two threads)


# Every float dtype and operator on layouts whose plans differ with the thread count where the plan
# may let them (chunked runs and tiles, tiles cut per thread, blocks grouped per thread): float64
# ReduceProd over all axes of 1500x1700 and of 3,000,000 elements differed between thread counts.
BITS_SCRIPT = """
import hashlib, numba, numpy as np, ml_dtypes, numred
from numred import _runtime
from numred._registry import OPS
rng = np.random.default_rng(61)
CASES = [((1500, 1700), None), ((3_000_000,), None), ((1000, 1000), [0]), ((1000, 1000), [1]),
         ((4, 20000, 60), [1]), ((16, 100000), [0]), ((4, 300000), [1]), ((300000, 4), [0]),
         ((16, 32, 56, 56), [2, 3]), ((30, 40, 50), [0, 2]), ((100, 300, 4), [1]), ((2000, 3), [1])]
inputs = []
for dtype in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16):
    for shape, axes in CASES:
        values = rng.standard_normal(shape) * 0.5 + 1.0
        values[..., ::7] *= 10.0 ** rng.integers(-3, 4, size=values[..., ::7].shape)
        inputs.append((values.astype(dtype), axes))
    for shape in ((1500, 1700), (3_000_000,)):  # products near 1, far from overflow and underflow
        logs = rng.uniform(-1.0, 1.0, size=shape)
        values = np.exp(logs - logs.mean()) * np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        inputs.append((values.astype(dtype), None))
def layouts(data):  # C order, and F order where it is another layout (not for 1-D data)
    return (data,) if data.flags.f_contiguous else (data, np.asfortranarray(data))
prepared = [(layouts(x), layouts(np.abs(x)), axes) for x, axes in inputs]  # made once, for every digest
def digest():
    h = hashlib.sha256()
    for views, magnitudes, axes in prepared:
        for op in OPS:
            for view in magnitudes if op.name == "reduce_log_sum" else views:
                h.update(getattr(numred, op.name)(view, axes).tobytes())
    return h.hexdigest()
for threads in (1, 2, 3, 4, 8):
    numba.set_num_threads(threads)
    print(threads, digest())
_runtime._parallel_allowed = False  # every call serial, in this thread
print("serial", digest())
"""


@pytest.mark.slow
def test_float_bits_do_not_depend_on_the_thread_count():
    # One process of 8 threads, limited to 1, 2, 3, 4 and 8 in turn: numred reads the count only
    # through numba.get_num_threads (numred._runtime), which numba.set_num_threads sets as
    # NUMBA_NUM_THREADS does. One process, not one per count: each would import numred, load the
    # kernels and make the inputs again.
    lines = run_python(BITS_SCRIPT, env={"NUMBA_NUM_THREADS": "8"}).splitlines()
    digests = dict(line.split() for line in lines[-6:])
    assert list(digests) == ["1", "2", "3", "4", "8", "serial"], lines
    assert len(set(digests.values())) == 1, digests


@needs_two_threads
def test_float64_product_over_all_axes_does_not_depend_on_the_thread_count():
    # the in-process form of the case above, for one and two threads: chunked products round
    # differently from one task's, so float64 plans are chunked by the shape alone
    rng = np.random.default_rng(0)
    for shape in ((1500, 1700), (3_000_000,)):
        logs = rng.uniform(-1.0, 1.0, size=shape)
        logs -= logs.mean()  # a product near 1, far from overflow and underflow
        x = np.exp(logs) * np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        one = with_threads(1, numred.reduce_prod, x)
        two = with_threads(2, numred.reduce_prod, x)
        assert one.tobytes() == two.tobytes(), (shape, one.item(), two.item())
