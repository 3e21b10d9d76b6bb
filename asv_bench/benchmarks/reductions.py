"""asv benchmarks for numred, generated from the op registry.

Every axis of the grid comes from the project, not from this file:

- ops: ``numred._registry.OPS`` (a new op there is benchmarked automatically),
- dtypes: ``numred.tools.bench.DTYPE_NAMES`` (all eight),
- cases: ``numred.tools.bench.CASES`` (the cases of ``python -m numred bench``), labelled
  ``"<shape>/<axes>"``, e.g. ``"4096x4096/axis0"``, ``"64x64/all"``, ``"32x64x56x56/axes2,3"``,
- peers: ``numred.tools.bench.PEERS`` (NumPy, onnxruntime, torch adapters).

Cases with ``numred.tools.bench.LARGE_ELEMENTS`` (2**24) elements or more are in the ``*Large`` classes so
that they can be selected or skipped with ``--bench``. Numba compiles on the first call of each op
and dtype in a process; asv starts a fresh process per benchmark, so ``setup`` makes that first
call and the timed region never includes compilation.

Select with regular expressions on ``name(params)``, e.g. ``--bench "Reduce\\.time_reduce"`` (numred,
small cases), ``--bench "'float32'"`` (one dtype everywhere), ``--bench "Peer.*'onnxruntime'"``.
"""
from __future__ import annotations

import numba
import numpy as np

import numred
from numred._registry import OPS, OPS_BY_NAME
from numred.tools.bench import CASES, DTYPE_NAMES, PEERS, Case, dtype_from_name, make_input, op_input

# ------------------------------------------------------------------------------ the grid


def case_label(case: Case) -> str:
    if case.axes is None:
        axes = "all"
    elif len(case.axes) == 1:
        axes = f"axis{case.axes[0]}"
    else:
        axes = "axes" + ",".join(str(a) for a in case.axes)
    return f"{case.shape_label()}/{axes}"


CASES_BY_LABEL = {case_label(c): c for c in CASES}
if len(CASES_BY_LABEL) != len(CASES):
    raise RuntimeError("numred.tools.bench.CASES has two cases with the same label")

OP_NAMES = [op.name for op in OPS]
DTYPES = list(DTYPE_NAMES)
SMALL_CASES = [label for label, c in CASES_BY_LABEL.items() if not c.large]
LARGE_CASES = [label for label, c in CASES_BY_LABEL.items() if c.large]
PEER_NAMES = [p.name for p in PEERS]
PEERS_BY_NAME = {p.name: p for p in PEERS}

# Peak memory: big float32 inputs, one in the last-level cache range and one well beyond it.
PEAKMEM_DTYPES = ["float32"]
PEAKMEM_CASES = {
    label: Case(shape, axes)
    for label, shape, axes in (
        ("4096x4096/axis0", (4096, 4096), (0,)),
        ("4096x4096/axis1", (4096, 4096), (1,)),
        ("8192x16384/axis0", (8192, 16384), (0,)),
        ("8192x16384/axis1", (8192, 16384), (1,)),
    )
}


def threads() -> int:
    """numred's thread count (NUMBA_NUM_THREADS, default: all cores); peers get the same."""
    return numba.get_num_threads()


_loaded: dict[str, object] = {}


def load_peer(name: str):
    """The numred.tools.bench peer adapter, loaded once per process; NotImplementedError skips."""
    peer = PEERS_BY_NAME[name]
    if name not in _loaded:
        reason = peer.load()
        if reason is None:
            peer.set_threads(threads())
        _loaded[name] = reason
    if _loaded[name] is not None:
        raise NotImplementedError(f"{name}: {_loaded[name]}")
    return peer


def numred_call(op_name: str, x: np.ndarray, case: Case):
    fn = getattr(numred, op_name)
    axes = None if case.axes is None else list(case.axes)
    return lambda: fn(x, axes=axes, keepdims=1)


