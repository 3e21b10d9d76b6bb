"""numred's modules import one way: no module depends, directly or through others, on a module that
depends on it. Read from the source with ``ast``, so that imports inside functions (the lazy ones)
count as well.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "numred"


def _module_name(path: Path, package: Path) -> str:
    parts = ("numred", *path.relative_to(package).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path) -> dict[str, Path]:
    return {_module_name(path, package): path for path in package.rglob("*.py")}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The numred modules that module ``name`` imports, anywhere in its source."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".")[:len(name.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:  # a submodule imported by name, or a name from the module
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {module for module in found if module in modules and module != name}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(package)
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``, each as the modules along it (depth-first search)."""
    found, state = [], {}  # state: 1 on the current path, 2 done
    path = []

    def visit(module):
        state[module] = 1
        path.append(module)
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                found.append(path[path.index(imported):] + [imported])
            elif imported not in state:
                visit(imported)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_the_checker_reads_the_package():
    graph = import_graph()
    assert "numred._frontend" in graph["numred._dask"]
    assert "numred.kernels.base" in graph["numred._reduction"]
    assert "numred._registry" in graph["numred"]


def test_the_checker_finds_a_cycle(tmp_path):
    package = tmp_path / "numred"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .sub.c import g\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from ..a import x\n")
    assert cycles(import_graph(package)) == [["numred.a", "numred.b", "numred.sub.c", "numred.a"]]


@functools.cache
def _package_cycles():
    # one parse of the package for all the parametrised cases below (a parse per case took 0.3 s)
    return cycles(import_graph())


@pytest.mark.parametrize("module", sorted(import_graph()))
def test_no_import_cycle_through(module):
    assert not [cycle for cycle in _package_cycles() if module in cycle]


def test_the_engine_does_not_import_the_tools():
    # the command line and the bench (numred.tools) stand above the engine, which works without them
    for module, imported in import_graph().items():
        if not module.startswith("numred.tools") and module != "numred.__main__":
            assert not [name for name in imported if name.startswith("numred.tools")], module


def test_the_kernels_know_nothing_above_them():
    # the kernels (numred.kernels) are compiled and cached by kernels/jit.py and run by
    # numred._runtime, which stands above them: no kernel module imports a numred module outside
    # the kernels, and kernels/jit.py imports none at all
    graph = import_graph()
    kernel_modules = [module for module in graph if module.startswith("numred.kernels")]
    assert "numred.kernels.jit" in kernel_modules and "numred._runtime" in graph
    for module in kernel_modules:
        assert {name for name in graph[module] if not name.startswith("numred.kernels")} == set(), module
    assert graph["numred.kernels.jit"] == set()
    assert "numred.kernels.jit" in graph["numred._runtime"]


_DISPATCH_SCRIPT = """
import numpy as np
from numred import _compute
from numred._plan import make_plan
from numred._registry import OPS
from numred.kernels import rows, serial, table

factories = [factory.make for factory in table.FACTORIES.values()]
assert {rows.float_rows, rows.int_rows, serial.float_sums, serial.int_sums} <= set(factories)
names = set()
for dtype in (np.float32, np.float64, np.int32, np.int64):
    for shape, axes in (((3, 4), (1,)), ((300, 400), (1,)), ((400, 300), (0,)), ((30, 40, 50), (0, 2))):
        x = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
        plan, _ = make_plan(x, axes)
        for op in OPS:
            call = _compute.kernel_call(op.reduction, plan, x.dtype)
            if call is not None:
                names.add(call.kernel)
made = [factory.cache_info().currsize for factory in factories]
assert made == [0] * len(factories), made
assert any(type(name) is tuple for name in names) and any(type(name) is str for name in names), names
for name in names:  # (every name one that kernels.catalogue lists)
    assert name in table.KERNELS if type(name) is str else name[1:] in table.FACTORIES[name[0]].arguments, name
    assert table.kernel(name) is not None, name
assert sum(factory.cache_info().currsize for factory in factories) > 0
"""


def test_the_dispatch_names_its_kernels_and_makes_none():
    # numred._compute's dispatch decides the kernel of a call as data, a name (kernels.table.kernel),
    # and the kernel is made only where the call runs: in a fresh interpreter, deciding the calls of
    # every operator on plans of each family (small, rows, tiles, the general walk) makes no kernel,
    # and every name it gives is one that kernels.catalogue lists (for precompile and the cache tests)
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _DISPATCH_SCRIPT], check=True, timeout=600)


def test_no_function_outside_the_kernels_is_over_60_lines():
    # a function a reader can hold at once; the kernels (numred/kernels/) are not held to it yet
    long = [f"{path.relative_to(PACKAGE)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in PACKAGE.rglob("*.py") if "kernels" not in path.relative_to(PACKAGE).parts
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert not long
