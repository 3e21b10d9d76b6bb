"""Command line: ``python -m numred COMMAND``.

Commands:
  bench       time numred against NumPy (and onnxruntime / torch when installed)
  precompile  compile every kernel into Numba's disk cache ahead of the first call
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from numred import bench, precompile

    parser = argparse.ArgumentParser(
        prog="python -m numred",
        description="numred: ONNX opset-18 ReduceMean, ReduceLogSumExp, ReduceSumSquare "
        "as Numba kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # each command is a module with add_arguments(parser) and run(args); its docstring describes it
    for name, module, summary in (
        ("bench", bench, "time numred against its peers on the standard cases"),
        ("precompile", precompile, "compile every kernel into Numba's disk cache, in parallel processes"),
    ):
        p = sub.add_parser(name, help=summary, description=module.__doc__.split("\n\n")[0])
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
