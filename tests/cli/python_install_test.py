#!/usr/bin/env python3
"""`pip install ./python` as a user runs it, reported as TAP: pip builds the package with its native
module (python/setup.py: the project's Meson build, here the test build's directory through
$COOPSIM_BUILD_DIR so the library is not built twice) into a scratch virtual environment; from
outside the source tree, that environment's Python then imports coopsim, finds coopsim._native in
its site-packages, reports meson.build's version, runs a simulation in-process whose report is
byte-identical to the executable's, and writes a recorded trace through the library's writer.

Skips (exit 77) where Debian's python3-venv, -setuptools or -wheel are missing, except under CI
(CI=true), where that fails. Usage: python_install_test.py BUILD_DIR COOPSIM (from the project root)"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import finish  # noqa: E402

BUILD, COOPSIM = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ROOT = os.getcwd()
TRACE = os.path.join(ROOT, "tests", "data", "golden", "small_step.jsonl")
results = []


def case(name, ok, detail=""):
    results.append((name, bool(ok), detail))


probe = subprocess.run([sys.executable, "-c", "import ensurepip, setuptools, wheel"], capture_output=True, text=True)
if probe.returncode != 0:
    why = "no python3-venv / python3-setuptools / python3-wheel: " + probe.stderr.strip().splitlines()[-1]
    if os.environ.get("CI") == "true":
        case("the packaging tools are there", False, why)
        finish(results)
    print(f"1..0 # SKIP {why}")
    sys.exit(77)

scratch = tempfile.mkdtemp(prefix="coopsim-pip-")
venv = os.path.join(scratch, "venv")
python = os.path.join(venv, "bin", "python")
p = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
case("a scratch virtual environment", p.returncode == 0, p.stderr)
env = dict(os.environ, COOPSIM_BUILD_DIR=BUILD, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
env.pop("COOPSIM_NATIVE", None)
env.pop("COOPSIM_BIN", None)
env.pop("PYTHONPATH", None)
p = subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", os.path.join(ROOT, "python")],
                   capture_output=True, text=True, env=env, cwd=scratch, timeout=900)
case("pip install ./python builds and installs the package", p.returncode == 0, (p.stdout + p.stderr)[-2000:])

with open(os.path.join(ROOT, "meson.build"), encoding="utf-8") as f:
    meson_version = re.search(r"^\s*version: '([^']+)'", f.read(), re.M).group(1)
probe_script = r"""
import importlib.metadata, json, os, sys
import coopsim, coopsim.sim as sim
from coopsim.recording.trace import TraceBuilder
native = sim.native_module()
report = sim.call(["run", sys.argv[1], "-a", "bestfit", "-p", "dtr", "--budget", "70%", "--json"])
b = TraceBuilder()
t = b.storage_tensor("x", 4096, "x")
b.alloc(t)
b.compute(b.op("relu", 0, [t], [t], [], [t], False, ()))
b.free(t)
b.write(sys.argv[2], {"format": "coopsim-trace", "version": 1, "model": "pip-probe", "time_unit": "ns", "iterations": 1})
print(json.dumps({"package": coopsim.__file__, "native": native.__file__ if native else None,
                  "version": coopsim.__version__, "metadata": importlib.metadata.version("coopsim"),
                  "report": report}))
"""
written = os.path.join(scratch, "probe.jsonl.gz")
p = subprocess.run([python, "-c", probe_script, TRACE, written], capture_output=True, text=True, env=env, cwd=scratch,
                   timeout=300)
case("the installed package imports and runs", p.returncode == 0, p.stderr[-2000:])
got = json.loads(p.stdout) if p.returncode == 0 else {}
site = os.path.join(venv, "lib")
case("coopsim comes from the environment's site-packages", str(got.get("package", "")).startswith(site), str(got))
case("coopsim._native is installed beside it", str(got.get("native") or "").startswith(site), str(got))
case("one version: package, metadata and meson.build", got.get("version") == got.get("metadata") == meson_version,
     f"{got.get('version')} {got.get('metadata')} {meson_version}")
exe = subprocess.run([COOPSIM, "run", TRACE, "-a", "bestfit", "-p", "dtr", "--budget", "70%", "--json"],
                     capture_output=True, text=True, timeout=300)
case("its in-process report equals the executable's byte for byte", exe.returncode == 0 and got.get("report") == exe.stdout,
     exe.stderr)
v = subprocess.run([COOPSIM, "validate", written], capture_output=True, text=True, timeout=60)
case("a trace it records is written by the library and reads back", v.returncode == 0 and "pip-probe" in v.stdout,
     v.stdout + v.stderr)
finish(results, scratch)
