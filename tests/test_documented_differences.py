"""Every onnxruntime and onnx-reference cell of docs/operators.md that differs from numred.

The page documents what the other runtimes do where they part from the contract; this file runs the
same opset-18 models through them. A failure means a new onnxruntime or onnx release changed
behaviour: update the page (and this table) rather than the expectation alone.
"""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

I32_MAX, I32_MIN, I64_MAX = 2**31 - 1, -(2**31), 2**63 - 1


def _model(op, x, axes, keepdims, noop):
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    inputs = [helper.make_tensor_value_info("x", elem, x.shape)]
    if axes is not None:
        inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]))
    node = helper.make_node(op, [i.name for i in inputs], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _run(runtime, op, x, axes=None, keepdims=1, noop=0):
    model = _model(op, x, axes, keepdims, noop)
    feeds = {"x": x} if axes is None else {"x": x, "axes": np.array(axes, dtype=np.int64)}
    if runtime == "onnx reference":
        return ReferenceEvaluator(model).run(None, feeds)[0]
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the expected failures would print errors
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def equals(values, dtype):
    want = np.array(values, dtype=dtype)

    def check(got):
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
        np.testing.assert_array_equal(got, want)
    return check


def raises(exc=Exception, match=None):
    return ("raises", exc, match)


def satisfies(predicate, text):
    def check(got):
        assert predicate(got), f"{text}: got {got!r}"
    return check


F32, F64, BF16 = np.float32, np.float64, ml_dtypes.bfloat16
ORT, REF = "onnxruntime", "onnx reference"

# (runtime, op, x, axes, keepdims, noop, expectation, the cell it checks)
CLAIMS = [
    # all three operators
    (ORT, "ReduceMean", F32([[1, 2]]), [2], 1, 0, raises(match="FAIL"), "axis out of range fails"),
    (REF, "ReduceMean", F32([[1, 2]]), [2], 1, 0, raises(np.exceptions.AxisError), "axis out of range"),
    (ORT, "ReduceMean", F32([[1, 2]]), [1, -1], 1, 0, equals([[1.5]], F32), "duplicate axes reduced once"),
    (REF, "ReduceMean", F32([[1, 2]]), [1, 1], 1, 0, raises(ValueError), "duplicate axes"),
    (ORT, "ReduceMean", F32([1, 2]), None, 2, 0, equals(1.5, F32), "keepdims=2 read as 0"),
    (REF, "ReduceMean", F32([1, 2]), None, 2, 0, equals([1.5], F32), "keepdims=2 read as 1"),
    (ORT, "ReduceSumSquare", F32([1, 2]), [], 1, 2, equals([5], F32), "noop_with_empty_axes=2 read as 0"),
    (REF, "ReduceSumSquare", F32([1, 2]), [], 1, 2, equals([1, 4], F32), "noop_with_empty_axes=2 read as 1"),
    (REF, "ReduceLogSumExp", F32(3), None, 0, 0, raises(TypeError), "rank-0 ReduceLogSumExp"),
    # ReduceMean
    *[(ORT, "ReduceMean", np.array([1, 2], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    (ORT, "ReduceMean", np.full(10**6, 0.1, F32), None, 1, 0,
     satisfies(lambda y: abs(float(y[0]) - 0.1) > 1e-5, "float32 accumulation"), "float32 mean of 1e6 x 0.1"),
    (REF, "ReduceMean", np.full(10**6, 0.1, F32), None, 1, 0,
     satisfies(lambda y: y[0] != F32(0.1), "input-type accumulation"), "float32 mean of 1e6 x 0.1"),
    (REF, "ReduceMean", np.full(10**4, 0.1, BF16), None, 1, 0,
     satisfies(lambda y: float(y[0]) < 0.01, "bfloat16 accumulation"), "bfloat16 mean of 1e4 x 0.1"),
    *[(rt, "ReduceMean", x, None, 1, 0, equals([np.inf], x.dtype), "float overflow")
      for rt in (ORT, REF) for x in (F64([1.7e308, 1.7e308]), F32([3e38, 3e38]))],
    (ORT, "ReduceMean", np.zeros((2, 0), F32), [1], 1, 0, equals([[0], [0]], F32), "empty set, floats: 0"),
    (ORT, "ReduceMean", np.zeros(0, np.int32), None, 1, 0, equals([0], np.int32), "empty set, integers: 0"),
    (REF, "ReduceMean", np.zeros(0, np.int32), None, 1, 0, equals([I32_MIN], np.int32), "empty set, integers"),
    (ORT, "ReduceMean", np.int64([2**53 + 1, 2**53 + 2]), None, 1, 0, equals([2**53], np.int64), "through double"),
    (REF, "ReduceMean", np.int64([2**53 + 1, 2**53 + 2]), None, 1, 0, equals([2**53 + 2], np.int64), "float64 division"),
    (REF, "ReduceMean", np.int32([I32_MAX, I32_MAX]), None, 1, 0, equals([-1], np.int32), "sum wraps"),
    # ReduceLogSumExp
    (ORT, "ReduceLogSumExp", np.array([1, 2], dtype=BF16), None, 1, 0, raises(RuntimeError, "can't be converted"),
     "a bfloat16 kernel, but no ml_dtypes input"),
    *[(REF, "ReduceLogSumExp", np.array([1, 2], dtype=t), None, 1, 0, raises(TypeError), "integers refused")
      for t in (np.int32, np.int64, np.uint32, np.uint64)],
    (REF, "ReduceLogSumExp", F32([1, np.inf]), [], 1, 1, equals([1, np.nan], F32), "noop turns +inf into NaN"),
    (REF, "ReduceLogSumExp", F32([-np.inf, -np.inf]), None, 1, 0, equals([np.nan], F32), "all -inf gives NaN"),
    (REF, "ReduceLogSumExp", F32([np.inf, -np.inf]), None, 1, 0, equals([np.nan], F32), "[inf, -inf] gives NaN"),
    (ORT, "ReduceLogSumExp", np.zeros(0, np.int32), None, 1, 0, equals([I32_MIN], np.int32), "empty set: INT_MIN"),
    (ORT, "ReduceLogSumExp", np.int32([5, 4, 4, 4, 4, 4]), None, 1, 0, equals([5], np.int32), "exp in integers"),
    (ORT, "ReduceLogSumExp", np.int32([I32_MAX] * 3), None, 1, 0, equals([I32_MAX], np.int32), "clamped"),
    # ReduceSum
    *[(ORT, "ReduceSum", np.array([1, 2], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    (ORT, "ReduceSum", np.full(10**6, 0.1, F32), None, 1, 0,
     satisfies(lambda y: abs(float(y[0]) - 1e5) > 10, "float32 accumulation"), "float32 sum of 1e6 x 0.1"),
    (REF, "ReduceSum", np.full(10**6, 0.1, F32), None, 1, 0, equals([100000.01], F32), "float32 sum of 1e6 x 0.1"),
    (REF, "ReduceSum", np.full(10**4, 0.1, BF16), None, 1, 0, equals([32], BF16), "bfloat16 sum of 1e4 x 0.1"),
    *[(rt, "ReduceSum", x, None, 1, 0, equals([np.inf], x.dtype), "partial sums overflow")
      for rt in (ORT, REF) for x in (F64([1.7e308, 1.7e308, -1.7e308]), F32([3e38, 3e38, -3e38]))],
    (ORT, "ReduceSum", np.int32([I32_MAX, 1]), None, 1, 0, equals([I32_MAX], np.int32), "saturates"),
    (ORT, "ReduceSum", np.int64([I64_MAX, 1]), None, 1, 0, equals([I64_MAX], np.int64), "saturates"),
    (ORT, "ReduceSum", F32([-0.0, -0.0]), None, 1, 0, satisfies(lambda y: np.signbit(y[0]), "-0.0"), "sum of -0.0"),
    # ReduceMax and ReduceMin
    *[(ORT, op, np.array([1, 2], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"), f"no {np.dtype(t).name} kernel")
      for op in ("ReduceMax", "ReduceMin") for t in (BF16, np.uint32, np.uint64)],
    *[(ORT, op, x, None, 1, 0, equals([want], x.dtype), "a NaN after the first element is ignored")
      for op, x, want in (("ReduceMax", F32([1, np.nan]), 1), ("ReduceMax", F64([1, np.nan, 2]), 2),
                          ("ReduceMin", F32([1, np.nan]), 1), ("ReduceMin", F64([1, np.nan, 2]), 1))],
    *[(rt, op, F32(x), None, 1, 0, satisfies(lambda y, neg=neg: bool(np.signbit(y[0])) == neg, "sign of zero"),
       "the first of two zeros" if rt == ORT else "-0.0 and +0.0 not ordered")
      for rt, op, x, neg in ((ORT, "ReduceMax", [-0.0, 0.0], True), (ORT, "ReduceMin", [0.0, -0.0], False),
                             (REF, "ReduceMax", [0.0, -0.0], True), (REF, "ReduceMin", [-0.0, 0.0], False))],
    # ReduceSumSquare
    *[(ORT, "ReduceSumSquare", np.array([1, 2], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    (REF, "ReduceSumSquare", np.int32([3, 4]), None, 1, 0, equals([25], np.int64), "int32 gives int64"),
    (REF, "ReduceSumSquare", np.uint32([3, 4]), None, 1, 0, equals([25], np.uint64), "uint32 gives uint64"),
    (ORT, "ReduceSumSquare", np.int32([50000]), [], 1, 1, equals([I32_MAX], np.int32), "noop saturates"),
    (REF, "ReduceSumSquare", np.int32([50000]), [], 1, 1, equals([-1794967296], np.int64), "noop: wraps, int64"),
    (REF, "ReduceSumSquare", np.zeros(0, np.int32), None, 1, 0, equals([0], np.int64), "empty set: int64 0"),
    (REF, "ReduceSumSquare", np.zeros((0, 3), np.int32), [1], 1, 0, equals(np.zeros((0, 1)), np.int64),
     "empty kept set: int64"),
    (ORT, "ReduceSumSquare", np.int32([50000, 50000]), None, 1, 0, equals([I32_MAX], np.int32), "saturates"),
    (ORT, "ReduceSumSquare", np.int64([2**32, 1]), None, 1, 0, equals([I64_MAX], np.int64), "saturates"),
    (REF, "ReduceSumSquare", np.int32([50000, 50000]), None, 1, 0, equals([-3589934592], np.int64),
     "int32 squares wrap, summed in int64"),
    # ReduceProd
    *[(ORT, "ReduceProd", np.array([2, 3], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    *[(rt, "ReduceProd", x, None, 1, 0, equals([want], x.dtype), "intermediate overflow")
      for rt in (ORT, REF) for x, want in ((F64([1e300, 1e300, 1e-300]), np.inf), (F32([1e30, 1e30, 1e-30]), np.inf))],
    (ORT, "ReduceProd", np.int32([65536, 65536, 3]), None, 1, 0, equals([I32_MAX], np.int32), "saturates"),
    (ORT, "ReduceProd", np.int64([2**62, 4]), None, 1, 0, equals([I64_MAX], np.int64), "saturates"),
    (ORT, "ReduceProd", np.full(1000, 1.001, F32), None, 1, 0, equals([2.7170467], F32), "float32 products"),
    (REF, "ReduceProd", np.full(1000, 1.001, F32), None, 1, 0, equals([2.7170494], F32), "float32 products"),
    # ReduceL1
    *[(ORT, "ReduceL1", np.array([3, 4], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    (ORT, "ReduceL1", np.full(10**6, 0.1, F32), None, 1, 0,
     satisfies(lambda y: abs(float(y[0]) - 1e5) > 10, "float32 accumulation"), "float32 L1 of 1e6 x 0.1"),
    (REF, "ReduceL1", np.full(10**6, 0.1, F32), None, 1, 0, equals([100000.01], F32), "float32 L1 of 1e6 x 0.1"),
    (REF, "ReduceL1", np.full(10**4, -0.1, BF16), None, 1, 0, equals([32], BF16), "bfloat16 L1 of 1e4 x -0.1"),
    (ORT, "ReduceL1", np.int32([I32_MAX] * 3), None, 1, 0, equals([I32_MAX], np.int32), "saturates"),
    (ORT, "ReduceL1", np.int32([I32_MIN, 5]), [], 1, 1, equals([I32_MAX, 5], np.int32), "noop: |INT_MIN| saturates"),
    # ReduceL2
    *[(ORT, "ReduceL2", np.array([3, 4], dtype=t), None, 1, 0, raises(match="NOT_IMPLEMENTED"),
       f"no {np.dtype(t).name} kernel") for t in (BF16, np.uint32, np.uint64)],
    *[(rt, "ReduceL2", x, None, 1, 0, equals([want], x.dtype), "squares overflow or underflow")
      for rt in (ORT, REF) for x, want in ((F64([1e200, 1e200]), np.inf), (F64([1e-200] * 4), 0),
                                           (F32([3e19, 3e19]), np.inf), (F32([1e-30] * 4), 0))],
    (REF, "ReduceL2", np.float16([300, 300]), None, 1, 0, equals([np.inf], np.float16), "float16 squares overflow"),
    (ORT, "ReduceL2", np.int32([I32_MAX] * 3), None, 1, 0, equals([I32_MAX], np.int32), "saturates"),
    (REF, "ReduceL2", np.int32([I32_MAX] * 3), None, 1, 0, equals([1], np.int32), "squares wrap"),
    (ORT, "ReduceL2", np.int64([2**62, 2**62]), None, 1, 0, equals([6521908912666391552], np.int64),
     "through double"),
    (REF, "ReduceL2", np.int64([2**62, 2**62]), None, 1, 0, equals([0], np.int64), "squares wrap"),
    (ORT, "ReduceL2", np.int32([I32_MIN, 5]), [], 1, 1, equals([I32_MAX, 5], np.int32), "noop: |INT_MIN| saturates"),
    (REF, "ReduceL2", np.int32([I32_MIN, 5]), [], 1, 1, equals([0, 5], np.int32), "noop: |INT_MIN|"),
    # ReduceLogSum
    *[(ORT, "ReduceLogSum", np.array([3, 4], dtype=t), None, 1, 0, raises(match=match), f"no {np.dtype(t).name} kernel")
      for t, match in ((BF16, "NOT_IMPLEMENTED"), (np.uint32, "INVALID_GRAPH"), (np.uint64, "INVALID_GRAPH"))],
    *[(REF, "ReduceLogSum", np.array([3, 4], dtype=t), None, 1, 0, raises(TypeError), "integers refused")
      for t in (np.int32, np.int64, np.uint32, np.uint64)],
    *[(rt, "ReduceLogSum", F64([1e308] * 4), None, 1, 0, equals([np.inf], F64), "float64 sum overflows")
      for rt in (ORT, REF)],
    *[(rt, "ReduceLogSum", F32([3e38] * 2), None, 1, 0, equals([np.inf], F32), "float32 sum overflows")
      for rt in (ORT, REF)],
    (REF, "ReduceLogSum", np.float16([60000, 60000]), None, 1, 0, equals([np.inf], np.float16), "float16 sum overflows"),
    *[(ORT, "ReduceLogSum", np.int32(x), None, 1, 0, equals([I32_MIN], np.int32), "a sum <= 0: INT_MIN")
      for x in ([-3, 2], [0, 0])],
    (ORT, "ReduceLogSum", np.zeros(0, np.int32), None, 1, 0, equals([I32_MIN], np.int32), "empty set: INT_MIN"),
    (ORT, "ReduceLogSum", np.int32([3, -4, 1]), [], 1, 1, equals([1, I32_MIN, 0], np.int32), "noop: log(-4) INT_MIN"),
]


@pytest.mark.parametrize("runtime,op,x,axes,keepdims,noop,expect,cell", CLAIMS,
                         ids=[f"{c[0]}-{c[1]}-{c[7]}" for c in CLAIMS])
def test_documented_difference(runtime, op, x, axes, keepdims, noop, expect, cell):
    if isinstance(expect, tuple):
        _, exc, match = expect
        with pytest.raises(exc) as info:
            _run(runtime, op, x, axes, keepdims, noop)
        if match:
            assert match in str(info.value)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the reference's NaN casts and overflows
        got = _run(runtime, op, x, axes, keepdims, noop)
    expect(got)
