"""The command line as people expect it: ``numred`` and ``python -m numred``, --version, help texts."""
from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys

import pytest

import numred
from numred.tools.cli import main, make_parser

# reStructuredText that must not reach a terminal: ``literals``, :func:`roles`, |substitutions|
RST_MARKUP = re.compile(r"``|:(func|mod|class|meth|data|doc|ref):`")


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "numred", *args], capture_output=True, text=True, timeout=120)


def test_version():
    done = run_module("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"numred {numred.__version__}"
    assert numred.__version__ == importlib.metadata.version("numred")


def test_a_bare_invocation_prints_the_help():
    done = run_module()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m numred")
    for command in ("bench", "precompile", "--version"):
        assert command in done.stdout


@pytest.mark.parametrize("argv", [[], ["bench"], ["precompile"]], ids=["numred", "bench", "precompile"])
def test_help_is_plain_text(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: ")
    assert not RST_MARKUP.search(text), text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_commands_are_the_parsers_subcommands():
    sub = next(a for a in make_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == ["bench", "coldstart", "precompile"]


def test_the_console_script_is_installed_and_runs():
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="numred")
    assert script.load() is main
    path = shutil.which("numred")
    if path is None:
        pytest.skip("the numred script is not on PATH (scripts directory not on PATH)")
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"numred {numred.__version__}"
    assert subprocess.run([path], capture_output=True, text=True, timeout=120).stdout.startswith("usage: numred")


def test_an_unknown_command_is_an_error_naming_the_choices():
    done = run_module("benchmark")
    assert done.returncode == 2
    assert "invalid choice: 'benchmark'" in done.stderr and "bench" in done.stderr


def test_coldstart_times_a_first_call_from_an_empty_cache(capsys):
    # one case: a new process with a new, empty NUMBA_CACHE_DIR compiles what the call needs
    assert main(["coldstart", "--op", "reduce_mean", "--dtype", "float32", "--layout", "3x2x2 axis 1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["operator", "dtype", "layout", "import", "call", "total"]
    row = lines[1].split()
    assert row[:5] == ["reduce_mean", "float32", "3x2x2", "axis", "1"]
    imported, called, total = (float(cell.rstrip("s")) for cell in row[5:])
    assert imported > 0 and called > 0 and abs(imported + called - total) < 0.02
    assert lines[2].startswith("1 cold first calls: median ")


def test_pyproject_lists_every_package():
    # a subpackage missing from pyproject's package list imports from a checkout but not once installed
    # (numred.kernels was: `pip install .` then failed at import)
    import tomllib
    from pathlib import Path

    source = Path(numred.__file__).parent
    packages = {".".join(p.parent.relative_to(source.parent).parts) for p in source.rglob("__init__.py")}
    listed = tomllib.loads((source.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert packages == set(listed), f"packages {sorted(packages)}, pyproject lists {sorted(listed)}"


def test_precompile_shards_each_dtype_by_the_operators_that_share_kernels():
    # `precompile` hands its workers one task per (dtype, group of operators sharing kernels): every
    # operator a dtype supports in exactly one task, the groups of the kernels' terms (a log-sum-exp
    # with Max and Min, whose max kernel it runs; unsigned ReduceL1, whose |x| is x, with ReduceSum)
    from numred._registry import OPS
    from numred.tools.precompile import dtype_names, shards

    tasks = shards(dtype_names())
    for name in dtype_names():
        groups = [set(ops) for dtype, ops in tasks if dtype == name]
        ops = [op for group in groups for op in group]
        narrow = name in ("int8", "uint8")
        assert sorted(ops) == sorted(op.name for op in OPS if op.narrow_ints or not narrow), name
        assert {"reduce_max", "reduce_min"} | ({"reduce_log_sum_exp"} if not narrow else set()) in groups, name
        if not narrow:
            assert {"reduce_sum_square", "reduce_l2"} in groups and {"reduce_prod"} in groups, name
            sums = next(group for group in groups if "reduce_sum" in group)
            assert ("reduce_l1" in sums) == name.startswith("uint"), name


@pytest.fixture
def precompile_tasks(monkeypatch):
    """The tasks ``numred.tools.precompile`` hands its workers, as (function, dtype, operators),
    recorded by a pool that does not run them."""
    from concurrent.futures import Future

    from numred.tools import precompile

    submitted = []

    class RecordingPool:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, name, ops):
            submitted.append((fn, name, ops))
            future = Future()
            future.set_result((name, 0.0))
            return future

    monkeypatch.setattr(precompile, "ProcessPoolExecutor", RecordingPool)
    return submitted


def test_precompile_op_compiles_those_operators_only(precompile_tasks, capsys):
    # `--op NAME`: tasks of those operators only, one per group of operators that share kernels; a
    # dtype none of them supports (int8: Max and Min only) gets no task
    from numred.tools import precompile
    from numred.tools.cli import main

    argv = ["precompile", "--op", "reduce_mean", "--op", "reduce_log_sum_exp", "--op", "reduce_l2",
            "--dtype", "float32", "--dtype", "int8"]
    assert main(argv) == 0
    assert sorted((name, ops) for _, name, ops in precompile_tasks) == [
        ("float32", ("reduce_l2",)), ("float32", ("reduce_log_sum_exp",)), ("float32", ("reduce_mean",))]
    with pytest.raises(SystemExit):
        main(["precompile", "--op", "reduce_median"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown operator"):
        precompile.precompile(["int8"], ops=["reduce_median"])
    with pytest.raises(ValueError, match="none of the operators reduce_mean takes the dtype"):
        precompile.precompile(["int8", "uint8"], ops=["reduce_mean"])


def test_precompile_shows_its_progress(precompile_tasks, capsys):
    # Minutes of compiling say so at once, then count the groups of kernels done, with the time taken
    # and an estimate of the time left: plain lines where stderr is not a terminal (a log, CI)
    from numred.tools.cli import main

    assert main(["precompile", "--dtype", "int8", "--dtype", "uint8"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("numred precompile: ")]
    total = len(precompile_tasks)
    assert total >= 2
    assert [line.split()[2] for line in lines] == [f"{done}/{total}" for done in range(total + 1)]
    assert "minutes once" in lines[0]
    assert all(line.endswith(" s left") for line in lines[1:-1])


def test_precompile_reports_an_argument_error_without_a_traceback(precompile_tasks, capsys):
    from numred.tools.cli import main

    assert main(["precompile", "--dtype", "int8", "--op", "reduce_mean"]) == 2
    assert capsys.readouterr().err.strip() == "numred precompile: none of the operators reduce_mean takes the dtype(s) int8"
    assert not precompile_tasks


def test_the_command_line_help_names_every_operator():
    from numred.tools.cli import DESCRIPTION
    from numred._registry import OPS

    assert all(op.onnx_name in DESCRIPTION for op in OPS)
    assert len(OPS) == 10 and "the ten ONNX reductions" in DESCRIPTION
