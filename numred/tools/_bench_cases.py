"""The cases of ``python -m numred bench``: a handful of standard shapes and reduced axes, crossed
with the registry's operators, and their inputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Cases with at least this many elements are skipped by --quick.
LARGE_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...] | None  # None: reduce all axes (numred gets axes=None, the ONNX default)
    # above 1: the input is a view of every step-th element along the last axis of a contiguous
    # array ``step`` times as wide (x[..., ::step]), read where it lies
    step: int = 1

    def make(self, dtype: np.dtype) -> np.ndarray:
        """The case's input (make_input), a strided view when step > 1."""
        if self.step == 1:
            return make_input(self.shape, dtype)
        return make_input((*self.shape[:-1], self.shape[-1] * self.step), dtype)[..., ::self.step]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def large(self) -> bool:
        return self.size >= LARGE_ELEMENTS

    def explicit_axes(self) -> tuple[int, ...]:
        """The reduced axes spelled out, for peers that need them listed."""
        return tuple(range(len(self.shape))) if self.axes is None else self.axes

    def shape_label(self) -> str:
        return "x".join(str(n) for n in self.shape) + (f"/{self.step}" if self.step > 1 else "")

    def axes_label(self) -> str:
        if self.axes is None:
            return "all"
        if len(self.axes) == 1:
            return str(self.axes[0])
        return "[" + ",".join(str(a) for a in self.axes) + "]"


CASES = (
    Case((3, 2, 2), (1,)),
    Case((64, 64), None),
    Case((1000, 1000), (1,)),
    Case((1000, 1000), (0,)),
    Case((4096, 4096), (1,)),
    Case((4096, 4096), (0,)),
    Case((4096, 4096), None),
    Case((32, 64, 56, 56), (2, 3)),
    Case((32, 64, 56, 56), (1,)),
    Case((32, 56, 56, 64), (1, 2)),
    Case((4194304, 4), (0,)),
    Case((4, 4194304), (1,)),
    Case((8192, 16384), (1,)),  # 512 MiB of float32
    Case((8192, 16384), (0,)),
)
# --more: common layouts beyond the cases, where earlier plans lost to the peers by 2-14x
MORE_CASES = (
    Case((100000, 16), (1,)),  # many short rows: a log-softmax's normaliser over 16 classes
    Case((16, 100000), (0,)),  # few rows of many outputs
    Case((256, 1024, 8), (1,)),  # a narrow inner kept axis
    Case((32, 128, 768), (2,)),  # transformer activations, over the hidden size
    Case((8, 3, 224, 224), (0, 2, 3)),  # per-channel statistics of NCHW images
    Case((32, 64, 56, 56), (0, 2, 3)),  # ... of NCHW activations (batch norm): 64 channels
    Case((16384, 1000), (1,)),  # many rows beyond the cache: a large batch's logits over 1000 classes
    Case((4000, 3000), (1,), step=2),  # every other element of each row (x[:, ::2]), read in place
)


def dtype_from_name(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_input(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Random data from a fixed seed: standard normal floats, small integers (|x| < 100).

    Generated straight into the result dtype: a 512 MiB float32 case needs 512 MiB, not a float64
    draw plus copies. float16 and bfloat16 are rounded from float32 drawn in chunks (the same values
    as one draw: the generator's stream is sequential).
    """
    rng = np.random.default_rng(0)
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -100
        return rng.integers(low, 100, size=shape, dtype=dtype)
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype.type)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    chunk = 1 << 22
    for start in range(0, flat.size, chunk):
        stop = min(flat.size, start + chunk)
        flat[start:stop] = rng.standard_normal(stop - start, dtype=np.float32).astype(dtype)
    return out


def op_input(x: np.ndarray, op) -> np.ndarray:
    """The input ``op`` (a registry Op) is timed on: the case's ``x``, or a copy of |x| for an op
    that needs positive sums (Op.positive_input)."""
    return np.abs(x) if op.positive_input else x
