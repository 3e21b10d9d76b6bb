"""The compiled kernels as code, beyond their results: every kernel function states its fastmath
flags (Numba would otherwise compile it with its first caller's), each kernel is compiled once for
serial calls and parallel launches alike, element helpers refuse the types they do not decode, and
the sum kernels' store loops take no log that only ReduceLogSum asks for, no kernel assigns a
slice from an array (whose error message Numba compiles into the first call), and a first call
compiles the kernels it runs, not their helpers as functions of their own.
"""
from __future__ import annotations

import errno

import numpy as np
import pytest

import numred
from oracle import BFLOAT16
from threads import with_threads


def test_every_kernel_function_states_its_fastmath_flags():
    # Numba compiles a function whose fastmath flags are unset with the flags of the caller that
    # first compiles it: _split and Neumaier's addition, error-free transformations, had come out with
    # reassoc and contract when a FASTMATH loop compiled them first, and strict otherwise.
    import inspect
    from numba.core.registry import CPUDispatcher
    from numred import kernels
    from numred.kernels import base, serial
    from numred.kernels.integers import INT_TERMS
    dispatchers = {f"{module.__name__}.{name}": obj for module in kernels.modules()
                   for name, obj in vars(module).items() if isinstance(obj, CPUDispatcher)}
    for name, kernel in kernels.table.KERNELS.items():
        dispatchers[f"{name} {kernel.dispatcher.py_func.__qualname__}"] = kernel.dispatcher
    # the serial family's kernels, made by factories on first use
    for kernel in ([serial.float_sums(term, float64) for term in (base.SUM, base.SUM_SQUARES, base.SUM_ABS)
                    for float64 in (0, 1)]
                   + [serial.int_sums(term) for term in INT_TERMS]
                   + [serial.float_log_sum_exp(float64) for float64 in (0, 1)] + [serial.int_log_sum_exp()]):
        dispatchers[kernel.py_func.__qualname__] = kernel
    assert len(dispatchers) > 50
    assert [name for name, d in dispatchers.items() if "fastmath" not in d.targetoptions] == []
    source = "".join(inspect.getsource(module) for module in kernels.modules())
    overloads = [line for line in source.splitlines() if line.startswith("@overload(")]
    assert len(overloads) > 3
    assert [line for line in overloads if "jit_options" not in line] == []
    # subroutines (kernels.jit) take their flags as a required argument; these state them by name
    subroutines = [line.strip() for line in source.splitlines()
                   if line.strip().startswith(("@subroutine(", "@subroutine_by_type(", "@njit_for("))]
    assert len(subroutines) > 60
    assert [line for line in subroutines if "fastmath=" not in line] == []


def test_a_kernel_is_compiled_once_for_serial_calls_and_launches(monkeypatch):
    # A parallel-size call launches its kernel on threads; the same call made serially (as a small
    # input, or a forked child of a parent that launched on OpenMP, makes it) runs the same compiled
    # function: no new signature, and no parallel=True copy of any kernel. Nothing is compiled with
    # parallel=True at all: the launcher calls the threading layer's parallel_for itself.
    from numred import _launch, _runtime, kernels

    launched_kernels = []
    address_of = _runtime.kernel_address

    def recording_address_of(dispatcher, args):
        launched_kernels.append(dispatcher)
        return address_of(dispatcher, args)

    monkeypatch.setattr(_runtime, "kernel_address", recording_address_of)
    monkeypatch.setattr(_launch, "kernel_address", recording_address_of)
    x = np.random.default_rng(5).standard_normal((613, 877)).astype(np.float32)  # (a shape of its own)
    expected = x.astype(np.float64).sum(axis=1).astype(np.float32)
    launched = numred.reduce_sum(x, axes=[1], keepdims=0)
    assert launched_kernels, "not launched"
    signatures = {d: len(d.signatures) for d in launched_kernels}
    monkeypatch.setattr(_runtime, "_parallel_allowed", False)
    serial = numred.reduce_sum(x.copy(), axes=[1], keepdims=0)
    assert {d: len(d.signatures) for d in launched_kernels} == signatures
    assert launched.tobytes() == serial.tobytes() and np.array_equal(launched, expected)
    assert [name for name, d in kernels.catalogue().items() if d.targetoptions.get("parallel")] == []
    assert _runtime.LAUNCH.signatures and not _runtime.LAUNCH.targetoptions.get("parallel")


