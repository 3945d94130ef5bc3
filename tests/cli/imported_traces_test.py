#!/usr/bin/env python3
"""Regression suite on real third-party data (issue 14 item 3): every file of ../shared/traces
that an importer reads is imported, then run under every policy x every allocator at 60 % and
100 % of its peak, with the independent auditor on (--audit). TAP, one line per run.

A run passes when coopsim either gives a result (exit 0; the report's status is one of
completed / oom / thrash, or infeasible for a snapshot whose recorded state exceeds the budget,
and the auditor found nothing) or refuses with exactly one line
`coopsim: error: ...` and exit 1. A signal, an internal error (exit 70), an auditor violation
(exit 5) or a multi-line error fails. The refusals are also pinned to their reason:
  * allocators other than pytorch cannot start from a snapshot's recorded state;
  * policies other than keep refuse a trace with no dataflow (no op reads a tensor), naming it;
    the same runs are then forced (engine.allow_no_dataflow=true) and must not crash either;
  * a trace with no tensors (peak 0) cannot take a percentage budget.
Snapshots run twice: from their recorded state and from an empty allocator (--initial-state
empty), where every allocator takes them.
Skips (TAP plan 1..0) when ../shared/traces is absent. The sanitizer pass (COOPSIM_SANITIZE=1) runs a
fixed quarter of the runs.

Usage: imported_traces_test.py PATH/TO/coopsim   (run from the project root)"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

from et_fixtures import kineto_from_et

COOPSIM = sys.argv[1]
SHARED = os.path.join("..", "shared", "traces")
BUDGETS = ["60%", "100%"]
SANITIZED = os.environ.get("COOPSIM_SANITIZE") == "1"


def run(args):
    env = dict(os.environ, COOPSIM_AUDIT="1")
    p = subprocess.run([COOPSIM, *args], capture_output=True, text=True, timeout=600, env=env)
    return p.returncode, p.stdout, p.stderr


def list_names(kind):
    code, out, _ = run(["list", "--json"])
    if code != 0:
        raise SystemExit(f"coopsim list --json failed ({code})")
    return [e["name"] for e in json.loads(out)[kind]]


def one_line_error(code, err):
    lines = err.strip().splitlines()
    return code == 1 and len(lines) == 1 and lines[0].startswith("coopsim: error: ")


def parse_validate(text):
    """The counts `coopsim validate` prints that decide what a run may answer."""
    m = {
        "op_inputs": re.search(r"dataflow: (\d+) op inputs", text),
        "accesses": re.search(r"accesses (\d+)", text),
        "peak_live_bytes": re.search(r"peak live .* \((\d+) bytes\)", text),
    }
    missing = [k for k, v in m.items() if v is None]
    if missing:
        raise SystemExit(f"coopsim validate output lacks {missing}: {text!r}")
    return {k: int(v.group(1)) for k, v in m.items()}


def sources(tmp):
    """(label, importer arguments) for every importable file of ../shared/traces."""
    snaps = os.path.join(SHARED, "pytorch_snapshots")
    out = [(f"snapshot {f}", ["torch-snapshot", os.path.join(snaps, f)])
           for f in sorted(os.listdir(snaps)) if f.endswith(".pickle.gz")]
    kineto = os.path.join(SHARED, "kineto")
    out += [(f"kineto {f}", ["kineto", os.path.join(kineto, f)])
            for f in sorted(os.listdir(kineto))]  # the memory-timeline export too: refused in one line
    chakra = os.path.join(SHARED, "chakra_et")
    for f in sorted(os.listdir(chakra)):
        if not f.endswith("_kineto.json.gz"):
            continue
        out.append((f"kineto {f}", ["kineto", os.path.join(chakra, f)]))
        et = f.replace("_kineto.json.gz", "_et.json.gz")
        if os.path.exists(os.path.join(chakra, et)):
            # Linked with its execution trace for dataflow (the resnet pair is not one run: refused).
            out.append((f"kineto {f} --et {et}", ["kineto", os.path.join(chakra, f), "--et", os.path.join(chakra, et)]))
    resnet_et = os.path.join(chakra, "resnet_et.json.gz")
    if os.path.exists(resnet_et):
        made = kineto_from_et(resnet_et, os.path.join(tmp, "resnet_et_own_kineto.json"), 1)
        out.append(("resnet_et.json.gz with a Kineto trace made from its nodes", ["kineto", made, "--et", resnet_et]))
    return out


def check_run(label, trace, policy, allocator, budget, snapshot, forced, empty):
    """Returns (name, ok, detail) for one run."""
    args = ["run", trace, "-p", policy, "-a", allocator, "-b", budget, "--json", "--audit"]
    if forced:
        args += ["--set", "engine.allow_no_dataflow=true"]
    if empty:
        args += ["--initial-state", "empty"]
    name = (f"{label}: {policy} / {allocator} / {budget}" + (" (forced without dataflow)" if forced else "") +
            (" from an empty allocator" if empty else ""))
    code, out, err = run(args)
    if code == 0:
        try:
            report = json.loads(out)
            status = report["status"]
        except (ValueError, KeyError, TypeError) as e:
            return name, False, f"exit 0 but no report: {e}"
        if status == "infeasible":
            # Only a recorded snapshot state larger than the budget makes a run infeasible.
            ok = snapshot and not empty and report["infeasible"]["recorded_reserved_bytes"] > report["budget_bytes"]
            return name, ok, f"status {status}"
        return name, status in ("completed", "oom", "thrash"), f"status {status}"
    if not one_line_error(code, err):
        return name, False, f"exit {code}, stderr {err.strip()[:400]!r}"
    msg = err.strip()
    if snapshot and allocator != "pytorch" and not empty:
        # Refused for its allocator, or first for its missing dataflow (policies other than keep).
        seed = "cannot start from a recorded state" in msg
        return name, seed or (not forced and policy != "keep" and "needs the trace's dataflow" in msg), msg
    return name, True, msg


def main():
    if not os.path.isdir(SHARED):
        print("1..0 # SKIP ../shared/traces is absent")
        return 0
    policies = list_names("policies")
    allocators = list_names("allocators")
    tmp = tempfile.mkdtemp(prefix="coopsim-imported-")
    results = []
    jobs = []
    try:
        for label, imp in sources(tmp):
            out = os.path.join(tmp, f"t{len(results)}.jsonl.gz")
            code, _, err = run(["import", *imp, "-o", out])
            if code != 0:
                # An importer may refuse a file (one line, no output left); it must not crash.
                ok = one_line_error(code, err) and not os.path.exists(out)
                results.append((f"{label}: import refused", ok, err.strip()[:400]))
                continue
            code, vout, verr = run(["validate", out])
            if code != 0:
                results.append((f"{label}: imported trace validates", False, verr.strip()[:400]))
                continue
            summary = parse_validate(vout)
            results.append((f"{label}: imported trace validates", True, ""))
            snapshot = imp[0] == "torch-snapshot"
            no_dataflow = summary["op_inputs"] == 0 and summary["accesses"] == 0
            # A snapshot also runs from an empty allocator (--initial-state empty), where every
            # allocator can take it.
            for empty in ([False, True] if snapshot else [False]):
                for policy in policies:
                    for allocator in allocators:
                        for budget in BUDGETS:
                            jobs.append((label, out, policy, allocator, budget, snapshot, False, empty, no_dataflow,
                                         summary["peak_live_bytes"]))
                            if no_dataflow and policy != "keep":
                                jobs.append((label, out, policy, allocator, budget, snapshot, True, empty,
                                             no_dataflow, summary["peak_live_bytes"]))
        if SANITIZED:
            # The sanitizer pass looks for memory errors and undefined behaviour, and every run is
            # several times slower under it: every file is still imported and validated, and a
            # fixed pseudo-random quarter of the runs (by the CRC of the run's name) goes on.
            jobs = [j for j in jobs if zlib.crc32(repr((j[0], *j[2:5], *j[6:8])).encode()) % 4 == 0]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            futures = [pool.submit(check_run, *j[:8]) for j in jobs]
            for j, f in zip(jobs, futures):
                name, ok, detail = f.result()
                label, _, policy, allocator, budget, snapshot, forced, empty, no_dataflow, peak = j
                seed_refused = snapshot and allocator != "pytorch" and not empty
                # Pin the refusals to their reason where the reason is known in advance.
                if ok and peak == 0:
                    ok = "peak live bytes are 0" in detail
                elif ok and no_dataflow and policy != "keep" and not forced and not seed_refused:
                    ok = "needs the trace's dataflow" in detail
                results.append((name, ok, detail))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{len(results)}")
    failed = 0
    for i, (name, ok, detail) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}")
        if not ok:
            failed += 1
            print(f"  # {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
