"""Command line: ``python -m numred COMMAND``.

Commands:
  bench   time numred against NumPy (and onnxruntime / torch when installed)
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from numred import bench

    parser = argparse.ArgumentParser(
        prog="python -m numred",
        description="numred: ONNX opset-18 ReduceMean, ReduceLogSumExp, ReduceSumSquare "
        "as Numba kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    p = sub.add_parser(
        "bench",
        help="time numred against its peers on the standard cases",
        description=bench.__doc__.split("\n\n")[0],
    )
    bench.add_arguments(p)
    p.set_defaults(func=bench.run)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
