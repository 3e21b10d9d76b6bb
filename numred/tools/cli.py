"""Command line: ``numred COMMAND`` or ``python -m numred COMMAND`` (numred/__main__.py).

Commands:
  bench       time numred against NumPy (and onnxruntime / torch when installed)
  precompile  compile every kernel into Numba's disk cache ahead of the first call
  coldstart   time a first call from an empty cache, per operator, dtype and layout
"""
from __future__ import annotations

import argparse
import os
import sys

# Plain text for --help (the modules' docstrings are reStructuredText for Sphinx)
DESCRIPTION = """numred: the ten ONNX reductions (ReduceMean, ReduceSum, ReduceProd, ReduceMax, ReduceMin,
ReduceLogSumExp, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum) as Numba kernels, for float32,
float64, float16, bfloat16, int32, int64, uint32 and uint64."""
EPILOG = """examples:
  numred bench --quick             a short comparison with NumPy (and with onnxruntime
                                   and torch when they are installed)
  numred bench --dtype float16     the full comparison on float16 data
  numred precompile                compile every kernel now, instead of on each first call
  numred coldstart --dtype float32 time first calls from an empty cache

'numred COMMAND --help' describes a command's options."""


def make_parser() -> argparse.ArgumentParser:
    from numred import __version__
    from numred.tools import bench, coldstart, precompile

    # the console script is `numred`; `python -m numred` runs numred/__main__.py
    prog = "python -m numred" if os.path.basename(sys.argv[0]) == "__main__.py" else "numred"
    parser = argparse.ArgumentParser(
        prog=prog, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"numred {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # each command is a module with DESCRIPTION, add_arguments(parser) and run(args)
    for name, module, summary in (
        ("bench", bench, "time numred against its peers on the standard cases"),
        ("precompile", precompile, "compile every kernel into Numba's disk cache, in parallel processes"),
        ("coldstart", coldstart, "time a first call from an empty cache, per operator, dtype and layout"),
    ):
        p = sub.add_parser(name, help=summary, description=module.DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `numred`: say what it can do
        parser.print_help()
        return 0
    return args.func(args)
