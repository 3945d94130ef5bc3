#!/usr/bin/env python3
"""A sweep directory's files and what --resume accepts (issue 29), reported as TAP.

Usage: sweep_dir_test.py PATH/TO/coopsim   (run from the project root)
* --resume checks each kept journal line and results.json entry against the sweep's own run of
  that index (trace, allocator, policy, variant, budget): a line relabelled with another run's
  number is refused at its file:line, and nothing is written.
* A symbolic link planted at a sweep file's name (journal.jsonl, minbudget.csv, results.json,
  ...) in a new sweep or merge directory is refused; its target is neither followed nor touched.
* minbudget loads the trace within the config's limits (limits.max_memory), as run does."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

run = runner(sys.argv[1])
ROOT = os.getcwd()
GOLDEN = os.path.join(ROOT, "tests/data/golden/small_step.jsonl")
LINK_PROBLEM = "cannot write output file: it is a symbolic link: coopsim replaces only a regular file here, " \
               "never what a link or device leads to"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-sweep-dir-")


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def path(*names):
    return os.path.join(tmp, *names)


def write(p, text):
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


def read(p):
    with open(p, encoding="utf-8") as f:
        return f.read()


def refused(name, args, expected, status=1):
    code, out, err = run(*args)
    case(name, code == status and err == f"coopsim: error: {expected}\n", f"status {code}, stderr {err!r}")


# Run 0: bestfit keep 0.5, run 1: bestfit keep 1.0, run 2: pytorch keep 0.5, run 3: pytorch keep 1.0.
SWEEP = {"traces": [GOLDEN], "allocators": ["bestfit", "pytorch"], "policies": ["keep"],
         "budgets": {"ratios": [0.5, 1.0]}}
cfg = write(path("sweep.json"), json.dumps(SWEEP))
mb_cfg = write(path("sweep-mb.json"), json.dumps(dict(SWEEP, minbudget=True)))

# --- --resume checks every kept entry against the sweep's definition ----------------------------
D = path("stopped")
code, _, err = run("sweep", cfg, "-j", "1", "-o", D, "--stop-after", "3")
journal = os.path.join(D, "journal.jsonl")
lines = read(journal).splitlines() if os.path.exists(journal) else []
case("a sweep stopped after 3 runs keeps a journal of runs 0, 1, 2",
     code == 0 and [json.loads(l)["run"] for l in lines] == [0, 1, 2], err)

# Run 1's entry relabelled as run 2 (and run 2's own entry dropped): results.csv still holds the
# real run 2, so without the check run 1's report would be written into results.json as run 2.
relabelled = path("relabelled")
shutil.copytree(D, relabelled)
moved = json.loads(lines[1])
moved["run"] = 2
write(os.path.join(relabelled, "journal.jsonl"), lines[0] + "\n" + json.dumps(moved) + "\n")
before = {f: read(os.path.join(relabelled, f)) for f in os.listdir(relabelled) if f != ".coopsim.lock"}
refused("--resume refuses a journal line relabelled with another run's number, at its file:line",
        ["sweep", cfg, "-j", "1", "-o", relabelled, "--resume"],
        f"{relabelled}/journal.jsonl:2: run 2 is not this sweep's run 2 (budget_ratio: '1.0' here, '0.5' in the sweep)")
after = {f: read(os.path.join(relabelled, f)) for f in os.listdir(relabelled) if f != ".coopsim.lock"}
case("the refused directory is left as it was (no results.json)", before == after, str(sorted(after)))

# The same entry made to name run 2's allocator and ratio: its report is still run 1's (bestfit).
forged = path("forged")
shutil.copytree(D, forged)
moved2 = dict(moved, budget_ratio=0.5)
write(os.path.join(forged, "journal.jsonl"), lines[0] + "\n" + json.dumps(moved2) + "\n")
refused("--resume compares the report inside the entry too (allocator)",
        ["sweep", cfg, "-j", "1", "-o", forged, "--resume"],
        f"{forged}/journal.jsonl:2: run 2 is not this sweep's run 2 (allocator: 'bestfit' here, 'pytorch' in the sweep)")

twice = path("twice")
shutil.copytree(D, twice)
write(os.path.join(twice, "journal.jsonl"), lines[0] + "\n" + lines[1] + "\n" + lines[1] + "\n")
refused("--resume refuses a run listed twice in the journal",
        ["sweep", cfg, "-j", "1", "-o", twice, "--resume"],
        f"{twice}/journal.jsonl:3: run 1 is listed twice (also {twice}/journal.jsonl:2)")

code, out, err = run("sweep", cfg, "-j", "1", "-o", D, "--resume")
case("the untouched journal resumes to the end", code == 0 and out.startswith("sweep: 4 runs (3 from earlier output)"),
     out + err)

# A finished results.json entry relabelled: the same check, named by its place in the list.
done = path("done")
shutil.copytree(D, done)
doc = json.loads(read(os.path.join(done, "results.json")))
doc["runs"][1]["run"], doc["runs"][2]["run"] = 2, 1
write(os.path.join(done, "results.json"), json.dumps(doc, indent=2) + "\n")
refused("--resume refuses swapped results.json entries, naming runs[K]",
        ["sweep", cfg, "-j", "1", "-o", done, "--resume"],
        f"{done}/results.json: runs[2]: run 1 is not this sweep's run 1 (budget_ratio: '0.5' here, '1.0' in the sweep)")

# --- links planted in a new sweep directory -------------------------------------------------------
for name, config in (("journal.jsonl", cfg), ("minbudget.csv", mb_cfg), ("results.json", cfg)):
    out_dir = path("planted-" + name)
    os.makedirs(out_dir)
    victim = write(path("victim-" + name), "precious\n")
    os.symlink(victim, os.path.join(out_dir, name))
    refused(f"a {name} link planted in a new sweep directory is refused",
            ["sweep", config, "-j", "1", "-o", out_dir], f"{out_dir}/{name}: {LINK_PROBLEM}")
    case(f"the {name} link's target is untouched and the link stays",
         read(victim) == "precious\n" and os.path.islink(os.path.join(out_dir, name))
         and not os.path.exists(os.path.join(out_dir, "results.csv")), str(os.listdir(out_dir)))

dangling = path("planted-dangling")
os.makedirs(dangling)
os.symlink(path("nothing-here"), os.path.join(dangling, "journal.jsonl"))
refused("a link to nothing is refused and creates nothing", ["sweep", cfg, "-j", "1", "-o", dangling],
        f"{dangling}/journal.jsonl: {LINK_PROBLEM}")
case("... its destination was not created", not os.path.exists(path("nothing-here")))

merged = path("merged")
os.makedirs(merged)
victim = write(path("victim-merge"), "precious\n")
os.symlink(victim, os.path.join(merged, "results.json"))
shard = path("shard")
run("sweep", cfg, "-j", "1", "-o", shard, "--shard", "1/1")
refused("merge refuses a link planted in its output directory", ["merge", shard, "-o", merged],
        f"{merged}/results.json: {LINK_PROBLEM}")
case("... and leaves its target alone", read(victim) == "precious\n")

# --- minbudget honours limits.max_memory as run does ------------------------------------------------
LIMIT = "limits.max_memory=2000"
code_run, _, err_run = run("run", GOLDEN, "-p", "keep", "-a", "bestfit", "-q", "--set", LIMIT)
code_mb, out_mb, err_mb = run("minbudget", GOLDEN, "-p", "keep", "-a", "bestfit", "--set", LIMIT)
case("run refuses the trace over limits.max_memory", code_run == 1 and "(limits.max_memory)" in err_run, err_run)
case("minbudget refuses it with run's very line", code_mb == 1 and err_mb == err_run and out_mb == "",
     f"status {code_mb}, stderr {err_mb!r}, run's {err_run!r}")
limits_cfg = write(path("limits.json"), json.dumps({"limits": {"max_memory": 2000}}))
code, _, err = run("minbudget", GOLDEN, "-p", "keep", "-a", "bestfit", "-c", limits_cfg)
case("... and from a config file", code == 1 and err == err_run, err)

finish(results, tmp)
