"""The peers ``python -m numred bench`` times numred against: small adapter objects (see
:class:`Peer`). NumPy is always present; onnxruntime and torch are used when importable and
skipped with a printed note otherwise. A peer that cannot run a case (no kernel for that dtype,
unsupported input, ...) is shown as ``n/a`` for that case.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from numred._registry import Op

class Peer:
    """Adapter for one implementation numred is compared with.

    A new peer is a subclass with these four methods, appended to :data:`PEERS`.
    """

    name = "?"

    def load(self) -> str | None:
        """Import what the peer needs; return None when usable, else the reason it is skipped."""
        return None

    def version(self) -> str:
        return "?"

    def set_threads(self, n: int) -> None:
        """Apply the --threads setting (called once, after load)."""

    def prepare(self, op: Op, x: np.ndarray, axes: tuple[int, ...]) -> Callable[[], object]:
        """Return a zero-argument callable computing ``op`` over ``axes`` of ``x`` with keepdims=1.

        Everything that is not the reduction itself (model building, tensor conversion) happens
        here, outside the timed region. Raise any exception if the peer cannot run this case.
        """
        raise NotImplementedError


class NumPyPeer(Peer):
    """The NumPy expression recorded for each op in the registry (``Op.numpy_peer``)."""

    name = "numpy"

    def version(self) -> str:
        return np.__version__

    def prepare(self, op, x, axes):
        fn = op.numpy_peer
        return lambda: fn(x, axes, True)


class OnnxRuntimePeer(Peer):
    """A single-node opset-18 model, axes fed as an int64 input, CPUExecutionProvider."""

    name = "onnxruntime"

    def load(self):
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            return f"not importable ({exc})"
        self._threads = 1
        return None

    def version(self):
        import onnxruntime

        return onnxruntime.__version__

    def set_threads(self, n):
        self._threads = n

    def prepare(self, op, x, axes):
        import onnxruntime as ort
        from onnx import TensorProto, helper

        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        node = helper.make_node(op.onnx_name, ["data", "axes"], ["out"], keepdims=1)
        graph = helper.make_graph(
            [node],
            "numred_bench",
            [
                helper.make_tensor_value_info("data", elem, list(x.shape)),
                helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]),
            ],
            [helper.make_tensor_value_info("out", elem, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 8  # the IR version of opset 18; any onnxruntime that has opset 18 reads it
        so = ort.SessionOptions()
        so.intra_op_num_threads = self._threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(
            model.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
        feeds = {"data": x, "axes": np.asarray(axes, dtype=np.int64)}
        return lambda: sess.run(None, feeds)


class TorchPeer(Peer):
    """torch.mean / sum / amax / amin / logsumexp / sum of squares / linalg.vector_norm (L1, L2) / log
    of the sum, on a tensor sharing the NumPy buffer.

    Each op is torch's own expression for it, as a torch user would write it; what torch cannot do
    raises and is shown as n/a (torch.mean has no integer kernel). As with NumPy, the dtypes of
    integer results follow torch's rules (logsumexp of integers is float32, the sum of int32
    squares is int64), not ONNX's. bfloat16 goes through an int16 view (torch.from_numpy does not
    know ml_dtypes).
    """

    name = "torch"

    def load(self):
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            return f"not importable ({exc})"
        return None

    def version(self):
        import torch

        return torch.__version__

    def set_threads(self, n):
        import torch

        torch.set_num_threads(n)

    def prepare(self, op, x, axes):
        import torch

        if x.dtype.name == "bfloat16":  # torch.from_numpy does not know ml_dtypes
            t = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(x)
        dims = list(axes)
        if op.torch_peer is None:
            raise NotImplementedError(f"no torch expression for {op.onnx_name}")
        return lambda: op.torch_peer(torch, t, dims)


PEERS: list[Peer] = [NumPyPeer(), OnnxRuntimePeer(), TorchPeer()]
