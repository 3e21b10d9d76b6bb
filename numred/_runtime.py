"""Running the kernels: the threading layer and parallel launches, made safe for a library.

- ``load_tbb``: numred runs its parallel kernels on Numba's TBB threading layer, which Numba's
  default setting prefers whenever it can load the TBB library. pip's ``tbb`` wheel (a dependency on
  the platforms it exists for) installs ``libtbb.so.12`` into the environment's ``lib/``, which the
  loader does not search; loading it here, before Numba starts its threads, lets Numba find it. TBB
  matters for three reasons (docs/architecture.md, "Execution model"): its calling thread works on
  the tasks too and other threads only take what they find left, so a launch on a machine whose
  cores are busy never waits for a thread the OS has not scheduled (a launch that gives each thread
  a fixed share, as OpenMP's does, waits a time slice for it); a call from any Python thread runs
  at the main thread's speed; and it is safe after ``fork`` and under concurrent launches. A layer
  the user chose (``NUMBA_THREADING_LAYER``) is kept.
- ``run``: a kernel of parts (``numred.kernels.jit.Kernel``) called serially, all its parts
  ``(0, 1)`` in the calling thread, or launched: ``LAUNCH`` hands the parts to the threading layer's
  own ``parallel_for``, which calls the kernel on each through the address of its compiled C entry
  point (``kernel_address``), so the kernel's code is not compiled again into a parallel variant,
  and no ``prange`` loop is compiled either: the launcher compiles in about a tenth of a second per
  argument types, and releases the GIL, so other Python threads run while a launch computes. Same
  tasks, same order, the same bits either way. A serial-only kernel (a plain dispatcher) is called
  as it is.
- Under TBB and OpenMP any number of threads launch at once, with no lock. Numba's workqueue layer
  aborts the process on concurrent launches: there a thread that finds a launch running computes
  its call serially in its own thread instead of waiting.
  After ``fork``, a child of a parent that launched on OpenMP (GNU libgomp is not fork-safe) calls
  its kernels serially; TBB children keep launching in parallel.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import sys
import threading

import numba
from llvmlite import ir
from numba import types
from numba._dispatcher import compute_fingerprint
from numba.core import cgutils
from numba.extending import intrinsic

from .kernels.base import borrowed_array
from .kernels.jit import Kernel, entry


def load_tbb() -> str | None:
    """Load pip's ``libtbb.so.12`` (the ``tbb`` distribution) into the process, globally, so that
    Numba's TBB layer finds it by name; return its path, or None where there is none to load (no
    wheel for the platform, not installed, or not Linux). Numba itself only asks the loader, whose
    search path does not include the environment's ``lib/``."""
    if not sys.platform.startswith("linux"):
        return None
    candidates = []
    try:
        distribution = importlib.metadata.distribution("tbb")
        candidates += [str(distribution.locate_file(f)) for f in distribution.files or ()
                       if str(f).endswith("libtbb.so.12")]
    except importlib.metadata.PackageNotFoundError:
        pass
    candidates.append(os.path.join(sys.prefix, "lib", "libtbb.so.12"))
    for path in candidates:
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            return os.path.realpath(path)
    return None


TBB_LIBRARY = load_tbb()

# ---------------------------------------------------------------------------------------------
# parallel launches
# ---------------------------------------------------------------------------------------------
from numba.np.ufunc import parallel as _numba_parallel


def get_num_threads() -> int:
    """``numba.get_num_threads()`` without its per-call lock once Numba's threads are up. Numba's
    function takes a multiprocessing lock on every call, costly right after a parallel kernel has
    streamed its data through the caches; the threading layer's own query (an internal name,
    checked here) is much cheaper. Some plans depend on the thread count, so repeated calls ask for it."""
    if getattr(_numba_parallel, "_is_initialized", False):
        query = getattr(_numba_parallel, "_get_num_threads", None)
        if query is not None:
            threads = query()
            if threads > 0:
                return threads
    return numba.get_num_threads()


# ---------------------------------------------------------------------------------------------
# kernels of tasks, and their launches on threads
# ---------------------------------------------------------------------------------------------
_BYTES = ir.IntType(8).as_pointer()
_I64 = ir.IntType(64)


