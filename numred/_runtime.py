"""Process-level safety around Numba: the threading layer, disk caching, parallel launches.

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
- ``entry``: ``njit(cache=True)`` for the functions Python calls, cached on disk; the launchers
  release the GIL, so other Python threads run while a launch computes. When neither the
  package's ``__pycache__`` nor the user cache directory is writable, numred's own functions fall
  back to a private per-user directory under the system temp directory, and with no writable
  place at all they are compiled in memory: never an error at import. Their cache entries are
  stamped with a hash of all kernel modules (``package_source_stamp``), not only their own. Saving
  a compiled kernel to the cache holds an inter-process file lock, so that processes doing their
  first calls at once cannot corrupt each other's cache index (numba#4807, #10128).
- ``CompileNotice``: the first kernel compiled in a process says so once, through the ``numred``
  logger (silent unless the application shows INFO records): a first call that compiles takes
  seconds, where later ones take microseconds.
- ``Kernel``, ``LAUNCH``: each kernel is compiled once, as a serial function of ``(part, parts,
  ...)`` over a task list fixed by the input's shape. A serial call computes every part, ``(0,
  1)``; a parallel launch runs ``LAUNCH``, a ``prange`` over the parts that calls the kernel in
  each through the address of its compiled C entry point (``kernel_address``), so the kernel's
  code is not compiled again into a parallel variant: the launcher compiles in a fraction of a
  second per argument types. Same tasks, same order, the same bits either way.
- ``run``: a launch, or a serial call. Under TBB and OpenMP any number of threads launch at once,
  with no lock. Numba's workqueue layer aborts the process on concurrent launches: there a thread
  that finds a launch running computes its call serially in its own thread instead of waiting.
  After ``fork``, a child of a parent that launched on OpenMP (GNU libgomp is not fork-safe) calls
  its kernels serially; TBB children keep launching in parallel.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import importlib.metadata
import logging
import os
import stat
import sys
import tempfile
import threading
from types import FunctionType
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba._dispatcher import compute_fingerprint
from numba.core import event
from numba.extending import intrinsic

try:
    import fcntl
except ImportError:  # not POSIX: cache saves go without the inter-process lock
    fcntl = None


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

class CompileNotice(event.Listener):
    """Logs, once per process, that numred compiles kernels: at the first compile of a numred function
    (Numba's "numba:compile" event, which a load from the disk cache does not raise)."""

    MESSAGE = ("compiling numred's kernels for a first call of this kind: seconds now, microseconds on "
               "later calls; they are cached on disk, and `python -m numred precompile` compiles them all "
               "ahead of time")

    def __init__(self):
        self.said = False

    def on_start(self, ev):
        dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not self.said and module.split(".")[0] == "numred":
            self.said = True
            logging.getLogger("numred").info(self.MESSAGE)

    def on_end(self, ev):
        pass


COMPILE_NOTICE = CompileNotice()
event.register("numba:compile", COMPILE_NOTICE)
logging.getLogger("numred").addHandler(logging.NullHandler())  # (a library's logger: silent by default)

_PRIVATE_ROOT = os.path.join(tempfile.gettempdir(), f"numred-{os.getuid() if hasattr(os, 'getuid') else 0}")


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# what numred's compiled code comes from: the kernel modules and this one (entry, renamed_copy)
_SOURCES = sorted([*glob.glob(os.path.join(_PACKAGE_DIR, "kernels", "*.py")), os.path.abspath(__file__)])


def package_source_stamp() -> bytes:
    """A hash of the kernels' source files, the stamp of numred's entries in Numba's disk cache.
    Numba stamps a cached function with its own source file only, but a kernel compiles the helpers
    of other modules into itself: after a helper changed, kernels loaded from the cache ran the old
    one (an exact-sum helper changed in ``kernels.integers``, and the cached serial kernels kept
    dividing by the count). With this stamp, any change to a kernel module invalidates them all."""
    stats = []
    for path in _SOURCES:
        info = os.stat(path)
        stats.append((path, info.st_mtime_ns, info.st_size))
    return _hash_of(tuple(stats))


@functools.lru_cache(maxsize=4)
def _hash_of(stats) -> bytes:
    # keyed by every file's mtime and size, as Numba's own source hash: a file that changes while
    # the process runs is hashed again
    digest = hashlib.sha256()
    for path, _, _ in stats:
        digest.update(os.path.relpath(path, _PACKAGE_DIR).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.digest()


class _WholePackageStamp:
    """Mixin for Numba's cache locators: numred's functions only, stamped with package_source_stamp."""

    def get_source_stamp(self):
        try:
            return package_source_stamp()
        except OSError:  # sources not on disk (a zip or frozen install): Numba's own stamp
            return super().get_source_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):
        if not py_func.__module__.startswith("numred."):
            return None
        return super().from_function(py_func, py_file)


def _install_cache_locators() -> None:
    """Put numred's cache locators first in Numba's list (an internal API: skipped if it moved): the
    ones Numba would choose, with package_source_stamp, then the last-resort private directory."""
    try:
        from numba.core import caching

        base = (caching._SourceFileBackedLocatorMixin, caching._CacheLocator)
        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in Numba 0.62
        locators = impl._locator_classes
        standard = [getattr(caching, name, None) or getattr(caching, "_" + name)
                    for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")]
    except AttributeError:
        return

    class PrivateTempLocator(_WholePackageStamp, *base):
        """In a directory this user owns and nobody else can write (cache files are pickles: a
        directory others can write would let them run code here)."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(_PRIVATE_ROOT, "cache", self.get_suitable_cache_subpath(py_file))

        def get_cache_path(self):
            return self._cache_path

        def ensure_cache_path(self):
            _ensure_private_dir(_PRIVATE_ROOT)
            super().ensure_cache_path()

    if any(getattr(c, "__module__", None) == __name__ for c in locators):
        return  # (installed already: this module was imported again)
    stamped = [type(f"Numred{c.__name__.lstrip('_')}", (_WholePackageStamp, c), {"__module__": __name__})
               for c in standard]
    locators[:0] = stamped
    locators.append(PrivateTempLocator)


def _ensure_private_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if hasattr(os, "getuid") and (
        not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022
    ):
        raise OSError(f"{path} is not a private directory of this user")


_install_cache_locators()


def renamed_copy(fn, suffix: str):
    """A copy of the Python function ``fn`` (same code, globals and closure) whose qualified name ends
    in ``suffix``: Numba names compiled code and cache files after it."""
    fn_copy = FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    fn_copy.__qualname__ = fn.__qualname__ + suffix
    return fn_copy


def entry(fn=None, *, parallel: bool = False, name: str | None = None, **options):
    """``njit(cache=True)`` for a function called from Python; usable as ``@entry`` or ``entry(fn, ...)``.

    ``name`` replaces the ``__qualname__`` of a closure that one factory makes in several variants.
    Numba names a compiled function's symbol after its qualname, its argument types and a counter
    that starts afresh in every process, so two such variants compiled in different processes can
    get the same symbol. A process that then loads both from the disk cache runs one body for both
    (numba#10486). Seen here: after a log-sum-exp call, float means of 3x2x2 returned the
    log-sum-exp's -inf, with a cache filled by several test processes."""
    if fn is None:
        return lambda f: entry(f, parallel=parallel, name=name, **options)
    options.setdefault("fastmath", False)  # stated, as for every function in numred.kernels
    # The launchers (an input of _compute.THREADED_MIN_ELEMENTS or more) release the GIL: other
    # Python threads run while a launch computes. A kernel called from Python, on a small input, keeps
    # it: its work takes about as long as handing the GIL to another thread and back, so releasing it
    # slowed threads that call small inputs (docs/performance.md, "Busy machines and threads").
    options.setdefault("nogil", parallel)
    if name is not None:
        fn.__qualname__ = name
    try:
        dispatcher = njit(fn, cache=True, parallel=parallel, **options)
    except RuntimeError:  # "no locator available": nothing writable anywhere, compile in memory
        return njit(fn, parallel=parallel, **options)
    if _LockedSaveCache is not None and type(getattr(dispatcher, "_cache", None)) is _LockedSaveCache.__base__:
        dispatcher._cache = _LockedSaveCache(dispatcher.py_func)
    return dispatcher


def _locked_save_cache_class():
    """A FunctionCache whose saves hold an exclusive lock on a file next to the cache files.

    Numba saves an entry by reading the function's index, picking the first free data-file number and
    writing both; two processes compiling different signatures at once can pick the same number, and
    then an index names another signature's machine code. Serialised saves cannot. Loads need no lock:
    files are replaced atomically and an entry's data file is written only under its own key.
    """
    try:
        from numba.core.caching import FunctionCache
    except ImportError:
        return None
    if fcntl is None:
        return None

    class LockedSaveCache(FunctionCache):
        def save_overload(self, sig, data):
            try:
                lock_file = open(os.path.join(self.cache_path, "numred-save.lock"), "a")
            except OSError:  # the directory went away or read-only: Numba's own save handles that
                return super().save_overload(sig, data)
            with lock_file:
                fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes
                return super().save_overload(sig, data)

    return LockedSaveCache


_LockedSaveCache = _locked_save_cache_class()


# ---------------------------------------------------------------------------------------------
# parallel launches
# ---------------------------------------------------------------------------------------------
try:
    from numba.np.ufunc import parallel as _numba_parallel
except ImportError:  # moved: numba.get_num_threads() alone
    _numba_parallel = None


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
def _call_part(returns):
    """An intrinsic ``call(address, part, parts, args)``: the compiled function at ``address`` (a
    kernel's C entry point, kernel_address), called as ``kernel(part, parts, *args)``; it returns
    what the kernel returns, ``returns`` (types.none or types.boolean). The call goes through the
    address, so the launcher's code does not contain the kernel's: it is compiled once per argument
    types, in a fraction of a second, where linking the kernel in costs its whole optimisation
    again."""

    @intrinsic
    def call(typingctx, address, part, parts, args):
        def codegen(context, builder, signature, values):
            argument_types = [types.int64, types.int64, *args.types]
            function_type = ir.FunctionType(context.get_value_type(returns),
                                            [context.get_value_type(t) for t in argument_types])
            function = builder.inttoptr(values[0], function_type.as_pointer())
            returned = builder.call(function, [values[1], values[2], *(builder.extract_value(values[3], i)
                                                                       for i in range(len(args.types)))])
            return returned if returns == types.boolean else context.get_dummy_value()

        return returns(types.int64, types.int64, types.int64, args), codegen

    return call


_call_part_none = _call_part(types.none)
_call_part_boolean = _call_part(types.boolean)


def _launch(address, parts, *args):
    """The ``parts`` parts of a kernel's tasks on Numba's threads: the calling thread and the others
    take parts as they come (TBB), and each part is the same tasks whichever thread computes it."""
    for part in prange(parts):
        _call_part_none(address, np.int64(part), parts, args)


def _launch_all(address, parts, *args):
    """_launch for the kernels that return whether all their outputs were decided: all of them."""
    decided = np.empty(parts, dtype=np.bool_)
    for part in prange(parts):
        decided[part] = _call_part_boolean(address, np.int64(part), parts, args)
    return decided.all()


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
        signature = (types.int64, types.int64, *(numba.typeof(a) for a in args))
        dispatcher.compile(signature)
        compiled = dispatcher.overloads[signature]
        address = compiled.library.get_pointer_to_function(compiled.fndesc.llvm_cfunc_wrapper_name)
        found = _ADDRESSES[key] = (address, compiled.signature.return_type == types.boolean)
    return found


class Kernel(NamedTuple):
    """A kernel compiled once, as one serial function of ``(part, parts, *args)`` that computes part
    ``part`` of ``parts`` of its tasks, and its two ways to run: ``serial`` (all tasks in the calling
    thread) and ``parallel`` (launch). The tasks are fixed by the input's shape, never by the parts or
    the threads, so both give the same bits."""

    dispatcher: object

    def serial(self, *args):
        return self.dispatcher(0, 1, *args)

    def parallel(self, *args):
        address, returns = kernel_address(self.dispatcher, args)
        return (LAUNCH_ALL if returns else LAUNCH)(address, get_num_threads(), *args)

    def __iter__(self):  # (serial, parallel), as run() takes them
        return iter((self.serial, self.parallel))


# Launches of the workqueue layer must not overlap (it aborts the process); the layer is known only
# after Numba's first launch, so until then launches take this lock, without waiting for it.
_workqueue_lock = threading.Lock()
_concurrent_launches = False  # True once the layer is known to allow them (TBB, OpenMP)
_parallel_allowed = True
_parallel_used = False


def run(kernels, want_parallel: bool, *args):
    """Call ``kernels = (serial, parallel)`` (a Kernel, or a serial function and None) in parallel
    when wanted and possible, else serially (same tasks, same order, same result). No thread ever
    waits for another's launch: where the threading layer does not allow concurrent launches
    (workqueue), a thread that finds one running computes its own call serially."""
    global _parallel_used, _concurrent_launches
    serial, parallel = kernels
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


LAUNCH = entry(_launch, parallel=True)
LAUNCH_ALL = entry(_launch_all, parallel=True)
