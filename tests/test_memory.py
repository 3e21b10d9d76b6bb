"""Huge logical inputs and peak memory: no input is materialised and no call allocates a temporary
proportional to its input.

Huge views: zero-stride broadcast views of more than 2**32 logical elements (65536 x 65536 and up) are
reduced without being materialised and give the exact results computed here in closed form with
Python ints and Fractions (mean of a constant = the constant, sum of squares of n copies of c =
n c**2, wrapped modulo 2**bits for integers, log-sum-exp of n copies of c = c + ln n; broadcast rows
reduce to sums over the row). Peak memory: on a 256 MiB float32 input, no call allocates a temporary
proportional to the input.

Peak memory is measured in a fresh interpreter, after numred has been imported and every op warmed
on small inputs of the same dtype and layout (serial and parallel sizes), so that Numba compilation,
cached or not, is not counted. The measure is the peak RSS, VmHWM of /proc/self/status (KiB), reset
to the current RSS through /proc/self/clear_refs right before each measured call, so each call's own
peak is seen. Plain ru_maxrss cannot be used as is: it cannot be reset below the compilation peak,
and on Linux a child's ru_maxrss starts at its parent's peak (exec copies the old address space's
high-water mark into the process's maxrss), so under a large pytest process it hides everything;
it is recorded in the reports for reference, and used only where /proc is missing. Each interpreter
writes its results to a file; the values are checked here against the exact expectations.

The huge calls read 2**32 elements each, a view being read element by element. A broadcast row is
read in memory order, about 0.2-0.3 s a call on 2 cores; one value broadcast over every axis (every
reduced axis of stride 0) is one element read over and over, about 5 s a call. So one case is of
that kind, and the other huge constants are rows filled with the constant ("fill"): the same
values, the same counts and the same exact results, read as rows. One subprocess runs them all.

The exact paths (numred._exact: ReduceL2 beyond 2**64 or beyond float64's range) are checked in
this process with tracemalloc, which sees NumPy's allocations.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest

import numred
import oracle

try:  # mpmath comes with sympy (an onnxruntime dependency) but is not a declared test dependency
    import mpmath
except ImportError:  # pragma: no cover
    mpmath = None


KIB = 1024
HUGE_LIMIT_KIB = 256 * 10**6 // KIB  # "extra peak memory under 256 MB"
A, B = 65536, 65537


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(numred.__file__)))


def run_python(code: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter that imports the same numred as this test process."""
    root = _package_root()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [root, os.environ.get("PYTHONPATH", "")] if p))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=root)
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def ulp_distance(got: float, exact: Fraction, dtype) -> Fraction | float:
    """|got - exact| in ulps of `dtype` at the exact value's binade (inf for NaN/inf results)."""
    if not math.isfinite(got):
        return math.inf
    return abs(Fraction(got) - exact) / oracle.ulp(exact, dtype)


def log_plus(c: Fraction, n: int) -> Fraction:
    """c + ln(n) to 200 bits (mpmath; else float64 math.log, off by ~2**-52 relative, 2**-28 of a
    float32 ulp): not exact, far below the 1-ulp check, and never on a rounding tie."""
    if mpmath is None:
        return c + Fraction(math.log(n))
    with mpmath.workprec(200):
        man, exp = (mpmath.mpf(c.numerator) / c.denominator + mpmath.log(n)).man_exp
    return Fraction(man) * Fraction(2) ** exp


def wrap(v: int, dtype) -> int:
    bits = np.dtype(dtype).itemsize * 8
    v %= 2**bits
    return v - 2**bits if np.dtype(dtype).kind == "i" and v >= 2 ** (bits - 1) else v


def trunc_div(s: int, n: int) -> int:
    return s // n if s >= 0 else -((-s) // n)


# ---- huge zero-stride broadcasts -------------------------------------------------------------------

I32MAX, I32MIN = 2**31 - 1, -(2**31)
I64MAX, I64MIN = 2**63 - 1, -(2**63)
U64MAX = 2**64 - 1