def _parts_on_threads(returns):
    """An intrinsic ``parts_on_threads(address, parts, args)``: the kernel at ``address`` (its C
    entry point, kernel_address) called as ``kernel(part, parts, *args)`` for every part, on Numba's
    threads, through the threading layer's own ``parallel_for`` (the function a ``prange`` loop ends
    in, ``numba_parallel_for``). The body it runs on each range of parts is a small LLVM function
    made here, which reads the address, the part count and the arguments from a record on the
    caller's stack; with ``returns`` == types.boolean it stores each part's answer and returns
    whether every part returned True. Neither the kernel's code nor a ``prange`` loop is compiled
    into the launcher: a ``prange`` launcher went through Numba's parallel-loop passes, about three
    times the compile time of this one (docs/performance.md)."""

    @intrinsic
    def parts_on_threads(typingctx, address, parts, args):
        def codegen(context, builder, signature, values):
            address, parts, packed = values
            _numba_parallel._launch_threads()  # (registers the threading layer's symbols)
            flag = ir.IntType(8)
            record_type = ir.LiteralStructType([_I64, _I64, context.get_value_type(args), flag.as_pointer()])
            record = cgutils.alloca_once(builder, record_type)
            flags = (builder.alloca(flag, size=parts) if returns == types.boolean
                     else ir.Constant(flag.as_pointer(), None))
            for field, value in enumerate((address, parts, packed, flags)):
                builder.store(value, cgutils.gep_inbounds(builder, record, 0, field))
            record_bytes = builder.bitcast(record, _BYTES)
            body = _parts_body(context, builder.module, record_type, args, returns)
            # parallel_for(body, args, dims, steps, data, inner_ndim, array_count, num_threads): one
            # "array" whose step is 1 byte from the record's address, so that each range's pointer
            # says where the range starts; it is never read
            parallel_for = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [_BYTES] * 5 + [_I64] * 3), "numba_parallel_for")
            start = cgutils.alloca_once_value(builder, record_bytes)
            dims = cgutils.alloca_once_value(builder, parts)
            steps = cgutils.alloca_once_value(builder, ir.Constant(_I64, 1))
            # the calling thread's own thread count, as a prange passes it: the layer sizes its pool
            # for the launch by it and gives it to every thread that joins (any other count would
            # become theirs, and the caller's, for later launches)
            get_num_threads = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(32), []), "get_num_threads")
            threads = builder.sext(builder.call(get_num_threads, []), _I64)
            builder.call(parallel_for, [builder.bitcast(body, _BYTES), builder.bitcast(start, _BYTES),
                                        builder.bitcast(dims, _BYTES), builder.bitcast(steps, _BYTES),
                                        record_bytes, ir.Constant(_I64, 0), ir.Constant(_I64, 1), threads])
            if returns != types.boolean:
                return context.get_dummy_value()
            decided = cgutils.alloca_once_value(builder, cgutils.true_bit)
            with cgutils.for_range(builder, parts) as loop:
                answer = builder.icmp_unsigned("!=", builder.load(builder.gep(flags, [loop.index])), flag(0))
                builder.store(builder.and_(builder.load(decided), answer), decided)
            return builder.load(decided)

        return returns(types.int64, types.int64, args), codegen

    return parts_on_threads


def _parts_body(context, module, record_type, args, returns):
    """The LLVM function ``body(starts, dims, steps, record)`` that parallel_for runs on a range of
    ``dims[0]`` parts from ``starts[0] - record``: the kernel (the record's address) called on each,
    its answer stored where ``returns`` is types.boolean."""
    argument_types = [types.int64, types.int64, *args.types]
    kernel_type = ir.FunctionType(context.get_value_type(returns),
                                  [context.get_value_type(t) for t in argument_types])
    body = ir.Function(module, ir.FunctionType(ir.VoidType(), [_BYTES.as_pointer(), _I64.as_pointer(),
                                                               _I64.as_pointer(), _BYTES]),
                       name=module.get_unique_name("numred_parts"))
    body.linkage = "internal"
    builder = ir.IRBuilder(body.append_basic_block())
    starts, dims, _, record_bytes = body.args
    record = builder.bitcast(record_bytes, record_type.as_pointer())
    first = builder.sub(builder.ptrtoint(builder.load(starts), _I64), builder.ptrtoint(record_bytes, _I64))
    field = [builder.load(cgutils.gep_inbounds(builder, record, 0, i)) for i in range(4)]
    kernel = builder.inttoptr(field[0], kernel_type.as_pointer())
    values = [builder.extract_value(field[2], i) for i in range(len(args.types))]
    for i, numba_type in enumerate(args.types):
        # Arrays handed on borrowed, without their memory's reference count (as kernels.base._borrowed
        # does): the caller holds them until the launch returns, and Numba increments and decrements
        # the count of an array around every call it is passed to. Those counts are atomic: threads
        # that pass the same result array to a helper per row fight over its cache line (products over
        # 1000x1000 rows took 1.2x the time of a launch that passed the arrays borrowed).
        if isinstance(numba_type, types.Array):
            values[i] = borrowed_array(context, builder, numba_type, values[i])
    with cgutils.for_range(builder, builder.load(dims)) as loop:
        part = builder.add(first, loop.index)
        answer = builder.call(kernel, [part, field[1], *values])
        if returns == types.boolean:
            builder.store(builder.zext(answer, ir.IntType(8)), builder.gep(field[3], [part]))
    builder.ret_void()
    return body


