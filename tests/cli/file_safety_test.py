#!/usr/bin/env python3
"""How coopsim writes files (issue 15, classes 3 and 6), reported as TAP: FIFOs are written
directly, symbolic links are written through (a link to nothing is refused), a planted PATH.tmp
is never followed, an output that is an input or two outputs that are one file are refused, a
failed write to standard output is an error, SIGINT/SIGTERM leave no temporary file, and a
second sweep into a locked directory is refused. Each refusal checks the exit status, the exact
one-line message and that the directory holds exactly what it held before (contents included).
Every input is generated here; no sleeps: the signal cases wait on a FIFO, not on a clock.

Usage: file_safety_test.py PATH/TO/coopsim   (run from the project root)"""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import tap

COOPSIM = sys.argv[1]
results = []
tmp = tempfile.mkdtemp(prefix="coopsim-file-safety-")


def path(*names):
    return os.path.join(tmp, *names)


def run(*args, **kw):
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300, **kw)
    return p.returncode, p.stdout, p.stderr


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def read(p):
    with open(p, "rb") as f:
        return f.read()


def write(p, data):
    with open(p, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return p


def snapshot(d):
    """Every entry of directory d: name -> ('link', target) | ('fifo',) | ('dir',) | ('file', bytes)."""
    out = {}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.islink(p):
            out[name] = ("link", os.readlink(p))
        elif os.path.isdir(p):
            out[name] = ("dir",)
        elif not os.path.isfile(p):
            out[name] = ("fifo",)
        else:
            out[name] = ("file", read(p))
    return out


def refused(name, d, args, expected, status=1):
    """Runs args; expects status, the one line 'coopsim: error: expected' and d exactly as before."""
    before = snapshot(d)
    code, _, err = run(*args)
    after = snapshot(d)
    case(name, code == status and err == f"coopsim: error: {expected}\n" and after == before,
         f"status {code}, stderr {err!r}, expected {expected!r}, changed {sorted(set(after.items()) ^ set(before.items()))}")


def through_fifo(fifo, *args):
    """Runs coopsim with a reader on fifo; returns (status, stderr, bytes read)."""
    got = {"data": b""}

    def reader():
        with open(fifo, "rb") as f:
            got["data"] = f.read()

    t = threading.Thread(target=reader)
    t.start()
    code, _, err = run(*args)
    if t.is_alive():  # coopsim never opened the FIFO: release the reader with an empty write end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    t.join()
    return code, err, got["data"]


# --- inputs -----------------------------------------------------------------------------------
os.makedirs(path("in"))
TRACE = path("in", "t.jsonl")
code, _, err = run("generate", "-o", TRACE, "--set", "layers=2", "--set", "model=mlp")
case("generate writes the test trace", code == 0 and os.path.isfile(TRACE), err)
RUN = ["run", TRACE, "-a", "bestfit", "-b", "1GiB", "-q"]

# --- FIFOs and character devices are written directly ----------------------------------------
d = path("fifo")
os.makedirs(d)
fifo = os.path.join(d, "report.pipe")
os.mkfifo(fifo)
code, err, data = through_fifo(fifo, *RUN, "-o", fifo)
case("run -o FIFO: the report goes down the pipe; the FIFO stays a FIFO, nothing else appears",
     code == 0 and data.startswith(b"{") and json.loads(data)["status"] == "completed"
     and snapshot(d) == {"report.pipe": ("fifo",)}, f"{code} {err} {snapshot(d)}")
code, err, data = through_fifo(fifo, "generate", "-o", fifo, "--set", "layers=2", "--set", "model=mlp")
case("generate -o FIFO: the trace goes down the pipe (no temporary file, no rename)",
     code == 0 and data == read(TRACE) and snapshot(d) == {"report.pipe": ("fifo",)}, f"{code} {err} {snapshot(d)}")

r, w = os.pipe()  # -o /dev/fd/N: a link through /proc to an anonymous pipe, written directly
proc = subprocess.Popen([COOPSIM, *RUN, "-o", f"/dev/fd/{w}"], pass_fds=(w,), stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True)
os.close(w)
with os.fdopen(r, "rb") as f:
    data = f.read()
err = proc.communicate(timeout=300)[1]
case("run -o /dev/fd/N: the report goes into the inherited pipe",
     proc.returncode == 0 and json.loads(data)["status"] == "completed" and err == "", f"{proc.returncode} {err}")

d = path("stdout")
os.makedirs(d)
with open(os.path.join(d, "out.txt"), "w") as f:  # -o /dev/stdout with stdout a file: written, not replaced
    inode = os.fstat(f.fileno()).st_ino
    p = subprocess.run([COOPSIM, *RUN, "-o", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE, text=True, timeout=300)
case("run -o /dev/stdout > FILE: the report lands in FILE, the same inode, nothing else in its directory",
     p.returncode == 0 and json.loads(read(os.path.join(d, "out.txt")))["status"] == "completed"
     and os.stat(os.path.join(d, "out.txt")).st_ino == inode and os.listdir(d) == ["out.txt"], p.stderr)

# --- symbolic links -----------------------------------------------------------------------------
d = path("links")
os.makedirs(os.path.join(d, "real"))
write(os.path.join(d, "real", "r.csv"), "old\n")
os.symlink("real/r.csv", os.path.join(d, "link.csv"))
code, _, err = run(*RUN, "--csv", os.path.join(d, "link.csv"))
case("a symbolic link is written through: its file gets the CSV, the link stays a link",
     code == 0 and read(os.path.join(d, "real", "r.csv")).startswith(b"trace,model,")
     and os.readlink(os.path.join(d, "link.csv")) == "real/r.csv" and sorted(os.listdir(d)) == ["link.csv", "real"]
     and os.listdir(os.path.join(d, "real")) == ["r.csv"], err)
dangling = os.path.join(d, "dangling.json")
os.symlink("nowhere/x.json", dangling)
refused("a symbolic link to nothing is refused, its destination not created", d, [*RUN, "-o", dangling],
        f"{dangling}: cannot write output file: it is a symbolic link to a missing file")
victim = write(os.path.join(d, "victim"), "precious\n")
os.symlink("victim", os.path.join(d, "out.json.tmp"))
code, _, err = run(*RUN, "-o", os.path.join(d, "out.json"))
case("a link planted at OUT.tmp is not followed: the victim keeps its bytes",
     code == 0 and read(victim) == b"precious\n" and os.path.islink(os.path.join(d, "out.json.tmp"))
     and json.loads(read(os.path.join(d, "out.json")))["status"] == "completed", err)
refused("a directory as the output is refused", d, [*RUN, "-o", os.path.join(d, "real")],
        f"{os.path.join(d, 'real')}: cannot write output file: it is a directory")

# --- an output that is an input; two outputs that are one file -----------------------------------
d = path("in")
refused("run -o TRACE is refused, the trace untouched", d, [*RUN, "-o", TRACE],
        f"--output {TRACE} is the same file as the trace {TRACE}: refusing to overwrite an input")
hard = os.path.join(d, "hard.jsonl")
os.link(TRACE, hard)
refused("run --csv HARDLINK-TO-TRACE is refused", d, [*RUN, "--csv", hard],
        f"--csv {hard} is the same file as the trace {TRACE}: refusing to overwrite an input")
soft = os.path.join(d, "soft.jsonl")
os.symlink("t.jsonl", soft)
refused("run --timeline SYMLINK-TO-TRACE is refused", d, [*RUN, "--timeline", soft],
        f"--timeline {soft} is the same file as the trace {TRACE}: refusing to overwrite an input")
config = write(os.path.join(d, "c.json"), '{"allocator": "bestfit"}\n')
refused("run --memory-map CONFIG is refused", d, ["run", TRACE, "-c", config, "-b", "1GiB", "--memory-map", config],
        f"--memory-map {config} is the same file as the config {config}: refusing to overwrite an input")
problem = write(os.path.join(d, "p.csv"), "id,lower,upper,size\n0,0,10,4\n1,5,15,4\n")
refused("plan PROBLEM -o PROBLEM is refused", d, ["plan", problem, "-o", problem],
        f"--output {problem} is the same file as the problem {problem}: refusing to overwrite an input")
refused("import KIND INPUT -o INPUT is refused before reading it", d, ["import", "dtr", TRACE, "-o", TRACE],
        f"--output {TRACE} is the same file as the input {TRACE}: refusing to overwrite an input")
a = os.path.join(d, "a.json")
refused("run -o A --csv A is refused, nothing written", d, [*RUN, "-o", a, "--csv", a],
        f"--csv {a} is the same file as --output {a}: give each output its own file")
b = os.path.join(d, "sub", "..", "b.svg")
os.makedirs(os.path.join(d, "sub"))
refused("run --timeline B --memory-map SUB/../B is refused (normalized paths)", d,
        [*RUN, "--timeline", os.path.join(d, "b.svg"), "--memory-map", b],
        f"--memory-map {b} is the same file as --timeline {os.path.join(d, 'b.svg')}: give each output its own file")
os.rmdir(os.path.join(d, "sub"))
code, _, err = run(*RUN, "-o", "/dev/null", "--csv", "/dev/null")
case("/dev/null may take several outputs (a character device: nothing is replaced)",
     code == 0 and err == "" and os.path.exists("/dev/null") and not os.path.isfile("/dev/null"), err)

# --- standard output ------------------------------------------------------------------------------
if os.path.exists("/dev/full"):
    for args in ([*RUN[:-1], "--json"], ["list"], ["validate", TRACE]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([COOPSIM, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
        case(f"{args[0]} > /dev/full exits 1 with one line", p.returncode == 1
             and p.stderr == "coopsim: error: cannot write to standard output: No space left on device\n", p.stderr)

# --- SIGINT / SIGTERM while outputs are open ------------------------------------------------------
# The trace is a FIFO: coopsim opens its outputs (temporary files) before it reads the trace, so
# once our open() of the FIFO returns, coopsim is blocked reading it with both temporaries
# present. The signal then arrives at a known point, with no timing assumption.
for sig in (signal.SIGINT, signal.SIGTERM):
    d = path(f"signal-{sig.name}")
    os.makedirs(d)
    pipe = os.path.join(d, "trace.pipe")
    os.mkfifo(pipe)
    old = write(os.path.join(d, "out.json"), "old report\n")
    # The default action in the child even where the test runner ignores SIGINT.
    proc = subprocess.Popen([COOPSIM, "run", pipe, "-o", old, "--csv", os.path.join(d, "out.csv")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    with open(pipe, "w"):
        during = sorted(os.listdir(d))
        proc.send_signal(sig)
    # Had the signal been lost, the closed FIFO would end the run with an error, not hang it.
    proc.wait(timeout=120)
    err = proc.stderr.read()
    proc.stderr.close()
    temps = [n for n in during if n.endswith(".tmp")]
    case(f"{sig.name} while outputs are open: no temporary file left, the old report untouched, killed by {sig.name}",
         proc.returncode == -sig and len(temps) == 2 and snapshot(d) == {"out.json": ("file", b"old report\n"),
                                                                          "trace.pipe": ("fifo",)},
         f"status {proc.returncode}, during {during}, after {snapshot(d)}, stderr {err!r}")

# --- sweeps: one writer per directory -------------------------------------------------------------
sweep_cfg = write(path("in", "sweep.json"), json.dumps({"traces": ["t.jsonl"], "allocators": ["bestfit"],
                                                         "policies": ["keep"], "budgets": ["1GiB"]}))
done = path("done")
code, out, err = run("sweep", sweep_cfg, "-j", "1", "-o", done)
case("a sweep into a fresh directory completes", code == 0 and out.startswith("sweep: 1 runs"), out + err)
d = path("locked")
os.makedirs(d)
lock_path = os.path.join(d, ".coopsim.lock")
with open(lock_path, "w") as held:
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    held.write(f"{os.getpid()}\n")
    held.flush()
    refused("a second sweep into a locked directory gets one line naming the holder", d,
            ["sweep", sweep_cfg, "-j", "1", "-o", d],
            f"{d}: another sweep is writing here (lock {lock_path} held by pid {os.getpid()})")
    refused("so does a merge into it", d, ["merge", done, "-o", d],
            f"{d}: another sweep is writing here (lock {lock_path} held by pid {os.getpid()})")
code, out, err = run("sweep", sweep_cfg, "-j", "1", "-o", d)
case("a lock file whose holder is gone (a crashed sweep) does not block the next one",
     code == 0 and out.startswith("sweep: 1 runs") and os.path.isfile(os.path.join(d, "results.csv")), out + err)
d = path("sweep-into-config")
os.makedirs(d)
inside = write(os.path.join(d, "sweep.json"), read(sweep_cfg))
shutil.copy(TRACE, os.path.join(d, "t.jsonl"))
refused("a sweep whose config is DIR/sweep.json is refused (it would be overwritten)", d,
        ["sweep", inside, "-o", d],
        f"the sweep output {inside} is the same file as the sweep config {inside}: refusing to overwrite an input")

tap.finish(results, tmp)
