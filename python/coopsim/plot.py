"""Figures from a `coopsim sweep` output directory (docs/sweep.md, docs/user-guide.md).

    coopsim.plot.figures(SWEEP_DIR, output=None, overhead="compute", dpi=200, formats=("png", "pdf", "svg"))
        -> [paths written]
    python3 scripts/plot.py SWEEP_DIR [-o OUT_DIR] [--overhead compute|recompute] [--dpi N] [--format png,pdf,svg]

Reads SWEEP_DIR/results.csv (and SWEEP_DIR/minbudget.csv, sweep.json when present) and writes each
figure in every format, a caption NAME.txt (what was run, what is drawn, each panel's points) and
figures.json (the same, as data) into OUT_DIR (default SWEEP_DIR/plots):

  overhead_vs_memory   compute overhead against memory ratio (budget / no-eviction peak), one panel
                       per trace, one line per policy / allocator / variant. Runs that did not
                       complete are drawn at the panel's bottom edge with their own glyph (x oom,
                       ^ thrash, s infeasible, + work limit). The y axis is logarithmic in a panel
                       whose overheads span a factor of 10 or more.
  fragmentation        Coop's fragmentation rate (mean free / arena at allocations that needed
                       eviction) and reserved fragmentation (1 - allocated / reserved at the
                       reserved peak), mean over completed runs, per trace and series.
  search               eviction search work: mean pieces/tensors examined per completed run
                       (the deterministic search_scanned column, not wall-clock latency).
  peak_reserved        peak reserved bytes per allocator for each trace, at the largest budget
                       every allocator completed (keep's runs when the sweep has them), else at
                       each allocator's own largest completed budget (the caption says which).
  minbudget            minimum budget as a ratio of the peak per trace and series
                       (minbudget.csv; skipped when the sweep has no searches).

Style (coopsim.plot_style): one colour per policy and one marker per allocator in every figure,
line style (bars: hatch) per variant, legends outside the panels, "no data" where a panel or a
bar has nothing to show (never an empty axis or a bar that reads as zero).

Needs python3 and matplotlib (Debian: python3-matplotlib); the command uses the Agg backend (no display).
The figures depend only on the CSV files: the same sweep gives the same pictures.
"""
import argparse
import csv
import json
import os
import sys
from collections import Counter, OrderedDict

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from .plot_style import NO_DATA, STATUS_GLYPHS, Style, data_points, no_data, save
from .recording.trace import output_file

FORMATS = ("png", "pdf", "svg")
FIGURES_SCHEMA_VERSION = 1  # figures.json; docs/architecture.md, "JSON documents and their schema version"


