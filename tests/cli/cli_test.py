#!/usr/bin/env python3
"""End-to-end checks of the coopsim command line, reported as TAP (one case per check).

Usage: cli_test.py PATH/TO/coopsim   (run from the project root)
Each bad-input case checks the exact one-line error, the exit status, and that no output file
was left behind."""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import command_names  # noqa: E402

COOPSIM = sys.argv[1]
TRACE = "traces/default.jsonl.gz"
GOLDEN = "tests/data/golden/small_step.jsonl"
results = []


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


tmp = tempfile.mkdtemp(prefix="coopsim-cli-")


def path(name):
    return os.path.join(tmp, name)


def write(name, text):
    with open(path(name), "w", encoding="utf-8") as f:
        f.write(text)
    return path(name)


def bad(name, args, expected_stderr, outputs=(), status=1, prefix=False):
    code, out, err = run(*args)
    err_line = err.strip()
    matched = err_line.startswith(expected_stderr) if prefix else err_line == expected_stderr
    left = [o for o in outputs if os.path.exists(o) or os.path.exists(o + ".tmp")]
    case(name, code == status and matched and not left,
         f"status {code}, stderr {err_line!r}, expected {expected_stderr!r}, left {left}")


# --- working commands -------------------------------------------------------------------------
# Component names come from the registry, through `list --json`: a new allocator or policy needs
# no edit here.
code, out, err = run("list", "--json")
doc = json.loads(out) if code == 0 else {}
ALLOCATORS = [a["name"] for a in doc.get("allocators", [])]
POLICIES = [p["name"] for p in doc.get("policies", [])]
case("list --json is machine-readable", code == 0 and len(ALLOCATORS) >= 5 and "pytorch" in ALLOCATORS
     and POLICIES[:1] == ["keep"] and all(a.get("help") for a in doc["allocators"] + doc["policies"]), out[:200])
code, out, err = run("list")


def listed_in_order(names):
    # Each name starts a line of `list` (two spaces in), in the registry's order.
    at = [out.find("\n  " + n + " ") for n in names]
    return all(i >= 0 for i in at) and at == sorted(at)


case("list names every allocator and policy of the registry, in its order, with parameters and link presets",
     code == 0 and listed_in_order(ALLOCATORS) and listed_in_order(POLICIES)
     and all(k in out for k in ("max_split_size", "initial_reservation", "pcie3-x16")), err)

code, out, err = run("validate", TRACE)
case("validate accepts the bundled trace", code == 0 and "valid coopsim trace v1" in out, err)

rep, rep2, csvp = path("r.json"), path("r2.json"), path("r.csv")
code, out, err = run("run", TRACE, "--allocator", "pytorch", "--budget", "16GiB", "-o", rep, "--csv", csvp)
report = json.load(open(rep)) if code == 0 and os.path.exists(rep) else {}
case("run writes a JSON report", report.get("status") == "completed" and report.get("allocator") == "pytorch", err)
case("the report records version, config and trace hash",
     report.get("coopsim_version") and report.get("config", {}).get("budget") == 16 << 30
     and len(report.get("trace", {}).get("hash", "")) == 16)
rows = list(csv.reader(open(csvp))) if os.path.exists(csvp) else []
case("run writes a CSV header and one row", len(rows) == 2 and rows[0][0] == "trace" and len(rows[0]) == len(rows[1]))
code, _, _ = run("run", TRACE, "--allocator", "pytorch", "--budget", "16GiB", "-o", rep2)
case("repeated runs give byte-identical reports", code == 0 and open(rep).read() == open(rep2).read())

code, out, err = run("run", TRACE, "--allocator", "all", "--budget", "1GiB,16GiB", "--csv", csvp)
rows = list(csv.reader(open(csvp))) if os.path.exists(csvp) else []
case("comma lists run every combination", code == 0 and len(rows) == 1 + 2 * len(ALLOCATORS) and "allocator" in out,
     out[:300])
