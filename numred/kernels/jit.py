"""How numred's kernels are compiled: ``njit`` with Numba's disk cache, made safe for a library.

- ``entry``: ``njit(cache=True)`` for the functions Python calls, cached on disk. When neither the
  package's ``__pycache__`` nor the user cache directory is writable, numred's own functions fall
  back to a private per-user directory under the system temp directory, and with no writable place
  at all they are compiled in memory: never an error at import. Their cache entries are stamped with
  a hash of all kernel modules and the launcher's (``package_source_stamp``), not only their own.
  Saving a compiled kernel to the cache holds an inter-process file lock, so that processes doing
  their first calls at once cannot corrupt each other's cache index (numba#4807, #10128).
- ``CompileNotice``: the first kernel compiled in a process says so once, through the ``numred``
  logger (silent unless the application shows INFO records): a first call that compiles takes
  seconds, where later ones take microseconds.
- ``subroutine`` and ``subroutine_by_type``: a helper (or a helper chosen by the argument types, as
  with Numba's ``overload``) compiled into the kernels that call it, with its own fastmath flags, not
  as a function Numba's dispatcher compiles on its own (with a Python wrapper and machine code of
  its own, 20-40 ms of every first call that uses it).
- ``Kernel``: a kernel of parts, one serial function of ``(part, parts, ...)`` over a task list fixed
  by the input's shape. How it runs, serially or launched on threads, is ``numred._runtime.run``'s
  business: the kernels know nothing of threads.

This module imports nothing of numred: the kernels stand on it, and the launcher
(``numred._runtime``) above them.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import logging
import os
import stat
import tempfile
from types import FunctionType
from typing import NamedTuple

from numba import njit
from numba.core import event
from numba.extending import intrinsic

try:
    import fcntl
except ImportError:  # not POSIX: cache saves go without the inter-process lock
    fcntl = None


# the package whose functions this module compiles and stamps: "numred" (a renamed copy, imported
# into the same process to compare versions, has its own name, and stamps its own functions only)
_PACKAGE = __name__.split(".")[0]


class Kernel(NamedTuple):
    """A kernel compiled once, as one serial function of ``(part, parts, *args)`` that computes part
    ``part`` of ``parts`` of its tasks. The tasks are fixed by the input's shape, never by the parts or
    the threads, so every way of running it (numred._runtime.run) gives the same bits."""

    dispatcher: object


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
        if not self.said and module.split(".")[0] == _PACKAGE:
            self.said = True
            logging.getLogger("numred").info(self.MESSAGE)

    def on_end(self, ev):
        pass


COMPILE_NOTICE = CompileNotice()
event.register("numba:compile", COMPILE_NOTICE)
logging.getLogger("numred").addHandler(logging.NullHandler())  # (a library's logger: silent by default)

_PRIVATE_ROOT = os.path.join(tempfile.gettempdir(), f"numred-{os.getuid() if hasattr(os, 'getuid') else 0}")


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what numred's compiled code comes from: the kernel modules (this one among them) and the launcher's
# (numred._runtime)
_SOURCES = sorted([*glob.glob(os.path.join(_PACKAGE_DIR, "kernels", "*.py")),
                   os.path.join(_PACKAGE_DIR, "_runtime.py")])


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
        if not py_func.__module__.startswith(_PACKAGE + "."):  # (another package, or another copy of numred)
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


def entry(fn=None, *, name: str | None = None, **options):
    """``njit(cache=True)`` for a function called from Python; usable as ``@entry`` or ``entry(fn, ...)``.

    ``name`` replaces the ``__qualname__`` of a closure that one factory makes in several variants.
    Numba names a compiled function's symbol after its qualname, its argument types and a counter
    that starts afresh in every process, so two such variants compiled in different processes can
    get the same symbol. A process that then loads both from the disk cache runs one body for both
    (numba#10486). Seen here: after a log-sum-exp call, float means of 3x2x2 returned the
    log-sum-exp's -inf, with a cache filled by several test processes."""
    if fn is None:
        return lambda f: entry(f, name=name, **options)
    options.setdefault("fastmath", False)  # stated, as for every function in numred.kernels
    # Only the launchers (an input of _compute.THREADED_MIN_ELEMENTS or more) release the GIL
    # (nogil=True): other Python threads run while a launch computes. A kernel called from Python, on
    # a small input, keeps it: its work takes about as long as handing the GIL to another thread and
    # back, so releasing it slowed threads that call small inputs (docs/performance.md, "Busy
    # machines and threads").
    options.setdefault("nogil", False)
    if name is not None:
        fn.__qualname__ = name
    try:
        dispatcher = njit(fn, cache=True, **options)
    except RuntimeError:  # "no locator available": nothing writable anywhere, compile in memory
        return njit(fn, **options)
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


def subroutine(fastmath):
    """A kernel helper compiled as a subroutine of its callers: typed and lowered by Numba as an njit
    function is, with its own fastmath flags (so that error-free transformations called from
    FASTMATH loops keep their exact arithmetic), once per process and argument types, and linked
    into the caller's code, which LLVM then inlines as it inlines an njit helper. An njit helper is
    compiled by its dispatcher as a function of its own, with a Python wrapper and machine code that
    no caller runs: 30-40 ms of each first call that uses it, however small it is. A subroutine is
    callable from jitted code only; its Python function is ``py_func``, and ``inspect_llvm()`` gives
    the LLVM IR of each compiled signature, as a dispatcher's does. Literal arguments stay literal,
    as in a call of an njit function: helpers prune branches on them."""

    def wrap(py_func):
        function = _subroutine(py_func, lambda *arg_types: py_func, fastmath, prefer_literal=True)
        function.py_func = py_func
        return function

    return wrap


def subroutine_by_type(fastmath, prefer_literal=False):
    """A subroutine whose implementation depends on the argument types, as with Numba's ``overload``:
    the decorated function takes the types and returns the implementation, or None where it is not
    defined for them (with ``prefer_literal``, literal types are tried first). An overload's
    implementation is compiled by a dispatcher of its own, as an njit helper is (20-30 ms of each
    first call that uses it)."""

    def wrap(choose):
        return _subroutine(choose, choose, fastmath, prefer_literal)

    return wrap


def _subroutine(named, choose, fastmath, prefer_literal):
    """The intrinsic named as the function ``named``, with its parameters, that compiles
    ``choose(*arg_types)`` for the argument types of its calls as a subroutine of its callers."""
    compiled = {}  # argument types -> Numba's compile result, or None: not defined for them

    def typer(typingctx, *arg_types):
        if arg_types not in compiled:
            implementation = choose(*arg_types)
            compiled[arg_types] = None if implementation is None else _compile_subroutine(
                typingctx, implementation, arg_types, fastmath)
        result = compiled[arg_types]
        if result is None:
            return None

        def codegen(context, builder, signature, args):
            context.active_code_library.add_linking_library(result.library)
            return context.call_internal(builder, result.fndesc, result.signature, args)

        return result.signature, codegen

    # an intrinsic's typer takes its arguments by name: one with the function's parameters
    parameters = ", ".join(named.__code__.co_varnames[:named.__code__.co_argcount])
    namespace = {"typer": typer}
    exec(f"def {named.__name__}(typingctx, {parameters}):\n    return typer(typingctx, {parameters})\n", namespace)
    typed = namespace[named.__name__]
    typed.__module__, typed.__qualname__, typed.__doc__ = named.__module__, named.__qualname__, named.__doc__
    function = intrinsic(prefer_literal=prefer_literal)(typed)
    function.inspect_llvm = lambda: {r.signature: r.library.get_llvm_str() for r in compiled.values() if r}
    return function


def _compile_subroutine(typingctx, py_func, arg_types, fastmath):
    """Numba's compile result for ``py_func`` on ``arg_types``, with the flags an njit function gets by
    default (runtime memory, Python's error model) and ``fastmath``, and no wrapper or machine code."""
    from numba.core import compiler, cpu
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    flags = compiler.Flags()
    flags.nrt = True
    flags.fastmath = cpu.FastMathOptions(fastmath)
    flags.no_compile = True  # (machine code is made for the callers only)
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = True
    library = context.codegen().create_library(py_func.__qualname__)
    return compiler.compile_internal(typingctx, context, library, py_func, arg_types, None, flags, locals={})
