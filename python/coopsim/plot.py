"""Figures from a `coopsim sweep` output directory (docs/sweep.md, docs/user-guide.md).

    coopsim.plot.figures(SWEEP_DIR, output=None, overhead="compute") -> [paths written]
    python3 scripts/plot.py SWEEP_DIR [-o OUT_DIR] [--overhead compute|recompute]   (the same, as a command)

Reads SWEEP_DIR/results.csv (and SWEEP_DIR/minbudget.csv when present) and writes, as PNG and
SVG, into OUT_DIR (default SWEEP_DIR/plots):

  overhead_vs_memory   compute overhead against memory ratio (budget / no-eviction peak), one
                       subplot per trace, one line per policy (and variant, and allocator when the
                       sweep has several): the Coop paper's main figure. Completed runs only.
  fragmentation        Coop's fragmentation rate (mean free / arena at allocations that needed
                       eviction) and reserved fragmentation (1 - allocated / reserved at the
                       reserved peak), mean over completed runs, per trace and series.
  search               eviction search work: mean pieces/tensors examined per completed run
                       (the deterministic search_scanned column, not wall-clock latency).
  peak_reserved        peak reserved bytes per allocator for each trace, at the largest budget
                       every allocator completed (keep runs when the sweep has them).
  minbudget            minimum budget as a ratio of the peak per trace and series
                       (minbudget.csv; skipped when the sweep has no searches).

Needs python3 and matplotlib (Debian: python3-matplotlib); the command uses the Agg backend (no display).
The figures depend only on the CSV files: the same sweep gives the same pictures.
"""
import argparse
import csv
import os
import sys
from collections import OrderedDict

from .recording.trace import output_file

import matplotlib
import matplotlib.pyplot as plt

matplotlib.rcParams["svg.hashsalt"] = "coopsim"  # stable SVG ids

