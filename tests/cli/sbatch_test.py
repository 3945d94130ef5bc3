#!/usr/bin/env python3
"""scripts/sweep.sbatch outside Slurm (the array task's variables set by hand), as TAP: SHARDS from the
environment, three array tasks merged byte-identical to the unsharded sweep, and an array bound or a
SHARDS value that do not match refused in one line (exit 2) before anything runs.

Usage: sbatch_test.py PATH/TO/coopsim   (run from the project root)"""
import filecmp
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

COOPSIM = os.path.abspath(sys.argv[1])
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-sbatch-")
config = os.path.join(tmp, "c.json")
with open(config, "w") as f:
    json.dump({"traces": [os.path.abspath("traces/default.jsonl.gz")], "allocators": ["bestfit", "pytorch"],
               "policies": ["coop", "dtr"], "budgets": {"ratios": [0.5, 0.75, 1.0]}, "minbudget": True}, f)


def task(k, shards, top):
    env = dict(os.environ, SHARDS=str(shards), SLURM_ARRAY_TASK_ID=str(k), SLURM_ARRAY_TASK_MAX=str(top),
               CONFIG=config, OUT=os.path.join(tmp, "shards"), COOPSIM=COOPSIM, SLURM_CPUS_PER_TASK="1")
    return subprocess.run(["bash", "scripts/sweep.sbatch"], capture_output=True, text=True, env=env, timeout=300)


ok = all(task(k, 3, 3).returncode == 0 for k in (1, 2, 3))
merged, whole = os.path.join(tmp, "merged"), os.path.join(tmp, "whole")
subprocess.run([COOPSIM, "merge", "-o", merged] + [os.path.join(tmp, "shards", str(k)) for k in (1, 2, 3)],
               capture_output=True, check=False)
subprocess.run([COOPSIM, "sweep", config, "-o", whole], capture_output=True, check=False)
same = ok and all(filecmp.cmp(os.path.join(merged, f), os.path.join(whole, f), shallow=False)
                  for f in ("results.csv", "results.json", "minbudget.csv"))
results.append(("SHARDS=3: three array tasks merge byte-identical to the unsharded sweep", same, ""))
p = task(1, 2, 3)
results.append(("an array bound above SHARDS is refused in one line", p.returncode == 2 and p.stderr.strip() ==
                 "sweep.sbatch: --array goes up to 3 but SHARDS=2: set SHARDS to the array's upper bound", p.stderr))
p = task(1, "x", 1)
results.append(("a SHARDS that is not a positive integer is refused", p.returncode == 2 and
                 "SHARDS must be a positive integer, got 'x'" in p.stderr, p.stderr))
finish(results, tmp)