statuses = {(r[3], r[5]): r[6] for r in rows[1:]}
case("a budget below the peak ends in OOM, above it completes",
     statuses.get(("pytorch", str(1 << 30))) == "oom" and statuses.get(("pytorch", str(16 << 30))) == "completed",
     str(statuses))
peaks = {r[3]: int(r[8]) for r in rows[1:] if r[5] == str(16 << 30)}
case("allocators differ in reserved memory",
     len(set(peaks.values())) >= 4 and peaks["fungible"] < peaks["cnmem"] and peaks["bestfit"] == 16 << 30, str(peaks))

code, out, err = run("run", GOLDEN, "--allocator", "pytorch", "--budget", "23MiB", "--json")
oom = json.loads(out).get("oom") if code == 0 else None
case("keep reports the OOM point", oom and oom["event_index"] == 7 and oom["op_name"] == "relu_backward", out[-300:])
code, _, _ = run("run", GOLDEN, "--allocator", "pytorch", "--budget", "23MiB", "--quiet", "--fail-on-oom")
case("--fail-on-oom exits 3", code == 3)

csvr = path("remat.csv")
code, out, err = run("run", TRACE, "-p", "coop,dte,dtr", "-a", "bestfit,fungible", "-b", "50%,100%", "--csv", csvr)
rows = list(csv.DictReader(open(csvr))) if os.path.exists(csvr) else []
case("policy lists and percentage budgets run every combination",
     code == 0 and len(rows) == 12 and {r["policy"] for r in rows} == {"coop", "dte", "dtr"}, out[:300] + err)
half = [r for r in rows if abs(float(r["memory_ratio_of_peak"]) - 0.5) < 1e-6]
case("a 50% budget is half the no-eviction peak and makes recompute policies recompute",
     len(half) == 6 and all(r["status"] == "completed" and int(r["recomputes"]) > 0 for r in half)
     and all(float(r["memory_ratio_of_sweep_max"]) == 0.5 for r in half), str(half[:1]))
code, out, err = run("run", TRACE, "-p", "dtr", "-a", "bestfit", "-b", "30%", "--set", "dtr.thrash_limit=1.01", "--json")
rep = json.loads(out) if code == 0 else {}
case("a recompute policy past its thrash limit reports status thrash, not oom",
     rep.get("status") == "thrash" and rep.get("thrash") and rep.get("oom") is None, out[-300:] + err)

code, out, err = run("run", GOLDEN, "--allocator", "cnmem", "--set", "cnmem.initial_reservation=8MiB", "--json")
case("--set reaches component parameters",
     code == 0 and json.loads(out)["config"]["params"]["cnmem"]["initial_reservation"] == 8 << 20, err)
cfg = write("ok.json", json.dumps({"allocator": "bestfit", "budget": "32MiB", "link": {"preset": "pcie3-x16"}}))
code, out, err = run("run", GOLDEN, "-c", cfg, "--json")
case("config files set allocator, budget and link",
     code == 0 and json.loads(out)["allocator"] == "bestfit" and json.loads(out)["budget_bytes"] == 32 << 20, err)
gen = path("g.jsonl.gz")
code, out, err = run("generate", "-o", gen, "--set", "layers=2", "--set", "model=mlp")
case("generate writes a valid trace", code == 0 and run("validate", gen)[0] == 0, err)

# --- importers ---------------------------------------------------------------------------------
dtr_out = path("dtr.jsonl.gz")
code, out, err = run("import", "dtr", "tests/data/dtr/mlp-4-2000.0-2021-3-17-12-0-0-default.log", "-o", dtr_out)
case("import dtr writes a valid trace", code == 0 and run("validate", dtr_out)[0] == 0, err)
code, out, err = run("run", dtr_out, "--allocator", "fungible", "--json")
case("an imported DTR log replays with its hand-worked peak (2612 B in place)",
     code == 0 and json.loads(out)["memory"]["peak_requested_bytes"] == 2612, err)
