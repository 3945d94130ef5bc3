#!/usr/bin/env python3
"""`coopsim run --torch-snapshot FILE --torch-snapshot-format 1.13|2.x` read by the torch
version each layout is for, reported as TAP (issue 32).

Usage: torch_snapshot_formats_test.py PATH/TO/coopsim   (run from the project root)

A pytorch-model run and a bestfit run of the bundled default trace (policy coop, budget 60%) are
exported in both layouts; then
  * torch 1.13's viewer (/usr/bin/python3 -m torch.cuda._memory_viz, Debian's python3-torch) reads
    the 1.13 export: `stats` from the command line (1.13 has no segsum, trace, trace_plot or
    segment_plot command; a later 1.x that has trace_plot / segment_plot gets them run too), and
    its segments / memory / compare flame graph lines in-process (their commands download
    flamegraph.pl to draw the SVG, so the lines are taken as text instead);
  * torch 2.x's viewer ($COOPSIM_TORCH2_PYTHON -m torch.cuda._memory_viz, scripts/deps.sh's
    coopsim_torch2_venv) reads the 2.x export: stats (its segsum), trace, trace_plot and
    segment_plot; and the 1.13 export's stats (2.x still reads the list of segments).
The totals they print are the report's: the segment count (device mallocs - frees), the reserved
bytes and the allocated bytes at the end of the run. Without torch 1.13 or torch 2.x, that
viewer's cases are TAP skips; under CI=true a missing $COOPSIM_TORCH2_PYTHON fails instead, as
python/tests/run_torch2.py does. `--torch-snapshot-format 3` is refused in one line, with no file."""
import json
import os
import pickle
import subprocess
import sys
import tempfile

from tap import finish, runner

COOPSIM = sys.argv[1]
TRACE = "traces/default.jsonl.gz"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-torch-snapshot-formats-")
run = runner(COOPSIM)


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def skip(name, why):
    results.append((f"{name} # SKIP {why}", True, ""))


def path(name):
    return os.path.join(tmp, name)


def load(p):
    with open(p, "rb") as f:
        return pickle.load(f)


def human(num):
    """A byte count as both viewers print it (their Bytes: one decimal, binary units)."""
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"


def viewer(python, *args):
    p = subprocess.run([python, "-m", "torch.cuda._memory_viz", *args], capture_output=True, text=True,
                       timeout=600, cwd=tmp)
    return p.returncode, p.stdout, p.stderr


def imports_viewer(python):
    return os.access(python, os.X_OK) and subprocess.run(
        [python, "-c", "import torch.cuda._memory_viz"], capture_output=True, timeout=600).returncode == 0


def has_command(python, command):
    p = subprocess.run([python, "-c", f"import torch.cuda._memory_viz as v; print(hasattr(v, {command!r}))"],
                       capture_output=True, text=True, timeout=600)
    return p.stdout.strip() == "True"


# --- the exports --------------------------------------------------------------------------------
RUNS = {"pytorch": ["-a", "pytorch"], "bestfit": ["-a", "bestfit"]}
reports, snaps = {}, {}
for name, args in RUNS.items():
    base = [TRACE, *args, "-p", "coop", "-b", "60%", "-q"]
    rep = path(f"{name}.json")
    code2, _, err2 = run("run", *base, "-o", rep, "--torch-snapshot", path(f"{name}-2.x.pickle"))
    code1, _, err1 = run("run", *base, "--torch-snapshot", path(f"{name}-1.13.pickle"),
                         "--torch-snapshot-format", "1.13")
    case(f"{name}: coopsim exports both layouts", code2 == 0 and code1 == 0, err2 or err1)
    reports[name] = json.load(open(rep)) if code2 == 0 else {}
    snaps[name] = (load(path(f"{name}-2.x.pickle")) if code2 == 0 else {"segments": [], "device_traces": [[]]},
                   load(path(f"{name}-1.13.pickle")) if code1 == 0 else [])

