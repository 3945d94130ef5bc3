#!/usr/bin/env python3
"""Produces the tables of docs/results-remat.md: compute overhead against memory ratio for Coop,
DTE and DTR on Coop's arena allocator (bestfit) and DTR on fungible memory, Coop's ablations,
fragmentation and search work, on the bundled Coop DNN traces.

    python3 scripts/remat_results.py [--coopsim build/src/coopsim] > tables.md

Every number comes from `coopsim run ... --csv`; the script only arranges them.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

MODELS = ["resnet50", "resnet152", "inception_v3", "unet", "bert_large", "swin_t", "bilstm", "densenet121"]
PERCENTS = list(range(25, 101, 5))  # of the trace's no-eviction peak of live bytes
MAIN = [("coop", "bestfit", []), ("dte", "bestfit", []), ("dtr", "bestfit", []), ("dtr", "fungible", [])]
ABLATIONS = ["none", "no op-guided allocation", "no recomputable in-place", "no layout-aware eviction"]


def run(coopsim, trace, policy, allocator, sets):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "runs.csv")
        cmd = [coopsim, "run", f"traces/{trace}.jsonl.gz", "-p", policy, "-a", allocator,
               "-b", ",".join(f"{p}%" for p in PERCENTS), "-q", "--csv", path]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True)
        with open(path, newline="") as f:
            return list(csv.DictReader(f))


def cell(row):
    if row["status"] == "completed":
        return f"{float(row['recompute_overhead']):.3f}"
    return row["status"]


def lowest_completing(rows):
    """The smallest ratio r such that every run at a ratio >= r completed ("-" if none)."""
    best = "-"
    for p, row in reversed(list(zip(PERCENTS, rows))):
        if row["status"] != "completed":
            break
        best = f"{p / 100:.2f}"
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coopsim", default="build/src/coopsim")
    args = ap.parse_args()
    out = sys.stdout
    started = time.monotonic()
    results = {}
    for model in MODELS:
        cols = {}
        for policy, alloc, sets in MAIN:
            cols[f"{policy} / {alloc}"] = run(args.coopsim, model, policy, alloc, sets)
        ablation = {a: run(args.coopsim, model, "coop", "bestfit", [f"coop.ablation={a}"]) for a in ABLATIONS[1:]}
        results[model] = (cols, ablation)
    out.write("### Lowest memory ratio from which every larger ratio of the sweep completes\n\n")
    names = list(results[MODELS[0]][0]) + [f"coop: {a}" for a in ABLATIONS[1:]]
    out.write("| model | " + " | ".join(names) + " |\n|" + "---|" * (len(names) + 1) + "\n")
    for model in MODELS:
        cols, ablation = results[model]
        series = list(cols.values()) + [ablation[a] for a in ABLATIONS[1:]]
        out.write(f"| {model} | " + " | ".join(lowest_completing(rows) for rows in series) + " |\n")
    for model in MODELS:
        cols, ablation = results[model]
        peak = int(next(iter(cols.values()))[0]["budget_bytes"]) * 100 // PERCENTS[0]
        out.write(f"\n### {model}\n\n")
        out.write(f"Compute overhead (logical clock / op time; `thrash` = stopped at 2x, `oom` = nothing "
                  f"evictable) by memory ratio = budget / no-eviction peak ({peak / 2**30:.2f} GiB). "
                  f"Coop's own ratio (budget / largest budget of the sweep) is the same column here, "
                  f"since the sweep ends at the peak.\n\n")
        head = ["ratio"] + list(cols) + [f"coop: {a}" for a in ABLATIONS[1:]]
        out.write("| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n")
        for i, p in enumerate(PERCENTS):
            row = [f"{p / 100:.2f}"] + [cell(c[i]) for c in cols.values()] + [cell(ablation[a][i]) for a in ABLATIONS[1:]]
            out.write("| " + " | ".join(row) + " |\n")
        out.write("\nCoop fragmentation rate (mean free / arena at allocations that needed eviction) and "
                  "eviction-search work (pieces or tensors examined), bestfit:\n\n")
        out.write("| ratio | coop frag | dte frag | dtr frag | coop scanned | dte scanned | dtr scanned |\n"
                  "|---|---|---|---|---|---|---|\n")
        for i, p in enumerate(PERCENTS):
            if p % 10 != 0 and p != 25:
                continue
            rows = [cols[f"{k} / bestfit"][i] for k in ("coop", "dte", "dtr")]
            frag = [f"{100 * float(r['coop_fragmentation']):.1f} %" if r["coop_fragmentation"] else "-" for r in rows]
            scanned = [r["search_scanned"] for r in rows]
            out.write(f"| {p / 100:.2f} | " + " | ".join(frag + scanned) + " |\n")
    out.write(f"\n(generated in {time.monotonic() - started:.1f} s)\n")


if __name__ == "__main__":
    main()
