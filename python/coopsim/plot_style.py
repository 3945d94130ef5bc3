"""The visual language of coopsim's figures (coopsim.plot): one colour per policy and one marker per
allocator, the same in every figure; line styles per variant; glyphs for runs that did not complete;
the "no data" mark; writing a figure as PNG / PDF / SVG plus its caption.

Colours and markers follow the registry's order (`coopsim list --json`, read once through the native
module or the binary), so `coop` has the same colour in every sweep's figures; names the registry does
not know (or every name, when no coopsim is found) follow after it in sorted order.
"""
import json
import os

import matplotlib
import matplotlib.pyplot as plt

from .recording.trace import output_file

matplotlib.rcParams["svg.hashsalt"] = "coopsim"  # stable SVG ids
matplotlib.rcParams["pdf.fonttype"] = 42  # TrueType in PDFs: the text stays text for journals

# Distinguishable in print and for the common colour-vision deficiencies first (Okabe-Ito), then
# tab10's remaining tones.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#56B4E9", "#8c564b", "#E69F00",
           "#7f7f7f", "#9467bd", "#bcbd22", "#17becf", "#F0E442", "#d62728", "#2ca02c", "#ff7f0e"]
MARKERS = "oDphPd*H8"  # none of the status glyphs below, no triangles
LINESTYLES = ["-", "--", ":", "-."]
HATCHES = ["", "//", "..", "xx", "\\\\", "oo", "--", "++"]
# runs that did not complete, drawn at the bottom edge of their panel
STATUS_GLYPHS = {"oom": ("x", "out of memory"), "thrash": ("^", "thrash (2x recompute limit)"),
                 "infeasible": ("s", "infeasible (recorded state > budget)"), "limit": ("+", "work limit reached")}
NO_DATA = "no data"

_registry = None


def registry():
    """{"allocators": [...], "policies": [...]} in the registry's order; empty lists when no coopsim
    binary or native module is there."""
    global _registry
    if _registry is None:
        try:
            from .sim import call
            doc = json.loads(call(["list", "--json"]))
            _registry = {k: [c["name"] for c in doc.get(k, [])] for k in ("allocators", "policies")}
        except Exception:  # plotting needs no simulator: fall back to sorted names
            _registry = {"allocators": [], "policies": []}
    return _registry


def _ordered(names, kind):
    known = registry()[kind]
    return [n for n in known if n in names] + sorted(n for n in names if n not in known)


class Style:
    """The colour of each policy, marker of each allocator and line style / hatch of each variant of
    one sweep."""

    def __init__(self, policies, allocators, variants):
        every_policy = _ordered(set(policies), "policies")
        every_allocator = _ordered(set(allocators), "allocators")
        # registry position, so a policy keeps its colour whatever else the sweep runs
        position = {n: i for i, n in enumerate(registry()["policies"])}
        extra = iter(range(len(position), len(position) + len(every_policy)))
        self.colour = {p: PALETTE[(position[p] if p in position else next(extra)) % len(PALETTE)]
                       for p in every_policy}
        apos = {n: i for i, n in enumerate(registry()["allocators"])}
        aextra = iter(range(len(apos), len(apos) + len(every_allocator)))
        self.marker = {a: MARKERS[(apos[a] if a in apos else next(aextra)) % len(MARKERS)] for a in every_allocator}
        # allocators in the per-allocator figure: grey tones and a hatch each (policies own the colours)
        greys = ["#4d4d4d", "#8c8c8c", "#bfbfbf", "#e0e0e0"]
        self.allocator_colour = {a: greys[i % len(greys)] for i, a in enumerate(every_allocator)}
        self.allocator_hatch = {a: HATCHES[(i // len(greys)) % len(HATCHES)] for i, a in enumerate(every_allocator)}
        ordered_variants = list(dict.fromkeys(variants))
        self.linestyle = {v: LINESTYLES[i % len(LINESTYLES)] for i, v in enumerate(ordered_variants)}
        self.hatch = {v: HATCHES[i % len(HATCHES)] for i, v in enumerate(ordered_variants)}


def no_data(ax, text=NO_DATA):
    """Marks a panel (or the part of it) that has nothing to draw, so that no axis is ever silently empty."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#555555",
            bbox={"boxstyle": "round", "facecolor": "#f2f2f2", "edgecolor": "#999999"})


def data_points(ax):
    """What an axis holds: points of its lines and collections, and bars of non-zero extent."""
    n = sum(len(line.get_xdata()) for line in ax.lines)
    n += sum(len(c.get_offsets()) for c in ax.collections)
    n += sum(1 for p in ax.patches if getattr(p, "get_height", None) and p.get_height() != 0)
    return n


def save(fig, out_dir, name, caption, formats, dpi, written):
    """Writes the figure in every format and its caption (NAME.txt), by coopsim's output-file rules."""
    for ext in formats:
        target = os.path.join(out_dir, f"{name}.{ext}")
        meta = {"Date": None} if ext == "svg" else ({"CreationDate": None} if ext == "pdf" else {"Software": None})
        with output_file(target) as f:  # no half-written figure is left
            fig.savefig(f, format=ext, dpi=dpi, metadata=meta, bbox_inches="tight")
        written.append(target)
    target = os.path.join(out_dir, f"{name}.txt")
    with output_file(target) as f:
        f.write(caption.encode("utf-8"))
    written.append(target)
    plt.close(fig)