def _rows():
    """Rows broadcast down the first axis (values as Python numbers, dtype)."""
    g = np.random.default_rng(7).integers(-1000, 1001, A)
    return {
        # float32 grid k/8, |k| <= 1000: every partial float64 sum of these values and of their
        # squares over 2**32 elements is exact (below 2**39 and 2**46, on a 1/8 and 1/64 grid)
        "f32-grid": ((g / 8).tolist(), "float32"),
        # negative int32 values from INT32_MIN up to -65536
        "i32-neg": ([I32MIN + j * 32767 for j in range(B)], "int32"),
        # int64 values near INT64_MAX: the sum over 2**32 elements needs 96 bits
        "i64-top": ([I64MAX - j * (2**40 + 3) for j in range(A)], "int64"),
        # int64 values near INT64_MIN: squares wrap
        "i64-bottom": ([I64MIN + 1 + j * (2**41 + 7) for j in range(A)], "int64"),
    }


# id: (op, dtype, source, shape, axes, keepdims); source is ("const", value): one value broadcast
# over every axis; ("fill", value): a row filled with one value, broadcast down the first axis; or
# ("row", row name)
HUGE_CASES = {
    "f32-const-1.5-mean-all-keepdims": ("reduce_mean", "float32", ("const", 1.5), (A, A), None, 1),
    "f32-fill-1.5-ssq-axis0": ("reduce_sum_square", "float32", ("fill", 1.5), (A, B), 0, 0),
    "f32-fill-1.5-lse-all": ("reduce_log_sum_exp", "float32", ("fill", 1.5), (A, A), None, 0),
    "f32-row-mean-axis1-keepdims": ("reduce_mean", "float32", ("row", "f32-grid"), (B, A), 1, 1),
    "f32-row-ssq-all": ("reduce_sum_square", "float32", ("row", "f32-grid"), (A, A), None, 0),
    "i32-fill-max-mean-all": ("reduce_mean", "int32", ("fill", I32MAX), (A, A), None, 0),
    "i32-fill-neg-ssq-all-keepdims": ("reduce_sum_square", "int32", ("fill", -46341), (B, B), None, 1),
    "i32-row-neg-mean-all-keepdims": ("reduce_mean", "int32", ("row", "i32-neg"), (B, B), None, 1),
    "i64-row-top-mean-all": ("reduce_mean", "int64", ("row", "i64-top"), (A, A), None, 0),
    "i64-row-bottom-ssq-axis0-keepdims": ("reduce_sum_square", "int64", ("row", "i64-bottom"), (A, A), 0, 1),
    "u64-fill-max-mean-axis1-keepdims": ("reduce_mean", "uint64", ("fill", U64MAX), (B, A), 1, 1),
}


def huge_expected(case):
    """(keepdims shape, list of exact values in C order) for a HUGE_CASES entry."""
    opname, dtype, (kind, src), shape, axes, keepdims = case
    rows, cols = shape
    red = {None: (0, 1), 0: (0,), 1: (1,)}[axes]
    out_shape = tuple(1 if a in red else n for a, n in enumerate(shape)) if keepdims else \
        tuple(n for a, n in enumerate(shape) if a not in red)
    is_int = np.dtype(dtype).kind in "iu"
    num = int if is_int else Fraction
    if kind in ("const", "fill"):
        c = num(src)
        row = None
    else:
        vals, _ = _rows()[src]
        row = [num(v) for v in vals[:cols]]
    n = math.prod(shape[a] for a in red)

    def reduce_set(values_and_counts):
        """values with multiplicities -> the exact op result."""
        total = sum(v * k for v, k in values_and_counts)
        count = sum(k for _, k in values_and_counts)
        if opname == "reduce_mean":
            return trunc_div(total, count) if is_int else total / count
        if opname == "reduce_sum_square":
            sq = sum(v * v * k for v, k in values_and_counts)
            return wrap(sq, dtype) if is_int else sq
        assert not is_int and len({v for v, _ in values_and_counts}) == 1
        return log_plus(values_and_counts[0][0], count)

    if row is None:  # every reduced set is n copies of c
        value = reduce_set([(c, n)])
        return out_shape, [value] * math.prod(out_shape)
    if red == (0, 1):  # every row value `rows` times
        return out_shape, [reduce_set([(v, rows) for v in row])]
    if red == (1,):  # every output: the row once
        return out_shape, [reduce_set([(v, 1) for v in row])] * rows
    return out_shape, [reduce_set([(v, rows)]) for v in row]  # axis 0: column j is `rows` copies of row[j]


