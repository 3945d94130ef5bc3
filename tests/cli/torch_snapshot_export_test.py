#!/usr/bin/env python3
"""The PyTorch memory snapshot export (`coopsim run --torch-snapshot`) as PyTorch's own viewers
read it, reported as TAP.

Usage: torch_snapshot_export_test.py PATH/TO/coopsim   (run from the project root)

For runs of the bundled default trace under the pytorch model (cudaMalloc'd and expandable
segments, segments freed to retry an allocation and by garbage collection, swap-ins and
recomputation) and under bestfit (derived segments):
  * the history replays the way memory_viz's "Allocator State History" walks it: starting from the
    final `segments` and undoing the history gives a start state from which every `alloc` lies in a
    live segment, no segment is freed or unmapped under a live block, and the end is the final
    `segments` with exactly the live blocks active;
  * the pytorch model's segment entries are its device mallocs and frees (the report's counters);
  * every entry and active block has a frame with a str `filename`, an int `line` and a `name`
    naming the tensor, its role and the op; swap-ins and recomputations say so.
A keep run whose garbage collection frees segments is imported back (`coopsim import
torch-snapshot`) and replayed by the pytorch model with --check-addresses under the same budget
and settings: every address and the end state come back. When /usr/bin/python3 has torch,
torch.cuda._memory_viz summarises the files (skipped otherwise)."""
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile

from tap import finish, runner

COOPSIM = sys.argv[1]
TRACE = "traces/default.jsonl.gz"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-torch-snapshot-")
run = runner(COOPSIM)


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def path(name):
    return os.path.join(tmp, name)


def load(p):  # export_test.py checks that the pickle holds plain data only
    with open(p, "rb") as f:
        return pickle.load(f)


