#!/usr/bin/env python3
"""`coopsim import kineto TRACE --et ET -o OUT` on the command line, reported as TAP: the
hand-written pair in tests/data/kineto/ converts; pairs that are not from one run, and a
malformed ET, fail with the exact one-line error, exit status 1 and no output file (nor its
.tmp) left behind. With ../shared present, the public resnet pair (two different runs) is
refused and the linear pair converts. Rules: docs/import-kineto.md.

Usage: et_cli_test.py PATH/TO/coopsim   (run from the project root)"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

from et_fixtures import kineto_from_et

COOPSIM = sys.argv[1]
KINETO = "tests/data/kineto/et_kineto.json"
ET = "tests/data/kineto/et_flat.json"
SHARED = os.path.join("..", "shared", "traces", "chakra_et")
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-et-cli-")


def path(name):
    return os.path.join(tmp, name)


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def run(args):
    return subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)


def good(name, kineto, et, check):
    out = path(name + ".jsonl.gz")
    p = run(["import", "kineto", kineto, "--et", et, "-o", out])
    ok = p.returncode == 0 and os.path.exists(out)
    detail = f"status {p.returncode}, stderr {p.stderr.strip()!r}"
    if ok:
        with gzip.open(out, "rt") as f:
            records = [json.loads(line) for line in f]
        ok, why = check(records)
        detail += f", {why}"
    results.append((name, ok, detail))


def bad(name, kineto, et, expected):
    out = path(name + ".jsonl")
    p = run(["import", "kineto", kineto, "--et", et, "-o", out])
    err = p.stderr.strip()
    left = [o for o in (out, out + ".tmp") if os.path.exists(o)]
    ok = p.returncode == 1 and err == "coopsim: error: " + expected and not left
    results.append((name, ok, f"status {p.returncode}, stderr {err!r}, expected {expected!r}, left {left}"))


def tiny(records):
    ops = [r for r in records if r.get("kind") == "op"]
    want = [("aten::mm", [0, 1], [2]), ("aten::relu_", [2], []), ("aten::view", [2], []), ("aten::sum", [2], [3]),
            ("aten::add_", [1, 3], []), ("aten::mul", [0], [4])]
    got = [(o["name"], o.get("inputs", []), o.get("outputs", [])) for o in ops]
    return got == want, f"ops {got}"


with open(ET) as f:
    et_text = f.read()

good("tiny pair converts with inputs and outputs", KINETO, ET, tiny)
bad("another process", KINETO, write("pid.json", et_text.replace('"pid": 7', '"pid": 8', 1)),
    f"{path('pid.json')}: not from the same run as {KINETO}: the ET's pid 8 is not a process of the Kineto trace (pids: 7)")
bad("another op sequence", KINETO, write("ops.json", et_text.replace('"aten::sum"', '"aten::mean"', 1)),
    f"{path('ops.json')}: not from the same run as {KINETO}: the 7 ops of ET thread 1 match no run of Kineto ops in "
    "execution order (more than 0 names differ at every position of every unused Kineto thread; at most 5% may differ)")
bad("malformed tensor tuple", KINETO,
    write("tuple.json", et_text.replace('[[10, 20, 0, 6, 4, "cuda:0"], [11', '[[10, 20, 0, 6, 4], [11', 1)),
    f"{path('tuple.json')}:4: nodes[2] (id 4): inputs[0]: expected a tensor tuple [tensor id, storage id, offset, "
    "numel, element bytes, device] (got an array of 5)")
bad("missing ET", KINETO, path("absent.json"), f"{path('absent.json')}:0: cannot open trace file: No such file or directory")

if os.path.isdir(SHARED):
    resnet_et, resnet_kineto = os.path.join(SHARED, "resnet_et.json.gz"), os.path.join(SHARED, "resnet_kineto.json.gz")
    bad("public resnet pair (two runs) is refused", resnet_kineto, resnet_et,
        f"{resnet_et}: not from the same run as {resnet_kineto}: the ET's pid 1734239 is not a process of the Kineto "
        "trace (pids: 23442)")

    # The same pair with the ET's pid rewritten to the Kineto trace's: the op sequences refuse it.
    forced = path("resnet_pid.json.gz")
    with gzip.open(resnet_et, "rt") as f, gzip.open(forced, "wt") as g:
        g.write(f.read().replace('"pid": 1734239', '"pid": 23442', 1))
    bad("public resnet pair with the pid forced is refused by op sequence", resnet_kineto, forced,
        f"{forced}: not from the same run as {resnet_kineto}: the 7185 ops of ET thread 2 match no run of Kineto ops "
        "in execution order (more than 359 names differ at every position of every unused Kineto thread; at most 5% "
        "may differ)")

    def linear(records):
        ops = [r for r in records if r.get("kind") == "op"]
        with_inputs = sum(1 for o in ops if o.get("inputs"))
        return len(ops) == 196 and with_inputs > 0, f"{len(ops)} ops, {with_inputs} with inputs"

    # The real 1.1.0-chakra ET has no Kineto trace of its own run: one made from its op nodes
    # (same pid, one Kineto thread per ET thread, start order) checks the chakra layout and the
    # structure: three ProfilerSteps, forward / backward / optimizer markers.
    synthetic = kineto_from_et(resnet_et, os.path.join(tmp, "resnet_synthetic_kineto.json"), 0)

    def resnet(records):
        header = records[0]
        ops = [r for r in records if r.get("kind") == "op"]
        marks = [r["label"] for r in records if r.get("kind") == "mark"]
        iterations = sum(1 for r in records if r.get("kind") == "iteration")
        ok = (header["iterations"] == 3 and iterations == 3 and len(ops) == 3192 and
              marks == ["forward", "backward", "optimizer"] * 3 and header["source"]["link"]["linked"] == 14346)
        return ok, f"{len(ops)} ops, {iterations} iterations, marks {marks}"

    good("public resnet ET (chakra 1.1.0) with a Kineto trace made from it", synthetic, resnet_et, resnet)

    good("public linear pair converts", os.path.join(SHARED, "linear_kineto.json.gz"),
         os.path.join(SHARED, "linear_et.json.gz"), linear)

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
