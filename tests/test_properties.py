"""Property tests: numred against the independent oracle (tests/oracle.py) over all eight dtypes,
ranks 0-5, zero-size dimensions, every memory layout and every form of the arguments, at small and
at parallel sizes. The targeted value rows of docs/SEMANTICS.md are in tests/test_contract_values.py.
"""
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


# ---- at parallel sizes, every plan ---------------------------------------------------------------


SIDES = [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 31, 64, 65, 100, 257, 300, 1000]


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
