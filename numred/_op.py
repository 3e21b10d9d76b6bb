"""What an operator record (``Op``) holds, and the pieces the records in numred._registry are built
from: the docstring parts every operator shares, the elementwise results of the no-op case, and the
peers' expressions for the benchmarks.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import _exact, _reduction


# The parts of the operators' docstrings that are the same, written once: what {parameters} and
# {common_errors} stand for in Op.doc (str.replace: the docstrings hold other braces)
SHARED_DOC = {
    "{parameters}": """data : array_like
    The input: a NumPy array, or anything :func:`numpy.asarray` turns into one, of dtype
    float32, float64, float16, bfloat16 (``ml_dtypes.bfloat16``), int32, int64, uint32 or
    uint64. Any strides, byte order and rank (0 included). It is never modified.
axes : int, sequence of int, 1-D integer ndarray or None, optional
    The axes to reduce, each in ``[-data.ndim, data.ndim - 1]``; negative values count from the
    end and the order does not matter. None or empty: all axes, or none when
    ``noop_with_empty_axes`` is 1. This is the ONNX operator's optional second input.
keepdims : {1, 0}, optional
    1 (or True): reduced axes stay, with length 1. 0 (or False): they are removed.
noop_with_empty_axes : {0, 1}, optional
    What None or empty ``axes`` means: 0 (or False), reduce all axes; 1 (or True), reduce none.
""",
    "{common_errors}": """TypeError
    The dtype of ``data`` is not one of the eight supported ones, or ``axes`` holds non-integers.
numpy.exceptions.AxisError
    An axis is out of range (AxisError is a ValueError).
ValueError
    Duplicate axes, an ``axes`` array of rank above 1, ``keepdims`` or ``noop_with_empty_axes``
    other than 0/1/False/True, or data that cannot be converted to an array.
""",
}


def torch_product(torch, t, dims):
    """ReduceProd in torch, whose prod takes one dim at a time."""
    for d in sorted(dims, reverse=True):
        t = torch.prod(t, dim=d, keepdim=True)
    return t


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
    # the benchmarks time it on |x| (numred.tools._bench_cases.op_input): its integer results exist only for
    # positive sums, and random signed data has as many negative ones (ReduceLogSum)
    positive_input: bool = False
    # (torch, tensor, dims) -> the torch expression of the operator, keepdim, for the benchmarks
    torch_peer: Callable | None = None
    # bound by memory bandwidth on large inputs (one cheap term per element): the bench's bandwidth table
    memory_bound: bool = False
    # the public function's numpydoc docstring; {parameters} and {common_errors} stand for the parts
    # every operator shares (SHARED_DOC)
    doc: str = ""

    def docstring(self) -> str:
        """The public function's docstring: ``doc`` with the shared parts filled in."""
        text = inspect.cleandoc(self.doc)
        for marker, shared in SHARED_DOC.items():
            text = text.replace(marker, shared.rstrip("\n"))
        return text

    def __post_init__(self):
        if not self.reduction.int_kernels and self.exact is None:
            raise ValueError(f"{self.name}: integer data has no kernels for {self.reduction}, so the record "
                             "needs an exact function")

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


def square_in_dtype(x):
    # elementwise, in the input dtype: integers wrap and floats may overflow to inf, as the contract says;
    # out= keeps a 0-d input a 0-d array instead of a NumPy scalar
    with np.errstate(over="ignore"):
        return np.multiply(x, x, out=np.empty_like(x))


def magnitude_wrapping(x):
    """|x| elementwise, in the input dtype (ReduceL1's noop): |INT_MIN| wraps to INT_MIN."""
    with np.errstate(over="ignore"):
        return np.abs(x, out=np.empty_like(x))


def magnitude(x):
    """|x| elementwise, in the input dtype (ReduceL2's noop): |INT_MIN| does not fit, ValueError."""
    if x.dtype.kind == "i" and x.size and x.min() == np.iinfo(x.dtype).min:
        raise _exact.l2_does_not_fit(x.dtype)
    return np.abs(x, out=np.empty_like(x))


def elementwise_log(x):
    """ln x elementwise (ReduceLogSum's noop): floats in float64, rounded once; integers trunc(ln x),
    decided exactly, and ValueError for x <= 0."""
    if x.dtype.kind in "iu":
        if x.size and x.min() <= 0:
            raise _exact.log_sum_not_positive(x.dtype)
        return _exact.trunc_ln(x.ravel().tolist()).astype(x.dtype).reshape(x.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x.astype(np.float64), out=np.empty(x.shape)).astype(x.dtype)


def numpy_logsumexp(x, axes, keepdims):
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axes)
