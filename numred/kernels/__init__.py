"""numred's kernel engine: small kernels, each compiled on its first use.

A kernel is built by a factory for one (layout family, operator term, accumulator) with these as
compile-time constants, so that Numba compiles only the code that combination runs; its dtype
specialisation comes from the argument types (element decoding and result stores are intrinsics,
other helpers subroutines chosen per type: ``jit.subroutine_by_type``). Kernels validate nothing: the front end and the plan hand them a consistent
"kept x reduced" description of the input (``base``).

Layout families, one module each:

- ``serial``: every reduction below the parallel threshold (``_plan.PARALLEL_MIN_ELEMENTS``), any
  geometry, in one call that also finishes and stores the results;
- ``rows``: each output one run (or one strided column), one kernel per variant;
- ``tiles``: a leading reduced axis over contiguous kept elements, narrow tiles included;
- ``blocks``: one kept axis between two reduced ones (RKR);
- ``general``: the strided walker for every other geometry, with chunks of long reduced ranges;
- ``products``: ReduceProd's walker over any geometry (mantissa and exponent partials);
- ``table`` names the parallel ones the drivers launch.

Their pieces: ``base`` (views, the walk over a geometry, terms), ``decode`` (elements to float64),
``exp``, ``split_sums`` (nearly exact float64 sums), ``runs`` (one run's term sum), ``columns``
(rows of a tile into per-column accumulators), ``reading`` (memory streams, tuned per CPU),
``integers`` (exact and wrapping integer sums), ``maxima`` (float keys), ``store`` (the one rounding
to the output dtype), ``states`` (the partial state of each accumulator and the one rule that
combines two of them, used wherever partial results meet) and ``finish`` (chunk partials combined).
``jit`` compiles and caches them (``entry``, ``Kernel``); how a kernel runs, on the calling thread or
launched on Numba's threads, is ``numred._runtime``'s business, above this package.
"""
from __future__ import annotations

import importlib

MODULES = ("base", "decode", "exp", "store", "reading", "split_sums", "runs", "columns", "integers", "maxima",
           "states", "general", "rows", "tiles", "blocks", "products", "finish", "table", "serial")


def modules() -> list:
    """The kernel modules, imported: for the tests that check every function of them."""
    return [importlib.import_module(f"{__name__}.{name}") for name in MODULES]


def catalogue() -> dict:
    """Every kernel numred calls from Python: {name: dispatcher}. Kernels made on first use are made
    here (not compiled): for precompile, the tests' cache-miss counts and their check that no two
    share a compiled name."""
    from numba.core.registry import CPUDispatcher

    from . import finish, table
    from .jit import Kernel

    kernels = {name: kernel.dispatcher for name, kernel in table.KERNELS.items()}
    for name, factory in table.FACTORIES.items():  # the kernels made on first use: every one a call can name
        for arguments in factory.arguments:
            kernel = factory.make(*arguments)
            kernels[" ".join(map(str, (name, *arguments)))] = kernel.dispatcher if type(kernel) is Kernel else kernel
    # the serial finishing steps called from Python (finish_*, all_finite_above)
    kernels.update({name: d for name, d in vars(finish).items() if isinstance(d, CPUDispatcher)
                    and d.py_func.__module__ == finish.__name__ and not name.startswith("_")})
    return kernels
