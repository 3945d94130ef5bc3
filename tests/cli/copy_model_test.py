#!/usr/bin/env python3
"""scripts/copy_model.py on the H200 replays in ../shared/gpu-runs (issue 33), as TAP: the plans
made again equal the replayed ones, the implied bandwidths and the fits are those of
docs/cuda-validation.md ("Copy model"), the `h200` link preset is the device-to-host and
host-to-device fit, and a replay whose simulation does not match is refused in one line. Skips when
../shared/gpu-runs or numpy is absent.

Usage: copy_model_test.py PATH/TO/coopsim   (run from the project root)"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

COOPSIM = os.path.abspath(sys.argv[1])
RUNS = "../shared/gpu-runs/h200-2026-11-27/replays-measured-link.tar.gz"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


has_numpy = subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True).returncode == 0
if not os.path.exists(RUNS) or not has_numpy:
    why = "no ../shared/gpu-runs" if not os.path.exists(RUNS) else "no numpy"
    print(f"1..1\nok 1 - copy model on the H200 replays # SKIP {why}")
    sys.exit(0)

tmp = tempfile.mkdtemp(prefix="coopsim-copy-model-")
# The replays are of the bundled traces of commit 141fe84 (their README), re-recorded since.
traces = os.path.join(tmp, "traces")
os.makedirs(traces)
for m in ("resnet50", "unet", "swin_t", "inception_v3", "densenet121", "bert_large", "resnet152", "bilstm", "gpt2"):
    g = subprocess.run(["git", "show", f"141fe84:traces/{m}.jsonl.gz"], capture_output=True)
    if g.returncode != 0:
        print(f"1..1\nok 1 - copy model on the H200 replays # SKIP no git history (141fe84's traces)")
        sys.exit(0)
    with open(os.path.join(traces, f"{m}.jsonl.gz"), "wb") as f:
        f.write(g.stdout)
with tarfile.open(RUNS) as t:
    t.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp)
gpu = os.path.join(tmp, "gpu")
out = os.path.join(tmp, "fits.json")
p = subprocess.run([PYTHON, "scripts/copy_model.py", gpu, "--coopsim", COOPSIM, "--traces", traces, "--json", out],
                   capture_output=True,
                   text=True, timeout=1200)
case("copy_model.py runs on the 12 calibrated replays", p.returncode == 0, p.stderr[-500:])
doc = json.load(open(out)) if p.returncode == 0 else {"rows": [], "fits": {}}
rows = doc["rows"]
case("12 replays x 2 directions", len(rows) == 24 and len({r["replay"] for r in rows}) == 12, len(rows))


def implied(r):
    return r["bytes"] / (r["measured_ns"] - r["copies"] * r["latency_ns"])


d2h = [implied(r) for r in rows if r["direction"] == "d2h"]
h2d = [implied(r) for r in rows if r["direction"] == "h2d"]
case("device-to-host copies ran at 49.3-50.9 GB/s in every replay", d2h and 49.3 <= min(d2h) and max(d2h) <= 50.9,
     d2h)
case("host-to-device copies at 47.7-53.3 GB/s", h2d and 47.7 <= min(h2d) and max(h2d) <= 53.3, h2d)
fits = doc["fits"]
bytes_only = {d: fits[d][0] for d in fits}
case("d2h: bytes alone reproduces 12 of 12 within 3 %",
     bytes_only.get("d2h", {}).get("within") == 12 and bytes_only["d2h"]["max_abs_error"] < 0.018, bytes_only.get("d2h"))
case("h2d: bytes alone only 5 of 12 (no simulated feature explains it)",
     bytes_only.get("h2d", {}).get("within") == 5 and max(f["within"] for f in fits.get("h2d", [{}])) < 12,
     fits.get("h2d"))

listing = json.loads(subprocess.run([COOPSIM, "list", "--json"], capture_output=True, text=True, check=True).stdout)
preset = [p for p in listing["link_presets"] if p["name"] == "h200"]
case("`coopsim list` has the h200 preset", len(preset) == 1, listing["link_presets"])


def simulated_time(*sets):
    args = [COOPSIM, "run", "traces/resnet50.jsonl.gz", "-a", "bestfit", "-p", "autoswap", "-b", "50%", "--json"]
    p = subprocess.run(args + [a for s in sets for a in ("--set", s)], capture_output=True, text=True)
    return json.loads(p.stdout)["time"] if p.returncode == 0 else p.stderr


# The h200 preset is the link measured in run D (docs/data/h200-replays-3.jsonl.gz: the copies of the
# AutoSwap replay made with --calibrate-link, link_in_replay), rounded as the preset states it.
import gzip  # noqa: E402
with gzip.open("docs/data/h200-replays-3.jsonl.gz", "rt") as f:
    measured = next(json.loads(line) for line in f if json.loads(line)["name"] == "resnet50.autoswap.50.h200")
fit = measured["link_in_replay"]
fitted = simulated_time("link.preset=pcie4-x16", f"link.d2h_gbps={fit['d2h']['gbps']:.2f}",
                        f"link.d2h_latency={round(fit['d2h']['latency_ns'])}", f"link.h2d_gbps={fit['h2d']['gbps']:.2f}",
                        f"link.h2d_latency={round(fit['h2d']['latency_ns'])}")
case("the h200 preset simulates as run D's in-replay link does (51.12 / 54.25 GB/s, 8639 / 5647 ns)",
     simulated_time("link.preset=h200") == fitted, fitted)

# A simulation that is not the replayed one (its budget changed): refused, naming the replay.
sim = os.path.join(gpu, "unet.autoswap.80.cal.sim.json")
doc = json.load(open(sim))
doc["time"]["simulated_ns"] += 1  # as another coopsim would have simulated it
json.dump(doc, open(sim, "w"))
p = subprocess.run([PYTHON, "scripts/copy_model.py", gpu, "--coopsim", COOPSIM, "--traces", traces], capture_output=True,
                   text=True,
                   timeout=1200)
case("a simulation that differs from the replayed plan is refused in one line",
     p.returncode == 1 and p.stderr.startswith("copy_model.py: unet.autoswap.80.cal: the plan made again differs")
     and p.stderr.count("\n") == 1, p.stderr)

shutil.rmtree(tmp, ignore_errors=True)
finish(results)
