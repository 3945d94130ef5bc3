#!/usr/bin/env python3
"""The copy model of docs/cuda-validation.md ("Copy model"): what the measured swap copies of
calibrated autoswap replays say about the host link, from replay-gpu reports alone.

For every `NAME.gpu.json` in DIR whose simulation `NAME.sim.json` sits beside it, the plan is made
again with COOPSIM (same trace, allocator, policy, budget and link: the simulated times must equal
the report's, or the row is refused) to read the simulated schedule: how much of each direction's
copy time overlapped copies of the other direction and compute. Then, per direction, the bandwidth
each replay's copies imply (measured time minus the link's latency per copy, over the bytes), and
least-squares fits of the measured copy time on bytes alone and on bytes x {overlap with the other
direction, overlap with compute, mean copy size}: max |error| and how many of the replays each model
reproduces within --tolerance.

  scripts/copy_model.py DIR [--coopsim build/src/coopsim] [--traces TDIR] [--tolerance 0.03] [--json OUT]

DIR: an unpacked `replays-measured-link.tar.gz` of a gpu_validate run (its gpu/ folder: link.json,
*.cal.sim.json, *.cal.gpu.json). Reports that carry per-copy times (`copies`, replay-gpu after
issue 33) are fitted per copy as well. TDIR: where the replayed traces are, when they are no longer
the bundled ones (the simulations name traces/NAME.jsonl.gz; the 2026-11-27 replays are of commit
141fe84's traces: `git show 141fe84:traces/NAME.jsonl.gz`). Needs numpy (Debian: python3-numpy).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile


def merged(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap(a, b):
    """Total length of the intersection of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def replay_rows(directory, coopsim, scratch, traces=None):
    rows = []
    for gpu_path in sorted(glob.glob(os.path.join(directory, "*.gpu.json"))):
        name = os.path.basename(gpu_path)[:-len(".gpu.json")]
        sim_path = os.path.join(directory, name + ".sim.json")
        if not os.path.exists(sim_path):
            continue
        gpu, sim = json.load(open(gpu_path)), json.load(open(sim_path))
        if sim.get("policy") != "autoswap":
            continue
        config = os.path.join(scratch, name + ".config.json")
        with open(config, "w") as f:
            json.dump({"link": {k: v for k, v in sim["config"]["link"].items() if k != "resolved_name"}}, f)
        plan_path, report_path = os.path.join(scratch, name + ".plan.json"), os.path.join(scratch, name + ".json")
        trace = os.path.join(traces, os.path.basename(sim["trace"]["path"])) if traces else sim["trace"]["path"]
        p = subprocess.run([coopsim, "run", trace, "-a", sim["allocator"], "-p", sim["policy"],
                            "-b", str(sim["budget_bytes"]), "-c", config, "-q", "-o", report_path,
                            "--plan", plan_path], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"copy_model.py: {name}: {p.stderr.strip()}")
        again = json.load(open(report_path))
        if again["trace"]["hash"] != sim["trace"]["hash"] or again["time"] != sim["time"]:
            sys.exit(f"copy_model.py: {name}: the plan made again differs from the replayed one "
                     "(another trace or another coopsim): refusing to guess its schedule")
        steps = json.load(open(plan_path))["steps"]
        busy = {k: merged([(s["start_ns"], s["end_ns"]) for s in steps if s["stream"] == k and s["end_ns"] > s["start_ns"]])
                for k in ("d2h", "h2d", "compute")}
        link = sim["config"]["link"]
        for d, other in (("d2h", "h2d"), ("h2d", "d2h")):
            t = gpu["transfers"][d]
            if not t["steps"]:
                continue
            copy_time = sum(e - s for s, e in busy[d])
            rows.append({"replay": name, "direction": d, "copies": t["steps"], "bytes": t["bytes"],
                         "latency_ns": link[f"{d}_latency"], "isolated_gbps": link[f"{d}_gbps"],
                         "simulated_ns": t["simulated_ns"], "measured_ns": t["measured_ns"],
                         "overlap_other": overlap(busy[d], busy[other]) / copy_time if copy_time else 0.0,
                         "overlap_compute": overlap(busy[d], busy["compute"]) / copy_time if copy_time else 0.0,
                         "mean_mib": t["bytes"] / t["steps"] / 2 ** 20, "per_copy": gpu.get("copies", {}).get(d)})
    return rows


def fit(rows, features, tolerance):
    import numpy as np
    b = np.array([r["bytes"] for r in rows], float)
    fixed = np.array([r["copies"] * r["latency_ns"] for r in rows], float)
    measured = np.array([r["measured_ns"] for r in rows], float)
    x = np.column_stack([b] + [b * np.array([r[f] for r in rows], float) for f in features])
    coef, *_ = np.linalg.lstsq(x, measured - fixed, rcond=None)
    err = (x @ coef + fixed) / measured - 1
    return {"features": list(features), "gbps": 1 / coef[0], "per_feature": [c / coef[0] for c in coef[1:]],
            "max_abs_error": float(abs(err).max()), "within": int((abs(err) <= tolerance).sum()), "of": len(rows),
            "errors": [float(e) for e in err]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--coopsim", default="build/src/coopsim")
    ap.add_argument("--traces", help="the folder of the replayed traces (default: the paths the simulations name)")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--json", help="write the rows and fits here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="coopsim-copy-model-") as scratch:
        rows = replay_rows(args.dir, args.coopsim, scratch, args.traces)
    if not rows:
        sys.exit(f"copy_model.py: {args.dir}: no autoswap replay with its simulation (NAME.gpu.json + NAME.sim.json)")
    print("| replay | dir | copies | mean MiB | measured / simulated | implied GB/s | / isolated | overlap other dir | overlap compute |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        implied = r["bytes"] / (r["measured_ns"] - r["copies"] * r["latency_ns"])
        print(f"| {r['replay']} | {r['direction']} | {r['copies']} | {r['mean_mib']:.1f} | "
              f"{r['measured_ns'] / r['simulated_ns'] - 1:+.1%} | {implied:.2f} | {implied / r['isolated_gbps']:.3f} | "
              f"{r['overlap_other']:.0%} | {r['overlap_compute']:.0%} |")
    fits = {}
    print()
    print(f"| dir | model | GB/s | coefficients | max abs error | within {args.tolerance:.0%} |")
    print("|---|---|---|---|---|---|")
    for d in ("d2h", "h2d"):
        sub = [r for r in rows if r["direction"] == d]
        for features in ((), ("overlap_other",), ("overlap_compute",), ("mean_mib",),
                         ("overlap_other", "overlap_compute")):
            f = fit(sub, features, args.tolerance)
            fits.setdefault(d, []).append(f)
            print(f"| {d} | bytes{''.join(' + bytes x ' + n for n in features)} | {f['gbps']:.2f} | "
                  f"{', '.join(f'{c:+.3f}' for c in f['per_feature']) or '-'} | {f['max_abs_error']:.2%} | "
                  f"{f['within']} of {f['of']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [{k: v for k, v in r.items() if k != "per_copy"} for r in rows], "fits": fits}, f,
                      indent=1)


if __name__ == "__main__":
    main()
