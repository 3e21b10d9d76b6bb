"""``python -m numred coldstart``: what a new user waits for on a first call.

Each case runs in a new Python process with an empty Numba cache (``NUMBA_CACHE_DIR`` set to a new
empty directory) and times ``import numred`` plus one call: the import, the compiles the call needs
and the call itself. By default every operator on float32, float64, float16, bfloat16, int32, int64
and uint64, on three layouts: a small serial one (3x2x2 over axis 1), parallel rows (1000x1000 over
axis 1) and parallel blocks (64x32x32 over axes 0 and 2). Cases run one at a time, so that no two
compete for the cores.

``--warm`` measures a warm start instead: with the cache filled, ``import numred`` plus a first
call of each operator on float32 (300x300 over axis 1), in new processes; the median of five.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# the command's --help text (plain text; the docstring above is for Sphinx)
DESCRIPTION = """Time a cold first call: import numred plus one call, in a new process with an empty
Numba cache, for each operator, dtype and layout, and print the table with the median and worst.
With --warm: a warm start (cache filled), import numred plus one call of each operator."""

DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint64")
# name -> (shape, axes)
LAYOUTS = {
    "3x2x2 axis 1": ((3, 2, 2), [1]),
    "1000x1000 axis 1": ((1000, 1000), [1]),
    "64x32x32 axes [0, 2]": ((64, 32, 32), [0, 2]),
}

# Runs in the child: the clock starts before numpy and numred are imported. The data is made after
# the import and outside the timed span (making it is not numred's cost).
_CHILD = """
import time, sys, json
start = time.perf_counter()
import numpy as np
import numred
imported = time.perf_counter() - start
from numred._frontend import supported_dtypes
dtype = next(d for d in supported_dtypes() if str(d) == {dtype!r})
x = (np.arange(int(np.prod({shape!r}))) % 7).astype(dtype).reshape({shape!r})
made = time.perf_counter()
getattr(numred, {op!r})(x, axes={axes!r})
called = time.perf_counter() - made
print(json.dumps({{"import": imported, "call": called, "total": imported + called}}))
"""


_WARM_CHILD = """
import time, json
start = time.perf_counter()
import numpy as np
import numred
x = np.ones((300, 300), np.float32)
for op in [name for name in numred.__all__ if name.startswith("reduce_")]:
    getattr(numred, op)(x, axes=[1])
print(json.dumps(time.perf_counter() - start))
"""
WARM_PROCESSES = 5


def warm_starts(processes: int = WARM_PROCESSES) -> list[float]:
    """Seconds of ``processes`` warm starts, each in a new process, after one that fills a new cache."""
    with tempfile.TemporaryDirectory(prefix="numred-warm-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        seconds = []
        for _ in range(1 + processes):
            done = subprocess.run([sys.executable, "-c", _WARM_CHILD], env=env, capture_output=True, text=True,
                                  check=False)
            if done.returncode:
                raise RuntimeError(f"warm start failed:\n{done.stderr}")
            seconds.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return seconds[1:]


def cold_call(op: str, dtype: str, shape, axes) -> dict:
    """{"import", "call", "total"} seconds of one cold first call in a new process."""
    with tempfile.TemporaryDirectory(prefix="numred-cold-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        code = _CHILD.format(op=op, dtype=dtype, shape=tuple(shape), axes=list(axes))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"cold call {op} {dtype} {shape} {axes} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from numred._registry import OPS

    parser.add_argument("--op", action="append", choices=[op.name for op in OPS], metavar="OP",
                        help=f"this operator only (repeatable; one of {', '.join(op.name for op in OPS)})")
    parser.add_argument("--dtype", action="append", choices=DTYPES, help="this dtype only (repeatable)")
    parser.add_argument("--layout", action="append", choices=list(LAYOUTS), help="this layout only (repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write the measurements to FILE as JSON")
    parser.add_argument("--warm", action="store_true",
                        help=f"time warm starts instead: import plus a first call of each operator with the cache "
                             f"filled, in {WARM_PROCESSES} new processes")


def run(args: argparse.Namespace) -> int:
    from numred._registry import OPS

    if args.warm:
        seconds = warm_starts()
        print(f"warm start (import numred, one call of each operator on float32 300x300), {len(seconds)} processes: "
              f"median {statistics.median(seconds):.2f} s, best {min(seconds):.2f} s, worst {max(seconds):.2f} s")
        return 0
    ops = args.op or [op.name for op in OPS]
    dtypes = args.dtype or list(DTYPES)
    layouts = args.layout or list(LAYOUTS)
    rows = []
    print(f"{'operator':20s} {'dtype':9s} {'layout':22s} {'import':>7s} {'call':>7s} {'total':>7s}", flush=True)
    for op in ops:
        for dtype in dtypes:
            for layout in layouts:
                shape, axes = LAYOUTS[layout]
                seconds = cold_call(op, dtype, shape, axes)
                rows.append({"op": op, "dtype": dtype, "layout": layout, **seconds})
                print(f"{op:20s} {dtype:9s} {layout:22s} {seconds['import']:6.2f}s {seconds['call']:6.2f}s "
                      f"{seconds['total']:6.2f}s", flush=True)
    totals = [row["total"] for row in rows]
    print(f"{len(totals)} cold first calls: median {statistics.median(totals):.2f} s, worst {max(totals):.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
