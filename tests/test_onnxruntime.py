"""Cross-check against onnxruntime (CPUExecutionProvider) on random cases where the contract and
onnxruntime agree.

Where they do not agree (measured with onnxruntime 1.32 on this machine), the inputs are restricted:
* integer ReduceMean: onnxruntime truncates toward zero like numred ([-1, -2] -> -1, [-7, 0, 0] -> -2),
  but computes through double, so int64 results are inexact once the sum passes 2**53
  ([2**53 + 1, 2**53 + 2] -> 2**53): values are kept below 10**6 in magnitude.
* integer ReduceSumSquare: onnxruntime does not wrap (int32 [50000, 50000] gives 2147483647, the
  contract 705032704): values and sizes are chosen so that the sum of squares fits.
* integer ReduceLogSumExp: onnxruntime evaluates exp(x - max) in the integer type, so every element
  below the max contributes 0 ([5, 4, 4, 4, 4, 4] gives 5, the contract 6): the reduced sets are made
  constant (then both give trunc(x + log n), e.g. [5] * 8 -> 7 and [-5] * 8 -> -2).
* only finite values and non-empty reduced sets.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import numred
from numred._registry import OPS as REGISTRY

ort = pytest.importorskip("onnxruntime")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

OPS = {op.name: op.onnx_name for op in REGISTRY}
DTYPES = [np.float32, np.float64, np.int32, np.int64]
ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32,
        np.int64: TensorProto.INT64}


@functools.lru_cache(maxsize=None)
def _session(op_type, dtype, keepdims, noop):
    node = helper.make_node(op_type, ["data", "axes"], ["out"], keepdims=keepdims, noop_with_empty_axes=noop)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("data", ELEM[dtype], None),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("out", ELEM[dtype], None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _ort(opname, x, axes, keepdims, noop):
    try:
        sess = _session(OPS[opname], x.dtype.type, keepdims, noop)
        return sess.run(None, {"data": x, "axes": np.asarray(axes, dtype=np.int64)})[0]
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            pytest.skip(f"onnxruntime has no kernel for {OPS[opname]}({x.dtype}): {e}")
        raise


def _random_case(rng, opname, dtype):
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(s) for s in rng.integers(1, 6, ndim))
    k = int(rng.integers(0, ndim + 1))
    axes = sorted(int(a) for a in rng.choice(ndim, k, replace=False))
    axes = [a - ndim if rng.random() < 0.3 else a for a in axes]
    rng.shuffle(axes)
    keepdims = int(rng.integers(0, 2))
    noop = int(rng.random() < 0.2) if not axes else int(rng.integers(0, 2))
    reduced = [a % ndim for a in axes] if axes else ([] if noop else list(range(ndim)))
    if np.dtype(dtype).kind == "f":
        scale = {"reduce_mean": 100.0, "reduce_log_sum_exp": 20.0, "reduce_sum_square": 10.0, "reduce_sum": 100.0,
                 "reduce_max": 100.0, "reduce_min": 100.0, "reduce_prod": 1.0, "reduce_l1": 100.0, "reduce_l2": 10.0,
                 "reduce_log_sum": 100.0}[opname]
        x = (rng.standard_normal(shape) * scale).astype(dtype)
        if opname == "reduce_log_sum":  # positive sums: logs, not NaN
            x = np.abs(x)
    elif opname in ("reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_l1"):  # sums of 625 elements: below 2**31
        x = rng.integers(-(10**6), 10**6, shape).astype(dtype)
    elif opname == "reduce_prod":
        x = rng.integers(-3, 4, shape).astype(dtype)  # products of at most 625 factors: no overflow check
    elif opname in ("reduce_sum_square", "reduce_l2"):
        x = rng.integers(-1000, 1001, shape).astype(dtype)  # at most 625 elements: sum < 2**31
    elif opname == "reduce_log_sum":
        x = rng.integers(1, 1000, shape).astype(dtype)  # positive sums
    else:
        # constant along the reduced axes
        src_shape = tuple(1 if a in reduced else s for a, s in enumerate(shape))
        x = np.ascontiguousarray(np.broadcast_to(rng.integers(-50, 50, src_shape), shape)).astype(dtype)
    return x, axes, keepdims, noop


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opname", list(OPS))
def test_agrees_with_onnxruntime(opname, dtype):
    rng = np.random.default_rng(100 * list(OPS).index(opname) + DTYPES.index(dtype))
    n_checked = 0
    for _ in range(40):
        x, axes, keepdims, noop = _random_case(rng, opname, dtype)
        want = _ort(opname, x, axes, keepdims, noop)
        got = getattr(numred, opname)(x, np.array(axes, dtype=np.int64), keepdims, noop)
        ctx = f"{opname} {x.dtype} shape={x.shape} axes={axes} keepdims={keepdims} noop={noop}"
        assert got.dtype == want.dtype, ctx
        assert got.shape == want.shape, ctx
        if x.dtype.kind == "f":
            scale = float(np.max(np.abs(x))) if x.size else 1.0
            # sums: onnxruntime adds float32 in float32, with an error that grows with the count
            terms = scale if opname == "reduce_sum_square" else x.size if opname == "reduce_sum" else 1
            if x.dtype == np.float32:
                rtol, atol = 1e-5, 1e-6 * scale * terms
            else:
                rtol, atol = 1e-12, 1e-13 * scale * terms
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=ctx)
        else:
            np.testing.assert_array_equal(got, want, err_msg=ctx)
        n_checked += 1
    assert n_checked == 40


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_mean_negative_values_truncate_like_onnxruntime(dtype):
    # the measured agreement that the module docstring relies on
    x = np.array([[-1, -2, 0], [-7, 0, 0], [-5, -5, 1], [7, 1, 1]], dtype=dtype)
    want = _ort("reduce_mean", x, [1], 0, 0)
    got = numred.reduce_mean(x, [1], keepdims=0)
    assert got.tolist() == want.tolist() == [-1, -2, -3, 3]
