#!/usr/bin/env python3
"""Writes into a recorded trace the blocks its ops allocated inside themselves, from the memory
snapshot recorded in the same run (python/coopsim/recording/in_op_blocks.py). The recorder does this
itself when given --memory-snapshot; this script applies it to recordings made before it did.

    scripts/merge_in_op_blocks.py TRACE SNAPSHOT -o OUT
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

from coopsim.recording import in_op_blocks  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    try:
        summary = in_op_blocks.merge_files(args.trace, args.snapshot, args.output)
    except (OSError, ValueError, KeyError, EOFError) as e:
        print(f"merge_in_op_blocks: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.output}: {summary['blocks']} in-op blocks ({summary['freed_inside']} freed inside their op, "
          f"largest {summary['largest_bytes']} bytes), {summary['replaced_rule_blocks']} rule blocks replaced, "
          f"{summary['unmatched_trace_allocations']} trace allocations unmatched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