_parts_none = _parts_on_threads(types.none)
_parts_boolean = _parts_on_threads(types.boolean)


def _launch(address, parts, *args):
    """The ``parts`` parts of a kernel's tasks on Numba's threads: the calling thread and the others
    take parts as they come (TBB), and each part is the same tasks whichever thread computes it."""
    _parts_none(address, parts, args)


def _launch_all(address, parts, *args):
    """_launch for the kernels that return whether all their outputs were decided: all of them."""
    return _parts_boolean(address, parts, args)


_ADDRESSES = {}  # {(dispatcher, argument fingerprints): (C entry point, returns a boolean)}
_INT64 = (-(1 << 63), 1 << 63)


def kernel_address(dispatcher, args) -> tuple[int, bool]:
    """The C entry point of ``dispatcher`` compiled for ``(part, parts, *args)`` (loaded from the disk
    cache or compiled on first use) and whether it returns a boolean. Looked up by the arguments'
    type fingerprints (Numba's own, C-fast); a Python int's also says whether it is an int64, as its
    Numba type does."""
    key = (dispatcher, *(compute_fingerprint(a) if type(a) is not int else _INT64[0] <= a < _INT64[1]
                         for a in args))
    found = _ADDRESSES.get(key)
    if found is None:
        # the threading layer starts before a launcher is compiled or loaded from the disk cache:
        # its code calls the layer's parallel_for, a symbol the layer registers when it starts
        _numba_parallel._launch_threads()
        signature = (types.int64, types.int64, *(numba.typeof(a) for a in args))
        dispatcher.compile(signature)
        compiled = dispatcher.overloads[signature]
        address = compiled.library.get_pointer_to_function(compiled.fndesc.llvm_cfunc_wrapper_name)
        found = _ADDRESSES[key] = (address, compiled.signature.return_type == types.boolean)
    return found


def _launched(dispatcher, *args):
    """``dispatcher``'s kernel of parts launched on Numba's threads, one part per thread."""
    address, returns = kernel_address(dispatcher, args)
    return (LAUNCH_ALL if returns else LAUNCH)(address, get_num_threads(), *args)


@functools.lru_cache(maxsize=None)
def _ways(kernel: Kernel) -> tuple:
    """A Kernel's two ways to run, as run_either takes them: all its parts in the calling thread, or
    launched."""
    return functools.partial(kernel.dispatcher, 0, 1), functools.partial(_launched, kernel.dispatcher)


# Launches of the workqueue layer must not overlap (it aborts the process); the layer is known only
# after Numba's first launch, so until then launches take this lock, without waiting for it.
_workqueue_lock = threading.Lock()
_concurrent_launches = False  # True once the layer is known to allow them (TBB, OpenMP)
_parallel_allowed = True
_parallel_used = False


def run(kernel, want_parallel: bool, *args):
    """Call ``kernel`` on ``args``: a serial-only kernel (a dispatcher) as it is; a Kernel launched on
    threads when wanted and possible, else all its parts serially (run_either)."""
    if type(kernel) is not Kernel:
        return kernel(*args)
    return run_either(_ways(kernel), want_parallel, *args)


def run_either(ways, want_parallel: bool, *args):
    """Call ``ways = (serial, parallel)`` in parallel when wanted and possible, else serially (same
    tasks, same order, same result). No thread ever waits for another's launch: where the threading
    layer does not allow concurrent launches (workqueue), a thread that finds one running computes its
    own call serially."""
    global _parallel_used, _concurrent_launches
    serial, parallel = ways
    if not (want_parallel and _parallel_allowed):
        return serial(*args)
    if _concurrent_launches:
        return parallel(*args)
    if not _workqueue_lock.acquire(blocking=False):
        return serial(*args)
    try:
        _parallel_used = True
        result = parallel(*args)
        _concurrent_launches = numba.threading_layer() in ("tbb", "omp")
        return result
    finally:
        _workqueue_lock.release()


def _after_fork_in_child() -> None:
    global _workqueue_lock, _parallel_allowed
    _workqueue_lock = threading.Lock()  # the parent's may have been held by a thread that is gone
    if _parallel_used:
        try:
            layer = numba.threading_layer()
        except ValueError:  # never launched
            layer = None
        if layer != "tbb":  # only TBB survives fork (Numba docs); GNU OpenMP aborts the child
            _parallel_allowed = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


LAUNCH = entry(_launch, nogil=True)
LAUNCH_ALL = entry(_launch_all, nogil=True)
