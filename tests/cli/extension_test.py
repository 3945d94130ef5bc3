#!/usr/bin/env python3
"""The registry is all a new allocator needs (issue 30), reported as TAP. tests/meson.build builds
`coopsim-extended` and `test_contract_extended` with one more registry line, for the throwaway
allocator of tests/extension/throwaway_allocator.cpp, and no other change. Here: `list` and `list
--json` name it, `run -a throwaway` and `-a all` run it, an unknown allocator's error lists it,
and the allocator contract suite runs every one of its cases on it and passes. (cli_test.py and
cli_errors_test.py also run unchanged on `coopsim-extended`: suites `extension`.)

Usage: extension_test.py COOPSIM_EXTENDED TEST_CONTRACT_EXTENDED   (run from the project root)"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

COOPSIM, CONTRACT = sys.argv[1], sys.argv[2]
TRACE = "tests/data/golden/small_step.jsonl"
run = runner(COOPSIM)
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


code, out, err = run("list", "--json")
names = [a["name"] for a in json.loads(out)["allocators"]] if code == 0 else []
case("list --json names the throwaway allocator last, after the built-in ones",
     names[-1:] == ["throwaway"] and "pytorch" in names, out[:300] + err)
code, out, err = run("list")
case("list shows it with its help", code == 0 and "\n  throwaway " in out and "bump counter" in out, err)
code, out, err = run("run", TRACE, "-a", "throwaway", "--json")
rep = json.loads(out) if code == 0 else {}
case("run -a throwaway completes and reports it", rep.get("allocator") == "throwaway" and rep.get("status") == "completed",
     out[:300] + err)
code, out, err = run("run", TRACE, "-a", "all")
rows = [line.split()[0] for line in out.splitlines() if line.split()[1:2] == ["keep"]]
case("-a all runs every allocator of the registry, the throwaway one included", code == 0 and rows == names,
     out + err)
code, out, err = run("run", TRACE, "-a", "tlsf")
case("an unknown allocator's error lists it", code != 0 and f"(valid: {', '.join(names)})" in err, err)

# The allocator cases only (the policy registry is the same). The sanitizer pass leaves out the
# 100k random operations per allocator too: its `contract` suite runs them on every built-in one.
spec = "[contract]~[policy]" + ("~*100k*" if os.environ.get("COOPSIM_SANITIZE") == "1" else "")
p = subprocess.run([CONTRACT, "-r", "compact", "-s", spec], capture_output=True, text=True, timeout=1200)
covered = p.stdout.count("allocator throwaway")
case("the allocator contract suite runs on it and passes", p.returncode == 0 and covered >= 4,
     f"exit {p.returncode}, {covered} assertions name it; {p.stdout[-500:]}")

finish(results)
