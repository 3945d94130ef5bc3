#!/usr/bin/env python3
"""Figures from a `coopsim sweep` output directory (docs/sweep.md, docs/user-guide.md).

    python3 scripts/plot.py SWEEP_DIR [-o OUT_DIR] [--overhead compute|recompute]

A thin command line over coopsim.plot (python/coopsim/plot.py, docs/python.md), which documents the
figures. Needs python3 and matplotlib (Debian: python3-matplotlib); uses the Agg backend, no display.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from coopsim.plot import main  # noqa: E402

if __name__ == "__main__":
    main()
