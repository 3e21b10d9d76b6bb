"""``python -m numred bench``: time numred against its peers on a standard set of cases.

The cases are generated from the op registry (``numred._registry.OPS``) crossed with a handful of
standard shapes, so a new operator is benchmarked without touching this file.

Peers are small adapter objects (see :class:`Peer`). NumPy is always present; onnxruntime and
torch are used when importable and skipped with a printed note otherwise. A peer that cannot run a
case (no kernel for that dtype, unsupported input, ...) is shown as ``n/a`` for that case.

Timing: every implementation is called once before timing (for numred this is where Numba
compiles), then called repeatedly, each call timed with ``time.perf_counter``, until a time budget
and a minimum call count are both reached. numred and its peers take turns in ``--rounds`` such
blocks per case (see times_in_turns); the table reports the median of their median times per call.

Extras (``pip install "numred[bench]"``), all optional and imported lazily: tqdm draws a progress
bar on stderr while measuring (stdout keeps only the table), matplotlib draws ``--plot FILE.png``.
``--json FILE`` writes every measurement, so that a note can quote one run.

On the largest float32/float64 case (not in --quick) a plain Numba parallel sum over the same buffer
is timed too, as the memory-bandwidth reference the memory-bound reductions are measured against: on
its own for the table's reference row, and in turns with numred and the peers in each memory-bound
op's case, whose share of its bandwidth is taken against the sum timed in those same turns (this
machine's memory bandwidth moves by up to 2x from minute to minute).

``--dtype-rates`` prints another table instead: numred alone, its elements per second on float32,
float16, bfloat16 and int32, with each narrower type's rate against float32's. The dtypes are timed
in turns within each round, so that they see the same machine load (see interleaved_times).

Only the standard library, NumPy and the numred base dependencies are imported at module level.
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import statistics
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from numred._registry import OPS, Op

# the command's --help text (plain text; the docstring above is for Sphinx)
DESCRIPTION = """Time numred against NumPy, and onnxruntime and torch when they are installed
(pip install "numred[peers]"), on a standard set of cases for every operator.

Prints one row per operator and case: numred's median time per call, its throughput in GB/s,
and each peer's time and ratio (peer time / numred time; above 1, numred is faster). numred's
first call, where Numba compiles, is not timed. Before it starts, the run says about how long it
will take."""

DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")

# Cases with at least this many elements are skipped by --quick.
LARGE_ELEMENTS = 1 << 24

# The row label of the plain parallel sum, and the ops whose GB/s is compared with it.
REF_LABEL = "(plain parallel sum)"
REF_KEY = "plain parallel sum"  # its name among the implementations timed in turns
MEMORY_BOUND_OPS = ("ReduceMean", "ReduceSumSquare")


# --------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...] | None  # None: reduce all axes (numred gets axes=None, the ONNX default)
    # above 1: the input is a view of every step-th element along the last axis of a contiguous
    # array ``step`` times as wide (x[..., ::step]), read where it lies
    step: int = 1

    def make(self, dtype: np.dtype) -> np.ndarray:
        """The case's input (make_input), a strided view when step > 1."""
        if self.step == 1:
            return make_input(self.shape, dtype)
        return make_input((*self.shape[:-1], self.shape[-1] * self.step), dtype)[..., ::self.step]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def large(self) -> bool:
        return self.size >= LARGE_ELEMENTS

    def explicit_axes(self) -> tuple[int, ...]:
        """The reduced axes spelled out, for peers that need them listed."""
        return tuple(range(len(self.shape))) if self.axes is None else self.axes

    def shape_label(self) -> str:
        return "x".join(str(n) for n in self.shape) + (f"/{self.step}" if self.step > 1 else "")

    def axes_label(self) -> str:
        if self.axes is None:
            return "all"
        if len(self.axes) == 1:
            return str(self.axes[0])
        return "[" + ",".join(str(a) for a in self.axes) + "]"


CASES = (
    Case((3, 2, 2), (1,)),
    Case((64, 64), None),
    Case((1000, 1000), (1,)),
    Case((1000, 1000), (0,)),
    Case((4096, 4096), (1,)),
    Case((4096, 4096), (0,)),
    Case((4096, 4096), None),
    Case((32, 64, 56, 56), (2, 3)),
    Case((32, 64, 56, 56), (1,)),
    Case((32, 56, 56, 64), (1, 2)),
    Case((4194304, 4), (0,)),
    Case((4, 4194304), (1,)),
    Case((8192, 16384), (1,)),  # 512 MiB of float32
    Case((8192, 16384), (0,)),
)
# --more: common layouts beyond the cases, where earlier plans lost to the peers by 2-14x
MORE_CASES = (
    Case((100000, 16), (1,)),  # many short rows: a log-softmax's normaliser over 16 classes
    Case((16, 100000), (0,)),  # few rows of many outputs
    Case((256, 1024, 8), (1,)),  # a narrow inner kept axis
    Case((32, 128, 768), (2,)),  # transformer activations, over the hidden size
    Case((8, 3, 224, 224), (0, 2, 3)),  # per-channel statistics of NCHW images
    Case((32, 64, 56, 56), (0, 2, 3)),  # ... of NCHW activations (batch norm): 64 channels
    Case((16384, 1000), (1,)),  # many rows beyond the cache: a large batch's logits over 1000 classes
    Case((4000, 3000), (1,), step=2),  # every other element of each row (x[:, ::2]), read in place
)


def selected_cases(args: argparse.Namespace) -> list[Case]:
    """The cases a run times: CASES, then MORE_CASES with --more; with --quick, none of the large ones."""
    more = MORE_CASES if getattr(args, "more", False) else ()
    return [c for c in CASES + more if not (args.quick and c.large)]


