"""Malformed calls, fuzzed with hypothesis (the error rows of docs/SEMANTICS.md one by one are in
tests/test_contract_errors.py).

Every drawn call has at least one argument that docs/SEMANTICS.md makes an error (an unsupported
dtype or non-array data, a wrong axes value, a flag other than 0/1/False/True); the other arguments
are drawn valid or invalid at random. numred must raise TypeError or ValueError (numpy's AxisError
is a ValueError) with a non-empty message, never another exception, never crash, and must leave an
ndarray input untouched. ``contract_accepts`` re-decides validity from the contract for every drawn
call, so a strategy bug that draws a valid call fails loudly as a test bug, not as a numred bug.

One batch also runs in a subprocess so that a crash (segfault, abort) is reported as a failure of
this test instead of killing the test run.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numred
from numred._registry import OPS

OP_NAMES = tuple(op.name for op in OPS)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SUPPORTED = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64)}
SUPPORTED.add(BFLOAT16)


# ---- the contract's validity predicate (independent of the strategies) ------------------------------


def _native(d: np.dtype) -> np.dtype:
    return d.newbyteorder("=") if d.byteorder not in ("=", "|") else d


NARROW_INT_OPS = ("reduce_max", "reduce_min")  # they take int8 and uint8 too
NARROW_INTS = (np.dtype(np.int8), np.dtype(np.uint8))


def _contract_data(data, narrow_ints=False):
    """The ndarray the contract accepts for `data` (``narrow_ints``: int8 and uint8 too), or None
    when `data` is an error."""
    try:
        x = np.asarray(data)
    except Exception:  # ragged lists and objects NumPy refuses: not convertible, an error
        return None
    if x.dtype.fields is not None or x.dtype.subdtype is not None:
        return None
    return x if _native(x.dtype) in SUPPORTED or (narrow_ints and _native(x.dtype) in NARROW_INTS) else None


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _contract_axes_ok(axes, ndim: int) -> bool:
    """None, a Python int, a sequence of ints or a 1-D integer ndarray; values in [-r, r-1], no
    duplicates after normalisation (an empty sequence is valid)."""
    if axes is None:
        return True
    if isinstance(axes, np.ndarray):
        if axes.ndim != 1 or axes.dtype.kind not in "iu":
            return False
        values = [int(v) for v in axes]
    elif _is_int(axes):
        values = [int(axes)]
    elif isinstance(axes, (str, bytes)) or not isinstance(axes, Sequence):
        return False
    else:
        if not all(_is_int(v) for v in axes):
            return False
        values = [int(v) for v in axes]
    if not all(-ndim <= v < ndim for v in values):
        return False
    norm = [v % ndim for v in values]
    return len(set(norm)) == len(norm)


def _contract_flag_ok(v) -> bool:
    # "0, 1, False or True (Python or NumPy integers)"
    return isinstance(v, (bool, np.bool_, int, np.integer)) and not isinstance(v, np.ndarray) and v in (0, 1)


def contract_accepts(data, axes, keepdims, noop, opname="reduce_mean") -> bool:
    """Whether the call of ``opname`` is well-formed per docs/SEMANTICS.md (value errors such as an
    integer mean over an empty set are not drawn here: every drawn call is malformed in its form)."""
    x = _contract_data(data, opname in NARROW_INT_OPS)
    if x is None:
        return False
    return _contract_axes_ok(axes, x.ndim) and _contract_flag_ok(keepdims) and _contract_flag_ok(noop)


def test_contract_predicate_on_hand_examples():
    x = np.zeros((2, 3), np.float32)
    assert contract_accepts(x, None, 1, 0)
    assert contract_accepts(x, [0, 1], True, np.int64(0))
    assert contract_accepts(x, np.array([-1], np.int32), np.uint8(1), False)
    assert contract_accepts(x, [], 0, 1) and contract_accepts(x, (), 0, 0)
    assert contract_accepts([[1, 2]], 0, 1, 0)
    assert not contract_accepts(x, [1, -1], 1, 0)
    assert not contract_accepts(x, 2, 1, 0)
    assert not contract_accepts(x, 1.0, 1, 0)
    assert not contract_accepts(x, [True], 1, 0)
    assert not contract_accepts(x, np.array([[0]]), 1, 0)
    assert not contract_accepts(x, None, 2, 0)
    assert not contract_accepts(x, None, 1, 1.0)
    assert not contract_accepts(np.zeros(3, np.int8), None, 1, 0)
    assert contract_accepts(np.zeros(3, np.int8), None, 1, 0, "reduce_max")
    assert not contract_accepts([[1, 2], [3]], None, 1, 0)


# ---- strategies: each drawn call has at least one malformed argument --------------------------------

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)


def _supported_dtypes():
    natives = st.sampled_from(sorted(SUPPORTED, key=str))
    swapped = natives.filter(lambda d: d.itemsize > 1 and d != BFLOAT16).map(lambda d: d.newbyteorder(">"))
    return st.one_of(natives, swapped)


@st.composite
def valid_data(draw):
    dtype = draw(_supported_dtypes())
    shape = draw(shapes)
    if dtype == BFLOAT16:
        return draw(hnp.arrays(np.float32, shape, elements=st.floats(-4, 4, width=32))).astype(BFLOAT16)
    x = draw(hnp.arrays(dtype, shape))
    if draw(st.booleans()) and x.ndim >= 1:
        x = x[::-1]  # a view, not a fresh array
    return x


_bad_array_dtypes = st.one_of(
    hnp.boolean_dtypes(),
    hnp.integer_dtypes(sizes=(8, 16)),
    hnp.unsigned_integer_dtypes(sizes=(8, 16)),
    hnp.complex_number_dtypes(),
    hnp.datetime64_dtypes(),
    hnp.timedelta64_dtypes(),
    hnp.unicode_string_dtypes(max_len=4),
    hnp.byte_string_dtypes(max_len=4),
    hnp.array_dtypes(allow_subarrays=False, max_size=3),  # structured
    st.sampled_from([np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                     np.dtype(ml_dtypes.int4)]),
)


@st.composite
def bad_dtype_arrays(draw):
    dtype = draw(_bad_array_dtypes)
    shape = draw(shapes)
    if dtype.kind == "V" or dtype in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                                      np.dtype(ml_dtypes.int4)):
        return np.zeros(shape, dtype=dtype)
    return draw(hnp.arrays(dtype, shape))


@st.composite
def object_arrays(draw):
    shape = draw(shapes)
    vals = draw(st.lists(st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.none(), st.text(max_size=2)),
                         min_size=math.prod(shape), max_size=math.prod(shape)))
    a = np.empty(len(vals), dtype=object)
    a[:] = vals
    return a.reshape(shape)


class _Thing:
    def __repr__(self):
        return "<_Thing>"


bad_data = st.one_of(
    bad_dtype_arrays(),
    object_arrays(),
    st.just(None),
    st.builds(_Thing),
    st.builds(object),
    st.just({"a": 1}),
    st.just({1, 2}),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.booleans(),
    st.complex_numbers(allow_nan=False, max_magnitude=10),
    st.lists(st.booleans(), min_size=1, max_size=4),
    st.lists(st.complex_numbers(allow_nan=False, max_magnitude=10).filter(lambda c: c.imag != 0),
             min_size=1, max_size=3),
    st.lists(st.one_of(st.integers(-3, 3), st.text(min_size=1, max_size=2)), min_size=1, max_size=4)
    .filter(lambda v: any(isinstance(e, str) for e in v)),
    # ragged nested lists
    st.sampled_from([[[1, 2], [3]], [1, [2, 3]], [[1.0], 2.0], [[[1]], [2]], [[], [1]], [[1, 2], [3, 4, 5]]]),
    st.lists(st.one_of(st.integers(-3, 3), st.none()), min_size=1, max_size=4)
    .filter(lambda v: None in v),
    st.lists(st.integers(min_value=2**64), min_size=1, max_size=2),  # beyond every integer dtype
)

_out_of_range_int = st.integers(0, 2**70)  # offset past the valid range, added below


@st.composite
def bad_axes(draw, ndim):
    """An axes argument the contract rejects for data of rank `ndim`."""
    kinds = ["float", "float_array", "string", "nested", "none_inside", "out_of_range", "out_of_range_list",
             "bool", "bool_array", "array_2d", "object", "object_array"]
    if ndim >= 1:
        kinds.append("duplicate")
    kind = draw(st.sampled_from(kinds))
    if kind == "float":
        return draw(st.one_of(st.floats(), st.floats(width=32).map(np.float32), st.just(np.float64(0.0))))
    if kind == "float_array":
        return draw(hnp.arrays(st.sampled_from([np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16)]),
                               st.integers(1, 3), elements=st.floats(-3, 3, width=16)))
    if kind == "string":
        return draw(st.one_of(st.text(min_size=1, max_size=3), st.binary(min_size=1, max_size=3),
                              st.lists(st.text(max_size=2), min_size=1, max_size=2)))
    if kind == "nested":
        return draw(st.sampled_from([[[0]], [[0, 1]], [0, [1]], [[0], [1]], [[]], [(0,)], [[0], 1]]))
    if kind == "none_inside":
        lst = draw(st.lists(st.integers(-ndim, max(ndim - 1, 0)), max_size=2))
        pos = draw(st.integers(0, len(lst)))
        return lst[:pos] + [None] + lst[pos:]
    if kind == "out_of_range":
        off = draw(_out_of_range_int)
        return ndim + off if draw(st.booleans()) else -ndim - 1 - off
    if kind == "out_of_range_list":
        off = draw(st.integers(0, 100))
        bad = ndim + off if draw(st.booleans()) else -ndim - 1 - off
        good = draw(st.lists(st.integers(0, ndim - 1), max_size=1, unique=True)) if ndim else []
        lst = good + [bad]
        return np.array(lst, dtype=np.int64) if draw(st.booleans()) else lst
    if kind == "bool":
        return draw(st.one_of(st.booleans(), st.booleans().map(np.bool_), st.lists(st.booleans(), min_size=1,
                                                                                   max_size=2)))
    if kind == "bool_array":
        return draw(hnp.arrays(np.bool_, st.integers(1, 3)))
    if kind == "array_2d":
        return draw(hnp.arrays(st.sampled_from([np.dtype(np.int64), np.dtype(np.int32)]),
                               hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=2),
                               elements=st.integers(0, max(ndim - 1, 0))))
    if kind == "object":
        return draw(st.sampled_from([object(), _Thing(), {0: 1}, 1j, Fraction(1, 2), Decimal("1.5"),
                                     [1j], [Fraction(1, 3)], (Decimal("0.5"),), [object()]]))
    if kind == "object_array":
        a = np.empty(draw(st.integers(1, 2)), dtype=object)
        a[:] = 0
        return a
    # duplicate: the same axis twice, possibly once negative
    a = draw(st.integers(0, ndim - 1))
    b = a - ndim if draw(st.booleans()) else a
    lst = draw(st.permutations([a, b] + draw(st.lists(st.integers(0, ndim - 1), max_size=1))))
    return np.array(lst, dtype=draw(st.sampled_from([np.int64, np.int32]))) if draw(st.booleans()) else list(lst)


def good_axes(ndim):
    if ndim == 0:
        return st.sampled_from([None, [], (), np.array([], dtype=np.int64)])
    return st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).map(list),
        st.lists(st.integers(0, ndim - 1), unique=True, min_size=1, max_size=ndim).map(
            lambda v: np.array(v, dtype=np.int64)),
    )


bad_flags = st.one_of(
    st.integers().filter(lambda v: v not in (0, 1)),
    st.sampled_from([2, -1, 255, 2**64, np.int64(2), np.int32(-1), np.uint8(7)]),
    st.floats(),  # 0.0 and 1.0 included: the contract takes integers only
    st.sampled_from([1.5, 1.0, 0.0, np.float64(1.0), np.float32(0.0), 1 + 0j, Fraction(1), Decimal(0)]),
    st.sampled_from(["1", "0", "True", "", b"1"]),
    st.none(),
    st.sampled_from([[1], [0], (1,), np.array([1]), np.array([0, 1]), np.array(2), np.array([True])]),
    st.builds(object),
)
good_flags = st.sampled_from([0, 1, True, False, np.int64(1), np.int32(0), np.bool_(True), np.uint8(0)])


@st.composite
def malformed_calls(draw):
    """(opname, data, axes, keepdims, noop, call style, which argument is malformed)."""
    opname = draw(st.sampled_from(OP_NAMES))
    wrong = draw(st.sets(st.sampled_from(["data", "axes", "keepdims", "noop"]), min_size=1, max_size=2))
    if "data" in wrong:  # (int8 and uint8 data are not bad for ReduceMax and ReduceMin)
        data = draw(bad_data.filter(lambda d: _contract_data(d, opname in NARROW_INT_OPS) is None))
    else:
        data = draw(valid_data())
    ndim = np.ndim(data) if isinstance(data, np.ndarray) else draw(st.integers(0, 2))
    if "axes" in wrong:
        axes = draw(bad_axes(ndim))
    else:
        axes = draw(st.one_of(good_axes(ndim), bad_axes(ndim)) if "data" in wrong else good_axes(ndim))
    keepdims = draw(bad_flags if "keepdims" in wrong else good_flags)
    noop = draw(bad_flags if "noop" in wrong else good_flags)
    style = draw(st.sampled_from(["positional", "keywords", "mixed"]))
    return opname, data, axes, keepdims, noop, style, sorted(wrong)


def _call(opname, data, axes, keepdims, noop, style):
    func = getattr(numred, opname)
    if style == "positional":
        return func(data, axes, keepdims, noop)
    if style == "keywords":
        return func(data, axes=axes, keepdims=keepdims, noop_with_empty_axes=noop)
    return func(data, axes, noop_with_empty_axes=noop, keepdims=keepdims)


def _snapshot(data):
    if not isinstance(data, np.ndarray):
        return None
    return data.dtype, data.shape, data.strides, data.tobytes()


def check_malformed_call(call):
    opname, data, axes, keepdims, noop, style, wrong = call
    desc = (f"{opname}(data={data!r:.200}, axes={axes!r:.100}, keepdims={keepdims!r}, "
            f"noop_with_empty_axes={noop!r}) [{style}; malformed: {wrong}]")
    assert not contract_accepts(data, axes, keepdims, noop, opname), f"test bug: the strategy drew a valid call: {desc}"
    before = _snapshot(data)
    try:
        result = _call(opname, data, axes, keepdims, noop, style)
    except (TypeError, ValueError) as exc:
        assert str(exc).strip(), f"{type(exc).__name__} with an empty message for {desc}"
    except BaseException as exc:  # noqa: BLE001 - any other exception is the failure being tested
        raise AssertionError(f"{type(exc).__name__}: {exc} (expected TypeError or ValueError) for {desc}") from exc
    else:
        raise AssertionError(f"no error for {desc}; returned {result!r:.200}")
    if before is not None:
        assert _snapshot(data) == before, f"the input was modified by {desc}"


FUZZ_SETTINGS = settings(max_examples=300, deadline=None, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                HealthCheck.data_too_large])


@FUZZ_SETTINGS
@given(call=malformed_calls())
def test_malformed_calls_raise_type_or_value_error(call):
    check_malformed_call(call)


# A batch in a separate interpreter: a segfault or abort there is a failed assertion here.
_CRASH_BATCH = """
import sys
sys.path.insert(0, {tests_dir!r})
from hypothesis import given, seed, settings, HealthCheck
import test_contract_errors_fuzzed as m

@seed(20240917)  # fixed, reproducible, and other examples than the in-process test's
@settings(max_examples=300, deadline=None, database=None, derandomize=False,
          suppress_health_check=list(HealthCheck))
@given(call=m.malformed_calls())
def batch(call):
    m.check_malformed_call(call)

batch()
print("BATCH-OK")
"""


@pytest.mark.slow
def test_malformed_calls_do_not_crash_the_interpreter():
    import numred as pkg

    tests_dir = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.abspath(pkg.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, tests_dir, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_CRASH_BATCH.format(tests_dir=tests_dir))],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert proc.returncode >= 0, f"the fuzz batch crashed (signal {-proc.returncode}):\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and "BATCH-OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
