#!/usr/bin/env python3
"""The public API as a program outside the tree sees it (include/coopsim/coopsim.hpp), reported as
TAP: `meson install --destdir` puts exactly one header and the libraries with a pkg-config file
`coopsim` into a scratch prefix; tests/facade/consumer.cpp, compiled against that prefix only,
runs a simulation whose report is byte-identical to `coopsim run --json`, and gets coopsim's
one-line errors as coopsim::api::Error.

Usage: facade_test.py BUILD_DIR COOPSIM   (run from the project root)"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

BUILD, COOPSIM = sys.argv[1], sys.argv[2]
TRACE = "tests/data/golden/small_step.jsonl"
scratch = tempfile.mkdtemp(prefix="coopsim-facade-")
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


dest = os.path.join(scratch, "dest")
p = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild", "--quiet"],
                   capture_output=True, text=True, timeout=600)
case("meson install --destdir succeeds", p.returncode == 0, p.stdout + p.stderr)
headers = sorted(os.path.relpath(h, dest) for h in glob.glob(os.path.join(dest, "**", "*.h*"), recursive=True))
case("the only installed header is coopsim/coopsim.hpp",
     len(headers) == 1 and headers[0].endswith("include/coopsim/coopsim.hpp"), str(headers))
pcs = glob.glob(os.path.join(dest, "**", "coopsim.pc"), recursive=True)
case("a pkg-config file coopsim.pc is installed", len(pcs) == 1, str(pcs))

consumer = os.path.join(scratch, "consumer")
built = False
if len(headers) == 1 and len(pcs) == 1:
    include = os.path.dirname(os.path.dirname(os.path.join(dest, headers[0])))
    prefix = include[:-len("/include")]
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]))
    flags = subprocess.run(["pkg-config", "--static", "--define-variable=prefix=" + prefix, "--cflags", "--libs",
                            "coopsim"], capture_output=True, text=True, env=env)
    # Only the scratch prefix: the source tree's include/ is not on the path. The sanitizer
    # pass's libraries need the sanitizer runtimes.
    sanitize = ["-fsanitize=address,undefined"] if os.environ.get("COOPSIM_SANITIZE") == "1" else []
    p = subprocess.run(["c++", "-std=c++20", *sanitize, "tests/facade/consumer.cpp", "-o", consumer,
                        *flags.stdout.split()],
                       capture_output=True, text=True, timeout=600)
    built = flags.returncode == 0 and p.returncode == 0
    case("a program using only <coopsim/coopsim.hpp> and pkg-config compiles and links", built,
         flags.stderr + p.stderr[-2000:])


def consumer_run(*args):
    q = subprocess.run([consumer, *args], capture_output=True, text=True, timeout=300)
    return q.returncode, q.stdout, q.stderr


def cli(*args):
    q = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=300)
    return q.returncode, q.stdout, q.stderr


if built:
    code, out, err = consumer_run(TRACE, '{"allocator": "bestfit"}', "60%", "policy=dtr")
    code2, out2, _ = cli("run", TRACE, "-a", "bestfit", "-b", "60%", "-s", "policy=dtr", "--json")
    case("its report is byte-identical to coopsim run --json", code == 0 and code2 == 0 and out == out2,
         err + out[:300] + " vs " + out2[:300])
    case("it reads the version and the trace's figures", "version " in err and " events, peak live " in err, err)
    code, out, _ = consumer_run(TRACE, '{"allocator": "tlsf"}', "")
    _, _, cerr = cli("run", TRACE, "-a", "tlsf")
    case("a bad config is an api::Error with coopsim's one-line message",
         code == 1 and out.strip() == "error: " + cerr.strip().removeprefix("coopsim: error: "), out + cerr)
    code, out, _ = consumer_run(os.path.join(scratch, "missing.jsonl"), "{}", "")
    case("a missing trace is an api::Error naming the file", code == 1 and "missing.jsonl" in out, out)
    code, out, _ = consumer_run(TRACE, "[1,", "")
    case("invalid config JSON is an api::Error naming config:line", code == 1 and out.startswith("error: config:1"), out)

finish(results, scratch)
