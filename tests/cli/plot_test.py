#!/usr/bin/env python3
"""scripts/plot.py on a tiny sweep: every figure is written as a valid PNG (signature, IHDR chunk
with its CRC, non-zero size) and an SVG that parses as XML.

Usage: plot_test.py PATH/TO/coopsim   (run from the project root)
Exit status 77 (skipped) when neither this python3 nor /usr/bin/python3 has matplotlib."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

COOPSIM = sys.argv[1]
FIGURES = ("overhead_vs_memory", "fragmentation", "search", "peak_reserved", "minbudget")


def has_matplotlib(python):
    return os.path.exists(python) and subprocess.run([python, "-c", "import matplotlib"],
                                                     capture_output=True).returncode == 0


python = next((p for p in (sys.executable, "/usr/bin/python3") if has_matplotlib(p)), None)
if python is None:
    print("skipped: no python3 with matplotlib (Debian: apt-get install python3-matplotlib)")
    sys.exit(77)


def png_ok(path):
    with open(path, "rb") as f:
        data = f.read(33)
    if len(data) < 33 or data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    length, kind = struct.unpack(">I4s", data[8:16])
    width, height = struct.unpack(">II", data[16:24])
    crc = struct.unpack(">I", data[29:33])[0]
    return length == 13 and kind == b"IHDR" and width > 0 and height > 0 and zlib.crc32(data[12:29]) == crc


def svg_ok(path):
    try:
        return ET.parse(path).getroot().tag.endswith("svg")
    except ET.ParseError:
        return False


tmp = tempfile.mkdtemp(prefix="coopsim-plot-")
cfg = os.path.join(tmp, "tiny.json")
with open(cfg, "w", encoding="utf-8") as f:
    json.dump({"traces": [os.path.join(os.getcwd(), "traces/default.jsonl.gz")], "allocators": ["bestfit", "pytorch"],
               "policies": ["coop", "dtr"], "budgets": {"ratios": [0.6, 0.8, 1.0]}, "minbudget": True}, f)
sweep_dir, plots = os.path.join(tmp, "out"), os.path.join(tmp, "plots")
failures = []
p = subprocess.run([COOPSIM, "sweep", cfg, "-j", "2", "-o", sweep_dir], capture_output=True, text=True)
if p.returncode != 0:
    failures.append(f"sweep failed: {p.stderr.strip()}")
else:
    p = subprocess.run([python, "scripts/plot.py", sweep_dir, "-o", plots], capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"plot.py failed: {p.stderr.strip()[-500:]}")
    for name in FIGURES:
        png, svg = os.path.join(plots, name + ".png"), os.path.join(plots, name + ".svg")
        if not (os.path.exists(png) and png_ok(png)):
            failures.append(f"{name}.png is missing or not a valid PNG")
        if not (os.path.exists(svg) and svg_ok(svg)):
            failures.append(f"{name}.svg is missing or not valid XML")
    listed = sorted(os.path.basename(line) for line in p.stdout.split())
    if listed != sorted(f"{n}.{e}" for n in FIGURES for e in ("png", "svg")):
        failures.append(f"plot.py listed {listed}")
shutil.rmtree(tmp, ignore_errors=True)
for f in failures:
    print(f"FAIL: {f}")
print(f"{len(FIGURES) * 2 - len([f for f in failures if '.png' in f or '.svg' in f])} figure files checked; "
      f"{len(failures)} problems")
sys.exit(1 if failures else 0)
