#!/usr/bin/env python3
"""The results table of docs/cuda-validation.md from replay-gpu reports: a directory of *.gpu.json
(what scripts/gpu_validate.sh leaves in OUT_DIR/gpu) or a .jsonl[.gz] of reports, one per line.

    scripts/cuda_validation_table.py OUT_DIR/gpu
    scripts/cuda_validation_table.py docs/data/h200-replays-2.jsonl.gz
"""
import glob
import gzip
import json
import os
import sys


def reports(source):
    if os.path.isdir(source):
        for f in sorted(glob.glob(os.path.join(source, "*.gpu.json"))):
            with open(f) as fh:
                r = json.load(fh)
            r.setdefault("name", os.path.basename(f)[:-len(".gpu.json")])
            yield r
        return
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rt") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def ms(ns):
    return f"{ns / 1e6:,.1f}"


def row(r):
    it, plan, integrity = r["iteration"], r["plan"], r["integrity"]
    if it["measured_ns"] is None:
        return None
    name = r["name"]
    budget = name.split(".")[2] + " %" if name.count(".") >= 2 else str(plan["budget"])
    check = r["settings"].get("check", "full (every word)")
    if "read_words" in integrity and integrity["read_words"]:
        check += f", {100 * integrity['read_words_checked'] / integrity['read_words']:.0f} % of input words"
    verdict = "ok" if integrity["ok"] else f"FAILED at {integrity['first_failing_step']['step']}"
    t = r["transfers"]
    copies = "—"
    if t["d2h"]["steps"] or t["h2d"]["steps"]:
        copies = " / ".join(f"{ms(t[d]['simulated_ns'])} → {ms(t[d]['measured_ns'])}" for d in ("d2h", "h2d"))
    # The trace file's name where the report's name carries it (gpu_validate.sh: TRACE.POLICY.BUDGET[.TAG]),
    # so that two traces of one model (llama_1b_bf16 and its _ckpt) stay apart; the model's otherwise.
    parts = name.split(".")
    label = parts[0] if len(parts) >= 3 and parts[1] == plan["policy"] else plan["model"]
    tags = {"cal": "measured link", "h200": "h200 link preset", "old": "previous kernel"}
    label += "".join(f" ({tags[t]})" for t in parts[3:] if t in tags)
    return (f"| {label} | {plan['policy']} | {budget} | {ms(it['simulated_ns'])} | {ms(it['measured_ns']['mean'])} | "
            f"{100 * it['error']:+.1f} % | {copies} | {verdict} | {check} |")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [row(r) for r in reports(argv[1]) if not r["name"].startswith("corrupt")]
    first = next(reports(argv[1]))
    d = first["device"]
    print(f"Device: {d['name']} (compute capability {d['compute_capability']}, {d['sm_count']} SMs), driver "
          f"{d['driver_version']}, CUDA runtime {d['runtime_version']}.\n")
    print("| trace | policy | budget | simulated ms | measured ms | error | copies d2h / h2d ms (sim → measured) "
          "| integrity | check |")
    print("|---|---|---|---|---|---|---|---|---|")
    for line in rows:
        if line:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