snap = "../shared/traces/pytorch_snapshots/medium_128_inference_memory_snapshot.pickle.gz"
if os.path.exists(snap):
    snap_out = path("snap.jsonl.gz")
    code, out, err = run("import", "torch-snapshot", snap, "-o", snap_out)
    case("import torch-snapshot converts a real snapshot", code == 0, err)
    code, out, err = run("run", snap_out, "--allocator", "pytorch", "--check-addresses", "--json")
    rep_snap = json.loads(out) if code == 0 else {}
    case("the pytorch model replays a real snapshot at every recorded address and end state",
         code == 0 and rep_snap["address_check"]["mismatches"] == 0 and rep_snap["address_check"]["checked"] == 1280
         and rep_snap["end_state"]["segments_match"] and rep_snap["end_state"]["reserved_match"], err + out[-400:])
else:
    case("import torch-snapshot (skipped: ../shared absent)", True)
hostile = path("hostile.pickle")
with open(hostile, "wb") as f:
    f.write(b"cos\nsystem\n(S'echo pwned'\ntR.")
bad("a hostile pickle is refused without running anything", ["import", "torch-snapshot", hostile, "-o", path("h.jsonl")],
    f"coopsim: error: {hostile}: byte 0: opcode GLOBAL (0x63) would import or call code; refusing", (path("h.jsonl"),))
IMPORTERS = {i["name"]: i for i in doc.get("importers", [])}
bad("unknown import kind", ["import", "nvprof", GOLDEN, "-o", path("k.jsonl")],
    f"coopsim: error: import: unknown trace kind 'nvprof' (valid: {', '.join(IMPORTERS)})", (path("k.jsonl"),))
# Each importer takes the options its registry entry names; any other is refused, not ignored.
for name, importer in IMPORTERS.items():
    for option, value in (("--et", GOLDEN), ("--compat", "simrd"), ("--device", "1"), ("--copy-on-write", None)):
        if option in importer["options"]:
            continue
        bad(f"import {name} refuses {option}", ["import", name, GOLDEN, "-o", path("k.jsonl"), option] +
            ([value] if value else []),
            f"coopsim: error: import {option}: {name} does not take {option} (its options: "
            f"{', '.join(importer['options']) or 'none'})", (path("k.jsonl"),))
case("list --json names the importers with their options and the plan methods",
     set(IMPORTERS) >= {"dtr", "torch-snapshot", "kineto"} and IMPORTERS["dtr"]["profiles"] == ["coopsim", "simrd"]
     and [m["name"] for m in doc.get("plan_methods", [])][:1] == ["planner"]
     and [e["option"] for e in doc.get("run_exports", [])] == ["--timeline", "--memory-map", "--torch-snapshot", "--plan"],
     str(doc.get("importers")) + str(doc.get("run_exports")))
trunc = write("trunc.log", '{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}\n{"INSTRUCTION":"CONSTANT","NAME":"x1"}\n{"INSTRUCTION":"MEM')
bad("a truncated DTR log is refused", ["import", "dtr", trunc, "-o", path("t.jsonl")], f"coopsim: error: {trunc}:3:",
    (path("t.jsonl"),), prefix=True)

# --- bad input --------------------------------------------------------------------------------
outs = (rep3 := path("bad.json"), csv3 := path("bad.csv"))
bad("missing trace file", ["run", path("nope.jsonl"), "-o", rep3], f"coopsim: error: {path('nope.jsonl')}", outs,
    prefix=True)
bad("unknown allocator lists the valid ones", ["run", GOLDEN, "--allocator", "tlsf", "-o", rep3],
    f"coopsim: error: allocator: unknown allocator 'tlsf' (valid: {', '.join(ALLOCATORS)})", outs)
bad("unknown policy", ["run", GOLDEN, "--policy", "swap-all", "-o", rep3],
    f"coopsim: error: policy: unknown policy 'swap-all' (valid: {', '.join(POLICIES)})", outs)
