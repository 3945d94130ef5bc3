#!/usr/bin/env python3
"""The before-launch prediction against the GPU: `scripts/bench.sh predict` prints this table.

For each recording in traces/h200 (measured.json: the H200's max_memory_allocated /
max_memory_reserved and the uninstrumented step time), the same model is recorded in fake mode with
the h200 device profile by PYTHON (torch 2.x; no GPU), simulated by COOPSIM on the pytorch allocator
model with the keep policy, and compared: peak allocated and reserved against the allocator's own
peaks, the simulated time per iteration against the measured step. The CUDA-timed trace itself is
simulated too (its rows say "cuda trace"). Targets (issue "Before launch"): memory within +-1 % and
never more than 0.5 % below, time within +-10 %.

usage: scripts/predict.py COOPSIM PYTHON [--out DIR] [--only NAME,...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(ROOT, "traces", "h200")


def replay(coopsim, trace):
    out = subprocess.run([coopsim, "run", trace, "-a", "pytorch", "-p", "keep", "-b", "140GiB", "--json"],
                         check=True, capture_output=True, text=True).stdout
    run = json.loads(out)
    if run["status"] != "completed":
        raise RuntimeError(f"{trace}: replay ended {run['status']}")
    return run


def record(python, spec, path):
    cmd = [python, os.path.join(ROOT, "scripts", "record_pytorch.py"), "--quiet", "--fake", "--device-profile", "h200",
           "--model", spec["model"], "--batch", str(spec["batch"]), "--iterations", str(spec["iterations"]), "-o", path]
    if spec.get("amp"):
        cmd += ["--amp", spec["amp"]]
    subprocess.run(cmd, check=True)


def pct(predicted, measured):
    return 100.0 * (predicted - measured) / measured


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("coopsim")
    ap.add_argument("python", help="a Python with torch 2.x (scripts/deps.sh's virtual environment)")
    ap.add_argument("--out", help="keep the fake recordings here (default: a temporary directory)")
    ap.add_argument("--only", help="comma list of recordings (default: all of measured.json)")
    args = ap.parse_args()
    with open(os.path.join(H200, "measured.json"), encoding="utf-8") as f:
        measured = json.load(f)["recordings"]
    names = args.only.split(",") if args.only else list(measured)
    out_dir = args.out or tempfile.mkdtemp(prefix="coopsim-predict-")
    os.makedirs(out_dir, exist_ok=True)
    rows, worst = [], {"memory": 0.0, "below": 0.0, "time": 0.0}
    for name in names:
        spec = measured[name]
        fake = os.path.join(out_dir, f"{name}.fake.jsonl.gz")
        record(args.python, spec, fake)
        for kind, trace in (("fake h200", fake), ("cuda trace", os.path.join(H200, f"{name}.jsonl.gz"))):
            run = replay(args.coopsim, trace)
            mem, t = run["memory"], run["time"]
            alloc = pct(mem["peak_allocated_bytes"], spec["max_memory_allocated"])
            reserved = pct(mem["peak_reserved_bytes"], spec["max_memory_reserved"])
            step_ms = t["simulated_ns"] / 1e6 / spec["iterations"]
            step = pct(step_ms, spec["step_ms"])
            rows.append((name, kind, mem["peak_allocated_bytes"], alloc, mem["peak_reserved_bytes"], reserved,
                         step_ms, spec["step_ms"], step))
            if kind == "fake h200":
                worst["memory"] = max(worst["memory"], abs(alloc), abs(reserved))
                worst["below"] = min(worst["below"], alloc, reserved)
                worst["time"] = max(worst["time"], abs(step))
    print("| recording | trace | peak allocated | vs max_memory_allocated | peak reserved | vs max_memory_reserved "
          "| step (simulated) | step (H200) | time error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]:+.2f} % | {r[4]:,} | {r[5]:+.2f} % | {r[6]:.1f} ms | {r[7]:.1f} ms "
              f"| {r[8]:+.1f} % |")
    print(f"\nfake recordings: worst memory error {worst['memory']:.2f} % (target 1 %), lowest {worst['below']:+.2f} % "
          f"(target >= -0.5 %), worst time error {worst['time']:.1f} % (target 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
