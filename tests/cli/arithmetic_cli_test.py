#!/usr/bin/env python3
"""Arithmetic and planner caps from the command line (issue 15, classes 2 and 5), reported as TAP:
sizes and offsets near 2^63 in `coopsim plan` and `plan --check`, the planner's caps
(--limit max_buffers / max_conflicts), a time limit far too short, a run whose clock would pass
2^63 - 1 ns, a link too slow to give a finite copy time, and SmartPool with 2^63 live bytes. Each
error case checks exit status 1, the exact one-line message and that no output file was left.
Every input is generated here.

Usage: arithmetic_cli_test.py PATH/TO/coopsim   (run from the project root)"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

COOPSIM = sys.argv[1]
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-arithmetic-")
PASSES = "simulated time passes 2^63 - 1 ns (about 292 years): "


def path(name):
    return os.path.join(tmp, name)


def write(name, text):
    with open(path(name), "w") as f:
        f.write(text)
    return path(name)


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr.strip()


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def bad(name, args, expected, outputs=()):
    code, _, err = run(*args)
    left = [o for o in outputs if os.path.exists(o) or os.path.exists(o + ".tmp")]
    case(name, code == 1 and err == "coopsim: error: " + expected and not left,
         f"status {code}, stderr {err!r}, expected {expected!r}, left {left}")


def trace(name, records):
    return write(name, "\n".join(json.dumps(r) for r in [{"format": "coopsim-trace", "version": 1}] + records) + "\n")


sol = path("sol.csv")

# --- plan: sizes and offsets near 2^63 -------------------------------------------------------
half = 2 ** 62
big = write("big.csv", f"id,lower,upper,size\na,0,10,{half}\nb,0,10,{half}\n")
bad("plan: two overlapping buffers of 2^62 are refused (their placement is 2^63 high)", ["plan", big, "-o", sol],
    f"{big}:3: sizes add up to more than 9223372036854775807 bytes (heights and offsets are signed 64-bit)", [sol])
edge = write("edge.csv", f"id,lower,upper,size\na,0,10,{half - 1}\nb,0,10,{half}\n")
code, out, err = run("plan", edge, "-o", sol)
case("plan: sizes adding up to exactly 2^63 - 1 are stacked, height 2^63 - 1",
     code == 0 and out == f"{sol}: planner, 2 buffers, height 9223372036854775807, max live bytes 9223372036854775807, "
                          "ratio 1.0000 (optimal), 0 iterations\n", (code, out, err))
same = write("same.csv", f"id,lower,upper,size,offset\na,0,10,{half - 1},0\nb,0,10,{half},0\n")
code, out, err = run("plan", "--check", edge, same)
case("plan --check: both at offset 0 overlap", code == 1 and out == f"{same}:3: id 'b' overlaps id 'a' (line 2) in time "
     "and address\n", (code, out, err))
one = write("one.csv", "id,lower,upper,size\na,0,10,1\n")
far = write("far.csv", "id,lower,upper,size,offset\na,0,10,1,9223372036854775807\n")
code, out, err = run("plan", "--check", one, far)
case("plan --check: offset 2^63 - 1 with size 1 is invalid",
     code == 1 and out == f"{far}:2: offset 9223372036854775807 + size 1 is past the largest address "
                          "9223372036854775807\n", (code, out, err))

# --- plan: caps --------------------------------------------------------------------------------
none = path("none.csv")  # never written
four = write("four.csv", "id,lower,upper,size\na,0,1,1\nb,0,1,1\nc,0,1,1\nd,0,1,1\n")
bad("plan: --limit max_buffers", ["plan", four, "-o", none, "--limit", "max_buffers=3"],
    f"{four}:5: more than 3 buffers (limits.max_buffers)", [none])
bad("plan: --limit with an unknown key", ["plan", four, "-o", none, "--limit", "max_tensors=3"],
    "limits.max_tensors: unknown parameter (valid for limits: max_buffers, max_conflicts)", [none])
bad("plan: --limit without a value", ["plan", four, "-o", none, "--limit", "max_buffers"],
    "--limit max_buffers: expected key=value", [none])
bad("plan: --limit max_conflicts=0", ["plan", four, "-o", none, "--limit", "max_conflicts=0"],
    "limits.max_conflicts: must be between 1 and 9223372036854775807, got 0", [none])
longline = write("long.csv", "id,lower,upper,size\n" + "x" * (1 << 20) + "y,0,1,1\n")
bad("plan: a line over 1 MiB", ["plan", longline, "-o", none], f"{longline}:2: line longer than 1048576 bytes", [none])

# 20,000 buffers, most pairs alive together (about 1.2 x 10^8 pairs, over the default cap): the
# planner builds no conflict lists, and 10 ms cannot hold even one decoding.
rng = random.Random(5)
rows = ["id,lower,upper,size"]
for i in range(20000):
    lo = rng.randrange(20000)
    rows.append(f"b{i},{lo},{lo + 1 + rng.randrange(20000)},{1 + rng.randrange(1 << 20)}")
dense = write("dense.csv", "\n".join(rows) + "\n")
code, out, err = run("plan", dense, "--time-limit", "0.01", "-o", sol)
case("plan: --time-limit 0.01 on 20,000 dense buffers ends with a placement and says so",
     code == 0 and out.startswith(f"{sol}: planner, 20000 buffers, height ") and ", construction only (" in out
     and " overlapping pairs > limits.max_conflicts 16000000), stopped by the time limit" in out, (code, out, err))
code, out, err = run("plan", "--check", dense, sol)
case("plan: ... and the placement is valid", code == 0 and out.startswith(f"{sol}: valid, 20000 buffers"), (out, err))
code, out, err = run("plan", dense, "-m", "smartpool-ff", "-o", sol, "--limit", "max_conflicts=1000")
ok = code == 0 and run("plan", "--check", dense, sol)[0] == 0
code2, out2, _ = run("plan", dense, "-m", "smartpool-ff", "-o", path("sol2.csv"))
case("plan: smartpool-ff places the same with and without conflict lists",
     ok and code2 == 0 and open(sol).read() == open(path("sol2.csv")).read(), (out, out2))

# --- run: the clock ----------------------------------------------------------------------------
# Op 1 (6e18 ns) writes x; three 1 MiB temporaries evict x at a 1.5 MiB budget and x is read
# after each: the first recomputation would take the clock to 1.2e19 ns.
recs = [{"kind": "tensor", "id": 1, "bytes": 1 << 20}]
recs += [{"kind": "tensor", "id": 10 + k, "bytes": 1 << 20} for k in range(3)]
recs.append({"kind": "op", "id": 1, "duration": 6 * 10 ** 18, "outputs": [1]})
for k in range(3):
    recs += [{"kind": "op", "id": 10 + k, "duration": 1, "outputs": [10 + k]},
             {"kind": "op", "id": 20 + k, "duration": 1, "inputs": [1]}]
recs += [{"kind": "alloc", "tensor": 1}, {"kind": "compute", "op": 1}]
for k in range(3):
    recs += [{"kind": "alloc", "tensor": 10 + k}, {"kind": "compute", "op": 10 + k}, {"kind": "free", "tensor": 10 + k},
             {"kind": "compute", "op": 20 + k}]
remat = trace("remat.jsonl", recs)
report = path("report.json")
for policy in ("dtr", "dte", "coop"):
    bad(f"run -p {policy}: an op of 6e18 ns recomputed stops the run, no report",
        ["run", remat, "-p", policy, "-a", "bestfit", "-b", "1572864", "--set", f"{policy}.thrash_limit=0", "-o", report],
        f"{remat}: event 5: {PASSES}recomputing op 1 (6000000000000000000 ns) at 6000000000000000001 ns", [report])

# --- run: the link -----------------------------------------------------------------------------
# The bundled default trace under autoswap at 60 % swaps early; at 1e-20 GB/s its first copy
# cannot end before 2^63 - 1 ns (which event and how many bytes is the trace's business).
code, _, err = run("run", "traces/default.jsonl.gz", "-p", "autoswap", "-a", "bestfit", "-b", "60%",
                   "--set", "link.d2h_gbps=1e-20", "-o", report)
case("run: a 1e-20 GB/s link stops the run at its first copy (it used to report zero stall)",
     code == 1 and re.fullmatch(r"coopsim: error: traces/default\.jsonl\.gz: event \d+: " + re.escape(PASSES)
                                + r"a D2H copy of \d+ bytes taking 9223372036854775807 ns from \d+ ns", err)
     and not os.path.exists(report), (code, err))
code, out, err = run("run", "traces/default.jsonl.gz", "-p", "autoswap", "-a", "bestfit", "-b", "60%",
                     "--set", "link.d2h_gbps=1e-9", "--json")
stall = json.loads(out)["time"]["stall_ns"] if code == 0 else 0
code, out, err = run("run", "traces/default.jsonl.gz", "-p", "autoswap", "-a", "bestfit", "-b", "60%", "--json")
case("run: a 1e-9 GB/s link stalls far longer than the default one",
     code == 0 and stall > 1000 * json.loads(out)["time"]["stall_ns"] > 0, (stall, err))
bad("run: a bandwidth with no finite reciprocal", ["run", remat, "--set", "link.h2d_gbps=1e-320", "-o", report],
    "link.h2d_gbps: must be a finite bandwidth in GB/s above 0 (0: the preset's), got 1e-320", [report])

# --- SmartPool with 2^63 live bytes ------------------------------------------------------------
huge = trace("huge.jsonl", [{"kind": "tensor", "id": i, "bytes": 2 ** 53} for i in range(1024)]
             + [{"kind": "alloc", "tensor": i} for i in range(1024)] + [{"kind": "free", "tensor": i} for i in range(1024)])
for allocator in ("smartpool", "bestfit", "pytorch"):
    code, out, err = run("run", huge, "-a", allocator, "-b", str(2 ** 62), "--json")
    doc = json.loads(out) if code == 0 else {}
    case(f"run -a {allocator}: 1,024 live tensors of 2^53 B at a 2^62 budget run out at event 512",
         doc.get("status") == "oom" and doc.get("oom", {}).get("event_index") == 512, (code, err, doc.get("oom")))

# --- generate: a device too slow for a SimTime (issue 29) -------------------------------------
# peak_flops=1e-12 made every op 1 ns (std::llround of 1e29 wrapped): refused, nothing written.
gen_out = path("slow.jsonl")
bad("generate: peak_flops=1e-12 is refused, not wrapped to 1 ns ops", ["generate", "--set", "peak_flops=1e-12", "-o", gen_out],
    "peak_flops: op 'conv2d' would run for 1.14e+29 ns, more than 2^63 - 1 ns (about 292 years)", [gen_out])
bad("generate: mem_bandwidth=1e-12 likewise", ["generate", "--set", "mem_bandwidth=1e-12", "-o", gen_out],
    "mem_bandwidth: op 'conv2d' would run for 1.73e+28 ns, more than 2^63 - 1 ns (about 292 years)", [gen_out])
code, _, err = run("generate", "--set", "peak_flops=1e3", "-o", gen_out)
slow = [json.loads(l) for l in open(gen_out)] if code == 0 else []
durations = [r["duration"] for r in slow if r.get("kind") == "op" and r.get("name") == "conv2d"]
case("generate: a slower device gives longer ops (1e3 FLOP/s: every conv2d over 10^5 s)",
     code == 0 and durations and min(durations) > 10 ** 14, (code, err, durations[:3]))

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
