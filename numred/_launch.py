"""Repeated calls whose whole computation is one kernel launch (_compute.kernel_call): the front end
keeps a OneLaunch with the plan of such a call, and the function its repeat_call makes, so that a
repeat of the call runs the kernel's compiled entry point with nothing else around it."""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import types

from ._compute import KernelCall, Reduction, kernel_call
from ._plan import Plan
from ._runtime import LAUNCH, LAUNCH_ALL, get_num_threads, kernel_address, run_either
from .kernels import finish, table
from .kernels.jit import Kernel


class OneLaunch:
    """A whole computation that is one kernel call writing finished results (kernel_call). The front
    end keeps it with the plan for repeated calls, which then skip the driver: its repeat_call is
    the whole call. Where a float64 sum is not finite or an integer log-sum-exp is undecided, the
    front end runs the driver (compute), which retries an overflowing sum rescaled or raises
    Undecided. In parallel
    calls, after a kernel has streamed its data, each Python step of them runs on cold caches, and
    together they are a noticeable share even of a large call; small serial calls are mostly such
    steps.

    The first call of each variant (serial, parallel) goes through Numba's dispatcher, which checks
    the argument types, on the carrier views the kernels are compiled for (read-only input, float16
    and bfloat16 as 16-bit integers). Later calls go straight to the compiled entry point it chose,
    with the input's own 1-D view and a result in the input's dtype: no dispatch by type, no views,
    no read-only flag. That is safe because every later call has the same argument types by
    construction (same dtype, 1-D and C-contiguous, the same argument objects), and the entry point
    reads an array's data, shape and strides without looking at its dtype or flags, so the 16-bit
    floats arrive as the integers they are compiled for. Small calls, where the dispatch is a large
    share of the time, gain most."""

    __slots__ = ("kernel", "parallel", "args", "carrier", "dtype", "keys", "undecided", "finite", "lowest", "calls")

    def __init__(self, call: KernelCall, dtype: np.dtype):
        self.kernel = table.kernel(call.kernel)  # (made here, once: a repeat calls it directly)
        self.parallel, self.args, self.carrier = call.parallel, call.args, call.carrier
        self.keys, self.undecided, self.finite, self.lowest = call.keys, call.undecided, call.finite, call.lowest
        # (KernelCall)
        self.dtype = dtype  # of the input and the results; later calls pass the input's view as src (and keys)
        # what run_either() calls: the first call of a variant, then its entry point
        self.calls = [functools.partial(self._first_call, variant) for variant in (0, 1)]

    def _first_call(self, variant, src, *args):
        src = src.view(self.carrier)
        src.setflags(write=False)
        if self.keys is not None:
            args = (src.view(self.keys), *args[1:])
        typed = (src, *args[:-1], args[-1].view(self.carrier))
        if not isinstance(self.kernel, Kernel):  # a serial-only kernel: a dispatcher
            dispatcher, leading = self.kernel, ()
        else:
            dispatcher, leading = self.kernel.dispatcher, (0, 1)
        if variant == 1:
            address, returns = kernel_address(dispatcher, typed)
            launcher = LAUNCH_ALL if returns else LAUNCH
            returned = launcher(address, get_num_threads(), *typed)
            entry = _entry_point(launcher, (types.int64, types.int64,
                                            types.BaseTuple.from_types(tuple(map(numba.typeof, typed)))))
            if entry is not None:
                self.calls[1] = functools.partial(_launch_at, entry, address)
            return returned
        returned = dispatcher(*leading, *typed)
        entry = _entry_point(dispatcher, tuple(numba.typeof(a) for a in (*leading, *typed)))
        if entry is not None:
            self.calls[0] = functools.partial(entry, *leading) if leading else entry
        return returned

    def repeat_call(self, n_kept: int, out_shape: tuple, threads: int):
        """The whole repeated call as one function of ``data`` (of the geometry this launch was made
        for): the results in ``out_shape``, or None where the driver must decide them (a float64 sum
        that is not finite, an undecided integer log-sum-exp) or where the plan was cut for
        ``threads`` threads and Numba now has another count; the caller then takes the general path.
        It leaves out every step a repeat has no use for: a serial launch calls its variant's entry
        point (calls[0], once its first call has resolved it), a parallel one goes through run_either() for
        its lock and its rule after a fork. That matters for small calls; on large parallel ones
        the kernel's time dominates."""
        calls = self.calls
        parallel_launch = functools.partial(run_either, calls, True) if self.parallel else None
        args, dtype, finite, lowest, undecided = self.args, self.dtype, self.finite, self.lowest, self.undecided
        keyed = self.keys is not None

        def repeat(data):
            if threads and threads != get_num_threads():
                return None
            result = np.empty(out_shape, dtype)
            src, results = data.ravel(), result.ravel()  # (views, cheaper than a reshape of the results after)
            kernel_run = parallel_launch or calls[0]
            returned = kernel_run(src, src, *args, results) if keyed else kernel_run(src, *args, results)
            if undecided and returned is False:
                return None
            if finite:  # the serial float sums return whether they are; other kernels return None
                if returned is None:
                    returned = (lowest < results[0] < math.inf if n_kept == 1
                                else finish.all_finite_above(results, lowest))
                if not returned:
                    return None
            return result

        return repeat


def one_launch(reduction: Reduction, plan: Plan, dtype: np.dtype) -> OneLaunch | None:
    """The OneLaunch of ``reduction`` on ``plan`` for repeated calls, or None where the computation is
    not one kernel call (kernel_call). A float64 mean's results must be finite: an overflowing sum of
    finite values is retried rescaled (compute), so a float64 mean's OneLaunch checks that they
    are and leaves a call whose results are not to the driver."""
    call = kernel_call(reduction, plan, dtype)
    return None if call is None else OneLaunch(call, dtype)


def _entry_point(dispatcher, signature):
    """The compiled entry point of ``dispatcher`` for ``signature`` (Numba internals: without them every
    call keeps going through the dispatcher), or None."""
    try:
        return dispatcher.overloads[signature].entry_point
    except (AttributeError, KeyError):
        return None


def _launch_at(entry, address, *args):
    """A launcher's entry point called for the kernel at ``address`` in as many parts as Numba has
    threads now (the launcher takes its star arguments as one tuple)."""
    return entry(address, get_num_threads(), args)
