#!/usr/bin/env python3
"""Fits the duration model of python/coopsim/recording/cost.py to the CUDA-timed H200 recordings.

For each recording of traces/h200 (measured.json), the same model is recorded in fake mode with the
bare roofline (`--device-profile h200 --duration-model roofline`); the two op sequences are aligned by
op name (cuDNN's batch norm against the CPU's native one, views ignored), and per op kind (cost.op_kind)
the time-weighted measured / roofline ratio of the aligned ops of at least MIN_NS of roofline time gives
the kind's efficiency; the per-kernel floor is the median measured time of the kernels whose roofline
is under 1 us. Each recording's timing (its header's source.durations.clock) is shown: shielded event
pairs (each behind a GPU spin: the per-op times are the GPU's; all three since 2026-11-28) or bare
pairs (host time included in short ops). The step check then applies the model (cost.py's table, not this fit) to
the fake recordings and compares the simulated iteration time with the measured uninstrumented step;
HELD_OUT is not used for any efficiency of its own kinds' table entries.

usage: PYTHON scripts/fit_durations.py PYTHON   (PYTHON: a Python with torch 2.x, e.g. scripts/deps.sh's)
"""
import collections
import difflib
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
MIN_NS = 20000
HELD_OUT = "llama_1b_bf16_b4"
SAME = {"aten::cudnn_batch_norm": "aten::native_batch_norm",
        "aten::cudnn_batch_norm_backward": "aten::native_batch_norm_backward", "aten::_unsafe_view": "aten::view"}
HALF = {"llama_1b_bf16_b4"}  # recordings under bf16 autocast: their matrix products are half precision


def timing(path):
    with gzip.open(path, "rt") as f:
        clock = json.loads(f.readline())["source"]["durations"].get("clock", "")
    return "shielded" if "spin" in clock else "bare pairs"


def computes(path):
    records = [json.loads(line) for line in gzip.open(path, "rt")]
    ops = {r["id"]: r for r in records[1:] if r["kind"] == "op"}
    return [(ops[r["op"]]["name"], ops[r["op"]].get("duration", 0)) for r in records[1:] if r["kind"] == "compute"]


def record(python, spec, path, model):
    cmd = [python, os.path.join(ROOT, "scripts", "record_pytorch.py"), "--quiet", "--fake", "--device-profile", "h200",
           "--duration-model", model, "--model", spec["model"], "--batch", str(spec["batch"]),
           "--iterations", str(spec["iterations"]), "-o", path]
    if spec.get("amp"):
        cmd += ["--amp", spec["amp"]]
    subprocess.run(cmd, check=True)


def main():
    if len(sys.argv) != 2:
        print(__doc__.rsplit("usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    python = sys.argv[1]
    from coopsim.recording.cost import op_kind  # noqa: E402  (run this script with the torch 2.x Python)
    with open(os.path.join(ROOT, "traces", "h200", "measured.json"), encoding="utf-8") as f:
        measured = json.load(f)["recordings"]
    work = tempfile.mkdtemp(prefix="coopsim-fit-")
    ratio = collections.defaultdict(lambda: [0, 0.0, 0.0])  # (kind, recording) -> n, measured, roofline
    sources = {}
    tiny = []
    for name, spec in measured.items():
        roof = os.path.join(work, f"{name}.roofline.jsonl.gz")
        record(python, spec, roof, "roofline")
        trace = os.path.join(ROOT, "traces", "h200", f"{name}.jsonl.gz")
        real, fake, sources[name] = computes(trace), computes(roof), timing(trace)
        a = [SAME.get(n, n) for n, _ in real]
        b = [SAME.get(n, n) for n, _ in fake]
        dtype = "bfloat16" if name in HALF else "float32"
        for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
            for k in range(block.size):
                (n, measured_ns), (_, roof_ns) = real[block.a + k], fake[block.b + k]
                if roof_ns <= 0:
                    continue
                kind = op_kind(n, dtype)
                if kind.startswith("bmm"):
                    kind = "bmm_fp32"  # GPT-2's and Llama's batched products run in float32
                if name != HELD_OUT and sources[name] == "shielded" and roof_ns < 1000:
                    tiny.append(measured_ns)
                if roof_ns >= MIN_NS:
                    g = ratio[(kind, name)]
                    g[0] += 1
                    g[1] += measured_ns
                    g[2] += roof_ns
    # Per kind: the time-weighted efficiency over the shielded recordings the fit uses (not HELD_OUT),
    # and each recording's own, the held-out one's for comparison only.
    names = list(measured)
    print("| kind | fit: ops | fit: efficiency | " + " | ".join(f"{n} ({sources[n]})" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for kind in sorted({k for k, _ in ratio}):
        fit = [ratio[(kind, n)] for n in names if n != HELD_OUT and sources[n] == "shielded" and (kind, n) in ratio]
        n_fit, m_fit, r_fit = sum(g[0] for g in fit), sum(g[1] for g in fit), sum(g[2] for g in fit)
        cells = []
        for n in names:
            g = ratio.get((kind, n))
            cells.append(f"{g[2] / g[1]:.2f} ({g[0]})" if g else "")
        eff = f"{r_fit / m_fit:.2f}" if m_fit else "(none)"
        print(f"| {kind} | {n_fit} | {eff} | " + " | ".join(cells) + " |")
    print(f"\nkernel floor: median of {len(tiny)} kernels under 1 us of roofline (shielded, not {HELD_OUT}): "
          f"{statistics.median(tiny):.0f} ns")
    # the step check with cost.py's table
    print("\n| recording | simulated step (fitted) | measured step | error |\n|---|---|---|---|")
    for name, spec in measured.items():
        fitted = os.path.join(work, f"{name}.fitted.jsonl.gz")
        record(python, spec, fitted, "fitted")
        step_ms = sum(d for _, d in computes(fitted)) / 1e6 / spec["iterations"]
        note = " (held out)" if name == HELD_OUT else ""
        print(f"| {name}{note} | {step_ms:.1f} ms | {spec['step_ms']:.1f} ms | "
              f"{100 * (step_ms / spec['step_ms'] - 1):+.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
