"""One record per operator: everything the front end, the tests and the benchmarks need to know.

A new operator is one entry here (an ``Op``, numred._op): its Reduction names a term, an integer
accumulator and a finish step that kernels exist for (_reduction.KERNEL_SETS); nothing else
enumerates the operators.
"""
from __future__ import annotations

import numpy as np

from . import _exact, _reduction
from ._op import Op, elementwise_log, magnitude, magnitude_wrapping, numpy_logsumexp, square_in_dtype, torch_product

OPS = (
    Op(
        name="reduce_mean",
        onnx_name="ReduceMean",
        empty_float=float("nan"),
        empty_int=None,
        noop=lambda x: x.copy(),
        numpy_peer=lambda x, axes, keepdims: np.mean(x, axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.SUM, _reduction.EXACT, mean=True),
        torch_peer=lambda torch, t, dims: torch.mean(t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceMean (opset 18): the mean over ``axes``, in the input dtype.

        Floats accumulate in float64 and round once to the input dtype, so the mean of finite values is
        finite even when their sum overflows. Integers give the exact mean truncated toward zero; no
        intermediate wraps.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order): a 0-d array, not a NumPy scalar, for a
            full reduction with ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of
            ``data``. Over an empty set of elements, NaN for float dtypes.

        Raises
        ------
        {common_errors}
        ValueError
            An integer mean over an empty set (there is no integer NaN).

        See Also
        --------
        reduce_sum, reduce_log_sum_exp, reduce_sum_square

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
        >>> numred.reduce_mean(x, axes=[1])
        array([[1.5],
               [3.5]], dtype=float32)
        >>> numred.reduce_mean(x, axes=[1], keepdims=0)
        array([1.5, 3.5], dtype=float32)
        >>> numred.reduce_mean(x, keepdims=0)
        array(2.5, dtype=float32)

        Integers are truncated toward zero, and the sum never wraps:

        >>> numred.reduce_mean(np.int32([-1, -2]))
        array([-1], dtype=int32)
        >>> numred.reduce_mean(np.int32([2**31 - 1, 2**31 - 1]))
        array([2147483647], dtype=int32)
        >>> numred.reduce_mean(np.float32([]))
        array([nan], dtype=float32)
        """,
    ),
    Op(
        name="reduce_log_sum_exp",
        onnx_name="ReduceLogSumExp",
        empty_float=float("-inf"),
        empty_int=None,
        noop=lambda x: x.copy(),
        numpy_peer=numpy_logsumexp,
        reduction=_reduction.Reduction(_reduction.EXP, _reduction.MAX_AND_EXP_SUM),
        exact=_exact.int_log_sum_exp,
        torch_peer=lambda torch, t, dims: torch.logsumexp(t, dim=dims, keepdim=True),
        doc="""ONNX ReduceLogSumExp (opset 18): ``log(sum(exp(x)))`` over ``axes``, in the input dtype.

        The maximum is subtracted before ``exp``, so large inputs do not overflow. Float dtypes sum
        ``exp(x - max)`` with float64 accumulation and round once. Integer dtypes give the exact
        result truncated toward zero.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of ``data``. Any NaN
            gives NaN, otherwise a +inf gives +inf, and all -inf (or an empty set) gives -inf.

        Raises
        ------
        {common_errors}
        ValueError
            Integer data over an empty set (there is no integer -inf), and an integer result that does
            not fit the dtype.

        See Also
        --------
        reduce_mean, reduce_sum, reduce_sum_square

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_log_sum_exp(np.float32([1000, 1000]))
        array([1000.6932], dtype=float32)
        >>> numred.reduce_log_sum_exp(np.float64([[0, 0], [1, -np.inf]]), axes=1, keepdims=0)
        array([0.69314718, 1.        ])
        >>> numred.reduce_log_sum_exp(np.float32([-np.inf, -np.inf]))
        array([-inf], dtype=float32)

        Integer results are truncated toward zero (5 + log(1 + 5/e) = 6.04):

        >>> numred.reduce_log_sum_exp(np.int64([5, 4, 4, 4, 4, 4]))
        array([6])
        """,
    ),
    Op(
        name="reduce_sum_square",
        onnx_name="ReduceSumSquare",
        empty_float=0.0,
        empty_int=0,
        noop=square_in_dtype,
        numpy_peer=lambda x, axes, keepdims: np.sum(np.square(x), axis=axes, keepdims=keepdims),
        reduction=_reduction.Reduction(_reduction.SQUARES, _reduction.WRAPPING),
        torch_peer=lambda torch, t, dims: torch.sum(t * t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceSumSquare (opset 18): ``sum(x * x)`` over ``axes``, in the input dtype.

        Floats accumulate in float64 and round once (a sum beyond the dtype's range is inf). Integers
        wrap modulo 2**bits, exactly like ``np.sum(np.square(x, dtype=T), dtype=T)``.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, ``data * data`` elementwise in
            the input dtype. An empty set gives 0.

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_sum, reduce_mean, reduce_log_sum_exp

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_sum_square(np.float32([[1, 2], [3, 4]]))
        array([[30.]], dtype=float32)
        >>> numred.reduce_sum_square(np.float32([[1, 2], [3, 4]]), axes=[0], keepdims=0)
        array([10., 20.], dtype=float32)

        Integers wrap, they are not promoted:

        >>> numred.reduce_sum_square(np.int32([50000, 50000]))
        array([705032704], dtype=int32)
        >>> numred.reduce_sum_square(np.int32([3, 50000]), axes=[], noop_with_empty_axes=1)
        array([          9, -1794967296], dtype=int32)
        """,
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
        torch_peer=lambda torch, t, dims: torch.sum(t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceSum (opset 18): the sum over ``axes``, in the input dtype.

        Floats accumulate in float64 and round once to the input dtype; float64 sums are nearly exact
        (at least as accurate as NumPy's pairwise sum), and a float64 sum is ±inf only when the exact
        sum is beyond float64's range. Integers wrap modulo 2**bits, exactly like
        ``np.sum(x, dtype=T)``.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of ``data``. An empty set
            gives 0. IEEE rules for NaN and inf: any NaN, or +inf with -inf, gives NaN.

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_mean, reduce_sum_square, reduce_log_sum_exp

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
        >>> numred.reduce_sum(x, axes=[0], keepdims=0)
        array([4., 6.], dtype=float32)
        >>> numred.reduce_sum(x, keepdims=0)
        array(10., dtype=float32)

        float32 data is summed in float64 and rounded once: a million float32 values of 0.1 (each
        0.100000001490116...) sum to 100000.0015, which rounds to 100000.0 (NumPy's float32 pairwise sum
        gives 100000.01):

        >>> x = np.full(10**6, 0.1, dtype=np.float32)
        >>> numred.reduce_sum(x)
        array([100000.], dtype=float32)
        >>> float(np.sum(x))
        100000.0078125

        Integers wrap, they are not promoted:

        >>> numred.reduce_sum(np.int32([2**31 - 1, 1]))
        array([-2147483648], dtype=int32)
        >>> numred.reduce_sum(np.uint32([]))
        array([0], dtype=uint32)
        """,
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
        torch_peer=lambda torch, t, dims: torch.amax(t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceMax (opset 18): the maximum over ``axes``, in the input dtype.

        Exact for every dtype, and also takes int8 and uint8 (as ONNX types ReduceMax and ReduceMin).
        Any NaN gives NaN, and -0.0 counts as smaller than +0.0, so the maximum of ``[-0.0, 0.0]`` is
        +0.0. Float data is compared as integer keys of its bits, which vectorises where a float
        comparison that keeps NaN does not.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of ``data``. Over an
            empty set, -inf for float dtypes and the dtype's minimum for integer dtypes (the ONNX rule).

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_min, reduce_log_sum_exp

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> x = np.array([[1.0, -2.0], [3.0, np.nan]], dtype=np.float32)
        >>> numred.reduce_max(x, axes=[1], keepdims=0)
        array([ 1., nan], dtype=float32)
        >>> numred.reduce_max(np.float32([-0.0, 0.0]))
        array([0.], dtype=float32)
        >>> numred.reduce_max(np.zeros((2, 0), np.int32), axes=[1], keepdims=0)
        array([-2147483648, -2147483648], dtype=int32)
        """,
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
        torch_peer=lambda torch, t, dims: torch.amin(t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceMin (opset 18): the minimum over ``axes``, in the input dtype.

        Exact for every dtype, and also takes int8 and uint8 (as ONNX types ReduceMax and ReduceMin).
        Any NaN gives NaN, and -0.0 counts as smaller than +0.0, so the minimum of ``[-0.0, 0.0]`` is
        -0.0. Float data is compared as integer keys of its bits, which vectorises where a float
        comparison that keeps NaN does not.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of ``data``. Over an
            empty set, +inf for float dtypes and the dtype's maximum for integer dtypes (the ONNX rule).

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_max

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> x = np.array([[1.0, -2.0], [3.0, np.nan]], dtype=np.float32)
        >>> numred.reduce_min(x, axes=[1], keepdims=0)
        array([-2., nan], dtype=float32)
        >>> numred.reduce_min(np.float32([-0.0, 0.0]))
        array([-0.], dtype=float32)
        >>> numred.reduce_min(np.zeros((2, 0), np.int32), axes=[1], keepdims=0)
        array([2147483647, 2147483647], dtype=int32)
        """,
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
        torch_peer=torch_product,
        doc="""ONNX ReduceProd (opset 18): the product over ``axes``, in the input dtype.

        No intermediate overflows or underflows: the exponents are tracked apart from the mantissas, so
        the float64 product of ``[1e300, 1e300, 1e-300]`` is 1e300, not inf. float16, bfloat16 and
        float32 are multiplied in float64 and rounded once; float64 is within ``n - 1`` units in the
        last place. Any NaN gives NaN, 0 x inf is NaN, and the sign is exact (``-0.0`` included).
        Integers wrap modulo 2**bits, as ``np.prod(x, dtype=T)``.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, a copy of ``data``. An empty
            set gives 1.

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_sum, reduce_log_sum

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_prod(np.float32([[1, 2], [3, 4]]), axes=[1], keepdims=0)
        array([ 2., 12.], dtype=float32)
        >>> numred.reduce_prod(np.float64([1e300, 1e300, 1e-300]))
        array([1.e+300])
        >>> numred.reduce_prod(np.int32([65536, 65536, 3]))
        array([0], dtype=int32)
        """,
    ),
    Op(
        name="reduce_l1",
        onnx_name="ReduceL1",
        empty_float=0.0,
        empty_int=0,
        noop=magnitude_wrapping,
        numpy_peer=lambda x, axes, keepdims: np.sum(np.abs(x), axis=axes, keepdims=keepdims),
        # integers: modulo 2**bits, |INT_MIN| wrapping to INT_MIN
        reduction=_reduction.Reduction(_reduction.ABS, _reduction.WRAPPING, finish=_reduction.ROUND),
        torch_peer=lambda torch, t, dims: torch.linalg.vector_norm(t, ord=1, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceL1 (opset 18): ``sum(|x|)`` over ``axes``, in the input dtype.

        float16, bfloat16 and float32 sum ``|x|`` in float64 and round once; float64 is at least as
        accurate as NumPy's pairwise sum. Any NaN gives NaN, else any inf gives inf. Integers wrap
        modulo 2**bits, as ``np.sum(np.abs(x), dtype=T)`` (``|INT_MIN|`` wraps to INT_MIN, as in the
        onnx reference).

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, ``|data|`` elementwise. An
            empty set gives 0.

        Raises
        ------
        {common_errors}

        See Also
        --------
        reduce_l2, reduce_sum

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_l1(np.float32([[3, -4], [-5, 12]]), axes=[1], keepdims=0)
        array([ 7., 17.], dtype=float32)
        >>> numred.reduce_l1(np.int32([-3, 4]))
        array([7], dtype=int32)
        """,
    ),
    Op(
        name="reduce_l2",
        onnx_name="ReduceL2",
        empty_float=0.0,
        empty_int=0,
        noop=magnitude,
        numpy_peer=lambda x, axes, keepdims: np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keepdims)),
        # integers: isqrt of the exact sum of squares
        reduction=_reduction.Reduction(_reduction.SQUARES, _reduction.EXACT, finish=_reduction.SQRT),
        exact=_exact.l2,
        torch_peer=lambda torch, t, dims: torch.linalg.vector_norm(t, dim=dims, keepdim=True),
        memory_bound=True,
        doc="""ONNX ReduceL2 (opset 18): ``sqrt(sum(x * x))`` over ``axes``, in the input dtype.

        float16, bfloat16 and float32 square and sum in float64, take the square root and round once.
        float64 has no spurious overflow or underflow: where the sum of squares would leave float64's
        range, the elements are scaled by a power of two first, so the L2 of ``[1e200, 1e200]`` is
        1.4142135623730951e200. Any NaN gives NaN, else any inf gives inf. Integers give the exact
        square root of the exact sum of squares, truncated (``math.isqrt``).

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, ``|data|`` elementwise. An
            empty set gives 0.

        Raises
        ------
        {common_errors}
        ValueError
            An integer result that does not fit the dtype (also ``|x|`` of the dtype's minimum in the
            noop case), duplicate axes, an ``axes`` array of rank above 1, ``keepdims`` or
            ``noop_with_empty_axes`` other than 0/1/False/True, or data that cannot be converted to an
            array.

        See Also
        --------
        reduce_sum_square

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_l2(np.float32([[3, 4], [5, 12]]), axes=[1], keepdims=0)
        array([ 5., 13.], dtype=float32)
        >>> numred.reduce_l2(np.float64([1e200, 1e200]))
        array([1.41421356e+200])

        Integers are exact, truncated toward zero:

        >>> numred.reduce_l2(np.int64([[3, 4], [1, 1]]), axes=[1], keepdims=0)
        array([5, 1])
        """,
    ),
    Op(
        name="reduce_log_sum",
        onnx_name="ReduceLogSum",
        empty_float=float("-inf"),
        empty_int=None,
        noop=elementwise_log,
        numpy_peer=lambda x, axes, keepdims: np.log(np.sum(x, axis=axes, keepdims=keepdims)),
        # integers: trunc(ln S) of the exact sum S
        reduction=_reduction.Reduction(_reduction.SUM, _reduction.EXACT, finish=_reduction.LOG),
        exact=_exact.int_log_sum,
        positive_input=True,
        torch_peer=lambda torch, t, dims: torch.log(torch.sum(t, dim=dims, keepdim=True)),
        doc="""ONNX ReduceLogSum (opset 18): ``log(sum(x))`` over ``axes``, in the input dtype.

        Floats sum as :func:`reduce_sum` does (float64 accumulation), take the log and round once. A
        negative sum gives NaN and a zero sum -inf. A float64 sum beyond float64's range still has its
        finite log. Integers give ``trunc(ln S)`` of the exact sum ``S``, decided exactly even where the
        log is within rounding of an integer.

        Parameters
        ----------
        {parameters}

        Returns
        -------
        numpy.ndarray
            A new array of the input dtype (native byte order), 0-d for a full reduction with
            ``keepdims=0``. With ``noop_with_empty_axes=1`` and no axes, the elementwise log (integers:
            ``trunc(ln x)``). An empty set gives -inf for float dtypes.

        Raises
        ------
        {common_errors}
        ValueError
            An integer sum (an integer element in the noop case) that is not positive, an integer
            reduction over an empty set, duplicate axes, an ``axes`` array of rank above 1,
            ``keepdims`` or ``noop_with_empty_axes`` other than 0/1/False/True, or data that cannot be
            converted to an array.

        See Also
        --------
        reduce_log_sum_exp, reduce_sum

        Examples
        --------
        >>> import numpy as np
        >>> import numred
        >>> numred.reduce_log_sum(np.float32([[1, 2], [3, 4]]), axes=[1], keepdims=0)
        array([1.0986123, 1.9459101], dtype=float32)
        >>> numred.reduce_log_sum(np.float32([1, -2]))
        array([nan], dtype=float32)

        Integers are exact, truncated toward zero (ln 20 = 2.9957...):

        >>> numred.reduce_log_sum(np.int32([7, 13]))
        array([2], dtype=int32)
        """,
    ),
)

OPS_BY_NAME = {op.name: op for op in OPS}
OPS_BY_ONNX_NAME = {op.onnx_name: op for op in OPS}
