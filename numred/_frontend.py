"""The ONNX rules, in plain Python: argument checks, which axes are reduced, output shape, the empty
and no-op cases. Everything that can be wrong about a call is found here, before any kernel runs."""
from __future__ import annotations

import difflib
import functools
import math
import operator
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numpy.exceptions import AxisError
from numpy.lib.array_utils import normalize_axis_tuple

from ._derived import compute
from ._launch import OneLaunch, one_launch
from ._plan import Plan, make_plan
from ._runtime import get_num_threads
from ._reduction import CARRIERS, Undecided, add_bfloat16, int_log_sum_exp_overflow
from ._registry import Op

# (CARRIERS: the dtypes the kernels read, numred._reduction. Numba cannot load float16 or bfloat16
# arrays, so both travel as 16-bit integers, and the integer type tells the kernel which decoding applies.)
SUPPORTED_NAMES = "float32, float64, float16, bfloat16, int32, int64, uint32, uint64"
# ReduceMax and ReduceMin also take int8 and uint8 (their ONNX opset-18 type lists; Op.narrow_ints),
# read by the kernels as they are
NARROW_INTS = (np.dtype(np.int8), np.dtype(np.uint8))


def supported_dtypes() -> list[np.dtype]:
    """The eight supported dtypes, in the order of SUPPORTED_NAMES (imports ml_dtypes)."""
    bfloat16 = add_bfloat16()
    return [bfloat16 if name == "bfloat16" else np.dtype(name) for name in SUPPORTED_NAMES.split(", ")]


def _cast_hint(dtype: np.dtype) -> str:
    """The cast a user most likely wants for an unsupported dtype, as a sentence ('' when none fits)."""
    if dtype.kind == "b" or (dtype.kind in "iu" and dtype.itemsize < 4) or dtype.name.startswith(("int", "uint")):
        return (" Cast it first: data.astype(np.float32) for float results (a mean with its fraction), "
                "or np.int32 / np.int64 to keep the integer rules.")
    if dtype.kind == "f" or dtype.name.startswith("float"):  # longdouble, float8, float4, ...
        return " Cast it first, e.g. data.astype(np.float32) or data.astype(np.float64)."
    return ""


def as_supported_array(data, narrow_ints: bool = False) -> np.ndarray:
    """``data`` as an ndarray of a supported dtype in native byte order (a copy only when byte-swapped);
    ``narrow_ints``: int8 and uint8 are supported too."""
    # np.asarray drops a mask silently: the masked values would be counted as if they were data
    if isinstance(data, np.ma.MaskedArray) or (
        type(data) in (list, tuple) and any(isinstance(item, np.ma.MaskedArray) for item in data)
    ):
        raise TypeError(
            "numred does not interpret masks, and converting a numpy.ma.MaskedArray would silently "
            "include its masked values; pass data.filled(value) to choose what they count as, or "
            "data.compressed() for the unmasked values only (1-D)"
        )
    try:
        x = np.asarray(data)
    except (ValueError, TypeError) as exc:  # ragged nested lists, objects NumPy refuses
        raise ValueError(f"data cannot be converted to an array: {exc}") from None
    native = x.dtype.newbyteorder("=") if x.dtype.byteorder not in "=|" else x.dtype
    if native not in CARRIERS and native.name == "bfloat16" and "ml_dtypes" in sys.modules:
        add_bfloat16()
    supported = native in CARRIERS or (narrow_ints and native in NARROW_INTS)
    if not supported or x.dtype.fields is not None or x.dtype.subdtype is not None:
        if x.dtype == object and not isinstance(data, np.ndarray):
            raise TypeError(
                f"data must be array-like: a NumPy array, or a number or nested sequence of numbers, "
                f"of dtype {SUPPORTED_NAMES}; got {type(data).__name__}, which NumPy can only read as "
                "an array of dtype object"
            )
        also = " (ReduceMax and ReduceMin also int8 and uint8)" if native in NARROW_INTS else ""
        raise TypeError(f"unsupported dtype {x.dtype}; numred supports {SUPPORTED_NAMES}{also}.{_cast_hint(x.dtype)}")
    if native != x.dtype:
        x = x.astype(native)
    return x


