"""numred on Dask arrays (docs/dask.md): lazy results that follow the contract for every chunking,
against the same independent oracle as the NumPy tests (tests/oracle.py), with dask's threaded
scheduler (numred's thread-safety path) and on a real distributed.LocalCluster of two processes."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numred
import oracle
from numred._registry import OPS
from test_properties import FLAGS, arrays_of
from threads import needs_two_threads

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

OP_NAMES = [op.name for op in OPS]
DTYPES = list(oracle.ALL_DTYPES)
DT_IDS = [d.name for d in DTYPES]


@st.composite
def chunkings(draw, shape):
    """Chunk sizes per axis: uneven, size-1 pieces, and often three or more pieces along an axis."""
    chunks = []
    for n in shape:
        sizes = []
        left = n
        while left > 0:
            size = draw(st.integers(1, max(1, min(left, draw(st.sampled_from([1, 2, 3, n]))))))
            sizes.append(size)
            left -= size
        chunks.append(tuple(sizes) or (0,))
    return tuple(chunks)


def _axes(draw, ndim):
    if ndim == 0 or draw(st.booleans()):
        return draw(st.sampled_from([None, []]))
    return draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda a: a % ndim))


def check_dask_against_oracle(opname, x, chunks, axes, keepdims, noop, scheduler="threads"):
    """numred on ``x`` cut into ``chunks``: lazy, of the oracle's shape and dtype, its values the
    contract's, the input untouched; the errors the shapes decide are raised at the call."""
    func = getattr(numred, opname)
    before = x.tobytes()
    dx = da.from_array(x, chunks=chunks)
    context = f"{opname} dtype={x.dtype} shape={x.shape} chunks={chunks} axes={axes} keepdims={keepdims} noop={noop}"
    try:
        exp = oracle.expected(opname, x, axes, keepdims, noop)
    except oracle.ExpectedError as e:
        # decided by the shapes: at the call (an integer mean over an empty set); by the values: when computed
        shape_decided = e.exc_type is not ValueError or x.size == 0 or "empty" in e.why
        with pytest.raises(e.exc_type):
            lazy = func(dx, axes, keepdims, noop)
            assert not shape_decided, context + ": raised only when computed"
            lazy.compute(scheduler=scheduler)
        return
    lazy = func(dx, axes, keepdims, noop)
    assert isinstance(lazy, da.Array), context
    try:
        with dask.config.set(split_every=2):  # every combine step of the tree is taken
            got = lazy.compute(scheduler=scheduler)
    except ValueError:
        assert exp.error_ok is ValueError, context
        return
    assert got.shape == lazy.shape and got.dtype == lazy.dtype, context
    oracle.assert_matches(got, exp, context)
    assert x.tobytes() == before, "the input was modified: " + context


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
@settings(max_examples=8)
@given(data=st.data())
def test_dask_matches_oracle_for_every_chunking(opname, dtype, data):
    x = data.draw(arrays_of(dtype, max_dims=3, max_side=7), label="x")
    chunks = data.draw(chunkings(x.shape), label="chunks")
    axes = _axes(data.draw, x.ndim)
    check_dask_against_oracle(opname, x, chunks, axes, data.draw(FLAGS, label="keepdims"),
                              data.draw(FLAGS, label="noop"))


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("opname", OP_NAMES)
def test_dask_combines_many_chunks_along_each_reduced_axis(opname, dtype):
    # three or more chunks along each reduced axis, uneven and of size 1, with the kernels' own
    # layouts inside the chunks (rows, columns, tiles, parallel pieces)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((25, 16, 7)) * 3
    if dtype.kind == "u":
        x = np.abs(x)
    x = x.astype(dtype)
    for chunks, axes in [((10, 5, 7), [1]), ((1, 7, 2), [0, 2]), (((12, 1, 12), (15, 1), (2, 2, 3)), None)]:
        check_dask_against_oracle(opname, x, chunks, axes, 0, 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_an_empty_kept_set_computes_nothing_and_never_raises(dtype):
    # Every operator, the reduced set empty too (an integer mean or log-sum-exp over an empty set
    # raises where there are outputs): an empty result, as in memory. Through dask's reduction an
    # integer log-sum-exp of a 0x0 array over axis 0 raised at the call, a mean when computed (found
    # by the random profile).
    for opname in OP_NAMES:
        for shape, chunks, axes, keepdims in [((0, 0), ((0,), (0,)), [0], 0), ((0, 0), ((0,), (0,)), [1], 1),
                                              ((2, 0, 3), ((1, 1), (0,), (2, 1)), [0, 2], 0),
                                              ((0, 3), ((0,), (2, 1)), [1], 1)]:
            check_dask_against_oracle(opname, np.empty(shape, dtype=dtype), chunks, axes, keepdims, 0)


def test_integer_mean_of_huge_sums_is_exact_where_dasks_mean_is_not():
    # int64 elements near 2**40 summed over 2**14 elements: the sum is about 2**54, beyond float64's
    # integers, which dask's mean goes through
    rng = np.random.default_rng(1)
    x = (2**40 + rng.integers(0, 2**20, (4, 1 << 14))).astype(np.int64)
    x[:, 0] += 1
    dx = da.from_array(x, chunks=(2, 1000))
    got = numred.reduce_mean(dx, axes=[1], keepdims=0).compute()
    exact = [sum(row) // len(row) for row in x.tolist()]  # positive: floor is truncation
    assert got.tolist() == exact
    assert dx.mean(axis=1).compute().tolist() != [float(v) for v in exact]  # (what dask's own mean gives)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_integer_log_sum_exp_next_to_an_integer_is_decided_exactly_across_chunks(dtype):
    # as tests/test_integers.py: top + log(1 + sum(exp(-d))) just below top + 2, where float64
    # says top + 2; here the elements are spread over chunks, and the decision needs all of them
    from test_integers import _greedy_distances_below

    top = 1000
    row = [top] + [top - d for d in _greedy_distances_below(2, 60)]
    x = np.array([row, [top] * len(row), row[::-1]], dtype)
    got = numred.reduce_log_sum_exp(da.from_array(x, chunks=(2, 7)), axes=[1], keepdims=0).compute()
    assert got.tolist() == [top + 1, top + math.floor(math.log(len(row))), top + 1]
    oracle.assert_matches(got, oracle.expected("reduce_log_sum_exp", x, [1], 0))


@pytest.mark.parametrize("opname", ["reduce_mean", "reduce_sum", "reduce_l2", "reduce_log_sum", "reduce_sum_square"])
def test_float64_sums_beyond_the_range_in_some_chunks_are_carried_scaled(opname):
    # the contract's ReduceL2 examples and sums whose partial sums overflow, one element per chunk:
    # the block states carry a power-of-two scale, and the combine step finds the overflow too
    big, tiny = 1.7e308, 1e-200
    for values in ([1e200, 1e200], [tiny] * 4, [big, big, -big, -big, 3.0], [big, big, 1.0], [5e-324] * 3,
                   [big, -big, big]):
        x = np.array(values, dtype=np.float64)
        check_dask_against_oracle(opname, x, 1, None, 0, 0)
        check_dask_against_oracle(opname, np.stack([x, -x]), (1, 2), [1], 0, 0)
    assert numred.reduce_l2(da.from_array(np.array([1e200, 1e200]), chunks=1), keepdims=0).compute() == \
        1.4142135623730951e200
    assert numred.reduce_l2(da.from_array(np.full(4, 1e-200), chunks=1), keepdims=0).compute() == 2e-200


def test_errors_the_shapes_decide_are_raised_at_the_call():
    x = da.zeros((4, 6), dtype=np.float32, chunks=2)
    with pytest.raises(np.exceptions.AxisError):
        numred.reduce_sum(x, axes=[2])
    with pytest.raises(TypeError, match="unsupported dtype int16"):
        numred.reduce_sum(x.astype(np.int16), axes=[1])
    with pytest.raises(ValueError, match="empty set is undefined"):
        numred.reduce_mean(da.zeros((3, 0), dtype=np.int32, chunks=2), axes=[1])
    with pytest.raises(ValueError, match="keepdims must be 0 or 1"):
        numred.reduce_max(x, keepdims=2)
    unknown = x[x[:, 0] >= 0]  # rows of unknown count
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        numred.reduce_sum(unknown, axes=[0])
    # along a kept axis, unknown sizes are fine
    assert numred.reduce_sum(unknown, axes=[1], keepdims=0).compute().tolist() == [0.0] * 4


@pytest.mark.parametrize("opname,data,message", [
    ("reduce_l2", np.full((2, 30), 2**30, np.int32), "does not fit"),
    ("reduce_log_sum", np.array([[1, -5, 3], [1, 2, 3]], np.int64), "sum <= 0"),
    ("reduce_log_sum_exp", np.full((2, 8), np.iinfo(np.int32).max, np.int32), "does not fit"),
])
def test_errors_the_values_decide_are_raised_when_computed(opname, data, message):
    lazy = getattr(numred, opname)(da.from_array(data, chunks=(1, 3)), axes=[1])
    with pytest.raises(ValueError, match=message):
        lazy.compute(scheduler="threads")


def test_noop_maps_blockwise_and_broadcast_chunks_are_read_in_place():
    x = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    dx = da.from_array(x, chunks=2)
    out = numred.reduce_l1(dx, axes=[], noop_with_empty_axes=1)
    assert isinstance(out, da.Array) and out.compute().tolist() == np.abs(x).tolist()
    # a broadcast input: its chunks are zero-stride views
    row = np.array([1.5, -2.0, 4.0, 0.25], dtype=np.float32)
    wide = da.broadcast_to(da.from_array(row, chunks=3), (1000, 4), chunks=(300, 3))
    assert numred.reduce_mean(wide, axes=[0], keepdims=0).compute().tolist() == row.tolist()
    assert numred.reduce_sum(wide, keepdims=0).compute() == np.float32(3.75 * 1000)
    rank0 = numred.reduce_log_sum_exp(da.from_array(np.float64(2.0)), keepdims=0)
    assert isinstance(rank0, da.Array) and rank0.compute() == 2.0


@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    # two worker processes of one thread each, on the loopback interface, without a dashboard; the
    # workers load the kernels from the Numba cache the session filled (tests/conftest.py)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_dask_on_a_local_cluster_matches_oracle(cluster_client, dtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((90, 33)) * 4
    if dtype.kind == "u":
        x = np.abs(x)
    x = x.astype(dtype)
    for opname in OP_NAMES:
        for chunks, axes in [((31, 10), [0]), ((30, 11), None)]:
            check_dask_against_oracle(opname, x, chunks, axes, 1, 0, scheduler=None)  # the client's


def test_in_a_cluster_worker_the_chunk_step_runs_on_the_cores_dask_gives_it(cluster_client):
    # dask starts its workers to fill the cores (here two of one thread each, the nanny setting
    # OMP_NUM_THREADS=1): a task's kernels run on one Numba thread there, and the worker thread's
    # own count is restored after
    def threads_in_a_task():
        import numba

        from numred import _dask

        with _dask._task_threads():
            inside = numba.get_num_threads()
        return inside, numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS

    inside, after, available = cluster_client.submit(threads_in_a_task, pure=False).result()
    assert (inside, after) == (1, available)


@needs_two_threads
@pytest.mark.parametrize("worker_threads", [1, 2, None])
def test_the_chunk_step_runs_its_kernels_on_the_cores_of_its_worker(monkeypatch, worker_threads):
    # In a distributed worker (here a stand-in, with OMP_NUM_THREADS=1 as its nanny sets it) the chunk
    # step's kernels run on as many Numba threads as the worker has threads, and the calling
    # thread's count is restored after. Outside a worker (None: the synchronous scheduler here, the
    # threaded one alike) they keep all of Numba's threads, OMP_NUM_THREADS or not.
    import types

    import numba

    distributed = pytest.importorskip("distributed")
    from numred import _dask, _partials

    threads = numba.get_num_threads()
    seen = []
    chunk_states, reduce_in_memory = _partials.chunk_states, _dask.reduce_in_memory

    def spy(step, label):
        def watched(*args):
            seen.append((label, numba.get_num_threads()))
            return step(*args)

        return watched

    def get_worker():
        if worker_threads is None:
            raise ValueError("No worker found")
        return types.SimpleNamespace(state=types.SimpleNamespace(nthreads=worker_threads))

    monkeypatch.setattr(_partials, "chunk_states", spy(chunk_states, "states"))
    monkeypatch.setattr(_dask, "reduce_in_memory", spy(reduce_in_memory, "in memory"))
    monkeypatch.setattr(distributed, "get_worker", get_worker)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    x = np.arange(4 * 200_000, dtype=np.int64).reshape(4, 200_000)  # parallel plans: 200000 elements a block
    # rows whole in each block (the block's in-memory results), then cut in two (partial states)
    for chunks, step in (((2, 200_000), "in memory"), ((4, 100_000), "states")):
        seen.clear()
        got = numred.reduce_sum(da.from_array(x, chunks=chunks), [1], keepdims=0).compute(scheduler="sync")
        assert got.tolist() == [sum(range(k * 200_000, (k + 1) * 200_000)) for k in range(4)]
        assert seen == [(step, min(worker_threads or threads, threads))] * 2
        assert numba.get_num_threads() == threads


def _combine_levels(lazy):
    """The rounds of combine tasks in a reduction's graph (dask names them "...-partial")."""
    return sum(1 for name in lazy.__dask_graph__().layers if name.endswith("-partial") or "-partial-" in name)


def test_small_states_merge_in_a_flat_tree_and_large_ones_as_dask_does():
    # numred's states over all axes are a few numbers per block: one task merges the 32 blocks'
    # states (dask's default, four per task, takes five rounds). States as large as the blocks merge
    # four at a time, as dask's own; a split_every in dask's configuration is the user's choice.
    rng = np.random.default_rng(3)
    values = rng.integers(-1000, 1000, (32 * 8, 250))
    x = da.from_array(values.astype(np.float64) / 8, chunks=(8, 250))  # sums exact in float64
    flat = numred.reduce_sum(x, keepdims=0)
    assert _combine_levels(flat) == 0
    assert float(flat.compute(scheduler="sync")) == values.sum() / 8
    assert _combine_levels(x.sum()) > 0
    with dask.config.set(split_every=4):
        configured = numred.reduce_sum(x, keepdims=0)
        assert _combine_levels(configured) == _combine_levels(x.sum()) > 0
        assert float(configured.compute(scheduler="sync")) == values.sum() / 8
    wide = da.from_array(values.astype(np.float64).T.copy() / 8, chunks=(250, 1))  # states: 250 per 1-column block
    by_columns = numred.reduce_sum(wide, [1], keepdims=0)
    assert _combine_levels(by_columns) == _combine_levels(wide.sum(axis=1)) > 0
    assert by_columns.compute(scheduler="sync").tolist() == (values.sum(axis=0) / 8).tolist()
