"""ONNX: numred.onnx (the reference-evaluator operators REFERENCE_OPS and the ONNX backend), the
examples and node tests ONNX publishes, and onnxruntime where it agrees with the contract.

* onnx's own backend test runner (onnx.backend.test.BackendTest) runs the node tests of numred's
  operators (ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceLogSumExp, ReduceSumSquare, ReduceL2,
  ReduceL1, ReduceLogSum) through numred.onnx.Backend;
* ReferenceEvaluator(model, new_ops=REFERENCE_OPS) reproduces the expected outputs of every node test
  data directory of those operators, read back from model.onnx and the .pb files;
* opset 1/11/13 models (axes as an attribute; ReduceSum at 13: an input) match the exact oracle
  (tests/oracle.py);
* numred's kernels, not onnx's NumPy reference, compute the nodes (inputs where the two differ);
* conformance (docs/SEMANTICS.md, "Conformance"): every example printed in the three ONNX operator
  pages (tests/data/seed_examples.json) and the backend node test cases of ReduceMean,
  ReduceLogSumExp and ReduceSumSquare shipped with the installed onnx package, through the public
  functions;
* onnxruntime (CPUExecutionProvider) agrees on random cases where the contract and it agree.

What onnxruntime and the onnx reference do where they differ from the contract (docs/operators.md)
is checked in tests/test_documented_differences.py.
"""
from __future__ import annotations

import functools
import json
import re
import unittest
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import numred
import oracle
from numred._registry import OPS as REGISTRY

onnx = pytest.importorskip("onnx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnx's node test generators emit RuntimeWarnings
    import onnx.backend.test
    from onnx import TensorProto, helper, numpy_helper
    from onnx.backend.test.case.node import collect_testcases
    from onnx.reference import ReferenceEvaluator

    import numred.onnx
    from numred.onnx import REFERENCE_OPS, Backend

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover - a test dependency; only the tests that run it need it
    ort = None
needs_onnxruntime = pytest.mark.skipif(ort is None, reason="onnxruntime is not installed")

OUR_TESTS = r"^test_reduce_(mean|sum|prod|max|min|log_sum_exp|sum_square|l1|l2|log_sum)_"
# node tests whose inputs the contract refuses: opset-20 bool data for ReduceMax and ReduceMin, which
# opset 18 (numred's) does not type; numred raises TypeError for them (docs/onnx.md)
CONTRADICTING = r"_bool"

# ---- onnx's backend test runner --------------------------------------------------------------
# Only the "_expanded" variants are excluded. They are models of other operators (Exp, Log, Mul,
# Cast... next to ReduceSum) that onnx generates from the function definitions: numred's backend declines
# them (Backend.is_compatible is False, prepare raises NotImplementedError) because onnx's NumPy
# reference, not numred, would compute them. The runner asks is_compatible only of on-disk models,
# not of node tests, so they are excluded here and show up as skipped.
# Apart from those, no node test of numred's operators conflicts with docs/SEMANTICS.md: the empty-set tests expect -inf
# (LogSumExp) and 0 (Sum, SumSquare) for float32, as the contract says, and onnx has no ReduceMean
# empty-set node test.
backend_test = (onnx.backend.test.BackendTest(Backend, __name__).include(OUR_TESTS).exclude(r"_expanded_cpu$")
                .exclude(CONTRADICTING))


def _runner_cases():
    # The runner makes a method for each of its ~4000 tests and every device, skipping those that do
    # not match include(). Only our operators' CPU tests are kept, so that pytest's summary counts
    # those; CUDA is declined by Backend.supports_device (tested below).
    cases = {}
    for name, case in backend_test.test_cases.items():
        for attr in [a for a in vars(case) if a.startswith("test_")]:
            if not (re.search(OUR_TESTS, attr) and attr.endswith("_cpu")) or re.search(CONTRADICTING, attr):
                delattr(case, attr)
        if any(a.startswith("test_") for a in vars(case)):
            cases[name] = case
    return cases


globals().update(_runner_cases())


def _of_op(test_name, op):
    """Whether the node test ``test_name`` is of operator ``op`` ("sum": not of "sum_square")."""
    return test_name.startswith(f"test_reduce_{op}_") and not (op == "sum" and "_sum_square_" in test_name)


def test_runner_has_our_node_tests():
    case = globals()["OnnxBackendNodeModelTest"]
    names = [a for a in vars(case) if a.startswith("test_")]
    for op in ("mean", "sum", "max", "min", "log_sum_exp", "sum_square"):
        assert sum(_of_op(n, op) and "_expanded" not in n for n in names) >= 8, op


# ---- node test data directories through ReferenceEvaluator ----------------------------------

NODE_CASES = sorted(
    (c for c in collect_testcases()
     if re.search(OUR_TESTS, c.name) and not c.name.endswith("_expanded") and not re.search(CONTRADICTING, c.name)),
    key=lambda c: c.name,
)
SHIPPED_NODE_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"

# float outputs: onnx computes them with NumPy in the output type (pairwise float32 sums), numred
# in float64 rounded once, so they differ by a few ulps of the output type
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12, np.dtype(np.float16): 2e-3,
        np.dtype(ml_dtypes.bfloat16): 2**-6}


