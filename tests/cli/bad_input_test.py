#!/usr/bin/env python3
"""Bad-input catalogue of the command line for the importers, the input caps (issue 8 part 7) and
the memory cap (issue 15), reported as TAP. Each case checks the exact one-line error, exit status 1, and that no output
file (nor its .tmp) was left behind. Trace v1 errors are in tests/catalogue/, config and run
errors in cli_test.py, plan errors in tests/unit/plan_format_test.cpp and plan_cli_test.py.

Usage: bad_input_test.py PATH/TO/coopsim   (run from the project root)"""
import gzip
import os
import pickle
import subprocess
import sys
import tempfile

COOPSIM = sys.argv[1]
GOLDEN = "tests/data/golden/small_step.jsonl"
MLP = "tests/data/dtr/mlp-4-2000.0-2021-3-17-12-0-0-default.log"
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-bad-input-")


def path(name):
    return os.path.join(tmp, name)


def write(name, data):
    with open(path(name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path(name)


def bad(name, args, expected, outputs):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=120)
    err = p.stderr.strip()
    left = [o for o in outputs if os.path.exists(o) or os.path.exists(o + ".tmp")]
    ok = p.returncode == 1 and err == "coopsim: error: " + expected and not left
    results.append((name, ok, f"status {p.returncode}, stderr {err!r}, expected {expected!r}, left {left}"))


out = path("out.jsonl")
imp = lambda kind, src, *more: ["import", kind, src, "-o", out, *more]

# --- the wrong importer: the error names what the file looks like and the importer to use --------
SNAP = "traces/h200/resnet50_b115.snapshot.pickle.gz"
bad("kineto on a snapshot pickle names torch-snapshot", imp("kineto", SNAP),
    f"{SNAP}:1: malformed JSON at column 1: syntax error while parsing value - invalid literal; last read: '\\x80'; "
    f"{SNAP} looks like a pickle (a PyTorch memory snapshot?): try `coopsim import torch-snapshot`", [out])
bad("torch-snapshot on a coopsim trace says it needs no import", imp("torch-snapshot", "traces/default.jsonl.gz"),
    "traces/default.jsonl.gz: byte 0: unknown opcode 0x7b ('{'); refusing; traces/default.jsonl.gz looks like a "
    "coopsim trace already: `coopsim run` reads it as it is", [out])
k1 = write("kineto.json", '{"traceEvents": [], "schemaVersion": 1, "x": ')
bad("dtr on a (cut) Kineto trace names kineto", imp("dtr", k1),
    f"{k1}:1: malformed JSON: column 46: syntax error while parsing value - unexpected end of input; expected "
    f"'[', '{{', or a literal (last line has no newline: truncated file?); {k1} looks like a Kineto / Chrome trace: "
    "try `coopsim import kineto`", [out])

# --- DTR logs --------------------------------------------------------------------------------
d1 = write("frob.log", '{"INSTRUCTION":"FROB"}\n')
bad("dtr: unknown instruction", imp("dtr", d1),
    f"{d1}:1: unknown INSTRUCTION 'FROB' (expected ANNOTATE, CONSTANT, MEMORY, CALL, ALIAS, COPY, RELEASE, MUTATE "
    "or COPY_FROM)", [out])
# Line 1 is 38 bytes with its newline.
d2 = write("nostart.log", '{"INSTRUCTION":"CONSTANT","NAME":"p"}\n{"INSTRUCTION":"RELEASE","NAME":"q"}\n')
bad("dtr: no ANNOTATE START", imp("dtr", d2), f"{d2}:3: no ANNOTATE START record: the measured iteration never starts",
    [out])
bad("dtr: --limit max_input_bytes (byte 39 opens line 2)", imp("dtr", d2, "--limit", "max_input_bytes=38"),
    f"{d2}:2: more than 38 bytes of input (limits.max_input_bytes)", [out])
bad("dtr: --limit max_tensors", imp("dtr", MLP, "--limit", "max_tensors=1"),
    f"{MLP}: more than 1 tensors (limits.max_tensors)", [out])
bad("dtr: --limit max_events past the 32-bit ids", imp("dtr", MLP, "--limit", "max_events=4294967295"),
    "limits.max_events: must be at most 4294967294 (tensors and events have 32-bit ids), got 4294967295", [out])
d3 = write("dup.log", '{"INSTRUCTION":"CONSTANT","NAME":"p","NAME":"q"}\n')
bad("dtr: duplicate key", imp("dtr", d3), f"{d3}:1: duplicate key 'NAME'", [out])
bad("dtr: missing file", imp("dtr", path("absent.log")),
    f"{path('absent.log')}:0: cannot open DTR log: No such file or directory", [out])

# --- Kineto traces -----------------------------------------------------------------------------
# Line 1, '{"traceEvents": [', is 18 bytes with its newline.
k1 = write("syntax.json", '{"traceEvents": [\n  {"ph":"X","name":"a","ts":1,"dur":1},\n  {"ph":"X" "name":"b"}\n]}\n')
bad("kineto: malformed JSON", imp("kineto", k1),
    f"{k1}:3: malformed JSON at column 18: syntax error while parsing object - unexpected string literal; "
    "expected '}'", [out])
bad("kineto: --limit max_input_bytes (byte 19 opens line 2)", imp("kineto", k1, "--limit", "max_input_bytes=18"),
    f"{k1}:2: more than 18 bytes of input (limits.max_input_bytes)", [out])
k2 = write("array.json", "[1,2,3]\n")
bad("kineto: an event that is not an object", imp("kineto", k2),
    f"{k2}:1: traceEvents[0]: an event must be a JSON object (got 1)", [out])
k3 = write("bytes.json", '{"traceEvents": [{"ph":"i","name":"[memory]","ts":5,"pid":1,"tid":1,"args":{"Device Type":1,'
                         '"Device Id":0,"Addr":100,"Bytes":"x"}}]}\n')
bad("kineto: [memory] Bytes not an integer", imp("kineto", k3),
    f"{k3}:1: traceEvents[0]: field 'args.Bytes' must be an integer (got 'x')", [out])
bad("kineto: missing file", imp("kineto", path("absent.json")),
    f"{path('absent.json')}:0: cannot open trace file: No such file or directory", [out])

# --- PyTorch memory snapshots ------------------------------------------------------------------
s1 = write("list.pickle", pickle.dumps([1, 2], protocol=2))
bad("torch-snapshot: the top level is not a dict", imp("torch-snapshot", s1),
    f"{s1}: top level: expected the snapshot dict (got a list)", [out])
s2 = write("nodt.pickle", pickle.dumps({"segments": []}, protocol=4))
bad("torch-snapshot: no device_traces", imp("torch-snapshot", s2), f"{s2}: top level: missing field 'device_traces'",
    [out])
s3 = write("frame.pickle", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")
bad("torch-snapshot: a frame longer than the input", imp("torch-snapshot", s3),
    f"{s3}: byte 2: FRAME: frame of 5 bytes runs past the end of the input (3 left; truncated?)", [out])
s4 = write("gz.pickle.gz", gzip.compress(pickle.dumps({"segments": []}, protocol=4))[:-6])
bad("torch-snapshot: a truncated gzip stream", imp("torch-snapshot", s4),
    f"{s4}: gzip stream is truncated (unexpected end of compressed data)", [out])
bad("torch-snapshot: --limit max_input_bytes", imp("torch-snapshot", s1, "--limit", "max_input_bytes=10"),
    f"{s1}: more than 10 bytes of input (limits.max_input_bytes)", [out])

# --- import --limit itself ---------------------------------------------------------------------
bad("import: unknown --limit key", imp("dtr", MLP, "--limit", "max_tensor=5"),
    "limits.max_tensor: unknown parameter (valid for limits: max_input_bytes, max_tensors, max_events, "
    "max_op_fan_in, max_recompute_depth, max_search_steps, max_memory); did you mean 'max_tensors'?", [out])
bad("import: --limit without a value", imp("dtr", MLP, "--limit", "max_tensors"),
    "--limit max_tensors: expected key=value", [out])
bad("import: --limit of 0", imp("dtr", MLP, "--limit", "max_events=0"), "limits.max_events: must be at least 1, got 0",
    [out])

# --- run with the caps of the limits section (golden trace: tensors on lines 2-5, ops 6-9,
# --- events from line 10, a 203-byte header line) ----------------------------------------------
rep, csv = path("r.json"), path("r.csv")
run = lambda *more: ["run", GOLDEN, "-o", rep, "--csv", csv, *more]
bad("run: limits.max_tensors", run("--set", "limits.max_tensors=2"),
    f"{GOLDEN}:4: more than 2 tensors (limits.max_tensors)", [rep, csv])
bad("run: limits.max_events", run("--set", "limits.max_events=10"),
    f"{GOLDEN}:20: more than 10 events (limits.max_events)", [rep, csv])
bad("run: limits.max_op_fan_in", run("--set", "limits.max_op_fan_in=1"),
    f"{GOLDEN}:8: op 12: field 'inputs': more than 1 tensors (limits.max_op_fan_in)", [rep, csv])
bad("run: limits.max_input_bytes", run("--set", "limits.max_input_bytes=203"),
    f"{GOLDEN}:2: more than 203 bytes of input (limits.max_input_bytes)", [rep, csv])
# x0 -> f1 -> x1 -> f2 -> x2 -> f3 -> x3 (100 bytes each, x1 and x2 freed), z (200 bytes) evicts x3 at
# a 300-byte budget, and "use" (event 12) reads x3 again: three nested recomputations.
chain = ['{"format":"coopsim-trace","version":1}', '{"kind":"tensor","id":0,"bytes":100,"role":"input"}',
         '{"kind":"alloc","tensor":0}']
for i in range(1, 4):
    chain += [f'{{"kind":"tensor","id":{i},"bytes":100}}',
              f'{{"kind":"op","id":{i},"name":"f","duration":1,"inputs":[{i - 1}],"outputs":[{i}]}}',
              f'{{"kind":"alloc","tensor":{i}}}', f'{{"kind":"compute","op":{i}}}']
    if i >= 2:
        chain.append(f'{{"kind":"free","tensor":{i - 1}}}')
chain += ['{"kind":"tensor","id":4,"bytes":200}', '{"kind":"op","id":4,"name":"z","duration":1,"inputs":[0],"outputs":[4]}',
          '{"kind":"alloc","tensor":4}', '{"kind":"compute","op":4}', '{"kind":"free","tensor":4}',
          '{"kind":"op","id":5,"name":"use","duration":1,"inputs":[3]}', '{"kind":"compute","op":5}']
chain_trace = write("chain.jsonl", "\n".join(chain) + "\n")
bad("run: limits.max_recompute_depth",
    ["run", chain_trace, "-p", "dtr", "-a", "fungible", "-b", "300B", "-o", rep, "--csv", csv,
     "--set", "limits.max_recompute_depth=2"],
    f"{chain_trace}: event 12: rematerializing tensor 3 needs more than 2 nested recomputations "
    "(limits.max_recompute_depth)", [rep, csv])
bad("run: limits value not an integer", run("--set", "limits.max_tensors=many"),
    'limits.max_tensors: expected an integer, got "many"', [rep, csv])
cfg = write("limits.json", '{"limits": {"max_events": 0}}\n')
bad("run: limits in a config file name the file", run("-c", cfg),
    f"{cfg}: limits.max_events: must be at least 1, got 0", [rep, csv])

# --- the memory cap (limits.max_memory, docs/limits.md "Memory cap"): small inputs made here
# that describe huge data; the budgets are lowered so that each case takes about a second, and
# tests/unit/memory_cap_test.cpp works out where each refusal falls ------------------------
budget = lambda size: ["--limit", f"max_memory={size}"]

# A snapshot whose allocator_settings is a 100-level dict, each level's two keys referring to
# the level below: Python's pickler writes each level once and fetches it from the memo.
level = {}
for _ in range(100):
    level = {"a": level, "b": level}
shared = write("shared.pickle", pickle.dumps({"segments": [], "device_traces": [[]], "allocator_settings": level},
                                             protocol=4))
results.append(("the shared-dict snapshot is small", os.path.getsize(shared) < 3000, os.path.getsize(shared)))
bad("torch-snapshot: 2^100 values shared through the memo, at the default budget", imp("torch-snapshot", shared),
    f"{shared}: allocator_settings: more than 65536 values once its shared references are expanded (the trace header "
    "copies them); refusing", [out])

# 2^28 Nones between MARK and LIST, written in pieces: a 256 KB gzip file.
nones = path("nones.pickle.gz")
with gzip.open(nones, "wb", compresslevel=9) as f:
    f.write(b"\x80\x02(")
    piece = b"N" * (1 << 20)
    for _ in range(256):
        f.write(piece)
    f.write(b"l.")
results.append(("the Nones pickle is small", os.path.getsize(nones) < 300_000, os.path.getsize(nones)))
# The import streams the pickle (issue 35): its 256 MiB are not held, so the stack of Nones (64
# bytes each) alone fills the budget, at twice the offset of the reader that held its input.
bad("torch-snapshot: 2^28 Nones", imp("torch-snapshot", nones, *budget("512MiB")),
    f"{nones}: byte 8388611: NONE: more than 536870912 bytes of memory (limits.max_memory)", [out])

# 3*10^8 marks: one gzip member of 10^6 marks, 300 times (28 MB each decompressed).
marks = path("marks.jsonl.gz")
with open(marks, "wb") as f:
    f.write(gzip.compress(b'{"format":"coopsim-trace","version":1}\n'))
    member = gzip.compress(b'{"kind":"mark","label":"x"}\n' * 1_000_000)
    for _ in range(300):
        f.write(member)
bad("run: 3*10^8 mark events", ["run", marks, "--set", "limits.max_memory=64MiB", "-o", rep, "--csv", csv],
    f"{marks}:1166668: more than 67108864 bytes of memory (limits.max_memory)", [rep, csv])
bad("run: the count cap when it is lower", ["run", marks, "--set", "limits.max_memory=64MiB", "--set",
                                            "limits.max_events=1000", "-o", rep],
    f"{marks}:1002: more than 1000 events (limits.max_events)", [rep])

# DTR copy-on-write: the k-th MUTATE of p names a tensor p followed by k '$'.
log = ('{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}\n{"INSTRUCTION":"CONSTANT","NAME":"p"}\n'
       '{"INSTRUCTION":"MEMORY","MEMORY":"64","NAME":"p"}\n' +
       '{"ARGS":["p"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"add_","TIME":"1"}\n' * 20000)
cow = write("cow.log", log)
bad("dtr: quadratic copy-on-write names", imp("dtr", cow, "--copy-on-write", *budget("64MiB")),
    f"{cow}:10926: more than 67108864 bytes of memory (limits.max_memory)", [out])

# Kineto: one event carrying a 10^6-element array.
kineto = write("k.json", '{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1,"args":{"x":[0' + ",0" * 1_000_000 +
               ']}}]}\n')
bad("kineto: one event's args", imp("kineto", kineto, *budget("16MiB")),
    f"{kineto}:1: traceEvents[0]: more than 16777216 bytes of memory (limits.max_memory)", [out])

# The key's own errors.
bad("import: max_memory above 100%", imp("dtr", cow, *budget("150%")),
    "limits.max_memory: expected a size such as 8GiB or a share of the machine's memory such as 25%, got '150%'",
    [out])
bad("run: max_memory of 0", ["run", marks, "--set", "limits.max_memory=0", "-o", rep],
    "limits.max_memory: must be greater than 0", [rep])

print(f"1..{len(results)}")
for i, (name, ok, detail) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {name}")
    if not ok:
        print(f"# {detail}")
sys.exit(0 if all(ok for _, ok, _ in results) else 1)
