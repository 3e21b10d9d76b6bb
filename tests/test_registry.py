"""The operator registry (numred._registry) is the one source: the public functions, their stub for
static tools, the oracle, the benchmarks' peers and the documentation all follow from its records,
and a test fails where an operator lacks one of them.

``python tests/test_registry.py`` rewrites ``numred/__init__.pyi`` from the registry.
"""
from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pytest

if __name__ == "__main__":  # run as a script: the checkout's numred, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numred
from numred import _reduction
from numred._op import SHARED_DOC
from numred._registry import OPS

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "numred" / "__init__.pyi"

_STUB_HEAD = '''"""Type stub of numred's public functions, written from the operator registry
(numred/_registry.py) by ``python tests/test_registry.py``; tests/test_registry.py checks that it
is up to date."""
from collections.abc import Sequence
from typing import Union

import numpy as np
import numpy.typing as npt

__version__: str
AxesLike = Union[int, Sequence[int], npt.NDArray[np.integer], None]
__all__ = [{names}]
'''


def stub_text() -> str:
    """numred/__init__.pyi as the registry makes it: each public function's signature and docstring."""
    names = ", ".join(f'"{name}"' for name in numred.__all__)
    parts = [_STUB_HEAD.format(names=names)]
    for op in OPS:
        doc = "\n".join(("    " + line).rstrip() for line in op.docstring().splitlines())
        parts.append(f'\n\ndef {op.name}(data: npt.ArrayLike, axes: AxesLike = None, keepdims: int = 1,\n'
                     f'{" " * (len(op.name) + 5)}noop_with_empty_axes: int = 0) -> np.ndarray:\n'
                     f'    """{doc.lstrip()}\n    """\n')
    return "".join(parts)


def test_the_public_functions_are_the_registrys():
    assert numred.__all__ == [*(op.name for op in OPS), "AxesLike", "__version__"]
    for op in OPS:
        fn = getattr(numred, op.name)
        assert fn.__name__ == op.name and fn.__module__ == "numred"
        assert fn.__doc__ == op.docstring()
        assert "{" + "parameters}" not in fn.__doc__  # the shared parts are filled in
        assert list(inspect.signature(fn).parameters) == ["data", "axes", "keepdims", "noop_with_empty_axes"]


def test_the_stub_spells_out_the_registry():
    assert STUB.read_text() == stub_text(), "numred/__init__.pyi is out of date: run python tests/test_registry.py"


def test_the_stub_is_installed_with_the_package():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'numred = \[[^\]]*"__init__\.pyi"', pyproject)


def test_every_operator_has_an_oracle_peers_and_docs():
    # a new record without these fails here, not silently untested, unbenchmarked or undocumented
    import oracle

    operators_page = (ROOT / "docs" / "operators.md").read_text()
    api_page = (ROOT / "docs" / "api.rst").read_text()
    headings = re.findall(r"^## (.+)$", operators_page, re.M)
    for op in OPS:
        assert op.name in oracle.FLOAT_CELLS and op.name in oracle.INT_CELLS, op.name
        assert callable(op.numpy_peer) and callable(op.torch_peer), op.name
        assert any(op.onnx_name in heading.split() for heading in headings), op.name
        assert re.search(rf"^\s+{op.name}$", api_page, re.M), op.name
        for marker in SHARED_DOC:
            assert marker in op.doc, (op.name, marker)


def test_registry_lists_the_ten_ops():
    assert sorted(op.name for op in OPS) == ["reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_log_sum_exp",
                                              "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
                                              "reduce_sum_square"]
    assert sorted(op.onnx_name for op in OPS) == ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                                                  "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
                                                  "ReduceSumSquare"]


@pytest.mark.slow
def test_a_reduction_names_a_combination_that_has_kernels():
    # An operator's Reduction is data the drivers dispatch on; one its kernels do not exist for
    # must fail where it is declared, not as a wrong result or a compile error at its first call.
    with pytest.raises(ValueError, match="no kernels"):
        _reduction.Reduction(_reduction.SUM, _reduction.WRAPPING)
    with pytest.raises(ValueError, match="no kernels"):
        _reduction.Reduction(_reduction.EXP, _reduction.MAX_AND_EXP_SUM, mean=True)


