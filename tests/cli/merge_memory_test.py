#!/usr/bin/env python3
"""`coopsim merge` streams (issue 32): its memory does not grow with the sweep. Reported as TAP.

Usage: merge_memory_test.py PATH/TO/coopsim   (run from the project root)
A tiny generated trace under 2 allocators x N budget ratios (N runs, most of them out of memory,
whose reports are the largest), swept whole and in 4 shards, for N = 4,000 and 8,000 runs. The
merge of the shards must be byte-identical to the unsharded sweep, and its peak resident memory
(ru_maxrss of a fresh child that runs only the merge) must stay under 40 MiB, where the code that
read every shard whole took about 145 MB at 4,000 runs and 280 MB at 8,000, and grow by less than
20 % when the sweep doubles. Under the sanitizers (COOPSIM_SANITIZE=1: ASan's shadow memory and
quarantine) only the identity is checked, at 400 and 800 runs. A shard whose rows are out of index order is refused."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

COOPSIM = sys.argv[1]
run = runner(COOPSIM)
SANITIZED = os.environ.get("COOPSIM_SANITIZE") == "1"
FILES = ("results.csv", "results.json", "sweep.json")
LIMIT_KIB = 40 * 1024
SHARDS = 4
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-merge-memory-")


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def path(*names):
    return os.path.join(tmp, *names)


def read(p):
    with open(p, "rb") as f:
        return f.read()


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def merge_peak(dirs, out):
    """(exit status, stdout, stderr, peak RSS in KiB) of `coopsim merge DIRS -o OUT`. GNU time's %M
    where there is one; else ru_maxrss of RUSAGE_CHILDREN in a fresh Python that runs only the
    merge, an upper bound: Linux counts the interpreter's own peak (some 14 MB) into its child's
    at exec."""
    logs = path("merge.out"), path("merge.err"), path("merge.rss")
    if GNU_TIME:
        cmd = [GNU_TIME, "-f", "%M", "-o", logs[2], COOPSIM, "merge", *dirs, "-o", out]
        with open(logs[0], "w") as o, open(logs[1], "w") as e:
            code = subprocess.run(cmd, stdout=o, stderr=e, timeout=600).returncode
        with open(logs[2], encoding="utf-8") as f:
            rss = f.read().split()[-1]
    else:
        child = ("import resource, subprocess, sys\n"
                 "with open(sys.argv[1], 'w') as o, open(sys.argv[2], 'w') as e:\n"
                 "    code = subprocess.run(sys.argv[3:], stdout=o, stderr=e).returncode\n"
                 "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
        p = subprocess.run([sys.executable, "-c", child, *logs[:2], COOPSIM, "merge", *dirs, "-o", out],
                           capture_output=True, text=True, timeout=600, check=True)
        code, rss = p.stdout.split()
    with open(logs[0], encoding="utf-8") as o, open(logs[1], encoding="utf-8") as e:
        return int(code), o.read(), e.read(), int(rss)


code, _, err = run("generate", "-o", path("t.jsonl"), "--set", "layers=2", "--set", "batch=2")
case("a tiny trace is generated", code == 0, err)

peaks = {}
# Under the sanitizers only the identity is checked, which the smaller sweeps show as well.
SIZES = (400, 800) if SANITIZED else (4000, 8000)
for runs in SIZES:
    step = 2 / runs  # 2 allocators x runs / 2 ratios in (0, 1]
    cfg = path(f"sweep-{runs}.json")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write('{"traces": ["t.jsonl"], "allocators": ["bestfit", "pytorch"], "policies": ["keep"], '
                f'"budgets": {{"ratios": {{"from": {step!r}, "to": 1.0, "step": {step!r}}}}}}}\n')
    whole = path(f"whole-{runs}")
    code, out, err = run("sweep", cfg, "-j", "2", "-o", whole)
    case(f"{runs} runs: the unsharded sweep", code == 0 and out.startswith(f"sweep: {runs} runs"), out + err[-500:])
    shards = [path(f"shard-{runs}-{k}") for k in range(1, SHARDS + 1)]
    ok = True
    for k, d in enumerate(shards, 1):
        code, out, err = run("sweep", cfg, "-j", "2", "-o", d, "--shard", f"{k}/{SHARDS}")
        ok = ok and code == 0
    case(f"{runs} runs: {SHARDS} shards", ok, err[-500:])
    merged = path(f"merged-{runs}")
    peaks[runs] = []
    for attempt in range(2):  # the smaller of two peaks: a page or two of noise either way
        target = merged if attempt == 0 else merged + "-again"
        code, out, err, rss = merge_peak(list(reversed(shards)), target)
        peaks[runs].append(rss)
        case(f"{runs} runs: merge #{attempt + 1} succeeds",
             code == 0 and out == f"merged {SHARDS} shards: {runs} runs, 0 minimum-budget searches -> {target}\n",
             out + err)
    differ = [f for f in FILES if read(os.path.join(whole, f)) != read(os.path.join(merged, f))]
    case(f"{runs} runs: the merge is byte-identical to the unsharded sweep", not differ, str(differ))
    size = os.path.getsize(os.path.join(merged, "results.json"))
    print(f"# {runs} runs: results.json {size / 2**20:.1f} MiB, merge peak RSS {peaks[runs]} KiB "
          f"({'GNU time' if GNU_TIME else 'RUSAGE_CHILDREN of a Python'})")
    case(f"{runs} runs: the merge leaves only its files and the lock",
         sorted(os.listdir(merged)) == sorted([".coopsim.lock", *FILES]), str(os.listdir(merged)))
    if SANITIZED:
        case(f"{runs} runs: merge peak RSS under {LIMIT_KIB} KiB # SKIP sanitizers inflate resident memory", True)
    else:
        case(f"{runs} runs: merge peak RSS under {LIMIT_KIB} KiB", min(peaks[runs]) < LIMIT_KIB, str(peaks[runs]))

small, large = min(peaks[SIZES[0]]), min(peaks[SIZES[1]])
if SANITIZED:
    case("doubling the sweep grows the merge's peak RSS by less than 20 % # SKIP sanitizers", True)
else:
    case("doubling the sweep grows the merge's peak RSS by less than 20 %", large < small * 1.2,
         f"{small} KiB at {SIZES[0]} runs, {large} KiB at {SIZES[1]}")

# Merge reads each shard's files side by side, in index order: a shard whose rows were reordered
# by hand is refused before anything is written.
shard = path(f"shard-{SIZES[0]}-2")
csv = os.path.join(shard, "results.csv")
lines = read(csv).decode().splitlines(True)
with open(csv, "w", encoding="utf-8") as f:
    f.write("".join([lines[0], lines[2], lines[1], *lines[3:]]))
target = path("never")
code, out, err = run("merge", *[path(f"shard-{SIZES[0]}-{k}") for k in range(1, SHARDS + 1)], "-o", target)
case("a shard with rows out of order is refused, naming the row, and nothing is written",
     code == 1 and err == f"coopsim: error: {csv}:3: run 1 comes after run 5: merge reads each shard's files in index "
     f"order; coopsim sweep CONFIG --shard 2/4 --resume -o {shard} rewrites them so\n" and not os.path.exists(target),
     err)

finish(results, tmp)