bad("malformed budget", ["run", GOLDEN, "--budget", "lots", "-o", rep3],
    "coopsim: error: --budget: 'lots' is not a size (e.g. 8GiB, 512MB, 1048576) or a percentage (e.g. 40%)", outs)
bad("zero budget", ["run", GOLDEN, "--budget", "0", "-o", rep3], "coopsim: error: budget: must be greater than 0", outs)
bad("zero percent budget", ["run", GOLDEN, "--budget", "0%", "-o", rep3],
    "coopsim: error: --budget: a percentage of the trace's peak must be greater than 0% and at most 1000000%, got '0%'",
    outs)
bad("unknown Coop ablation lists the paper's names", ["run", GOLDEN, "-p", "coop", "--set", "coop.ablation=no-window", "-o", rep3],
    "coopsim: error: coop.ablation: invalid value 'no-window' (valid: none, no op-guided allocation, "
    "no recomputable in-place, no layout-aware eviction)", outs)
bad("a thrash limit of 1 is refused", ["run", GOLDEN, "-p", "dtr", "--set", "dtr.thrash_limit=1", "-o", rep3],
    "coopsim: error: dtr.thrash_limit: must be 0 (no limit) or greater than 1", outs)
bad("unknown parameter", ["run", GOLDEN, "--set", "pytorch.max_split=1", "-o", rep3],
    "coopsim: error: pytorch.max_split: unknown parameter (valid for pytorch: ", outs, prefix=True)
COMPONENTS = ", ".join(ALLOCATORS + POLICIES)
bad("unknown top-level key", ["run", GOLDEN, "--set", "budgett=1GiB", "-o", rep3],
    "coopsim: error: --set budgett: unknown key 'budgett' (valid: allocator, policy, budget, initial_state, link, engine, params, "
    f"limits, description, or COMPONENT.PARAMETER with a component among {COMPONENTS}); did you mean 'budget'?", outs)
# A key under a top-level value (issue 14: these were accepted and silently replaced by -p/-a/-b).
for scalar in ["policy", "allocator", "budget"]:
    bad(f"--set {scalar}.KEY is refused", ["run", GOLDEN, "-p", "dtr", "-a", "bestfit", "-b", "1GiB", "--set",
                                           f"{scalar}.heuristic=dtr", "-o", rep3],
        f"coopsim: error: --set {scalar}.heuristic: '{scalar}' is a value, not a section: set it with --set "
        f"{scalar}=VALUE, and a component's parameter with --set COMPONENT.PARAMETER (sections: link, engine, limits, "
        f"params; components: {COMPONENTS})", outs)
for section in ["engine", "link", "limits"]:
    bad(f"unknown {section} key", ["run", GOLDEN, "--set", f"{section}.bogus=1", "-o", rep3],
        f"coopsim: error: {section}.bogus: unknown parameter (valid for {section}: ", outs, prefix=True)
bad("unknown policy parameter", ["run", GOLDEN, "-p", "dtr", "--set", "dtr.bogus=1", "-o", rep3],
    "coopsim: error: dtr.bogus: unknown parameter (valid for dtr: ", outs, prefix=True)
bad("malformed --set", ["run", GOLDEN, "--set", "budget", "-o", rep3],
    "coopsim: error: --set budget: expected key=value", outs)
bad("bad link preset", ["run", GOLDEN, "--set", "link.preset=pcie9", "-o", rep3],
    "coopsim: error: link.preset: invalid value 'pcie9' (valid: pcie3-x16, pcie4-x16, pcie5-x16, nvlink-c2c, h200)", outs)
badcfg = write("badcfg.json", '{\n  "budget": "1GiB",\n  "allocator": "cnmem",,\n}\n')
bad("config with a JSON error names file:line", ["run", GOLDEN, "-c", badcfg, "-o", rep3],
    f"coopsim: error: {badcfg}:3: invalid JSON: ", outs, prefix=True)
unkcfg = write("unk.json", '{"allocator": "cnmem", "polcy": "keep"}')
bad("config with an unknown key names file and key", ["run", GOLDEN, "-c", unkcfg, "-o", rep3],
    f"coopsim: error: {unkcfg}: polcy: unknown key (valid: ", outs, prefix=True)
