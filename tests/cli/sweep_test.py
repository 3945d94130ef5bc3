#!/usr/bin/env python3
"""End-to-end checks of `coopsim sweep`, `merge` and `minbudget`, reported as TAP.

Usage: sweep_test.py PATH/TO/coopsim   (run from the project root)
A small sweep (2 traces x 2 allocators x keep/dtr x 3 budget ratios, a dtr-only variant and
minimum-budget searches) is run with -j1 and -j2, interrupted (truncated files, --stop-after, a
real SIGKILL) and resumed, sharded into 3 and merged; every final file must be byte-identical
to the uninterrupted -j1 output. Bad input gives the exact one-line error and leaves no output."""
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

COOPSIM = sys.argv[1]
ROOT = os.getcwd()
TRACE = os.path.join(ROOT, "traces/default.jsonl.gz")
GOLDEN = os.path.join(ROOT, "tests/data/golden/small_step.jsonl")
FILES = ("results.csv", "results.json", "minbudget.csv", "sweep.json")
results = []


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


tmp = tempfile.mkdtemp(prefix="coopsim-sweep-")


def path(*names):
    return os.path.join(tmp, *names)


def write(name, text):
    with open(path(name), "w", encoding="utf-8") as f:
        f.write(text)
    return path(name)


def read(p, mode="r"):
    with open(p, mode) as f:
        return f.read()


def same_files(a, b, files=FILES):
    """Names of the files that differ between directories a and b (empty: identical)."""
    return [f for f in files if not (os.path.exists(os.path.join(a, f)) and os.path.exists(os.path.join(b, f))
                                     and read(os.path.join(a, f), "rb") == read(os.path.join(b, f), "rb"))]


def bad(name, args, expected, outputs=(), prefix=False, status=1):
    code, out, err = run(*args)
    line = err.strip()
    matched = line.startswith(expected) if prefix else line == expected
    left = [o for o in outputs if os.path.exists(o)]
    case(name, code == status and matched and "\n" not in line and not left,
         f"status {code}, stderr {line!r}, expected {expected!r}, left {left}")


SWEEP = {
    "description": "test sweep",
    "traces": [TRACE, GOLDEN],
    "allocators": ["bestfit", "pytorch"],
    "policies": ["keep", "dtr"],
    "budgets": {"ratios": [0.5, 0.75, 1.0]},
    "variants": {"base": {}, "lru": {"set": {"dtr.heuristic": "lru"}, "policies": ["dtr"]}},
    "minbudget": True,
}
cfg = write("config.json", json.dumps(SWEEP, indent=2))
RUNS, SEARCHES = 36, 12

# --- a full sweep, -j1 and -j2 -----------------------------------------------------------------
A, B = path("a"), path("b")
code, out, err = run("sweep", cfg, "-j", "1", "-o", A)
case("sweep -j1 completes and summarises", code == 0 and out.startswith(f"sweep: {RUNS} runs (0 from earlier output), "
     f"{SEARCHES} minimum-budget searches: "), out + err)
lines = err.splitlines()
case("without a terminal, progress is one plain line per finished run or search",
     len(lines) == RUNS + SEARCHES and all(l.startswith("sweep: ") for l in lines)
     and lines[-1].startswith(f"sweep: {RUNS + SEARCHES}/{RUNS + SEARCHES} "), err[-300:])
code, out, err = run("sweep", cfg, "-j", "2", "-o", B)
case("sweep -j2 gives byte-identical results.csv, results.json, minbudget.csv, sweep.json",
     code == 0 and not same_files(A, B), str(same_files(A, B)) + err[-300:])
case("the journal of an unfinished sweep is gone once it finishes",
     not os.path.exists(os.path.join(A, "journal.jsonl")))

rows = list(csv.DictReader(open(os.path.join(A, "results.csv"))))
header = read(os.path.join(A, "results.csv")).splitlines()[0]
case("results.csv: one row per run in run order, key columns first",
     len(rows) == RUNS and [int(r["run"]) for r in rows] == list(range(RUNS))
     and header.startswith("run,variant,budget_ratio,trace,model,trace_hash,allocator,policy,budget_bytes,status,"),
     header)
