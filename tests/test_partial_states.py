"""The partial states and their combine rules (numred.kernels.states): pieces of random data, each
turned into its state by exact arithmetic, combined in random orders and groupings through the
rules, against the exact answer for the whole (Python ints, fractions, math.fsum)."""
from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from numred.kernels import states as _states

# The rules are subroutines (numred.kernels.jit), callable from jitted code only: each through an
# njit caller, compiled as the kernels compile them.
states = SimpleNamespace(
    compensated_value=njit(lambda total, comp: _states.compensated_value(total, comp)),
    combine_sums=njit(lambda a, b, c, d: _states.combine_sums(a, b, c, d)),
    combine_wide=njit(lambda a, b, c, d: _states.combine_wide(a, b, c, d)),
    combine_wrapping=njit(lambda a, b: _states.combine_wrapping(a, b)),
    combine_maxima=njit(lambda a, b, c, d: _states.combine_maxima(a, b, c, d)),
    combine_exp_sums=njit(lambda a, b, c, d, e, f: _states.combine_exp_sums(a, b, c, d, e, f)),
)

U = 2.0**-53
settings_ = settings(max_examples=60, deadline=None)


def _pieces(draw, elements, max_pieces=6, max_size=8):
    """A list of pieces (lists of elements), some of them empty."""
    return draw(st.lists(st.lists(elements, max_size=max_size), min_size=1, max_size=max_pieces))


@st.composite
def _combine_order(draw, n):
    """A random binary tree over n states: the sequence of (i, j) merges, each into i."""
    alive = list(range(n))
    merges = []
    while len(alive) > 1:
        i, j = draw(st.permutations(alive))[:2]
        merges.append((i, j))
        alive.remove(j)
    return merges


def _combine_all(states_, merges, combine):
    states_ = list(states_)
    for i, j in merges:
        states_[i] = combine(*states_[i], *states_[j])
    alive = {i for i, _ in merges} - {j for _, j in merges}
    return states_[next(iter(alive))] if merges else states_[0]


# ---- compensated float64 sums -----------------------------------------------------------------
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


def _sum_state(piece):
    """(total, comp) of a piece: its sum rounded, and the rest of the exact sum rounded."""
    total = math.fsum(piece)
    exact = sum(map(Fraction, piece), Fraction(0))
    return total, float(exact - Fraction(total)) if math.isfinite(total) else 0.0


@given(st.data())
@settings_
def test_compensated_sums_combine_to_the_exact_sum_within_its_bound(data):
    pieces = _pieces(data.draw, finite)
    merges = data.draw(_combine_order(len(pieces)))
    exact = sum((Fraction(x) for piece in pieces for x in piece), Fraction(0))
    partial = [_sum_state(piece) for piece in pieces]
    if not all(math.isfinite(t) for t, _ in partial):
        return  # a piece whose sum overflows: the IEEE answer, checked through the operators
    total, comp = _combine_all(partial, merges, states.combine_sums)
    value = states.compensated_value(total, comp)
    if not math.isfinite(value):
        return
    # Neumaier's bound for k additions of the pieces' sums, plus the compensations' own rounding
    magnitudes = sum(abs(Fraction(t)) + abs(Fraction(c)) for t, c in partial)
    bound = U * abs(exact) + 4 * len(pieces) * Fraction(U) ** 2 * magnitudes + Fraction(2.0**-1074)
    assert abs(Fraction(value) - exact) <= bound


def test_compensated_sums_keep_what_plain_addition_loses():
    # 1e16 + 1 + (-1e16): plain float64 addition of the pieces' sums gives 0
    total, comp = states.combine_sums(*states.combine_sums(1e16, 0.0, 1.0, 0.0), -1e16, 0.0)
    assert states.compensated_value(total, comp) == 1.0
    assert states.combine_sums(0.0, 0.0, 2.5, 1e-20) == (2.5, 1e-20)  # the identity


