"""What ``python -m numred bench`` prints and writes: whether a peer's result agrees with the exact
one, times and ratios formatted, the table, the progress bar, the plot and the JSON file.
"""
from __future__ import annotations

import json
import math
import sys
import textwrap

import numpy as np

# How far a peer's result may lie from the reference and still be the same answer. The reference is
# numred's result, exact to the contract up to one rounding (tests/oracle.py); the tolerance is
# relative to its largest value in the case, many times the rounding error of peers that accumulate
# in the data's own dtype. For integer means and log-sum-exps the reference is numred's result on the
# same values as float64, the real value before any integer rounding (numred truncates toward zero,
# as the contract says; peers round otherwise or return floats, so LSE([-39, -85]) is -38 for numred
# and -39.0 for NumPy), and a difference below 1 is the same answer. Integer sums of squares wrap
# modulo 2**bits (the contract, and NumPy's and onnxruntime's rule): there numred's result is the
# reference, and a peer that widens instead (torch sums int32 squares in int64) differs where the
# sum wraps.
AGREEMENT_RTOL = {"float16": 2.0**-7, "bfloat16": 2.0**-4, "float32": 2.0**-12, "float64": 2.0**-30}


def result_values(result) -> np.ndarray:
    """A result as a flat float64 array: onnxruntime returns a list of arrays, torch a tensor."""
    if isinstance(result, (list, tuple)):
        result = result[0]
    if hasattr(result, "detach"):  # a torch tensor (its bfloat16 has no NumPy dtype)
        result = result.detach().double().numpy()
    return np.asarray(result, dtype=np.float64).reshape(-1)


def largest_difference(reference, peer_result, dtype: np.dtype) -> float | None:
    """The largest difference between a peer's result and the reference, in units of the tolerance
    (AGREEMENT_RTOL; 1 or more: a different answer), or None when the peer's result does not even
    have numred's size. NaN must meet NaN."""
    expected = result_values(reference)
    got = result_values(peer_result)
    if got.size != expected.size:
        return None
    nan = np.isnan(expected)
    if not np.array_equal(nan, np.isnan(got)):
        return math.inf
    expected, got = expected[~nan], got[~nan]
    if not expected.size:
        return 0.0
    scale = float(np.max(np.abs(expected)))
    tolerance = 1.0 if dtype.kind in "iu" else AGREEMENT_RTOL[dtype.name] * max(scale, 1e-30)
    with np.errstate(invalid="ignore"):  # inf - inf where both overflowed alike
        gaps = np.where(got == expected, 0.0, np.abs(got - expected))
    return float(np.max(gaps)) / tolerance


# ----------------------------------------------------------------------------------- formatting


def peer_differs(record: dict, peer: str) -> bool:
    """Whether a result record's peer gave another answer (largest_difference None or 1 or more);
    a peer that did not run is not marked."""
    differences = record.get("peer_differences", {})
    return peer in differences and (differences[peer] is None or differences[peer] >= 1.0)


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= 0.9995 * scale or unit == "ns":
            v = seconds / scale
            digits = 2 if v < 9.995 else 1 if v < 99.95 else 0
            return f"{v:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """A rough duration for people: '40 s', '3 min', '1 h 10 min'."""
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def format_ratio(r: float | None) -> str:
    if r is None:
        return "n/a"
    return f"{r:.2f}x" if r < 9.995 else f"{r:.1f}x" if r < 99.95 else f"{r:.0f}x"


class Table:
    """Fixed-width columns, printed row by row so long runs show progress."""

    def __init__(self, columns: list[tuple[str, int, str]], out, write=None):
        self.columns = columns  # (title, width, "<" or ">")
        self.out = out
        # how a row reaches ``out``; the progress bar swaps in one that clears and redraws the bar
        self.write = write or (lambda line: print(line, file=self.out, flush=True))

    def _line(self, cells) -> str:
        parts = [f"{c:{align}{w}}" for c, (_, w, align) in zip(cells, self.columns)]
        return "  ".join(parts).rstrip()

    def header(self) -> None:
        print(self._line([t for t, _, _ in self.columns]), file=self.out)
        print("  ".join("-" * w for _, w, _ in self.columns), file=self.out)

    def row(self, cells) -> None:
        self.write(self._line(cells))


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 110 else text[:107] + "..."


# ------------------------------------------------------------------------------------ progress


class _NoProgress:
    """Stands in for a tqdm bar when there is none: rows are printed as they come."""

    def __init__(self, out):
        self.out = out

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def write(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def close(self) -> None:
        pass


class _TqdmProgress:
    """A tqdm bar on stderr; table rows go to ``out`` through tqdm.write so the bar is not torn."""

    def __init__(self, tqdm_cls, total: int, out, desc: str, unit: str):
        self.out = out
        self._tqdm = tqdm_cls
        self.bar = tqdm_cls(
            total=total, file=sys.stderr, desc=desc, unit=unit, leave=False,
            dynamic_ncols=True
        )

    def update(self, n: int = 1) -> None:
        self.bar.update(n)

    def set_postfix_str(self, s: str) -> None:
        self.bar.set_postfix_str(s, refresh=True)

    def write(self, line: str) -> None:
        self._tqdm.write(line, file=self.out)
        self.out.flush()

    def close(self) -> None:
        self.bar.close()


def make_progress(total: int, out, enabled: bool, desc: str = "timing blocks", unit: str = "block"):
    """A tqdm bar when tqdm is importable, ``enabled`` and stderr is a terminal; else no bar.

    ``unit`` names what one step counts: a block is one implementation timed on one case in one round.
    """
    if not enabled:
        return _NoProgress(out)
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return _NoProgress(out)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoProgress(out)
    return _TqdmProgress(tqdm, total, out, desc, unit)


# ---------------------------------------------------------------------------------------- plot


MATPLOTLIB_MISSING = (
    '--plot needs matplotlib, which is not installed: pip install "numred[bench]"'
)


def check_matplotlib() -> str | None:
    """None when matplotlib is importable, else the message to print."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return MATPLOTLIB_MISSING
    return None