for col in ("status", "peak_allocated_bytes", "peak_reserved_bytes", "reserved_fragmentation", "coop_fragmentation",
            "simulated_ns", "compute_overhead", "recomputes", "swap_out_bytes", "swap_in_bytes", "stall_ns",
            "search_latency_ns", "search_scanned", "memory_ratio_of_peak", "memory_ratio_of_sweep_max"):
    if col not in rows[0]:
        case(f"results.csv has column {col}", False)
first = rows[0]
case("run 0 is the first trace, bestfit, keep, base, ratio 0.5",
     (first["trace"], first["allocator"], first["policy"], first["variant"], first["budget_ratio"])
     == (TRACE, "bestfit", "keep", "base", "0.5"), str(first)[:300])
case("memory_ratio_of_sweep_max is the budget over the trace's largest budget of the sweep",
     all(abs(float(r["memory_ratio_of_sweep_max"]) - float(r["budget_ratio"])) < 1e-6 for r in rows))
case("search latency (wall clock) is not in a sweep by default", all(r["search_latency_ns"] == "" for r in rows))
case("the lru variant runs only with dtr", {r["policy"] for r in rows if r["variant"] == "lru"} == {"dtr"})

# The same run through `coopsim run` gives the same report columns (the sweep-max ratio aside).
single = path("single.csv")
code, out, err = run("run", TRACE, "-a", "pytorch", "-p", "dtr", "-b", "50%", "--set", "dtr.heuristic=lru",
                     "-q", "--csv", single)
one = list(csv.DictReader(open(single)))[0] if code == 0 else {}
mine = [r for r in rows if r["allocator"] == "pytorch" and r["variant"] == "lru" and r["budget_ratio"] == "0.5"
        and r["trace"] == TRACE][0]
diff = [k for k in one if k != "memory_ratio_of_sweep_max" and one[k] != mine[k]]
case("a sweep row equals `coopsim run` of the same combination", code == 0 and one and not diff, str(diff) + err)

doc = json.load(open(os.path.join(A, "results.json")))
case("results.json holds every run's full report in run order",
     [e["run"] for e in doc["runs"]] == list(range(RUNS)) and doc["runs"][0]["report"]["policy"] == "keep"
     and doc["runs"][0]["variant"] == "base" and doc["runs"][0]["budget_ratio"] == 0.5
     and doc["config_hash"] == json.load(open(os.path.join(A, "sweep.json")))["config_hash"])
manifest = json.load(open(os.path.join(A, "sweep.json")))
case("sweep.json: version, hash, run and search counts, no shard",
     manifest["runs"] == RUNS and manifest["searches"] == SEARCHES and manifest["shard"] is None
     and len(manifest["config_hash"]) == 16, str(manifest))

# --- minbudget: CLI, sweep rows, brute force ------------------------------------------------------
mb = list(csv.DictReader(open(os.path.join(A, "minbudget.csv"))))
case("minbudget.csv: one row per trace, allocator, policy, variant", len(mb) == SEARCHES
     and [int(r["search"]) for r in mb] == list(range(SEARCHES)) and all(r["status"] == "found" for r in mb), str(mb[:1]))
code, out, err = run("minbudget", GOLDEN, "--policy", "keep", "--allocator", "bestfit", "--json")
res = json.loads(out) if code == 0 else {}
row = [r for r in mb if r["trace"] == GOLDEN and r["allocator"] == "bestfit" and r["policy"] == "keep"][0]
case("minbudget --json agrees with the sweep's minbudget row",
     res.get("min_budget_bytes") == int(row["min_budget_bytes"]) and res.get("runs") == int(row["runs"]), out + err)
# small_step's peak is 5 MiB + 1000 B, live as w (1000 B), a (3 MiB), b (1 MiB), grad_a (1 MiB):
# bestfit's 512-byte alignment makes it 5 MiB + 1024 B, so 6 MiB is the first whole MiB that fits.
scan = []
for k in range(1, 9):
    c, o, e = run("run", GOLDEN, "-a", "bestfit", "-b", f"{k}MiB", "--json")
    scan.append(json.loads(o)["status"] if c == 0 else "error")