def dtype_from_name(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_input(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Random data from a fixed seed: standard normal floats, small integers (|x| < 100).

    Generated straight into the result dtype: a 512 MiB float32 case needs 512 MiB, not a float64
    draw plus copies. float16 and bfloat16 are rounded from float32 drawn in chunks (the same values
    as one draw: the generator's stream is sequential).
    """
    rng = np.random.default_rng(0)
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -100
        return rng.integers(low, 100, size=shape, dtype=dtype)
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype.type)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    chunk = 1 << 22
    for start in range(0, flat.size, chunk):
        stop = min(flat.size, start + chunk)
        flat[start:stop] = rng.standard_normal(stop - start, dtype=np.float32).astype(dtype)
    return out


# ---------------------------------------------------------------------------------------- peers


class Peer:
    """Adapter for one implementation numred is compared with.

    A new peer is a subclass with these four methods, appended to :data:`PEERS`.
    """

    name = "?"

    def load(self) -> str | None:
        """Import what the peer needs; return None when usable, else the reason it is skipped."""
        return None

    def version(self) -> str:
        return "?"

    def set_threads(self, n: int) -> None:
        """Apply the --threads setting (called once, after load)."""

    def prepare(self, op: Op, x: np.ndarray, axes: tuple[int, ...]) -> Callable[[], object]:
        """Return a zero-argument callable computing ``op`` over ``axes`` of ``x`` with keepdims=1.

        Everything that is not the reduction itself (model building, tensor conversion) happens
        here, outside the timed region. Raise any exception if the peer cannot run this case.
        """
        raise NotImplementedError


class NumPyPeer(Peer):
    """The NumPy expression recorded for each op in the registry (``Op.numpy_peer``)."""

    name = "numpy"

    def version(self) -> str:
        return np.__version__

    def prepare(self, op, x, axes):
        fn = op.numpy_peer
        return lambda: fn(x, axes, True)


class OnnxRuntimePeer(Peer):
    """A single-node opset-18 model, axes fed as an int64 input, CPUExecutionProvider."""

    name = "onnxruntime"

    def load(self):
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            return f"not importable ({exc})"
        self._threads = 1
        return None

    def version(self):
        import onnxruntime

        return onnxruntime.__version__

    def set_threads(self, n):
        self._threads = n

    def prepare(self, op, x, axes):
        import onnxruntime as ort
        from onnx import TensorProto, helper

        elem = helper.np_dtype_to_tensor_dtype(x.dtype)
        node = helper.make_node(op.onnx_name, ["data", "axes"], ["out"], keepdims=1)
        graph = helper.make_graph(
            [node],
            "numred_bench",
            [
                helper.make_tensor_value_info("data", elem, list(x.shape)),
                helper.make_tensor_value_info("axes", TensorProto.INT64, [len(axes)]),
            ],
            [helper.make_tensor_value_info("out", elem, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        model.ir_version = 8  # the IR version of opset 18; any onnxruntime that has opset 18 reads it
        so = ort.SessionOptions()
        so.intra_op_num_threads = self._threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(
            model.SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
        feeds = {"data": x, "axes": np.asarray(axes, dtype=np.int64)}
        return lambda: sess.run(None, feeds)


class TorchPeer(Peer):
    """torch.mean / torch.logsumexp / sum of squares, on a tensor sharing the NumPy buffer.

    Each op is torch's own expression for it, as a torch user would write it; what torch cannot do
    raises and is shown as n/a (torch.mean has no integer kernel). As with NumPy, the dtypes of
    integer results follow torch's rules (logsumexp of integers is float32, the sum of int32
    squares is int64), not ONNX's. bfloat16 goes through an int16 view (torch.from_numpy does not
    know ml_dtypes).
    """

    name = "torch"

    def load(self):
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            return f"not importable ({exc})"
        return None

    def version(self):
        import torch

        return torch.__version__

    def set_threads(self, n):
        import torch

        torch.set_num_threads(n)

    def prepare(self, op, x, axes):
        import torch

        if x.dtype.name == "bfloat16":  # torch.from_numpy does not know ml_dtypes
            t = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(x)
        dims = list(axes)
        if op.onnx_name == "ReduceMean":
            return lambda: torch.mean(t, dim=dims, keepdim=True)
        if op.onnx_name == "ReduceLogSumExp":
            return lambda: torch.logsumexp(t, dim=dims, keepdim=True)
        if op.onnx_name == "ReduceSumSquare":
            return lambda: torch.sum(t * t, dim=dims, keepdim=True)
        raise NotImplementedError(f"no torch expression for {op.onnx_name}")


PEERS: list[Peer] = [NumPyPeer(), OnnxRuntimePeer(), TorchPeer()]


# --------------------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class TimingPolicy:
    target: float  # stop once the timed calls add up to this many seconds ...
    min_calls: int  # ... and at least this many calls were made
    max_total: float  # slow calls: stop after this many seconds once 3 calls were made
    max_calls: int = 100_000


DEFAULT_POLICY = TimingPolicy(target=0.2, min_calls=5, max_total=1.0)
QUICK_POLICY = TimingPolicy(target=0.04, min_calls=3, max_total=0.25)


def median_time(fn: Callable[[], object], policy: TimingPolicy) -> float:
    """Median seconds per call of ``fn``, after one untimed warm-up call."""
    fn()  # warm-up: Numba compiles here, caches and allocators settle
    times: list[float] = []
    total = 0.0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while True:
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            times.append(dt)
            total += dt
            n = len(times)
            if n >= policy.max_calls:
                break
            if total >= policy.target and n >= policy.min_calls:
                break
            if total >= policy.max_total and n >= 3:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(times)


QUIET_STEP = 0.005  # seconds: wait_for_quiet's sleeps
QUIET_MAX = 0.5  # seconds: wait_for_quiet gives up after this long


def wait_for_quiet() -> float | None:
    """Sleep until no thread of this process uses the CPU (a sleep of QUIET_STEP in which the process
    used under a fifth of it), at most QUIET_MAX seconds; return the seconds waited, None on giving up.

    onnxruntime's intra-op workers (and OpenMP's) keep spinning for tens of milliseconds after a call
    returns (measured here: 15-100 ms, a core busy all that time), and slow whichever library is timed
    next: numred's 32x64x56x56 axis-1 mean took a median 1.56 ms in blocks right after an onnxruntime
    block and 0.95 ms when this wait came between them (0.97 ms after nothing).
    """
    start = time.perf_counter()
    while time.perf_counter() - start < QUIET_MAX:
        cpu = time.process_time()
        time.sleep(QUIET_STEP)
        if time.process_time() - cpu < 0.2 * QUIET_STEP:
            return time.perf_counter() - start
    return None


# A run's duration, for the estimate printed before it starts (estimated_seconds): the costs of a
# full float32 run on the 2-core machine the project is measured on, fitted to its measured time.
BLOCK_OVERHEAD = 0.05  # seconds per timed block beyond its budget: the warm-up call, waiting for quiet threads
SECONDS_PER_ELEMENT_CALL = 2e-9  # per element and untimed call (warm-ups, the result comparisons)
SECONDS_PER_ELEMENT_INPUT = 1e-8  # per element, making one case's input (random draws)


def estimated_seconds(cases, n_ops: int, n_impls: int, policy: TimingPolicy, rounds: int) -> float:
    """About how long timing ``cases`` takes for ``n_ops`` operators and ``n_impls`` implementations
    (numred and its peers), compile time left out: each block's budget plus its overhead, and the
    untimed work that grows with the data (inputs, warm-up and comparison calls)."""
    blocks = len(cases) * n_ops * n_impls * rounds
    elements = sum(case.size for case in cases)
    return (blocks * (policy.target / rounds + BLOCK_OVERHEAD)
            + elements * (SECONDS_PER_ELEMENT_INPUT + n_ops * n_impls * 2 * SECONDS_PER_ELEMENT_CALL))


ROUNDS = 3  # default --rounds: numred and its peers timed in turns, this many blocks each per case
SLOW_CALL = 0.05  # seconds per call beyond which one block is enough (see times_in_turns)


def times_in_turns(fns: dict[str, Callable[[], object]], policy: TimingPolicy, rounds: int,
                   block_done: Callable[[], object]) -> dict[str, float | Exception]:
    """Seconds per call of each of ``fns`` (name -> zero-argument callable), timed in ``rounds`` turns.

    Each round times every function in a block of its own (median_time, with a 1/rounds share of the
    policy's budget), one after the other; a function's result is the median of its blocks' medians.
    A passing load on this shared machine, which can slow a few hundred milliseconds of work by 2x,
    then moves no result by itself, where with one block per function it decided whole table rows
    (a 64x64 sum of squares measured 7.4 us instead of its usual 4.5 us in one such run).

    Blocks, not interleaved calls: onnxruntime's and OpenMP's worker threads spin for a while after a
    call, and would slow whichever call came next; each block also starts once they have stopped
    (wait_for_quiet), so that no library pays for the one timed before it. A function slower than
    SLOW_CALL per call gets one block only: its own calls span any such load, and more blocks of it
    would cost minutes. A function that raises is dropped, its exception returned in place of a time.
    ``block_done`` is called once per block, skipped ones included (the progress bar).
    """
    share = TimingPolicy(target=policy.target / rounds, min_calls=policy.min_calls,
                         max_total=policy.max_total / rounds, max_calls=policy.max_calls)
    medians: dict[str, list[float]] = {name: [] for name in fns}
    failed: dict[str, Exception] = {}
    for r in range(rounds):
        for name, fn in fns.items():
            if name not in failed and not (r and medians[name][-1] > SLOW_CALL):
                try:
                    wait_for_quiet()
                    medians[name].append(median_time(fn, share))
                except Exception as exc:  # the caller reports it
                    failed[name] = exc
            block_done()
    return {name: failed[name] if name in failed else statistics.median(medians[name]) for name in fns}


# How far a peer's result may lie from the reference and still be the same answer. The reference is
# numred's result, exact to the contract up to one rounding (tests/oracle.py); the tolerance is
# relative to its largest value in the case, many times the rounding error of peers that accumulate
# in the data's own dtype. For integer means and log-sum-exps the reference is numred's result on the
# same values as float64, the real value before any integer rounding (numred truncates toward zero,
# as the contract says; peers round otherwise or return floats, so LSE([-39, -85]) is -38 for numred
# and -39.0 for NumPy), and a difference below 1 is the same answer. Integer sums of squares wrap
# modulo 2**bits (the contract, and NumPy's and onnxruntime's rule): there numred's result is the
# reference, and a peer that widens instead (torch sums int32 squares in int64) differs where the
# sum wraps.
AGREEMENT_RTOL = {"float16": 2.0**-7, "bfloat16": 2.0**-4, "float32": 2.0**-12, "float64": 2.0**-30}


def result_values(result) -> np.ndarray:
    """A result as a flat float64 array: onnxruntime returns a list of arrays, torch a tensor."""
    if isinstance(result, (list, tuple)):
        result = result[0]
    if hasattr(result, "detach"):  # a torch tensor (its bfloat16 has no NumPy dtype)
        result = result.detach().double().numpy()
    return np.asarray(result, dtype=np.float64).reshape(-1)


def largest_difference(reference, peer_result, dtype: np.dtype) -> float | None:
    """The largest difference between a peer's result and the reference, in units of the tolerance
    (AGREEMENT_RTOL; 1 or more: a different answer), or None when the peer's result does not even
    have numred's size. NaN must meet NaN."""
    expected = result_values(reference)
    got = result_values(peer_result)
    if got.size != expected.size:
        return None
    nan = np.isnan(expected)
    if not np.array_equal(nan, np.isnan(got)):
        return math.inf
    expected, got = expected[~nan], got[~nan]
    if not expected.size:
        return 0.0
    scale = float(np.max(np.abs(expected)))
    tolerance = 1.0 if dtype.kind in "iu" else AGREEMENT_RTOL[dtype.name] * max(scale, 1e-30)
    with np.errstate(invalid="ignore"):  # inf - inf where both overflowed alike
        gaps = np.where(got == expected, 0.0, np.abs(got - expected))
    return float(np.max(gaps)) / tolerance


# ----------------------------------------------------------------------------------- formatting


def peer_differs(record: dict, peer: str) -> bool:
    """Whether a result record's peer gave another answer (largest_difference None or 1 or more);
    a peer that did not run is not marked."""
    differences = record.get("peer_differences", {})
    return peer in differences and (differences[peer] is None or differences[peer] >= 1.0)


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= 0.9995 * scale or unit == "ns":
            v = seconds / scale
            digits = 2 if v < 9.995 else 1 if v < 99.95 else 0
            return f"{v:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """A rough duration for people: '40 s', '3 min', '1 h 10 min'."""
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def format_ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    return f"{r:.2f}x" if r < 9.995 else f"{r:.1f}x" if r < 99.95 else f"{r:.0f}x"


class Table:
    """Fixed-width columns, printed row by row so long runs show progress."""

    def __init__(self, columns: list[tuple[str, int, str]], out, write=None):
        self.columns = columns  # (title, width, "<" or ">")
        self.out = out
        # how a row reaches ``out``; the progress bar swaps in one that clears and redraws the bar
        self.write = write or (lambda line: print(line, file=self.out, flush=True))

    def _line(self, cells) -> str:
        parts = [f"{c:{align}{w}}" for c, (_, w, align) in zip(cells, self.columns)]
        return "  ".join(parts).rstrip()

    def header(self) -> None:
        print(self._line([t for t, _, _ in self.columns]), file=self.out)
        print("  ".join("-" * w for _, w, _ in self.columns), file=self.out)

    def row(self, cells) -> None:
        self.write(self._line(cells))


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 110 else text[:107] + "..."


# ---------------------------------------------------------------------------------------- run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype", default="float32", choices=DTYPE_NAMES, help="input dtype (default float32)"
    )
    parser.add_argument(
        "--more",
        action="store_true",
        help="also time common layouts beyond the standard cases (short rows, few rows, a narrow inner "
        "axis, transformer rows, per-channel image statistics, every other element)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"fewer repeats, and skip the cases with {LARGE_ELEMENTS} or more elements",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help=f"time numred and its peers in N turns per case, keeping each one's median (default {ROUNDS}, "
        "1 with --quick); with --dtype-rates, the rounds of dtypes in turn (default 15, 5 with --quick)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="threads for numred (numba.set_num_threads) and for the peers "
        "(default: numba.get_num_threads())",
    )
    parser.add_argument(
        "--op",
        action="append",
        choices=[op.name for op in OPS],
        help="benchmark only this op (repeatable; default: every op in the registry)",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (there is none anyway when stderr is not a terminal "
        "or tqdm is not installed)",
    )
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="draw the speedups (peer time / numred time) to this image; needs matplotlib",
    )
    parser.add_argument(
        "--dtype-rates",
        action="store_true",
        help=f"instead of the peer table: numred's elements per second on {', '.join(RATE_DTYPES)} "
        "against float32, the dtypes timed in turns in each round (--dtype is ignored)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        default=None,
        help="write every measurement (seconds per call) and the run's settings as JSON",
    )


# ------------------------------------------------------------------------------------ progress


class _NoProgress:
    """Stands in for a tqdm bar when there is none: rows are printed as they come."""

    def __init__(self, out):
        self.out = out

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def write(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def close(self) -> None:
        pass


class _TqdmProgress:
    """A tqdm bar on stderr; table rows go to ``out`` through tqdm.write so the bar is not torn."""

    def __init__(self, tqdm_cls, total: int, out, desc: str, unit: str):
        self.out = out
        self._tqdm = tqdm_cls
        self.bar = tqdm_cls(
            total=total, file=sys.stderr, desc=desc, unit=unit, leave=False,
            dynamic_ncols=True
        )

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def set_postfix_str(self, s: str) -> None:
        self.bar.set_postfix_str(s, refresh=True)

    def write(self, line: str) -> None:
        self._tqdm.write(line, file=self.out)
        self.out.flush()

    def close(self) -> None:
        self.bar.close()


def make_progress(total: int, out, enabled: bool, desc: str = "timing blocks", unit: str = "block"):
    """A tqdm bar when tqdm is importable, ``enabled`` and stderr is a terminal; else no bar.

    ``unit`` names what one step counts: a block is one implementation timed on one case in one round.
    """
    if not enabled:
        return _NoProgress(out)
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return _NoProgress(out)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress(out)
    return _TqdmProgress(tqdm, total, out, desc, unit)


# ------------------------------------------------------------------ bandwidth reference


_plain_sum = None


def plain_parallel_sum():
    """The reference kernel: a minimal Numba parallel sum over a contiguous 1-D array.

    It reads every byte once and does nothing else, which is about as fast as this machine streams
    memory with Numba; the accumulator is float64 like numred's float sums. Compiled on first use.
    """
    global _plain_sum
    if _plain_sum is None:
        import numba

        @numba.njit(parallel=True, fastmath={"reassoc", "contract"})
        def _sum(a):
            s = 0.0
            for i in numba.prange(a.size):
                s += a[i]
            return s

        _plain_sum = _sum
    return _plain_sum


# ---------------------------------------------------------------------------------------- plot


MATPLOTLIB_MISSING = (
    '--plot needs matplotlib, which is not installed: pip install "numred[bench]"'
)


def check_matplotlib() -> str | None:
    """None when matplotlib is importable, else the message to print."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return MATPLOTLIB_MISSING
    return None


def plot_speedups(path: str, report: dict) -> None:
    """Grouped horizontal bars: one panel per op, one group per case, one bar per peer.

    The bar is peer time / numred time on a log axis with a line at 1: right of it numred is
    faster. Drawn with the Agg canvas directly, without pyplot, so no global backend is touched.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    results = report["results"]
    peers = report["peers"]
    ops = list(dict.fromkeys(r["op"] for r in results))
    cases = list(dict.fromkeys(r["case"] for r in results))
    by_key = {(r["op"], r["case"]): r for r in results}

    n_peers = max(1, len(peers))
    group_h = 0.8
    bar_h = group_h / n_peers
    height = 1.9 + len(cases) * (0.16 + 0.2 * n_peers)
    fig = Figure(figsize=(4.6 * len(ops) + 1.6, height), layout="constrained")
    FigureCanvasAgg(fig)
    axs = fig.subplots(1, len(ops), sharey=True, squeeze=False)[0]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]

    ratios_all = [
        r["peers"][p] / r["numred"]
        for r in results
        for p in peers
        if r["numred"] and r["peers"].get(p)
    ]
    # room for the value labels beyond the bar ends
    lo = min([*ratios_all, 1.0]) / 4
    hi = max([*ratios_all, 1.0]) * 4
    for ax, op in zip(axs, ops):
        for j, peer in enumerate(peers):
            ys, widths, differs, labels_na = [], [], [], []
            for i, case in enumerate(cases):
                r = by_key.get((op, case))
                y = i - group_h / 2 + (j + 0.5) * bar_h
                t_p = r["peers"].get(peer) if r else None
                if r and r["numred"] and t_p:
                    ys.append(y)
                    widths.append(t_p / r["numred"])
                    differs.append(peer_differs(r, peer))
                else:
                    labels_na.append(y)
            color = colors[j % len(colors)]
            # bars start at 1 so that slower-than-numred peers point left; a peer whose answer differs
            # is hatched and its label starred, as in the table
            bars = ax.barh(ys, [w - 1.0 for w in widths], left=1.0, height=bar_h * 0.92,
                           color=color, label=peer if ax is axs[0] else None)
            for bar, wrong in zip(bars, differs):
                if wrong:
                    bar.set_hatch("////")
                    bar.set_edgecolor("white")
            for y, w, wrong in zip(ys, widths, differs):
                ax.text(w * (1.04 if w >= 1 else 1 / 1.04), y, format_ratio(w) + ("*" if wrong else ""),
                        va="center", ha="left" if w >= 1 else "right", fontsize=6.5)
            for y in labels_na:
                ax.text(1.04, y, "n/a", va="center", ha="left", fontsize=6.5, color="0.5")
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_title(op, fontsize=10)
        ax.set_xlabel("peer time / numred time (> 1: numred faster)", fontsize=8)
        ax.grid(axis="x", which="major", alpha=0.3)
        ax.tick_params(labelsize=7.5)
    axs[0].set_yticks(range(len(cases)))
    axs[0].set_yticklabels(cases)
    axs[0].invert_yaxis()
    m = report["meta"]
    width_chars = int(fig.get_figwidth() * 11)
    title = [
        f"numred speedup over peers, {m['dtype']}, {m['threads']} thread(s), "
        f"{'quick' if m['quick'] else 'full'} run",
        *textwrap.wrap(", ".join(m["versions"]), width_chars),
    ]
    if any(peer_differs(r, p) for r in results for p in peers):
        title.append("hatched, *: the peer's result differs from the exact one beyond rounding")
    fig.suptitle("\n".join(title), fontsize=9.5)
    if peers:
        fig.legend(loc="outside lower center", ncols=len(peers), fontsize=8)
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------------------- run


# ---------------------------------------------------------------------------------- dtype rates

RATE_DTYPES = ("float32", "float16", "bfloat16", "int32")
RATE_SAMPLE_SECONDS = 0.01  # each timed sample repeats the call for about this long


def interleaved_times(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds per call of each of ``fns``, timed in turns: every round times each function
    once (after an untimed call that brings its data back into the cache), so that all of them see
    the same machine load. A dtype's rate against float32 measured minutes apart, in separate runs,
    moved by up to 2x on this project's shared machine."""
    calls = {}
    for name, fn in fns.items():  # the first call compiles; the second sizes the samples
        fn()
        t0 = time.perf_counter()
        fn()
        calls[name] = max(1, min(10_000, int(RATE_SAMPLE_SECONDS / max(time.perf_counter() - t0, 1e-7))))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            t0 = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            times[name].append((time.perf_counter() - t0) / calls[name])
    return {name: statistics.median(v) for name, v in times.items()}


def write_json(path: str, report: dict, out) -> bool:
    """Write ``report`` to the --json file; False (after saying why) when it cannot be written."""
    try:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    except OSError as exc:
        print(f"--json {path}: {exc}", file=sys.stderr)
        return False
    print(f"wrote {path}", file=out)
    return True


def _selected_ops(args: argparse.Namespace) -> list[Op]:
    return [op for op in OPS if not args.op or op.name in args.op]


def _versions(numred, numba, peers=()) -> list[str]:
    """The versions line's entries: numred, NumPy, Numba, the loaded peers, Python."""
    return [
        f"numred {getattr(numred, '__version__', '?')}",
        f"numpy {np.__version__}",
        f"numba {numba.__version__}",
        *(f"{p.name} {p.version()}" for p in peers if p.name != "numpy"),
        f"python {platform.python_version()}",
    ]


def run_dtype_rates(args: argparse.Namespace, out, versions: list[str], threads: int) -> int:
    """The --dtype-rates table: per case and op, numred's Gelem/s on each of RATE_DTYPES and the
    ratio to float32's (above 1: more elements per second than float32)."""
    import numred

    ops = _selected_ops(args)
    cases = selected_cases(args)
    rounds = getattr(args, "rounds", None) or (5 if args.quick else 15)
    print(" | ".join([*versions, f"threads {threads}", "dtype rates", "quick" if args.quick else "full"]), file=out)
    print(f"numred's Gelem/s per dtype, median of {rounds} rounds; in each round every dtype is timed in turn, "
          "after an untimed call; x f32 = elements per second against float32's (> 1: faster)", file=out)
    print(file=out)
    others = RATE_DTYPES[1:]
    columns = _case_columns(ops, cases) + [("float32", 9, ">")]
    for name in others:
        columns += [(name, max(9, len(name)), ">"), ("x f32", 6, ">")]
    table = Table(columns, out)
    table.header()
    out.flush()
    progress = make_progress(len(cases) * len(ops), out, enabled=not getattr(args, "no_progress", False),
                             desc="cases", unit="case")
    table.write = progress.write
    results: list[dict] = []
    ratios: dict[str, list[float]] = {name: [] for name in others}
    try:
        with np.errstate(all="ignore"):
            for case in cases:
                inputs = {name: case.make(dtype_from_name(name)) for name in RATE_DTYPES}
                axes = None if case.axes is None else list(case.axes)
                for op in ops:
                    fn = getattr(numred, op.name)
                    progress.set_postfix_str(f"{op.onnx_name} {case.shape_label()} axes {case.axes_label()}")
                    seconds = interleaved_times({name: (lambda x=x: fn(x, axes=axes)) for name, x in inputs.items()},
                                                rounds)
                    progress.update()
                    rates = {name: case.size / t / 1e9 for name, t in seconds.items()}
                    cells = [op.onnx_name, case.shape_label(), case.axes_label(), f"{rates['float32']:.3g}"]
                    for name in others:
                        ratios[name].append(rates[name] / rates["float32"])
                        cells += [f"{rates[name]:.3g}", format_ratio(rates[name] / rates["float32"])]
                    table.row(cells)
                    results.append({"op": op.onnx_name, "case": f"{case.shape_label()} axes {case.axes_label()}",
                                    "shape": list(case.shape), "axes": axes, "seconds": seconds,
                                    "gelem_per_s": rates})
                del inputs
    finally:
        progress.close()
    print(file=out)
    for name, r in ratios.items():
        ordered = sorted(r)
        print(f"{name} against float32 (elements/s): min {format_ratio(ordered[0])}, median "
              f"{format_ratio(statistics.median(ordered))}, max {format_ratio(ordered[-1])}; at least "
              f"float32's rate in {sum(v >= 1 for v in r)} of {len(r)}", file=out)
    if args.json:
        report = {"meta": {"versions": versions, "threads": threads, "quick": bool(args.quick), "rounds": rounds,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
                  "dtype_rates": results}
        return 0 if write_json(args.json, report, out) else 2
    return 0


def _case_columns(ops: list[Op], cases: list[Case]) -> list[tuple[str, int, str]]:
    """The table's first columns: op, shape, axes."""
    return [("op", max(len(op.onnx_name) for op in ops), "<"),
            ("shape", max(len("shape"), *(len(c.shape_label()) for c in cases)), "<"),
            ("axes", max(len("axes"), *(len(c.axes_label()) for c in cases)), "<")]


def _check_arguments(args: argparse.Namespace) -> int | None:
    """2 (after saying why on stderr) when the outputs or --rounds cannot work: before measuring,
    not after minutes of it; None when they can."""
    plot_path = getattr(args, "plot", None)
    json_path = getattr(args, "json", None)
    if plot_path and getattr(args, "dtype_rates", False):
        print("--plot draws the peer table's speedups; --dtype-rates has none", file=sys.stderr)
        return 2
    if plot_path:
        msg = check_matplotlib()
        if msg:
            print(msg, file=sys.stderr)
            return 2
    for flag, path in (("--plot", plot_path), ("--json", json_path)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            print(f"{flag} {path}: no such directory", file=sys.stderr)
            return 2
    if getattr(args, "rounds", None) is not None and args.rounds < 1:
        print(f"--rounds {args.rounds}: must be at least 1", file=sys.stderr)
        return 2
    return None


@dataclass
class PeerRun:
    """One run of the peer table: what it times, then what it measured (filled by _measure)."""

    out: object
    dtype: np.dtype
    threads: int
    policy: TimingPolicy
    rounds: int
    ops: list
    cases: list
    peers: list
    skipped: list
    versions: list
    ref_case: Case | None  # the bandwidth reference's case: the largest, float32/float64, full runs
    quick: bool
    progress_enabled: bool
    results: list = None  # one record per (case, op)
    best_ratios: list = None
    peer_ratios: dict = None
    na_notes: dict = None  # (peer, op) -> the first reason it could not run
    errors: list = None
    differing: list = None  # (peer, op, case, largest_difference)
    reference: dict | None = None

    def __post_init__(self):
        self.results, self.best_ratios, self.errors, self.differing = [], [], [], []
        self.peer_ratios = {p.name: [] for p in self.peers}
        self.na_notes = {}

    @property
    def paired_cases(self) -> list:
        """The cases of the reference's shape (8192x16384 over axis 1 and over axis 0): they time it
        again, in turns with each memory-bound op."""
        return [c for c in self.cases if self.ref_case is not None and c.shape == self.ref_case.shape]

    @property
    def paired_ops(self) -> list:
        return [op for op in self.ops if op.onnx_name in MEMORY_BOUND_OPS]


def _load_peers(threads: int) -> tuple[list, list[str]]:
    """(the peers that load, set to ``threads``; a note for each one skipped)."""
    peers, skipped = [], []
    for peer in PEERS:
        reason = peer.load()
        if reason is None:
            peer.set_threads(threads)
            peers.append(peer)
        else:
            skipped.append(f"{peer.name}: skipped, {reason}")
    return peers, skipped


def _print_header(run: PeerRun) -> None:
    out = run.out
    print(" | ".join([*run.versions, f"threads {run.threads}", f"dtype {run.dtype.name}",
                      "quick" if run.quick else "full"]), file=out)
    for line in run.skipped:
        print(line, file=out)
    print(
        "median time per call (numred's first call, where Numba compiles, is not timed); "
        "ratio = peer time / numred time, > 1 means numred is faster; "
        "GB/s = numred input bytes / time; * = the peer's result differs from the exact one beyond "
        "rounding: not a candidate for best peer",
        file=out,
    )
    print(file=out)
    # on stderr, as the progress bar: stdout keeps only what the run measured
    estimate = estimated_seconds(run.cases, len(run.ops), 1 + len(run.peers), run.policy, run.rounds)
    print(f"{len(run.cases) * len(run.ops)} cases for {1 + len(run.peers)} implementations, {run.rounds} "
          f"round{'s' if run.rounds > 1 else ''}: about {format_duration(estimate)}, plus compiling numred's "
          "kernels where they are not in Numba's disk cache yet (a few seconds per operator and layout; "
          "`python -m numred precompile` does it ahead)", file=sys.stderr, flush=True)


def _measure(run: PeerRun) -> None:
    """Time every (case, op) in turns with the peers, and the bandwidth reference; fill run's results."""
    columns = _case_columns(run.ops, run.cases) + [("numred", 9, ">"), ("GB/s", 6, ">")]
    if run.ref_case is not None:
        columns[0] = ("op", max(columns[0][1], len(REF_LABEL)), "<")
    for p in run.peers:
        columns += [(p.name, max(10, len(p.name)), ">"), ("ratio", 6, ">")]
    table = Table(columns, run.out)
    table.header()
    run.out.flush()
    # the bar starts below the header; from here on rows go through it so it is not torn
    total = (len(run.cases) * len(run.ops) * (1 + len(run.peers)) * run.rounds + (run.ref_case is not None)
             + len(run.paired_cases) * len(run.paired_ops) * run.rounds)
    progress = make_progress(total, run.out, enabled=run.progress_enabled)
    table.write = progress.write
    # NumPy expressions may overflow on purpose (integer wrap-around, exp of large values): no
    # warnings between the table rows. errstate is per thread and does not touch the results.
    try:
        with np.errstate(all="ignore"):
            for case in run.cases:
                x = case.make(run.dtype)
                for op in run.ops:
                    table.row(_measure_op(run, case, op, x, progress))
                if case == run.ref_case:
                    table.row(_measure_reference(run, case, x, progress))
                del x
    finally:
        progress.close()


def _measure_op(run: PeerRun, case: Case, op: Op, x: np.ndarray, progress) -> list[str]:
    """Time one op on one case's input ``x`` with the peers, compare their results with numred's
    exact one, record it all; the table row's cells."""
    import numred

    dtype = run.dtype
    axes = case.explicit_axes()
    numred_axes = None if case.axes is None else list(case.axes)
    where = f"{case.shape_label()} axes {case.axes_label()}"
    fn = getattr(numred, op.name)
    progress.set_postfix_str(f"{op.onnx_name} {where}")
    fns = {"numred": lambda: fn(x, axes=numred_axes, keepdims=1)}
    for p in run.peers:
        try:
            fns[p.name] = p.prepare(op, x, axes)
        except Exception as exc:  # this peer cannot run this case
            run.na_notes.setdefault((p.name, op.onnx_name), _short(exc))
            progress.update(run.rounds)
    paired = case in run.paired_cases and op in run.paired_ops
    if paired:  # the bandwidth reference in the same turns (see the module docstring)
        flat = x.reshape(-1)  # a view: the cases are contiguous
        fns[REF_KEY] = functools.partial(plain_parallel_sum(), flat)
    times = times_in_turns(fns, run.policy, run.rounds, progress.update)
    t_nr = times["numred"]
    if isinstance(t_nr, Exception):  # report, keep going, exit non-zero
        run.errors.append(f"{op.onnx_name} {where}: {_short(t_nr)}")
        t_nr = None
    cells = [op.onnx_name, case.shape_label(), case.axes_label(),
             format_time(t_nr) if t_nr is not None else "ERROR", f"{x.nbytes / t_nr / 1e9:.1f}" if t_nr else "-"]
    record = {
        "op": op.onnx_name,
        "case": where,
        "shape": list(case.shape),
        "axes": numred_axes,
        "dtype": dtype.name,
        "threads": run.threads,
        "bytes": int(x.nbytes),
        "numred": t_nr,
        "numred_gbps": x.nbytes / t_nr / 1e9 if t_nr else None,
        "peers": {},
    }
    if paired and not isinstance(times[REF_KEY], Exception):
        record["plain_sum_in_turns"] = times[REF_KEY]
    peer_times = []
    # where integer results wrap (the contract), numred's own result is the exact one; otherwise
    # numred's result on the input as float64 (integers) or the input itself
    reference_input = x if op.int_wraps or dtype.kind not in "iu" else x.astype(np.float64)
    reference_result = fn(reference_input, axes=numred_axes, keepdims=1) if t_nr else None
    record["peer_differences"] = {}
    for p in run.peers:
        t = times.get(p.name)
        if isinstance(t, Exception):  # this peer cannot run this case
            run.na_notes.setdefault((p.name, op.onnx_name), _short(t))
            t = None
        record["peers"][p.name] = t
        ratio = t / t_nr if (t is not None and t_nr) else None
        same = True
        if ratio is not None:  # one more call, untimed: is it the same answer?
            difference = largest_difference(reference_result, fns[p.name](), dtype)
            record["peer_differences"][p.name] = difference
            same = not peer_differs(record, p.name)
            run.peer_ratios[p.name].append(ratio)
            if same:
                peer_times.append((t, p.name))
            else:
                run.differing.append((p.name, op.onnx_name, where, difference))
        cells += [format_time(t) + ("" if same else "*"), format_ratio(ratio)]
    if peer_times and t_nr:
        t_best, best = min(peer_times)
        run.best_ratios.append(t_best / t_nr)
        record["best_peer"] = best
        record["best_ratio"] = t_best / t_nr
    run.results.append(record)
    return cells


def _measure_reference(run: PeerRun, case: Case, x: np.ndarray, progress) -> list[str]:
    """Time the plain parallel sum over ``x`` on its own (the bandwidth reference); its table row."""
    progress.set_postfix_str(f"{REF_LABEL} {case.shape_label()}")
    flat = x.reshape(-1)  # a view: the cases are contiguous
    kernel = plain_parallel_sum()
    wait_for_quiet()
    t_ref = median_time(lambda: kernel(flat), run.policy)
    progress.update()
    run.reference = {
        "kernel": "numba parallel sum, fastmath reassoc+contract, float64 accumulator",
        "shape": list(case.shape),
        "dtype": run.dtype.name,
        "threads": run.threads,
        "bytes": int(x.nbytes),
        "seconds": t_ref,
        "gbps": x.nbytes / t_ref / 1e9,
    }
    return [REF_LABEL, case.shape_label(), "all", format_time(t_ref), f"{run.reference['gbps']:.1f}"]


def _print_summary(run: PeerRun) -> None:
    """The lines under the table: the geometric means, the cases where a peer is faster, the bandwidth
    reference, and the notes (differing results, n/a peers, errors)."""
    out, dtype, results = run.out, run.dtype, run.results
    print(file=out)
    gm = geometric_mean(run.best_ratios)
    if gm is not None:
        per_peer = ", ".join(f"{name} {format_ratio(geometric_mean(r))}" for name, r in run.peer_ratios.items() if r)
        print(f"geometric mean of best-peer/numred over {len(run.best_ratios)} cases: "
              f"{format_ratio(gm)} (> 1: numred faster); per peer: {per_peer}", file=out)
    slower = _slower(run)
    if slower:
        print(f"numred is slower than the best peer in {len(slower)} of {len(run.best_ratios)} cases:", file=out)
        for r in slower:
            print(f"  {r['op']} {r['case']}: numred {format_time(r['numred'])}, "
                  f"{r['best_peer']} {format_time(r['peers'][r['best_peer']])} ({format_ratio(r['best_ratio'])})",
                  file=out)
    elif run.best_ratios:
        print("numred is at least as fast as the best peer in every case", file=out)
    reference = run.reference
    if reference is not None:
        ref_shape = tuple(reference["shape"])
        print(f"bandwidth reference ({REF_LABEL.strip('()')}, {'x'.join(map(str, ref_shape))} {dtype.name}): "
              f"{reference['gbps']:.1f} GB/s on its own; the memory-bound ops against it, timed in turns with "
              "each of them:", file=out)
        reference["numred"] = []
        for r in results:
            if tuple(r["shape"]) == ref_shape and r["op"] in MEMORY_BOUND_OPS and r["numred_gbps"]:
                t_paired = r.get("plain_sum_in_turns")
                t_plain = t_paired or reference["seconds"]
                share = t_plain / r["numred"]
                reference["numred"].append({"op": r["op"], "case": r["case"], "gbps": r["numred_gbps"],
                                            "plain_gbps": r["bytes"] / t_plain / 1e9, "share": share})
                print(f"  {r['op']} {r['case']}: {r['numred_gbps']:.1f} GB/s = {share:.0%} of the plain sum's "
                      f"{r['bytes'] / t_plain / 1e9:.1f} GB/s" + (" in the same turns" if t_paired else ""), file=out)
    for peer, opname, where, difference in run.differing:
        how = "a result of another size" if difference is None else f"{difference:.3g}x the tolerance"
        print(f"*: {peer} {opname} {where} {dtype.name}: differs from the exact result by {how} "
              "(bench.largest_difference)", file=out)
    for (peer, opname), reason in run.na_notes.items():
        print(f"n/a: {peer} {opname} {dtype.name}: {reason}", file=out)
    for e in run.errors:
        print(f"numred ERROR: {e}", file=out)


def _slower(run: PeerRun) -> list[dict]:
    return [r for r in run.results if r.get("best_ratio") is not None and r["best_ratio"] < 1]


def _report(run: PeerRun, args: argparse.Namespace) -> dict:
    """Everything the run measured, as --json writes it and --plot draws it."""
    import numba

    import numred

    return {
        "meta": {
            "versions": run.versions,
            "numred": getattr(numred, "__version__", "?"),
            "numpy": np.__version__,
            "numba": numba.__version__,
            "peer_versions": {p.name: p.version() for p in run.peers},
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "threads": run.threads,
            "dtype": run.dtype.name,
            "quick": run.quick,
            "timing": {"statistic": "median over rounds of the median seconds per call", "rounds": run.rounds,
                       "slow_call": SLOW_CALL, **vars(run.policy)},
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "peers": [p.name for p in run.peers],
        "skipped_peers": run.skipped,
        "results": run.results,
        "geometric_mean_best_peer_over_numred": geometric_mean(run.best_ratios),
        "geometric_mean_per_peer": {n: geometric_mean(r) for n, r in run.peer_ratios.items()},
        "slower_than_best_peer": [f"{r['op']} {r['case']}" for r in _slower(run)],
        "differing_results": [{"peer": p, "op": o, "case": c, "largest_difference": d} for p, o, c, d in run.differing],
        "bandwidth_reference": run.reference,
        "na": [{"peer": p, "op": o, "reason": why} for (p, o), why in run.na_notes.items()],
        "errors": run.errors,
    }


def _write_outputs(report: dict, args: argparse.Namespace, out) -> int:
    """--json and --plot: 0, or 2 when one could not be written."""
    status = 0
    json_path, plot_path = getattr(args, "json", None), getattr(args, "plot", None)
    if json_path and not write_json(json_path, report, out):
        status = 2
    if plot_path:
        try:
            plot_speedups(plot_path, report)
        except OSError as exc:
            print(f"--plot {plot_path}: {exc}", file=sys.stderr)
            status = 2
        else:
            print(f"wrote {plot_path}", file=out)
    return status


def run(args: argparse.Namespace, out=None) -> int:
    """The bench command: check the arguments, set the threads, load the peers, measure, summarise,
    write the outputs. 0 when all went well, 1 when numred failed a case, 2 for unusable arguments
    or outputs."""
    out = sys.stdout if out is None else out
    status = _check_arguments(args)
    if status is not None:
        return status

    import numba

    import numred

    threads = args.threads if args.threads is not None else numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
    except ValueError as exc:
        print(f"--threads {threads}: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "dtype_rates", False):
        return run_dtype_rates(args, out, _versions(numred, numba), threads)

    dtype = dtype_from_name(args.dtype)
    cases = selected_cases(args)
    peers, skipped = _load_peers(threads)
    peer_run = PeerRun(
        out=out, dtype=dtype, threads=threads, policy=QUICK_POLICY if args.quick else DEFAULT_POLICY,
        rounds=getattr(args, "rounds", None) or (1 if args.quick else ROUNDS), ops=_selected_ops(args),
        cases=cases, peers=peers, skipped=skipped, versions=_versions(numred, numba, peers),
        ref_case=(max(cases, key=lambda c: c.size)
                  if not args.quick and cases and dtype.name in ("float32", "float64") else None),
        quick=bool(args.quick), progress_enabled=not getattr(args, "no_progress", False),
    )
    _print_header(peer_run)
    _measure(peer_run)
    _print_summary(peer_run)
    output_status = _write_outputs(_report(peer_run, args), args, out)
    return output_status or (1 if peer_run.errors else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numred bench", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
