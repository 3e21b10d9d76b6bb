"""``python -m numred bench``: the command runs end to end on a tiny configuration.

One in-process run (two small cases, --quick, ReduceMean only, with --json and, when matplotlib is
importable, --plot) feeds the checks on the table, the JSON and the PNG. Nothing here asserts a
timing: the machine may be busy.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import threading
import time

import numpy as np
import pytest

from numred.tools import _bench_cases, _bench_output, _bench_peers, _bench_timing, bench

TINY_CASES = (bench.Case((3, 2, 2), (1,)), bench.Case((16, 24), None))

# the issue's list, the same for every op
EXPECTED_CASES = [
    ((3, 2, 2), (1,)),
    ((64, 64), None),
    ((1000, 1000), (1,)),
    ((1000, 1000), (0,)),
    ((4096, 4096), (1,)),
    ((4096, 4096), (0,)),
    ((4096, 4096), None),
    ((32, 64, 56, 56), (2, 3)),
    ((32, 64, 56, 56), (1,)),
    ((32, 56, 56, 64), (1, 2)),
    ((4194304, 4), (0,)),
    ((4, 4194304), (1,)),
    ((8192, 16384), (1,)),
    ((8192, 16384), (0,)),
]


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(argv)


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Run the bench once on the tiny configuration: (exit code, stdout, report, png path)."""
    d = tmp_path_factory.mktemp("bench")
    json_path = d / "run.json"
    png_path = d / "run.png" if have_matplotlib() else None
    argv = ["--quick", "--op", "reduce_mean", "--rounds", "2", "--no-progress", "--json", str(json_path)]
    if png_path is not None:
        argv += ["--plot", str(png_path)]
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "CASES", TINY_CASES)
        # as few calls as the policy allows: this checks the plumbing, not the speed
        tiny_policy = bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0)
        mp.setattr(bench, "QUICK_POLICY", tiny_policy)
        rc = bench.run(parse(argv), out=out)
    report = json.loads(json_path.read_text())
    return rc, out.getvalue(), report, png_path


def test_table_has_numred_and_numpy(tiny_run):
    rc, text, _, _ = tiny_run
    assert rc == 0, text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("op "))
    assert "numred" in header and "numpy" in header and "GB/s" in header
    rows = [line.split() for line in lines if line.startswith("ReduceMean ")]
    assert [(r[1], r[2]) for r in rows] == [("3x2x2", "1"), ("16x24", "all")]
    for r in rows:
        assert r[3] != "ERROR"
    assert "geometric mean of best-peer/numred" in text
    # the ops other than --op are not run
    assert "ReduceLogSumExp" not in text and "ReduceSumSquare" not in text


def test_json_has_every_measurement(tiny_run):
    _, _, report, _ = tiny_run
    meta = report["meta"]
    assert meta["dtype"] == "float32" and meta["quick"] is True and meta["timing"]["rounds"] == 2
    assert isinstance(meta["threads"], int) and meta["threads"] >= 1
    assert "numpy" in report["peers"]
    results = report["results"]
    assert [(r["op"], r["case"]) for r in results] == [
        ("ReduceMean", "3x2x2 axes 1"),
        ("ReduceMean", "16x24 axes all"),
    ]
    for r in results:
        for key in ("op", "case", "shape", "axes", "dtype", "threads", "numred", "peers"):
            assert key in r
        assert r["dtype"] == "float32" and r["threads"] == meta["threads"]
        assert r["numred"] > 0
        assert set(r["peers"]) == set(report["peers"])
        assert r["peers"]["numpy"] > 0
    assert results[1]["axes"] is None and results[0]["axes"] == [1]
    assert "geometric_mean_best_peer_over_numred" in report
    assert isinstance(report["slower_than_best_peer"], list)
    assert report["bandwidth_reference"] is None  # --quick skips it


def test_times_in_turns_keeps_the_median_block(monkeypatch):
    # the block medians each function gets in turn are scripted: one slow block among three must
    # not decide a result; a function that raises is dropped; one past SLOW_CALL gets one block
    script = {"steady": [1.0, 9.0, 2.0], "slow": [20.0], "failing": []}
    calls = []

    def fake_median_time(fn, policy):
        name = fn()
        calls.append(name)
        if name == "failing":
            raise RuntimeError("no kernel for this")
        return script[name][sum(c == name for c in calls) - 1]

    monkeypatch.setattr(_bench_timing, "median_time", fake_median_time)
    monkeypatch.setattr(_bench_timing, "SLOW_CALL", 10.0)
    done = []
    fns = {name: (lambda name=name: name) for name in script}
    got = bench.times_in_turns(fns, bench.DEFAULT_POLICY, 3, lambda: done.append(1))
    assert got["steady"] == 2.0 and got["slow"] == 20.0
    assert isinstance(got["failing"], RuntimeError)
    assert calls == ["steady", "slow", "failing", "steady", "steady"]
    assert len(done) == 3 * len(fns)  # the progress bar counts skipped blocks too