case("brute force over 1 MiB steps: bestfit keep on small_step first completes at 6 MiB",
     scan.index("completed") == 5 and scan[5:] == ["completed"] * 3, str(scan))
case("minbudget finds 6 MiB with 5 MiB failing (oom)",
     res.get("min_budget_bytes") == 6 << 20 and res.get("failing_budget_bytes") == 5 << 20
     and res.get("failing_status") == "oom" and res.get("precision_bytes") == 1 << 20, out)
code, out, err = run("minbudget", GOLDEN, "-p", "keep", "-a", "bestfit")
case("minbudget prints the budget, its ratio of the peak and the bracket",
     code == 0 and "minimum budget: 6.00 MiB (6291456 bytes), 1.200 of the peak; compute overhead 1.000" in out
     and "bracket: 5.00 MiB (5242880 bytes) fails (oom), 6.00 MiB passes; precision 1.00 MiB" in out, out)
bad("minbudget refuses an overhead limit below 1",
    ["minbudget", GOLDEN, "-p", "dtr", "-a", "bestfit", "--max-overhead", "0.5"],
    "coopsim: error: --max-overhead: expected a compute overhead of at least 1, got 0.5")

# --- interruption and --resume ---------------------------------------------------------------------
C = path("c")
shutil.copytree(A, C)
full = read(os.path.join(A, "results.csv")).splitlines(keepends=True)
with open(os.path.join(C, "results.csv"), "w") as f:  # header, 3 rows and half of the 4th
    f.write("".join(full[:4]) + full[4][:25])
mbl = read(os.path.join(A, "minbudget.csv")).splitlines(keepends=True)
with open(os.path.join(C, "minbudget.csv"), "w") as f:
    f.write("".join(mbl[:3]) + mbl[3][:10])
code, out, err = run("sweep", cfg, "-j", "2", "-o", C, "--resume")
case("--resume after a cut results.csv reruns only the missing runs",
     code == 0 and f"sweep: {RUNS} runs (3 from earlier output)" in out and len(err.splitlines()) == RUNS - 3 + SEARCHES - 2,
     out + err[-200:])
case("... and the final files are byte-identical to the uninterrupted sweep", not same_files(A, C), str(same_files(A, C)))

D = path("d")
code, out, err = run("sweep", cfg, "-j", "2", "-o", D, "--stop-after", "7")
kept = read(os.path.join(D, "results.csv")).splitlines() if os.path.exists(os.path.join(D, "results.csv")) else []
journal = read(os.path.join(D, "journal.jsonl")).splitlines() if os.path.exists(os.path.join(D, "journal.jsonl")) else []
mbkept = read(os.path.join(D, "minbudget.csv")).splitlines()
case("--stop-after 7 leaves 7 results appended and no final files",
     code == 0 and len(kept) - 1 + len(mbkept) - 1 == 7 and len(journal) == len(kept) - 1
     and not os.path.exists(os.path.join(D, "results.json"))
     and err.strip().endswith("coopsim: sweep: stopped after 7 results (--stop-after); --resume continues"), err[-300:])
code, out, err = run("sweep", cfg, "-j", "2", "-o", D, "--resume")
case("--resume after --stop-after gives byte-identical files", code == 0 and not same_files(A, D), str(same_files(A, D)))