def peer_call(peer_name: str, op_name: str, x: np.ndarray, case: Case):
    """A zero-argument callable running the peer, already called once; skips what it cannot run."""
    peer = load_peer(peer_name)
    try:
        fn = peer.prepare(OPS_BY_NAME[op_name], x, case.explicit_axes())
        fn()
    except Exception as exc:  # no kernel for this dtype, unsupported input, ...
        raise NotImplementedError(f"{peer_name} cannot run this case: {exc!r}") from exc
    return fn


# --------------------------------------------------------------------------- numred itself


class Reduce:
    """numred, cases below 2**24 elements: op x dtype x case."""

    params = [OP_NAMES, DTYPES, SMALL_CASES]
    param_names = ["op", "dtype", "case"]
    timeout = 180  # setup compiles (seconds per op and dtype on a loaded machine)

    def setup(self, op, dtype, case):
        c = CASES_BY_LABEL[case]
        self.x = op_input(make_input(c.shape, dtype_from_name(dtype)), OPS_BY_NAME[op])
        self.fn = numred_call(op, self.x, c)
        self.fn()  # Numba compiles here, outside the timed region

    def teardown(self, op, dtype, case):
        # setup may have skipped (NotImplementedError) before setting these: asv still tears down
        self.__dict__.pop("x", None)
        self.__dict__.pop("fn", None)

    def time_reduce(self, op, dtype, case):
        self.fn()


class ReduceLarge(Reduce):
    """numred, cases of 2**24 elements or more (64 MiB-128 MiB inputs)."""

    params = [OP_NAMES, DTYPES, LARGE_CASES]
    timeout = 300
    rounds = 1
    repeat = (1, 10, 10.0)


# ------------------------------------------------------------------------------------- peers


class PeerReduce:
    """Baselines on the same cases: numred.tools.bench's peer adapters (numpy always; onnxruntime and
    torch when importable). A peer that is missing or cannot run a case is skipped (n/a)."""

    params = [PEER_NAMES, OP_NAMES, DTYPES, SMALL_CASES]
    param_names = ["peer", "op", "dtype", "case"]
    timeout = 180

    def setup(self, peer, op, dtype, case):
        c = CASES_BY_LABEL[case]
        load_peer(peer)  # skip before building an input when the peer is not importable
        self.x = op_input(make_input(c.shape, dtype_from_name(dtype)), OPS_BY_NAME[op])
        self.fn = peer_call(peer, op, self.x, c)

    def teardown(self, peer, op, dtype, case):
        # setup may have skipped (NotImplementedError) before setting these: asv still tears down
        self.__dict__.pop("x", None)
        self.__dict__.pop("fn", None)

    def time_reduce(self, peer, op, dtype, case):
        self.fn()


class PeerReduceLarge(PeerReduce):
    params = [PEER_NAMES, OP_NAMES, DTYPES, LARGE_CASES]
    timeout = 300
    rounds = 1
    repeat = (1, 10, 10.0)


# ------------------------------------------------------------------------------ peak memory


class PeakMem:
    """Peak resident memory of the benchmark process (asv's peakmem: the whole process, so it
    includes the interpreter, Numba's compiler and the input itself: 64 MiB for 4096x4096, 512 MiB
    for 8192x16384). Differences between implementations, or between commits, are the extra
    memory the reduction takes (copies, temporaries)."""

    params = [["numred", *PEER_NAMES], OP_NAMES, PEAKMEM_DTYPES, list(PEAKMEM_CASES)]
    param_names = ["impl", "op", "dtype", "case"]
    timeout = 300

    def setup(self, impl, op, dtype, case):
        c = PEAKMEM_CASES[case]
        if impl != "numred":
            load_peer(impl)
        self.x = op_input(make_input(c.shape, dtype_from_name(dtype)), OPS_BY_NAME[op])
        if impl == "numred":
            self.fn = numred_call(op, self.x, c)
            self.fn()  # compile (and run once) in setup, as the timing benchmarks do
        else:
            self.fn = peer_call(impl, op, self.x, c)

    def teardown(self, impl, op, dtype, case):
        # setup may have skipped (NotImplementedError) before setting these: asv still tears down
        self.__dict__.pop("x", None)
        self.__dict__.pop("fn", None)

    def peakmem_reduce(self, impl, op, dtype, case):
        self.fn()
