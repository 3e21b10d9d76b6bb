"""ONNX integration: numred's kernels inside onnx's reference evaluator, and a minimal ONNX backend.

This module imports `onnx`, an optional dependency (``pip install onnx``); ``import numred`` alone
never does.

Examples
--------
Run a model whose ReduceMean node is computed by numred, every other node by onnx's reference:

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> from onnx.reference import ReferenceEvaluator
>>> import numred.onnx
>>> node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)
>>> graph = helper.make_graph(
...     [node], "g",
...     [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 2]),
...      helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
...     [helper.make_tensor_value_info("y", TensorProto.INT32, [2])])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
>>> sess = ReferenceEvaluator(model, new_ops=numred.onnx.REFERENCE_OPS)
>>> sess.run(None, {"x": np.int32([[-1, -2], [2**31 - 1, 2**31 - 1]]), "axes": np.int64([1])})
[array([        -1, 2147483647], dtype=int32)]

The same model through the backend API:

>>> numred.onnx.Backend.run_model(model, [np.int32([[1, 2], [3, 5]]), np.int64([0])])
(array([2, 3], dtype=int32),)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.backend.base
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

import numred

from ._registry import OPS

__all__ = ["REFERENCE_OPS", "Backend", "BackendRep"]  # and the classes of REFERENCE_OPS, by name


class _NumredReduce(OpRun):
    """One of numred's reductions as an onnx reference operator, for every opset of the operator.

    ReferenceEvaluator takes the class of ``new_ops`` named like the node's op_type whatever the
    model's opset, and fills the attributes the node does not set with the defaults of the latest
    schema (keepdims=1, noop_with_empty_axes=0). Opsets 1, 11 and 13 give ``axes`` as an attribute,
    which arrives as a keyword; opset 18 gives it as the optional second input, which arrives
    positionally (None when omitted).
    """

    op_domain = ""  # ReferenceEvaluator requires it of new_ops and keys them by (op_domain, class name)
    _reduce: Any = None  # the numred function; set per subclass

    def run(self, *args, **kwargs):
        # OpRun.run replaces any TypeError of _run by a generic "Issues with types ..." TypeError; a
        # TypeError of numred's (an unsupported dtype, non-integer axes) names the problem precisely,
        # so it is what the user gets, with the node it came from
        try:
            return super().run(*args, **kwargs)
        except TypeError as exc:
            if type(exc.__cause__) is not TypeError or not getattr(exc.__cause__, "_numred", False):
                raise
            node = self.onnx_node
            where = f"{node.op_type} node {node.name!r}" if node.name else node.op_type
            raise TypeError(f"{where}: {exc.__cause__}") from None

    def _run(self, data, axes_input=None, axes=None, keepdims=1, noop_with_empty_axes=0):
        if axes is not None and axes_input is not None:
            raise ValueError(f"{self.onnx_node.op_type}: axes given both as an attribute and as an input")
        if axes is None:
            axes = axes_input
        try:
            return (type(self)._reduce(data, axes, keepdims=keepdims, noop_with_empty_axes=noop_with_empty_axes),)
        except TypeError as exc:
            exc._numred = True  # for run(): this message is numred's own
            raise


def _reference_op(op) -> type[OpRun]:
    func = getattr(numred, op.name)
    return type(op.onnx_name, (_NumredReduce,), {
        "_reduce": staticmethod(func),
        "__module__": __name__,
        "__doc__": f"ONNX {op.onnx_name}, any opset, computed by :func:`numred.{op.name}`.",
    })


#: The operator classes to pass as ``ReferenceEvaluator(model, new_ops=REFERENCE_OPS)``: one per
#: operator of numred (ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceLogSumExp, ReduceSumSquare,
#: ReduceL1, ReduceL2, ReduceLogSum), built from the op registry.
REFERENCE_OPS: list[type[OpRun]] = [_reference_op(op) for op in OPS]
# each class also under its operator name: numred.onnx.ReduceMean, ...
globals().update({cls.__name__: cls for cls in REFERENCE_OPS})

__all__ += [cls.__name__ for cls in REFERENCE_OPS]
_SUPPORTED = frozenset(op.onnx_name for op in OPS)


class BackendRep(onnx.backend.base.BackendRep):
    """A prepared model: a ReferenceEvaluator whose nodes all run numred's kernels.

    Made by :meth:`Backend.prepare`, which checks the model first.

    Parameters
    ----------
    model : onnx.ModelProto
        A model whose nodes are all numred's operators (ReduceMean, ReduceSum, ReduceMax, ReduceMin,
        ReduceLogSumExp, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum).
    """

    def __init__(self, model: onnx.ModelProto):
        # onnx's Backend.prepare has checked the model; ReferenceEvaluator binds the nodes to numred
        self._session = ReferenceEvaluator(model, new_ops=REFERENCE_OPS)
        initialized = {init.name for init in model.graph.initializer}
        self._inputs = [i.name for i in model.graph.input if i.name not in initialized]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run the model.

        Parameters
        ----------
        inputs : list of numpy.ndarray, dict or numpy.ndarray
            The graph inputs that are not initializers: a list in graph-input order, a dict by
            input name, or a single array for a one-input model.
        **kwargs
            Accepted for the ``BackendRep`` interface and ignored.

        Returns
        -------
        tuple of numpy.ndarray
            The graph outputs, in order.
        """
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self._inputs, inputs))
        return tuple(self._session.run(None, feeds))


