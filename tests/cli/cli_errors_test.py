#!/usr/bin/env python3
"""Errors of the command line keep the promise of docs/architecture.md (issue 15, class 4),
reported as TAP: every CLI11 parse error is one line "coopsim: error: ..." and exit status 2 (with
"did you mean" for a close option or command name); budgets, --set values and sweep configs
give one line naming the key and exit 1; a message quoting input cuts it at 80 bytes with the
full length. Every case checks the exact stderr, the exit status and that stdout is empty.
Inputs (a trace whose peak is 1000 bytes, configs) are written by this script.

Usage: cli_errors_test.py PATH/TO/coopsim   (run from the project root)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import command_names, registry_names  # noqa: E402

COOPSIM = sys.argv[1]
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-cli-errors-")
COMMANDS = ", ".join(command_names(COOPSIM))
ALLOCATORS = ", ".join(registry_names(COOPSIM, "allocators"))
UNITLESS = "(plain numbers below 1024 are not taken as bytes"


def path(name):
    return os.path.join(tmp, name)


def write(name, text):
    with open(path(name), "w", encoding="utf-8") as f:
        f.write(text)
    return path(name)


def run(*args):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, errors="replace", timeout=120)
    return p.returncode, p.stdout, p.stderr


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def bad(name, args, expected, status):
    code, out, err = run(*args)
    want = "coopsim: error: " + expected + "\n"
    case(name, code == status and err == want and out == "",
         f"status {code} (expected {status}), stderr {err[:600]!r}, expected {want[:600]!r}, stdout {out[:200]!r}")


def usage(name, args, expected):
    bad(name, args, expected, 2)


def config(name, args, expected):
    bad(name, args, expected, 1)


# One 1000-byte tensor written, read and freed: the trace's peak live bytes are 1000.
TRACE = write("peak1000.jsonl", "\n".join(json.dumps(x) for x in [
    {"format": "coopsim-trace", "version": 1, "model": "peak-1000"},
    {"kind": "tensor", "id": 1, "bytes": 1000, "role": "activation", "name": "x"},
    {"kind": "op", "id": 1, "name": "fill", "duration": 10, "inputs": [], "outputs": [1]},
    {"kind": "alloc", "tensor": 1}, {"kind": "compute", "op": 1}, {"kind": "free", "tensor": 1},
]) + "\n")
code, out, err = run("validate", TRACE)
case("the generated trace is valid and peaks at 1000 bytes", code == 0 and "(1000 bytes)" in out, out + err)

# --- CLI11 parse errors: one line, exit 2 -------------------------------------------------------
usage("unknown option, close to one", ["run", TRACE, "--budgett", "8GiB"],
      "run: unknown option '--budgett'; did you mean --budget?")
usage("unknown option given with =value", ["run", TRACE, "--budgett=8GiB"],
      "run: unknown option '--budgett'; did you mean --budget?")
usage("unknown option, a unique prefix", ["run", TRACE, "--out", "r.json"],
      "run: unknown option '--out'; did you mean --output?")
usage("unknown option, nothing close", ["run", TRACE, "--frobnicate"], "run: unknown option '--frobnicate'")
usage("unknown short option", ["run", TRACE, "-Z"], "run: unknown option '-Z'")
usage("a renamed option names its new name", ["run", TRACE, "--validate"],
      "run: unknown option '--validate': renamed --audit (the independent check of the run's event log)")
usage("an unknown option is reported before a missing argument", ["run", "--bogus"], "run: unknown option '--bogus'")
usage("unknown option before the command", ["--verison"], "unknown option '--verison'; did you mean --version?")
usage("unknown command, close to one", ["swep", "s.json"], "unknown command 'swep'; did you mean 'sweep'?")
usage("unknown command, transposed letters", ["valdiate", TRACE], "unknown command 'valdiate'; did you mean 'validate'?")
usage("unknown command, nothing close", ["frobnicate"], f"unknown command 'frobnicate' (commands: {COMMANDS})")
usage("no command", [], f"missing a command ({COMMANDS})")
usage("missing positional argument", ["run"], "run: missing argument TRACE")
usage("missing second positional argument", ["import", "dtr"], "import: missing argument INPUT")
usage("missing required option", ["generate"], "generate: missing option --output")
usage("option without its value", ["run", TRACE, "-b"], "--budget: expected a value")
usage("too many positionals", ["run", TRACE, "extra"], "run: unexpected argument 'extra'")
usage("-j 0 is out of range", ["sweep", "s.json", "-j", "0"], "--jobs: expected an integer from 1 to 4096, got '0'")
usage("-j 5000 is out of range", ["sweep", "s.json", "-j", "5000"], "--jobs: expected an integer from 1 to 4096, got '5000'")
usage("-j abc is not a number", ["sweep", "s.json", "-j", "abc"], "--jobs: expected an integer from 1 to 4096, got 'abc'")
usage("bench -r 0", ["bench", TRACE, "-r", "0"], "--repeat: expected an integer from 1 to 100, got '0'")
usage("an integer option given a word", ["plan", "p.csv", "--capacity", "abc"], "--capacity: expected an integer, got 'abc'")
usage("an integer option given a fraction", ["replay-gpu", "p.json", "--iterations", "1.5"],
      "--iterations: expected an integer, got '1.5'")
usage("an int option beyond int", ["import", "kineto", "k.json", "-o", path("k.jsonl"), "--device", "99999999999"],
      "--device: expected an integer from -2147483648 to 2147483647, got '99999999999'")
usage("a number option given a word", ["minbudget", TRACE, "--max-overhead", "x"], "--max-overhead: expected a number, got 'x'")
usage("a choice, close to one", ["run", TRACE, "--memory-map-colour", "rol"],
      "--memory-map-colour: expected role or cost, got 'rol'; did you mean 'role'?")
usage("a flag given a value", ["run", TRACE, "--json=abc"], "--json: a flag takes no value, got 'abc'")
usage("an argument after -- that nothing takes", ["run", TRACE, "--", "x"], "unexpected argument 'x'")
long_value = "q" * 100000
usage("a quoted option value is cut at 80 bytes", ["run", TRACE, "--memory-map-colour", long_value],
      f"--memory-map-colour: expected role or cost, got '{'q' * 80}...' (100000 bytes)")
usage("a quoted option name is cut and its control characters escaped", ["run", TRACE, "--a\nb" + "c" * 200],
      f"run: unknown option '--a\\x0ab{'c' * 75}...' (205 bytes)")

for args in (["--help"], ["run", "--help"], ["--version"]):
    code, out, err = run(*args)
    case(f"{' '.join(args)} exits 0 on stdout", code == 0 and out != "" and err == "", f"status {code}, stderr {err!r}")

# --- budgets: exit 1, one line naming --budget ----------------------------------------------------
config("a renamed config key names its new name", ["run", TRACE, "-b", "2000", "--set", "engine.plan_checks=true"],
       "engine.plan_checks: unknown parameter: renamed engine.residency_checks")
config("-b 0.5 is not one byte", ["run", TRACE, "-b", "0.5"],
       f"--budget: '0.5' has no unit; did you mean 50%? {UNITLESS})")
config("-b 12 has no unit", ["run", TRACE, "-b", "12"],
       f"--budget: '12' has no unit; did you mean 12GiB or 12%? {UNITLESS}; write 12B for 12 bytes)")
config("a budget list follows the same rule", ["run", TRACE, "-b", "50%,0.25"],
       f"--budget: '0.25' has no unit; did you mean 25%? {UNITLESS})")
config("bench -b follows the same rule", ["bench", TRACE, "-b", "0.5", "-r", "1"],
       f"--budget: '0.5' has no unit; did you mean 50%? {UNITLESS})")
config("a fraction of a byte", ["run", TRACE, "-b", "2048.5"], "--budget: '2048.5' is not a whole number of bytes")
config("a percentage below one byte names the peak", ["run", TRACE, "-b", "0.05%"],
       "--budget: 0.05% of the trace's peak live bytes (1000 B) is less than one byte; give a larger percentage or a size")
config("0% is refused", ["run", TRACE, "-b", "0%"],
       "--budget: a percentage of the trace's peak must be greater than 0% and at most 1000000%, got '0%'")
config("a long budget is quoted cut", ["run", TRACE, "-b", "9" * 3000 + "x"],
       f"--budget: '{'9' * 80}...' (3001 bytes) is not a size (e.g. 8GiB, 512MB, 1048576) or a percentage (e.g. 40%)")
for budget, status in (("12B", "oom"), ("1024", "completed"), ("0.1%", "oom"), ("100%", "completed")):
    code, out, err = run("run", TRACE, "-a", "fungible", "-b", budget, "--json")
    got = json.loads(out).get("status") if code == 0 else None
    case(f"-b {budget} runs ({status})", code == 0 and got == status, f"status {code}, stderr {err!r}, run {got}")

# --- numbers in --set and config files: exit 1, one line naming the key ---------------------------
config("--set a number beyond a double", ["run", TRACE, "--set", "link.d2h_gbps=1e999"],
       "link.d2h_gbps: expected a number within the range of a double, got \"1e999\"")
config("--set 2^64 - 1 for a count", ["run", TRACE, "--set", "limits.max_tensors=18446744073709551615"],
       "limits.max_tensors: expected an integer from -9223372036854775808 to 9223372036854775807, got "
       "18446744073709551615")
config("--set -1 for a size", ["run", TRACE, "--set", "pytorch.max_split_size=-1"],
       "pytorch.max_split_size: expected a non-negative size, got -1")
config("--set -1 for a seed", ["run", TRACE, "-p", "dtr", "-a", "fungible", "-b", "1KiB", "--set", "dtr.seed=-1"],
       "dtr.seed: must be >= 0, got -1")
config("--set a duration beyond int64 nanoseconds", ["run", TRACE, "--set", "link.d2h_latency=9223372036854775808"],
       "link.d2h_latency: expected a duration of at most 9223372036854775807 ns (about 292 years), got "
       "9223372036854775808")
config("--set a huge value is quoted cut", ["run", TRACE, "--set", "allocator=" + "z" * 100000],
       f"allocator: unknown allocator '{'z' * 80}...' (100000 bytes) (valid: {ALLOCATORS})")
config("--set a close allocator name", ["run", TRACE, "--set", "allocator=bestfti"],
       f"allocator: unknown allocator 'bestfti' (valid: {ALLOCATORS}); did you mean 'bestfit'?")
config("--set a close parameter name", ["run", TRACE, "-p", "dtr", "--set", "dtr.heuristc=lru"],
       "dtr.heuristc: unknown parameter (valid for dtr: heuristic, seed, compat, dealloc, inplace, thrash_limit); "
       "did you mean 'heuristic'?")
config("--set a parameter name close to none", ["run", TRACE, "-p", "dtr", "--set", "dtr.zzzzz=lru"],
       "dtr.zzzzz: unknown parameter (valid for dtr: heuristic, seed, compat, dealloc, inplace, thrash_limit)")
big_cfg = write("big.json", json.dumps({"allocator": "w" * (1 << 20)}))
config("a config file's huge value is quoted cut", ["run", TRACE, "-c", big_cfg],
       f"{big_cfg}: allocator: unknown allocator '{'w' * 80}...' (1048576 bytes) (valid: {ALLOCATORS})")
open_cfg = write("open.json", '{"allocator": "' + "w" * (1 << 20) + "\n")
config("a JSON reader's last-read token is cut", ["run", TRACE, "-c", open_cfg],
       f"{open_cfg}:1: invalid JSON: syntax error while parsing value - invalid string: control character U+000A (LF) "
       "must be escaped to \\u000A or \\n; last read: '\"" + "w" * 79 + "... (1048585 bytes)'")
big_key = write("bigkey.json", json.dumps({"k" * (1 << 20): 1}))
config("a config file's huge key is cut", ["run", TRACE, "-c", big_key],
       f"{big_key}: {'k' * 80}... (1048576 bytes): unknown key (valid: allocator, policy, budget, initial_state, link, engine, params, "
       "limits, description)")


# --- sweep configs: (name, "budgets" value, the message after "FILE") ----------------------------
SWEEPS = [
    ("a sweep's plain 12 is refused", "[12]",
     f": budgets[0]: '12' has no unit; did you mean \"12GiB\"? {UNITLESS}; write 12B for 12 bytes)"),
    ("a sweep's plain 0.5 is refused", '["1KiB", "0.5"]',
     f": budgets[1]: '0.5' has no unit; did you mean {{\"ratios\": [0.5]}}? {UNITLESS})"),
    ("a sweep's number beyond a double names the line", "[1e999]", ":2: invalid JSON: number overflow parsing '1e999'"),
    ("a sweep's huge ratio", '{"ratios": [1e300]}',
     ": budgets.ratios[0]: expected a ratio of the trace's peak greater than 0 and at most 1000 (e.g. 0.5), got 1e+300"),
    ("a sweep's ratio below one byte names the peak", '{"ratios": [0.0001]}',
     ": budgets: ratio 0.0001 of 'peak1000.jsonl' (peak live 1000 bytes) is a budget of 0 bytes"),
]
for i, (name, budgets, expected) in enumerate(SWEEPS):
    cfg = write(f"s{i}.json", '{"traces": ["peak1000.jsonl"], "allocators": ["bestfit"], "policies": ["keep"],\n'
                              f'"budgets": {budgets}}}\n')
    config(name, ["sweep", cfg, "-o", path(f"out{i}")], cfg + expected)
case("no sweep left an output directory", not any(os.path.exists(path(f"out{i}")) for i in range(len(SWEEPS))))

# A sweep directory read back by --resume: numbers a manifest or results.json cannot hold.
good = write("good.json", '{"traces": ["peak1000.jsonl"], "allocators": ["bestfit"], "policies": ["keep"], '
                          '"budgets": ["1KiB", "2KiB"]}')
code, out, err = run("sweep", good, "-o", path("done"), "-j", "1")
case("a small sweep runs", code == 0, err)
for name, file, old, new, expected in (
        ("--resume: a manifest count beyond a double", "sweep.json", '"runs": 2', '"runs": 1e999',
         "{line}: invalid JSON: number overflow parsing '1e999'"),
        ("--resume: a negative manifest count", "sweep.json", '"runs": 2', '"runs": -1',
         " not a sweep manifest (expected coopsim_version, config_hash, runs, searches, shard)"),
        ("--resume: a run index beyond a double", "results.json", '"run": 1', '"run": 1e999',
         "{line}: invalid JSON: number overflow parsing '1e999'")):
    d = path("resume-" + file + new[-3:])
    shutil.copytree(path("done"), d)
    target = os.path.join(d, file)
    with open(target, encoding="utf-8") as f:
        text = f.read()
    with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    line = text[:text.index(old)].count("\n") + 1  # whole documents name the line (json_document.hpp)
    config(name, ["sweep", good, "-o", d, "--resume"], f"{target}:{expected.format(line=line)}")

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