PARAMETERS = ("data", "axes", "keepdims", "noop_with_empty_axes")
# NumPy's and other libraries' names for the same things, and what numred takes instead
_KEYWORD_HINTS = {
    "axis": "did you mean axes=? numred follows the ONNX operator: axes=1 or axes=[0, 2]",
    "dim": "did you mean axes=? numred follows the ONNX operator: axes=1 or axes=[0, 2]",
    "keepdim": "did you mean keepdims=? (1 or 0; numred's default is 1, as in ONNX)",
    "keep_dims": "did you mean keepdims=? (1 or 0; numred's default is 1, as in ONNX)",
    "dtype": "the result always has the input's dtype: cast the input first, e.g. data.astype(np.float64)",
    "out": "numred always returns a new array",
}


def unexpected_keywords(func_name: str, names) -> TypeError:
    """The TypeError for keywords a reduction does not take, with the likely intended one."""
    name = sorted(names)[0]
    hint = _KEYWORD_HINTS.get(name)
    if hint is None:
        close = [p for p in PARAMETERS if p.startswith(name)] or difflib.get_close_matches(name, PARAMETERS, n=1)
        hint = f"did you mean {close[0]}=?" if close else f"it takes {', '.join(PARAMETERS)}"
    return TypeError(f"{func_name}() got an unexpected keyword argument {name!r}; {hint}")


def as_flag(value, name: str) -> int:
    """keepdims and noop_with_empty_axes: 0, 1, False or True, as Python or NumPy values."""
    if type(value) is int and (value == 0 or value == 1):  # the common case, first
        return value
    if isinstance(value, (bool, np.bool_, int, np.integer)) and value in (0, 1):
        return int(value)
    raise ValueError(f"{name} must be 0 or 1 (or False/True), got {value!r}")


def _axis_value(value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"axes values must be integers, got {value!r} of type {type(value).__name__}")
    return operator.index(value)


def reduced_axes(axes, ndim: int) -> tuple[int, ...]:
    """The normalised, sorted axes named by ``axes``; () when none are named (None or empty)."""
    if axes is None:
        return ()
    if type(axes) is int:  # the common cases, without the general machinery
        if -ndim <= axes < ndim:
            return (axes % ndim,)
    elif type(axes) is list or type(axes) is tuple:
        if len(axes) == 1 and type(axes[0]) is int and -ndim <= axes[0] < ndim:
            return (axes[0] % ndim,)
        normalized = sorted(a % ndim for a in axes if type(a) is int and -ndim <= a < ndim)
        if len(normalized) == len(axes) and len(set(normalized)) == len(normalized):
            return tuple(normalized)
    if isinstance(axes, np.ndarray):
        if axes.ndim > 1:
            raise ValueError(f"axes must be a 1-D integer array, got an array of shape {axes.shape}")
        if axes.dtype.kind not in "iu":
            raise TypeError(f"axes must hold integers, got an array of dtype {axes.dtype}")
        values = [int(v) for v in axes.reshape(-1)]
    elif isinstance(axes, (list, tuple, range)) or (
        isinstance(axes, Sequence) and not isinstance(axes, (str, bytes))
    ):
        values = [_axis_value(v) for v in axes]
    else:
        values = [_axis_value(axes)]
    for value in values:  # normalize_axis_tuple overflows (OverflowError) beyond a C int instead
        if not -ndim <= value < ndim:
            raise AxisError(value, ndim, msg_prefix="axes")
    return tuple(sorted(normalize_axis_tuple(values, ndim, argname="axes")))


@functools.lru_cache(maxsize=4096)
def _output_geometry(shape, axes, keepdims):
    """(output shape, output size, reduced count): cached, as calls on one shape repeat."""
    if keepdims:
        out_shape = tuple(1 if a in axes else n for a, n in enumerate(shape))
    else:
        out_shape = tuple(n for a, n in enumerate(shape) if a not in axes)
    return out_shape, math.prod(out_shape), math.prod(shape[a] for a in axes)


