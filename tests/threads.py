"""Running numred at a given Numba thread count, for the tests that compare thread counts."""
import numba
import pytest

needs_two_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs >= 2 Numba threads")


def with_threads(n, fn, *args, **kw):
    """fn(*args, **kw) with Numba at n threads in this thread."""
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        return fn(*args, **kw)
    finally:
        numba.set_num_threads(old)