# --- address ranges: sorted, disjoint [lo, hi) pairs; touching ranges are joined ----------------
def join(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and out[-1][1] > lo:
            raise ValueError(f"segments overlap at {lo:#x}")
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def cut(ranges, lo, hi):
    out, found = [], False
    for a, b in ranges:
        if a <= lo and hi <= b:
            found = True
            out += [r for r in ((a, lo), (hi, b)) if r[0] < r[1]]
        else:
            out.append((a, b))
    if not found:
        raise ValueError(f"{lo:#x}+{hi - lo} is not inside a live segment")
    return out


def replay_history(snap):
    """The problems memory_viz would meet walking the history (an empty list when consistent)."""
    entries = snap["device_traces"][0]
    final = join((s["address"], s["address"] + s["total_size"]) for s in snap["segments"])
    grows, shrinks = ("segment_alloc", "segment_map"), ("segment_free", "segment_unmap")
    problems = []
    try:
        segs = list(final)
        for e in reversed(entries):  # back to the start
            if e["action"] in grows:
                segs = cut(segs, e["addr"], e["addr"] + e["size"])
            elif e["action"] in shrinks:
                segs = join(segs + [(e["addr"], e["addr"] + e["size"])])
        live = {}
        for i, e in enumerate(entries):
            lo = e.get("addr", 0)
            hi = lo + e["size"]
            if e["action"] == "alloc":
                if not any(a <= lo and hi <= b for a, b in segs):
                    problems.append(f"entry {i}: alloc {lo:#x}+{e['size']} outside every segment")
                live[lo] = hi
            elif e["action"] == "free_completed":
                live.pop(lo)
            elif e["action"] in grows:
                segs = join(segs + [(lo, hi)])
            elif e["action"] in shrinks:
                if any(lo <= b < hi for b in live):
                    problems.append(f"entry {i}: {e['action']} {lo:#x} under a live block")
                segs = cut(segs, lo, hi)
        if segs != final:
            problems.append("the history does not end at the final segments")
        active = {b["address"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
        if active != set(live):
            problems.append(f"{len(active ^ set(live))} blocks differ between the history and the final segments")
        if any(sum(b["size"] for b in s["blocks"]) != s["total_size"] for s in snap["segments"]):
            problems.append("a final segment's blocks do not tile it")
    except (KeyError, ValueError) as e:
        problems.append(f"{type(e).__name__}: {e}")
    return problems


ROLE = re.compile(r"\[(parameter|input|activation|gradient|optimizer_state|workspace|other)\]")


def frame_problems(snap):
    """Entries and active blocks whose frames memory_viz could not show as tensor, role and op."""
    things = [e for e in snap["device_traces"][0] if e["action"] != "oom"]
    things += [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    bad = []
    for t in things:
        f = t.get("frames") or [{}]
        if not (isinstance(f[0].get("filename"), str) and isinstance(f[0].get("line"), int)
                and isinstance(f[0].get("name"), str) and ROLE.search(f[0]["name"])):
            bad.append(t)
    return bad


def names(snap):
    return {e["frames"][0]["name"] for e in snap["device_traces"][0] if e["frames"]}


def count(snap, action):
    return sum(1 for e in snap["device_traces"][0] if e["action"] == action)


# --- runs of the default trace ------------------------------------------------------------------
RUNS = {  # name: (arguments, what the run must show)
    "pytorch-keep": (["-a", "pytorch", "-b", "16GiB"], "segment_alloc"),
    "pytorch-autoswap": (["-a", "pytorch", "-p", "autoswap", "-b", "60%"], "segment_free"),
    "pytorch-gc": (["-a", "pytorch", "-p", "autoswap", "-b", "60%", "--set", "pytorch.garbage_collection_threshold=0.5"],
                   "segment_free"),
    "pytorch-expandable": (["-a", "pytorch", "-p", "autoswap", "-b", "60%", "--set",
                            "pytorch.expandable_segments=true"], "segment_unmap"),
    "pytorch-coop": (["-a", "pytorch", "-p", "coop", "-b", "60%"], "segment_alloc"),
    "bestfit-coop": (["-a", "bestfit", "-p", "coop", "-b", "60%"], "segment_alloc"),
}
snaps = {}
for name, (args, shows) in RUNS.items():
    sn, rep = path(f"{name}.pickle"), path(f"{name}.json")
    code, _, err = run("run", TRACE, *args, "--torch-snapshot", sn, "-o", rep, "-q", "--audit")
    snap = load(sn) if code == 0 else {"device_traces": [[]], "segments": []}
    snaps[name] = snap
    counters = json.load(open(rep))["counters"] if code == 0 else {}
    case(f"{name}: the run exports a snapshot with {shows} entries", code == 0 and count(snap, shows) > 0,
         err or {a: count(snap, a) for a in ("segment_alloc", "segment_free", "segment_map", "segment_unmap")})
    problems = replay_history(snap)
    case(f"{name}: the history replays from the final segments as memory_viz walks it", not problems, problems[:3])
    bad = frame_problems(snap)
    case(f"{name}: every entry and active block has a frame naming tensor [role] and op", not bad, bad[:2])
    if name.startswith("pytorch"):
        grows, shrinks = ("segment_map", "segment_unmap") if "expandable" in name else ("segment_alloc", "segment_free")
        got = (count(snap, grows), count(snap, shrinks))
        want = (counters.get("device_mallocs"), counters.get("device_frees"))
        case(f"{name}: the segment entries are the model's device mallocs and frees", got == want, (got, want))

case("pytorch-autoswap: swap-in blocks say so", any(" swap-in" in n for n in names(snaps["pytorch-autoswap"])))
case("pytorch-coop: recomputed blocks name the op they re-ran",
     any(" recompute of " in n for n in names(snaps["pytorch-coop"])))
bf = snaps["bestfit-coop"]
case("bestfit-coop: derived segments (one range each, never freed)",
     count(bf, "segment_alloc") == len(bf["segments"]) > 0 and count(bf, "segment_free") == 0)
keep = snaps["pytorch-keep"]
first_frame = next(((e["frames"] or [{}])[0] for e in keep["device_traces"][0] if e["action"] == "alloc"), {})
case("frames: filename is the trace's file name, line the tensor's id",
     first_frame.get("filename") == os.path.basename(TRACE) and first_frame.get("line", -1) >= 0, first_frame)

# --- round trip: import the export and replay it with --check-addresses --------------------------
GC = ["-b", "2GiB", "--set", "pytorch.garbage_collection_threshold=0.5"]
sn, imp = path("gc-keep.pickle"), path("gc-keep.jsonl.gz")
code, _, err = run("run", TRACE, "-a", "pytorch", *GC, "--torch-snapshot", sn, "-q")
snap = load(sn) if code == 0 else {"device_traces": [[]]}
case("round trip: a keep run whose garbage collection frees segments", code == 0 and count(snap, "segment_free") > 0,
     err or count(snap, "segment_free"))
code, _, err = run("import", "torch-snapshot", sn, "-o", imp)
case("round trip: coopsim import torch-snapshot reads the export", code == 0, err)
code, out, err = run("run", imp, "-a", "pytorch", *GC, "--check-addresses")
checked = re.search(r"recorded addresses\s+(\d+) checked, 0 mismatches", out)
case("round trip: the pytorch model replays every address and the end state (--check-addresses)",
     code == 0 and checked and int(checked.group(1)) == count(snap, "alloc") and "segments match" in out,
     err or [line for line in out.splitlines() if "recorded" in line])

# --- PyTorch's own summaries, when /usr/bin/python3 has torch -----------------------------------
torch_python = next((p for p in ("/usr/bin/python3", sys.executable) if os.path.exists(p) and subprocess.run(
    [p, "-c", "import torch.cuda._memory_viz"], capture_output=True).returncode == 0), None)
if torch_python:
    # torch 1.13 takes the segments list (stats, segments, memory); later releases the whole
    # snapshot (segsum, trace, memory). Flame graph lines are returned as text, not drawn.
    probe = """
import pickle, sys
from torch.cuda import _memory_viz as v
d = pickle.load(open(sys.argv[1], 'rb'))
total = sum(s['total_size'] for s in d['segments'])
lines = lambda text: sum(int(line.rsplit(' ', 1)[1]) for line in text.splitlines() if line)
if hasattr(v, 'segsum'):
    v.segsum(d)
    v.trace(d)
    assert lines(v.memory(d, format_flamegraph=lambda x: x)) == total
else:
    assert v.stats(d['segments'])['total_size'].value == total
    assert lines(v.segments(d['segments'], format_flamegraph=lambda x: x)) == total
    assert lines(v.memory(d['segments'], format_flamegraph=lambda x: x)) == total
print('ok')
"""
    for name in RUNS:
        p = subprocess.run([torch_python, "-c", probe, path(f"{name}.pickle")], capture_output=True, text=True)
        case(f"python3-torch: torch.cuda._memory_viz summarises {name}", p.stdout.strip() == "ok", p.stderr[-300:])
else:
    print("# python3-torch not installed: skipping the torch.cuda._memory_viz checks")

finish(results, tmp)
