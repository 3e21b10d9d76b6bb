"""The kernels by name: KERNELS, {name: Kernel}, and ``kernel``, which also makes the kernels built on
first use from the name of their factory and its arguments. The dispatch (``numred._compute``) names
the kernel of a call as data; it is made here when the call runs.

A Kernel is compiled once, as a serial function of (part, parts, ...) that computes its part of the
tasks (``numred.kernels.jit.Kernel``): called with (0, 1) for inputs below the size where a launch
on threads pays (``numred._compute.threaded``), for a thread that finds a workqueue launch running,
and for forked children of a parent that launched on OpenMP (``numred._runtime``); launched in parts
on Numba's threads otherwise. Same tasks, same order, same bits.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .jit import Kernel, entry
from .base import TERM_NAMES, SUM, SUM_ABS, SUM_SQUARES
from .blocks import _float_blocks_for, _int_blocks_for, float_blocks_log_sum_exp, int_blocks_log_sum_exp
from .general import _float_sums_for, _int_sums_for, _max_keys_for, int_sum_exp
from .integers import INT_TERMS
from .products import _products_for
from . import rows, serial
from .rows import (float_rows_extrema, float_rows_log_sum_exp, int_largest_magnitudes, int_rows_extrema, int_rows_l2,
                   int_rows_log_sum_exp)
from .tiles import _float_tiles_for, _int_tiles_for

# The compensated steps must not be reassociated, so only the inner _float_run carries FASTMATH.
# KERNELS names of the float kernels per term: general layouts, single runs (rows._FLOAT_ROWS_FOR), single
# tiles (_float_tiles_for) and single blocks (_float_blocks_for; log-sum-exps: float_blocks_log_sum_exp)
FLOAT_SUMS = {term: f"float_{name}" for term, name in TERM_NAMES.items()}
# by (term, narrow): narrow tiles (tiles.narrow_tile) or one tile per task
FLOAT_TILES = {(term, narrow): FLOAT_SUMS[term].replace("_sum", "_narrow_tiles_sum" if narrow else "_tiles_sum", 1)
               for term in (SUM, SUM_SQUARES, SUM_ABS) for narrow in (False, True)}
FLOAT_BLOCKS = {term: FLOAT_SUMS[term].replace("_sum", "_blocks_sum", 1) for term in (SUM, SUM_SQUARES, SUM_ABS)}
# the integer kernels by term (``term``: integers.INT_TERMS)
INT_SUMS = {term: f"int_sums_{name}" for term, name in INT_TERMS.items()}  # the general walker
INT_BLOCKS = {term: f"int_blocks_{name}" for term, name in INT_TERMS.items()}
INT_TILES = {term: f"int_tiles_{name}" for term, name in INT_TERMS.items()}
# by (float bits or integer data, tiles of outputs or single outputs)
MAX_KEYS = {(float_bits, tiles): f"max_{'float_keys' if float_bits else 'ints'}{'_tiles' if tiles else ''}"
            for float_bits in (True, False) for tiles in (False, True)}
# ReduceProd by (element kind, tiles): "int", "float" (narrower floats) or "float64"; single runs per
# output or tiles of neighbouring outputs (Plan.tile > 1)
PRODUCTS = {(kind, tiles): f"{kind}_products{'_tiles' if tiles else ''}"
            for kind in ("int", "float", "float64") for tiles in (False, True)}
KERNELS = {
    name: Kernel(entry(fn, name=name))
    for name, fn in [(FLOAT_SUMS[term], _float_sums_for(term)) for term in FLOAT_SUMS]
    + [(name, _float_tiles_for(*mode_narrow)) for mode_narrow, name in FLOAT_TILES.items()]
    + [(FLOAT_BLOCKS[term], _float_blocks_for(term)) for term in FLOAT_BLOCKS]
    + [(INT_SUMS[term], _int_sums_for(term)) for term in INT_SUMS]
    + [(INT_BLOCKS[term], _int_blocks_for(term)) for term in INT_BLOCKS]
    + [(INT_TILES[term], _int_tiles_for(term)) for term in INT_TILES]
    + [(name, _max_keys_for(*float_bits_tiles)) for float_bits_tiles, name in MAX_KEYS.items()]
    + [(name, _products_for(kind != "int", kind == "float64", tiles)) for (kind, tiles), name in PRODUCTS.items()]
    + [(fn.__name__, fn) for fn in (int_sum_exp, float_rows_log_sum_exp, int_rows_log_sum_exp,
                                    float_blocks_log_sum_exp, int_blocks_log_sum_exp, float_rows_extrema,
                                    int_rows_extrema, int_rows_l2, int_largest_magnitudes)]
}

class Factory(NamedTuple):
    """Kernels made on first use: ``make(*arguments)`` for each of ``arguments``, every combination a
    call can name (kernels.catalogue makes them all, for precompile and the tests)."""

    make: Callable
    arguments: tuple


_FLOAT_TERMS = (SUM, SUM_SQUARES, SUM_ABS)
# kernel(("float_rows", term, variant)) is rows.float_rows(term, variant). Row kernels are Kernels; the
# serial ones, called only on the calling thread, are dispatchers.
FACTORIES = {
    "float_rows": Factory(rows.float_rows, tuple((term, variant) for term in _FLOAT_TERMS
                                                 for variant in rows.FLOAT_ROWS_VARIANTS)),
    "float_columns": Factory(rows.float_columns, tuple((term,) for term in _FLOAT_TERMS)),
    "int_rows": Factory(rows.int_rows, tuple((term, four) for term in INT_TERMS for four in (False, True))),
    "serial_float_sums": Factory(serial.float_sums, tuple((term, float64) for term in _FLOAT_TERMS
                                                          for float64 in (False, True))),
    "serial_int_sums": Factory(serial.int_sums, tuple((term,) for term in INT_TERMS)),
    "serial_float_log_sum_exp": Factory(serial.float_log_sum_exp, ((False,), (True,))),  # (float64)
    "serial_int_log_sum_exp": Factory(serial.int_log_sum_exp, ((),)),
    "serial_extrema": Factory(serial.extrema, ((False,), (True,))),  # (float bits)
    "serial_int_l2": Factory(serial.int_l2, ((),)),
}


def kernel(name):
    """The kernel ``name`` names: a KERNELS name, or a tuple (FACTORIES name, its arguments...)."""
    if type(name) is str:
        return KERNELS[name]
    return FACTORIES[name[0]].make(*name[1:])
