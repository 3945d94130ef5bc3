#!/usr/bin/env python3
"""End-to-end checks of scripts/record_pytorch.py, reported as TAP (one case per check).

Usage: record_test.py PATH/TO/coopsim   (run from the project root)
Records the tiny MLP for real on the CPU and ResNet-50 at batch 1 with FakeTensors and for real, then
validates and replays the traces with the built coopsim. torch runs under /usr/bin/python3 when it exists (Debian's
python3-torch lives in its dist-packages); without an importable torch the whole test is a TAP skip."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import registry_names  # noqa: E402

COOPSIM = sys.argv[1]
RECORDER = "scripts/record_pytorch.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def finish():
    print(f"1..{len(results)}")
    for i, (name, ok, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}")
        if not ok:
            print(f"# {detail}")
    sys.exit(0 if all(ok for _, ok, _ in results) else 1)


probe = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True)
if probe.returncode != 0:
    print(f"1..0 # SKIP torch is not importable by {PYTHON}")
    sys.exit(0)

tmp = tempfile.mkdtemp(prefix="coopsim-record-")


def path(name):
    return os.path.join(tmp, name)


def record(*args):
    p = subprocess.run([PYTHON, RECORDER, *args], capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


def coopsim(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


sys.path.insert(0, "python")
from coopsim import read_trace as load  # noqa: E402  (the package's reader; imports no torch)


def check_valid_and_replay(label, trace, recorder_stderr):
    code, out, err = coopsim("validate", trace)
    case(f"{label}: coopsim validate accepts the trace", code == 0 and "valid coopsim trace v1" in out, err or out)
    peak = re.search(r"peak live .*\((\d+) bytes\)", out)
    said = re.search(r"peak live (\d+) bytes", recorder_stderr)
    case(f"{label}: recorder and coopsim agree on the peak live bytes",
         peak and said and peak.group(1) == said.group(1), f"{out!r} vs {recorder_stderr!r}")
    code, out, err = coopsim("run", trace, "--allocator", "all")
    rows = [line.split() for line in out.splitlines() if line.split()[:2] and line.split()[1:2] == ["keep"]]
    case(f"{label}: replays under keep with every allocator",
         code == 0 and sorted(r[0] for r in rows) == sorted(registry_names(COOPSIM, "allocators"))
         and all(r[5] == "completed" for r in rows), out + err)


def lifetimes(records):
    """Per iteration: set of tensor ids live when the next iteration starts (or at the end)."""
    live, at_ends = set(), []
    for r in records:
        if r["kind"] == "iteration" and r["index"] > 0:
            at_ends.append(set(live))
        elif r["kind"] == "alloc":
            live.add(r["tensor"])
        elif r["kind"] == "free":
            live.discard(r["tensor"])
    at_ends.append(set(live))
    return at_ends


def check_structure(label, header, records, iterations):
    tensors = {r["id"]: r for r in records if r["kind"] == "tensor"}
    ops = {r["id"]: r for r in records if r["kind"] == "op"}
    flow = [(r["kind"], r.get("label", r.get("index"))) for r in records if r["kind"] in ("iteration", "mark")]
    case(f"{label}: header names the tool, ns and the iterations",
         header.get("format") == "coopsim-trace" and header.get("version") == 1 and header.get("time_unit") == "ns"
         and header.get("iterations") == iterations and header["source"]["tool"] == RECORDER, str(header))
    case(f"{label}: each iteration has a backward then an optimizer mark",
         flow == [x for i in range(iterations) for x in (("iteration", i), ("mark", "backward"), ("mark", "optimizer"))],
         str(flow))
    persistent = {"parameter", "optimizer_state", "other", "workspace"}  # workspaces: held by the library
    leaked = [sorted(t for t in live if tensors[t]["role"] not in persistent) for live in lifetimes(records)]
    case(f"{label}: activations, gradients and inputs are freed within their iteration",
         all(not x for x in leaked), str(leaked)[:300])
    roles = {t["role"] for t in tensors.values()}
    case(f"{label}: tensors carry the roles of a training step",
         {"parameter", "input", "activation", "gradient", "optimizer_state"} <= roles, str(roles))
    params = {t["id"] for t in tensors.values() if t["role"] == "parameter" and t.get("bytes")}
    case(f"{label}: the optimizer step mutates the parameters in place",
         any(set(o.get("mutates", [])) & params for o in ops.values()), "")
    case(f"{label}: views are declared", any(o.get("views") for o in ops.values()), "")
    return tensors, ops


# --- the tiny MLP, recorded for real on the CPU -------------------------------------------------------
mlp = path("mlp.jsonl.gz")
code, out, err = record("--model", "mlp-tiny", "--iterations", "3", "-o", mlp)
case("mlp-tiny: records with the CPU wall clock", code == 0 and os.path.exists(mlp) and not os.path.exists(mlp + ".tmp"),
     err)
if code == 0:
    check_valid_and_replay("mlp-tiny", mlp, err)
    header, records = load(mlp)
    tensors, ops = check_structure("mlp-tiny", header, records, 3)
    # Linear(32, 64) and Linear(64, 10) in float32: weights 32*64*4 and 64*10*4 bytes, biases 64*4 and 10*4.
    sizes = {t["name"]: t["bytes"] for t in tensors.values() if t["role"] in ("parameter", "optimizer_state")}
    case("mlp-tiny: parameter sizes are the layers' float32 sizes",
         {k: sizes.get(k) for k in ("0.weight", "0.bias", "3.weight", "3.bias")} ==
         {"0.weight": 8192, "0.bias": 256, "3.weight": 2560, "3.bias": 40}, str(sizes))
    case("mlp-tiny: SGD momentum buffers are optimizer state of the parameter's size",
         sizes.get("0.weight.momentum_buffer") == 8192 and sizes.get("3.bias.momentum_buffer") == 40, str(sizes))
    grads = {t["name"]: t["bytes"] for t in tensors.values() if t["role"] == "gradient" and t["name"].endswith(".grad")}
    case("mlp-tiny: parameter gradients are named and sized", grads.get("0.weight.grad") == 8192, str(grads))
    case("mlp-tiny: dropout's mask is a random op", any(o.get("random") for o in ops.values()), "")
    case("mlp-tiny: CPU durations are measured", header["source"]["durations"]["timing"] == "measured"
         and any(o.get("duration", 0) > 0 for o in ops.values()), str(header["source"]))

fake1, fake2 = path("fake1.jsonl"), path("fake2.jsonl")
code1, _, err1 = record("--model", "mlp-tiny", "--fake", "-o", fake1)
code2, _, err2 = record("--model", "mlp-tiny", "--fake", "-o", fake2)
case("mlp-tiny --fake records twice byte-identically",
     code1 == 0 and code2 == 0 and open(fake1, "rb").read() == open(fake2, "rb").read(), err1 + err2)

# --- ResNet-50 at batch 1 on FakeTensors, durations from the H100 roofline ------------------------------
r50 = path("resnet50.jsonl.gz")
code, out, err = record("--model", "resnet50", "--batch", "1", "--fake", "--device-profile", "h100", "-o", r50)
case("resnet50 --fake: records", code == 0 and os.path.exists(r50), err)
if code == 0:
    check_valid_and_replay("resnet50", r50, err)
    header, records = load(r50)
    tensors, ops = check_structure("resnet50", header, records, 2)
    by_role = {}
    for t in tensors.values():
        by_role[t["role"]] = by_role.get(t["role"], 0) + t["bytes"]
    # torchvision's ResNet-50 has 25,557,032 parameters: 102,228,128 bytes in float32, and as much
    # SGD momentum.
    case("resnet50: parameters and momentum buffers are 25,557,032 floats each",
         by_role.get("parameter") == 102228128 and by_role.get("optimizer_state") == 102228128, str(by_role))
    images = [t["id"] for t in tensors.values() if t["name"] == "images"]
    case("resnet50: the input batch is 1x3x224x224 floats",
         [tensors[i]["bytes"] for i in images] == [602112], str(images))
    # conv1 (3 -> 64, 7x7, stride 2, 224 -> 112): 2 * 64*3*7*7 * 112*112 FLOPs on TF32 tensor cores
    # (494.5 TFLOP/s) against 602,112 + 37,632 + 3,211,264 bytes at 3.35 TB/s: memory-bound, 1149.55 ns;
    # the fitted model (cost.py) divides by the convolutions' efficiency 0.30 and takes at least the
    # 3,072 ns kernel floor.
    conv1 = [o for o in ops.values() if o["name"] == "aten::convolution" and images and images[0] in o["inputs"]]
    roof = max(2 * 64 * 3 * 7 * 7 * 112 * 112 / 494.5e12, (602112 + 37632 + 3211264) / 3.35e12) * 1e9
    expected = round(max(3072, roof / 0.30))
    case("resnet50: conv1's duration is the H100 fitted estimate",
         len(conv1) == 1 and conv1[0].get("duration") == expected, f"{conv1} expected {expected}")
    # fc: [1, 2048] x [2048, 1000] + bias: 4,096,000 FLOPs at FP32 67 TFLOP/s against 4,000 + 8,192 +
    # 8,192,000 + 4,000 bytes: memory-bound, 2450.2 ns; over the fp32 products' efficiency 0.71.
    fc = [o for o in ops.values() if o["name"] == "aten::addmm"]
    expected_fc = round(max(3072, max(2 * 2048 * 1000 / 67e12, (4000 + 8192 + 8192000 + 4000) / 3.35e12) * 1e9 / 0.71))
    case("resnet50: the classifier's addmm duration is the H100 fitted estimate",
         fc and all(o.get("duration") == expected_fc for o in fc), f"{fc} expected {expected_fc}")

# The same step on real CPU tensors, timed with the same roofline: everything after the header must match
# (fake tensors change nothing but the absence of data; conv backward's 1.13 shape rule is exact).
real = path("resnet50-real.jsonl.gz")
code, out, err = record("--model", "resnet50", "--batch", "1", "--device-profile", "h100", "-o", real)
same = code == 0 and os.path.exists(r50) and load(real)[1] == load(r50)[1]
case("resnet50: real and fake recordings give identical records", same, err)

# --- errors --------------------------------------------------------------------------------------------
bad = path("no/such/dir/out.jsonl")
code, out, err = record("--model", "mlp-tiny", "--quiet", "-o", bad)
case("an unwritable output is a one-line error and leaves no file",
     code == 1 and err.strip().startswith("record_pytorch: error: mlp-tiny: ") and len(err.strip().splitlines()) == 1
     and not os.path.exists(bad) and not os.path.exists(bad + ".tmp"), err)
code, out, err = record("--model", "resnet-9000", "-o", path("x.jsonl"))
case("an unknown model is a usage error", code == 2 and "invalid choice" in err and not os.path.exists(path("x.jsonl")),
     err)

shutil.rmtree(tmp, ignore_errors=True)
finish()
