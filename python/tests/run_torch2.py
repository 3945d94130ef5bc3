#!/usr/bin/env python3
"""Runs the coopsim package's pytest suite (run_tap.py) with the Python of $COOPSIM_TORCH2_PYTHON: PyPI's
torch 2.x in the virtual environment scripts/deps.sh makes (coopsim_torch2_venv). Without it the
suite is one TAP skip, or one failure when CI=true (CI must test the recorder on torch 2.x); it
skips in the sanitizer pass (COOPSIM_SANITIZE=1), which checks the C++.

Usage: run_torch2.py [PATH/TO/coopsim]   (Meson's test 'python-torch2')"""
import os
import sys

python = os.environ.get("COOPSIM_TORCH2_PYTHON", "")
if os.environ.get("COOPSIM_SANITIZE") == "1":
    # the sanitizer pass (scripts/test.sh --sanitize) checks C++; this suite is Python and ran in the normal pass
    print("1..0 # SKIP the sanitizer pass: python-torch2 runs in the normal pass")
    sys.exit(0)
if not python or not os.access(python, os.X_OK):
    if os.environ.get("CI") == "true":
        print("1..1\nnot ok 1 - no torch 2.x environment: $COOPSIM_TORCH2_PYTHON is not set "
              "(scripts/test.sh runs scripts/deps.sh's coopsim_torch2_venv)")
        sys.exit(1)
    print("1..0 # SKIP no torch 2.x environment ($COOPSIM_TORCH2_PYTHON; scripts/deps.sh coopsim_torch2_venv)")
    sys.exit(0)
here = os.path.dirname(os.path.abspath(__file__))
os.execv(python, [python, os.path.join(here, "run_tap.py")] + sys.argv[1:])
