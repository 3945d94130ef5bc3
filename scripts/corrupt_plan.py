#!/usr/bin/env python3
"""A corrupted copy of a replay plan (docs/plan-format.md) for the integrity check of replay-gpu: the
first swap_in step is removed and the later steps renumbered, so the tensor it brought back is read from
a block nothing wrote. The plan checker must reject the result, and replay-gpu --skip-check --poison must
fail at the step that reads it (exit 6). Usage: scripts/corrupt_plan.py PLAN OUT"""
import json
import sys


def corrupt(plan):
    removed = next(s["id"] for s in plan["steps"] if s["kind"] == "swap_in")

    def remap(a):
        return a - (a > removed)
    steps = [s for s in plan["steps"] if s["id"] != removed]
    for k, s in enumerate(steps):
        s["after"] = sorted({remap(a) for a in s["after"] if a != removed})
        if "origin" in s:
            s["origin"] = remap(s["origin"])
        s["id"] = k
    plan["steps"] = steps
    return removed


def main(argv):
    if len(argv) != 3:
        print(__doc__.splitlines()[-1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        plan = json.load(f)
    removed = corrupt(plan)
    with open(argv[2], "w") as f:
        json.dump(plan, f)
    print(f"removed step {removed} (the first swap_in) from {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