class Backend(onnx.backend.base.Backend):
    """An ONNX backend (``onnx.backend.base.Backend``) that runs models through numred, on the CPU.

    It accepts only models whose nodes are all ReduceMean, ReduceSum, ReduceMax, ReduceMin,
    ReduceLogSumExp, ReduceSumSquare, ReduceL1, ReduceL2 or ReduceLogSum of the default domain, in
    any opset: any other node would be computed by onnx's NumPy reference, not by numred, and a
    result would be reported as numred's that is not. ``is_compatible`` says False for such models
    and ``prepare`` refuses them.
    """

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Whether ``device`` is the CPU, the only device numred runs on.

        Parameters
        ----------
        device : str
            An ONNX device string: ``"CPU"``, ``"CUDA"``, ``"CUDA:1"``...

        Returns
        -------
        bool
            True for ``"CPU"`` (any device id), False otherwise.
        """
        try:
            return onnx.backend.base.Device(device).type == onnx.backend.base.DeviceType.CPU
        except (AttributeError, ValueError):  # an unknown device name
            return False

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        """Whether this backend runs ``model``: every node is one of numred's operators.

        Parameters
        ----------
        model : onnx.ModelProto
            The model.
        device : str, optional
            The device to run on; only the CPU is supported.
        **kwargs
            Ignored.

        Returns
        -------
        bool
            True when the device is the CPU and every node of the graph is one of numred's operators
            (ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceLogSumExp, ReduceSumSquare, ReduceL1,
            ReduceL2, ReduceLogSum) of the default domain (any opset).
        """
        return cls.supports_device(device) and all(
            node.domain == "" and node.op_type in _SUPPORTED for node in model.graph.node
        )

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        """Check ``model`` and bind its nodes to numred, for repeated runs.

        ``Backend.run_model(model, inputs)``, inherited from onnx, is ``prepare(model).run(inputs)``.

        Parameters
        ----------
        model : onnx.ModelProto
            The model; :func:`onnx.checker.check_model` must accept it.
        device : str, optional
            The device to run on; only the CPU is supported.
        **kwargs
            Ignored.

        Returns
        -------
        BackendRep
            The prepared model; call its ``run`` method.

        Raises
        ------
        NotImplementedError
            The device is not the CPU, or a node is not one of numred's operators.
        onnx.checker.ValidationError
            The model is not valid ONNX.
        """
        super().prepare(model, device, **kwargs)  # onnx.checker.check_model
        if not cls.is_compatible(model, device):
            others = sorted({n.op_type for n in model.graph.node} - _SUPPORTED)
            raise NotImplementedError(
                f"numred's backend runs {', '.join(op.onnx_name for op in OPS)} on the CPU only; "
                f"device {device!r}, other operators: {others}"
            )
        return BackendRep(model)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU", outputs_info=None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run a single node.

        Parameters
        ----------
        node : onnx.NodeProto
            A ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceLogSumExp, ReduceSumSquare,
            ReduceL1, ReduceL2 or ReduceLogSum node, with ``axes`` as an attribute (opsets 1-13;
            ReduceSum 1 and 11) or as its second input (opset 18; ReduceSum 13).
        inputs : list of numpy.ndarray
            The node's inputs in order; None for an omitted optional input.
        device : str, optional
            The device to run on; only the CPU is supported.
        outputs_info : optional
            Ignored (the output types and shapes follow from the inputs).
        **kwargs
            ``opset_version=N`` checks the node against that opset (default: the latest).

        Returns
        -------
        tuple of numpy.ndarray
            The node's output.

        Raises
        ------
        NotImplementedError
            The device is not the CPU, or the node is another operator.

        Examples
        --------
        >>> import numpy as np
        >>> from onnx import helper
        >>> from numred.onnx import Backend
        >>> node = helper.make_node("ReduceSumSquare", ["x"], ["y"], axes=[0], keepdims=0)
        >>> Backend.run_node(node, [np.float32([[1, 2], [3, 4]])], opset_version=13)
        (array([10., 20.], dtype=float32),)
        """
        super().run_node(node, inputs, device, outputs_info, **kwargs)  # onnx.checker.check_node
        if not (cls.supports_device(device) and node.op_type in _SUPPORTED and node.domain == ""):
            raise NotImplementedError(f"numred's backend cannot run {node.op_type!r} on {device!r}")
        # ReferenceEvaluator runs a bare node; an omitted optional input ("") is fed None by it
        feeds = {name: value for name, value in zip(node.input, inputs) if name}
        return tuple(ReferenceEvaluator(node, new_ops=REFERENCE_OPS).run(None, feeds))