MARKERS = "osD^v<>pXh*"


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def trace_name(path):
    base = os.path.basename(path)
    for ext in (".gz", ".jsonl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def series_label(row, several_allocators):
    label = row["policy"]
    if row["variant"] != "base":
        label += f" ({row['variant']})"
    if several_allocators:
        label += f" / {row['allocator']}"
    return label


def ordered(values):
    return list(OrderedDict.fromkeys(values))


def save(fig, out_dir, name, written):
    for ext in ("png", "svg"):
        target = os.path.join(out_dir, f"{name}.{ext}")
        meta = {"Date": None} if ext == "svg" else {"Software": None}
        with output_file(target) as f:  # coopsim's output rules: no half-written figure is left
            fig.savefig(f, format=ext, dpi=100, metadata=meta)
        written.append(target)
    plt.close(fig)


def grid(n):
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def number(text):
    return float(text) if text not in ("", None) else None


def overhead_figure(rows, traces, labels, column, out_dir, written):
    fig, axes = grid(len(traces))
    for ax, trace in zip(axes, traces):
        for i, label in enumerate(labels):
            pts = sorted((float(r["memory_ratio_of_peak"]), float(r[column])) for r in rows
                         if r["_trace"] == trace and r["_series"] == label and r["status"] == "completed")
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=MARKERS[i % len(MARKERS)], markersize=3,
                        linewidth=1, label=label)
        ax.set_title(trace, fontsize=9)
        ax.set_xlabel("memory ratio (budget / peak)", fontsize=8)
        ax.set_ylabel(column.replace("_", " "), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, linewidth=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(6, len(names)), fontsize=8, frameon=False)
    fig.suptitle("Compute overhead against memory ratio (completed runs)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    save(fig, out_dir, "overhead_vs_memory", written)


def bars(ax, traces, labels, value, ylabel, log=False):
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs, ys = [], []
        for t, trace in enumerate(traces):
            v = value(trace, label)
            if v is not None:
                xs.append(t + (i - (len(labels) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width=width, label=label)
    ax.set_xticks(range(len(traces)))
    ax.set_xticklabels(traces, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    if log:
        ax.set_yscale("log")
    ax.grid(True, axis="y", linewidth=0.3)


def bar_figure(name, title, panels, traces, labels, out_dir, written):
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(6, 1.1 * len(traces) + 3), 3.2 * len(panels)), squeeze=False)
    for ax, (ylabel, value, log) in zip(axes.flat, panels):
        bars(ax, traces, labels, value, ylabel, log)
    axes.flat[0].legend(fontsize=7, ncol=min(4, len(labels)), frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save(fig, out_dir, name, written)


class PlotError(ValueError):
    """The sweep directory cannot be plotted (no results.csv, or no runs in it)."""


def figures(sweep_dir, output=None, overhead="compute"):
    """Writes the figures of a sweep output directory (PNG and SVG each) into output (default
    SWEEP_DIR/plots) and returns their paths. overhead: 'compute' (simulated / trace time) or
    'recompute' (Coop's clock)."""
    if overhead not in ("compute", "recompute"):
        raise ValueError(f"overhead must be 'compute' or 'recompute', not {overhead!r}")
    sweep_dir = os.fspath(sweep_dir)
    results = os.path.join(sweep_dir, "results.csv")
    if not os.path.exists(results):
        raise PlotError(f"{results}: missing (not a sweep output directory)")
    rows = read_csv(results)
    if not rows:
        raise PlotError(f"{results}: no runs")
    out_dir = os.fspath(output) if output else os.path.join(sweep_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    several = len({r["allocator"] for r in rows}) > 1
    for r in rows:
        r["_trace"] = trace_name(r["trace"])
        r["_series"] = series_label(r, several)
    traces = ordered(r["_trace"] for r in rows)
    labels = ordered(r["_series"] for r in rows)
    done = [r for r in rows if r["status"] == "completed"]
    written = []

    overhead_figure(rows, traces, labels, f"{overhead}_overhead", out_dir, written)
    def mean_of(column, scale=1.0):
        def value(trace, label):
            m = mean([number(r[column]) for r in done if r["_trace"] == trace and r["_series"] == label])
            return None if m is None else m * scale
        return value

    bar_figure("fragmentation", "Fragmentation (mean over completed runs)",
               [("Coop fragmentation rate (%)", mean_of("coop_fragmentation", 100.0), False),
                ("reserved fragmentation (%)", mean_of("reserved_fragmentation", 100.0), False)],
               traces, labels, out_dir, written)
    has_scan = any(number(r["search_scanned"]) for r in done)
    bar_figure("search", "Eviction search work (pieces or tensors examined per run)",
               [("search scanned (mean per run)", mean_of("search_scanned"), has_scan)], traces, labels, out_dir, written)

    allocators = ordered(r["allocator"] for r in rows)
    # one policy and variant: keep when the sweep has it, else the first of each
    policy = "keep" if any(r["policy"] == "keep" for r in rows) else rows[0]["policy"]
    base = [r for r in done if r["variant"] == rows[0]["variant"] and r["policy"] == policy]

    def reserved(trace, allocator):
        # the largest budget at which every allocator completed on this trace
        per = {}
        for r in base:
            if r["_trace"] == trace:
                per.setdefault(r["allocator"], {})[int(r["budget_bytes"])] = int(r["peak_reserved_bytes"])
        common = set.intersection(*(set(v) for v in per.values())) if len(per) == len(allocators) else set()
        if not common or allocator not in per:
            return None
        return per[allocator][max(common)] / 2**30
    bar_figure("peak_reserved", f"Peak reserved memory per allocator ({policy}, largest budget all completed)",
               [("peak reserved (GiB)", reserved, False)], traces, allocators, out_dir, written)

    minbudget = os.path.join(sweep_dir, "minbudget.csv")
    if os.path.exists(minbudget):
        mb = read_csv(minbudget)
        for r in mb:
            r["_trace"] = trace_name(r["trace"])
            r["_series"] = series_label(r, several)
        mb_labels = ordered(r["_series"] for r in mb)

        def ratio(trace, label):
            vals = [number(r["ratio_of_peak"]) for r in mb if r["_trace"] == trace and r["_series"] == label]
            return vals[0] if vals else None
        bar_figure("minbudget", "Minimum budget that completes (ratio of the no-eviction peak)",
                   [("minimum budget / peak", ratio, False)], ordered(r["_trace"] for r in mb), mb_labels, out_dir,
                   written)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plot.py", description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", help="a `coopsim sweep` (or `coopsim merge`) output directory")
    ap.add_argument("-o", "--output", help="figure directory (default: SWEEP_DIR/plots)")
    ap.add_argument("--overhead", choices=("compute", "recompute"), default="compute",
                    help="compute_overhead (simulated / trace time; default) or recompute_overhead (Coop's clock)")
    args = ap.parse_args(argv)
    plt.switch_backend("Agg")  # no display needed
    try:
        written = figures(args.sweep_dir, args.output, args.overhead)
    except PlotError as e:
        sys.exit(f"plot.py: error: {e}")
    for w in written:
        print(w)