def _node_data_dir(case, root: Path) -> Path:
    """The case's data directory: shipped by onnx (up to 1.16), otherwise written the way onnx's
    backend-test-tools wrote them (onnx >= 1.17 generates node tests in memory only)."""
    shipped = SHIPPED_NODE_DATA / case.name
    if (shipped / "model.onnx").exists():
        return shipped
    out = root / case.name
    if not out.exists():
        out.mkdir(parents=True)
        (out / "model.onnx").write_bytes(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            d = out / f"test_data_set_{i}"
            d.mkdir()
            for kind, arrays in (("input", inputs), ("output", outputs)):
                for j, a in enumerate(arrays):
                    (d / f"{kind}_{j}.pb").write_bytes(numpy_helper.from_array(a).SerializeToString())
    return out


def _load_pb(path: Path) -> np.ndarray:
    tensor = TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def assert_close(got, want, context=""):
    assert type(got) is np.ndarray, context
    assert got.dtype == want.dtype, context
    assert got.shape == want.shape, context
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=context)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=RTOL[got.dtype], atol=0, err_msg=context)


def test_node_cases_found():
    assert len(NODE_CASES) >= 54
    for op in ("mean", "sum", "max", "min", "log_sum_exp", "sum_square"):
        assert sum(_of_op(c.name, op) for c in NODE_CASES) >= 8, op


@pytest.mark.parametrize("case", NODE_CASES, ids=[c.name for c in NODE_CASES])
def test_reference_evaluator_reproduces_node_data(case, tmp_path_factory):
    directory = _node_data_dir(case, tmp_path_factory.getbasetemp() / "onnx_node_data")
    model = onnx.load(str(directory / "model.onnx"))
    sess = ReferenceEvaluator(model, new_ops=REFERENCE_OPS)
    data_sets = sorted(directory.glob("test_data_set_*"))
    assert data_sets
    for data_set in data_sets:
        inputs = [_load_pb(p) for p in sorted(data_set.glob("input_*.pb"))]
        wants = [_load_pb(p) for p in sorted(data_set.glob("output_*.pb"))]
        gots = sess.run(None, dict(zip(sess.input_names, inputs)))
        assert len(gots) == len(wants)
        for got, want in zip(gots, wants):
            assert_close(got, want, f"{case.name}/{data_set.name}")


# ---- both operator forms, checked against the exact oracle ----------------------------------

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64, np.uint32, np.uint64]
ONNX_OPS = {op.onnx_name: op.name for op in numred._registry.OPS}


def _axes_is_input(op_type, opset):
    """Whether the operator takes axes as its second input at ``opset``: from 18 on (ReduceSum: 13)."""
    return opset >= (13 if op_type == "ReduceSum" else 18)