class PlotError(ValueError):
    """The sweep directory cannot be plotted (no results.csv, or no runs in it)."""


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def trace_name(path):
    base = os.path.basename(path)
    for ext in (".gz", ".jsonl", ".json"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def ordered(values):
    return list(OrderedDict.fromkeys(values))


def number(text):
    return float(text) if text not in ("", None) else None


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


class Sweep:
    """The rows of a sweep with their series: (policy, allocator, variant), labelled as briefly as the
    sweep allows."""

    def __init__(self, sweep_dir):
        results = os.path.join(sweep_dir, "results.csv")
        if not os.path.exists(results):
            raise PlotError(f"{results}: missing (not a sweep output directory)")
        self.rows = read_csv(results)
        if not self.rows:
            raise PlotError(f"{results}: no runs")
        self.dir = sweep_dir
        for r in self.rows:
            r["_trace"] = trace_name(r["trace"])
            r["_key"] = (r["policy"], r["allocator"], r["variant"])
        self.traces = ordered(r["_trace"] for r in self.rows)
        self.keys = ordered(r["_key"] for r in self.rows)
        self.several_allocators = len({k[1] for k in self.keys}) > 1
        self.several_variants = len({k[2] for k in self.keys}) > 1
        self.style = Style([k[0] for k in self.keys], [k[1] for k in self.keys], [k[2] for k in self.keys])
        manifest = os.path.join(sweep_dir, "sweep.json")
        self.manifest = json.load(open(manifest, encoding="utf-8")) if os.path.exists(manifest) else {}
        mb = os.path.join(sweep_dir, "minbudget.csv")
        self.searches = read_csv(mb) if os.path.exists(mb) else None
        for r in self.searches or []:
            r["_trace"] = trace_name(r["trace"])
            r["_key"] = (r["policy"], r["allocator"], r["variant"])

    def label(self, key):
        policy, allocator, variant = key
        out = policy
        if self.several_allocators:
            out += f" / {allocator}"
        if variant != "base":
            out += f" ({variant})"
        return out

    def describe(self):
        """The caption's paragraph on what was run."""
        statuses = Counter(r["status"] for r in self.rows)
        budgets = sorted({int(r["budget_bytes"]) for r in self.rows})
        ratios = sorted({float(r["memory_ratio_of_peak"]) for r in self.rows})
        lines = [f"Sweep: {self.dir}" + (f" (config hash {self.manifest['config_hash']}, coopsim "
                                          f"{self.manifest.get('coopsim_version', '?')})" if self.manifest else ""),
                 f"Traces: {', '.join(self.traces)}",
                 f"Allocators: {', '.join(ordered(k[1] for k in self.keys))}; policies: "
                 f"{', '.join(ordered(k[0] for k in self.keys))}; variants: {', '.join(ordered(k[2] for k in self.keys))}",
                 f"Budgets: {len(budgets)} distinct, memory ratio {ratios[0]:.3g} to {ratios[-1]:.3g} of each trace's "
                 f"no-eviction peak",
                 f"Runs: {len(self.rows)} (" + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + ")"]
        return "\n".join(lines) + "\n"


def _bottom_glyphs(ax, sweep, rows, key):
    """Runs of one series that did not complete, at the panel's bottom edge."""
    style, shown = sweep.style, Counter()
    edge = blended_transform_factory(ax.transData, ax.transAxes)
    for status, (glyph, _) in STATUS_GLYPHS.items():
        xs = sorted(float(r["memory_ratio_of_peak"]) for r in rows if r["status"] == status)
        if xs:
            ax.scatter(xs, [0.045] * len(xs), transform=edge, marker=glyph, s=22, clip_on=False, zorder=3,
                       color=style.colour[key[0]], linewidths=1.0 if glyph in "x+" else 0.5,
                       facecolors="none" if glyph == "s" else None)
            shown[status] += len(xs)
    return shown


def _leave_room(ax, ys, log, xs):
    """Limits that show every run of the panel: the x range of all its budgets, and a strip under the
    completed runs' overheads for the glyphs of the others."""
    lo, hi = min(xs), max(xs)
    pad = 0.04 * (hi - lo) if hi > lo else 0.05 * max(hi, 1e-9)
    ax.set_xlim(lo - pad, hi + pad)
    if not ys:
        return
    lo, hi = min(ys), max(ys)
    if log:
        ratio = hi / lo
        ax.set_ylim(lo / ratio ** 0.15, hi * ratio ** 0.05)
    else:
        span = hi - lo if hi > lo else 0.1 * max(abs(hi), 1e-9)
        ax.set_ylim(lo - 0.15 * span, hi + 0.05 * span)


def overhead_figure(sweep, column, out, formats, dpi, written, report):
    n = len(sweep.traces)
    cols = min(3, n)
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.2 * rows_n), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    panels, statuses_seen = [], set()
    for ax, trace in zip(axes.flat, sweep.traces):
        done_y, counts = [], Counter()
        for key in sweep.keys:
            rows = [r for r in sweep.rows if r["_trace"] == trace and r["_key"] == key]
            pts = sorted((float(r["memory_ratio_of_peak"]), float(r[column])) for r in rows if r["status"] == "completed")
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=sweep.style.colour[key[0]],
                        marker=sweep.style.marker[key[1]], linestyle=sweep.style.linestyle[key[2]], markersize=3.5,
                        linewidth=1.1)
                done_y += [p[1] for p in pts]
            shown = _bottom_glyphs(ax, sweep, rows, key)
            statuses_seen |= set(shown)
            counts.update(shown)
            counts["completed"] += len(pts)
        log = bool(done_y) and min(done_y) > 0 and max(done_y) / min(done_y) >= 10
        if log:
            ax.set_yscale("log")
        _leave_room(ax, done_y, log, [float(r["memory_ratio_of_peak"]) for r in sweep.rows if r["_trace"] == trace])
        if not done_y:
            no_data(ax, NO_DATA + ": no run completed")
        ax.set_title(trace, fontsize=9)
        ax.set_xlabel("memory ratio (budget / peak)", fontsize=8)
        ax.set_ylabel(column.replace("_", " ") + (" (log)" if log else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, linewidth=0.3, which="both" if log else "major")
        panels.append({"title": trace, "points": data_points(ax), "log_y": log, "runs": dict(sorted(counts.items()))})
    handles = [Line2D([], [], color=sweep.style.colour[k[0]], marker=sweep.style.marker[k[1]],
                      linestyle=sweep.style.linestyle[k[2]], markersize=4, label=sweep.label(k)) for k in sweep.keys]
    handles += [Line2D([], [], color="#333333", marker=STATUS_GLYPHS[s][0], linestyle="none", markersize=5,
                       markerfacecolor="none" if s == "infeasible" else None, label=STATUS_GLYPHS[s][1])
                for s in STATUS_GLYPHS if s in statuses_seen]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle(f"{column.replace('_', ' ').capitalize()} against memory ratio", fontsize=10)
    fig.tight_layout()
    caption = (f"{column.replace('_', ' ').capitalize()} against memory ratio (budget / the trace's no-eviction peak of "
               f"live bytes), one panel per trace; lines join completed runs; runs that did not complete are "
               f"drawn at the bottom edge of their panel.\n")
    finish("overhead_vs_memory", fig, sweep, caption, panels, out, formats, dpi, written, report)


def bar_figure(name, title, what, sweep, groups, series, value, panels_spec, out, formats, dpi, written, report,
               colour=None, hatch=None, label=None):
    """Bars: one group per trace, one bar per series; a series with no value at a trace gets a "no data"
    mark there instead of a bar. A panel whose every value is zero or missing (e.g. search work in a
    sweep without eviction) is left out and the caption says so; a figure with no panel left is not
    written (figures.json says why)."""
    empty = [spec for spec in panels_spec
             if not any(value(g, s, spec[1]) for g in groups for s in series)]
    panels_spec = [spec for spec in panels_spec if spec not in empty]
    left_out = "".join(f"Not drawn: {spec[0]}: zero or missing in every run of the sweep.\n" for spec in empty)
    if not panels_spec:
        report[name] = {"files": [], "panels": [], "skipped": left_out.strip()}
        return
    what += " " + left_out if left_out else ""
    fig, axes = plt.subplots(len(panels_spec), 1, figsize=(max(6.5, 1.2 * len(groups) + 3), 3.0 * len(panels_spec)),
                             squeeze=False)
    width = 0.8 / max(1, len(series))
    panels = []
    for ax, (ylabel, column, log) in zip(axes.flat, panels_spec):
        missing = 0
        for i, s in enumerate(series):
            for t, g in enumerate(groups):
                x = t + (i - (len(series) - 1) / 2) * width
                v = value(g, s, column)
                if v is None:
                    ax.text(x, 0.02, NO_DATA, rotation=90, ha="center", va="bottom", fontsize=7, color="#444444",
                            transform=blended_transform_factory(ax.transData, ax.transAxes))
                    missing += 1
                else:
                    ax.bar([x], [v], width=width, color=colour(s), hatch=hatch(s), edgecolor="#333333", linewidth=0.4)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        drawn = data_points(ax)
        if log and drawn:
            ax.set_yscale("log")
        if not drawn:
            no_data(ax)
        ax.grid(True, axis="y", linewidth=0.3)
        panels.append({"title": ylabel, "points": drawn, "missing": missing})
    handles = [Patch(facecolor=colour(s), hatch=hatch(s), edgecolor="#333333", label=label(s)) for s in series]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    finish(name, fig, sweep, what + f" \"{NO_DATA}\" marks a series with no value at a trace.\n", panels, out, formats, dpi,
           written, report)


def finish(name, fig, sweep, what, panels, out, formats, dpi, written, report):
    lines = [f"Figure {name}: {what}", sweep.describe(), "Panels:"]
    for p in panels:
        extra = ", ".join(f"{k} {v}" for k, v in p.items() if k not in ("title", "points"))
        lines.append(f"  {p['title']}: {p['points']} points drawn" + (f" ({extra})" if extra else "") +
                     (f" -- {NO_DATA}" if not p["points"] else ""))
    save(fig, out, name, "\n".join(lines) + "\n", formats, dpi, written)
    report[name] = {"files": [f"{name}.{e}" for e in formats] + [f"{name}.txt"], "panels": panels}


def peak_reserved(sweep, out, formats, dpi, written, report):
    done = [r for r in sweep.rows if r["status"] == "completed"]
    allocators = ordered(k[1] for k in sweep.keys)
    policy = "keep" if any(k[0] == "keep" for k in sweep.keys) else sweep.keys[0][0]
    variant = sweep.keys[0][2]
    base = [r for r in done if r["policy"] == policy and r["variant"] == variant]
    fallback = []

    def value(trace, allocator, _column):
        per = {}
        for r in base:
            if r["_trace"] == trace:
                per.setdefault(r["allocator"], {})[int(r["budget_bytes"])] = int(r["peak_reserved_bytes"])
        if allocator not in per:
            return None
        common = set.intersection(*(set(v) for v in per.values())) if len(per) == len(allocators) else set()
        if common:
            return per[allocator][max(common)] / 2**30
        if (trace, allocator) not in fallback:
            fallback.append((trace, allocator))
        return per[allocator][max(per[allocator])] / 2**30
    st = sweep.style
    bar_figure("peak_reserved", f"Peak reserved memory per allocator ({policy})",
               f"Peak reserved bytes (GiB) per allocator under {policy} ({variant}), at the largest budget every "
               f"allocator completed on the trace.", sweep, sweep.traces, allocators, value,
               [("peak reserved (GiB)", None, False)], out, formats, dpi, written, report,
               colour=lambda a: st.allocator_colour[a], hatch=lambda a: st.allocator_hatch[a], label=lambda a: a)
    if fallback:
        with open(os.path.join(out, "peak_reserved.txt"), "a", encoding="utf-8") as f:
            f.write("At each allocator's own largest completed budget (no budget where all completed): " +
                    ", ".join(f"{t} / {a}" for t, a in fallback) + "\n")


def figures(sweep_dir, output=None, overhead="compute", dpi=200, formats=FORMATS):
    """Writes the figures of a sweep output directory into output (default SWEEP_DIR/plots) and
    returns the paths written. overhead: 'compute' (simulated / trace time) or 'recompute' (Coop's
    clock); formats: any of png, pdf, svg; dpi: for PNG."""
    if overhead not in ("compute", "recompute"):
        raise ValueError(f"overhead must be 'compute' or 'recompute', not {overhead!r}")
    formats = tuple(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"formats must be some of {', '.join(FORMATS)}, not {formats!r}")
    if not isinstance(dpi, (int, float)) or isinstance(dpi, bool) or not 20 <= dpi <= 2400:
        raise ValueError(f"dpi must be a number from 20 to 2400, not {dpi!r}")
    sweep = Sweep(os.fspath(sweep_dir))
    out = os.fspath(output) if output else os.path.join(sweep.dir, "plots")
    os.makedirs(out, exist_ok=True)
    written, report = [], {}
    done = [r for r in sweep.rows if r["status"] == "completed"]
    overhead_figure(sweep, f"{overhead}_overhead", out, formats, dpi, written, report)

    def mean_of(trace, key, column):
        m = mean([number(r[column]) for r in done if r["_trace"] == trace and r["_key"] == key])
        return None if m is None else m * (100.0 if column.endswith("fragmentation") else 1.0)
    st = sweep.style
    colour, hatch = (lambda k: st.colour[k[0]]), (lambda k: st.hatch[k[2]])
    bar_figure("fragmentation", "Fragmentation (mean over completed runs)",
               "Coop's fragmentation rate and reserved fragmentation (%), mean over the completed runs of each series.",
               sweep, sweep.traces, sweep.keys, mean_of,
               [("Coop fragmentation rate (%)", "coop_fragmentation", False),
                ("reserved fragmentation (%)", "reserved_fragmentation", False)], out, formats, dpi, written, report,
               colour=colour, hatch=hatch, label=sweep.label)
    has_scan = any(number(r["search_scanned"]) for r in done)
    bar_figure("search", "Eviction search work (pieces or tensors examined per run)",
               "Pieces or tensors the eviction searches examined, mean per completed run (deterministic counts).",
               sweep, sweep.traces, sweep.keys, mean_of, [("search scanned (mean per run)", "search_scanned", has_scan)],
               out, formats, dpi, written, report, colour=colour, hatch=hatch, label=sweep.label)
    peak_reserved(sweep, out, formats, dpi, written, report)
    if sweep.searches is not None:
        keys = ordered(r["_key"] for r in sweep.searches)

        def ratio(trace, key, _column):
            vals = [number(r["ratio_of_peak"]) for r in sweep.searches if r["_trace"] == trace and r["_key"] == key]
            return vals[0] if vals and vals[0] is not None else None
        bar_figure("minbudget", "Minimum budget that completes (ratio of the no-eviction peak)",
                   "The smallest budget each series completes in (minbudget.csv), as a ratio of the trace's peak.",
                   sweep, ordered(r["_trace"] for r in sweep.searches), keys, ratio,
                   [("minimum budget / peak", None, False)], out, formats, dpi, written, report,
                   colour=colour, hatch=hatch, label=sweep.label)
    target = os.path.join(out, "figures.json")
    with output_file(target) as f:
        # schema_version: as in every JSON document coopsim writes (docs/architecture.md)
        document = {"schema_version": FIGURES_SCHEMA_VERSION, "figures": report}
        f.write((json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    written.append(target)
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(prog="plot.py", description=__doc__.split("\n")[0])
    ap.add_argument("sweep_dir", help="a `coopsim sweep` (or `coopsim merge`) output directory")
    ap.add_argument("-o", "--output", help="figure directory (default: SWEEP_DIR/plots)")
    ap.add_argument("--overhead", choices=("compute", "recompute"), default="compute",
                    help="compute_overhead (simulated / trace time; default) or recompute_overhead (Coop's clock)")
    ap.add_argument("--dpi", type=float, default=200, help="PNG resolution (default 200)")
    ap.add_argument("--format", default=",".join(FORMATS),
                    help=f"comma list of {', '.join(FORMATS)} (default: all three)")
    args = ap.parse_args(argv)
    plt.switch_backend("Agg")  # no display needed
    try:
        written = figures(args.sweep_dir, args.output, args.overhead, args.dpi,
                          [f for f in args.format.split(",") if f])
    except (PlotError, ValueError) as e:
        sys.exit(f"plot.py: error: {e}")
    for w in written:
        print(w)
