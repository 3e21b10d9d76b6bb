"""Every error row of docs/SEMANTICS.md through the public functions: the exception type, a message
that names the problem, and the input left untouched. Malformed calls drawn at random are in
tests/test_contract_errors_fuzzed.py."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import numred
from numred._frontend import _repeat_key
from numred._registry import OPS, OPS_BY_NAME

OP_NAMES = [op.name for op in OPS]
SUPPORTED = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")


@pytest.fixture(params=OP_NAMES)
def func(request):
    return getattr(numred, request.param)


def _snapshot(a):
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def check_raises(func, data, exc, match, *args, **kwargs):
    """func(data, ...) raises exc with a message matching `match`; data is not modified."""
    before = _snapshot(data) if isinstance(data, np.ndarray) else None
    with pytest.raises(exc, match=match) as info:
        func(data, *args, **kwargs)
    if before is not None:
        assert _snapshot(data) == before, "the input was modified"
    return info


# ---- dtypes ----------------------------------------------------------------------------------

UNSUPPORTED = {
    "bool": np.array([True, False, True]),
    "int8": np.array([1, 2, 3], dtype=np.int8),
    "int16": np.array([1, 2, 3], dtype=np.int16),
    "uint8": np.array([1, 2, 3], dtype=np.uint8),
    "uint16": np.array([1, 2, 3], dtype=np.uint16),
    "complex64": np.array([1, 2, 3], dtype=np.complex64),
    "complex128": np.array([1, 2, 3], dtype=np.complex128),
    "object": np.array([1, 2, 3], dtype=object),
    "str": np.array(["1", "2", "3"]),
    "bytes": np.array([b"1", b"2"]),
    "datetime64": np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]"),
    "timedelta64": np.array([1, 2], dtype="timedelta64[s]"),
    "float8_e4m3fn": np.array([1, 2, 3], dtype=ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.array([1, 2, 3], dtype=ml_dtypes.float8_e5m2),
    "int4": np.array([1, 2, 3], dtype=ml_dtypes.int4),
    "structured": np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]),
    "longdouble": np.array([1, 2, 3], dtype=np.longdouble),
}


def _dtype_pattern(a):
    d = a.dtype
    names = {str(d), d.name, repr(d), d.str}
    if d.kind == "U":
        names |= {"str", "unicode"}
    if d.kind == "S":
        names |= {"bytes"}
    if d.kind == "V":
        names |= {"structured", "void"}
    return "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))


def _supported_after_all(func, name, data) -> bool:
    """ReduceMax and ReduceMin take int8 and uint8 (ONNX's type lists): then check they compute."""
    if name not in ("int8", "uint8") or not OPS_BY_NAME[func.__name__].narrow_ints:
        return False
    got = func(data, None, 1, 0)
    want = OPS_BY_NAME[func.__name__].numpy_peer(data, None, True)
    assert got.dtype == data.dtype and np.array_equal(got, want), (got, want)
    return True


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_dtype_raises_type_error_naming_it(func, name):
    data = UNSUPPORTED[name]
    if _supported_after_all(func, name, data):
        return
    if name == "longdouble" and np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 on this platform")
    info = check_raises(func, data, TypeError, _dtype_pattern(data))
    msg = str(info.value)
    missing = [s for s in SUPPORTED if s not in msg]
    assert not missing, f"the message does not list the supported dtypes {missing}: {msg!r}"
    if name in ("int8", "uint8"):
        assert "ReduceMax and ReduceMin also int8 and uint8" in msg


@pytest.mark.parametrize("name", ["bool", "int8", "complex128"])
def test_unsupported_dtype_raises_for_every_argument_form(func, name):
    # the dtype check does not depend on axes / keepdims / noop or on the data being a view
    data = np.stack([UNSUPPORTED[name]] * 2)
    if _supported_after_all(func, name, data):
        return
    for axes, kd, noop in [(None, 1, 0), ([1], 0, 0), ([], 1, 1), (None, 0, 1)]:
        check_raises(func, data[:, ::-1], TypeError, _dtype_pattern(data), axes, kd, noop)


def test_python_bool_list_is_unsupported(func):
    check_raises(func, [True, False], TypeError, "bool")


# ---- axes ------------------------------------------------------------------------------------

AXIS_MSG = r"(?i)ax[ie]s|out of (range|bounds)|dimension"


@pytest.mark.parametrize("axes", [3, -4, [0, 3], (5,), [-4], np.array([3]), np.array([0, -4], dtype=np.int32),
                                  # beyond a C int or long (NumPy's normalize_axis_tuple overflows on these)
                                  2**31, -(2**31) - 1, [0, 2**63], (-(2**70),), np.array([2**40]),
                                  np.array([2**63], dtype=np.uint64)],
                         ids=repr)
def test_axes_out_of_range_raise_axis_error(func, axes):
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    info = check_raises(func, data, np.exceptions.AxisError, AXIS_MSG, axes)
    assert isinstance(info.value, ValueError)  # the contract: AxisError is a ValueError


@pytest.mark.parametrize("noop", [0, 1])
def test_axes_out_of_range_raise_with_noop_too(func, noop):
    data = np.ones((2, 2), dtype=np.int64)
    check_raises(func, data, np.exceptions.AxisError, AXIS_MSG, [2], 1, noop)


@pytest.mark.parametrize("axes", [[0], 0, -1, [-1], np.array([0])], ids=repr)
def test_rank0_data_with_an_axis_raises_axis_error(func, axes):
    data = np.array(3.0, dtype=np.float64)
    check_raises(func, data, np.exceptions.AxisError, AXIS_MSG, axes)


DUP_MSG = r"(?i)duplicat|repeat|more than once|twice|unique"


@pytest.mark.parametrize("axes", [[1, 1], [1, -2], (0, 0), [2, 0, -1], np.array([2, -1]),
                                  np.array([0, 0], dtype=np.int32)], ids=repr)
def test_duplicate_axes_raise_value_error(func, axes):
    data = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check_raises(func, data, ValueError, DUP_MSG, axes)


NONINT_MSG = r"(?i)ax[ie]s|integer|int\b"


@pytest.mark.parametrize(
    "axes",
    [1.0, True, False, "1", [0, 1.5], [1.0], [True], [0, "1"], (np.float64(1),), np.array([1.0]),
     np.array([True]), np.array(["1"])],
    ids=repr,
)
def test_non_integer_axes_raise_type_error(func, axes):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_raises(func, data, TypeError, NONINT_MSG, axes)


@pytest.mark.parametrize("axes", [np.array([[0, 1]]), np.array([[0], [1]]), np.zeros((1, 1, 1), dtype=np.int64)],
                         ids=lambda a: f"shape{a.shape}")
def test_axes_ndarray_of_rank_above_one_raises_value_error(func, axes):
    data = np.arange(6, dtype=np.float64).reshape(2, 3)
    check_raises(func, data, ValueError, r"(?i)ax[ie]s|1-?d|rank|dimension", axes)


# ---- keepdims / noop_with_empty_axes ----------------------------------------------------------

BAD_FLAGS = [2, -1, 0.5, 1.0, "1", "True", None, np.int64(2), np.float64(0.0), [1]]


@pytest.mark.parametrize("value", BAD_FLAGS, ids=repr)
def test_bad_keepdims_raises_value_error(func, value):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_raises(func, data, ValueError, r"keepdims", [1], keepdims=value)


@pytest.mark.parametrize("value", BAD_FLAGS, ids=repr)
def test_bad_noop_with_empty_axes_raises_value_error(func, value):
    data = np.arange(6, dtype=np.int64).reshape(2, 3)
    check_raises(func, data, ValueError, r"noop_with_empty_axes", None, noop_with_empty_axes=value)


# ---- empty reduced sets and overflow for integers ----------------------------------------------

INT_DTYPES = [np.int32, np.int64, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_log_sum_exp"])
@pytest.mark.parametrize(
    "shape,axes",
    [((0,), None), ((2, 0), [1]), ((0, 3), [0]), ((0,), []), ((3, 0, 2), [1, 2]), ((4, 0), None)],
    ids=["0-all", "2x0-ax1", "0x3-ax0", "0-emptyaxes", "3x0x2-ax12", "4x0-all"],
)
def test_integer_empty_reduced_set_raises_value_error(opname, dtype, shape, axes):
    data = np.zeros(shape, dtype=dtype)
    check_raises(getattr(numred, opname), data, ValueError, r"(?i)empty", axes)


@pytest.mark.parametrize(
    "data",
    [
        np.array([np.iinfo(np.int64).max] * 3, dtype=np.int64),
        np.array([np.iinfo(np.uint64).max] * 3, dtype=np.uint64),
        np.array([np.iinfo(np.int32).max] * 3, dtype=np.int32),
        np.array([np.iinfo(np.uint32).max] * 3, dtype=np.uint32),
        np.array([[0, 0, 0], [np.iinfo(np.int64).max] * 3], dtype=np.int64),
        np.array([np.iinfo(np.int32).max] * 2 + [np.iinfo(np.int32).max - 1] * 2, dtype=np.int32),
    ],
    ids=["int64-3xMAX", "uint64-3xMAX", "int32-3xMAX", "uint32-3xMAX", "int64-one-row-overflows", "int32-2xMAX-2xMAX-1"],
)
def test_integer_lse_overflow_raises_value_error(data):
    # e.g. 3 x INT64_MAX: INT64_MAX + log(3) = INT64_MAX + 1.0986, truncated INT64_MAX + 1: does not fit;
    # 2 x MAX + 2 x (MAX-1): MAX + log(2 + 2/e) = MAX + 1.07
    axes = [-1]
    check_raises(numred.reduce_log_sum_exp, data, ValueError, r"(?i)overflow|fit|range|represent|large",
                 axes)


def test_checks_still_apply_to_a_repeated_geometry(func):
    # numred keeps the plan of a small call that passed its checks and reuses it for the same
    # arguments (_frontend._REPEATS); arguments that only look alike must still be checked.
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    peer = OPS_BY_NAME[func.__name__].numpy_peer
    for data in (x, x + 1, x, x + 1):  # the data is read on every call, not only the geometry
        expected = peer(data.astype(np.float64), (1,), True)
        np.testing.assert_allclose(func(data, axes=[1]), expected, rtol=1e-6)
    check_raises(func, x, TypeError, "integers", axes=[True])
    check_raises(func, x, TypeError, "integers", axes=[1.0])
    check_raises(func, x, ValueError, "keepdims", axes=[1], keepdims=1.0)
    check_raises(func, x, ValueError, "keepdims", axes=[1], keepdims=2)
    check_raises(func, x, ValueError, "noop_with_empty_axes", axes=[1], noop_with_empty_axes=-1)
    check_raises(func, x, ValueError, "Duplicate|repeated", axes=[1, 1])
    # ONNX's int64 ndarray axes share the entry of the same list; other arrays are still checked
    np.testing.assert_allclose(func(x, axes=np.array([1])), peer(x.astype(np.float64), (1,), True), rtol=1e-6)
    np.testing.assert_allclose(func(x, axes=np.array([2], dtype=np.uint64)), peer(x.astype(np.float64), (2,), True),
                               rtol=1e-6)
    op = OPS_BY_NAME[func.__name__]
    assert _repeat_key(op, x, np.array([1]), 1, 0) == _repeat_key(op, x, [1], 1, 0) is not None
    check_raises(func, x, ValueError, "1-D|one-dimensional|dimension", axes=np.array([[1]]))
    check_raises(func, x, ValueError, "Duplicate|repeated", axes=np.array([1, 1]))
    check_raises(func, x, TypeError, "integers", axes=np.array([1.0]))
    check_raises(func, x, TypeError, "integers", axes=np.array([True]))
    swapped = x.astype(">f4")  # same shape and strides, other byte order: read as big-endian
    np.testing.assert_allclose(func(swapped, axes=[1]), peer(x.astype(np.float64), (1,), True), rtol=1e-6)
    # True and False share the entries of 1 and 0, and must still mean them
    for flag in (True, False, 1, 0, False, True):
        expected = peer(x.astype(np.float64), (1,), bool(flag))
        got = func(x, axes=[1], keepdims=flag)
        assert got.shape == expected.shape, f"keepdims={flag!r}: shape {got.shape}, expected {expected.shape}"
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    for noop in (0, True, False, 1):  # empty axes: the input itself (a copy) with noop, else all axes
        got = func(x, axes=[], noop_with_empty_axes=noop)
        expected = OPS_BY_NAME[func.__name__].noop(x) if noop else peer(x.astype(np.float64), None, True)
        np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=f"noop_with_empty_axes={noop!r}")


# ---- inputs NumPy would convert with loss, and NumPy habits -------------------------------------

MASK_MSG = r"(?s)mask.*\.filled\(.*\.compressed\(\)"


@pytest.mark.parametrize("data", [
    np.ma.array([1.0, 2.0, 100.0], mask=[0, 0, 1]),
    np.ma.array(np.arange(6, dtype=np.int32).reshape(2, 3), mask=[[0, 1, 0], [0, 0, 0]]),
    np.ma.array([1.0, 2.0]),  # no element masked: still refused, the type says masks matter
    np.ma.masked,
], ids=["float64-one-masked", "int32-2x3", "nothing-masked", "masked-constant"])
def test_masked_arrays_raise_type_error_instead_of_counting_masked_values(func, data):
    before = (data.data.tobytes(), np.ma.getmaskarray(data).tobytes())
    for axes in (None, [0], []):
        with pytest.raises(TypeError, match=MASK_MSG):
            func(data, axes=axes)
    assert (data.data.tobytes(), np.ma.getmaskarray(data).tobytes()) == before


def test_a_list_of_masked_arrays_raises_too(func):
    rows = [np.ma.array([1.0, 100.0], mask=[0, 1]), np.ma.array([2.0, 3.0], mask=[0, 0])]
    with pytest.raises(TypeError, match=MASK_MSG):
        func(rows, axes=[1])
    with pytest.raises(TypeError, match=MASK_MSG):
        func(tuple(rows))


def test_the_masked_values_are_what_the_filled_and_compressed_hints_choose():
    x = np.ma.array([1.0, 2.0, 100.0], mask=[0, 0, 1])
    assert numred.reduce_mean(x.compressed())[0] == 1.5  # NumPy's masked mean
    assert numred.reduce_mean(x.filled(0.0))[0] == 1.0


@pytest.mark.parametrize("data", [None, object(), iter([1.0, 2.0]), {"a": 1.0}, [1.0, "a", None]],
                         ids=["None", "object", "iterator", "dict", "mixed-list"])
def test_data_that_is_not_array_like_names_the_problem(func, data):
    info = check_raises(func, data, TypeError, r"array-like")
    assert type(data).__name__ in str(info.value)


@pytest.mark.parametrize("name", ["bool", "int8", "int16", "uint8", "uint16", "int4", "float8_e4m3fn",
                                  "longdouble"])
def test_unsupported_numeric_dtypes_suggest_a_cast(func, name):
    data = UNSUPPORTED[name]
    if name == "longdouble" and np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 on this platform")
    if _supported_after_all(func, name, data):
        return
    info = check_raises(func, data, TypeError, r"astype\(np\.float32\)")
    # the suggestion works: the cast data is accepted
    func(data.astype(np.float32))
    assert "supports float32" in str(info.value)


def test_complex_data_is_refused_without_suggesting_a_lossy_cast(func):
    info = check_raises(func, UNSUPPORTED["complex128"], TypeError, "complex128")
    assert "astype" not in str(info.value)


@pytest.mark.parametrize("keyword,hint", [
    ("axis", r"did you mean axes=\?"),
    ("dim", r"did you mean axes=\?"),
    ("keepdim", r"did you mean keepdims=\?"),
    ("keep_dims", r"did you mean keepdims=\?"),
    ("noop", r"did you mean noop_with_empty_axes=\?"),
    ("axs", r"did you mean axes=\?"),
    ("dtype", r"input's dtype"),
    ("out", r"new array"),
    ("where", r"it takes data, axes, keepdims, noop_with_empty_axes"),
])
def test_numpy_keywords_raise_type_error_naming_the_right_one(func, keyword, hint):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    info = check_raises(func, data, TypeError, hint, **{keyword: 1})
    assert f"{func.__name__}() got an unexpected keyword argument {keyword!r}" in str(info.value)


def test_the_signature_is_the_onnx_one(func):
    import inspect

    assert list(inspect.signature(func).parameters) == ["data", "axes", "keepdims", "noop_with_empty_axes"]
