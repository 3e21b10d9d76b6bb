"""``python -m numred bench``: time numred against its peers on a standard set of cases.

The cases (``numred.tools._bench_cases``) are the op registry (``numred._registry.OPS``) crossed with a
handful of standard shapes, so a new operator is benchmarked without touching this code. The peers
(``numred.tools._bench_peers``) are small adapters: NumPy always, onnxruntime and torch when importable.
Each implementation is called once untimed (numred's compile), then timed in turns with the others,
``--rounds`` blocks per case (``numred.tools._bench_timing``); the table (``numred.tools._bench_output``)
reports the median of their median times per call.

Extras (``pip install "numred[bench]"``), all optional and imported lazily: tqdm draws a progress
bar on stderr while measuring (stdout keeps only the table), matplotlib draws ``--plot FILE.png``.
``--json FILE`` writes every measurement, so that a note can quote one run.

On the largest float32/float64 case (not in --quick) a plain parallel sum over the same buffer is
timed too, the memory-bandwidth reference (``numred.tools._bench_timing``).

``--dtype-rates`` prints another table instead: numred alone, its elements per second on float32,
float16, bfloat16 and int32, with each narrower type's rate against float32's. The dtypes are timed
in turns within each round, so that they see the same machine load (see interleaved_times).
``--busy`` and ``--dask`` print theirs too (``numred.tools._bench_busy``, ``numred.tools._bench_dask``).
Only the standard library, NumPy and the numred base dependencies are imported at module level.
"""
from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np

# make_input too: the asv suite (asv_bench/) takes the cases, their inputs and the peers from here
from numred.tools._bench_cases import (CASES, Case, LARGE_ELEMENTS, MORE_CASES, dtype_from_name, make_input,  # noqa: F401
                                 op_input)
from numred.tools._bench_output import (Table, _short, check_matplotlib, format_duration, format_ratio, format_time,
                                  geometric_mean, largest_difference, make_progress, peer_differs,
                                  plot_speedups, write_json)
from numred.tools._bench_peers import PEERS
from numred.tools._bench_timing import (DEFAULT_POLICY, QUICK_POLICY, ROUNDS, SLOW_CALL, TimingPolicy,
                                  estimated_seconds, interleaved_times, median_time, plain_parallel_sum,
                                  times_in_turns, wait_for_quiet)
from numred._registry import OPS, Op

# the command's --help text (plain text; the docstring above is for Sphinx)
DESCRIPTION = """Time numred against NumPy, and onnxruntime and torch when they are installed
(pip install "numred[peers]"), on a standard set of cases for every operator.

Prints one row per operator and case: numred's median time per call, its throughput in GB/s,
and each peer's time and ratio (peer time / numred time; above 1, numred is faster). numred's
first call, where Numba compiles, is not timed. Before it starts, the run says about how long it
will take."""

DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")

# The row label of the plain parallel sum, and the ops whose GB/s is compared with it.
REF_LABEL = "(plain parallel sum)"
REF_KEY = "plain parallel sum"  # its name among the implementations timed in turns
MEMORY_BOUND_OPS = tuple(op.onnx_name for op in OPS if op.memory_bound)  # (Op.memory_bound)


def selected_cases(args: argparse.Namespace) -> list[Case]:
    """The cases a run times: CASES, then MORE_CASES with --more; with --quick, none of the large ones."""
    more = MORE_CASES if getattr(args, "more", False) else ()
    return [c for c in CASES + more if not (args.quick and c.large)]


