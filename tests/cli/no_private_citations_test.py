#!/usr/bin/env python3
"""The repository cites only its own documentation (issue 16, item 4): no file in src/, include/,
scripts/, tests/, docs/ or README.md may point at the team's private notes (which live outside the
repository), and every docs/models/ page a source file names must exist. Reported as TAP.

Usage: no_private_citations_test.py [ROOT]   (default: the project root, two levels up)"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Built from pieces so that this file does not match its own patterns.
NOTES = ["algorithms", "trace-formats", "architecture-anchors"]
FORBIDDEN = re.compile(r"\.\./shared/" + "reference" + r"|\b(?:" + "|".join(re.escape(n) for n in NOTES) + r")\.md\b")
MODEL_PAGE = re.compile(r"docs/models/([A-Za-z0-9_-]+\.md)")
TEXT_EXT = {".cpp", ".hpp", ".h", ".py", ".md", ".build", ".sh", ".txt", ".json", ".jsonl", ".toml", ".cfg", ".ini"}


def files():
    for top in ["src", "include", "scripts", "tests", "docs"]:
        for dirpath, dirnames, names in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__",)]
            for n in names:
                if os.path.splitext(n)[1] in TEXT_EXT or n == "meson.build":
                    yield os.path.join(dirpath, n)
    yield os.path.join(ROOT, "README.md")


hits, missing = [], []
for f in files():
    try:
        with open(f, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (UnicodeDecodeError, OSError):
        continue
    rel = os.path.relpath(f, ROOT)
    for i, line in enumerate(lines, 1):
        if FORBIDDEN.search(line):
            hits.append(f"{rel}:{i}: {line.strip()}")
        for page in MODEL_PAGE.findall(line):
            if not os.path.exists(os.path.join(ROOT, "docs", "models", page)):
                missing.append(f"{rel}:{i}: docs/models/{page}")

print("1..2")
print(("ok" if not hits else "not ok") + " 1 - no file cites the private reference notes")
for h in hits:
    print("# " + h)
print(("ok" if not missing else "not ok") + " 2 - every docs/models/ page cited exists")
for m in missing:
    print("# " + m)
sys.exit(0 if not hits and not missing else 1)