E = path("e")
proc = subprocess.Popen([COOPSIM, "sweep", cfg, "-j", "1", "-o", E], stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
seen = [proc.stderr.readline() for _ in range(SEARCHES + 2)]  # every search and two runs reported
proc.send_signal(signal.SIGKILL)
proc.wait()
proc.stderr.close()
partial = len(read(os.path.join(E, "results.csv")).splitlines()) - 1
code, out, err = run("sweep", cfg, "-j", "2", "-o", E, "--resume")
case("a SIGKILLed sweep resumes to byte-identical files",
     proc.returncode == -signal.SIGKILL and partial >= 2 and code == 0 and not same_files(A, E),
     f"kept {partial} rows; {same_files(A, E)} {err[-200:]}")

F = path("f")
shutil.copytree(A, F)
with open(os.path.join(F, "results.csv"), "w") as f:  # a complete line that is not a row
    f.write("".join(full[:2]) + "1,base\n" + "".join(full[3:]))
columns = len(header.split(","))
bad("--resume refuses a malformed row that is not a cut last line", ["sweep", cfg, "-o", F, "--resume"],
    f"coopsim: error: {F}/results.csv:3: expected {columns} columns, found 2")
case("... and leaves the directory as it was", read(os.path.join(F, "results.json")) == read(os.path.join(A, "results.json"))
     and not os.path.exists(os.path.join(F, "journal.jsonl")))

bad("an existing output directory needs --resume", ["sweep", cfg, "-o", A],
    f"coopsim: error: {A}: holds a sweep's output: pass --resume to continue it, or choose another -o")
case("... and is left untouched", not same_files(A, B))
changed = write("changed.json", json.dumps(dict(SWEEP, budgets={"ratios": [0.5, 1.0]})))
code, _, err = run("sweep", changed, "-o", A, "--resume")
new_hash = json.load(open(os.path.join(A, "sweep.json")))["config_hash"]
case("--resume refuses a directory written by another config",
     code == 1 and err.startswith(f"coopsim: error: {A}/sweep.json: the sweep config or its traces changed since this "
                                  f"directory was written (hash {manifest['config_hash']}, now ")
     and err.strip().endswith("): use another -o") and not same_files(A, B), err)

# --- shards and merge -------------------------------------------------------------------------------
shards = [path(f"s{k}") for k in (1, 2, 3)]
ok = True
for k, d in enumerate(shards, 1):
    code, out, err = run("sweep", cfg, "-j", "2", "-o", d, "--shard", f"{k}/3")
    ok = ok and code == 0 and f"in shard {k}/3" in out
case("three shards run", ok, err)
n = [len(read(os.path.join(d, "results.csv")).splitlines()) - 1 for d in shards]
case("shards are disjoint slices of 12 runs each", n == [12, 12, 12]
     and json.load(open(os.path.join(shards[1], "sweep.json")))["shard"] == "2/3", str(n))
M = path("merged")
code, out, err = run("merge", *shards, "-o", M)
case("merging the 3 shards gives the unsharded files byte for byte",
     code == 0 and not same_files(A, M) and out.strip() == f"merged 3 shards: {RUNS} runs, {SEARCHES} minimum-budget searches -> {M}",
     str(same_files(A, M)) + out + err)
M2 = path("m2")
bad("merge refuses a missing shard", ["merge", shards[0], shards[2], "-o", M2],
    "coopsim: error: merge: shard 2/3 is missing", (M2,))
bad("merge refuses a shard given twice", ["merge", shards[0], shards[1], shards[0], shards[2], "-o", M2],
    f"coopsim: error: {shards[0]}/sweep.json: shard 1/3 given twice (also {shards[0]})", (M2,))
other = path("other")
run("sweep", changed, "-o", other, "--shard", "2/3")
h1 = json.load(open(os.path.join(shards[0], "sweep.json")))["config_hash"]
h2 = json.load(open(os.path.join(other, "sweep.json")))["config_hash"]
bad("merge refuses shards of different sweeps", ["merge", shards[0], other, shards[2], "-o", M2],
    f"coopsim: error: {other}/sweep.json: sweep hash {h2} differs from {h1} in {shards[0]}: shards of different "
    "sweeps (config or traces changed)", (M2,))
two = path("two")
run("sweep", cfg, "-o", two, "--shard", "1/2")
bad("merge refuses different shard counts", ["merge", shards[0], two, "-o", M2],
    f"coopsim: error: {two}/sweep.json: holds shard 1/2, but {shards[0]} holds shard 1/3: shard counts differ", (M2,))
cut = path("cut")
run("sweep", cfg, "-j", "1", "-o", cut, "--shard", "3/3", "--stop-after", "5")
bad("merge refuses an unfinished shard", ["merge", shards[0], shards[1], cut, "-o", M2],
    f"coopsim: error: {cut}: shard 3/3 is unfinished (1 of 12 runs, 4 of 4 searches): finish it with coopsim sweep "
    f"CONFIG --shard 3/3 --resume -o {cut}", (M2,))
bad("merge into an existing sweep directory is refused", ["merge", *shards, "-o", M],
    f"coopsim: error: {M}: holds a sweep's output: choose another -o")

# --- bad input ----------------------------------------------------------------------------------------
out_dir = path("never")
# A bad --shard is a bad command-line value: exit status 2, like every other one.
for spec in ("4/3", "one/3", "0/2"):
    bad(f"bad shard spec {spec} (exit 2)", ["sweep", cfg, "--shard", spec, "-o", out_dir],
        f"coopsim: error: --shard: '{spec}' is not K/N with 1 <= K <= N (e.g. 2/8)", (out_dir,), status=2)
nokey = write("nokey.json", json.dumps({k: v for k, v in SWEEP.items() if k != "traces"}))
bad("missing config key", ["sweep", nokey, "-o", out_dir],
    f"coopsim: error: {nokey}: traces: missing (a list of trace files, relative to this file)", (out_dir,))
policies = ", ".join(p["name"] for p in json.loads(run("list", "--json")[1])["policies"])
unk = write("unk.json", json.dumps(dict(SWEEP, policies=["keep", "swap-all"])))
bad("unknown policy in a sweep", ["sweep", unk, "-o", out_dir],
    f"coopsim: error: {unk}: policies[1]: unknown policy 'swap-all' (valid: {policies})", (out_dir,))
badvar = write("badvar.json", json.dumps(dict(SWEEP, variants={"x": {"set": {"dtr.heuristic": "best"}}})))
bad("a bad variant value names the variant and key", ["sweep", badvar, "-o", out_dir],
    f"coopsim: error: {badvar}: variants.x.set.dtr.heuristic: invalid value 'best' (valid: ", (out_dir,), prefix=True)
badtr = write("badtr.json", json.dumps(dict(SWEEP, traces=["nope.jsonl"])))
bad("a missing trace names its path next to the config", ["sweep", badtr, "-o", out_dir],
    f"coopsim: error: {path('nope.jsonl')}", (out_dir,), prefix=True)
# The sweep holds all its traces at once: they share base.limits.max_memory. The bundled trace
# (about 140 KB by docs/limits.md's costs) loads alone within 256 KiB, a second copy does not.
import re  # noqa: E402
for name in ("a.jsonl.gz", "b.jsonl.gz"):
    shutil.copy(TRACE, path(name))
share = {"traces": ["a.jsonl.gz"], "allocators": ["bestfit"], "policies": ["keep"], "budgets": {"ratios": [1.0]},
         "base": {"limits": {"max_memory": "256KiB"}}}
code, _, err = run("sweep", write("one.json", json.dumps(share)), "-o", path("one"))
case("a trace loads within the sweep's base.limits.max_memory", code == 0, err[:300])
two = write("two.json", json.dumps(dict(share, traces=["a.jsonl.gz", "b.jsonl.gz"])))
code, _, err = run("sweep", two, "-o", out_dir)
m = re.fullmatch(re.escape(f"coopsim: error: {path('b.jsonl.gz')}:") + r"\d+: more than (\d+) bytes of memory "
                 r"\(limits\.max_memory\); the sweep's traces share it: those before this one hold (\d+) of its "
                 r"262144 bytes", err.strip())
case("a sweep's traces share base.limits.max_memory: the second copy is refused, naming what the first holds",
     code == 1 and m and int(m[1]) + int(m[2]) == 262144 and not os.path.exists(out_dir), f"{code} {err!r}")
bad("merge of a directory that is not a sweep", ["merge", tmp, "-o", out_dir],
    f"coopsim: error: {tmp}/sweep.json: missing: not a sweep output directory", (out_dir,))

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
