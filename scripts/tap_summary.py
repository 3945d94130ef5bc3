#!/usr/bin/env python3
"""Counts test cases from Meson's testlog.json: TAP tests by their 'ok'/'not ok' lines, other
tests as one case each. Prints failing case names, then 'N passed, N failed'."""
import json
import re
import sys

passed = failed = 0
failures = []
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        entry = json.loads(line)
        name = entry.get("name", "?")
        out = entry.get("stdout", "") or ""
        cases = re.findall(r"^(not ok|ok)\b(.*)$", out, re.M)
        if entry.get("protocol") == "tap" or cases:
            for verdict, rest in cases:
                if verdict == "ok":
                    passed += 1
                else:
                    failed += 1
                    failures.append(f"{name}: {rest.strip()}")
            if entry.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and not any(v == "not ok" for v, _ in cases):
                failed += 1
                failures.append(f"{name}: {entry.get('result')}")
        elif entry.get("result") in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif entry.get("result") == "SKIP":
            pass
        else:
            failed += 1
            failures.append(f"{name}: {entry.get('result')}")
for f_ in failures[:50]:
    print("FAILED", f_)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