@pytest.mark.slow
@pytest.mark.parametrize("module, helper, arguments", [
    ("decode", "pair_values", (np.zeros(4, np.float32), 0)),  # bfloat16 bits (int16) only
    ("maxima", "float_key", (np.uint32(5),)),  # float bits, read through signed views only
    ("maxima", "magnitude_bits", (np.uint64(5),)),
])
def test_element_helpers_refuse_types_they_do_not_decode(module, helper, arguments):
    # pair_values once returned (0, 0) for any other type, float_key the value itself and
    # magnitude_bits 0 for unsigned integers, so that kernels could compile branches their dtype never
    # takes. The kernels are now made per element type and float-or-integer data (pair_sums,
    # _max_run_for), and a misuse of these fails to compile instead of giving wrong values.
    from numba import njit
    from numba.core.errors import TypingError

    from numred import kernels

    fn = getattr(getattr(kernels, module), helper)
    call = njit(lambda *args: fn(*args))
    with pytest.raises(TypingError):
        call(*arguments)


def _errno_of_this_thread():
    """The C library's errno of the calling thread, as a ctypes int (glibc's __errno_location, macOS's
    __error), or None."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    for name in ("__errno_location", "__error"):
        location = getattr(libc, name, None)
        if location is not None:
            location.restype = ctypes.POINTER(ctypes.c_int)
            return location().contents
    return None


ERRNO = _errno_of_this_thread()

# one layout of each kind the plan picks: single runs, tiles, narrow tiles, blocks, the general walker
# (tiles of 50 outputs), chunks of a reduced range finished after the kernel, the serial path
FINISH_LAYOUTS = {"rows": ((2000, 300), [1]), "tiles": ((8, 64, 28, 28), [1]), "narrow tiles": ((2048, 300, 2), [1]),
                  "blocks": ((40, 50, 30), [0, 2]), "general": ((30, 20, 40, 50), [0, 2]),
                  "chunks": ((4, 1_000_000), [1]), "serial": ((6, 5, 4), [1])}


@pytest.mark.slow
@pytest.mark.skipif(ERRNO is None, reason="needs the C library's errno")
@pytest.mark.parametrize("layout", FINISH_LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("opname", ["reduce_sum", "reduce_mean"])
def test_sums_do_not_take_the_log_that_only_reduce_log_sum_asks_for(opname, dtype, layout):
    # The sum kernels take their finish step (none, ReduceL2's square root, ReduceLogSum's log) as a
    # runtime argument (kernels.store.finished). LLVM once vectorised the store loops of float16 and
    # bfloat16 kernels into a log of every output whatever the step, mostly in the machine code saved
    # to the disk cache, which every process that did not compile a kernel runs: 2.3x the time of a
    # float16 sum, and the C library's log of each negative sum set errno to EDOM, which is how this
    # test sees it. (The floating-point exception flags cannot tell: LLVM converts a float16 value in
    # a vector register whose other lanes may hold signalling NaNs.) One thread, so that the kernel
    # runs in this thread, whose errno this is.
    shape, axes = FINISH_LAYOUTS[layout]
    x = np.random.default_rng(7).standard_normal(shape).astype(np.dtype(BFLOAT16 if dtype == "bfloat16" else dtype))
    reduce = getattr(numred, opname)
    with_threads(1, reduce, x, axes)  # a first call may compile, or load from the cache
    ERRNO.value = 0
    result = with_threads(1, reduce, x, axes)
    assert ERRNO.value != errno.EDOM
    assert (np.asarray(result, np.float64) < 0).any()  # the data has negative sums


def test_kernels_assign_no_slice_from_an_array():
    # A slice assigned from an array inside a kernel (a[i:j] = b, a[i:j] += b[k:l]) makes Numba
    # compile its shape-mismatch error message: string formatting that took about 2 s of every first
    # call of the general kernels, which now copy element by element. A scalar fill (a[:] = 0.0)
    # has no such check. (kernels/jit.py compiles the kernels and is not compiled itself.)
    import ast
    from pathlib import Path

    from numred import kernels

    found = []
    for path in sorted(Path(kernels.__file__).parent.glob("*.py")):
        if path.name == "jit.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                sliced = [t for t in targets if isinstance(t, ast.Subscript)
                          and any(isinstance(part, ast.Slice) for part in ast.walk(t.slice))]
                if sliced and not isinstance(node.value, ast.Constant):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, found


def test_scratch_array_helpers_allocate_as_numpy_does():
    # kernels.base's allocation intrinsics (which spare a first call Numba's np.empty, np.zeros and
    # np.full overloads) against NumPy's own functions: shape, dtype, zeros and fill values
    from numba import njit

    from numred.kernels.base import filled_array, new_array, zeroed_array

    @njit
    def made(n):
        floats = zeroed_array(n, np.float64)
        words = zeroed_array(n, np.uint64)
        like = new_array(n, words.dtype)
        like[:] = 7
        return floats, words, like, filled_array(n, np.int16(-3)), filled_array(n, np.float32(0.5))

    for n in (0, 1, 5, 100_003):
        floats, words, like, shorts, halves = made(n)
        for got, want in ((floats, np.zeros(n)), (words, np.zeros(n, np.uint64)), (like, np.full(n, 7, np.uint64)),
                          (shorts, np.full(n, -3, np.int16)), (halves, np.full(n, 0.5, np.float32))):
            assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
            assert got.tobytes() == want.tobytes(), (n, got.dtype)


def test_kernels_call_no_builtin_min_max_or_array_sum():
    # Python's min and max and an array's .sum() are overloads that Numba compiles as functions of
    # their own in every process's first call (20-50 ms each, per pair of types); the kernels use
    # kernels.base's smaller, larger and integer_total, lowered in place, instead.
    import ast
    from pathlib import Path

    from numred import kernels

    found = []
    for path in sorted(Path(kernels.__file__).parent.glob("*.py")):
        if path.name == "jit.py":
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call):
                called = node.func
                if (isinstance(called, ast.Name) and called.id in ("min", "max")) or (
                        isinstance(called, ast.Attribute) and called.attr == "sum" and not node.args
                        and not (isinstance(called.value, ast.Name) and called.value.id in ("np", "math"))):
                    found.append((path.name, ast.get_source_segment(source, node)))
    # the one array sum left adds float lanes, in NumPy's order, which integer_total's loop (for
    # integers only: order does not matter to them) would leave to the caller's fastmath flags
    assert found == [("runs.py", "lanes.sum()")], found


def test_integer_helpers_match_python():
    # kernels.base.smaller and larger against Python's min and max over the integer types the kernels
    # pair (sizes, keys, counts), with literals; maxima's keys against the float order they encode;
    # integer_total against exact sums modulo the type's width
    from numba import njit

    from numred.kernels.base import integer_total, larger, smaller
    from numred.kernels.maxima import flipped, float_key, lowest_key, magnitude_bits

    @njit
    def picks(a, b):
        return smaller(a, b), larger(a, b), smaller(b, a), larger(b, a)

    @njit
    def picks_with_literals(a):  # (a literal is an int64: signed types only, as in the kernels)
        return smaller(a, 3), larger(-2, a)

    rng = np.random.default_rng(11)
    for dtype in (np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(dtype)
        values = [info.min, info.min + 1, -1 if info.min else 2, 0, 1, info.max - 1, info.max]
        values += [int(v) for v in rng.integers(info.min, info.max, 20, dtype=dtype, endpoint=True)]
        for a in values:
            for b in values[:8]:
                got = tuple(int(v) for v in picks(dtype(a), dtype(b)))
                assert got == (min(a, b), max(a, b), min(a, b), max(a, b)), (dtype, a, b, got)
            if info.min:
                assert tuple(int(v) for v in picks_with_literals(dtype(a))) == (min(a, 3), max(-2, a))

    @njit
    def keys(bits, flip):
        out = np.empty((bits.size, 2), np.int64)
        for i in range(bits.size):
            out[i, 0] = flipped(float_key(bits[i]), flip)
            out[i, 1] = magnitude_bits(bits[i])
        return out, lowest_key(bits[0])

    floats = np.array([-np.inf, -3.5, -1e-30, -0.0, 0.0, 5e-324, 1e-30, 2.0, np.inf], np.float64)
    for view, width in ((floats.view(np.int64), 64), (floats.astype(np.float32).view(np.int32), 32),
                        (floats.astype(np.float16).view(np.int16), 16)):
        for flip in (0, -1):
            out, lowest = keys(view, flip)
            assert int(lowest) == -(1 << (width - 1))
            order = out[:, 0] if flip == 0 else -out[:, 0]
            assert all(order[i] <= order[i + 1] for i in range(len(order) - 1)), (width, flip, out)
            assert list(out[:, 1]) == [int(v) & ((1 << (width - 1)) - 1) for v in view]

    @njit
    def total(lanes):
        return integer_total(lanes)

    for dtype in (np.int64, np.uint64):
        lanes = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 8, dtype=dtype, endpoint=True)
        wrapped = sum(int(v) for v in lanes) % 2**64
        if dtype == np.int64 and wrapped >= 2**63:
            wrapped -= 2**64
        assert int(total(lanes)) == wrapped


_FIRST_CALLS = """
import json
import ml_dtypes
import numpy as np
from numba.core import event

