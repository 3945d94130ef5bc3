#!/usr/bin/env python3
"""Coop's evaluation as OneFlow ran it: the eight panels (compute overhead against memory ratio,
Coop / DTE / DTR), the ablation panel, and the tables of docs/results-coop-paper.md.

    scripts/coop_paper.py [--coopsim build/src/coopsim] [--figure docs/figures/coop-paper.png]
                          [--tables FILE.md] [--jobs N] [--harness-rules [--python PY]]

Sweeps configs/coop-paper/<model>.json (traces/oneflow/<model>.jsonl.gz, recorded with
`record_pytorch.py --harness oneflow`) with `coopsim sweep` and arranges the results; every number
comes from the sweeps' results.csv. The axes are those of OneFlow's plotting scripts:
  * memory ratio = budget / the largest budget of the model's sweep, the 9,900 MB top read as 10,000
    (Oneflow-Inc/oneflow dtr2 json_to_pic.py:52-58 and :163);
  * compute overhead = op time including recomputation / its minimum over every method and budget of
    the panel (Oneflow-Inc/libai dtr_exp tools/json_to_pic.py:220-228), no cut at 2x.
Panel titles and legend follow LiBai's json_to_pic.py (:314-346); the ablation panel is Swin's, where
OneFlow's "DTE" and "DTR" curves are Coop's no-op-guided and no-in-place ablations (:335-340).
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

# (config key, panel title) in the paper's panel order; bert_large_b16 is tabulated, not drawn
PANELS = [("resnet50", "ResNet-50 (115)"), ("resnet152", "ResNet-152 (55)"), ("inception_v3", "Inception V3 (96)"),
          ("unet", "U-Net (5)"), ("bert_large", "BERT Large (4)"), ("swin_b", "Swin-B (40)"),
          ("bilstm_fused", "BiLSTM (2048)"), ("densenet121", "DenseNet-121 (70)")]
EXTRA = [("bert_large_b16", "BERT Large (16)")]
METHODS = [("coop", "base", "Coop"), ("dte", "base", "DTE"), ("dtr", "base", "DTR")]
ABLATIONS = [("coop", "base", "Coop"), ("coop", "no-opguided", "no op-guided allocation"),
             ("coop", "no-inplace", "no recomputable in-place"), ("coop", "no-layout", "no layout-aware eviction")]
# one rule of the profile switched off at a time: (policy, variant, what it switches off)
RULES = [("coop", "no-small-area", "small-piece area off (bestfit.small_area=0)"),
         ("coop", "coopsim-coop", "coop.compat=none (coopsim's expensive ops, parameters low, per-tensor fallback)"),
         ("dte", "no-small-area", "DTE, small-piece area off"), ("dtr", "no-small-area", "DTR, small-piece area off")]
TOP_MB = 9900  # read as 10,000 (json_to_pic.py:52-58)
# --harness-rules: the recording harness's rules switched back to coopsim's defaults one at a time
# (record_pytorch.py options added to `--harness oneflow`), on these models
HARNESS_RULES = [("2 iterations", ["--iterations", "2"]),
                 ("SGD with momentum (optimizer state)", ["--optimizer", "sgd"]),
                 ("gradients not preallocated", ["--no-preallocate-grads"]),
                 ("PyTorch's op granularity (dropout one random op)", ["--granularity", "pytorch"])]
HARNESS_MODELS = ["resnet50", "bert_large", "swin_b"]


def sweep(coopsim, config, out, jobs):
    cmd = [coopsim, "sweep", config, "-o", out]
    if jobs:
        cmd += ["-j", str(jobs)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(out, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def mib(row):
    return int(row["budget_bytes"]) // (1 << 20)


def ratio(budget_mb, top_mb):
    return budget_mb / (10000 if top_mb == TOP_MB else top_mb)


def cost_ns(row):
    return int(row["op_time_ns"]) + int(row["recompute_ns"])


class Panel:
    def __init__(self, key, title, rows):
        self.key, self.title, self.rows = key, title, rows
        self.top = max(mib(r) for r in rows)
        done = [cost_ns(r) for r in rows if r["status"] == "completed"]
        self.base_ns = min(done) if done else None

    def curve(self, policy, variant):
        """[(ratio, overhead or None)] in budget order; None where the run did not complete."""
        pts = []
        for r in sorted((r for r in self.rows if r["policy"] == policy and r["variant"] == variant), key=mib):
            ok = r["status"] == "completed"
            pts.append((ratio(mib(r), self.top), cost_ns(r) / self.base_ns if ok else None, r["status"]))
        return pts

    def lowest_row(self, policy, variant):
        """The run at the smallest budget from which every larger budget of the sweep completed (None if
        the top fails)."""
        best = None
        for r in sorted((r for r in self.rows if r["policy"] == policy and r["variant"] == variant), key=mib,
                        reverse=True):
            if r["status"] != "completed":
                break
            best = r
        return best

    def lowest(self, policy, variant):
        r = self.lowest_row(policy, variant)
        return None if r is None else ratio(mib(r), self.top)

    def lowest_cell(self, policy, variant):
        """'0.28 (0.29)': the lowest ratio, and that budget over the trace's no-eviction peak."""
        r = self.lowest_row(policy, variant)
        if r is None:
            return "-"
        return f"{ratio(mib(r), self.top):.2f} ({float(r['memory_ratio_of_peak']):.2f})"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}"