# ----------------------------------------------------------------------------------- arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dtype", default="float32", choices=DTYPE_NAMES, help="input dtype (default float32)")
    parser.add_argument(
        "--more",
        action="store_true",
        help="also time common layouts beyond the standard cases (short rows, few rows, a narrow inner "
        "axis, transformer rows, per-channel image statistics, every other element)",
    )
    parser.add_argument("--quick", action="store_true",
                        help=f"fewer repeats, and skip the cases with {LARGE_ELEMENTS} or more elements")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help=f"time numred and its peers in N turns per case, keeping each one's median (default {ROUNDS}, "
        "1 with --quick); with --dtype-rates, the rounds of dtypes in turn (default 15, 5 with --quick)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="threads for numred (numba.set_num_threads) and for the peers "
        "(default: numba.get_num_threads())",
    )
    parser.add_argument(
        "--op",
        action="append",
        choices=[op.name for op in OPS],
        metavar="OP",
        help=f"benchmark only this op (repeatable; default: every op in the registry: {', '.join(op.name for op in OPS)})",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (there is none anyway when stderr is not a terminal "
        "or tqdm is not installed)",
    )
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="draw the speedups (peer time / numred time) to this image; needs matplotlib")
    parser.add_argument(
        "--dtype-rates",
        action="store_true",
        help=f"instead of the peer table: numred's elements per second on {', '.join(RATE_DTYPES)} "
        "against float32, the dtypes timed in turns in each round (--dtype is ignored)",
    )
    parser.add_argument("--dask", action="store_true",
                        help="instead of the peer table: numred against dask's own reductions on a 4 GiB float32 "
                        "Dask array held by a local cluster of two worker processes (64 MiB with --quick), with "
                        "each result's exactness and the workers' peak memory; needs pip install \"numred[dask]\"")
    parser.add_argument("--busy", action="store_true", help="instead of the peer table: float32 ReduceMean with "
                        "every core busy with other processes, then from Python threads (numred.tools._bench_busy)")
    parser.add_argument("--json", metavar="FILE", default=None,
                        help="write every measurement (seconds per call) and the run's settings as JSON")


# ---------------------------------------------------------------------------------- dtype rates

RATE_DTYPES = ("float32", "float16", "bfloat16", "int32")


def _selected_ops(args: argparse.Namespace) -> list[Op]:
    return [op for op in OPS if not args.op or op.name in args.op]


def _versions(numred, numba, peers=()) -> list[str]:
    """The versions line's entries: numred, NumPy, Numba, the loaded peers, Python."""
    return [
        f"numred {getattr(numred, '__version__', '?')}",
        f"numpy {np.__version__}",
        f"numba {numba.__version__}",
        *(f"{p.name} {p.version()}" for p in peers if p.name != "numpy"),
        f"python {platform.python_version()}",
    ]