import numred

compiled = []


class Compiles(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        dispatcher = ev.data.get("dispatcher")
        function = getattr(dispatcher, "py_func", None)
        if function is not None and function.__module__.split(".")[0] == "numred":
            cached = type(getattr(dispatcher, "_cache", None)).__name__ != "NullCache"
            compiled.append((function.__module__, function.__qualname__, cached))


event.register("numba:compile", Compiles())
for op, dtype, shape, axes in [("reduce_sum_square", np.float32, (64, 32, 32), [0, 2]),
                               ("reduce_l1", ml_dtypes.bfloat16, (3, 2, 2), [1]),
                               ("reduce_mean", np.float64, (1000, 1000), [1]),
                               ("reduce_log_sum_exp", np.int32, (1000, 1000), [1]),
                               ("reduce_max", np.float16, (64, 32, 32), [0, 2])]:
    getattr(numred, op)((np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape), axes=axes)
print(json.dumps(compiled))
"""


@pytest.mark.slow
def test_a_first_call_compiles_kernels_not_their_helpers(tmp_path):
    # Numba's dispatcher compiles an njit helper, and an overload's implementation, as a function of
    # its own, with a Python wrapper and machine code that no caller runs: 20-40 ms of a first call
    # each, five to eighteen of them per first call before the helpers became subroutines
    # (kernels.jit). In a new process with an empty cache, what dispatchers compile is the kernels
    # Python calls (cached on disk) and the implementations of the overloads inlined into their
    # callers' IR, and nothing else.
    import ast
    import json
    import os
    import subprocess
    import sys
    from numred import kernels

    inlined_overloads = set()
    for module in kernels.modules():
        for node in ast.parse(open(module.__file__).read()).body:
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", None) == "overload"
                    and any(k.arg == "inline" for k in d.keywords) for d in node.decorator_list):
                inlined_overloads.add((module.__name__, node.name))
    assert len(inlined_overloads) >= 4
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    child = subprocess.run([sys.executable, "-c", _FIRST_CALLS], env=env, capture_output=True, text=True,
                           timeout=900)
    assert child.returncode == 0, child.stderr[-3000:]
    compiled = json.loads(child.stdout.splitlines()[-1])
    assert sum(cached for _, _, cached in compiled) >= 5  # a kernel (at least) per call
    helpers = [(module, name) for module, name, cached in compiled
               if not cached and (module, name.split(".<locals>.")[0]) not in inlined_overloads]
    assert helpers == []