def test_compensated_value_of_an_infinite_total_is_the_total():
    total, comp = states.combine_sums(math.inf, 0.0, 1.0, 0.0)
    assert states.compensated_value(total, comp) == math.inf
    total, comp = states.combine_sums(math.inf, 0.0, -math.inf, 0.0)
    assert math.isnan(states.compensated_value(total, comp))


# ---- exact wide integers and wrapping integers ------------------------------------------------
def _halves(value):
    bits = value % 2**128
    return np.uint64(bits % 2**64), np.uint64(bits >> 64)


@given(st.lists(st.integers(-2**126, 2**126 - 1), min_size=1, max_size=8), st.data())
@settings_
def test_wide_integer_sums_combine_exactly_modulo_2_128(values, data):
    merges = data.draw(_combine_order(len(values)))
    # (Numba returns uint64 results as Python ints: typed back for the next call, as in a kernel)
    low, high = _combine_all([_halves(v) for v in values], merges,
                             lambda *a: tuple(map(np.uint64, states.combine_wide(*a))))
    assert (int(low) + (int(high) << 64)) % 2**128 == sum(values) % 2**128
    assert states.combine_wide(np.uint64(0), np.uint64(0), *_halves(values[0])) == _halves(values[0])


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8), st.data())
@settings_
def test_wrapping_sums_combine_modulo_2_64(values, data):
    merges = data.draw(_combine_order(len(values)))
    (total,) = _combine_all([(np.uint64(v),) for v in values], merges,
                            lambda a, b: (np.uint64(states.combine_wrapping(a, b)),))
    assert int(total) == sum(values) % 2**64


# ---- maxima of keys ---------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(0, 3)), min_size=1, max_size=8),
       st.data())
@settings_
def test_maxima_combine_to_the_largest_key_and_every_nan(pieces, data):
    merges = data.draw(_combine_order(len(pieces)))
    key, nans = _combine_all([(np.int64(k), np.int64(n)) for k, n in pieces], merges, states.combine_maxima)
    assert key == max(k for k, _ in pieces)
    assert nans == sum(n for _, n in pieces)


# ---- (max, sum of exp) pairs ------------------------------------------------------------------
moderate = st.floats(-700, 700)
special = st.sampled_from([math.inf, -math.inf, math.nan])


def _exp_state(piece):
    """(max, sum of exp(x - max), 0) of a piece; (-inf, 0, 0) for an empty one."""
    if not piece:
        return -math.inf, 0.0, 0.0
    if any(math.isnan(x) for x in piece):
        return math.nan, 0.0, 0.0
    top = max(piece)
    if not math.isfinite(top):
        return top, 0.0, 0.0
    return top, math.fsum(math.exp(x - top) for x in piece), 0.0


def _log_sum_exp(values):
    """The oracle for the whole: fsum of exp(x - max) at the common max, and the special values."""
    if any(math.isnan(x) for x in values):
        return math.nan
    if not values or max(values) == -math.inf:
        return -math.inf
    top = max(values)
    if top == math.inf:
        return math.inf
    return top + math.log(math.fsum(math.exp(x - top) for x in values))


@given(st.data())
@settings_
def test_exp_sum_pairs_combine_to_the_log_sum_exp_of_the_whole(data):
    elements = data.draw(st.sampled_from([moderate, st.one_of(moderate, special)]))
    pieces = _pieces(data.draw, elements)
    merges = data.draw(_combine_order(len(pieces)))
    maximum, total, comp = _combine_all([_exp_state(p) for p in pieces], merges, states.combine_exp_sums)
    expected = _log_sum_exp([x for piece in pieces for x in piece])
    result = maximum + math.log(states.compensated_value(total, comp)) if math.isfinite(maximum) else maximum
    if math.isnan(expected):
        assert math.isnan(result)
    elif math.isinf(expected):
        assert result == expected
    else:
        # each piece's scaled sum and its rounding: a few ulps of the sum, relative; the log turns
        # that into an absolute error of a few 2**-53
        assert abs(result - expected) <= 8 * U * max(1.0, abs(expected))