# Small calls are mostly this module's Python work, and calls on one geometry repeat. Once a call on
# a contiguous native ndarray, with None, int, a list/tuple of ints or a 1-D integer ndarray (ONNX's
# form) for axes and ints or bools for the flags, has passed every check, its plan is kept under
# exactly those arguments (an array's as a tuple); a repeat skips the checks
# (they would pass again) and the plan lookup. Parallel calls gain too: after a kernel has streamed
# its data through the caches this Python work runs cold. A plan cut for a thread count
# (Plan.threads) is reused only under that count. A computation that is one kernel launch is kept
# with it (_launch.OneLaunch), and so is the whole repeated call as one function
# (OneLaunch.repeat_call): a small repeat is then the key, one lookup and that function.
class Repeat(NamedTuple):
    plan: Plan
    out_shape: tuple
    carrier: np.dtype | None  # the view the kernels read, where it is not the input's dtype
    launch: OneLaunch | None  # where the computation is one kernel launch
    call: Callable | None  # the whole repeated call as one function (OneLaunch.repeat_call)


_REPEATS: dict = {}
_REPEATS_MAX = 4096


def _repeat_key(op: Op, data, axes, keepdims, noop):
    """The _REPEATS key of a call, or None when its arguments are not of the plain kinds above."""
    if type(keepdims) is bool:  # as_flag reads True and False as 1 and 0: one entry serves both spellings
        keepdims = int(keepdims)
    if type(noop) is bool:
        noop = int(noop)
    if type(data) is not np.ndarray or type(keepdims) is not int or type(noop) is not int:
        return None
    if type(axes) is list or type(axes) is tuple:
        for a in axes:  # a loop, not all(...): a generator is a noticeable part of a small call
            if type(a) is not int:
                return None
        axes = tuple(axes)
    elif type(axes) is np.ndarray:  # the form ONNX passes: a 1-D int64 array, as cheap as a list
        if axes.ndim != 1 or axes.dtype.kind not in "iu":
            return None
        axes = tuple(axes.tolist())
    elif axes is not None and type(axes) is not int:
        return None
    return op.name, data.shape, data.strides, data.dtype, axes, keepdims, noop


def reduce(op: Op, data, axes, keepdims, noop_with_empty_axes) -> np.ndarray:
    if type(data) is np.ndarray:
        # _repeat_key's key, built here for the commonest arguments: calling it is a noticeable
        # part of a small call (tests check that both give the same key)
        if type(keepdims) is not int or type(noop_with_empty_axes) is not int:
            key = _repeat_key(op, data, axes, keepdims, noop_with_empty_axes)
        elif axes is None or type(axes) is int:
            key = op.name, data.shape, data.strides, data.dtype, axes, keepdims, noop_with_empty_axes
        elif type(axes) is list and len(axes) == 1 and type(axes[0]) is int:
            key = op.name, data.shape, data.strides, data.dtype, (axes[0],), keepdims, noop_with_empty_axes
        else:
            key = _repeat_key(op, data, axes, keepdims, noop_with_empty_axes)
        repeat = _REPEATS.get(key)  # (None is never a key)
        if repeat is not None and repeat.call is not None:  # one kernel launch, as one function
            result = repeat.call(data)
            if result is not None:
                return result
    else:
        key = None
    try:
        return _reduce(op, data, axes, keepdims, noop_with_empty_axes, key)
    except Undecided:  # rare: a kernel could not decide a result in float64, or it does not fit
        pass
    return _reduce_exactly(op, data, axes, keepdims)  # (outside the handler: its errors are the user's)