code, _, err = run("run", TRACE, "-p", "coop", "-b", "60%", "-q", "--torch-snapshot", path("explicit-2.x.pickle"),
                   "--torch-snapshot-format", "2.x")
same = code == 0 and open(path("explicit-2.x.pickle"), "rb").read() == open(path("pytorch-2.x.pickle"), "rb").read()
case("--torch-snapshot-format 2.x is the default (the same bytes)", same, err)


# --- auto: the layout of the torch that $COOPSIM_PYTHON imports ------------------------------------
# Stand-in Pythons (shell scripts) answer the version question as a Python with that torch would;
# one fails as a Python without torch does, one is not there at all.
def fake_python(name, body):
    p = path(name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(p, 0o755)
    return p


for label, python, expected in (("torch 1.13.1", fake_python("py113", "echo 1.13.1"), "1.13"),
                                ("torch 2.15.0+cpu", fake_python("py215", "echo 2.15.0+cpu"), "2.x"),
                                ("no torch (exit 1)", fake_python("pynone", "exit 1"), "2.x"),
                                ("no such Python", path("absent-python"), "2.x")):
    out_file = path(f"auto-{expected}-{len(results)}.pickle")
    p = subprocess.run([COOPSIM, "run", TRACE, "-p", "coop", "-b", "60%", "-q", "--torch-snapshot", out_file,
                        "--torch-snapshot-format", "auto"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COOPSIM_PYTHON": python})
    want = path(f"pytorch-{expected}.pickle")
    same = p.returncode == 0 and open(out_file, "rb").read() == open(want, "rb").read()
    case(f"--torch-snapshot-format auto with {label} writes the {expected} layout", same, p.stderr)


def layout_problems(new, old):
    """Where the 1.13 export (a list of segments) differs from the 2.x export's segments."""
    if not isinstance(old, list):
        return [f"the root is a {type(old).__name__}, not a list"]
    segs = new["segments"]
    if len(old) != len(segs):
        return [f"{len(old)} segments against {len(segs)}"]
    problems = []
    for a, b in zip(old, segs):
        keys = set(a)
        if keys != {"device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type",
                    "blocks"}:
            problems.append(f"segment keys {sorted(keys)}")
        for k in ("address", "total_size", "stream", "segment_type", "allocated_size", "active_size"):
            if a.get(k) != b[k]:
                problems.append(f"segment {b['address']:#x}: {k} {a.get(k)} against {b[k]}")
        for x, y in zip(a.get("blocks", []), b["blocks"]):
            if (x["size"], x["state"]) != (y["size"], y["state"]):
                problems.append(f"block {y['address']:#x}: {x['size']} {x['state']} against {y['size']} {y['state']}")
            if y["state"] == "active_allocated":
                h = x.get("history", [{}])
                want = [{"addr": y["address"], "real_size": y["requested_size"], "frames": y["frames"]}]
                if h != want:
                    problems.append(f"block {y['address']:#x}: history {h} against {want}")
            elif "history" in x:
                problems.append(f"inactive block {y['address']:#x} has a history")
        if len(a.get("blocks", [])) != len(b["blocks"]):
            problems.append(f"segment {b['address']:#x}: {len(a.get('blocks', []))} blocks against {len(b['blocks'])}")
    return problems


for name, (new, old) in snaps.items():
    problems = layout_problems(new, old)
    case(f"{name}: the 1.13 export is the 2.x export's segments in 1.13's layout (history frames included)",
         not problems, problems[:3])

# The report's totals at the end of the run (the pytorch model: its own segments).
rep = reports["pytorch"]
memory, counters = rep.get("memory", {}), rep.get("counters", {})
SEGMENTS = counters.get("device_mallocs", 0) - counters.get("device_frees", 0)
RESERVED = memory.get("final_reserved_bytes", -1)
ALLOCATED = memory.get("final_allocated_bytes", -1)
case("pytorch: the exports hold the report's segments and reserved bytes",
     len(snaps["pytorch"][1]) == SEGMENTS and sum(s["total_size"] for s in snaps["pytorch"][1]) == RESERVED,
     (len(snaps["pytorch"][1]), SEGMENTS, RESERVED))



def expected(name):
    """(segments, reserved bytes, allocated bytes) the viewers must print for run `name`: the
    report's for the pytorch model (its own segments), the export's derived ranges for bestfit."""
    if name == "pytorch":
        return SEGMENTS, RESERVED, ALLOCATED
    old = snaps[name][1]
    return (len(old), sum(s["total_size"] for s in old),
            sum(b["size"] for s in old for b in s["blocks"] if b["state"] == "active_allocated"))


# --- a bad value ----------------------------------------------------------------------------------
bad = path("bad.pickle")
code, out, err = run("run", TRACE, "-p", "coop", "-b", "60%", "--torch-snapshot", bad, "--torch-snapshot-format", "3")
case("--torch-snapshot-format 3 is refused in one line (status 2), no file written",
     code == 2 and out == "" and err == "coopsim: error: --torch-snapshot-format: expected 2.x, 1.13 or auto, got '3'\n"
     and not os.path.exists(bad), (code, out[-200:], err))

# --- torch 1.13's viewer on the 1.13 export ------------------------------------------------------
TORCH113 = "/usr/bin/python3"
FLAME_PROBE = """
import json, pickle, sys
from torch.cuda import _memory_viz as v
snap = pickle.load(open(sys.argv[1], 'rb'))
lines = lambda text: [l.rsplit(' ', 1) for l in text.splitlines() if l]
for kind, text in (('segments', v.segments(snap, format_flamegraph=lambda x: x)),
                   ('memory', v.memory(snap, format_flamegraph=lambda x: x)),
                   ('compare', v.compare([], snap, format_flamegraph=lambda x: x))):
    print(kind, sum(int(n) for _, n in lines(text)))
s = v.stats(snap)
print('stats', s['segments'], s['total_size'].value, s.get('active_allocated', v.Bytes(0)).value)
memory = lines(v.memory(snap, format_flamegraph=lambda x: x))
print('frames', json.dumps(sorted({stack.split(';', 2)[2] for stack, _ in memory
                                   if stack.split(';')[1] == 'active_allocated' and stack.count(';') >= 2
                                   and not stack.endswith(';<gaps>')})))
"""
if not imports_viewer(TORCH113):
    for c in ("stats", "flame graphs"):
        skip(f"torch 1.13: {c}", f"{TORCH113} cannot import torch.cuda._memory_viz")
else:
    version = subprocess.run([TORCH113, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    print(f"# torch {version} at {TORCH113}")
    for name in RUNS:
        new, old = snaps[name]
        nsegs, total, active = expected(name)
        p113 = path(f"{name}-1.13.pickle")
        code, out, err = viewer(TORCH113, "stats", p113)
        want = [f"'segments': {nsegs}", f"'total_size': {human(total)}", f"'active_allocated': {human(active)}"]
        case(f"torch 1.13: {name}: `stats` prints the segments and bytes",
             code == 0 and all(w in out for w in want), (code, want, out[-400:], err[-400:]))
        p = subprocess.run([TORCH113, "-c", FLAME_PROBE, p113], capture_output=True, text=True, timeout=600)
        got = dict((line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in p.stdout.splitlines() if " " in line)
        want = {"segments": str(total), "memory": str(total), "compare": str(total),
                "stats": f"{nsegs} {total} {active}"}
        case(f"torch 1.13: {name}: segments / memory / compare flame graph lines add up to the total bytes",
             p.returncode == 0 and all(got.get(k) == v for k, v in want.items()), (want, got, p.stderr[-400:]))
        shown = json.loads(got.get("frames", "[]"))
        frames = sorted({";".join(f"{f['filename'].split('/')[-1]}:{f['line']}:{f['name']}"
                                  for f in reversed(b["frames"])) or "<non-python>"
                         for s in new["segments"] for b in s["blocks"] if b["state"] == "active_allocated"})
        case(f"torch 1.13: {name}: the memory flame graph shows the 2.x export's frames of the active blocks",
             p.returncode == 0 and shown == frames and len(frames) > 1,
             (len(shown), len(frames), shown[:2], frames[:2]))
        for command in ("trace_plot", "segment_plot"):
            if has_command(TORCH113, command):
                html = path(f"{name}-1.13-{command}.html")
                code, _, err = viewer(TORCH113, command, p113, "-o", html)
                case(f"torch 1.13: {name}: `{command}` writes a page",
                     code == 0 and os.path.exists(html) and os.path.getsize(html) > 0, err)

# --- torch 2.x's viewer on the 2.x export --------------------------------------------------------
TORCH2 = os.environ.get("COOPSIM_TORCH2_PYTHON", "")
if os.environ.get("COOPSIM_SANITIZE") == "1" and not TORCH2:
    # the sanitizer pass (scripts/test.sh --sanitize) checks the C++; torch 2.x's viewer ran in the normal pass
    skip("torch 2.x: stats, trace, trace_plot, segment_plot", "the sanitizer pass: checked in the normal pass")
elif not TORCH2 or not os.access(TORCH2, os.X_OK):
    if os.environ.get("CI") == "true":
        case("torch 2.x: $COOPSIM_TORCH2_PYTHON is set (CI must check the 2.x export with torch 2.x's viewer)", False,
             "scripts/test.sh runs scripts/deps.sh's coopsim_torch2_venv")
    else:
        skip("torch 2.x: stats, trace, trace_plot, segment_plot",
             "no torch 2.x environment ($COOPSIM_TORCH2_PYTHON; scripts/deps.sh coopsim_torch2_venv)")
elif not imports_viewer(TORCH2):
    case("torch 2.x: $COOPSIM_TORCH2_PYTHON imports torch.cuda._memory_viz", False, TORCH2)
else:
    version = subprocess.run([TORCH2, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    print(f"# torch {version} at {TORCH2}")
    for name in RUNS:
        new, _ = snaps[name]
        nsegs, total, _ = expected(name)
        p2 = path(f"{name}-2.x.pickle")
        code, out, err = viewer(TORCH2, "stats", p2)
        stats_want = [f"segments: {nsegs}\n", f"total_reserved: {human(total)}\n"]
        case(f"torch 2.x: {name}: `stats` (segsum) prints the segments and bytes",
             code == 0 and all(w in out for w in stats_want), (code, stats_want, out[-400:], err[-400:]))
        entries = new["device_traces"][0]
        code, out, err = viewer(TORCH2, "trace", p2)
        mallocs = sum(1 for line in out.splitlines() if " = cudaMalloc(" in line)
        frees = sum(1 for line in out.splitlines() if line.startswith("cudaFree("))
        want = (True, sum(e["action"] == "segment_alloc" for e in entries),
                sum(e["action"] == "segment_free" for e in entries))
        if name == "pytorch":  # the model's device mallocs and frees
            want = (True, counters.get("device_mallocs"), counters.get("device_frees"))
        case(f"torch 2.x: {name}: `trace` prints every entry, cudaMalloc and cudaFree",
             code == 0 and (f"\n{len(entries)} entries\n" in out, mallocs, frees) == want,
             (code, want, (mallocs, frees), out[:200], err[-400:]))
        for command, title in (("trace_plot", "Active Memory Timeline"), ("segment_plot", "Allocator State History")):
            html = path(f"{name}-2.x-{command}.html")
            code, _, err = viewer(TORCH2, command, p2, "-o", html)
            page = open(html).read() if code == 0 and os.path.exists(html) else ""
            case(f"torch 2.x: {name}: `{command}` writes the {title} page", code == 0 and title in page
                 and "snapshot.pickle" in page, (code, err[-400:]))
        code, out, err = viewer(TORCH2, "stats", path(f"{name}-1.13.pickle"))
        case(f"torch 2.x: {name}: `stats` reads the 1.13 export too (the same totals)",
             code == 0 and all(w in out for w in stats_want), (code, stats_want, out[-400:], err[-400:]))

finish(results, tmp)