def _peer_bars(ax, op, peer, cases, by_key, j, bar_h, color, labelled) -> None:
    """One peer's bars in ``op``'s panel (plot_speedups): peer time / numred time per case, from 1,
    with its value; "n/a" where the peer did not run."""
    group_h = 0.8
    ys, widths, differs, labels_na = [], [], [], []
    for i, case in enumerate(cases):
        r = by_key.get((op, case))
        y = i - group_h / 2 + (j + 0.5) * bar_h
        t_p = r["peers"].get(peer) if r else None
        if r and r["numred"] and t_p:
            ys.append(y)
            widths.append(t_p / r["numred"])
            differs.append(peer_differs(r, peer))
        else:
            labels_na.append(y)
    # bars start at 1 so that slower-than-numred peers point left; a peer whose answer differs
    # is hatched and its label starred, as in the table
    bars = ax.barh(ys, [w - 1.0 for w in widths], left=1.0, height=bar_h * 0.92, color=color,
                   label=peer if labelled else None)
    for bar, wrong in zip(bars, differs):
        if wrong:
            bar.set_hatch("////")
            bar.set_edgecolor("white")
    for y, w, wrong in zip(ys, widths, differs):
        ax.text(w * (1.04 if w >= 1 else 1 / 1.04), y, format_ratio(w) + ("*" if wrong else ""),
                va="center", ha="left" if w >= 1 else "right", fontsize=6.5)
    for y in labels_na:
        ax.text(1.04, y, "n/a", va="center", ha="left", fontsize=6.5, color="0.5")


def plot_speedups(path: str, report: dict) -> None:
    """Grouped horizontal bars: one panel per op, one group per case, one bar per peer.

    The bar is peer time / numred time on a log axis with a line at 1: right of it numred is
    faster. Drawn with the Agg canvas directly, without pyplot, so no global backend is touched.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    results = report["results"]
    peers = report["peers"]
    ops = list(dict.fromkeys(r["op"] for r in results))
    cases = list(dict.fromkeys(r["case"] for r in results))
    by_key = {(r["op"], r["case"]): r for r in results}

    n_peers = max(1, len(peers))
    group_h = 0.8
    bar_h = group_h / n_peers
    height = 1.9 + len(cases) * (0.16 + 0.2 * n_peers)
    fig = Figure(figsize=(4.6 * len(ops) + 1.6, height), layout="constrained")
    FigureCanvasAgg(fig)
    axs = fig.subplots(1, len(ops), sharey=True, squeeze=False)[0]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]

    ratios_all = [r["peers"][p] / r["numred"] for r in results for p in peers if r["numred"] and r["peers"].get(p)]
    # room for the value labels beyond the bar ends
    lo = min([*ratios_all, 1.0]) / 4
    hi = max([*ratios_all, 1.0]) * 4
    for ax, op in zip(axs, ops):
        for j, peer in enumerate(peers):
            _peer_bars(ax, op, peer, cases, by_key, j, bar_h, colors[j % len(colors)], ax is axs[0])
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_title(op, fontsize=10)
        ax.set_xlabel("peer time / numred time (> 1: numred faster)", fontsize=8)
        ax.grid(axis="x", which="major", alpha=0.3)
        ax.tick_params(labelsize=7.5)
    axs[0].set_yticks(range(len(cases)))
    axs[0].set_yticklabels(cases)
    axs[0].invert_yaxis()
    m = report["meta"]
    width_chars = int(fig.get_figwidth() * 11)
    title = [
        f"numred speedup over peers, {m['dtype']}, {m['threads']} thread(s), "
        f"{'quick' if m['quick'] else 'full'} run",
        *textwrap.wrap(", ".join(m["versions"]), width_chars),
    ]
    if any(peer_differs(r, p) for r in results for p in peers):
        title.append("hatched, *: the peer's result differs from the exact one beyond rounding")
    fig.suptitle("\n".join(title), fontsize=9.5)
    if peers:
        fig.legend(loc="outside lower center", ncols=len(peers), fontsize=8)
    fig.savefig(path, dpi=120)


def write_json(path: str, report: dict, out) -> bool:
    """Write ``report`` to the --json file; False (after saying why) when it cannot be written."""
    try:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    except OSError as exc:
        print(f"--json {path}: {exc}", file=sys.stderr)
        return False
    print(f"wrote {path}", file=out)
    return True
