#!/usr/bin/env python3
"""`coopsim snapshot segsum|stats FILE` against PyTorch's own viewer and Python's unpickler,
reported as TAP (issue 35).

Usage: snapshot_summary_test.py PATH/TO/coopsim   (run from the project root)

Snapshots: coopsim's exports of the bundled default trace (pytorch and bestfit models, torch 2.x and
1.13 layouts), the H200 recordings in traces/h200 and, when ../shared is there, the six public
snapshots in ../shared/traces/pytorch_snapshots (else those cases are TAP skips). For each:
  * `snapshot segsum` prints exactly what torch 2.x's viewer prints for `stats` (its segsum();
    $COOPSIM_TORCH2_PYTHON, else a TAP skip; gzip files are given to it decompressed);
  * `snapshot stats` prints the segment count, total size, bytes per block state and entries per
    action that Python's pickle.load of the file gives.
A truncated snapshot is refused in one line naming the file, with status 1."""
import glob
import gzip
import os
import pickle
import re
import subprocess
import sys
import tempfile

from tap import finish, runner

COOPSIM = sys.argv[1]
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-snapshot-summary-")
run = runner(COOPSIM)
TORCH2 = os.environ.get("COOPSIM_TORCH2_PYTHON", os.path.expanduser("~/.cache/coopsim/torch2-venv/bin/python"))


def case(name, ok, detail="", skipped=None):
    """One TAP case; `skipped` (the reason) makes it a skip."""
    results.append((f"{name} # SKIP {skipped}" if skipped else name, bool(ok) or bool(skipped), detail))


def path(name):
    return os.path.join(tmp, name)


def plain_copy(p):
    """The file, decompressed when it is gzip (the viewer reads plain pickles only)."""
    with open(p, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    out = path(os.path.basename(p).removesuffix(".gz"))
    with open(out, "wb") as f:
        f.write(data)
    return out


def has_viewer(python):
    return os.access(python, os.X_OK) and subprocess.run(
        [python, "-c", "import torch.cuda._memory_viz"], capture_output=True, timeout=600).returncode == 0


def expected_stats(data):
    """The lines `snapshot stats` must print, from the unpickled snapshot."""
    segs = data if isinstance(data, list) else data["segments"]
    states, total = {}, 0
    for s in segs:
        for b in s["blocks"]:
            states[b["state"]] = states.get(b["state"], 0) + b["size"]
            total += b["size"]
    traces = [] if isinstance(data, list) else data.get("device_traces", [])
    actions = {}
    for t in traces:
        for e in t:
            actions[e["action"]] = actions.get(e["action"], 0) + 1
    return segs, total, states, actions, len(traces)


snapshots = []
for name, args in (("pytorch", ["-a", "pytorch"]), ("bestfit", ["-a", "bestfit"])):
    for fmt in ("2.x", "1.13"):
        out = path(f"{name}-{fmt}.pickle")
        code, _, err = run("run", "traces/default.jsonl.gz", *args, "-p", "coop", "-b", "60%", "-q",
                           "--torch-snapshot", out, "--torch-snapshot-format", fmt)
        case(f"export {name} {fmt}", code == 0, err)
        snapshots.append(out)
snapshots += sorted(glob.glob("traces/h200/*.snapshot.pickle.gz"))
shared = sorted(glob.glob("../shared/traces/pytorch_snapshots/*.pickle.gz"))
if not shared:
    case("the public snapshots", True, skipped="../shared/traces/pytorch_snapshots is not there")
snapshots += shared

viewer = has_viewer(TORCH2)
if not viewer:
    case("segsum against torch 2.x's viewer", True, skipped=f"no torch 2.x at {TORCH2}")
for snap in snapshots:
    label = os.path.basename(snap)
    plain = plain_copy(snap)
    with open(plain, "rb") as f:
        data = pickle.load(f)
    code, out, err = run("snapshot", "segsum", snap)
    if viewer:
        p = subprocess.run([TORCH2, "-m", "torch.cuda._memory_viz", "stats", plain], capture_output=True, text=True,
                           timeout=600, cwd=tmp)
        case(f"{label}: segsum is the torch 2.x viewer's stats, byte for byte", code == 0 and out == p.stdout,
             err or f"coopsim:\n{out}\nviewer:\n{p.stdout}{p.stderr}")
    else:
        case(f"{label}: segsum runs", code == 0 and out.startswith("Summary of segments"), err)
    segs, total, states, actions, devices = expected_stats(data)
    code, out, err = run("snapshot", "stats", snap)
    want = [f"segments: {len(segs)}", f"total_size: .* \\({total} bytes\\)", f"entries: {sum(actions.values())}",
            f"devices with a history: {devices}"]
    want += [f"{s}: .* \\({b} bytes\\)" for s, b in states.items()]
    want += [f"  {a}: {n}" for a, n in actions.items()]
    missing = [w for w in want if not re.search(f"^{w}$", out, re.M)]
    case(f"{label}: stats gives Python's figures", code == 0 and not missing, err or f"missing {missing} in\n{out}")

# A truncated snapshot: one line, the file named, status 1.
with open(snapshots[0], "rb") as f:
    data = f.read()
cut = path("cut.pickle")
with open(cut, "wb") as f:
    f.write(data[: len(data) // 2])
for action in ("segsum", "stats"):
    code, out, err = run("snapshot", action, cut)
    case(f"a truncated snapshot: {action} fails in one line naming the file",
         code == 1 and out == "" and err.count("\n") == 1 and f"{cut}: byte " in err, f"{code} {out!r} {err!r}")

finish(results, tmp)
