"""numred's kernel engine: small kernels, each compiled on its first use.

A kernel is built by a factory for one (layout family, operator term, accumulator) with these as
compile-time constants, so that Numba compiles only the code that combination runs; its dtype
specialisation comes from the argument types (element decoding and result stores are overloads
chosen per type). Families:

- ``serial``: every reduction below the parallel threshold (``_plan.PARALLEL_MIN_ELEMENTS``), any
  geometry, in one call that also finishes and stores the results.

``states`` holds the partial state of each accumulator and the one rule that combines two of them,
used wherever partial results meet.

The parallel layout families (rows, columns, tiles, narrow tiles, blocks, the general strided walker
with chunks) are still the kernels of ``numred._kernels``.
"""
from __future__ import annotations

def catalogue() -> dict:
    """Every kernel numred calls from Python: {name: dispatcher}, the serial and the parallel variant of
    each under names of their own. Kernels made on first use are made here (not compiled): for
    precompile, the tests' cache-miss counts and their check that no two share a compiled name."""
    from numba.core.registry import CPUDispatcher

    from .. import _kernels as K
    from . import serial

    kernels = {}
    pairs = dict(K.KERNELS)
    pairs.update({f"float_rows {mode} {variant}": K.float_rows(mode, variant)
                  for mode in (K.SUM, K.SUM_SQUARES) for variant in range(K.ROWS_GENERAL + 1)})
    pairs.update({f"int_rows {squares} {four}": K.int_rows(squares, four) for squares in (0, 1) for four in (0, 1)})
    for name, (serial_variant, parallel_variant) in pairs.items():
        kernels[name] = serial_variant
        kernels[name + " parallel"] = parallel_variant
    for term in (serial.SUM, serial.SQUARES):
        for float64 in (False, True):
            kernels[f"serial float_sums {term} {float64}"] = serial.float_sums(term, float64)
    for flag in (False, True):
        kernels[f"serial int_sums {flag}"] = serial.int_sums(flag)
        kernels[f"serial float_log_sum_exp {flag}"] = serial.float_log_sum_exp(flag)
    kernels["serial int_log_sum_exp"] = serial.int_log_sum_exp()
    # the serial finishing steps called from Python (finish_*, all_finite)
    kernels.update({name: d for name, d in vars(K).items()
                    if isinstance(d, CPUDispatcher) and name.startswith(("finish_", "all_finite"))})
    return kernels