def _model(op_type, x, *, opset, axes=None, keepdims=None, noop=None):
    """A one-node model: axes as an attribute before _axes_is_input, then as an initializer-free input."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    attrs = {k: v for k, v in (("keepdims", keepdims), ("noop_with_empty_axes", noop)) if v is not None}
    inputs = [helper.make_tensor_value_info("x", elem, x.shape)]
    if _axes_is_input(op_type, opset):
        node_inputs = ["x"] if axes is None else ["x", "axes"]
        if axes is not None:
            inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]))
    else:
        node_inputs = ["x"]
        if axes is not None:
            attrs["axes"] = list(axes)
    node = helper.make_node(op_type, node_inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _data(dtype, op, shape=(3, 4, 5), seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        low = 1 if op == "ReduceLogSum" else 0 if dtype.kind == "u" else -50  # (an integer log needs S > 0)
        return rng.integers(low, 50, shape).astype(dtype)
    scale = 3.0 if op == "ReduceLogSumExp" else 10.0
    values = rng.standard_normal(shape) * scale
    return (np.abs(values) if op == "ReduceLogSum" else values).astype(dtype)


def _run(model, feeds):
    return ReferenceEvaluator(model, new_ops=REFERENCE_OPS).run(None, feeds)[0]


ATTRIBUTE_FORMS = [(opset, axes, keepdims) for opset in (1, 11, 13)
                   for axes, keepdims in [(None, None), ([1], None), ([0, 2], 0), ([2, 0], 1), ([-1], 0)]
                   if opset > 1 or axes is None or min(axes) >= 0]  # negative axes came with opset 11


@pytest.mark.parametrize("opset,axes,keepdims", ATTRIBUTE_FORMS)
@pytest.mark.parametrize("op_type", list(ONNX_OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_attribute_axes_forms(opset, op_type, dtype, axes, keepdims):
    x = _data(dtype, op_type)
    model = _model(op_type, x, opset=opset, axes=axes, keepdims=keepdims)
    as_input = axes is not None and _axes_is_input(op_type, opset)  # (ReduceSum at opset 13)
    got = _run(model, {"x": x, "axes": np.array(axes, dtype=np.int64)} if as_input else {"x": x})
    want = oracle.expected(ONNX_OPS[op_type], x, axes, 1 if keepdims is None else keepdims)
    oracle.assert_matches(got, want, f"opset {opset} axes={axes} keepdims={keepdims}")


@pytest.mark.parametrize("op_type", list(ONNX_OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axes,keepdims,noop", [
    (None, None, None), ([-1], 0, None), ([], None, None), ([], 1, 1), (None, 0, 1), ([0, -1], None, 1),
])
def test_input_axes_form(op_type, dtype, axes, keepdims, noop):
    x = _data(dtype, op_type)
    model = _model(op_type, x, opset=18, axes=axes, keepdims=keepdims, noop=noop)
    feeds = {"x": x} if axes is None else {"x": x, "axes": np.array(axes, dtype=np.int64)}
    got = _run(model, feeds)
    want = oracle.expected(ONNX_OPS[op_type], x, axes, 1 if keepdims is None else keepdims,
                           0 if noop is None else noop)
    oracle.assert_matches(got, want, f"axes={axes} keepdims={keepdims} noop={noop}")


def test_backend_runs_attribute_form_at_opset_13():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    model = _model("ReduceSumSquare", x, opset=13, axes=[-1], keepdims=0)
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 2  # the checker wants a shape
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 3
    (got,) = Backend.run_model(model, [x])
    np.testing.assert_array_equal(got, np.sum(x.astype(np.float64) ** 2, axis=-1).astype(np.float32))


# ---- it is numred that runs, not onnx's reference --------------------------------------------
# inputs where the contract and onnx's reference (onnx.reference.ops.op_reduce_*) differ


@pytest.mark.parametrize("opset", [13, 18])
def test_numred_not_the_reference_computes(opset):
    big = np.int32([[2**31 - 1, 2**31 - 1]])
    # the reference sums in int32 and wraps: -1; numred: the exact mean
    got = _run(_model("ReduceMean", big, opset=opset), {"x": big})
    np.testing.assert_array_equal(got, np.int32([[2**31 - 1]]))
    # the reference promotes int32 sums of squares to int64; numred keeps int32 and wraps
    x = np.int32([[50000, 50000]])
    got = _run(_model("ReduceSumSquare", x, opset=opset), {"x": x})
    assert got.dtype == np.int32 and got.tolist() == [[705032704]]
    # the reference refuses integer LogSumExp (TypeError); numred truncates the exact value
    x = np.int64([[5, 4, 4, 4, 4, 4]])
    got = _run(_model("ReduceLogSumExp", x, opset=opset), {"x": x})
    assert got.dtype == np.int64 and got.tolist() == [[6]]
    # the reference gives NaN for an all -inf LogSumExp; the contract -inf
    x = np.float32([[-np.inf, -np.inf]])
    got = _run(_model("ReduceLogSumExp", x, opset=opset), {"x": x})
    assert got.tolist() == [[-np.inf]]
    # the reference sums float32 in float32 (NumPy's pairwise sum: 100000.0078125); numred in float64,
    # rounding the exact 100000.0015 once
    x = np.full((1, 10**6), 0.1, dtype=np.float32)
    got = _run(_model("ReduceSum", x, opset=opset), {"x": x})
    assert got.dtype == np.float32 and got.tolist() == [[100000.0]]


def test_errors_are_numreds():
    x = np.zeros((2, 0), dtype=np.int32)  # integer mean over an empty set: undefined
    with pytest.raises(ValueError, match="empty set"):
        _run(_model("ReduceMean", x, opset=18, axes=[1]), {"x": x, "axes": np.int64([1])})
    x = np.float32([[1, 2]])
    with pytest.raises(ValueError, match="keepdims"):  # the reference would read 2 as 1
        _run(_model("ReduceMean", x, opset=18, keepdims=2), {"x": x})


def test_reference_ops_are_named_like_the_operators():
    assert [c.__name__ for c in REFERENCE_OPS] == ["ReduceMean", "ReduceLogSumExp", "ReduceSumSquare", "ReduceSum",
                                                   "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                                   "ReduceLogSum"]
    assert all(c.op_domain == "" for c in REFERENCE_OPS)
    assert numred.onnx.ReduceMean is REFERENCE_OPS[0]


# ---- the backend API -------------------------------------------------------------------------


def test_backend_devices():
    assert Backend.supports_device("CPU")
    assert not Backend.supports_device("CUDA")
    assert not Backend.supports_device("CUDA:1")
    assert not Backend.supports_device("TPU")


def test_backend_declines_other_operators():
    expanded = next(c for c in collect_testcases() if c.name == "test_reduce_sum_square_keepdims_example_expanded")
    assert not Backend.is_compatible(expanded.model)
    with pytest.raises(NotImplementedError, match="Mul"):
        Backend.prepare(expanded.model)
    single = next(c for c in NODE_CASES if c.name == "test_reduce_sum_square_keepdims_example")
    assert Backend.is_compatible(single.model)
    assert not Backend.is_compatible(single.model, "CUDA")


def test_backend_prepare_and_run_by_name_and_position():
    case = next(c for c in NODE_CASES if c.name == "test_reduce_mean_keepdims_random")
    rep = Backend.prepare(case.model, "CPU")
    inputs, (want,) = case.data_sets[0]
    (by_position,) = rep.run(list(inputs))
    names = [i.name for i in case.model.graph.input]
    (by_name,) = rep.run(dict(zip(names, inputs)))
    assert_close(by_position, want)
    np.testing.assert_array_equal(by_position, by_name)


@pytest.mark.parametrize("op_type", list(ONNX_OPS))
def test_backend_run_node(op_type):
    x = np.arange(-6, 6, dtype=np.float64).reshape(3, 4) / 2
    axes = np.int64([0])
    func = getattr(numred, ONNX_OPS[op_type])
    node = helper.make_node(op_type, ["x", "axes"], ["y"], keepdims=0)
    (got,) = Backend.run_node(node, [x, axes])
    np.testing.assert_array_equal(got, func(x, axes, keepdims=0))
    # opset 13 form: axes attribute, checked against that opset (ReduceSum: from opset 13 on, axes is
    # an input, which the opset 18 form above covers; its attribute form is opset 11's)
    node = helper.make_node(op_type, ["x"], ["y"], axes=[1])
    (got,) = Backend.run_node(node, [x], opset_version=11 if op_type == "ReduceSum" else 13)
    np.testing.assert_array_equal(got, func(x, [1]))
    # an omitted optional axes input: all axes
    node = helper.make_node(op_type, ["x", ""], ["y"])
    (got,) = Backend.run_node(node, [x, None])
    np.testing.assert_array_equal(got, func(x))


@pytest.mark.parametrize("name", ["test_reduce_max_bool_inputs", "test_reduce_max_empty_set_bool",
                                  "test_reduce_min_bool_inputs"])
def test_bool_node_tests_contradict_the_contract(name):
    # opset 20 added bool to ReduceMax and ReduceMin; numred keeps opset 18's types and names the dtype
    case = next(c for c in collect_testcases() if c.name == name)
    inputs, _ = case.data_sets[0]
    with pytest.raises(TypeError, match="bool"):
        ReferenceEvaluator(case.model, new_ops=REFERENCE_OPS).run(None, dict(zip([i.name for i in case.model.graph.input],
                                                                                 inputs)))


def test_backend_run_node_declines_other_operators():
    with pytest.raises(NotImplementedError):
        Backend.run_node(helper.make_node("ArgMax", ["x"], ["y"]), [np.float32([1])])


def test_runner_skips_expanded_models():
    case = globals()["OnnxBackendNodeModelTest"]
    result = unittest.TestResult()
    case("test_reduce_log_sum_exp_empty_set_expanded_cpu").run(result)
    assert len(result.skipped) == 1 and "exclude pattern" in result.skipped[0][1]


# ---- numred's own error messages reach the user ------------------------------------------------

def _int8_mean_model(name):
    node = helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0, name=name)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT8, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("name", ["mean1", ""])
def test_an_unsupported_dtype_through_the_reference_evaluator_gives_numreds_message(name):
    # onnx's OpRun.run replaces a TypeError by "Issues with types ..."; numred's names the dtype
    sess = ReferenceEvaluator(_int8_mean_model(name), new_ops=REFERENCE_OPS)
    with pytest.raises(TypeError, match=r"unsupported dtype int8; numred supports float32.*astype") as info:
        sess.run(None, {"x": np.int8([1, 2])})
    assert "Issues with types" not in str(info.value)
    assert str(info.value).startswith("ReduceMean node 'mean1': " if name else "ReduceMean: ")


def test_non_integer_axes_through_the_backend_give_numreds_message():
    node = helper.make_node("ReduceSumSquare", ["x", "axes"], ["y"])
    with pytest.raises(TypeError, match=r"^ReduceSumSquare: axes must hold integers"):
        Backend.run_node(node, [np.float32([1, 2]), np.float32([0])])


# ---- conformance: the examples printed in the ONNX operator pages --------------------------------


SEED_FILE = Path(__file__).parent / "data" / "seed_examples.json"
ONNX_TO_FUNC = {
    "ReduceMean": numred.reduce_mean,
    "ReduceLogSumExp": numred.reduce_log_sum_exp,
    "ReduceSumSquare": numred.reduce_sum_square,
}

# the pages print eight significant digits
SEED_RTOL = {"float32": 2e-6, "float64": 1e-8}


def _load_seed_cases():
    with open(SEED_FILE, encoding="utf-8") as f:
        return json.load(f)["cases"]


SEED_CASES = _load_seed_cases()


def _tensor(t):
    dtype = np.dtype(t["dtype"])
    if t["values"] is None:
        return None
    return np.array(t["values"], dtype=dtype).reshape(t["shape"])


def _call(case):
    func = ONNX_TO_FUNC[case["op"]]
    attrs = case["attributes"]
    data = _tensor(case["inputs"][0])
    axes = _tensor(case["inputs"][1]) if len(case["inputs"]) > 1 else None
    kw = dict(keepdims=attrs.get("keepdims", 1), noop_with_empty_axes=attrs.get("noop_with_empty_axes", 0))
    return func, data, axes, kw


def test_seed_file_has_the_documented_counts():
    statuses = [c["status"] for c in SEED_CASES]
    assert statuses.count("valid") == 46
    assert sum(s.startswith("invalid: axes [2] out of range") for s in statuses) == 4
    assert sum(s.startswith("inconsistent") for s in statuses) == 2
    assert len(statuses) == 52


@pytest.mark.parametrize("case", SEED_CASES, ids=[c["name"] for c in SEED_CASES])
def test_seed_example(case):
    status = case["status"]
    if status.startswith("inconsistent"):
        pytest.skip(status)
    func, data, axes, kw = _call(case)
    before = data.copy()
    if status.startswith("invalid: axes [2] out of range"):
        with pytest.raises(np.exceptions.AxisError):
            func(data, axes, **kw)
        np.testing.assert_array_equal(data, before)
        return
    assert status == "valid", status
    want = _tensor(case["outputs"][0])
    got = func(data, axes, **kw)
    assert type(got) is np.ndarray
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=SEED_RTOL[want.dtype.name], atol=0)
    np.testing.assert_array_equal(data, before)


# ---- conformance: ONNX backend node tests through the public functions ---------------------------


_PREFIXES = ("test_reduce_mean", "test_reduce_log_sum_exp", "test_reduce_sum_square")


def _collect_onnx_cases():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # onnx's generators emit RuntimeWarnings
            import onnx.helper  # noqa: F401
            from onnx.backend.test.case.node import collect_testcases

            cases = collect_testcases()
    except ImportError:  # pragma: no cover - onnx is a test dependency
        return []
    return sorted(
        (c for c in cases if c.name.startswith(_PREFIXES) and not c.name.endswith("_expanded")),
        key=lambda c: c.name,
    )


ONNX_CASES = _collect_onnx_cases()


def test_onnx_backend_cases_were_found():
    pytest.importorskip("onnx")
    names = {c.name for c in ONNX_CASES}
    assert len(names) == len(ONNX_CASES)  # no duplicates
    for prefix in _PREFIXES:
        assert sum(n.startswith(prefix) for n in names) >= 8, prefix


@pytest.mark.parametrize("case", ONNX_CASES, ids=[c.name for c in ONNX_CASES])
def test_onnx_backend_node_case(case):
    import onnx.helper

    graph = case.model.graph
    assert len(graph.node) == 1
    node = graph.node[0]
    func = ONNX_TO_FUNC[node.op_type]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    keepdims = attrs.get("keepdims", 1)
    noop = attrs.get("noop_with_empty_axes", 0)
    has_axes = len(node.input) > 1 and node.input[1] != ""
    assert case.data_sets
    for inputs, outputs in case.data_sets:
        data = inputs[0]
        axes = inputs[1] if has_axes else None
        before = data.copy()
        got = func(data, axes, keepdims=keepdims, noop_with_empty_axes=noop)
        want = outputs[0]
        assert type(got) is np.ndarray
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        rtol = 1e-7 if want.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
        np.testing.assert_array_equal(data, before)


# ---- onnxruntime, on random cases where the contract and onnxruntime agree -----------------------


# Cross-check against onnxruntime (CPUExecutionProvider) on random cases where the contract and
# onnxruntime agree.
#
# Where they do not agree (measured with onnxruntime 1.32 on this machine), the inputs are restricted:
# * integer ReduceMean: onnxruntime truncates toward zero like numred ([-1, -2] -> -1, [-7, 0, 0] -> -2),
#   but computes through double, so int64 results are inexact once the sum passes 2**53
#   ([2**53 + 1, 2**53 + 2] -> 2**53): values are kept below 10**6 in magnitude.
# * integer ReduceSumSquare: onnxruntime does not wrap (int32 [50000, 50000] gives 2147483647, the
#   contract 705032704): values and sizes are chosen so that the sum of squares fits.
# * integer ReduceLogSumExp: onnxruntime evaluates exp(x - max) in the integer type, so every element
#   below the max contributes 0 ([5, 4, 4, 4, 4, 4] gives 5, the contract 6): the reduced sets are made
#   constant (then both give trunc(x + log n), e.g. [5] * 8 -> 7 and [-5] * 8 -> -2).
# * only finite values and non-empty reduced sets.
ORT_OP_TYPES = {op.name: op.onnx_name for op in REGISTRY}

ORT_DTYPES = [np.float32, np.float64, np.int32, np.int64]
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
        sess = _session(ORT_OP_TYPES[opname], x.dtype.type, keepdims, noop)
        return sess.run(None, {"data": x, "axes": np.asarray(axes, dtype=np.int64)})[0]
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            pytest.skip(f"onnxruntime has no kernel for {ORT_OP_TYPES[opname]}({x.dtype}): {e}")
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


@needs_onnxruntime
@pytest.mark.parametrize("dtype", ORT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opname", list(ORT_OP_TYPES))
def test_agrees_with_onnxruntime(opname, dtype):
    rng = np.random.default_rng(100 * list(ORT_OP_TYPES).index(opname) + ORT_DTYPES.index(dtype))
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


@needs_onnxruntime
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_integer_mean_negative_values_truncate_like_onnxruntime(dtype):
    # the measured agreement that the comment above the onnxruntime tests relies on
    x = np.array([[-1, -2, 0], [-7, 0, 0], [-5, -5, 1], [7, 1, 1]], dtype=dtype)
    want = _ort("reduce_mean", x, [1], 0, 0)
    got = numred.reduce_mean(x, [1], keepdims=0)
    assert got.tolist() == want.tolist() == [-1, -2, -3, 3]