# Shared by the subprocess scripts below: imports, and this process's peak RSS with a reset.
_PEAK_PRELUDE = """
import gc, json, resource, sys
import numpy as np
import numred

def peak_kib():
    # this process's peak RSS in KiB: VmHWM (ru_maxrss when /proc is unavailable)
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

def reset_peak():
    # reset the peak to the current RSS (Linux >= 4.0); False when not possible
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
"""

_HUGE_SCRIPT = _PEAK_PRELUDE + """
import time

spec = json.load(open(sys.argv[1]))
rows = {name: np.array(vals, dtype=dt) for name, (vals, dt) in spec["rows"].items()}

def view(case, shape):
    kind, src = case["source"]
    if kind == "const":
        return np.broadcast_to(np.dtype(case["dtype"]).type(src), shape)
    if kind == "fill":
        return np.broadcast_to(np.full(shape[1], src, dtype=case["dtype"]), shape)
    return np.broadcast_to(rows[src][: shape[1]], shape)

report = {"ru_maxrss_import": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "cases": {}}
t0 = time.perf_counter()
for case in spec["cases"].values():  # warm: same dtype, op, layout, axes, keepdims; serial and parallel
    f = getattr(numred, case["op"])
    for shape in ((4, 5), (256, 257)):
        f(view(case, shape), case["axes"], keepdims=case["keepdims"])
report["warm_seconds"] = time.perf_counter() - t0
report["peak_after_warm"] = peak_kib()
report["reset"] = reset_peak()
report["baseline"] = peak_kib()
outs = {}
for cid, case in spec["cases"].items():
    x = view(case, tuple(case["shape"]))
    reset_peak()
    before = peak_kib()
    t = time.perf_counter()
    out = getattr(numred, case["op"])(x, case["axes"], keepdims=case["keepdims"])
    seconds = time.perf_counter() - t
    outs[cid] = out
    report["cases"][cid] = {"type": type(out).__name__, "dtype": str(out.dtype), "shape": list(out.shape),
                            "seconds": seconds, "peak_before": before, "peak_after": peak_kib(),
                            "ru_maxrss_after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                            "shares_memory": bool(np.shares_memory(out, x))}
    del x
for cid, out in outs.items():  # after all measurements: the lists are large
    report["cases"][cid]["values"] = (out.ravel().tolist() if out.dtype.kind in "iu"
                                      else out.astype(np.float64).ravel().tolist())
json.dump(report, open(sys.argv[2], "w"))
"""


@pytest.fixture(scope="module")
def huge_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("huge")
    spec = {
        "rows": {k: [v, dt] for k, (v, dt) in _rows().items()},
        "cases": {cid: {"op": c[0], "dtype": c[1], "source": list(c[2]), "shape": list(c[3]), "axes": c[4],
                        "keepdims": c[5]} for cid, c in HUGE_CASES.items()},
    }
    (d / "spec.json").write_text(json.dumps(spec))
    run_python(_HUGE_SCRIPT, str(d / "spec.json"), str(d / "report.json"), timeout=1200)
    report = json.loads((d / "report.json").read_text())
    lines = [f"huge broadcasts: warm-up {report['warm_seconds']:.1f} s, peak RSS after warm-up "
             f"{report['peak_after_warm'] / KIB:.1f} MiB, after reset {report['baseline'] / KIB:.1f} MiB "
             f"(reset {'worked' if report['reset'] else 'unavailable: growth is cumulative'})"]
    for cid, r in report["cases"].items():
        lines.append(f"  {cid:40s} {r['seconds']:6.2f} s  peak growth {_huge_growth(report, cid)} KiB")
    print("\n".join(lines))
    return report


def _huge_growth(report, cid):
    """KiB the call added to the peak RSS: from its own reset when possible, else since the baseline."""
    r = report["cases"][cid]
    return r["peak_after"] - (r["peak_before"] if report["reset"] else report["baseline"])


