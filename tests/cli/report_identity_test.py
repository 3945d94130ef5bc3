#!/usr/bin/env python3
"""Report identity across refactorings (issue 16), reported as TAP.

For every bundled trace, one `coopsim run` of every allocator x {keep, dtr, coop, autoswap} x
{60 %, 100 %} writes the text report (stdout), the JSON report (-o) and the CSV (--csv). The
SHA-256 of each of the three files, and of each run's JSON object (re-serialised with sorted keys,
to name the run that changed), must equal the figures in tests/data/report_hashes.txt, which were
recorded at commit dea8c1b, the last commit before the renovation of issue 16.

A change of behaviour that is meant (a model fix) regenerates the file with --update and says so
in the commit message; a refactoring never does.

Usage: report_identity_test.py PATH/TO/coopsim [--update]   (run from the project root)"""
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

COOPSIM = sys.argv[1]
UPDATE = "--update" in sys.argv[2:]
HASHES = "tests/data/report_hashes.txt"
ALLOCATORS = "pytorch,cnmem,bestfit,fungible,smartpool"
POLICIES = "keep,dtr,coop,autoswap"
BUDGETS = "60%,100%"


def sha(data):
    return hashlib.sha256(data).hexdigest()


# Report keys added after dea8c1b by meant changes (issue 17: PyTorch's names for the peaks, the
# allocator's OOM count, memory_viz's segsum view at an OOM; issue 31: bestfit's new parameters). Each run's JSON object is hashed
# without them, so every figure that existed at dea8c1b is still compared with dea8c1b's; the
# three whole-file hashes were regenerated (--update) when the keys were added.
ADDITIONS = [("pytorch_memory_stats",), ("counters", "ooms"), ("oom", "segsum"),
             # issue 31: bestfit's small-piece area and coop.compat (off by default), echoed in the config
             ("config", "params", "bestfit", "small_area"), ("config", "params", "bestfit", "small_threshold"),
             ("config", "params", "coop", "compat"),
             # issue 32: the OOM verdict (capacity or fragmentation) beside the figures it is made from
             ("oom", "verdict"),
             # issue 32: every JSON document names its schema version first
             ("schema_version",)]
# Config keys renamed after dea8c1b so that each word has one meaning (issue 30; docs/architecture.md,
# "Names"): each run's JSON object is hashed under the old name, so its figures are still compared
# with dea8c1b's; the whole-file JSON hashes were regenerated (--update) with the rename.
RENAMES = [(("config", "engine"), "residency_checks", "plan_checks")]


def without_additions(run):
    run = json.loads(json.dumps(run))
    for path, new, old in RENAMES:
        node = run
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and new in node:
            node = {(old if k == new else k): v for k, v in node.items()}
            parent = run
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = node
    for path in ADDITIONS:
        node = run
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return run


def measure(scratch):
    """Returns {key: sha256} for every trace's three reports and every run's JSON object."""
    figures = {}
    for trace in sorted(glob.glob("traces/*.jsonl.gz")):
        name = os.path.basename(trace)
        out_json = os.path.join(scratch, name + ".json")
        out_csv = os.path.join(scratch, name + ".csv")
        p = subprocess.run([COOPSIM, "run", trace, "-a", ALLOCATORS, "-p", POLICIES, "-b", BUDGETS,
                            "-o", out_json, "--csv", out_csv], capture_output=True, timeout=1200)
        if p.returncode != 0:
            figures[f"{name} exit"] = f"{p.returncode}: {p.stderr.decode(errors='replace').strip()}"
            continue
        with open(out_json, "rb") as f:
            raw_json = f.read()
        with open(out_csv, "rb") as f:
            raw_csv = f.read()
        figures[f"{name} text"] = sha(p.stdout)
        figures[f"{name} json"] = sha(raw_json)
        figures[f"{name} csv"] = sha(raw_csv)
        for run in json.loads(raw_json):
            key = f"{name} {run['allocator']} {run['policy']} {run['budget_bytes']}"
            figures[key] = sha(json.dumps(without_additions(run), sort_keys=True).encode())
    return figures


def main():
    scratch = tempfile.mkdtemp(prefix="coopsim-identity-")
    figures = measure(scratch)
    if UPDATE:
        with open(HASHES, "w") as f:
            f.write(f"# {ALLOCATORS} x {POLICIES} x {BUDGETS}; written by tests/cli/report_identity_test.py "
                    "--update\n")
            for key in sorted(figures):
                f.write(f"{key}\t{figures[key]}\n")
        print(f"wrote {len(figures)} hashes to {HASHES}")
        return
    expected = {}
    with open(HASHES) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            key, value = line.rstrip("\n").split("\t")
            expected[key] = value
    results = []
    traces = sorted({key.split(" ")[0] for key in expected})
    present = sorted(os.path.basename(t) for t in glob.glob("traces/*.jsonl.gz"))
    results.append(("the bundled traces are the ones hashed", traces == present, f"hashed {traces}, present {present}"))
    runs = [k for k in expected if len(k.split(" ")) == 4]
    results.append(("every trace has 5 allocators x 4 policies x 2 budgets hashed", len(runs) == 40 * len(traces),
                    f"{len(runs)} run hashes for {len(traces)} traces"))
    for trace in traces:
        for kind in ("text", "json", "csv"):
            key = f"{trace} {kind}"
            results.append((f"{trace}: {kind} report byte-identical", figures.get(key) == expected.get(key),
                            f"measured {figures.get(key) or figures.get(trace + ' exit')}, expected {expected.get(key)}"))
        changed = [k for k in runs if k.startswith(trace + " ") and figures.get(k) != expected[k]]
        results.append((f"{trace}: every run's JSON object unchanged", not changed,
                        f"changed: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}"))
    finish(results, scratch)


main()
