"""One record per operator: everything the front end, the tests and the benchmarks need to know.

A new operator is one entry here: its Reduction names a term, an integer accumulator and a finish
step that kernels exist for (_reduction.KERNEL_SETS); nothing else enumerates the operators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import _exact, _reduction


@dataclass(frozen=True)
class Op:
    name: str  # public function name in numred, e.g. "reduce_mean"
    onnx_name: str  # ONNX operator type, e.g. "ReduceMean"
    empty_float: float  # result of a float reduction over an empty set
    # same for integers, or a function of the dtype; None: undefined, the front end raises ValueError
    empty_int: int | Callable[[np.dtype], int] | None
    noop: Callable[[np.ndarray], np.ndarray]  # result when no axis is reduced (noop_with_empty_axes=1)
    numpy_peer: Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]  # the NumPy way, for benchmarks
    # what the kernels compute: the term, the integer accumulator, the finish step (_reduction.Reduction)
    reduction: _reduction.Reduction
    # (rows: 2-D, the reduced elements of each output in a row) -> the exact results, or None when
    # one does not fit the dtype: what the front end runs when compute raises _reduction.Undecided
    exact: Callable | None = None
    narrow_ints: bool = False  # int8 and uint8 are supported too (ReduceMax and ReduceMin, as in ONNX)
    # the benchmarks time it on |x| (_bench_cases.op_input): its integer results exist only for
    # positive sums, and random signed data has as many negative ones (ReduceLogSum)
    positive_input: bool = False

    def empty_result(self, dtype: np.dtype, shape: tuple) -> np.ndarray:
        """The results over an empty set of elements (docs/SEMANTICS.md), or the ValueError where the
        contract leaves them undefined (no integer NaN or -inf)."""
        if dtype.kind not in "iu":
            return np.full(shape, self.empty_float, dtype=dtype)
        value = self.empty_int(dtype) if callable(self.empty_int) else self.empty_int
        if value is None:
            raise ValueError(f"{self.onnx_name} over an empty set is undefined for integer dtype {dtype} "
                             "(no integer NaN or -inf)")
        return np.full(shape, value, dtype=dtype)

    @property
    def int_wraps(self) -> bool:
        """Whether integer results wrap modulo 2**bits (exact bits, not a real value rounded to an integer)."""
        return self.reduction.int_wraps


def _square_in_dtype(x):
    # elementwise, in the input dtype: integers wrap and floats may overflow to inf, as the contract says;
    # out= keeps a 0-d input a 0-d array instead of a NumPy scalar
    with np.errstate(over="ignore"):
        return np.multiply(x, x, out=np.empty_like(x))


def _magnitude_wrapping(x):
    """|x| elementwise, in the input dtype (ReduceL1's noop): |INT_MIN| wraps to INT_MIN."""
    with np.errstate(over="ignore"):
        return np.abs(x, out=np.empty_like(x))


def _magnitude(x):
    """|x| elementwise, in the input dtype (ReduceL2's noop): |INT_MIN| does not fit, ValueError."""
    if x.dtype.kind == "i" and x.size and x.min() == np.iinfo(x.dtype).min:
        raise _exact.l2_does_not_fit(x.dtype)
    return np.abs(x, out=np.empty_like(x))


def _elementwise_log(x):
    """ln x elementwise (ReduceLogSum's noop): floats in float64, rounded once; integers trunc(ln x),
    decided exactly, and ValueError for x <= 0."""
    if x.dtype.kind in "iu":
        if x.size and x.min() <= 0:
            raise _exact.log_sum_not_positive(x.dtype)
        return _exact.trunc_ln(x.ravel().tolist()).astype(x.dtype).reshape(x.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x.astype(np.float64), out=np.empty(x.shape)).astype(x.dtype)


def _numpy_logsumexp(x, axes, keepdims):
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axes)


OPS = (
    Op(
        name="reduce_mean",
        onnx_name="ReduceMean",
        empty_float=float("nan"),
        empty_int=None,
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.mean(x, axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.SUM, _reduction.EXACT, mean=True),
    ),
    Op(
        name="reduce_log_sum_exp",
        onnx_name="ReduceLogSumExp",
        empty_float=float("-inf"),
        empty_int=None,
        noop=lambda x: x.copy(),
        numpy_peer=_numpy_logsumexp,
        reduction=_reduction.Reduction(_reduction.EXP, _reduction.MAX_AND_EXP_SUM),
        exact=_exact.int_log_sum_exp,
    ),
    Op(
        name="reduce_sum_square",
        onnx_name="ReduceSumSquare",
        empty_float=0.0,
        empty_int=0,
        noop=_square_in_dtype,
        numpy_peer=lambda x, axes, keepdims: np.sum(np.square(x), axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.SQUARES, _reduction.WRAPPING),
    ),
    Op(
        name="reduce_sum",
        onnx_name="ReduceSum",
        empty_float=0.0,
        empty_int=0,
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims),
        # integers: the exact sum's low bits, which is the sum modulo 2**bits (int_wraps)
        reduction=_reduction.Reduction(_reduction.SUM, _reduction.EXACT),
    ),
    Op(
        name="reduce_max",
        onnx_name="ReduceMax",
        empty_float=float("-inf"),
        empty_int=lambda dtype: int(np.iinfo(dtype).min),  # ONNX: "the minimum value of the data type"
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.KEY, _reduction.MAX),
        narrow_ints=True,
    ),
    Op(
        name="reduce_min",
        onnx_name="ReduceMin",
        empty_float=float("inf"),
        empty_int=lambda dtype: int(np.iinfo(dtype).max),
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.KEY, _reduction.MIN),
        narrow_ints=True,
    ),
    Op(
        name="reduce_prod",
        onnx_name="ReduceProd",
        empty_float=1.0,
        empty_int=1,
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.prod(x, axis=axes, keepdims=keepdims),
        # integers: modulo 2**bits
        reduction=_reduction.Reduction(_reduction.PRODUCT, _reduction.WRAPPING),
    ),
    Op(
        name="reduce_l1",
        onnx_name="ReduceL1",
        empty_float=0.0,
        empty_int=0,
        noop=_magnitude_wrapping,
        numpy_peer=lambda x, axes, keepdims: np.sum(np.abs(x), axis=axes, keepdims=keepdims),
        # integers: modulo 2**bits, |INT_MIN| wrapping to INT_MIN
        reduction=_reduction.Reduction(_reduction.ABS, _reduction.WRAPPING, finish=_reduction.ROUND),
    ),
    Op(
        name="reduce_l2",
        onnx_name="ReduceL2",
        empty_float=0.0,
        empty_int=0,
        noop=_magnitude,
        numpy_peer=lambda x, axes, keepdims: np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keepdims)),
        # integers: isqrt of the exact sum of squares
        reduction=_reduction.Reduction(_reduction.SQUARES, _reduction.EXACT, finish=_reduction.SQRT),
        exact=_exact.l2,
    ),
    Op(
        name="reduce_log_sum",
        onnx_name="ReduceLogSum",
        empty_float=float("-inf"),
        empty_int=None,
        noop=_elementwise_log,
        numpy_peer=lambda x, axes, keepdims: np.log(np.sum(x, axis=axes, keepdims=keepdims)),
        # integers: trunc(ln S) of the exact sum S
        reduction=_reduction.Reduction(_reduction.SUM, _reduction.EXACT, finish=_reduction.LOG),
        exact=_exact.int_log_sum,
        positive_input=True,
    ),
)

OPS_BY_NAME = {op.name: op for op in OPS}
OPS_BY_ONNX_NAME = {op.onnx_name: op for op in OPS}
