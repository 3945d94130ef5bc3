#!/usr/bin/env python3
"""cuDNN's convolution workspaces: the recorder's rule (a fake recording) against the blocks the
allocator served (a CUDA-timed recording whose in-op blocks came from its memory snapshot), convolution
by convolution, for the first iteration.

    scripts/cudnn_workspaces.py FAKE.jsonl.gz MEASURED.jsonl.gz
e.g. a fake `--model resnet50 --batch 115 --device-profile h200` recording against
traces/h200/resnet50_b115.jsonl.gz (docs/recording.md, cuDNN's workspaces).
"""
import gzip
import json
import sys

CONV = {"aten::convolution": ("forward",), "aten::convolution_backward": ("backward-data", "backward-filter")}


def workspaces(path):
    """[(weight name, direction, bytes)] of the first iteration's convolutions, in order."""
    with gzip.open(path, "rt") as f:
        records = [json.loads(line) for line in f if line.strip()][1:]
    tensors = {r["id"]: r for r in records if r.get("kind") == "tensor"}
    ops = {r["id"]: r for r in records if r.get("kind") == "op"}
    rows, pending, iterations = [], [], 0
    for r in records:
        kind = r.get("kind")
        if kind == "iteration":
            iterations += 1
            if iterations > 1:
                break
        elif kind == "alloc":
            t = tensors[r["tensor"]]
            if t.get("role") == "workspace" and "cublas" not in t["name"]:
                pending.append(t["bytes"])
        elif kind == "compute":
            op = ops[r["op"]]
            if op["name"] in CONV:
                weight = next((tensors[i]["name"] for i in op.get("inputs", []) if tensors[i].get("role") == "parameter"), "?")
                directions = CONV[op["name"]]
                if len(pending) < len(directions):  # conv1 has no backward-data
                    directions = directions[-len(pending):] if pending else ()
                rows += [(weight, d, b) for d, b in zip(directions, pending)]
            pending = []
    return rows


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    rule, measured = workspaces(sys.argv[1]), workspaces(sys.argv[2])
    served = {(w, d): b for w, d, b in measured}
    if set(served) - {(w, d) for w, d, _ in rule}:
        print("the two recordings' convolutions differ", file=sys.stderr)
        return 1
    print("| convolution | direction | served (bytes) | rule (bytes) | rule - served |")
    print("|---|---|---|---|---|")
    exact, total_abs, total, by = 0, 0, 0, {}
    for w, d, r in rule:
        m = served.get((w, d), 0)  # no block: nothing served
        print(f"| {w} | {d} | {m:,} | {r:,} | {r - m:+,} |")
        exact += r == m
        total_abs += abs(r - m)
        total += m
        by.setdefault(d, [0, 0])[0] += r == m
        by[d][1] += 1
    print(f"\n{exact} of {len(rule)} workspaces exact; |rule - served| summed {total_abs:,} bytes "
          f"({100.0 * total_abs / max(total, 1):.1f} % of the {total:,} served)")
    print("; ".join(f"{d}: {e} of {n} exact" for d, (e, n) in by.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