@pytest.mark.slow
@pytest.mark.parametrize("cid", list(HUGE_CASES))
def test_huge_broadcast_exact_and_not_materialised(huge_report, cid):
    case = HUGE_CASES[cid]
    opname, dtype, _, shape, axes, keepdims = case
    assert math.prod(shape) >= 2**32
    r = huge_report["cases"][cid]
    growth = _huge_growth(huge_report, cid)
    assert growth < HUGE_LIMIT_KIB, f"{cid}: peak RSS grew by {growth} KiB (limit {HUGE_LIMIT_KIB} KiB)"
    out_shape, exact = huge_expected(case)
    assert r["type"] == "ndarray" and r["dtype"] == dtype and tuple(r["shape"]) == out_shape, \
        (cid, r["type"], r["dtype"], r["shape"], out_shape)
    assert not r["shares_memory"], f"{cid}: the output shares memory with the input"
    got = r["values"]
    if np.dtype(dtype).kind in "iu":
        bad = [(i, g, e) for i, (g, e) in enumerate(zip(got, exact)) if g != e]
        assert not bad, f"{cid}: {len(bad)} of {len(exact)} outputs differ; first (index, got, exact): {bad[:3]}"
        return
    memo = {}  # outputs repeat the same (got, exact) pair many times
    dist = [memo[(g, id(e))] if (g, id(e)) in memo else memo.setdefault((g, id(e)), ulp_distance(g, e, dtype))
            for g, e in zip(got, exact)]
    worst = max(range(len(dist)), key=dist.__getitem__)
    assert dist[worst] <= 1, (f"{cid}: at {worst} got {got[worst]!r}, exact {float(exact[worst])!r} "
                              f"(correctly rounded {oracle.round_fraction(exact[worst], dtype)!r}), "
                              f"{float(dist[worst]):.3f} ulp")


@pytest.mark.slow
def test_huge_expectations_on_hand_values():
    # the closed forms, checked once by hand
    assert huge_expected(HUGE_CASES["f32-fill-1.5-ssq-axis0"])[1][:1] == [Fraction(9, 4) * A]
    assert huge_expected(HUGE_CASES["i32-fill-neg-ssq-all-keepdims"])[1] == [wrap(B * B * 46341**2, np.int32)]
    assert wrap(2**31, np.int32) == -(2**31) and wrap(-1, np.uint32) == 2**32 - 1
    assert huge_expected(HUGE_CASES["u64-fill-max-mean-axis1-keepdims"])[0] == (B, 1)
    lse = huge_expected(HUGE_CASES["f32-fill-1.5-lse-all"])[1][0]
    assert abs(float(lse) - (1.5 + 32 * math.log(2))) < 1e-14


# ---- no temporary proportional to the input -------------------------------------------------------

MEM_SHAPE = (8192, 8192)  # float32: 256 MiB
MEM_INPUT_KIB = math.prod(MEM_SHAPE) * 4 // KIB
MEM_LIMIT_KIB = MEM_INPUT_KIB // 10
# (layout, axes, keepdims); noop_with_empty_axes is 0 throughout ([] reduces everything)
MEM_CALLS = [(layout, axes, kd) for layout in ("C", "T")
             for axes, kd in ((None, 1), ([0], 1), ([1], 0), ([0, 1], 0), ([], 1))]

