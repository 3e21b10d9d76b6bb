"""Property tests: numred against the independent oracle (tests/oracle.py) over all eight dtypes,
ranks 0-5, zero-size dimensions, every memory layout and every form of the arguments; plus targeted
tests of the value rows of docs/SEMANTICS.md."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numred
import oracle
from numred._registry import OPS
from oracle import BFLOAT16, ExpectedError

OP_NAMES = [op.name for op in OPS]
DTYPES = list(oracle.ALL_DTYPES)
FLOAT_DTYPES = list(oracle.FLOAT_DTYPES)
INT_DTYPES = list(oracle.INT_DTYPES)
DT_IDS = [d.name for d in DTYPES]

FUNCS = {name: getattr(numred, name) for name in OP_NAMES}


# ---- strategies ----------------------------------------------------------------------------------


def _float_elements(gen_dtype: np.dtype, mode: str):
    """Elements for float16/float32/float64 arrays (bfloat16 is generated as float32 and cast)."""
    width = gen_dtype.itemsize * 8
    fi = np.finfo(gen_dtype)
    moderate = st.one_of(
        st.floats(-100, 100, width=width),
        st.integers(-8, 8).map(float),
        st.sampled_from([0.5, 0.1, -0.25, 1e-3, 3.0]).map(lambda v: float(gen_dtype.type(v))),
    )
    if mode == "moderate":
        return moderate
    wide = st.one_of(moderate, st.floats(allow_nan=False, allow_infinity=False, width=width))
    if mode == "wide":
        return wide
    specials = st.sampled_from(
        [0.0, -0.0, math.inf, -math.inf, math.nan, float(fi.max), -float(fi.max),
         float(fi.smallest_subnormal), float(fi.tiny), -float(fi.smallest_normal)]
    )
    return st.one_of(wide, specials)


def _int_elements(dtype: np.dtype, mode: str):
    lo, hi = oracle.int_range(dtype)
    small = st.integers(max(lo, -10), min(hi, 20))
    if mode == "moderate":
        return small
    full = st.integers(lo, hi)
    if mode == "wide":
        return st.one_of(small, full)
    extremes = st.sampled_from(sorted({lo, hi, lo + 1, hi - 1, 0, 1, max(lo, -1), hi // 2, lo // 2}))
    return st.one_of(small, full, extremes)


@st.composite
def arrays_of(draw, dtype, max_dims=5, max_side=4, min_dims=0, mode=None):
    """A small array of `dtype` (any of the 8, or int8/uint8) with values from one of the modes."""
    dtype = np.dtype(dtype)
    mode = mode or draw(st.sampled_from(["moderate", "wide", "special"]))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side))
    if dtype == BFLOAT16:
        gen = np.dtype(np.float32)
        a = draw(hnp.arrays(gen, shape, elements=_float_elements(gen, mode)))
        with np.errstate(over="ignore"):
            return a.astype(BFLOAT16)
    if dtype.kind == "f":
        return draw(hnp.arrays(dtype, shape, elements=_float_elements(dtype, mode)))
    # integers: draw Python ints (hypothesis handles uint64 through object arrays poorly)
    vals = draw(st.lists(_int_elements(dtype, mode), min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.array(vals, dtype=dtype).reshape(shape)


def _sentinel(dtype):
    return np.nan if oracle.is_float_dtype(dtype) else oracle.int_range(dtype)[1]


@st.composite
def layouts(draw, base):
    """A view with the values of `base` in one of the memory layouts; returns (view, owner, name).

    `owner` is the whole buffer the view looks into (checked for modification afterwards).
    """
    names = ["C", "F", "transposed", "negative", "step", "broadcast", "big-endian"]
    name = draw(st.sampled_from(names))
    r = base.ndim
    if r == 0 and name not in ("C", "big-endian"):
        name = "C"
    if name == "C":
        x = np.ascontiguousarray(base)
        return x, x, name
    if name == "F":
        x = np.asfortranarray(base)
        return x, x, name
    if name == "transposed":
        owner = np.ascontiguousarray(base)
        perm = draw(st.permutations(range(r)))
        # the view has the permuted shape: its values are those of base, permuted
        return owner.transpose(perm), owner, f"{name}{tuple(perm)}"
    if name == "negative":
        k = draw(st.integers(0, r - 1))
        owner = np.ascontiguousarray(np.flip(base, k))
        return np.flip(owner, k), owner, f"{name}(axis {k})"
    if name == "step":
        k = draw(st.integers(0, r - 1))
        big_shape = list(base.shape)
        big_shape[k] *= 2
        owner = np.full(big_shape, _sentinel(base.dtype), dtype=base.dtype)
        sl = (slice(None),) * k + (slice(0, None, 2),)
        owner[sl] = base
        return owner[sl], owner, f"{name}(axis {k})"
    if name == "broadcast":
        ks = draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r, unique=True))
        sl = tuple(slice(0, 1) if a in ks else slice(None) for a in range(r))
        owner = np.ascontiguousarray(base[sl]) if all(base.shape[a] > 0 for a in ks) else None
        if owner is None:  # broadcasting needs a size-1 source; use zeros of the right dtype
            owner = np.zeros([1 if a in ks else base.shape[a] for a in range(r)], dtype=base.dtype)
        return np.broadcast_to(owner, base.shape), owner, f"{name}(axes {ks})"
    # big-endian
    if base.dtype == BFLOAT16:
        x = np.ascontiguousarray(base)
        return x, x, "C"
    x = base.astype(base.dtype.newbyteorder(">"))
    return x, x, name


@st.composite
def axes_forms(draw, ndim):
    """(axes argument, description): every form the contract allows, for a valid axis subset."""
    subset = draw(st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim)) if ndim else []
    order = draw(st.permutations(subset)) if subset else []
    signs = draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    vals = [a - ndim if neg else a for a, neg in zip(order, signs)]
    forms = ["list", "tuple", "ndarray64", "ndarray32"]
    if not subset:
        forms += ["None", "emptylist", "emptyndarray"]
    if len(subset) == 1:
        forms += ["int"]
    form = draw(st.sampled_from(forms))
    if form == "None":
        return None
    if form == "emptylist":
        return []
    if form == "emptyndarray":
        return np.array([], dtype=np.int64)
    if form == "int":
        return vals[0]
    if form == "list":
        return list(vals)
    if form == "tuple":
        return tuple(vals)
    if form == "ndarray64":
        return np.array(vals, dtype=np.int64)
    return np.array(vals, dtype=np.int32)


FLAGS = st.sampled_from([0, 1, True, False, np.int64(0), np.int64(1), np.int32(1), np.uint8(0)])


# ---- the check -----------------------------------------------------------------------------------


def _bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def check_against_oracle(opname, x, axes=None, keepdims=1, noop=0, owner=None, calls=1):
    """Call numred and compare with the oracle, output type/dtype/shape, memory and input checks; the
    oracle's Expected, or None when the call had to raise.
    With ``calls`` > 1 the same call is repeated, each result checked: repeated calls on a
    C-contiguous input take the front end's shortcut (_frontend._REPEATS): from the second call on,
    a kept plan or, where the computation is one kernel launch, one function."""
    func = FUNCS[opname]
    owner = x if owner is None else owner
    owner_before = _bits(owner)
    view_before = _bits(x)
    axes_before = _bits(axes) if isinstance(axes, np.ndarray) else repr(axes)
    ctx = f"dtype={x.dtype.str} shape={x.shape} strides={x.strides} axes={axes!r} keepdims={keepdims!r} noop={noop!r}"
    try:
        exp = oracle.expected(opname, x, axes, keepdims, noop)
    except ExpectedError as e:
        with pytest.raises(e.exc_type):
            func(x, axes, keepdims, noop)
        exp = None
    else:
        for call in range(calls):
            try:
                out = func(x, axes, keepdims, noop)
            except ValueError:
                if exp.error_ok is ValueError:  # undecidable integer LSE overflow: raising is fine
                    out = None
                else:
                    raise
            if out is not None:
                oracle.assert_matches(out, exp, ctx + f" (call {call + 1})")
                assert not np.shares_memory(out, x), "the output shares memory with the input: " + ctx
                assert not np.shares_memory(out, owner), "the output shares memory with the input: " + ctx
    assert _bits(owner) == owner_before, "the input buffer was modified: " + ctx
    assert _bits(x) == view_before, "the input was modified: " + ctx
    after = _bits(axes) if isinstance(axes, np.ndarray) else repr(axes)
    assert after == axes_before, "the axes argument was modified: " + ctx
    return exp


# ---- properties ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
@settings(max_examples=60)
@given(data=st.data())
def test_matches_oracle(opname, dtype, data):
    base = data.draw(arrays_of(dtype), label="base")
    x, owner, layout = data.draw(layouts(base), label="layout")
    axes = data.draw(axes_forms(x.ndim), label="axes")
    keepdims = data.draw(FLAGS, label="keepdims")
    noop = data.draw(FLAGS, label="noop")
    check_against_oracle(opname, x, axes, keepdims, noop, owner)


@st.composite
def parallel_sized_arrays(draw, dtype):
    """An array of 2**14 to 2**18 elements, around the sizes where plans go parallel
    (numred._plan.PARALLEL_MIN_ELEMENTS) and kernels run on threads (THREADED_MIN_ELEMENTS): random
    values from a drawn seed and scale, with values that hypothesis draws (extremes, specials) at
    drawn places."""
    dtype = np.dtype(dtype)
    target = 1 << draw(st.integers(14, 18), label="log2 size")
    sides = draw(st.lists(st.integers(1, 700), min_size=0, max_size=2), label="leading sides")
    shape = (*sides, max(1, -(-target // math.prod(sides))))
    shape = tuple(draw(st.permutations(shape), label="shape"))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    if dtype.kind == "f":
        x = (rng.standard_normal(shape) * 10.0 ** draw(st.integers(-3, 3), label="scale")).astype(dtype)
        gen = np.dtype(np.float32) if dtype == BFLOAT16 else dtype
        elements = _float_elements(gen, draw(st.sampled_from(["wide", "special"])))
    else:
        lo, hi = oracle.int_range(dtype)
        x = rng.integers(max(lo, -1000), min(hi, 1000), size=shape, endpoint=True).astype(dtype)
        elements = _int_elements(dtype, "special")
    for _ in range(draw(st.integers(0, 3), label="drawn values")):
        with np.errstate(over="ignore"):
            x.flat[draw(st.integers(0, x.size - 1))] = np.asarray(draw(elements)).astype(dtype)
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_matches_oracle_at_parallel_sizes(dtype, data):
    # the other properties draw small arrays, which take the serial kernels; these cross the sizes
    # where the parallel ones and threads take over, on every layout and form of the arguments
    opname = data.draw(st.sampled_from(OP_NAMES), label="operator")
    base = data.draw(parallel_sized_arrays(dtype), label="base")
    x, owner, layout = data.draw(layouts(base), label="layout")
    axes = data.draw(axes_forms(x.ndim), label="axes")
    check_against_oracle(opname, x, axes, data.draw(FLAGS), data.draw(FLAGS), owner)


@pytest.mark.parametrize("dtype", oracle.NARROW_INT_DTYPES, ids=str)
@pytest.mark.parametrize("opname", ["reduce_max", "reduce_min"])
@settings(max_examples=60)
@given(data=st.data())
def test_int8_and_uint8_max_and_min_match_oracle(opname, dtype, data):
    # ONNX types ReduceMax and ReduceMin for int8 and uint8 too
    base = data.draw(arrays_of(dtype, mode=data.draw(st.sampled_from(["moderate", "special"]))), label="base")
    x, owner, layout = data.draw(layouts(base), label="layout")
    axes = data.draw(axes_forms(x.ndim), label="axes")
    check_against_oracle(opname, x, axes, data.draw(FLAGS), data.draw(FLAGS), owner)


@pytest.mark.parametrize("dtype", oracle.NARROW_INT_DTYPES, ids=str)
def test_int8_and_uint8_max_and_min_on_every_layout_family(dtype):
    # every layout the precompile step walks (serial, rows, tiles, blocks, chunks), against NumPy's
    # exact integer max and min; the input's extremes placed last, where a chunked read ends
    from numred.tools.precompile import LAYOUTS

    info = np.iinfo(dtype)
    rng = np.random.default_rng(8)
    for shape, axes, *view in LAYOUTS:
        x = rng.integers(info.min + 1, info.max, shape, dtype=dtype)
        x.flat[-1], x.flat[-2] = info.min, info.max
        if view:
            x = x[view[0]]
        t = None if axes is None else tuple(axes)
        for func, peer in ((numred.reduce_max, np.max), (numred.reduce_min, np.min)):
            got = func(x, axes)
            assert got.dtype == dtype and np.array_equal(got, peer(x, axis=t, keepdims=True)), (shape, axes, func)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_products_on_every_layout_family(dtype):
    # every layout the precompile step walks, on data whose exact products are known: floats are
    # +-2**k (their product is an exact power of two, or beyond the dtype's range, or 0), integers
    # against NumPy's own wrapping product
    from numred.tools.precompile import LAYOUTS

    rng = np.random.default_rng(12)
    for shape, axes, *view in LAYOUTS:
        t = tuple(range(len(shape))) if axes is None else tuple(axes)
        if oracle.is_float_dtype(dtype):
            exponents = rng.integers(-2, 3, shape)
            signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
            x = (signs * np.exp2(exponents)).astype(dtype)
        else:
            info = np.iinfo(dtype)
            x = rng.integers(max(info.min, -3), 4, shape).astype(dtype)
        if view:
            x = x[view[0]]
        got = numred.reduce_prod(x, axes)
        if oracle.is_float_dtype(dtype):
            x64 = x.astype(np.float64)
            total = np.sum(np.log2(np.abs(x64)), axis=t, keepdims=True)  # exact: small integers
            negative = np.sum(x64 < 0, axis=t, keepdims=True) % 2 == 1
            with np.errstate(over="ignore"):
                want = np.where(negative, -1.0, 1.0) * np.exp2(total)  # float64's own range: exact or 0/inf
                want = want.astype(dtype).astype(np.float64)  # the one rounding: 0 or inf beyond the dtype
            g = got.astype(np.float64)
            assert np.array_equal(g, want) and np.array_equal(np.signbit(g), np.signbit(want)), (shape, axes)
        else:
            assert np.array_equal(got, np.prod(x, axis=t, keepdims=True, dtype=dtype)), (shape, axes)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
@settings(max_examples=25)
@given(data=st.data())
def test_reduction_over_nonempty_sets_of_wide_values(opname, dtype, data):
    # no zero-size dimensions and values over the whole range (extremes, specials): the value rows
    base = data.draw(arrays_of(dtype, max_dims=3, max_side=5, min_dims=1, mode="special"), label="base")
    base = base if base.size else np.zeros((2, 3), dtype=base.dtype)
    axes = data.draw(axes_forms(base.ndim), label="axes")
    check_against_oracle(opname, base, axes, data.draw(FLAGS), 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
@settings(max_examples=15)
@given(data=st.data())
def test_noop_with_empty_axes(opname, dtype, data):
    base = data.draw(arrays_of(dtype, max_dims=4), label="base")
    x, owner, layout = data.draw(layouts(base), label="layout")
    axes = data.draw(st.sampled_from([None, [], (), np.array([], dtype=np.int64)]), label="axes")
    keepdims = data.draw(FLAGS, label="keepdims")
    noop = data.draw(st.sampled_from([1, True, np.int64(1)]), label="noop")
    check_against_oracle(opname, x, axes, keepdims, noop, owner)
    if opname not in ("reduce_sum_square", "reduce_l1", "reduce_l2", "reduce_log_sum"):  # (x * x, |x| and ln x)
        out = FUNCS[opname](x, axes, keepdims, noop)
        assert out.shape == x.shape
        # an equal copy: NaN, infinities and the sign of zero unchanged
        xv = x.astype(np.float64) if oracle.is_float_dtype(x.dtype) else x.astype(object)
        ov = out.astype(np.float64) if oracle.is_float_dtype(x.dtype) else out.astype(object)
        assert np.array_equal(ov, xv, equal_nan=oracle.is_float_dtype(x.dtype))
        if oracle.is_float_dtype(x.dtype):
            assert np.array_equal(np.signbit(ov), np.signbit(xv))


# ---- rank 0 ------------------------------------------------------------------------------------

RANK0_VALUES = {
    "float": [2.5, -0.0, 0.0, np.inf, -np.inf, np.nan, -3.0],
    "int": [0, 7, -7],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_rank0_data(opname, dtype):
    vals = RANK0_VALUES["float" if oracle.is_float_dtype(dtype) else "int"]
    if dtype.kind == "u":
        vals = [v for v in vals if v >= 0] + [int(np.iinfo(dtype).max)]
    else:
        vals = vals + ([int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)] if dtype.kind == "i" else [])
    for v in vals:
        x = np.array(v, dtype=dtype)
        for axes in (None, [], np.array([], dtype=np.int64), ()):
            for kd in (0, 1):
                for noop in (0, 1):
                    if check_against_oracle(opname, x, axes, kd, noop) is None:
                        continue  # (the call raised, as the contract says)
                    out = FUNCS[opname](x, axes, kd, noop)
                    assert type(out) is np.ndarray and out.shape == ()


def test_rank0_full_reduction_values():
    # the contract's sentence: mean x, sum x, log-sum-exp x, sum of squares x*x
    x = np.array(-3.0, dtype=np.float32)
    assert numred.reduce_mean(x, keepdims=0)[()] == -3.0
    assert numred.reduce_sum(x, keepdims=0)[()] == -3.0
    assert numred.reduce_log_sum_exp(x, keepdims=0)[()] == -3.0
    assert numred.reduce_sum_square(x, keepdims=0)[()] == 9.0
    xi = np.array(100000, dtype=np.int32)
    assert numred.reduce_sum_square(xi)[()] == 1410065408  # 10**10 mod 2**32
    xi = np.array(-46341, dtype=np.int32)
    assert numred.reduce_sum_square(xi)[()] == 46341**2 - 2**32  # wraps to -2147479015


# ---- output type -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_full_reduction_keepdims0_is_a_0d_array(opname, dtype):
    x = np.arange(1, 7).astype(dtype).reshape(2, 3)
    for axes in (None, [0, 1], (-1, 0)):
        out = FUNCS[opname](x, axes, keepdims=0)
        assert type(out) is np.ndarray, type(out)
        assert out.shape == () and out.dtype == dtype
        out2 = FUNCS[opname](x, axes, keepdims=1)
        assert type(out2) is np.ndarray and out2.shape == (1, 1)


@pytest.mark.parametrize("opname", OP_NAMES)
def test_list_input_goes_through_asarray(opname):
    out = FUNCS[opname]([[1.0, 2.0], [3.0, 5.0]], [1], 0)
    exp = oracle.expected(opname, np.asarray([[1.0, 2.0], [3.0, 5.0]]), [1], 0)
    oracle.assert_matches(out, exp)
    out = FUNCS[opname]([[1, 2], [3, 5]], 1, 1)
    assert out.dtype == np.int64 and out.shape == (2, 1)


@pytest.mark.parametrize("opname", OP_NAMES)
@pytest.mark.parametrize("dt", [">f4", ">f8", ">f2", ">i4", ">i8", ">u4", ">u8", "<f4", "<i8"])
def test_big_endian_input_gives_native_output(opname, dt):
    rng = np.random.default_rng(3)
    # (positive data for an integer log)
    vals = rng.integers(-50, 50, (3, 4, 5)) if dt[1] != "u" and opname != "reduce_log_sum" else \
        rng.integers(1, 100, (3, 4, 5))
    x = vals.astype(dt)
    for axes in (None, [1], [0, 2], [], -1):
        for noop in (0, 1):
            assert check_against_oracle(opname, x, axes, 1, noop) is not None
            out = FUNCS[opname](x, axes, 1, noop)
            assert out.dtype == np.dtype(dt).newbyteorder("=") and out.dtype.isnative


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_output_is_fresh_for_a_single_element_reduction(opname, dtype):
    # reducing an axis of size 1 must still copy (mean/LSE of one element are the element)
    x = np.arange(1, 7).astype(dtype).reshape(2, 3, 1)
    before = x.copy()
    out = FUNCS[opname](x, [2], keepdims=1)
    assert not np.shares_memory(out, x)
    out[...] = 0
    assert np.array_equal(x.view(np.uint8), before.view(np.uint8))


# ---- targeted value rows -------------------------------------------------------------------------


def _one(opname, values, dtype):
    return FUNCS[opname](np.array(values, dtype=dtype), None, keepdims=0)


def test_mean_of_huge_float64_is_finite():
    out = _one("reduce_mean", [1.7e308, 1.7e308], np.float64)
    assert out[()] == 1.7e308
    out = _one("reduce_mean", [1.7e308, 1.7e308, -1.7e308, 1.7e308], np.float64)
    assert out[()] == pytest.approx(0.85e308, rel=1e-15)
    fmax = np.finfo(np.float32).max
    assert _one("reduce_mean", [fmax] * 1000, np.float32)[()] == fmax


SIDES = [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 64, 65, 100, 257, 300, 1000]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_parallel_float64_means_whose_sums_overflow_are_finite(data):
    # Parallel plans (32768 elements and more; the examples above are all small) of every kind:
    # rows, tiles, narrow tiles, blocks, chunks, in every layout. Every sum overflows; each mean must
    # be the mean, which the rescaled retry finds (a kernel that added terms before scaling them
    # returned inf: tiles with 4-7 rows past a group of eight, found by this kind of sweep).
    shape = data.draw(st.lists(st.sampled_from(SIDES), min_size=2, max_size=4).filter(
        lambda s: 1 << 15 <= math.prod(s) <= 1 << 21), label="shape")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    base = np.random.default_rng(seed).uniform(1.0e308, 1.7e308, shape)
    x, owner, name = data.draw(layouts(base), label="layout")
    axes = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, unique=True), label="axes"))
    before = owner.copy()
    got = numred.reduce_mean(x, axes, keepdims=0)
    # the oracle: NumPy's pairwise mean of the values scaled by 2**-64 (exactly), scaled back, along
    # the last axis of a copy that holds each output's values in a row (NumPy sums pairwise along a
    # contiguous axis only: over the leading axes of a broadcast 8x1x1000x5 it added row by row and
    # was 600 float64 ulps off the exact mean, beyond the tolerance)
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = np.ascontiguousarray(np.moveaxis(x.astype(np.float64) * 2.0**-64, axes, range(len(kept), x.ndim)))
    want = np.mean(rows.reshape([x.shape[a] for a in kept] + [-1]), axis=-1) * 2.0**64
    assert np.isfinite(got).all(), name
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0, err_msg=name)
    assert owner.tobytes() == before.tobytes()


@st.composite
def parallel_shapes(draw):
    """A shape of 2**15-2**17 elements (PARALLEL_MIN_ELEMENTS and up: the parallel kernels), with up
    to three sides from SIDES and one long side that makes up the size, anywhere."""
    target = draw(st.integers(1 << 16, 1 << 17), label="size")
    sides, size = [], 1
    for side in draw(st.lists(st.sampled_from(SIDES), max_size=3), label="sides"):
        if size * side * 2 <= target:  # leaves the long side at least 2
            sides.append(side)
            size *= side
    sides.insert(draw(st.integers(0, len(sides)), label="long side at"), target // size)
    return tuple(sides)


def _seeded_values(shape, dtype, mode, seed):
    """Values of ``dtype`` from NumPy's generator (hypothesis would draw 10**5 elements one by one):
    moderate, spanning the whole range, with a few specials among moderate ones, or near the top."""
    rng = np.random.default_rng(seed)
    size = math.prod(shape)
    if dtype.kind in "iu":
        lo, hi = oracle.int_range(dtype)
        if mode == "moderate":
            lo, hi = max(lo, -1000), min(hi, 1000)
        elif mode == "top":
            lo = hi // 2
        return rng.integers(lo, hi, size, dtype=dtype, endpoint=True).reshape(shape)
    fi = np.finfo(np.float32 if dtype == BFLOAT16 else dtype)
    if mode == "moderate":
        values = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4)
    elif mode == "wide":  # magnitudes from the smallest normal to the largest, both signs
        values = np.exp2(rng.uniform(np.log2(float(fi.tiny)), np.log2(float(fi.max)) - 1, size))
        values *= rng.choice([-1.0, 1.0], size)
    elif mode == "special":
        values = rng.standard_normal(size)
        for special in rng.choice([math.nan, math.inf, -math.inf], rng.integers(1, 3)):
            values[rng.integers(0, size, 2)] = special
    else:  # "top": sums of these overflow every float type
        values = float(fi.max) * rng.uniform(0.5, 1.0, size)
    with np.errstate(over="ignore"):
        return values.astype(dtype).reshape(shape)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_parallel_plans_match_oracle(data):
    # The examples of test_matches_oracle are small and run the serial kernels. These reach the
    # parallel ones (rows, tiles, narrow tiles, wide rows, blocks, chunks) in every layout, for
    # every dtype and op, against the exact oracle, each call twice: the second of a C-contiguous
    # input takes the front end's shortcut for repeated calls. A random sweep of this kind, 2350
    # cases of up to 2**19.5 elements, one call each, found nothing (2026-12-02).
    opname = data.draw(st.sampled_from(OP_NAMES), label="op")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    mode = data.draw(st.sampled_from(["moderate", "wide", "special", "top"] if oracle.is_float_dtype(dtype)
                                     else ["moderate", "full", "top"]), label="values")
    base = _seeded_values(data.draw(parallel_shapes(), label="shape"), dtype, mode,
                          data.draw(st.integers(0, 2**32 - 1), label="seed"))
    if data.draw(st.booleans(), label="C-contiguous"):  # half of them: the layout repeated calls cache
        x = owner = base
    else:
        x, owner, _ = data.draw(layouts(base), label="layout")
    axes = data.draw(st.none() | st.lists(st.integers(0, x.ndim - 1), min_size=1, unique=True), label="axes")
    check_against_oracle(opname, x, axes, data.draw(FLAGS, label="keepdims"), 0, owner, calls=3)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_log_sum_exp_is_max_shifted(dtype):
    got = _one("reduce_log_sum_exp", [1000, 1000], dtype)
    want = oracle.round_fraction(oracle.Fraction(1000 + math.log(2)), dtype)
    assert got.dtype == dtype and got[()] == want  # float16 1000.5, bfloat16 1000, float32 1000.6931
    if dtype == np.float16:
        assert got[()] == 1000.5
    assert _one("reduce_log_sum_exp", [-1000, -1000], dtype)[()] == oracle.round_fraction(
        oracle.Fraction(-1000 + math.log(2)), dtype)


def test_integer_mean_is_exact_and_truncated_toward_zero():
    i32, i64, u32, u64 = (np.iinfo(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
    assert _one("reduce_mean", [i32.max, i32.max], np.int32)[()] == i32.max
    assert _one("reduce_mean", [i32.min, i32.min], np.int32)[()] == i32.min
    for dt in (np.int32, np.int64):
        assert _one("reduce_mean", [-1, -2], dt)[()] == -1
        assert _one("reduce_mean", [-7, 0, 0], dt)[()] == -2  # -2.33 -> -2 (floor would be -3)
        assert _one("reduce_mean", [np.iinfo(dt).max, np.iinfo(dt).min], dt)[()] == 0  # -0.5 -> 0
    assert _one("reduce_mean", [i64.max] * 4, np.int64)[()] == i64.max
    assert _one("reduce_mean", [i64.min, i64.min + 1], np.int64)[()] == i64.min + 1
    assert _one("reduce_mean", [i64.max, i64.max, i64.max - 1], np.int64)[()] == i64.max - 1
    assert _one("reduce_mean", [u64.max] * 3, np.uint64)[()] == u64.max
    assert _one("reduce_mean", [u64.max, u64.max - 1], np.uint64)[()] == u64.max - 1
    assert _one("reduce_mean", [u32.max] * 5, np.uint32)[()] == u32.max
    assert _one("reduce_mean", [1, 2], np.uint32)[()] == 1
    # a long row of maxima: the sum needs far more than 64 bits
    x = np.full((3, 5000), i64.max, dtype=np.int64)
    x[1] = i64.min
    x[2, ::2] = i64.min
    out = numred.reduce_mean(x, [1], keepdims=0)
    # row 2: the sum is 2500 * (MAX + MIN) = -2500, the mean -0.5 truncates to 0 (floor would give -1)
    assert out.tolist() == [i64.max, i64.min, 0]
    xu = np.full(7000, u64.max, dtype=np.uint64)
    assert numred.reduce_mean(xu, keepdims=0)[()] == u64.max


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=[d.name for d in INT_DTYPES])
def test_integer_sum_square_wraps_like_numpy(dtype):
    if dtype == np.int32:
        assert _one("reduce_sum_square", [50000, 50000], dtype)[()] == 705032704
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(4, 37), dtype=dtype, endpoint=True)
    x[0, :3] = [info.min, info.max, info.max - 1]
    with np.errstate(over="ignore"):
        want = np.sum(np.square(x, dtype=dtype), axis=1, dtype=dtype)
    got = numred.reduce_sum_square(x, [1], keepdims=0)
    assert got.dtype == dtype and got.tolist() == want.tolist()
    # and against the Python-int oracle
    check_against_oracle("reduce_sum_square", x, [0, 1], 0, 0)


def test_float16_mean_accumulates_in_float64():
    x = np.full(100000, 0.1, dtype=np.float16)
    assert _one("reduce_mean", x, np.float16)[()] == np.float16(0.1)
    assert _one("reduce_mean", [60000, 60000], np.float16)[()] == 60000  # the float16 sum overflows
    assert _one("reduce_mean", [65504] * 1000, np.float16)[()] == 65504
    check_against_oracle("reduce_mean", np.array([60000, -60000, 60000, 1], dtype=np.float16))
    # SumSquare of float16: 80000 is beyond the range (inf); 62500 rounds once to 62496
    assert _one("reduce_sum_square", [200, 200], np.float16)[()] == np.inf
    assert _one("reduce_sum_square", [250], np.float16)[()] == 62496
    assert _one("reduce_sum_square", [200, 150], np.float16)[()] == 62496


def test_bfloat16_mean_accumulates_in_float64():
    x = np.full(100000, 0.1, dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == BFLOAT16.type(0.1)
    y = np.full((2, 70001), 3.0, dtype=BFLOAT16)
    y[1, :] = 1e30
    assert numred.reduce_mean(y, -1, keepdims=0).astype(np.float64).tolist() == [3.0, float(BFLOAT16.type(1e30))]


def test_bfloat16_rounds_once_not_through_float32():
    # exact mean 1 + 2^-8 + 2^-30: just above the bfloat16 tie; via float32 it becomes the tie and
    # rounds to even (1.0). Correct: 1 + 2^-7.
    x = np.array([4.0, 2.0**-6, 2.0**-28, 0.0], dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == 1 + 2.0**-7
    # exact sum of squares 1 + 2^-8 + 2^-30
    x = np.array([1.0, 2.0**-4, 2.0**-15], dtype=BFLOAT16)
    assert _one("reduce_sum_square", x, BFLOAT16)[()] == 1 + 2.0**-7
    # and below the tie by the same margin: 1 - ... rounds down
    x = np.array([4.0, 2.0**-6, -(2.0**-28), 0.0], dtype=BFLOAT16)
    assert _one("reduce_mean", x, BFLOAT16)[()] == 1.0


def test_float16_rounds_once():
    # exact mean 1 + 2^-11 + 2^-40: just above the float16 tie at 1 + 2^-11
    x = np.array([4.0, 2.0**-9, 0.0, 0.0], dtype=np.float16)
    y = np.array([2.0**-24], dtype=np.float16)  # smallest subnormal
    assert _one("reduce_mean", x, np.float16)[()] == 1.0  # exact tie: to even
    z = np.concatenate([x, y, np.zeros(3, np.float16)])  # mean (4 + 2^-9 + 2^-24) / 8
    want = oracle.round_fraction((4 + oracle.Fraction(1, 2**9) + oracle.Fraction(1, 2**24)) / 8, np.float16)
    assert want == 0.5 + 2.0**-11
    assert _one("reduce_mean", z, np.float16)[()] == want


def test_float32_mean_of_mixed_magnitudes():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.full(5000, 1e4, np.float32), np.full(5000, 1e-3, np.float32)])
    rng.shuffle(x)
    check_against_oracle("reduce_mean", x)
    check_against_oracle("reduce_sum_square", x)
    check_against_oracle("reduce_log_sum_exp", x)
    x2 = x.reshape(100, 100)
    for axes in ([0], [1], None):
        check_against_oracle("reduce_mean", x2, axes, 0, 0)
    # the exact mean is 5000.0005; a float32 accumulation is off by far more than an ulp
    assert _one("reduce_mean", x, np.float32)[()] == np.float32(5000.0005)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_float_special_values(dtype):
    nan, inf = np.nan, np.inf
    cases = [
        ("reduce_mean", [inf, -inf], nan), ("reduce_mean", [inf, 1], inf), ("reduce_mean", [-inf, 1], -inf),
        ("reduce_mean", [nan, 1], nan), ("reduce_mean", [inf, inf], inf),
        ("reduce_log_sum_exp", [nan, inf], nan), ("reduce_log_sum_exp", [-inf, inf], inf),
        ("reduce_log_sum_exp", [-inf, -inf], -inf), ("reduce_log_sum_exp", [-inf, 2], 2),
        ("reduce_log_sum_exp", [nan, -inf], nan), ("reduce_log_sum_exp", [inf, inf, 1], inf),
        ("reduce_sum_square", [-inf, 1], inf), ("reduce_sum_square", [nan, inf], nan),
        ("reduce_sum_square", [-0.0, -0.0], 0.0), ("reduce_mean", [-0.0, 0.0], 0.0),
        ("reduce_sum", [inf, -inf], nan), ("reduce_sum", [inf, 1], inf), ("reduce_sum", [-inf, 1], -inf),
        ("reduce_sum", [nan, 1], nan), ("reduce_sum", [nan, inf], nan), ("reduce_sum", [inf, inf], inf),
        ("reduce_max", [nan, inf], nan), ("reduce_max", [-inf, 1], 1), ("reduce_max", [-inf, -inf], -inf),
        ("reduce_max", [1, nan, inf], nan), ("reduce_min", [inf, nan], nan), ("reduce_min", [inf, 1], 1),
        ("reduce_min", [-inf, 1, inf], -inf),
        ("reduce_prod", [0.0, inf], nan), ("reduce_prod", [-inf, 2], -inf), ("reduce_prod", [nan, 0.0], nan),
        ("reduce_prod", [-0.0, 3], -0.0), ("reduce_prod", [-inf, -inf], inf),
        ("reduce_l1", [nan, inf], nan), ("reduce_l1", [-inf, 1], inf), ("reduce_l1", [-0.0, -0.0], 0.0),
        ("reduce_l2", [nan, inf], nan), ("reduce_l2", [-inf, 1], inf), ("reduce_l2", [-0.0, -0.0], 0.0),
        ("reduce_log_sum", [inf, -inf], nan), ("reduce_log_sum", [inf, 1], inf), ("reduce_log_sum", [-inf, 1], nan),
        ("reduce_log_sum", [0.0, -0.0], -inf), ("reduce_log_sum", [1, -2], nan), ("reduce_log_sum", [nan, inf], nan),
    ]
    for opname, vals, want in cases:
        got = _one(opname, vals, dtype)
        assert got.dtype == dtype
        g = float(got[()])
        assert (math.isnan(g) and math.isnan(want)) or g == want, (opname, vals, g, want)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=[d.name for d in FLOAT_DTYPES])
def test_max_and_min_order_negative_zero_below_positive_zero(dtype):
    # -0.0 < +0.0 (the contract), in either order, on serial, parallel-row and tile layouts
    for shape, axis in (((2,), 0), ((400, 300), 1), ((300, 400), 0)):
        for first in (-0.0, 0.0):
            x = np.full(shape, first, dtype=dtype)
            x[(slice(None),) * axis + (slice(1, None, 2),)] = -first  # every other element along the axis
            mx, mn = numred.reduce_max(x, [axis], keepdims=0), numred.reduce_min(x, [axis], keepdims=0)
            assert not np.signbit(mx.astype(np.float64)).any() and np.signbit(mn.astype(np.float64)).all(), (shape, first)
        x = np.full(shape, -0.0, dtype=dtype)  # all -0.0: both are -0.0
        assert np.signbit(numred.reduce_max(x, [axis]).astype(np.float64)).all(), shape


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_empty_reduced_set(opname, dtype):
    x = np.zeros((2, 0, 3), dtype=dtype)
    int_info = None if oracle.is_float_dtype(dtype) else np.iinfo(dtype)
    empty = {"reduce_mean": np.nan, "reduce_log_sum_exp": -np.inf, "reduce_sum_square": 0.0, "reduce_sum": 0.0,
             "reduce_max": -np.inf if int_info is None else int(int_info.min),
             "reduce_min": np.inf if int_info is None else int(int_info.max), "reduce_prod": 1.0, "reduce_l1": 0.0,
             "reduce_l2": 0.0,
             "reduce_log_sum": -np.inf}[opname]
    for axes, shape in ([[1], (2, 1, 3)], [None, (1, 1, 1)], [[0, 1], (1, 1, 3)]):
        if oracle.is_float_dtype(dtype) or opname in ("reduce_sum_square", "reduce_sum", "reduce_max", "reduce_min",
                                                      "reduce_prod", "reduce_l1", "reduce_l2"):
            out = FUNCS[opname](x, axes, keepdims=1)
            assert out.dtype == dtype and out.shape == shape
            vals = out.astype(np.float64) if int_info is None else out.astype(object)
            assert (np.isnan(vals).all() if np.isnan(empty) else (vals == empty).all()), vals
        else:
            with pytest.raises(ValueError):
                FUNCS[opname](x, axes, keepdims=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_empty_kept_set_gives_empty_output(opname, dtype):
    # output has zero elements: no error even for integer mean / LSE
    x = np.zeros((0, 3), dtype=dtype)
    for axes, kd, shape in ([[1], 1, (0, 1)], [[1], 0, (0,)], [[-1], 1, (0, 1)]):
        out = FUNCS[opname](x, axes, kd)
        assert type(out) is np.ndarray and out.dtype == dtype and out.shape == shape
    y = np.zeros((0, 0, 2), dtype=dtype)
    out = FUNCS[opname](y, [1], 0)
    assert out.shape == (0, 2) and out.dtype == dtype


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=[d.name for d in INT_DTYPES])
def test_integer_log_sum_exp_values(dtype):
    signed = dtype.kind == "i"
    cases = [([5] * 8, 7), ([5, 4, 4, 4, 4, 4], 6), ([7], 7), ([0, 0], 0), ([3, 0], 3)]
    if signed:
        cases += [([-5] * 8, -2), ([-3, -4], -2), ([-7], -7)]
    for vals, want in cases:
        got = _one("reduce_log_sum_exp", vals, dtype)
        assert got.dtype == dtype and got[()] == want, (vals, got, want)
    mx = int(np.iinfo(dtype).max)
    assert _one("reduce_log_sum_exp", [mx, mx], dtype)[()] == mx  # + log 2 < 1: fits
    assert _one("reduce_log_sum_exp", [mx, mx - 5], dtype)[()] == mx
    assert _one("reduce_log_sum_exp", [mx - 3] * 3, dtype)[()] == mx - 2


# ---- API surface -----------------------------------------------------------------------------------


@pytest.mark.parametrize("opname", OP_NAMES)
def test_public_signature(opname):
    import inspect

    sig = inspect.signature(FUNCS[opname])
    params = [(p.name, p.default) for p in sig.parameters.values()]
    assert params == [("data", inspect.Parameter.empty), ("axes", None), ("keepdims", 1),
                      ("noop_with_empty_axes", 0)]
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = FUNCS[opname](data=x, axes=[1], keepdims=0, noop_with_empty_axes=0)
    oracle.assert_matches(out, oracle.expected(opname, x, [1], 0, 0))


@pytest.mark.parametrize("opname", OP_NAMES)
def test_python_scalar_and_range_axes(opname):
    # a Python float is rank-0 float64 data; a range is a sequence of ints
    out = FUNCS[opname](2.0)
    assert type(out) is np.ndarray and out.shape == () and out.dtype == np.float64
    oracle.assert_matches(out, oracle.expected(opname, np.asarray(2.0)))
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    check_against_oracle(opname, x, range(1, 3), 0, 0)


# ---- float64 accuracy: "error no worse than NumPy's pairwise summation" ---------------------------


def _exact_mean_and_sumsq(x):
    values = x.tolist()
    return oracle.exact_sum(values) / len(values), oracle.exact_sum(values, squares=True)


@pytest.mark.parametrize("kind", ["uniform", "tenths", "mixed-magnitudes", "cancelling"])
def test_float64_error_no_worse_than_numpy_pairwise(kind):
    rng = np.random.default_rng(17)
    n = 40_000
    if kind == "uniform":
        x = rng.random(n)
    elif kind == "tenths":
        x = np.full(n, 0.1)
    elif kind == "mixed-magnitudes":
        x = np.concatenate([np.full(n // 2, 1e8), rng.random(n // 2) * 1e-3])
        rng.shuffle(x)
    else:
        x = np.concatenate([rng.random(n // 2) * 1e3, -rng.random(n // 2) * 1e3])
        rng.shuffle(x)
    mean_exact, sumsq_exact = _exact_mean_and_sumsq(x)
    F = oracle.Fraction
    for opname, exact, peer in [
        ("reduce_mean", mean_exact, np.mean(x)),
        ("reduce_sum", mean_exact * n, np.sum(x)),
        ("reduce_sum_square", sumsq_exact, np.sum(np.square(x))),
    ]:
        got = FUNCS[opname](x, None, keepdims=0)
        assert got.dtype == np.float64 and got.shape == ()
        err = abs(F(float(got[()])) - exact)
        err_numpy = abs(F(float(peer)) - exact)
        allowed = err_numpy + 2 * oracle.ulp(exact, np.float64)
        assert err <= allowed, f"{opname} {kind}: error {float(err):.3g} > numpy's {float(err_numpy):.3g} + 2 ulp"


# float64 sums and sums of squares along runs are nearly exact (kernels.split_sums._float64_run_for): the result is
# the float64 rounding of a sum within n * 2**-100 of the sum of the terms' magnitudes of the exact
# one (a mean: that rounded sum divided by n and rounded again), where NumPy's pairwise sum and a
# plain vectorised one err by up to about 2**-53 of it times a factor growing with n. Cancelling data
# (sums some 1e-16 of sum |x|), in random order and in sorted halves, along rows (long, strided, every
# other element, short).
@pytest.mark.parametrize("order", ["shuffled", "halves"])
@pytest.mark.parametrize("seed", range(4))
def test_float64_sums_along_runs_are_nearly_exact(seed, order):
    rng = np.random.default_rng(100 + seed)
    half = rng.random((6, 3000)) * 10.0 ** rng.integers(-3, 9)
    x = np.concatenate([half, -rng.permuted(half, axis=1) * (1 + 2.0**-40)], axis=1)  # sums far below sum|x|
    if order == "shuffled":
        x = rng.permuted(x, axis=1)
    for view in (x, x[:, ::3], x[:, ::2], x[:, :37]):
        for opname in ("reduce_mean", "reduce_sum", "reduce_sum_square"):
            got = FUNCS[opname](view, [1], keepdims=0)
            for k, row in enumerate(view.tolist()):
                lowest, highest = oracle.nearly_exact_float64_interval(row, opname)
                assert lowest <= got[k] <= highest, \
                    f"{opname} {order} row {k} of {view.shape}: {got[k]!r} outside [{lowest!r}, {highest!r}]"


# The split sums of a float64 run start each piece (kernels.split_sums.SPLIT_PIECE elements) from the sigma of
# the piece before, in the same row or the row before in the same task, and must notice when it is
# wrong: here the magnitude jumps by 2**+-40 from row to row and within rows (both a sigma far too
# small, which would make the high parts inexact, and one far too large, which would make the low
# parts inexact), and NaN or inf arrives after finite pieces. Rows of one piece are split-summed
# without the general row's compensated additions, from the sigma of the row before; so are short
# rows of every other element (read over their whole span), and contiguous rows from
# kernels.split_sums.ONE_PASS_MIN_ROW elements on (600 rows of 64: a parallel-sized input).
@pytest.mark.parametrize("layout", ["three pieces", "one piece", "every other element", "short rows"])
def test_float64_split_sums_notice_magnitude_jumps(layout):
    from numred.kernels.split_sums import ONE_PASS_MIN_ROW, SPLIT_PIECE

    rng = np.random.default_rng(7)
    n_rows = 600 if layout == "short rows" else 64  # tasks of four rows; three equal pieces per row, or one
    n = {"three pieces": 3 * SPLIT_PIECE - 300, "one piece": SPLIT_PIECE - 100, "every other element": 96,
         "short rows": 64}[layout]
    assert layout != "short rows" or n >= ONE_PASS_MIN_ROW
    piece = -(-n // 3)
    half = rng.random((n_rows, n // 2)) * 2.0 ** rng.integers(-40, 41, size=(n_rows, 1))
    x = np.concatenate([half, -rng.permuted(half, axis=1) * (1 + 2.0**-40)], axis=1)
    if layout == "every other element":  # the same values, each followed by a copy the view skips
        x = np.repeat(x, 2, axis=1)[:, ::2]
    x[::3, piece:2 * piece] *= 2.0**40  # the middle piece of every third row
    x[1::3, piece:2 * piece] *= 2.0**-40
    F = oracle.Fraction
    rows = x.tolist()
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, [1], keepdims=0)
        for k, row in enumerate(rows):
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(row) / n, oracle.exact_sum(row, magnitudes=True) / n
            else:
                exact = bound = oracle.exact_sum([v * v for v in row])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + n * F(2) ** -100 * bound, \
                f"{opname} row {k}: error {float(err):.3g}, exact {float(exact):.6g}"
    # the general kernel: several runs per output (axes 0 and 2), their magnitudes 2**+-40 apart
    y = rng.random((8, 5, 1500)) * 2.0 ** np.array([40, -40] * 4)[:, None, None]
    y[:, :, 750:] = -y[:, :, :750] * (1 + 2.0**-40)
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](y, [0, 2], keepdims=0)
        for k in range(5):
            row = y[:, k, :].ravel().tolist()
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(row) / len(row), oracle.exact_sum(row, magnitudes=True) / len(row)
            else:
                exact = bound = oracle.exact_sum([v * v for v in row])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + len(row) * F(2) ** -100 * bound, (opname, k)
    late = min(100, n // 4)
    x[5, n - 1] = np.nan  # in the last piece
    x[9, n - late] = np.inf
    x[9, n - late + 1] = -np.inf
    x[13, n - 2 * late] = np.inf
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, [1], keepdims=0)
        assert np.isnan(got[5]), opname
        assert np.isnan(got[9]) if opname == "reduce_mean" else got[9] == np.inf, opname  # inf - inf; inf + inf
        assert got[13] == np.inf, opname


# float64 column sums (a leading reduced axis) add each column's rows in plain float64 accumulators
# of at most 256 terms each, folded into compensated totals; short rows are read as "wide rows" of
# several rows at once, with one accumulator per column and position. Cancelling columns, exact
# oracle: within one rounding plus 2**-44 (2 * 256 * 2**-53) of the sum of |x|; NumPy's row-by-row
# column sums err by up to n * 2**-53 of it. Columns of fewer than 256 rows are never folded (their
# plain sums are the totals), 256 rows are folded once (16x4096, 255x200, 256x200).
@pytest.mark.parametrize("shape, axes", [((150000, 4), [0]), ((3000, 64), [0]), ((40, 75, 64), [0, 1]),
                                         ((16, 4096), [0]), ((255, 200), [0]), ((256, 200), [0])])
def test_float64_column_sums_fold_their_accumulators(shape, axes):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, size=shape)
    x -= x.mean(axis=tuple(axes), keepdims=True)  # sums far below sum |x|
    F = oracle.Fraction
    columns = np.moveaxis(x, axes, list(range(len(axes)))).reshape(-1, x.shape[-1]).T
    for opname in ("reduce_mean", "reduce_sum_square"):
        got = FUNCS[opname](x, axes, keepdims=0).reshape(-1)
        for k, column in enumerate(columns):
            values = column.tolist()
            if opname == "reduce_mean":
                exact, bound = oracle.exact_sum(values) / len(values), oracle.exact_sum(values, magnitudes=True) / len(values)
            else:
                exact = bound = oracle.exact_sum([v * v for v in values])
            err = abs(F(float(got[k])) - exact)
            assert err <= oracle.ulp(exact, np.float64) + F(2) ** -44 * bound, (opname, shape, k, float(err))
