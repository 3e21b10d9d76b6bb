"""Conformance: every example printed in the three ONNX operator pages (tests/data/seed_examples.json,
a copy of shared/conformance/seed_examples.json) and the ONNX backend node test cases shipped with
the installed onnx package."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import numred

SEED_FILE = Path(__file__).parent / "data" / "seed_examples.json"
ONNX_TO_FUNC = {
    "ReduceMean": numred.reduce_mean,
    "ReduceLogSumExp": numred.reduce_log_sum_exp,
    "ReduceSumSquare": numred.reduce_sum_square,
}
# printed with eight significant digits (shared/README.md)
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


# ---- ONNX backend node tests -------------------------------------------------------------------

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
