"""numred's kernel engine: small kernels, each compiled on its first use.

A kernel is built by a factory for one (layout family, operator term, accumulator) with these as
compile-time constants, so that Numba compiles only the code that combination runs; its dtype
specialisation comes from the argument types (element decoding and result stores are overloads
chosen per type). Kernels validate nothing: the front end and the plan hand them a consistent
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

    from . import base, finish, rows, serial, table
    from .integers import INT_TERMS

    kernels = {}
    launched = dict(table.KERNELS)
    float_terms = (base.SUM, base.SUM_SQUARES, base.SUM_ABS)
    launched.update({f"float_rows {term} {variant}": rows.float_rows(term, variant)
                     for term in float_terms for variant in rows.FLOAT_ROWS_VARIANTS})
    launched.update({f"float_columns {term}": rows.float_columns(term) for term in float_terms})
    launched.update({f"int_rows {term} {four}": rows.int_rows(term, four)
                     for term in INT_TERMS for four in (False, True)})
    kernels.update({name: kernel.dispatcher for name, kernel in launched.items()})
    # the serial float sums: means and sums (ReduceLogSum's too), sums of squares (ReduceL2's too) and of
    # |x| (ReduceL1)
    for term in (base.SUM, base.SUM_SQUARES, base.SUM_ABS):
        for float64 in (False, True):
            kernels[f"serial float_sums {term} {float64}"] = serial.float_sums(term, float64)
    for term in INT_TERMS:
        kernels[f"serial int_sums {term}"] = serial.int_sums(term)
    for flag in (False, True):
        kernels[f"serial float_log_sum_exp {flag}"] = serial.float_log_sum_exp(flag)
        kernels[f"serial extrema {flag}"] = serial.extrema(flag)
    kernels["serial int_log_sum_exp"] = serial.int_log_sum_exp()
    kernels["serial int_l2"] = serial.int_l2()
    # the serial finishing steps called from Python (finish_*, all_finite_above)
    kernels.update({name: d for name, d in vars(finish).items() if isinstance(d, CPUDispatcher)
                    and d.py_func.__module__ == finish.__name__ and not name.startswith("_")})
    return kernels
