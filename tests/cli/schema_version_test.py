#!/usr/bin/env python3
"""`schema_version` in every JSON document coopsim writes (issue 32; docs/architecture.md, "JSON
documents and their schema version"), as TAP: each document's first key is schema_version with the
number of that document's kind, and a sweep manifest of another version is refused by --resume and
merge in one line, naming the file, with nothing written.

Usage: schema_version_test.py PATH/TO/coopsim   (run from the project root)"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

COOPSIM = os.path.abspath(sys.argv[1])
TRACE = "traces/default.jsonl.gz"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-schema-version-")
run = runner(COOPSIM)

# The numbers, read from the one header that lists them, so that a bump is a one-place change.
with open("include/coopsim/base/schema_version.hpp") as f:
    VERSIONS = {name: int(n) for name, n in re.findall(r"constexpr int k(\w+) = (\d+);", f.read())}


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def first_key_is_version(doc, kind):
    return isinstance(doc, dict) and list(doc)[:1] == ["schema_version"] and doc["schema_version"] == VERSIONS[kind]


def document(name, kind, code_out_err, answers=(0,)):
    code, out, err = code_out_err
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    case(f"{name}: schema_version {VERSIONS[kind]} first", code in answers and first_key_is_version(doc, kind),
         (code, out[:300], err))


case("the header lists the seven kinds", set(VERSIONS) == {"Report", "SweepResults", "SweepManifest", "MinBudget",
                                                          "Advice", "Listing", "SnapshotDiff"}, VERSIONS)
document("run --json", "Report", run("run", TRACE, "-b", "60%", "-p", "coop", "--json"))
code, out, err = run("run", TRACE, "-a", "pytorch,bestfit", "--json")
runs = json.loads(out) if code == 0 else None
case("run --json of two runs: an array whose every report has schema_version first",
     isinstance(runs, list) and len(runs) == 2 and all(first_key_is_version(r, "Report") for r in runs), (code, err))
report = os.path.join(tmp, "report.json")
code, _, err = run("run", TRACE, "-q", "-o", report)
case("run -o: schema_version first", code == 0 and first_key_is_version(json.load(open(report)), "Report"), err)
document("list --json", "Listing", run("list", "--json"))
document("minbudget --json", "MinBudget", run("minbudget", TRACE, "-p", "keep", "-a", "bestfit", "--json"))
document("advise --json", "Advice", run("advise", TRACE, "--capacity", "80GiB", "--json"), answers=(0, 3))
document("snapshot diff --json", "SnapshotDiff", run("snapshot", "diff", TRACE, TRACE, "--json"))
diff_file = os.path.join(tmp, "diff.json")
code, _, err = run("snapshot", "diff", TRACE, TRACE, "-o", diff_file)
case("snapshot diff -o: schema_version first",
     code == 0 and first_key_is_version(json.load(open(diff_file)), "SnapshotDiff"), err)

config = os.path.join(tmp, "sweep.json")
with open(config, "w") as f:
    json.dump({"traces": [os.path.abspath(TRACE)], "allocators": ["bestfit"], "policies": ["keep", "coop"],
               "budgets": {"ratios": [0.6, 1.0]}}, f)
out_dir = os.path.join(tmp, "out")
code, _, err = run("sweep", config, "-j", "1", "-o", out_dir)
case("sweep runs", code == 0, err)
if code == 0:
    res = json.load(open(os.path.join(out_dir, "results.json")))
    case("sweep: results.json has schema_version first, each run's report too",
         first_key_is_version(res, "SweepResults") and len(res["runs"]) == 4 and
         all(first_key_is_version(r["report"], "Report") for r in res["runs"] if "report" in r), list(res)[:3])
    manifest = os.path.join(out_dir, "sweep.json")
    case("sweep: sweep.json has schema_version first", first_key_is_version(json.load(open(manifest)), "SweepManifest"))
    # A manifest from a later coopsim: resume and merge refuse it in one line, and write nothing.
    text = open(manifest).read()
    with open(manifest, "w") as f:
        f.write(text.replace(f'"schema_version": {VERSIONS["SweepManifest"]}', '"schema_version": 99', 1))
    before = {n: open(os.path.join(out_dir, n), "rb").read() for n in ("results.csv", "results.json")}
    code, out, err = run("sweep", config, "-j", "1", "-o", out_dir, "--resume")
    want = f"coopsim: error: {manifest}: schema_version 99 (this coopsim reads sweep manifests of version 1)\n"
    case("sweep --resume refuses a manifest of schema_version 99 in one line", code == 1 and err == want, (code, err))
    merged = os.path.join(tmp, "merged")
    code, out, err = run("merge", out_dir, "-o", merged)
    case("merge refuses it too, and writes no directory", code == 1 and err == want and not os.path.exists(merged),
         (code, err))
    after = {n: open(os.path.join(out_dir, n), "rb").read() for n in before}
    case("the refused sweep directory is left as it was", before == after)

finish(results, tmp)