_MEM_SCRIPT = _PEAK_PRELUDE + """

opname, out_path, calls = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
f = getattr(numred, opname)
# warm: serial and parallel kernels, both layouts, every call form; and the measured shape itself,
# as zeros that hold no memory until written (calloc's pages), so that no measured call loads a
# kernel of its own plan: a kernel loaded or compiled inside a measured call adds Numba's memory,
# not the call's, to that call's peak
warm = [np.random.default_rng(1).standard_normal(shape, dtype=np.float32) for shape in ((4, 6), (256, 384))]
for w in warm + [np.zeros((8192, 8192), dtype=np.float32)]:
    for layout, axes, kd in calls:
        f(w if layout == "C" else w.T, axes, keepdims=kd, noop_with_empty_axes=0)
del w, warm
report = {"peak_after_warm": peak_kib(), "reset": reset_peak()}
report["peak_before_input"] = peak_kib()
x = np.random.default_rng(0).standard_normal((8192, 8192), dtype=np.float32)
report["peak_after_input"] = peak_kib()  # the brief's "after creating the input"
outs, own, after = [], [], []
for layout, axes, kd in calls:
    view = x if layout == "C" else x.T
    if report["reset"]:
        reset_peak()
    before = peak_kib()
    outs.append(f(view, axes, keepdims=kd, noop_with_empty_axes=0))
    after.append(peak_kib())
    own.append(after[-1] - before)
    del view
report["own_growth"] = own  # each call's own addition to the peak (after a reset of the peak)
report["peak_after_each"] = after
report["peak_after_calls"] = peak_kib()
report["ru_maxrss_after_calls"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
np.savez(out_path + ".npz", *outs)
json.dump(report, open(out_path + ".json", "w"))
"""


@pytest.fixture(scope="module")
def mem_input64():
    x = np.random.default_rng(0).standard_normal(MEM_SHAPE, dtype=np.float32)
    return x.astype(np.float64)


def _mem_expected(opname, x64, axes_of_x):
    """(float64 expectation with keepdims=1 over x's axes, absolute tolerance beyond 1 float32 ulp):
    the bound of any float64 summation order, (2n + 64) u sum|x|, on both sides."""
    t = axes_of_x
    n = math.prod(x64.shape[a] for a in t)
    u = 2.0**-53
    if opname == "reduce_mean":
        return np.sum(x64, axis=t, keepdims=True) / n, (2 * n + 64) * u * np.sum(np.abs(x64), axis=t, keepdims=True) / n
    if opname == "reduce_sum_square":
        e = np.einsum("ij,ij->j", x64, x64)[None, :] if t == (0,) else \
            np.einsum("ij,ij->i", x64, x64)[:, None] if t == (1,) else np.sum(x64 * x64, keepdims=True)
        return e, (2 * n + 64) * u * e
    m = np.max(x64, axis=t, keepdims=True)
    e = m + np.log(np.sum(np.exp(x64 - m), axis=t, keepdims=True))
    return e, (2 * n + 128) * u + 4 * np.spacing(np.abs(e))


@pytest.mark.slow
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_log_sum_exp", "reduce_sum_square"])
def test_no_temporary_proportional_to_the_input(opname, mem_input64, tmp_path):
    out = str(tmp_path / opname)
    run_python(_MEM_SCRIPT, opname, out, json.dumps(MEM_CALLS), timeout=900)
    report = json.loads(open(out + ".json").read())
    grew_for_input = report["peak_after_input"] - report["peak_before_input"]
    assert grew_for_input > 0.9 * MEM_INPUT_KIB, f"the input was not resident ({grew_for_input} KiB): bad measurement"
    own = report["own_growth"]
    if not report["reset"]:  # no per-call reset: the growth of the peak since the input, cumulative
        own = [p - report["peak_after_input"] for p in report["peak_after_each"]]
    print(f"{opname}: input {grew_for_input} KiB; peak growth per call (KiB): "
          + ", ".join(f"{layout}{axes}kd{kd}={g}" for (layout, axes, kd), g in zip(MEM_CALLS, own)))
    over = [(call, g) for call, g in zip(MEM_CALLS, own) if g >= MEM_LIMIT_KIB]
    assert not over, f"{opname}: peak RSS grew by >= 10% of the input ({MEM_LIMIT_KIB} KiB): {over}"
    # and the values, against float64 oracles of the same data
    results = np.load(out + ".npz")
    expected = {}
    for i, (layout, axes, kd) in enumerate(MEM_CALLS):
        red = tuple(range(2)) if not axes else tuple(axes)
        red_x = red if layout == "C" else tuple(sorted(1 - a for a in red))  # axes of x.T -> axes of x
        if red_x not in expected:
            expected[red_x] = _mem_expected(opname, mem_input64, red_x)
        e, tol = expected[red_x]
        tol = np.broadcast_to(tol, e.shape)
        if layout == "T":
            e, tol = e.T, tol.T
        if not kd:
            kept_shape = [n for a, n in enumerate(e.shape) if a not in red]
            e, tol = e.reshape(kept_shape), tol.reshape(kept_shape)
        got = results[f"arr_{i}"]
        assert got.dtype == np.float32 and got.shape == e.shape, (layout, axes, kd, got.dtype, got.shape, e.shape)
        g = got.astype(np.float64)
        limit = oracle.ulp_array(e, np.float32) + tol
        ok = np.abs(g - e) <= limit * (1 + 1e-12)
        assert ok.all(), f"{opname} {layout} axes={axes}: {int((~ok).sum())} outputs differ, e.g. got " \
                         f"{g[~ok][:3]}, expected {e[~ok][:3]}"


