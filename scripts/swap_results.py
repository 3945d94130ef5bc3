#!/usr/bin/env python3
"""Produces the tables of docs/results-swap.md: the swap policies (autoswap, vdnn all/conv),
the hybrids (pooch, capuchin) and the recompute policies (coop, dtr) on the bundled traces,
on one allocator, across link presets (pcie3-x16, pcie5-x16, nvlink-c2c).

    python3 scripts/swap_results.py [--coopsim build/src/coopsim] > tables.md

Every number comes from `coopsim run ... --csv`; the script only arranges them. The overhead is
compute_overhead = simulated time / the trace's compute time: stalls on transfers and
recomputation both count.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

TRACES = ["resnet50", "resnet152", "inception_v3", "densenet121", "unet", "swin_t", "bert_large", "gpt2",
          "bilstm", "default"]
LINKS = ["pcie3-x16", "pcie5-x16", "nvlink-c2c"]
PERCENTS = list(range(30, 101, 10))  # of the trace's no-eviction peak of live bytes
ALLOCATOR = "bestfit"
POLICIES = [("autoswap", []), ("vdnn-all", ["vdnn.variant=all"]), ("vdnn-conv", ["vdnn.variant=conv"]),
            ("pooch", []), ("capuchin", []), ("coop", []), ("dtr", [])]
SHOWN = [50, 70, 90]  # ratios (percent) whose overheads are tabulated


def run(coopsim, trace, label, sets, link):
    policy = label.split("-")[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "runs.csv")
        cmd = [coopsim, "run", f"traces/{trace}.jsonl.gz", "-p", policy, "-a", ALLOCATOR,
               "-b", ",".join(f"{p}%" for p in PERCENTS), "-q", "--csv", path, "--set", f"link.preset={link}"]
        for s in sets:
            cmd += ["--set", s]
        subprocess.run(cmd, check=True)
        with open(path, newline="") as f:
            return list(csv.DictReader(f))


def lowest_completing(rows):
    """The smallest ratio r such that every run at a ratio >= r completed ("-" if none)."""
    best = "-"
    for p, row in reversed(list(zip(PERCENTS, rows))):
        if row["status"] != "completed":
            break
        best = f"{p / 100:.1f}"
    return best


def cell(row):
    if row["status"] == "completed":
        return f"{float(row['compute_overhead']):.2f}"
    return row["status"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coopsim", default="build/src/coopsim")
    args = ap.parse_args()
    out = sys.stdout
    started = time.monotonic()
    results = {}
    runs = 0
    for trace in TRACES:
        for link in LINKS:
            for label, sets in POLICIES:
                results[trace, link, label] = run(args.coopsim, trace, label, sets, link)
                runs += len(PERCENTS)
    elapsed = time.monotonic() - started
    names = [label for label, _ in POLICIES]

    out.write("### Lowest ratio that completes (every ratio above it completes too)\n\n")
    out.write(f"Ratios {PERCENTS[0] / 100:.1f}..1.0 in steps of 0.1 of each trace's no-eviction peak; "
              f"allocator {ALLOCATOR}.\n\n")
    out.write("| trace | link | " + " | ".join(names) + " |\n")
    out.write("|---|---|" + "---|" * len(names) + "\n")
    for trace in TRACES:
        for link in LINKS:
            cells = [lowest_completing(results[trace, link, n]) for n in names]
            out.write(f"| {trace} | {link} | " + " | ".join(cells) + " |\n")

    for pct in SHOWN:
        k = PERCENTS.index(pct)
        out.write(f"\n### Compute overhead at ratio {pct / 100:.1f} (simulated / trace compute time)\n\n")
        out.write("| trace | link | " + " | ".join(names) + " |\n")
        out.write("|---|---|" + "---|" * len(names) + "\n")
        for trace in TRACES:
            for link in LINKS:
                cells = [cell(results[trace, link, n][k]) for n in names]
                out.write(f"| {trace} | {link} | " + " | ".join(cells) + " |\n")

    out.write("\n### Swap traffic and recomputation at ratio 0.7 on pcie3-x16\n\n")
    out.write("| trace | policy | status | swap-out MiB | stall ms | recomputes | recompute ms |\n")
    out.write("|---|---|---|---|---|---|---|\n")
    k = PERCENTS.index(70)
    for trace in TRACES:
        for n in names:
            r = results[trace, "pcie3-x16", n][k]
            out.write(f"| {trace} | {n} | {r['status']} | {int(r['swap_out_bytes']) / 2**20:.0f} | "
                      f"{int(r['stall_ns']) / 1e6:.2f} | {r['recomputes']} | {int(r['recompute_ns']) / 1e6:.2f} |\n")
    out.write(f"\n{runs} runs in {elapsed:.1f} s wall.\n")


if __name__ == "__main__":
    main()
