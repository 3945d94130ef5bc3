#!/usr/bin/env python3
"""What the binary accepts, and how it says no (issue 29, "Messages and acceptance"), as TAP.

Usage: acceptance_test.py PATH/TO/coopsim   (run from the project root)
* A key given twice in one JSON object is refused at its line in run configs (at any depth),
  sweep configs (variant names among them), a sweep's sweep.json and its journal.
* An empty option value is a usage error naming the option (exit 2), never "the default".
* A message quotes at most 80 bytes of what it quotes, a 100,000-digit number included.
* gzip: a member cut anywhere (even after its first byte) is "truncated", and bytes after the
  last member that begin no member are refused; a file of several whole members is read."""
import gzip
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish, runner  # noqa: E402

run = runner(sys.argv[1])
ROOT = os.getcwd()
GOLDEN = os.path.join(ROOT, "tests/data/golden/small_step.jsonl")
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-acceptance-")


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def path(*names):
    return os.path.join(tmp, *names)


def write(name, data):
    with open(path(name), "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path(name)


def refused(name, args, expected, status=1):
    code, out, err = run(*args)
    case(name, code == status and err == f"coopsim: error: {expected}\n" and out == "",
         f"status {code} (expected {status}), stderr {err[:400]!r}, expected {expected[:400]!r}")


# --- duplicate keys ---------------------------------------------------------------------------------
cfg = write("dup.json", '{"allocator": "bestfit",\n "allocator": "pytorch"}\n')
refused("a run config's key given twice is refused at its line", ["run", GOLDEN, "-c", cfg],
        f"{cfg}:2: duplicate key 'allocator'")
deep = write("deep.json", '{"params": {"dtr": {"heuristic": "lru",\n\n  "heuristic": "msps"}}}\n')
refused("... at any depth", ["run", GOLDEN, "-p", "dtr", "-c", deep], f"{deep}:3: duplicate key 'heuristic'")
refused("... in minbudget's config too", ["minbudget", GOLDEN, "-p", "keep", "-a", "bestfit", "-c", cfg],
        f"{cfg}:2: duplicate key 'allocator'")
SWEEP = {"traces": [GOLDEN], "allocators": ["bestfit"], "policies": ["keep"], "budgets": ["1GiB"]}
text = json.dumps(SWEEP, indent=1)
scfg = write("sdup.json", text[:-2] + ',\n "policies": ["dtr"]\n}\n')
refused("a sweep config's key given twice is refused at its line", ["sweep", scfg, "-o", path("never")],
        f"{scfg}:{text.count(chr(10)) + 1}: duplicate key 'policies'")
vcfg = write("vdup.json", '{"traces": ["%s"], "allocators": ["bestfit"], "policies": ["dtr"], "budgets": ["1GiB"],\n'
             ' "variants": {"a": {"set": {"dtr.heuristic": "lru"}},\n'
             '              "a": {"set": {"dtr.heuristic": "msps"}}}}\n' % GOLDEN)
refused("a variant named twice is refused at its line", ["sweep", vcfg, "-o", path("never")],
        f"{vcfg}:3: duplicate key 'a'")
case("no refused sweep left an output directory", not os.path.exists(path("never")))

good = write("good.json", json.dumps(SWEEP))
done = path("done")
code, _, err = run("sweep", good, "-j", "1", "-o", done, "--stop-after", "1")
manifest = os.path.join(done, "sweep.json")
with open(manifest) as f:
    lines = f.read().splitlines()
runs_line = next(i for i, l in enumerate(lines) if '"runs"' in l)
lines.insert(runs_line + 1, '  "runs": 7,')
with open(manifest, "w") as f:
    f.write("\n".join(lines) + "\n")
refused("sweep.json's key given twice is refused at its line by --resume", ["sweep", good, "-o", done, "--resume"],
        f"{manifest}:{runs_line + 2}: duplicate key 'runs'")
journal = os.path.join(done, "journal.jsonl")
with open(journal, "w") as f:
    f.write('{"run": 0, "run": 0, "report": {}}\n')
with open(manifest, "w") as f:
    f.write("\n".join(l for i, l in enumerate(lines) if i != runs_line + 1) + "\n")
refused("a journal line's key given twice is refused at its line", ["sweep", good, "-o", done, "--resume"],
        f"{journal}:1: duplicate key 'run'")

# --- empty values ---------------------------------------------------------------------------------
for flag, name in (("-a", "--allocator"), ("-p", "--policy"), ("-b", "--budget"), ("-o", "--output"),
                   ("--csv", "--csv"), ("-c", "--config"), ("--set", "--set")):
    refused(f"run {flag} '' is a usage error naming {name}", ["run", GOLDEN, flag, ""],
            f"{name}: expected a value, got an empty string", status=2)
for flag, name, value in (("-a", "--allocator", ","), ("-p", "--policy", "keep,"), ("-b", "--budget", "50%,,60%")):
    refused(f"run {flag} {value!r}: an empty entry of a comma list is a usage error", ["run", GOLDEN, flag, value],
            f"{name}: expected a comma list without empty entries, got '{value}'", status=2)
code, out, err = run("run", GOLDEN, "-a", "pytorch,bestfit", "-a", "fungible", "-p", "keep", "-b", "50%,100%", "-q",
                     "--csv", path("lists.csv"))
with open(path("lists.csv")) as f:
    rows = f.read().splitlines()[1:] if code == 0 else []
case("comma lists and repeated options still combine (3 allocators x 2 budgets)", len(rows) == 6, err)
refused("run '' (the trace) is a usage error", ["run", ""], "trace: expected a value, got an empty string", status=2)
refused("sweep -o '' is a usage error", ["sweep", good, "-o", ""], "--output: expected a value, got an empty string",
        status=2)
refused("minbudget -p '' is a usage error", ["minbudget", GOLDEN, "-p", "", "-a", "bestfit"],
        "--policy: expected a value, got an empty string", status=2)
refused("advise --reserve '' is a usage error", ["advise", GOLDEN, "--capacity", "1GiB", "--reserve", ""],
        "--reserve: expected a value, got an empty string", status=2)
code, out, err = run("run", "--", GOLDEN)
case("a path after -- is read as the trace", code == 0 and "golden-small-step" in out, err)
refused("a path after -- is never an option", ["validate", "--", "--help"],
        "--help:0: cannot open trace file: No such file or directory")

# --- quoted excerpts stay at 80 bytes -----------------------------------------------------------------
BIG = "9" * 100_000
CUT = "'" + "9" * 80 + "... (100000 bytes)'"
big_cfg = write("big.json", '{"budget": %s}\n' % BIG)
refused("a 100,000-digit number in a config is quoted cut", ["run", GOLDEN, "-c", big_cfg],
        f"{big_cfg}:1: invalid JSON: number overflow parsing {CUT}")
big_sweep = write("bigsweep.json", json.dumps(SWEEP)[:-1] + ', "description": %s}' % BIG)
refused("... in a sweep config", ["sweep", big_sweep, "-o", path("never")],
        f"{big_sweep}:1: invalid JSON: number overflow parsing {CUT}")
big_trace = write("bighead.jsonl", '{"format":"coopsim-trace","version":1,"x_big":%s}\n' % BIG)
refused("... in a trace header", ["validate", big_trace], f"{big_trace}:1: malformed JSON: number overflow parsing {CUT}")

# --- gzip: nothing after the last member but another whole member -------------------------------------
with open(GOLDEN, "rb") as f:
    data = f.read()
member = gzip.compress(data, mtime=0)
TRUNCATED = "gzip stream is truncated (unexpected end of compressed data)"
for name, tail, problem in (("one cut byte", b"\x1f", TRUNCATED), ("two cut bytes", b"\x1f\x8b", TRUNCATED),
                            ("three cut bytes", b"\x1f\x8b\x08", TRUNCATED),
                            ("trailing garbage", b"xyz",
                             "gzip stream is corrupt: trailing bytes after the last member are not a gzip member"),
                            ("a trailing zero byte", b"\x00",
                             "gzip stream is corrupt: trailing bytes after the last member are not a gzip member")):
    p = write(name.replace(" ", "-") + ".jsonl.gz", member + tail)
    refused(f"gzip: {name} after the last member are refused", ["validate", p], f"{p}:35: {problem}")
lines = data.split(b"\n")
two = write("two-members.jsonl.gz", gzip.compress(b"\n".join(lines[:10]) + b"\n", mtime=0)
            + gzip.compress(b"\n".join(lines[10:]), mtime=0))
code, out, err = run("validate", two)
code1, out1, _ = run("validate", write("one-member.jsonl.gz", member))
case("gzip: two whole members read as one stream (same trace, same hash)",
     code == 0 and code1 == 0 and out.splitlines()[1:] == out1.splitlines()[1:], err)

finish(results, tmp)
