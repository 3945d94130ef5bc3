#!/usr/bin/env python3
"""`coopsim snapshot timeline` and `coopsim snapshot diff`, reported as TAP (issue 35).

Usage: snapshot_diff_test.py PATH/TO/coopsim   (run from the project root)

* timeline of the H200 ResNet-50 snapshot (traces/h200): valid Chrome trace JSON whose allocated
  and reserved counters peak at the run's own max_memory_allocated() / max_memory_reserved()
  (recorded in the trace's header by the recorder, not by coopsim); --from/--to keep only events
  inside the window; bad input and bad options fail in one line with no output file left, and a
  symbolic link at the output name is refused and left alone.
* diff of the snapshot against the trace the recorder wrote in the same run: the same live bytes
  at the allocated peak in every size class (the workspaces are in the trace); diff of two Kineto traces gives the peaks `coopsim run -a
  pytorch` gives on their imports.
* diff of pairs of fake recordings of one model (scripts/record_pytorch.py --fake on the CPU) that
  differ in one thing: the batch 8 -> 16 (the frames that grew are activations, exactly doubled; no
  parameter changed), activation checkpointing of layer1-4 (peak allocated and the live bytes at it
  go down; forward activations are no longer live there), bf16 autocast (the largest frame
  changes are exactly halved) and an allocator setting in the header (the setting is named, no frame
  or size changes).
  The recorder runs under $COOPSIM_TORCH2_PYTHON (else the torch 2.x venv, else /usr/bin/python3);
  without an importable torch those cases are TAP skips."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

from tap import finish, runner

COOPSIM = sys.argv[1]
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-snapshot-diff-")
run = runner(COOPSIM, timeout=600)
RESNET_SNAPSHOT = "traces/h200/resnet50_b115.snapshot.pickle.gz"
RESNET_TRACE = "traces/h200/resnet50_b115.jsonl.gz"


def case(name, ok, detail="", skipped=None):
    results.append((f"{name} # SKIP {skipped}" if skipped else name, bool(ok) or bool(skipped), detail))


def path(name):
    return os.path.join(tmp, name)


def one_line_error(status, out, err):
    return status != 0 and out == "" and len(err.strip().splitlines()) == 1


# --- timeline -------------------------------------------------------------------------------
with gzip.open(RESNET_TRACE, "rt") as f:
    cuda_memory = json.loads(f.readline())["source"]["cuda_memory"]

status, out, err = run("snapshot", "timeline", RESNET_SNAPSHOT, "-o", path("t.json"))
doc = json.load(open(path("t.json"))) if status == 0 else {"traceEvents": []}
events = doc["traceEvents"]


def counter_max(evs, name):
    return max((e["args"]["bytes"] for e in evs if e.get("ph") == "C" and e["name"] == name), default=None)


case("timeline: exit 0, nothing on stdout", status == 0 and out == "", err)
case("timeline: allocated counter peaks at max_memory_allocated()",
     counter_max(events, "allocated") == cuda_memory["max_memory_allocated"],
     f"{counter_max(events, 'allocated')} vs {cuda_memory['max_memory_allocated']}")
case("timeline: reserved counter peaks at max_memory_reserved()",
     counter_max(events, "reserved") == cuda_memory["max_memory_reserved"],
     f"{counter_max(events, 'reserved')} vs {cuda_memory['max_memory_reserved']}")
times = sorted(float(e["ts"]) for e in events if e.get("ph") in ("C", "i"))
case("timeline: recorded times", doc.get("otherData", {}).get("time") == "recorded" and len(times) > 100,
     str(doc.get("otherData")))

# A window in the middle third of the recording, given in ms and in plain ns.
if times:
    lo_us, hi_us = times[-1] / 3, 2 * times[-1] / 3
    status, out, err = run("snapshot", "timeline", RESNET_SNAPSHOT, "--from", f"{lo_us / 1000}ms",
                           "--to", str(int(hi_us * 1000)), "-o", path("w.json"))
    inside = json.load(open(path("w.json")))["traceEvents"] if status == 0 else []
    ts = [float(e["ts"]) for e in inside if "ts" in e]
    case("timeline --from/--to: every event inside the window, fewer than in all",
         status == 0 and ts and all(lo_us - 0.001 <= t <= hi_us + 0.001 for t in ts) and len(ts) < len(times),
         f"status {status} {err} {min(ts, default=None)}..{max(ts, default=None)} vs {lo_us}..{hi_us}")
    first = [e for e in inside if e.get("ph") == "C" and e["name"] == "allocated"][:1]
    case("timeline --from: the window opens with the allocated bytes in force at its start",
         first and abs(float(first[0]["ts"]) - lo_us) < 0.001, str(first))

bad = path("bad.pickle")
with open(bad, "wb") as f:
    f.write(b"\x80\x04\x95")  # a pickle cut after its frame opcode
for label, args in [
    ("bad duration", ["snapshot", "timeline", RESNET_SNAPSHOT, "--from", "soon", "-o", path("x.json")]),
    ("--from after --to", ["snapshot", "timeline", RESNET_SNAPSHOT, "--from", "2ms", "--to", "1ms", "-o", path("x.json")]),
    ("truncated snapshot", ["snapshot", "timeline", bad, "-o", path("x.json")]),
    ("diff of a truncated snapshot", ["snapshot", "diff", RESNET_SNAPSHOT, bad, "-o", path("x.json")]),
    ("unknown format", ["snapshot", "diff", RESNET_SNAPSHOT, "README.md"]),
    ("diff with one input", ["snapshot", "diff", RESNET_SNAPSHOT]),
]:
    status, out, err = run(*args)
    case(f"{label}: one-line error, non-zero exit, no output file",
         one_line_error(status, out, err) and not os.path.exists(path("x.json")), f"{status} {out!r} {err!r}")
status, out, err = run("snapshot", "timeline", bad, "-o", path("x.json"))
case("truncated snapshot: the error names the file", bad in err, err)

victim = path("victim.txt")
with open(victim, "w") as f:
    f.write("keep me\n")
os.symlink(victim, path("link.json"))
status, out, err = run("snapshot", "timeline", RESNET_SNAPSHOT, "-o", path("link.json"))
case("timeline: a symbolic link at the output name is refused and its target kept",
     one_line_error(status, out, err) and open(victim).read() == "keep me\n", f"{status} {err!r}")

# --- diff of one recording against itself, and the h200 snapshot against its own trace ----------
status, out, err = run("snapshot", "diff", RESNET_SNAPSHOT, RESNET_SNAPSHOT, "--json")
same = json.loads(out) if status == 0 else {}
case("diff A A: schema_version first, no difference anywhere",
     status == 0 and list(same)[0] == "schema_version" and all(v == 0 for v in same["delta"].values())
     and same["frames"] == [] and same["sizes"] == [] and same["allocator_settings"] == [], err)
case("diff: peak allocated / reserved of the snapshot are max_memory_allocated() / _reserved()",
     same.get("a", {}).get("peak_allocated_bytes") == cuda_memory["max_memory_allocated"]
     and same.get("a", {}).get("peak_reserved_bytes") == cuda_memory["max_memory_reserved"], str(same.get("a")))


# The snapshot against the trace the recorder wrote in the same run (3 iterations: the trace
# reuses its tensor ids each iteration, the snapshot has one per allocation).
status, out, err = run("snapshot", "diff", RESNET_SNAPSHOT, RESNET_TRACE, "--json")
d = json.loads(out) if status == 0 else None
case("diff snapshot / trace: the size rows add up to the difference in live bytes at the allocated peak",
     d is not None and sum(r["delta_bytes"] for r in d["sizes"]) == d["delta"]["live_at_the_allocated_peak_bytes"],
     err if d is None else json.dumps(d["sizes"]))
# Since 2026-11-28 the recorder writes the cuBLAS / cuBLASLt workspaces into the trace, and the blocks
# ops take inside themselves (cuDNN's convolution workspaces) come into it from the snapshot of the same
# run (python/coopsim/recording/in_op_blocks.py): at the allocated peak the trace's live bytes are the
# snapshot's, size class by size class, and the reserved peak is the snapshot's.
case("diff snapshot / trace: the same live bytes at the allocated peak in every size class, the same reserved peak",
     d is not None and d["sizes"] == [] and d["delta"]["live_at_the_allocated_peak_bytes"] == 0
     and d["delta"]["peak_reserved_bytes"] == 0,
     err if d is None else json.dumps({"sizes": d["sizes"], "delta": d["delta"]}))
case("diff snapshot / trace: allocator settings not compared (the trace records none)",
     d is not None and d["allocator_settings"] == [] and d["a"]["allocator_settings"] and not d["b"]["allocator_settings"],
     "" if d is None else str(d["allocator_settings"]))


# Kineto traces are read as `coopsim import kineto` reads them; the peaks are those `coopsim run -a
# pytorch` reports on the imported trace.
kineto = ["tests/data/kineto/legacy_lifo.json", "tests/data/kineto/current_addr.json"]
status, out, err = run("snapshot", "diff", *kineto, "--json")
d = json.loads(out) if status == 0 else None
peaks = []
for i, k in enumerate(kineto):
    imported = path(f"kineto{i}.jsonl")
    run("import", "kineto", k, "-o", imported)
    code, rep, _ = run("run", imported, "-a", "pytorch", "--json")
    peaks.append(json.loads(rep)["memory"] if code == 0 else {})
case("diff of two Kineto traces: the peaks of coopsim run -a pytorch on their imports",
     d is not None and all(d[s]["peak_allocated_bytes"] == m.get("peak_allocated_bytes")
                           and d[s]["peak_reserved_bytes"] == m.get("peak_reserved_bytes")
                           for s, m in zip("ab", peaks)), f"{err} {peaks}")


# --- pairs of fake recordings -----------------------------------------------------------------
def torch_python():
    for p in [os.environ.get("COOPSIM_TORCH2_PYTHON", ""),
              os.path.expanduser("~/.cache/coopsim/torch2-venv/bin/python"), "/usr/bin/python3"]:
        if p and os.access(p, os.X_OK) and subprocess.run([p, "-c", "import torch"], capture_output=True,
                                                          timeout=600).returncode == 0:
            return p
    return None


PYTHON = torch_python()
env = dict(os.environ, COOPSIM_BIN=os.path.abspath(COOPSIM))


def record(name, *args):
    out = path(name + ".jsonl.gz")
    # FakeTensors on a fake CUDA device: no GPU needed, and autocast applies its CUDA policy.
    p = subprocess.run([PYTHON, "scripts/record_pytorch.py", "--model", "resnet50", "--fake", "--device", "cuda",
                        "--iterations", "1", "--quiet", "-o", out, *args], capture_output=True, text=True, timeout=900, env=env)
    return out if p.returncode == 0 else None, p.stderr[-2000:]


def diff(a, b):
    status, out, err = run("snapshot", "diff", a, b, "--json")
    return (json.loads(out) if status == 0 else None), err


def parameter_names(trace):
    with gzip.open(trace, "rt") as f:
        return {r["name"] for r in map(json.loads, f) if r.get("kind") == "tensor" and r.get("role") == "parameter"}


if PYTHON is None:
    for name in ["batch", "checkpointing", "bf16 autocast", "allocator setting"]:
        case(f"diff names the change: {name}", True, skipped="no python with an importable torch")
    finish(results, tmp)

base, base_err = record("b8", "--batch", "8")
if base is None:
    case("fake recording of resnet50 at batch 8", False, base_err)
    finish(results, tmp)
params = parameter_names(base)

b16, err = record("b16", "--batch", "16")
d, err = diff(base, b16) if b16 else (None, err)
if d:
    grown = [r for r in d["frames"] if r["delta_bytes"] > 0]
    case("diff names the change: batch 8 -> 16 grows peak allocated", d["delta"]["peak_allocated_bytes"] > 0, str(d["delta"]))
    case("diff names the change: batch 8 -> 16 doubles the frames that grew, no parameter among them",
         grown and all(r["b_bytes"] == 2 * r["a_bytes"] for r in grown[:5]) and not any(r["key"] in params for r in d["frames"]),
         json.dumps(d["frames"][:5]))
else:
    case("diff names the change: batch", False, err)

ckpt, err = record("ckpt", "--batch", "8", "--checkpoint", "layer1,layer2,layer3,layer4")
d, err = diff(base, ckpt) if ckpt else (None, err)
if d:
    case("diff names the change: checkpointing lowers peak allocated and live bytes at it",
         d["delta"]["peak_allocated_bytes"] < 0 and d["delta"]["live_at_the_allocated_peak_bytes"] < 0, str(d["delta"]))
    dropped = [r for r in d["frames"] if r["b_bytes"] == 0 < r["a_bytes"] and r["key"] not in params
               and not r["key"].startswith("backward:")]
    case("diff names the change: checkpointing drops forward activations from the peak, no parameter changed",
         dropped and not any(r["key"] in params for r in d["frames"]), json.dumps(d["frames"][:5]))
else:
    case("diff names the change: checkpointing", False, err)

amp, err = record("amp", "--batch", "8", "--amp", "bf16")
d, err = diff(base, amp) if amp else (None, err)
if d:
    top = d["frames"][:5]
    case("diff names the change: bf16 autocast halves the largest frame changes (float32 -> bfloat16)",
         top and all(r["b_bytes"] * 2 == r["a_bytes"] for r in top) and d["delta"]["peak_allocated_bytes"] < 0,
         json.dumps(top))
elif amp is None and ("autocast" in err.lower() or "--amp" in err):
    case("diff names the change: bf16 autocast", True, skipped=f"the recorder refuses --amp here: {err[-200:]}")
else:
    case("diff names the change: bf16 autocast", False, err)

# The same recording with an allocator setting in its header (as the snapshot importer keeps it).
with gzip.open(base, "rt") as f:
    lines = f.read().splitlines()
header = json.loads(lines[0])


def with_settings(name, settings):
    header["allocator_settings"] = settings
    out = path(name)
    with gzip.open(out, "wt") as f:
        f.write("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    return out


d, err = diff(with_settings("split.jsonl.gz", {"expandable_segments": False, "max_split_size": -1}),
              with_settings("expandable.jsonl.gz", {"expandable_segments": True, "max_split_size": -1}))
# The same request stream under another setting: the setting is the one row of allocator settings, and
# expandable segments reserve less. (The allocated peak can fall at another instant: blocks round and split
# differently, so which op's cuDNN workspace tops it can change; frames at that peak are not compared.)
case("diff names the change: allocator setting expandable_segments",
     d is not None and [s["key"] for s in d["allocator_settings"]] == ["expandable_segments"]
     and d["allocator_settings"][0]["b"] == "true" and d["delta"]["peak_reserved_bytes"] < 0,
     str(d and d["allocator_settings"]) + err)

status, out, err = run("snapshot", "diff", base, b16 or base, "--svg", path("d.svg"), "-o", path("d.json"))
case("diff: text report, JSON file and SVG figure",
     status == 0 and "peak allocated" in out and json.load(open(path("d.json")))["schema_version"] >= 1
     and open(path("d.svg")).read().startswith("<svg"), err)
finish(results, tmp)
