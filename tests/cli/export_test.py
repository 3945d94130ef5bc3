#!/usr/bin/env python3
"""End-to-end checks of the single-run exports of `coopsim run` (--timeline, --memory-map,
--torch-snapshot) and of --audit, reported as TAP.

Usage: export_test.py PATH/TO/coopsim   (run from the project root)
Each export is written on the bundled default trace under a swapping and a recomputing policy
and checked structurally (Perfetto JSON, SVG as XML, the snapshot pickle read back both by
Python and by `coopsim import torch-snapshot`); a hand-written three-tensor trace checks the
memory map rectangle by rectangle. Bad uses give the exact one-line error and leave no file."""
import gzip
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

COOPSIM = sys.argv[1]
TRACE = "traces/default.jsonl.gz"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-export-")


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def path(name):
    return os.path.join(tmp, name)


class PlainData(pickle.Unpickler):
    """Loads plain data only: any class or function reference is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def load_pickle(p):
    with open(p, "rb") as f:
        return PlainData(io.BytesIO(f.read())).load()


def svg_rects(p, cls):
    root = ET.parse(p).getroot()
    return [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if cls in r.get("class", "").split()]


def check_timeline(name, p, want_transfers, want_recomputes):
    try:
        doc = json.load(open(p))
        events = doc["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        case(f"{name}: timeline is JSON with traceEvents", False, str(e))
        return
    slices = [e for e in events if e["ph"] == "X"]
    fields_ok = all(isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
                    and isinstance(e["name"], str) and e["pid"] == 1 for e in slices)
    case(f"{name}: every slice has name, pid, numeric ts and dur >= 0", fields_ok and slices)
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    case(f"{name}: compute, eviction and both copy tracks are named",
         {threads.get(1), threads.get(2), threads.get(1000), threads.get(2000)} ==
         {"compute stream", "evictions", "device-to-host", "host-to-device"}, threads)
    compute = [(round(e["ts"] * 1000), round(e["dur"] * 1000)) for e in slices if e["tid"] == 1]
    overlaps = [i for i in range(1, len(compute)) if compute[i][0] < compute[i - 1][0] + compute[i - 1][1]]
    case(f"{name}: compute track slices do not overlap", compute and not overlaps, overlaps[:3])
    counters = [e for e in events if e["ph"] == "C"]
    ts = [e["ts"] for e in counters]
    case(f"{name}: allocated and reserved counters, monotone in time",
         ts == sorted(ts) and {e["name"] for e in counters} == {"allocated", "reserved"})
    cats = {e.get("cat") for e in slices}
    if want_transfers:
        case(f"{name}: swap-outs and swap-ins on the copy tracks",
             {"swap-out", "swap-in"} <= cats and all(e["tid"] >= 1000 for e in slices if e["cat"].startswith("swap")))
    if want_recomputes:
        evictions = [e for e in events if e["ph"] == "i"]
        case(f"{name}: recomputes on the compute track and evictions as instants",
             any(e["cat"] == "recompute" and e["tid"] == 1 and e["name"].startswith("recompute ") for e in slices)
             and evictions and all(e["s"] == "t" for e in evictions))


# --- each export on the bundled trace, under a swapping and a recomputing policy --------------
for policy in ("autoswap", "coop"):
    tl, mm, sn, rep = (path(f"{policy}.{x}") for x in ("json", "svg", "pickle", "report.json"))
    code, out, err = run("run", TRACE, "-p", policy, "-a", "pytorch", "-b", "60%", "--audit", "--timeline", tl,
                         "--memory-map", mm, "--torch-snapshot", sn, "-o", rep, "-q")
    case(f"{policy}: run with every export and --audit succeeds quietly", code == 0 and err == "", err)
    report = json.load(open(rep)) if os.path.exists(rep) else {}
    moved = report.get("time", {}).get("swap_outs" if policy == "autoswap" else "recomputes", 0)
    case(f"{policy}: the run really {'swaps' if policy == 'autoswap' else 'recomputes'}", moved > 0, report.get("time"))
    check_timeline(policy, tl, policy == "autoswap", policy == "coop")
    try:
        blocks = svg_rects(mm, "block")
        svg_ok = True
    except (OSError, ET.ParseError) as e:
        blocks, svg_ok = [], str(e)
    case(f"{policy}: the memory map parses as XML", svg_ok is True, svg_ok)
    snap = load_pickle(sn) if os.path.exists(sn) else {}
    entries = snap.get("device_traces", [[]])[0]
    allocs = [(e["addr"], e["size"]) for e in entries if e["action"] == "alloc"]
    case(f"{policy}: one memory map rectangle per block lifetime (= snapshot allocs)", len(blocks) == len(allocs) > 0,
         (len(blocks), len(allocs)))
    # Round trip: coopsim's importer reads the snapshot back into the same alloc/free sequence.
    imp = path(f"{policy}.imported.jsonl")
    code, _, err = run("import", "torch-snapshot", sn, "-o", imp)
    seq, sizes, where = [], {}, {}
    for line in open(imp) if code == 0 else []:
        r = json.loads(line)
        if r.get("kind") == "tensor":
            sizes[r["id"]] = r["bytes"]
        elif r.get("kind") == "alloc":
            where[r["tensor"]] = r["addr"]
            seq.append(("alloc", r["addr"], sizes[r["tensor"]]))
        elif r.get("kind") == "free":
            seq.append(("free", where[r["tensor"]], sizes[r["tensor"]]))
    want = [("alloc" if e["action"] == "alloc" else "free", e["addr"], e["size"]) for e in entries
            if e["action"] in ("alloc", "free_completed")]
    case(f"{policy}: the snapshot imports back into the same alloc/free sequence", code == 0 and seq == want and seq,
         err or (len(seq), len(want)))
    segs = snap.get("segments", [])
    case(f"{policy}: snapshot segments tile their blocks",
         segs and all(sum(b["size"] for b in s["blocks"]) == s["total_size"] for s in segs))

# PyTorch's own reader, when Debian's python3-torch is there (skipped otherwise).
torch_python = next((p for p in ("/usr/bin/python3", sys.executable)
                     if os.path.exists(p) and subprocess.run([p, "-c", "import torch"], capture_output=True).returncode == 0),
                    None)
if torch_python:
    probe = ("import pickle, sys\nfrom torch.cuda import _memory_viz as v\n"
             "d = pickle.load(open(sys.argv[1], 'rb'))\ns = v.stats(d['segments'])\n"
             "print(len(d['device_traces'][0]), s['segments'])\n")
    p = subprocess.run([torch_python, "-c", probe, path("coop.pickle")], capture_output=True, text=True)
    snap = load_pickle(path("coop.pickle"))
    case("python3-torch: pickle.load and torch.cuda._memory_viz.stats read the snapshot",
         p.returncode == 0 and p.stdout.split() == [str(len(snap["device_traces"][0])), str(len(snap["segments"]))],
         p.stderr[-300:])
else:
    print("# python3-torch not installed: skipping the torch.cuda._memory_viz check")

# --- the memory map of a hand-checkable trace -------------------------------------------------
tiny = path("tiny.jsonl")
with open(tiny, "w") as f:
    f.write("\n".join(json.dumps(r) for r in [
        {"format": "coopsim-trace", "version": 1, "model": "tiny", "time_unit": "ns", "iterations": 1},
        {"kind": "tensor", "id": 1, "bytes": 1024, "role": "parameter", "name": "w"},
        {"kind": "tensor", "id": 2, "bytes": 2048, "role": "activation", "name": "x"},
        {"kind": "tensor", "id": 3, "bytes": 1024, "role": "gradient", "name": "g"},
        {"kind": "op", "id": 10, "name": "fwd", "duration": 100, "inputs": [1], "outputs": [2]},
        {"kind": "op", "id": 11, "name": "bwd", "duration": 50, "inputs": [2, 1], "outputs": [3]},
        {"kind": "alloc", "tensor": 1}, {"kind": "alloc", "tensor": 2}, {"kind": "compute", "op": 10},
        {"kind": "alloc", "tensor": 3}, {"kind": "compute", "op": 11}, {"kind": "free", "tensor": 2},
        {"kind": "free", "tensor": 3}]) + "\n")
tiny_svg = path("tiny.svg")
code, _, err = run("run", tiny, "-a", "bestfit", "-b", "8KiB", "--memory-map", tiny_svg, "--audit", "-q")
rects = svg_rects(tiny_svg, "block") if code == 0 else []
# w at [0, 1 KiB) for the whole run (150 ns), x at [1, 3) KiB until it is freed at 150 ns, g at
# [3, 4) KiB from 100 ns; the address axis spans the 4 KiB used, 600 px high from y = 70.
got = sorted((r.get("class"), r.get("x"), r.get("y"), r.get("width"), r.get("height")) for r in rects)
case("tiny trace: one rectangle per block, where the hand-worked layout puts it", got == sorted([
    ("block role-parameter", "90.00", "520.00", "900.00", "150.00"),
    ("block role-activation", "90.00", "220.00", "900.00", "300.00"),
    ("block role-gradient", "690.00", "70.00", "300.00", "150.00")]), (code, err, got))
fungible_svg = path("tiny-fungible.svg")
code, _, err = run("run", tiny, "-a", "fungible", "-b", "8KiB", "--memory-map", fungible_svg, "-q")
title = "".join(ET.parse(fungible_svg).getroot().itertext()) if code == 0 else ""
case("address-blind runs are drawn as stacked bars and say so",
     "stacked bars of live bytes by role" in title and svg_rects(fungible_svg, "bar") and not svg_rects(fungible_svg, "block"))
cost_svg = path("tiny-cost.svg")
code, _, err = run("run", tiny, "-a", "bestfit", "-b", "8KiB", "--memory-map", cost_svg, "--memory-map-colour", "cost", "-q")
fills = sorted(r.get("fill") for r in svg_rects(cost_svg, "block")) if code == 0 else []
case("--memory-map-colour cost colours by producer op time", fills == ["#440154", "#d0d0d0", "#fde725"], (err, fills))

# An OOM in the exports: the tiny trace at 3 KiB (w 1 KiB + x 2 KiB live, g's 1 KiB cannot be placed:
# capacity, 1 KiB short). The timeline has one global 'oom' instant with the verdict; the memory map a
# red box for the failed request, 1/3 of the 600 px plot high, and the verdict line.
oom_json, oom_svg = path("oom.json"), path("oom.svg")
code, _, err = run("run", tiny, "-a", "bestfit", "-b", "3KiB", "--timeline", oom_json, "--memory-map", oom_svg, "-q")
events = [e for e in json.load(open(oom_json))["traceEvents"] if e.get("cat") == "oom"] if code == 0 else []
case("the timeline marks the OOM with its verdict",
     len(events) == 1 and events[0]["ph"] == "i" and events[0]["s"] == "g" and events[0]["args"]["verdict"] == "capacity"
     and events[0]["args"]["requested_bytes"] == 1024 and events[0]["name"].startswith("capacity OOM: 1.00 KiB short"),
     (code, err, events))
boxes = [r for r in ET.parse(oom_svg).getroot().iter("{http://www.w3.org/2000/svg}rect")
         if r.get("fill") == "#b00000"] if code == 0 else []
words = "".join(ET.parse(oom_svg).getroot().itertext()) if code == 0 else ""
case("the memory map draws the failed request and the verdict",
     len(boxes) == 1 and boxes[0].get("height") == "200.00" and "OOM: request of 1.00 KiB failed; capacity OOM" in words,
     (boxes and boxes[0].attrib, words[-200:]))

# --- --audit on every kind of policy ---------------------------------------------------------
for policy, allocator in (("keep", "pytorch"), ("keep", "fungible"), ("coop", "bestfit"), ("dtr", "fungible"),
                          ("dtr", "pytorch"), ("autoswap", "cnmem")):
    code, out, err = run("run", TRACE, "-p", policy, "-a", allocator, "-b", "60%" if policy != "keep" else "16GiB",
                         "--audit", "-q")
    case(f"--audit passes a correct {policy} run on {allocator} silently", code == 0 and out == "" and err == "", err)

# --- bad uses -----------------------------------------------------------------------------------
def bad(name, args, expected, outputs, status=1):
    code, _, err = run(*args)
    left = [o for o in outputs if os.path.exists(o) or os.path.exists(o + ".tmp")]
    case(name, code == status and err.strip() == expected and not left,
         f"status {code}, stderr {err.strip()!r}, expected {expected!r}, left {left}")


multi = path("multi.json")
bad("--timeline with two budgets", ["run", TRACE, "-b", "1GiB,2GiB", "--timeline", multi],
    "coopsim: error: --timeline: needs exactly one run (one allocator, one policy, one budget); this command makes 2",
    (multi,))
bad("--torch-snapshot with two allocators", ["run", TRACE, "-a", "pytorch,bestfit", "--torch-snapshot", multi],
    "coopsim: error: --torch-snapshot: needs exactly one run (one allocator, one policy, one budget); this command makes 2",
    (multi,))
bad("--audit with every policy", ["run", TRACE, "-p", "all", "--audit"],
    "coopsim: error: --audit: needs exactly one run (one allocator, one policy, one budget); this command makes 8", ())
for flag, name in (("--timeline", "t.json"), ("--memory-map", "m.svg"), ("--torch-snapshot", "s.pickle")):
    target = path(os.path.join("no-such-dir", name))
    bad(f"{flag} into a missing directory", ["run", TRACE, "-q", flag, target],
        f"coopsim: error: {target}: cannot write output file: No such file or directory", (target,))
bad("--memory-map-colour takes role or cost only (a usage error, before anything runs)",
    ["run", TRACE, "--memory-map", path("c.svg"), "--memory-map-colour", "size"],
    "coopsim: error: --memory-map-colour: expected role or cost, got 'size'", (path("c.svg"),), status=2)

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