def _reduce_exactly(op: Op, data, axes, keepdims) -> np.ndarray:
    """The call again, in exact arithmetic (op.exact), for what the kernels left undecided. The
    arguments have passed every check: this is a call with at least one element per output."""
    x = as_supported_array(data, op.narrow_ints)
    axes = reduced_axes(axes, x.ndim) or tuple(range(x.ndim))
    out_shape, _, n_reduced = _output_geometry(x.shape, axes, as_flag(keepdims, "keepdims"))
    # kept axes first, reduced ones last in the order of their strides: an output's elements in any
    # order give the same exact result, and in memory's order a transposed or Fortran-ordered input's
    # rows are views, not copies (over all its axes, one copy of the whole input)
    axes = sorted(axes, key=lambda axis: -abs(x.strides[axis]))
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    # (each group's rows made in the call's argument: a copy is freed as soon as the call returns)
    results = [op.exact(moved[group].reshape(-1, n_reduced)) for group in _row_groups(moved.shape, len(axes))]
    if any(result is None for result in results):
        raise int_log_sum_exp_overflow(x.dtype)
    return np.concatenate(results).reshape(out_shape)


# the exact path reads the outputs' rows in groups of about this many elements (_row_groups)
_EXACT_GROUP_ELEMENTS = 1 << 20


def _row_groups(shape: tuple, n_reduced_axes: int):
    """Index expressions of an array of ``shape`` whose last ``n_reduced_axes`` axes are reduced: groups
    of whole indices of the outermost kept axis longer than 1 (those before it have one index, so the
    groups keep the outputs' order), of about _EXACT_GROUP_ELEMENTS elements, whose outputs' elements
    the exact path takes as rows. Those are views where the layout allows, else copies of one group
    at a time (a copy of all the rows at once, for axes that do not merge, would need as much memory
    again as the input; a batch of one, 1xCxHxW, is why the outermost axis of length 1 is passed
    over). One output is one row (one group)."""
    kept = shape[:len(shape) - n_reduced_axes]
    axis = next((a for a, n in enumerate(kept) if n > 1), None)
    if axis is None:
        yield ...
        return
    per_index = math.prod(shape[axis + 1:])  # elements under one index of that axis
    step = max(1, _EXACT_GROUP_ELEMENTS // max(1, per_index))
    for start in range(0, kept[axis], step):
        yield (slice(None),) * axis + (slice(start, start + step),)


def _reduce(op: Op, data, axes, keepdims, noop_with_empty_axes, key) -> np.ndarray:
    """The call; ``key``: its _REPEATS key (_repeat_key), or None. The plan comes from the call's
    Repeat or from the checked arguments; then the engine computes it."""
    repeat = _REPEATS.get(key)
    if repeat is not None and (not repeat.plan.threads or repeat.plan.threads == get_num_threads()):
        # (a kept launch has run in reduce already and left its results to the driver: a float64
        # sum that is not finite, an undecided integer log-sum-exp)
        x, plan, out_shape, carrier = data, repeat.plan, repeat.out_shape, repeat.carrier
        # ravel: a view, as a repeat is C-contiguous (same strides), and cheaper than reshape(-1)
        src = data.ravel() if carrier is None else data.ravel().view(carrier)
        src.setflags(write=False)  # as make_plan's: the kernels are compiled for read-only data
    else:
        x = as_supported_array(data, op.narrow_ints)
        keepdims = as_flag(keepdims, "keepdims")
        noop = as_flag(noop_with_empty_axes, "noop_with_empty_axes")
        axes = reduced_axes(axes, x.ndim)
        if not axes:
            if noop:
                return op.noop(x)
            axes = tuple(range(x.ndim))
        out_shape, n_out, n_reduced = _output_geometry(x.shape, axes, keepdims)
        if n_out == 0:
            return np.empty(out_shape, dtype=x.dtype)
        if n_reduced == 0:
            return op.empty_result(x.dtype, out_shape)
        carrier = CARRIERS.get(x.dtype, x.dtype)  # (int8 and uint8 are their own)
        plan, src = make_plan(x if carrier == x.dtype else x.view(carrier), axes)
        if key is not None and x is data and x.flags.c_contiguous and (key in _REPEATS or len(_REPEATS) < _REPEATS_MAX):
            launch = one_launch(op.reduction, plan, x.dtype)
            repeat_call = None if launch is None else launch.repeat_call(plan.n_kept, out_shape, plan.threads)
            _REPEATS[key] = Repeat(plan, out_shape, None if carrier == x.dtype else carrier, launch, repeat_call)
    return compute(op.reduction, plan, src, x.dtype).reshape(out_shape)
