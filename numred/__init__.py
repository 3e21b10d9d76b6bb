"""numred: the ONNX opset-18 reductions ReduceMean, ReduceLogSumExp and ReduceSumSquare for float32,
float64, float16, bfloat16, int32, int64, uint32 and uint64, computed by Numba kernels.

The behaviour of every edge case is the contract in docs/SEMANTICS.md.
"""
from __future__ import annotations

import numpy as np

from ._frontend import reduce as _reduce
from ._registry import OPS_BY_NAME as _OPS

__version__ = "0.1.0"
__all__ = ["reduce_mean", "reduce_log_sum_exp", "reduce_sum_square", "__version__"]


def reduce_mean(data, axes=None, keepdims=1, noop_with_empty_axes=0) -> np.ndarray:
    """ONNX ReduceMean (opset 18): the mean over ``axes``, accumulated exactly enough to round once.

    Floats accumulate in float64 and round once to the input dtype; integers give the exact mean
    truncated toward zero. An empty reduced set gives NaN for floats and raises ValueError for
    integers. Returns a new array of the input dtype.
    """
    return _reduce(_OPS["reduce_mean"], data, axes, keepdims, noop_with_empty_axes)


def reduce_log_sum_exp(data, axes=None, keepdims=1, noop_with_empty_axes=0) -> np.ndarray:
    """ONNX ReduceLogSumExp (opset 18): log(sum(exp(x))) over ``axes``, shifted by the max so that it
    does not overflow. An empty reduced set gives -inf for floats and raises ValueError for integers;
    integer results are truncated toward zero. Returns a new array of the input dtype.
    """
    return _reduce(_OPS["reduce_log_sum_exp"], data, axes, keepdims, noop_with_empty_axes)


def reduce_sum_square(data, axes=None, keepdims=1, noop_with_empty_axes=0) -> np.ndarray:
    """ONNX ReduceSumSquare (opset 18): sum(x * x) over ``axes``. Floats accumulate in float64 and
    round once; integers wrap modulo 2**bits like ``np.sum(np.square(x, dtype=T), dtype=T)``. An empty
    reduced set gives 0. Returns a new array of the input dtype.
    """
    return _reduce(_OPS["reduce_sum_square"], data, axes, keepdims, noop_with_empty_axes)
