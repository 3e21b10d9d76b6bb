"""numred: the ten ONNX opset-18 reductions ReduceMean, ReduceSum, ReduceProd, ReduceMax, ReduceMin,
ReduceLogSumExp, ReduceSumSquare, ReduceL1, ReduceL2 and ReduceLogSum for float32,
float64, float16, bfloat16, int32, int64, uint32 and uint64, computed by Numba kernels.

The behaviour of every edge case is the contract in docs/SEMANTICS.md. The public functions are
made here from the operator registry (numred._registry): one record per operator holds its rules,
its docstring and its peers; ``__init__.pyi`` spells them out for static tools.
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Union

import numpy as np
import numpy.typing as npt

from ._dask import reduce_any as _reduce_any
from ._frontend import reduce as _reduce_in_memory
from ._frontend import unexpected_keywords as _unexpected_keywords
from ._registry import OPS as _OPS
from ._registry import Op as _Op

__version__ = "0.1.0"

#: What ``axes`` accepts: None, an int, a sequence of ints or a 1-D integer array (ONNX gives int64).
AxesLike = Union[int, Sequence[int], npt.NDArray[np.integer], None]

# The ONNX signature: ``axes`` is the operator's optional second input, ``keepdims`` and
# ``noop_with_empty_axes`` its attributes. ``**unexpected`` in the functions only catches NumPy habits
# (``axis=``) to answer them with a precise TypeError; help(), Sphinx and type checkers show this one.
_ANNOTATIONS = {"data": "npt.ArrayLike", "axes": "AxesLike", "keepdims": "int", "noop_with_empty_axes": "int",
                "return": "np.ndarray"}
_SIGNATURE = inspect.Signature(
    [inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=_ANNOTATIONS["data"]),
     *(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=_ANNOTATIONS[name])
       for name, default in (("axes", None), ("keepdims", 1), ("noop_with_empty_axes", 0)))],
    return_annotation=_ANNOTATIONS["return"])


def _public_function(op: _Op):
    """numred's public function of the operator ``op``."""
    name = op.name

    def reduce(data, axes=None, keepdims=1, noop_with_empty_axes=0, **unexpected):
        if unexpected:
            raise _unexpected_keywords(name, unexpected)
        if type(data) is np.ndarray:  # (the commonest call, straight to the front end)
            return _reduce_in_memory(op, data, axes, keepdims, noop_with_empty_axes)
        return _reduce_any(op, data, axes, keepdims, noop_with_empty_axes)

    reduce.__name__ = reduce.__qualname__ = name
    reduce.__module__ = __name__
    reduce.__doc__ = op.docstring()
    reduce.__annotations__ = dict(_ANNOTATIONS)
    reduce.__signature__ = _SIGNATURE
    return reduce


globals().update({op.name: _public_function(op) for op in _OPS})
__all__ = [*(op.name for op in _OPS), "AxesLike", "__version__"]
