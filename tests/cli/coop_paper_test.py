#!/usr/bin/env python3
"""Coop's paper as OneFlow ran it (docs/results-coop-paper.md), as TAP: every trace of
traces/oneflow validates and says it was recorded with --harness oneflow; the sweep config of each
drawn model sweeps the trace it names; BERT-Large (batch 4) completes at ratio 1.00 (the 9900 MiB
top) under Coop, DTE and DTR with the profile; and scripts/coop_paper.py on two models writes
tables whose cells agree with `coopsim run` on the same config, and a PNG (when a python3 with
matplotlib is there). Runs are audited (COOPSIM_AUDIT=1, set by the suite).

Usage: coop_paper_test.py PATH/TO/coopsim   (run from the project root)"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

COOPSIM = sys.argv[1]
run = runner(COOPSIM, timeout=600)
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-coop-paper-")
MODELS = ["resnet50", "resnet152", "inception_v3", "unet", "bert_large", "bert_large_b16", "swin_b", "bilstm_fused",
          "densenet121"]


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


for m in MODELS:
    trace = f"traces/oneflow/{m}.jsonl.gz"
    code, out, err = run("validate", trace)
    with gzip.open(trace, "rt") as f:
        src = json.loads(f.readline())["source"]
    harness = (src.get("harness"), src.get("granularity"), src.get("optimizer"), src.get("preallocate_grads"))
    case(f"{m}: the trace validates and was recorded with --harness oneflow",
         code == 0 and harness == ("oneflow", "oneflow", "sgd-plain", True), f"exit {code}: {err.strip()} {harness}")
    with open(f"configs/coop-paper/{m}.json") as f:
        config = json.load(f)
    case(f"{m}: configs/coop-paper/{m}.json sweeps traces/oneflow/{m}.jsonl.gz",
         config["traces"] == [f"../../traces/oneflow/{m}.jsonl.gz"] and config["policies"] == ["coop", "dte", "dtr"]
         and config["base"]["params"]["coop"] == {"compat": "oneflow"}, json.dumps(config)[:200])

# The test: BERT-Large completes at ratio 1.00 for every method.
csv_path = os.path.join(tmp, "bert.csv")
code, out, err = run("run", "traces/oneflow/bert_large.jsonl.gz", "-c", "configs/coop-oneflow.json", "-p", "coop,dte,dtr",
                     "-b", "9900MiB", "-q", "--csv", csv_path)
rows = []
if code == 0:
    import csv
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
case("bert_large at 9900 MiB (ratio 1.00): coop, dte and dtr complete",
     code == 0 and [(r["policy"], r["status"]) for r in rows] == [("coop", "completed"), ("dte", "completed"),
                                                                   ("dtr", "completed")],
     f"exit {code}: {err.strip()} {[(r['policy'], r['status']) for r in rows]}")

# The script on two models; its table cells must be what coopsim run says at those budgets.
python = next((p for p in (sys.executable, "/usr/bin/python3")
               if subprocess.run([p, "-c", "import matplotlib"], capture_output=True).returncode == 0), None)
figure = os.path.join(tmp, "paper.png") if python else ""
tables = os.path.join(tmp, "tables.md")
p = subprocess.run([python or sys.executable, "scripts/coop_paper.py", "--coopsim", COOPSIM, "--models",
                    "resnet50,bert_large", "--figure", figure, "--tables", tables],
                   capture_output=True, text=True, timeout=900)
case("coop_paper.py --models resnet50,bert_large exits 0", p.returncode == 0, p.stderr[-500:])
text = open(tables).read() if os.path.exists(tables) else ""
row = next((line for line in text.splitlines() if line.startswith("| BERT Large (4) |")), "")
cells = [c.strip() for c in row.strip("|").split("|")]
case("the table has a BERT-Large row with a lowest ratio for each method",
     len(cells) == 8 and all(c[:1].isdigit() for c in cells[3:6]), row)
if len(cells) == 8 and cells[3][:1].isdigit():
    # the Coop cell's ratio -> the budget (ratio * 10000 MiB); that budget completes, the next lower fails
    ratio = float(cells[3].split()[0])
    budget = round(ratio * 10000)
    with open("configs/coop-paper/bert_large.json") as f:
        budgets = [int(b[:-3]) for b in json.load(f)["budgets"]]
    lower = max((b for b in budgets if b < budget), default=None)
    statuses = []
    for b in [budget] + ([lower] if lower else []):
        path = os.path.join(tmp, f"b{b}.csv")
        code, _, err = run("run", "traces/oneflow/bert_large.jsonl.gz", "-c", "configs/coop-oneflow.json", "-p", "coop",
                           "-b", f"{b}MiB", "-q", "--csv", path)
        with open(path, newline="") as f:
            import csv
            statuses.append(next(csv.DictReader(f))["status"] if code == 0 else f"exit {code}")
    case(f"the Coop cell ({ratio}) is the lowest completing budget per coopsim run",
         statuses[0] == "completed" and (lower is None or statuses[1] != "completed"), f"{budget}, {lower}: {statuses}")
if python:
    ok = os.path.exists(figure) and open(figure, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    case("the figure is a PNG", ok, figure)
p = subprocess.run([sys.executable, "scripts/coop_paper.py", "--models", "nope", "--figure", ""], capture_output=True,
                   text=True, timeout=60)
case("an unknown --models name is refused in one line", p.returncode == 2 and "--models: unknown nope" in p.stderr,
     p.stderr)
finish(results, tmp)
