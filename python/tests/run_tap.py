#!/usr/bin/env python3
"""Runs the coopsim package's pytest suite (python/tests) and prints TAP: one line per case.

Usage: run_tap.py [PATH/TO/coopsim]   (from anywhere; Meson's test 'python', suite 'python')
The binary becomes $COOPSIM_BIN for the tests. Without pytest the whole suite is one TAP skip; cases
that need torch, pandas or matplotlib skip when those are missing. Exit status 0 unless a case failed."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)  # python/


def main():
    if len(sys.argv) > 1:
        os.environ["COOPSIM_BIN"] = os.path.abspath(sys.argv[1])
    os.environ["PYTHONPATH"] = PACKAGE + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    sys.path.insert(0, PACKAGE)
    try:
        import pytest
    except ImportError:
        print(f"1..0 # SKIP pytest is not importable by {sys.executable} (Debian: apt-get install python3-pytest)")
        sys.exit(0)

    sys.stdout = sys.stderr
    status = pytest.main(["-q", "-p", "no:cacheprovider", "--tap", "--rootdir", PACKAGE, HERE])
    sys.exit(0 if status in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED) else 1)


# Guarded: worker processes started with 'spawn' (dask's LocalCluster in test_sweeps) import the
# main module again, and must not run the suite once more each.
if __name__ == "__main__":
    main()