def factor(panel):
    """Coop's memory saving: the lowest ratio of the better of DTE and DTR over Coop's."""
    coop = panel.lowest("coop", "base")
    others = [v for v in (panel.lowest("dte", "base"), panel.lowest("dtr", "base")) if v is not None]
    if coop is None or not others:
        return "-"
    return f"{min(others) / coop:.2f}x"


def tables(panels, out):
    out.write("Lowest memory ratio each method completes from (in parentheses: that budget over the trace's "
              "no-eviction peak of live bytes, docs/results-remat.md's axis):\n\n")
    out.write("| model | budgets (MiB) | trace peak | Coop | DTE | DTR | Coop's factor | Coop overhead there |\n")
    out.write("|---|---|---|---|---|---|---|---|\n")
    for p in panels:
        coop = p.lowest("coop", "base")
        at = next((y for x, y, _ in p.curve("coop", "base") if x == coop), None)
        budgets = sorted({mib(r) for r in p.rows})
        peak = int(p.rows[0]["budget_bytes"]) / float(p.rows[0]["memory_ratio_of_peak"]) / (1 << 30)
        out.write(f"| {p.title} | {budgets[0]}-{budgets[-1]} ({len(budgets)}) | {peak:.2f} GiB | "
                  f"{p.lowest_cell('coop', 'base')} | {p.lowest_cell('dte', 'base')} | {p.lowest_cell('dtr', 'base')} | "
                  f"{factor(p)} | {'-' if at is None else f'{at:.3f}'} |\n")
    out.write("\nLowest ratio with a rule switched off (base: the profile as it is):\n\n")
    heads = ["Coop"] + [a[2] for a in ABLATIONS[1:]] + [r[2] for r in RULES]
    out.write("| model | " + " | ".join(heads) + " |\n|---|" + "---|" * len(heads) + "\n")
    for p in panels:
        cells = [fmt_ratio(p.lowest(pol, var)) for pol, var, _ in ABLATIONS + RULES]
        out.write(f"| {p.title} | " + " | ".join(cells) + " |\n")