# ---- the exact paths -----------------------------------------------------------------------------


def _l2_and_peak(x, axes=None):
    """numred.reduce_l2(x, axes, keepdims=0) and the peak of the allocations traced during the call
    (tracemalloc sees NumPy's; the kernels are loaded first, on a piece, so that Numba's are not)."""
    import tracemalloc

    numred.reduce_l2(x[..., :2], axes=axes)
    tracemalloc.start()
    try:
        got = numred.reduce_l2(x, axes=axes, keepdims=0)
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype,value", [(np.int64, 2**40), (np.float64, 1e200)])
def test_exact_l2_of_a_long_row_needs_no_temporary_proportional_to_it(dtype, value):
    # A reduction over all of a large input is one long row: its exact path (squares beyond 2**64,
    # or beyond float64's range) takes it in pieces, with temporaries of a few pieces, not several
    # the size of the input (NumPy's allocations are traced)
    x = np.full(1 << 22, value, dtype=dtype)  # 32 MiB
    x[::3] = -value
    got, peak = _l2_and_peak(x)
    if dtype == np.int64:
        assert int(got) == math.isqrt(x.size * value**2)
    else:
        assert got == 2048 * value  # sqrt(2**22) exactly, times 1e200 rounded once
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"


@pytest.mark.parametrize("batch", [False, True])
def test_exact_path_over_axes_that_do_not_merge_copies_one_group_of_rows_at_a_time(batch):
    # Reduced axes around a kept one (axes [0, 2] of 64x32x4096) cannot be one row per output without
    # a copy: the exact path copies a group of rows at a time, not all of them (64 MiB at its peak
    # before). Output k's elements are +-(2**40 + k), its squares' sum 2**18 (2**40 + k)**2, beyond
    # 2**64: its root 2**9 (2**40 + k), exactly. Also behind a kept axis of length 1 (a batch of one,
    # 1x64x32x4096 over [1, 3]), which the groups pass over.
    x = np.empty((64, 32, 4096), dtype=np.int64)  # 64 MiB
    x[...] = (2**40 + np.arange(32))[None, :, None]
    x[::3] *= -1
    axes = [0, 2]
    if batch:
        x, axes = x[None], [1, 3]
    got, peak = _l2_and_peak(x, axes)
    assert got.ravel().tolist() == [2**9 * (2**40 + k) for k in range(32)]
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"


@pytest.mark.parametrize("axes", [None, [0, 1]])
def test_exact_path_reads_a_transposed_input_in_place(axes):
    # A transposed (here Fortran-ordered) input: the exact path takes each output's elements in
    # memory's order, a view, where the axes' given order needs a copy of the whole input (32 MiB at
    # the peak before). 2**22 elements +-2**40, or 2**16 per output over [0, 1]: squares' sums
    # beyond 2**64, roots 2**51 and 2**48 exactly.
    x = np.full((64, 16, 4096), 2**40, dtype=np.int64)  # 32 MiB
    x[:, ::3] *= -1
    x = x.T  # 4096x16x64, Fortran-ordered
    got, peak = _l2_and_peak(x, axes)
    assert got.ravel().tolist() == ([2**51] if axes is None else [2**48] * 64)
    assert peak < x.nbytes / 4, f"{peak / 2**20:.1f} MiB at the peak for a {x.nbytes / 2**20:.0f} MiB input"