def run_dtype_rates(args: argparse.Namespace, out, versions: list[str], threads: int) -> int:
    """The --dtype-rates table: per case and op, numred's Gelem/s on each of RATE_DTYPES and the
    ratio to float32's (above 1: more elements per second than float32)."""
    import numred

    ops = _selected_ops(args)
    cases = selected_cases(args)
    rounds = getattr(args, "rounds", None) or (5 if args.quick else 15)
    print(" | ".join([*versions, f"threads {threads}", "dtype rates", "quick" if args.quick else "full"]), file=out)
    print(f"numred's Gelem/s per dtype, median of {rounds} rounds; in each round every dtype is timed in turn, "
          "after an untimed call; x f32 = elements per second against float32's (> 1: faster)", file=out)
    print(file=out)
    others = RATE_DTYPES[1:]
    columns = _case_columns(ops, cases) + [("float32", 9, ">")]
    for name in others:
        columns += [(name, max(9, len(name)), ">"), ("x f32", 6, ">")]
    table = Table(columns, out)
    table.header()
    out.flush()
    progress = make_progress(len(cases) * len(ops), out, enabled=not getattr(args, "no_progress", False),
                             desc="cases", unit="case")
    table.write = progress.write
    results: list[dict] = []
    ratios: dict[str, list[float]] = {name: [] for name in others}
    try:
        with np.errstate(all="ignore"):
            for case in cases:
                inputs = {name: case.make(dtype_from_name(name)) for name in RATE_DTYPES}
                axes = None if case.axes is None else list(case.axes)
                for op in ops:
                    fn = getattr(numred, op.name)
                    progress.set_postfix_str(f"{op.onnx_name} {case.shape_label()} axes {case.axes_label()}")
                    seconds = interleaved_times({name: (lambda x=op_input(x, op): fn(x, axes=axes))
                                                 for name, x in inputs.items()}, rounds)
                    progress.update()
                    rates = {name: case.size / t / 1e9 for name, t in seconds.items()}
                    cells = [op.onnx_name, case.shape_label(), case.axes_label(), f"{rates['float32']:.3g}"]
                    for name in others:
                        ratios[name].append(rates[name] / rates["float32"])
                        cells += [f"{rates[name]:.3g}", format_ratio(rates[name] / rates["float32"])]
                    table.row(cells)
                    results.append({"op": op.onnx_name, "case": f"{case.shape_label()} axes {case.axes_label()}",
                                    "shape": list(case.shape), "axes": axes, "seconds": seconds,
                                    "gelem_per_s": rates})
                del inputs
    finally:
        progress.close()
    print(file=out)
    for name, r in ratios.items():
        ordered = sorted(r)
        print(f"{name} against float32 (elements/s): min {format_ratio(ordered[0])}, median "
              f"{format_ratio(statistics.median(ordered))}, max {format_ratio(ordered[-1])}; at least "
              f"float32's rate in {sum(v >= 1 for v in r)} of {len(r)}", file=out)
    if args.json:
        report = {"meta": {"versions": versions, "threads": threads, "quick": bool(args.quick), "rounds": rounds,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
                  "dtype_rates": results}
        return 0 if write_json(args.json, report, out) else 2
    return 0


def _case_columns(ops: list[Op], cases: list[Case]) -> list[tuple[str, int, str]]:
    """The table's first columns: op, shape, axes."""
    return [("op", max(len(op.onnx_name) for op in ops), "<"),
            ("shape", max(len("shape"), *(len(c.shape_label()) for c in cases)), "<"),
            ("axes", max(len("axes"), *(len(c.axes_label()) for c in cases)), "<")]


def _check_arguments(args: argparse.Namespace) -> int | None:
    """2 (after saying why on stderr) when the outputs or --rounds cannot work: before measuring,
    not after minutes of it; None when they can."""
    plot_path = getattr(args, "plot", None)
    json_path = getattr(args, "json", None)
    if plot_path and (getattr(args, "dtype_rates", False) or getattr(args, "busy", False)):
        print("--plot draws the peer table's speedups; --dtype-rates and --busy have none", file=sys.stderr)
        return 2
    if plot_path:
        msg = check_matplotlib()
        if msg:
            print(msg, file=sys.stderr)
            return 2
    for flag, path in (("--plot", plot_path), ("--json", json_path)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            print(f"{flag} {path}: no such directory", file=sys.stderr)
            return 2
    if getattr(args, "rounds", None) is not None and args.rounds < 1:
        print(f"--rounds {args.rounds}: must be at least 1", file=sys.stderr)
        return 2
    return None


@dataclass
class PeerRun:
    """One run of the peer table: what it times, then what it measured (filled by _measure)."""

    out: object
    dtype: np.dtype
    threads: int
    policy: TimingPolicy
    rounds: int
    ops: list
    cases: list
    peers: list
    skipped: list
    versions: list
    ref_case: Case | None  # the bandwidth reference's case: the largest, float32/float64, full runs
    quick: bool
    progress_enabled: bool
    results: list = None  # one record per (case, op)
    best_ratios: list = None
    peer_ratios: dict = None
    na_notes: dict = None  # (peer, op) -> the first reason it could not run
    errors: list = None
    differing: list = None  # (peer, op, case, largest_difference)
    reference: dict | None = None

    def __post_init__(self):
        self.results, self.best_ratios, self.errors, self.differing = [], [], [], []
        self.peer_ratios = {p.name: [] for p in self.peers}
        self.na_notes = {}

    @property
    def paired_cases(self) -> list:
        """The cases of the reference's shape (8192x16384 over axis 1 and over axis 0): they time it
        again, in turns with each memory-bound op."""
        return [c for c in self.cases if self.ref_case is not None and c.shape == self.ref_case.shape]

    @property
    def paired_ops(self) -> list:
        return [op for op in self.ops if op.onnx_name in MEMORY_BOUND_OPS]


def _load_peers(threads: int) -> tuple[list, list[str]]:
    """(the peers that load, set to ``threads``; a note for each one skipped)."""
    peers, skipped = [], []
    for peer in PEERS:
        reason = peer.load()
        if reason is None:
            peer.set_threads(threads)
            peers.append(peer)
        else:
            skipped.append(f"{peer.name}: skipped, {reason}")
    return peers, skipped


def _print_header(run: PeerRun) -> None:
    out = run.out
    print(" | ".join([*run.versions, f"threads {run.threads}", f"dtype {run.dtype.name}",
                      "quick" if run.quick else "full"]), file=out)
    for line in run.skipped:
        print(line, file=out)
    print(
        "median time per call (numred's first call, where Numba compiles, is not timed); "
        "ratio = peer time / numred time, > 1 means numred is faster; "
        "GB/s = numred input bytes / time; * = the peer's result differs from the exact one beyond "
        "rounding: not a candidate for best peer",
        file=out,
    )
    print(file=out)
    # on stderr, as the progress bar: stdout keeps only what the run measured
    estimate = estimated_seconds(run.cases, len(run.ops), 1 + len(run.peers), run.policy, run.rounds)
    print(f"{len(run.cases) * len(run.ops)} cases for {1 + len(run.peers)} implementations, {run.rounds} "
          f"round{'s' if run.rounds > 1 else ''}: about {format_duration(estimate)}, plus compiling numred's "
          "kernels where they are not in Numba's disk cache yet (a few seconds per operator and layout; "
          "`python -m numred precompile` does it ahead)", file=sys.stderr, flush=True)


def _measure(run: PeerRun) -> None:
    """Time every (case, op) in turns with the peers, and the bandwidth reference; fill run's results."""
    columns = _case_columns(run.ops, run.cases) + [("numred", 9, ">"), ("GB/s", 6, ">")]
    if run.ref_case is not None:
        columns[0] = ("op", max(columns[0][1], len(REF_LABEL)), "<")
    for p in run.peers:
        columns += [(p.name, max(10, len(p.name)), ">"), ("ratio", 6, ">")]
    table = Table(columns, run.out)
    table.header()
    run.out.flush()
    # the bar starts below the header; from here on rows go through it so it is not torn
    total = (len(run.cases) * len(run.ops) * (1 + len(run.peers)) * run.rounds + (run.ref_case is not None)
             + len(run.paired_cases) * len(run.paired_ops) * run.rounds)
    progress = make_progress(total, run.out, enabled=run.progress_enabled)
    table.write = progress.write
    # NumPy expressions may overflow on purpose (integer wrap-around, exp of large values): no
    # warnings between the table rows. errstate is per thread and does not touch the results.
    try:
        with np.errstate(all="ignore"):
            for case in run.cases:
                x = case.make(run.dtype)
                for op in run.ops:
                    table.row(_measure_op(run, case, op, x, progress))
                if case == run.ref_case:
                    table.row(_measure_reference(run, case, x, progress))
                del x
    finally:
        progress.close()


def _measure_op(run: PeerRun, case: Case, op: Op, x: np.ndarray, progress) -> list[str]:
    """Time one op on one case's input ``x`` (op_input: |x| for some) with the peers, compare their
    results with numred's exact one, record it all; the table row's cells."""
    import numred

    x = op_input(x, op)
    numred_axes = None if case.axes is None else list(case.axes)
    where = f"{case.shape_label()} axes {case.axes_label()}"
    fn = getattr(numred, op.name)
    progress.set_postfix_str(f"{op.onnx_name} {where}")
    fns = {"numred": lambda: fn(x, axes=numred_axes, keepdims=1)}
    for p in run.peers:
        try:
            fns[p.name] = p.prepare(op, x, case.explicit_axes())
        except Exception as exc:  # this peer cannot run this case
            run.na_notes.setdefault((p.name, op.onnx_name), _short(exc))
            progress.update(run.rounds)
    paired = case in run.paired_cases and op in run.paired_ops
    if paired:  # the bandwidth reference in the same turns (see the module docstring)
        fns[REF_KEY] = functools.partial(plain_parallel_sum(), x.reshape(-1))  # (a view: the cases are contiguous)
    times = times_in_turns(fns, run.policy, run.rounds, progress.update)
    t_nr = times["numred"]
    if isinstance(t_nr, Exception):  # report, keep going, exit non-zero
        run.errors.append(f"{op.onnx_name} {where}: {_short(t_nr)}")
        t_nr = None
    cells = [op.onnx_name, case.shape_label(), case.axes_label(),
             format_time(t_nr) if t_nr is not None else "ERROR", f"{x.nbytes / t_nr / 1e9:.1f}" if t_nr else "-"]
    record = {"op": op.onnx_name, "case": where, "shape": list(case.shape), "axes": numred_axes,
              "dtype": run.dtype.name, "threads": run.threads, "bytes": int(x.nbytes), "numred": t_nr,
              "numred_gbps": x.nbytes / t_nr / 1e9 if t_nr else None, "peers": {}, "peer_differences": {}}
    if paired and not isinstance(times[REF_KEY], Exception):
        record["plain_sum_in_turns"] = times[REF_KEY]
    # where integer results wrap (the contract), numred's own result is the exact one; otherwise
    # numred's result on the input as float64 (integers) or the input itself
    reference_input = x if op.int_wraps or run.dtype.kind not in "iu" else x.astype(np.float64)
    reference_result = fn(reference_input, axes=numred_axes, keepdims=1) if t_nr else None
    cells += _peer_cells(run, op, where, record, fns, times, reference_result)
    run.results.append(record)
    return cells


def _peer_cells(run: PeerRun, op: Op, where: str, record: dict, fns: dict, times: dict, reference_result) -> list:
    """Each peer's time and ratio cells for a measured case (_measure_op), its answer checked against
    numred's exact ``reference_result`` (one more call, untimed); ``record`` and ``run`` take them."""
    t_nr, peer_times, cells = record["numred"], [], []
    for p in run.peers:
        t = times.get(p.name)
        if isinstance(t, Exception):  # this peer cannot run this case
            run.na_notes.setdefault((p.name, op.onnx_name), _short(t))
            t = None
        record["peers"][p.name] = t
        ratio = t / t_nr if (t is not None and t_nr) else None
        same = True
        if ratio is not None:
            difference = largest_difference(reference_result, fns[p.name](), run.dtype)
            record["peer_differences"][p.name] = difference
            same = not peer_differs(record, p.name)
            run.peer_ratios[p.name].append(ratio)
            if same:
                peer_times.append((t, p.name))
            else:
                run.differing.append((p.name, op.onnx_name, where, difference))
        cells += [format_time(t) + ("" if same else "*"), format_ratio(ratio)]
    if peer_times and t_nr:
        t_best, best = min(peer_times)
        run.best_ratios.append(t_best / t_nr)
        record["best_peer"], record["best_ratio"] = best, t_best / t_nr
    return cells


def _measure_reference(run: PeerRun, case: Case, x: np.ndarray, progress) -> list[str]:
    """Time the plain parallel sum over ``x`` on its own (the bandwidth reference); its table row."""
    progress.set_postfix_str(f"{REF_LABEL} {case.shape_label()}")
    flat = x.reshape(-1)  # a view: the cases are contiguous
    kernel = plain_parallel_sum()
    wait_for_quiet()
    t_ref = median_time(lambda: kernel(flat), run.policy)
    progress.update()
    run.reference = {
        "kernel": "numba parallel sum, fastmath reassoc+contract, float64 accumulator",
        "shape": list(case.shape),
        "dtype": run.dtype.name,
        "threads": run.threads,
        "bytes": int(x.nbytes),
        "seconds": t_ref,
        "gbps": x.nbytes / t_ref / 1e9,
    }
    return [REF_LABEL, case.shape_label(), "all", format_time(t_ref), f"{run.reference['gbps']:.1f}"]


def _print_summary(run: PeerRun) -> None:
    """The lines under the table: the geometric means, the cases where a peer is faster, the bandwidth
    reference, and the notes (differing results, n/a peers, errors)."""
    out, dtype, results = run.out, run.dtype, run.results
    print(file=out)
    gm = geometric_mean(run.best_ratios)
    if gm is not None:
        per_peer = ", ".join(f"{name} {format_ratio(geometric_mean(r))}" for name, r in run.peer_ratios.items() if r)
        print(f"geometric mean of best-peer/numred over {len(run.best_ratios)} cases: "
              f"{format_ratio(gm)} (> 1: numred faster); per peer: {per_peer}", file=out)
    slower = _slower(run)
    if slower:
        print(f"numred is slower than the best peer in {len(slower)} of {len(run.best_ratios)} cases:", file=out)
        for r in slower:
            print(f"  {r['op']} {r['case']}: numred {format_time(r['numred'])}, "
                  f"{r['best_peer']} {format_time(r['peers'][r['best_peer']])} ({format_ratio(r['best_ratio'])})",
                  file=out)
    elif run.best_ratios:
        print("numred is at least as fast as the best peer in every case", file=out)
    reference = run.reference
    if reference is not None:
        ref_shape = tuple(reference["shape"])
        print(f"bandwidth reference ({REF_LABEL.strip('()')}, {'x'.join(map(str, ref_shape))} {dtype.name}): "
              f"{reference['gbps']:.1f} GB/s on its own; the memory-bound ops against it, timed in turns with "
              "each of them:", file=out)
        reference["numred"] = []
        for r in results:
            if tuple(r["shape"]) == ref_shape and r["op"] in MEMORY_BOUND_OPS and r["numred_gbps"]:
                t_paired = r.get("plain_sum_in_turns")
                t_plain = t_paired or reference["seconds"]
                share = t_plain / r["numred"]
                reference["numred"].append({"op": r["op"], "case": r["case"], "gbps": r["numred_gbps"],
                                            "plain_gbps": r["bytes"] / t_plain / 1e9, "share": share})
                print(f"  {r['op']} {r['case']}: {r['numred_gbps']:.1f} GB/s = {share:.0%} of the plain sum's "
                      f"{r['bytes'] / t_plain / 1e9:.1f} GB/s" + (" in the same turns" if t_paired else ""), file=out)
    for peer, opname, where, difference in run.differing:
        how = "a result of another size" if difference is None else f"{difference:.3g}x the tolerance"
        print(f"*: {peer} {opname} {where} {dtype.name}: differs from the exact result by {how} "
              "(bench.largest_difference)", file=out)
    for (peer, opname), reason in run.na_notes.items():
        print(f"n/a: {peer} {opname} {dtype.name}: {reason}", file=out)
    for e in run.errors:
        print(f"numred ERROR: {e}", file=out)


def _slower(run: PeerRun) -> list[dict]:
    return [r for r in run.results if r.get("best_ratio") is not None and r["best_ratio"] < 1]


def _report(run: PeerRun, args: argparse.Namespace) -> dict:
    """Everything the run measured, as --json writes it and --plot draws it."""
    import numba

    import numred

    return {
        "meta": {
            "versions": run.versions,
            "numred": getattr(numred, "__version__", "?"),
            "numpy": np.__version__,
            "numba": numba.__version__,
            "peer_versions": {p.name: p.version() for p in run.peers},
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "threads": run.threads,
            "dtype": run.dtype.name,
            "quick": run.quick,
            "timing": {"statistic": "median over rounds of the median seconds per call", "rounds": run.rounds,
                       "slow_call": SLOW_CALL, **vars(run.policy)},
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "peers": [p.name for p in run.peers],
        "skipped_peers": run.skipped,
        "results": run.results,
        "geometric_mean_best_peer_over_numred": geometric_mean(run.best_ratios),
        "geometric_mean_per_peer": {n: geometric_mean(r) for n, r in run.peer_ratios.items()},
        "slower_than_best_peer": [f"{r['op']} {r['case']}" for r in _slower(run)],
        "differing_results": [{"peer": p, "op": o, "case": c, "largest_difference": d} for p, o, c, d in run.differing],
        "bandwidth_reference": run.reference,
        "na": [{"peer": p, "op": o, "reason": why} for (p, o), why in run.na_notes.items()],
        "errors": run.errors,
    }


def _write_outputs(report: dict, args: argparse.Namespace, out) -> int:
    """--json and --plot: 0, or 2 when one could not be written."""
    status = 0
    json_path, plot_path = getattr(args, "json", None), getattr(args, "plot", None)
    if json_path and not write_json(json_path, report, out):
        status = 2
    if plot_path:
        try:
            plot_speedups(plot_path, report)
        except OSError as exc:
            print(f"--plot {plot_path}: {exc}", file=sys.stderr)
            status = 2
        else:
            print(f"wrote {plot_path}", file=out)
    return status


def run(args: argparse.Namespace, out=None) -> int:
    """The bench command: check the arguments, set the threads, load the peers, measure, summarise,
    write the outputs. 0 when all went well, 1 when numred failed a case, 2 for unusable arguments
    or outputs."""
    out = sys.stdout if out is None else out
    status = _check_arguments(args)
    if status is not None:
        return status

    import numba
    import numred

    threads = args.threads if args.threads is not None else numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
    except ValueError as exc:
        print(f"--threads {threads}: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "dtype_rates", False):
        return run_dtype_rates(args, out, _versions(numred, numba), threads)
    if getattr(args, "busy", False):
        from numred.tools import _bench_busy
        return _bench_busy.run(args, out, _versions(numred, numba), threads)
    if getattr(args, "dask", False):
        from numred.tools import _bench_dask
        return _bench_dask.run(args, out)

    dtype = dtype_from_name(args.dtype)
    cases = selected_cases(args)
    peers, skipped = _load_peers(threads)
    peer_run = PeerRun(
        out=out, dtype=dtype, threads=threads, policy=QUICK_POLICY if args.quick else DEFAULT_POLICY,
        rounds=getattr(args, "rounds", None) or (1 if args.quick else ROUNDS), ops=_selected_ops(args),
        cases=cases, peers=peers, skipped=skipped, versions=_versions(numred, numba, peers),
        ref_case=(max(cases, key=lambda c: c.size)
                  if not args.quick and cases and dtype.name in ("float32", "float64") else None),
        quick=bool(args.quick), progress_enabled=not getattr(args, "no_progress", False),
    )
    _print_header(peer_run)
    _measure(peer_run)
    _print_summary(peer_run)
    output_status = _write_outputs(_report(peer_run, args), args, out)
    return output_status or (1 if peer_run.errors else 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m numred bench", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