def test_times_in_turns_waits_for_quiet_before_every_block(monkeypatch):
    events = []
    monkeypatch.setattr(_bench_timing, "wait_for_quiet", lambda: events.append("quiet"))
    monkeypatch.setattr(_bench_timing, "median_time", lambda fn, policy: events.append(fn()) or 1e-3)
    bench.times_in_turns({"a": lambda: "a", "b": lambda: "b"}, bench.DEFAULT_POLICY, 2, lambda: None)
    assert events == ["quiet", "a", "quiet", "b"] * 2


def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _wait_while_spinning(seconds):
    """bench.wait_for_quiet() while a Python thread of this process spins for ``seconds``."""
    spinner = threading.Thread(target=_spin, args=(seconds,))
    spinner.start()
    try:
        return bench.wait_for_quiet()
    finally:
        spinner.join()


def test_wait_for_quiet_waits_while_a_thread_of_the_process_spins():
    # a Python thread spinning as onnxruntime's workers do after a call: the wait lasts until it
    # stops, and gives up rather than waiting for ever. Up to three tries each: on a loaded machine
    # (the other test workers) the spinner can get under a fifth of a core for one 5 ms step, which
    # reads as quiet.
    assert bench.wait_for_quiet() is not None  # the process is quiet to begin with
    waits = []
    while len(waits) < 3 and not (waits and waits[-1] is not None and 0.15 <= waits[-1] < _bench_timing.QUIET_MAX):
        waits.append(_wait_while_spinning(0.2))
    assert waits[-1] is not None and 0.15 <= waits[-1] < _bench_timing.QUIET_MAX, waits
    waits = []
    while len(waits) < 3 and not (waits and waits[-1] is None):
        waits.append(_wait_while_spinning(_bench_timing.QUIET_MAX + 0.3))
    assert waits[-1] is None, waits


def test_rounds_below_one_exit_2_before_measuring(monkeypatch, capsys):
    monkeypatch.setattr(bench, "CASES", ())  # would fail loudly if it got to measuring
    assert bench.run(parse(["--quick", "--rounds", "0"]), out=io.StringIO()) == 2
    assert "--rounds 0" in capsys.readouterr().err


def test_plot_writes_png(tiny_run):
    pytest.importorskip("matplotlib")
    _, text, _, png_path = tiny_run
    data = png_path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 5000
    assert f"wrote {png_path}" in text


