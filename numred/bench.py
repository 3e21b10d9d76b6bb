"""``python -m numred bench``: time numred against its peers on a standard set of cases.

The cases are generated from the op registry (``numred._registry.OPS``) crossed with a handful of
standard shapes, so a new operator is benchmarked without touching this file.

Peers are small adapter objects (see :class:`Peer`). NumPy is always present; onnxruntime and
torch are used when importable and skipped with a printed note otherwise. A peer that cannot run a
case (no kernel for that dtype, unsupported input, ...) is shown as ``n/a`` for that case.

Timing: every implementation is called once before timing (for numred this is where Numba
compiles), then called repeatedly, each call timed with ``time.perf_counter``, until a time budget
and a minimum call count are both reached. The table reports the median per call.

Only the standard library, NumPy and the numred base dependencies are imported; optional peers are
imported lazily.
"""
from __future__ import annotations

import argparse
import gc
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from numred._registry import OPS, Op

DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")

# Cases with at least this many elements are skipped by --quick.
LARGE_ELEMENTS = 1 << 24


# --------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    shape: tuple[int, ...]
    axes: tuple[int, ...] | None  # None: reduce all axes (numred gets axes=None, the ONNX default)

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
        return "x".join(str(n) for n in self.shape)

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
    Case((4194304, 4), (0,)),
    Case((4, 4194304), (1,)),
)


def dtype_from_name(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_input(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Random data from a fixed seed: standard normal floats, small integers (|x| < 100)."""
    rng = np.random.default_rng(0)
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -100
        return rng.integers(low, 100, size=shape, dtype=dtype)
    if dtype == np.float64:
        return rng.standard_normal(shape, dtype=np.float64)
    # float32 directly; float16 and bfloat16 rounded from float32
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


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
    """torch.mean / torch.logsumexp / sum of squares, on a tensor sharing the NumPy buffer."""

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


# ----------------------------------------------------------------------------------- formatting


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= 0.9995 * scale or unit == "ns":
            v = seconds / scale
            digits = 2 if v < 9.995 else 1 if v < 99.95 else 0
            return f"{v:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def format_ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    return f"{r:.2f}x" if r < 9.995 else f"{r:.1f}x" if r < 99.95 else f"{r:.0f}x"


class Table:
    """Fixed-width columns, printed row by row so long runs show progress."""

    def __init__(self, columns: list[tuple[str, int, str]], out):
        self.columns = columns  # (title, width, "<" or ">")
        self.out = out

    def _line(self, cells) -> str:
        parts = [f"{c:{align}{w}}" for c, (_, w, align) in zip(cells, self.columns)]
        return "  ".join(parts).rstrip()

    def header(self) -> None:
        print(self._line([t for t, _, _ in self.columns]), file=self.out)
        print("  ".join("-" * w for _, w, _ in self.columns), file=self.out)

    def row(self, cells) -> None:
        print(self._line(cells), file=self.out, flush=True)


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
        "--quick",
        action="store_true",
        help=f"fewer repeats, and skip the cases with {LARGE_ELEMENTS} or more elements",
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


def run(args: argparse.Namespace, out=None) -> int:
    out = sys.stdout if out is None else out
    import numba

    import numred

    threads = args.threads if args.threads is not None else numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
    except ValueError as exc:
        print(f"--threads {threads}: {exc}", file=sys.stderr)
        return 2

    dtype = dtype_from_name(args.dtype)
    policy = QUICK_POLICY if args.quick else DEFAULT_POLICY
    ops = [op for op in OPS if not args.op or op.name in args.op]
    cases = [c for c in CASES if not (args.quick and c.large)]

    peers: list[Peer] = []
    skipped: list[str] = []
    for peer in PEERS:
        reason = peer.load()
        if reason is None:
            peer.set_threads(threads)
            peers.append(peer)
        else:
            skipped.append(f"{peer.name}: skipped, {reason}")

    versions = [
        f"numred {getattr(numred, '__version__', '?')}",
        f"numpy {np.__version__}",
        f"numba {numba.__version__}",
        *(f"{p.name} {p.version()}" for p in peers if p.name != "numpy"),
        f"python {platform.python_version()}",
        f"threads {threads}",
        f"dtype {dtype.name}",
        "quick" if args.quick else "full",
    ]
    print(" | ".join(versions), file=out)
    for line in skipped:
        print(line, file=out)
    print(
        "median time per call (numred's first call, where Numba compiles, is not timed); "
        "ratio = peer time / numred time, > 1 means numred is faster; "
        "GB/s = numred input bytes / time",
        file=out,
    )
    print(file=out)

    columns = [
        ("op", max(len(op.onnx_name) for op in ops), "<"),
        ("shape", max(len("shape"), *(len(c.shape_label()) for c in cases)), "<"),
        ("axes", max(len("axes"), *(len(c.axes_label()) for c in cases)), "<"),
        ("numred", 9, ">"),
        ("GB/s", 6, ">"),
    ]
    for p in peers:
        columns += [(p.name, max(9, len(p.name)), ">"), ("ratio", 6, ">")]
    table = Table(columns, out)
    table.header()

    best_ratios: list[float] = []
    peer_ratios: dict[str, list[float]] = {p.name: [] for p in peers}
    na_notes: dict[tuple[str, str], str] = {}  # (peer, op) -> first reason
    errors: list[str] = []

    for case in cases:
        x = make_input(case.shape, dtype)
        axes = case.explicit_axes()
        numred_axes = None if case.axes is None else list(case.axes)
        for op in ops:
            fn = getattr(numred, op.name)
            try:
                t_nr = median_time(lambda: fn(x, axes=numred_axes, keepdims=1), policy)
            except Exception as exc:  # report, keep going, exit non-zero
                t_nr = None
                errors.append(f"{op.onnx_name} {case.shape_label()} axes {case.axes_label()}: "
                              f"{_short(exc)}")
            cells = [
                op.onnx_name,
                case.shape_label(),
                case.axes_label(),
                format_time(t_nr) if t_nr is not None else "ERROR",
                f"{x.nbytes / t_nr / 1e9:.1f}" if t_nr else "-",
            ]
            peer_times = []
            for p in peers:
                try:
                    t = median_time(p.prepare(op, x, axes), policy)
                except Exception as exc:  # this peer cannot run this case
                    t = None
                    na_notes.setdefault((p.name, op.onnx_name), _short(exc))
                ratio = t / t_nr if (t is not None and t_nr) else None
                if ratio is not None:
                    peer_ratios[p.name].append(ratio)
                    peer_times.append(t)
                cells += [format_time(t), format_ratio(ratio)]
            if peer_times and t_nr:
                best_ratios.append(min(peer_times) / t_nr)
            table.row(cells)
        del x

    print(file=out)
    gm = geometric_mean(best_ratios)
    if gm is not None:
        per_peer = ", ".join(
            f"{name} {format_ratio(geometric_mean(r))}" for name, r in peer_ratios.items() if r
        )
        print(
            f"geometric mean of best-peer/numred over {len(best_ratios)} cases: "
            f"{format_ratio(gm)} (> 1: numred faster); per peer: {per_peer}",
            file=out,
        )
    for (peer, opname), reason in na_notes.items():
        print(f"n/a: {peer} {opname} {dtype.name}: {reason}", file=out)
    for e in errors:
        print(f"numred ERROR: {e}", file=out)
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m numred bench", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