# ---- a new operator is one record ---------------------------------------------------------------

def _exact_mean_square(rows):
    """trunc(sum(x * x) / n) of each row of integers, exactly (numred._exact's sums of squares)."""
    from numred import _exact

    means = [total // rows.shape[1] for total in _exact.sums_of_squares(rows)]  # (not negative)
    if means and max(means) > np.iinfo(rows.dtype).max:
        raise ValueError(f"ReduceMeanSquare: the result does not fit in {rows.dtype}")
    return np.array(means, dtype=rows.dtype)


def _mean_square_record():
    """The mean of squares, defined as numred._registry says a new operator is: one record, built from
    existing pieces (the sum kernels' SQUARES term divided by the count; integers exactly)."""
    from numred._reduction import EXACT, SQUARES, Reduction
    from numred._registry import Op

    return Op(name="reduce_mean_square", onnx_name="ReduceMeanSquare", empty_float=float("nan"), empty_int=None,
              noop=lambda x: np.multiply(x, x, out=np.empty_like(x)),
              numpy_peer=lambda x, axes, keepdims: np.mean(np.square(x), axis=axes, keepdims=keepdims),
              reduction=Reduction(SQUARES, EXACT, mean=True), exact=_exact_mean_square,
              doc="The mean of the squares.\n\nParameters\n----------\n{parameters}\n\nRaises\n------\n"
                  "{common_errors}")


# (shape, axes, view): every layout kind the plan layer picks, small (serial) and large (parallel)
_LAYOUTS = [((3, 2, 2), [1], None), ((9, 10), [0], None), ((9, 10), [1], None), ((7,), None, None),
            ((700, 300), [1], None), ((700, 300), [0], None), ((300, 700), [1], "F"),
            ((600, 400), [1], "strided"), ((40, 30, 50), [0, 2], None), ((20, 30, 40, 10), [1, 3], None),
            ((3000, 16), [1], None), ((4, 100_000), [1], None), ((200_000, 4), [0], None), ((2, 0, 3), [1], None)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64"])
def test_an_operator_defined_by_one_record_matches_the_oracle(dtype):
    import oracle

    reduce_mean_square = numred._public_function(_mean_square_record())
    dtype = oracle.ALL_DTYPES[[d.name for d in oracle.ALL_DTYPES].index(dtype)]
    rng = np.random.default_rng(5)
    for shape, axes, view in _LAYOUTS:
        x = rng.integers(0 if dtype.kind == "u" else -40, 40, size=shape).astype(dtype)
        if dtype.kind == "f":
            x = (x / 8).astype(dtype)
        if view == "F":
            x = np.asfortranarray(x)
        elif view == "strided":
            x = x[:, ::2]
        before = x.copy()
        context = f"{dtype} {shape} {axes} {view}"
        try:
            exp = oracle.expected("reduce_mean_square", x, axes)
        except oracle.ExpectedError as error:  # (an integer mean over an empty set)
            with pytest.raises(error.exc_type):
                reduce_mean_square(x, axes=axes)
        else:
            oracle.assert_matches(reduce_mean_square(x, axes=axes), exp, context)
        assert np.array_equal(x, before), context


def test_a_registered_record_reduces_dask_arrays_too(monkeypatch):
    # registered (the Dask steps find an operator by name): float results equal the in-memory ones;
    # integers, which only the exact function computes, are refused with a TypeError
    da = pytest.importorskip("dask.array")
    from numred import _registry

    record = _mean_square_record()
    monkeypatch.setitem(_registry.OPS_BY_NAME, record.name, record)
    reduce_mean_square = numred._public_function(record)
    x = np.random.default_rng(1).standard_normal((300, 200))
    for dtype in ("float32", "float64"):
        data = x.astype(dtype)
        lazy = reduce_mean_square(da.from_array(data, chunks=(70, 50)), axes=[1])
        assert np.array_equal(lazy.compute(), reduce_mean_square(data, axes=[1])), dtype
    with pytest.raises(TypeError, match="integer Dask arrays"):
        reduce_mean_square(da.from_array(x.astype("int32"), chunks=50), axes=[1]).compute()


if __name__ == "__main__":
    STUB.write_text(stub_text())
    print(f"wrote {STUB.relative_to(ROOT)}", file=sys.stderr)
