#!/usr/bin/env python3
"""scripts/plot.py on the bundled sweeps (configs/coop-matrix.json, configs/smartpool-matrix.json;
not in the sanitizer pass) and on a tiny custom sweep: every figure is written as a valid PNG
(signature, IHDR chunk with its CRC, non-zero size), a PDF and an SVG that parses as XML, with its caption; every axis of every
figure of the bundled sweeps holds data (figures.json, counted from what was drawn); in the custom
sweep a series that never completes is drawn as out-of-memory glyphs and "no data", not an empty
axis, and its caption says so.

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
FORMATS = ("png", "pdf", "svg")


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


def pdf_ok(path):
    with open(path, "rb") as f:
        data = f.read()
    return data.startswith(b"%PDF-") and b"%%EOF" in data[-64:]


tmp = tempfile.mkdtemp(prefix="coopsim-plot-")
failures = []
checked = 0


def plot(sweep_dir, plots, name, every_axis_has_data=True):
    """Plots a sweep; checks every file and (bundled sweeps) that no axis is empty."""
    global checked
    p = subprocess.run([python, "scripts/plot.py", sweep_dir, "-o", plots, "--dpi", "120"], capture_output=True,
                       text=True)
    if p.returncode != 0:
        failures.append(f"{name}: plot.py failed: {p.stderr.strip()[-500:]}")
        return None
    with open(os.path.join(plots, "figures.json")) as f:
        document = json.load(f)
    if document.get("schema_version") != 1:
        failures.append(f"{name}: figures.json has schema_version {document.get('schema_version')!r}, not 1")
    report = document.get("figures", {})
    drawn = [n for n in FIGURES if n in report and not report[n].get("skipped")]
    if sorted(report) != sorted(FIGURES) or "overhead_vs_memory" not in drawn:
        failures.append(f"{name}: figures.json lists {sorted(report)}")
    listed = sorted(os.path.basename(line) for line in p.stdout.split())
    want = sorted([f"{n}.{e}" for n in drawn for e in FORMATS + ("txt",)] + ["figures.json"])
    if listed != want:
        failures.append(f"{name}: plot.py listed {listed}")
    for n in drawn:
        for ext, ok in (("png", png_ok), ("pdf", pdf_ok), ("svg", svg_ok)):
            path = os.path.join(plots, f"{n}.{ext}")
            checked += 1
            if not (os.path.exists(path) and ok(path)):
                failures.append(f"{name}: {n}.{ext} is missing or not a valid {ext.upper()}")
        caption = os.path.join(plots, f"{n}.txt")
        if not os.path.exists(caption) or "Runs: " not in open(caption).read():
            failures.append(f"{name}: {n}.txt is missing or does not say what was run")
    if every_axis_has_data:
        for n, fig in report.items():
            for panel in fig["panels"]:
                if panel["points"] <= 0:
                    failures.append(f"{name}: {n}: panel {panel['title']!r} is empty")
    return report


# The sanitizer pass (COOPSIM_SANITIZE=1) checks the C++, and the bundled sweeps are long under it:
# there only the custom sweep below is drawn; the normal pass draws both matrices too.
MATRICES = () if os.environ.get("COOPSIM_SANITIZE") == "1" else ("coop", "smartpool")
for matrix in MATRICES:
    out = os.path.join(tmp, matrix)
    p = subprocess.run([COOPSIM, "sweep", f"configs/{matrix}-matrix.json", "-o", out], capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"{matrix}-matrix sweep failed: {p.stderr.strip()[-300:]}")
        continue
    report = plot(out, os.path.join(tmp, matrix + "-plots"), f"{matrix}-matrix")
    if report and matrix == "coop" and any(report[n].get("skipped") for n in report):
        failures.append(f"coop-matrix: a figure was left out: {report}")
    if report and matrix == "smartpool" and "zero or missing in every run" not in report["search"].get("skipped", ""):
        failures.append(f"smartpool-matrix (keep only): the search figure is drawn without data: {report['search']}")
    if report and matrix == "coop":
        # bert_large: no budget where coop completes on bestfit at every ratio -> "no data", not a gap
        caption = open(os.path.join(tmp, "coop-plots", "peak_reserved.txt")).read()
        if report["peak_reserved"]["panels"][0].get("missing", 0) < 1 and "bert_large" not in caption:
            failures.append("coop-matrix: peak_reserved does not account for bert_large")

cfg = os.path.join(tmp, "tiny.json")
with open(cfg, "w", encoding="utf-8") as f:
    json.dump({"traces": [os.path.join(os.getcwd(), "traces/default.jsonl.gz")], "allocators": ["bestfit", "pytorch"],
               "policies": ["coop", "dtr", "keep"], "budgets": {"ratios": [0.3, 0.6, 0.8]}, "minbudget": True}, f)
sweep_dir, plots = os.path.join(tmp, "out"), os.path.join(tmp, "plots")
p = subprocess.run([COOPSIM, "sweep", cfg, "-j", "2", "-o", sweep_dir], capture_output=True, text=True)
if p.returncode != 0:
    failures.append(f"sweep failed: {p.stderr.strip()}")
else:
    report = plot(sweep_dir, plots, "custom", every_axis_has_data=False)
    if report:
        runs = report["overhead_vs_memory"]["panels"][0]["runs"]
        # keep below the peak never completes: its runs are drawn as out-of-memory glyphs
        if runs.get("oom", 0) < 6 or report["overhead_vs_memory"]["panels"][0]["points"] < runs["oom"]:
            failures.append(f"custom: out-of-memory runs not drawn: {report['overhead_vs_memory']['panels'][0]}")
        frag = open(os.path.join(plots, "fragmentation.txt")).read()
        if report["fragmentation"]["panels"][0]["missing"] < 2 or "no data" not in frag:
            failures.append(f"custom: keep's missing fragmentation bars are not marked: {report['fragmentation']}")
    p = subprocess.run([python, "scripts/plot.py", sweep_dir, "-o", plots, "--format", "png,gif"], capture_output=True,
                       text=True)
    if p.returncode == 0 or "formats must be some of png, pdf, svg" not in p.stderr:
        failures.append(f"--format gif was not refused in one line: {p.returncode} {p.stderr.strip()}")
shutil.rmtree(tmp, ignore_errors=True)
for f in failures:
    print(f"FAIL: {f}")
print(f"{checked} figure files checked; {len(failures)} problems")
sys.exit(1 if failures else 0)