def harness_rules(coopsim, python, jobs, tmp, out):
    """Records each HARNESS_MODELS model once per HARNESS_RULES entry (fake, A100 profile) and sweeps
    it with the model's config; writes the lowest ratios of Coop / DTE / DTR per variant."""
    out.write("\nLowest ratio (Coop / DTE / DTR) with one harness rule switched back to coopsim's default:\n\n")
    out.write("| model | harness oneflow | " + " | ".join(r[0] for r in HARNESS_RULES) + " |\n")
    out.write("|---|---|" + "---|" * len(HARNESS_RULES) + "\n")
    for key in HARNESS_MODELS:
        cells = []
        for label, extra in [("as recorded", None)] + HARNESS_RULES:
            config = f"configs/coop-paper/{key}.json"
            if extra is not None:
                trace = os.path.join(tmp, f"{key}-{len(cells)}.jsonl.gz")
                subprocess.run([python, "scripts/record_pytorch.py", "--model", key, "--fake", "--device-profile",
                                "a100", "--harness", "oneflow", "--quiet", "-o", trace] + extra, check=True)
                with open(config) as f:
                    doc = json.load(f)
                doc["traces"] = [trace]
                config = os.path.join(tmp, f"{key}-{len(cells)}.json")
                with open(config, "w") as f:
                    json.dump(doc, f)
            rows = sweep(coopsim, config, os.path.join(tmp, f"{key}-{len(cells)}-out"), jobs)
            p = Panel(key, key, rows)
            cells.append(" / ".join(fmt_ratio(p.lowest(pol, "base")) for pol in ("coop", "dte", "dtr")))
        out.write(f"| {key} | " + " | ".join(cells) + " |\n")


def figure(panels, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 3, figsize=(13, 11))
    styles = {"Coop": ("tab:red", "o"), "DTE": ("tab:blue", "s"), "DTR": ("tab:green", "^"),
              "no op-guided allocation": ("tab:blue", "s"), "no recomputable in-place": ("tab:green", "^"),
              "no layout-aware eviction": ("tab:purple", "v")}
    drawn = [(p, METHODS, p.title) for p in panels if p.key in dict(PANELS)]
    swin = next((p for p in panels if p.key == "swin_b"), None)
    if swin is not None:
        drawn.append((swin, ABLATIONS, f"{swin.title}: Coop's ablations"))
    for ax, (p, curves, title) in zip(axes.flat, drawn):
        for policy, variant, label in curves:
            pts = [(x, y) for x, y, _ in p.curve(policy, variant) if y is not None]
            if pts:
                colour, marker = styles[label]
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker=marker, color=colour, label=label,
                        markersize=4, linewidth=1.2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("memory ratio")
        ax.set_ylabel("compute overhead")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Coop / DTE / DTR as OneFlow ran them (coopsim, coop.compat=oneflow, traces/oneflow)")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--coopsim", default="build/src/coopsim")
    ap.add_argument("--figure", default="docs/figures/coop-paper.png", help="PNG to write ('' for none)")
    ap.add_argument("--tables", help="write the markdown tables here (default: standard output)")
    ap.add_argument("--jobs", type=int, help="parallel runs per sweep (default: every core)")
    ap.add_argument("--models", help="comma list of configs/coop-paper keys (default: all nine)")
    ap.add_argument("--harness-rules", action="store_true",
                    help="also record traces with each harness rule switched off (needs torch >= 2.4 in --python)")
    ap.add_argument("--python", default=os.environ.get("COOPSIM_TORCH2_PYTHON", sys.executable),
                    help="the Python that records (default: $COOPSIM_TORCH2_PYTHON, else this one)")
    args = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    chosen = PANELS + EXTRA
    if args.models:
        keys = args.models.split(",")
        unknown = sorted(set(keys) - {k for k, _ in chosen})
        if unknown:
            ap.error(f"--models: unknown {', '.join(unknown)} (valid: {', '.join(k for k, _ in chosen)})")
        chosen = [(k, t) for k, t in chosen if k in keys]
    panels = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, title in chosen:
            panels.append(Panel(key, title, sweep(args.coopsim, f"configs/coop-paper/{key}.json",
                                                  os.path.join(tmp, key), args.jobs)))
        text = io.StringIO()
        tables(panels, text)
        if args.harness_rules:
            harness_rules(args.coopsim, args.python, args.jobs, tmp, text)
    if args.figure:
        figure(panels, args.figure)
    if args.tables:
        with open(args.tables + ".tmp", "w") as f:
            f.write(text.getvalue())
        os.replace(args.tables + ".tmp", args.tables)
    else:
        sys.stdout.write(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