compcfg = write("comp.json", '{"params": {"tlsf": {}}}')
bad("config naming an unknown component", ["run", GOLDEN, "-c", compcfg, "-o", rep3],
    f"coopsim: error: {compcfg}: params.tlsf: unknown component (allocators: ", outs, prefix=True)
badtrace = write("bad.jsonl", open(GOLDEN).read().replace('{"kind":"free","tensor":3}', '{"kind":"free","tensor":33}', 1))
bad("malformed trace gives file:line and no report", ["run", badtrace, "-o", rep3, "--csv", csv3],
    f"coopsim: error: {badtrace}:", outs, prefix=True)
bad("validate rejects a malformed trace", ["validate", badtrace], f"coopsim: error: {badtrace}:", prefix=True)
bad("generate rejects a bad option", ["generate", "-o", path("g2.jsonl"), "--set", "layers=0"],
    "coopsim: error: generate.layers", (path("g2.jsonl"),), prefix=True)
bad("generate rejects an unknown option", ["generate", "-o", path("g3.jsonl"), "--set", "depth=3"],
    "coopsim: error: generate.depth: unknown parameter", (path("g3.jsonl"),), prefix=True)
# --- traces that start from a recorded state, and traces without dataflow (issue 14) ---------------
# The minimal shape of the release crash: a segment whose block owns tensor 0, then the trace frees it.
seeded = write("seeded.jsonl", "\n".join([
    '{"format":"coopsim-trace","version":1,"model":"seeded","time_unit":"ns","iterations":1}',
    '{"kind":"tensor","id":0,"bytes":1000,"role":"activation"}',
    '{"kind":"tensor","id":1,"bytes":512,"role":"activation"}',
    '{"kind":"segment","addr":0,"size":2097152,"pool":"large","blocks":[{"size":1024,"tensor":0},'
    '{"size":2096128,"free":true}]}',
    '{"kind":"iteration","index":0}',
    '{"kind":"free","tensor":0}',
    '{"kind":"alloc","tensor":1}',
    '{"kind":"free","tensor":1}', ""]))
for policy in ["dtr", "dte", "coop", "pooch", "capuchin", "autoswap", "vdnn"]:
    bad(f"{policy} refuses a trace without dataflow, naming the reason", ["run", seeded, "-p", policy, "-o", rep3],
        f"coopsim: error: policy: {seeded}: policy {policy} needs the trace's dataflow, but it has no ops and no "
        "event accesses one (an allocator-only snapshot, or a profiler trace imported without --et): evictions "
        "would cost nothing. Use -p keep, or force it with --set engine.allow_no_dataflow=true", outs)
    code, out, err = run("run", seeded, "-p", policy, "-a", "pytorch", "-b", "2MiB", "--audit", "--json",
                         "--set", "engine.allow_no_dataflow=true")
    rep = json.loads(out) if code == 0 else {}
    case(f"{policy} forced on a seeded trace frees the recorded block (no crash)",
         code == 0 and rep.get("status") == "completed" and rep["memory"]["final_allocated_bytes"] == 0,
         f"status {code}, stderr {err!r}")
code, out, err = run("validate", seeded)
case("validate says a trace has no dataflow",
     code == 0 and "dataflow: 0 op inputs (none: only -p keep runs without engine.allow_no_dataflow)" in out, out)
code, out, err = run("run", seeded, "-p", "keep", "-b", "2MiB")
case("keep runs a trace without dataflow", code == 0, err)

# Usage errors (exit 2, one line) in detail: cli_errors_test.py.
bad("unknown subcommand is a usage error", ["frobnicate"],
    f"coopsim: error: unknown command 'frobnicate' (commands: {', '.join(command_names(COOPSIM))})", status=2)
bad("missing trace argument is a usage error", ["run"], "coopsim: error: run: missing argument TRACE", status=2)

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