def test_plot_without_matplotlib_exits_2_before_measuring(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setattr(bench, "CASES", ())  # would fail loudly if it got to measuring
    rc = bench.run(parse(["--quick", "--plot", str(tmp_path / "x.png")]), out=io.StringIO())
    assert rc == 2
    assert 'pip install "numred[bench]"' in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal_with_tqdm(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert isinstance(bench.make_progress(3, out, enabled=True), _bench_output._NoProgress)
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert isinstance(bench.make_progress(3, out, enabled=False), _bench_output._NoProgress)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # tqdm not installed: plain rows
    p = bench.make_progress(3, out, enabled=True)
    assert isinstance(p, _bench_output._NoProgress)
    p.update()
    p.write("row")
    p.close()
    assert out.getvalue() == "row\n"


def test_progress_bar_goes_to_stderr(monkeypatch):
    pytest.importorskip("tqdm")
    err, out = _Tty(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    p = bench.make_progress(2, out, enabled=True)
    assert isinstance(p, _bench_output._TqdmProgress)
    p.set_postfix_str("ReduceMean 3x2x2 axes 1: numpy")
    p.update()
    p.write("a table row")
    p.update()
    p.close()
    assert "a table row" in out.getvalue()
    assert "a table row" not in err.getvalue()
    assert "/2 [" in err.getvalue() and "ReduceMean 3x2x2 axes 1: numpy" in err.getvalue()


def test_cases_are_the_issue_list():
    assert [(c.shape, c.axes) for c in bench.CASES] == EXPECTED_CASES
    quick = [c for c in bench.CASES if not c.large]
    assert all(c.size < 1 << 24 for c in quick)
    assert not any(c.shape == (8192, 16384) for c in quick)


def test_more_runs_the_extra_layouts_after_the_standard_ones(monkeypatch, tmp_path):
    # --more appends MORE_CASES; a case with a step gets a strided view of a wider array, read in
    # place by numred and handed as it is to every peer, whose results are checked as usual
    strided = bench.Case((8, 24), (1,), step=3)
    x = strided.make(np.dtype(np.float32))
    wide = _bench_cases.make_input((8, 72), np.dtype(np.float32))
    assert x.shape == (8, 24) and not x.flags.c_contiguous and np.array_equal(x, wide[:, ::3])
    assert strided.shape_label() == "8x24/3"
    assert all(c.size < 1 << 24 for c in bench.MORE_CASES)  # all of them in --quick runs too
    monkeypatch.setattr(bench, "CASES", TINY_CASES[:1])
    monkeypatch.setattr(bench, "MORE_CASES", (strided,))
    monkeypatch.setattr(bench, "QUICK_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    json_path = tmp_path / "more.json"
    out = io.StringIO()
    rc = bench.run(parse(["--more", "--quick", "--op", "reduce_sum_square", "--no-progress", "--json",
                          str(json_path)]), out=out)
    assert rc == 0
    report = json.loads(json_path.read_text())
    assert [r["case"] for r in report["results"]] == ["3x2x2 axes 1", "8x24/3 axes 1"]
    assert report["differing_results"] == []
    assert any(line.split()[:2] == ["ReduceSumSquare", "8x24/3"] for line in out.getvalue().splitlines())


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int32", "uint64"])
def test_make_input(name):
    dtype = bench.dtype_from_name(name)
    x = _bench_cases.make_input((5, 7), dtype)
    assert x.dtype == dtype and x.shape == (5, 7) and x.flags.c_contiguous
    if dtype.kind == "f" or name == "bfloat16":
        # the same values as a single float32 draw, rounded
        ref = np.random.default_rng(0).standard_normal((5, 7), dtype=np.float32)
        if name != "float64":
            np.testing.assert_array_equal(x, ref.astype(dtype))


def test_plain_parallel_sum():
    x = np.arange(1000, dtype=np.float32)
    assert bench.plain_parallel_sum()(x) == pytest.approx(float(x.sum()))


def test_torch_peer_unsupported_case_is_an_error_not_a_crash():
    pytest.importorskip("torch")
    peer = _bench_peers.TorchPeer()
    assert peer.load() is None
    mean = next(op for op in bench.OPS if op.onnx_name == "ReduceMean")
    fn = peer.prepare(mean, np.arange(6, dtype=np.int32).reshape(2, 3), (1,))
    with pytest.raises(Exception):
        fn()  # torch.mean has no integer kernel: the bench shows n/a


def test_dtype_rates_table(monkeypatch, tmp_path):
    # every dtype of the table timed on every case; the printed ratios are the JSON's rates divided
    monkeypatch.setattr(bench, "CASES", TINY_CASES)
    json_path = tmp_path / "rates.json"
    out = io.StringIO()
    status = bench.run(parse(["--dtype-rates", "--quick", "--op", "reduce_sum_square", "--no-progress",
                              "--json", str(json_path)]), out=out)
    assert status == 0
    text = out.getvalue()
    results = json.loads(json_path.read_text())["dtype_rates"]
    assert [(tuple(r["shape"]), r["axes"]) for r in results] == [((3, 2, 2), [1]), ((16, 24), None)]
    for r in results:
        assert set(r["gelem_per_s"]) == set(bench.RATE_DTYPES)
        assert all(t > 0 for t in r["seconds"].values())
        row = next(line for line in text.splitlines()
                   if line.startswith("ReduceSumSquare") and line.split()[1] == "x".join(map(str, r["shape"])))
        printed = [float(cell.rstrip("x")) for cell in row.split()[5::2]]
        rates = r["gelem_per_s"]
        assert printed == pytest.approx([rates[d] / rates["float32"] for d in bench.RATE_DTYPES[1:]], abs=0.006)
    for name in bench.RATE_DTYPES[1:]:
        assert f"{name} against float32 (elements/s): min" in text


def test_dtype_rates_refuses_plot(capsys, tmp_path):
    status = bench.run(parse(["--dtype-rates", "--plot", str(tmp_path / "p.png")]))
    assert status == 2 and "--dtype-rates" in capsys.readouterr().err


def test_busy_refuses_plot(capsys, tmp_path):
    status = bench.run(parse(["--busy", "--plot", str(tmp_path / "p.png")]))
    assert status == 2 and "--busy" in capsys.readouterr().err


def test_busy_tables(monkeypatch, tmp_path):
    # every case of both tables, with the busy processes started and gone again; one small case each
    from numred.tools import _bench_busy

    monkeypatch.setattr(_bench_busy, "CONTENDED_CASES", (((64, 512), (1,)),))
    monkeypatch.setattr(_bench_busy, "THREAD_CASES", (((8, 2000), (1,)),))
    monkeypatch.setattr(_bench_busy, "THREAD_SECONDS", 0.02)
    started = []
    popen = _bench_busy.subprocess.Popen
    monkeypatch.setattr(_bench_busy.subprocess, "Popen", lambda *a, **k: started.append(popen(*a, **k)) or started[-1])
    json_path = tmp_path / "busy.json"
    out = io.StringIO()
    assert bench.run(parse(["--busy", "--quick", "--rounds", "1", "--json", str(json_path)]), out=out) == 0
    assert started and all(loop.poll() is not None for loop in started)
    report = json.loads(json_path.read_text())
    [contended] = report["contended"]
    assert contended["case"] == "64x512 over [1]"
    assert all(contended[name] > 0 for name in ("numred", "numred, one thread", "numpy"))
    [threaded] = report["threads"]
    assert all(threaded[name] > 0 for name in ("main thread", "worker thread", "two threads", "numpy, two threads"))
    assert "64x512 over [1]" in out.getvalue() and "8x2000 over [1]" in out.getvalue()


class _WrongPeer(_bench_peers.Peer):
    """The fastest peer there can be (its answer is computed in prepare) and a wrong one: numred's
    integer mean plus two, at least 1 away from the real mean whichever way it was rounded."""

    name = "wrong"

    def prepare(self, op, x, axes):
        import numred

        answer = getattr(numred, op.name)(x, axes=list(axes)) + 2
        return lambda: answer


def test_a_peer_with_other_answers_is_marked_and_never_the_best(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "CASES", TINY_CASES)
    monkeypatch.setattr(bench, "QUICK_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    monkeypatch.setattr(bench, "PEERS", [_bench_peers.NumPyPeer(), _WrongPeer()])
    json_path = tmp_path / "run.json"
    out = io.StringIO()
    argv = ["--quick", "--dtype", "int32", "--op", "reduce_mean", "--no-progress",
            "--json", str(json_path)]
    assert bench.run(parse(argv), out=out) == 0
    report = json.loads(json_path.read_text())
    for record in report["results"]:
        assert record["peer_differences"]["wrong"] >= 1.0
        assert record["peer_differences"]["numpy"] < 1.0  # NumPy's float mean is the real one
        assert record["best_peer"] == "numpy"
    assert [d["peer"] for d in report["differing_results"]] == ["wrong"] * len(TINY_CASES)
    rows = [line for line in out.getvalue().splitlines() if line.startswith("ReduceMean")]
    assert len(rows) == len(TINY_CASES) and all(line.split()[-2].endswith("*") for line in rows)
    if have_matplotlib():  # the chart hatches the wrong peer's bars, and only those
        import matplotlib.patches

        hatched = []
        set_hatch = matplotlib.patches.Rectangle.set_hatch

        def recording_set_hatch(bar, hatch):
            if hatch:  # patches set hatch None when they are made
                hatched.append(hatch)
            set_hatch(bar, hatch)

        monkeypatch.setattr(matplotlib.patches.Rectangle, "set_hatch", recording_set_hatch)
        bench.plot_speedups(str(tmp_path / "run.png"), report)
        assert len(hatched) == len(TINY_CASES)


def test_peer_differs_from_one_tolerance_or_another_size():
    record = {"peer_differences": {"close": 0.999, "off": 1.0, "other_size": None}}
    assert [bench.peer_differs(record, p) for p in ("close", "off", "other_size", "did_not_run")] == [
        False, True, True, False]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_largest_difference_is_in_units_of_the_tolerance(dtype):
    exact = np.array([[1.0, -4.0], [np.nan, 2.0]])
    rtol = _bench_output.AGREEMENT_RTOL[dtype]
    near = exact + np.array([[0.0, 4 * rtol * 0.5], [0.0, 0.0]])  # half the tolerance, on the scale 4
    assert bench.largest_difference(exact, near, bench.dtype_from_name(dtype)) == pytest.approx(0.5)
    # a list of arrays, as onnxruntime returns
    assert bench.largest_difference(exact, [near], bench.dtype_from_name(dtype)) == pytest.approx(0.5)
    assert bench.largest_difference(exact, np.nan_to_num(exact), bench.dtype_from_name(dtype)) == float("inf")
    assert bench.largest_difference(exact, exact[:1], bench.dtype_from_name(dtype)) is None


class _ContractPeer(_bench_peers.Peer):
    """The contract's own NumPy expressions: a sum of squares that wraps in the input dtype, and the
    real mean."""

    name = "contract"

    def prepare(self, op, x, axes):
        if op.onnx_name == "ReduceSumSquare":
            return lambda: np.sum(np.square(x, dtype=x.dtype), axis=axes, keepdims=True, dtype=x.dtype)
        return lambda: np.mean(x, axis=axes, keepdims=True)


def test_wrapping_integer_sums_of_squares_are_checked_against_the_wrapped_result(monkeypatch, tmp_path):
    # int32 squares of 40000-50000 overflow: the contract's sum of squares wraps modulo 2**32, and a
    # peer computing exactly that gives the same answer although it is far from the real sum. NumPy's
    # plain np.sum(np.square(x)) adds the wrapped squares in int64: another answer.
    def large_ints(shape, dtype):
        return np.random.default_rng(1).integers(40_000, 50_000, size=shape).astype(dtype)

    monkeypatch.setattr(_bench_cases, "make_input", large_ints)
    monkeypatch.setattr(bench, "CASES", TINY_CASES)
    monkeypatch.setattr(bench, "QUICK_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    monkeypatch.setattr(bench, "PEERS", [_bench_peers.NumPyPeer(), _ContractPeer()])
    json_path = tmp_path / "run.json"
    argv = ["--quick", "--dtype", "int32", "--op", "reduce_sum_square", "--op", "reduce_mean", "--no-progress",
            "--json", str(json_path)]
    assert bench.run(parse(argv), out=io.StringIO()) == 0
    report = json.loads(json_path.read_text())
    assert {r["peer_differences"]["contract"] for r in report["results"]} == {0.0}
    assert sorted((d["peer"], d["op"]) for d in report["differing_results"]) == [("numpy", "ReduceSumSquare")] * 2


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_log_sums_are_timed_on_positive_data(dtype, monkeypatch, tmp_path):
    # The cases' signed data make about half the sums negative, whose integer ReduceLogSum raises
    # (no integer -inf or NaN): each case was an ERROR row. The op is timed on |x| instead (its
    # registry entry's positive_input), with every result checked, as all ops' are.
    make_input = _bench_cases.make_input

    def negative_sums(shape, dtype):
        return -np.abs(make_input(shape, dtype))  # (signed data)

    monkeypatch.setattr(bench, "CASES", TINY_CASES)
    monkeypatch.setattr(bench, "QUICK_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    monkeypatch.setattr(_bench_cases, "make_input", negative_sums)
    json_path = tmp_path / "run.json"
    argv = ["--quick", "--dtype", dtype, "--op", "reduce_log_sum", "--no-progress", "--json", str(json_path)]
    out = io.StringIO()
    assert bench.run(parse(argv), out=out) == 0
    assert "ERROR" not in out.getvalue()
    report = json.loads(json_path.read_text())
    assert [r["op"] for r in report["results"]] == ["ReduceLogSum"] * len(TINY_CASES)
    assert all(r["numred"] > 0 and r["peer_differences"]["numpy"] < 1 for r in report["results"])


def test_the_bandwidth_reference_is_timed_in_turns_with_each_memory_bound_op(tmp_path, monkeypatch):
    # A full run (not --quick) times a plain parallel sum over the largest case's buffer on its own
    # (the reference row) and again in turns with numred and the peers in each memory-bound op's
    # case; each op's share is against the sum timed in its own turns, whose bandwidth moves with
    # the machine's. Log-sum-exp is not memory-bound and gets no share.
    json_path = tmp_path / "run.json"
    monkeypatch.setattr(bench, "CASES", (*TINY_CASES, bench.Case((16, 24), (0,))))
    monkeypatch.setattr(bench, "DEFAULT_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    out = io.StringIO()
    rc = bench.run(parse(["--rounds", "2", "--no-progress", "--json", str(json_path)]), out=out)
    assert rc == 0, out.getvalue()
    report = json.loads(json_path.read_text())
    reference = report["bandwidth_reference"]
    assert reference["shape"] == [16, 24] and reference["seconds"] > 0
    largest = [r for r in report["results"] if r["shape"] == [16, 24]]  # over all axes, then axis 0
    assert [r["op"] for r in largest] == ["ReduceMean", "ReduceLogSumExp", "ReduceSumSquare", "ReduceSum", "ReduceMax",
                                          "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                          "ReduceLogSum"] * 2
    memory_bound = ("ReduceMean", "ReduceSumSquare", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2")
    assert all("plain_sum_in_turns" not in r for r in largest if r["op"] not in memory_bound)
    shares = {(entry["op"], entry["case"]): entry for entry in reference["numred"]}
    assert set(shares) == {(op, case) for op in memory_bound for case in ("16x24 axes all", "16x24 axes 0")}
    for r in [r for r in largest if r["op"] in memory_bound]:
        assert r["plain_sum_in_turns"] > 0
        entry = shares[r["op"], r["case"]]
        assert entry["share"] == pytest.approx(r["plain_sum_in_turns"] / r["numred"])
        assert entry["plain_gbps"] == pytest.approx(r["bytes"] / r["plain_sum_in_turns"] / 1e9)
        assert f"{r['op']} {r['case']}: " in out.getvalue()
    assert out.getvalue().count("in the same turns") == 14


def test_progress_bar_names_what_it_counts(monkeypatch):
    pytest.importorskip("tqdm")
    err = _Tty()
    monkeypatch.setattr(sys, "stderr", err)
    p = bench.make_progress(2, io.StringIO(), enabled=True)
    p.update()
    p.close()
    assert "timing blocks" in err.getvalue() and "block" in err.getvalue()
    assert "timing/s" not in err.getvalue() and "it/s" not in err.getvalue()


def test_the_run_says_how_long_it_will_take_before_it_starts(monkeypatch, capsys):
    monkeypatch.setattr(bench, "CASES", TINY_CASES)
    monkeypatch.setattr(bench, "QUICK_POLICY", bench.TimingPolicy(target=0.0, min_calls=1, max_total=0.0))
    out = io.StringIO()
    assert bench.run(parse(["--quick", "--op", "reduce_mean", "--no-progress"]), out=out) == 0
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if " about " in line)
    assert line.startswith(f"{len(TINY_CASES)} cases for ")
    assert line.index("about") < len(line)
    assert "about" not in out.getvalue()  # stdout keeps the table only


def test_the_estimate_grows_with_the_work():
    policy = bench.DEFAULT_POLICY
    small = bench.estimated_seconds(bench.CASES[:2], 3, 3, policy, 3)
    assert 0 < small < bench.estimated_seconds(bench.CASES, 3, 3, policy, 3)
    assert bench.estimated_seconds(bench.CASES, 3, 3, policy, 3) < bench.estimated_seconds(bench.CASES, 3, 4, policy, 3)
    assert [bench.format_duration(s) for s in (3, 44, 200, 4000)] == ["5 s", "45 s", "3 min", "1 h 7 min"]


def test_dask_bench_checks_every_result_against_its_oracle():
    # --dask --quick: a local cluster of two processes, 64 MiB; numred's results are the oracle's
    # (correctly rounded float32 of extended-precision sums) in every row, and its int64 means exact
    pytest.importorskip("distributed")
    out = io.StringIO()
    assert bench.run(parse(["--dask", "--quick"]), out=out) == 0
    lines = out.getvalue().splitlines()
    rows = [line for line in lines if line.startswith("reduce_")]
    assert [row.split()[:2] for row in rows] == [[name, axis] for name in ("reduce_mean", "reduce_sum",
                                                                        "reduce_sum_square", "reduce_max",
                                                                        "reduce_log_sum_exp")
                                                  for axis in ("None", "1")]
    for row in rows:
        numred_off = row.split("of")[0].split()[-1].split("/")[0]
        assert numred_off == "0", row
    summary = next(line for line in lines if line.startswith("int64 mean"))
    assert "numred exact in 16/16 rows" in summary, summary
    # then the same reductions on dask's threaded scheduler, every one timed
    threaded = [line.split()[1:3] for line in lines if line.startswith("threaded ")]
    assert threaded == [[name, axis] for name in ("reduce_mean", "reduce_sum", "reduce_sum_square", "reduce_max",
                                                  "reduce_log_sum_exp") for axis in ("None", "1")]
