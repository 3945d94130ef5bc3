#!/usr/bin/env python3
"""End-to-end checks of `coopsim run --plan` and `coopsim replay-gpu`, reported as TAP.

Usage: plan_cli_test.py PATH/TO/coopsim cuda|nocuda   (run from the project root)
In a build without CUDA, replay-gpu must say so; in a CUDA build it loads and checks the plan
and then either finds no device (one-line error) or replays it (a GPU is present)."""
import json
import os
import subprocess
import sys
import tempfile

COOPSIM, BUILD = sys.argv[1], sys.argv[2]
TRACE = "traces/default.jsonl.gz"
NO_CUDA = ("coopsim: error: replay-gpu: this coopsim was built without CUDA (reconfigure with meson setup "
           "-Dcuda=enabled on a machine with nvcc and the CUDA runtime)")
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-plan-cli-")


def path(name):
    return os.path.join(tmp, name)


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr.strip()


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def bad(name, args, expected, outputs=(), prefix=False):
    code, _, err = run(*args)
    matched = err.startswith(expected) if prefix else err == expected
    left = [o for o in outputs if os.path.exists(o) or os.path.exists(o + ".tmp")]
    case(name, code == 1 and matched and not left, f"status {code}, stderr {err!r}, expected {expected!r}, left {left}")


plan = path("swap.plan.json")
code, out, err = run("run", TRACE, "-a", "bestfit", "-p", "autoswap", "-b", "80%", "-q", "--plan", plan)
doc = json.load(open(plan)) if code == 0 and os.path.exists(plan) else {}
kinds = {s["kind"] for s in doc.get("steps", [])}
case("run --plan writes a plan with swaps on their streams",
     doc.get("format") == "coopsim-plan" and doc.get("policy") == "autoswap" and {"swap_out", "swap_in", "op"} <= kinds
     and all(s["stream"] == {"swap_out": "d2h", "swap_in": "h2d"}.get(s["kind"], "compute") for s in doc["steps"]), err)
case("every swap-in waits for an earlier step",
     all(s["after"] and max(s["after"]) < s["id"] for s in doc.get("steps", []) if s["kind"] == "swap_in"))
plan2 = path("swap2.plan.json")
run("run", TRACE, "-a", "bestfit", "-p", "autoswap", "-b", "80%", "-q", "--plan", plan2)
case("plans are byte-identical run to run", os.path.exists(plan2) and open(plan).read() == open(plan2).read())
remat = path("coop.plan.json")
code, _, err = run("run", TRACE, "-a", "bestfit", "-p", "coop", "-b", "50%", "-q", "--plan", remat)
rdoc = json.load(open(remat)) if code == 0 and os.path.exists(remat) else {}
case("a Coop plan holds evictions and recomputes of earlier op steps",
     any(s["kind"] == "evict" for s in rdoc.get("steps", []))
     and all(rdoc["steps"][s["origin"]]["op"] == s["op"] for s in rdoc.get("steps", []) if s["kind"] == "recompute"), err)

oom = path("oom.plan.json")
bad("--plan of a run that ended in OOM", ["run", TRACE, "-a", "bestfit", "-p", "keep", "-b", "50%", "-q", "--plan", oom],
    "coopsim: error: --plan: the run ended in oom: only a completed run has a plan to replay", (oom,))
bad("--plan needs an address-aware allocator", ["run", TRACE, "-a", "fungible", "-b", "16GiB", "-q", "--plan", oom],
    "coopsim: error: --plan: allocator fungible does not place blocks at addresses; a plan needs an address-aware "
    "allocator such as bestfit", (oom,))

# A corrupted plan: the first swap-in removed (its block still allocated, never written).
steps = doc.get("steps", [])
first_in = next((s["id"] for s in steps if s["kind"] == "swap_in"), None)
corrupt = path("corrupt.plan.json")
reader = None
if first_in is not None:
    kept = [dict(s) for s in steps if s["id"] != first_in]
    for k, s in enumerate(kept):
        s["after"] = sorted({a - (a > first_in) for a in s["after"] if a != first_in})
        if "origin" in s:
            s["origin"] -= s["origin"] > first_in
        s["id"] = k
    target = steps[first_in]
    reader = next(s for s in kept[first_in:] if s["kind"] in ("op", "recompute", "access", "swap_out") and any(
        r["tensor"] == target["tensor"] and r["offset"] == target["offset"]
        for r in (s.get("reads", []) if "reads" in s else [s])))
    json.dump(dict(doc, steps=kept), open(corrupt, "w"))
report = path("gpu.json")
if BUILD == "nocuda":
    bad("replay-gpu says it was built without CUDA", ["replay-gpu", plan, "-o", report], NO_CUDA, (report,))
    bad("replay-gpu without CUDA says so before reading the plan", ["replay-gpu", path("absent.json")], NO_CUDA)
else:
    case("the corrupted plan reads the removed swap-in's tensor", reader is not None)
    code, _, err = run("replay-gpu", corrupt, "-o", report)
    case("replay-gpu's plan checker names the step that reads a tensor nobody swapped in",
         code == 1 and err.startswith(f"coopsim: error: {corrupt}: steps[{reader['id'] if reader else -1}] (")
         and "the block holds nothing yet" in err and not os.path.exists(report), err)
    badjson = path("bad.plan.json")
    open(badjson, "w").write(open(plan).read().replace('"kind":"swap_out"', '"kind":"swapout"', 1))
    bad("replay-gpu rejects a malformed plan with the key path",
        ["replay-gpu", badjson, "-o", report], f"coopsim: error: {badjson}: steps[", (report,), prefix=True)
    bad("replay-gpu rejects --iterations 0", ["replay-gpu", plan, "--iterations", "0"],
        "coopsim: error: --iterations: must be at least 1")
    code, out, err = run("replay-gpu", plan, "--iterations", "1", "--warmup", "0", "-o", report)
    if code == 0:
        rep = json.load(open(report))
        case("on a GPU: the sound plan replays with integrity ok", rep["integrity"]["ok"] and rep["device"]["name"], out)
    else:
        case("without a GPU: replay-gpu says there is no device and writes no report",
             code == 1 and err.startswith("coopsim: error: replay-gpu: no CUDA device") and not os.path.exists(report),
             err)

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
