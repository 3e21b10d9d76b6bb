"""float16 and bfloat16 data in the kernels: every float16 bit pattern decoded exactly (with F16C
conversions and with the integer decoding), float64 results rounded once to 16 bits by the kernels'
store, and bfloat16 runs read two elements per 32-bit load, none dropped or read twice. The
contract's 16-bit rounding rows (docs/SEMANTICS.md, "Values") are in tests/test_contract_values.py.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import numred
import oracle
from oracle import BFLOAT16, assert_matches, expected


_EVERY_HALF_SCRIPT = """
import numpy as np, numred
from numred import kernels
halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
x = np.stack([halves, halves], axis=1)  # each row twice: the mean of a row is its value, exactly
means = numred.reduce_mean(x, np.array([1]), keepdims=0)
print(int(kernels.decode.CPU_CONVERTS_HALVES))
np.save({out!r}, means)
"""


@pytest.mark.slow
@pytest.mark.parametrize("cpu", ["host", "generic"])
def test_every_float16_bit_pattern_decodes_exactly(cpu, tmp_path):
    """All 65536 float16 patterns through the kernels' decoding: with F16C conversions where the
    CPU Numba compiles for has them ("host" here) and with the integer decoding where it may not
    (NUMBA_CPU_NAME=generic, the usual setting for portable caches). The mean of [h, h] is h
    exactly, for subnormals and infinities too; NaN stays NaN. The sign of a zero result is not
    part of the contract (docs/SEMANTICS.md is silent), so zeros are compared by value."""
    import os
    import subprocess
    import sys

    out = tmp_path / "means.npy"
    env = dict(os.environ)
    if cpu == "generic":
        env["NUMBA_CPU_NAME"] = "generic"
    done = subprocess.run([sys.executable, "-c", _EVERY_HALF_SCRIPT.format(out=str(out))], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if cpu == "generic":
        assert done.stdout.strip() == "0", "the generic CPU must take the integer decoding"
    means = np.load(out)
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    nan = np.isnan(halves)
    assert np.isnan(means[nan]).all()
    nonzero = ~nan & (halves != 0)
    mismatched = np.nonzero(means[nonzero].view(np.uint16) != halves[nonzero].view(np.uint16))[0]
    assert mismatched.size == 0, [float(v) for v in halves[nonzero][mismatched[:5]]]
    assert (means[halves == 0] == 0).all()


@pytest.mark.parametrize("dtype", [BFLOAT16, np.dtype(np.float16)], ids=str)
def test_float64_results_round_once_to_16_bit_floats(dtype):
    """The last step of every bfloat16 and float16 reduction: float64 -> dtype in one correct rounding
    (ties to even, overflow to inf), against exact rounding of the rational value. The values
    cover the whole range (subnormals and overflow included) and sit on, just above and just below
    ties at float64 resolution, where rounding through float32 first would go wrong. The kernels'
    own store (store_rounded) is called through a loop compiled here; results travel as the bits."""
    import numba

    from numred.kernels.store import store_rounded

    @numba.njit
    def store_all(values, result):
        for k in range(values.size):
            store_rounded(result, k, values[k])

    carrier = np.dtype(np.int16) if dtype == BFLOAT16 else np.dtype(np.uint16)

    def round_float64_to(values, dtype):
        result = np.empty(values.size, dtype=carrier)
        store_all(values, result)
        return result.view(dtype)

    rng = np.random.default_rng(7)
    smallest, largest = float(oracle.ulp(0, dtype)), float(oracle.max_finite(dtype))
    mags = np.exp2(rng.uniform(math.log2(smallest) - 2, math.log2(largest) + 1, 3000))
    # ties: a value of the dtype plus half its ulp, and the float64 neighbours on either side
    on_grid = np.array([float(oracle.round_fraction(Fraction(v), dtype)) for v in mags[:1000].tolist()])
    on_grid = on_grid[np.isfinite(on_grid)]
    ties = on_grid + np.array([float(oracle.ulp(Fraction(v), dtype)) / 2 for v in on_grid.tolist()])
    # and the edges: the overflow threshold (a tie with inf), half the smallest subnormal (a tie with 0)
    edges = [float(oracle.overflow_threshold(dtype)), smallest / 2, 3 * smallest / 2, smallest, largest]
    ties = np.concatenate([ties[np.isfinite(ties)], edges])
    values = np.concatenate([mags, ties, np.nextafter(ties, 0), np.nextafter(ties, np.inf), [0.0]])
    values = np.concatenate([values, -values])
    rounded = round_float64_to(values, dtype)
    assert rounded.dtype == dtype and rounded.shape == values.shape
    got = rounded.astype(np.float64).tolist()
    for v, g in zip(values.tolist(), got):
        assert g == oracle.round_fraction(Fraction(v), dtype), (v, g)
    specials = round_float64_to(np.array([np.inf, -np.inf, np.nan, -0.0]), dtype).astype(np.float64)
    assert specials[0] == np.inf and specials[1] == -np.inf and np.isnan(specials[2])
    assert specials[3] == 0 and math.copysign(1, specials[3]) == -1


@pytest.mark.parametrize("n_rows", [1, 4, 5, 9])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 1001, 30001])
@pytest.mark.parametrize("start", [0, 1])
def test_bfloat16_runs_read_in_pairs_count_every_element_once(n_rows, n, start):
    # bfloat16 runs are read two elements per 32-bit load (numred.kernels.decode.pair_sums): runs of odd
    # and even length, starting on odd and even elements, in four-row groups and the rows after
    # them, serial (small) and parallel. The last element of each row is large, so a run that drops
    # its odd tail, or reads one element past it, is off by far more than rounding.
    x = np.random.default_rng(n * 10 + n_rows).uniform(-4, 4, size=(n_rows, n + 1)).astype(ml_dtypes.bfloat16)
    x[:, -1] = 64
    x = x[:, start:start + n]
    x[:, -1] = 256
    for op in ("reduce_mean", "reduce_sum_square"):
        assert_matches(getattr(numred, op)(x, 1), expected(op, x, 1), f"{x.shape} from element {start}")


def test_bfloat16_long_run_quarters_read_in_pairs():
    # A long contiguous run is summed as four quarters read together, then the 0-3 elements left
    # (except on AMD Zen, which reads it whole: kernels.reading.QUARTER_LONG_RUNS); with an odd quarter each
    # quarter has an odd tail read alone. Powers of two at every quarter's end and at the end make
    # any element dropped or read twice visible beyond rounding.
    quarter = (1 << 16) + 1
    x = np.random.default_rng(5).uniform(-1, 1, size=4 * quarter + 3).astype(ml_dtypes.bfloat16)
    for i in range(4):
        x[(i + 1) * quarter - 1] = 2.0 ** (12 + i)
    x[-3:] = [2.0**16, 2.0**17, 2.0**18]
    for op in ("reduce_mean", "reduce_sum_square"):
        assert_matches(getattr(numred, op)(x), expected(op, x))
        assert_matches(getattr(numred, op)(x[1:]), expected(op, x[1:]))  # from an odd element
